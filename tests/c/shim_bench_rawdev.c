/* What the shim adds to a write to a raw block device (scripts/bench-rawdev.sh).
 *
 *   shim_bench_rawdev TARGET same|alternate|file COUNT [refused]
 *
 * same: COUNT O_DIRECT 4 KiB pwrites to the block device TARGET from one
 * call path (its stream's hint is on the node after the first: no change);
 * alternate: from two call paths in turn (mapped to two streams: the hint
 * changes at every write); file: COUNT buffered 4 KiB pwrites to the
 * regular file TARGET from one call path (the regular-file cost to compare
 * with). Writes cycle over the first 4 MiB. With `refused`, every write is
 * one the kernel refuses at once (a misaligned buffer: EINVAL before any
 * I/O; a file is opened O_DIRECT for it), so the time is the shim's work
 * and the syscall, without the device. Prints "<mean> <best>": ns per write
 * over the whole loop, and the fastest 1024-write block's mean. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BLK 4096
#define SPAN 1024 /* blocks: 4 MiB */

static unsigned char *buf;
static int refused;
/* Distinct side effects keep the two paths' functions apart (no
 * identical-code folding). */
static volatile int tables, journals;

static void check(ssize_t n) {
    if (refused ? !(n < 0 && errno == EINVAL) : n != BLK) {
        perror("pwrite");
        exit(1);
    }
}

__attribute__((noinline)) static void put_a(int fd, off_t at) {
    tables++;
    check(pwrite(fd, buf + refused, BLK, at));
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void put_b(int fd, off_t at) {
    journals++;
    check(pwrite(fd, buf + refused, BLK, at));
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void table(int fd, off_t at) {
    tables++;
    put_a(fd, at);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void journal(int fd, off_t at) {
    journals++;
    put_b(fd, at);
    __asm__ volatile("" ::: "memory");
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: %s TARGET same|alternate|file COUNT [refused]\n", argv[0]);
        return 2;
    }
    const char *mode = argv[2];
    int alternate = strcmp(mode, "alternate") == 0;
    int file = strcmp(mode, "file") == 0;
    if (!alternate && !file && strcmp(mode, "same") != 0) {
        fprintf(stderr, "%s: mode must be same, alternate or file\n", argv[0]);
        return 2;
    }
    long count = strtol(argv[3], NULL, 10);
    refused = argc == 5 && strcmp(argv[4], "refused") == 0;
    if (posix_memalign((void **)&buf, BLK, 2 * BLK) != 0)
        return 1;
    memset(buf, 'r', 2 * BLK);
    int flags = O_WRONLY | (file && !refused ? O_CREAT : O_DIRECT);
    int fd = open(argv[1], flags, 0644);
    if (fd < 0) {
        perror(argv[1]);
        return 1;
    }
    double best = 1e30, t0 = now(), tb = t0;
    for (long i = 0; i < count; i++) {
        off_t at = (off_t)(i % SPAN) * BLK;
        if (alternate && (i & 1))
            journal(fd, at);
        else
            table(fd, at);
        if ((i & 1023) == 1023) {
            double t = now();
            if ((t - tb) / 1024 < best)
                best = (t - tb) / 1024;
            tb = t;
        }
    }
    double mean = (now() - t0) / (double)count;
    printf("%.1f %.1f\n", mean, best < 1e29 ? best : mean);
    return close(fd) == 0 ? 0 : 1;
}
