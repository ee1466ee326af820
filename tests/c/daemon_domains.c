/* Three call paths with three lifetimes, writing into each directory given:
 *
 *   daemon_domains ROUNDS DIR...
 *
 * Every round, in every DIR: path_short writes a one-page file and unlinks
 * it at once; path_medium rewrites one page of the 16-page file DIR/medium;
 * path_long rewrites one page of the 256-page file DIR/long. After the last
 * round it prints, per DIR, the F_GET_RW_HINT each path's file carried
 * right after its write: "DIR short H medium H long H".
 * Used by tests/tests/daemon_domains.rs (learning domains: the same paths
 * learnt apart per file system). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef F_GET_RW_HINT
#define F_GET_RW_HINT (1024 + 11)
#endif

static char block[4096];

static uint64_t hint_of(int fd) {
    uint64_t h = 0;
    if (fcntl(fd, F_GET_RW_HINT, &h) != 0)
        return 99;
    return h;
}

__attribute__((noinline)) static void sink(int fd, off_t off) {
    if (pwrite(fd, block, sizeof block, off) != (ssize_t)sizeof block) {
        perror("pwrite");
        exit(1);
    }
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static uint64_t path_short(const char *dir, long r) {
    char p[4096];
    snprintf(p, sizeof p, "%s/tmp.%ld", dir, r);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(p);
        exit(1);
    }
    sink(fd, 0);
    uint64_t h = hint_of(fd);
    close(fd);
    unlink(p);
    __asm__ volatile("" ::: "memory");
    return h;
}

__attribute__((noinline)) static uint64_t path_medium(int fd, long r) {
    sink(fd, (off_t)(r % 16) * 4096);
    uint64_t h = hint_of(fd);
    __asm__ volatile("" ::: "memory");
    return h;
}

__attribute__((noinline)) static uint64_t path_long(int fd, long r) {
    sink(fd, (off_t)(r % 256) * 4096);
    uint64_t h = hint_of(fd);
    __asm__ volatile("" ::: "memory");
    return h;
}

static int open_in(const char *dir, const char *name) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT, 0644);
    if (fd < 0) {
        perror(p);
        exit(1);
    }
    return fd;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: daemon_domains ROUNDS DIR...\n");
        return 2;
    }
    long rounds = atol(argv[1]);
    int n = argc - 2;
    int med[16], lng[16];
    uint64_t h[16][3];
    if (n > 16)
        n = 16;
    memset(block, 'd', sizeof block);
    for (int d = 0; d < n; d++) {
        med[d] = open_in(argv[2 + d], "medium");
        lng[d] = open_in(argv[2 + d], "long");
    }
    for (long r = 0; r < rounds; r++) {
        for (int d = 0; d < n; d++) {
            h[d][0] = path_short(argv[2 + d], r);
            h[d][1] = path_medium(med[d], r);
            h[d][2] = path_long(lng[d], r);
        }
    }
    for (int d = 0; d < n; d++) {
        printf("%s short %llu medium %llu long %llu\n", argv[2 + d], (unsigned long long)h[d][0],
               (unsigned long long)h[d][1], (unsigned long long)h[d][2]);
        close(med[d]);
        close(lng[d]);
    }
    return 0;
}
