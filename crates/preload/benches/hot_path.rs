//! The shim's per-write work outside the real syscall, measured through the
//! rlib: signature capture (frame-pointer walk and stack scan over synthetic
//! stacks), mapping lookup, and event encoding + batching; and all of it
//! together as one intercepted write costs (the ≤ 100 ns budget; the paper's
//! in-kernel stack scan took 300–400 ns).
//!
//! Writes are encoded when their batch's raw records are drained (every
//! 128 records), so the batching cases run long enough per sample that
//! each sample's mean (and so the median over samples) includes that
//! encoding, amortised, and the emission of every full 16 KiB batch (no
//! sink here: what a trace file costs is in `scripts/bench-shim.sh`).
//!
//! The internals are reached through `pcstream::bench_api`, whose wrappers
//! are out-of-line calls (the library keeps its modules private so that it
//! addresses its own statics without the GOT): each measured operation
//! includes one direct call.
//!
//! `cargo bench -p pcstream-preload --bench hot_path`

use criterion::{criterion_group, criterion_main, Criterion};
use pcstream::bench_api::{
    self as api, Captured, FileId, Kind, Map, Params, RawWrite, Thread, Unwind, WriteCall,
    WriteEncoder,
};
use std::hint::black_box;
use std::path::Path;

fn libc_code() -> usize {
    libc::getpid as *const () as usize
}

/// Runs `f` with a synthetic stack on this function's frame: `depth` frame
/// records `{saved rbp, return address into libc}` (libc stands for any
/// module that is not the shim), separated by `filler` non-code words
/// (locals), linked into a frame-pointer chain when `chain`.
#[inline(never)]
fn with_stack<R>(depth: usize, filler: usize, chain: bool, f: impl FnOnce(*const usize) -> R) -> R {
    let mut buf = [0usize; 256];
    let stride = 2 + filler;
    for d in 0..depth {
        let at = d * stride;
        buf[at + 1] = libc_code() + 16 * (d + 1);
        for k in 0..filler {
            buf[at + 2 + k] = 0x1000 + k;
        }
    }
    if chain {
        for d in 0..depth - 1 {
            buf[d * stride] = &buf[(d + 1) * stride] as *const usize as usize;
        }
    }
    f(black_box(buf.as_ptr()))
}

fn params(unwind: Unwind) -> Params {
    Params {
        frames: 5,
        unwind,
        scan_words: 512,
    }
}

fn bench(c: &mut Criterion) {
    api::with_thread(&mut |t| bench_on(c, t));
}

