//! Tests of the lifetime manager: its tables against a naive page map,
//! segments, evictions, the estimate, live pages and Little's law.

use super::*;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Ev {
    Write {
        space: u8,
        first: u64,
        pages: u64,
        sig: u64,
    },
    Invalidate {
        space: u8,
        first: u64,
        pages: u64,
    },
}

fn ev() -> impl Strategy<Value = Ev> {
    prop_oneof![
        3 => (0u8..3, 0u64..64, 1u64..9, 1u64..4)
            .prop_map(|(space, first, pages, sig)| Ev::Write { space, first, pages, sig }),
        1 => (0u8..3, 0u64..64, prop_oneof![1u64..16, Just(TO_END)])
            .prop_map(|(space, first, pages)| Ev::Invalidate { space, first, pages }),
    ]
}

proptest! {
    /// At any granularity every page's death is counted once, for the
    /// signature that wrote it (only its birth may be approximated, by
    /// an append merging into an older segment), and its live pages are
    /// the pages of it a naive page map still holds.
    #[test]
    fn coarse_chunks_credit_every_death_to_its_writer(
        evs in proptest::collection::vec(ev(), 1..200),
        cp in prop_oneof![Just(4u32), Just(16), Just(256)],
    ) {
        let mut m = LifetimeManager::new(LifetimeConfig {
            chunk_pages: cp,
            ..Default::default()
        });
        let mut naive: BTreeMap<(u8, u64), u64> = BTreeMap::new();
        let mut dead: BTreeMap<u64, u64> = BTreeMap::new();
        let mut now = 0u64;
        for e in &evs {
            let (space, first, pages, sig) = match *e {
                Ev::Write { space, first, pages, sig } => (space, first, pages, Some(sig)),
                Ev::Invalidate { space, first, pages } => (space, first, pages, None),
            };
            let last = first.saturating_add(pages - 1);
            let keys: Vec<_> = naive.range((space, first)..=(space, last)).map(|(k, _)| *k).collect();
            for k in keys {
                *dead.entry(naive.remove(&k).unwrap()).or_default() += 1;
            }
            match sig {
                Some(sig) => {
                    m.write((1, u64::from(space)), first, pages, sig, now);
                    for p in first..first + pages {
                        naive.insert((space, p), sig);
                    }
                    now += pages;
                }
                None => m.invalidate((1, u64::from(space)), first, pages, now),
            }
        }
        for (sig, s) in m.sigs_sorted() {
            prop_assert_eq!(s.dead_pages, dead.get(&sig).copied().unwrap_or(0), "sig {}", sig);
            let held = naive.values().filter(|&&v| v == sig).count() as u64;
            prop_assert_eq!(s.live_pages(), held, "sig {}", sig);
            // What the manager makes always passes the check a loaded
            // table gets.
            prop_assert_eq!(s.check(), Ok(()), "sig {}", sig);
        }
    }

    /// At 4 KiB granularity the manager agrees with a naive page map on
    /// every signature's dead pages and lifetime histogram; with a cap,
    /// written = live + dead + evicted pages.
    #[test]
    fn exact_granularity_matches_a_naive_page_map(
        evs in proptest::collection::vec(ev(), 1..200),
        cap in prop_oneof![Just(1usize << 20), 1usize..40],
    ) {
        let mut m = LifetimeManager::new(LifetimeConfig {
            chunk_pages: 1,
            max_entries: cap,
            ewma_alpha_per_mib: 0.5,
        });
        let mut naive: BTreeMap<(u8, u64), (u64, u64)> = BTreeMap::new();
        let mut dead: BTreeMap<u64, (u64, Vec<u64>)> = BTreeMap::new();
        let mut now = 0u64;
        let mut kill = |naive: &mut BTreeMap<(u8, u64), (u64, u64)>, key, now: u64| {
            if let Some((born, sig)) = naive.remove(&key) {
                let e = dead.entry(sig).or_insert((0, vec![0; HIST_BUCKETS]));
                e.0 += 1;
                e.1[((now - born).max(1) as f64).log2() as usize] += 1;
            }
        };
        for e in &evs {
            match *e {
                Ev::Write { space, first, pages, sig } => {
                    m.write((1, u64::from(space)), first, pages, sig, now);
                    for p in first..first + pages {
                        kill(&mut naive, (space, p), now);
                        naive.insert((space, p), (now, sig));
                    }
                    now += pages;
                }
                Ev::Invalidate { space, first, pages } => {
                    m.invalidate((1, u64::from(space)), first, pages, now);
                    let keys: Vec<_> = naive
                        .range((space, first)..=(space, first.saturating_add(pages - 1)))
                        .map(|(k, _)| *k)
                        .collect();
                    for k in keys {
                        kill(&mut naive, k, now);
                    }
                }
            }
        }
        let written: u64 = m.sigs_sorted().iter().map(|(_, s)| s.written_pages).sum();
        let dead_total: u64 = m.sigs_sorted().iter().map(|(_, s)| s.dead_pages).sum();
        prop_assert_eq!(
            written,
            m.live_entries() as u64 + dead_total + m.counters().evictions
        );
        prop_assert!(m.live_entries() <= cap);
        let live: u64 = m.sigs_sorted().iter().map(|(_, s)| s.live_pages()).sum();
        prop_assert_eq!(live, m.live_entries() as u64);
        if cap > 1000 {
            prop_assert_eq!(m.live_entries(), naive.len());
            for (sig, s) in m.sigs_sorted() {
                let held = naive.values().filter(|v| v.1 == sig).count() as u64;
                prop_assert_eq!(s.live_pages(), held, "sig {}", sig);
                let (n, hist) = dead.get(&sig).cloned().unwrap_or((0, vec![0; HIST_BUCKETS]));
                prop_assert_eq!(s.dead_pages, n, "sig {}", sig);
                prop_assert_eq!(&s.hist, &hist, "sig {}", sig);
            }
        }
    }
}

