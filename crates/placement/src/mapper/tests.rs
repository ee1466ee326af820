//! Tests of the mapper: clustering, re-clustering rules, censored and
//! partly censored estimates, the resolution floor.

use super::*;
use crate::lifetime::{LifetimeConfig, LBA_SPACE};

fn lm() -> LifetimeManager {
    LifetimeManager::new(LifetimeConfig {
        chunk_pages: 1,
        max_entries: 1 << 20,
        ewma_alpha_per_mib: 1.0,
    })
}

#[test]
fn unknown_signatures_map_to_stream_zero_and_order_follows_lifetime() {
    let mut m = lm();
    let cfg = MapperConfig {
        check_interval: 10,
        censor: false,
        ..Default::default()
    };
    let mut map = Mapper::new(3, cfg);
    // sig 1 lives 2 pages, sig 2 lives 1000 pages, sig 3 never dies.
    m.write(LBA_SPACE, 0, 1, 2, 0);
    for t in 0..1000 {
        m.write(LBA_SPACE, 10 + t % 2, 1, 1, t + 1);
    }
    m.write(LBA_SPACE, 0, 1, 2, 1001);
    m.write(LBA_SPACE, 50, 1, 3, 1002);
    assert!(map.maybe_recluster(&m, 1003));
    assert_eq!(map.stream(1), 1);
    assert_eq!(map.stream(2), 2);
    assert_eq!(map.stream(3), 0);
    assert_eq!(map.stream(99), 0);
    assert_eq!(map.generation(), 1);
    // Nothing changed: no re-cluster even after the interval.
    assert!(!map.maybe_recluster(&m, 5000));
    assert_eq!(map.generation(), 1);
}

/// The table a user imported (ten signatures, one with an EWMA of
/// −1e300) re-clustered as `import_sigs` does: it panicked in linfa
/// before k-means clamped its input; now the absurd signature gets the
/// shortest-lived stream and the others keep their order.
#[test]
fn an_absurd_loaded_estimate_does_not_panic_the_reclustering() {
    let mut m = lm();
    let stats = |x: f64| crate::lifetime::SigStats {
        untracked_pages: 0,
        written_pages: 10,
        first_write: 1,
        last_write: 10,
        deaths: 2,
        dead_pages: 2,
        ewma_log2: x,
        ewma_weight: 0.5,
        mean_log2: 1.0,
        m2_log2: 1.0,
        hist: vec![0; 48],
    };
    m.load_sigs((1..=10).map(|s| (s, stats(if s == 1 { -1e300 } else { s as f64 }))));
    for erase_unit_pages in [0, 256] {
        let mut map = Mapper::new(
            5,
            MapperConfig {
                erase_unit_pages,
                ..Default::default()
            },
        );
        let f = map.features(&m, 1000);
        map.recluster(&f);
        assert_eq!(map.stream(1), 1);
        assert!((2..=10).all(|s| map.stream(s) >= 1), "{:?}", map.table());
    }
}

#[test]
fn ten_percent_rule_and_check_interval() {
    let mut m = lm();
    let mut map = Mapper::new(
        3,
        MapperConfig {
            check_interval: 100,
            censor: false,
            ..Default::default()
        },
    );
    // 20 signatures, each with lifetime 4.
    let mut t = 0;
    for s in 1..=20u64 {
        m.write(LBA_SPACE, s, 1, s, t);
        m.write(LBA_SPACE, s, 1, s, t + 4);
        t += 5;
    }
    assert!(map.maybe_recluster(&m, t));
    // One signature (5%) changes a lot: not enough.
    m.write(LBA_SPACE, 1, 1, 1, t + 4000);
    assert!(!map.maybe_recluster(&m, t + 4001), "interval not elapsed");
    assert!(!map.maybe_recluster(&m, t + 5000), "only 5% changed");
    // A second one (10%): re-cluster at the next check.
    m.write(LBA_SPACE, 2, 1, 2, t + 9000);
    assert!(!map.maybe_recluster(&m, t + 5050), "interval not elapsed");
    assert!(map.maybe_recluster(&m, t + 9001));
    assert_eq!(map.generation(), 2);
    assert!(map.stream(1) > map.stream(3));
}

