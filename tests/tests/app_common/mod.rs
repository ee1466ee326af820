//! Shared by the `app_*` integration tests: record a real command with
//! `pcstreamctl record`, load the merged trace, and answer the questions the
//! tests ask of it (which signatures wrote which files, what was invalidated,
//! which hints the application set), plus `trace-stats --json` call paths.

#![allow(dead_code)]

use pcstream_placement::trace::TraceReader;
use pcstream_placement::wire::{self, event::Kind, trace_record::Record};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A merged trace loaded in memory (the tests' traces are small).
#[derive(Debug)]
pub struct Trace {
    pub header: wire::TraceHeader,
    /// (pid, event) in file order.
    pub events: Vec<(u32, wire::Event)>,
    /// For each event, the lifetime number of the file it is about: an inode
    /// number freed by an unlink and reused is a new file.
    pub lives: Vec<u32>,
    /// (dev, ino, life) → every path an OpenEvent gave that file.
    pub paths: HashMap<FileLife, Vec<String>>,
}

/// A file: (dev, ino, lifetime number of that inode).
pub type FileLife = (u64, u64, u32);

/// Result of `pcstreamctl record`.
#[derive(Debug)]
pub struct Recorded {
    pub dir: PathBuf,
    pub output: Output,
    pub trace: Trace,
}

/// Runs `pcstreamctl record -o out -- cmd...` in `cwd` with extra `env`,
/// asserts it succeeded and loads the trace.
pub fn record(out: &Path, cwd: &Path, cmd: &[&str], env: &[(&str, &str)]) -> Recorded {
    // Builds the shim next to pcstreamctl, where `record` finds it.
    pcstream_tests::shim();
    let mut c = Command::new(pcstream_tests::pcstreamctl());
    c.arg("record")
        .arg("-o")
        .arg(out)
        .arg("--")
        .args(cmd)
        .current_dir(cwd);
    for (k, v) in env {
        c.env(k, v);
    }
    let output = c.output().expect("run pcstreamctl record");
    assert!(
        output.status.success(),
        "pcstreamctl record -- {} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        cmd.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let trace = load(&out.join("trace.pcstrace"));
    Recorded {
        dir: out.to_path_buf(),
        output,
        trace,
    }
}

/// Loads a merged trace, checking it is one: header first, then batches.
pub fn load(path: &Path) -> Trace {
    let mut r = TraceReader::open(path).unwrap_or_else(|e| panic!("{e}"));
    let header = match r.next_record().unwrap() {
        Some(wire::TraceRecord {
            record: Some(Record::Header(h)),
        }) => h,
        other => panic!(
            "{}: first record is not a header: {other:?}",
            path.display()
        ),
    };
    let mut events = Vec::new();
    let mut lives = Vec::new();
    let mut current: HashMap<(u64, u64), u32> = HashMap::new();
    let mut paths: HashMap<FileLife, Vec<String>> = HashMap::new();
    for rec in r {
        match rec.unwrap().record {
            Some(Record::Batch(b)) => {
                for e in b.events {
                    let file = match &e.kind {
                        Some(Kind::Open(o)) => Some(&o.file),
                        Some(Kind::Write(w)) => Some(&w.file),
                        Some(Kind::Invalidate(i)) => Some(&i.file),
                        Some(Kind::AppHint(h)) => Some(&h.file),
                        _ => None,
                    };
                    let f = file.map(fid).unwrap_or((0, 0));
                    let life = current.get(&f).copied().unwrap_or(0);
                    if let Some(Kind::Open(o)) = &e.kind {
                        let v = paths.entry((f.0, f.1, life)).or_default();
                        if !v.contains(&o.path) {
                            v.push(o.path.clone());
                        }
                    }
                    if let Some(Kind::Invalidate(i)) = &e.kind {
                        let k = i.kind;
                        if k == wire::InvalidateKind::Unlink as i32
                            || k == wire::InvalidateKind::RenameReplace as i32
                        {
                            *current.entry(f).or_default() += 1;
                        }
                    }
                    lives.push(life);
                    events.push((b.pid, e));
                }
            }
            other => panic!("{}: unexpected record {other:?}", path.display()),
        }
    }
    Trace {
        header,
        events,
        lives,
        paths,
    }
}

pub fn fid(f: &Option<wire::FileId>) -> (u64, u64) {
    f.as_ref().map_or((0, 0), |f| (f.dev, f.ino))
}

fn file_name(p: &str) -> &str {
    Path::new(p)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(p)
}

impl Trace {
    /// Whether any path the file had matches `pred` (applied to the file name).
    pub fn file_matches(&self, f: FileLife, pred: &dyn Fn(&str) -> bool) -> bool {
        self.paths
            .get(&f)
            .is_some_and(|v| v.iter().any(|p| pred(file_name(p))))
    }

    /// The file event `i` is about, with its lifetime.
    pub fn file_of(&self, i: usize, f: &Option<wire::FileId>) -> FileLife {
        let (d, n) = fid(f);
        (d, n, self.lives[i])
    }

    /// Signatures of writes to files whose name matches `pred`, with bytes.
    pub fn write_sigs(&self, pred: &dyn Fn(&str) -> bool) -> BTreeMap<u64, u64> {
        self.bytes_by(pred, |w| w.signature)
    }

    /// [`Trace::write_sigs`] by the native signature recorded beside a
    /// Java call path (`WriteEvent.native_signature`; 0: none).
    pub fn native_sigs(&self, pred: &dyn Fn(&str) -> bool) -> BTreeMap<u64, u64> {
        self.bytes_by(pred, |w| w.native_signature)
    }

    /// Bytes written to files whose name matches `pred`, by `key` of the write.
    fn bytes_by(
        &self,
        pred: &dyn Fn(&str) -> bool,
        key: impl Fn(&wire::WriteEvent) -> u64,
    ) -> BTreeMap<u64, u64> {
        let mut m = BTreeMap::new();
        for (i, (_, e)) in self.events.iter().enumerate() {
            if let Some(Kind::Write(w)) = &e.kind {
                if self.file_matches(self.file_of(i, &w.file), pred) {
                    *m.entry(key(w)).or_default() += w.len;
                }
            }
        }
        m
    }

    /// Names of files whose name matches `pred` that were invalidated with `kind`.
    pub fn invalidated(
        &self,
        kind: wire::InvalidateKind,
        pred: &dyn Fn(&str) -> bool,
    ) -> BTreeSet<String> {
        let mut s = BTreeSet::new();
        for (n, (_, e)) in self.events.iter().enumerate() {
            if let Some(Kind::Invalidate(i)) = &e.kind {
                if i.kind == kind as i32 {
                    if let Some(v) = self.paths.get(&self.file_of(n, &i.file)) {
                        for p in v.iter().filter(|p| pred(file_name(p))) {
                            s.insert(file_name(p).to_string());
                        }
                    }
                }
            }
        }
        s
    }

    /// App hint events on files whose name matches `pred`.
    pub fn app_hints(&self, pred: &dyn Fn(&str) -> bool) -> Vec<wire::AppHintEvent> {
        self.events
            .iter()
            .enumerate()
            .filter_map(|(i, (_, e))| match &e.kind {
                Some(Kind::AppHint(h)) if self.file_matches(self.file_of(i, &h.file), pred) => {
                    Some(*h)
                }
                _ => None,
            })
            .collect()
    }

    /// Number of invalidations of `kind` on files whose name matches `pred`.
    pub fn count_invalidations(
        &self,
        kind: wire::InvalidateKind,
        pred: &dyn Fn(&str) -> bool,
    ) -> usize {
        self.events
            .iter()
            .enumerate()
            .filter(|(n, (_, e))| match &e.kind {
                Some(Kind::Invalidate(i)) => {
                    i.kind == kind as i32 && self.file_matches(self.file_of(*n, &i.file), pred)
                }
                _ => false,
            })
            .count()
    }

    /// Executable (file name) of each pid, from ProcessEvent START.
    pub fn programs(&self) -> HashMap<u32, String> {
        let mut m = HashMap::new();
        for (pid, e) in &self.events {
            if let Some(Kind::Process(p)) = &e.kind {
                if !p.exe.is_empty() {
                    m.insert(*pid, file_name(&p.exe).to_string());
                }
            }
        }
        m
    }

    /// Programs that wrote files whose name matches `pred`.
    pub fn writers(&self, pred: &dyn Fn(&str) -> bool) -> BTreeSet<String> {
        let progs = self.programs();
        let mut s = BTreeSet::new();
        for (i, (pid, e)) in self.events.iter().enumerate() {
            if let Some(Kind::Write(w)) = &e.kind {
                if self.file_matches(self.file_of(i, &w.file), pred) {
                    s.insert(
                        progs
                            .get(pid)
                            .cloned()
                            .unwrap_or_else(|| format!("pid {pid}")),
                    );
                }
            }
        }
        s
    }

    /// Structural checks every merged trace must pass: events in time order,
    /// each write's SignatureInfo (and its modules) earlier in the same process.
    pub fn check_merged(&self) {
        let mut last = 0;
        let mut sigs = BTreeSet::new();
        let mut mods = BTreeSet::new();
        for (i, (pid, e)) in self.events.iter().enumerate() {
            assert!(
                e.time_ns >= last,
                "event {i} goes back in time: {} < {last}",
                e.time_ns
            );
            last = e.time_ns;
            match &e.kind {
                Some(Kind::Module(m)) => {
                    mods.insert((*pid, m.module_key));
                }
                Some(Kind::Signature(s)) => {
                    for f in &s.frames {
                        assert!(
                            mods.contains(&(*pid, f.module_key)),
                            "event {i}: signature {:016x} uses module {:016x} before its ModuleInfo",
                            s.signature,
                            f.module_key
                        );
                    }
                    sigs.insert((*pid, s.signature));
                }
                Some(Kind::Write(w)) => assert!(
                    sigs.contains(&(*pid, w.signature)),
                    "event {i}: pid {pid} writes with signature {:016x} before its SignatureInfo",
                    w.signature
                ),
                _ => {}
            }
        }
    }
}

/// One row of `trace-stats --json`: signature → (function names of the
/// call path, joined, innermost first).
pub fn call_paths(trace_dir: &Path) -> BTreeMap<u64, String> {
    let out = Command::new(pcstream_tests::pcstreamctl())
        .args(["trace-stats", "--json", "--top", "0", "--frames", "0"])
        .arg(trace_dir)
        .output()
        .expect("run pcstreamctl trace-stats");
    assert!(
        out.status.success(),
        "trace-stats failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("trace-stats --json is JSON");
    let mut m = BTreeMap::new();
    for row in v["rows"].as_array().expect("rows") {
        let sig = u64::from_str_radix(row["signature"].as_str().unwrap(), 16).unwrap();
        let mut names = Vec::new();
        for f in row["frames"].as_array().unwrap() {
            let fns = f["functions"].as_array().unwrap();
            if fns.is_empty() {
                names.push(format!(
                    "{}+{:#x}",
                    f["module"].as_str().unwrap(),
                    f["offset"].as_u64().unwrap()
                ));
            }
            for func in fns {
                names.push(func["name"].as_str().unwrap_or("??").to_string());
            }
        }
        m.insert(sig, names.join(" <- "));
    }
    m
}

/// Human-readable dump of signature sets, for assertion messages.
pub fn show(sigs: &BTreeMap<u64, u64>, paths: &BTreeMap<u64, String>) -> String {
    sigs.iter()
        .map(|(s, b)| {
            format!(
                "  {s:016x} {b} B: {}",
                paths.get(s).map_or("?", String::as_str)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
