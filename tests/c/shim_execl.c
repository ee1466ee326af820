/* Writes 4 KiB to FILE and, without closing it, execs /bin/true with
 * MODE = execl, execlp or execle (glibc's own versions use its internal
 * __execve). A failing exec first: it must return -1 with ENOENT and the
 * arguments intact. Usage: shim_execl FILE MODE */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s FILE MODE\n", argv[0]); return 2; }
    static char buf[4096];
    memset(buf, 'x', sizeof buf);
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) { perror(argv[1]); return 1; }
    const char *m = argv[2];
    int r;
    if (!strcmp(m, "execl")) {
        r = execl("/nonexistent/x", "x", "a", (char *)0);
        if (r != -1 || errno != ENOENT) { fprintf(stderr, "execl: %d %d\n", r, errno); return 1; }
        execl("/bin/true", "true", "a", "b", (char *)0);
    } else if (!strcmp(m, "execlp")) {
        r = execlp("no-such-program-pcstream", "x", (char *)0);
        if (r != -1 || errno != ENOENT) { fprintf(stderr, "execlp: %d %d\n", r, errno); return 1; }
        execlp("true", "true", (char *)0);
    } else {
        r = execle("/nonexistent/x", "x", (char *)0, environ);
        if (r != -1 || errno != ENOENT) { fprintf(stderr, "execle: %d %d\n", r, errno); return 1; }
        execle("/bin/true", "true", (char *)0, environ);
    }
    perror("exec");
    return 127;
}
