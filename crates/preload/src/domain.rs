//! The learning domain of a file, as the shim needs it to look its call
//! path up in the daemon's table: pcstreamd learns per delivery domain
//! (`pcstream_placement::delivery`) and publishes the default `hints`
//! domain under the signature itself, the `f2fs` domain and each raw
//! block device's domain under a salted key
//! (`delivery::salted_key`).
//!
//! A file's domain depends only on its file system, so it is found once
//! per device (`st_dev`): the daemon's *device entry* for it when the
//! mapped table has one (a `[[device]]` section of its configuration,
//! `delivery::device_key`), else `fstatfs` on the descriptor (F2FS's magic
//! → `f2fs`, anything else → `hints`), remembered in a small fixed table
//! ([`SLOTS`] words, one per device, no allocation, no lock: a word holds
//! a hash of the device number and the class, so a reader sees a whole
//! entry or none). Classification runs when a descriptor's table entry is
//! made (`files::set`, at open) and for descriptors without an entry
//! (`files::info`). Until the process meets a device outside the default
//! domain ([`any_salted`], one flag), a write looks its signature up as
//! before; after, its device's word is read too. A `FileId` with
//! `ino == 0` (a raw block device node, `dev` = its `st_rdev`) is keyed in
//! that device's `raw` domain.

use crate::events::FileId;
use pcstream_placement::delivery::{self, F2FS_SALT};
use pcstream_placement::signature::mix64;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Devices remembered (a process writes to a few file systems).
pub const SLOTS: usize = 64;

const HINTS: u64 = 1;
const F2FS: u64 = 2;

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);
static TABLE: [AtomicU64; SLOTS] = [ZERO; SLOTS];
/// Whether a device outside the default domain was classified.
static ANY_SALTED: AtomicBool = AtomicBool::new(false);

/// Whether this process has met a file outside the default domain (then
/// writes are keyed by [`key`]).
#[inline(always)]
pub fn any_salted() -> bool {
    ANY_SALTED.load(Ordering::Relaxed)
}

#[inline(always)]
fn tag(dev: u64) -> (usize, u64) {
    let h = mix64(dev ^ 0x646f_6d61_696e_7321);
    ((h as usize) % SLOTS, h & !3)
}

/// The class remembered for `dev` (0: not known).
#[inline(always)]
fn cached(dev: u64) -> u64 {
    let (i, t) = tag(dev);
    let v = TABLE[i].load(Ordering::Relaxed);
    if v & !3 == t {
        v & 3
    } else {
        0
    }
}

fn remember(dev: u64, class: u64) {
    let (i, t) = tag(dev);
    if class != HINTS {
        ANY_SALTED.store(true, Ordering::Relaxed);
    }
    TABLE[i].store(t | class, Ordering::Relaxed);
}

/// The class of `dev`, from the table or (once) `fstatfs(fd)`; a failed
/// `fstatfs` is `hints` and not remembered.
fn class_of(fd: i32, dev: u64) -> u64 {
    let c = cached(dev);
    if c != 0 {
        return c;
    }
    match crate::live::lookup(delivery::device_key(dev)) {
        Some((s, _)) if s == delivery::DEVICE_CLASS_F2FS => {
            remember(dev, F2FS);
            return F2FS;
        }
        Some((s, _)) if s == delivery::DEVICE_CLASS_HINTS => {
            remember(dev, HINTS);
            return HINTS;
        }
        _ => {}
    }
    match delivery::fs_magic(fd) {
        Some(m) => {
            let c = if m == delivery::F2FS_SUPER_MAGIC {
                F2FS
            } else {
                HINTS
            };
            remember(dev, c);
            c
        }
        None => HINTS,
    }
}

/// Classifies the device of a regular file open as `fd` (once per
/// device); returns whether its writes are looked up under a salted key
/// (a domain other than `hints`).
pub fn classify(fd: i32, st_dev: u64) -> bool {
    class_of(fd, st_dev) != HINTS
}

/// The table key of `sig` for a write to file `id` (a classified device;
/// `ino` 0: a raw block device node).
#[inline]
pub fn key(sig: u64, id: FileId) -> u64 {
    if id.ino == 0 {
        return delivery::salted_key(sig, delivery::raw_salt(id.dev));
    }
    match cached(id.dev) {
        F2FS => delivery::salted_key(sig, F2FS_SALT),
        _ => sig,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcstream_placement::delivery::{table_key, Domain};
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn files_here_are_in_the_hints_domain_and_f2fs_is_salted() {
        let f = tempfile::tempfile().unwrap();
        let dev = f.metadata().unwrap().dev();
        // This host has no F2FS: a file's key is its signature.
        assert!(!classify(f.as_raw_fd(), dev));
        assert_eq!(key(77, FileId { dev, ino: 5 }), 77);
        // A device remembered as F2FS keys like the daemon's f2fs domain.
        let other = dev ^ 0x5555;
        remember(other, F2FS);
        assert!(classify(-1, other));
        assert!(any_salted());
        assert_eq!(
            key(77, FileId { dev: other, ino: 5 }),
            table_key(77, Domain::F2fs)
        );
        // A raw node: its own domain, whatever the table says.
        assert_eq!(
            key(77, FileId { dev: 42, ino: 0 }),
            table_key(77, Domain::Raw { dev: 42 })
        );
        // A bad descriptor is hints and not remembered.
        assert!(!classify(-1, dev ^ 0xaaaa));
        assert_eq!(cached(dev ^ 0xaaaa), 0);
    }
}