#[test]
fn young_runs_are_checked_often_and_long_runs_at_the_check_interval() {
    let mut m = lm();
    let mut map = Mapper::new(
        3,
        MapperConfig {
            censor: false,
            ..Default::default()
        },
    );
    assert_eq!(map.config().first_interval, 256);
    assert_eq!(map.config().check_interval, 16384);
    // Two signatures whose data dies within the first MiB written: a
    // default mapper places them long before 16384 pages.
    let mut t = 0;
    let mut mapped_at = None;
    while t < 4096 && mapped_at.is_none() {
        m.write(LBA_SPACE, t % 2, 1, 1, t); // dies after 2 pages
        m.write(LBA_SPACE, 100 + (t / 64) % 2, 1, 2, t + 1); // ≈ 128 pages
        t += 2;
        if map.maybe_recluster(&m, t) {
            mapped_at = Some(t);
        }
    }
    let at = mapped_at.expect("mapped within 4096 pages");
    assert!(at <= 512, "first mapping at {at}");
    assert_eq!(map.stream(1), 1);
    assert_eq!(map.stream(2), 2);
    // Past 4 × 16384 pages checks are 16384 apart: nothing is looked at
    // in between, however much changes.
    assert!(!map.maybe_recluster(&m, 100_000), "nothing changed");
    m.write(LBA_SPACE, 500, 1, 3, 100_001);
    m.write(LBA_SPACE, 500, 1, 3, 100_003);
    assert!(!map.maybe_recluster(&m, 100_004), "checked too early");
    assert!(!map.maybe_recluster(&m, 116_383), "checked too early");
    assert!(
        map.maybe_recluster(&m, 116_384),
        "new signature after the interval"
    );
    assert_ne!(map.stream(3), 0);
}

/// Two data streams, checked every 10 pages, keys censored from age 100.
fn censoring_mapper() -> Mapper {
    Mapper::new(
        3,
        MapperConfig {
            check_interval: 10,
            censor_min_age: 100,
            ..Default::default()
        },
    )
}

#[test]
fn censored_estimate_places_never_dying_data_last() {
    let mut m = lm();
    let mut map = censoring_mapper();
    m.write(LBA_SPACE, 1000, 1, 9, 0); // never dies
    for t in 1..500 {
        m.write(LBA_SPACE, t % 3, 1, 1, t);
    }
    assert!(map.maybe_recluster(&m, 500));
    assert_eq!(map.stream(1), 1);
    assert_eq!(map.stream(9), 2);
    let f = map.features(&m, 500);
    assert!(f.iter().any(|f| f.sig == 9 && f.censored));
    assert_eq!(map.basis(9), Some(Basis::NeverDied));
    assert_eq!(map.basis(1), Some(Basis::Deaths));
    assert_eq!(map.basis(77), None);
}

/// A hot key whose pages die 600 pages after their write, and a key first
/// written 800 pages before the check, none of whose pages died: sig 1
/// rewrites 600 pages in turn, sig 9 writes ten pages once at 1200..1210.
fn hot_and_never_died(m: &mut LifetimeManager, until: u64) {
    for t in 0..until {
        m.write(LBA_SPACE, t % 600, 1, 1, t);
        if (1200..1210).contains(&t) {
            m.write(LBA_SPACE, 1000 + t - 1200, 1, 9, t);
        }
    }
}

/// fio's cold job beside a hot one on a raw namespace, in small: at the
/// check, the never-died key's age (800) is within the 1-log2 gap of the
/// hot key's lifetime (600), so taken as its estimate it shares the hot
/// stream; estimated at twice its age it gets a stream of its own above.
#[test]
fn a_never_died_key_is_placed_beyond_its_age() {
    let mut m = lm();
    hot_and_never_died(&mut m, 2000);
    for (beyond, apart) in [(1.0, true), (0.0, false)] {
        let mut map = Mapper::new(
            3,
            MapperConfig {
                censor_min_age: 100,
                never_died_beyond_age_log2: beyond,
                ..Default::default()
            },
        );
        map.recluster_from(&m, 2000);
        let x = map.features(&m, 2000);
        let x9 = x.iter().find(|f| f.sig == 9).unwrap();
        assert!(x9.censored);
        assert!(
            (x9.log2_lifetime - (800f64.log2() + beyond)).abs() < 0.02,
            "{x9:?}"
        );
        assert_eq!(map.basis(9), Some(Basis::NeverDied));
        assert_eq!(map.stream(1), 1);
        assert_eq!(map.stream(9) > map.stream(1), apart, "beyond {beyond}");
    }
}

