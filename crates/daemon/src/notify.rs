//! sd_notify: READY / STATUS / STOPPING datagrams to `$NOTIFY_SOCKET` (a
//! path, or an abstract socket written `@name`). Hand-written: a single
//! datagram send is all the protocol needs here.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// Sends `msg` (e.g. `"READY=1\nSTATUS=learning"`) to systemd when
/// `$NOTIFY_SOCKET` is set; a failure is logged, never fatal.
pub fn notify(msg: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let res = (|| -> std::io::Result<()> {
        let sock = UnixDatagram::unbound()?;
        let bytes = path.as_encoded_bytes();
        let addr = match bytes.strip_prefix(b"@") {
            Some(name) => SocketAddr::from_abstract_name(name)?,
            None => SocketAddr::from_pathname(&path)?,
        };
        sock.send_to_addr(msg.as_bytes(), &addr)?;
        Ok(())
    })();
    if let Err(e) = res {
        tracing::warn!(socket = ?path, error = %e, "sd_notify failed");
    }
}
