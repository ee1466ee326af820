//! Everyday programs under the shim with a live `pcstreamd`, as a new user
//! would first try it: archivers and compressors (tar, gzip, xz and zstd
//! with worker threads, cpio), `sort` spilling to temporary files, `sed
//! -i`, shell redirections, `cp`, perl, Python writing from eight threads,
//! sqlite3 in WAL mode, `dd` with `O_DIRECT` (aligned, and misaligned so
//! that the write fails), fio through io_uring and libaio with `O_DIRECT`,
//! and git committing a tree. Each runs twice in a fresh directory, without
//! and with `LD_PRELOAD=libpcstream.so`: its exit status, standard output,
//! standard error and every file it leaves must be byte-identical. The
//! daemon must have heard the shimmed runs (so the shim was active, not
//! passing through for want of a daemon).

mod daemon_common;

use daemon_common::{under_shim, Daemon};
use pcstream_tests::require_tool;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A fixed tree of files the cases archive and copy: both runs read the
/// same files with the same metadata, so archives come out identical.
fn fixture(dir: &Path) {
    for d in 0..4 {
        let sub = dir.join(format!("d{d}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..12 {
            let text: String = (0..(200 * (f + 1)))
                .map(|i| format!("{d}:{f}:{}\n", (i * 7919 + f * 31) % 10007))
                .collect();
            std::fs::write(sub.join(format!("f{f}.txt")), text).unwrap();
        }
    }
}

/// (name, shell command run in the case's own empty directory, `$SRC` is
/// the fixture, paths elsewhere relative).
fn cases() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "tar-gzip",
            "tar -C \"$SRC\" --sort=name -cf a.tar . && gzip -n -9 -k a.tar && \
             mkdir x && tar -C x -xzf a.tar.gz && tar -tf a.tar | head -5",
        ),
        (
            "xz-zstd-threads",
            "tar -C \"$SRC\" --sort=name -cf a.tar . && xz -T2 -k a.tar && \
             zstd -q -T2 a.tar -o a.zst && xz -dc a.tar.xz | cmp - a.tar && \
             zstd -q -dc a.zst | cmp - a.tar && echo same",
        ),
        (
            "cpio",
            "(cd \"$SRC\" && find . | LC_ALL=C sort | cpio -o --quiet -H newc) > a.cpio && \
             mkdir x && (cd x && cpio -id --quiet < ../a.cpio) && ls x/d0 | wc -l",
        ),
        (
            "sort-spills",
            "awk 'BEGIN { for (i = 0; i < 300000; i++) print (i * 7919) % 300007 }' > in && \
             sort -n -S 64K -T . in > out && tail -1 out && ls",
        ),
        (
            "sed-redirect-cp",
            "seq 1 50000 > f && sed -i 's/1/one/g' f && for i in $(seq 1 500); do echo $i >> log; done && \
             exec 3> fd3 && echo three >&3 && exec 3>&- && cp f g && cat f >> g && wc -l f g log fd3",
        ),
        (
            "perl",
            "perl -e 'open(my $f, \">\", \"p\") or die; for (1..100000) { print $f \"line $_\\n\" } \
             close $f; syswrite(STDOUT, -s \"p\"); print \"\\n\"'",
        ),
        (
            "python-threads",
            "python3 -c '\nimport threading\n\
def w(i):\n    with open(\"f%d\" % i, \"wb\") as f:\n        for k in range(500): f.write(bytes([k % 256]) * 4096)\n\
ts = [threading.Thread(target=w, args=(i,)) for i in range(8)]\n\
[t.start() for t in ts]; [t.join() for t in ts]\nprint(\"done\")'",
        ),
        (
            "sqlite-wal",
            "sqlite3 db 'PRAGMA journal_mode=WAL; CREATE TABLE t(a, b); \
             WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 50000) \
             INSERT INTO t SELECT x, printf(\"%0100d\", x) FROM c; \
             UPDATE t SET b = upper(b) WHERE a % 7 = 0; PRAGMA wal_checkpoint(TRUNCATE);' && \
             sqlite3 db 'SELECT count(*), sum(a) FROM t'",
        ),
        (
            "dd-direct",
            "dd if=/dev/zero of=d bs=1M count=8 oflag=direct status=none; echo aligned=$?; \
             dd if=/dev/zero of=e bs=1000 count=2 oflag=direct status=none; echo misaligned=$?",
        ),
        (
            "fio-io_uring-libaio",
            "for e in io_uring libaio; do fio --name=j --filename=f.$e --size=8M --rw=randwrite \
             --bs=4k --ioengine=$e --direct=1 --iodepth=8 --randseed=7 \
             --buffer_pattern=0x5ca1ab1e --output=/dev/null; echo $e=$?; done",
        ),
        (
            "git",
            "git init -q r && cp -r \"$SRC/d0\" \"$SRC/d1\" r/ && cd r && git add -A && \
             git commit -q -m fixture && git gc -q && git fsck --no-progress && git rev-parse HEAD",
        ),
    ]
}

