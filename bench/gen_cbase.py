#!/usr/bin/env python3
"""Generates the synthetic C code base of the gcc/make rounds (bench/README.md).

    gen_cbase.py DIR FILES [FUNCS]

Writes FILES translation units (src/mNNN.c, each including two of
include/hNN.h), a Makefile (objects with -MMD dependency files, a static
library, one linked program) and touch.sh (bench rounds: edit a third of the
sources, deterministically per round). Deterministic: same arguments, same
tree. No network, no external sources.
"""
import os
import random
import sys


def main() -> int:
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    root, files = sys.argv[1], int(sys.argv[2])
    funcs = int(sys.argv[3]) if len(sys.argv) == 4 else 24
    rng = random.Random(files * 1000 + funcs)
    os.makedirs(os.path.join(root, "src"), exist_ok=True)
    os.makedirs(os.path.join(root, "include"), exist_ok=True)
    headers = max(4, files // 16)
    for h in range(headers):
        with open(os.path.join(root, "include", f"h{h:02}.h"), "w") as f:
            f.write(f"#ifndef H{h}\n#define H{h}\n#include <stddef.h>\n")
            f.write(f"struct s{h} {{ long a[{4 + h % 7}]; double d; int n; }};\n")
            f.write(f"static inline long h{h}_mix(long x) {{ return (x * {2 * h + 3}) ^ (x >> {1 + h % 5}); }}\n")
            f.write("#endif\n")
    for i in range(files):
        with open(os.path.join(root, "src", f"m{i:03}.c"), "w") as f:
            a, b = rng.randrange(headers), rng.randrange(headers)
            f.write(f'#include "h{a:02}.h"\n#include "h{b:02}.h"\n#include <string.h>\n')
            f.write("static const int round_marker = 0;\n")
            for k in range(funcs):
                n = rng.randrange(3, 9)
                f.write(f"long m{i}_f{k}(long *v, size_t n, struct s{a} *s) {{\n")
                f.write("  long acc = round_marker;\n")
                f.write("  for (size_t j = 0; j < n; j++) {\n")
                for t in range(n):
                    op = rng.choice(["+", "^", "-", "|"])
                    f.write(f"    acc = acc {op} h{a}_mix(v[j] * {rng.randrange(1, 999)} + {t});\n")
                    f.write(f"    if ((acc & {rng.randrange(1, 255)}) == {t}) s->a[{t % 4}] += acc;\n")
                f.write("  }\n")
                f.write(f"  s->d += (double)acc / {rng.randrange(2, 99)}.0;\n")
                f.write("  return acc;\n}\n")
            f.write(f"long m{i}_entry(long *v, size_t n) {{ struct s{a} s; memset(&s, 0, sizeof s);\n")
            f.write(f"  return m{i}_f0(v, n, &s) + m{i}_f{funcs - 1}(v, n, &s); }}\n")
    with open(os.path.join(root, "src", "main.c"), "w") as f:
        for i in range(files):
            f.write(f"long m{i}_entry(long *v, unsigned long n);\n")
        f.write("int main(void) { long v[8] = {1,2,3,4,5,6,7,8}; long t = 0;\n")
        for i in range(files):
            f.write(f"  t += m{i}_entry(v, 8);\n")
        f.write("  return (int)(t & 1); }\n")
    with open(os.path.join(root, "Makefile"), "w") as f:
        f.write("CC ?= gcc\nCFLAGS ?= -O2 -g -Iinclude\n")
        f.write("SRCS := $(sort $(wildcard src/m*.c))\nOBJS := $(SRCS:src/%.c=obj/%.o)\n")
        f.write("all: bin/prog\n")
        f.write("obj/%.o: src/%.c\n\t@mkdir -p obj\n\t$(CC) $(CFLAGS) -MMD -MP -c $< -o $@\n")
        f.write("lib/libm.a: $(OBJS)\n\t@mkdir -p lib\n\trm -f $@\n\tar rcs $@ $(OBJS)\n")
        f.write("bin/prog: src/main.c lib/libm.a\n\t@mkdir -p bin\n\t$(CC) $(CFLAGS) src/main.c lib/libm.a -o $@\n")
        f.write("-include $(OBJS:.o=.d)\n")
    with open(os.path.join(root, "touch.sh"), "w") as f:
        f.write("#!/bin/sh\n# touch.sh ROUND: edits a third of the sources (i % 3 == ROUND % 3)\n")
        f.write("r=$1\nfor f in src/m[0-9]*.c; do\n  i=$(basename $f .c); i=${i#m}; i=$(expr $i + 0)\n")
        f.write("  if [ $(( (i + r) % 3 )) -eq 0 ]; then\n")
        f.write("    sed -i \"s/round_marker = [0-9]*/round_marker = $r/\" $f\n  fi\ndone\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
