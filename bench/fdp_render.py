#!/usr/bin/env python3
"""Renders docs/results-fdp.md and its chart from bench/fdp.sh's RESULT rows.

    fdp_render.py --results FILE [--results FILE]... --meta FILE [--meta FILE]...
                  --md OUT.md --svg OUT.svg --command CMD

Several --results files (boots, sessions) are rendered together: rows are
grouped by case and scale (a row without scale= is `quick`), and every
--meta file's lines go to the header.

A RESULT row (bench/fdp-guest.sh) holds one workload run on a fresh FDP
device: host and media bytes from the device's own FDP statistics over the
workload, the bytes the application passed to write calls, and per-RUH host
bytes. Two figures per row: the device WAF (media / host) and the end-to-end
amplification (media / application bytes), which also counts what a file
system wrote on its own (metadata, journal, cleaning). An F2FS row can say
what F2FS did on its own: how full it got, what it wrote into the holes of
used segments (SSR) and what its cleaning moved. Tables show every run
and the mean; statements are computed from the rows, never written by hand.
"""
import argparse
import os
import statistics
import sys

DESC = {
    "f2fs-rocksdb": "db_bench fillrandom + overwrite on F2FS (1000-byte values, 4 MiB memtables and SSTs written with direct I/O)",
    "f2fs-sqlite": "sqlite3, 1000-byte rows updated in place at random, rollback journal, on F2FS",
    "f2fs-postgres": "PostgreSQL 17 pgbench (TPC-B from 4 clients, 16 MiB shared buffers, then VACUUM and CHECKPOINT) on F2FS: table files written back by the checkpointer, WAL fdatasync'ed",
    "f2fs-mariadb": "MariaDB 11.8 / InnoDB, sysbench oltp_write_only from 4 threads (a 16 MiB buffer pool and a 32 MiB redo log at quick) on F2FS: every file written with O_DIRECT, so each file's hint sets its temperature (warm with none)",
    "raw-rawlife": "rawlife: O_DIRECT on the raw namespace through three call paths (journal ring, tables, scratch freed by BLKDISCARD)",
    "raw-fio": "fio, two jobs on one raw namespace: hot (⅛ of the LBAs, ¾ of the writes, psync) and cold (pvsync2)",
    "raw-zipf": "fio, one job on the raw namespace through one call path (psync, O_DIRECT): the namespace written once, then rewritten in 16 KiB blocks at zipf(1.2)-skewed offsets; only the pages' ages (docs/shim.md, \"Page ages\") tell hot from cold",
    "ext4-rocksdb": "db_bench as above on ext4: the negative control (ext4 passes no hint to an NVMe device)",
}
# What a scale other than quick changes, per case.
SCALE_DESC = {
    ("f2fs-rocksdb", "aged"): "; aged: a 288 MiB namespace and at most 12 L0 files, so that F2FS runs near full",
    ("f2fs-mariadb", "full"): "; full: a 64 MiB buffer pool and a 128 MiB redo log on 1 GiB",
}
# The target's shape when a row names none: RUHSxRU_SIZE,opOP.
DEFAULT_DEVICE = "8x1M,op7"
POLICY = {
    "none": "no shim (the file system's own placement)",
    "app-hints": "the application's own hints (RocksDB's per-level hints, repaired by the shim)",
    "pcstream": "shim + pcstreamd learning online from an empty table",
    "pcstream-2": "shim + pcstreamd restarted from the table persisted by the run before",
    "hand-placed": "a static map chosen by hand from that table's call paths (f2fs-mariadb: by each call path's learnt lifetime, mariadbd having no InnoDB symbols)",
}


def parse(path):
    rows = []
    with open(path) as f:
        for line in f:
            if not line.startswith("RESULT "):
                continue
            kv = dict(p.split("=", 1) for p in line.split()[1:] if "=" in p)
            try:
                row = {
                    "case": kv["case"],
                    "policy": kv["policy"],
                    "run": int(kv["run"]),
                    "host": int(kv["host"]),
                    "media": int(kv["media"]),
                    "app": int(kv.get("app") or 0),
                    "secs": int(kv.get("secs") or 0),
                    "ruh": [int(x) for x in kv.get("ruh", "").split(",") if x.isdigit()],
                    "ruhgc": [int(x) for x in kv.get("ruhgc", "").split(",") if x.isdigit()],
                    "scale": kv.get("scale", "quick"),
                    "device": kv.get("device", DEFAULT_DEVICE),
                    "trimmed": int(kv["trimmed"]) if kv.get("trimmed", "").isdigit() else None,
                    "fs": {k: int(kv[k]) for k in ("fspeak", "fssize", "ssr", "gcmoved") if kv.get(k, "").isdigit()},
                }
            except (KeyError, ValueError) as e:
                sys.exit(f"fdp_render.py: {path}: malformed RESULT line ({e}): {line.strip()}")
            rows.append(row)
    return rows


def waf(r):
    return r["media"] / r["host"] if r["host"] else float("nan")


def e2e(r):
    return r["media"] / r["app"] if r["app"] else float("nan")


