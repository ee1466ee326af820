//! Event ingest: the unix datagram socket `events.sock` the shims send
//! their `EventBatch`es to. The sender's pid and uid come from the kernel
//! (`SO_PASSCRED` → `SCM_CREDENTIALS` on every datagram), never from the
//! payload. A datagram that is truncated, carries no credentials or does
//! not decode is counted as malformed and dropped; nothing a client sends
//! can stop the loop. The socket is mode 0666: every local user is a client.
//!
//! Two threads of their own, not tokio tasks: a receiver that does nothing
//! but `recvmsg` into a queue bounded in bytes ([`QUEUE_BYTES`]), and an
//! ingester that decodes and learns from what it takes off the queue. The
//! kernel keeps at most `net.unix.max_dgram_qlen` (10 by default, per
//! network namespace, read when a socket is made) datagrams waiting on a
//! datagram socket, and a shim never waits for room: a sender that finds the
//! queue full drops its batch (counted as dropped by clients). The daemon
//! raises that value for `events.sock` alone when it may ([`bind`]). With learning
//! and re-clustering inline in the receive loop, a PostgreSQL server under
//! pgbench (30 processes on 2 loaded cores) lost 2% of its events that way;
//! a receiver that is always back in `recvmsg` within microseconds keeps the
//! kernel's queue short.

use crate::state::Shared;
use nix::libc;
use nix::sys::socket::{
    recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, UnixAddr, UnixCredentials,
};
use pcstream_placement::online;
use pcstream_placement::wire;
use std::io::IoSliceMut;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};

/// Bytes of received, not yet ingested datagrams the daemon holds at most;
/// beyond, the receiver waits and the kernel's queue (then the clients)
/// absorb the excess, as without the queue.
pub const QUEUE_BYTES: usize = 256 << 10;

/// How long the ingester lets batches gather after the first one before it
/// takes them all: one wake-up per interval on a busy machine rather than
/// one per batch (a PostgreSQL server under pgbench sends ~400 batches a
/// second, and every wake-up of a daemon thread takes a CPU from a backend
/// that may hold a lock the other one waits for). The learnt lifetimes do
/// not depend on it (the logical clock is bytes written); a mapping is
/// published at most this much later.
pub const COALESCE: std::time::Duration = std::time::Duration::from_millis(20);

/// Why a datagram was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DatagramError {
    /// Larger than the receive buffer.
    #[error("datagram larger than {0} bytes")]
    Truncated(usize),
    /// No `SCM_CREDENTIALS` attached.
    #[error("datagram without sender credentials")]
    NoCredentials,
    /// Not an `EventBatch`.
    #[error("datagram is not an EventBatch: {0}")]
    Decode(String),
    /// A connection to `events.seq` that sent no record in time.
    #[error("connection sent no record within {0:?}")]
    NoRecord(std::time::Duration),
}

/// Decodes one datagram's payload (`online::decode_batch`, fuzzed by
/// `fuzz/fuzz_targets/daemon_datagram.rs`).
pub fn decode_datagram(buf: &[u8]) -> Result<wire::EventBatch, DatagramError> {
    online::decode_batch(buf).map_err(|e| DatagramError::Decode(e.to_string()))
}

/// The kernel's queue length for unix datagram sockets made from now on in
/// this network namespace (it is read when a socket is created).
const MAX_DGRAM_QLEN: &str = "/proc/sys/net/unix/max_dgram_qlen";

