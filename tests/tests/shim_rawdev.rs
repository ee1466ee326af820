//! Raw block devices with write streams under the shim (issue #25, item 3),
//! on a loop device (root: `losetup`; released on every exit path).
//!
//! No device on this host has write streams, so the shim is shown one that
//! has: `PCSTREAM_SYSFS` points it at a copy of the loop device's sysfs
//! entry whose `queue/max_write_streams` says 8 (or 4). Everything else is
//! real: the loop device node, `O_DIRECT` writes, `F_SET_RW_HINT` on the
//! node (which works on any inode) read back with `F_GET_RW_HINT`.
//! - `tests/c/shim_rawdev.c` (journal / table / scratch call paths): the
//!   trace names the device `{ dev: st_rdev, ino: 0 }` with each path's
//!   offsets and calls, and the scratch deallocations (`fallocate`,
//!   `ioctl(BLKDISCARD)`; not the refused ones); a static map puts
//!   stream k on the node as hint k before each write; a stream above 5
//!   leaves the hint alone; a device without write streams behaves as before
//!   (no hint, no event); output and O_DIRECT alignment errors are exactly
//!   the real calls';
//! - `tests/c/shim_rawdev_race.c`: two writers (threads, processes) with
//!   different streams racing on the node's one hint;
//! - `tests/c/shim_uring_api.c` (`include/pcstream.h`): io_uring writes
//!   asking `pcstream_stream_for_write` get their call paths' streams, and
//!   the daemon's trace learns those paths.

mod rawdev_common;
mod shim_common;

use pcstream_placement::env as var;
use pcstream_placement::wire::{self, event::Kind};
use rawdev_common::*;
use shim_common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

impl WithEnv for Run {
    fn with_env(self, k: &str, v: &str) -> Self {
        self.env(k, v)
    }
}

/// The writes of a trace to the raw device, in order.
fn raw_writes<'a>(t: &'a ProcessTrace, dev: &LoopDev) -> Vec<&'a wire::WriteEvent> {
    t.writes()
        .into_iter()
        .filter(|w| w.file.is_some_and(|f| (f.dev, f.ino) == dev.id()))
        .collect()
}

/// Path name → its signatures, from the 4 KiB blocks each path writes:
/// `journal` 0..8, `scratch` 32..40, `table` 64...
fn paths_by_offset(w: &[&wire::WriteEvent]) -> BTreeMap<&'static str, BTreeSet<u64>> {
    let mut m: BTreeMap<&str, BTreeSet<u64>> = BTreeMap::new();
    for e in w {
        let name = match e.offset / 4096 {
            0..8 => "journal",
            32..40 => "scratch",
            64..95 => "table",
            95 => continue,
            b => panic!("a write at block {b}"),
        };
        m.entry(name).or_default().insert(e.signature);
    }
    m
}

fn map_file(dir: &Path, paths: &BTreeMap<&str, BTreeSet<u64>>, streams: &[(&str, u32)]) -> PathBuf {
    let map = dir.join("streams.map");
    let mut text = String::new();
    for (name, stream) in streams {
        for s in &paths[name] {
            text.push_str(&format!("{s:016x} {stream}\n"));
        }
    }
    std::fs::write(&map, text).unwrap();
    map
}

/// The hints printed after each path's writes (`<path> hint <h>`).
fn hints_by_path(out: &str) -> BTreeMap<String, Vec<u64>> {
    let mut m: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for l in out.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if let [path, "hint", h] = f[..] {
            m.entry(path.into()).or_default().push(h.parse().unwrap());
        }
    }
    m
}

/// Learns the three paths' signatures from a recording (8 rounds).
fn learn(bin: &Path, dev: &LoopDev, sys: &Path) -> BTreeMap<&'static str, BTreeSet<u64>> {
    let rec = tempfile::tempdir().unwrap();
    with_streams(Run::record(rec.path()), sys).stdout(bin, &[dev.arg(), "8", "quiet"]);
    let t = only_trace(rec.path());
    let w = raw_writes(&t, dev);
    paths_by_offset(&w)
}

