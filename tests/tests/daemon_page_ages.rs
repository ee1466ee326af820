//! Page ages, end to end with real processes: one program under the shim
//! writes an `O_DIRECT` file in place through one call site, as a
//! database's page flusher does (tests/c/daemon_page_ages.c): new "table"
//! pages that live ~64 rounds and a hot set rewritten every ten pages.
//! The call path alone cannot tell them apart; the age of the page a write
//! overwrites can (docs/shim.md, "Page ages"):
//! - the real `pcstreamd` learns the hot rewrites under the call path
//!   refined by their age class, a context of its own that `contexts`
//!   shows with the call path's frames and a shorter lifetime, published
//!   in a shorter-lived stream than the bare call path's (the table
//!   pages, written onto free pages);
//! - a second run (a new process, mapping the learnt table) gets the
//!   shorter hint on the file right after a hot rewrite and the longer one
//!   right after a table page, read back with `F_GET_RW_HINT` by the
//!   program itself;
//! - with the shim's age table off (`PCSTREAM_PAGE_AGES=0`) both writes
//!   get the call path's one hint, as before;
//! - the same on a raw block device with write streams (a loop device
//!   the shim is told has 8; the table's pages freed by `BLKDISCARD`):
//!   the device's domain learns the refined key apart and the next run's
//!   hot `pwrite`s find its stream as the node's hint before the call;
//! - a restart (a new process reopening the learnt file, data and all):
//!   the first rewrite of each of its old pages is learnt under its own
//!   key (`AGE_OLDER`, "first rewrites of older pages"), not under the
//!   bare call path, which gets only the new pages; later rewrites are
//!   aged as before.

mod daemon_common;
mod rawdev_common;

use daemon_common::{read_table, under_shim, Daemon};
use pcstream_placement::signature::{age_key, AGE_OLDER};
use rawdev_common::{sysfs_with_streams, LoopDev};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Runs the program; returns (hint after a hot write, after a table write).
fn run(d: &Daemon, bin: &Path, rounds: u32, file: &Path, env: &[(&str, &str)]) -> (u64, u64) {
    run_args(d, bin, rounds, file, env, &[])
}

fn run_args(
    d: &Daemon,
    bin: &Path,
    rounds: u32,
    file: &Path,
    env: &[(&str, &str)],
    args: &[&str],
) -> (u64, u64) {
    let mut c = under_shim(d, &[bin.to_str().unwrap()]);
    c.arg(rounds.to_string()).arg(file).args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "daemon_page_ages failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let w: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(w.len(), 4, "{text}");
    (w[1].parse().unwrap(), w[3].parse().unwrap())
}

fn sig_of(c: &serde_json::Value, k: &str) -> u64 {
    u64::from_str_radix(c[k].as_str().unwrap(), 16).unwrap()
}

/// The test program, compiled into `dir`.
fn program(dir: &Path) -> PathBuf {
    let bin = dir.join("daemon_page_ages");
    pcstream_tests::compile_c(
        &pcstream_tests::c_dir().join("daemon_page_ages.c"),
        &bin,
        &["-O2"],
    );
    bin
}

/// After a learning run and a re-clustering: the heaviest context refined
/// by age (the hot rewrites, rewritten every 10 pages: class
/// floor(log2(10) / 2) + 1 = 2) and the bare call path it refines, whose
/// pages (written onto free space) live more than 8 times longer.
fn learnt(d: &Daemon) -> (serde_json::Value, serde_json::Value) {
    d.settled();
    let (ok, _, err) = d.ctl(&["recluster"]);
    assert!(ok, "{err}");
    let ctx = d.contexts();
    let hot = ctx
        .iter()
        .filter(|c| c["refines"].is_string())
        .max_by_key(|c| c["bytes_written"].as_u64().unwrap())
        .unwrap_or_else(|| panic!("no context refined by age: {ctx:#?}"))
        .clone();
    let sig = sig_of(&hot, "refines");
    assert_eq!(hot["age_class"], 2, "{hot:#}");
    assert_eq!(sig_of(&hot, "signature"), age_key(sig, 2));
    let bare = ctx
        .iter()
        .find(|c| sig_of(c, "signature") == sig)
        .unwrap_or_else(|| panic!("the bare call path is not a context: {ctx:#?}"))
        .clone();
    let life = |c: &serde_json::Value| c["lifetime_estimate_bytes"].as_f64().unwrap();
    assert!(
        life(&hot) * 8.0 < life(&bare),
        "hot rewrites {} B, table pages {} B",
        life(&hot),
        life(&bare)
    );
    (hot, bare)
}

