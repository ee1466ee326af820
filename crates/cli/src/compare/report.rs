//! The report `compare` builds: settings, and per trace its join statistics,
//! device, and every run's WAF, throughput and per-stream lifetimes. Plain
//! data (serialised as `--json`); [`super::text`] and [`super::charts`] render it.

use std::collections::BTreeMap;

use pcstream_replay::signatures::SignatureRow;
use pcstream_replay::{JoinStats, Source};
use serde::Serialize;

/// Everything `compare` measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The options of the comparison.
    pub settings: Settings,
    /// One entry per trace, in command-line order.
    pub traces: Vec<TraceReport>,
}

/// The options of the comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// Policies, in report order.
    pub policies: Vec<String>,
    /// Device stream ids (default stream included).
    pub streams: u32,
    /// Internal-stream settings run.
    pub internal_streams: Vec<bool>,
    /// Without internal streams, GC copies shared one GC block (else they
    /// went back into their own stream).
    pub shared_gc_block: bool,
    /// Cold pre-fill fraction.
    pub prefill: f64,
    /// Over-provisioning.
    pub op: f64,
    /// Whether the device heard TRIMs.
    pub trim: bool,
    /// Warm-up passes before the measured one (tables kept).
    pub warmup_passes: u32,
    /// Policies restarted with empty tables at each round mark.
    pub clear_at_marks: bool,
    /// Java writes replayed under their recorded native signatures
    /// (`--native-signatures`).
    pub native_signatures: bool,
}

/// One trace's results.
#[derive(Debug, Clone, Serialize)]
pub struct TraceReport {
    /// The trace file.
    pub path: String,
    /// Where the device operations came from.
    pub source: Source,
    /// `source` in words.
    pub source_text: String,
    /// How the trace was turned into device operations.
    pub join: JoinStats,
    /// Host pages the replay writes.
    pub host_pages: u64,
    /// Logical pages of the traced device (or of the allocation model).
    pub trace_logical_pages: u64,
    /// Distinct pages the replay writes (after confinement, if any).
    pub footprint_pages: u64,
    /// When the trace's pages were spread over more than the hot region
    /// (5/4 of the peak live data), they were re-allocated into it before
    /// ageing: the footprint they had in the trace.
    pub confined_from_pages: Option<u64>,
    /// Peak of live pages during the replay.
    pub peak_live_pages: u64,
    /// Round marks in the trace (`*.pcstream-mark` files, see `--clear-at-marks`).
    pub marks: usize,
    /// The simulated device.
    pub device: DeviceReport,
    /// One entry per policy × internal-stream setting.
    pub runs: Vec<RunReport>,
    /// pcstream's placement by signature, heaviest first (`--signatures N`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub signatures: Vec<SignatureRow>,
    /// The rows are the signatures `--explain` asked for: every stream is
    /// shown, not only the three largest.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub explained: bool,
}

/// The simulated device of a trace.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceReport {
    /// Channels.
    pub channels: u32,
    /// Dies per channel.
    pub ways: u32,
    /// Blocks per die.
    pub blocks_per_unit: u32,
    /// Pages per block.
    pub pages_per_block: u32,
    /// Page size, bytes.
    pub page_size: u32,
    /// Physical pages.
    pub physical_pages: u64,
    /// Logical pages.
    pub logical_pages: u64,
    /// Logical size over the traced device's.
    pub scale: f64,
    /// Cold pages written before the run (stream 0).
    pub cold_pages: u64,
}

/// One policy run.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// Policy name.
    pub policy: String,
    /// Whether the device had internal streams.
    pub internal_streams: bool,
    /// Write amplification.
    pub waf: f64,
    /// Host pages written.
    pub host_pages: u64,
    /// GC copies.
    pub gc_pages: u64,
    /// Blocks erased.
    pub erases: u64,
    /// Modelled host write IOPS (4 KiB pages per second, timing model).
    pub iops: Option<f64>,
    /// `iops` over baseline's on the same trace and device.
    pub iops_normalized: Option<f64>,
    /// Share of host pages placed in stream 0.
    pub stream0_share: f64,
    /// Streams that received host writes.
    pub streams_used: u32,
    /// Signatures the policy tracks (pcstream).
    pub signatures: Option<u64>,
    /// Re-clusterings of the signature → stream table (pcstream).
    pub reclusterings: Option<u64>,
    /// All of the policy's own counters.
    pub policy_counters: BTreeMap<String, u64>,
    /// One entry per stream with host writes.
    pub per_stream: Vec<StreamReport>,
    /// Wall-clock seconds of the replay.
    pub replay_seconds: f64,
}

/// One stream of one run (paper Fig. 11).
#[derive(Debug, Clone, Serialize)]
pub struct StreamReport {
    /// Stream id.
    pub stream: u32,
    /// Host pages placed in the stream.
    pub host_pages: u64,
    /// GC copies of the stream's data.
    pub gc_pages: u64,
    /// Pages of the stream invalidated during the run (the lifetime samples).
    pub dead_pages: u64,
    /// Lifetime quartiles of those pages, in host pages written in between.
    pub lifetime_p25: Option<f64>,
    /// Median lifetime.
    pub lifetime_p50: Option<f64>,
    /// 75th percentile lifetime.
    pub lifetime_p75: Option<f64>,
    /// Mean lifetime.
    pub lifetime_mean: Option<f64>,
}
