//! Tests of `compare` on small traces built here with `TraceWriter`: one
//! with file events only (allocation model) and one with device records
//! (ground truth), both an append-only workload of two code paths whose data
//! lives very differently long.

use super::*;
use pcstream_placement::trace::TraceWriter;
use pcstream_placement::wire::{self, event::Kind, trace_record::Record};
use pcstream_replay::Source;

const FS_DEV: u64 = 0x803;
const SHORT_SIG: u64 = 0xaaaa_0001;
const LONG_SIG: u64 = 0xbbbb_0002;
/// Pages per write (one 64 KiB append).
const CHUNK: u64 = 16;

/// Builds a trace file record by record, with a logical nanosecond clock.
struct Builder {
    w: TraceWriter<std::io::BufWriter<std::fs::File>>,
    t: u64,
    seq: u64,
    /// Ground truth: emit extent maps and block requests too.
    device: Option<DeviceAlloc>,
}

/// The test's own "file system" for ground-truth traces: 16-page extents
/// from a FIFO free list (so writes spread over the whole device, as a
/// fresh ext4 does), a journal region written between data.
struct DeviceAlloc {
    free: std::collections::VecDeque<u64>,
    /// file (ino, chunk index) → device block
    owned: HashMap<(u64, u64), u64>,
    journal_next: u64,
    data_pages: u64,
    meta_pages: u64,
    trimmed_pages: u64,
}

use std::collections::HashMap;

const JOURNAL_BLOCKS: u64 = 256;

impl Builder {
    fn new(path: &Path, device_pages: Option<u64>) -> Builder {
        let mut w = TraceWriter::create(path).unwrap();
        w.write_record(&wire::TraceRecord {
            record: Some(Record::Header(wire::TraceHeader {
                version: 1,
                producer: "compare tests".into(),
                ..Default::default()
            })),
        })
        .unwrap();
        let device = device_pages.map(|pages| {
            w.write_record(&wire::TraceRecord {
                record: Some(Record::Device(wire::DeviceInfo {
                    dev: 0x700,
                    fs_dev: FS_DEV,
                    size_bytes: pages * 4096,
                    fs_type: "ext4".into(),
                    block_size: 4096,
                    lost_events: 0,
                    ..Default::default()
                })),
            })
            .unwrap();
            DeviceAlloc {
                free: (JOURNAL_BLOCKS / CHUNK..pages / CHUNK)
                    .map(|c| c * CHUNK)
                    .collect(),
                owned: HashMap::new(),
                journal_next: 0,
                data_pages: 0,
                meta_pages: 0,
                trimmed_pages: 0,
            }
        });
        Builder {
            w,
            t: 1_000,
            seq: 0,
            device,
        }
    }

    fn event(&mut self, kind: Kind) {
        self.t += 10;
        self.seq += 1;
        self.w
            .write_record(&wire::TraceRecord {
                record: Some(Record::Batch(wire::EventBatch {
                    pid: 42,
                    seq: self.seq,
                    events: vec![wire::Event {
                        time_ns: self.t,
                        tid: 42,
                        kind: Some(kind),
                    }],
                })),
            })
            .unwrap();
    }

    fn block(&mut self, sector_page: u64, pages: u64, op: wire::BlockOp) {
        self.t += 10;
        self.w
            .write_record(&wire::TraceRecord {
                record: Some(Record::Block(wire::BlockRequest {
                    time_ns: self.t,
                    dev: 0x700,
                    sector: sector_page * 8,
                    nr_sectors: (pages * 8) as u32,
                    op: op as i32,
                    rwbs: String::new(),
                })),
            })
            .unwrap();
    }

    fn file(ino: u64) -> Option<wire::FileId> {
        Some(wire::FileId { dev: FS_DEV, ino })
    }

