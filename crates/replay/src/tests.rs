//! Unit tests of the replay pipeline: deaths, the extent join, the
//! file-system allocator and its cache, sizing and ageing, transforms, and
//! the experiment harness.

use super::*;
use crate::fs_alloc::{alloc_pass, allocate, Allocator};
use crate::ground_truth::{ground_truth, RevMap};
use crate::source::Ev;
use pcstream_placement::policies::PolicyConfig;
use pcstream_placement::wire;
use std::collections::HashSet;

fn w(lpn: u64, pages: u32) -> Op {
    Op::Write {
        lpn,
        pages,
        file: None,
        file_page: 0,
        signature: None,
        app_hint: 0,
        class: WriteClass::Data,
    }
}

#[test]
fn deaths_follow_overwrites_and_trims() {
    let ops = vec![w(0, 2), w(1, 1), Op::Trim { lpn: 0, pages: 1 }, w(5, 1)];
    let r = Replay::from_ops(ops, 8, Source::FsAlloc).unwrap();
    // pages written: clock0 lpn0, clock1 lpn1, clock2 lpn1, clock3 lpn5
    assert_eq!(r.deaths, vec![3, 2, NEVER, NEVER]);
    assert_eq!(r.death(0), Some(3));
    assert_eq!(r.death(3), None);
    assert_eq!(r.footprint_pages, 3);
    assert_eq!(r.peak_live_pages, 2);
    assert!(r.touches(5) && !r.touches(4));
    assert_eq!(r.host_pages(), 4);
}

#[test]
fn out_of_range_op_is_an_error() {
    let e = Replay::from_ops(vec![w(7, 2)], 8, Source::FsAlloc).unwrap_err();
    assert!(e.to_string().contains("beyond"), "{e}");
}

#[test]
fn revmap_splits_overlaps() {
    let mut m = RevMap::default();
    m.insert(100, 10, 1, 0);
    m.insert(104, 2, 2, 50);
    assert_eq!(m.lookup(103), Some((1, 3)));
    assert_eq!(m.lookup(104), Some((2, 50)));
    assert_eq!(m.lookup(105), Some((2, 51)));
    assert_eq!(m.lookup(106), Some((1, 6)));
    assert_eq!(m.lookup(110), None);
    assert_eq!(m.lookup(99), None);
}

#[test]
fn allocator_prefers_goal_and_wraps() {
    let mut a = Allocator::new(130);
    assert_eq!(a.alloc(None), Some(0));
    assert_eq!(a.alloc(Some(100)), Some(100));
    assert_eq!(a.alloc(Some(100)), Some(1));
    a.set(0, false);
    for _ in 0..128 {
        assert!(a.alloc(None).is_some());
    }
    assert_eq!(a.alloc(None), None);
}

fn shim_write(ino: u64, offset: u64, len: u64, sig: u64) -> Ev {
    Ev::ShimWrite(wire::WriteEvent {
        file: Some(wire::FileId { dev: 1, ino }),
        offset,
        len,
        signature: sig,
        ..Default::default()
    })
}

fn unlink(ino: u64) -> Ev {
    Ev::ShimInvalidate(wire::InvalidateEvent {
        file: Some(wire::FileId { dev: 1, ino }),
        kind: wire::InvalidateKind::Unlink as i32,
        offset: 0,
        len: 0,
    })
}

