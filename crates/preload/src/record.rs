//! Where batches go: the per-process trace file (record mode) and the
//! daemon's datagram socket.
//!
//! Both descriptors are moved to high numbers (≥ [`HIGH_FD`] when possible)
//! with `O_CLOEXEC`, so the application's descriptor numbers are the same as
//! without the shim. Every trace record is one `writev` on an `O_APPEND`
//! file; every datagram one `sendmsg` with `MSG_DONTWAIT` (a full or absent
//! daemon drops the batch and counts its events). See `docs/shim.md`.

use crate::events::{self, Enc};
use crate::real;
use libc::{c_int, c_void, iovec};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

/// Lowest descriptor number the shim's own descriptors are moved to.
pub const HIGH_FD: c_int = 1000;

static RECORD_FD: AtomicI32 = AtomicI32::new(-1);
static SOCK_FD: AtomicI32 = AtomicI32::new(-1);
static SOCK_ADDR: OnceLock<(libc::sockaddr_un, libc::socklen_t)> = OnceLock::new();
static PID: AtomicU32 = AtomicU32::new(0);
static SEQ: AtomicU64 = AtomicU64::new(0);

/// This process's pid as the shim knows it (refreshed in fork children).
pub fn pid() -> u32 {
    PID.load(Ordering::Relaxed)
}

/// Sets the pid and restarts the batch sequence (init, fork child).
pub fn set_pid(p: u32) {
    PID.store(p, Ordering::Relaxed);
    SEQ.store(0, Ordering::Relaxed);
}

/// Whether any sink is active (events are worth producing).
pub fn active() -> bool {
    RECORD_FD.load(Ordering::Relaxed) >= 0 || SOCK_FD.load(Ordering::Relaxed) >= 0
}

/// The shim's own descriptors (-1 for none).
pub fn our_fds() -> [c_int; 2] {
    [
        RECORD_FD.load(Ordering::Relaxed),
        SOCK_FD.load(Ordering::Relaxed),
    ]
}

/// Whether `fd` is one of the shim's own descriptors.
pub fn is_ours(fd: c_int) -> bool {
    fd >= 0 && (fd == RECORD_FD.load(Ordering::Relaxed) || fd == SOCK_FD.load(Ordering::Relaxed))
}

fn fcntl_int(fd: c_int, cmd: c_int, arg: c_int) -> c_int {
    match real::FCNTL.get() {
        // SAFETY: F_DUPFD_CLOEXEC with an int argument.
        Some(f) => unsafe { f(fd, cmd, arg) },
        None => -1,
    }
}

fn close_fd(fd: c_int) {
    if let Some(f) = real::CLOSE.get() {
        // SAFETY: closes a descriptor the shim owns.
        unsafe { f(fd) };
    }
}

/// Moves a descriptor to a high number (close-on-exec); returns the new one.
fn to_high(fd: c_int) -> c_int {
    let n = fcntl_int(fd, libc::F_DUPFD_CLOEXEC, HIGH_FD);
    if n < 0 {
        return fd;
    }
    close_fd(fd);
    n
}

/// The application is about to reuse `fd` (as the target of `dup2`/`dup3`):
/// if it is one of ours, move ours elsewhere first.
pub fn evacuate(fd: c_int) {
    if !is_ours(fd) {
        return;
    }
    // SAFETY: getpid has no preconditions.
    if unsafe { libc::getpid() } as u32 != pid() {
        // A vfork child shares our memory but not our descriptor table:
        // moving "our" descriptor here would repoint the parent's trace at
        // a descriptor the parent does not have. Let the child have it.
        return;
    }
    for slot in [&RECORD_FD, &SOCK_FD] {
        if fd >= 0 && slot.load(Ordering::Relaxed) == fd {
            let n = fcntl_int(fd, libc::F_DUPFD_CLOEXEC, fd + 1);
            if n >= 0 {
                slot.store(n, Ordering::Relaxed);
                close_fd(fd);
            } else {
                slot.store(-1, Ordering::Relaxed);
            }
        }
    }
}

/// Opens the daemon socket if `path` exists (init only).
pub fn open_socket(path: &Path) -> bool {
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain data; zero is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= addr.sun_path.len() || !path.exists() {
        return false;
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let len = (std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1) as libc::socklen_t;
    // SAFETY: plain socket(2) call.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    };
    if fd < 0 {
        return false;
    }
    let _ = SOCK_ADDR.set((addr, len));
    SOCK_FD.store(to_high(fd), Ordering::Relaxed);
    true
}

/// What the trace header says about this process.
#[derive(Debug)]
pub struct HeaderInfo<'a> {
    /// CLOCK_MONOTONIC at start.
    pub start_mono_ns: u64,
    /// Wall clock at (about) the same instant.
    pub start_unix_ns: u64,
    /// argv.
    pub command: &'a [Vec<u8>],
}

