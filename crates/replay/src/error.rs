//! Why a trace could not be replayed: one typed error per stage — a record
//! no real file or device can produce ([`RecordError`]), operations that do
//! not form a replay ([`BuildError`]), a device that cannot be sized or aged
//! ([`SizingError`]) — gathered in [`ReplayError`] with the trace file, byte
//! offset, policy or operation they concern. Each message is said once: a
//! wrapper names its context and quotes its cause.

use ftl_sim::{ConfigError, SimError};
use pcstream_placement::policies::{PolicyConfigError, UnknownPolicy};
use pcstream_placement::trace::TraceError;

/// A trace record whose sizes or offsets no real file or device has,
/// rejected before anything is allocated for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// A write event larger than one write() can move.
    #[error("write event of {len} bytes exceeds the {limit}-byte limit of one write")]
    EventTooLarge {
        /// The event's length.
        len: u64,
        /// [`crate::MAX_EVENT_BYTES`].
        limit: u64,
    },
    /// A file range ending past the largest file offset.
    #[error(
        "{what} of {len} bytes at file offset {offset} ends past the largest file ({limit} bytes)"
    )]
    PastLargestFile {
        /// What the record is.
        what: &'static str,
        /// Its length.
        len: u64,
        /// Its file offset.
        offset: u64,
        /// [`crate::MAX_FILE_BYTES`].
        limit: u64,
    },
    /// A device range ending past the recorded device (or the largest one).
    #[error("{what} of {bytes} bytes at device byte {start} ends past the {device}-byte device")]
    PastDevice {
        /// What the record is.
        what: &'static str,
        /// Its length.
        bytes: u64,
        /// Its first device byte.
        start: u64,
        /// The device's size.
        device: u64,
    },
    /// A recorded device larger than a replay holds in memory.
    #[error("recorded device of {size} bytes exceeds the {limit}-byte replay limit")]
    DeviceTooLarge {
        /// The recorded size.
        size: u64,
        /// [`crate::MAX_DEVICE_BYTES`].
        limit: u64,
    },
}

/// Device operations that do not form a replay.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// A device of no pages.
    #[error("the device has no pages")]
    NoPages,
    /// An operation beyond the logical space.
    #[error(
        "operation {index} touches pages {first}..{end} beyond the device's {logical_pages} pages"
    )]
    OutOfRange {
        /// Index of the operation.
        index: usize,
        /// Its first page.
        first: u64,
        /// One past its last page (saturated).
        end: u64,
        /// The device's logical pages.
        logical_pages: u64,
    },
    /// Ground truth: a file system whose block is not a page.
    #[error("file-system block size {0} is not the 4 KiB page size")]
    BlockSize(u32),
    /// The file-system allocator ran out of space.
    #[error("file-system model is out of space ({0} pages): give a larger size")]
    OutOfSpace(u64),
    /// [`crate::confine`] into fewer pages than are live at once.
    #[error("cannot confine {live} live pages into {hot}")]
    CannotConfine {
        /// The replay's peak of live pages.
        live: u64,
        /// The region asked for.
        hot: u64,
    },
    /// [`crate::confine`] found no free page (a bug: the peak fits).
    #[error("no free page among {0}")]
    NoFreePage(u64),
}

/// A device that cannot be sized or aged for a replay.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SizingError {
    /// A cold-data fraction outside `[0, 1)`.
    #[error("prefill fraction {0} is outside [0, 1)")]
    Prefill(f64),
    /// Over-provisioning that is not a positive number.
    #[error("over-provisioning {0} must be a positive number")]
    Op(f64),
    /// More blocks per unit than the geometry holds.
    #[error("a device of {0} logical pages is too large to simulate")]
    TooLarge(u64),
    /// No valid geometry within the search.
    #[error("cannot size a device for {0} logical pages")]
    CannotSize(u64),
    /// The simulator rejected the configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Replaying the recording's own ageing failed.
    #[error("ageing {what}: {source}")]
    Ageing {
        /// `write` or `trim`.
        what: &'static str,
        /// The simulator's error.
        source: SimError,
    },
    /// Writing the cold data failed.
    #[error(transparent)]
    Cold(SimError),
}

/// Why a policy run could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The device could not be sized or aged.
    #[error(transparent)]
    Sizing(#[from] SizingError),
    /// The policy name is unknown.
    #[error(transparent)]
    Policy(#[from] UnknownPolicy),
    /// The policy configuration is invalid.
    #[error(transparent)]
    PolicyConfig(#[from] PolicyConfigError),
    /// A per-signature breakdown asked with fresh tables at round marks.
    #[error("a per-signature breakdown needs one set of tables: not with --clear-at-marks")]
    ClearAtMarks,
}

/// Why a trace could not be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Reading the trace failed.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// A record is impossible.
    #[error("{path}: byte offset {offset}: {source}")]
    Record {
        /// The trace file.
        path: String,
        /// Byte offset of the record.
        offset: u64,
        /// What is wrong with it.
        source: RecordError,
    },
    /// The trace's operations do not form a replay.
    #[error("{path}: {source}")]
    Build {
        /// The trace file.
        path: String,
        /// What is wrong.
        source: BuildError,
    },
    /// Native signatures asked for ([`crate::ReplayOptions::native_signatures`])
    /// but the trace has none.
    #[error(
        "{path}: no write carries a native signature (only a Java program's writes \
         through the JDK's I/O natives, recorded with Java call paths on, have one)"
    )]
    NoNativeSignatures {
        /// The trace file.
        path: String,
    },
    /// A policy run could not be set up.
    #[error("{policy}: {source}")]
    Run {
        /// The policy.
        policy: String,
        /// What went wrong.
        source: RunError,
    },
    /// The simulator rejected an operation.
    #[error("replay operation {index}: {source}")]
    Sim {
        /// Index into [`crate::Replay::ops`].
        index: usize,
        /// The simulator's error.
        source: SimError,
    },
}
