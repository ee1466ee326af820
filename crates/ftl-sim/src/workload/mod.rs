//! Workloads: seeded synthetic generators and block-trace readers.
pub mod synthetic;
pub mod trace;
