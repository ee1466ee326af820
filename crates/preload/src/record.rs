//! Where batches go: the per-process trace file (record mode) and the
//! daemon: its connection socket `events.seq` (`SOCK_SEQPACKET`, one
//! connection per batch: the listen backlog, not the kernel's datagram
//! queue, bounds what waits for the daemon) when it has one, else its
//! datagram socket `events.sock`.
//!
//! The shim holds **no descriptor between flushes**: every trace record is
//! appended by opening the trace file (`O_APPEND`), one `writev`, and
//! closing it; every batch goes to the daemon through a socket created for
//! that send (non-blocking `connect` + `sendmsg`, or `sendmsg` of a
//! datagram, with `MSG_DONTWAIT`, then closed). So an application that
//! closes descriptors it does not know (`closefrom`, `close_range`, a close
//! loop), duplicates onto a number (`F_DUPFD`, `dup2`), or probes one
//! (`fcntl`, `write`, `lseek`) sees exactly what it would see without the
//! shim, and no trace byte can land in a file the application opened later
//! on a number the shim once held. The flush path uses raw syscalls (not
//! libc's cancellation points, not our own interposed entry points). Cost:
//! three syscalls more per 16 KiB batch, four through a connection
//! (`docs/shim.md`, "Descriptors").
//!
//! A record is written whole or not at all: an append that the file system
//! accepts only in part (`ENOSPC`, `EFBIG`) is cut back to where it began,
//! and its events are counted as dropped, like a failed datagram. The
//! events a process failed to append are also counted in a marker beside its
//! trace, `<trace>.lost`, whose file *size* is that count (no data block: it
//! can be written on a full file system), so the recorder reports losses
//! even when the trace's tail (with its EXIT) is what was lost.

use crate::events::{self, Enc};
use libc::{c_int, c_long, c_void, iovec};
use std::cell::UnsafeCell;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Longest trace-file or socket path the shim keeps (with its NUL).
const PATH_CAP: usize = 4096;

/// A NUL-terminated path set while single-threaded (init, fork child) and
/// read by flushes after its `on` flag is seen set (release/acquire).
struct PathSlot {
    on: AtomicBool,
    bytes: UnsafeCell<[u8; PATH_CAP]>,
}

// SAFETY: `bytes` is written only while `on` is false and no flush can read
// it (constructor before the shim is active, a fork child's single thread),
// and read only after an acquire load of `on` saw true.
unsafe impl Sync for PathSlot {}

impl PathSlot {
    const fn new() -> Self {
        PathSlot {
            on: AtomicBool::new(false),
            bytes: UnsafeCell::new([0; PATH_CAP]),
        }
    }

    /// Stores `p` (without NUL) and turns the slot on; false if too long.
    fn set(&self, p: &[u8]) -> bool {
        self.on.store(false, Ordering::Release);
        if p.len() >= PATH_CAP || p.contains(&0) {
            return false;
        }
        // SAFETY: see the Sync impl: no reader while `on` is false.
        let b = unsafe { &mut *self.bytes.get() };
        b[..p.len()].copy_from_slice(p);
        b[p.len()] = 0;
        self.on.store(true, Ordering::Release);
        true
    }

    fn off(&self) {
        self.on.store(false, Ordering::Release);
    }

    fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// The NUL-terminated path, when on.
    fn get(&self) -> Option<&[u8; PATH_CAP]> {
        if self.on.load(Ordering::Acquire) {
            // SAFETY: see the Sync impl.
            Some(unsafe { &*self.bytes.get() })
        } else {
            None
        }
    }
}

