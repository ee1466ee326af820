//! The PCStream paper's device, in one place: the geometry of its emulator,
//! its over-provisioning, stream count, ageing and flash timings. Every
//! default that describes "the paper's SSD" — [`crate::Geometry::default`],
//! [`crate::Config::default`], [`crate::Timing::default`], the `sim` and
//! `compare` command-line defaults, the replay's device sizing — refers to
//! these constants instead of repeating the numbers.

/// Independent channels (buses).
pub const CHANNELS: u32 = 4;
/// Flash dies ("ways") per channel.
pub const WAYS: u32 = 4;
/// Erase blocks per die (12 GiB raw with the rest).
pub const BLOCKS_PER_UNIT: u32 = 512;
/// Pages per erase block.
pub const PAGES_PER_BLOCK: u32 = 384;
/// Page size, bytes.
pub const PAGE_SIZE: u32 = 4096;
/// Over-provisioning, `(physical − logical) / logical`.
pub const OP: f64 = 0.07;
/// External streams including the default stream 0 (Samsung PM963).
pub const STREAMS: u32 = 9;
/// Fraction of the logical space filled with cold data before a run (the
/// paper ages its SSD with 90 % valid cold data).
pub const PREFILL: f64 = 0.9;
/// GC runs while fewer than this many blocks are free.
pub const GC_FREE_BLOCKS: u32 = 2;
/// Page read latency, µs.
pub const READ_US: f64 = 75.0;
/// Page program latency, µs.
pub const PROGRAM_US: f64 = 750.0;
/// Block erase latency, µs.
pub const ERASE_US: f64 = 3800.0;
/// Bandwidth of one channel, MB/s.
pub const CHANNEL_MB_S: f64 = 333.0;
