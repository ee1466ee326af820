//! Placement by page age (`pageage.rs`): an in-place `O_DIRECT` write's
//! age class, the live table's stream for its call path refined by it,
//! and, for a positional write of a known call path, both before the call
//! so that its data reaches the device with that stream's hint.

use super::{events_on, file_stream, inode_hint, Before};
use crate::{files, hint};
use libc::c_int;

/// Whether `O_DIRECT` writes record their page ages (`pageage.rs`): when
/// they can matter, because events carry the class or a live table has
/// refined keys to place by.
#[inline(always)]
pub(crate) fn ages_recorded() -> bool {
    events_on() || crate::live::present()
}

/// Whether a write through `info` takes its stream from its age class
/// (an `O_DIRECT` file, no static map, a live table mapped): it then
/// needs its offset even when no event goes out.
#[inline(always)]
pub(super) fn placed_by_age(info: files::FdInfo) -> bool {
    info.direct && !hint::have_map() && crate::live::present()
}

/// Before a positional write (`b.pos`: offset, length) to an `O_DIRECT`
/// regular file whose call path is in the signature cache: its age class
/// (recorded in `pageage.rs` now, kept in `b` for the event) and its
/// stream's hint on the inode, so that the data reaches the device with
/// it. Every other write is placed after its call, as before.
#[inline(always)]
pub fn pre_place(b: &mut Before, fd: c_int) {
    if let (Some(info), Some((sig, cached)), Some((off, n))) = (b.info, b.hit, b.pos) {
        if info.direct && info.regular && info.append == Some(false) {
            pre_place_direct(b, fd, info, (sig, cached), off, n);
        }
    }
}

#[cold]
#[inline(never)]
fn pre_place_direct(
    b: &mut Before,
    fd: c_int,
    info: files::FdInfo,
    (sig, cached): (u64, u32),
    off: u64,
    n: u64,
) {
    if !ages_recorded() {
        return;
    }
    let age = age_of(info, off, n);
    b.age = Some(age);
    inode_hint(fd, info, aged_stream(sig, cached, info, age));
}

/// The age class of an `O_DIRECT` write to a regular file (`pageage.rs`),
/// recorded when it can matter (events go out, or a live table is
/// mapped); 0 for every other write.
#[inline(always)]
pub(super) fn age_of(info: files::FdInfo, offset: u64, n: u64) -> u32 {
    if info.direct && info.regular && ages_recorded() {
        crate::pageage::touch(info.id, offset, n)
    } else {
        0
    }
}

/// [`file_stream`] for a write of age class `age`: the live table's
/// stream for the signature refined by the age
/// (`online::age_key`, as the daemon learnt it) when it has one, else the
/// signature's. A static map (`PCSTREAM_MAP`) is per signature.
#[inline(always)]
pub(super) fn aged_stream(sig: u64, cached: u32, info: files::FdInfo, age: u32) -> u32 {
    if age == 0 || hint::have_map() {
        file_stream(sig, cached, info)
    } else {
        refined_stream(sig, cached, info, age)
    }
}

#[cold]
#[inline(never)]
fn refined_stream(sig: u64, cached: u32, info: files::FdInfo, age: u32) -> u32 {
    let key = pcstream_placement::signature::age_key(sig, age);
    let key = if crate::domain::any_salted() {
        crate::domain::key(key, info.id)
    } else {
        key
    };
    match crate::live::lookup(key) {
        Some((s, _)) => s,
        None => file_stream(sig, cached, info),
    }
}
