//! Persistence on a rebuild (paper §6.6, Fig. 13): gcc building a
//! generated C code base (`bench/gen_cbase.py`, 12 units, `make -j2`,
//! `-O2 -g`) under the shim with a real `pcstreamd` learning, recorded
//! alongside so the stream the live mapping gave each write is known. The
//! daemon is restarted between the builds (state saved at SIGTERM,
//! reloaded at start). The first build starts from nothing: the writes of
//! cc1, as, ld and ar before the daemon has learnt their call paths land in
//! stream 0. The second build (`rm -rf obj lib bin` then `make`: the same
//! programs writing the same kinds of files) is placed from its first
//! write: its stream-0 share is well below the first's. docs/performance.md's
//! figure comes from `scripts/gcc-rebuild.sh` (a larger code base).

mod app_common;
mod daemon_common;

use daemon_common::Daemon;
use pcstream_placement::env as var;
use pcstream_placement::wire::event::Kind;
use pcstream_tests::require_tool;
use std::path::Path;

/// (bytes written, bytes written in stream 0) of a recorded build.
fn stream0_share(rec: &app_common::Recorded) -> (u64, u64) {
    let mut tot = (0, 0);
    for (_, e) in &rec.trace.events {
        if let Some(Kind::Write(w)) = &e.kind {
            tot.0 += w.len;
            if w.stream == 0 {
                tot.1 += w.len;
            }
        }
    }
    tot
}

fn build(d: &Daemon, src: &Path, out: &Path) -> app_common::Recorded {
    let run_dir = d.run_dir();
    let tmp = src.join("tmp");
    app_common::record(
        out,
        src,
        &["sh", "-c", "rm -rf obj lib bin && make -s -j2"],
        &[
            (var::RUNTIME_DIR, run_dir.to_str().unwrap()),
            ("TMPDIR", tmp.to_str().unwrap()),
        ],
    )
}

#[test]
fn a_rebuild_after_a_daemon_restart_is_placed_from_the_start() {
    require_tool("make", "make");
    require_tool("gcc", "gcc");
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("cbase");
    pcstream_tests::gen_cbase(&src, &["12", "4", "10"]);
    std::fs::create_dir_all(src.join("tmp")).unwrap();
    let mut d = Daemon::start("");
    let first = stream0_share(&build(&d, &src, &tmp.path().join("rec1")));
    assert_eq!(d.stop().code(), Some(0));
    d.spawn(&[]);
    let second = stream0_share(&build(&d, &src, &tmp.path().join("rec2")));
    let pct = |(t, z): (u64, u64)| 100.0 * z as f64 / t.max(1) as f64;
    eprintln!(
        "stream-0 share: first build {:.1}% of {} B, second {:.1}% of {} B",
        pct(first),
        first.0,
        pct(second),
        second.0
    );
    assert!(
        first.0 > 500_000 && second.0 > 500_000,
        "{first:?} {second:?}"
    );
    assert!(
        pct(first) >= 5.0,
        "the first build starts unlearnt: {first:?}"
    );
    assert!(
        pct(second) <= pct(first) / 2.0,
        "second build {:.1}% in stream 0, first {:.1}%",
        pct(second),
        pct(first)
    );
}