#[test]
fn raw_device_writes_take_their_call_paths_streams() {
    let bin = program("shim_rawdev", FP);
    let dev = LoopDev::new(8);
    let sys = sysfs_with_streams(&dev, 8);

    // The trace: the device by its number, every path's writes and the
    // scratch deallocations.
    let rec = tempfile::tempdir().unwrap();
    with_streams(Run::record(rec.path()), sys.path()).stdout(&bin, &[dev.arg(), "8", "quiet"]);
    let t = only_trace(rec.path());
    let w = raw_writes(&t, &dev);
    let calls: BTreeMap<u64, i32> = w.iter().map(|e| (e.offset / 4096, e.call)).collect();
    assert_eq!(calls[&0], wire::WriteCall::Write as i32, "journal: write");
    assert_eq!(calls[&64], wire::WriteCall::Pwrite as i32, "table: pwrite");
    assert_eq!(
        calls[&32],
        wire::WriteCall::Pwritev as i32,
        "scratch: pwritev"
    );
    let blocks: BTreeSet<u64> = w.iter().map(|e| e.offset / 4096).collect();
    let want: BTreeSet<u64> = (0..8).chain(32..40).chain(64..72).chain([95]).collect();
    assert_eq!(blocks, want, "every successful write, at its offset");
    assert!(w.iter().all(|e| e.len == 4096));
    let paths = paths_by_offset(&w);
    assert_eq!(paths.len(), 3);
    let all: BTreeSet<u64> = paths.values().flatten().copied().collect();
    assert_eq!(
        all.len(),
        paths.values().map(|s| s.len()).sum::<usize>(),
        "no signature shared between paths: {paths:?}"
    );
    let punched: Vec<(u64, u64)> = t
        .events()
        .filter_map(|e| match &e.kind {
            Some(Kind::Invalidate(i)) if i.file.is_some_and(|f| (f.dev, f.ino) == dev.id()) => {
                Some((i.offset / 4096, i.len))
            }
            _ => None,
        })
        .collect();
    assert_eq!(punched, (32..40).map(|b| (b, 4096)).collect::<Vec<_>>());
    assert_eq!(
        t.paths().get(&dev.id()).map(String::as_str),
        Some(dev.arg()),
        "the device is named by its node"
    );

    // A static map: stream k is hint k on the node, set before each write.
    let cfg = tempfile::tempdir().unwrap();
    let map = map_file(
        cfg.path(),
        &paths,
        &[("journal", 1), ("table", 3), ("scratch", 5)],
    );
    let out = with_streams(Run::shim().env(var::MAP, map.to_str().unwrap()), sys.path())
        .stdout(&bin, &[dev.arg(), "8"]);
    let h = hints_by_path(&out);
    assert_eq!(h["journal"], vec![1; 8], "{out}");
    assert_eq!(h["table"], vec![3; 8], "{out}");
    assert_eq!(h["scratch"], vec![5; 8], "{out}");

    // With the events on, the events carry stream and hint.
    let rec = tempfile::tempdir().unwrap();
    with_streams(
        Run::record(rec.path()).env(var::MAP, map.to_str().unwrap()),
        sys.path(),
    )
    .stdout(&bin, &[dev.arg(), "8", "quiet"]);
    let t = only_trace(rec.path());
    for e in raw_writes(&t, &dev) {
        let want = match e.offset / 4096 {
            0..8 => 1,
            32..40 => 5,
            64..72 => 3,
            _ => continue,
        };
        assert_eq!(
            (e.stream, e.hint),
            (want, want),
            "block {}",
            e.offset / 4096
        );
    }

    // Stream 7: no hint value carries it; the node keeps what it had.
    let map = map_file(
        cfg.path(),
        &paths,
        &[("journal", 1), ("table", 3), ("scratch", 7)],
    );
    let out = with_streams(Run::shim().env(var::MAP, map.to_str().unwrap()), sys.path())
        .stdout(&bin, &[dev.arg(), "8"]);
    assert_eq!(hints_by_path(&out)["scratch"], vec![3; 8], "{out}");

    // A device with 4 streams: stream 5 is not one of them.
    let sys4 = sysfs_with_streams(&dev, 4);
    let map = map_file(
        cfg.path(),
        &paths,
        &[("journal", 1), ("table", 4), ("scratch", 5)],
    );
    let out = with_streams(
        Run::shim().env(var::MAP, map.to_str().unwrap()),
        sys4.path(),
    )
    .stdout(&bin, &[dev.arg(), "8"]);
    let h = hints_by_path(&out);
    assert_eq!((h["table"][0], h["scratch"][0]), (4, 4), "{out}");
}

