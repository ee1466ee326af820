/* N sequential write() calls of 4096 bytes each to FILE, from one call
 * site (the shim coalesces them into one event that counts N calls).
 * Usage: shim_seq_writes FILE N */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s FILE N\n", argv[0]); return 2; }
    long n = strtol(argv[2], NULL, 10);
    static char buf[4096];
    memset(buf, 's', sizeof buf);
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror(argv[1]); return 1; }
    for (long i = 0; i < n; i++)
        if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) { perror("write"); return 1; }
    return close(fd) == 0 ? 0 : 1;
}