#[test]
fn model_cache_coalesces_appends_and_drops_deleted_pages() {
    // 64 appends of 512 bytes fill 8 pages; file 2 is written and
    // unlinked while cached; file 3 lives.
    let mut evs: Vec<Ev> = (0..64).map(|i| shim_write(1, i * 512, 512, 7)).collect();
    evs.push(shim_write(2, 0, 8 * PAGE, 8));
    evs.push(unlink(2));
    evs.push(shim_write(3, 0, 4 * PAGE, 9));
    let cached = alloc_pass(evs.clone().into_iter(), 1024, 1024, false).unwrap();
    assert_eq!(cached.2.write_pages, 8 + 4);
    assert_eq!(cached.2.trim_pages, 0);
    assert_eq!(cached.2.shim_writes, 66);
    // Write-through: every append rewrites its page; file 2 reaches the
    // device and is trimmed.
    let through = alloc_pass(evs.into_iter(), 1024, 1, false).unwrap();
    assert_eq!(through.2.write_pages, 64 + 8 + 4);
    assert_eq!(through.2.trim_pages, 8);
    // A file's pages are contiguous next to each other.
    let firsts: Vec<(u64, u32)> = cached
        .0
        .iter()
        .filter_map(|op| match *op {
            Op::Write { lpn, pages, .. } => Some((lpn, pages)),
            _ => None,
        })
        .collect();
    assert_eq!(firsts, vec![(0, 8), (8, 4)]);
}

#[test]
fn the_byte_clock_counts_bytes_written_not_pages() {
    // 16 appends of 512 bytes (two pages, each rewritten 8 times through),
    // then an unlink, then a 3-page write starting mid-page.
    let mut evs: Vec<Ev> = (0..16).map(|i| shim_write(1, i * 512, 512, 7)).collect();
    evs.push(unlink(1));
    evs.push(shim_write(2, 100, 2 * PAGE, 8));
    let r = allocate(evs.clone().into_iter(), None, Some(1), true).unwrap();
    let t = r.times.as_ref().expect("byte clock");
    assert_eq!(r.host_pages(), 16 + 3);
    // Page k of the appends is placed at (512 k) / 4096; the last write's
    // pages at the clock of their first byte: 8192, 8192 + 3996, + 8092.
    let mut want: Vec<u64> = (0..16).map(|k| k * 512 / PAGE).collect();
    want.extend([
        8192 / PAGE,
        (8192 + 3996) / PAGE,
        (8192 + 3996 + 4096) / PAGE,
    ]);
    assert_eq!(t.pages, want);
    assert_eq!(t.ops.len(), r.ops.len());
    // The unlink (and its TRIM) at 8192 bytes = page 2.
    for (op, &at) in r.ops.iter().zip(&t.ops) {
        if !matches!(op, Op::Write { .. }) {
            assert_eq!(at, 2, "{op:?}");
        }
    }
    // Only written through.
    let cached = allocate(evs.into_iter(), None, Some(1024), true).unwrap();
    assert_eq!(cached.times, None);
}

#[test]
fn model_reuses_freed_space_and_reports_its_peak() {
    let evs = vec![
        shim_write(1, 0, 6 * PAGE, 1),
        shim_write(2, 0, 2 * PAGE, 1),
        unlink(1),
        shim_write(3, 0, 5 * PAGE, 1),
    ];
    let r = allocate(evs.into_iter(), None, Some(1), false).unwrap();
    assert_eq!(r.times, None);
    assert_eq!(r.source, Source::FsAlloc);
    assert_eq!(r.peak_live_pages, 8);
    // 5/4 of the peak, at least 1024 pages.
    assert_eq!(r.logical_pages, 1024);
    // File 3 lands in file 1's freed pages, so the footprint stays 8.
    assert_eq!(r.footprint_pages, 8);
    assert_eq!(r.stats.trim_pages, 6);
    // Too small a file system is an error, not a panic.
    let e = allocate(
        vec![shim_write(1, 0, 9 * PAGE, 1)].into_iter(),
        Some(8),
        Some(1),
        false,
    )
    .unwrap_err();
    assert!(e.to_string().contains("out of space"), "{e}");
}

fn replay_touching(logical: u64, pages: &[u64]) -> Replay {
    let ops = pages.iter().map(|&p| w(p, 1)).collect();
    Replay::from_ops(ops, logical, Source::FsAlloc).unwrap()
}

