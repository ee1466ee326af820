//! Event ingest: the unix datagram socket `events.sock` the shims send
//! their `EventBatch`es to. The sender's pid and uid come from the kernel
//! (`SO_PASSCRED` → `SCM_CREDENTIALS` on every datagram), never from the
//! payload. A datagram that is truncated, carries no credentials or does
//! not decode is counted as malformed and dropped; nothing a client sends
//! can stop the loop. The socket is mode 0666: every local user is a client.

use crate::state::Shared;
use nix::sys::socket::{
    recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, UnixAddr, UnixCredentials,
};
use pcstream_placement::online;
use pcstream_placement::wire;
use std::io::IoSliceMut;
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::io::Interest;
use tokio::net::UnixDatagram;

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
}

/// Decodes one datagram's payload (`online::decode_batch`, fuzzed by
/// `fuzz/fuzz_targets/daemon_datagram.rs`).
pub fn decode_datagram(buf: &[u8]) -> Result<wire::EventBatch, DatagramError> {
    online::decode_batch(buf).map_err(|e| DatagramError::Decode(e.to_string()))
}

/// Binds `events.sock` in `dir` (replacing a stale socket file).
pub fn bind(dir: &Path) -> anyhow::Result<UnixDatagram> {
    let path = dir.join("events.sock");
    let _ = std::fs::remove_file(&path);
    let sock = UnixDatagram::bind(&path)
        .map_err(|e| anyhow::anyhow!("cannot bind event socket {}: {e}", path.display()))?;
    setsockopt(&sock, sockopt::PassCred, &true)
        .map_err(|e| anyhow::anyhow!("SO_PASSCRED on {}: {e}", path.display()))?;
    // A large receive buffer absorbs bursts; the kernel caps it at rmem_max.
    let _ = setsockopt(&sock, sockopt::RcvBuf, &(8 << 20));
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))
        .map_err(|e| anyhow::anyhow!("chmod {}: {e}", path.display()))?;
    Ok(sock)
}

/// One received datagram: (uid, pid, payload length) or an error.
fn recv_one(
    sock: &UnixDatagram,
    buf: &mut [u8],
) -> std::io::Result<Result<(u32, u32, usize), DatagramError>> {
    let cap = buf.len();
    let mut cmsg = nix::cmsg_space!(UnixCredentials);
    let mut iov = [IoSliceMut::new(buf)];
    let msg = recvmsg::<UnixAddr>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::MSG_DONTWAIT,
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

/// Receives and ingests datagrams until the socket fails.
pub async fn run(sock: UnixDatagram, shared: Arc<Shared>) {
    let max = shared
        .config
        .lock()
        .map(|c| c.max_datagram_bytes)
        .unwrap_or(1 << 20);
    let mut buf = vec![0u8; max];
    loop {
        let r = sock
            .async_io(Interest::READABLE, || recv_one(&sock, &mut buf))
            .await;
        let res = match r {
            Ok(res) => res,
            Err(e) => {
                tracing::error!(error = %e, "event socket receive failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let batch = res.and_then(|(uid, pid, n)| decode_datagram(&buf[..n]).map(|b| (uid, pid, b)));
        match batch {
            Ok((uid, pid, mut b)) => {
                let mut guard = shared.inner.lock().unwrap_or_else(|e| e.into_inner());
                let inner = &mut *guard;
                inner.saw_client(pid);
                let over = inner.quota.admit(&inner.engine, uid, &mut b);
                if over > 0 && (inner.quota.over - over == 0 || inner.quota.over.is_power_of_two())
                {
                    tracing::warn!(
                        uid,
                        over_quota = inner.quota.over,
                        "per-uid signature bound reached"
                    );
                }
                inner.engine.ingest(uid, pid, &b);
                shared.after_change(inner);
            }
            Err(e) => {
                let n = shared.counters.malformed.fetch_add(1, Ordering::Relaxed);
                if n < 10 || n.is_power_of_two() {
                    tracing::warn!(error = %e, malformed = n + 1, "datagram rejected");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

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
