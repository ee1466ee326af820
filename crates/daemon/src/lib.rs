//! pcstreamd, the online loop of pcstream: shims send their events to
//! `events.seq` ([`conn`]) or `events.sock` ([`ingest`]); the engine (`pcstream_placement::online`, the
//! same `pcstream` policy `compare` runs) learns each program context's
//! lifetime per uid and learning domain (where the file's device takes
//! placement from, [`domains`]); the mapping is published as a shared-memory table the
//! shims read lock-free ([`publish`]); the learned table is saved and
//! reloaded ([`persist`]); `pcstreamctl` talks gRPC on `ctl.sock` ([`rpc`]);
//! one daemon per runtime and state directory ([`lock`]).
//! [`daemon::run`] ties them together with signals and sd_notify
//! ([`notify`]). Start reading at [`daemon::run`]; docs/daemon.md is the
//! user's description.

#![deny(missing_docs)]

pub mod config;
pub mod conn;
pub mod daemon;
pub mod domains;
pub mod ingest;
pub mod lock;
pub mod notify;
pub mod persist;
pub mod publish;
pub mod quota;
pub mod rpc;
pub mod state;