/// Runs `make` (which creates the socket) with `net.unix.max_dgram_qlen`
/// raised to `want` when it is lower and the daemon may write it (root,
/// `/proc/sys` writable: not under the packaged unit's
/// `ProtectKernelTunables=`/`PrivateNetwork=`), then puts the old value
/// back, so that only this socket gets the longer queue. Returns what
/// `make` returned and the queue length the socket got.
///
/// Why: a shim never waits for room, so when the receiver thread is not
/// scheduled for a moment (8 writer processes on 2 CPUs) the kernel's 10
/// datagrams fill and batches drop: 8 fio jobs writing 4 KiB at random
/// through the shim dropped up to 46% of their events with 10, none with
/// 1024 in six rounds each (docs/daemon.md, "Event transport").
fn with_queue<T>(want: u32, make: impl FnOnce() -> T) -> (T, u32) {
    let cur = std::fs::read_to_string(MAX_DGRAM_QLEN)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    let Some(cur) = cur else {
        return (make(), 0);
    };
    if want <= cur {
        return (make(), cur);
    }
    if let Err(e) = std::fs::write(MAX_DGRAM_QLEN, want.to_string()) {
        tracing::info!(
            queue = cur,
            wanted = want,
            error = %e,
            "events.sock keeps the kernel's datagram queue (cannot raise {MAX_DGRAM_QLEN})"
        );
        return (make(), cur);
    }
    let r = make();
    if let Err(e) = std::fs::write(MAX_DGRAM_QLEN, cur.to_string()) {
        tracing::warn!(error = %e, "cannot put {MAX_DGRAM_QLEN} back to {cur}");
    }
    (r, want)
}

/// Binds `events.sock` in `dir` (replacing a stale socket file), with a
/// datagram queue of `queue` if the daemon may raise it (`with_queue`).
/// Returns the socket and the queue length it got (0: unknown).
pub fn bind(dir: &Path, queue: u32) -> anyhow::Result<(UnixDatagram, u32)> {
    let path = dir.join("events.sock");
    let _ = std::fs::remove_file(&path);
    let (sock, qlen) = with_queue(queue, || UnixDatagram::bind(&path));
    let sock =
        sock.map_err(|e| anyhow::anyhow!("cannot bind event socket {}: {e}", path.display()))?;
    setsockopt(&sock, sockopt::PassCred, &true)
        .map_err(|e| anyhow::anyhow!("SO_PASSCRED on {}: {e}", path.display()))?;
    // A large receive buffer absorbs bursts; the kernel caps it at rmem_max.
    let _ = setsockopt(&sock, sockopt::RcvBuf, &(8 << 20));
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))
        .map_err(|e| anyhow::anyhow!("chmod {}: {e}", path.display()))?;
    Ok((sock, qlen))
}

/// One received datagram: (uid, pid, payload length) or an error.
fn recv_one(
    sock: &UnixDatagram,
    buf: &mut [u8],
) -> std::io::Result<Result<(u32, u32, usize), DatagramError>> {
    // Blocking: the receiver thread has nothing else to do.
    let cap = buf.len();
    let mut cmsg = nix::cmsg_space!(UnixCredentials);
    let mut iov = [IoSliceMut::new(buf)];
    let msg = recvmsg::<UnixAddr>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::empty(),
    )
    .map_err(std::io::Error::from)?;
    if msg.flags.contains(MsgFlags::MSG_TRUNC) {
        return Ok(Err(DatagramError::Truncated(cap)));
    }
    let mut cred = None;
    if let Ok(cmsgs) = msg.cmsgs() {
        for c in cmsgs {
            if let ControlMessageOwned::ScmCredentials(u) = c {
                cred = Some((u.uid(), u.pid() as u32));
            }
        }
    }
    let n = msg.bytes;
    Ok(match cred {
        Some((uid, pid)) => Ok((uid, pid, n)),
        None => Err(DatagramError::NoCredentials),
    })
}

/// A received datagram: (uid, pid, payload) or why it was refused.
type Received<'a> = Result<(u32, u32, &'a [u8]), DatagramError>;

/// Bytes before each queued datagram: kind (0 received, 1 truncated, 2 no
/// credentials), uid (the receive buffer's size for a truncated one), pid,
/// payload length; all little-endian.
const RECORD_HEAD: usize = 13;

/// What the receiver hands the ingester: datagrams framed one after the
/// other in one buffer of at most [`QUEUE_BYTES`] (one larger datagram is
/// let in alone). The ingester swaps the whole buffer for its own emptied
/// one, so the two buffers are allocated once and reused: no allocation
/// per datagram, and the daemon's memory stays what its tables need.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    pending: Mutex<Vec<u8>>,
    filled: Condvar,
    drained: Condvar,
}

