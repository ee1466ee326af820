//! Helpers shared by the cross-crate integration tests in `tests/tests/`:
//! locating the built `libpcstream.so` and `pcstreamctl`, compiling small C
//! programs, and making sure the external tools a test drives are installed.
//!
//! Integration tests run real processes. When a tool is missing they install
//! it (`apt-get`, as root) or fail with a message naming the package: never a
//! silent skip.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// `target/<profile>` of the running test binary (`target/<profile>/deps/..`).
pub fn target_profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("test binary has a parent dir");
    deps.parent()
        .expect("deps dir has a parent (target/<profile>)")
        .to_path_buf()
}

fn build_lock() -> &'static std::sync::Mutex<()> {
    static L: OnceLock<std::sync::Mutex<()>> = OnceLock::new();
    L.get_or_init(|| std::sync::Mutex::new(()))
}

/// Path of a workspace artifact (`libpcstream.so`, `pcstreamctl`), built
/// with the test's own profile once per test process (`cargo test` does not
/// rebuild a cdylib or another package's binary, so an edited shim would
/// otherwise be tested stale; the build is a no-op when it is up to date).
pub fn artifact(file: &str, package: &str) -> PathBuf {
    static BUILT: OnceLock<std::sync::Mutex<std::collections::HashSet<String>>> = OnceLock::new();
    let dir = target_profile_dir();
    let path = dir.join(file);
    let _g = build_lock().lock().unwrap_or_else(|e| e.into_inner());
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if built.insert(package.to_string()) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-q", "-p", package]);
        let profile = dir.file_name().and_then(|n| n.to_str()).unwrap_or("debug");
        match profile {
            "debug" => {}
            "release" => {
                cmd.arg("--release");
            }
            other => {
                cmd.args(["--profile", other]);
            }
        }
        if let Some(target) = dir.parent() {
            cmd.env("CARGO_TARGET_DIR", target);
        }
        let st = cmd.status().expect("run cargo build");
        assert!(st.success(), "cargo build -p {package} failed");
    }
    assert!(
        path.exists(),
        "{} missing after building {package}",
        path.display()
    );
    path
}

/// The shim, `libpcstream.so`.
pub fn shim() -> PathBuf {
    artifact("libpcstream.so", "pcstream-preload")
}

/// The `pcstreamctl` binary.
pub fn pcstreamctl() -> PathBuf {
    artifact("pcstreamctl", "pcstreamctl")
}

/// What `pcstreamctl record --device-trace` needs: root (loop devices,
/// mount, tracefs; as another user this panics naming `who`, never skips)
/// and the file-system tools, installed when missing.
pub fn require_device_trace(who: &str) {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    assert_eq!(
        uid, 0,
        "{who} need root: --device-trace uses loop devices, mount and tracefs"
    );
    require_tool("mkfs.ext4", "e2fsprogs");
    require_tool("losetup", "mount");
}

/// Makes sure `cmd` is on PATH: installs Debian `package` with apt-get when
/// running as root, otherwise panics naming the package to install.
pub fn require_tool(cmd: &str, package: &str) {
    require_installed(&format!("`{cmd}`"), package, || which(cmd).is_some());
}

/// Makes sure the file `path` exists (a library or jar a package installs,
/// not a command): installs Debian `package` as [`require_tool`] does.
pub fn require_file(path: &str, package: &str) {
    require_installed(path, package, || Path::new(path).is_file());
}

fn require_installed(what: &str, package: &str, present: impl Fn() -> bool) {
    static APT: OnceLock<std::sync::Mutex<()>> = OnceLock::new();
    let _g = APT
        .get_or_init(|| std::sync::Mutex::new(()))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if present() {
        return;
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "{what} is not installed and this test is not root: run `apt-get install {package}`"
    );
    let ok = Command::new("sh")
        .args([
            "-c",
            &format!(
                "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq {package} >/dev/null \
                 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq {package} >/dev/null)"
            ),
        ])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(
        ok && present(),
        "could not install {what} (Debian package {package})"
    );
}

/// First `cmd` on PATH.
pub fn which(cmd: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(cmd))
        .find(|p| p.is_file())
}

/// Compiles C source `src` into executable `out` with `cc` and extra `flags`.
/// Panics with the compiler's output on failure.
pub fn compile_c(src: &Path, out: &Path, flags: &[&str]) {
    require_tool("cc", "gcc");
    let o = Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(out)
        .arg(src)
        .arg("-lpthread")
        .output()
        .expect("run cc");
    assert!(
        o.status.success(),
        "cc {} failed:\n{}",
        src.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Compiles `tests/java/<name>.java` with `javac` into `out` (a class
/// directory); panics with the compiler's output on failure.
pub fn compile_java(name: &str, out: &Path) {
    require_tool("javac", "openjdk-17-jdk-headless");
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("java")
        .join(format!("{name}.java"));
    let o = Command::new("javac")
        .arg("-d")
        .arg(out)
        .arg(&src)
        .output()
        .expect("run javac");
    assert!(
        o.status.success(),
        "javac {} failed:\n{}",
        src.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Generates a C code base into `dir` with `bench/gen_cbase.py` (`args`: its
/// units, headers and further arguments, as the script's usage says), for
/// the tests that build it with gcc and make.
pub fn gen_cbase(dir: &Path, args: &[&str]) {
    let gen = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/gen_cbase.py");
    let st = Command::new("python3")
        .arg(gen)
        .arg(dir)
        .args(args)
        .status()
        .expect("run python3 bench/gen_cbase.py");
    assert!(st.success(), "gen_cbase.py {args:?} failed");
}

/// Directory holding the C sources used by the tests (`tests/c/`).
pub fn c_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("c")
}

/// The write-lifetime hint on the file at `p` (`F_GET_RW_HINT`).
pub fn rw_hint(p: &Path) -> u64 {
    pcstream_placement::hint::read_file_hint(p)
        .unwrap_or_else(|e| panic!("F_GET_RW_HINT on {}: {e}", p.display()))
}

/// Makes a FIFO at `p` (mode 0600).
pub fn mkfifo(p: &Path) {
    nix::unistd::mkfifo(
        p,
        nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
    )
    .unwrap_or_else(|e| panic!("mkfifo {}: {e}", p.display()));
}

/// Runs `cmd` (stdin empty, stdout and stderr captured) and returns its
/// output; kills it and panics if it has not exited within `secs`
/// seconds (a hang is the failure being tested).
pub fn output_within(mut cmd: Command, secs: u64) -> std::process::Output {
    use std::process::Stdio;
    let what = format!("{:?}", cmd.get_program());
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run {what}: {e}"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not exit within {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}
