#!/usr/bin/env python3
"""Generates the synthetic C code base of the gcc/make rounds (bench/README.md).

    gen_cbase.py DIR FILES [FUNCS [TYPES [TREE_MIB]]]

Writes FILES translation units (src/mNNN.c, each with FUNCS functions and
including three of include/hNN.h), the headers (TYPES struct types each,
pointing at each other's types and at those of the headers they include,
the way kernel headers do: most of a kernel object's size is the debug
information of the header types it uses), a Makefile (gcc -O2 -g objects
with -MMD dependency files, a thin static library, one linked program) and
touch.sh (bench rounds: edit a random third of the sources, chosen
deterministically from the round number). TREE_MIB (default 0) adds that
much source the build never compiles (tree/: like most of a kernel tree,
which a configuration leaves out), so the tree takes its share of the
device. Deterministic: same arguments, same tree. No network, no external
sources.
"""
import os
import random
import sys


def header(h: int, types: int, includes: list[int], rng: random.Random) -> str:
    """Header h: includes the lower-numbered headers `includes` and defines
    `types` structs whose members point at its own and at included types."""
    out = [f"#ifndef H{h}\n#define H{h}\n#include <stddef.h>\n"]
    out += [f'#include "h{i:02}.h"\n' for i in includes]
    for t in range(types):
        out.append(f"struct h{h}_t{t} {{\n")
        for m in range(8):
            kind = rng.randrange(5)
            if kind == 0 and t > 0:
                out.append(f"  struct h{h}_t{rng.randrange(t)} *p{m};\n")
            elif kind == 1 and includes:
                out.append(f"  struct h{rng.choice(includes)}_t{rng.randrange(types)} *q{m};\n")
            elif kind == 2:
                out.append(f"  unsigned long a{m}[{rng.randrange(1, 8)}];\n")
            elif kind == 3:
                out.append(f"  int (*cb{m})(struct h{h}_t{t} *, long);\n")
            else:
                out.append(f"  {rng.choice(['int', 'long', 'double', 'unsigned short'])} v{m};\n")
        out.append("};\n")
    out.append(f"struct s{h} {{ long a[{4 + h % 7}]; double d; int n; }};\n")
    out.append(f"static inline long h{h}_mix(long x) {{ return (x * {2 * h + 3}) ^ (x >> {1 + h % 5}); }}\n")
    out.append("#endif\n")
    return "".join(out)


def unit(i: int, funcs: int, types: int, incs: list[int], rng: random.Random) -> str:
    """Translation unit i: FUNCS loop functions over struct s<a> (the code)
    and one pointer per type of its headers (their debug information)."""
    a = incs[0]
    out = [f'#include "h{h:02}.h"\n' for h in incs]
    out.append("#include <string.h>\nstatic const int round_marker = 0;\n")
    for h in incs:
        for t in range(types):
            out.append(f"struct h{h}_t{t} *m{i}_h{h}_t{t};\n")
    for k in range(funcs):
        n = rng.randrange(3, 9)
        out.append(f"long m{i}_f{k}(long *v, size_t n, struct s{a} *s) {{\n")
        out.append("  long acc = round_marker;\n")
        out.append("  for (size_t j = 0; j < n; j++) {\n")
        for t in range(n):
            op = rng.choice(["+", "^", "-", "|"])
            out.append(f"    acc = acc {op} h{a}_mix(v[j] * {rng.randrange(1, 999)} + {t});\n")
            out.append(f"    if ((acc & {rng.randrange(1, 255)}) == {t}) s->a[{t % 4}] += acc;\n")
        out.append("  }\n")
        out.append(f"  s->d += (double)acc / {rng.randrange(2, 99)}.0;\n")
        out.append("  return acc;\n}\n")
    out.append(f"long m{i}_entry(long *v, size_t n) {{ struct s{a} s; memset(&s, 0, sizeof s);\n")
    out.append(f"  return m{i}_f0(v, n, &s) + m{i}_f{funcs - 1}(v, n, &s); }}\n")
    return "".join(out)


