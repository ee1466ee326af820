//! Device configuration: geometry, over-provisioning, streams, GC policy and
//! the optional timing model, with validation and the derived sizes.

use serde::{Deserialize, Serialize};

pub use crate::geometry::Geometry;
use crate::paper;
use crate::timing::Timing;

/// How GC chooses its victim block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GcPolicy {
    /// Fewest valid pages (O(1) amortised, bucketed by valid count).
    #[default]
    Greedy,
    /// Largest `(1 − u) · age / (2u)` (Rosenblum & Ousterhout, LFS), with `u`
    /// the valid fraction and `age` the host pages written since the block
    /// was last programmed. A full scan of the closed blocks per victim.
    CostBenefit,
}

/// Everything that defines a simulated device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Flash layout.
    pub geometry: Geometry,
    /// Over-provisioning as `(physical − logical) / logical`.
    pub op: f64,
    /// External streams *including* the default stream 0: ids are
    /// `0..streams`. The paper's PM963 has 9 (8 user streams + default).
    pub streams: u32,
    /// One internal (GC-only) stream per external stream: GC copies the
    /// survivors of stream `k` into `k`'s internal stream. Without them, GC
    /// copies go back into the victim's own stream, beside fresh host
    /// writes (the paper's device without internal streams), or, with
    /// [`Config::shared_gc_block`], into one GC block shared by all streams.
    pub internal_streams: bool,
    /// Without internal streams: GC copies of every stream go to one shared
    /// GC block instead of back into their own stream (a common FTL design
    /// that already separates survivors from fresh writes). Ignored with
    /// internal streams.
    #[serde(default)]
    pub shared_gc_block: bool,
    /// Victim selection.
    pub gc: GcPolicy,
    /// GC low watermark: GC runs while fewer than this many blocks are free
    /// (checked whenever a host write opens a new block). At least 2.
    pub gc_free_blocks: u32,
    /// Optional timing model used to estimate host write throughput.
    pub timing: Option<Timing>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            geometry: Geometry::default(),
            op: paper::OP,
            streams: paper::STREAMS,
            internal_streams: false,
            shared_gc_block: false,
            gc: GcPolicy::Greedy,
            gc_free_blocks: paper::GC_FREE_BLOCKS,
            timing: None,
        }
    }
}

/// The most external streams a device may have (stream ids are stored in a byte per logical page).
pub const MAX_STREAMS: u32 = 256;

/// Why a [`Config`] cannot be simulated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A geometry field is zero.
    #[error("geometry: `{0}` must be at least 1")]
    ZeroGeometry(&'static str),
    /// The device has more pages than a 32-bit physical page number can address.
    #[error("geometry: {0} physical pages exceed the 2^32 − 1 the simulator can address")]
    TooLarge(u64),
    /// Over-provisioning is negative, not finite, or leaves no logical page.
    #[error("op: {0} is not a usable over-provisioning ratio (need a finite value ≥ 0 leaving at least one logical page)")]
    BadOp(f64),
    /// Stream count outside `1..=MAX_STREAMS`.
    #[error("streams: {0} is outside 1..={MAX_STREAMS}")]
    BadStreams(u32),
    /// The GC watermark is below 2.
    #[error("gc_free_blocks: {0} is below 2 (GC needs one free block to copy into while another is being filled)")]
    BadWatermark(u32),
    /// Too little spare space for the open blocks, the GC reserve and GC progress.
    #[error("op {op}: {spare} spare blocks cannot hold {open} open blocks, the GC reserve of {reserve} and one block of slack; raise --op or lower --streams")]
    TooLittleSpare {
        /// The configured over-provisioning.
        op: f64,
        /// Physical blocks not needed to hold the logical space.
        spare: u64,
        /// The most blocks that may be open at once.
        open: u64,
        /// The GC free-block reserve.
        reserve: u64,
    },
    /// A timing parameter is invalid.
    #[error("timing: {0}")]
    BadTiming(String),
}

impl Config {
    /// Logical pages exported to the host: `⌊physical / (1 + op)⌋`.
    pub fn logical_pages(&self) -> u64 {
        let phys = self.geometry.physical_pages();
        if !(self.op.is_finite() && self.op >= 0.0) {
            return 0;
        }
        let l = (phys as f64 / (1.0 + self.op)).floor() as u64;
        l.min(phys)
    }

