/* execl, execlp, execle: glibc implements them with its internal
 * __execve, which the shim cannot interpose, so a process that exec'd
 * through them lost the events still pending in its batches, silently.
 * These wrappers (reached by a jmp from the exported execl, execlp and
 * execle in hooks/mod.rs) build the argument
 * vector the way glibc does and call execv, execvp or execve, which
 * resolve to the shim's own hooks (flush, then the real call). */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>


/* Counts the arguments after `arg` up to the terminating NULL. */
static ptrdiff_t count_args(va_list ap) {
    ptrdiff_t n = 1;
    while (va_arg(ap, char *) != NULL) {
        if (n == INT_MAX) return -1;
        n++;
    }
    return n;
}

#define COLLECT(argv, n, arg, ap)                  \
    do {                                           \
        argv[0] = (char *)(arg);                   \
        for (ptrdiff_t i = 1; i <= (n); i++)       \
            argv[i] = va_arg(ap, char *);          \
    } while (0)

int pcstream_c_execl(const char *path, const char *arg, ...) {
    va_list ap;
    va_start(ap, arg);
    ptrdiff_t n = count_args(ap);
    va_end(ap);
    if (n < 0) { errno = E2BIG; return -1; }
    char *argv[n + 1];
    va_start(ap, arg);
    COLLECT(argv, n, arg, ap);
    va_end(ap);
    return execv(path, argv);
}

int pcstream_c_execlp(const char *file, const char *arg, ...) {
    va_list ap;
    va_start(ap, arg);
    ptrdiff_t n = count_args(ap);
    va_end(ap);
    if (n < 0) { errno = E2BIG; return -1; }
    char *argv[n + 1];
    va_start(ap, arg);
    COLLECT(argv, n, arg, ap);
    va_end(ap);
    return execvp(file, argv);
}

int pcstream_c_execle(const char *path, const char *arg, ...) {
    va_list ap;
    va_start(ap, arg);
    ptrdiff_t n = count_args(ap);
    va_end(ap);
    if (n < 0) { errno = E2BIG; return -1; }
    char *argv[n + 1];
    va_start(ap, arg);
    COLLECT(argv, n, arg, ap);
    char **envp = va_arg(ap, char **);
    va_end(ap);
    return execve(path, argv, envp);
}