# touch.sh ROUND: a random third of the sources (paper §6: "1/3 of source
# files, which were selected randomly"), the same third for the same round;
# each is edited in place with sed -i (a new file renamed over the old one).
TOUCH = r"""#!/bin/sh
# touch.sh ROUND: edits a random third of the sources, chosen from ROUND
# (deterministic: the same round edits the same files).
r=${1:?round}
for f in $(python3 -c '
import random, sys
files = sorted(sys.argv[2:])
print(" ".join(random.Random(int(sys.argv[1])).sample(files, len(files) // 3)))
' "$r" src/m[0-9]*.c); do
  sed -i "s/round_marker = [0-9]*/round_marker = $r/" "$f"
done
"""


def tree_file(rng: random.Random, size: int) -> str:
    """An uncompiled C source of about `size` bytes."""
    out, n, k = [], 0, 0
    while n < size:
        line = (f"static long t{k}(long x) {{ return x * {rng.randrange(1, 99999)} "
                f"^ (x >> {rng.randrange(1, 31)}) + {rng.randrange(1 << 30)}; }}\n")
        out.append(line)
        n += len(line)
        k += 1
    return "".join(out)


def main() -> int:
    if len(sys.argv) not in (3, 4, 5, 6):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        root, files = sys.argv[1], int(sys.argv[2])
        funcs = int(sys.argv[3]) if len(sys.argv) >= 4 else 24
        types = int(sys.argv[4]) if len(sys.argv) >= 5 else 40
        tree_mib = int(sys.argv[5]) if len(sys.argv) == 6 else 0
    except ValueError as e:
        print(f"gen_cbase.py: FILES, FUNCS, TYPES and TREE_MIB must be whole numbers: {e}", file=sys.stderr)
        return 2
    if files < 3 or funcs < 1 or types < 0 or tree_mib < 0:
        print("gen_cbase.py: need FILES ≥ 3, FUNCS ≥ 1, TYPES ≥ 0, TREE_MIB ≥ 0", file=sys.stderr)
        return 2
    rng = random.Random(files * 1000 + funcs + types * 1_000_000)
    os.makedirs(os.path.join(root, "src"), exist_ok=True)
    os.makedirs(os.path.join(root, "include"), exist_ok=True)
    headers = max(4, files // 8)
    for h in range(headers):
        includes = sorted(rng.sample(range(h), min(h, 2)))
        with open(os.path.join(root, "include", f"h{h:02}.h"), "w") as f:
            f.write(header(h, types, includes, rng))
    for i in range(files):
        with open(os.path.join(root, "src", f"m{i:03}.c"), "w") as f:
            f.write(unit(i, funcs, types, rng.sample(range(headers), 3), rng))
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
        # A thin archive (paths and a symbol table, not copies of the objects),
        # as the kernel's Kbuild makes its built-in.a since Linux 4.13.
        f.write("lib/libm.a: $(OBJS)\n\t@mkdir -p lib\n\trm -f $@\n\tar rcsT $@ $(OBJS)\n")
        f.write("bin/prog: src/main.c lib/libm.a\n\t@mkdir -p bin\n\t$(CC) $(CFLAGS) src/main.c lib/libm.a -o $@\n")
        f.write("-include $(OBJS:.o=.d)\n")
    with open(os.path.join(root, "touch.sh"), "w") as f:
        f.write(TOUCH)
    # Uncompiled sources: 4-64 KiB files, 64 per directory.
    left, k = tree_mib << 20, 0
    while left > 0:
        d = os.path.join(root, "tree", f"d{k // 64:03}")
        os.makedirs(d, exist_ok=True)
        text = tree_file(rng, min(left, rng.randrange(4 << 10, 64 << 10)))
        with open(os.path.join(d, f"f{k % 64:02}.c"), "w") as f:
            f.write(text)
        left -= len(text)
        k += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