fn exact() -> LifetimeManager {
    LifetimeManager::new(LifetimeConfig {
        chunk_pages: 1,
        max_entries: 1 << 20,
        ewma_alpha_per_mib: 1.0,
    })
}

const F: SpaceKey = (1, 10);

#[test]
fn overwrite_measures_lifetime_in_pages_written() {
    let mut m = exact();
    m.write(F, 0, 4, 7, 0);
    m.write(LBA_SPACE, 100, 60, 8, 4);
    m.write(F, 0, 4, 7, 64);
    let s = m.sig(7).unwrap();
    assert_eq!(s.deaths, 4);
    assert_eq!(s.dead_pages, 4);
    assert!((s.estimate_log2().unwrap() - 6.0).abs() < 1e-9);
    assert_eq!(s.hist[6], 4);
    assert_eq!(m.sig(8).unwrap().deaths, 0);
    assert_eq!(m.sig(8).unwrap().estimate_log2(), None);
}

#[test]
fn unlink_and_truncate_end_lives() {
    let mut m = exact();
    m.write(F, 0, 10, 1, 0);
    m.invalidate(F, 6, TO_END, 32);
    assert_eq!(m.sig(1).unwrap().dead_pages, 4);
    assert_eq!(m.live_entries(), 6);
    m.invalidate(F, 0, TO_END, 1024);
    let s = m.sig(1).unwrap();
    assert_eq!(s.dead_pages, 10);
    assert_eq!(m.live_entries(), 0);
    // 4 pages at 2^5, 6 pages at 2^10: page-weighted mean 8.
    assert!((s.mean_log2 - 8.0).abs() < 1e-9, "{}", s.mean_log2);
    assert!((s.variance_log2().unwrap() - 6.0).abs() < 1e-9);
    // Nothing left: a second unlink is a no-op.
    m.invalidate(F, 0, TO_END, 2000);
    assert_eq!(m.sig(1).unwrap().dead_pages, 10);
}