    /// Appends chunk `chunk` (16 pages) to file `ino` from code path `sig`.
    fn append(&mut self, ino: u64, chunk: u64, sig: u64) {
        self.event(Kind::Write(wire::WriteEvent {
            file: Self::file(ino),
            offset: chunk * CHUNK * 4096,
            len: CHUNK * 4096,
            signature: sig,
            ..Default::default()
        }));
        if self.device.is_some() {
            let d = self.device.as_mut().unwrap();
            let blk = d.free.pop_front().expect("test device has room");
            d.owned.insert((ino, chunk), blk);
            d.data_pages += CHUNK;
            self.t += 10;
            let t = self.t;
            self.w
                .write_record(&wire::TraceRecord {
                    record: Some(Record::Extent(wire::ExtentMap {
                        time_ns: t,
                        file: Self::file(ino),
                        file_block: chunk * CHUNK,
                        device_block: blk,
                        len_blocks: CHUNK as u32,
                        block_size: 4096,
                    })),
                })
                .unwrap();
            self.block(blk, CHUNK, wire::BlockOp::Write);
            // One journal page per append (metadata no file owns).
            let d = self.device.as_mut().unwrap();
            let j = d.journal_next;
            d.journal_next = (j + 1) % JOURNAL_BLOCKS;
            d.meta_pages += 1;
            self.block(j, 1, wire::BlockOp::Write);
        }
    }

    /// Unlinks file `ino` that has `chunks` chunks.
    fn unlink(&mut self, ino: u64, chunks: u64) {
        self.event(Kind::Invalidate(wire::InvalidateEvent {
            file: Self::file(ino),
            kind: wire::InvalidateKind::Unlink as i32,
            offset: 0,
            len: 0,
        }));
        if self.device.is_some() {
            for c in 0..chunks {
                let d = self.device.as_mut().unwrap();
                let blk = d.owned.remove(&(ino, c)).expect("chunk was written");
                d.free.push_back(blk);
                d.trimmed_pages += CHUNK;
                self.block(blk, CHUNK, wire::BlockOp::Discard);
            }
        }
    }

    fn finish(self) -> Option<DeviceAlloc> {
        self.w.finish().unwrap();
        self.device
    }
}

/// One application writing two kinds of files in turn: short-lived log
/// files (4 chunks, unlinked two files later) and long-lived data files (16
/// chunks; once `keep` are complete, a random one is unlinked after each new
/// one — random, because FIFO deaths free whole blocks and GC never copies).
/// With `keep` = 24: lifetimes ~300 vs ~12 000 pages.
struct Gen {
    short: (u64, u64),
    long: (u64, u64),
    long_live: Vec<u64>,
    keep: usize,
    sigs: (u64, u64),
    hint: u64,
    rng: u64,
}

const SHORT_CHUNKS: u64 = 4;
const LONG_CHUNKS: u64 = 16;

impl Gen {
    fn new(ino_base: u64, keep: usize, sigs: (u64, u64), hint: u64) -> Gen {
        Gen {
            short: (ino_base + 1_000_000, 0),
            long: (ino_base + 1, 0),
            long_live: Vec::new(),
            keep,
            sigs,
            hint,
            rng: 0x2545_f491_4f6c_dd1d ^ ino_base,
        }
    }

    fn hint(&self, b: &mut Builder, ino: u64) {
        if self.hint != 0 {
            b.event(Kind::AppHint(wire::AppHintEvent {
                file: Builder::file(ino),
                requested: self.hint,
                accepted: true,
                ..Default::default()
            }));
        }
    }

    fn step(&mut self, b: &mut Builder) {
        let (ino, chunk) = self.short;
        if chunk == 0 {
            self.hint(b, ino);
        }
        b.append(ino, chunk, self.sigs.0);
        self.short.1 += 1;
        if self.short.1 == SHORT_CHUNKS {
            if self.short.0 % 1_000_000 >= 2 {
                b.unlink(self.short.0 - 2, SHORT_CHUNKS);
            }
            self.short = (self.short.0 + 1, 0);
        }
        let (ino, chunk) = self.long;
        if chunk == 0 {
            self.hint(b, ino);
        }
        b.append(ino, chunk, self.sigs.1);
        self.long.1 += 1;
        if self.long.1 == LONG_CHUNKS {
            self.long_live.push(self.long.0);
            if self.long_live.len() > self.keep {
                // xorshift64
                self.rng ^= self.rng << 13;
                self.rng ^= self.rng >> 7;
                self.rng ^= self.rng << 17;
                let i = (self.rng % self.long_live.len() as u64) as usize;
                let victim = self.long_live.swap_remove(i);
                b.unlink(victim, LONG_CHUNKS);
            }
            self.long = (self.long.0 + 1, 0);
        }
    }
}