/// raw-zipf's fill in small: one key writes 1000 pages once, nothing
/// dies, and the first clustering places it; then a hot key appears below
/// it. With `never_died_on_top` the fill takes the highest id and the hot
/// key the lowest, apart; numbered from the bottom (the paper), the fill
/// takes id 1 and the hot key, below it at the next clustering, takes id
/// 1 too: the stream whose blocks hold the fill's pages. The same by
/// rank and with stable ids; by rank, the fill's cluster keeps the top id
/// at the next clustering too (it is still never-died).
#[test]
fn a_fill_before_any_death_takes_the_top_stream() {
    for (on_top, stable_ids) in [(true, false), (false, false), (true, true), (false, true)] {
        let mut m = lm();
        let mut map = Mapper::new(
            5,
            MapperConfig {
                censor_min_age: 100,
                never_died_on_top: on_top,
                stable_ids,
                ..Default::default()
            },
        );
        for t in 0..1000 {
            m.write(LBA_SPACE, t, 1, 7, t);
        }
        map.recluster_from(&m, 1000);
        let fill = map.stream(7);
        assert_eq!(fill, if on_top { 4 } else { 1 });
        for t in 1000..2000 {
            m.write(LBA_SPACE, 5000 + t % 20, 1, 1, t);
        }
        map.recluster_from(&m, 2000);
        assert_eq!(map.basis(7), Some(Basis::NeverDied));
        assert_eq!(map.basis(1), Some(Basis::Deaths));
        assert!(map.stream(1) < map.stream(7));
        assert_eq!(map.stream(1), 1);
        // Where the fill's pages went is now the hot stream, or not.
        assert_eq!(map.stream(1) == fill, !on_top);
        // The fill's cluster keeps the top id while none of it has died
        // (stable ids keep it there; by rank, the rule does).
        let want = if on_top { fill } else { 2 };
        assert_eq!(map.stream(7), want, "on_top {on_top}, stable {stable_ids}");
    }
}

/// By rank, the longest-lived cluster keeps the top id it took as a fill
/// once its data dies, and while clusters come and go below it; the
/// others are ranked from the bottom. Without `never_died_on_top`, the
/// paper's rank.
#[test]
fn by_rank_the_top_cluster_keeps_the_top_id() {
    for on_top in [true, false] {
        let mut m = Mapper::new(
            5,
            MapperConfig {
                never_died_on_top: on_top,
                ..Default::default()
            },
        );
        let fill = Feature {
            censored: true,
            ..feat(7, 14.0, 100.0)
        };
        m.recluster(&[fill]);
        assert_eq!(m.stream(7), if on_top { 4 } else { 1 });
        let mut got = Vec::new();
        for with_light in [true, false, true] {
            let mut f = vec![feat(1, 8.0, 50.0), feat(7, 13.0, 100.0)];
            if with_light {
                f.push(feat(3, 3.0, 1.0));
            }
            m.recluster(&f);
            got.push((m.stream(1), m.stream(7)));
        }
        let want = if on_top {
            [(2, 4), (1, 4), (2, 4)]
        } else {
            [(2, 3), (1, 2), (2, 3)]
        };
        assert_eq!(got, want, "on_top {on_top}");
    }
}

