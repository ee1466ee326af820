//! `pcstreamctl trace-stats TRACE`: per-signature summary of a trace —
//! bytes and write calls, files written (named from OpenEvents), data of those
//! writes that later died (unlink, truncate, hole punch, rename-replace,
//! overwrite) charged to the signature that wrote it, the applications' own
//! lifetime hints on those files, the programs, and the symbolized call path.

use crate::extents::ExtentMap;
use crate::symbolize::{Resolved, Symbolizer};
use pcstream_placement::trace::TraceReader;
use pcstream_placement::wire::{self, event::Kind, trace_record::Record};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `pcstreamctl trace-stats`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  pcstreamctl trace-stats /tmp/rocks            (a `record` output directory)\n  \
pcstreamctl trace-stats --top 5 --json /tmp/rocks/trace.pcstrace\n  \
pcstreamctl trace-stats /tmp/rocks/procs/1234-99.pcstrace   (one per-process file, kept with --keep-parts)"
)]
pub struct TraceStatsArgs {
    /// Trace file, or a `record` output directory (uses DIR/trace.pcstrace).
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// Show the N signatures with most bytes written (0 = all).
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub top: usize,
    /// Frames of each call path to show (0 = all).
    #[arg(long, default_value_t = 12, value_name = "N")]
    pub frames: usize,
    /// Do not symbolize call paths (module+offset only).
    #[arg(long)]
    pub no_symbols: bool,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

/// Names of invalidation kinds.
pub fn kind_name(k: i32) -> &'static str {
    match wire::InvalidateKind::try_from(k) {
        Ok(wire::InvalidateKind::Truncate) => "truncate",
        Ok(wire::InvalidateKind::Unlink) => "unlink",
        Ok(wire::InvalidateKind::PunchHole) => "punch_hole",
        Ok(wire::InvalidateKind::RenameReplace) => "rename_replace",
        Ok(wire::InvalidateKind::CloseUnlinked) => "close_unlinked",
        _ => "unspecified",
    }
}

fn call_name(c: i32) -> &'static str {
    match wire::WriteCall::try_from(c) {
        Ok(wire::WriteCall::Write) => "write",
        Ok(wire::WriteCall::Pwrite) => "pwrite",
        Ok(wire::WriteCall::Writev) => "writev",
        Ok(wire::WriteCall::Pwritev) => "pwritev",
        Ok(wire::WriteCall::Fwrite) => "fwrite",
        Ok(wire::WriteCall::StdioFlush) => "stdio_flush",
        Ok(wire::WriteCall::Fallocate) => "fallocate",
        Ok(wire::WriteCall::Copy) => "copy",
        Ok(wire::WriteCall::Aio) => "aio",
        Ok(wire::WriteCall::Uring) => "uring",
        _ => "unspecified",
    }
}

/// Name of a lifetime hint value (`RWH_WRITE_LIFE_*`), or the number.
pub fn hint_name(v: u64) -> String {
    match v {
        0 => "NOT_SET".into(),
        1 => "NONE".into(),
        2 => "SHORT".into(),
        3 => "MEDIUM".into(),
        4 => "LONG".into(),
        5 => "EXTREME".into(),
        _ => v.to_string(),
    }
}

/// JSON files listed per signature at most (the count is always exact).
const MAX_FILE_NAMES: usize = 1000;

/// One file, from its creation (or first sighting) to its last unlink.
#[derive(Debug, Default)]
struct FileLife {
    paths: Vec<String>,
    /// requested value → calls
    app_hints: BTreeMap<u64, u64>,
}

#[derive(Debug, Default)]
struct Live {
    life: usize,
    extents: ExtentMap,
}

#[derive(Debug, Default)]
struct SigStats {
    bytes: u64,
    /// Write calls (a coalesced event counts as the calls it stands for).
    writes: u64,
    calls: BTreeMap<&'static str, u64>,
    streams: BTreeMap<u32, u64>,
    inode_hints: BTreeMap<u64, u64>,
    files: BTreeSet<usize>,
    invalidated: BTreeMap<&'static str, u64>,
    programs: BTreeSet<String>,
    /// Native signature recorded beside this (Java) one → bytes.
    natives: BTreeMap<u64, u64>,
}

