//! Unit and property tests of the FTL core: map consistency, GC placement,
//! TRIM, pre-fill and the counters.

use super::*;
use crate::config::Geometry;
use proptest::prelude::*;

fn small(streams: u32, internal: bool, op: f64) -> Config {
    Config {
        geometry: Geometry {
            channels: 1,
            ways: 2,
            blocks_per_unit: 16,
            pages_per_block: 8,
            page_size: 4096,
        },
        op,
        streams,
        internal_streams: internal,
        shared_gc_block: false,
        gc: GcPolicy::Greedy,
        gc_free_blocks: 2,
        timing: None,
    }
}

#[test]
fn rejects_bad_arguments_without_side_effects() {
    let mut ssd = Ssd::new(small(2, false, 0.5)).unwrap();
    let l = ssd.logical_pages();
    assert_eq!(
        ssd.write(l, 0),
        Err(SimError::LpnOutOfRange { lpn: l, logical: l })
    );
    assert_eq!(
        ssd.write(0, 2),
        Err(SimError::StreamOutOfRange {
            stream: 2,
            streams: 2
        })
    );
    assert!(ssd.write_pages(l - 1, 2, 0).is_err());
    assert!(ssd.trim(u64::MAX, 2).is_err());
    assert_eq!(ssd.prefill(1.5, |_| 0), Err(SimError::BadFraction(1.5)));
    assert_eq!(ssd.stats().host_pages, 0);
    assert_eq!(ssd.lookup(l - 1), None);
    ssd.check_invariants().unwrap();
}

#[test]
fn sequential_overwrites_never_copy() {
    let mut ssd = Ssd::new(small(1, false, 0.3)).unwrap();
    let l = ssd.logical_pages();
    for round in 0..20 {
        for lpn in 0..l {
            ssd.write(lpn, 0).unwrap();
        }
        if round % 5 == 0 {
            ssd.check_invariants().unwrap();
        }
    }
    let s = ssd.stats();
    assert_eq!(s.host_pages, 20 * l);
    assert_eq!(s.gc_pages, 0);
    assert!(s.erases > 0);
    assert_eq!(s.waf, 1.0);
}

#[test]
fn trimmed_data_is_not_copied() {
    let mut ssd = Ssd::new(small(1, false, 0.3)).unwrap();
    let l = ssd.logical_pages();
    ssd.prefill(1.0, |_| 0).unwrap();
    assert_eq!(ssd.stats().valid_pages, l);
    assert_eq!(ssd.stats().host_pages, 0, "prefill resets the counters");
    // Trim everything, then write the space again: nothing valid is left to copy.
    ssd.trim(0, l).unwrap();
    assert_eq!(ssd.lookup(0), None);
    assert_eq!(ssd.stats().trimmed_pages, l);
    for lpn in 0..l {
        ssd.write((lpn * 7) % l, 0).unwrap();
    }
    ssd.check_invariants().unwrap();
    assert_eq!(ssd.stats().gc_pages, 0);
}

fn parity_stream(lpn: u64) -> u32 {
    if lpn.is_multiple_of(2) {
        1
    } else {
        0
    }
}

/// `n` writes to pseudo-random pages (a fixed LCG), each through `stream(lpn)`.
fn random_writes(ssd: &mut Ssd, n: u64, stream: impl Fn(u64) -> u32) {
    let l = ssd.logical_pages();
    let mut x = 1u64;
    for _ in 0..n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let lpn = (x >> 33) % l;
        ssd.write(lpn, stream(lpn)).unwrap();
    }
}

#[test]
fn gc_copies_go_to_the_victims_internal_stream() {
    let mut ssd = Ssd::new(small(3, true, 0.5)).unwrap();
    let l = ssd.logical_pages();
    // Even pages in stream 1, odd ones in stream 0, rewritten at random.
    ssd.prefill(1.0, parity_stream).unwrap();
    random_writes(&mut ssd, 20 * l, parity_stream);
    ssd.check_invariants().unwrap();
    let mut internal = 0;
    for lpn in 0..l {
        match ssd.residence(lpn).unwrap() {
            Residence::Host(s) => assert_eq!(s, parity_stream(lpn)),
            Residence::Internal(s) => {
                internal += 1;
                assert_eq!(s, parity_stream(lpn), "lpn {lpn}");
            }
            Residence::Gc => panic!("no shared GC stream with internal streams"),
        }
    }
    assert!(internal > 0);
    let st = ssd.stats();
    assert!(st.per_stream[1].internal_blocks > 0);
    assert_eq!(st.gc_stream_blocks, 0);
    assert_eq!(
        st.per_stream.iter().map(|p| p.gc_pages).sum::<u64>(),
        st.gc_pages
    );
}

