//! The fio block-trace parser on arbitrary bytes: records or one clear
//! error, never a panic, a line held past the line limit or a hang.
#![no_main]

use ftl_sim::workload::trace::{Format, BlockTraceReader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for rec in BlockTraceReader::new("fuzz".into(), data, Format::Fio) {
        if rec.is_err() {
            break;
        }
    }
});
