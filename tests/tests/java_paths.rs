//! Java call paths (#27): a JVM under the shim gets signatures from its
//! Java frames (JVMTI, taken in the live phase; no agent flag, no JDK
//! change). `tests/java/Lifetimes.java` writes through one stream class
//! (`FileOutputStream.write`, from one helper method) for three methods
//! with three lifetimes: a journal rewritten every round, tables kept,
//! scratch files deleted four rounds later. 1,500 rounds: the JIT
//! compiles the paths, and repeats are recognised from the stack's JIT
//! return addresses (`java.rs`) without walking it: every write must
//! still get its own path's signature. Recorded with
//! `PCSTREAM_JAVA_NATIVE=1`, each write also carries the native signature
//! a `PCSTREAM_JAVA=0` run gives it, which `compare --native-signatures`
//! replays the trace under.

mod app_common;
mod daemon_common;

use daemon_common::Daemon;
use pcstream_placement::env as var;
use pcstream_placement::hint::RwHint;
use pcstream_tests::{compile_java, require_tool, rw_hint};
use std::collections::BTreeMap;
use std::path::Path;

/// The signature of each of the three kinds of file (journal, table,
/// scratch) in a recorded run; each kind must have exactly one.
fn kinds(rec: &app_common::Recorded) -> [u64; 3] {
    let paths = app_common::call_paths(&rec.dir);
    let pick = |pred: &dyn Fn(&str) -> bool, what: &str| -> u64 {
        let s: BTreeMap<u64, u64> = rec.trace.write_sigs(pred);
        assert_eq!(
            s.len(),
            1,
            "{what}: one signature expected:\n{}",
            app_common::show(&s, &paths)
        );
        let sig = *s.keys().next().unwrap();
        let path = &paths[&sig];
        assert!(
            path.starts_with("Lifetimes.fill(FileOutputStream, int)")
                && path.contains(&format!(" <- Lifetimes.{what}(File")),
            "{what}: the path is the Java methods': {path}"
        );
        sig
    };
    [
        pick(&|n: &str| n == "journal", "journal"),
        pick(&|n: &str| n.starts_with("table-"), "table"),
        pick(&|n: &str| n.starts_with("scratch-"), "scratch"),
    ]
}

fn java_run(classes: &Path, dir: &Path, rounds: u32) -> Vec<String> {
    std::fs::create_dir_all(dir).unwrap();
    vec![
        "java".into(),
        format!("-Xlog:gc*:file={}", dir.join("gc.log").display()),
        "-cp".into(),
        classes.display().to_string(),
        "Lifetimes".into(),
        dir.display().to_string(),
        rounds.to_string(),
    ]
}

