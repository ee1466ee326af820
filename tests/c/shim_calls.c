/* Exercises every call the shim interposes, success and error paths, and
 * prints one line per call: "<what> rc=<return value> errno=<errno>".
 * tests/tests/shim_transparency.rs runs it with and without the shim and
 * requires identical output (return values, errno, descriptor numbers, file
 * contents). Usage: shim_calls DIR (an empty scratch directory). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef F_SET_RW_HINT
#define F_SET_RW_HINT (1024 + 12)
#define F_GET_RW_HINT (1024 + 11)
#endif
#ifndef FALLOC_FL_PUNCH_HOLE
#define FALLOC_FL_KEEP_SIZE 0x01
#define FALLOC_FL_PUNCH_HOLE 0x02
#endif

static char dir[4096];
static char *p(const char *name) {
    static char buf[8][4200];
    static int i;
    char *b = buf[i++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", dir, name);
    return b;
}

#define SHOW(what, expr)                                                    \
    do {                                                                    \
        errno = 0;                                                          \
        long long _r = (long long)(expr);                                   \
        int _e = errno;                                                     \
        fprintf(stdout, "%-40s rc=%lld errno=%d\n", what, _r, _e);          \
        fflush(stdout);                                                     \
    } while (0)

static long long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static void dump(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("content %s: missing\n", strrchr(path, '/') + 1);
        return;
    }
    unsigned long h = 5381, n = 0;
    int c;
    while ((c = fgetc(f)) != EOF) {
        h = h * 33 + (unsigned char)c;
        n++;
    }
    fclose(f);
    printf("content %s: %lu bytes hash %lx\n", strrchr(path, '/') + 1, n, h);
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    snprintf(dir, sizeof dir, "%s", argv[1]);
    char buf[8192];
    memset(buf, 'a', sizeof buf);

    /* --- write family --- */
    int fd = open(p("w"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    SHOW("open w (fd number)", fd);
    SHOW("write ok", write(fd, buf, 100));
    SHOW("write zero bytes", write(fd, buf, 0));
    SHOW("write EBADF", write(-1, buf, 1));
    SHOW("write EBADF closed-number", write(999, buf, 1));
    SHOW("write EFAULT", write(fd, (void *)8, 10));
    int ro = open(p("w"), O_RDONLY);
    SHOW("open ro", ro);
    SHOW("write to O_RDONLY EBADF", write(ro, buf, 1));
    SHOW("pwrite ok", pwrite(fd, buf, 50, 1000));
    SHOW("pwrite EINVAL negative offset", pwrite(fd, buf, 1, -5));
    SHOW("pwrite64 ok", pwrite64(fd, buf, 10, 2000));
    struct iovec iov[2] = {{buf, 10}, {buf + 10, 20}};
    SHOW("writev ok", writev(fd, iov, 2));
    SHOW("writev EINVAL iovcnt", writev(fd, iov, -1));
    SHOW("writev EFAULT iov", writev(fd, (struct iovec *)8, 1));
    SHOW("pwritev ok", pwritev(fd, iov, 2, 3000));
    SHOW("pwritev2 ok", pwritev2(fd, iov, 2, 4000, 0));
    SHOW("pwritev2 offset -1", pwritev2(fd, iov, 1, -1, 0));
    SHOW("pwritev2 EOPNOTSUPP flags", pwritev2(fd, iov, 1, 0, 0x40000000));
    int pfd[2];
    SHOW("pipe", pipe(pfd));
    SHOW("pwrite ESPIPE on pipe", pwrite(pfd[1], buf, 1, 0));
    SHOW("write pipe ok", write(pfd[1], buf, 3));
    SHOW("lseek ESPIPE on pipe", lseek(pfd[0], 0, SEEK_SET));
    SHOW("lseek EBADF", lseek(-1, 0, SEEK_SET));
    SHOW("lseek ok", lseek(fd, 0, SEEK_CUR));
    SHOW("lseek64 EINVAL whence", lseek64(fd, 0, 77));

    /* errno is left alone by successful calls */
    errno = 4242;
    ssize_t r = write(fd, buf, 7);
    printf("%-40s rc=%zd errno=%d\n", "write keeps errno on success", r, errno);

    /* --- partial writes (RLIMIT_FSIZE) --- */
    signal(SIGXFSZ, SIG_IGN);
    int big = open(p("partial"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim.rlim_cur = 10000;
    lim.rlim_max = old.rlim_max;
    setrlimit(RLIMIT_FSIZE, &lim);
    SHOW("write partial (fsize limit)", write(big, buf, 8192));
    SHOW("write partial 2", write(big, buf, 8192));
    SHOW("write EFBIG", write(big, buf, 8192));
    setrlimit(RLIMIT_FSIZE, &old);
    SHOW("close partial", close(big));

    /* --- O_APPEND --- */
    int ap = open(p("append"), O_WRONLY | O_CREAT | O_APPEND, 0644);
    SHOW("write append 1", write(ap, "hello", 5));
    SHOW("lseek append to 0", lseek(ap, 0, SEEK_SET));
    SHOW("write append 2", write(ap, "world", 5));
    SHOW("lseek append pos", lseek(ap, 0, SEEK_CUR));
    SHOW("pwrite append (ignores offset)", pwrite(ap, "!", 1, 0));
    SHOW("close append", close(ap));
    SHOW("size append", file_size(p("append")));
    /* reopened: it holds data now (no creation event), then an empty file
     * made without the shim's view and opened for writing (one) */
    ap = open(p("append"), O_WRONLY | O_CREAT | O_APPEND, 0644);
    SHOW("write append again", write(ap, "?", 1));
    SHOW("close append again", close(ap));
    int rw = open(p("rw"), O_RDWR | O_CREAT, 0644);
    SHOW("close rw (created)", close(rw));
    rw = open(p("rw"), O_RDONLY);
    SHOW("close rw (read-only, empty)", close(rw));
    rw = open(p("rw"), O_RDWR);
    SHOW("write rw (opened empty)", pwrite(rw, buf, 100, 4096));
    SHOW("close rw", close(rw));
    int sf = open(p("setfl"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    SHOW("write before F_SETFL", write(sf, "hello", 5));
    SHOW("F_SETFL O_APPEND", fcntl(sf, F_SETFL, O_APPEND));
    SHOW("lseek setfl to 0", lseek(sf, 0, SEEK_SET));
    SHOW("write after F_SETFL", write(sf, "world", 5));
    SHOW("fcntl F_SETFL 0", fcntl(sf, F_SETFL, 0));
    struct iovec one = {"abc", 3};
    SHOW("pwritev2 RWF_APPEND", pwritev2(sf, &one, 1, 0, RWF_APPEND));
    SHOW("size setfl", file_size(p("setfl")));
    SHOW("close setfl", close(sf));

    /* --- kernel-side copies (copy_file_range, sendfile, splice) --- */
    int cs = open(p("csrc"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    SHOW("write csrc", write(cs, buf, 8192));
    int cd = open(p("cdst"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    loff_t in_off = 0, out_off = 5000;
    SHOW("lseek csrc 0", lseek(cs, 0, SEEK_SET));
    SHOW("copy_file_range at position", copy_file_range(cs, NULL, cd, NULL, 3000, 0));
    SHOW("copy_file_range at offset", copy_file_range(cs, &in_off, cd, &out_off, 1000, 0));
    printf("%-40s in=%lld out=%lld\n", "copy_file_range offsets", (long long)in_off,
           (long long)out_off);
    SHOW("lseek cdst pos", lseek(cd, 0, SEEK_CUR));
    SHOW("copy_file_range EINVAL flags", copy_file_range(cs, &in_off, cd, &out_off, 10, 1));
    SHOW("copy_file_range EBADF", copy_file_range(cs, NULL, -1, NULL, 10, 0));
    SHOW("copy_file_range EFAULT off_out", copy_file_range(cs, &in_off, cd, (loff_t *)8, 10, 0));
    SHOW("copy_file_range EBADF read-only out", copy_file_range(cs, &in_off, ro, NULL, 10, 0));
    SHOW("copy_file_range at position again", copy_file_range(cs, NULL, cd, NULL, 10, 0));
    off_t s_off = 100;
    SHOW("sendfile ok", sendfile(cd, cs, &s_off, 2000));
    printf("%-40s in=%lld\n", "sendfile offset", (long long)s_off);
    off64_t s_off64 = 0;
    SHOW("sendfile64 ok", sendfile64(cd, cs, &s_off64, 1000));
    SHOW("sendfile EBADF", sendfile(-1, cs, NULL, 10));
    SHOW("sendfile EFAULT offset", sendfile(cd, cs, (off_t *)8, 10));
    int sp[2];
    SHOW("pipe for splice", pipe(sp));
    SHOW("write pipe 700", write(sp[1], buf, 700));
    loff_t sp_off = 8000;
    SHOW("splice pipe to file at offset", splice(sp[0], NULL, cd, &sp_off, 500, 0));
    printf("%-40s out=%lld\n", "splice offset", (long long)sp_off);
    SHOW("splice pipe to file at position", splice(sp[0], NULL, cd, NULL, 200, SPLICE_F_MOVE));
    SHOW("splice file to pipe", splice(cs, &in_off, sp[1], NULL, 300, 0));
    SHOW("splice EINVAL two files", splice(cs, NULL, cd, NULL, 10, 0));
    SHOW("splice EBADF", splice(-1, NULL, cd, NULL, 10, 0));
    SHOW("lseek cdst end", lseek(cd, 0, SEEK_CUR));
    SHOW("close sp0", close(sp[0]));
    SHOW("close sp1", close(sp[1]));
    SHOW("close csrc", close(cs));
    SHOW("close cdst", close(cd));
    dump(p("cdst"));

    /* --- stdio --- */
    FILE *f = fopen(p("stdio"), "w");
    printf("%-40s rc=%d errno=0\n", "fopen w", f != NULL);
    SHOW("fwrite ok", fwrite(buf, 10, 3, f));
    SHOW("fwrite size 0", fwrite(buf, 0, 3, f));
    SHOW("fputs ok", fputs("line\n", f));
    SHOW("fprintf ok", fprintf(f, "%d %s %.2f\n", 42, "x", 1.5));
    SHOW("fwrite_unlocked ok", fwrite_unlocked(buf, 1, 5, f));
    SHOW("fputs_unlocked ok", fputs_unlocked("u\n", f));
    SHOW("fflush", fflush(f));
    SHOW("fclose", fclose(f));
    FILE *rf = fopen(p("stdio"), "r");
    SHOW("fwrite to read-only FILE", fwrite(buf, 1, 4, rf));
    SHOW("fputs to read-only FILE", fputs("x", rf));
    SHOW("fprintf to read-only FILE", fprintf(rf, "%d", 1));
    fclose(rf);
    SHOW("fopen ENOENT", fopen(p("nodir/x"), "w") == NULL);
    FILE *fa = fdopen(dup(fd), "a");
    SHOW("fdopen fprintf", fprintf(fa, "via fdopen\n"));
    SHOW("fclose fdopen", fclose(fa));

    /* --- fcntl / rw hints --- */
    uint64_t h = 3, got = 0;
    SHOW("fcntl EBADF", fcntl(-1, F_GETFL));
    SHOW("fcntl F_GETFL", fcntl(fd, F_GETFL));
    SHOW("F_SET_RW_HINT ok", fcntl(fd, F_SET_RW_HINT, &h));
    SHOW("F_GET_RW_HINT ok", fcntl(fd, F_GET_RW_HINT, &got));
    printf("%-40s value=%llu\n", "hint read back", (unsigned long long)got);
    h = 77;
    SHOW("F_SET_RW_HINT EINVAL value", fcntl(fd, F_SET_RW_HINT, &h));
    SHOW("F_SET_RW_HINT EFAULT", fcntl(fd, F_SET_RW_HINT, (void *)8));
    SHOW("F_SET_RW_HINT EBADF", fcntl(-1, F_SET_RW_HINT, &h));
    SHOW("fcntl F_DUPFD", fcntl(fd, F_DUPFD, 100));
    SHOW("fcntl F_DUPFD_CLOEXEC", fcntl(fd, F_DUPFD_CLOEXEC, 0));

    /* --- fallocate / truncate --- */
    SHOW("fallocate ok", fallocate(fd, 0, 0, 65536));
    SHOW("fallocate punch", fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096));
    SHOW("fallocate EBADF", fallocate(-1, 0, 0, 10));
    SHOW("fallocate EINVAL len", fallocate(fd, 0, 0, 0));
    SHOW("fallocate EOPNOTSUPP mode", fallocate(fd, FALLOC_FL_PUNCH_HOLE, 0, 10));
    SHOW("ftruncate ok", ftruncate(fd, 5000));
    SHOW("ftruncate EBADF", ftruncate(-1, 0));
    SHOW("ftruncate EINVAL", ftruncate(fd, -1));
    SHOW("ftruncate ro EINVAL/EBADF", ftruncate(ro, 0));
    SHOW("truncate ok", truncate(p("w"), 3000));
    SHOW("truncate ENOENT", truncate(p("missing"), 0));
    SHOW("truncate EINVAL", truncate(p("w"), -1));
    SHOW("truncate EFAULT", truncate((char *)8, 0));

    /* --- open family --- */
    SHOW("open ENOENT", open(p("missing"), O_RDONLY));
    SHOW("open EFAULT", open((char *)8, O_RDONLY));
    SHOW("open EEXIST", open(p("w"), O_CREAT | O_EXCL | O_WRONLY, 0644));
    SHOW("open EISDIR", open(dir, O_WRONLY));
    SHOW("openat EBADF", openat(12345, "x", O_RDONLY));
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    SHOW("open dir", dfd);
    int at = openat(dfd, "at", O_WRONLY | O_CREAT | O_TRUNC, 0600);
    SHOW("openat ok", at);
    SHOW("write openat", write(at, buf, 33));
    SHOW("openat O_TRUNC existing", openat(dfd, "at", O_WRONLY | O_TRUNC));
    SHOW("creat ok", creat(p("creat"), 0600));
    SHOW("creat ENOENT", creat(p("nodir/x"), 0600));
    struct stat st;
    stat(p("at"), &st);
    printf("%-40s mode=%o size=%lld\n", "openat file", st.st_mode & 0777, (long long)st.st_size);

    /* --- unlink / rename --- */
    SHOW("unlink ENOENT", unlink(p("missing")));
    SHOW("unlink EFAULT", unlink((char *)8));
    SHOW("unlink EISDIR", unlink(dir));
    SHOW("unlinkat EINVAL flags", unlinkat(dfd, "at", 0x7777));
    SHOW("unlinkat ok", unlinkat(dfd, "creat", 0));
    SHOW("rename ENOENT", rename(p("missing"), p("x")));
    SHOW("rename ok (replace)", rename(p("at"), p("stdio")));
    SHOW("renameat ok", renameat(dfd, "stdio", dfd, "renamed"));
    SHOW("renameat2 EINVAL flags", renameat2(dfd, "renamed", dfd, "y", 0x7777));
    SHOW("renameat2 NOREPLACE EEXIST", renameat2(dfd, "renamed", dfd, "w", RENAME_NOREPLACE));
    SHOW("remove ok", remove(p("renamed")));
    SHOW("remove ENOENT", remove(p("renamed")));

    /* --- close / dup --- */
    SHOW("close EBADF", close(-1));
    SHOW("close never-opened number", close(1000));
    SHOW("close never-opened number 2", close(1001));
    SHOW("dup EBADF", dup(-1));
    SHOW("dup2 EBADF", dup2(-1, 50));
    SHOW("dup2 ok", dup2(fd, 50));
    SHOW("dup2 onto 1000", dup2(fd, 1000));
    SHOW("write via 1000", write(1000, "z", 1));
    SHOW("close 1000", close(1000));
    SHOW("dup2 same fd", dup2(fd, fd));
    SHOW("dup3 EINVAL same fd", dup3(fd, fd, 0));
    SHOW("dup3 EINVAL flags", dup3(fd, 51, 0x7777));
    SHOW("dup3 ok", dup3(fd, 51, O_CLOEXEC));
    SHOW("fsync ok", fsync(fd));
    SHOW("fsync EBADF", fsync(-1));
    SHOW("fdatasync EINVAL pipe", fdatasync(pfd[1]));
    SHOW("close_range some", close_range(50, 51, 0));
    SHOW("close 50 after range", close(50));
    SHOW("close_range EINVAL", close_range(10, 5, 0));
    SHOW("close ok", close(fd));
    SHOW("close twice EBADF", close(fd));
    SHOW("next open gets lowest fd", open(p("w"), O_RDONLY));

    dump(p("w"));
    dump(p("partial"));
    dump(p("append"));
    dump(p("at"));
    dump(p("w"));
    return 0;
}
