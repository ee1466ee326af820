//! A real application's own test suite under the shim: CPython's
//! `test_subprocess`, `test_os`, `test_posix` and `test_signal` (Debian's
//! `libpython3.11-testsuite`, installed by `scripts/install-deps.sh`) give
//! the same result for every test case natively, with the shim and a
//! mapping (`PCSTREAM_MAP`) and in record mode, and every recorded
//! per-process trace reads whole. These suites probe descriptors (inherited,
//! `pass_fds`, `closerange`, `dup2` onto numbers), signals arriving in the
//! middle of calls, fork/exec and `_exit`: what the shim must never change.
//!
//! The three runs go in parallel (each ~2 min of wall time, mostly the
//! suites' own sleeps and timeouts: ~10 s of CPU each).

mod shim_common;

use pcstream_placement::env as var;
use shim_common::traces;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const SUITES: [&str; 4] = [
    "test.test_subprocess",
    "test.test_os",
    "test.test_posix",
    "test.test_signal",
];

/// Runs the suites with unittest and a result class that writes each test
/// case's outcome to `out` as `id<TAB>outcome` lines.
const DRIVER: &str = r#"
import sys, unittest
out, names = sys.argv[1], sys.argv[2:]
outcomes = {}
class R(unittest.TextTestResult):
    def addSuccess(self, t): super().addSuccess(t); outcomes[t.id()] = "ok"
    def addFailure(self, t, e): super().addFailure(t, e); outcomes[t.id()] = "FAIL"
    def addError(self, t, e): super().addError(t, e); outcomes[t.id()] = "ERROR"
    def addSkip(self, t, r): super().addSkip(t, r); outcomes[t.id()] = "skipped"
    def addExpectedFailure(self, t, e): super().addExpectedFailure(t, e); outcomes[t.id()] = "xfail"
    def addUnexpectedSuccess(self, t): super().addUnexpectedSuccess(t); outcomes[t.id()] = "xpass"
    def addSubTest(self, t, s, e):
        super().addSubTest(t, s, e)
        if e is not None: outcomes[s.id()] = "FAIL"
suite = unittest.defaultTestLoader.loadTestsFromNames(names)
unittest.TextTestRunner(resultclass=R, verbosity=0).run(suite)
with open(out, "w") as f:
    for k in sorted(outcomes): f.write(f"{k}\t{outcomes[k]}\n")
"#;

/// One run in a fresh working directory (the suites write scratch files
/// there): each test case's outcome.
fn run(work: &Path, env: &[(&str, String)]) -> BTreeMap<String, String> {
    let out = work.join("outcomes.txt");
    let mut c = Command::new("python3");
    c.arg("-c")
        .arg(DRIVER)
        .arg(&out)
        .args(SUITES)
        .current_dir(work);
    for (k, _) in std::env::vars() {
        if k.starts_with("PCSTREAM_") || k == "LD_PRELOAD" {
            c.env_remove(k);
        }
    }
    c.env(var::SOCKET, "/nonexistent/pcstream-test.sock");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("run python3");
    let text = std::fs::read_to_string(&out).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; python3 said:\n{}",
            out.display(),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    text.lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn cpython_os_tests_give_the_same_results_natively_with_the_shim_and_in_record_mode() {
    assert!(
        Path::new("/usr/lib/python3.11/test/test_subprocess.py").exists(),
        "CPython's test suite is missing: apt-get install libpython3.11-testsuite \
         (scripts/install-deps.sh)"
    );
    let shim = pcstream_tests::shim().to_str().unwrap().to_string();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let rec = tempfile::tempdir().unwrap();
    let map = dirs[1].path().join("pcstream.map");
    std::fs::write(&map, "ffffffffffffffff 1\n").unwrap();
    let envs: [Vec<(&str, String)>; 3] = [
        vec![],
        vec![
            ("LD_PRELOAD", shim.clone()),
            (var::MAP, map.to_str().unwrap().into()),
        ],
        vec![
            ("LD_PRELOAD", shim),
            (var::RECORD_DIR, rec.path().to_str().unwrap().into()),
        ],
    ];
    let [native, mapped, recorded] = std::thread::scope(|s| {
        let h: Vec<_> = dirs
            .iter()
            .zip(&envs)
            .map(|(d, e)| s.spawn(move || run(d.path(), e)))
            .collect();
        let mut r = h.into_iter().map(|h| h.join().unwrap());
        [r.next().unwrap(), r.next().unwrap(), r.next().unwrap()]
    });
    assert!(native.len() > 800, "{} test cases ran", native.len());
    assert!(
        native.values().filter(|v| *v == "ok").count() > 600,
        "most pass natively: {native:?}"
    );
    for (mode, got) in [("with a mapping", &mapped), ("in record mode", &recorded)] {
        let differ: Vec<_> = native
            .keys()
            .chain(got.keys())
            .filter(|k| native.get(*k) != got.get(*k))
            .map(|k| format!("{k}: native {:?}, {mode} {:?}", native.get(k), got.get(k)))
            .collect();
        assert!(differ.is_empty(), "{mode}:\n{}", differ.join("\n"));
    }
    // Record mode recorded the suites' processes, and every trace reads.
    let t = traces(rec.path());
    assert!(t.len() > 100, "{} process traces", t.len());
}