#[test]
fn coarse_chunks_treat_appends_as_appends() {
    let mut m = LifetimeManager::new(LifetimeConfig {
        chunk_pages: 256,
        ..Default::default()
    });
    for p in 0..512 {
        m.write(F, p, 1, 3, p);
    }
    assert_eq!(m.sig(3).unwrap().deaths, 0, "appends are not overwrites");
    assert_eq!(m.live_entries(), 2);
    m.invalidate(F, 0, TO_END, 700);
    let s = m.sig(3).unwrap();
    assert_eq!(s.dead_pages, 512);
    assert_eq!(s.deaths, 2);
    // Chunk 0 born at 0 (lifetime 700), chunk 1 born at 256 (lifetime 444).
    assert_eq!(s.hist[9], 256);
    assert_eq!(s.hist[8], 256);
    // Overwriting inside a live extent is a death of the overlapped pages.
    m.write(F, 0, 8, 3, 2000);
    m.write(F, 4, 8, 3, 2100);
    assert_eq!(m.sig(3).unwrap().dead_pages, 516);
}

#[test]
fn a_hole_punched_inside_a_segment_splits_it_and_both_sides_keep_their_birth() {
    let mut c = LifetimeManager::new(LifetimeConfig {
        chunk_pages: 16,
        ..Default::default()
    });
    c.write(F, 0, 16, 1, 0);
    c.invalidate(F, 4, 4, 100);
    assert_eq!(c.sig(1).unwrap().dead_pages, 4);
    assert_eq!(c.live_entries(), 2, "pages on both sides still live");
    c.invalidate(F, 0, TO_END, 1 << 12);
    let s = c.sig(1).unwrap();
    assert_eq!(s.dead_pages, 16);
    assert_eq!(s.hist[12], 12, "born at 0, not at the punch");
    assert_eq!(c.live_entries(), 0);
    c.write((1, 11), 0, 16, 1, 0);
    c.invalidate((1, 11), 0, 4, 200);
    c.invalidate((1, 11), 4, 12, 200);
    assert_eq!(c.sig(1).unwrap().dead_pages, 32);
    assert_eq!(c.live_entries(), 0, "a prefix then the rest empty it");
}

#[test]
fn rewriting_a_chunk_piece_by_piece_gives_every_page_its_own_lifetime() {
    // cp over an existing file, or the replay's second pass: each write
    // ends the lives of the pages it covers, and only those. (A chunk
    // re-stamped whole at the first write made every later piece a
    // death of age ≈ 0.)
    let mut m = LifetimeManager::new(LifetimeConfig::default());
    m.write(F, 0, 256, 5, 0);
    for piece in 0..8u64 {
        m.write(F, piece * 32, 32, 5, 4096 + piece * 32);
    }
    let s = m.sig(5).unwrap();
    assert_eq!(s.dead_pages, 256);
    assert_eq!(s.hist[12], 256, "every page lived 4096 pages: {:?}", s.hist);
    assert_eq!(m.live_entries(), 8, "each rewritten piece keeps its birth");
}

#[test]
fn an_overwrite_next_to_an_old_segment_keeps_its_own_birth() {
    // SQLite's pager: page 6 rewritten long after pages 0..6 were
    // written by the same code path. An append would extend their
    // segment; an overwrite must not inherit its birth.
    let mut m = LifetimeManager::new(LifetimeConfig::default());
    m.write(F, 0, 7, 9, 0);
    m.write(F, 6, 1, 9, 1000); // page 6 overwritten: lifetime 1000
    m.write(F, 6, 1, 9, 1016); // and again 16 pages later
    let s = m.sig(9).unwrap();
    assert_eq!(s.dead_pages, 2);
    assert_eq!(s.hist[9], 1, "{:?}", s.hist); // 1000 ∈ [2^9, 2^10)
    assert_eq!(s.hist[4], 1, "{:?}", s.hist); // 16, not 1016
                                              // A true append still extends the neighbour (one entry per run).
    m.write(F, 7, 1, 9, 1020);
    assert_eq!(m.live_entries(), 2);
}

#[test]
fn each_signature_appending_to_a_chunk_is_credited_with_its_own_pages() {
    // A compiler's .s file: stdio flushes from many call sites append
    // to one 1 MiB chunk; the file's death belongs to all of them.
    let mut m = LifetimeManager::new(LifetimeConfig::default());
    for k in 0..12u64 {
        m.write(F, k, 1, 100 + k % 3, k);
    }
    m.invalidate(F, 0, TO_END, 64);
    for sig in 100..103 {
        assert_eq!(m.sig(sig).unwrap().dead_pages, 4, "sig {sig}");
    }
    assert_eq!(m.live_entries(), 0);
}

