//! Benchmarks of the daemon's hot paths (criterion):
//! - `ingest`: decode an encoded 4 KiB-write `EventBatch` of 256 events and
//!   feed it to the engine (events/s = 256 / time per iteration);
//! - `recluster_10k`: a forced re-clustering of 10,000 signatures;
//! - `appends`: 1 MiB appends (a log or a table being written: the shim
//!   sends a sequential writer's run as one event), each starting 100
//!   bytes into a page, 64 per file, a file unlinked once 8 newer exist;
//!   fed to the engine (`engine`), and for comparison fed page by page to
//!   a learner of the same configuration (`page_by_page`, what the engine
//!   did before `PcStream::place_pages`). Throughput in bytes written.
//!
//! `cargo bench --release -p pcstreamd --bench daemon`
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use pcstream_placement::online::{page_time, Engine};
use pcstream_placement::pcstream::PcStream;
use pcstream_placement::placement::{Placement, WriteCtx};
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

/// Appends of `RUN` bytes: file `i / 64`, run `i % 64`; an unlink of the
/// file 8 before when a file starts.
const RUN: u64 = 1 << 20;

fn append_events(i: u64) -> Vec<wire::Event> {
    let (file, run) = (i / 64, i % 64);
    let mut v = Vec::new();
    if run == 0 && file >= 8 {
        v.push(wire::Event {
            kind: Some(Kind::Invalidate(wire::InvalidateEvent {
                file: Some(wire::FileId {
                    dev: 1,
                    ino: file - 8,
                }),
                kind: wire::InvalidateKind::Unlink as i32,
                ..Default::default()
            })),
            ..Default::default()
        });
    }
    v.push(wire::Event {
        kind: Some(Kind::Write(wire::WriteEvent {
            file: Some(wire::FileId { dev: 1, ino: file }),
            offset: 100 + run * RUN,
            len: RUN,
            signature: 1 + file % 3,
            ..Default::default()
        })),
        ..Default::default()
    });
    v
}

fn appends(c: &mut Criterion) {
    let cfg = Config::default().online();
    let mut g = c.benchmark_group("daemon/appends");
    g.throughput(Throughput::Bytes(RUN));
    let mut e = Engine::new(cfg.clone());
    let mut i = 0;
    g.bench_function("engine", |b| {
        b.iter(|| {
            for ev in append_events(i) {
                e.apply(1000, 1, &ev);
            }
            i += 1;
        })
    });
    let mut l = PcStream::new(cfg.streams, cfg.policy.clone());
    let (mut i, mut bytes) = (0, 0u64);
    g.bench_function("page_by_page", |b| {
        b.iter(|| {
            for ev in append_events(i) {
                match ev.kind {
                    Some(Kind::Write(w)) => {
                        let f = w.file.unwrap();
                        let first = w.offset / 4096;
                        for p in first..(w.offset + w.len).div_ceil(4096) {
                            l.place(&WriteCtx {
                                time: page_time(bytes, w.offset, p),
                                lpn: p,
                                pages: 1,
                                file: Some((f.dev, f.ino)),
                                file_page: p,
                                signature: Some(w.signature),
                                ..Default::default()
                            });
                        }
                        bytes += w.len;
                    }
                    Some(Kind::Invalidate(x)) => {
                        let f = x.file.unwrap();
                        l.invalidate_file((f.dev, f.ino), 0, u64::MAX, bytes / 4096);
                    }
                    _ => {}
                }
            }
            i += 1;
        })
    });
    g.finish();
}

criterion_group!(benches, ingest, recluster, appends);
criterion_main!(benches);
