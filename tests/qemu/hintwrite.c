/* Guest helper for tests/qemu: O_DIRECT writes to a raw NVMe namespace with
 * the device inode's write hint set (F_SET_RW_HINT), which Linux ≥ 6.16
 * turns into the write stream (FDP placement id hint−1).
 *   hintwrite seq DEV HINT OFFSET_KIB LEN_KIB      one hint, sequential 128 KiB writes
 *   hintwrite twotemp DEV HOT COLD LEN_KIB ROUNDS  fill, then 16 KiB random writes:
 *        90 % into the first eighth (hint HOT), 10 % elsewhere (hint COLD)
 * Prints one line and exits 0, or names the failing call and exits 1. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef F_SET_RW_HINT
#define F_SET_RW_HINT 1036
#endif

static int fd;
static uint64_t cur = 99;

static void die(const char *what) {
  fprintf(stderr, "hintwrite: %s: %s\n", what, strerror(errno));
  exit(1);
}

static void hint(uint64_t h) {
  if (h != cur && fcntl(fd, F_SET_RW_HINT, &h) != 0) die("F_SET_RW_HINT");
  cur = h;
}

static void put(void *buf, size_t len, uint64_t off) {
  if (pwrite(fd, buf, len, (off_t)off) != (ssize_t)len) die("pwrite");
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: hintwrite seq DEV HINT OFFSET_KIB LEN_KIB | twotemp DEV HOT COLD LEN_KIB ROUNDS\n");
    return 2;
  }
  fd = open(argv[2], O_RDWR | O_DIRECT);
  if (fd < 0) die(argv[2]);
  void *buf;
  if (posix_memalign(&buf, 4096, 128 << 10)) die("posix_memalign");
  memset(buf, 0x5a, 128 << 10);
  if (!strcmp(argv[1], "seq")) {
    uint64_t off = strtoull(argv[4], 0, 10) << 10, len = strtoull(argv[5], 0, 10) << 10;
    hint(strtoull(argv[3], 0, 10));
    for (uint64_t done = 0; done < len; done += 128 << 10) put(buf, 128 << 10, off + done);
    printf("wrote %llu bytes with hint %s\n", (unsigned long long)len, argv[3]);
  } else if (!strcmp(argv[1], "twotemp") && argc >= 7) {
    uint64_t hot = strtoull(argv[3], 0, 10), cold = strtoull(argv[4], 0, 10);
    /* "blocks" are 16 KiB units: few enough I/Os for a TCG guest. */
    uint64_t blocks = (strtoull(argv[5], 0, 10) << 10) / 16384, rounds = strtoull(argv[6], 0, 10);
    uint64_t hotn = blocks / 8, x = 0x9e3779b97f4a7c15ull;
    hint(cold);
    for (uint64_t b = 0; b < blocks; b += 8) put(buf, 128 << 10, b * 16384);
    for (uint64_t i = 0; i < blocks * rounds; i++) {
      x ^= x << 13; x ^= x >> 7; x ^= x << 17;
      if (x % 10 < 9) { hint(hot); put(buf, 16384, (x >> 8) % hotn * 16384); }
      else { hint(cold); put(buf, 16384, (hotn + (x >> 8) % (blocks - hotn)) * 16384); }
    }
    printf("two temperatures: %llu random writes\n", (unsigned long long)(blocks * rounds));
  } else {
    fprintf(stderr, "hintwrite: unknown mode %s\n", argv[1]);
    return 2;
  }
  uint64_t none = 0;
  fcntl(fd, F_SET_RW_HINT, &none);
  return 0;
}