static TRACE_PATH: PathSlot = PathSlot::new();
/// `<trace>.lost`: its *size* is the number of events this process could not
/// append to its trace (a sparse file: no data block, so it can be created
/// and grown on a full file system, given an inode).
static LOST_PATH: PathSlot = PathSlot::new();
static RECORD_LOST: AtomicU64 = AtomicU64::new(0);
static SOCK_PATH: PathSlot = PathSlot::new();
/// The daemon's connection socket (`SOCK_SEQPACKET`, `events.seq` beside
/// `events.sock`), when it had one as the shim turned on.
static CONN_PATH: PathSlot = PathSlot::new();
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
    TRACE_PATH.is_on() || SOCK_PATH.is_on()
}

/// A raw syscall's result as `Result` (errno on failure), never through
/// libc's wrappers (no cancellation point, no interposed symbol).
fn sys(r: c_long) -> Result<c_long, c_int> {
    if r < 0 {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO))
    } else {
        Ok(r)
    }
}

fn sys_close(fd: c_int) {
    // SAFETY: closes a descriptor this module opened a moment ago.
    unsafe { libc::syscall(libc::SYS_close, fd) };
}

/// `openat(AT_FDCWD, path, flags, mode)` as a raw syscall.
fn sys_open(path: &[u8; PATH_CAP], flags: c_int, mode: libc::mode_t) -> Result<c_int, c_int> {
    // SAFETY: `path` is NUL-terminated (PathSlot::set / the caller).
    sys(unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, path.as_ptr(), flags, mode) })
        .map(|fd| fd as c_int)
}

/// Appends `iov` to the file at `path` as one record: whole, or not at all
/// (a partial append is truncated away). Returns whether it was written.
fn append_whole(path: &[u8; PATH_CAP], iov: &[iovec]) -> bool {
    let total: usize = iov.iter().map(|v| v.iov_len).sum();
    let Ok(fd) = sys_open(path, libc::O_WRONLY | libc::O_APPEND | libc::O_CLOEXEC, 0) else {
        return false;
    };
    let mut r = Err(libc::EINTR);
    for _ in 0..3 {
        // SAFETY: iov points to live buffers; fd is the trace file just opened.
        r = sys(unsafe { libc::syscall(libc::SYS_writev, fd, iov.as_ptr(), iov.len() as c_int) });
        if r != Err(libc::EINTR) {
            break;
        }
    }
    let ok = match r {
        Ok(n) if n as usize == total => true,
        Ok(n) if n > 0 => {
            // Cut the torn record off, unless someone appended after it
            // (another thread's flush: its own append failed the same way).
            // SAFETY: plain lseek/fstat/ftruncate on our descriptor.
            unsafe {
                let end = libc::syscall(libc::SYS_lseek, fd, 0 as libc::off_t, libc::SEEK_CUR);
                let mut st: libc::stat = std::mem::zeroed();
                if end >= n
                    && libc::syscall(libc::SYS_fstat, fd, &mut st) == 0
                    && st.st_size == end as libc::off_t
                {
                    libc::syscall(libc::SYS_ftruncate, fd, end - n);
                }
            }
            false
        }
        _ => false,
    };
    sys_close(fd);
    ok
}

/// Counts `n` events that did not reach the trace file in its marker.
///
/// Threads that fail at once must not undo each other's count (one reading
/// the size, another growing the file, the first cutting it back to its
/// smaller total: a whole batch went uncounted in `shim_record_losses`), so
/// the update holds an exclusive `flock` on the marker and reads the
/// process's total inside it: the size only grows.
fn note_lost(n: u64) {
    RECORD_LOST.fetch_add(n, Ordering::Relaxed);
    let Some(path) = LOST_PATH.get() else {
        return;
    };
    let Ok(fd) = sys_open(
        path,
        libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
        0o644,
    ) else {
        return;
    };
    // SAFETY: plain flock/fstat/ftruncate on the descriptor just opened
    // (closing it releases the lock).
    unsafe {
        libc::syscall(libc::SYS_flock, fd, libc::LOCK_EX);
        let total = RECORD_LOST.load(Ordering::Relaxed);
        let mut st: libc::stat = std::mem::zeroed();
        if libc::syscall(libc::SYS_fstat, fd, &mut st) == 0 && (st.st_size as u64) < total {
            libc::syscall(libc::SYS_ftruncate, fd, total as libc::off_t);
        }
    }
    sys_close(fd);
}

