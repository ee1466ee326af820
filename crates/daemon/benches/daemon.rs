//! Benchmarks of the daemon's hot paths (criterion):
//! - `ingest`: decode an encoded 4 KiB-write `EventBatch` of 256 events and
//!   feed it to the engine (events/s = 256 / time per iteration);
//! - `recluster_10k`: a forced re-clustering of 10,000 signatures.
//!
//! `cargo bench --release -p pcstreamd --bench daemon`
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use pcstream_placement::online::Engine;
use pcstream_placement::wire::{self, event::Kind};
use pcstreamd::config::Config;
use prost::Message;

fn batch(seq: u64, n: u64) -> Vec<u8> {
    let events = (0..n)
        .map(|i| wire::Event {
            time_ns: seq * n + i,
            tid: 1,
            kind: Some(Kind::Write(wire::WriteEvent {
                file: Some(wire::FileId {
                    dev: 1,
                    ino: (seq * n + i) % 997,
                }),
                offset: ((seq * n + i) % 64) * 4096,
                len: 4096,
                signature: 1 + (seq * n + i) % 31,
                ..Default::default()
            })),
        })
        .collect();
    wire::EventBatch {
        pid: 1,
        seq,
        events,
    }
    .encode_to_vec()
}

fn ingest(c: &mut Criterion) {
    let cfg = Config::default().online();
    let mut e = Engine::new(cfg);
    let batches: Vec<Vec<u8>> = (0..64).map(|s| batch(s, 256)).collect();
    let mut g = c.benchmark_group("daemon");
    g.throughput(Throughput::Elements(256));
    let mut i = 0;
    g.bench_function("ingest_256_events", |b| {
        b.iter(|| {
            let d = pcstreamd::ingest::decode_datagram(&batches[i % batches.len()]).unwrap();
            e.ingest(1000, 1, &d);
            i += 1;
        })
    });
    g.finish();
}

fn recluster(c: &mut Criterion) {
    let mut cfg = Config::default().online();
    cfg.policy.lifetime.chunk_pages = 1;
    let mut e = Engine::new(cfg);
    // 10,000 signatures, each with a few deaths of its own lifetime.
    for round in 0..3u64 {
        for s in 1..=10_000u64 {
            let w = wire::Event {
                kind: Some(Kind::Write(wire::WriteEvent {
                    file: Some(wire::FileId { dev: 1, ino: s }),
                    offset: (round % 2) * 4096,
                    len: 4096,
                    signature: s,
                    ..Default::default()
                })),
                ..Default::default()
            };
            e.apply(0, 1, &w);
            if round > 0 && s % (1 + round) == 0 {
                e.apply(
                    0,
                    1,
                    &wire::Event {
                        kind: Some(Kind::Invalidate(wire::InvalidateEvent {
                            file: Some(wire::FileId { dev: 1, ino: s }),
                            kind: wire::InvalidateKind::Unlink as i32,
                            offset: 0,
                            len: 8192,
                        })),
                        ..Default::default()
                    },
                );
            }
        }
    }
    c.bench_function("daemon/recluster_10k_signatures", |b| {
        b.iter(|| e.recluster())
    });
}

criterion_group!(benches, ingest, recluster);
criterion_main!(benches);
