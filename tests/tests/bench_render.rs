//! `bench/run.sh` end to end at `--quick` scale, so the renderer
//! (`bench/render.py`) cannot rot: two tuning workloads (`sqlite-wal`, and
//! `h2`, a Java one) and one held-out workload (`fio-skew`), two
//! recordings each, recorded, replayed through every setting and rendered
//! into `results.md` in a directory of the test's own. Proves: the run
//! exits 0 and leaves
//! `docs/` alone; pcstream's WAF cells are the mean ± half-range of that
//! workload's recordings in `compare.json` (1.000 at this scale, where the
//! device does not age) and its peak of live pages, which differs between
//! recordings, that of `compare-trim.json`; the Java runs' replay under
//! the native signatures the shim recorded beside their Java call paths
//! (`compare-native.json`) is rendered recording by recording beside
//! pcstream's WAF on their Java call paths; the
//! held-out workload appears only in the held-out section (docs/placement.md,
//! "Method"), the tuning one only outside it; the render names the git
//! commit of the checkout that replayed.
//!
//! Needs root (loop devices, mount, tracefs), like `bench_workloads`: as
//! another user it fails naming that, never skips.

use pcstream_tests::{require_device_trace, require_tool};
use std::path::Path;
use std::process::Command;

/// Mean and half-range of `xs`, as render.py prints them (3 decimals).
fn cell(xs: &[f64]) -> String {
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    let lo = xs.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    format!("{mean:.3} ±{:.3}", (hi - lo) / 2.0)
}

/// The traces of `workload`'s recordings in a compare report.
fn traces_of<'a>(
    report: &'a serde_json::Value,
    workload: &str,
) -> impl Iterator<Item = &'a serde_json::Value> {
    let dir = format!("/{workload}/r");
    report["traces"]
        .as_array()
        .unwrap()
        .iter()
        .filter(move |t| t["path"].as_str().unwrap().contains(&dir))
}

/// pcstream's WAF per recording of `workload` in a compare report.
fn pcstream_wafs(report: &serde_json::Value, workload: &str, internal: bool) -> Vec<f64> {
    traces_of(report, workload)
        .flat_map(|t| t["runs"].as_array().unwrap().iter())
        .filter(|r| r["policy"] == "pcstream" && r["internal_streams"] == internal)
        .map(|r| r["waf"].as_f64().unwrap())
        .collect()
}

/// The table row of `workload` in `text` (the first line starting so).
fn row<'a>(text: &'a str, workload: &str) -> Option<&'a str> {
    let start = format!("| {workload} |");
    text.lines().find(|l| l.starts_with(&start))
}

/// The cells of a table row.
fn cells(line: &str) -> Vec<&str> {
    line.trim()
        .trim_matches('|')
        .split('|')
        .map(str::trim)
        .collect()
}

/// The cell under `column` in `workload`'s row of the table whose header
/// names that column, in `text`, as (mean, half-range).
fn column(text: &str, workload: &str, column: &str) -> (f64, f64) {
    let lines: Vec<&str> = text.lines().collect();
    let head = lines
        .iter()
        .position(|l| l.starts_with('|') && cells(l).contains(&column))
        .unwrap_or_else(|| panic!("no table with a {column:?} column"));
    let at = cells(lines[head])
        .iter()
        .position(|c| *c == column)
        .unwrap();
    let row = lines[head..]
        .iter()
        .take_while(|l| l.starts_with('|'))
        .find(|l| cells(l)[0] == workload)
        .unwrap_or_else(|| panic!("no {workload} row under {}", lines[head]));
    let cell = cells(row)[at];
    let (m, d) = cell.split_once(" ±").unwrap_or((cell, "0"));
    (m.parse().unwrap(), d.parse().unwrap())
}

