/* Descriptors the application does not know about must not exist: the shim
 * holds none between flushes.
 *
 *   shim_fds close HOW DIR   writes DIR/warm (so the shim has flushed
 *                            batches), closes every descriptor >= 3 with HOW
 *                            (closefrom | close_range | loop), then keeps
 *                            1,100 files DIR/f<i> open at once (descriptors
 *                            past 1000), writes 540 bytes to each (an fsync
 *                            every 50th, a flush point of the shim), closes
 *                            them, reads each back and checks it. Prints
 *                            the highest descriptor number and "ok".
 *   shim_fds probe DIR       writes and closes DIR/warm, then prints what
 *                            fcntl(F_GETFD), write, lseek and fstat answer
 *                            on descriptors 3..15 and 998..1010, and where
 *                            F_DUPFD / F_DUPFD_CLOEXEC with a minimum of
 *                            1000 and dup2/dup3 onto 1000 land. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NFILES 1100
#define LEN 540

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void warm(const char *dir) {
    char p[4096];
    snprintf(p, sizeof p, "%s/warm", dir);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        die("open warm");
    char b[4096];
    memset(b, 'w', sizeof b);
    for (int i = 0; i < 64; i++)
        if (write(fd, b, sizeof b) != (ssize_t)sizeof b)
            die("write warm");
    if (fsync(fd) != 0)
        die("fsync warm");
    if (close(fd) != 0)
        die("close warm");
}

static void fill(char *b, int i) {
    for (int k = 0; k < LEN; k++)
        b[k] = (char)('a' + (i * 7 + k) % 26);
}

static int do_close(int argc, char **argv) {
    if (argc < 4)
        return 2;
    const char *how = argv[2], *dir = argv[3];
    warm(dir);
    if (strcmp(how, "closefrom") == 0) {
        closefrom(3);
    } else if (strcmp(how, "close_range") == 0) {
        if (syscall(SYS_close_range, 3u, ~0u, 0) != 0)
            die("close_range");
    } else if (strcmp(how, "loop") == 0) {
        for (int fd = 3; fd < 4096; fd++)
            close(fd);
    } else {
        fprintf(stderr, "unknown HOW %s\n", how);
        return 2;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        die("getrlimit");
    if (rl.rlim_cur < NFILES + 64) {
        rl.rlim_cur = rl.rlim_max < NFILES + 64 ? rl.rlim_max : NFILES + 64;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            die("setrlimit");
    }
    static int fds[NFILES];
    char p[4096], b[LEN], r[LEN];
    int hi = -1;
    for (int i = 0; i < NFILES; i++) {
        snprintf(p, sizeof p, "%s/f%d", dir, i);
        fds[i] = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (fds[i] < 0)
            die("open f");
        if (fds[i] > hi)
            hi = fds[i];
    }
    for (int i = 0; i < NFILES; i++) {
        fill(b, i);
        if (write(fds[i], b, LEN) != LEN)
            die("write f");
        if (i % 50 == 0 && fsync(fds[i]) != 0)
            die("fsync f");
    }
    for (int i = 0; i < NFILES; i++)
        if (close(fds[i]) != 0)
            die("close f");
    for (int i = 0; i < NFILES; i++) {
        snprintf(p, sizeof p, "%s/f%d", dir, i);
        int fd = open(p, O_RDONLY);
        if (fd < 0)
            die("reopen f");
        struct stat st;
        if (fstat(fd, &st) != 0)
            die("fstat f");
        fill(b, i);
        if (st.st_size != LEN || read(fd, r, LEN) != LEN || memcmp(b, r, LEN) != 0) {
            fprintf(stderr, "%s: %lld bytes, content differs\n", p, (long long)st.st_size);
            return 1;
        }
        close(fd);
    }
    printf("highest fd %d\nok\n", hi);
    return 0;
}

static void probe_one(int fd) {
    errno = 0;
    int a = fcntl(fd, F_GETFD);
    int ea = errno;
    errno = 0;
    off_t b = lseek(fd, 0, SEEK_CUR);
    int eb = errno;
    errno = 0;
    struct stat st;
    int c = fstat(fd, &st);
    int ec = errno;
    errno = 0;
    ssize_t d = write(fd, "", 0);
    int ed = errno;
    printf("fd %d: getfd %d/%d lseek %lld/%d fstat %d/%d write0 %zd/%d\n", fd, a, ea,
           (long long)b, eb, c, ec, d, ed);
}

static int do_probe(int argc, char **argv) {
    if (argc < 3)
        return 2;
    warm(argv[2]);
    for (int fd = 3; fd <= 15; fd++)
        probe_one(fd);
    for (int fd = 998; fd <= 1010; fd++)
        probe_one(fd);
    int a = dup(1);
    printf("dup %d\n", a);
    int b = fcntl(a, F_DUPFD, 1000);
    printf("F_DUPFD 1000 -> %d\n", b);
    int c = fcntl(a, F_DUPFD_CLOEXEC, 1000);
    printf("F_DUPFD_CLOEXEC 1000 -> %d\n", c);
    close(b);
    close(c);
    printf("dup2 onto 1000 -> %d\n", dup2(a, 1000));
    printf("dup3 onto 1001 -> %d\n", dup3(a, 1001, O_CLOEXEC));
    errno = 0;
    int rc = close(1002);
    int e = errno;
    printf("close 1002 -> %d/%d\n", rc, e);
    close(1000);
    close(1001);
    /* After everything, the next descriptor is the lowest free one. */
    warm(argv[2]);
    printf("next open -> %d\n", open("/dev/null", O_RDONLY));
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc >= 2 && strcmp(argv[1], "close") == 0)
        return do_close(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "probe") == 0)
        return do_probe(argc, argv);
    fprintf(stderr, "usage: shim_fds close|probe ...\n");
    return 2;
}
