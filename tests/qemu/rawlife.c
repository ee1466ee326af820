/* Guest helper for bench/fdp.sh: a program writing a raw namespace with
 * O_DIRECT through three call paths of three lifetimes, as a storage
 * engine on a raw device would:
 *   journal_write  a ring at the start of the device (data lives one ring)
 *   table_write    tables written in turn over the middle of the device
 *                  (data lives until the region wraps: the longest)
 *   scratch_write  a scratch region written, then deallocated (BLKDISCARD)
 *                  at the next round: the shortest, freed by TRIM
 *   rawlife DEV ROUNDS JOURNAL_MIB SCRATCH_MIB PER_ROUND_MIB
 * Each round writes PER_ROUND_MIB through each path, the paths taking turns
 * every 128 KiB write. The
 * program sets no hint: the shim (or nothing) places the writes.
 * Prints one line and exits 0, or names the failing call and exits 1. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define IO (128u << 10)
#define MiB (1ull << 20)

static int fd;
static void *buf;

static void die(const char *what) {
  fprintf(stderr, "rawlife: %s: %s\n", what, strerror(errno));
  exit(1);
}

static __attribute__((noinline)) void put(uint64_t off, uint64_t len) {
  for (uint64_t done = 0; done < len; done += IO)
    if (pwrite(fd, buf, IO, (off_t)(off + done)) != (ssize_t)IO) die("pwrite");
}

static __attribute__((noinline)) void journal_write(uint64_t *pos, uint64_t ring) {
  put(*pos, IO);
  *pos = (*pos + IO) % ring;
  __asm__ volatile("" ::: "memory"); /* no tail call: keep this frame */
}

static __attribute__((noinline)) void table_write(uint64_t *pos, uint64_t base, uint64_t size) {
  put(base + *pos, IO);
  *pos = (*pos + IO) % size;
  __asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void scratch_write(uint64_t off) {
  put(off, IO);
  __asm__ volatile("" ::: "memory");
}

/* The previous round's scratch is freed. */
static void scratch_free(uint64_t off, uint64_t len) {
  uint64_t r[2] = {off, len};
  if (ioctl(fd, BLKDISCARD, r) != 0) die("BLKDISCARD");
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: rawlife DEV ROUNDS JOURNAL_MIB SCRATCH_MIB PER_ROUND_MIB\n");
    return 2;
  }
  fd = open(argv[1], O_RDWR | O_DIRECT);
  if (fd < 0) die(argv[1]);
  uint64_t dev;
  if (ioctl(fd, BLKGETSIZE64, &dev) != 0) die("BLKGETSIZE64");
  int rounds = atoi(argv[2]);
  uint64_t ring = strtoull(argv[3], 0, 10) * MiB, scratch = strtoull(argv[4], 0, 10) * MiB;
  uint64_t per = strtoull(argv[5], 0, 10) * MiB;
  if (ring + scratch + per > dev || per % IO || ring % IO || scratch < per) {
    fprintf(stderr, "rawlife: regions do not fit a %llu-byte device\n", (unsigned long long)dev);
    return 2;
  }
  uint64_t tbase = ring, tsize = (dev - ring - scratch) / per * per, sbase = dev - scratch;
  if (posix_memalign(&buf, 4096, IO)) die("posix_memalign");
  memset(buf, 0x5a, IO);
  uint64_t jpos = 0, tpos = 0, slots = scratch / per;
  /* The three paths take turns every 128 KiB, as concurrent activities
   * do: without placement, every reclaim unit holds all three lifetimes. */
  for (int r = 0; r < rounds; r++) {
    uint64_t soff = sbase + (r % slots) * per;
    for (uint64_t done = 0; done < per; done += IO) {
      journal_write(&jpos, ring);
      table_write(&tpos, tbase, tsize);
      scratch_write(soff + done);
    }
    if (r > 0) scratch_free(sbase + ((r - 1) % slots) * per, per);
  }
  printf("rawlife: %d rounds of %llu MiB per path on a %llu MiB device\n", rounds,
         (unsigned long long)(per / MiB), (unsigned long long)(dev / MiB));
  return 0;
}
