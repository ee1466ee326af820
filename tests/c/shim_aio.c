/* libaio's io_submit under the shim, with libaio dlopen'ed after start-up
 * (the shim finds the real io_submit at the first call) and called through
 * the global scope, as a program linked with -laio would: positioned
 * writes (IOCB_CMD_PWRITE, IOCB_CMD_PWRITEV), a zero-length write, an
 * RWF_APPEND write, a read, a submission the kernel refuses and one it
 * takes in part. Prints each result; tests/tests/shim_aio.rs compares the
 * output with and without the shim and the trace with what was submitted.
 * Usage: shim_aio DIR. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

typedef int (*setup_fn)(int, aio_context_t *);
typedef int (*submit_fn)(aio_context_t, long, struct iocb **);
typedef int (*getevents_fn)(aio_context_t, long, long, struct io_event *, struct timespec *);
typedef int (*destroy_fn)(aio_context_t);

static struct iocb cb(int op, int fd, void *buf, unsigned long long n, long long off) {
    struct iocb c;
    memset(&c, 0, sizeof c);
    c.aio_lio_opcode = op;
    c.aio_fildes = fd;
    c.aio_buf = (unsigned long long)(uintptr_t)buf;
    c.aio_nbytes = n;
    c.aio_offset = off;
    return c;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    void *lib = dlopen("libaio.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
        printf("no libaio: %s\n", dlerror());
        return 3;
    }
    setup_fn setup = (setup_fn)dlsym(RTLD_DEFAULT, "io_setup");
    submit_fn submit = (submit_fn)dlsym(RTLD_DEFAULT, "io_submit");
    getevents_fn getevents = (getevents_fn)dlsym(RTLD_DEFAULT, "io_getevents");
    destroy_fn destroy = (destroy_fn)dlsym(RTLD_DEFAULT, "io_destroy");
    char path[4096];
    snprintf(path, sizeof path, "%s/aio", argv[1]);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    aio_context_t ctx = 0;
    printf("io_setup rc=%d\n", setup(16, &ctx));
    static char a[4096], b[1000], c[3000], d[512], rd[100];
    memset(a, 'a', sizeof a);
    memset(b, 'b', sizeof b);
    memset(c, 'c', sizeof c);
    memset(d, 'd', sizeof d);
    struct iovec v[2] = {{b, sizeof b}, {c, sizeof c}};
    struct iocb cbs[5] = {
        cb(IOCB_CMD_PWRITE, fd, a, sizeof a, 8192),
        cb(IOCB_CMD_PWRITEV, fd, v, 2, 100000),
        cb(IOCB_CMD_PWRITE, fd, a, 0, 0),
        cb(IOCB_CMD_PWRITE, fd, d, 10, 0),
        cb(IOCB_CMD_PREAD, fd, rd, sizeof rd, 8192),
    };
    cbs[3].aio_rw_flags = RWF_APPEND;
    struct iocb *ptrs[5] = {&cbs[0], &cbs[1], &cbs[2], &cbs[3], &cbs[4]};
    for (int i = 0; i < 5; i++) cbs[i].aio_data = i;
    printf("io_submit 5 rc=%d\n", submit(ctx, 5, ptrs));
    struct io_event ev[5];
    int n = getevents(ctx, 5, 5, ev, NULL);
    printf("io_getevents rc=%d\n", n);
    long long res[5] = {0};
    for (int i = 0; i < n && i < 5; i++) res[ev[i].data] = ev[i].res;
    for (int i = 0; i < 5; i++) printf("result %d res=%lld\n", i, res[i]);
    struct iocb bad = cb(IOCB_CMD_PWRITE, 9999, d, sizeof d, 0);
    struct iocb *badp[1] = {&bad};
    printf("io_submit bad fd rc=%d\n", submit(ctx, 1, badp));
    struct iocb good = cb(IOCB_CMD_PWRITE, fd, d, sizeof d, 200000);
    struct iocb *part[2] = {&good, &bad};
    printf("io_submit part rc=%d\n", submit(ctx, 2, part));
    printf("io_getevents rc=%d\n", getevents(ctx, 1, 1, ev, NULL));
    printf("io_submit EFAULT rc=%d\n", submit(ctx, 1, (struct iocb **)8));
    printf("io_submit nr 0 rc=%d\n", submit(ctx, 0, ptrs));
    printf("io_destroy rc=%d\n", destroy(ctx));
    struct stat st;
    fstat(fd, &st);
    printf("size %lld\n", (long long)st.st_size);
    close(fd);
    return 0;
}
