//! Device sizing: the simulated device a replay runs on ([`DeviceSpec`]),
//! sized so the replay's footprint fits beside the cold data
//! ([`layout`]), and aged with that cold data as the PCStream paper does
//! ([`aged_ssd`]).

use crate::error::SizingError;
use crate::ops::{Op, Replay, PAGE};
use ftl_sim::config::{ConfigError, GcPolicy, Geometry};
use ftl_sim::{paper, Config, Ssd, Timing};

/// The simulated device a replay runs on, before sizing (see [`layout`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DeviceSpec {
    /// External streams including the default stream 0 (PM963: 9).
    pub streams: u32,
    /// One internal (GC) stream per external stream.
    pub internal_streams: bool,
    /// Without internal streams, GC copies go to one shared GC block
    /// instead of back into their own stream ([`Config::shared_gc_block`]).
    pub shared_gc_block: bool,
    /// Over-provisioning, `(physical − logical) / logical`.
    pub op: f64,
    /// Fraction of the logical space filled with cold data before the run
    /// (the paper ages the device with 90% valid cold data).
    pub prefill: f64,
    /// Victim selection.
    pub gc: GcPolicy,
    /// Timing model for the throughput estimate.
    pub timing: Option<Timing>,
}

impl Default for DeviceSpec {
    fn default() -> Self {
        DeviceSpec {
            streams: paper::STREAMS,
            internal_streams: false,
            shared_gc_block: false,
            op: paper::OP,
            prefill: paper::PREFILL,
            gc: GcPolicy::Greedy,
            timing: Some(Timing::default()),
        }
    }
}

/// The paper's pages per block, kept when the device has enough blocks.
pub const PAPER_PAGES_PER_BLOCK: u32 = paper::PAGES_PER_BLOCK;
/// Blocks per external stream below which pages per block are halved.
pub const MIN_BLOCKS_PER_STREAM: u64 = 64;

/// The device chosen for a replay, and why it has that size.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DeviceLayout {
    /// The simulator configuration.
    pub config: Config,
    /// Logical pages of the simulated device (≥ the trace's).
    pub logical_pages: u64,
    /// Logical pages of the traced device (or of the allocation model).
    pub trace_logical_pages: u64,
    /// Distinct pages the replay writes or trims.
    pub footprint_pages: u64,
    /// Pages of cold data written before the run (stream 0, never touched by the replay).
    pub cold_pages: u64,
}

impl DeviceLayout {
    /// How much larger than the traced device the simulated one is.
    pub fn scale(&self) -> f64 {
        self.logical_pages as f64 / self.trace_logical_pages.max(1) as f64
    }
}

/// Sizes the device for `replay`: the logical space is the traced device's,
/// enlarged when needed so that the replay's footprint fits beside
/// `prefill` of cold data (`⌈footprint / (1 − prefill)⌉`); 4 channels × 4
/// ways; the paper's 384 pages per block unless that gives fewer than
/// [`MIN_BLOCKS_PER_STREAM`] blocks per stream, in which case pages per block
/// are halved until it does (down to 6); blocks from the logical size and OP.
pub fn layout(replay: &Replay, spec: &DeviceSpec) -> Result<DeviceLayout, SizingError> {
    if !(0.0..1.0).contains(&spec.prefill) {
        return Err(SizingError::Prefill(spec.prefill));
    }
    if !(spec.op.is_finite() && spec.op > 0.0) {
        return Err(SizingError::Op(spec.op));
    }
    let fp = replay.footprint_pages;
    // A recording aged by its own fill brings its cold data along.
    let prefill = if replay.ageing.is_empty() {
        spec.prefill
    } else {
        0.0
    };
    let need = replay
        .logical_pages
        .max((fp as f64 / (1.0 - prefill)).ceil() as u64)
        .max(1);
    let phys_need = (need as f64 * (1.0 + spec.op)).ceil() as u64;
    let mut ppb = PAPER_PAGES_PER_BLOCK;
    let min_blocks = MIN_BLOCKS_PER_STREAM * u64::from(spec.streams.max(1));
    while ppb > 6 && phys_need.div_ceil(u64::from(ppb)) < min_blocks {
        ppb /= 2;
    }
    let units = u64::from(paper::CHANNELS * paper::WAYS);
    let first = phys_need.div_ceil(u64::from(ppb)).div_ceil(units).max(1);
    let mut bpu = first;
    loop {
        let config = Config {
            geometry: Geometry {
                channels: paper::CHANNELS,
                ways: paper::WAYS,
                blocks_per_unit: u32::try_from(bpu).map_err(|_| SizingError::TooLarge(need))?,
                pages_per_block: ppb,
                page_size: PAGE as u32,
            },
            op: spec.op,
            streams: spec.streams,
            internal_streams: spec.internal_streams,
            shared_gc_block: spec.shared_gc_block,
            gc: spec.gc,
            gc_free_blocks: paper::GC_FREE_BLOCKS,
            timing: spec.timing,
        };
        let valid = config.validate();
        if config.logical_pages() >= need && valid.is_ok() {
            let logical_pages = config.logical_pages();
            let untouched = logical_pages - fp;
            let cold = ((logical_pages as f64 * prefill).round() as u64).min(untouched);
            return Ok(DeviceLayout {
                config,
                logical_pages,
                trace_logical_pages: replay.logical_pages,
                footprint_pages: fp,
                cold_pages: cold,
            });
        }
        match valid {
            Err(ConfigError::TooLittleSpare { .. }) | Ok(()) if bpu < 4 * first + 64 => bpu += 1,
            Err(e) => return Err(e.into()),
            Ok(()) => return Err(SizingError::CannotSize(need)),
        }
    }
}

/// A fresh device of `layout`, aged: the recording's own ageing operations
/// ([`Replay::ageing`]) replayed into stream 0, then the cold pages (the
/// lowest logical pages the replay never touches) written sequentially to
/// stream 0, then the counters reset. Policies see neither.
pub fn aged_ssd(replay: &Replay, layout: &DeviceLayout) -> Result<Ssd, SizingError> {
    let mut ssd = Ssd::new(layout.config.clone())?;
    for op in &replay.ageing {
        match *op {
            Op::Write { lpn, pages, .. } => {
                ssd.write_pages(lpn, u64::from(pages), 0)
                    .map_err(|source| SizingError::Ageing {
                        what: "write",
                        source,
                    })?
            }
            Op::Trim { lpn, pages } => {
                ssd.trim(lpn, pages).map_err(|source| SizingError::Ageing {
                    what: "trim",
                    source,
                })?
            }
            Op::InvalidateFile { .. } => {}
        }
    }
    let mut left = layout.cold_pages;
    let mut lpn = 0u64;
    while left > 0 && lpn < layout.logical_pages {
        if !replay.touches(lpn) {
            ssd.write(lpn, 0).map_err(SizingError::Cold)?;
            left -= 1;
        }
        lpn += 1;
    }
    ssd.reset_stats();
    Ok(ssd)
}
