//! The shim tells call paths apart and names them the same way every time:
//! a PIE program writing through 4 distinct call paths into one file yields
//! 4 distinct signatures, identical on a second run (ASLR on), compiled with
//! and without frame pointers, in every unwind mode. Signatures recompute
//! from their frames with the placement crate's `SignatureBuilder`, and
//! frame offsets are module-relative addresses that name the right functions.

mod shim_common;

use pcstream_placement::env as var;
use pcstream_placement::signature::signature_of;
use pcstream_placement::wire;
use shim_common::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Runs `shim_paths OUT` recording; returns the per-path signatures (in
/// path order) and the trace.
fn run_paths(bin: &Path, unwind: &str) -> (Vec<u64>, ProcessTrace) {
    let work = tempfile::tempdir().unwrap();
    let rec = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    Run::record(rec.path())
        .env(var::UNWIND, unwind)
        .stdout(bin, &[out.to_str().unwrap()]);
    let t = only_trace(rec.path());
    let writes = writes_to(&t, &out);
    assert_eq!(writes.len(), 32, "8 rounds of 4 paths");
    let mut per_path: Vec<Vec<u64>> = vec![Vec::new(); 4];
    for (i, w) in writes.iter().enumerate() {
        assert_eq!((w.offset, w.len), (i as u64 * 4096, 4096));
        per_path[i % 4].push(w.signature);
    }
    let sigs: Vec<u64> = per_path
        .iter()
        .enumerate()
        .map(|(p, s)| {
            assert!(
                s.iter().all(|&x| x == s[0]),
                "path {p} has one signature in {unwind} mode: {s:x?}"
            );
            s[0]
        })
        .collect();
    (sigs, t)
}

fn check_described(t: &ProcessTrace, sigs: &[u64]) {
    let infos = t.signatures();
    let modules = t.modules();
    for s in sigs {
        let info = infos
            .get(s)
            .unwrap_or_else(|| panic!("SignatureInfo for {s:x}"));
        assert!(!info.frames.is_empty());
        let again = signature_of(info.frames.iter().map(|f| (f.module_key, f.offset)));
        assert_eq!(again.0, *s, "signature recomputes from its frames");
        for f in &info.frames {
            assert!(
                modules.contains_key(&f.module_key),
                "ModuleInfo for every frame"
            );
        }
    }
    // ModuleInfo precedes the first SignatureInfo that uses it.
    let mut seen = std::collections::BTreeSet::new();
    for e in t.events() {
        match &e.kind {
            Some(wire::event::Kind::Module(m)) => {
                seen.insert(m.module_key);
            }
            Some(wire::event::Kind::Signature(s)) => {
                assert!(s.frames.iter().all(|f| seen.contains(&f.module_key)));
            }
            _ => {}
        }
    }
}

fn aslr_on() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/randomize_va_space")
        .map(|s| s.trim() != "0")
        .unwrap_or(false)
}

#[test]
fn four_call_paths_four_stable_signatures() {
    assert!(
        aslr_on(),
        "this test is about ASLR: /proc/sys/kernel/randomize_va_space is 0"
    );
    for (name, flags) in [("frame pointers", FP), ("no frame pointers", NO_FP)] {
        let bin = program("shim_paths", flags);
        for unwind in ["auto", "fp", "scan"] {
            if flags == NO_FP && unwind == "fp" {
                continue; // no chain to walk: frames beyond the first are not expected
            }
            let (a, ta) = run_paths(&bin, unwind);
            let (b, tb) = run_paths(&bin, unwind);
            let distinct: std::collections::BTreeSet<_> = a.iter().collect();
            assert_eq!(
                distinct.len(),
                4,
                "{name}/{unwind}: 4 distinct signatures {a:x?}"
            );
            assert_eq!(a, b, "{name}/{unwind}: same signatures on a second run");
            check_described(&ta, &a);
            check_described(&tb, &b);
        }
    }
}

/// Function address ranges of a binary's symbol table, with `nm`.
fn functions(bin: &Path) -> BTreeMap<String, (u64, u64)> {
    pcstream_tests::require_tool("nm", "binutils");
    let o = Command::new("nm")
        .args(["-S", "--defined-only"])
        .arg(bin)
        .output()
        .unwrap();
    assert!(o.status.success());
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() == 4 && (f[2] == "t" || f[2] == "T") {
                let a = u64::from_str_radix(f[0], 16).ok()?;
                let s = u64::from_str_radix(f[1], 16).ok()?;
                Some((f[3].to_string(), (a, a + s)))
            } else {
                None
            }
        })
        .collect()
}