#[test]
fn layout_fits_the_footprint_beside_the_cold_data() {
    let r = replay_touching(100_000, &(0..20_000).map(|p| p * 5).collect::<Vec<_>>());
    let spec = DeviceSpec::default();
    let l = layout(&r, &spec).unwrap();
    // ⌈20 000 / 0.1⌉ = 200 000 > the traced 100 000.
    assert!(l.logical_pages >= 200_000, "{}", l.logical_pages);
    assert!(l.logical_pages < 200_000 + 16 * 384, "{}", l.logical_pages);
    assert_eq!(l.cold_pages, (l.logical_pages as f64 * 0.9).round() as u64);
    assert!(l.logical_pages - l.cold_pages >= r.footprint_pages);
    assert!(l.scale() >= 2.0);
    // 200 000 pages / 384 ≈ 560 blocks < 64 × 9: pages per block halve.
    assert_eq!(l.config.geometry.pages_per_block, 192);
    assert!(l.config.geometry.blocks() >= 64 * 9);
    // A big device keeps the paper's 384.
    let big = replay_touching(4_000_000, &[0]);
    let lb = layout(&big, &spec).unwrap();
    assert_eq!(lb.config.geometry.pages_per_block, 384);
    assert!(lb.logical_pages >= 4_000_000);
    // Bad values are errors.
    let bad = DeviceSpec {
        prefill: 1.0,
        ..DeviceSpec::default()
    };
    assert!(layout(&r, &bad)
        .unwrap_err()
        .to_string()
        .contains("prefill"));
}

#[test]
fn aged_device_holds_cold_data_only_where_the_replay_never_writes() {
    let r = replay_touching(4096, &[0, 1, 2, 100, 4000]);
    let l = layout(&r, &DeviceSpec::default()).unwrap();
    let ssd = aged_ssd(&r, &l).unwrap();
    let st = ssd.stats();
    assert_eq!(st.host_pages, 0, "counters reset after ageing");
    assert_eq!(st.valid_pages, l.cold_pages);
    for p in [0, 1, 2, 100, 4000] {
        assert_eq!(
            ssd.lookup(p),
            None,
            "page {p} must stay free for the replay"
        );
    }
    assert!(ssd.lookup(3).is_some() && ssd.lookup(99).is_some());
}

#[test]
fn simulate_all_keeps_job_order_and_reports_errors_per_job() {
    let r = replay_touching(4096, &(0..4096).collect::<Vec<_>>());
    let jobs: Vec<Job<'_>> = ["oracle", "nope", "baseline"]
        .iter()
        .map(|p| Job {
            replay: &r,
            policy: p.to_string(),
            spec: DeviceSpec::default(),
        })
        .collect();
    let res = simulate_all(&jobs, &PolicyConfig::default(), 2);
    assert_eq!(res[0].as_ref().unwrap().policy, "oracle");
    let e = res[1].as_ref().unwrap_err().to_string();
    assert!(e.contains("nope") && e.contains("baseline"), "{e}");
    let b = res[2].as_ref().unwrap();
    assert_eq!(b.stats.host_pages, 4096);
    assert_eq!(b.counters.stream0_pages, 4096);
}

#[test]
fn confine_renames_pages_but_keeps_every_death() {
    // Pages spread 7 apart, rewritten, trimmed (also a never-written
    // range), rewritten again.
    let mut ops: Vec<Op> = (0..200).map(|i| w(i * 7, 1)).collect();
    ops.extend((0..100).map(|i| w(i * 7, 1)));
    ops.push(Op::Trim { lpn: 0, pages: 700 });
    ops.push(Op::Trim {
        lpn: 1500,
        pages: 100,
    });
    ops.extend((0..50).map(|i| w(1400 + i * 3, 1)));
    let r = Replay::from_ops(ops, 2000, Source::GroundTruth).unwrap();
    assert_eq!(r.peak_live_pages, 200);
    let c = confine(&r, 256).unwrap();
    assert_eq!(c.deaths, r.deaths);
    assert_eq!(c.peak_live_pages, r.peak_live_pages);
    assert_eq!(c.confined_from, Some(r.footprint_pages));
    assert!(c.footprint_pages <= 256);
    assert_eq!(c.logical_pages, 2000);
    for op in &c.ops {
        match *op {
            Op::Write { lpn, pages, .. } => assert!(lpn + u64::from(pages) <= 256),
            // Only the 100 mapped pages of 0..700; nothing of 1500..1600.
            Op::Trim { lpn, pages } => assert!(lpn + pages <= 256),
            Op::InvalidateFile { .. } => {}
        }
    }
    let trimmed: u64 = c
        .ops
        .iter()
        .map(|op| match *op {
            Op::Trim { pages, .. } => pages,
            _ => 0,
        })
        .sum();
    assert_eq!(trimmed, 100);
    assert!(confine(&r, 199)
        .unwrap_err()
        .to_string()
        .contains("200 live pages"));
    // Nothing to do for a dense replay.
    let dense = replay_touching(4096, &(0..2000).collect::<Vec<_>>());
    let f = fit_for_ageing(dense, 0.9).unwrap();
    assert_eq!(f.confined_from, None);
}

