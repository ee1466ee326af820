//! The flash array's physical layout ([`Geometry`]) on its own: the device
//! configuration and the timing model both use it, neither through the other.

use crate::paper;
use serde::{Deserialize, Serialize};

/// Physical layout of the flash array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Geometry {
    /// Independent channels (buses).
    pub channels: u32,
    /// Flash dies ("ways") per channel.
    pub ways: u32,
    /// Erase blocks per die (a die is a "unit").
    pub blocks_per_unit: u32,
    /// Pages per erase block.
    pub pages_per_block: u32,
    /// Page size in bytes.
    pub page_size: u32,
}

impl Default for Geometry {
    /// The PCStream paper's emulator: 4 channels × 4 ways, 512 blocks per
    /// unit, 384 pages per block, 4 KiB pages (12 GiB raw).
    fn default() -> Self {
        Geometry {
            channels: paper::CHANNELS,
            ways: paper::WAYS,
            blocks_per_unit: paper::BLOCKS_PER_UNIT,
            pages_per_block: paper::PAGES_PER_BLOCK,
            page_size: paper::PAGE_SIZE,
        }
    }
}

impl Geometry {
    /// Parallel units (dies): channels × ways.
    pub fn units(&self) -> u64 {
        u64::from(self.channels) * u64::from(self.ways)
    }

    /// Erase blocks in the whole device.
    pub fn blocks(&self) -> u64 {
        self.units() * u64::from(self.blocks_per_unit)
    }

    /// Physical pages in the whole device.
    pub fn physical_pages(&self) -> u64 {
        self.blocks() * u64::from(self.pages_per_block)
    }
}