fn two_lifetimes(b: &mut Builder, rounds: u64) {
    let mut g = Gen::new(0, 24, (SHORT_SIG, LONG_SIG), 0);
    for _ in 0..rounds {
        g.step(b);
    }
}

/// Options scaled to the small traces: pcstream's re-clustering interval
/// and censoring age shrink with the device (64 MiB defaults → 8 MiB).
/// The device keeps the paper's 90% cold pre-fill but has 3% OP and a
/// model file system 10% above the peak of live data, so GC has work.
fn small_opts(internal: InternalMode) -> Options {
    let mut o = Options {
        internal,
        writeback_pages: 1,
        op: 0.03,
        fs_pages: Some(7300),
        ..Options::default()
    };
    o.policy_config.pcstream.mapper.check_interval = 2048;
    o.policy_config.pcstream.mapper.censor_min_age = 2048;
    o
}

fn waf(t: &TraceReport, policy: &str, internal: bool) -> f64 {
    t.runs
        .iter()
        .find(|r| r.policy == policy && r.internal_streams == internal)
        .unwrap_or_else(|| panic!("no run of {policy}"))
        .waf
}

/// The oracle's WAF is no worse than any run's (internal streams off).
fn assert_oracle_is_best(t: &TraceReport) {
    let oracle = waf(t, "oracle", false);
    for r in &t.runs {
        assert!(
            oracle <= r.waf + 1e-9,
            "oracle {oracle} > {} {}",
            r.policy,
            r.waf
        );
    }
}

fn model_trace(dir: &Path) -> PathBuf {
    let p = dir.join("files.pcstrace");
    let mut b = Builder::new(&p, None);
    two_lifetimes(&mut b, 2500);
    b.finish();
    p
}

#[test]
fn model_trace_pcstream_beats_baseline_and_oracle_is_best() {
    let dir = tempfile::tempdir().unwrap();
    let p = model_trace(dir.path());
    let rep = compare(std::slice::from_ref(&p), &small_opts(InternalMode::Off)).unwrap();
    eprintln!("{}", render(&rep));
    let t = &rep.traces[0];
    assert_eq!(t.source, Source::FsAlloc);
    assert_eq!(t.join.write_pages, 2 * 2500 * CHUNK);
    assert_eq!(t.join.signed_pages, t.join.write_pages);
    assert_eq!(t.join.signatures, 2);
    assert!(t.join.trim_pages > 0);
    // The cold fill is 90% of the device and leaves the footprint room.
    let d = &t.device;
    let cold = d.cold_pages as f64 / d.logical_pages as f64;
    assert!((cold - 0.9).abs() < 0.01, "{cold}");
    assert!(d.logical_pages - d.cold_pages >= t.footprint_pages);
    let base = waf(t, "baseline", false);
    let pcs = waf(t, "pcstream", false);
    assert!(
        base > 1.1,
        "the workload must make GC work: baseline WAF {base}"
    );
    assert!(pcs < base * 0.9, "pcstream {pcs} vs baseline {base}");
    assert_oracle_is_best(t);
    for r in &t.runs {
        assert_eq!(r.host_pages, t.join.write_pages, "{}", r.policy);
    }
    // Baseline puts everything in stream 0; pcstream learns both signatures.
    let b = t.runs.iter().find(|r| r.policy == "baseline").unwrap();
    assert_eq!(b.stream0_share, 1.0);
    assert_eq!(b.iops_normalized, Some(1.0));
    let pc = t.runs.iter().find(|r| r.policy == "pcstream").unwrap();
    assert_eq!(pc.signatures, Some(2));
    assert!(pc.reclusterings.unwrap() >= 1);
    assert!(pc.stream0_share < 0.5, "{}", pc.stream0_share);
    assert!(pc.iops_normalized.unwrap() > 1.0);
    // Fig. 11: pcstream's streams hold data of different lifetimes.
    let medians: Vec<f64> = pc
        .per_stream
        .iter()
        .filter(|s| s.stream != 0 && s.dead_pages > 1000)
        .filter_map(|s| s.lifetime_p50)
        .collect();
    assert!(medians.len() >= 2, "{:?}", pc.per_stream);
    let (lo, hi) = medians
        .iter()
        .fold((f64::MAX, 0.0f64), |(a, b), &m| (a.min(m), b.max(m)));
    assert!(hi > 10.0 * lo, "stream medians {medians:?}");
}