#[test]
fn without_trims_data_dies_only_when_rewritten() {
    let ops = vec![w(0, 2), Op::Trim { lpn: 0, pages: 2 }, w(1, 1)];
    let r = Replay::from_ops(ops, 8, Source::FsAlloc).unwrap();
    assert_eq!(r.deaths, vec![2, 2, NEVER]);
    let n = without_trims(&r).unwrap();
    assert_eq!(n.deaths, vec![NEVER, 2, NEVER]);
    assert!(n.ops.iter().all(|op| !matches!(op, Op::Trim { .. })));
    assert_eq!(n.stats.trim_pages, 2, "the join statistics are the trace's");
}

#[test]
fn clear_at_marks_restarts_policies_and_warmup_passes_are_not_counted() {
    let sw = |lpn: u64, sig: u64| Op::Write {
        lpn,
        pages: 1,
        file: Some((1, lpn)),
        file_page: 0,
        signature: Some(sig),
        app_hint: 0,
        class: WriteClass::Data,
    };
    // Round 1 writes with signatures 1 and 2, round 2 (from clock 4) with 3.
    let ops = vec![sw(0, 1), sw(1, 2), sw(2, 1), sw(3, 2), sw(4, 3), sw(5, 3)];
    let mut r = Replay::from_ops(ops, 64, Source::GroundTruth).unwrap();
    r.marks = vec![0, 4];
    let go = |r: &Replay| {
        let job = Job {
            replay: r,
            policy: "pcstream".into(),
            spec: DeviceSpec::default(),
        };
        let res = simulate(&job, &PolicyConfig::default()).unwrap();
        let sigs = res
            .policy_counters
            .iter()
            .find(|(k, _)| k == "signatures")
            .map(|(_, v)| *v)
            .unwrap();
        (res.stats.host_pages, sigs)
    };
    assert_eq!(go(&r), (6, 3), "tables kept over the rounds");
    r.run_mode = RunMode {
        warmup_passes: 0,
        clear_at_marks: true,
    };
    assert_eq!(
        go(&r),
        (6, 1),
        "the last round's instance saw one signature"
    );
    r.run_mode = RunMode {
        warmup_passes: 2,
        clear_at_marks: false,
    };
    assert_eq!(go(&r), (6, 3), "warm-up writes are not counted");
    // The confined replay keeps the marks and the mode.
    let c = confine(&r, 1024).unwrap();
    assert_eq!((c.marks.clone(), c.run_mode), (r.marks.clone(), r.run_mode));
}

#[test]
fn pcstream_keeps_gc_streams_only_on_a_device_without_internal_streams() {
    let r = replay_touching(4096, &[0]);
    let off = DeviceSpec::default();
    let on = DeviceSpec {
        internal_streams: true,
        ..DeviceSpec::default()
    };
    let base = PolicyConfig::default();
    let gc = |spec: &DeviceSpec, cfg: &PolicyConfig| {
        policy_config_for(spec, &layout(&r, spec).unwrap(), cfg)
            .pcstream
            .gc_streams
    };
    assert_eq!(gc(&off, &base), Some(experiment::DEFAULT_GC_STREAMS));
    assert_eq!(gc(&on, &base), Some(0));
    // A configured value is kept.
    let mut named = base.clone();
    named.pcstream.gc_streams = Some(1);
    assert_eq!(gc(&off, &named), Some(1));
    assert_eq!(gc(&on, &named), Some(1));
}

