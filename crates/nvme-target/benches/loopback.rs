//! NVMe/TCP throughput over loopback, the simulator on: 128 KiB sequential
//! writes (GB/s, R2T + H2CData; two passes over the namespace, so GC runs
//! in the second) then 4 KiB random writes (IOPS, in-capsule) on the same,
//! now full, namespace, each from one client connection with 32 commands
//! in flight, measured in one run and printed as a table. Run with
//! `cargo bench --release -p nvme-target --bench loopback`.
//!
//! "One core": the target (its accept and connection threads) is pinned to
//! CPU 0 and the client to CPU 1 (sched_setaffinity; threads inherit the
//! mask of the thread that starts them); the table shows how much of its
//! core each side used (CPU time from getrusage / wall time). Set
//! `PCSTREAM_BENCH_NO_PIN=1` to leave placement to the scheduler.

use std::sync::Arc;
use std::time::Instant;

use nvme_target::client::Client;
use nvme_target::{DeviceConfig, Target, DEFAULT_NQN};

const CAPACITY: u64 = 1 << 30;

/// Pins the calling thread to `cpu`; false when that is not possible.
fn pin(cpu: usize) -> bool {
    if std::env::var_os("PCSTREAM_BENCH_NO_PIN").is_some() {
        return false;
    }
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET only write into it
    // (cpu is below the set's size, checked), and sched_setaffinity reads
    // it for the calling thread (pid 0).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
            return false;
        }
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// CPU seconds (user + system) of the process or the calling thread.
fn cpu_secs(who: libc::c_int) -> f64 {
    // SAFETY: rusage is plain data that getrusage fills in.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut ru);
        ru
    };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

struct Row {
    name: &'static str,
    bs: usize,
    ops: u64,
    secs: f64,
    waf: f64,
    target_cpu: f64,
    client_cpu: f64,
}

fn run(t: &nvme_target::Running, name: &'static str, bs: usize, ops: u64, random: bool) -> Row {
    let a = Client::admin(t.addr(), DEFAULT_NQN).expect("admin");
    let mut q = a.io_queue(DEFAULT_NQN, 1).expect("io queue");
    let blocks = (bs / 4096) as u64;
    let span = CAPACITY / 4096 / blocks;
    let data: Arc<[u8]> = vec![0xa5u8; bs].into();
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
    let (proc0, thread0) = (cpu_secs(libc::RUSAGE_SELF), cpu_secs(libc::RUSAGE_THREAD));
    let start = Instant::now();
    let failed = q.pipeline(32, cmds).expect("pipeline");
    let secs = start.elapsed().as_secs_f64();
    let client = cpu_secs(libc::RUSAGE_THREAD) - thread0;
    let total = cpu_secs(libc::RUSAGE_SELF) - proc0;
    assert_eq!(failed, 0);
    Row {
        name,
        bs,
        ops,
        secs,
        waf: t.stats().waf,
        target_cpu: (total - client) / secs,
        client_cpu: client / secs,
    }
}

fn main() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pinned = cpus >= 2 && pin(0);
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
    let pinned = pinned && pin(1);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let rows = [
        run(&t, "128 KiB seq write", 128 << 10, 16_384, false),
        run(&t, "4 KiB rand write", 4096, 600_000, true),
    ];
    println!(
        "target {}; {cpus} CPUs; load average before: {}",
        if pinned {
            "pinned to CPU 0, client to CPU 1"
        } else {
            "and client not pinned"
        },
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "{:<18} {:>8} {:>10} {:>8} {:>7} {:>11} {:>11}",
        "workload", "ops", "IOPS", "GB/s", "WAF", "target core", "client core"
    );
    for r in rows {
        let iops = r.ops as f64 / r.secs;
        println!(
            "{:<18} {:>8} {:>10.0} {:>8.3} {:>7.3} {:>10.0}% {:>10.0}%",
            r.name,
            r.ops,
            iops,
            iops * r.bs as f64 / 1e9,
            r.waf,
            r.target_cpu * 100.0,
            r.client_cpu * 100.0
        );
    }
}
