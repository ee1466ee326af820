/* Shallow call paths: write()s issued directly from main (the call path
 * ends in libc's and the program's start-up code: __libc_start_call_main,
 * __libc_start_main, _start) and directly from a thread's start routine
 * (it ends in start_thread and clone3). Each runs of 50 repeats of its
 * path are separated by one write through a helper function (another call
 * path, so a thread's remembered path is replaced and found again). Every
 * write is a pwrite() past a gap, so each is its own trace event.
 * Files: DIR/main, DIR/thread (the shallow paths), DIR/helper-main,
 * DIR/helper-thread (the helper from each). Usage: shim_shapes DIR */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define RUNS 4
#define REPEATS 50

static char buf[4096];
static int fd_thread, fd_helper_thread;

__attribute__((noinline)) static void helper(int fd, off_t at) {
    if (pwrite(fd, buf, sizeof buf, at) != (ssize_t)sizeof buf) abort();
    __asm__ volatile("" ::: "memory");
}

static void *start(void *arg) {
    (void)arg;
    for (int r = 0; r < RUNS; r++) {
        for (int i = 0; i < REPEATS; i++) {
            off_t at = (off_t)(r * REPEATS + i) * 2 * sizeof buf;
            if (pwrite(fd_thread, buf, sizeof buf, at) != (ssize_t)sizeof buf) abort();
        }
        helper(fd_helper_thread, (off_t)r * 2 * sizeof buf);
    }
    return NULL;
}

static int open_in(const char *dir, const char *name) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror(p); exit(1); }
    return fd;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    int fd_main = open_in(argv[1], "main");
    int fd_helper_main = open_in(argv[1], "helper-main");
    fd_thread = open_in(argv[1], "thread");
    fd_helper_thread = open_in(argv[1], "helper-thread");
    pthread_t t;
    if (pthread_create(&t, NULL, start, NULL) != 0) return 1;
    for (int r = 0; r < RUNS; r++) {
        for (int i = 0; i < REPEATS; i++) {
            off_t at = (off_t)(r * REPEATS + i) * 2 * sizeof buf;
            if (pwrite(fd_main, buf, sizeof buf, at) != (ssize_t)sizeof buf) abort();
        }
        helper(fd_helper_main, (off_t)r * 2 * sizeof buf);
    }
    pthread_join(t, NULL);
    return 0;
}
