/* A program printing one file from three call sites (fprintf, fputs,
 * fwrite) and putc, N rounds, the way a compiler writes its assembly: the
 * shim makes each stdio run one event, whatever call path each call came
 * from, and covers the bytes putc wrote unseen. With FILE2, the same again
 * into FILE2 after FILE is closed (glibc hands the next fopen the same FILE
 * and, often, a buffer at the same address).
 * Usage: shim_stdio_runs FILE N [FILE2] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char buf[100];

__attribute__((noinline)) static void line_a(FILE *f, long i) { fprintf(f, "a %ld\n", i); }
__attribute__((noinline)) static void line_b(FILE *f) { fputs("b\n", f); }
__attribute__((noinline)) static void block_c(FILE *f) { fwrite(buf, 1, sizeof buf, f); }

static int print(const char *path, long n) {
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); return 1; }
    for (long i = 0; i < n; i++) {
        line_a(f, i);
        line_b(f);
        block_c(f);
        putc('\n', f);
    }
    return fclose(f) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) { fprintf(stderr, "usage: %s FILE N [FILE2]\n", argv[0]); return 2; }
    long n = strtol(argv[2], NULL, 10);
    memset(buf, 'c', sizeof buf);
    if (print(argv[1], n)) return 1;
    return argc == 4 ? print(argv[3], n) : 0;
}