#[test]
fn frame_offsets_name_the_calling_functions() {
    let bin = program("shim_paths", FP);
    let fns = functions(&bin);
    let within = |name: &str, off: u64| {
        let (lo, hi) = fns[name];
        // A return address may sit just past the function's last byte.
        lo < off && off <= hi
    };
    let (sigs, t) = run_paths(&bin, "fp");
    let infos = t.signatures();
    let frames =
        |p: usize| -> Vec<u64> { infos[&sigs[p]].frames.iter().map(|f| f.offset).collect() };
    let exe_key = infos[&sigs[0]].frames[0].module_key;
    assert!(infos[&sigs[0]].frames.len() >= 3);
    for p in 0..4 {
        let f = &infos[&sigs[p]].frames;
        assert!(
            f.iter().take(3).all(|x| x.module_key == exe_key),
            "path {p}: {f:?}"
        );
        assert!(
            within("sink", frames(p)[0]),
            "frame 0 of path {p} is in sink()"
        );
        assert_eq!(
            infos[&sigs[p]].method,
            wire::UnwindMethod::FramePointer as i32
        );
    }
    assert!(within("wal_append", frames(0)[1]));
    assert!(within("write_block", frames(1)[1]) && within("flush_memtable", frames(1)[2]));
    assert!(within("write_block", frames(2)[1]) && within("compact", frames(2)[2]));
    assert!(within("temp_spill", frames(3)[1]));
    let m = &t.modules()[&exe_key];
    assert!(!m.build_id.is_empty(), "gcc on Debian emits a GNU build-id");
    assert_eq!(Path::new(&m.path), bin.as_path());
}

#[test]
fn frame_count_is_configurable() {
    let bin = program("shim_paths", FP);
    let work = tempfile::tempdir().unwrap();
    let rec = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    Run::record(rec.path())
        .env(var::FRAMES, "2")
        .stdout(&bin, &[out.to_str().unwrap()]);
    let t = only_trace(rec.path());
    let sigs: std::collections::BTreeSet<u64> =
        writes_to(&t, &out).iter().map(|w| w.signature).collect();
    // With 2 frames, flush_memtable and compact share sink <- write_block.
    assert_eq!(sigs.len(), 3, "{sigs:x?}");
    assert!(t.signatures().values().all(|s| s.frames.len() <= 2));
}

#[test]
fn exact_dwarf_unwinding_agrees_with_the_frame_pointer_walk() {
    // DWARF unwinding (PCSTREAM_UNWIND=exact) is the slow reference: on a
    // frame-pointer build its frames are the frame-pointer walk's frames, so
    // the signatures are identical; without frame pointers it still tells the
    // 4 paths apart.
    let run = |bin: &Path, unwind: &str| {
        let work = tempfile::tempdir().unwrap();
        let rec = tempfile::tempdir().unwrap();
        let out = work.path().join("out");
        Run::record(rec.path())
            .env(var::UNWIND, unwind)
            .env(var::FRAMES, "3")
            .stdout(bin, &[out.to_str().unwrap()]);
        let t = only_trace(rec.path());
        let sigs: Vec<u64> = writes_to(&t, &out)[..4]
            .iter()
            .map(|w| w.signature)
            .collect();
        let methods: std::collections::BTreeSet<i32> =
            t.signatures().values().map(|s| s.method).collect();
        (sigs, methods)
    };
    let fp_bin = program("shim_paths", FP);
    let (exact, m) = run(&fp_bin, "exact");
    assert_eq!(m, [wire::UnwindMethod::Dwarf as i32].into());
    let (fp, _) = run(&fp_bin, "fp");
    assert_eq!(exact, fp);
    let nofp_bin = program("shim_paths", NO_FP);
    let (exact, _) = run(&nofp_bin, "exact");
    assert_eq!(
        exact
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        4
    );
    assert_eq!(run(&nofp_bin, "exact").0, exact, "stable");
    // Without frame pointers, auto mode unwinds with the modules' CFI
    // tables (cfi.rs): the same frames as libgcc's DWARF unwinder, reported
    // as DWARF, with no scan.
    let (auto, m) = run(&nofp_bin, "auto");
    assert_eq!(auto, exact, "table-driven unwinding = DWARF reference");
    assert_eq!(m, [wire::UnwindMethod::Dwarf as i32].into());
}

/// A signal handler's write has one signature wherever the signal landed
/// (stale words below the signal frame differ each time), in a program
/// built with Debian's default flags (no frame pointers); no frame of any
/// signature is at offset 0 of a module (the vdso's ELF header is not code).
#[test]
fn a_signal_handlers_write_has_one_signature_wherever_the_signal_lands() {
    for flags in [NO_FP, FP] {
        let bin = program("shim_sighandler", flags);
        let work = tempfile::tempdir().unwrap();
        let rec = tempfile::tempdir().unwrap();
        let out = Run::record(rec.path()).stdout(&bin, &[work.path().to_str().unwrap(), "200"]);
        assert_eq!(out, "ok 1\n");
        let t = only_trace(rec.path());
        let sigs: std::collections::BTreeSet<u64> = writes_to(&t, &work.path().join("handler"))
            .iter()
            .map(|w| w.signature)
            .collect();
        assert_eq!(sigs.len(), 1, "{flags:?}: handler writes: {sigs:x?}");
        // The main loop's two write sites: two signatures, whatever the
        // recursion before them left on the stack.
        let main: std::collections::BTreeSet<u64> = writes_to(&t, &work.path().join("main"))
            .iter()
            .map(|w| w.signature)
            .collect();
        assert_eq!(main.len(), 2, "{flags:?}: main-loop writes: {main:x?}");
        for (sig, info) in t.signatures() {
            assert!(
                info.frames.iter().all(|f| f.offset != 0),
                "{flags:?}: {sig:x} has a frame at offset 0: {info:?}"
            );
        }
    }
}

