//! Reading a recorded trace: every record checked against the sizes a real
//! file or device can have before anything is allocated for it, the shim's
//! file events and the device's records merged into one time order
//! (`Ev`), and the helpers both replay sources use to read them.

use crate::error::RecordError;
use crate::ops::{Op, PAGE};
use pcstream_placement::wire::{self, event::Kind, trace_record::Record};

#[derive(Clone)]
pub(crate) enum Ev {
    ShimWrite(wire::WriteEvent),
    ShimInvalidate(wire::InvalidateEvent),
    AppHint(wire::AppHintEvent),
    Extent(wire::ExtentMap),
    Block(wire::BlockRequest),
}

impl Ev {
    /// Order among events with the same timestamp: shim events first (a
    /// write() precedes its writeback), then mappings, then requests.
    pub(crate) fn rank(&self) -> u8 {
        match self {
            Ev::ShimWrite(_) | Ev::AppHint(_) => 0,
            Ev::ShimInvalidate(_) => 1,
            Ev::Extent(_) => 2,
            Ev::Block(_) => 3,
        }
    }
}

/// Largest write one event may carry: Linux moves at most this much per call
/// (`MAX_RW_COUNT`), and the shim's coalesced runs are far shorter.
pub const MAX_EVENT_BYTES: u64 = 0x7fff_f000;

/// Largest file offset (`loff_t` is signed).
pub const MAX_FILE_BYTES: u64 = i64::MAX as u64;

/// Largest recorded device a replay accepts (its per-page tables are held in memory).
pub const MAX_DEVICE_BYTES: u64 = 1 << 40;

/// Rejects a record whose sizes or offsets no real file or device has, before
/// anything is allocated for it. `device_size` is the recorded device's, if seen.
pub(crate) fn check_record(
    rec: &wire::TraceRecord,
    device_size: Option<u64>,
) -> Result<(), RecordError> {
    let file_range = |what: &'static str, offset: u64, len: u64| match offset.checked_add(len) {
        Some(end) if end <= MAX_FILE_BYTES => Ok(()),
        _ => Err(RecordError::PastLargestFile {
            what,
            len,
            offset,
            limit: MAX_FILE_BYTES,
        }),
    };
    let device = device_size.unwrap_or(MAX_DEVICE_BYTES);
    let device_range = |what: &'static str, start: u64, bytes: u64| match start.checked_add(bytes) {
        Some(end) if end <= device => Ok(()),
        _ => Err(RecordError::PastDevice {
            what,
            bytes,
            start,
            device,
        }),
    };
    match &rec.record {
        Some(Record::Batch(b)) => {
            for e in &b.events {
                match &e.kind {
                    Some(Kind::Write(w)) => {
                        if w.len > MAX_EVENT_BYTES {
                            return Err(RecordError::EventTooLarge {
                                len: w.len,
                                limit: MAX_EVENT_BYTES,
                            });
                        }
                        file_range("write event", w.offset, w.len)?;
                    }
                    Some(Kind::Invalidate(i)) => file_range("invalidation", i.offset, i.len)?,
                    _ => {}
                }
            }
        }
        Some(Record::Block(b)) => device_range(
            "block request",
            b.sector.saturating_mul(512),
            u64::from(b.nr_sectors) * 512,
        )?,
        Some(Record::Extent(x)) => device_range(
            "extent",
            x.device_block.saturating_mul(PAGE),
            u64::from(x.len_blocks) * PAGE,
        )?,
        Some(Record::Device(d)) if d.size_bytes > MAX_DEVICE_BYTES => {
            return Err(RecordError::DeviceTooLarge {
                size: d.size_bytes,
                limit: MAX_DEVICE_BYTES,
            })
        }
        _ => {}
    }
    Ok(())
}

pub(crate) fn file_of(f: &Option<wire::FileId>) -> (u64, u64) {
    f.as_ref().map(|f| (f.dev, f.ino)).unwrap_or((0, 0))
}

pub(crate) fn pages_of(offset: u64, len: u64) -> std::ops::Range<u64> {
    if len == 0 {
        return 0..0;
    }
    offset / PAGE..(offset + len).div_ceil(PAGE)
}

pub(crate) fn app_hint_of(h: &wire::AppHintEvent) -> Option<u8> {
    (1..=5).contains(&h.requested).then_some(h.requested as u8)
}

pub(crate) fn invalidate_op(i: &wire::InvalidateEvent) -> Op {
    let kind = wire::InvalidateKind::try_from(i.kind).unwrap_or(wire::InvalidateKind::Unspecified);
    let (first_page, pages) = match kind {
        wire::InvalidateKind::Unlink
        | wire::InvalidateKind::RenameReplace
        | wire::InvalidateKind::CloseUnlinked => (0, u64::MAX),
        wire::InvalidateKind::Truncate => (i.offset.div_ceil(PAGE), u64::MAX),
        _ => {
            // Only whole pages inside a punched range die.
            let first = i.offset.div_ceil(PAGE);
            let end = (i.offset + i.len) / PAGE;
            (first, end.saturating_sub(first))
        }
    };
    Op::InvalidateFile {
        file: file_of(&i.file),
        first_page,
        pages,
    }
}
