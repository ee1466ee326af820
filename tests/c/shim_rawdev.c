/* O_DIRECT writes to a raw block device through three call paths with
 * three lifetimes (a journal ring, a long-lived table, quickly freed
 * scratch), as a program on an FDP namespace would make them; used by
 * tests/tests/shim_rawdev.rs on a loop device.
 *
 *   shim_rawdev DEV ROUNDS [quiet]
 *
 * Layout of DEV (4 KiB blocks): journal ring in blocks 0..7 (overwritten
 * round after round), table in blocks 64..94 (each written once every 31
 * rounds: a longer life than the journal's), scratch in
 * blocks 32..39 (written, then deallocated: fallocate(PUNCH_HOLE) in even
 * rounds, ioctl(BLKDISCARD) in odd ones).
 * The journal writes with write() after lseek, the table with pwrite(),
 * the scratch with pwritev(). After each write the program prints
 * "<path> hint <F_GET_RW_HINT of DEV>" (not with `quiet`: then the output
 * is what the writes did, identical with and without the shim).
 *
 * Then the O_DIRECT alignment errors: a misaligned buffer, offset and
 * length, each printed as "misaligned-<what> rc=<rc> errno=<errno>", and an
 * aligned write; ioctls the shim looks at or passes on, with their results
 * ("ioctl-<what> rc=<rc> errno=<errno>"); and finally "sum <hash>" of the
 * device's first 96 blocks
 * read back with O_DIRECT (what the writes left there). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef F_GET_RW_HINT
#define F_GET_RW_HINT (1024 + 11)
#endif

#define BLK 4096

static unsigned char *buf;
static int quiet;

static void fill(int path, int round) {
    for (int i = 0; i < BLK; i++)
        buf[i] = (unsigned char)(path * 31 + round * 7 + i);
}

static void show(const char *what, int fd) {
    uint64_t h = 99;
    if (quiet)
        return;
    if (fcntl(fd, F_GET_RW_HINT, &h) != 0) {
        perror("F_GET_RW_HINT");
        exit(1);
    }
    printf("%s hint %llu\n", what, (unsigned long long)h);
}

__attribute__((noinline)) static void journal_append(int fd, int round) {
    fill(1, round);
    if (lseek(fd, (off_t)(round % 8) * BLK, SEEK_SET) < 0) {
        perror("lseek");
        exit(1);
    }
    if (write(fd, buf, BLK) != BLK) {
        perror("journal write");
        exit(1);
    }
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void table_store(int fd, int round) {
    fill(2, round);
    if (pwrite(fd, buf, BLK, (off_t)(64 + round % 31) * BLK) != BLK) {
        perror("table pwrite");
        exit(1);
    }
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void scratch_spill(int fd, int round) {
    fill(3, round);
    struct iovec v = {buf, BLK};
    off_t at = (off_t)(32 + round % 8) * BLK;
    if (pwritev(fd, &v, 1, at) != BLK) {
        perror("scratch pwritev");
        exit(1);
    }
    /* Freed at once: deallocated (a zeroing punch on a loop device). */
    uint64_t range[2] = {(uint64_t)at, BLK};
    if (round % 2 == 0 ? fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, at, BLK)
                       : ioctl(fd, BLKDISCARD, range)) {
        perror("scratch deallocate");
        exit(1);
    }
    __asm__ volatile("" ::: "memory");
}

static void misaligned(const char *what, int fd, const void *p, size_t n, off_t at) {
    errno = 0;
    ssize_t r = pwrite(fd, p, n, at);
    printf("misaligned-%s rc=%zd errno=%d\n", what, r, r < 0 ? errno : 0);
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: %s DEV ROUNDS [quiet]\n", argv[0]);
        return 2;
    }
    quiet = argc == 4 && strcmp(argv[3], "quiet") == 0;
    int rounds = atoi(argv[2]);
    int fd = open(argv[1], O_RDWR | O_DIRECT);
    if (fd < 0) {
        perror(argv[1]);
        return 1;
    }
    if (posix_memalign((void **)&buf, BLK, 2 * BLK) != 0)
        return 1;
    for (int r = 0; r < rounds; r++) {
        journal_append(fd, r);
        show("journal", fd);
        table_store(fd, r);
        show("table", fd);
        scratch_spill(fd, r);
        show("scratch", fd);
    }
    fill(9, 0);
    misaligned("buffer", fd, buf + 1, BLK, 0);
    misaligned("offset", fd, buf, BLK, 1);
    misaligned("length", fd, buf, 100, 0);
    misaligned("none", fd, buf, BLK, 95 * BLK);
    uint64_t size = 0, bad[2] = {1, BLK};
    errno = 0;
    int r = ioctl(fd, BLKGETSIZE64, &size);
    printf("ioctl-size rc=%d errno=%d size=%llu\n", r, r ? errno : 0, (unsigned long long)size);
    errno = 0;
    r = ioctl(fd, BLKDISCARD, bad); /* not aligned to the sector */
    printf("ioctl-discard-misaligned rc=%d errno=%d\n", r, r ? errno : 0);
    errno = 0;
    r = ioctl(fd, BLKDISCARD, (void *)8);
    printf("ioctl-discard-fault rc=%d errno=%d\n", r, r ? errno : 0);
    errno = 0;
    r = ioctl(-1, BLKDISCARD, bad);
    printf("ioctl-discard-badfd rc=%d errno=%d\n", r, r ? errno : 0);
    uint64_t h = 1469598103934665603ull;
    for (int b = 0; b < 96; b++) {
        if (pread(fd, buf, BLK, (off_t)b * BLK) != BLK) {
            perror("pread");
            return 1;
        }
        for (int i = 0; i < BLK; i++)
            h = (h ^ buf[i]) * 1099511628211ull;
    }
    printf("sum %016llx\n", (unsigned long long)h);
    return close(fd) == 0 ? 0 : 1;
}
