/* A program printing one file from three call sites (fprintf, fputs,
 * fwrite) and putc, N rounds, the way a compiler writes its assembly: the
 * shim makes each stdio run one event, whatever call path each call came
 * from, and covers the bytes putc wrote unseen.
 * Usage: shim_stdio_runs FILE N */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char buf[100];

__attribute__((noinline)) static void line_a(FILE *f, long i) { fprintf(f, "a %ld\n", i); }
__attribute__((noinline)) static void line_b(FILE *f) { fputs("b\n", f); }
__attribute__((noinline)) static void block_c(FILE *f) { fwrite(buf, 1, sizeof buf, f); }

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s FILE N\n", argv[0]); return 2; }
    long n = strtol(argv[2], NULL, 10);
    memset(buf, 'c', sizeof buf);
    FILE *f = fopen(argv[1], "w");
    if (!f) { perror(argv[1]); return 1; }
    for (long i = 0; i < n; i++) {
        line_a(f, i);
        line_b(f);
        block_c(f);
        putc('\n', f);
    }
    return fclose(f) == 0 ? 0 : 1;
}
