//! Helpers for the shim integration tests (`tests/tests/shim_*.rs`): build
//! the C programs in `tests/c/shim_*.c`, run them with and without
//! `LD_PRELOAD=libpcstream.so`, and decode the per-process trace files.
#![allow(dead_code)]

use pcstream_placement::env as var;
use pcstream_placement::trace::TraceReader;
use pcstream_placement::wire::{self, event::Kind, trace_record::Record};
use pcstream_tests::{c_dir, compile_c, shim, target_profile_dir};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Compiles `tests/c/<name>.c` with `flags` (once per flag set) and returns
/// the executable.
pub fn program(name: &str, flags: &[&str]) -> PathBuf {
    let dir = target_profile_dir().join("shim-c");
    std::fs::create_dir_all(&dir).unwrap();
    let tag: String = flags
        .iter()
        .map(|f| f.trim_start_matches('-').replace(['=', '/'], "_"))
        .collect::<Vec<_>>()
        .join("-");
    let out = dir.join(format!("{name}-{tag}"));
    let src = c_dir().join(format!("{name}.c"));
    let stale = match (std::fs::metadata(&out), std::fs::metadata(&src)) {
        (Ok(o), Ok(s)) => o.modified().unwrap() < s.modified().unwrap(),
        _ => true,
    };
    if stale {
        // Build to a unique temporary name, then rename: parallel tests may race.
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = dir.join(format!("{name}-{tag}.{}.{n}", std::process::id()));
        compile_c(&src, &tmp, flags);
        std::fs::rename(&tmp, &out).unwrap();
    }
    out
}

/// Default flags: optimised PIE with frame pointers.
pub const FP: &[&str] = &["-O2", "-fPIE", "-pie", "-fno-omit-frame-pointer"];
/// Optimised PIE without frame pointers.
pub const NO_FP: &[&str] = &["-O2", "-fPIE", "-pie", "-fomit-frame-pointer"];

/// How to run a program.
#[derive(Debug, Default, Clone)]
pub struct Run {
    /// Preload the shim.
    pub shim: bool,
    /// Extra environment.
    pub env: Vec<(String, String)>,
}

impl Run {
    /// Without the shim.
    pub fn plain() -> Self {
        Run::default()
    }

    /// With the shim and no configuration.
    pub fn shim() -> Self {
        Run {
            shim: true,
            env: Vec::new(),
        }
    }

    /// With the shim recording into `dir`.
    pub fn record(dir: &Path) -> Self {
        Run::shim().env(var::RECORD_DIR, dir.to_str().unwrap())
    }