def mib(b):
    return f"{b / 2**20:.0f}"


def device_desc(device):
    """'3x8M,op20' -> '3 RUHs of 8 MiB reclaim units, 20 % over-provisioning'."""
    try:
        shape, op = device.split(",op")
        ruhs, ru = shape.split("x")
        return f"{int(ruhs)} RUHs of {ru.replace('M', ' MiB').replace('G', ' GiB')} reclaim units, {int(op)} % over-provisioning"
    except ValueError:
        sys.exit(f"fdp_render.py: malformed device= '{device}' (RUHSxRU_SIZE,opOP)")


def section(case, scale, device):
    """A table's key: the case, with its scale when it is not `quick` and its device when not the default."""
    tags = ([scale] if scale != "quick" else []) + ([device_desc(device)] if device != DEFAULT_DEVICE else [])
    return f"{case} ({'; '.join(tags)})" if tags else case


def fs_cells(r):
    """F2FS's own work in a row: peak use, SSR and cleaning (MiB of 4 KiB blocks)."""
    f = r["fs"]
    if "fspeak" not in f or not f.get("fssize"):
        return ""
    return (f" {f['fspeak'] * 100 / f['fssize']:.0f} % | {f.get('ssr', 0) * 4096 / 2**20:.0f} |"
            f" {f.get('gcmoved', 0) * 4096 / 2**20:.0f} |")


