//! Replays a synthetic write stream through every placement policy and prints
//! how long each takes: the engine's per-write cost, which must let a
//! 10-million-write replay through all policies finish within a minute.
//!
//! ```sh
//! cargo run --release -p pcstream-placement --example policy_throughput [WRITES] [SIGNATURES]
//! ```
//!
//! The stream: `SIGNATURES` (default 30) code paths, each rewriting its own
//! file as a ring of a different size (lifetimes from ~2^6 to ~2^20 pages),
//! one page per write, interleaved pseudo-randomly; every 64th write also
//! trims a page. Writes carry file, offset, signature, hint and an estimated
//! death, so every policy does its full work.

use pcstream_placement::placement::WriteCtx;
use pcstream_placement::policies::{build, PolicyConfig, POLICY_NAMES};
use pcstream_placement::signature::mix64;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let writes: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let sigs: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(30)
        .max(1);
    let ring = |s: u64| 64u64 << (s % 15);
    let base: Vec<u64> = (0..sigs)
        .scan(0u64, |acc, s| {
            let b = *acc;
            *acc += ring(s);
            Some(b)
        })
        .collect();
    let cfg = PolicyConfig::default();
    println!(
        "{writes} writes, {sigs} signatures, {} streams\n",
        cfg.streams
    );
    println!("{:<16} {:>10} {:>14}", "policy", "seconds", "Mwrites/s");
    let mut total = 0.0;
    for name in POLICY_NAMES {
        let mut p = build(name, &cfg).expect("known policy");
        let mut pos = vec![0u64; sigs as usize];
        let t0 = Instant::now();
        let mut sink = 0u64;
        for t in 0..writes {
            let s = mix64(t) % sigs;
            let r = ring(s);
            let page = pos[s as usize] % r;
            pos[s as usize] += 1;
            let w = WriteCtx {
                time: t,
                lpn: base[s as usize] + page,
                pages: 1,
                file: Some((1, s + 1)),
                file_page: page,
                signature: Some(mix64(s + 1000)),
                app_hint: (2 + s % 4) as u8,
                death: Some(t + r * sigs),
                write_death: Some(t + r * sigs),
            };
            sink += u64::from(p.place(&w));
            if t % 64 == 63 {
                p.trim(base[s as usize] + (page + 1) % r, 1, t);
            }
        }
        let secs = t0.elapsed().as_secs_f64();
        total += secs;
        println!(
            "{:<16} {:>10.2} {:>14.2}   (stream sum {sink})",
            name,
            secs,
            writes as f64 / secs / 1e6
        );
    }
    println!("{:<16} {:>10.2}", "all", total);
}