#[test]
fn ground_truth_trace_is_joined_and_separated() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("device.pcstrace");
    let mut b = Builder::new(&p, Some(16384));
    two_lifetimes(&mut b, 2500);
    let d = b.finish().unwrap();
    let rep = compare(std::slice::from_ref(&p), &small_opts(InternalMode::Off)).unwrap();
    let t = &rep.traces[0];
    assert_eq!(t.source, Source::GroundTruth);
    assert_eq!(t.join.data_pages, d.data_pages);
    assert_eq!(t.join.signed_pages, d.data_pages);
    assert_eq!(t.join.metadata_pages, d.meta_pages);
    assert_eq!(t.join.trim_pages, d.trimmed_pages);
    assert_eq!(t.trace_logical_pages, 16384);
    assert!(t.device.logical_pages >= 16384);
    // The FIFO allocator spread the writes over the whole device; the
    // replay was re-allocated into 5/4 of the peak live data to age it.
    assert!(
        t.confined_from_pages.unwrap() > 15_000,
        "{:?}",
        t.confined_from_pages
    );
    assert!(t.footprint_pages <= t.peak_live_pages * 5 / 4 + 1);
    assert!(render(&rep).contains("re-allocated into"));
    let base = waf(t, "baseline", false);
    let pcs = waf(t, "pcstream", false);
    assert!(pcs < base * 0.9, "pcstream {pcs} vs baseline {base}");
    assert_oracle_is_best(t);
    // The same trace through the model is reported as such.
    let opts = Options {
        fs_alloc: true,
        policies: vec!["baseline".into()],
        ..small_opts(InternalMode::Off)
    };
    let m = compare(std::slice::from_ref(&p), &opts).unwrap();
    assert_eq!(m.traces[0].source, Source::FsAlloc);
    assert_eq!(m.traces[0].join.metadata_pages, 0);
    assert!(render(&m).contains("file-system allocation model"));
    assert!(render(&rep).contains("ground-truth device trace"));
}

