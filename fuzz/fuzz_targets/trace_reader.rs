//! The trace reader on arbitrary bytes: every record is decoded or a clear
//! error, never a panic or an allocation beyond the record limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pcstream_placement::trace::TraceReader;

fuzz_target!(|data: &[u8]| {
    let Ok(reader) = TraceReader::new("fuzz".into(), data) else {
        return;
    };
    for rec in reader {
        if rec.is_err() {
            break;
        }
    }
});