/// Per file of `shim_shapes DIR`: the signature of every write (each
/// write is its own event) and the streams they were placed in.
fn run_shapes(bin: &Path, env: &[(&str, &str)]) -> (BTreeMap<&'static str, u64>, ProcessTrace) {
    let work = tempfile::tempdir().unwrap();
    let rec = tempfile::tempdir().unwrap();
    let mut run = Run::record(rec.path());
    for (k, v) in env {
        run = run.env(k, v);
    }
    run.stdout(bin, &[work.path().to_str().unwrap()]);
    let t = only_trace(rec.path());
    let mut sigs = BTreeMap::new();
    for (file, n) in [
        ("main", 200),
        ("thread", 200),
        ("helper-main", 4),
        ("helper-thread", 4),
    ] {
        let w = writes_to(&t, &work.path().join(file));
        assert_eq!(w.len(), n, "{file}: one event per write");
        let s: std::collections::BTreeSet<u64> = w.iter().map(|w| w.signature).collect();
        assert_eq!(s.len(), 1, "{file}: one signature for every repeat: {s:x?}");
        sigs.insert(file, w[0].signature);
    }
    (sigs, t)
}

/// A write issued directly from `main` (its call path runs out in libc's
/// and the program's start-up code) and one issued directly from a thread's
/// start routine (it runs out in `start_thread` and `clone3`) each get one
/// signature for every repeat, distinct, identical on a second run (ASLR
/// on), and the stream the mapping gives that signature on every write: the
/// repeats go through the thread's remembered path (a path that ends at the
/// outermost frame is complete with fewer than K frames), and the one
/// they replace and find again after each helper write returns the same
/// answer. Without frame pointers these paths are unwound with the CFI
/// tables to the frame they mark outermost, like libgcc's unwinder
/// (`PCSTREAM_UNWIND=exact`): same frames, no scan.
#[test]
fn writes_from_main_and_a_thread_start_routine_are_stable_and_distinct() {
    assert!(aslr_on(), "/proc/sys/kernel/randomize_va_space is 0");
    for (name, flags) in [("frame pointers", FP), ("no frame pointers", NO_FP)] {
        let bin = program("shim_shapes", flags);
        let (a, ta) = run_shapes(&bin, &[]);
        let distinct: std::collections::BTreeSet<_> = a.values().collect();
        assert_eq!(distinct.len(), 4, "{name}: 4 distinct signatures {a:x?}");
        // Described like any signature (ModuleInfo may follow it in the
        // file here: two threads flush their batches in either order).
        for s in a.values() {
            let info = &ta.signatures()[s];
            let again = signature_of(info.frames.iter().map(|f| (f.module_key, f.offset)));
            assert_eq!(again.0, *s, "signature recomputes from its frames");
            assert!(info
                .frames
                .iter()
                .all(|f| ta.modules().contains_key(&f.module_key)));
        }
        // The second run maps each signature to its own stream.
        let work = tempfile::tempdir().unwrap();
        let map = work.path().join("map");
        let streams: BTreeMap<&str, u32> = [
            ("main", 1),
            ("thread", 2),
            ("helper-main", 3),
            ("helper-thread", 4),
        ]
        .into();
        let lines: String = streams
            .iter()
            .map(|(f, s)| format!("{:016x} {s}\n", a[f]))
            .collect();
        std::fs::write(&map, lines).unwrap();
        let (b, tb) = run_shapes(&bin, &[(var::MAP, map.to_str().unwrap())]);
        assert_eq!(a, b, "{name}: same signatures on a second run");
        let by_sig: BTreeMap<u64, u32> = streams.iter().map(|(f, s)| (a[f], *s)).collect();
        for w in tb.writes() {
            assert_eq!(
                w.stream, by_sig[&w.signature],
                "{name}: every write of {:x} in its mapped stream",
                w.signature
            );
        }
        if flags == NO_FP {
            let infos = ta.signatures();
            let fns = functions(&bin);
            let (lo, hi) = fns["_start"];
            let main = &infos[&a["main"]];
            let last = main.frames.last().unwrap();
            assert!(
                last.module_key == main.frames[0].module_key
                    && lo < last.offset
                    && last.offset <= hi,
                "main's path ends in the program's _start: {main:?}"
            );
            for file in ["main", "thread"] {
                assert_eq!(
                    infos[&a[file]].method,
                    wire::UnwindMethod::Dwarf as i32,
                    "{file}: CFI walk to the outermost frame, no scan"
                );
            }
            let (exact, _) = run_shapes(&bin, &[(var::UNWIND, "exact")]);
            assert_eq!(a, exact, "the CFI walk's frames are libgcc's");
        }
    }
}
