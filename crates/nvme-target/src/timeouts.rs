//! How long a connection may keep the target waiting: to send its ICReq,
//! to connect its queue, to finish a PDU it has begun and to read what the
//! target sends; and how the controller's Keep Alive Timeout (KATO, from the
//! admin queue's Connect or Set Features 0Fh) is enforced. A connection that
//! misses one of these deadlines is closed (with its controller and that
//! controller's I/O queues when it is an admin queue whose KATO expired),
//! so idle or stalled sockets cannot hold the connection slots forever.
//!
//! The defaults are generous: a Linux host sends its ICReq and Connect
//! within milliseconds and a Keep Alive every KATO/2, and a slow emulated
//! (TCG) guest is still seconds inside every limit.

use std::time::{Duration, Instant};

use crate::controller::Ctrl;

/// Deadlines of one connection (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// From accept to a complete ICReq.
    pub icreq: Duration,
    /// From ICResp to a successful Fabrics Connect.
    pub connect: Duration,
    /// From the first byte of a PDU to its last.
    pub pdu: Duration,
    /// A send that makes no progress this long (the host reads nothing)
    /// ends the connection.
    pub send: Duration,
    /// Least grace after KATO: a controller with KATO `k` is deleted when
    /// none of its queues brought a command for `k + max(k, kato_grace)`.
    pub kato_grace: Duration,
    /// How often a connection waiting for bytes wakes to check its deadlines.
    pub tick: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            icreq: Duration::from_secs(10),
            connect: Duration::from_secs(10),
            pdu: Duration::from_secs(30),
            send: Duration::from_secs(60),
            kato_grace: Duration::from_secs(10),
            tick: Duration::from_secs(1),
        }
    }
}

/// Where a connection is in its life, for [`Clock::check`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    t: Timeouts,
    opened: Instant,
    /// When the ICReq was answered.
    ic_done: Option<Instant>,
    /// When the first byte of the PDU being received arrived.
    begun: Option<Instant>,
}

impl Clock {
    pub(crate) fn new(t: Timeouts) -> Clock {
        Clock {
            t,
            opened: Instant::now(),
            ic_done: None,
            begun: None,
        }
    }

    /// The ICReq was answered.
    pub(crate) fn ic_done(&mut self) {
        self.ic_done = Some(Instant::now());
    }

    /// Whether the ICReq was answered.
    pub(crate) fn initialized(&self) -> bool {
        self.ic_done.is_some()
    }

    /// Bytes of a PDU are waiting for the rest (the first call starts its clock).
    pub(crate) fn pdu_begun(&mut self) {
        self.begun.get_or_insert_with(Instant::now);
    }

    /// The PDU being received is complete.
    pub(crate) fn pdu_done(&mut self) {
        self.begun = None;
    }

    /// The deadline this connection missed, if any. `ctrl` is the queue's
    /// controller once connected, `admin` whether this is its admin queue
    /// (which enforces the controller's KATO).
    pub(crate) fn check(&self, ctrl: Option<&Ctrl>, admin: bool) -> Result<(), String> {
        let now = Instant::now();
        match (self.ic_done, ctrl) {
            (None, _) if now - self.opened > self.t.icreq => {
                return Err(format!("no ICReq within {} s", self.t.icreq.as_secs_f64()));
            }
            (Some(at), None) if now - at > self.t.connect => {
                return Err(format!(
                    "no Fabrics Connect within {} s of the ICReq",
                    self.t.connect.as_secs_f64()
                ));
            }
            _ => {}
        }
        if let Some(at) = self.begun {
            if now - at > self.t.pdu {
                return Err(format!(
                    "a PDU begun {} s ago is still incomplete",
                    (now - at).as_secs()
                ));
            }
        }
        if let (Some(c), true) = (ctrl, admin) {
            if let Some((kato, idle)) = c.keep_alive_expired(self.t.kato_grace) {
                return Err(format!(
                    "controller {}: keep alive timeout ({} ms) expired: no command for {} ms",
                    c.id.cntlid,
                    kato.as_millis(),
                    idle.as_millis()
                ));
            }
        }
        Ok(())
    }
}