    /// Approximate memory a device of this configuration needs, in bytes,
    /// from the `Ssd`'s fields (`ssd/mod.rs`): per logical page `l2p`
    /// (u32), `wtime` (u32) and `stream_of` (u8), 9 bytes; per physical
    /// page `p2l` (u32), 4; per erase block its `Block` (40 bytes), the GC
    /// buckets' two links (u32 each) and the free list's entry (u32), 52.
    /// (`pcstreamctl target` measured 13.50 bytes per logical page at OP
    /// 0.07 and 1 MiB blocks, as this gives: crates/nvme-target/src/memory.rs.)
    pub fn memory_bytes(&self) -> u64 {
        self.logical_pages() * 9 + self.geometry.physical_pages() * 4 + self.geometry.blocks() * 52
    }

    /// The most blocks that can be open (being filled) at the same time:
    /// one per external stream, plus one per internal stream or the shared
    /// GC block.
    pub fn max_open_blocks(&self) -> u64 {
        let s = u64::from(self.streams);
        if self.internal_streams {
            2 * s
        } else if self.shared_gc_block {
            s + 1
        } else {
            s
        }
    }

    /// Checks that the device can be simulated without GC running out of space.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let g = &self.geometry;
        for (name, v) in [
            ("channels", g.channels),
            ("ways", g.ways),
            ("blocks_per_unit", g.blocks_per_unit),
            ("pages_per_block", g.pages_per_block),
            ("page_size", g.page_size),
        ] {
            if v == 0 {
                return Err(ConfigError::ZeroGeometry(name));
            }
        }
        let phys = g.physical_pages();
        if phys >= u64::from(u32::MAX) || g.blocks() >= u64::from(u32::MAX) {
            return Err(ConfigError::TooLarge(phys));
        }
        if !(self.op.is_finite() && self.op >= 0.0) || self.logical_pages() == 0 {
            return Err(ConfigError::BadOp(self.op));
        }
        if self.streams == 0 || self.streams > MAX_STREAMS {
            return Err(ConfigError::BadStreams(self.streams));
        }
        if self.gc_free_blocks < 2 {
            return Err(ConfigError::BadWatermark(self.gc_free_blocks));
        }
        let ppb = u64::from(g.pages_per_block);
        let spare = g.blocks() - self.logical_pages().div_ceil(ppb);
        let open = self.max_open_blocks();
        let reserve = u64::from(self.gc_free_blocks);
        if spare < open + reserve + 1 {
            return Err(ConfigError::TooLittleSpare {
                op: self.op,
                spare,
                open,
                reserve,
            });
        }
        if let Some(t) = &self.timing {
            t.validate().map_err(ConfigError::BadTiming)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_the_papers_emulator() {
        let c = Config::default();
        assert_eq!(c.geometry.physical_pages(), 4 * 4 * 512 * 384);
        assert_eq!(
            c.geometry.physical_pages() * u64::from(c.geometry.page_size),
            12 << 30
        );
        let l = c.logical_pages() as f64;
        let op = (c.geometry.physical_pages() as f64 - l) / l;
        assert!((op - 0.07).abs() < 1e-5, "{op}");
        c.validate().unwrap();
        let mib = c.memory_bytes() >> 20;
        assert!((30..100).contains(&mib), "{mib} MiB");
    }

    #[test]
    fn rejects_bad_values() {
        let mut c = Config::default();
        c.geometry.ways = 0;
        assert_eq!(c.validate(), Err(ConfigError::ZeroGeometry("ways")));
        let mut c = Config {
            op: -0.1,
            ..Config::default()
        };
        assert!(matches!(c.validate(), Err(ConfigError::BadOp(_))));
        c.op = f64::NAN;
        assert!(matches!(c.validate(), Err(ConfigError::BadOp(_))));
        let c = Config {
            streams: 0,
            ..Config::default()
        };
        assert_eq!(c.validate(), Err(ConfigError::BadStreams(0)));
        let c = Config {
            gc_free_blocks: 1,
            ..Config::default()
        };
        assert_eq!(c.validate(), Err(ConfigError::BadWatermark(1)));
        let c = Config {
            op: 0.0,
            ..Config::default()
        };
        assert!(matches!(
            c.validate(),
            Err(ConfigError::TooLittleSpare { .. })
        ));
    }

    #[test]
    fn serde_round_trip() {
        let c = Config {
            timing: Some(Timing::default()),
            ..Config::default()
        };
        let j = serde_json::to_string(&c).unwrap();
        let back: Config = serde_json::from_str(&j).unwrap();
        assert_eq!(back, c);
    }
}
