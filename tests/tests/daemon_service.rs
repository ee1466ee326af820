//! pcstreamd as a service: the systemd unit passes `systemd-analyze verify`
//! and rates ≤ 2.0 in `systemd-analyze security --offline=true`; SIGHUP
//! re-reads the configuration (a bad file is refused and the daemon keeps
//! running); learning is per uid: events a shim sends as `nobody` (as root:
//! `runuser`) land in nobody's learner and table, never in root's, and with
//! `share_between_users = true` in one shared table; no thread of the
//! daemon preempts an application (all under `SCHED_BATCH`), and learning
//! yields to them (its thread at nice 10); `scripts/install.sh` stages the
//! tree the unit runs from, under any prefix.

mod daemon_common;

use daemon_common::{
    page_write, pcstreamd_bin, read_table, send_events, two_lifetimes, unlink_page, Daemon,
};
use pcstream_placement::env as var;
use pcstream_tests::require_tool;
use std::process::Command;

#[test]
fn systemd_unit_verifies_and_is_rated_safe() {
    require_tool("systemd-analyze", "systemd");
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../packaging/pcstreamd.service"
    ))
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pcstreamd.service");
    // verify checks ExecStart is executable: point it at the built binary.
    let bin = daemon_common::pcstreamd_bin();
    std::fs::write(
        &path,
        unit.replace("/usr/bin/pcstreamd", bin.to_str().unwrap()),
    )
    .unwrap();
    let v = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .unwrap();
    let msg = format!(
        "{}{}",
        String::from_utf8_lossy(&v.stdout),
        String::from_utf8_lossy(&v.stderr)
    );
    assert!(
        v.status.success() && msg.trim().is_empty(),
        "systemd-analyze verify:\n{msg}"
    );
    let s = Command::new("systemd-analyze")
        .args(["security", "--offline=true"])
        .arg(&path)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&s.stdout);
    let line = out
        .lines()
        .find(|l| l.contains("Overall exposure level"))
        .unwrap_or_else(|| panic!("no rating:\n{out}"));
    let score: f64 = line
        .split(':')
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("unparsable: {line}"));
    assert!(score <= 2.0, "{line}");
}

fn teach(d: &Daemon) -> usize {
    let evs = two_lifetimes(3000);
    send_events(&d.run_dir().join("events.sock"), &evs, 100);
    evs.len()
}

#[test]
fn sighup_reloads_config_and_refuses_a_bad_one() {
    let mut d = Daemon::start("streams = 5\n");
    let n = teach(&d);
    d.wait_events(n as u64);
    assert_eq!(d.status()["streams"], 5);
    std::fs::write(&d.config, "streams = 3\n").unwrap();
    let pid = d.child.as_ref().unwrap().id() as i32;
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(pid, libc::SIGHUP) };
    d.wait_for("SIGHUP not applied", |d| d.status()["streams"] == 3);
    // The learnt signatures survive the rebuild.
    assert_eq!(d.status()["signatures"], 2);
    std::fs::write(&d.config, "streams = 3\nbogus_key = 1\n").unwrap();
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGHUP) };
    d.wait_for("bad config not reported", |d| d.log().contains("bogus_key"));
    assert_eq!(d.status()["streams"], 3);
    assert!(d.stop().success());
}

