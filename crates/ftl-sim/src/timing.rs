//! The optional timing model: turns flash operation counts into an estimate
//! of sustained host write throughput, so a WAF change can be read as an
//! IOPS change.
//!
//! The model is work-conserving and perfectly parallel: every program, read
//! and erase occupies one die (`channels × ways` dies work in parallel) and
//! every page transferred occupies one channel bus (`channels` buses in
//! parallel). GC copies are read out and programmed back through the
//! controller (no copy-back). The run takes as long as the busier of the two
//! resources; host throughput is host pages over that time. It ignores
//! queueing, read traffic and the host interface, so it is an upper bound on
//! a real device's sustained write rate, useful for *relative* comparisons.

use serde::{Deserialize, Serialize};

use crate::geometry::Geometry;
use crate::paper;

/// Flash latencies and bus bandwidth. Defaults are typical MLC NAND figures
/// (those of the MQSim simulator's default device).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timing {
    /// Page read (array to register), microseconds.
    pub read_us: f64,
    /// Page program, microseconds.
    pub program_us: f64,
    /// Block erase, microseconds.
    pub erase_us: f64,
    /// Bus bandwidth of one channel, MB/s (10^6 bytes per second).
    pub channel_mb_s: f64,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            read_us: paper::READ_US,
            program_us: paper::PROGRAM_US,
            erase_us: paper::ERASE_US,
            channel_mb_s: paper::CHANNEL_MB_S,
        }
    }
}

impl Timing {
    /// Every field must be finite and positive.
    pub fn validate(&self) -> Result<(), String> {
        for (name, v) in [
            ("read_us", self.read_us),
            ("program_us", self.program_us),
            ("erase_us", self.erase_us),
            ("channel_mb_s", self.channel_mb_s),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("`{name}` = {v} must be a finite positive number"));
            }
        }
        Ok(())
    }

    /// Estimates the time the given work takes and the host throughput it allows.
    pub fn estimate(
        &self,
        g: &Geometry,
        host_pages: u64,
        gc_pages: u64,
        erases: u64,
    ) -> ThroughputEstimate {
        let units = g.units() as f64;
        let channels = f64::from(g.channels);
        let die_us = (host_pages + gc_pages) as f64 * self.program_us
            + gc_pages as f64 * self.read_us
            + erases as f64 * self.erase_us;
        let die_s = die_us / units * 1e-6;
        let bytes = (host_pages + 2 * gc_pages) as f64 * f64::from(g.page_size);
        let bus_s = bytes / (self.channel_mb_s * 1e6 * channels);
        let seconds = die_s.max(bus_s);
        let ps = f64::from(g.page_size);
        let per_s = |s: f64| if s > 0.0 { host_pages as f64 / s } else { 0.0 };
        // The same host pages on a device that never copies (WAF = 1).
        let ideal_erases = host_pages / u64::from(g.pages_per_block);
        let ideal_die_s =
            (host_pages as f64 * self.program_us + ideal_erases as f64 * self.erase_us) / units
                * 1e-6;
        let ideal_bus_s = host_pages as f64 * ps / (self.channel_mb_s * 1e6 * channels);
        let ideal_s = ideal_die_s.max(ideal_bus_s);
        ThroughputEstimate {
            seconds,
            bound: if die_s >= bus_s { "dies" } else { "channels" },
            host_pages_per_s: per_s(seconds),
            host_mib_per_s: per_s(seconds) * ps / f64::from(1u32 << 20),
            ideal_host_pages_per_s: per_s(ideal_s),
        }
    }
}

/// What [`Timing::estimate`] found.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ThroughputEstimate {
    /// Simulated device time for the work, seconds.
    pub seconds: f64,
    /// The resource that limits throughput: `"dies"` or `"channels"`.
    pub bound: &'static str,
    /// Host page writes per second (= IOPS for page-sized writes).
    pub host_pages_per_s: f64,
    /// Host write bandwidth, MiB/s.
    pub host_mib_per_s: f64,
    /// Host page writes per second the same device sustains with WAF = 1.
    pub ideal_host_pages_per_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gc_copies_lower_throughput_in_proportion() {
        let t = Timing::default();
        let g = Geometry::default();
        let none = t.estimate(&g, 1_000_000, 0, 1_000_000 / 384);
        // WAF 3: two copies per host page, three times the erases.
        let waf3 = t.estimate(&g, 1_000_000, 2_000_000, 3 * 1_000_000 / 384);
        assert!((none.host_pages_per_s - none.ideal_host_pages_per_s).abs() < 1.0);
        let ratio = none.host_pages_per_s / waf3.host_pages_per_s;
        // Copies also cost a read each, so a bit more than 3×.
        assert!(ratio > 3.0 && ratio < 3.5, "{ratio}");
        assert_eq!(none.bound, "dies");
    }

    #[test]
    fn rejects_non_positive() {
        let t = Timing {
            erase_us: 0.0,
            ..Timing::default()
        };
        assert!(t.validate().unwrap_err().contains("erase_us"));
    }
}
