/* Guest helper for tests/qemu and bench/fdp.sh: files written through
 * distinct call paths with distinct lifetimes, for a file system (F2FS)
 * whose data temperatures follow the files' write hints.
 *   lifewrite hint FILE HINT KIB [falloc|syncs]
 *        write KIB to a new FILE after F_SET_RW_HINT = HINT ("-": none),
 *        fsync; the hint → temperature → RUH mapping ("falloc":
 *        fallocate(KEEP_SIZE) the whole length first, as RocksDB does;
 *        "syncs": fdatasync after every 64 KiB write, as a log does)
 *   lifewrite paths DIR ROUNDS HOT_KIB COLD_KIB WINDOW
 *        ROUNDS rounds; in each, hot_path() writes DIR/h.<round> and
 *        unlinks the previous round's (its data lives one round), and
 *        cold_path() writes DIR/c.<round> and unlinks DIR/c.<round-WINDOW>
 *        (its data lives WINDOW rounds; WINDOW 0: every c.* file is kept).
 *        The last round's h.* and the last WINDOW c.* files stay. Two call
 *        paths, two lifetimes WINDOW× apart: what pcstreamd learns.
 *   lifewrite gethint FILE
 *        print FILE's write hint (F_GET_RW_HINT), as the shim left it
 * No hint is set by this program in `paths` mode: the shim sets them.
 * Prints one line and exits 0, or names the failing call and exits 1. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef F_SET_RW_HINT
#define F_SET_RW_HINT 1036
#endif
#ifndef F_GET_RW_HINT
#define F_GET_RW_HINT 1035
#endif

static char buf[64 << 10];

static void die(const char *what) {
  fprintf(stderr, "lifewrite: %s: %s\n", what, strerror(errno));
  exit(1);
}

/* Writes KIB of a round-dependent pattern to a new file PATH (64 KiB
 * writes) and fsyncs it. Every call path below calls it, so the
 * distinguishing frames are its callers'. */
static __attribute__((noinline)) void put_file(const char *path, uint64_t kib, int seed) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) die(path);
  memset(buf, 'a' + seed % 26, sizeof buf);
  for (uint64_t done = 0; done < kib; done += 64) {
    size_t n = kib - done < 64 ? (kib - done) << 10 : sizeof buf;
    if (write(fd, buf, n) != (ssize_t)n) die("write");
  }
  if (fsync(fd) != 0) die("fsync");
  if (close(fd) != 0) die("close");
}

static __attribute__((noinline)) void hot_path(const char *dir, int round, uint64_t kib) {
  char p[4096];
  snprintf(p, sizeof p, "%s/h.%d", dir, round);
  put_file(p, kib, round);
  if (round > 0) {
    snprintf(p, sizeof p, "%s/h.%d", dir, round - 1);
    if (unlink(p) != 0) die(p);
  }
  __asm__ volatile("" ::: "memory"); /* no tail call: keep this frame */
}

static __attribute__((noinline)) void cold_path(const char *dir, int round, uint64_t kib, int window) {
  char p[4096];
  snprintf(p, sizeof p, "%s/c.%d", dir, round);
  put_file(p, kib, round + 13);
  if (window > 0 && round >= window) {
    snprintf(p, sizeof p, "%s/c.%d", dir, round - window);
    if (unlink(p) != 0) die(p);
  }
  __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
  if (argc >= 5 && !strcmp(argv[1], "hint")) {
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) die(argv[2]);
    if (strcmp(argv[3], "-")) {
      uint64_t h = strtoull(argv[3], 0, 10);
      if (fcntl(fd, F_SET_RW_HINT, &h) != 0) die("F_SET_RW_HINT");
    }
    uint64_t kib = strtoull(argv[4], 0, 10);
    /* "falloc": preallocate beyond the end first, as RocksDB does. */
    if (argc >= 6 && !strcmp(argv[5], "falloc") && fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)kib << 10) != 0)
      die("fallocate");
    /* "syncs": fdatasync after every 64 KiB write, as a log does. */
    int syncs = argc >= 6 && !strcmp(argv[5], "syncs");
    memset(buf, 0x5a, sizeof buf);
    for (uint64_t done = 0; done < kib; done += 64) {
      if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) die("write");
      if (syncs && fdatasync(fd) != 0) die("fdatasync");
    }
    if (fsync(fd) != 0) die("fsync");
    close(fd);
    printf("wrote %s KiB to %s with hint %s\n", argv[4], argv[2], argv[3]);
    return 0;
  }
  if (argc >= 3 && !strcmp(argv[1], "gethint")) {
    uint64_t h = 0;
    int fd = open(argv[2], O_RDONLY);
    if (fd < 0) die(argv[2]);
    if (fcntl(fd, F_GET_RW_HINT, &h) != 0) die("F_GET_RW_HINT");
    printf("%llu\n", (unsigned long long)h);
    return 0;
  }
  if (argc >= 7 && !strcmp(argv[1], "paths")) {
    const char *dir = argv[2];
    int rounds = atoi(argv[3]), window = atoi(argv[6]);
    uint64_t hot = strtoull(argv[4], 0, 10), cold = strtoull(argv[5], 0, 10);
    for (int r = 0; r < rounds; r++) {
      hot_path(dir, r, hot);
      cold_path(dir, r, cold, window);
    }
    printf("paths: %d rounds, hot %llu KiB, cold %llu KiB a round\n", rounds,
           (unsigned long long)hot, (unsigned long long)cold);
    return 0;
  }
  fprintf(stderr, "usage: lifewrite hint FILE HINT KIB | gethint FILE | paths DIR ROUNDS HOT_KIB COLD_KIB WINDOW\n");
  return 2;
}