/// A key clustered by its age whose data then dies at about the lifetime
/// it was placed for: its feature moves less than the change threshold,
/// yet the next check re-clusters (its estimate now rests on deaths);
/// without `recluster_on_first_deaths`, the paper's rule, it waits.
#[test]
fn a_never_died_keys_first_deaths_recluster_at_once() {
    for first_deaths in [true, false] {
        let mut m = lm();
        hot_and_never_died(&mut m, 2000);
        let mut map = Mapper::new(
            3,
            MapperConfig {
                check_interval: 10,
                censor_min_age: 100,
                recluster_on_first_deaths: first_deaths,
                ..Default::default()
            },
        );
        assert!(map.maybe_recluster(&m, 2000));
        assert_eq!(map.basis(9), Some(Basis::NeverDied));
        // Sig 9's pages die at 2600 (lifetimes ≈ 1395: 2^10.45, placed
        // for 2^10.64); sig 1 goes on as before.
        for t in 2000..2700 {
            m.write(LBA_SPACE, t % 600, 1, 1, t);
            if t == 2600 {
                m.invalidate(LBA_SPACE, 1000, 10, t);
            }
        }
        let now = map.features(&m, 2700);
        let x9 = now.iter().find(|f| f.sig == 9).unwrap();
        assert!(!x9.censored);
        let moved = (x9.log2_lifetime - (800f64.log2() + 1.0)).abs();
        assert!(moved < 0.5, "{x9:?}: moved {moved}, under the threshold");
        assert_eq!(map.maybe_recluster(&m, 2700), first_deaths);
        let (reclusters, basis) = if first_deaths {
            (2, Basis::Deaths)
        } else {
            (1, Basis::NeverDied)
        };
        assert_eq!(map.reclusters(), reclusters);
        assert_eq!(map.basis(9), Some(basis));
    }
}

/// A signature most of whose pages stay (a tenth overwritten soon, the
/// rest never) is estimated by Little's law once old enough, and the
/// mapper says so; one whose pages all die is estimated by its deaths.
#[test]
fn a_mostly_live_signature_is_placed_by_littles_law() {
    let mut m = lm();
    let mut map = censoring_mapper();
    let mut t = 0;
    for p in 0..1000 {
        m.write(LBA_SPACE, p, 1, 1, t);
        m.write(LBA_SPACE, 5000 + p % 4, 1, 2, t);
        t += 1;
        if p % 10 == 9 {
            m.write(LBA_SPACE, p, 1, 1, t + 9);
        }
    }
    assert!(map.maybe_recluster(&m, t));
    assert_eq!(map.basis(1), Some(Basis::Little));
    assert_eq!(map.basis(2), Some(Basis::Deaths));
    let f = map.features(&m, t);
    let x = |sig| f.iter().find(|f| f.sig == sig).unwrap().log2_lifetime;
    assert!(x(1) > m.sig(1).unwrap().estimate_log2().unwrap() + 3.0);
    assert!(map.stream(1) > map.stream(2));
}

fn feat(sig: u64, x: f64, w: f64) -> Feature {
    Feature {
        sig,
        log2_lifetime: x,
        weight: w,
        censored: false,
    }
}

#[test]
fn the_floor_is_the_fill_time_of_the_stream_holding_the_short_lived_data() {
    // 90% of the writes die within 2–32 pages, 10% at 2^12. With
    // 64-page blocks the short-lived stream fills one in 64 / 0.9 pages.
    let feats = [
        feat(1, 1.0, 30.0),
        feat(2, 3.0, 30.0),
        feat(3, 5.0, 30.0),
        feat(4, 12.0, 10.0),
    ];
    assert_eq!(resolution_floor(&feats, 0), None, "unknown device");
    let f = resolution_floor(&feats, 64).unwrap();
    assert!((f - (64.0f64 / 0.9).log2()).abs() < 1e-9, "{f}");
    // A lone short signature with 1% of the writes fills its blocks
    // slowly: everything up to 64 / 0.01 pages looks alike.
    // A lone short signature with 1% of the writes would fill blocks of
    // its own only every 6400 pages; it joins the next one up (2^9, half
    // the writes, whose stream fills a block in 128 pages) instead of
    // pulling the floor over it.
    let feats = [feat(1, 1.0, 1.0), feat(2, 9.0, 49.0), feat(3, 14.0, 50.0)];
    assert_eq!(resolution_floor(&feats, 64), Some(9.0));
    // Nothing below a block: the floor moves nothing.
    let feats = [feat(1, 10.0, 1.0), feat(2, 14.0, 1.0)];
    assert_eq!(resolution_floor(&feats, 64), Some(10.0));
    assert_eq!(resolution_floor(&[], 64), Some(6.0));
}