#[test]
fn in_place_rewrites_learn_and_place_apart_from_new_pages_by_their_age() {
    // O_DIRECT needs a file system that has it (tmpfs before Linux 6.6
    // does not): the temporary directory's, as on a CI runner's disk.
    let tmp = tempfile::tempdir().unwrap();
    let bin = program(tmp.path());
    let d = Daemon::start("[mapper]\nfirst_interval = 64\ncheck_interval = 512\n");
    run(&d, &bin, 1500, &tmp.path().join("learn.db"), &[]);

    // contexts: the call path, and its hot rewrites refined by age.
    let (hot, bare) = learnt(&d);
    let (sig, class) = (sig_of(&hot, "refines"), 2);
    assert_eq!(
        hot["frames"], bare["frames"],
        "shown with the call path's frames"
    );
    assert!(
        bare["frames"].as_array().is_some_and(|f| !f.is_empty()),
        "{bare:#}"
    );
    let (text_ok, text, err) = d.ctl(&["contexts"]);
    assert!(text_ok, "{err}");
    assert!(
        text.contains(&format!("{sig:016x}, rewrites after 16.0 KiB..64.0 KiB")),
        "{text}"
    );

    // The table: both keys, the refined one shorter-lived.
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let table: BTreeMap<u64, (u32, u8)> = read_table(&d.run_dir().join(format!("mapping.{uid}")))
        .into_iter()
        .map(|(k, s, h)| (k, (s, h)))
        .collect();
    let (h_hot, h_bare) = (table[&age_key(sig, class)].1, table[&sig].1);
    assert!(h_hot >= 2 && h_hot < h_bare, "hints {h_hot} {h_bare}");

    // A new process: its hot rewrites get the short hint, its new pages
    // the call path's.
    let (hot_hint, table_hint) = run(&d, &bin, 3, &tmp.path().join("check.db"), &[]);
    assert_eq!(
        (hot_hint, table_hint),
        (u64::from(h_hot), u64::from(h_bare))
    );
    // Without the shim's age table: one hint for both.
    let (hot_hint, table_hint) = run(
        &d,
        &bin,
        3,
        &tmp.path().join("off.db"),
        &[(pcstream_placement::env::PAGE_AGES, "0")],
    );
    assert_eq!(
        (hot_hint, table_hint),
        (u64::from(h_bare), u64::from(h_bare))
    );

    // A restart on the learnt file: 3 rounds, its hot set's first
    // rewrites (8 pages) are older than the process, its table pages go
    // after the file's end (free), its hot set's later rewrites class 2.
    let written = |k: u64| {
        d.contexts()
            .iter()
            .find(|c| sig_of(c, "signature") == k)
            .map_or(0, |c| c["bytes_written"].as_u64().unwrap())
    };
    d.settled();
    let before = (written(sig), written(age_key(sig, class)));
    assert_eq!(written(age_key(sig, AGE_OLDER)), 0);
    run_args(&d, &bin, 3, &tmp.path().join("learn.db"), &[], &["reopen"]);
    d.settled();
    assert_eq!(
        written(age_key(sig, AGE_OLDER)),
        8 * 4096,
        "the hot set's first rewrites"
    );
    assert_eq!(written(sig), before.0 + 3 * 2 * 4096, "only new pages");
    assert_eq!(written(age_key(sig, class)), before.1 + 2 * 8 * 4096);
    let (text_ok, text, err) = d.ctl(&["contexts"]);
    assert!(text_ok, "{err}");
    assert!(
        text.contains(&format!("{sig:016x}, first rewrites of older pages")),
        "{text}"
    );
}

#[test]
fn raw_device_rewrites_learn_and_place_apart_by_their_age() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = program(tmp.path());
    let dev = LoopDev::new(8);
    let sys = sysfs_with_streams(&dev, 8);
    let env = [(pcstream_placement::env::SYSFS, sys.path().to_str().unwrap())];
    // The daemon reads the host's sysfs: the loop device is named raw.
    let d = Daemon::start(&format!(
        "[mapper]\nfirst_interval = 64\ncheck_interval = 512\n\
         [[device]]\npath = \"{}\"\nkind = \"raw\"\nstreams = 8\n",
        dev.arg()
    ));
    run(&d, &bin, 1500, &dev.path, &env);
    let (hot, bare) = learnt(&d);
    let domain = format!("raw:{}:{}", libc::major(dev.rdev), libc::minor(dev.rdev));
    assert_eq!(hot["domain"], domain.as_str(), "{hot:#}");
    let stream = |c: &serde_json::Value| c["stream"].as_u64().unwrap();
    // Learnt classes start at stream 2: stream 1 shares placement id 0
    // with unhinted writes and is left to them.
    assert!(
        1 < stream(&hot) && stream(&hot) < stream(&bare),
        "streams {} {}",
        stream(&hot),
        stream(&bare)
    );

    // `streams` says so under the device's domain.
    let (ok, out, err) = d.ctl(&["streams"]);
    assert!(ok, "{err}");
    let section = &out[out.find(&format!("{domain} domain")).expect(&out)..];
    assert!(
        section.contains("stream 1, the device's default placement, is left to writes"),
        "{out}"
    );

    // The next run: the node's hint after a hot rewrite is the refined
    // key's stream (stream k = hint k on a raw device), after a new page
    // the call path's.
    let (hot_hint, table_hint) = run(&d, &bin, 3, &dev.path, &env);
    assert_eq!((hot_hint, table_hint), (stream(&hot), stream(&bare)));
}