#[test]
fn three_java_methods_get_three_signatures_the_same_in_two_runs() {
    require_tool("java", "openjdk-17-jdk-headless");
    let tmp = tempfile::tempdir().unwrap();
    let classes = tmp.path().join("classes");
    compile_java("Lifetimes", &classes);
    let mut runs = Vec::new();
    for i in 0..2 {
        let dir = tmp.path().join(format!("run{i}"));
        let cmd = java_run(&classes, &dir.join("data"), 1500);
        let argv: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let rec = app_common::record(&dir.join("rec"), &dir, &argv, &[(var::JAVA_NATIVE, "1")]);
        assert_eq!(
            String::from_utf8_lossy(&rec.output.stdout).trim(),
            "rounds 1500",
            "the program's output is unchanged"
        );
        let k = kinds(&rec);
        // The JVM's own writes (its GC log) keep their native signatures.
        let gc = rec.trace.write_sigs(&|n: &str| n == "gc.log");
        let paths = app_common::call_paths(&rec.dir);
        assert!(!gc.is_empty(), "no gc.log writes");
        for sig in gc.keys() {
            assert!(
                paths[sig].contains("LogFileStreamOutput"),
                "gc.log: {}",
                paths[sig]
            );
        }
        assert!(
            k[0] != k[1] && k[1] != k[2] && k[0] != k[2],
            "three signatures: {k:x?}"
        );
        // Beside each Java call path, the native one the write would have
        // had with Java call paths off: one for the three kinds.
        let natives = rec.trace.native_sigs(&|n: &str| {
            n == "journal" || n.starts_with("table-") || n.starts_with("scratch-")
        });
        assert_eq!(natives.len(), 1, "one native signature: {natives:x?}");
        let native = *natives.keys().next().unwrap();
        assert!(
            native != 0 && !k.contains(&native),
            "a native signature beside every Java one: {native:x}"
        );
        let gc_natives = rec.trace.native_sigs(&|n: &str| n == "gc.log");
        assert_eq!(
            gc_natives.keys().collect::<Vec<_>>(),
            [&0],
            "the JVM's own writes have no second signature"
        );
        runs.push((k, native));
    }
    assert_eq!(runs[0], runs[1], "the same signatures in both runs");

    // PCSTREAM_JAVA=0: the native signature of the JDK's native, one for all.
    let dir = tmp.path().join("native");
    let cmd = java_run(&classes, &dir.join("data"), 20);
    let argv: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let rec = app_common::record(&dir.join("rec"), &dir, &argv, &[(var::JAVA, "0")]);
    let all = rec.trace.write_sigs(&|n: &str| {
        n == "journal" || n.starts_with("table-") || n.starts_with("scratch-")
    });
    let paths = app_common::call_paths(&rec.dir);
    assert_eq!(all.len(), 1, "{}", app_common::show(&all, &paths));
    let sig = *all.keys().next().unwrap();
    let native = &paths[&sig];
    assert!(
        native.contains("Java_java_io_FileOutputStream_writeBytes"),
        "{native}"
    );
    assert_eq!(
        sig, runs[0].1,
        "the native signature recorded beside the Java ones is this run's"
    );
    // And the recorded run replays under either set: three signatures as
    // recorded, one with --native-signatures (the paper's view of the
    // same run); a trace without native signatures says so.
    let trace = tmp.path().join("run0/rec/trace.pcstrace");
    let replay = |extra: &[&str]| {
        let out = std::process::Command::new(pcstream_tests::pcstreamctl())
            .args([
                "compare",
                "--policies",
                "pcstream-paper",
                "--prefill",
                "0",
                "--json",
            ])
            .args(extra)
            .arg(&trace)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["settings"]["native_signatures"], !extra.is_empty());
        v["traces"][0]["runs"][0]["signatures"].as_u64().unwrap()
    };
    let (java, natives) = (replay(&[]), replay(&["--native-signatures"]));
    assert!(
        java >= natives + 2,
        "the three Java paths are one native path: {java} against {natives} signatures"
    );
    let out = std::process::Command::new(pcstream_tests::pcstreamctl())
        .args(["compare", "--native-signatures", "--prefill", "0"])
        .arg(dir.join("rec/trace.pcstrace"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("no write carries a native signature"),
        "{err}"
    );
}