#[test]
fn lru_cap_evicts_least_recently_used() {
    let mut m = LifetimeManager::new(LifetimeConfig {
        chunk_pages: 1,
        max_entries: 3,
        ewma_alpha_per_mib: 0.5,
    });
    m.write(LBA_SPACE, 0, 1, 1, 0);
    m.write(LBA_SPACE, 1, 1, 1, 1);
    m.write(LBA_SPACE, 2, 1, 1, 2);
    m.write(LBA_SPACE, 0, 1, 1, 3); // touches page 0 (death, re-stamped)
    m.write(LBA_SPACE, 3, 1, 1, 4); // evicts page 1, the LRU
    assert_eq!(m.live_entries(), 3);
    assert_eq!(m.counters().evictions, 1);
    let before = m.sig(1).unwrap().deaths;
    m.invalidate(LBA_SPACE, 1, 1, 10);
    assert_eq!(
        m.sig(1).unwrap().deaths,
        before,
        "evicted page is forgotten"
    );
    m.invalidate(LBA_SPACE, 0, 1, 10);
    assert_eq!(m.sig(1).unwrap().deaths, before + 1);
}

#[test]
fn a_young_signature_is_estimated_by_the_mean_of_its_deaths_not_its_first() {
    // gcc's `as`: the header page of each object dies at once (the
    // assembler rewrites it), the other pages when the unit is rebuilt.
    // The first death seen is a header's; an uncorrected EWMA (start at
    // the first value, move by alpha per MiB) would still sit near it
    // after a few MiB of long deaths.
    let mut m = LifetimeManager::new(LifetimeConfig {
        chunk_pages: 1,
        max_entries: 1 << 20,
        ewma_alpha_per_mib: 0.125,
    });
    let mut now = 0;
    for obj in 0..64u64 {
        let base = obj * 8;
        m.write(F, base, 8, 7, now);
        m.write(F, base, 1, 7, now + 1); // header rewritten: lifetime 1
        now += 8;
    }
    now += 4096;
    m.invalidate(F, 0, TO_END, now); // every object dies ≈ 2^12 later
    let s = m.sig(7).unwrap();
    assert_eq!(s.dead_pages, 64 * 8 + 64);
    let est = s.estimate_log2().unwrap();
    assert!(
        (est - s.mean_log2).abs() < 0.6,
        "estimate {est} should be near the mean {}",
        s.mean_log2
    );
    assert!(est > 9.0, "long deaths dominate the volume: {est}");
}

#[test]
fn ewma_weight_is_per_mib_not_per_chunk() {
    let cfg = |cp| LifetimeConfig {
        chunk_pages: cp,
        max_entries: 1 << 20,
        ewma_alpha_per_mib: 0.25,
    };
    let mut fine = LifetimeManager::new(cfg(1));
    let mut coarse = LifetimeManager::new(cfg(256));
    for m in [&mut fine, &mut coarse] {
        m.write(F, 0, 256, 1, 0);
        m.invalidate(F, 0, TO_END, 16);
        m.write(F, 0, 256, 1, 100);
        m.invalidate(F, 0, TO_END, 100 + 4096);
    }
    let (a, b) = (
        fine.sig(1).unwrap().estimate_log2().unwrap(),
        coarse.sig(1).unwrap().estimate_log2().unwrap(),
    );
    assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    // Bias-corrected: the first MiB (at 2^4) has weight 0.25 and keeps
    // 0.75 of it; the second (at 2^12) gets 0.25.
    let want = (0.75 * 0.25 * 4.0 + 0.25 * 12.0) / (0.75 * 0.25 + 0.25);
    assert!((b - want).abs() < 1e-6, "{b} vs {want}");
}

#[test]
fn end_of_page_space_does_not_overflow() {
    for cp in [1, 3, 256] {
        let mut m = LifetimeManager::new(LifetimeConfig {
            chunk_pages: cp,
            ..Default::default()
        });
        m.write(F, u64::MAX - 3, 10, 1, 0);
        m.write(F, u64::MAX, 10, 1, 1);
        m.write(F, u64::MAX - 1, 1, 1, 2);
        m.invalidate(F, u64::MAX - 5, TO_END, 3);
        m.invalidate(F, u64::MAX, 1, 4);
        assert_eq!(m.live_entries(), 0, "chunk {cp}");
        assert_eq!(m.sig(1).unwrap().written_pages, 4);
    }
}

