//! Where the shim's own complaints go: a bad `PCSTREAM_*` value or an
//! unreadable mapping file is one line to the system log (`/dev/log`, or
//! the socket `PCSTREAM_SYSLOG` names), tagged `pcstream[PID]`, which
//! journald and rsyslog collect (`journalctl -t pcstream`). Never to the
//! application's stderr, which belongs to the application (there too only
//! with `PCSTREAM_DEBUG=1`).
//!
//! Hand-written rather than libc's `syslog(3)`, which shares `openlog`'s
//! ident, facility and descriptor with the application: one datagram of
//! our own, through a socket made for it and closed again with raw
//! syscalls (`record::send_datagram_to`), so the shim's hooks never see it
//! and no descriptor outlives the call. Without a system log the line is
//! dropped; the application is never failed.

use std::path::Path;

/// The system log's socket.
pub const DEFAULT_SYSLOG: &str = "/dev/log";

/// `<PRI>` of a warning from a user process (LOG_USER | LOG_WARNING).
const PRI_USER_WARNING: u8 = 8 + 4;

/// The datagram for `msg` from process `pid` (RFC 3164's form without a
/// timestamp, which the receiver adds).
pub fn line(pid: u32, msg: &str) -> String {
    format!("<{PRI_USER_WARNING}>pcstream[{pid}]: {msg}")
}

/// Logs `msg` to the system log at `socket`; also on stderr with `debug`.
pub fn warn(socket: &Path, debug: bool, msg: &str) {
    if debug {
        eprintln!("{msg}");
    }
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    crate::record::send_datagram_to(socket, line(pid, msg).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_is_one_datagram_to_the_log_socket() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("log");
        let s = std::os::unix::net::UnixDatagram::bind(&p).unwrap();
        s.set_nonblocking(true).unwrap();
        warn(&p, false, "pcstream: ignoring PCSTREAM_FRAMES=\"x\"");
        let mut b = [0u8; 256];
        let n = s.recv(&mut b).unwrap();
        let got = String::from_utf8_lossy(&b[..n]);
        let pid = std::process::id();
        assert_eq!(
            got,
            format!("<12>pcstream[{pid}]: pcstream: ignoring PCSTREAM_FRAMES=\"x\"")
        );
        assert!(s.recv(&mut b).is_err(), "one datagram");
        // No listener: nothing happens, nothing fails.
        warn(&d.path().join("none"), false, "dropped");
    }
}
