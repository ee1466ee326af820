//! Stream separation: two temperatures in their own streams give a WAF
//! close to 1 while the same writes mixed in one stream copy clearly more;
//! and a stream mixing short- and long-lived data copies less when GC moves
//! its survivors to its own internal stream than when they go back into the
//! stream beside fresh writes, or share one GC block with other streams'
//! survivors. Slow in debug builds, so these run
//! only with `--release` (as CI does).

use ftl_sim::workload::synthetic::{Generator, Pattern};
use ftl_sim::{Config, Geometry, Ssd, Stats};

fn device(streams: u32, internal: bool, op: f64) -> Ssd {
    device_gc(streams, internal, false, op)
}

fn device_gc(streams: u32, internal: bool, shared_gc_block: bool, op: f64) -> Ssd {
    Ssd::new(Config {
        geometry: Geometry {
            blocks_per_unit: 64,
            ..Geometry::default()
        },
        op,
        streams,
        internal_streams: internal,
        shared_gc_block,
        ..Config::default()
    })
    .unwrap()
}

/// Pre-fills through the generator's streams, ages the device for `warm`
/// device-writes, then measures `measure` device-writes.
fn run_pattern(mut ssd: Ssd, pattern: &str, warm: u64, measure: u64) -> Stats {
    let l = ssd.logical_pages();
    let streams = ssd.config().streams;
    let mut g = Generator::new(pattern.parse::<Pattern>().unwrap(), l, streams, 9).unwrap();
    ssd.prefill(1.0, |lpn| g.stream_of(lpn)).unwrap();
    for i in 0..(warm + measure) * l {
        if i == warm * l {
            ssd.reset_stats();
        }
        let (lpn, s) = g.next_write();
        ssd.write(lpn, s).unwrap();
    }
    ssd.check_invariants().unwrap();
    ssd.stats()
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "slow without optimisations; run with --release"
)]
fn each_temperature_in_its_own_stream_barely_copies() {
    let pattern = "hotcold:0.2/0.8:seq";
    // Five device-writes of ageing: the cold region's first cycle (4
    // device-writes) replaces all pre-filled data before measuring.
    let separate = run_pattern(device(3, false, 0.07), pattern, 5, 2);
    let mixed = run_pattern(device(1, false, 0.07), pattern, 5, 2);
    println!(
        "separate streams: WAF {:.3}; one stream: WAF {:.3}",
        separate.waf, mixed.waf
    );
    assert!(separate.waf < 1.1, "separate {}", separate.waf);
    assert!(
        mixed.waf > separate.waf + 0.1,
        "mixed {} separate {}",
        mixed.waf,
        separate.waf
    );
    // The per-stream lifetimes tell the temperatures apart: hot pages live
    // 0.2/0.8 = 0.25 device-writes, cold ones 0.8/0.2 = 4.
    let l = separate.logical_pages as f64;
    let hot = separate.per_stream[1].lifetime.p50.unwrap() / l;
    let cold = separate.per_stream[2].lifetime.p50.unwrap() / l;
    println!("median lifetimes: hot {hot:.3}, cold {cold:.3} device-writes");
    assert!((hot - 0.25).abs() < 0.25 * 0.13, "{hot}");
    assert!((cold - 4.0).abs() < 4.0 * 0.13, "{cold}");
}

/// Stream 1 mixes short- and long-lived data (a hot and a cold region
/// written in order); stream 2 rewrites its own region at random.
fn run_mixed_lifetime(internal: bool, shared_gc_block: bool, op: f64) -> Stats {
    let mut ssd = device_gc(3, internal, shared_gc_block, op);
    let l = ssd.logical_pages();
    // Stream 1: pages [0, 0.1 L) hot, [0.1 L, 0.6 L) cold; stream 2: [0.6 L, L).
    let (hot_end, cold_end) = (l / 10, 6 * l / 10);
    let stream_of = |lpn: u64| if lpn < cold_end { 1 } else { 2 };
    ssd.prefill(1.0, stream_of).unwrap();
    let mut rng = Generator::new(Pattern::Uniform, l, 1, 5).unwrap();
    let (mut hot, mut cold) = (0, hot_end);
    let total = 6 * l;
    for i in 0..total {
        if i == 2 * l {
            ssd.reset_stats();
        }
        let (r, _) = rng.next_write();
        let lpn = match r % 10 {
            // 50 % of the writes: hot, sequential.
            0..=4 => {
                hot = (hot + 1) % hot_end;
                hot
            }
            // 10 %: cold, sequential.
            5 => {
                cold = if cold + 1 == cold_end {
                    hot_end
                } else {
                    cold + 1
                };
                cold
            }
            // 40 %: stream 2, uniform over its region.
            _ => cold_end + r / 10 % (l - cold_end),
        };
        ssd.write(lpn, stream_of(lpn)).unwrap();
    }
    ssd.check_invariants().unwrap();
    ssd.stats()
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "slow without optimisations; run with --release"
)]
fn internal_streams_help_a_mixed_lifetime_stream() {
    for op in [0.07, 0.28] {
        let with = run_mixed_lifetime(true, false, op);
        let own = run_mixed_lifetime(false, false, op);
        let shared = run_mixed_lifetime(false, true, op);
        println!(
            "op {op}: WAF with internal streams {:.3}, copies back into their stream {:.3}, \
             shared GC block {:.3}; stream 1 GC pages {} / {} / {}",
            with.waf,
            own.waf,
            shared.waf,
            with.per_stream[1].gc_pages,
            own.per_stream[1].gc_pages,
            shared.per_stream[1].gc_pages
        );
        for (name, without) in [("own stream", &own), ("shared GC block", &shared)] {
            assert!(
                with.waf < without.waf,
                "op {op}: with {} vs {name} {}",
                with.waf,
                without.waf
            );
        }
    }
}