#[test]
fn a_device_without_write_streams_behaves_as_before() {
    let bin = program("shim_rawdev", FP);
    let dev = LoopDev::new(8);
    let sys = sysfs_with_streams(&dev, 8);
    let paths = learn(&bin, &dev, sys.path());
    let cfg = tempfile::tempdir().unwrap();
    let map = map_file(
        cfg.path(),
        &paths,
        &[("journal", 1), ("table", 3), ("scratch", 5)],
    );
    // The host's own sysfs: the loop device has no write streams.
    let rec = tempfile::tempdir().unwrap();
    let out = Run::record(rec.path())
        .env(var::MAP, map.to_str().unwrap())
        .stdout(&bin, &[dev.arg(), "4"]);
    for (path, h) in hints_by_path(&out) {
        assert_eq!(h, vec![0; 4], "{path}: {out}");
    }
    let t = only_trace(rec.path());
    assert!(raw_writes(&t, &dev).is_empty(), "no event for the device");
    assert!(!t.paths().contains_key(&dev.id()));
}

#[test]
fn raw_device_output_and_alignment_errors_are_the_real_calls() {
    let bin = program("shim_rawdev", FP);
    let dev = LoopDev::new(8);
    let sys = sysfs_with_streams(&dev, 8);
    let paths = learn(&bin, &dev, sys.path());
    let cfg = tempfile::tempdir().unwrap();
    let map = map_file(
        cfg.path(),
        &paths,
        &[("journal", 2), ("table", 3), ("scratch", 1)],
    );
    let args = [dev.arg(), "8", "quiet"];
    let plain = Run::plain().stdout(&bin, &args);
    for what in ["buffer", "offset", "length"] {
        assert!(
            plain.contains(&format!("misaligned-{what} rc=-1 errno={}\n", libc::EINVAL)),
            "{plain}"
        );
    }
    assert!(
        plain.contains("misaligned-none rc=4096 errno=0\n"),
        "{plain}"
    );
    for (what, errno) in [
        ("misaligned", libc::EINVAL),
        ("fault", libc::EFAULT),
        ("badfd", libc::EBADF),
    ] {
        assert!(
            plain.contains(&format!("ioctl-discard-{what} rc=-1 errno={errno}\n")),
            "{plain}"
        );
    }
    let rec = tempfile::tempdir().unwrap();
    for (how, run) in [
        ("map", Run::shim().env(var::MAP, map.to_str().unwrap())),
        (
            "record+map",
            Run::record(rec.path()).env(var::MAP, map.to_str().unwrap()),
        ),
    ] {
        let out = with_streams(run, sys.path()).stdout(&bin, &args);
        assert_eq!(out, plain, "{how}: byte for byte");
    }
    // The misaligned writes failed under the shim too: no event for them.
    let t = only_trace(rec.path());
    let w = raw_writes(&t, &dev);
    assert_eq!(w.len(), 25, "24 writes of the paths and the aligned one");
    assert!(
        w.iter().all(|e| e.offset % 4096 == 0 && e.len == 4096),
        "{w:?}"
    );
}

/// Runs the race program; per writer, how many of its writes were followed
/// by each hint value.
fn race(bin: &Path, run: Run, dev: &LoopDev, mode: &str, n: u32) -> [[u64; 6]; 2] {
    race_seen(&run.stdout(bin, &[dev.arg(), mode, &n.to_string()]), n)
}

