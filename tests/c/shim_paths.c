/* Four distinct call paths that all end in the same write() call site.
 * Used by tests/tests/shim_signatures.rs and shim_hints.rs.
 *
 *   shim_paths OUT            all four paths write 4 KiB blocks into OUT
 *   shim_paths O1 O2 O3 O4    path i writes into Oi, then the program prints
 *                             "hint <i> <F_GET_RW_HINT of Oi>" for each file
 *
 * Paths 2 and 3 share the helper write_block(), so they differ only in the
 * third frame: the signature must look deeper than the innermost caller. */
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

/* The one write() call site. The empty asm after the call keeps it from
 * being a tail call (each frame stays on the stack). */
__attribute__((noinline)) static void sink(int fd) {
    if (write(fd, block, sizeof block) != (ssize_t)sizeof block) {
        perror("write");
        exit(1);
    }
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void write_block(int fd) {
    sink(fd);
    __asm__ volatile("" ::: "memory");
}

static volatile int appends;

__attribute__((noinline)) static void wal_append(int fd) {
    appends++;
    sink(fd);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void flush_memtable(int fd) {
    write_block(fd);
    __asm__ volatile("" ::: "memory");
}

static volatile int compactions;

__attribute__((noinline)) static void compact(int fd) {
    compactions++;
    write_block(fd);
    __asm__ volatile("" ::: "memory");
}

static volatile int spills;

__attribute__((noinline)) static void temp_spill(int fd) {
    spills++; /* different code from wal_append (no identical-code folding) */
    sink(fd);
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
    if (argc != 2 && argc != 5) {
        fprintf(stderr, "usage: %s OUT | O1 O2 O3 O4\n", argv[0]);
        return 2;
    }
    memset(block, 'x', sizeof block);
    int fds[4];
    for (int i = 0; i < 4; i++) {
        const char *path = argc == 2 ? argv[1] : argv[1 + i];
        fds[i] = (argc == 2 && i > 0) ? fds[0] : open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fds[i] < 0) {
            perror(path);
            return 1;
        }
    }
    for (int round = 0; round < 8; round++) {
        wal_append(fds[0]);
        flush_memtable(fds[1]);
        compact(fds[2]);
        temp_spill(fds[3]);
    }
    if (argc == 5) {
        for (int i = 0; i < 4; i++) {
            uint64_t h = 99;
            if (fcntl(fds[i], F_GET_RW_HINT, &h) != 0) h = 99;
            printf("hint %d %llu\n", i + 1, (unsigned long long)h);
        }
    }
    for (int i = 0; i < (argc == 2 ? 1 : 4); i++) close(fds[i]);
    return 0;
}
