//! The live system on a database server: PostgreSQL (Debian's) runs under
//! the shim with a real `pcstreamd` learning — `initdb`, the postmaster
//! and every process it forks (backends, WAL writer, checkpointer,
//! background writer), as the `postgres` user when the test is root (the
//! server refuses to run as root), fed by `pgbench -c 8`. The server must work
//! exactly as without the shim (every transaction commits, the tables hold
//! what pgbench wrote, the shutdown is clean), the daemon must have learnt
//! the server's call paths under the server's own uid, and it must tell the
//! WAL (rewritten page by page as commits fill it: short-lived) from the
//! table and index pages written back (`mdwrite`: long-lived) — the WAL's
//! lifetime far shorter, its stream never above. With the packaged unit's
//! event transport (the kernel's 10-datagram queue on `events.sock`, the
//! shims connecting to `events.seq`), no event is lost: the daemon
//! receives every event the server's shims recorded alongside.

mod daemon_common;

use daemon_common::Daemon;
use pcstream_placement::env as var;
use pcstream_tests::require_tool;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The newest installed PostgreSQL's bin directory (Debian:
/// /usr/lib/postgresql/<major>/bin), installing `postgresql` as root.
fn pg_bin() -> PathBuf {
    let find = || {
        let mut v: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|b| b.join("initdb").is_file() && b.join("pgbench").is_file())
            .collect();
        v.sort();
        v.pop()
    };
    if let Some(b) = find() {
        return b;
    }
    require_tool("pg_ctlcluster", "postgresql");
    find().expect("postgresql installed but no /usr/lib/postgresql/*/bin/initdb")
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// `bin/prog args…` as the server's user (postgres when root), with `env`.
fn pg(bin: &Path, prog: &str, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut c = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", "env"]);
        for (k, v) in env {
            c.arg(format!("{k}={}", v.display()));
        }
        c.arg(bin.join(prog));
        c
    } else {
        let mut c = Command::new(bin.join(prog));
        c.envs(env.iter().map(|(k, v)| (k, v)));
        c
    };
    c.args(args).env("LC_ALL", "C").output().unwrap()
}