impl Queue {
    pub(crate) fn push(&self, item: Received<'_>) {
        let (kind, uid, pid, payload): (u8, u32, u32, &[u8]) = match item {
            Ok((uid, pid, b)) => (0, uid, pid, b),
            Err(DatagramError::Truncated(cap)) => {
                (1, u32::try_from(cap).unwrap_or(u32::MAX), 0, &[])
            }
            Err(_) => (2, 0, 0, &[]),
        };
        let size = RECORD_HEAD + payload.len();
        let mut q = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        while q.len() + size > QUEUE_BYTES && !q.is_empty() {
            q = self.drained.wait(q).unwrap_or_else(|e| e.into_inner());
        }
        let before = q.len();
        q.push(kind);
        q.extend_from_slice(&uid.to_le_bytes());
        q.extend_from_slice(&pid.to_le_bytes());
        q.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        q.extend_from_slice(payload);
        // The ingester waits for the first datagram, then for half the
        // queue or [`COALESCE`]: only those two moments wake it.
        if before == 0 || (before < QUEUE_BYTES / 2 && q.len() >= QUEUE_BYTES / 2) {
            self.filled.notify_one();
        }
    }

    /// Swaps everything queued into `out` (emptied first): waits for a
    /// first datagram, then lets more gather for up to [`COALESCE`] (less
    /// once half the queue is used).
    fn take_into(&self, out: &mut Vec<u8>) {
        out.clear();
        let mut q = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        while q.is_empty() {
            q = self.filled.wait(q).unwrap_or_else(|e| e.into_inner());
        }
        q = self
            .filled
            .wait_timeout_while(q, COALESCE, |q| q.len() < QUEUE_BYTES / 2)
            .unwrap_or_else(|e| e.into_inner())
            .0;
        std::mem::swap(&mut *q, out);
        self.drained.notify_all();
    }
}

/// The datagrams framed in a buffer [`Queue::take_into`] filled.
fn framed(mut buf: &[u8]) -> impl Iterator<Item = Received<'_>> {
    std::iter::from_fn(move || {
        if buf.len() < RECORD_HEAD {
            return None;
        }
        let word = |i: usize| u32::from_le_bytes(buf[i..i + 4].try_into().expect("4 bytes"));
        let (kind, uid, pid, len) = (buf[0], word(1), word(5), word(9) as usize);
        let payload = &buf[RECORD_HEAD..RECORD_HEAD + len];
        buf = &buf[RECORD_HEAD + len..];
        Some(match kind {
            0 => Ok((uid, pid, payload)),
            1 => Err(DatagramError::Truncated(uid as usize)),
            _ => Err(DatagramError::NoCredentials),
        })
    })
}

/// Starts the receiver, the connection ([`crate::conn`]) and the ingester
/// threads; they run until the process exits.
pub fn spawn(sock: UnixDatagram, conn: OwnedFd, shared: Arc<Shared>) -> anyhow::Result<()> {
    let max = shared
        .config
        .lock()
        .map(|c| c.max_datagram_bytes)
        .unwrap_or(1 << 20);
    let queue = Arc::new(Queue::default());
    let q = queue.clone();
    std::thread::Builder::new()
        .name("pcstreamd-recv".into())
        .spawn(move || receive(&sock, &q, max))
        .map_err(|e| anyhow::anyhow!("cannot start the event receiver thread: {e}"))?;
    let q = queue.clone();
    let sh = shared.clone();
    std::thread::Builder::new()
        .name("pcstreamd-conn".into())
        .spawn(move || crate::conn::serve(conn, &q, max, &|e| refused(&e, &sh)))
        .map_err(|e| anyhow::anyhow!("cannot start the connection thread: {e}"))?;
    std::thread::Builder::new()
        .name("pcstreamd-ingest".into())
        .spawn(move || {
            yield_to_applications();
            let learn = move || {
                let mut batch = Vec::new();
                loop {
                    queue.take_into(&mut batch);
                    for item in framed(&batch) {
                        ingest_one(item, &shared);
                    }
                }
            };
            match learning_pool() {
                Some(pool) => pool.install(learn),
                None => learn(),
            }
        })
        .map_err(|e| anyhow::anyhow!("cannot start the event ingest thread: {e}"))?;
    Ok(())
}