/// Everything gathered from one pass over a trace.
#[derive(Debug, Default)]
pub struct Stats {
    command: Vec<String>,
    producer: String,
    records: u64,
    events: u64,
    pids: BTreeSet<u32>,
    exe: HashMap<u32, String>,
    dropped: HashMap<u32, u64>,
    modules: HashMap<u64, wire::ModuleInfo>,
    frames: HashMap<u64, Vec<wire::Frame>>,
    lives: Vec<FileLife>,
    live: HashMap<(u64, u64), Live>,
    sigs: HashMap<u64, SigStats>,
    unattributed: BTreeMap<&'static str, u64>,
    app_hint_events: u64,
    time: Option<(u64, u64)>,
}

impl Stats {
    fn life_of(&mut self, f: &Option<wire::FileId>) -> &mut Live {
        let key = f.as_ref().map_or((0, 0), |f| (f.dev, f.ino));
        let lives = &mut self.lives;
        self.live.entry(key).or_insert_with(|| {
            lives.push(FileLife::default());
            Live {
                life: lives.len() - 1,
                extents: ExtentMap::default(),
            }
        })
    }

    fn charge(&mut self, kind: &'static str, died: Vec<(u64, u64)>, total: u64) {
        let mut charged = 0;
        for (sig, n) in died {
            charged += n;
            *self
                .sigs
                .entry(sig)
                .or_default()
                .invalidated
                .entry(kind)
                .or_default() += n;
        }
        let rest = total.saturating_sub(charged);
        if rest > 0 {
            *self.unattributed.entry(kind).or_default() += rest;
        }
    }