/// The ground-truth join of an `O_DIRECT` file: each device write is
/// attributed to the shim write whose call it happened in, which the shim
/// stamps after the device write (at the call's return); the pages of a
/// coalesced run written after its event's time go with that event; a
/// device write no shim write claims keeps the page's last signature. A
/// buffered file keeps the old rule (the last shim write before).
#[test]
fn o_direct_device_writes_join_the_shim_write_they_happened_in() {
    let extent = Ev::Extent(wire::ExtentMap {
        file: Some(wire::FileId { dev: 1, ino: 5 }),
        file_block: 0,
        device_block: 100,
        len_blocks: 8,
        block_size: PAGE as u32,
        ..Default::default()
    });
    let block = |page: u64, pages: u32| {
        Ev::Block(wire::BlockRequest {
            sector: page * (PAGE / 512),
            nr_sectors: pages * (PAGE / 512) as u32,
            op: wire::BlockOp::Write as i32,
            ..Default::default()
        })
    };
    let evs = vec![
        extent,
        // W1 (pages 0-1, signature 11): its device write, then its event.
        block(100, 2),
        shim_write(5, 0, 2 * PAGE, 11),
        // W2 (page 0, 12), the same way.
        block(100, 1),
        shim_write(5, 0, PAGE, 12),
        // A run of two calls coalesced into one event (pages 2-5, 13):
        // the first call's pages reach the device before the event, the
        // second's after it.
        block(102, 2),
        shim_write(5, 2 * PAGE, 4 * PAGE, 13),
        block(104, 2),
        // A device write no shim write claims: page 1 keeps 11.
        block(101, 1),
    ];
    let sigs = |direct: &HashSet<(u64, u64)>| {
        let r = ground_truth(
            evs.clone().into_iter(),
            Some(1024),
            HashSet::new(),
            direct,
            0,
        )
        .unwrap();
        let mut v = Vec::new();
        for op in &r.ops {
            if let Op::Write {
                lpn,
                pages,
                signature,
                ..
            } = *op
            {
                v.extend((lpn..lpn + u64::from(pages)).map(|p| (p, signature)));
            }
        }
        (v, r.stats.signed_pages)
    };
    let (direct, signed) = sigs(&HashSet::from([(1, 5)]));
    assert_eq!(
        direct,
        vec![
            (100, Some(11)),
            (101, Some(11)),
            (100, Some(12)),
            (102, Some(13)),
            (103, Some(13)),
            (104, Some(13)),
            (105, Some(13)),
            (101, Some(11)),
        ]
    );
    assert_eq!(signed, 8);
    // Buffered: each device write takes the last shim write before it.
    let (buffered, signed) = sigs(&HashSet::new());
    assert_eq!(
        buffered,
        vec![
            (100, None),
            (101, None),
            (100, Some(11)),
            (102, None),
            (103, None),
            (104, Some(13)),
            (105, Some(13)),
            (101, Some(11)),
        ]
    );
    assert_eq!(signed, 4);
}

/// A policy whose GC hook exists only once the device reports GC copies
/// (as pcstream's GC streams on demand): host data by address into
/// streams 1..=5, copies round robin into 6..=8 once hooked.
struct LateHook {
    reports: u64,
    reported_gc: u64,
    asked: u64,
}

struct RoundRobin(u32);

impl pcstream_placement::GcPlacement for RoundRobin {
    fn collected(&mut self, _: Option<u32>, _: u64, _: u64) {}
    fn place_gc(&mut self, _: Option<u32>, _: u64, _: u64, _: u64) -> u32 {
        self.0 += 1;
        6 + self.0 % 3
    }
}