/// Nice value of the learning threads (the ingester lowers its own at start).
pub const LEARN_NICE: i32 = 10;

/// The daemon never preempts the applications it serves: the calling
/// thread, and every thread it starts after this call, runs under
/// `SCHED_BATCH` (the scheduler treats it as CPU-bound: a wake-up, of a
/// receiver on a batch's arrival or of the gRPC loop, waits for the running
/// task's slice instead of preempting it). [`crate::daemon::run`] calls it
/// first, on the runtime's thread. The threads keep a fair share of the CPU
/// (nice 0), so the kernel's queues still drain; a batch waits in its
/// connection (the listen backlog holds thousands) a few milliseconds at
/// most. Measured: pgbench (2 clients, PostgreSQL under the shim, 2 vCPUs
/// it saturates), 10 s runs alternating with native, 5 rounds: 0.857x native
/// tps with the receivers at the default policy, 0.939x under `SCHED_BATCH`,
/// in one run (runs differ by as much: docs/daemon.md). A preempted backend
/// may hold a lock the other one waits for. Failing to set it is not an
/// error (a seccomp filter may refuse).
pub fn never_preempt_applications() {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: a plain syscall on the calling thread (on Linux the policy
    // belongs to the thread, `0` naming the caller); `p` outlives it.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &p) } != 0 {
        tracing::debug!(
            error = %std::io::Error::last_os_error(),
            "the daemon keeps the default scheduling policy"
        );
    }
}

/// Learning yields to the applications it learns from: the calling thread
/// (the ingester; the threads it starts inherit this) runs at nice
/// [`LEARN_NICE`] under `SCHED_BATCH`. On a saturated machine the ingest
/// queue, bounded, takes the lag. Measured (same pgbench): 0.86-0.90x
/// native tps with the learner at nice 0, 0.91-0.94x at nice 10.
fn yield_to_applications() {
    never_preempt_applications();
    // SAFETY: a plain syscall on the calling thread.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, LEARN_NICE) } != 0 {
        tracing::debug!(
            error = %std::io::Error::last_os_error(),
            "the learning thread keeps the default nice value"
        );
    }
}

/// The one-thread rayon pool the learner runs in (`pcstreamd-learn`,
/// inheriting the ingester's nice value and policy). linfa's k-means runs
/// its iterations as rayon parallel iterators: from outside a pool each
/// of them hands its work to the global pool's workers (one per CPU) and
/// sleeps until they finish, thousands of wake-ups per re-clustering, on
/// the CPUs the applications use, for a few dozen signatures that one
/// thread clusters in microseconds. Inside a pool of one they run inline.
/// The result does not depend on the thread count (the assignment is per
/// point). The global pool stays for a re-clustering asked over gRPC.
fn learning_pool() -> Option<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .thread_name(|_| "pcstreamd-learn".into())
        .build()
        .map_err(|e| tracing::debug!(error = %e, "the learner runs without its own pool"))
        .ok()
}