fn uid_of(name: &str) -> u32 {
    let out = Command::new("id").args(["-u", name]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// Runs `dd` under the shim as `nobody`, writing a 64 KiB file in /tmp.
fn shim_dd_as_nobody(d: &Daemon) -> std::path::PathBuf {
    let dir = tempfile::tempdir_in("/tmp").unwrap().keep();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let f = dir.join("out");
    let st = Command::new("runuser")
        .args(["-u", "nobody", "--", "env"])
        .arg(format!("LD_PRELOAD={}", pcstream_tests::shim().display()))
        .arg(format!(
            "{}={}",
            var::SOCKET,
            d.run_dir().join("events.sock").display()
        ))
        .args(["dd", "if=/dev/zero", "bs=4096", "count=16"])
        .arg(format!("of={}", f.display()))
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    dir
}

#[test]
fn learning_is_per_uid_unless_shared() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!("learning_is_per_uid_unless_shared needs root (runuser to nobody)");
    }
    require_tool("runuser", "util-linux");
    let nobody = uid_of("nobody");
    for share in [false, true] {
        let d = Daemon::start(&format!("share_between_users = {share}\n"));
        // The shim (as nobody) needs to reach the socket through the temp dir.
        std::fs::set_permissions(
            d.dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let n = teach(&d);
        d.wait_events(n as u64);
        let root_before = read_table(&d.run_dir().join(if share {
            "mapping.all".into()
        } else {
            "mapping.0".to_string()
        }));
        let dir = shim_dd_as_nobody(&d);
        let t = std::time::Instant::now();
        let rows = loop {
            let (ok, out, err) = d.ctl(&["contexts", "--json", "--limit", "0", "--raw"]);
            assert!(ok, "{err}");
            let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
            if rows.len() > 2 || t.elapsed().as_secs() > 30 {
                break rows;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let _ = std::fs::remove_dir_all(dir);
        let dd_rows: Vec<_> = rows
            .iter()
            .filter(|r| {
                r["signature"] != format!("{:016x}", 5) && r["signature"] != format!("{:016x}", 6)
            })
            .collect();
        assert!(
            !dd_rows.is_empty(),
            "dd's writes never reached the daemon: {rows:?}\n{}",
            d.log()
        );
        let st = d.status();
        if share {
            assert_eq!(st["learners"], 1);
            assert!(dd_rows.iter().all(|r| r["uid"] == u32::MAX), "{dd_rows:?}");
        } else {
            assert_eq!(st["learners"], 2, "{st}");
            assert!(dd_rows.iter().all(|r| r["uid"] == nobody), "{dd_rows:?}");
            assert!(rows.iter().filter(|r| r["uid"] == 0).count() == 2);
            // Root's table is untouched by nobody's events.
            assert_eq!(read_table(&d.run_dir().join("mapping.0")), root_before);
        }
    }
}

#[test]
fn watch_on_a_terminal_draws_the_live_view_and_quits_on_q_and_ctrl_c() {
    require_tool("script", "bsdutils");
    let d = Daemon::start("");
    let n = teach(&d);
    d.wait_events(n as u64);
    // `script` gives watch a pty; the key comes through it after 2 s.
    for key in ["q", "\\003"] {
        let cmd = format!(
            "stty cols 140 rows 40; {} watch --interval-ms 200 --runtime-dir {}",
            pcstream_tests::pcstreamctl().display(),
            d.run_dir().display()
        );
        let t = std::time::Instant::now();
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "(sleep 2; printf '{key}') | timeout 30 script -qfec \"$0\" /dev/null",
            ))
            .arg(&cmd)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "watch exited {}:\n{text}", out.status);
        assert!(
            t.elapsed() < std::time::Duration::from_secs(20),
            "{key} did not quit"
        );
        let enter = text.find("\x1b[?1049h").expect("alternate screen entered");
        let leave = text.rfind("\x1b[?1049l").expect("alternate screen left");
        assert!(enter < leave);
        for w in ["streams", "top", "contexts", "updates", "events/s", "CALL"] {
            assert!(text.contains(w), "{w} not drawn:\n{text}");
        }
    }
}

#[test]
fn watch_prints_plain_lines_when_not_a_terminal() {
    let d = Daemon::start("");
    let n = teach(&d);
    d.wait_events(n as u64);
    let (ok, out, err) = d.ctl(&["watch", "--count", "2", "--interval-ms", "100"]);
    assert!(ok, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("mapping generation") && l.contains("2 signatures mapped")),
        "{out}"
    );
    assert_eq!(
        out.lines().filter(|l| l.starts_with("events ")).count(),
        2,
        "{out}"
    );
    let (ok, out, err) = d.ctl(&["watch", "--count", "1", "--json"]);
    assert!(ok, "{err}");
    for l in out.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert!(v["event"] == "mapping" || v["event"] == "status", "{l}");
    }
}