    /// Adds one event.
    pub fn add(&mut self, pid: u32, ev: wire::Event) {
        self.events += 1;
        self.pids.insert(pid);
        let t = ev.time_ns;
        self.time = Some(self.time.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
        let Some(kind) = ev.kind else { return };
        match kind {
            Kind::Write(w) => {
                let life = self.life_of(&w.file);
                let died =
                    life.extents
                        .write(w.offset, w.offset.saturating_add(w.len), w.signature);
                let l = life.life;
                let s = self.sigs.entry(w.signature).or_default();
                s.bytes += w.len;
                // Writes are counted as the application made them.
                let calls = w.call_count();
                s.writes += calls;
                *s.calls.entry(call_name(w.call)).or_default() += calls;
                *s.streams.entry(w.stream).or_default() += w.len;
                *s.inode_hints.entry(u64::from(w.hint)).or_default() += w.len;
                s.files.insert(l);
                if w.native_signature != 0 {
                    *s.natives.entry(w.native_signature).or_default() += w.len;
                }
                if let Some(exe) = self.exe.get(&pid) {
                    if !s.programs.contains(exe) {
                        s.programs.insert(exe.clone());
                    }
                }
                self.charge("overwrite", died, 0);
            }
            Kind::Invalidate(inv) => {
                let kind = kind_name(inv.kind);
                let key = inv.file.as_ref().map_or((0, 0), |f| (f.dev, f.ino));
                let whole = matches!(kind, "unlink" | "rename_replace");
                let died = match self.live.get_mut(&key) {
                    Some(l) if whole => l.extents.clear(),
                    Some(l) if kind == "truncate" => l.extents.remove(inv.offset, u64::MAX),
                    Some(l) => l
                        .extents
                        .remove(inv.offset, inv.offset.saturating_add(inv.len)),
                    None => Vec::new(),
                };
                if whole {
                    // The inode number may be reused by a new file.
                    self.live.remove(&key);
                }
                self.charge(kind, died, inv.len);
            }
            Kind::AppHint(h) => {
                self.app_hint_events += 1;
                let l = self.life_of(&h.file).life;
                *self.lives[l].app_hints.entry(h.requested).or_default() += 1;
            }
            Kind::Open(o) => {
                let l = self.life_of(&o.file).life;
                let paths = &mut self.lives[l].paths;
                if !o.path.is_empty() && !paths.contains(&o.path) && paths.len() < 4 {
                    paths.push(o.path);
                }
            }
            Kind::Signature(s) => {
                self.frames.entry(s.signature).or_insert(s.frames);
            }
            Kind::Module(m) => {
                self.modules.entry(m.module_key).or_insert(m);
            }
            Kind::Process(p) => {
                if p.kind == wire::ProcessEventKind::ForkChild as i32 {
                    if let Some(parent) = self.exe.get(&p.ppid).cloned() {
                        self.exe.entry(pid).or_insert(parent);
                    }
                }
                if !p.exe.is_empty() {
                    let name = Path::new(&p.exe)
                        .file_name()
                        .map_or(p.exe.clone(), |n| n.to_string_lossy().into_owned());
                    self.exe.insert(pid, name);
                }
                let d = self.dropped.entry(pid).or_default();
                *d = (*d).max(p.dropped);
            }
        }
    }

    /// Reads a whole trace.
    pub fn read(path: &Path) -> anyhow::Result<Self> {
        let mut st = Stats::default();
        // A torn or truncated trace is an error here as in every command.
        let reader = TraceReader::open(path)?;
        for rec in reader {
            let rec = rec?;
            st.records += 1;
            match rec.record {
                Some(Record::Header(h)) => {
                    if st.command.is_empty() {
                        st.command = h.command;
                    }
                    if st.producer.is_empty() {
                        st.producer = h.producer;
                    }
                }
                Some(Record::Batch(b)) => {
                    for ev in b.events {
                        st.add(b.pid, ev);
                    }
                }
                _ => {}
            }
        }
        Ok(st)
    }
}

/// A file as reported: its name(s) and the hints it got.
#[derive(Debug, serde::Serialize)]
pub struct FileReport {
    pub paths: Vec<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub app_hints: BTreeMap<String, u64>,
}

/// One row of the report.
#[derive(Debug, serde::Serialize)]
pub struct SigReport {
    pub signature: String,
    pub bytes: u64,
    /// Write calls, as the application made them (the sum of `calls`).
    pub writes: u64,
    pub calls: BTreeMap<&'static str, u64>,
    /// Distinct files (inode lifetimes) written.
    pub files: usize,
    /// Up to 1000 of them.
    pub file_list: Vec<FileReport>,
    /// Bytes this signature wrote that died later, by cause.
    pub invalidated: BTreeMap<&'static str, u64>,
    /// Application hint value (name) → files written by this signature that got it.
    pub app_hints: BTreeMap<String, u64>,
    /// Hint the inode carried after each write → bytes.
    pub inode_hints: BTreeMap<String, u64>,
    /// Stream chosen by the shim → bytes.
    pub streams: BTreeMap<u32, u64>,
    pub programs: Vec<String>,
    /// Innermost first.
    pub frames: Vec<Resolved>,
    /// A Java call path's native signatures, recorded beside it (what
    /// `compare --native-signatures` replays its writes under) → bytes.
    pub native_signatures: BTreeMap<String, u64>,
}

/// The whole report.
#[derive(Debug, serde::Serialize)]
pub struct Report {
    pub trace: String,
    pub command: Vec<String>,
    pub producer: String,
    pub processes: usize,
    pub events: u64,
    pub duration_ns: u64,
    /// Write calls over every signature.
    pub writes: u64,
    pub bytes_written: u64,
    pub signatures: usize,
    pub files: usize,
    pub app_hint_events: u64,
    pub dropped: u64,
    /// Bytes that died but were not written in the trace (or whose writer is unknown), by cause.
    pub unattributed_invalidated: BTreeMap<&'static str, u64>,
    /// Sorted by bytes written, largest first.
    pub rows: Vec<SigReport>,
    pub symbolization_problems: Vec<String>,
}

/// Builds the report from gathered stats.
pub fn report(trace: &Path, st: Stats, top: usize, max_frames: usize, symbols: bool) -> Report {
    let mut sym = Symbolizer::new();
    let mut sigs: Vec<(u64, SigStats)> =
        st.sigs.into_iter().filter(|(_, s)| s.writes > 0).collect();
    sigs.sort_by(|a, b| b.1.bytes.cmp(&a.1.bytes).then(a.0.cmp(&b.0)));
    let total_sigs = sigs.len();
    let writes = sigs.iter().map(|s| s.1.writes).sum();
    let bytes_written = sigs.iter().map(|s| s.1.bytes).sum();
    if top > 0 {
        sigs.truncate(top);
    }
    let rows = sigs
        .into_iter()
        .map(|(sig, s)| {
            let mut app_hints = BTreeMap::new();
            for &l in &s.files {
                for &v in st.lives[l].app_hints.keys() {
                    *app_hints.entry(hint_name(v)).or_default() += 1;
                }
            }
            let file_list = s
                .files
                .iter()
                .take(MAX_FILE_NAMES)
                .map(|&l| FileReport {
                    paths: st.lives[l].paths.clone(),
                    app_hints: st.lives[l]
                        .app_hints
                        .iter()
                        .map(|(v, n)| (hint_name(*v), *n))
                        .collect(),
                })
                .collect();
            let frames = st.frames.get(&sig).map_or(&[][..], Vec::as_slice);
            let n = if max_frames == 0 {
                frames.len()
            } else {
                frames.len().min(max_frames)
            };
            let frames = frames[..n]
                .iter()
                .map(|f| {
                    let m = st.modules.get(&f.module_key);
                    let path = m.map_or("", |m| m.path.as_str());
                    if symbols {
                        let bid = m.map_or(&[][..], |m| m.build_id.as_slice());
                        sym.resolve(f.module_key, path, bid, f.offset)
                    } else {
                        Resolved {
                            module: Path::new(path)
                                .file_name()
                                .map_or("?".into(), |n| n.to_string_lossy().into_owned()),
                            offset: f.offset,
                            functions: Vec::new(),
                        }
                    }
                })
                .collect();
            SigReport {
                signature: format!("{sig:016x}"),
                bytes: s.bytes,
                writes: s.writes,
                calls: s.calls,
                files: s.files.len(),
                file_list,
                invalidated: s.invalidated,
                app_hints,
                inode_hints: s
                    .inode_hints
                    .into_iter()
                    .map(|(v, n)| (hint_name(v), n))
                    .collect(),
                streams: s.streams,
                native_signatures: s
                    .natives
                    .iter()
                    .map(|(k, v)| (format!("{k:016x}"), *v))
                    .collect(),
                programs: s.programs.into_iter().collect(),
                frames,
            }
        })
        .collect();
    Report {
        trace: trace.display().to_string(),
        command: st.command,
        producer: st.producer,
        processes: st.pids.len(),
        events: st.events,
        duration_ns: st.time.map_or(0, |(a, b)| b - a),
        writes,
        bytes_written,
        signatures: total_sigs,
        files: st.lives.len(),
        app_hint_events: st.app_hint_events,
        dropped: st.dropped.values().sum(),
        unattributed_invalidated: st.unattributed,
        rows,
        symbolization_problems: sym.problems(),
    }
}

/// Bytes in a short human form.
fn human(n: u64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < U.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", U[i])
    }
}

