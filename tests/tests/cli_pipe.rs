//! pcstreamctl writing into a closed pipe (`pcstreamctl … | head -c1`, a
//! pager quit early) ends like any Unix tool, by SIGPIPE, with nothing on
//! stderr — never a "failed printing to stdout" panic and its backtrace.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

#[test]
fn output_into_a_closed_pipe_ends_by_sigpipe_without_a_panic() {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills the two-element array.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: fds[0] is the read end just made; nothing else owns it.
    unsafe { libc::close(fds[0]) };
    // SAFETY: fds[1] is ours; Stdio takes ownership of it.
    let stdout = unsafe { <Stdio as std::os::fd::FromRawFd>::from_raw_fd(fds[1]) };
    let out = Command::new(pcstream_tests::pcstreamctl())
        .args(["sim", "--synthetic", "uniform", "--writes", "20000"])
        .env("RUST_BACKTRACE", "1")
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "pcstreamctl panicked: {err}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?}: {err}",
        out.status
    );
}
