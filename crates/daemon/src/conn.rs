//! The connection transport: `events.seq`, a `SOCK_SEQPACKET` listener
//! beside the datagram socket `events.sock`. A shim connects for each
//! flush, sends its `EventBatch` as one record and closes; the kernel
//! records the connecting process's pid and uid (`SO_PEERCRED`), which the
//! daemon reads at `accept` (never the payload's pid, as with
//! `SCM_CREDENTIALS` on a datagram).
//!
//! Why: the kernel queues at most `net.unix.max_dgram_qlen` datagrams on a
//! datagram socket (10 by default), and the packaged unit cannot raise it
//! (`ProtectKernelTunables=`), so a few writer processes flushing at once
//! while the receiver was off the CPU lost batches. Connections wait in
//! the listen backlog instead (`net.core.somaxconn`, 4096 by default),
//! each batch in its own connection's buffer.
//!
//! One thread of its own (`pcstreamd-conn`) accepts and reads, with
//! `poll(2)` over the listener and the connections whose record has not
//! arrived yet (a shim preempted between its `connect` and its `sendmsg`),
//! and hands each record to the same queue as the datagram receiver
//! (`ingest`). Bounded: at most [`MAX_OPEN`] connections wait for their
//! record, each for at most [`RECORD_WAIT`]; a connection that sends
//! nothing in time is closed and counted as malformed; a record larger
//! than `max_datagram_bytes` is counted as truncated. After accepting a
//! round, it lets the next connections gather in the backlog for
//! `GATHER`: one wake-up per interval on a busy machine.

use crate::ingest::{DatagramError, Queue};
use nix::libc;
use nix::sys::socket::{
    accept4, bind as sock_bind, getsockopt, listen, socket, sockopt, AddressFamily, Backlog,
    SockFlag, SockType, UnixAddr,
};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// File name of the connection socket in the runtime directory (the
/// shim's rule: `events.sock` without `.sock`, plus `.seq`).
pub const SOCKET_NAME: &str = "events.seq";

/// Connections that wait for their record at once, at most.
pub const MAX_OPEN: usize = 1024;

/// How long a connection may take to send its record.
pub const RECORD_WAIT: Duration = Duration::from_secs(2);