#[test]
fn without_internal_streams_copies_go_back_into_their_stream() {
    let mut ssd = Ssd::new(small(2, false, 0.5)).unwrap();
    let l = ssd.logical_pages();
    ssd.prefill(1.0, parity_stream).unwrap();
    random_writes(&mut ssd, 20 * l, parity_stream);
    ssd.check_invariants().unwrap();
    let st = ssd.stats();
    assert!(st.gc_pages > 0);
    assert_eq!(st.gc_stream_blocks, 0);
    for lpn in 0..l {
        assert_eq!(
            ssd.residence(lpn),
            Some(Residence::Host(parity_stream(lpn))),
            "lpn {lpn}"
        );
    }
    assert_eq!(
        st.per_stream.iter().map(|p| p.gc_pages).sum::<u64>(),
        st.gc_pages
    );
}

#[test]
fn with_a_shared_gc_block_copies_share_one_gc_stream() {
    let cfg = Config {
        shared_gc_block: true,
        ..small(2, false, 0.5)
    };
    let mut ssd = Ssd::new(cfg).unwrap();
    let l = ssd.logical_pages();
    ssd.prefill(1.0, parity_stream).unwrap();
    random_writes(&mut ssd, 20 * l, parity_stream);
    ssd.check_invariants().unwrap();
    let st = ssd.stats();
    assert!(st.gc_pages > 0);
    assert!(st.gc_stream_blocks > 0);
    assert!((0..l).any(|lpn| ssd.residence(lpn) == Some(Residence::Gc)));
}

#[test]
fn lifetimes_are_counted_in_host_pages_per_stream() {
    let mut ssd = Ssd::new(small(2, false, 0.5)).unwrap();
    ssd.write(0, 1).unwrap(); // t = 0
    for lpn in 1..100 {
        ssd.write(lpn, 0).unwrap();
    }
    ssd.write(0, 0).unwrap(); // t = 100: the stream-1 page lived 100 host pages
    ssd.trim(1, 1).unwrap(); // t = 101: page 1 (stream 0, written at t = 1) lived 100
    let st = ssd.stats();
    let l1 = st.per_stream[1].lifetime;
    assert_eq!(l1.count, 1);
    assert_eq!(l1.mean, Some(100.0));
    assert!(l1.p50.unwrap() >= 96.0 && l1.p50.unwrap() <= 100.0);
    let l0 = st.per_stream[0].lifetime;
    assert_eq!((l0.count, l0.mean), (1, Some(100.0)));
    assert_eq!(st.per_stream[1].host_pages, 1);
    assert_eq!(st.per_stream[0].host_pages, 100);
}

#[test]
fn cost_benefit_prefers_an_old_block_to_a_young_emptier_one() {
    let mut ssd = Ssd::new(small(2, false, 0.5)).unwrap();
    let ppb = u64::from(ssd.ppb);
    // Block X: pages 0..8 (stream 0) written first; then 92 more pages; then
    // block Y: pages 100..108 (stream 1) written last.
    for lpn in 0..100 {
        ssd.write(lpn, 0).unwrap();
    }
    for lpn in 100..108 {
        ssd.write(lpn, 1).unwrap();
    }
    let x = (ssd.lookup(0).unwrap() / ppb) as u32;
    let y = (ssd.lookup(100).unwrap() / ppb) as u32;
    ssd.trim(0, 3).unwrap(); // X: 5 valid, old
    ssd.trim(100, 4).unwrap(); // Y: 4 valid, young
    assert_eq!(ssd.pick_cost_benefit(), Some((x, 5)));
    ssd.buckets.insert(x, 5);
    assert_eq!(
        ssd.buckets.pop_min(),
        Some((y, 4)),
        "greedy takes the emptier one"
    );
    ssd.buckets.insert(y, 4);
    ssd.check_invariants().unwrap();
}

#[test]
fn cost_benefit_runs_consistently() {
    let mut cfg = small(1, false, 0.5);
    cfg.gc = GcPolicy::CostBenefit;
    let mut ssd = Ssd::new(cfg).unwrap();
    let l = ssd.logical_pages();
    ssd.prefill(1.0, |_| 0).unwrap();
    random_writes(&mut ssd, 20 * l, |_| 0);
    ssd.check_invariants().unwrap();
    let s = ssd.stats();
    assert!(s.gc_victims > 0 && s.waf > 1.0);
}

#[test]
fn timing_estimate_is_reported_when_configured() {
    let mut cfg = small(1, false, 0.5);
    cfg.timing = Some(crate::Timing::default());
    let mut ssd = Ssd::new(cfg).unwrap();
    for lpn in 0..50 {
        ssd.write(lpn, 0).unwrap();
    }
    let t = ssd.stats().throughput.unwrap();
    assert!(t.host_pages_per_s > 0.0 && t.seconds > 0.0);
    assert!(Ssd::new(small(1, false, 0.5))
        .unwrap()
        .stats()
        .throughput
        .is_none());
}