/// The race program's output `out` as per-writer counts of each hint seen
/// after a write; each writer made all its `n` writes.
fn race_seen(out: &str, n: u32) -> [[u64; 6]; 2] {
    let mut seen = [[0u64; 6]; 2];
    for l in out.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let w: usize = f[1].parse().unwrap();
        for kv in &f[2..] {
            let (h, c) = kv.split_once(':').unwrap();
            seen[w][h.parse::<usize>().unwrap()] = c.parse().unwrap();
        }
    }
    for (i, s) in seen.iter().enumerate() {
        assert_eq!(s.iter().sum::<u64>(), n as u64, "writer {i}: {out}");
    }
    seen
}

/// A map putting the race program's writer 0 on stream 1 and writer 1 on
/// stream 2, from recordings of both modes (a thread's path and a
/// process's differ in their outer frames).
fn race_map(bin: &Path, dev: &LoopDev, sys: &Path, dir: &Path) -> PathBuf {
    let mut by_half: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    for mode in ["threads", "procs"] {
        let rec = tempfile::tempdir().unwrap();
        race(
            bin,
            with_streams(Run::record(rec.path()), sys),
            dev,
            mode,
            16,
        );
        for t in traces(rec.path()) {
            for w in raw_writes(&t, dev) {
                by_half
                    .entry(w.offset >> 22)
                    .or_default()
                    .insert(w.signature);
            }
        }
    }
    assert_eq!(by_half.len(), 2, "{by_half:?}");
    let map = dir.join("race.map");
    let mut text = String::new();
    for (half, sigs) in &by_half {
        for s in sigs {
            text.push_str(&format!("{s:016x} {}\n", half + 1));
        }
    }
    std::fs::write(&map, text).unwrap();
    map
}

#[test]
fn concurrent_writers_race_on_the_device_hint() {
    let bin = program("shim_rawdev_race", FP);
    let dev = LoopDev::new(16);
    let sys = sysfs_with_streams(&dev, 8);
    let cfg = tempfile::tempdir().unwrap();
    let map = race_map(&bin, &dev, sys.path(), cfg.path());
    let n = 2000;
    for mode in ["threads", "procs"] {
        let seen = race(
            &bin,
            with_streams(Run::shim().env(var::MAP, map.to_str().unwrap()), sys.path()),
            &dev,
            mode,
            n,
        );
        // Writer i's stream is i + 1; the other's hint after its write
        // means the write may have gone to the other stream.
        let other = [seen[0][2], seen[1][1]];
        eprintln!(
            "{mode}: {n} writes each; followed by the other writer's hint: {} and {} ({:.1}%, {:.1}%)",
            other[0],
            other[1],
            100.0 * other[0] as f64 / n as f64,
            100.0 * other[1] as f64 / n as f64
        );
        for (i, s) in seen.iter().enumerate() {
            assert_eq!(
                s[1] + s[2],
                n as u64,
                "{mode}: writer {i} saw only the two streams' hints: {s:?}"
            );
        }
        // Each writer sets its own hint whenever the other changed it
        // (processes see each other's sets through the shared page), so
        // the node does not keep one writer's hint. Not every writer need
        // see its own after its write: two writers sleeping in their
        // O_DIRECT writes on a busy machine alternate so that one always
        // reads the other's (seen once in 19 runs of this suite).
        assert!(
            seen[0][1] + seen[1][2] > 0,
            "{mode}: no writer ever saw its own hint: {seen:?}"
        );
    }
}