#[test]
fn internal_streams_help_streams_of_mixed_lifetimes() {
    // Two applications' files by hint: app-hints puts each in its own
    // stream, and each stream mixes short-lived logs with data of a
    // different lifetime (~2 000 vs ~25 000 pages). Without internal streams
    // the survivors go back beside the fresh logs (or, with a shared GC
    // block, meet the other stream's survivors).
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("hinted.pcstrace");
    let mut b = Builder::new(&p, None);
    let mut a = Gen::new(0, 4, (0x11, 0x12), 2);
    let mut c = Gen::new(10_000_000, 48, (0x21, 0x22), 5);
    for _ in 0..2000 {
        a.step(&mut b);
        c.step(&mut b);
    }
    b.finish();
    let opts = Options {
        policies: vec!["baseline".into(), "app-hints".into()],
        fs_pages: None,
        ..small_opts(InternalMode::Both)
    };
    let rep = compare(std::slice::from_ref(&p), &opts).unwrap();
    eprintln!("{}", render(&rep));
    let t = &rep.traces[0];
    assert_eq!(t.runs.len(), 4);
    let (off, on) = (waf(t, "app-hints", false), waf(t, "app-hints", true));
    assert!(off > 1.1, "GC must copy: {off}");
    assert!(on < off, "app-hints: internal on {on} ≥ off {off}");
    // Without internal streams the survivors went back beside fresh writes;
    // separating them helps even the one-stream baseline.
    assert!(waf(t, "baseline", true) < waf(t, "baseline", false));
    // With one stream, a private GC stream is the shared GC block.
    let shared = Options {
        shared_gc_block: true,
        internal: InternalMode::Off,
        ..opts.clone()
    };
    let s = compare(std::slice::from_ref(&p), &shared).unwrap();
    assert!(render(&s).contains("GC copies share one GC block"));
    assert_eq!(
        waf(&s.traces[0], "baseline", false),
        waf(t, "baseline", true)
    );
    let shared_off = waf(&s.traces[0], "app-hints", false);
    assert!(
        on < shared_off,
        "app-hints: internal on {on} ≥ shared GC block {shared_off}"
    );
}

#[test]
fn json_has_the_tables_and_svg_charts_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let p = model_trace(dir.path());
    let opts = Options {
        policies: vec!["baseline".into(), "pcstream".into()],
        ..small_opts(InternalMode::Both)
    };
    let rep = compare(std::slice::from_ref(&p), &opts).unwrap();
    let j = serde_json::to_value(&rep).unwrap();
    let t = &j["traces"][0];
    assert_eq!(t["source"], "fs-model");
    for k in [
        "write_pages",
        "data_pages",
        "metadata_pages",
        "trim_pages",
        "signatures",
    ] {
        assert!(t["join"][k].is_u64(), "join.{k}");
    }
    for k in ["logical_pages", "cold_pages", "pages_per_block", "scale"] {
        assert!(t["device"][k].is_number(), "device.{k}");
    }
    let runs = t["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    for r in runs {
        for k in ["waf", "iops", "iops_normalized", "stream0_share"] {
            assert!(r[k].is_number(), "{k} in {r}");
        }
        assert!(r["internal_streams"].is_boolean());
        let s0 = &r["per_stream"][0];
        for k in [
            "stream",
            "host_pages",
            "lifetime_p25",
            "lifetime_p50",
            "lifetime_p75",
        ] {
            assert!(s0[k].is_number(), "per_stream.{k} in {s0}");
        }
    }
    assert_eq!(runs[1]["signatures"], 2);

    let out = dir.path().join("charts");
    let files = charts::write_all(&rep, &out).unwrap();
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for n in [
        "1-files-waf.svg",
        "1-files-iops.svg",
        "1-files-lifetimes-internal-off.svg",
        "1-files-lifetimes-internal-on.svg",
    ] {
        assert!(names.iter().any(|x| x == n), "{n} not in {names:?}");
    }
    for f in &files {
        let s = std::fs::read_to_string(f).unwrap();
        assert!(s.trim_start().starts_with("<svg"), "{}", f.display());
        assert!(s.trim_end().ends_with("</svg>"), "{}", f.display());
        assert!(s.contains("<rect"), "{} has no bars/boxes", f.display());
        assert!(
            s.contains("pcstream"),
            "{} lacks the policy label",
            f.display()
        );
    }
}

#[test]
fn several_traces_get_a_summary_chart() {
    let dir = tempfile::tempdir().unwrap();
    let p = model_trace(dir.path());
    let opts = Options {
        policies: vec!["baseline".into(), "oracle".into()],
        ..small_opts(InternalMode::Off)
    };
    let rep = compare(&[p.clone(), p], &opts).unwrap();
    assert_eq!(rep.traces.len(), 2);
    assert_eq!(rep.traces[0].runs[0].waf, rep.traces[1].runs[0].waf);
    let out = dir.path().join("charts");
    let files = charts::write_all(&rep, &out).unwrap();
    let all = out.join("all-waf-internal-off.svg");
    assert!(files.contains(&all), "{files:?}");
    assert!(out.join("2-files-waf.svg").exists());
    let s = std::fs::read_to_string(all).unwrap();
    assert!(s.contains("oracle") && s.contains("</svg>"));
}