fn bench_on(c: &mut Criterion, t: &Thread) {
    // The constructor's set-up, and the TSC clock calibrated as a running
    // shim's is after ~20 ms.
    api::init();
    let table = api::table().unwrap();
    let mut map_text = String::new();
    for i in 0..1000u64 {
        map_text.push_str(&format!(
            "{:016x} {}\n",
            i.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            i % 5
        ));
    }
    let map = Map::parse(Path::new("bench"), &map_text).unwrap();
    api::install_map(Map::parse(Path::new("bench"), &map_text).unwrap());

    let mut g = c.benchmark_group("shim");
    g.bench_function("signature_fp_walk_5_frames", |b| {
        with_stack(8, 2, true, |rec| {
            b.iter(|| {
                let mut cap = Captured::new();
                // SAFETY: rec points into with_stack's frame, alive for the closure.
                unsafe { api::capture_into(t, table, rec, params(Unwind::FramePointer), &mut cap) };
                assert_eq!(cap.n, 5);
                black_box(cap.signature)
            })
        })
    });
    // The lookups a write makes before its syscall: the thread's last call
    // path (a repeat write), and the process-wide signature cache (a
    // thread alternating between call paths).
    g.bench_function("signature_known_path_thread", |b| {
        with_stack(8, 2, true, |rec| {
            b.iter(|| {
                // SAFETY: as above.
                let hit = unsafe { api::cached(t, table, rec, params(Unwind::Auto)) };
                black_box(hit.unwrap())
            })
        })
    });
    g.bench_function("signature_known_path_shared_cache", |b| {
        with_stack(8, 2, true, |rec| {
            b.iter(|| {
                api::forget_path(t);
                // SAFETY: as above.
                let hit = unsafe { api::cached(t, table, rec, params(Unwind::Auto)) };
                black_box(hit.unwrap())
            })
        })
    });
    g.bench_function("signature_stack_scan_5_frames", |b| {
        with_stack(8, 3, false, |rec| {
            b.iter(|| {
                let mut cap = Captured::new();
                // SAFETY: as above.
                unsafe { api::capture_into(t, table, rec, params(Unwind::Scan), &mut cap) };
                assert_eq!(cap.n, 5);
                black_box(cap.signature)
            })
        })
    });
    g.bench_function("mapping_lookup_1000_entries", |b| {
        let mut k = 0u64;
        b.iter(|| {
            k = k.wrapping_add(0x9e37_79b9_7f4a_7c15);
            black_box(map.stream(black_box(k)))
        })
    });
    // The WriteEvent encoder alone.
    let file = FileId {
        dev: 2049,
        ino: 1234,
    };
    let w = [1u64 << 30, 4096, 0x9234_5678_9abc_def0, 2, 3, 1, 0, 0];
    let mut buf = [0u8; 256];
    // An in-place O_DIRECT 16 KiB page write (InnoDB's) over a working set
    // of 64 K pages in the default table: its age class, recorded.
    let mut page = 0u64;
    g.bench_function("page_age_16k_write", |b| {
        b.iter(|| {
            page = (page + 40_503) % 65_536;
            api::page_age(file, black_box(page * 16384), 16384)
        })
    });
    g.bench_function("encode_write_event", |b| {
        // As a batch's drain does: one encoder for the thread's writes.
        let mut enc = WriteEncoder::new(4242);
        b.iter(|| {
            enc.entry(
                black_box(&mut buf[..]),
                black_box(1 << 44),
                black_box(file),
                black_box(&w),
                black_box(0),
            )
        })
    });
    g.bench_function("event_encode_and_batch", |b| {
        b.iter(|| {
            api::push(
                t,
                &Kind::Write {
                    file: FileId {
                        dev: 2049,
                        ino: 1234,
                    },
                    offset: black_box(1 << 30),
                    len: 4096,
                    signature: black_box(0x1234_5678_9abc_def0),
                    stream: 2,
                    hint: 3,
                    call: WriteCall::Write,
                    age_class: 0,
                    native_signature: 0,
                },
                u64::MAX,
                false,
            )
        })
    });
    // One intercepted write, everything but the syscall: signature (fp
    // chain, cache hit), mapping lookup, hint cache, event batching. The
    // "scattered" case writes at unrelated offsets (one event per write); the
    // "sequential" case continues the previous write (coalesced into a run).
    for (name, stride) in [
        ("per_write_total_scattered", 3 * 4096u64),
        ("per_write_total_sequential", 4096),
    ] {
        g.bench_function(name, |b| {
            with_stack(8, 2, true, |rec| {
                let file = FileId { dev: 2049, ino: 99 };
                api::remember_hint(file, 3);
                let mut offset = 0u64;
                b.iter(|| {
                    // As the shim's write path: the signature cache (a hit
                    // here; stream looked up with the signature) first.
                    // SAFETY: as above.
                    let hit = unsafe { api::cached(t, table, rec, params(Unwind::Auto)) };
                    let (sig, stream) = hit.unwrap_or_else(|| {
                        let mut cap = Captured::new();
                        // SAFETY: as above.
                        unsafe { api::capture_into(t, table, rec, params(Unwind::Auto), &mut cap) };
                        (cap.signature.0, cap.stream)
                    });
                    let h = api::cached_hint(file).unwrap_or(0);
                    offset = (offset + stride) % (1 << 30);
                    api::push_write(
                        t,
                        RawWrite::new(
                            file,
                            offset,
                            4096,
                            sig,
                            stream,
                            h as u32,
                            WriteCall::Write as u32,
                        ),
                        u64::MAX,
                        false,
                    );
                })
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