impl pcstream_placement::Placement for LateHook {
    fn name(&self) -> &str {
        "late-hook"
    }
    fn streams(&self) -> u32 {
        9
    }
    fn place(&mut self, w: &pcstream_placement::WriteCtx) -> u32 {
        1 + (w.lpn % 5) as u32
    }
    fn device_writes(&mut self, _host: u64, gc: u64) {
        self.reports += 1;
        self.reported_gc += gc;
    }
    fn gc_placement(&mut self) -> Option<Box<dyn pcstream_placement::GcPlacement + Send>> {
        self.asked += 1;
        (self.reported_gc > 0).then(|| Box::new(RoundRobin(0)) as _)
    }
}

/// The simulator reports the device's writes to the policy every
/// `DEVICE_REPORT_PAGES` host pages and asks for a GC hook again after
/// each report until it gets one. Installed mid-run on a full device
/// under GC, the hook's extra free blocks are collected first (without,
/// its copies ran out of free blocks: "no free block left for a write
/// frontier").
#[test]
fn a_gc_hook_can_arrive_mid_run_on_a_device_under_gc() {
    use pcstream_placement::placement::DEVICE_REPORT_PAGES;
    let logical = 16_384u64;
    let mut x = 7u64;
    let mut ops = Vec::new();
    for _ in 0..12 * logical {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        // Skewed: a quarter of the space takes most of the writes.
        let p = if (x >> 60) < 12 {
            (x >> 20) % (logical / 4)
        } else {
            (x >> 20) % logical
        };
        ops.push(w(p, 1));
    }
    let r = Replay::from_ops(ops, logical, Source::FsAlloc).unwrap();
    let spec = DeviceSpec {
        prefill: 0.0,
        ..DeviceSpec::default()
    };
    let l = layout(&r, &spec).unwrap();
    let mut ssd = aged_ssd(&r, &l).unwrap();
    let mut policy = LateHook {
        reports: 0,
        reported_gc: 0,
        asked: 0,
    };
    let mut fb = pass::DeviceFeedback::default();
    fb.ask_hook(&mut policy, &mut ssd);
    assert!(!fb.hooked);
    let mut slot = pass::PolicySlot {
        base: &mut policy,
        fresh: None,
    };
    let mut c = pass::RunCounters::for_streams(9);
    pass::run_pass(&r, &mut slot, None, &mut ssd, 0, &mut c, &mut fb).unwrap();
    assert!(fb.hooked, "hook installed once GC copied");
    let st = ssd.stats();
    assert!(st.gc_pages > 0);
    // Streams 6..=8 get no host data: their blocks hold the hook's copies.
    let gc_blocks: u64 = st.per_stream[6..9].iter().map(|s| s.blocks_opened).sum();
    assert!(gc_blocks > 0, "the hook placed copies: {:?}", st.per_stream);
    assert_eq!(policy.reports, 12 * logical / DEVICE_REPORT_PAGES);
    assert!(policy.asked > 1 && policy.asked <= policy.reports + 1);
    ssd.check_invariants().unwrap();
}

#[test]
fn explain_tells_a_writes_tail_from_its_history() {
    // A log written as PostgreSQL writes its WAL: every write covers the
    // page the previous one ended on (partly filled then, final now) and
    // two new pages, of which the last is partly filled and rewritten by
    // the next write; a ring of 600 pages reused. Each write's last page
    // lives 2 pages, the others until the ring comes round.
    const RING: u64 = 600;
    let mut ops = Vec::new();
    let mut pos = 0u64;
    for _ in 0..2000 {
        let lpn = pos % RING;
        let pages = if lpn + 3 > RING {
            (RING - lpn) as u32
        } else {
            3
        };
        ops.push(Op::Write {
            lpn,
            pages,
            file: Some((1, 1)),
            file_page: lpn,
            signature: Some(7),
            app_hint: 0,
            class: WriteClass::Data,
        });
        pos += u64::from(pages.max(2)) - 1;
    }
    let r = Replay::from_ops(ops, 4096, Source::GroundTruth).unwrap();
    let job = Job {
        replay: &r,
        policy: "pcstream".into(),
        spec: DeviceSpec::default(),
    };
    let rows = signatures::pcstream_signatures(&job, &PolicyConfig::default()).unwrap();
    let row = rows.iter().find(|r| r.signature == Some(7)).unwrap();
    assert!(row.device_spread_log2.unwrap() > 3.0, "{row:?}");
    // The place in the write says it all; the time since the address was
    // last written only tells the rewritten page (long now) from the two
    // new ones (one long, one short).
    let tail = row.explained_by_write_tail.unwrap();
    let history = row.explained_by_history.unwrap();
    assert!(tail > 0.95, "{row:?}");
    assert!(history < 0.5, "{row:?}");
}