#[test]
fn pin_and_recluster_republish_and_check_their_arguments() {
    let d = Daemon::start("");
    let n = teach(&d);
    d.wait_events(n as u64);
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let table = d.run_dir().join(format!("mapping.{me}"));
    let before = read_table(&table);
    let s6 = before
        .iter()
        .find(|e| e.0 == 6)
        .expect("signature 6 mapped")
        .1;
    let other = if s6 == 4 { 3 } else { 4 };
    let (ok, out, err) = d.ctl(&["pin", "6", &other.to_string(), "--uid", &me.to_string()]);
    assert!(ok, "{err}");
    assert!(out.contains("pinned 1"), "{out}");
    let after = read_table(&table);
    assert_eq!(after.iter().find(|e| e.0 == 6).unwrap().1, other);
    let (ok, _, err) = d.ctl(&["pin", "6", "9"]);
    assert!(!ok && err.contains("out of range"), "{err}");
    let (ok, _, err) = d.ctl(&["pin", "xyz", "1"]);
    assert!(!ok && err.contains("not hexadecimal"), "{err}");
    let (ok, out, err) = d.ctl(&["recluster"]);
    assert!(ok && out.contains("mapping generation"), "{err}");
    // The pin outlives a re-clustering.
    assert_eq!(
        read_table(&table).iter().find(|e| e.0 == 6).unwrap().1,
        other
    );
    assert!(d.status()["rejected_requests"].as_u64().unwrap() >= 1);
}

/// `(comm, nice, policy)` of every thread of `pid` (`/proc/PID/task/*/stat`).
fn threads(pid: u32) -> Vec<(String, i64, u64)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let stat = std::fs::read_to_string(t.unwrap().path().join("stat")).unwrap();
        let (head, tail) = stat.rsplit_once(')').unwrap();
        let comm = head.split_once('(').unwrap().1.to_string();
        // Fields from the third (state) on: nice is the 19th, policy the 41st.
        let f: Vec<&str> = tail.split_whitespace().collect();
        out.push((comm, f[19 - 3].parse().unwrap(), f[41 - 3].parse().unwrap()));
    }
    out
}

#[test]
fn the_daemon_never_preempts_applications_and_learning_yields_to_them() {
    let mut d = Daemon::start("");
    // Twelve signatures of twelve lifetimes (1 to 2048 rounds): more
    // distinct values than streams, so the mapper runs linfa's k-means.
    let mut evs = Vec::new();
    for r in 0..4096u64 {
        for s in 0..12u64 {
            let ino = 1_000_000 * (s + 1);
            evs.push(page_write(ino + r, 0, 20 + s));
            if r >= 1 << s {
                evs.push(unlink_page(ino + r - (1 << s)));
            }
        }
    }
    send_events(&d.run_dir().join("events.sock"), &evs, 100);
    d.wait_events(evs.len() as u64);
    d.wait_for("no mapping published", |d| {
        d.status()["mapping_generation"].as_u64().unwrap_or(0) > 0
    });
    assert_eq!(d.status()["signatures"], 12);
    let pid = d.child.as_ref().unwrap().id();
    let t = threads(pid);
    let find = |name: &str| {
        t.iter()
            .find(|(c, _, _)| c == name)
            .unwrap_or_else(|| panic!("no thread {name} in {t:?}"))
    };
    const SCHED_BATCH: u64 = 3;
    // The ingester and the one-thread pool it learns in (linfa's k-means
    // runs inline there, waking no thread per iteration): after a
    // re-clustering, no other learning thread (a rayon worker takes its
    // creator's name).
    for l in ["pcstreamd-inges", "pcstreamd-learn"] {
        let l = find(l);
        assert_eq!((l.1, l.2), (10, SCHED_BATCH), "{t:?}");
    }
    let learners = t
        .iter()
        .filter(|(c, _, _)| c.starts_with("pcstreamd-inges") || c == "pcstreamd-learn");
    assert_eq!(learners.count(), 2, "{t:?}");
    // The receivers and the runtime's thread (the process's first, named
    // for the program) keep a fair share and never preempt.
    for r in ["pcstreamd-recv", "pcstreamd-conn", "pcstreamd"] {
        let r = find(r);
        assert_eq!((r.1, r.2), (0, SCHED_BATCH), "{t:?}");
    }
    assert!(d.stop().success());
}