#[test]
fn unknown_policy_lists_the_known_ones() {
    let opts = Options {
        policies: vec!["autostream".into()],
        ..Options::default()
    };
    let e = compare(&[PathBuf::from("/nonexistent")], &opts)
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"autostream\""), "{e}");
    for n in POLICY_NAMES {
        assert!(e.contains(n), "{e}");
    }
    assert!(e.contains("oracle-write"), "{e}");
}

#[test]
fn oracle_write_runs_when_named_and_not_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let p = model_trace(dir.path());
    let mut o = small_opts(InternalMode::Off);
    o.policies = vec!["oracle".into(), "oracle-write".into()];
    let rep = compare(std::slice::from_ref(&p), &o).unwrap();
    let t = &rep.traces[0];
    let (page, whole) = (waf(t, "oracle", false), waf(t, "oracle-write", false));
    assert!(whole >= 1.0 && page >= 1.0, "{page} {whole}");
    assert!(render(&rep).contains("oracle-write"));
    assert!(!Options::default()
        .policies
        .iter()
        .any(|p| p == "oracle-write"));
}

#[test]
fn missing_and_corrupt_traces_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.pcstrace");
    let e = format!(
        "{:#}",
        compare(std::slice::from_ref(&missing), &Options::default()).unwrap_err()
    );
    assert!(e.contains("nope.pcstrace"), "{e}");
    // A good trace with garbage appended: a length prefix promising more
    // bytes than there are.
    let p = model_trace(dir.path());
    let good = std::fs::metadata(&p).unwrap().len();
    let mut bytes = std::fs::read(&p).unwrap();
    bytes.extend_from_slice(&[0x90, 0x4e, 1, 2, 3]);
    std::fs::write(&p, bytes).unwrap();
    let e = format!(
        "{:#}",
        compare(std::slice::from_ref(&p), &Options::default()).unwrap_err()
    );
    assert!(e.contains("files.pcstrace"), "{e}");
    assert!(e.contains(&format!("byte offset {good}")), "{e}");
}

#[test]
fn a_report_without_gc_says_placement_cannot_show() {
    let dir = tempfile::tempdir().unwrap();
    let p = model_trace(dir.path());
    // The model trace on a roomy device (no cold pre-fill, much OP): GC never copies.
    let roomy = Options {
        prefill: 0.0,
        op: 1.0,
        policies: vec!["baseline".into()],
        ..small_opts(InternalMode::Off)
    };
    let rep = compare(std::slice::from_ref(&p), &roomy).unwrap();
    assert!(rep.traces[0].runs.iter().all(|r| r.gc_pages == 0));
    // One line at the top of the trace's section, before the tables, with the command that ages the device.
    let text = render(&rep);
    let lines: Vec<&str> = text.lines().collect();
    let head = lines.iter().position(|l| l.starts_with("== ")).unwrap();
    let note = lines[head + 1];
    assert!(
        note.starts_with("note: GC copied nothing under every policy"),
        "{text}"
    );
    assert!(
        note.contains("pcstreamctl record --device-trace --device-fill 0.9"),
        "{note}"
    );
    assert!(
        note.contains("pcstreamctl compare --prefill 0 --warmup-passes 1"),
        "{note}"
    );
    assert_eq!(text.matches("note: GC copied").count(), 1, "{text}");
    // The tight default of these tests makes GC copy: no note.
    let tight = Options {
        policies: vec!["baseline".into()],
        ..small_opts(InternalMode::Off)
    };
    let rep = compare(std::slice::from_ref(&p), &tight).unwrap();
    let r = &rep.traces[0].runs[0];
    assert!(r.gc_pages * 100 >= r.host_pages, "{} GC pages", r.gc_pages);
    assert!(!render(&rep).contains("note: GC copied"));
}

