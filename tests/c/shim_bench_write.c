/* End-to-end shim overhead: a loop of write() calls of SIZE bytes to FILE
 * (rewinding every 1024 writes so the file stays small), through 3 nested
 * calls so the shim has a realistic call path to capture. The loop runs in
 * blocks of 1024 writes; the program prints "<mean> <best>": the mean
 * nanoseconds per write over the whole loop, and the fastest block's mean
 * (a shared, noisy machine inflates the mean; the fastest block is what the
 * code costs). With "scattered", every write is a pwrite() two sizes past
 * the previous one, so no two writes continue each other (the shim reports
 * each as its own event). Usage: shim_bench_write FILE SIZE COUNT [scattered] */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char *buf;
static size_t size;
static int scattered;
static off_t at;

__attribute__((noinline)) static void put(int fd) {
    ssize_t n;
    if (scattered) {
        n = pwrite(fd, buf, size, at);
        at += 2 * (off_t)size;
    } else {
        n = write(fd, buf, size);
    }
    if (n != (ssize_t)size) { perror("write"); exit(1); }
    __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void record(int fd) { put(fd); __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) static void append_log(int fd) { record(fd); __asm__ volatile("" ::: "memory"); }

int main(int argc, char **argv) {
    if (argc != 4 && !(argc == 5 && strcmp(argv[4], "scattered") == 0)) {
        fprintf(stderr, "usage: %s FILE SIZE COUNT [scattered]\n", argv[0]);
        return 2;
    }
    scattered = argc == 5;
    size = strtoul(argv[2], NULL, 10);
    long count = strtol(argv[3], NULL, 10);
    buf = malloc(size);
    memset(buf, 'b', size);
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror(argv[1]); return 1; }
    double best = 1e30;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long done = 0; done < count; done += 1024) {
        struct timespec a, b;
        lseek(fd, 0, SEEK_SET);
        at = 0;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (int i = 0; i < 1024; i++) append_log(fd);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 1024;
        if (ns < best) best = ns;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double blocks = (double)((count + 1023) / 1024 * 1024);
    double mean = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / blocks;
    printf("%.1f %.1f\n", mean, best);
    close(fd);
    unlink(argv[1]);
    return 0;
}