#[test]
fn bench_run_renders_its_own_numbers_with_the_held_out_set_apart() {
    require_device_trace("bench/run.sh (records with --device-trace)");
    for (cmd, pkg) in [
        ("sqlite3", "sqlite3"),
        ("fio", "fio"),
        ("python3", "python3"),
        ("javac", "openjdk-17-jdk-headless"),
    ] {
        require_tool(cmd, pkg);
    }
    pcstream_tests::require_file("/usr/share/java/h2.jar", "libh2-java");
    pcstream_tests::shim();
    let ctl = pcstream_tests::pcstreamctl();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let docs_before = std::fs::read(repo.join("docs/results.md")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = Command::new("bash")
        .arg(repo.join("bench/run.sh"))
        .args(["--quick", "--repeats", "2", "--no-build"])
        .args(["--only", "sqlite-wal,h2,fio-skew", "--out"])
        .arg(&out)
        // run.sh finds pcstreamctl under the target directory.
        .env("CARGO_TARGET_DIR", ctl.parent().unwrap().parent().unwrap())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "bench/run.sh: {}\n{stderr}", o.status);
    assert_eq!(
        std::fs::read(repo.join("docs/results.md")).unwrap(),
        docs_before,
        "an --out of its own must leave docs/results.md alone"
    );

    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("compare.json")).unwrap()).unwrap();
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    let held = md
        .find("## Held-out workloads")
        .unwrap_or_else(|| panic!("no held-out section:\n{md}"));
    // The held-out section runs to the next section heading.
    let end = md[held + 1..]
        .find("\n## ")
        .map_or(md.len(), |i| held + 1 + i);
    let held_out = &md[held..end];
    let tuning = format!("{}{}", &md[..held], &md[end..]);
    let tuning = tuning.as_str();

    assert!(
        row(held_out, "sqlite-wal").is_none(),
        "a tuning workload in the held-out section:\n{held_out}"
    );
    assert!(
        row(tuning, "fio-skew").is_none(),
        "a held-out workload outside its section:\n{tuning}"
    );
    for (workload, section) in [("sqlite-wal", tuning), ("fio-skew", held_out)] {
        for internal in [false, true] {
            let wafs = pcstream_wafs(&report, workload, internal);
            assert_eq!(wafs.len(), 2, "{workload}: recordings in compare.json");
            let want = cell(&wafs);
            // Some WAF table of the section shows exactly that cell.
            assert!(
                section
                    .lines()
                    .filter(|l| l.starts_with(&format!("| {workload} |")))
                    .any(|l| l.contains(&format!("| {want} |"))),
                "{workload} (internal streams {internal}): no row shows pcstream's {want}:\n{section}"
            );
        }
    }
    // A figure that differs between recordings even where the quick
    // device does not age (every WAF 1.000): the peak of live pages, which
    // the render takes from the replay with TRIM (docs/results.md: what the
    // file system held at once).
    let trim: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("compare-trim.json")).unwrap()).unwrap();
    for (workload, section) in [("sqlite-wal", tuning), ("fio-skew", held_out)] {
        let peaks: Vec<f64> = traces_of(&trim, workload)
            .map(|t| t["peak_live_pages"].as_f64().unwrap())
            .collect();
        assert_eq!(
            peaks.len(),
            2,
            "{workload}: recordings in compare-trim.json"
        );
        let mean = peaks.iter().sum::<f64>() / 2.0;
        let half = (peaks[0] - peaks[1]).abs() / 2.0;
        let (m, d) = column(section, workload, "peak live pages");
        // Whole pages, as rendered.
        assert!(
            (m - mean).abs() <= 0.5 && (d - half).abs() <= 0.5,
            "{workload}: peak live pages rendered {m} ±{d}, recorded {peaks:?}"
        );
    }
    // The Java runs under their native signatures: each h2 recording's
    // row shows pcstream on its Java call paths (compare.json) beside the
    // paper's algorithm on its native signatures (compare-native.json).
    let native: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("compare-native.json")).unwrap()).unwrap();
    assert_eq!(native["settings"]["native_signatures"], true);
    let sec = md
        .find("## The Java runs under their own native signatures")
        .map(|i| &md[i..])
        .unwrap_or_else(|| panic!("no native-signature section:\n{md}"));
    let waf = |rep: &serde_json::Value, t: &serde_json::Value, policy: &str| -> String {
        let r = t["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["policy"] == policy && r["internal_streams"] == false)
            .unwrap_or_else(|| panic!("{policy} missing from {}", rep["settings"]));
        format!("{:.4}", r["waf"].as_f64().unwrap())
    };
    let java: Vec<_> = traces_of(&report, "h2").collect();
    let nat: Vec<_> = traces_of(&native, "h2").collect();
    assert_eq!((java.len(), nat.len()), (2, 2), "h2 recordings");
    for (k, (j, n)) in java.iter().zip(&nat).enumerate() {
        let r = sec
            .lines()
            .find(|l| l.starts_with(&format!("| h2 r{} |", k + 1)))
            .unwrap_or_else(|| panic!("no h2 r{} row:\n{sec}", k + 1));
        let c = cells(r);
        assert_eq!(c[1], waf(&report, j, "pcstream"), "{r}");
        assert_eq!(c[3], waf(&native, n, "pcstream-paper"), "{r}");
    }
    // The commit of the checkout that replayed (render.py's own).
    let head = Command::new("git")
        .args(["-C", repo.to_str().unwrap(), "rev-parse", "--short", "HEAD"])
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&head.stdout).trim().to_string();
    if head.len() >= 7 {
        assert!(md.contains(&head), "results.md does not name git {head}");
    }
}
