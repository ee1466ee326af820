//! What a device costs in memory, estimated before anything is allocated,
//! and the check that the machine has it: the simulator's mapping tables
//! (always in memory, allocated and filled when the device is built) plus,
//! for an in-memory namespace, its data (mapped as the host writes it, so
//! a host may fill it all). A capacity the machine cannot hold is refused
//! with one line naming the estimate instead of aborting on allocation or
//! meeting the OOM killer later.
//!
//! The tables are ftl-sim's own estimate ([`Config::memory_bytes`], the
//! `Ssd`'s fields per logical page, physical page and erase block).
//! Measured: `pcstreamctl target` right after start, in-memory namespace,
//! 1 MiB RUs, OP 0.07, resident set at 64 GiB 227,480 KiB and at 256 GiB
//! 891,024 KiB: 13.50 bytes per logical page between them; this estimate
//! gives 9 + 4 × 1.07 + 52 × 1.07 / 256 = 13.50.

use ftl_sim::Config;

use crate::device::BLOCK;

/// The process besides the tables and the data, with the buffers of
/// 256 connections (512 KiB received, 256 KiB sent each).
const BASE: u64 = 256 << 20;

/// A device's estimated memory use in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    /// The simulator's mapping tables and the process.
    pub tables: u64,
    /// The namespace's data when it is kept in memory (0 with a backing file).
    pub data: u64,
}

impl Estimate {
    /// For simulator configuration `sim` and a namespace of `bytes` bytes,
    /// in memory or not.
    pub fn new(sim: &Config, bytes: u64, in_memory: bool) -> Estimate {
        let tables = sim.memory_bytes() + BASE;
        Estimate {
            tables,
            data: if in_memory {
                bytes / BLOCK as u64 * BLOCK as u64
            } else {
                0
            },
        }
    }

    /// Both.
    pub fn total(&self) -> u64 {
        self.tables.saturating_add(self.data)
    }

    /// Why the machine cannot hold it (one line), if `mem_total` bytes are
    /// less than the estimate.
    pub fn refusal(&self, mem_total: u64) -> Option<String> {
        if self.total() <= mem_total {
            return None;
        }
        let (what, hint) = if self.data > 0 {
            (
                format!(
                    "{} for the simulator's tables and {} for the data in memory",
                    size(self.tables),
                    size(self.data)
                ),
                "keep the data on disk with --backing FILE or lower --capacity",
            )
        } else {
            (
                "for the simulator's tables (the data is on disk)".to_string(),
                "lower --capacity",
            )
        };
        Some(format!(
            "capacity: the device needs about {} of memory ({what}), more than this machine's {} \
             (MemTotal); {hint}",
            size(self.total()),
            size(mem_total)
        ))
    }
}

/// The machine's memory in bytes (MemTotal in /proc/meminfo), if known.
pub fn mem_total() -> Option<u64> {
    meminfo("MemTotal")
}

/// A /proc/meminfo field (`MemTotal`, `MemAvailable`, …) in bytes, if known.
pub fn meminfo(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text
        .lines()
        .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Bytes as GiB (or MiB below 1 GiB), one decimal.
fn size(b: u64) -> String {
    if b >= 1 << 30 {
        format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceConfig;

    #[test]
    fn meminfo_reads_whole_field_names() {
        let total = meminfo("MemTotal").expect("MemTotal in /proc/meminfo");
        let avail = meminfo("MemAvailable").expect("MemAvailable in /proc/meminfo");
        assert!(total >= 64 << 20 && avail <= total, "{total} {avail}");
        // A prefix of a field is not that field.
        assert_eq!(meminfo("MemTot"), None);
        assert_eq!(meminfo("NoSuchField"), None);
    }

    #[test]
    fn the_estimate_follows_the_measured_bytes_per_page() {
        let cfg = DeviceConfig {
            capacity: 64 << 30,
            ..DeviceConfig::default()
        };
        let sim = cfg.sim_config().unwrap();
        let mem = Estimate::new(&sim, cfg.capacity, true);
        let per_page = (mem.tables - BASE) as f64 / (cfg.capacity / BLOCK as u64) as f64;
        assert!((13.4..13.6).contains(&per_page), "{per_page}");
        assert_eq!(mem.data, 64 << 30);
        let disk = Estimate::new(&sim, cfg.capacity, false);
        assert_eq!((disk.tables, disk.data), (mem.tables, 0));
        let e = mem.refusal(8 << 30).unwrap();
        assert!(
            e.contains("64.") && e.contains("8.0 GiB") && e.contains("--backing"),
            "{e}"
        );
        assert!(disk.refusal(8 << 30).is_none());
        assert!(disk.refusal(100 << 20).unwrap().contains("on disk"));
    }
}
