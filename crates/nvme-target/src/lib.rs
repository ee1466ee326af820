//! An NVMe/TCP controller with Flexible Data Placement whose namespace is the
//! ftl-sim SSD model: every reclaim unit handle is a simulator stream, GC
//! runs as writes arrive, and the FDP statistics report the simulator's
//! media writes (host + GC copies), so a real host — Linux's nvme-tcp
//! driver, nvme-cli — sees the write amplification its placement causes.
//!
//! Start reading at [`server::Target`]; [`conn`] is the transport state
//! machine, [`controller`] executes commands (their bodies in [`admin`] and
//! [`nvm`]), [`pages`] builds what they return, [`device`] is the model
//! (whose memory [`memory`] estimates before building it) and [`store`]
//! keeps the data; [`timeouts`] bounds how long a host may keep a
//! connection waiting.
//! [`client`] is a small NVMe/TCP host used by the tests and the bench.
//! Not here: authentication, TLS, reservations, ANA, multiple namespaces.

#![deny(missing_docs)]

pub mod admin;
pub mod client;
pub mod conn;
pub mod controller;
pub mod device;
#[doc(hidden)]
pub mod fuzzing;
pub mod memory;
pub mod nvm;
pub mod pages;
pub mod pdu;
pub mod server;
pub mod store;
pub mod timeouts;

pub use device::{DeviceConfig, DeviceStats};
pub use server::{Running, Target, TargetError, DEFAULT_NQN};
pub use timeouts::Timeouts;

/// FNV-1a, for a stable serial number from the subsystem NQN.
pub(crate) fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}