#[test]
fn lifetimes_shorter_than_a_block_fill_share_one_stream() {
    // Three compiler-like signatures dying after 2, 8 and 32 pages and
    // one long-lived one, on 4 data streams: without a device the three
    // short ones get streams of their own; with 64-page blocks the
    // device cannot tell them apart, and they share one.
    let run = |erase_unit_pages| {
        let mut m = lm();
        let mut map = Mapper::new(
            5,
            MapperConfig {
                first_interval: 1,
                erase_unit_pages,
                ..Default::default()
            },
        );
        let mut t = 0;
        for round in 0..40u64 {
            for (sig, life) in [(1u64, 2u64), (2, 8), (3, 32)] {
                let lba = 10_000 * sig + round;
                m.write(LBA_SPACE, lba, 1, sig, t);
                m.invalidate(LBA_SPACE, lba, 1, t + life);
                t += 1;
            }
            m.write(LBA_SPACE, 90_000, 1, 4, t);
            t += 1;
        }
        m.invalidate(LBA_SPACE, 90_000, 1, t + (1 << 14));
        t += 1 << 14;
        assert!(map.maybe_recluster(&m, t));
        let basis = [1, 2, 3, 4].map(|s| map.basis(s));
        ([1, 2, 3, 4].map(|s| map.stream(s)), basis)
    };
    let (free, basis) = run(0);
    assert!(free[0] != free[1] && free[1] != free[2], "{free:?}");
    assert_eq!(basis, [Some(Basis::Deaths); 4]);
    let (floored, basis) = run(64);
    // What the floor raised says so (`compare --explain`).
    assert_eq!(basis[0], Some(Basis::Floor));
    assert_eq!(basis[3], Some(Basis::Deaths));
    assert!(
        floored[0] == floored[1] && floored[1] == floored[2],
        "{floored:?}"
    );
    assert!(floored[3] > floored[0], "{floored:?}");
}

/// A signature whose feature sits between two clusters keeps its
/// stream across re-clusterings while it moves less than the
/// hysteresis; without hysteresis (the default) it follows the nearest
/// centroid.
/// 20 signatures of two lifetimes are clustered. Then two new ones
/// (under 10% changed: no re-clustering): at the next check the one
/// none of whose data has died (a censored estimate: data with no
/// death in sight) gets the stream of the nearest centroid, and the
/// table's generation moves for the daemon to publish it; the one
/// whose first death is in waits for the next re-clustering (an
/// early estimate is biased towards its shortest lives). The paper's
/// rule leaves both in stream 0.
#[test]
fn a_new_never_dying_signature_is_placed_between_reclusterings() {
    for place_new_keys in [true, false] {
        let mut m = lm();
        let mut map = Mapper::new(
            3,
            MapperConfig {
                check_interval: 100,
                censor_min_age: 100,
                place_new_keys,
                ..Default::default()
            },
        );
        // Sigs 1..=10 live 4 pages, 11..=20 live 1000.
        let mut t = 0;
        for s in 1..=20u64 {
            m.write(LBA_SPACE, s, 1, s, t);
            let life = if s <= 10 { 4 } else { 1000 };
            m.write(LBA_SPACE, s, 1, s, t + life);
            t += 1001;
        }
        assert!(map.maybe_recluster(&m, t));
        let (short, long) = (map.stream(1), map.stream(11));
        assert!(short >= 1 && long > short);
        let g = map.generation();
        // Sig 21 never dies; sig 22's first page lived 1500 pages.
        m.write(LBA_SPACE, 21, 1, 21, t);
        m.write(LBA_SPACE, 22, 1, 22, t);
        m.write(LBA_SPACE, 22, 1, 22, t + 1500);
        let changed = map.maybe_recluster(&m, t + 2000);
        assert_eq!(map.reclusters(), 1, "10% changed: no re-clustering");
        assert_eq!(map.stream(22), 0);
        if place_new_keys {
            assert!(changed);
            assert_eq!(map.stream(21), long);
            assert_eq!(map.generation(), g + 1);
        } else {
            assert!(!changed);
            assert_eq!(map.stream(21), 0);
            assert_eq!(map.generation(), g);
        }
    }
}