/// Events counted as lost by this process so far (failed appends).
pub fn lost_so_far() -> u64 {
    RECORD_LOST.load(Ordering::Relaxed)
}

/// Counts `n` more events as lost in the trace file's marker (the events
/// an EXIT that could not be appended was reporting as dropped).
pub fn count_lost(n: u64) {
    if n > 0 {
        note_lost(n);
    }
}

/// Whether batches go to the daemon's socket.
pub fn socket_on() -> bool {
    SOCK_PATH.is_on()
}

/// The daemon's connection socket beside its datagram socket `path`:
/// `path` without a trailing `.sock`, plus `.seq` (`events.sock` →
/// `events.seq`).
pub fn conn_path_of(path: &[u8]) -> Vec<u8> {
    let mut p = path.strip_suffix(b".sock").unwrap_or(path).to_vec();
    p.extend_from_slice(b".seq");
    p
}

/// Uses the daemon socket at `path` if it exists (at init, or once when a
/// daemon appears later: `live.rs`, while the slot is off), and its
/// connection socket ([`conn_path_of`]) if that exists too.
pub fn open_socket(path: &Path) -> bool {
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain data; zero is a valid value.
    let addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= addr.sun_path.len() || !path.exists() {
        return false;
    }
    let conn = conn_path_of(bytes);
    CONN_PATH.off();
    if conn.len() < addr.sun_path.len() && Path::new(std::ffi::OsStr::from_bytes(&conn)).exists() {
        CONN_PATH.set(&conn);
    }
    SOCK_PATH.set(bytes)
}

/// Tries after a full queue (EAGAIN) before the batch is dropped.
const SEND_RETRIES: u32 = 4;

/// `sockaddr_un` of a NUL-terminated path slot, and its length.
fn unix_addr(path: &[u8; PATH_CAP]) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: sockaddr_un is plain data; zero is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let n = path
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(0)
        .min(addr.sun_path.len() - 1);
    for (d, s) in addr.sun_path.iter_mut().zip(&path[..n]) {
        *d = *s as libc::c_char;
    }
    let alen = (std::mem::size_of::<libc::sa_family_t>() + n + 1) as libc::socklen_t;
    (addr, alen)
}

/// Runs `op` again after each of up to [`SEND_RETRIES`] `sched_yield`s
/// while it fails with `EAGAIN`: never a wait (a stopped or stuck daemon
/// costs that many yields per batch).
fn retry_full(mut op: impl FnMut() -> Result<c_long, c_int>) -> Result<c_long, c_int> {
    let mut r = op();
    for _ in 0..SEND_RETRIES {
        if r != Err(libc::EAGAIN) {
            break;
        }
        // SAFETY: sched_yield has no arguments and no preconditions.
        unsafe { libc::syscall(libc::SYS_sched_yield) };
        r = op();
    }
    r
}

/// A `socket(AF_UNIX, kind | SOCK_CLOEXEC, 0)` for one send.
fn sys_socket(kind: c_int) -> Result<c_int, c_int> {
    // SAFETY: plain socket(2) call.
    sys(unsafe {
        libc::syscall(
            libc::SYS_socket,
            libc::AF_UNIX,
            kind | libc::SOCK_CLOEXEC,
            0,
        )
    })
    .map(|fd| fd as c_int)
}

