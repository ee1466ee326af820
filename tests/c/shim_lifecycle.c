/* File and process life cycles the shim must follow.
 *
 *   shim_lifecycle reuse DIR N   N rounds of: create DIR/f<i>, write 100
 *                                bytes, close, unlink; then the same with
 *                                DIR/g<i> opened by a raw openat syscall (a
 *                                descriptor the shim did not see opened).
 *                                Prints "<name> <ino>" per file, so the test
 *                                can tell that inode numbers were reused.
 *   shim_lifecycle exit DIR      a fork child writes DIR/by_exit then
 *                                _exit()s, another writes DIR/by_Exit then
 *                                _Exit()s, and a vfork child _exit()s
 *                                straight away while the parent has unsent
 *                                events; the parent writes DIR/parent before
 *                                and after, and returns from main. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static char buf[100];

static void put(int fd, const char *what) {
    if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) {
        perror(what);
        exit(1);
    }
}

static int create(const char *dir, const char *name, int raw) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = raw ? (int)syscall(SYS_openat, AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, 0644)
                 : open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0) {
        perror(path);
        exit(1);
    }
    return fd;
}

static void reuse(const char *dir, int n) {
    for (int raw = 0; raw < 2; raw++) {
        for (int i = 0; i < n; i++) {
            char name[32], path[4200];
            snprintf(name, sizeof name, "%c%d", raw ? 'g' : 'f', i);
            int fd = create(dir, name, raw);
            put(fd, name);
            struct stat st;
            fstat(fd, &st);
            close(fd);
            snprintf(path, sizeof path, "%s/%s", dir, name);
            if (unlink(path) != 0) {
                perror(path);
                exit(1);
            }
            printf("%s %lu\n", name, (unsigned long)st.st_ino);
        }
    }
}

static void child_writes(const char *dir, const char *name, int upper) {
    pid_t p = fork();
    if (p < 0) {
        perror("fork");
        exit(1);
    }
    if (p == 0) {
        int fd = create(dir, name, 0);
        put(fd, name);
        put(fd, name);
        /* no close: nothing but _exit may flush */
        if (upper)
            _Exit(0);
        _exit(0);
    }
    int st;
    if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "%s child failed\n", name);
        exit(1);
    }
}

static void lifecycle_exit(const char *dir) {
    int fd = create(dir, "parent", 0);
    put(fd, "parent");
    child_writes(dir, "by_exit", 0);
    child_writes(dir, "by_Exit", 1);
    put(fd, "parent"); /* pending in the parent's batch across the vfork */
    pid_t p = vfork();
    if (p == 0)
        _exit(7);
    int st;
    if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 7) {
        fprintf(stderr, "vfork child failed\n");
        exit(1);
    }
    put(fd, "parent");
    printf("done\n");
}

int main(int argc, char **argv) {
    memset(buf, 'x', sizeof buf);
    if (argc == 4 && strcmp(argv[1], "reuse") == 0)
        reuse(argv[2], atoi(argv[3]));
    else if (argc == 3 && strcmp(argv[1], "exit") == 0)
        lifecycle_exit(argv[2]);
    else {
        fprintf(stderr, "usage: shim_lifecycle reuse DIR N | exit DIR\n");
        return 2;
    }
    return 0;
}
