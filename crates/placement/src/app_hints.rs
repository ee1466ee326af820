//! `app-hints`: the application's own write-lifetime hints as streams — the
//! paper's "ManualStream" (e.g. RocksDB's per-level `F_SET_RW_HINT`s).
//!
//! The four lifetime classes SHORT, MEDIUM, LONG, EXTREME (`RWH_WRITE_LIFE_*`
//! 2..5) map onto the data streams `1..streams`; data without a hint (0,
//! NOT_SET) or with NONE (1) goes to stream 0. With at least four data
//! streams, class `c` (0 = SHORT) uses stream `c + 1`; with fewer, the classes
//! are spread evenly in order (`1 + c·m/4` for `m` data streams: two streams
//! get {SHORT, MEDIUM} and {LONG, EXTREME}). A one-stream device puts
//! everything in stream 0.

use crate::hint::{RwHint, HINT_STREAMS};
use crate::placement::{Placement, StreamId, WriteCtx};

/// The `app-hints` policy.
#[derive(Debug, Clone, Copy)]
pub struct AppHints {
    streams: u32,
}

impl AppHints {
    /// `app-hints` for a device with `streams` stream ids.
    pub fn new(streams: u32) -> Self {
        AppHints {
            streams: streams.max(1),
        }
    }

    /// The stream for a raw `RWH_WRITE_LIFE_*` value.
    pub fn stream_for(&self, hint: u8) -> StreamId {
        let data = self.streams - 1;
        let class = match RwHint::from_raw(u64::from(hint)).map(RwHint::stream) {
            Some(s) if s >= 1 && data > 0 => s - 1,
            _ => return 0,
        };
        if data >= HINT_STREAMS {
            class + 1
        } else {
            1 + class * data / HINT_STREAMS
        }
    }
}

impl Placement for AppHints {
    fn name(&self) -> &str {
        "app-hints"
    }

    fn streams(&self) -> u32 {
        self.streams
    }

    fn place(&mut self, w: &WriteCtx) -> StreamId {
        self.stream_for(w.app_hint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_map_in_lifetime_order() {
        let p = AppHints::new(9);
        let got: Vec<_> = (0..=7).map(|h| p.stream_for(h)).collect();
        assert_eq!(got, vec![0, 0, 1, 2, 3, 4, 0, 0]);
        let two = AppHints::new(3);
        let got: Vec<_> = (2..=5).map(|h| two.stream_for(h)).collect();
        assert_eq!(got, vec![1, 1, 2, 2]);
        let three = AppHints::new(4);
        let got: Vec<_> = (2..=5).map(|h| three.stream_for(h)).collect();
        assert_eq!(got, vec![1, 1, 2, 3]);
        assert_eq!(AppHints::new(1).stream_for(5), 0);
        assert_eq!(AppHints::new(2).stream_for(2), 1);
        assert_eq!(AppHints::new(2).stream_for(5), 1);
    }

    #[test]
    fn place_reads_the_write_hint() {
        let mut p = AppHints::new(5);
        let w = WriteCtx {
            app_hint: 4,
            ..Default::default()
        };
        assert_eq!(p.place(&w), 3);
        assert!(p.place(&WriteCtx::default()) == 0);
    }
}