/// Creates this process's trace file in `dir` and writes the magic and the
/// header record. Replaces (closes) a previous trace descriptor, e.g. the
/// one a fork child inherited. Returns the path, or an error message.
pub fn open_trace(dir: &Path, h: &HeaderInfo<'_>) -> Result<std::path::PathBuf, String> {
    let old = RECORD_FD.swap(-1, Ordering::Relaxed);
    if old >= 0 {
        close_fd(old);
    }
    let _ = std::fs::create_dir_all(dir);
    let path = dir.join(format!("{}-{}.pcstrace", pid(), h.start_mono_ns));
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    let open = real::OPEN.get().ok_or("no open in libc")?;
    // SAFETY: NUL-terminated path, standard flags, mode for O_CREAT.
    let fd = unsafe {
        open(
            c.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC,
            0o644 as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(format!(
            "{}: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    let fd = to_high(fd);
    // TraceRecord { header: TraceHeader { .. } }
    let mut hdr = vec![0u8; 64 + h.command.iter().map(|a| a.len() + 12).sum::<usize>()];
    let mut e = Enc::new(&mut hdr);
    e.uint(1, 1);
    e.bytes_field(
        2,
        concat!("libpcstream ", env!("CARGO_PKG_VERSION")).as_bytes(),
    );
    e.uint(3, h.start_mono_ns);
    e.uint(4, h.start_unix_ns);
    for a in h.command {
        e.bytes_always(5, a);
    }
    let hlen = e.bytes().len();
    let mut rec = vec![0u8; hlen + 32];
    let mut r = Enc::new(&mut rec);
    r.bytes_always(1, &hdr[..hlen]);
    let rlen = r.bytes().len();
    let mut file = vec![0u8; rlen + 32];
    let mut f = Enc::new(&mut file);
    f.raw(pcstream_placement::trace::MAGIC);
    f.varint(rlen as u64);
    f.raw(&rec[..rlen]);
    let bytes = f.bytes().to_vec();
    let w = real::WRITE.get().ok_or("no write in libc")?;
    // SAFETY: writes our own buffer to our own descriptor.
    let n = unsafe { w(fd, bytes.as_ptr() as *const c_void, bytes.len()) };
    if n != bytes.len() as isize {
        close_fd(fd);
        return Err(format!("{}: short write of the header", path.display()));
    }
    RECORD_FD.store(fd, Ordering::Relaxed);
    Ok(path)
}

/// Sends/records one batch of already-encoded `Event` fields (`events` holds
/// `count` length-prefixed field-3 entries of an `EventBatch`).
pub fn emit_batch(events: &[u8], count: u32) {
    // EventBatch header fields: pid (1), seq (2).
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let mut head = [0u8; 48];
    let mut hb = [0u8; 24];
    let mut h = Enc::new(&mut hb);
    h.uint(1, pid() as u64);
    h.uint(2, seq);
    let hlen = h.bytes().len();
    let batch_len = hlen + events.len();

    let sock = SOCK_FD.load(Ordering::Relaxed);
    if sock >= 0 {
        let iov = [
            iovec {
                iov_base: hb.as_ptr() as *mut c_void,
                iov_len: hlen,
            },
            iovec {
                iov_base: events.as_ptr() as *mut c_void,
                iov_len: events.len(),
            },
        ];
        let ok = match SOCK_ADDR.get() {
            Some((addr, alen)) => {
                // SAFETY: msghdr is plain data; zero is valid.
                let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
                msg.msg_name = addr as *const libc::sockaddr_un as *mut c_void;
                msg.msg_namelen = *alen;
                msg.msg_iov = iov.as_ptr() as *mut iovec;
                msg.msg_iovlen = 2;
                // SAFETY: msg points to live buffers for the duration of the call.
                let n =
                    unsafe { libc::sendmsg(sock, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
                n == batch_len as isize
            }
            None => false,
        };
        if !ok {
            crate::batch::count_dropped(count as u64);
        }
    }

    let fd = RECORD_FD.load(Ordering::Relaxed);
    if fd >= 0 {
        // TraceRecord { batch (2): EventBatch }, length-delimited.
        let rec_len = 1 + events::varint_len(batch_len as u64) + batch_len;
        let mut p = Enc::new(&mut head);
        p.varint(rec_len as u64);
        p.raw(&[0x12]);
        p.varint(batch_len as u64);
        p.raw(&hb[..hlen]);
        let plen = p.bytes().len();
        let iov = [
            iovec {
                iov_base: head.as_ptr() as *mut c_void,
                iov_len: plen,
            },
            iovec {
                iov_base: events.as_ptr() as *mut c_void,
                iov_len: events.len(),
            },
        ];
        if let Some(wv) = real::WRITEV.get() {
            for _ in 0..3 {
                // SAFETY: iov points to live buffers; fd is our trace file.
                let n = unsafe { wv(fd, iov.as_ptr(), 2) };
                if n >= 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    break;
                }
            }
        }
    }
}
