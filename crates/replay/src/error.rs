//! Why a trace could not be replayed.

use ftl_sim::SimError;
use pcstream_placement::trace::TraceError;

/// Why a trace could not be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Reading the trace failed.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The trace's content is unusable.
    #[error("{path}: {what}")]
    Bad {
        /// The trace file.
        path: String,
        /// What is wrong.
        what: String,
    },
    /// A policy run could not be set up.
    #[error("{policy}: {what}")]
    Run {
        /// The policy.
        policy: String,
        /// What went wrong.
        what: String,
    },
    /// The simulator rejected an operation.
    #[error("replay operation {index}: {source}")]
    Sim {
        /// Index into [`Replay::ops`].
        index: usize,
        /// The simulator's error.
        source: SimError,
    },
}