fn ok(what: &str, o: &Output) -> String {
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{what}: {}\n{out}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

fn open_up(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn postgres_under_the_shim_works_and_its_wal_is_learnt_apart_from_its_tables() {
    let bin = pg_bin();
    if is_root() {
        require_tool("runuser", "util-linux");
    }
    // The packaged unit's event transport: events.sock keeps the kernel's
    // 10 datagrams; the shims connect to events.seq.
    let d = Daemon::start(
        "event_queue_datagrams = 0\n[mapper]\nfirst_interval = 64\ncheck_interval = 1024\n",
    );
    // The server's user must reach the daemon's sockets and table, the
    // shim, and its own directory.
    open_up(d.dir.path(), 0o755);
    open_up(&d.run_dir(), 0o755);
    let tmp = tempfile::tempdir().unwrap();
    open_up(tmp.path(), 0o777);
    let shim = tmp.path().join("libpcstream.so");
    std::fs::copy(pcstream_tests::shim(), &shim).unwrap();
    open_up(&shim, 0o755);
    let data = tmp.path().join("data");
    let sock_dir = tmp.path();
    let run_dir = d.run_dir();
    // Every server process records alongside (a shared directory, as
    // `pcstreamctl record` makes it): what the shims produced, to compare
    // with what the daemon received.
    let rec = tmp.path().join("rec");
    std::fs::create_dir_all(&rec).unwrap();
    open_up(&rec, 0o1777);
    // The shim's defaults (batches flushed every 100 ms), as a user runs it.
    let shim_env: [(&str, &Path); 3] = [
        ("LD_PRELOAD", &shim),
        (var::RUNTIME_DIR, &run_dir),
        (var::RECORD_DIR, &rec),
    ];

    ok(
        "initdb",
        &pg(
            &bin,
            "initdb",
            &["-D", data.to_str().unwrap(), "-A", "trust"],
            &shim_env,
        ),
    );
    let opts = format!(
        "-k {} -c listen_addresses='' -c max_wal_size=64MB",
        sock_dir.display()
    );
    let log = tmp.path().join("server.log");
    let start = pg(
        &bin,
        "pg_ctl",
        &[
            "-D",
            data.to_str().unwrap(),
            "-o",
            &opts,
            "-l",
            log.to_str().unwrap(),
            "-w",
            "start",
        ],
        &shim_env,
    );
    let server_log = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        start.status.success(),
        "pg_ctl start: {start:?}\n{}",
        server_log()
    );
    let host = sock_dir.to_str().unwrap();
    let bench = |args: &[&str]| {
        let mut a = vec!["-h", host];
        a.extend_from_slice(args);
        a.push("postgres");
        pg(&bin, "pgbench", &a, &[])
    };
    let init = bench(&["-i", "-s", "2", "-q"]);
    let run = bench(&["-c", "8", "-j", "2", "-t", "200", "-n"]);
    let count = pg(
        &bin,
        "psql",
        &["-h", host, "-At", "-c", "select count(*), sum(abalance) = (select sum(delta) from pgbench_history) from pgbench_accounts", "postgres"],
        &[],
    );
    let stop = pg(
        &bin,
        "pg_ctl",
        &["-D", data.to_str().unwrap(), "-m", "fast", "-w", "stop"],
        &shim_env,
    );
    ok("pgbench -i", &init);
    let out = ok("pgbench", &run);
    assert!(
        out.contains("number of transactions actually processed: 1600/1600")
            && out.contains("number of failed transactions: 0"),
        "every transaction commits under the shim:\n{out}"
    );
    assert_eq!(
        ok("psql", &count).trim(),
        "200000|t",
        "the tables hold what pgbench wrote"
    );
    assert!(
        stop.status.success(),
        "pg_ctl stop: {stop:?}\n{}",
        server_log()
    );
    let slog = server_log();
    assert!(
        slog.contains("database system is shut down") && !slog.contains("PANIC"),
        "{slog}"
    );

    // What the daemon learnt, under the server's uid.
    let uid = if is_root() {
        let o = ok(
            "id",
            &Command::new("id")
                .args(["-u", "postgres"])
                .output()
                .unwrap(),
        );
        o.trim().parse::<u64>().unwrap()
    } else {
        // SAFETY: geteuid has no preconditions.
        u64::from(unsafe { libc::geteuid() })
    };
    // Everything the server's processes flushed at exit is in; the
    // mapping then is the engine's word on all of it (automatic
    // re-clustering runs on the engine's page-count rule, which a short run
    // may not reach again after its last events).
    let mut last = u64::MAX;
    for _ in 0..50 {
        let n = d.status()["events"].as_u64().unwrap();
        if n == last {
            break;
        }
        last = n;
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let (reclustered, _, err) = d.ctl(&["recluster"]);
    assert!(reclustered, "{err}");
    let st = d.status();
    eprintln!("status: {st}");
    // ~40 processes flushing small batches, a shim that never waits, and
    // a daemon with the kernel's 10-datagram queue: through datagrams, a
    // CI run at load 5 lost 775 of 14,878 events (5%). Through connections
    // (events.seq), nothing: the daemon has every event the shims recorded.
    let (events, dropped) = (
        st["events"].as_u64().unwrap(),
        st["events_dropped_by_clients"].as_u64().unwrap(),
    );
    let mut produced = 0u64;
    for e in std::fs::read_dir(&rec).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "pcstrace") {
            let r = pcstream_placement::trace::TraceReader::open(&p).unwrap();
            for rec in r {
                if let Some(pcstream_placement::wire::trace_record::Record::Batch(b)) =
                    rec.unwrap().record
                {
                    produced += b.events.len() as u64;
                }
            }
        }
    }
    eprintln!("{produced} events produced, {events} received, {dropped} dropped");
    assert!(events > 10_000, "{events} events");
    assert_eq!(dropped, 0, "{dropped} of {events} events dropped");
    assert_eq!(events, produced, "the daemon received every event produced");
    let ctx = d.contexts();
    let server: Vec<_> = ctx
        .iter()
        .filter(|c| c["uid"].as_u64() == Some(uid))
        .collect();
    assert!(
        server.len() >= 5,
        "the server's call paths under uid {uid}: {ctx:?}"
    );
    let calls = |c: &serde_json::Value, names: &[&str]| {
        c["frames"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| names.iter().any(|n| f.as_str().unwrap().starts_with(n)))
    };
    let heaviest = |names: &[&str], not: &[&str]| {
        server
            .iter()
            .filter(|c| calls(c, names) && !calls(c, not))
            .max_by_key(|c| c["bytes_written"].as_u64().unwrap())
            .unwrap_or_else(|| panic!("no context through {names:?}: {server:?}"))
    };
    // WAL records as commits flush them; not the zero-filling of a new
    // segment (`XLogFileInit`, reached from the same functions), whose
    // pages live until the segment is recycled.
    let wal = heaviest(
        &["XLogFlush", "XLogWrite", "XLogBackgroundFlush"],
        &["XLogFileInit"],
    );
    // Table pages written back (checkpointer, background writer, evicting
    // backends). Not `mdextend`: a new page it writes is soon overwritten
    // by `mdwrite`, so its pages are short-lived too.
    let table = heaviest(&["mdwrite"], &[]);
    let life = |c: &serde_json::Value| c["lifetime_estimate_bytes"].as_f64().unwrap_or(f64::MAX);
    let stream = |c: &serde_json::Value| c["stream"].as_u64().unwrap();
    eprintln!(
        "WAL {:?}: {} B, stream {}; tables {:?}: {} B, stream {}",
        wal["frames"],
        life(wal),
        stream(wal),
        table["frames"],
        life(table),
        stream(table)
    );
    assert!(
        life(wal) * 100.0 < life(table),
        "WAL lifetime not far below the tables'"
    );
    // Never above the tables' stream. Usually below (1 vs 3 in 9 runs of
    // 10); on a loaded machine the engine's 4 data streams over ~160 call
    // paths once put both in stream 2 (as daemon_push allows RocksDB's).
    assert!(
        stream(wal) != 0 && stream(wal) <= stream(table),
        "WAL stream {} tables stream {}",
        stream(wal),
        stream(table)
    );
}