    /// Adds an environment variable.
    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }

    /// Runs `bin args`, returning its output; panics if it cannot start.
    pub fn output(&self, bin: &Path, args: &[&str]) -> Output {
        self.command(bin, args)
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", bin.display()))
    }

    /// As [`Run::output`], but kills the program and panics if it has not
    /// exited within `secs` seconds (a hang is the failure being tested).
    #[allow(dead_code)]
    pub fn output_within(&self, bin: &Path, args: &[&str], secs: u64) -> Output {
        pcstream_tests::output_within(self.command(bin, args), secs)
    }

    fn command(&self, bin: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(bin);
        c.args(args);
        for k in [
            var::RECORD_DIR,
            var::MAP,
            var::SOCKET,
            var::UNWIND,
            var::FRAMES,
            var::DISABLE,
            var::FIX_APP_HINTS,
            "LD_PRELOAD",
        ] {
            c.env_remove(k);
        }
        // Never talk to a real daemon from a test.
        c.env(var::SOCKET, "/nonexistent/pcstream-test.sock");
        if self.shim {
            c.env("LD_PRELOAD", shim());
        }
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    /// Runs and requires success; returns stdout.
    pub fn stdout(&self, bin: &Path, args: &[&str]) -> String {
        let o = self.output(bin, args);
        assert!(
            o.status.success(),
            "{} {:?} failed ({:?}):\n{}\n{}",
            bin.display(),
            args,
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    }
}

/// One per-process trace file, decoded.
#[derive(Debug)]
pub struct ProcessTrace {
    /// The file.
    pub path: PathBuf,
    /// Its header.
    pub header: wire::TraceHeader,
    /// Its batches, in file order.
    pub batches: Vec<wire::EventBatch>,
}

impl ProcessTrace {
    /// Every event, in file order.
    pub fn events(&self) -> impl Iterator<Item = &wire::Event> {
        self.batches.iter().flat_map(|b| b.events.iter())
    }

    /// The pid of the batches.
    pub fn pid(&self) -> u32 {
        self.batches.first().map_or(0, |b| b.pid)
    }

    /// The write events.
    pub fn writes(&self) -> Vec<&wire::WriteEvent> {
        self.events()
            .filter_map(|e| match &e.kind {
                Some(Kind::Write(w)) => Some(w),
                _ => None,
            })
            .collect()
    }

    /// Signature descriptions by signature.
    pub fn signatures(&self) -> BTreeMap<u64, &wire::SignatureInfo> {
        self.events()
            .filter_map(|e| match &e.kind {
                Some(Kind::Signature(s)) => Some((s.signature, s)),
                _ => None,
            })
            .collect()
    }

    /// Module descriptions by key.
    pub fn modules(&self) -> BTreeMap<u64, &wire::ModuleInfo> {
        self.events()
            .filter_map(|e| match &e.kind {
                Some(Kind::Module(m)) => Some((m.module_key, m)),
                _ => None,
            })
            .collect()
    }

    /// Paths of files by (dev, ino), from open events.
    pub fn paths(&self) -> BTreeMap<(u64, u64), String> {
        self.events()
            .filter_map(|e| match &e.kind {
                Some(Kind::Open(o)) => {
                    let f = o.file.unwrap_or_default();
                    Some(((f.dev, f.ino), o.path.clone()))
                }
                _ => None,
            })
            .collect()
    }

    /// Process life-cycle events.
    pub fn process_events(&self) -> Vec<&wire::ProcessEvent> {
        self.events()
            .filter_map(|e| match &e.kind {
                Some(Kind::Process(p)) => Some(p),
                _ => None,
            })
            .collect()
    }
}

/// Reads every `*.pcstrace` in `dir` (sorted by name).
pub fn traces(dir: &Path) -> Vec<ProcessTrace> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pcstrace"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let r = TraceReader::open(&path).unwrap();
            let mut header = None;
            let mut batches = Vec::new();
            for rec in r {
                match rec.unwrap().record {
                    Some(Record::Header(h)) => {
                        assert!(header.is_none(), "{}: two headers", path.display());
                        assert!(
                            batches.is_empty(),
                            "{}: header after batches",
                            path.display()
                        );
                        header = Some(h);
                    }
                    Some(Record::Batch(b)) => batches.push(b),
                    other => panic!("{}: unexpected record {other:?}", path.display()),
                }
            }
            let header = header.unwrap_or_else(|| panic!("{}: no header", path.display()));
            ProcessTrace {
                path,
                header,
                batches,
            }
        })
        .collect()
}

/// The single trace in `dir`.
pub fn only_trace(dir: &Path) -> ProcessTrace {
    let mut t = traces(dir);
    assert_eq!(t.len(), 1, "expected one trace file in {}", dir.display());
    t.pop().unwrap()
}

/// Writes to the file at `path` (by the open events' paths).
pub fn writes_to<'a>(t: &'a ProcessTrace, path: &Path) -> Vec<&'a wire::WriteEvent> {
    let want = std::fs::canonicalize(path).unwrap_or(path.to_path_buf());
    let ids: Vec<(u64, u64)> = t
        .paths()
        .into_iter()
        .filter(|(_, p)| Path::new(p) == want)
        .map(|(id, _)| id)
        .collect();
    t.writes()
        .into_iter()
        .filter(|w| {
            let f = w.file.unwrap_or_default();
            ids.contains(&(f.dev, f.ino))
        })
        .collect()
}