/// `sendmsg(fd, iov, MSG_DONTWAIT | MSG_NOSIGNAL)` to `addr` (or to the
/// connected peer), retried on a full queue; whether all of it went.
fn send_iov(
    fd: c_int,
    addr: Option<&mut (libc::sockaddr_un, libc::socklen_t)>,
    iov: &[iovec],
) -> bool {
    let total: usize = iov.iter().map(|v| v.iov_len).sum();
    // SAFETY: msghdr is plain data; zero is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    if let Some((a, len)) = addr {
        msg.msg_name = a as *mut libc::sockaddr_un as *mut c_void;
        msg.msg_namelen = *len;
    }
    msg.msg_iov = iov.as_ptr() as *mut iovec;
    msg.msg_iovlen = iov.len();
    let r = retry_full(|| {
        // SAFETY: msg points to live buffers for the duration of the call.
        sys(unsafe {
            libc::syscall(
                libc::SYS_sendmsg,
                fd,
                &msg,
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        })
    });
    r == Ok(total as c_long)
}

/// Sends one datagram to the daemon through a socket made for it.
///
/// The kernel queues at most `net.unix.max_dgram_qlen` datagrams for the
/// daemon (10 by default; pcstreamd raises its socket's to 1024 when it
/// may): a full queue gets a few yields of this thread's CPU before the
/// batch counts as dropped. The transport of a daemon without a
/// connection socket (an older one, a test's bare datagram socket).
fn send_datagram(path: &[u8; PATH_CAP], iov: &[iovec]) -> bool {
    let mut addr = unix_addr(path);
    let Ok(fd) = sys_socket(libc::SOCK_DGRAM) else {
        return false;
    };
    let ok = send_iov(fd, Some(&mut addr), iov);
    sys_close(fd);
    ok
}

/// Sends `bytes` as one datagram to the socket at `path` (the system log:
/// `syslog.rs`), through a socket made for it; whether it went. Never
/// waits (a full queue drops it after a few yields).
pub(crate) fn send_datagram_to(path: &std::path::Path, bytes: &[u8]) -> bool {
    let p = path.as_os_str().as_encoded_bytes();
    if p.len() >= PATH_CAP || p.contains(&0) {
        return false;
    }
    let mut b = [0u8; PATH_CAP];
    b[..p.len()].copy_from_slice(p);
    let iov = [iovec {
        iov_base: bytes.as_ptr() as *mut c_void,
        iov_len: bytes.len(),
    }];
    send_datagram(&b, &iov)
}

/// What a send through the connection socket came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Conn {
    Sent,
    Failed,
    /// No one listens there (the daemon restarted without it): use the
    /// datagram socket.
    Absent,
}

/// Sends one batch as the only record of a `SOCK_SEQPACKET` connection
/// made for it (non-blocking `connect`, `sendmsg`, `close`).
///
/// The daemon's listen backlog (up to `net.core.somaxconn`, 4096 by
/// default), not `max_dgram_qlen`, bounds how many batches wait for it,
/// and each waits in its own connection's buffer: the 10 datagrams of the
/// kernel's default queue, all a hardened daemon gets, no longer decide
/// what is lost. The kernel records the connecting process's pid and uid
/// (`SO_PEERCRED`), as `SCM_CREDENTIALS` did on a datagram. A stopped
/// daemon: the backlog fills, `connect` says `EAGAIN`, and after a few
/// yields the batch is dropped and counted.
fn send_conn(path: &[u8; PATH_CAP], iov: &[iovec]) -> Conn {
    let (addr, alen) = unix_addr(path);
    let Ok(fd) = sys_socket(libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK) else {
        return Conn::Failed;
    };
    let r = retry_full(|| {
        // SAFETY: addr is a valid sockaddr_un of length alen.
        sys(unsafe {
            libc::syscall(
                libc::SYS_connect,
                fd,
                &addr as *const libc::sockaddr_un,
                alen,
            )
        })
    });
    let out = match r {
        Ok(_) if send_iov(fd, None, iov) => Conn::Sent,
        Err(libc::ENOENT | libc::ECONNREFUSED) => Conn::Absent,
        _ => Conn::Failed,
    };
    sys_close(fd);
    out
}