#[test]
fn policy_config_json_names_unknown_keys_and_keeps_the_old_interval_name() {
    let err = serde_json::from_str::<PolicyConfig>(r#"{"pcstream": {"key_by_lbaa": true}}"#)
        .expect_err("a misspelt key must not be ignored");
    assert!(err.to_string().contains("key_by_lbaa"), "{err}");
    let err = serde_json::from_str::<PolicyConfig>(r#"{"pcstream": {"mapper": {"interval": 5}}}"#)
        .expect_err("a misspelt nested key must not be ignored");
    assert!(err.to_string().contains("interval"), "{err}");
    let c: PolicyConfig = serde_json::from_str(
        r#"{"pcstream": {"key_by_lba": true, "mapper": {"min_interval": 5}}}"#,
    )
    .unwrap();
    assert!(c.pcstream.key_by_lba);
    assert_eq!(c.pcstream.mapper.check_interval, 5);
    assert_eq!(
        c.pcstream.mapper.first_interval, 256,
        "the rest keeps its default"
    );
    // The bench's own config file parses.
    let bench = include_str!("../../../../bench/pcstream-by-lba.json");
    let c: PolicyConfig = serde_json::from_str(bench).unwrap();
    assert!(c.pcstream.key_by_lba);
}

#[test]
fn signatures_break_pcstream_down_with_learnt_and_device_lifetimes() {
    let dir = tempfile::tempdir().unwrap();
    let p = model_trace(dir.path());
    let mut o = small_opts(InternalMode::Off);
    o.policies = vec![
        "baseline".into(),
        "pcstream".into(),
        "pcstream-paper".into(),
    ];
    o.signatures = 5;
    let rep = compare(std::slice::from_ref(&p), &o).unwrap();
    let t = &rep.traces[0];
    let text = render(&rep);
    assert!(text.contains("pcstream by signature"), "{text}");
    let row = |sig| {
        t.signatures
            .iter()
            .find(|r| r.signature == Some(sig))
            .unwrap_or_else(|| panic!("no row for {sig:x}: {:?}", t.signatures))
    };
    let (short, long) = (row(SHORT_SIG), row(LONG_SIG));
    // Every host page of the measured pass is in some row, once.
    let rows: u64 = t.signatures.iter().map(|r| r.pages).sum();
    assert_eq!(rows, t.host_pages);
    for r in [short, long] {
        let in_streams: u64 = r.streams.iter().map(|s| s.1).sum();
        assert_eq!(in_streams, r.pages);
    }
    // pcstream learnt the short signature as shorter-lived, put it in a
    // lower stream, and its pages did die sooner on the device.
    assert!(short.estimate_log2.unwrap() + 2.0 < long.estimate_log2.unwrap());
    assert!(short.streams[0].0 < long.streams[0].0, "{short:?} {long:?}");
    assert!(short.device_lifetime_p50.unwrap() < long.device_lifetime_p50.unwrap());
    // What it placed them for matches what the device saw: the short
    // signature's streams stand for shorter lives, and each signature's
    // pages lived within a factor of 4 of it (median).
    assert!(short.placed_for_log2.unwrap() + 2.0 < long.placed_for_log2.unwrap());
    for r in [short, long] {
        let e = r.error_log2_p50.unwrap();
        assert!((0.0..2.0).contains(&e), "error {e} (log2) for {r:?}");
    }
    // The rows agree with the simulated run's per-stream counts.
    let rows_match_run =
        |policy: &str, streams: fn(&pcstream_replay::signatures::SignatureRow) -> &[(u32, u64)]| {
            let run = t.runs.iter().find(|r| r.policy == policy).unwrap();
            for s in &run.per_stream {
                let from_rows: u64 = t
                    .signatures
                    .iter()
                    .flat_map(|r| streams(r).iter())
                    .filter(|(id, _)| *id == s.stream)
                    .map(|(_, n)| n)
                    .sum();
                assert_eq!(from_rows, s.host_pages, "{policy} stream {}", s.stream);
            }
        };
    rows_match_run("pcstream", |r| &r.streams);
    // The paper's placement beside it: the same pages, the simulated
    // pcstream-paper run's per-stream counts, and the same ordering of
    // the two signatures' lifetimes.
    assert!(text.contains("paper streams"), "{text}");
    for r in &t.signatures {
        let n: u64 = r.paper_streams.iter().map(|s| s.1).sum();
        assert_eq!(n, r.pages, "{r:?}");
    }
    rows_match_run("pcstream-paper", |r| &r.paper_streams);
    assert!(short.paper_estimate_log2.unwrap() + 2.0 < long.paper_estimate_log2.unwrap());
    assert!(
        short.paper_streams[0].0 < long.paper_streams[0].0,
        "{short:?} {long:?}"
    );
    // --explain: that signature alone, every stream of both policies.
    o.signatures = 0;
    o.explain = vec![SHORT_SIG];
    let one = compare(std::slice::from_ref(&p), &o).unwrap();
    let ex = &one.traces[0];
    assert!(ex.explained);
    assert_eq!(ex.signatures.len(), 1);
    assert_eq!(ex.signatures[0], *short, "the same row as in the breakdown");
    let text = render(&one);
    assert!(
        text.contains(&format!("{SHORT_SIG:016x}: {} pages", short.pages)),
        "{text}"
    );
    assert!(text.contains("pcstream-paper: learnt"), "{text}");
    assert!(text.contains("what separates them"), "{text}");
    assert!(text.contains("the rule that placed them"), "{text}");
    for r in &t.signatures {
        // Every page is attributed to the rule that placed it, once.
        assert_eq!(r.rules.iter().map(|x| x.1).sum::<u64>(), r.pages, "{r:?}");
        assert!(r.refined_pages <= r.pages, "{r:?}");
        for v in [r.explained_by_history, r.explained_by_write_tail]
            .into_iter()
            .flatten()
        {
            assert!((0.0..=1.0).contains(&v), "{r:?}");
        }
    }
    for r in &t.signatures {
        assert!(r.lba_learner_pages <= r.pages, "{r:?}");
    }
    assert!(text.contains("placed by its LBA-keyed learner"), "{text}");
    // The LBA-keyed learner alone places every page.
    let mut by_lba = o.clone();
    by_lba.policy_config.pcstream.key_by_lba = true;
    let one = compare(std::slice::from_ref(&p), &by_lba).unwrap();
    for r in &one.traces[0].signatures {
        assert_eq!(r.lba_learner_pages, r.pages, "{r:?}");
    }
    o.explain = vec![0xdead_beef];
    let e = compare(std::slice::from_ref(&p), &o).unwrap_err();
    assert!(e.to_string().contains("--explain 00000000deadbeef"), "{e}");
    o.explain.clear();
    // Off by default, and not with tables cleared at marks.
    let plain = compare(std::slice::from_ref(&p), &o).unwrap();
    assert!(plain.traces[0].signatures.is_empty());
    let json = serde_json::to_string(&plain).unwrap();
    assert!(!json.contains("\"signatures\":["), "{json}");
    o.signatures = 3;
    o.clear_at_marks = true;
    let e = compare(std::slice::from_ref(&p), &o).unwrap_err();
    assert!(e.to_string().contains("--clear-at-marks"), "{e}");
}

#[test]
fn explain_takes_a_signature_as_printed() {
    assert_eq!(parse_signature("00000000deadbeef"), Ok(0xdead_beef));
    assert_eq!(parse_signature("0xAB"), Ok(0xab));
    for bad in ["", "0x", "xyz", "12345678901234567", "-1"] {
        let e = parse_signature(bad).unwrap_err();
        assert!(e.contains("16 hex digits"), "{bad}: {e}");
    }
}