/// Every regular file under `dir` (relative path → contents), skipping
/// git's index (it stores inode numbers and times).
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                todo.push(p);
            } else if t.is_file() && !p.ends_with(".git/index") {
                let rel = p.strip_prefix(dir).unwrap().to_path_buf();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

struct Outcome {
    status: Option<i32>,
    stdout: String,
    stderr: String,
    files: BTreeMap<PathBuf, Vec<u8>>,
}

fn run(mut cmd: Command, dir: &Path, src: &Path) -> Outcome {
    std::fs::create_dir_all(dir).unwrap();
    let out = cmd
        .current_dir(dir)
        .env("SRC", src)
        .env("LC_ALL", "C")
        .env("GIT_AUTHOR_NAME", "a")
        .env("GIT_AUTHOR_EMAIL", "a@example.org")
        .env("GIT_AUTHOR_DATE", "2020-01-01T00:00:00Z")
        .env("GIT_COMMITTER_NAME", "a")
        .env("GIT_COMMITTER_EMAIL", "a@example.org")
        .env("GIT_COMMITTER_DATE", "2020-01-01T00:00:00Z")
        .output()
        .unwrap();
    Outcome {
        status: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        files: tree(dir),
    }
}

#[test]
fn everyday_programs_see_no_difference_under_the_shim() {
    for (tool, package) in [
        ("tar", "tar"),
        ("gzip", "gzip"),
        ("xz", "xz-utils"),
        ("zstd", "zstd"),
        ("cpio", "cpio"),
        ("perl", "perl"),
        ("python3", "python3"),
        ("sqlite3", "sqlite3"),
        ("fio", "fio"),
        ("git", "git"),
    ] {
        require_tool(tool, package);
    }
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    fixture(&src);
    let d = Daemon::start("");
    let before = d.status()["events"].as_u64().unwrap();
    let mut failures = Vec::new();
    for (name, script) in cases() {
        let t0 = std::time::Instant::now();
        let mut plain = Command::new("bash");
        plain.args(["-c", script]);
        let a = run(plain, &tmp.path().join("plain").join(name), &src);
        let b = run(
            under_shim(&d, &["bash", "-c", script]),
            &tmp.path().join("shim").join(name),
            &src,
        );
        let mut diff = Vec::new();
        if a.status != b.status {
            diff.push(format!("exit {:?} against {:?}", a.status, b.status));
        }
        if a.stdout != b.stdout {
            diff.push(format!("stdout {:?} against {:?}", a.stdout, b.stdout));
        }
        if a.stderr != b.stderr {
            diff.push(format!("stderr {:?} against {:?}", a.stderr, b.stderr));
        }
        let only = |x: &Outcome, y: &Outcome| -> Vec<PathBuf> {
            x.files
                .keys()
                .filter(|p| !y.files.contains_key(*p))
                .take(5)
                .cloned()
                .collect()
        };
        let (gone, new) = (only(&a, &b), only(&b, &a));
        if !gone.is_empty() || !new.is_empty() {
            diff.push(format!(
                "files only without the shim {gone:?}, only with it {new:?} (first 5)"
            ));
        }
        for (p, c) in &a.files {
            if b.files.get(p).is_some_and(|d| d != c) {
                diff.push(format!("{} differs", p.display()));
            }
        }
        assert!(
            !a.files.is_empty() && !a.stdout.is_empty(),
            "{name}: the case did nothing: {:?}",
            a.stderr
        );
        eprintln!("{name}: {:.1} s for both runs", t0.elapsed().as_secs_f64());
        if !diff.is_empty() {
            failures.push(format!("{name}: {}", diff.join("; ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Every case writes; the shimmed runs must have reached the daemon.
    let s = d.settled();
    let heard = s["events"].as_u64().unwrap() - before;
    assert!(heard >= 1000, "the daemon heard {heard} events: {s}");
}
