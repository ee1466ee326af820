/* The shim's cost per write on each shape of call path: COUNT write()s of
 * SIZE bytes to FILE (rewound every 1024 writes so the file stays small),
 * issued
 *   main    directly from main (the path ends in libc's start-up code);
 *   thread  directly from a thread's start routine (it ends in clone3);
 *   lib     through lib_write() in libshim_bench_lib.so, which the program
 *           links;
 *   deep    8 noinline functions deep (more frames than the shim keeps).
 * Prints nothing: scripts/bench-shim.sh times the whole process.
 * Usage: shim_bench_shapes SHAPE FILE SIZE COUNT */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ssize_t lib_write(int fd, const void *buf, size_t size);

static char *buf;
static size_t size;
static long count;
static int fd;

static void check(ssize_t n) {
    if (n != (ssize_t)size) { perror("write"); exit(1); }
}

static void *start(void *arg) {
    (void)arg;
    for (long i = 0; i < count; i++) {
        if ((i & 1023) == 0) lseek(fd, 0, SEEK_SET);
        check(write(fd, buf, size));
    }
    return NULL;
}

#define LEVEL(name, next) \
    __attribute__((noinline)) static void name(void) { next(); __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) static void d8(void) {
    check(write(fd, buf, size));
    __asm__ volatile("" ::: "memory");
}
LEVEL(d7, d8)
LEVEL(d6, d7)
LEVEL(d5, d6)
LEVEL(d4, d5)
LEVEL(d3, d4)
LEVEL(d2, d3)
LEVEL(d1, d2)

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s main|thread|lib|deep FILE SIZE COUNT\n", argv[0]);
        return 2;
    }
    const char *shape = argv[1];
    size = strtoul(argv[3], NULL, 10);
    count = strtol(argv[4], NULL, 10);
    buf = malloc(size);
    if (!buf) return 1;
    memset(buf, 'b', size);
    fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror(argv[2]); return 1; }
    if (strcmp(shape, "main") == 0) {
        for (long i = 0; i < count; i++) {
            if ((i & 1023) == 0) lseek(fd, 0, SEEK_SET);
            check(write(fd, buf, size));
        }
    } else if (strcmp(shape, "thread") == 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, start, NULL) != 0) return 1;
        pthread_join(t, NULL);
    } else if (strcmp(shape, "lib") == 0) {
        for (long i = 0; i < count; i++) {
            if ((i & 1023) == 0) lseek(fd, 0, SEEK_SET);
            check(lib_write(fd, buf, size));
        }
    } else if (strcmp(shape, "deep") == 0) {
        for (long i = 0; i < count; i++) {
            if ((i & 1023) == 0) lseek(fd, 0, SEEK_SET);
            d1();
        }
    } else {
        fprintf(stderr, "%s: unknown shape %s (main, thread, lib, deep)\n", argv[0], shape);
        return 2;
    }
    close(fd);
    unlink(argv[2]);
    return 0;
}
