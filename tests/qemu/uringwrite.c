/* Guest helper for tests/qemu: O_DIRECT writes to a raw NVMe namespace
 * through io_uring with sqe->write_stream set (Linux >= 6.16; the field is
 * byte 44 of the SQE, written by hand so the host's older <linux/io_uring.h>
 * builds it). Raw syscalls, no liburing.
 *   uringwrite DEV STREAM OFFSET_KIB LEN_KIB   128 KiB writes, 8 in flight
 * Stream k is the kernel's k-th write stream = the namespace's k-th
 * placement id. Prints one line and exits 0, or names the failing call
 * (and the errno the kernel completed a write with) and exits 1. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define DEPTH 8
#define CHUNK (128u << 10)
#define SQE_WRITE_STREAM 44

static void die(const char *what, int err) {
  fprintf(stderr, "uringwrite: %s: %s\n", what, strerror(err));
  exit(1);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: uringwrite DEV STREAM OFFSET_KIB LEN_KIB\n");
    return 2;
  }
  unsigned stream = (unsigned)strtoul(argv[2], 0, 10);
  uint64_t off = strtoull(argv[3], 0, 10) << 10, len = strtoull(argv[4], 0, 10) << 10;
  if (stream == 0 || stream > 255 || len == 0 || len % 4096) {
    fprintf(stderr, "uringwrite: stream must be 1..255 and LEN_KIB a multiple of 4\n");
    return 2;
  }
  int fd = open(argv[1], O_RDWR | O_DIRECT);
  if (fd < 0) die(argv[1], errno);
  struct io_uring_params p;
  memset(&p, 0, sizeof p);
  int ring = (int)syscall(__NR_io_uring_setup, DEPTH, &p);
  if (ring < 0) die("io_uring_setup", errno);
  size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
  size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
  char *sq = mmap(0, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQ_RING);
  char *cq = mmap(0, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_CQ_RING);
  struct io_uring_sqe *sqes = mmap(0, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
                                   MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES);
  if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) die("mmap ring", errno);
  unsigned *sq_tail = (unsigned *)(sq + p.sq_off.tail), *sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
  unsigned *sq_array = (unsigned *)(sq + p.sq_off.array);
  unsigned *cq_head = (unsigned *)(cq + p.cq_off.head), *cq_tail = (unsigned *)(cq + p.cq_off.tail);
  unsigned *cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
  struct io_uring_cqe *cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
  void *buf;
  if (posix_memalign(&buf, 4096, CHUNK)) die("posix_memalign", ENOMEM);
  memset(buf, 0xc3, CHUNK);

  uint64_t next = 0, done = 0;
  unsigned inflight = 0;
  while (done < len) {
    unsigned queued = 0;
    while (inflight < DEPTH && next < len) {
      unsigned n = (unsigned)(len - next < CHUNK ? len - next : CHUNK);
      unsigned tail = __atomic_load_n(sq_tail, __ATOMIC_ACQUIRE);
      unsigned idx = tail & *sq_mask;
      struct io_uring_sqe *s = &sqes[idx];
      memset(s, 0, sizeof *s);
      s->opcode = IORING_OP_WRITE;
      s->fd = fd;
      s->off = off + next;
      s->addr = (uint64_t)(uintptr_t)buf;
      s->len = n;
      s->user_data = n;
      ((unsigned char *)s)[SQE_WRITE_STREAM] = (unsigned char)stream;
      sq_array[idx] = idx;
      __atomic_store_n(sq_tail, tail + 1, __ATOMIC_RELEASE);
      next += n;
      inflight++;
      queued++;
    }
    if (syscall(__NR_io_uring_enter, ring, queued, 1, IORING_ENTER_GETEVENTS, 0, 0) < 0) die("io_uring_enter", errno);
    unsigned head = __atomic_load_n(cq_head, __ATOMIC_ACQUIRE);
    while (head != __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE)) {
      struct io_uring_cqe *c = &cqes[head & *cq_mask];
      if (c->res < 0) die("write with write_stream", -c->res);
      if ((uint64_t)c->res != c->user_data) die("short write", EIO);
      done += (uint64_t)c->res;
      inflight--;
      head++;
    }
    __atomic_store_n(cq_head, head, __ATOMIC_RELEASE);
  }
  printf("io_uring: wrote %llu bytes with write_stream %u\n", (unsigned long long)len, stream);
  return 0;
}