#[test]
fn huge_write_is_bounded_by_the_cap() {
    let mut m = LifetimeManager::new(LifetimeConfig {
        chunk_pages: 1,
        max_entries: 100,
        ewma_alpha_per_mib: 0.5,
    });
    m.write(F, 10, 50, 1, 0);
    m.write(F, 0, u64::from(u32::MAX), 2, 50);
    assert_eq!(m.live_entries(), 100);
    assert_eq!(m.sig(1).unwrap().dead_pages, 50, "overwritten lives ended");
    assert_eq!(m.sig(2).unwrap().written_pages, u64::from(u32::MAX));
    m.invalidate(F, u64::from(u32::MAX) - 100, 100, 100);
    assert_eq!(m.live_entries(), 0, "the tail of the write was kept");
}

#[test]
fn unknown_signature_overwrites_end_lives_without_attribution() {
    let mut m = exact();
    m.write(F, 0, 1, 5, 0);
    m.write(F, 0, 1, 0, 8);
    assert_eq!(m.sig(5).unwrap().deaths, 1);
    assert!(m.sig(0).is_none());
    m.write(F, 0, 1, 5, 16);
    assert_eq!(
        m.sig(5).unwrap().deaths,
        1,
        "death of unknown data is not counted"
    );
}

#[test]
fn live_pages_are_written_minus_dead_minus_evicted() {
    let mut m = exact();
    m.write(LBA_SPACE, 0, 100, 1, 0);
    m.write(LBA_SPACE, 0, 30, 2, 100);
    m.invalidate(LBA_SPACE, 90, 20, 130);
    let s = m.sig(1).unwrap();
    assert_eq!(
        (s.written_pages, s.dead_pages, s.live_pages()),
        (100, 40, 60)
    );
    assert_eq!(m.sig(2).unwrap().live_pages(), 30);
    // A table of 8 segments: the oldest are evicted unheard.
    let mut m = LifetimeManager::new(LifetimeConfig {
        chunk_pages: 1,
        max_entries: 8,
        ewma_alpha_per_mib: 1.0,
    });
    for p in 0..20 {
        m.write(LBA_SPACE, p * 2, 1, 7, p);
    }
    let s = m.sig(7).unwrap();
    assert_eq!(
        (s.dead_pages, s.untracked_pages, s.live_pages()),
        (0, 12, 8)
    );
    // A loaded table's pages are not in the new live table.
    let saved = m.sigs_sorted().into_iter().map(|(k, s)| (k, s.clone()));
    let mut fresh = exact();
    fresh.load_sigs(saved.collect::<Vec<_>>());
    assert_eq!(fresh.sig(7).unwrap().live_pages(), 0);
}

/// 1000 pages written at one per tick, a tenth of them overwritten
/// 10 ticks later and the rest never: the deaths heard say 2^3.3, the
/// live pages say what the data does (1000 of the 1100 written stay
/// while the signature writes 1.1 pages per tick: ≈ 2^9.6).
#[test]
fn little_sees_the_data_that_stays() {
    let mut m = exact();
    let mut t = 0;
    for p in 0..1000 {
        m.write(LBA_SPACE, p, 1, 1, t);
        t += 1;
        if p % 10 == 9 {
            m.write(LBA_SPACE, p, 1, 1, t + 9);
        }
    }
    let s = m.sig(1).unwrap();
    let ewma = s.estimate_log2().unwrap();
    let little = s.little_log2(t).unwrap();
    assert!(ewma < 4.0, "{ewma}");
    assert!((9.0..10.5).contains(&little), "{little}");
    assert!(s.dead_share() < 0.1);
    // Nothing died: the age.
    let mut m = exact();
    m.write(LBA_SPACE, 0, 64, 5, 100);
    assert_eq!(m.sig(5).unwrap().little_log2(100 + 4096), Some(12.0));
}