/// Binds `events.seq` in `dir` (replacing a stale socket file), mode 0666.
pub fn bind(dir: &Path) -> anyhow::Result<OwnedFd> {
    let path = dir.join(SOCKET_NAME);
    let _ = std::fs::remove_file(&path);
    let fd = socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )
    .map_err(|e| anyhow::anyhow!("cannot make the connection socket: {e}"))?;
    let addr = UnixAddr::new(&path)
        .map_err(|e| anyhow::anyhow!("connection socket {}: {e}", path.display()))?;
    sock_bind(fd.as_raw_fd(), &addr)
        .map_err(|e| anyhow::anyhow!("cannot bind connection socket {}: {e}", path.display()))?;
    // -1: the kernel's bound, net.core.somaxconn (4096 by default).
    let backlog = Backlog::MAXALLOWABLE;
    listen(&fd, backlog).map_err(|e| anyhow::anyhow!("listen on {}: {e}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))
        .map_err(|e| anyhow::anyhow!("chmod {}: {e}", path.display()))?;
    Ok(fd)
}

/// An accepted connection whose record has not been read yet.
struct Open {
    fd: OwnedFd,
    uid: u32,
    pid: u32,
    since: Instant,
}

/// What reading a connection came to.
enum Read {
    /// Its record (or error) went to the queue, or it closed: done.
    Done,
    /// Nothing yet.
    Waiting,
}

/// Reads what `c` has sent (non-blocking) into the queue.
fn read(c: &Open, buf: &mut [u8], queue: &Queue) -> Read {
    loop {
        // SAFETY: recv into our buffer on a descriptor we own. MSG_TRUNC
        // makes it return a record's real length (Linux ≥ 3.4).
        let r = unsafe {
            libc::recv(
                c.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            )
        };
        if r > 0 {
            let n = r as usize;
            if n > buf.len() {
                queue.push(Err(DatagramError::Truncated(buf.len())));
            } else {
                queue.push(Ok((c.uid, c.pid, &buf[..n])));
            }
            // One record per connection: the shim closes after it.
            return Read::Done;
        }
        if r == 0 {
            return Read::Done;
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => return Read::Waiting,
            _ => return Read::Done,
        }
    }
}

/// Accepts every waiting connection; each is read at once (its record is
/// usually there already) or kept in `open`.
fn accept_all(
    listener: RawFd,
    open: &mut Vec<Open>,
    buf: &mut [u8],
    queue: &Queue,
    refused: &dyn Fn(DatagramError),
) {
    loop {
        let fd = match accept4(listener, SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK) {
            // SAFETY: accept4 returned a new descriptor that we own.
            Ok(fd) => unsafe { OwnedFd::from_raw_fd(fd) },
            Err(nix::errno::Errno::EINTR | nix::errno::Errno::ECONNABORTED) => continue,
            Err(nix::errno::Errno::EAGAIN) => return,
            Err(e) => {
                // EMFILE and the like: let the backlog wait a moment.
                tracing::error!(error = %e, "accept on {SOCKET_NAME} failed");
                std::thread::sleep(Duration::from_millis(10));
                return;
            }
        };
        let Ok(cred) = getsockopt(&fd, sockopt::PeerCredentials) else {
            refused(DatagramError::NoCredentials);
            continue;
        };
        let c = Open {
            fd,
            uid: cred.uid(),
            pid: cred.pid() as u32,
            since: Instant::now(),
        };
        if let Read::Waiting = read(&c, buf, queue) {
            if open.len() >= MAX_OPEN {
                open.remove(0);
                refused(DatagramError::NoRecord(RECORD_WAIT));
            }
            open.push(c);
        }
    }
}

/// Accepts connections and reads their records into `queue`, forever.
/// `max`: the largest record taken (`max_datagram_bytes`).
pub(crate) fn serve(listener: OwnedFd, queue: &Queue, max: usize, refused: &dyn Fn(DatagramError)) {
    let mut buf = vec![0u8; max];
    let mut open: Vec<Open> = Vec::new();
    let mut fds: Vec<libc::pollfd> = Vec::new();
    loop {
        fds.clear();
        fds.push(libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        fds.extend(open.iter().map(|c| libc::pollfd {
            fd: c.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }));
        let timeout = if open.is_empty() { -1 } else { 100 };
        // SAFETY: fds is a live array of fds.len() pollfd entries.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
        if n < 0 {
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                tracing::error!(error = %std::io::Error::last_os_error(), "poll on {SOCKET_NAME} failed");
                std::thread::sleep(Duration::from_millis(100));
            }
            continue;
        }
        // Connections first (they came before the ones waiting to be accepted).
        let now = Instant::now();
        let mut i = 0;
        let mut k = 1;
        while i < open.len() {
            let ready = fds.get(k).is_some_and(|p| p.revents != 0);
            k += 1;
            let done = if ready {
                matches!(read(&open[i], &mut buf, queue), Read::Done)
            } else {
                false
            };
            if done {
                open.remove(i);
            } else if now.duration_since(open[i].since) > RECORD_WAIT {
                open.remove(i);
                refused(DatagramError::NoRecord(RECORD_WAIT));
            } else {
                i += 1;
            }
        }
        if fds[0].revents != 0 {
            accept_all(listener.as_raw_fd(), &mut open, &mut buf, queue, refused);
            // Let the next connections gather in the backlog: one wake-up
            // per interval on a busy machine, not one per batch.
            std::thread::sleep(GATHER);
        }
    }
}

/// How long the thread lets connections gather in the listen backlog after
/// accepting a round of them: on a machine the applications saturate, a
/// wake-up per batch (~400 a second from a PostgreSQL server under
/// pgbench) takes a CPU from them each time. At most `somaxconn` (4096)
/// batches wait: a few hundred thousand a second.
const GATHER: Duration = Duration::from_millis(10);
