//! Learning domains, end to end with real processes: one program under the
//! shim writes through three call paths (short-lived temp files, a
//! medium-lived and a long-lived rewritten file) into a directory on tmpfs
//! and into one on the root file system, which a `[[device]]` section of
//! the real `pcstreamd`'s configuration declares F2FS (this host's kernel
//! cannot mount F2FS). The daemon learns the two apart:
//! - the default `hints` domain (tmpfs) keeps its four classes, published
//!   under the plain signatures;
//! - the `f2fs` domain clusters into two classes published as MEDIUM /
//!   EXTREME (F2FS's warm / cold; its hot log is left to F2FS's own rules)
//!   under salted keys (`delivery::table_key`), with the device's entry
//!   beside them;
//! - a second run of the program (a new process, mapping the learnt table)
//!   finds its files on the "F2FS" device tagged MEDIUM (short path) and
//!   EXTREME (long path) by the shim, read back with `F_GET_RW_HINT` by the
//!   program itself;
//! - `status` lists both devices with their path and domain, `streams`
//!   shows each domain's streams and where they arrive.

mod daemon_common;

use daemon_common::{read_table, under_shim, Daemon};
use pcstream_placement::delivery::{self, device_key, table_key, Domain};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Runs the program under the shim; returns per directory (short, medium,
/// long) hints of its last round.
fn run(d: &Daemon, bin: &Path, rounds: u32, dirs: &[&Path]) -> BTreeMap<String, [u64; 3]> {
    let mut c = under_shim(d, &[bin.to_str().unwrap()]);
    c.arg(rounds.to_string());
    for dir in dirs {
        c.arg(dir);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "daemon_domains failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(w.len(), 7, "{l}");
            let h = |i: usize| w[i].parse::<u64>().unwrap();
            (w[0].to_string(), [h(2), h(4), h(6)])
        })
        .collect()
}

