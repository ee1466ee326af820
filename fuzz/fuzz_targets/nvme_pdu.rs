//! NVMe/TCP PDU headers and command capsules from arbitrary bytes:
//! `cargo +nightly fuzz run nvme_pdu -- -max_total_time=60`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    nvme_target::fuzzing::pdu_and_command(data);
});
