//! The placement engine of pcstream: everything that decides *which stream a
//! write goes to*, shared by the daemon (online), the simulator (offline) and,
//! for its plain types only, the shim.
//!
//! Start reading at [`placement::Placement`], the trait every placement policy
//! implements. The wire formats (shim events, trace records, gRPC messages)
//! live in [`wire`], generated from `proto/pcstream.proto`; trace files are
//! read and written by [`trace`]. PC signatures are defined in [`signature`],
//! kernel write-lifetime hints in [`hint`].
//!
//! The policies: [`placement::Baseline`], [`autostream`] (SFR and MQ), [`sepbit`],
//! [`app_hints`], and — with the default `learn` feature, which brings linfa
//! and ndarray — `pcstream` (built from [`lifetime`] and `mapper`) and
//! `oracle`; `policies::build` makes any of them by name. The shim depends on
//! this crate without default features and gets only the plain types.
//! docs/placement.md lists every parameter; docs/placement-log.md why each was chosen.
//!
//! This crate does no I/O on its own beyond trace files, sysfs reads
//! ([`delivery`]) and bounded reads of files a user names ([`readfile`]),
//! spawns no threads and owns no sockets: the daemon and the CLI do that.

#![deny(missing_docs)]

pub mod app_hints;
pub mod autostream;
pub mod delivery;
#[cfg(feature = "learn")]
pub mod dual;
pub mod env;
#[cfg(feature = "learn")]
pub mod gc_age;
pub mod hint;
pub mod java;
#[cfg(feature = "learn")]
pub mod kmeans;
pub mod lifetime;
#[cfg(feature = "learn")]
pub mod mapper;
pub mod merge;
#[cfg(feature = "learn")]
pub mod online;
#[cfg(feature = "learn")]
pub mod oracle;
#[cfg(feature = "learn")]
pub mod pcstream;
pub mod placement;
#[cfg(feature = "learn")]
pub mod policies;
pub mod readfile;
#[cfg(all(test, feature = "learn"))]
mod scenarios;
pub mod sepbit;
pub mod signature;
#[cfg(feature = "learn")]
pub mod stream_ids;
pub mod table;
pub mod trace;
#[cfg(feature = "learn")]
pub mod write_count;

/// Messages generated from `proto/pcstream.proto` (package `pcstream.v1`).
#[allow(
    missing_docs,
    clippy::all,
    missing_debug_implementations,
    rustdoc::invalid_html_tags,
    rustdoc::bare_urls
)]
pub mod wire {
    include!(concat!(env!("OUT_DIR"), "/pcstream.v1.rs"));

    impl WriteEvent {
        /// The write calls this event stands for: the shim coalesces
        /// consecutive calls into one event; `calls` 0 (absent, as in
        /// traces written before the field) means 1.
        pub fn call_count(&self) -> u64 {
            u64::from(self.calls.max(1))
        }
    }
}

pub use placement::{Baseline, FromTrace, GcPlacement, Placement, StreamId, WriteCtx};
pub use signature::Signature;
