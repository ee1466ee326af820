/* An io_uring writer that asks pcstream (crates/preload/include/pcstream.h)
 * for each write's stream and puts it in sqe->write_stream (byte 44 of the
 * SQE, Linux >= 6.16; written by hand so older <linux/io_uring.h> build
 * it); used by tests/tests/shim_rawdev.rs and usable in the QEMU guest.
 *
 *   shim_uring_api TARGET ROUNDS [nostream]
 *
 * TARGET is a block device or a regular file (of at least 1 MiB). Three
 * call paths write 4 KiB O_DIRECT blocks through io_uring: log_append
 * (blocks 0..7, a ring), table_flush (blocks 64.., written once),
 * temp_spill (blocks 32..39). Each asks PCSTREAM_STREAM_FOR_WRITE right
 * before preparing its SQE and prints "<path> stream <s> res <res>" (res =
 * the completion's result: 4096, or -errno: a stream the device does not
 * have is EINVAL). `nostream` submits with write_stream 0 whatever the
 * answer (for a device without write streams). Then "caller stream <s>"
 * from PCSTREAM_STREAM_FOR_CALLER. Without the shim every stream is 0. */
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

#include "pcstream.h"

#define BLK 4096
#define SQE_WRITE_STREAM 44

static int ring, fd, nostream;
static unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
static struct io_uring_sqe *sqes;
static struct io_uring_cqe *cqes;
static void *buf;

static void die(const char *what, int err) {
    fprintf(stderr, "shim_uring_api: %s: %s\n", what, strerror(err));
    exit(1);
}

static void setup(void) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    ring = (int)syscall(__NR_io_uring_setup, 4, &p);
    if (ring < 0)
        die("io_uring_setup", errno);
    size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    char *sq = mmap(0, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring,
                    IORING_OFF_SQ_RING);
    char *cq = mmap(0, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring,
                    IORING_OFF_CQ_RING);
    sqes = mmap(0, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES);
    if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED)
        die("mmap ring", errno);
    sq_tail = (unsigned *)(sq + p.sq_off.tail);
    sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    sq_array = (unsigned *)(sq + p.sq_off.array);
    cq_head = (unsigned *)(cq + p.cq_off.head);
    cq_tail = (unsigned *)(cq + p.cq_off.tail);
    cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
}

/* One write through the ring; returns the completion's result. */
static int submit(uint64_t off, int stream) {
    unsigned tail = __atomic_load_n(sq_tail, __ATOMIC_ACQUIRE);
    unsigned idx = tail & *sq_mask;
    struct io_uring_sqe *s = &sqes[idx];
    memset(s, 0, sizeof *s);
    s->opcode = IORING_OP_WRITE;
    s->fd = fd;
    s->off = off;
    s->addr = (uint64_t)(uintptr_t)buf;
    s->len = BLK;
    ((unsigned char *)s)[SQE_WRITE_STREAM] = nostream ? 0 : (unsigned char)stream;
    sq_array[idx] = idx;
    __atomic_store_n(sq_tail, tail + 1, __ATOMIC_RELEASE);
    if (syscall(__NR_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, 0, 0) < 0)
        die("io_uring_enter", errno);
    unsigned head = __atomic_load_n(cq_head, __ATOMIC_ACQUIRE);
    if (head == __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE))
        die("no completion", EIO);
    int res = cqes[head & *cq_mask].res;
    __atomic_store_n(cq_head, head + 1, __ATOMIC_RELEASE);
    return res;
}

__attribute__((noinline)) static void log_append(int round) {
    uint64_t off = (uint64_t)(round % 8) * BLK;
    int s = PCSTREAM_STREAM_FOR_WRITE(fd, off, BLK);
    printf("log_append stream %d res %d\n", s, submit(off, s));
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void table_flush(int round) {
    uint64_t off = (uint64_t)(64 + round) * BLK;
    int s = PCSTREAM_STREAM_FOR_WRITE(fd, off, BLK);
    printf("table_flush stream %d res %d\n", s, submit(off, s));
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void temp_spill(int round) {
    uint64_t off = (uint64_t)(32 + round % 8) * BLK;
    int s = PCSTREAM_STREAM_FOR_WRITE(fd, off, BLK);
    printf("temp_spill stream %d res %d\n", s, submit(off, s));
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: %s TARGET ROUNDS [nostream]\n", argv[0]);
        return 2;
    }
    nostream = argc == 4 && strcmp(argv[3], "nostream") == 0;
    fd = open(argv[1], O_RDWR | O_DIRECT);
    if (fd < 0)
        die(argv[1], errno);
    if (posix_memalign(&buf, BLK, BLK) != 0)
        die("posix_memalign", ENOMEM);
    memset(buf, 0x5a, BLK);
    setup();
    for (int r = 0; r < atoi(argv[2]); r++) {
        log_append(r);
        table_flush(r);
        temp_spill(r);
    }
    printf("caller stream %d\n", PCSTREAM_STREAM_FOR_CALLER());
    return close(fd) == 0 ? 0 : 1;
}