#[test]
fn pcstreamd_learns_the_java_methods_apart_and_fresh_files_get_their_hints() {
    require_tool("java", "openjdk-17-jdk-headless");
    let d = Daemon::start("[mapper]\nfirst_interval = 64\ncheck_interval = 256\n");
    let tmp = tempfile::tempdir().unwrap();
    let classes = tmp.path().join("classes");
    compile_java("Lifetimes", &classes);
    let run_dir = d.run_dir();
    let env = [
        (var::RUNTIME_DIR, run_dir.to_str().unwrap()),
        (var::FLUSH_MS, "20"),
    ];
    // Learning run.
    let a = tmp.path().join("a");
    let cmd = java_run(&classes, &a.join("data"), 200);
    let argv: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let rec = app_common::record(&a.join("rec"), &a, &argv, &env);
    let [journal, table, scratch] = kinds(&rec);
    d.settled();
    let (ok, _, err) = d.ctl(&["recluster"]);
    assert!(ok, "{err}");
    let ctx = d.contexts();
    let row = |sig: u64| {
        ctx.iter()
            .find(|c| c["signature"] == format!("{sig:016x}"))
            .unwrap_or_else(|| panic!("{sig:016x} not in contexts:\n{ctx:#?}"))
            .clone()
    };
    let (j, t, s) = (row(journal), row(table), row(scratch));
    // `contexts` names the Java methods.
    for (c, m) in [(&j, "journal"), (&t, "table"), (&s, "scratch")] {
        let f0 = c["frames"][0].as_str().unwrap_or("");
        let f1 = c["frames"][1].as_str().unwrap_or("");
        assert!(
            f0.starts_with("Lifetimes.fill(FileOutputStream, int) bci ")
                && f1.starts_with(&format!("Lifetimes.{m}(File")),
            "contexts shows the Java frames: {c:#}"
        );
    }
    let stream = |c: &serde_json::Value| c["stream"].as_u64().unwrap();
    let life = |c: &serde_json::Value| c["lifetime_estimate_bytes"].as_f64().unwrap_or(f64::NAN);
    eprintln!(
        "journal {} B (stream {}), scratch {} B (stream {}), table {} B (stream {})",
        life(&j),
        stream(&j),
        life(&s),
        stream(&s),
        life(&t),
        stream(&t)
    );
    assert!(
        life(&j) < life(&s),
        "journal {} scratch {}",
        life(&j),
        life(&s)
    );
    // Three streams: the journal below the scratch files; the tables, which
    // never die in the run, above both or unmapped (stream 0: no lifetime
    // sample, no hint; docs/placement.md).
    assert!(
        stream(&j) != 0 && stream(&j) < stream(&s) && (stream(&t) == 0 || stream(&t) > stream(&s)),
        "streams: journal {} scratch {} table {}",
        stream(&j),
        stream(&s),
        stream(&t)
    );

    // A second run into a fresh directory: its new files carry the hints of
    // the streams learnt for their methods.
    let b = tmp.path().join("b");
    let cmd = java_run(&classes, &b.join("data"), 3);
    let argv: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let rec = app_common::record(&b.join("rec"), &b, &argv, &env);
    assert_eq!(
        kinds(&rec),
        [journal, table, scratch],
        "the same signatures"
    );
    let data = b.join("data");
    assert_eq!(
        rw_hint(&data.join("journal")),
        RwHint::for_stream(stream(&j) as u32).raw(),
        "journal hint"
    );
    assert_eq!(
        rw_hint(&data.join("table-0")),
        RwHint::for_stream(stream(&t) as u32).raw(),
        "table hint"
    );
    assert_eq!(
        rw_hint(&data.join("scratch-2")),
        RwHint::for_stream(stream(&s) as u32).raw(),
        "scratch hint"
    );
}

/// A JDK with virtual threads (21 or later) installed beside the default
/// one, if any.
fn jdk_with_virtual_threads() -> Option<std::path::PathBuf> {
    let mut found = None;
    for e in std::fs::read_dir("/usr/lib/jvm").ok()?.flatten() {
        let java = e.path().join("bin/java");
        let release = std::fs::read_to_string(e.path().join("release")).unwrap_or_default();
        let major = release
            .lines()
            .find_map(|l| l.strip_prefix("JAVA_VERSION=\""))
            .and_then(|v| v.split(['.', '"']).next()?.parse::<u32>().ok());
        if java.is_file() && major.is_some_and(|m| m >= 21) {
            found = Some(java);
        }
    }
    found
}

