//! A raw block device with write streams, end to end with a real daemon
//! (root: a loop device; the shim told it has 8 write streams): a real
//! `pcstreamd` learns `tests/c/shim_rawdev.c`'s three call paths from their
//! `O_DIRECT` writes to the device (`FileId { dev: st_rdev, ino: 0 }`) —
//! scratch blocks deallocated right after their write, a journal ring
//! overwritten every 8 rounds, table blocks every 31 — and the next run of
//! the program, under the shim with the daemon's published table, finds
//! each path's stream as the device node's hint before each of its writes.

mod daemon_common;
mod rawdev_common;

use daemon_common::{under_shim, Daemon};
use pcstream_placement::env as var;
use rawdev_common::*;
use std::collections::BTreeMap;

fn frames_contain(c: &serde_json::Value, what: &str) -> bool {
    c["frames"]
        .as_array()
        .is_some_and(|fs| fs.iter().any(|f| f.as_str().unwrap_or("").contains(what)))
}

#[test]
fn the_daemon_learns_raw_device_paths_and_the_shim_places_them() {
    let src = pcstream_tests::c_dir().join("shim_rawdev.c");
    let bin = pcstream_tests::target_profile_dir().join("shim-c/daemon-rawdev");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    pcstream_tests::compile_c(
        &src,
        &bin,
        &["-O2", "-fPIE", "-pie", "-fno-omit-frame-pointer"],
    );
    let dev = LoopDev::new(8);
    let sys = sysfs_with_streams(&dev, 8);
    let d = Daemon::start("[mapper]\nfirst_interval = 64\ncheck_interval = 256\n");
    let run = |rounds: &str| {
        let o = under_shim(&d, &[bin.to_str().unwrap(), dev.arg(), rounds])
            .with_env(var::SYSFS, sys.path().to_str().unwrap())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    // Learning: 400 rounds, 1200 writes and 400 deallocations.
    run("400");
    d.wait_events(1600);
    let (ok, _, err) = d.ctl(&["recluster"]);
    assert!(ok, "{err}");
    let ctx = d.contexts();
    let find = |what: &str| {
        ctx.iter()
            .filter(|c| frames_contain(c, what))
            .max_by_key(|c| c["bytes_written"].as_u64().unwrap_or(0))
            .unwrap_or_else(|| panic!("no context with {what}:\n{ctx:#?}"))
            .clone()
    };
    let mut stream = BTreeMap::new();
    for (path, func) in [
        ("scratch", "scratch_spill"),
        ("journal", "journal_append"),
        ("table", "table_store"),
    ] {
        let c = find(func);
        eprintln!(
            "{path}: lifetime {} stream {}",
            c["lifetime_estimate_bytes"], c["stream"]
        );
        stream.insert(path, c["stream"].as_u64().unwrap());
    }
    assert!(
        0 < stream["scratch"]
            && stream["scratch"] < stream["journal"]
            && stream["journal"] < stream["table"],
        "three streams in lifetime order: {stream:?}\n{ctx:#?}"
    );
    // Placing: the next run's writes carry their path's stream as the
    // node's hint (stream k = hint k on a raw device).
    let out = run("8");
    let mut hints: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for l in out.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if let [path, "hint", h] = f[..] {
            let path = ["scratch", "journal", "table"]
                .into_iter()
                .find(|p| *p == path)
                .unwrap();
            hints.entry(path).or_default().push(h.parse().unwrap());
        }
    }
    for (path, s) in &stream {
        assert_eq!(hints[path], vec![*s; 8], "{path}: {out}");
    }
}