/// The stream-0 key (the journal's writes) with a data key of its
/// lifetime: when the key carries most of its cluster, the cluster is
/// stream 0 and the other data get both data streams.
#[test]
fn the_journals_cluster_is_stream_0_when_the_journal_carries_it() {
    let mut map = Mapper::new(3, MapperConfig::default());
    map.set_stream0_key(99);
    map.recluster(&[
        feat(1, 8.0, 10.0),
        feat(2, 14.0, 100.0),
        feat(3, 22.0, 100.0),
        feat(99, 8.2, 50.0),
    ]);
    assert_eq!(map.assigned(1), Some(0), "the journal's lifetime");
    assert_eq!(map.assigned(99), Some(0));
    let (a, b) = (map.stream(2), map.stream(3));
    assert!(a >= 1 && b > a, "{a} {b}");
    assert_eq!(map.centroids().iter().filter(|c| c.is_finite()).count(), 2);
    assert!(
        map.table().iter().all(|&(k, _)| k != 99),
        "the journal's key is not a signature"
    );
    assert_eq!(map.table().len(), 3);
}

/// A light stream-0 key inside a heavy data cluster (RocksDB's
/// metadata beside its compaction output): the data are clustered as
/// if it were not there, the key alone in stream 0.
#[test]
fn a_journal_inside_a_data_cluster_leaves_it_a_data_stream() {
    let data = [feat(1, 8.0, 100.0), feat(2, 21.0, 100.0)];
    let mut plain = Mapper::new(3, MapperConfig::default());
    plain.recluster(&data);
    let mut map = Mapper::new(3, MapperConfig::default());
    map.set_stream0_key(99);
    let mut feats = data.to_vec();
    feats.push(feat(99, 21.0, 1.0));
    map.recluster(&feats);
    assert_eq!(map.assigned(99), Some(0));
    assert_eq!(map.table(), plain.table());
    assert_eq!(map.centroids(), plain.centroids());
    assert_eq!(map.stream(2), 2);
}

#[test]
fn hysteresis_keeps_a_borderline_signature_in_its_stream() {
    let feats = |x: f64| {
        vec![
            Feature {
                sig: 1,
                log2_lifetime: 4.0,
                weight: 100.0,
                censored: false,
            },
            Feature {
                sig: 2,
                log2_lifetime: 20.0,
                weight: 100.0,
                censored: false,
            },
            Feature {
                sig: 3,
                log2_lifetime: x,
                weight: 1.0,
                censored: false,
            },
        ]
    };
    for (h, want) in [
        (Some(1.0), [1, 1, 1]),
        (Some(0.0), [1, 2, 1]),
        (None, [1, 2, 1]),
    ] {
        // None: the default, which follows the nearest centroid.
        let mut cfg = MapperConfig::default();
        if let Some(h) = h {
            cfg.hysteresis_log2 = h;
        }
        let mut m = Mapper::new(3, cfg);
        let mut got = Vec::new();
        for x in [11.5, 12.2, 11.0] {
            m.recluster(&feats(x));
            got.push(m.stream(3));
        }
        assert_eq!(got, want, "hysteresis {h:?}");
    }
}

/// A light short-lived signature stops and starts writing: by rank,
/// the heavy clusters above it are renumbered each time (their next
/// pages share erase blocks with another cluster's); with stable ids
/// they keep their streams, and order still follows lifetime.
#[test]
fn a_light_cluster_coming_and_going_does_not_renumber_the_heavy_ones() {
    let run = |stable_ids| {
        let mut m = Mapper::new(
            5,
            MapperConfig {
                stable_ids,
                ..Default::default()
            },
        );
        let heavy = [feat(1, 10.0, 100.0), feat(2, 20.0, 100.0)];
        let light = feat(3, 3.0, 1.0);
        let mut got = Vec::new();
        for with_light in [true, false, true] {
            let mut f = heavy.to_vec();
            if with_light {
                f.push(light);
            }
            m.recluster(&f);
            got.push((m.stream(1), m.stream(2)));
            if with_light {
                assert!(m.stream(3) < m.stream(1), "order follows lifetime");
            }
        }
        got
    };
    assert_eq!(run(true), vec![(2, 3); 3]);
    assert_eq!(run(false), vec![(2, 3), (1, 2), (2, 3)]);
}
