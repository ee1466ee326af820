//! The listener: accepts TCP connections and serves each on its own thread
//! (one queue per connection, as NVMe/TCP maps them). Threads rather than an
//! async runtime: every connection is a blocking request/response loop over
//! one socket and the device is one mutex, so a runtime would add a
//! dependency and no concurrency. A connection's failure is logged and ends
//! only that connection; one that misses a deadline ([`Timeouts`]) is closed.
//! An accept that fails (out of file descriptors: EMFILE) is retried after
//! a pause, and such failures are logged at most once per 10 s.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::conn::{ConnError, Connection};
use crate::controller::Shared;
use crate::device::{Device, DeviceConfig, DeviceError, DeviceStats};
use crate::pdu::Limits;
use crate::timeouts::Timeouts;

/// Default subsystem NQN of the target.
pub const DEFAULT_NQN: &str = "nqn.2026-11.io.pcstream:ftl-sim";
/// Most connections served at once; more are closed on accept.
pub const MAX_CONNECTIONS: usize = 256;
/// Pause after a failed accept (the error, e.g. EMFILE, would repeat at once).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// Least time between two log lines about failed or refused accepts.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// A warning that repeats, logged at most once per [`LOG_EVERY`] with the
/// count of those not logged.
#[derive(Debug, Default)]
struct Throttled {
    last: Option<Instant>,
    quiet: u64,
}

impl Throttled {
    fn warn(&mut self, msg: std::fmt::Arguments<'_>) {
        let now = Instant::now();
        if self.last.is_some_and(|t| now - t < LOG_EVERY) {
            self.quiet += 1;
            return;
        }
        if self.quiet > 0 {
            tracing::warn!("{msg} ({} more like it not logged)", self.quiet);
        } else {
            tracing::warn!("{msg}");
        }
        self.last = Some(now);
        self.quiet = 0;
    }
}

/// Why a target cannot start.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The device configuration.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// Binding the listening socket.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Address asked for.
        addr: String,
        /// What failed.
        source: io::Error,
    },
}

/// A running (or ready to run) NVMe/TCP target.
#[derive(Debug)]
pub struct Target {
    listener: TcpListener,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    live: Arc<AtomicUsize>,
    timeouts: Timeouts,
}

/// Handle of a target serving on a background thread.
#[derive(Debug)]
pub struct Running {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Target {
    /// Builds the device and binds `addr` (e.g. `127.0.0.1:4420`, port 0 for any).
    pub fn bind(addr: &str, cfg: DeviceConfig, subnqn: &str) -> Result<Target, TargetError> {
        let device = Device::new(cfg)?;
        let listener = TcpListener::bind(addr).map_err(|source| TargetError::Bind {
            addr: addr.to_string(),
            source,
        })?;
        let local = listener.local_addr().map_err(|source| TargetError::Bind {
            addr: addr.to_string(),
            source,
        })?;
        let shared = Arc::new(Shared::new(
            device,
            subnqn.to_string(),
            local.ip().to_string(),
            local.port(),
        ));
        Ok(Target {
            listener,
            shared,
            stop: Arc::new(AtomicBool::new(false)),
            live: Arc::new(AtomicUsize::new(0)),
            timeouts: Timeouts::default(),
        })
    }

    /// Serves with these deadlines instead of the defaults (tests use short ones).
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Target {
        self.timeouts = timeouts;
        self
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("bound socket has an address")
    }

    /// The shared state (device counters).
    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// A flag that, once set, makes [`Target::run`] return at the next accept.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Accepts and serves connections until the stop flag is set.
    pub fn run(self) {
        let (mut failed, mut refused) = (Throttled::default(), Throttled::default());
        for stream in self.listener.incoming() {
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            let stream = match stream {
                Ok(s) => s,
                Err(e) => {
                    failed.warn(format_args!(
                        "accept: {e}; retrying every {} ms",
                        ACCEPT_BACKOFF.as_millis()
                    ));
                    std::thread::sleep(ACCEPT_BACKOFF);
                    continue;
                }
            };
            if self.live.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
                refused.warn(format_args!(
                    "refusing a connection: {MAX_CONNECTIONS} already open"
                ));
                continue;
            }
            self.spawn(stream);
        }
        let _ = self.shared.dev().flush();
    }

    fn spawn(&self, stream: TcpStream) {
        let shared = self.shared.clone();
        let live = self.live.clone();
        let timeouts = self.timeouts;
        let peer = stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        live.fetch_add(1, Ordering::Relaxed);
        let r = std::thread::Builder::new()
            .name(format!("nvme-tcp {peer}"))
            .spawn(move || {
                tracing::info!(%peer, "connection opened");
                match Connection::new(shared, stream, Limits::default(), timeouts).map(|c| c.run())
                {
                    Ok(Ok(())) => tracing::info!(%peer, "connection closed"),
                    Ok(Err(e @ ConnError::Timeout(_))) => {
                        tracing::warn!(%peer, "connection ended: {e}")
                    }
                    Ok(Err(e)) => tracing::info!(%peer, "connection ended: {e}"),
                    Err(e) => tracing::warn!(%peer, "connection setup: {e}"),
                }
                live.fetch_sub(1, Ordering::Relaxed);
            });
        if let Err(e) = r {
            tracing::warn!("cannot start a connection thread: {e}");
            self.live.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Serves on a background thread; the handle stops it when dropped.
    pub fn start(self) -> io::Result<Running> {
        let addr = self.local_addr();
        let shared = self.shared.clone();
        let stop = self.stop.clone();
        let thread = std::thread::Builder::new()
            .name("nvme-tcp accept".into())
            .spawn(move || self.run())?;
        Ok(Running {
            addr,
            shared,
            stop,
            thread: Some(thread),
        })
    }
}

impl Running {
    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Device counters now.
    pub fn stats(&self) -> DeviceStats {
        self.shared.dev().stats()
    }

    /// The shared state.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Stops accepting (open connections end when their hosts close them).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}