/// Receives datagrams into the queue, forever.
fn receive(sock: &UnixDatagram, queue: &Queue, max: usize) {
    let mut buf = vec![0u8; max];
    loop {
        match recv_one(sock, &mut buf) {
            Ok(res) => queue.push(res.map(|(uid, pid, n)| (uid, pid, &buf[..n]))),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                tracing::error!(error = %e, "event socket receive failed");
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    }
}

/// Decodes one datagram and feeds it to the sender's learner.
fn ingest_one(item: Received<'_>, shared: &Shared) {
    let batch = item.and_then(|(uid, pid, buf)| decode_datagram(buf).map(|b| (uid, pid, b)));
    match batch {
        Ok((uid, pid, mut b)) => {
            let mut guard = shared.inner.lock().unwrap_or_else(|e| e.into_inner());
            let inner = &mut *guard;
            inner.saw_client(pid);
            let over = inner.quota.admit(&inner.engine, uid, &mut b);
            if over > 0 && (inner.quota.over - over == 0 || inner.quota.over.is_power_of_two()) {
                tracing::warn!(
                    uid,
                    over_quota = inner.quota.over,
                    "per-uid signature bound reached"
                );
            }
            let crate::state::Inner {
                engine, classifier, ..
            } = inner;
            engine.ingest_in(uid, pid, &b, &mut |f| classifier.spec(f));
            shared.after_change(inner);
        }
        Err(e) => refused(&e, shared),
    }
}

/// Counts (and now and then logs) a refused datagram or connection.
fn refused(e: &DatagramError, shared: &Shared) {
    let n = shared.counters.malformed.fetch_add(1, Ordering::Relaxed);
    if n < 10 || n.is_power_of_two() {
        tracing::warn!(error = %e, malformed = n + 1, "datagram rejected");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn a_lone_small_datagram_is_taken_within_the_gathering_interval() {
        let q = Arc::new(Queue::default());
        let (tx, rx) = std::sync::mpsc::channel();
        let taker = {
            let q = q.clone();
            std::thread::spawn(move || {
                let mut b = Vec::new();
                q.take_into(&mut b);
                let n = framed(&b).count();
                tx.send((n, std::time::Instant::now())).unwrap();
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(30));
        let pushed = std::time::Instant::now();
        q.push(Ok((1, 2, &[7u8; 40])));
        let (n, taken) = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the ingester never woke for one small datagram");
        assert_eq!(n, 1);
        // It waited for more to gather, but not for ever.
        assert!(taken.duration_since(pushed) >= COALESCE / 2);
        taker.join().unwrap();
    }

    #[test]
    fn the_queue_hands_over_everything_in_order_and_bounds_its_bytes() {
        let q = Arc::new(Queue::default());
        let big = QUEUE_BYTES / 3;
        let producer = {
            let q = q.clone();
            std::thread::spawn(move || {
                for i in 0..6u32 {
                    q.push(Ok((i, 100 + i, &vec![i as u8; big])));
                }
                q.push(Err(DatagramError::Truncated(4096)));
                q.push(Err(DatagramError::NoCredentials));
                // One datagram larger than the queue gets in alone.
                q.push(Ok((9, 9, &vec![9u8; 2 * QUEUE_BYTES])));
            })
        };
        let mut seen = Vec::new();
        let mut batch = Vec::new();
        while seen.len() < 9 {
            q.take_into(&mut batch);
            assert!(
                batch.len() <= QUEUE_BYTES || framed(&batch).count() == 1,
                "{} bytes queued at once",
                batch.len()
            );
            for item in framed(&batch) {
                seen.push(item.map(|(uid, pid, b)| {
                    assert!(b.iter().all(|&x| x as u32 == uid), "payload of {uid}");
                    (uid, pid, b.len())
                }));
            }
        }
        producer.join().unwrap();
        let mut expect: Vec<_> = (0..6).map(|i| Ok((i, 100 + i, big))).collect();
        expect.push(Err(DatagramError::Truncated(4096)));
        expect.push(Err(DatagramError::NoCredentials));
        expect.push(Ok((9, 9, 2 * QUEUE_BYTES)));
        assert_eq!(seen, expect);
    }

    #[test]
    fn decoder_rejects_garbage_and_accepts_batches() {
        let b = wire::EventBatch {
            pid: 3,
            seq: 9,
            events: vec![wire::Event::default()],
        };
        assert_eq!(decode_datagram(&b.encode_to_vec()).unwrap(), b);
        assert!(matches!(
            decode_datagram(&[0xff; 7]),
            Err(DatagramError::Decode(_))
        ));
        // A length prefix claiming more than the datagram holds.
        assert!(decode_datagram(&[0x1a, 0xff, 0xff, 0xff, 0x7f, 1]).is_err());
    }
}