def svg_chart(cases, means, path):
    """Grouped bars: mean end-to-end amplification per case and policy."""
    pols = list(POLICY)
    colors = ["#888888", "#d9a441", "#2b7bba", "#1b4f7a", "#5aa15a"]
    bw, gap, left, top, h = 16, 28, 60, 30, 240
    groups = [(c, [p for p in pols if (c, p) in means]) for c in cases]
    width = left + sum(len(ps) * bw + gap for _, ps in groups) + 180
    vals = [v for v in means.values() if v == v]
    vmax = max(vals + [1.0]) * 1.1
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h + 110}" font-family="sans-serif" font-size="11">',
           f'<text x="{left}" y="16" font-size="13">End-to-end amplification (device media bytes / application bytes), mean of runs</text>']
    for i in range(0, 5):
        v = vmax * i / 4
        y = top + h - h * v / vmax
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - 180}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{v:.2f}</text>')
    x = left + gap / 2
    for c, ps in groups:
        for p in ps:
            v = means[(c, p)]
            if v == v:
                bh = h * v / vmax
                out.append(f'<rect x="{x:.1f}" y="{top + h - bh:.1f}" width="{bw - 2}" height="{bh:.1f}" fill="{colors[pols.index(p)]}"><title>{c} {p}: {v:.3f}</title></rect>')
            x += bw
        out.append(f'<text x="{x - len(ps) * bw / 2:.1f}" y="{top + h + 16}" text-anchor="middle">{c}</text>')
        x += gap
    for i, p in enumerate(pols):
        out.append(f'<rect x="{width - 170}" y="{top + i * 18}" width="12" height="12" fill="{colors[i]}"/>')
        out.append(f'<text x="{width - 152}" y="{top + i * 18 + 10}">{p}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True, action="append")
    ap.add_argument("--meta", required=True, action="append")
    ap.add_argument("--md", required=True)
    ap.add_argument("--svg", required=True)
    ap.add_argument("--command", required=True)
    a = ap.parse_args()
    rows = [r for path in a.results for r in parse(path)]
    if not rows:
        sys.exit(f"fdp_render.py: {', '.join(a.results)}: no RESULT rows")
    meta = []
    for path in a.meta:
        try:
            meta += open(path).read().strip().splitlines()
        except OSError:
            pass
    for r in rows:
        if r["case"] not in DESC:
            sys.exit(f"fdp_render.py: unknown case '{r['case']}'")
        r["section"] = section(r["case"], r["scale"], r["device"])
    order = {"quick": 0, "aged": 1, "full": 2}
    keys = sorted({(r["case"], r["scale"], r["device"]) for r in rows},
                  key=lambda k: (list(DESC).index(k[0]), order.get(k[1], 3), k[1], k[2] != DEFAULT_DEVICE, k[2]))
    cases = [section(*k) for k in keys]
    desc = {section(c, sc, d): DESC[c] + (SCALE_DESC.get((c, sc), "") if sc != "quick" else "") +
            (f"; the target with {device_desc(d)}" if d != DEFAULT_DEVICE else "") for c, sc, d in keys}
    means = {}
    md = ["# The whole loop on an FDP device (bench/fdp.sh)", "",
          "Generated by `bench/fdp_render.py` from `" + a.command + "`; do not edit by hand.", ""]
    md += [f"- {m}" for m in meta]
    md += ["",
           "Each run is a fresh `pcstreamctl target` (ftl-sim as an FDP SSD: 8 reclaim unit handles of 1 MiB",
           "reclaim units, 7 % over-provisioning unless its section says otherwise, greedy GC) driven by a Debian guest's own kernel through",
           "nvme-tcp under QEMU (TCG). **Device WAF** = media / host bytes from the device's own FDP",
           "statistics (`nvme fdp stats`) over the workload (after mkfs and mount, through the final sync).",
           "**End-to-end** = media bytes / the bytes the application passed to write calls (`wchar` of its",
           "processes), so a file system's own metadata, journal and cleaning count too.",
           "Per-RUH host bytes (MiB, mkfs included) show where each policy put the data.", ""]
    md += ["Policies: " + "; ".join(f"`{p}`: {d}" for p, d in POLICY.items()) + ".", ""]
    for c in cases:
        fs = any(fs_cells(r) for r in rows if r["section"] == c)
        gc = any(r["ruhgc"] for r in rows if r["section"] == c)
        # GC columns: RUHs 0-2 (F2FS uses three), or up to the last RUH any row's GC copied from.
        ngc = max([3] + [max((i + 1 for i, b in enumerate(r["ruhgc"]) if b), default=0)
                         for r in rows if r["section"] == c])
        tr = any(r["trimmed"] is not None for r in rows if r["section"] == c)
        md += [f"## {c}", "", desc[c], ""]
        if fs:
            md += ["F2FS's own work per row: its fullest (`df`, every 2 s), the MiB it wrote into the holes of used",
                   "segments (SSR) and the MiB its cleaning moved.", ""]
        if gc:
            md += [f"Per-RUH GC MiB: what the device's GC copied, by the RUH the host had written it to (RUHs 0-{ngc - 1}).", ""]
        if tr:
            md += ["Discarded MiB: what the host's deallocations (the file system's discards) told the device was",
                   "dead, counting only blocks that held data (mkfs included; empty where the row predates the counter).", ""]
        md += ["| policy | run | app MiB | host MiB | media MiB | device WAF | end-to-end | per-RUH host MiB |" +
               (" per-RUH GC MiB |" if gc else "") + (" discarded MiB |" if tr else "") + " s |" +
               (" F2FS peak | SSR MiB | cleaned MiB |" if fs else ""),
               "|---|---|---|---|---|---|---|---|---|" + ("---|" if gc else "") + ("---|" if tr else "") +
               ("---|---|---|" if fs else "")]
        for p in POLICY:
            rs = sorted((r for r in rows if r["section"] == c and r["policy"] == p), key=lambda r: r["run"])
            if not rs:
                continue
            for r in rs:
                md.append(f"| {p} | {r['run']} | {mib(r['app'])} | {mib(r['host'])} | {mib(r['media'])} | "
                          f"{waf(r):.3f} | {e2e(r):.3f} | {' / '.join(mib(b) for b in r['ruh'])} |" +
                          (f" {' / '.join(mib(b) for b in r['ruhgc'][:ngc])} |" if gc else "") +
                          ((f" {mib(r['trimmed'])} |" if r["trimmed"] is not None else " |") if tr else "") + f" {r['secs']} |" +
                          ((fs_cells(r) or " | | |") if fs else ""))
            w = statistics.fmean(waf(r) for r in rs)
            e = statistics.fmean(e2e(r) for r in rs)
            means[(c, p)] = e
            if len(rs) > 1:
                md.append(f"| **{p} mean** | {len(rs)} runs | | | | **{w:.3f}** | **{e:.3f}** | |" + (" |" if gc else "") +
                          (" |" if tr else "") + " |" +
                          (" | | |" if fs else ""))
        md.append("")
        if fs:
            rs = [r for r in rows if r["section"] == c and fs_cells(r)]
            ws = [waf(r) for r in rs]
            peaks = [r["fs"]["fspeak"] * 100 / r["fs"]["fssize"] for r in rs]
            md.append(f"Across these {len(rs)} rows: F2FS at {min(peaks):.0f}-{max(peaks):.0f} % used at its fullest, "
                      f"its cleaning moved {sum(r['fs'].get('gcmoved', 0) for r in rs) * 4096 / 2**20:.0f} MiB in all, "
                      f"device WAF {min(ws):.3f}-{max(ws):.3f}.")
            md.append("")
        base = means.get((c, "none"))
        parts = []
        for p, what in (("pcstream", "learning online from an empty table"),
                        ("pcstream-2", "from its persisted table")):
            v = means.get((c, p))
            if base and v:
                parts.append(f"{v:.3f} {what} ({(v - base) / base * 100:+.1f} %)")
        if parts:
            md.append(f"End-to-end amplification: no shim {base:.3f}; pcstream " + ", ".join(parts) +
                      (f"; the application's own hints {means[(c, 'app-hints')]:.3f}" if (c, "app-hints") in means else "") +
                      (f"; hand-placed {means[(c, 'hand-placed')]:.3f}" if (c, "hand-placed") in means else "") + ".")
            md.append("")
    md += [f"![end-to-end amplification per case and policy]({os.path.relpath(a.svg, os.path.dirname(os.path.abspath(a.md)))})", ""]
    with open(a.md, "w") as f:
        f.write("\n".join(md))
    svg_chart(cases, means, a.svg)


if __name__ == "__main__":
    main()
