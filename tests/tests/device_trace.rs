//! Ground-truth device traces: `pcstreamctl record --device-trace` runs a
//! small `db_bench` (fillrandom + updaterandom) on a scratch ext4 over a loop
//! device while tracefs records what the device receives. Proves, through
//! the replay the simulator uses:
//! - every device write is attributed to a file and the signature that wrote
//!   it, or counted as file-system metadata/journal — and nearly all data is;
//! - the WAL's device writes carry the WAL signature (the one whose call
//!   path runs through `DBImpl::WriteToWAL`), and RocksDB's SHORT hint;
//! - discards of deleted SST files reach the simulator as TRIMs of pages the
//!   SST writers wrote;
//! - a `--device-fill` ageing is replayed onto the simulated device before
//!   the workload and left out of what is measured.
//!
//! Needs root (loop devices, mount, tracefs): as another user it fails
//! naming that, never skips.

mod app_common;

use ftl_sim::{Config, Geometry, Ssd};
use pcstream_placement::placement::Baseline;
use pcstream_replay::{self as replay, Op, Replay, ReplayOptions, Source, WriteClass};
use pcstream_tests::{require_device_trace, require_tool};
use std::collections::{BTreeSet, HashSet};
use std::process::Command;

#[test]
fn db_bench_device_writes_are_attributed_and_deletions_trim() {
    require_device_trace("device-trace tests");
    require_tool("db_bench", "rocksdb-tools");
    pcstream_tests::shim();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("rec");
    let o = Command::new(pcstream_tests::pcstreamctl())
        .args(["record", "--device-trace", "--device-size", "512M", "-o"])
        .arg(&out)
        .args([
            "--",
            "db_bench",
            "--db=./db",
            "--wal_dir=./db",
            "--benchmarks=fillrandom,updaterandom",
            "--num=20000",
            "--value_size=400",
            "--write_buffer_size=2097152",
            "--target_file_size_base=1048576",
            "--max_bytes_for_level_base=4194304",
            "--compression_type=none",
            "--statistics=0",
            // Background writeback of the WAL and tables as a real deployment
            // configures it; without it the short-lived WALs die in the page
            // cache and never reach the device at all. RocksDB never range-syncs
            // the last 1 MiB of a file, hence 2 MiB memtables (and WALs).
            "--wal_bytes_per_sync=65536",
            "--bytes_per_sync=262144",
        ])
        .output()
        .expect("run pcstreamctl record");
    assert!(
        o.status.success(),
        "record --device-trace failed ({}):\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    // Nothing machine-global is left behind.
    let loops = Command::new("losetup").arg("-a").output().unwrap();
    assert!(
        !String::from_utf8_lossy(&loops.stdout).contains(&*out.to_string_lossy()),
        "loop device left attached: {}",
        String::from_utf8_lossy(&loops.stdout)
    );
    let inst = std::fs::read_dir("/sys/kernel/tracing/instances")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("pcstream-"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    assert!(inst.is_empty(), "tracefs instances left: {inst:?}");

    let trace = out.join("trace.pcstrace");
    let r = Replay::from_trace(&trace, &ReplayOptions::default()).unwrap();
    let s = &r.stats;
    assert_eq!(r.source, Source::GroundTruth);
    assert_eq!(
        r.logical_pages,
        (512 << 20) / 4096,
        "device size from DeviceInfo"
    );
    // Every device write is data of a file or metadata/journal.
    assert_eq!(s.write_pages, s.data_pages + s.metadata_pages, "{s:?}");
    // db_bench wrote ~25 MB through the WAL alone: the device saw real data.
    assert!(s.data_pages > 4000, "{s:?}");
    assert!(
        s.data_pages as f64 >= 0.8 * s.write_pages as f64,
        "most device writes should be file data: {s:?}"
    );
    assert!(
        s.signed_pages as f64 >= 0.98 * s.data_pages as f64,
        "data pages without the signature that wrote them: {s:?}"
    );

    // The WAL signature(s), by call path.
    let paths = app_common::call_paths(&out);
    let wal: BTreeSet<u64> = paths
        .iter()
        .filter(|(_, p)| p.contains("DBImpl::WriteToWAL"))
        .map(|(s, _)| *s)
        .collect();
    assert!(!wal.is_empty(), "no WAL call path in {paths:#?}");
    const SHORT: u8 = 2;
    let (mut short_pages, mut short_wal, mut wal_pages, mut wal_short) = (0u64, 0u64, 0u64, 0u64);
    let mut sst_lpns = HashSet::new();
    let mut trimmed_sst = 0u64;
    for op in &r.ops {
        match *op {
            Op::Write {
                lpn,
                pages,
                signature,
                app_hint,
                class,
                ..
            } => {
                let n = u64::from(pages);
                let is_wal = signature.is_some_and(|s| wal.contains(&s));
                if app_hint == SHORT {
                    short_pages += n;
                    short_wal += if is_wal { n } else { 0 };
                }
                if is_wal {
                    wal_pages += n;
                    wal_short += if app_hint == SHORT { n } else { 0 };
                }
                if class == WriteClass::Data && (3..=5).contains(&app_hint) {
                    sst_lpns.extend(lpn..lpn + n);
                } else {
                    for l in lpn..lpn + n {
                        sst_lpns.remove(&l);
                    }
                }
            }
            Op::Trim { lpn, pages } => {
                let end = lpn + pages;
                let before = sst_lpns.len();
                sst_lpns.retain(|&l| l < lpn || l >= end);
                trimmed_sst += (before - sst_lpns.len()) as u64;
            }
            Op::InvalidateFile { .. } => {}
        }
    }
    let msg = format!("WAL signatures {wal:x?}; {s:?}");
    assert!(wal_pages > 1000, "WAL device pages {wal_pages}: {msg}");
    assert!(
        short_wal as f64 >= 0.99 * short_pages as f64,
        "SHORT-hinted (WAL) device pages not carrying a WAL signature: {short_wal}/{short_pages}: {msg}"
    );
    assert!(
        wal_short as f64 >= 0.99 * wal_pages as f64,
        "WAL-signature device pages without RocksDB's SHORT hint: {wal_short}/{wal_pages}: {msg}"
    );
    assert!(
        trimmed_sst > 500,
        "deleted SST files should reach the device as discards of their pages: {trimmed_sst} trimmed: {msg}"
    );

    // And the simulator honours them.
    let ppb = 64u32;
    let geometry = Geometry {
        channels: 1,
        ways: 1,
        blocks_per_unit: ((r.logical_pages as f64 * 1.2) as u64).div_ceil(u64::from(ppb)) as u32,
        pages_per_block: ppb,
        page_size: 4096,
    };
    let cfg = Config {
        geometry,
        op: 0.15,
        streams: 1,
        ..Config::default()
    };
    let mut ssd = Ssd::new(cfg).unwrap();
    assert!(ssd.logical_pages() >= r.logical_pages);
    replay::run(&r, &mut Baseline, &mut ssd).unwrap();
    let st = ssd.stats();
    assert_eq!(st.host_pages, s.write_pages);
    assert!(st.trimmed_pages >= trimmed_sst, "{st:?}");
}

#[test]
fn a_recorded_fill_ages_the_simulated_device_and_is_not_measured() {
    require_device_trace("device-trace tests");
    pcstream_tests::shim();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("rec");
    let o = Command::new(pcstream_tests::pcstreamctl())
        .args(["record", "--device-trace", "--device-size", "64M"])
        .args(["--device-fill", "0.5", "-o"])
        .arg(&out)
        .args([
            "--",
            "sh",
            "-c",
            "head -c 4194304 /dev/zero >a && sync && rm a && head -c 2097152 /dev/zero >b && sync",
        ])
        .output()
        .expect("run pcstreamctl record");
    assert!(
        o.status.success(),
        "record --device-fill failed ({}):\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let trace = out.join("trace.pcstrace");
    let r = Replay::from_trace(&trace, &ReplayOptions::default()).unwrap();
    let s = &r.stats;
    let msg = format!("{s:?}");
    // About half of the 64 MiB file system went to the fill, before the workload.
    assert!(
        (6000..9000).contains(&s.ageing_pages),
        "ageing pages: {msg}"
    );
    let ageing_written: u64 = r
        .ageing
        .iter()
        .map(|op| match *op {
            Op::Write { pages, .. } => u64::from(pages),
            _ => 0,
        })
        .sum();
    assert_eq!(ageing_written, s.ageing_pages);
    // The workload's own 6 MiB (+ metadata) is what is measured.
    assert!(
        (1536..2600).contains(&s.data_pages),
        "workload data pages: {msg}"
    );
    assert_eq!(r.host_pages(), s.write_pages);
    // compare's sizing: no cold pre-fill and no confinement on top of the
    // recorded ageing, whatever --prefill says.
    let fitted = replay::fit_for_ageing(r.clone(), 0.9).unwrap();
    assert_eq!(fitted.confined_from, None);
    let job = replay::Job {
        replay: &fitted,
        policy: "baseline".into(),
        spec: replay::DeviceSpec::default(),
    };
    let res = replay::simulate(&job, &Default::default()).unwrap();
    assert_eq!(res.layout.cold_pages, 0);
    let traced = (64u64 << 20) / 4096;
    assert!(
        (traced..traced + traced / 10).contains(&res.layout.logical_pages),
        "simulated logical pages {} for a {traced}-page device",
        res.layout.logical_pages
    );
    assert_eq!(
        res.stats.host_pages, s.write_pages,
        "the fill is not measured"
    );
    // The fill is on the device: more valid pages than the workload left.
    assert!(
        res.stats.valid_pages >= s.ageing_pages,
        "valid {} < fill {}",
        res.stats.valid_pages,
        s.ageing_pages
    );
}