#[test]
fn f2fs_files_learn_two_classes_apart_from_the_hints_domain() {
    let tmp = tempfile::tempdir().unwrap();
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    let root_dev = std::fs::metadata(tmp.path()).unwrap().dev();
    let shm_dev = std::fs::metadata(shm.path()).unwrap().dev();
    assert_ne!(root_dev, shm_dev, "the two directories share a device");
    let bin = tmp.path().join("daemon_domains");
    pcstream_tests::compile_c(
        &pcstream_tests::c_dir().join("daemon_domains.c"),
        &bin,
        &["-O1", "-fno-omit-frame-pointer"],
    );
    let d = Daemon::start(&format!(
        "[mapper]\nfirst_interval = 64\ncheck_interval = 512\n\n\
         [[device]]\ndev = \"{}\"\nkind = \"f2fs\"\n",
        delivery::dev_name(root_dev)
    ));
    let (f2_learn, tm_learn) = (tmp.path().join("learn"), shm.path().join("learn"));
    for p in [&f2_learn, &tm_learn] {
        std::fs::create_dir(p).unwrap();
    }
    run(&d, &bin, 1500, &[&f2_learn, &tm_learn]);
    let (ok, _, err) = d.ctl(&["recluster"]);
    assert!(ok, "{err}");

    // Contexts: the three paths in both domains, told apart by domain.
    let ctx = d.contexts();
    let mut sigs: BTreeMap<(String, u64), u32> = BTreeMap::new();
    for c in &ctx {
        sigs.insert(
            (
                c["domain"].as_str().unwrap_or("hints").to_string(),
                u64::from_str_radix(c["signature"].as_str().unwrap(), 16).unwrap(),
            ),
            c["stream"].as_u64().unwrap() as u32,
        );
    }
    let f2fs_sigs: Vec<u64> = sigs.keys().filter(|k| k.0 == "f2fs").map(|k| k.1).collect();
    let hints_sigs: Vec<u64> = sigs
        .keys()
        .filter(|k| k.0 == "hints")
        .map(|k| k.1)
        .collect();
    assert_eq!(f2fs_sigs, hints_sigs, "same call paths in both domains");
    assert!(f2fs_sigs.len() >= 3, "{ctx:?}");

    // The table: f2fs entries under salted keys, MEDIUM/EXTREME only;
    // hints entries under the signatures; the device entry.
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let table: BTreeMap<u64, (u32, u8)> = read_table(&d.run_dir().join(format!("mapping.{uid}")))
        .into_iter()
        .map(|(k, s, h)| (k, (s, h)))
        .collect();
    assert_eq!(
        table.get(&device_key(root_dev)),
        Some(&(delivery::DEVICE_CLASS_F2FS, 0))
    );
    let mut f2_hints = Vec::new();
    for &s in &f2fs_sigs {
        if let Some(&(stream, hint)) = table.get(&table_key(s, Domain::F2fs)) {
            assert!([3, 5].contains(&hint), "f2fs hint {hint} (stream {stream})");
            f2_hints.push(hint);
        }
    }
    f2_hints.sort_unstable();
    f2_hints.dedup();
    assert_eq!(f2_hints, [3, 5], "F2FS's warm and cold");
    assert!(hints_sigs.iter().all(|s| table.contains_key(s)));

    // A new process finds the learnt hints on its files: the F2FS device's
    // short path MEDIUM, long path EXTREME; on tmpfs the hints domain's own.
    let (f2_check, tm_check) = (tmp.path().join("check"), shm.path().join("check"));
    for p in [&f2_check, &tm_check] {
        std::fs::create_dir(p).unwrap();
    }
    let h = run(&d, &bin, 2, &[&f2_check, &tm_check]);
    let f2 = h[f2_check.to_str().unwrap()];
    let tm = h[tm_check.to_str().unwrap()];
    assert_eq!(
        (f2[0], f2[2]),
        (3, 5),
        "short/long on the f2fs device: {h:?}"
    );
    assert!(f2[1] == 3 || f2[1] == 5, "medium on the f2fs device: {h:?}");
    assert_eq!(tm[0], 2, "short on tmpfs: {h:?}");
    assert!(tm[2] > tm[0] && tm[2] <= 5, "long on tmpfs: {h:?}");

    // status: both devices, their path and domain.
    let st = d.status();
    let devs = st["devices"].as_array().unwrap();
    let find = |dev: u64| {
        devs.iter()
            .find(|x| x["dev"] == delivery::dev_name(dev))
            .unwrap_or_else(|| panic!("device {} not in {devs:?}", delivery::dev_name(dev)))
    };
    let r = find(root_dev);
    assert_eq!(
        (r["path"].as_str(), r["domain"].as_str()),
        (Some("f2fs"), Some("f2fs"))
    );
    assert_eq!(r["configured"], true);
    let s = find(shm_dev);
    assert_eq!(
        (s["path"].as_str(), s["domain"].as_str()),
        (Some("none"), Some("hints"))
    );

    // streams: the hints domain's five ids, the f2fs domain's 0/2/4.
    let (ok, out, err) = d.ctl(&["streams", "--json"]);
    assert!(ok, "{err}");
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = rows["streams"].as_array().unwrap();
    let of = |dom: &str| -> Vec<(u64, u64)> {
        rows.iter()
            .filter(|r| r["domain"].as_str().unwrap_or("hints") == dom)
            .map(|r| (r["stream"].as_u64().unwrap(), r["hint"].as_u64().unwrap()))
            .collect()
    };
    assert_eq!(of("f2fs"), [(0, 0), (2, 3), (4, 5)]);
    assert_eq!(of("hints"), [(0, 0), (1, 2), (2, 3), (3, 4), (4, 5)]);
    let f2row = rows.iter().find(|r| r["domain"] == "f2fs").unwrap();
    assert!(
        f2row["devices"]
            .to_string()
            .contains(&delivery::dev_name(root_dev)),
        "{f2row}"
    );
}
