//! Replay speed: a synthetic trace of 10 million device page writes through
//! every placement policy, each on its own aged device (90% cold data, 7% OP,
//! 9 streams), two runs at a time — exactly what `pcstreamctl compare` does.
//!
//! `cargo bench -p pcstream-replay --bench replay` prints one row per run and the
//! wall-clock total (the acceptance budget is one minute). Environment:
//! `REPLAY_WRITES` (default 10000000), `REPLAY_THREADS` (default 2),
//! `REPLAY_INTERNAL` = `off` (default), `on` or `both`, `REPLAY_SOURCE` =
//! `ops` (default: the replay is built in memory) or `trace` (the workload
//! is written as a file-level pcstream trace of 64 KiB writes and read back
//! through `Replay::from_trace` and the allocation model, as `compare` does;
//! the build time is printed).
//!
//! The workload: 8 lifetime classes, each an in-place-updated region of
//! 2^10..2^17 pages written at the same rate in sequential runs of 16 pages
//! (so page lifetimes span ~8 K to ~1 M pages), 4 signatures per class.

use std::time::Instant;

use pcstream_placement::policies::{PolicyConfig, POLICY_NAMES};
use pcstream_placement::trace::TraceWriter;
use pcstream_placement::wire::{self, event::Kind, trace_record::Record};
use pcstream_replay::{
    fit_for_ageing, simulate_all, DeviceSpec, Job, Op, Replay, ReplayOptions, Source, WriteClass,
};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn workload(writes: u64) -> Replay {
    const CLASSES: u64 = 8;
    const RUN: u32 = 16;
    let sizes: Vec<u64> = (0..CLASSES).map(|k| 1u64 << (10 + k)).collect();
    let bases: Vec<u64> = sizes
        .iter()
        .scan(0u64, |acc, &s| {
            let b = *acc;
            *acc += s;
            Some(b)
        })
        .collect();
    let logical: u64 = sizes.iter().sum();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(42);
    let mut ops = Vec::with_capacity((writes / u64::from(RUN)) as usize);
    let mut written = 0u64;
    while written < writes {
        let k = rng.random_range(0..CLASSES) as usize;
        let off = rng.random_range(0..sizes[k] / u64::from(RUN)) * u64::from(RUN);
        let sig = 0x1000 + (k as u64) * 4 + rng.random_range(0..4u64);
        ops.push(Op::Write {
            lpn: bases[k] + off,
            pages: RUN,
            file: Some((1, k as u64 + 1)),
            file_page: off,
            signature: Some(sig),
            app_hint: 0,
            class: WriteClass::Data,
        });
        written += u64::from(RUN);
    }
    Replay::from_ops(ops, logical, Source::FsAlloc).expect("valid ops")
}

/// The same workload as a file-level trace: one file per class.
fn as_trace(replay: &Replay, path: &std::path::Path) {
    let mut w = TraceWriter::create(path).expect("create trace");
    let mut events = Vec::new();
    let mut t = 0u64;
    let mut seq = 0u64;
    for op in &replay.ops {
        if let Op::Write {
            pages,
            file: Some((dev, ino)),
            file_page,
            signature,
            ..
        } = *op
        {
            t += 1000;
            events.push(wire::Event {
                time_ns: t,
                tid: 1,
                kind: Some(Kind::Write(wire::WriteEvent {
                    file: Some(wire::FileId { dev, ino }),
                    offset: file_page * 4096,
                    len: u64::from(pages) * 4096,
                    signature: signature.unwrap_or(0),
                    ..Default::default()
                })),
            });
            if events.len() == 4096 {
                seq += 1;
                w.write_record(&wire::TraceRecord {
                    record: Some(Record::Batch(wire::EventBatch {
                        pid: 1,
                        seq,
                        events: std::mem::take(&mut events),
                    })),
                })
                .expect("write trace");
            }
        }
    }
    w.write_record(&wire::TraceRecord {
        record: Some(Record::Batch(wire::EventBatch {
            pid: 1,
            seq: seq + 1,
            events,
        })),
    })
    .expect("write trace");
    w.finish().expect("flush trace");
}

fn main() {
    let writes: u64 = env_or("REPLAY_WRITES", 10_000_000);
    let threads: usize = env_or("REPLAY_THREADS", 2);
    let internal: String = env_or("REPLAY_INTERNAL", "off".to_string());
    let modes: &[bool] = match internal.as_str() {
        "on" => &[true],
        "both" => &[false, true],
        _ => &[false],
    };
    let from_trace = env_or("REPLAY_SOURCE", "ops".to_string()) == "trace";
    let t0 = Instant::now();
    let mut replay = workload(writes);
    if from_trace {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("bench.pcstrace");
        as_trace(&replay, &path);
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let t = Instant::now();
        replay = Replay::from_trace(&path, &ReplayOptions::default()).expect("replay");
        replay = fit_for_ageing(replay, 0.9).expect("fit");
        println!(
            "trace of {} MB read and replayed through the allocation model in {:.2} s",
            size / 1_000_000,
            t.elapsed().as_secs_f64()
        );
    }
    let build_s = t0.elapsed().as_secs_f64();
    let mut jobs = Vec::new();
    for &internal_streams in modes {
        for p in POLICY_NAMES {
            jobs.push(Job {
                replay: &replay,
                policy: p.to_string(),
                spec: DeviceSpec {
                    internal_streams,
                    ..DeviceSpec::default()
                },
            });
        }
    }
    let t1 = Instant::now();
    let results = simulate_all(&jobs, &PolicyConfig::default(), threads);
    let run_s = t1.elapsed().as_secs_f64();
    println!(
        "replay of {} device page writes ({} pages footprint), {} runs on {threads} threads",
        replay.host_pages(),
        replay.footprint_pages,
        jobs.len()
    );
    println!(
        "{:<16} {:>8} {:>8} {:>10} {:>12} {:>14}",
        "policy", "internal", "WAF", "replay s", "Mpages/s", "flash Mpg/s"
    );
    for r in &results {
        let r = r.as_ref().expect("run succeeds");
        let flash = r.stats.host_pages + r.stats.gc_pages;
        println!(
            "{:<16} {:>8} {:>8.3} {:>10.2} {:>12.2} {:>14.2}",
            r.policy,
            if r.internal_streams { "on" } else { "off" },
            r.stats.waf,
            r.seconds,
            r.stats.host_pages as f64 / r.seconds / 1e6,
            flash as f64 / r.seconds / 1e6,
        );
    }
    let g = &results[0].as_ref().expect("run").layout;
    println!(
        "device: {} logical pages ({} cold), {} pages/block, {} blocks",
        g.logical_pages,
        g.cold_pages,
        g.config.geometry.pages_per_block,
        g.config.geometry.blocks()
    );
    println!(
        "trace build {build_s:.2} s; all runs (aging included) {run_s:.2} s wall; total {:.2} s",
        t0.elapsed().as_secs_f64()
    );
}
