//! ftl-sim: a page-mapped SSD model with external and internal (GC) streams,
//! used to measure the write amplification of placement policies.
//!
//! Start reading at [`Ssd`]: build one from a [`Config`] (geometry,
//! over-provisioning, streams, GC policy, optional [`Timing`] model), drive it
//! with [`Ssd::write`] / [`Ssd::trim`] one logical page at a time, and read
//! [`Ssd::stats`]. Workloads come from [`workload`]: seeded synthetic
//! generators and block-trace readers (MSR-Cambridge, blkparse, fio iolog).
//! [`model`] holds the analytical greedy-GC model the simulator is checked
//! against.
//!
//! This crate does no I/O besides reading trace files and knows nothing
//! about placement policies: the stream of every write is the caller's choice.
//! See `docs/ftl-sim.md` for the model and the decisions behind it.

#![deny(missing_docs)]

mod buckets;
pub mod config;
pub mod geometry;
pub mod histogram;
mod hugepage;
pub mod model;
pub mod paper;
mod ssd;
pub mod stats;
pub mod timing;
pub mod workload;

pub use config::{Config, ConfigError, GcPolicy, Geometry};
pub use ssd::{BlockCounts, Residence, SimError, Ssd};
pub use stats::{Stats, StreamStats};
pub use timing::{ThroughputEstimate, Timing};