/// `tests/java/Stress.java` under the shim attached to a live pcstreamd,
/// 100 runs with the default JDK (and 20 with one that has virtual threads,
/// where installed): 8 writer threads through four stream classes under GC
/// pressure (48 MiB heap). Runs that finish print the same file checksums
/// as a run without the shim; runs that call `System.exit` while writers
/// are writing exit 0. No run may take more than a minute (a deadlock).
#[test]
fn busy_jvms_under_the_shim_neither_crash_nor_hang_nor_change_output() {
    require_tool("java", "openjdk-17-jdk-headless");
    let d = Daemon::start("");
    let tmp = tempfile::tempdir().unwrap();
    let classes = tmp.path().join("classes");
    compile_java("Stress", &classes);
    let mut jdks = vec![(std::path::PathBuf::from("java"), 100)];
    if let Some(j) = jdk_with_virtual_threads() {
        jdks.push((j, 20));
    }
    for (java, runs) in jdks {
        let run = |i: u32, mode: &str, shim: bool| -> std::process::Output {
            let dir = tmp.path().join(format!("run-{i}-{mode}-{shim}"));
            std::fs::create_dir_all(&dir).unwrap();
            let java = java.to_str().unwrap();
            let cp = classes.to_str().unwrap();
            let args = [
                java,
                "-Xmx48m",
                "-cp",
                cp,
                "Stress",
                dir.to_str().unwrap(),
                "8",
                mode,
            ];
            let mut c = if shim {
                daemon_common::under_shim(&d, &args)
            } else {
                let mut c = std::process::Command::new(args[0]);
                c.args(&args[1..]);
                c
            };
            let child = c
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let pid = child.id();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _ = tx.send(child.wait_with_output());
            });
            let out = match rx.recv_timeout(std::time::Duration::from_secs(60)) {
                Ok(o) => o.unwrap(),
                Err(_) => {
                    // SAFETY: kill(2) on our own child's pid.
                    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                    panic!("{java} Stress {mode} run {i}: no exit within 60 s (a hang)");
                }
            };
            std::fs::remove_dir_all(&dir).unwrap();
            out
        };
        let expected = run(0, "complete", false);
        assert!(expected.status.success(), "{expected:?}");
        for i in 0..runs {
            let mode = if i % 2 == 0 { "complete" } else { "exit" };
            let out = run(i, mode, true);
            assert!(
                out.status.success(),
                "{} Stress {mode} run {i}: {}\n{}",
                java.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                out.stderr.is_empty(),
                "stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            if mode == "complete" {
                assert!(
                    out.stdout == expected.stdout,
                    "{} run {i}: the files differ from a run without the shim",
                    java.display()
                );
            }
        }
    }
    // The daemon saw the JVMs' Java call paths.
    let ctx = d.contexts();
    assert!(
        ctx.iter().any(|c| c["frames"][0]
            .as_str()
            .is_some_and(|f| f.starts_with("Stress.writer(File, int, int) bci "))),
        "no Stress.writer path in {ctx:#?}"
    );
}

/// Lucene 4.10 (`bench/java/LuceneChurn.java`, the bench's `lucene`
/// workload at its quick size) under a live pcstreamd: its segment flushes,
/// its merges and its translog are distinct contexts, and `contexts` names
/// their Java methods.
#[test]
fn lucene_flush_merge_and_translog_are_distinct_java_contexts() {
    require_tool("javac", "openjdk-17-jdk-headless");
    pcstream_tests::require_file(
        "/usr/share/java/lucene-core-4.10.4.jar",
        "liblucene4.10-java",
    );
    let d = Daemon::start("");
    let tmp = tempfile::tempdir().unwrap();
    let classes = tmp.path().join("classes");
    let build = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/java/build.sh");
    let st = std::process::Command::new("bash")
        .arg(build)
        .arg(&classes)
        .status()
        .unwrap();
    assert!(st.success(), "bench/java/build.sh failed");
    let cp = std::fs::read_to_string(classes.join("classpath")).unwrap();
    let index = tmp.path().join("lucene");
    std::fs::create_dir_all(&index).unwrap();
    let index = index.to_str().unwrap();
    let args = [
        "java",
        "-Xmx128m",
        "-cp",
        cp.trim(),
        "LuceneChurn",
        index,
        "2000",
        "4000",
        "4",
        "8",
        "500",
        "2000",
    ];
    let out = daemon_common::under_shim(&d, &args).output().unwrap();
    assert!(out.status.success(), "LuceneChurn: {out:?}");
    d.settled();
    let ctx = d.contexts();
    let with = |what: &str| -> Vec<String> {
        ctx.iter()
            .filter(|c| {
                c["frames"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|f| f.as_str().unwrap_or("").starts_with(what))
            })
            .map(|c| c["signature"].as_str().unwrap().to_string())
            .collect()
    };
    let flush = with("org.apache.lucene.index.DocumentsWriterPerThread.flush()");
    let merge = with("org.apache.lucene.index.IndexWriter.merge(MergePolicy.OneMerge)");
    let log = with("LuceneChurn$Translog.");
    let names: Vec<&str> = ctx.iter().filter_map(|c| c["frames"][0].as_str()).collect();
    assert!(
        !flush.is_empty() && !merge.is_empty() && !log.is_empty(),
        "flush {flush:?} merge {merge:?} translog {log:?}; first frames: {names:#?}"
    );
    for s in &flush {
        assert!(
            !merge.contains(s) && !log.contains(s),
            "{s} is flush and more"
        );
    }
    for s in &merge {
        assert!(!log.contains(s), "{s} is merge and translog");
    }
}
