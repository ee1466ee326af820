//! The `Placement` trait: one interface for every stream-assignment policy.
//!
//! A policy sees each host write (with whatever the trace knows about it: the
//! LBA range, the file and offset, the PC signature, the application's own
//! hint, and — for the oracle only — when the data will die) and answers with
//! a stream id. Stream 0 is the default stream; a policy for an `m`-stream
//! device returns ids in `0..m`. Policies also hear about TRIMs so LBA-based
//! ones can forget state. Internal (GC) streams are a device option of the
//! simulator, orthogonal to the policy.

/// A stream id. `0` is the default stream ("no placement information").
pub type StreamId = u32;

/// Everything known about one host write when a policy places it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteCtx {
    /// Logical clock: host pages written before this write.
    pub time: u64,
    /// First logical page (LBA in pages).
    pub lpn: u64,
    /// Number of pages.
    pub pages: u32,
    /// File identity `(dev, ino)` when known (file-level and ground-truth traces).
    pub file: Option<(u64, u64)>,
    /// Page offset within the file, when `file` is known.
    pub file_page: u64,
    /// PC signature of the code path that wrote the data, when known.
    pub signature: Option<u64>,
    /// The application's own `RWH_WRITE_LIFE_*` hint for the file (0 = not set).
    pub app_hint: u8,
    /// Logical time at which this data is invalidated, when the trace knows
    /// (used only by the oracle; `None` = never invalidated within the trace).
    pub death: Option<u64>,
    /// The death typical of the whole device write this page belongs to:
    /// `time` + 2^(mean log2 lifetime of its pages), data never
    /// invalidated counted as 2^60 (`None`: the mean is that, or the
    /// policy does not ask for it, [`Placement::needs_write_death`]). Used
    /// only by `oracle-write`, the oracle that places whole writes.
    pub write_death: Option<u64>,
}

/// Why a policy placed its latest write where it did
/// ([`Placement::placed_by`]; `compare --explain`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PlacedBy {
    /// The rule, in a few words.
    pub rule: &'static str,
    /// Whether the write's key was its signature refined (by the
    /// application's hint, the page's previous lifetime or its address's
    /// write interval) rather than the bare signature.
    pub refined: bool,
}

/// A stream-assignment policy.
pub trait Placement {
    /// Short name used in reports (`baseline`, `pcstream`, ...).
    fn name(&self) -> &str;

    /// Number of streams this policy uses (its ids are in `0..streams()`).
    fn streams(&self) -> u32;

    /// Chooses the stream for a host write.
    fn place(&mut self, w: &WriteCtx) -> StreamId;

    /// Logical pages `lpn..lpn+pages` were trimmed at logical time `time`.
    fn trim(&mut self, _lpn: u64, _pages: u32, _time: u64) {}

    /// Pages `first_page..first_page+pages` of file `file` (`(dev, ino)`)
    /// stopped being live at logical time `time`: a punch-hole, a truncate
    /// (`pages = u64::MAX`, "to the end") or an unlink/replacing rename
    /// (`first_page = 0, pages = u64::MAX`). Policies that learn lifetimes
    /// from files need these; LBA-based ones ignore them.
    fn invalidate_file(&mut self, _file: (u64, u64), _first_page: u64, _pages: u64, _time: u64) {}

    /// A companion that places the device's GC copies, for policies that
    /// decide GC placement too (SepBIT). The simulator installs it as its
    /// GC hook; `None` (the default) keeps the device's own GC placement
    /// (internal streams, or back into the victim's stream). Until a
    /// policy returns one, the simulator asks again after each
    /// [`Placement::device_writes`] report (pcstream takes GC streams only
    /// once GC copies are frequent); once installed, it stays.
    fn gc_placement(&mut self) -> Option<Box<dyn GcPlacement + Send>> {
        None
    }

    /// The device's writes since the previous report: `host_pages` from
    /// the host, `gc_pages` copied by garbage collection. The simulator
    /// reports every [`DEVICE_REPORT_PAGES`] host pages. Ignored by
    /// default.
    fn device_writes(&mut self, _host_pages: u64, _gc_pages: u64) {}

    /// Named counters for reports (e.g. pcstream's signatures and
    /// re-clusterings), in a fixed order. Empty by default.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// Whether the policy reads [`WriteCtx::write_death`] (`oracle-write`);
    /// the replay works it out only then. `false` by default.
    fn needs_write_death(&self) -> bool {
        false
    }

    /// Why the latest [`Placement::place`] chose its stream, for policies
    /// that can say (pcstream); `None` by default.
    fn placed_by(&self) -> Option<PlacedBy> {
        None
    }
}

/// Host pages between two [`Placement::device_writes`] reports of the
/// simulator (64 MiB).
pub const DEVICE_REPORT_PAGES: u64 = 16384;

/// Placement of garbage-collection copies, for the simulator's GC hook
/// (see [`Placement::gc_placement`]). Times are the device's host clock
/// (host pages written), the same clock as [`WriteCtx::time`] in a replay.
pub trait GcPlacement {
    /// A victim block is being collected at `now`: it held data of external
    /// stream `stream` (`None` if several streams' data were mixed in it)
    /// and was opened at `opened`.
    fn collected(&mut self, stream: Option<StreamId>, opened: u64, now: u64);

    /// The external stream a valid page of that victim is copied into; the
    /// page holds logical page `lpn` (the same address space as
    /// [`WriteCtx::lpn`]), last written by the host at `written`.
    fn place_gc(&mut self, stream: Option<StreamId>, lpn: u64, written: u64, now: u64) -> StreamId;
}

/// Everything in one stream: what a conventional SSD does.
#[derive(Debug, Clone, Copy, Default)]
pub struct Baseline;

impl Placement for Baseline {
    fn name(&self) -> &str {
        "baseline"
    }

    fn streams(&self) -> u32 {
        1
    }

    fn place(&mut self, _w: &WriteCtx) -> StreamId {
        0
    }
}

/// Uses the stream id a trace already carries (e.g. a block trace column),
/// clamped to the device's streams. Reports call it `trace`.
#[derive(Debug, Clone, Copy)]
pub struct FromTrace {
    streams: u32,
}

impl FromTrace {
    /// A policy passing through trace stream ids below `streams` (others → 0).
    pub fn new(streams: u32) -> Self {
        FromTrace {
            streams: streams.max(1),
        }
    }

    /// The stream for an id found in a trace.
    pub fn map(&self, id: u32) -> StreamId {
        if id < self.streams {
            id
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baseline_uses_one_stream() {
        let mut b = Baseline;
        assert_eq!(b.streams(), 1);
        for t in 0..10 {
            let w = WriteCtx {
                time: t,
                lpn: t * 7,
                pages: 1,
                signature: Some(t),
                app_hint: 3,
                ..Default::default()
            };
            assert_eq!(b.place(&w), 0);
        }
    }

    #[test]
    fn from_trace_clamps_unknown_ids_to_default() {
        let p = FromTrace::new(4);
        assert_eq!(p.map(3), 3);
        assert_eq!(p.map(4), 0);
        assert_eq!(FromTrace::new(0).map(0), 0);
    }
}
