/* Files without a name, whose data dies at their last close: an O_TMPFILE
 * never linked, a file unlinked while open and written on after, the same
 * through stdio; and the cases where a close does not end the file: a
 * duplicated descriptor, an O_TMPFILE given a name with linkat. Prints one
 * line per step; tests/tests/shim_events.rs reads the invalidations.
 * Usage: shim_unnamed DIR. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[4000];
static char buf[8192];

static const char *at(const char *name) {
    static char p[4][4100];
    static int i;
    char *b = p[i++ % 4];
    snprintf(b, sizeof p[0], "%s/%s", dir, name);
    return b;
}

static long long ino(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 ? (long long)st.st_ino : -1;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    snprintf(dir, sizeof dir, "%s", argv[1]);
    memset(buf, 'x', sizeof buf);

    /* Every file exists before any dies, so no two share an inode number. */
    int t = open(dir, O_TMPFILE | O_WRONLY, 0600);
    if (t < 0) {
        printf("no O_TMPFILE here\n");
        return 3;
    }
    int u = open(at("u"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    FILE *f = fopen(at("s"), "w");
    int d = open(at("d"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int l = open(dir, O_TMPFILE | O_WRONLY, 0600);
    printf("tmpfile ino %lld\n", ino(t));
    printf("unlinked ino %lld\n", ino(u));
    printf("stdio ino %lld\n", ino(fileno(f)));
    printf("dup ino %lld\n", ino(d));
    printf("linked ino %lld\n", ino(l));

    /* 1: O_TMPFILE, 10000 bytes, closed: dies at the close. */
    write(t, buf, 8192);
    write(t, buf, 1808);
    printf("close rc=%d\n", close(t));

    /* 2: written, unlinked (5000 bytes die), written on (8000), closed. */
    write(u, buf, 5000);
    printf("unlink rc=%d\n", unlink(at("u")));
    write(u, buf, 3000);
    printf("close rc=%d\n", close(u));

    /* 3: the same through stdio (4096 + 100 bytes, fclose). */
    fwrite(buf, 1, 4096, f);
    fflush(f);
    printf("unlink rc=%d\n", unlink(at("s")));
    fwrite(buf, 1, 100, f);
    printf("fclose rc=%d\n", fclose(f));

    /* 4: duplicated: neither close is the shim's to call the end. */
    write(d, buf, 2000);
    printf("unlink rc=%d\n", unlink(at("d")));
    int d2 = dup(d);
    write(d, buf, 1000);
    printf("close rc=%d\n", close(d));
    write(d2, buf, 1000);
    printf("close dup rc=%d\n", close(d2));

    /* 5: O_TMPFILE given a name: its close ends nothing. */
    write(l, buf, 3000);
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", l);
    printf("linkat rc=%d\n", linkat(AT_FDCWD, proc, AT_FDCWD, at("l"), AT_SYMLINK_FOLLOW));
    printf("close rc=%d\n", close(l));
    return 0;
}
