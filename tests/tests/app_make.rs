//! Real application: `make -j2` building a small generated C project with gcc
//! under `pcstreamctl record`, TMPDIR pointing into the test's directory.
//! Proves: the assembler temp files (`$TMPDIR/cc*.s`, written by cc1, read by
//! as) and the object files (written by as) get different signatures and are
//! attributed to the right programs across the whole process tree, and the
//! driver's deletion of the temp files is recorded as invalidations.

mod app_common;

use pcstream_placement::wire::InvalidateKind;
use pcstream_tests::require_tool;
use std::fmt::Write as _;

const UNITS: usize = 6;

fn write_project(dir: &std::path::Path) {
    let mut main = String::from("#include <stdio.h>\n");
    for i in 0..UNITS {
        let mut src = format!("#include <string.h>\nint unit{i}_value(int x);\n");
        // Enough code that cc1 emits a few KiB of assembly per unit.
        for f in 0..20 {
            let _ = writeln!(
                src,
                "static int f{f}(int x) {{ char b[64]; memset(b, x + {f}, sizeof b); int s = 0; \
                 for (int k = 0; k < 64; k++) s += b[k] * (k ^ {f}); return s; }}"
            );
        }
        let calls: Vec<String> = (0..20).map(|f| format!("f{f}(x)")).collect();
        let _ = writeln!(
            src,
            "int unit{i}_value(int x) {{ return {}; }}",
            calls.join(" + ")
        );
        std::fs::write(dir.join(format!("unit{i}.c")), src).unwrap();
        let _ = writeln!(main, "int unit{i}_value(int x);");
    }
    let sum: Vec<String> = (0..UNITS).map(|i| format!("unit{i}_value(1)")).collect();
    let _ = writeln!(
        main,
        "int main(void) {{ printf(\"%d\\n\", {}); return 0; }}",
        sum.join(" + ")
    );
    std::fs::write(dir.join("main.c"), main).unwrap();
    let objs: Vec<String> = (0..UNITS).map(|i| format!("unit{i}.o")).collect();
    let makefile = format!(
        "CC = gcc\nCFLAGS = -O1\nprog: main.o {objs}\n\t$(CC) -o $@ $^\n%.o: %.c\n\t$(CC) $(CFLAGS) -c -o $@ $<\n",
        objs = objs.join(" ")
    );
    std::fs::write(dir.join("Makefile"), makefile).unwrap();
}

#[test]
fn make_j2_temp_assembly_vs_objects() {
    require_tool("make", "make");
    require_tool("gcc", "gcc");
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let tmpdir = tmp.path().join("tmp");
    std::fs::create_dir(&src).unwrap();
    std::fs::create_dir(&tmpdir).unwrap();
    write_project(&src);
    let rec = app_common::record(
        &tmp.path().join("rec"),
        &src,
        &["make", "-j2"],
        &[("TMPDIR", tmpdir.to_str().unwrap())],
    );
    assert!(src.join("prog").exists(), "make did not build prog");
    let t = &rec.trace;
    t.check_merged();

    let is_temp_s = |n: &str| n.starts_with("cc") && n.ends_with(".s");
    let is_obj = |n: &str| n.ends_with(".o") && n.starts_with(['u', 'm']);
    let s = t.write_sigs(&is_temp_s);
    let o = t.write_sigs(&is_obj);
    let paths = app_common::call_paths(&rec.dir);
    let msg = format!(
        "temp .s signatures:\n{}\n.o signatures:\n{}",
        app_common::show(&s, &paths),
        app_common::show(&o, &paths)
    );
    assert!(!s.is_empty() && !o.is_empty(), "{msg}");
    assert!(
        s.keys().all(|k| !o.contains_key(k)),
        "shared signature:\n{msg}"
    );
    assert_eq!(t.writers(&is_temp_s), ["cc1".to_string()].into(), "{msg}");
    let obj_writers = t.writers(&is_obj);
    assert!(
        !obj_writers.is_empty() && obj_writers.iter().all(|p| p == "as" || p.ends_with("-as")),
        "objects written by {obj_writers:?}, not the assembler\n{msg}"
    );

    // Every compile's temp assembly file was deleted by the gcc driver.
    let gone = t.invalidated(InvalidateKind::Unlink, &is_temp_s);
    assert_eq!(gone.len(), UNITS + 1, "temp files unlinked: {gone:?}");
    assert_eq!(
        std::fs::read_dir(&tmpdir).unwrap().count(),
        0,
        "TMPDIR left non-empty"
    );
}
