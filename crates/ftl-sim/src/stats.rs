//! Counters reported by a simulation: device-wide and per external stream.

use serde::Serialize;

use crate::histogram::LifetimeSummary;
use crate::timing::ThroughputEstimate;
use pcstream_placement::StreamId;

/// A snapshot of the counters since the last reset (see [`crate::Ssd::reset_stats`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    /// Pages written by the host.
    pub host_pages: u64,
    /// Pages copied by GC.
    pub gc_pages: u64,
    /// Blocks erased.
    pub erases: u64,
    /// Write amplification: `(host_pages + gc_pages) / host_pages` (1 when
    /// nothing was written).
    pub waf: f64,
    /// Host pages trimmed that held data.
    pub trimmed_pages: u64,
    /// GC victims collected.
    pub gc_victims: u64,
    /// Physical pages of the device.
    pub physical_pages: u64,
    /// Logical pages exported to the host.
    pub logical_pages: u64,
    /// Logical pages currently holding data.
    pub valid_pages: u64,
    /// Blocks currently free.
    pub free_blocks: u64,
    /// Blocks currently owned by the shared GC stream (only without internal streams).
    pub gc_stream_blocks: u64,
    /// One entry per external stream `0..streams`.
    pub per_stream: Vec<StreamStats>,
    /// Estimated host throughput, when the config has a timing model.
    pub throughput: Option<ThroughputEstimate>,
}

/// Counters of one external stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamStats {
    /// Stream id (0 = default).
    pub stream: StreamId,
    /// Host pages written to the stream.
    pub host_pages: u64,
    /// GC copies of pages last written by the host to this stream.
    pub gc_pages: u64,
    /// Blocks the stream's host write frontier currently owns (open or closed).
    pub blocks: u64,
    /// Blocks the stream's internal (GC) stream currently owns.
    pub internal_blocks: u64,
    /// Blocks opened for the stream (host and internal) since the reset.
    pub blocks_opened: u64,
    /// Lifetimes of the pages last written to this stream that were
    /// invalidated (overwritten or trimmed) since the reset.
    pub lifetime: LifetimeSummary,
}

impl Stats {
    /// `(host + gc) / host`, or 1 with no host writes.
    pub fn waf_of(host: u64, gc: u64) -> f64 {
        if host == 0 {
            1.0
        } else {
            (host + gc) as f64 / host as f64
        }
    }
}