/// `scripts/install.sh` stages the tree the unit expects under another
/// prefix: binaries and shim with their modes, the unit's `ExecStart=`
/// moved to the prefix, a configuration an operator edited kept on
/// reinstall; the installed `pcstreamctl run` finds the installed shim
/// (next to its prefix, not this build's); `scripts/uninstall.sh` removes
/// it all but the configuration, and `--purge` that too. (tests/qemu boots
/// a guest under systemd from the same script's `/usr` tree.)
#[test]
fn install_script_stages_a_tree_the_unit_runs_from() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let from = pcstreamd_bin().parent().unwrap().to_path_buf();
    pcstream_tests::shim();
    pcstream_tests::pcstreamctl();
    let dest = tempfile::tempdir().unwrap();
    let d = dest.path();
    let script = |name: &str, extra: &[&str]| {
        let o = Command::new("bash")
            .arg(root.join("scripts").join(name))
            .args(["--prefix", "/opt/pcs", "--destdir"])
            .arg(d)
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{name}: {o:?}");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let from_s = from.to_str().unwrap();
    script("install.sh", &["--no-build", "--from", from_s]);
    let mode = |p: &str| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(d.join(p)).unwrap().permissions().mode() & 0o777
    };
    assert_eq!(mode("opt/pcs/bin/pcstreamd"), 0o755);
    assert_eq!(mode("opt/pcs/bin/pcstreamctl"), 0o755);
    assert_eq!(mode("opt/pcs/lib/pcstream/libpcstream.so"), 0o644);
    assert!(d.join("opt/pcs/include/pcstream.h").is_file());
    assert!(d.join("opt/pcs/share/doc/pcstream/daemon.md").is_file());
    let unit = std::fs::read_to_string(d.join("etc/systemd/system/pcstreamd.service")).unwrap();
    assert!(
        unit.contains("\nExecStart=/opt/pcs/bin/pcstreamd --foreground"),
        "{unit}"
    );
    assert!(!unit.contains("/usr/bin/pcstreamd"), "{unit}");
    // An edited configuration survives a reinstall.
    let cfg = d.join("etc/pcstream/pcstreamd.toml");
    std::fs::write(&cfg, "streams = 9\n").unwrap();
    let out = script("install.sh", &["--no-build", "--from", from_s]);
    assert!(out.contains("kept"), "{out}");
    assert_eq!(std::fs::read_to_string(&cfg).unwrap(), "streams = 9\n");
    // The installed pcstreamctl preloads the installed shim.
    let o = Command::new(d.join("opt/pcs/bin/pcstreamctl"))
        .args(["run", "--", "sh", "-c", "echo \"$LD_PRELOAD\""])
        .env_remove("PCSTREAM_SHIM")
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let preload = String::from_utf8_lossy(&o.stdout);
    let want = d
        .join("opt/pcs/lib/pcstream/libpcstream.so")
        .canonicalize()
        .unwrap();
    assert_eq!(preload.trim(), want.to_str().unwrap());
    script("uninstall.sh", &[]);
    for p in [
        "opt/pcs/bin/pcstreamd",
        "opt/pcs/lib/pcstream",
        "etc/systemd/system/pcstreamd.service",
    ] {
        assert!(!d.join(p).exists(), "{p} left behind");
    }
    assert!(cfg.is_file(), "the configuration is kept");
    script("uninstall.sh", &["--purge"]);
    assert!(!cfg.exists());
}

/// A configuration or saved state that is not a small regular file (a
/// FIFO, `/dev/zero`) is refused at once: a FIFO as `--config` used to
/// block pcstreamd's start forever, `/dev/zero` to fill its memory, and a
/// FIFO as `state.json` to hang it (now moved aside, a fresh start).
#[test]
fn a_config_or_state_that_is_not_a_regular_file_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    pcstream_tests::mkfifo(&fifo);
    for cfg in [fifo.to_str().unwrap(), "/dev/zero"] {
        let mut c = Command::new(pcstreamd_bin());
        c.args(["--config", cfg, "--runtime-dir"])
            .arg(dir.path().join("run"))
            .arg("--state-dir")
            .arg(dir.path().join("state"));
        let o = pcstream_tests::output_within(c, 20);
        assert_eq!(o.status.code(), Some(2), "{o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim(), format!("pcstreamd: {cfg}: not a regular file"));
    }
    // state.json a FIFO: moved aside, and the daemon starts.
    let mut d = Daemon::unstarted("");
    let state = d.state_dir();
    std::fs::create_dir_all(&state).unwrap();
    pcstream_tests::mkfifo(&state.join("state.json"));
    d.spawn(&[]);
    assert!(d.status()["uptime_s"].is_u64());
    assert!(d.log().contains("moved aside"), "{}", d.log());
    assert!(std::fs::read_dir(&state).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .starts_with("state.json.bad-")));
    assert!(d.stop().success());
}
