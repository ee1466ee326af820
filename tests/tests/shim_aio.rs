//! libaio's `io_submit` under the shim (what MySQL's InnoDB and fio's
//! `libaio` engine write with):
//! - `tests/c/shim_aio.c` (libaio `dlopen`ed after start-up, called through
//!   the global scope): identical output with and without the shim; the
//!   trace holds exactly the positioned writes the kernel took (`PWRITE`,
//!   `PWRITEV`), not the empty, `RWF_APPEND`, read or refused ones, with
//!   call kind `aio`; a static mapping puts the stream's hint on the file;
//! - fio (`--ioengine=libaio --direct=1`, a real program linked with
//!   libaio): its writes are traced block for block and fio reports no error.

mod shim_common;

use pcstream_placement::env as var;
use pcstream_placement::hint::RwHint;
use pcstream_placement::wire;
use pcstream_tests::{require_tool, rw_hint};
use shim_common::*;

fn require_libaio() {
    if !std::path::Path::new("/usr/lib/x86_64-linux-gnu/libaio.so.1").exists()
        && !std::path::Path::new("/lib/x86_64-linux-gnu/libaio.so.1").exists()
    {
        require_tool("libaio.so.1", "libaio1");
    }
}

#[test]
fn io_submit_writes_are_traced_as_submitted_and_hinted() {
    require_libaio();
    let bin = program("shim_aio", FP);
    let run = |how: &Run| {
        let dir = tempfile::tempdir().unwrap();
        let out = how.stdout(&bin, &[dir.path().to_str().unwrap()]);
        (out, dir)
    };
    let (plain, _d) = run(&Run::plain());
    assert!(plain.contains("io_submit 5 rc=5\n"), "{plain}");
    assert!(plain.contains("io_submit part rc=1\n"), "{plain}");
    assert!(plain.contains("size 200512\n"), "{plain}");
    assert_eq!(run(&Run::shim()).0, plain, "pass-through");
    let rec = tempfile::tempdir().unwrap();
    let (out, dir) = run(&Run::record(rec.path()));
    assert_eq!(out, plain, "record mode");
    let t = only_trace(rec.path());
    let w = writes_to(&t, &dir.path().join("aio"));
    let got: Vec<(u64, u64, i32)> = w.iter().map(|e| (e.offset, e.len, e.call)).collect();
    let aio = wire::WriteCall::Aio as i32;
    assert_eq!(
        got,
        vec![(8192, 4096, aio), (100000, 4000, aio), (200000, 512, aio)]
    );
    // One call site submits the first five, another the partial batch.
    assert_eq!(w[0].signature, w[1].signature);
    assert_ne!(w[0].signature, w[2].signature);

    let cfg = tempfile::tempdir().unwrap();
    let map = cfg.path().join("streams.map");
    std::fs::write(&map, format!("{:016x} 3\n", w[0].signature)).unwrap();
    let (out, dir) = run(&Run::shim().env(var::MAP, map.to_str().unwrap()));
    assert_eq!(out, plain);
    assert_eq!(
        rw_hint(&dir.path().join("aio")),
        RwHint::for_stream(3).raw(),
        "the mapped stream's hint"
    );
}

#[test]
fn fio_libaio_direct_writes_are_traced_block_for_block() {
    require_tool("fio", "fio");
    require_libaio();
    let work = tempfile::tempdir().unwrap();
    let rec = tempfile::tempdir().unwrap();
    let out = work.path().join("fio.out");
    Run::record(rec.path()).stdout(
        &pcstream_tests::which("fio").unwrap(),
        &[
            "--name=aio",
            &format!("--directory={}", work.path().display()),
            "--size=8M",
            "--rw=randwrite",
            "--bs=4k",
            "--ioengine=libaio",
            "--iodepth=8",
            "--direct=1",
            "--randrepeat=1",
            &format!("--output={}", out.display()),
        ],
    );
    let report = std::fs::read_to_string(&out).unwrap();
    assert!(report.contains("err= 0"), "{report}");
    assert!(report.contains("io=8192KiB"), "{report}");
    let data = work.path().join("aio.0.0");
    let mut pages = vec![0u32; 2048];
    let mut sigs = std::collections::BTreeSet::new();
    let mut n = 0;
    for t in traces(rec.path()) {
        for w in writes_to(&t, &data) {
            assert_eq!(w.call, wire::WriteCall::Aio as i32, "{w:?}");
            assert!(w.offset % 4096 == 0 && w.len % 4096 == 0, "{w:?}");
            for p in w.offset / 4096..(w.offset + w.len) / 4096 {
                pages[p as usize] += 1;
            }
            sigs.insert(w.signature);
            n += 1;
        }
    }
    assert!(n > 0, "fio's writes were not traced");
    assert!(
        pages.iter().all(|&c| c == 1),
        "every 4 KiB block written once (randrepeat, no overlap): {:?}",
        pages.iter().filter(|&&c| c != 1).count()
    );
    assert_eq!(sigs.len(), 1, "one submitting call path: {sigs:x?}");
}