#[derive(Debug, Clone)]
enum Op {
    Write(u64, u32),
    Trim(u64, u64),
    Gc,
    Reset,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (any::<u64>(), 0u32..4).prop_map(|(l, s)| Op::Write(l, s)),
        1 => (any::<u64>(), 1u64..6).prop_map(|(l, n)| Op::Trim(l, n)),
        1 => Just(Op::Gc),
        1 => Just(Op::Reset),
    ]
}

fn config() -> impl Strategy<Value = Config> {
    (
        1u32..3,
        8u32..20,
        2u32..9,
        0.25f64..1.0,
        1u32..5,
        any::<bool>(),
        any::<bool>(),
        2u32..4,
        any::<bool>(),
    )
        .prop_map(
            |(ways, bpu, ppb, op, streams, internal, cb, wm, shared)| Config {
                geometry: Geometry {
                    channels: 1,
                    ways,
                    blocks_per_unit: bpu,
                    pages_per_block: ppb,
                    page_size: 4096,
                },
                op,
                streams,
                internal_streams: internal,
                shared_gc_block: shared,
                gc: if cb {
                    GcPolicy::CostBenefit
                } else {
                    GcPolicy::Greedy
                },
                gc_free_blocks: wm,
                timing: None,
            },
        )
        .prop_filter("enough spare blocks", |c| c.validate().is_ok())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// After any sequence of writes, trims, forced GC steps and counter
    /// resets: the maps agree, valid counts match, every block is free, open
    /// or closed, every page reads back with the tag of its last write, and
    /// every page sits in its last stream's host block (untouched since the
    /// write) or in that stream's internal stream / the shared GC stream.
    #[test]
    fn maps_counts_and_data_stay_consistent(cfg in config(), ops in prop::collection::vec(op(), 1..600)) {
        let mut ssd = Ssd::new(cfg.clone()).unwrap();
        let l = ssd.logical_pages();
        let nblocks = cfg.geometry.blocks();
        // Shadow: lpn → (tag, stream, ppn right after the host write).
        let mut shadow: Vec<Option<(u64, u32, u64)>> = vec![None; l as usize];
        let mut host_since_reset = 0u64;
        for (i, o) in ops.iter().enumerate() {
            match *o {
                Op::Write(lpn, s) => {
                    let lpn = lpn % l;
                    let s = s % cfg.streams;
                    let tag = i as u64 + 1;
                    ssd.write_tagged(lpn, s, tag).unwrap();
                    shadow[lpn as usize] = Some((tag, s, ssd.lookup(lpn).unwrap()));
                    host_since_reset += 1;
                }
                Op::Trim(lpn, n) => {
                    let lpn = lpn % l;
                    let n = n.min(l - lpn);
                    ssd.trim(lpn, n).unwrap();
                    for p in lpn..lpn + n {
                        shadow[p as usize] = None;
                    }
                }
                Op::Gc => {
                    ssd.gc_step().unwrap();
                }
                Op::Reset => {
                    ssd.reset_stats();
                    host_since_reset = 0;
                }
            }
            if let Err(e) = ssd.check_invariants() {
                prop_assert!(false, "after op {i} {o:?}: {e}");
            }
            let c = ssd.block_counts();
            prop_assert_eq!(c.free + c.open + c.closed, nblocks);
        }
        let st = ssd.stats();
        prop_assert_eq!(st.host_pages, host_since_reset);
        prop_assert_eq!(st.per_stream.iter().map(|p| p.host_pages).sum::<u64>(), st.host_pages);
        prop_assert_eq!(st.per_stream.iter().map(|p| p.gc_pages).sum::<u64>(), st.gc_pages);
        prop_assert_eq!(st.valid_pages, shadow.iter().filter(|s| s.is_some()).count() as u64);
        for (lpn, want) in shadow.iter().enumerate() {
            let lpn = lpn as u64;
            match *want {
                None => prop_assert_eq!(ssd.read_tag(lpn), None),
                Some((tag, s, ppn)) => {
                    prop_assert_eq!(ssd.read_tag(lpn), Some(tag), "lpn {}", lpn);
                    match ssd.residence(lpn).unwrap() {
                        Residence::Host(k) => {
                            prop_assert_eq!(k, s);
                            // Only a device that copies back into the stream moves pages between host blocks.
                            if cfg.internal_streams || cfg.shared_gc_block {
                                prop_assert_eq!(ssd.lookup(lpn), Some(ppn), "GC wrote into a host block");
                            }
                        }
                        Residence::Internal(k) => {
                            prop_assert!(cfg.internal_streams);
                            prop_assert_eq!(k, s);
                        }
                        Residence::Gc => prop_assert!(!cfg.internal_streams && cfg.shared_gc_block),
                    }
                }
            }
        }
    }
}

