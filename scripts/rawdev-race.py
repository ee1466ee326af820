#!/usr/bin/env python3
"""Which stream each raw-device write took, from a tracefs recording of
tests/c/shim_rawdev_race.c under the shim (scripts/bench-rawdev.sh race).

Input (stdin): the `trace` file of an instance with trace_clock x86-tsc and
the events syscalls/sys_enter_fcntl (filtered to F_SET_RW_HINT),
syscalls/sys_exit_fcntl and block/block_bio_queue (the device).

Writer w writes the w-th 4 MiB of the device and its call path is mapped
to stream w + 1; every F_SET_RW_HINT of a thread sets its writer's stream.
A request takes the node's hint when it is built, just before it is queued
(block_bio_queue, same thread): the hint it took is the value of the set
stored last before then. A set is stored somewhere between its syscall's
entry and exit, so the candidates for "stored last" are the sets that
entered before the request and are not certainly followed by another set
that entered after they exited and exited before the request. A write is
"right" when every candidate set its own stream, "misplaced" when every
candidate set the other's, "uncertain" otherwise (sets overlapping in time),
"initial" when no set came before it. The queueing happens a little after
the hint is read, so a set stored in between counts against the write:
"misplaced" is an upper bound by that sliver, "right" a lower bound.

Prints one line per writer: writes right misplaced uncertain initial.
"""
import re
import sys

LINE = re.compile(r"^\s*(.*)-(\d+)\s+\[\d+\]\s+\S+\s+(\d+):\s+(.*)$")
BIO = re.compile(r"block_bio_queue:\s+\d+,\d+\s+(\S+)\s+(\d+)\s+\+\s+(\d+)")

pending = {}  # tid -> enter time of an F_SET_RW_HINT
sets = []  # (enter, exit, tid)
bios = []  # (time, tid, writer)
for line in sys.stdin:
    if line.startswith("#"):
        continue
    m = LINE.match(line)
    if not m:
        continue
    tid, ts, what = int(m.group(2)), int(m.group(3)), m.group(4)
    if what.startswith("sys_fcntl("):
        pending[tid] = ts
    elif what.startswith("sys_fcntl ->"):
        if tid in pending:
            sets.append((pending.pop(tid), ts, tid))
    elif what.startswith("block_bio_queue:"):
        b = BIO.search(what)
        if b and "W" in b.group(1):
            writer = (int(b.group(2)) * 512) >> 22
            bios.append((ts, tid, writer))

writer_of = {}
for _, tid, w in bios:
    writer_of.setdefault(tid, w)
sets.sort()
bios.sort()

counts = {}
import bisect

enters = [s[0] for s in sets]
for b, tid, w in bios:
    c = counts.setdefault(w, [0, 0, 0, 0, 0])
    c[0] += 1
    i = bisect.bisect_left(enters, b)  # sets[:i] entered before the request
    window = sets[max(0, i - 32) : i]
    done = [s for s in window if s[1] < b]
    if not window:
        c[4] += 1
        continue
    last_start = max((s[0] for s in done), default=None)
    cands = [s for s in window if last_start is None or s[1] >= last_start]
    values = {writer_of.get(s[2], -1) for s in cands}
    if values == {w}:
        c[1] += 1
    elif w not in values and -1 not in values:
        c[2] += 1
    else:
        c[3] += 1

for w in sorted(counts):
    print("writer", w, *counts[w])
