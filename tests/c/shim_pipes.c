/* Writes to descriptors the shim did not see opened and that are not
 * regular files (stdout as a pipe, a pipe of its own), then to regular
 * files that take over those descriptor numbers: through dup2 onto stdout,
 * through close and a new open (the lowest free number). Usage:
 * shim_pipes DIR N (N writes to each pipe). Prints nothing on stdout but
 * the N pipe writes; tests/tests/shim_descriptors.rs checks the trace. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    int n = atoi(argv[2]);
    char path[4096], buf[5000];
    memset(buf, 'p', sizeof buf);
    for (int i = 0; i < n; i++) write(1, "x", 1);
    int p[2];
    if (pipe(p) != 0) return 1;
    for (int i = 0; i < n; i++) {
        write(p[1], "y", 1);
        char c;
        read(p[0], &c, 1);
    }
    /* A regular file onto stdout. */
    snprintf(path, sizeof path, "%s/a", argv[1]);
    int a = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(a, 1);
    write(1, buf, 1000);
    /* The pipe's write end closed, its number reused by a new file. */
    close(p[1]);
    snprintf(path, sizeof path, "%s/b", argv[1]);
    int b = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    write(b, buf, 2000);
    fprintf(stderr, "pipe write end %d, b %d\n", p[1], b);
    return 0;
}
