//! Simulator speed: flash page writes (host + GC copies) per second of one
//! core, on the default geometry (12 GiB, 4 KiB pages, 384 pages/block) at
//! 7 % OP with greedy GC, in the steady state of uniform random writes
//! (filled and aged, so GC is active on every block opened).
//!
//! `cargo bench -p ftl-sim --bench sim` prints criterion's host writes/s and,
//! after each benchmark, the flash page writes/s that docs/performance.md quotes.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ftl_sim::workload::synthetic::{Generator, Pattern};
use ftl_sim::{Config, GcPolicy, Ssd};

/// Host writes per measured iteration.
const BATCH: u64 = 1 << 16;
/// Writes handed to `Ssd::write_batch` at once.
const CHUNK: usize = 256;

fn aged(cfg: Config, pattern: Pattern) -> (Ssd, Generator) {
    let mut ssd = Ssd::new(cfg).expect("valid config");
    let l = ssd.logical_pages();
    let streams = ssd.config().streams;
    let mut g = Generator::new(pattern, l, streams, 1).expect("valid pattern");
    ssd.prefill(1.0, |lpn| g.stream_of(lpn)).expect("prefill");
    // Two device-writes of the workload reach the steady state.
    for _ in 0..2 * l {
        let (lpn, s) = g.next_write();
        ssd.write(lpn, s).expect("write");
    }
    ssd.reset_stats();
    (ssd, g)
}

fn bench_case(c: &mut Criterion, name: &str, cfg: Config, pattern: Pattern) {
    // Aged lazily, so benchmarks filtered out on the command line cost nothing.
    let mut state: Option<(Ssd, Generator)> = None;
    let mut buf = vec![(0u64, 0u32); CHUNK];
    let mut flash = 0u64;
    let mut spent = Duration::ZERO;
    let mut group = c.benchmark_group("ftl-sim");
    group.throughput(Throughput::Elements(BATCH));
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function(name, |b| {
        let (ssd, g) = state.get_or_insert_with(|| aged(cfg.clone(), pattern));
        b.iter_custom(|iters| {
            let before = ssd.flash_pages();
            let t = Instant::now();
            for _ in 0..iters {
                for _ in 0..BATCH / CHUNK as u64 {
                    for w in buf.iter_mut() {
                        *w = g.next_write();
                    }
                    ssd.write_batch(&buf).expect("write");
                }
            }
            let dt = t.elapsed();
            flash += ssd.flash_pages() - before;
            spent += dt;
            dt
        })
    });
    group.finish();
    let Some((ssd, _)) = state else { return };
    let st = ssd.stats();
    println!(
        "{name}: {:.1} M flash page writes/s (host + GC), WAF {:.3}, {:.1} M host writes/s",
        flash as f64 / spent.as_secs_f64() / 1e6,
        st.waf,
        flash as f64 / st.waf / spent.as_secs_f64() / 1e6,
    );
}

fn benches(c: &mut Criterion) {
    let base = Config {
        streams: 1,
        ..Config::default()
    };
    bench_case(
        c,
        "uniform, 7% OP, greedy, default geometry",
        base.clone(),
        Pattern::Uniform,
    );
    bench_case(
        c,
        "hotcold 0.2/0.8, 9 streams + internal, greedy",
        Config {
            streams: 9,
            internal_streams: true,
            ..Config::default()
        },
        "hotcold:0.2/0.8".parse().expect("pattern"),
    );
    bench_case(
        c,
        "uniform, 7% OP, cost-benefit",
        Config {
            gc: GcPolicy::CostBenefit,
            ..base
        },
        Pattern::Uniform,
    );
}

criterion_group!(sim, benches);
criterion_main!(sim);
