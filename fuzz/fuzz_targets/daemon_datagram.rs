//! Fuzzes what pcstreamd does with a datagram from `events.sock`: decode it
//! as an `EventBatch` (`online::decode_batch`, what `pcstreamd::ingest`
//! calls), then feed it to the online engine (as uid 1000) with small caps.
//! Neither may panic, hang or grow without bound, whatever the bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pcstream_placement::online::{decode_batch, Engine, OnlineConfig};
use pcstream_placement::pcstream::PcStreamConfig;

fuzz_target!(|data: &[u8]| {
    let Ok(batch) = decode_batch(data) else {
        return;
    };
    let mut policy = PcStreamConfig::default();
    policy.lifetime.max_entries = 1024;
    let mut e = Engine::new(OnlineConfig {
        streams: 5,
        policy,
        share_between_users: false,
        max_signatures: 64,
        // As the daemon runs by default: a datagram's age classes make
        // refined keys.
        refine_by_age: true,
    });
    e.ingest(1000, 1, &batch);
    let _ = e.mapping();
    let _ = e.export();
});