fn base(p: &str) -> &str {
    Path::new(p)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(p)
}

/// Human table.
pub fn render(r: &Report) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(o, "trace: {}", r.trace);
    if !r.command.is_empty() {
        let _ = writeln!(o, "command: {}", r.command.join(" "));
    }
    let _ = writeln!(
        o,
        "{} process(es), {} events over {:.3} s; {} writes, {} in {} signature(s) to {} file(s); {} app hint call(s); {} event(s) dropped",
        r.processes,
        r.events,
        r.duration_ns as f64 / 1e9,
        r.writes,
        human(r.bytes_written),
        r.signatures,
        r.files,
        r.app_hint_events,
        r.dropped
    );
    if !r.unattributed_invalidated.is_empty() {
        let parts: Vec<String> = r
            .unattributed_invalidated
            .iter()
            .map(|(k, v)| format!("{k} {}", human(*v)))
            .collect();
        let _ = writeln!(o, "died without a known writer: {}", parts.join(", "));
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{:>3}  {:<16}  {:>10}  {:>6}  {:>8}  {:>5}  {:<24}  {:<12}  PROGRAMS",
        "#", "SIGNATURE", "BYTES", "SHARE", "WRITES", "FILES", "DIED (CAUSE)", "APP HINTS"
    );
    for (i, row) in r.rows.iter().enumerate() {
        let share = if r.bytes_written > 0 {
            100.0 * row.bytes as f64 / r.bytes_written as f64
        } else {
            0.0
        };
        let died: Vec<String> = row
            .invalidated
            .iter()
            .map(|(k, v)| format!("{} {k}", human(*v)))
            .collect();
        let hints: Vec<String> = row
            .app_hints
            .iter()
            .map(|(k, v)| format!("{k}×{v}"))
            .collect();
        let _ = writeln!(
            o,
            "{:>3}  {:<16}  {:>10}  {:>5.1}%  {:>8}  {:>5}  {:<24}  {:<12}  {}",
            i + 1,
            row.signature,
            human(row.bytes),
            share,
            row.writes,
            row.files,
            if died.is_empty() {
                "-".into()
            } else {
                died.join(", ")
            },
            if hints.is_empty() {
                "-".into()
            } else {
                hints.join(",")
            },
            row.programs.join(",")
        );
        let names: Vec<&str> = row
            .file_list
            .iter()
            .filter_map(|f| f.paths.first().map(|p| base(p)))
            .take(4)
            .collect();
        if !names.is_empty() {
            let more = if row.files > names.len() { " …" } else { "" };
            let _ = writeln!(o, "       files: {}{more}", names.join(" "));
        }
        let calls: Vec<String> = row.calls.iter().map(|(k, v)| format!("{k}×{v}")).collect();
        let _ = writeln!(o, "       calls: {}", calls.join(" "));
        if !row.native_signatures.is_empty() {
            let n: Vec<&str> = row.native_signatures.keys().map(String::as_str).collect();
            let _ = writeln!(
                o,
                "       native: {} (with Java call paths off; compare --native-signatures)",
                n.join(" ")
            );
        }
        for (j, f) in row.frames.iter().enumerate() {
            let _ = writeln!(o, "       #{j:<2} {}", f.display());
        }
    }
    if r.rows.len() < r.signatures {
        let _ = writeln!(
            o,
            "\n({} more signature(s); --top 0 shows all)",
            r.signatures - r.rows.len()
        );
    }
    for p in &r.symbolization_problems {
        let _ = writeln!(o, "note: could not symbolize {p}");
    }
    o
}

