//! Fuzzes what pcstreamd does with a datagram from `events.sock`: decode it
//! as an `EventBatch`, then feed it to the online engine (as uid 1000) with
//! a small memory cap. Neither may panic, hang or grow without bound,
//! whatever the bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pcstream_placement::online::Engine;

fuzz_target!(|data: &[u8]| {
    let Ok(batch) = pcstreamd::ingest::decode_datagram(data) else {
        return;
    };
    let mut cfg = pcstreamd::config::Config::default().online();
    cfg.policy.lifetime.max_entries = 1024;
    cfg.max_signatures = 64;
    let mut e = Engine::new(cfg);
    e.ingest(1000, 1, &batch);
    let _ = e.mapping();
    let _ = e.export();
});
