//! NVMe/TCP throughput over loopback, the simulator on: 128 KiB sequential
//! writes (GB/s, R2T + H2CData) and 4 KiB random writes (IOPS, in-capsule),
//! each from one client connection with 32 commands in flight, measured side
//! by side in one run and printed as a table. Run with
//! `cargo bench --release -p nvme-target --bench loopback`.
//! Client and target share the machine: on 2 cores each gets about one.

use std::time::Instant;

use nvme_target::client::Client;
use nvme_target::{DeviceConfig, Target, DEFAULT_NQN};

const CAPACITY: u64 = 1 << 30;

fn run(name: &str, bs: usize, ops: u64, random: bool) -> (String, f64, f64) {
    let t = Target::bind(
        "127.0.0.1:0",
        DeviceConfig {
            capacity: CAPACITY,
            ruhs: 8,
            ..DeviceConfig::default()
        },
        DEFAULT_NQN,
    )
    .expect("target")
    .start()
    .expect("start");
    let a = Client::admin(t.addr(), DEFAULT_NQN).expect("admin");
    let mut q = a.io_queue(DEFAULT_NQN, 1).expect("io queue");
    let blocks = (bs / 4096) as u64;
    let span = CAPACITY / 4096 / blocks;
    let data = vec![0xa5u8; bs];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let cmds = (0..ops).map(|i| {
        let slot = if random {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % span
        } else {
            i % span
        };
        (
            Client::write_cmd(slot * blocks, blocks as u32, Some((i % 8) as u16)),
            data.clone(),
        )
    });
    let start = Instant::now();
    let failed = q.pipeline(32, cmds).expect("pipeline");
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(failed, 0);
    let waf = t.stats().waf;
    (name.to_string(), ops as f64 / secs, waf)
}

fn main() {
    let rows = [
        run("128 KiB seq write", 128 << 10, 16_384, false),
        run("4 KiB rand write", 4096, 400_000, true),
    ];
    println!(
        "{:<20} {:>12} {:>10} {:>8}",
        "workload", "IOPS", "GB/s", "WAF"
    );
    for (name, iops, waf) in rows {
        let bs = if name.starts_with("128") {
            128 << 10
        } else {
            4096
        };
        println!(
            "{name:<20} {iops:>12.0} {:>10.3} {waf:>8.3}",
            iops * bs as f64 / 1e9
        );
    }
}