/// Without /dev/shm (the bench's guest has none), a process cannot see
/// that another one changed the node's hint since its own last set, so the
/// shim sets the hint before every raw-device write. Two writer processes
/// in a mount namespace whose /dev/shm is an empty read-only tmpfs, under
/// strace: each sets the node's hint at least once per write. Before the fallback each set it once, and fio's two jobs in the
/// guest put 94 % of the cold job's data in the hot job's RUH.
#[test]
fn without_dev_shm_a_process_sets_the_hint_before_every_raw_write() {
    pcstream_tests::require_tool("unshare", "util-linux");
    pcstream_tests::require_tool("strace", "strace");
    let bin = program("shim_rawdev_race", FP);
    let dev = LoopDev::new(16);
    let sys = sysfs_with_streams(&dev, 8);
    let cfg = tempfile::tempdir().unwrap();
    let map = race_map(&bin, &dev, sys.path(), cfg.path());
    let log = cfg.path().join("fcntl.log");
    let n = 300u32;
    let script = format!(
        "mount -t tmpfs -o ro,size=4k pcstream-test /dev/shm && exec strace -f -qq -e trace=fcntl \
         -e signal=none -o {} {} {} procs {n}",
        log.display(),
        bin.display(),
        dev.arg()
    );
    // Each writer made all its n writes.
    let out = with_streams(Run::shim().env(var::MAP, map.to_str().unwrap()), sys.path()).stdout(
        Path::new("unshare"),
        &["--mount", "--propagation", "private", "sh", "-c", &script],
    );
    race_seen(&out, n);
    // pid -> how many times it set a hint (strace 6.1 prints the command
    // as `0x40c /* F_??? */`, later ones by name; neither shows the value,
    // which the race program's own counts cover).
    let trace = std::fs::read_to_string(&log).unwrap();
    let mut sets: BTreeMap<u32, u64> = BTreeMap::new();
    for l in trace
        .lines()
        .filter(|l| l.contains("F_SET_RW_HINT") || l.contains(", 0x40c "))
    {
        let pid: u32 = l.split_whitespace().next().unwrap().parse().unwrap();
        *sets.entry(pid).or_default() += 1;
    }
    assert_eq!(
        sets.len(),
        2,
        "two writer processes set hints: {sets:?}\n{trace}"
    );
    for (pid, k) in &sets {
        assert!(
            *k >= u64::from(n),
            "process {pid} set the hint {k} times for {n} writes"
        );
    }
}

/// `tests/c/shim_uring_api.c`, built against `include/pcstream.h`.
fn uring_program() -> PathBuf {
    let inc = pcstream_tests::c_dir().join("../../crates/preload/include");
    let inc = format!("-I{}", inc.canonicalize().unwrap().display());
    let mut flags = FP.to_vec();
    flags.push(&inc);
    program("shim_uring_api", &flags)
}

/// `(path, stream, res)` per line of the io_uring program's output.
fn uring_lines(out: &str) -> Vec<(String, i64, i64)> {
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            match f[..] {
                [p, "stream", s, "res", r] => {
                    Some((p.into(), s.parse().unwrap(), r.parse().unwrap()))
                }
                _ => None,
            }
        })
        .collect()
}