/// Sends one batch to the daemon: through its connection socket when it
/// has one, else as a datagram.
fn send_to_daemon(sock: &[u8; PATH_CAP], iov: &[iovec]) -> bool {
    if let Some(conn) = CONN_PATH.get() {
        match send_conn(conn, iov) {
            Conn::Sent => return true,
            Conn::Failed => return false,
            Conn::Absent => {}
        }
    }
    send_datagram(sock, iov)
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

/// Creates this process's trace file in `dir` with the magic and the header
/// record, and makes it where later batches go (a fork child's replaces the
/// parent's). On failure, recording is off for this process and the error
/// message is returned.
pub fn open_trace(dir: &Path, h: &HeaderInfo<'_>) -> Result<std::path::PathBuf, String> {
    TRACE_PATH.off();
    LOST_PATH.off();
    RECORD_LOST.store(0, Ordering::Relaxed);
    let _ = std::fs::create_dir_all(dir);
    let path = dir.join(format!("{}-{}.pcstrace", pid(), h.start_mono_ns));
    // The file is created and given its header under a name readers skip,
    // then renamed: a process killed in between (SIGKILL right after exec)
    // leaves no headerless trace behind, only a `.part` file.
    let part = dir.join(format!("{}-{}.pcstrace.part", pid(), h.start_mono_ns));
    let c = CString::new(part.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    let cb = c.as_bytes_with_nul();
    if cb.len() > PATH_CAP {
        return Err(format!("{}: path too long", path.display()));
    }
    let mut buf = [0u8; PATH_CAP];
    buf[..cb.len()].copy_from_slice(cb);
    let fd = sys_open(
        &buf,
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
        0o644,
    )
    .map_err(|e| {
        format!(
            "{}: {}",
            path.display(),
            std::io::Error::from_raw_os_error(e)
        )
    })?;
    // In a shared record directory (world-writable and sticky, as
    // `pcstreamctl record` makes it) a process that switches user later (a
    // fork child of runuser before its exec, a server dropping root) must
    // still append to the file it created: let every user write it.
    use std::os::unix::fs::PermissionsExt;
    if std::fs::metadata(dir).is_ok_and(|m| m.permissions().mode() & 0o1002 == 0o1002) {
        // SAFETY: plain fchmod on the descriptor just created.
        unsafe { libc::syscall(libc::SYS_fchmod, fd, 0o666 as libc::mode_t) };
    }
    sys_close(fd);
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
    let iov = [iovec {
        iov_base: bytes.as_ptr() as *mut c_void,
        iov_len: bytes.len(),
    }];
    if !append_whole(&buf, &iov) || std::fs::rename(&part, &path).is_err() {
        let _ = std::fs::remove_file(&part);
        return Err(format!("{}: cannot write the header", path.display()));
    }
    let mut lost = path.as_os_str().as_bytes().to_vec();
    lost.extend_from_slice(b".lost");
    LOST_PATH.set(&lost);
    TRACE_PATH.set(path.as_os_str().as_bytes());
    Ok(path)
}

/// Sends/records one batch of already-encoded `Event` fields (`events` holds
/// `count` length-prefixed field-3 entries of an `EventBatch`). Returns
/// whether it reached every sink it was meant for (if not, the caller
/// counts its events as dropped).
#[must_use]
pub fn emit_batch(events: &[u8], count: u32) -> bool {
    // EventBatch header fields: pid (1), seq (2).
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let mut head = [0u8; 48];
    let mut hb = [0u8; 24];
    let mut h = Enc::new(&mut hb);
    h.uint(1, pid() as u64);
    h.uint(2, seq);
    let hlen = h.bytes().len();
    let batch_len = hlen + events.len();
    let mut lost = false;

    if let Some(path) = SOCK_PATH.get() {
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
        lost |= !send_to_daemon(path, &iov);
    }

    if let Some(path) = TRACE_PATH.get() {
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
        if !append_whole(path, &iov) {
            lost = true;
            note_lost(count as u64);
        }
    }
    !lost
}