#[test]
fn write_batch_is_the_same_as_single_writes() {
    let cfg = small(3, true, 0.5);
    let (mut a, mut b) = (Ssd::new(cfg.clone()).unwrap(), Ssd::new(cfg).unwrap());
    let l = a.logical_pages();
    let mut x = 7u64;
    let ops: Vec<(u64, u32)> = (0..5000)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 33) % l, ((x >> 20) % 3) as u32)
        })
        .collect();
    for &(lpn, s) in &ops {
        a.write(lpn, s).unwrap();
    }
    for chunk in ops.chunks(100) {
        b.write_batch(chunk).unwrap();
    }
    assert_eq!(a.stats(), b.stats());
    for lpn in 0..l {
        assert_eq!(a.lookup(lpn), b.lookup(lpn));
    }
    // An invalid write stops the batch there, after the valid ones before it.
    assert!(b.write_batch(&[(0, 0), (l, 0), (1, 0)]).is_err());
    assert_eq!(b.stats().host_pages, a.stats().host_pages + 1);
}

/// A GC hook for the tests: copies of pages older than `old` go to stream
/// 2, younger ones to stream 1; it counts the victims it hears of.
struct AgeHook {
    old: u64,
    victims: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl pcstream_placement::GcPlacement for AgeHook {
    fn collected(&mut self, stream: Option<StreamId>, opened: u64, now: u64) {
        assert!(opened <= now);
        assert!(stream.is_some_and(|s| s < 3), "{stream:?}");
        self.victims
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    fn place_gc(
        &mut self,
        _stream: Option<StreamId>,
        _lpn: u64,
        written: u64,
        now: u64,
    ) -> StreamId {
        assert!(written <= now);
        if now - written >= self.old {
            2
        } else {
            1
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// With a policy's GC hook, under any writes, trims and forced GC
    /// steps: every page reads back with the tag of its last write, the
    /// maps and counts agree, and the hook heard every victim.
    #[test]
    fn gc_hook_keeps_data_and_counts(internal in any::<bool>(), old in 1u64..400, ops in prop::collection::vec(op(), 1..600)) {
        let mut ssd = Ssd::new(small(3, internal, 0.5)).unwrap();
        let victims = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        ssd.set_gc_placement(Box::new(AgeHook { old, victims: victims.clone() }));
        let l = ssd.logical_pages();
        let mut shadow: Vec<Option<u64>> = vec![None; l as usize];
        for (i, o) in ops.iter().enumerate() {
            match *o {
                Op::Write(lpn, s) => {
                    let lpn = lpn % l;
                    ssd.write_tagged(lpn, s % 3, i as u64 + 1).unwrap();
                    shadow[lpn as usize] = Some(i as u64 + 1);
                }
                Op::Trim(lpn, n) => {
                    let lpn = lpn % l;
                    let n = n.min(l - lpn);
                    ssd.trim(lpn, n).unwrap();
                    for p in lpn..lpn + n {
                        shadow[p as usize] = None;
                    }
                }
                Op::Gc => {
                    ssd.gc_step().unwrap();
                }
                Op::Reset => ssd.reset_stats(),
            }
            if let Err(e) = ssd.check_invariants() {
                prop_assert!(false, "after op {i} {o:?}: {e}");
            }
        }
        for (lpn, want) in shadow.iter().enumerate() {
            prop_assert_eq!(ssd.read_tag(lpn as u64), *want);
        }
        let st = ssd.stats();
        prop_assert_eq!(st.per_stream.iter().map(|p| p.gc_pages).sum::<u64>(), st.gc_pages);
        prop_assert_eq!(st.per_stream[0].internal_blocks, 0);
        prop_assert!(victims.load(std::sync::atomic::Ordering::Relaxed) >= st.gc_victims);
    }
}

#[test]
fn gc_hook_separates_old_copies_from_young_ones() {
    let mut ssd = Ssd::new(small(3, false, 0.5)).unwrap();
    let victims = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let l = ssd.logical_pages();
    ssd.set_gc_placement(Box::new(AgeHook {
        old: 4 * l,
        victims: victims.clone(),
    }));
    // Half the pages written once and never again (cold), the other half
    // rewritten at random through stream 0.
    for lpn in 0..l / 2 {
        ssd.write(lpn, 0).unwrap();
    }
    let mut x = 7u64;
    for _ in 0..20 * l {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ssd.write(l / 2 + (x >> 33) % (l / 2), 0).unwrap();
    }
    ssd.check_invariants().unwrap();
    assert!(victims.load(std::sync::atomic::Ordering::Relaxed) > 0);
    // Every cold page that was copied is in stream 2's blocks by now.
    let st = ssd.stats();
    assert!(st.per_stream[2].blocks > 0, "{st:?}");
    assert_eq!(st.per_stream[0].internal_blocks, 0);
}