/// Runs the subcommand.
pub fn run(args: TraceStatsArgs) -> anyhow::Result<ExitCode> {
    let path = pcstream_placement::trace::resolve_trace(&args.trace);
    // Trace errors name the file and byte offset themselves.
    let st = Stats::read(&path)?;
    let r = report(&path, st, args.top, args.frames, !args.no_symbols);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", render(&r));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcstream_placement::trace::TraceWriter;

    fn fid(ino: u64) -> Option<wire::FileId> {
        Some(wire::FileId { dev: 1, ino })
    }
    fn e(t: u64, k: Kind) -> wire::Event {
        wire::Event {
            time_ns: t,
            tid: 1,
            kind: Some(k),
        }
    }
    fn w(ino: u64, off: u64, len: u64, sig: u64) -> Kind {
        Kind::Write(wire::WriteEvent {
            file: fid(ino),
            offset: off,
            len,
            signature: sig,
            call: wire::WriteCall::Pwrite as i32,
            ..Default::default()
        })
    }
    fn inv(ino: u64, kind: wire::InvalidateKind, off: u64, len: u64) -> Kind {
        Kind::Invalidate(wire::InvalidateEvent {
            file: fid(ino),
            kind: kind as i32,
            offset: off,
            len,
        })
    }
    fn open(ino: u64, path: &str) -> Kind {
        Kind::Open(wire::OpenEvent {
            file: fid(ino),
            path: path.into(),
            flags: 0,
        })
    }

    fn sample_trace(dir: &Path) -> PathBuf {
        use wire::InvalidateKind::*;
        let p = dir.join("t.pcstrace");
        let mut wr = TraceWriter::create(&p).unwrap();
        let events = vec![
            e(
                1,
                Kind::Process(wire::ProcessEvent {
                    kind: wire::ProcessEventKind::Start as i32,
                    exe: "/usr/bin/db_bench".into(),
                    ..Default::default()
                }),
            ),
            e(2, open(10, "/db/000001.log")),
            e(3, w(10, 0, 100, 0xaa)),
            // Four sequential 25-byte calls the shim coalesced into one event.
            e(
                4,
                match w(10, 100, 100, 0xaa) {
                    Kind::Write(x) => Kind::Write(wire::WriteEvent { calls: 4, ..x }),
                    _ => unreachable!(),
                },
            ),
            e(5, open(11, "/db/000002.sst")),
            e(
                6,
                Kind::AppHint(wire::AppHintEvent {
                    file: fid(11),
                    requested: 3,
                    ..Default::default()
                }),
            ),
            e(7, w(11, 0, 1000, 0xbb)),
            e(8, inv(10, Unlink, 0, 250)),
            e(9, inv(11, Truncate, 400, 600)),
            // Inode 10 reused by a new file: a separate file of 0xaa.
            e(10, open(10, "/db/000003.log")),
            e(11, w(10, 0, 10, 0xaa)),
        ];
        wr.write_record(&wire::TraceRecord {
            record: Some(Record::Header(wire::TraceHeader {
                command: vec!["db_bench".into()],
                ..Default::default()
            })),
        })
        .unwrap();
        wr.write_record(&wire::TraceRecord {
            record: Some(Record::Batch(wire::EventBatch {
                pid: 5,
                seq: 0,
                events,
            })),
        })
        .unwrap();
        wr.finish().unwrap();
        p
    }

    #[test]
    fn attributes_volume_files_hints_and_deaths_to_signatures() {
        let d = tempfile::tempdir().unwrap();
        let p = sample_trace(d.path());
        let r = report(&p, Stats::read(&p).unwrap(), 0, 0, true);
        assert_eq!(r.signatures, 2);
        assert_eq!(r.bytes_written, 1210);
        let sst = &r.rows[0];
        assert_eq!(sst.signature, format!("{:016x}", 0xbb));
        assert_eq!(sst.bytes, 1000);
        assert_eq!(sst.invalidated.get("truncate"), Some(&600));
        assert_eq!(sst.app_hints.get("MEDIUM"), Some(&1));
        assert_eq!(sst.programs, ["db_bench"]);
        let wal = &r.rows[1];
        // Calls as the application made them: 1 + 4 coalesced + 1.
        assert_eq!(wal.writes, 6);
        assert_eq!(r.writes, 7);
        assert_eq!(wal.files, 2, "the reused inode is a new file");
        assert_eq!(wal.invalidated.get("unlink"), Some(&200));
        assert_eq!(wal.calls.get("pwrite"), Some(&6));
        let names: Vec<&str> = wal.file_list.iter().map(|f| f.paths[0].as_str()).collect();
        assert_eq!(names, ["/db/000001.log", "/db/000003.log"]);
        // 50 of the 250 unlinked bytes were never written in the trace.
        assert_eq!(r.unattributed_invalidated.get("unlink"), Some(&50));
        let text = render(&r);
        assert!(text.contains("000001.log"), "{text}");
        assert!(text.contains("MEDIUM×1"), "{text}");
    }

    #[test]
    fn top_limits_rows_and_json_round_trips() {
        let d = tempfile::tempdir().unwrap();
        let p = sample_trace(d.path());
        let r = report(&p, Stats::read(&p).unwrap(), 1, 0, false);
        assert_eq!(r.rows.len(), 1);
        assert!(render(&r).contains("1 more signature"));
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(v["rows"][0]["bytes"], 1000);
    }

    #[test]
    fn not_a_trace_is_a_clear_error() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x");
        std::fs::write(&p, b"garbage!").unwrap();
        let err = Stats::read(&p).unwrap_err();
        assert!(
            format!("{err:#}").contains("not a pcstream trace"),
            "{err:#}"
        );
    }
}