#[test]
fn a_writes_typical_lifetime_is_the_geometric_mean_of_its_pages() {
    // The first write covers LBAs 0 and 1 (pages 0 and 1 of the pass);
    // LBA 0 is written again at page 2, LBA 1 at page 5.
    let ops = vec![w(0, 2), w(0, 1), w(5, 1), w(9, 1), w(1, 1), w(2, 1)];
    let r = Replay::from_ops(ops, 16, Source::FsAlloc).unwrap();
    assert_eq!(r.death(0), Some(2));
    assert_eq!(r.death(1), Some(5));
    // Lifetimes 2 and 4: 2^((1 + 2) / 2) = 2.83.
    assert_eq!(crate::pass::write_lifetime(&r, 0, 2), Some(3));
    // Never overwritten: no typical death.
    assert_eq!(crate::pass::write_lifetime(&r, 2, 1), None);
    // A page that dies and one that never does: the mean is 2^31, no
    // longer 2^60.
    assert_eq!(crate::pass::write_lifetime(&r, 1, 2), Some(1 << 31));
}

/// `compare --signatures` / `--explain` break down the measured run's own
/// placement: pcstream there hears the device (its reports decide whether
/// its GC stream ids go to its learners, which renumbers its streams), so
/// the breakdown drives it on a device too. Ten call paths rewrite ten
/// regions of a device at ten rates (×2 apart), no TRIM, one warm-up pass,
/// 50 % over-provisioning: every stream's pages in the breakdown add up to
/// what the simulated run wrote there (a breakdown without the device had
/// two streams' pages swapped here).
#[test]
fn the_signature_breakdown_is_the_measured_runs_placement() {
    const REGION: u64 = 512;
    const REGIONS: u64 = 10;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let write = |lpn: u64, sig: u64| Op::Write {
        lpn,
        pages: 4,
        file: Some((1, sig)),
        file_page: lpn,
        signature: Some(sig),
        app_hint: 0,
        class: WriteClass::Data,
    };
    // Lay out the whole space once, then rewrite: region j is picked with
    // weight 2^(REGIONS - j).
    let mut ops: Vec<Op> = (0..REGION * REGIONS)
        .step_by(4)
        .map(|lpn| write(lpn, 1 + lpn / REGION))
        .collect();
    let total = (1u64 << REGIONS) - 1;
    for _ in 0..30_000 {
        let mut r = rnd(total);
        let mut j = 0;
        while r >= 1 << (REGIONS - 1 - j) {
            r -= 1 << (REGIONS - 1 - j);
            j += 1;
        }
        ops.push(write(j * REGION + rnd(REGION / 4) * 4, 1 + j));
    }
    let mut r = Replay::from_ops(ops, REGION * REGIONS, Source::GroundTruth).unwrap();
    r.run_mode.warmup_passes = 1;
    let job = Job {
        replay: &r,
        policy: "pcstream".into(),
        spec: DeviceSpec {
            prefill: 0.0,
            op: 0.5,
            ..DeviceSpec::default()
        },
    };
    let cfg = PolicyConfig::default();
    let run = simulate(&job, &cfg).unwrap();
    assert!(
        run.stats.gc_pages > 0,
        "the device collects: {:?}",
        run.stats
    );
    let rows = signatures::pcstream_signatures(&job, &cfg).unwrap();
    let mut by_stream = vec![0u64; run.counters.pages_per_stream.len()];
    for row in &rows {
        for &(s, n) in &row.streams {
            by_stream[s as usize] += n;
        }
    }
    assert_eq!(by_stream, run.counters.pages_per_stream, "{rows:?}");
}