fn caller_stream(out: &str) -> i64 {
    out.lines()
        .find_map(|l| l.strip_prefix("caller stream "))
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn io_uring_writes_get_their_streams_from_the_c_api() {
    let bin = uring_program();
    let dev = LoopDev::new(8);
    let sys = sysfs_with_streams(&dev, 8);
    let args = [dev.arg(), "4", "nostream"];

    // Without the shim (weak symbols, null): no stream, the writes done.
    let plain = Run::plain().stdout(&bin, &args);
    let lines = uring_lines(&plain);
    assert_eq!(lines.len(), 12, "{plain}");
    assert!(
        lines.iter().all(|(_, s, r)| (*s, *r) == (0, 4096)),
        "{plain}"
    );
    assert_eq!(caller_stream(&plain), 0);
    // The shim loaded but with nothing to do: the same.
    assert_eq!(
        with_streams(Run::shim(), sys.path()).stdout(&bin, &args),
        plain
    );

    // Recording: each submission is a URING write event of its path.
    let rec = tempfile::tempdir().unwrap();
    let out = with_streams(Run::record(rec.path()), sys.path()).stdout(&bin, &args);
    assert_eq!(out, plain, "nothing mapped yet: stream 0");
    let t = only_trace(rec.path());
    let w = raw_writes(&t, &dev);
    assert_eq!(w.len(), 12);
    assert!(w
        .iter()
        .all(|e| e.call == wire::WriteCall::Uring as i32 && e.len == 4096));
    let mut paths: BTreeMap<&str, BTreeSet<u64>> = BTreeMap::new();
    for e in &w {
        let name = match e.offset / 4096 {
            0..8 => "log_append",
            32..40 => "temp_spill",
            64..68 => "table_flush",
            b => panic!("block {b}"),
        };
        paths.entry(name).or_default().insert(e.signature);
    }
    assert!(paths.values().all(|s| s.len() == 1), "{paths:?}");
    let sig = |p: &str| *paths[p].iter().next().unwrap();
    // The caller-only query was described too (its signature, no write).
    let written: BTreeSet<u64> = w.iter().map(|e| e.signature).collect();
    let described: BTreeSet<u64> = t.signatures().keys().copied().collect();
    let caller: Vec<u64> = described.difference(&written).copied().collect();
    assert_eq!(caller.len(), 1, "{described:?} vs {written:?}");

    // A static map: each path gets its stream for sqe->write_stream.
    let cfg = tempfile::tempdir().unwrap();
    let map = cfg.path().join("uring.map");
    std::fs::write(
        &map,
        format!(
            "{:016x} 1\n{:016x} 7\n{:016x} 3\n{:016x} 2\n",
            sig("log_append"),
            sig("table_flush"),
            sig("temp_spill"),
            caller[0]
        ),
    )
    .unwrap();
    let mapped = |sys: &Path| {
        with_streams(Run::shim().env(var::MAP, map.to_str().unwrap()), sys).stdout(&bin, &args)
    };
    let out = mapped(sys.path());
    let want = |p: &str| match p {
        "log_append" => 1,
        "table_flush" => 7,
        _ => 3,
    };
    for (p, s, r) in uring_lines(&out) {
        assert_eq!((s, r), (want(&p), 4096), "{p}: {out}");
    }
    assert_eq!(caller_stream(&out), 2, "{out}");
    // The node's hint is io_uring's business no more: untouched.
    let node = pcstream_tests::rw_hint(&dev.path);
    assert_eq!(node, 0, "the device node's hint");
    // On a device of 4 streams, stream 7 is none.
    let sys4 = sysfs_with_streams(&dev, 4);
    let out = mapped(sys4.path());
    for (p, s, _) in uring_lines(&out) {
        let w = if p == "table_flush" { 0 } else { want(&p) };
        assert_eq!(s, w, "{p}: {out}");
    }

    // A regular file: the default domain's stream, and its hint on the file.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data");
    std::fs::File::create(&file)
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let out = Run::shim()
        .env(var::MAP, map.to_str().unwrap())
        .stdout(&bin, &[file.to_str().unwrap(), "1", "nostream"]);
    let lines = uring_lines(&out);
    assert_eq!(
        lines.iter().map(|(_, s, _)| *s).collect::<Vec<_>>(),
        vec![1, 7, 3],
        "{out}"
    );
    assert_eq!(
        pcstream_tests::rw_hint(&file),
        pcstream_placement::hint::RwHint::for_stream(3).raw(),
        "the last path's hint on the file"
    );
}

/// fio on the raw device with `--ioengine=libaio --direct=1`.
fn fio_args(dev: &LoopDev, out: &Path) -> Vec<String> {
    [
        "--name=raw",
        &format!("--filename={}", dev.arg()),
        "--size=4M",
        "--rw=randwrite",
        "--bs=4k",
        "--ioengine=libaio",
        "--iodepth=8",
        "--direct=1",
        "--randrepeat=1",
        &format!("--output={}", out.display()),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[test]
fn libaio_writes_to_a_raw_device_get_the_hint_before_their_submission() {
    pcstream_tests::require_tool("fio", "fio");
    pcstream_tests::require_tool("strace", "strace");
    let dev = LoopDev::new(8);
    let sys = sysfs_with_streams(&dev, 8);
    let fio = pcstream_tests::which("fio").unwrap();
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("fio.out");
    let args = fio_args(&dev, &out);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let rec = tempfile::tempdir().unwrap();
    with_streams(Run::record(rec.path()), sys.path()).stdout(&fio, &argv);
    let report = std::fs::read_to_string(&out).unwrap();
    assert!(report.contains("err= 0"), "{report}");
    let mut sigs = BTreeSet::new();
    let mut bytes = 0;
    for t in traces(rec.path()) {
        for w in raw_writes(&t, &dev) {
            assert_eq!(w.call, wire::WriteCall::Aio as i32);
            sigs.insert(w.signature);
            bytes += w.len;
        }
    }
    assert_eq!(bytes, 4 << 20, "every block, as submitted");
    assert_eq!(sigs.len(), 1, "{sigs:x?}");
    let cfg = tempfile::tempdir().unwrap();
    let map = cfg.path().join("fio.map");
    std::fs::write(&map, format!("{:016x} 4\n", sigs.first().unwrap())).unwrap();
    let log = cfg.path().join("strace.log");
    let mut sargs = vec![
        "-f",
        "-e",
        "trace=fcntl,io_submit",
        "-o",
        log.to_str().unwrap(),
        fio.to_str().unwrap(),
    ];
    sargs.extend(&argv);
    with_streams(Run::shim().env(var::MAP, map.to_str().unwrap()), sys.path())
        .stdout(&pcstream_tests::which("strace").unwrap(), &sargs);
    assert_eq!(pcstream_tests::rw_hint(&dev.path), 4, "the node's hint");
    let trace = std::fs::read_to_string(&log).unwrap();
    let first = |what: &str| trace.lines().position(|l| l.contains(what));
    let set = first("F_SET_RW_HINT").or_else(|| first("0x40c"));
    let submit = first("io_submit(");
    assert!(
        set.is_some() && submit.is_some() && set < submit,
        "the hint before the first submission:\n{trace}"
    );
    let sets = trace
        .lines()
        .filter(|l| l.contains("F_SET_RW_HINT") || l.contains("0x40c"))
        .count();
    assert_eq!(sets, 1, "set once, not per submission:\n{trace}");
}

/// A published table (the daemon's file format) with `entries`, as
/// `<dir>/mapping.<uid>`.
fn publish_table(dir: &Path, entries: &[(u64, u32, u8)]) {
    use pcstream_placement::table::{table_words, TableWriter};
    use std::sync::atomic::AtomicU64;
    let slots = 256;
    let words: Vec<AtomicU64> = (0..table_words(slots)).map(|_| AtomicU64::new(0)).collect();
    let mut w = TableWriter::init(&words, slots, 8).unwrap();
    for &(key, stream, hint) in entries {
        w.set(key, Some((stream, hint))).unwrap();
    }
    w.publish();
    let bytes: Vec<u8> = words
        .iter()
        .flat_map(|a| a.load(std::sync::atomic::Ordering::Relaxed).to_le_bytes())
        .collect();
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    std::fs::write(dir.join(format!("mapping.{uid}")), bytes).unwrap();
}

#[test]
fn the_live_table_gives_a_raw_device_its_domains_streams() {
    use pcstream_placement::delivery::{table_key, Domain};
    let bin = program("shim_rawdev", FP);
    let dev = LoopDev::new(8);
    let sys = sysfs_with_streams(&dev, 8);
    let paths = learn(&bin, &dev, sys.path());
    let raw = |s: u64| table_key(s, Domain::Raw { dev: dev.rdev });
    let mut entries = Vec::new();
    for s in &paths["journal"] {
        entries.push((raw(*s), 2, 2));
    }
    for s in &paths["table"] {
        // Only in the default domain (a daemon that does not learn per device).
        entries.push((*s, 3, 4));
    }
    for s in &paths["scratch"] {
        entries.push((raw(*s), 5, 5));
        entries.push((*s, 1, 2));
    }
    // Another device's domain says nothing about this one.
    let other = Domain::Raw {
        dev: libc::makedev(259, 7),
    };
    for s in &paths["journal"] {
        entries.push((table_key(*s, other), 4, 4));
    }
    let runtime = tempfile::tempdir().unwrap();
    publish_table(runtime.path(), &entries);
    let out = with_streams(
        Run::shim().env(var::RUNTIME_DIR, runtime.path().to_str().unwrap()),
        sys.path(),
    )
    .stdout(&bin, &[dev.arg(), "4"]);
    let h = hints_by_path(&out);
    assert_eq!(h["journal"], vec![2; 4], "the device's domain: {out}");
    assert_eq!(
        h["table"],
        vec![3; 4],
        "the default domain's stream 3: {out}"
    );
    assert_eq!(h["scratch"], vec![5; 4], "the device's domain wins: {out}");
}
