//! Page ages of in-place `O_DIRECT` writes: how long before a write the
//! page it overwrites was last written by this process, so that one
//! flushing call path's hot and cold pages can be learnt and placed apart.
//!
//! A database writes every page through one call path (InnoDB's I/O
//! threads, a checkpointer): the call path says nothing about which pages
//! are hot. The replay's engine refines a write's key by the previous
//! lifetime of the page it overwrites (`RefineConfig::prev_lifetime`); this
//! is the shim's side of the same refinement live. Each overwritten page's
//! previous lifetime, on this process's clock (bytes it wrote through
//! tracked writes, in 4 KiB pages), falls in a bucket floor(log2(life) / 2)
//! (×4 wide, the engine's `prev_bucket_log2`); the write carries 1 + that
//! bucket as its age class (`WriteEvent.age_class`), and its stream is the
//! one published for `online::age_key(signature, class)`, else the bare
//! signature's. A write onto a page the table does not hold has class 0
//! (the bare signature) when the page is free: beyond the file's size when
//! this process first saw it opened `O_DIRECT`, never written since, or
//! evicted. A page that held data before that (a database restarted on its
//! own files, or a file another process wrote) has class [`AGE_OLDER`]:
//! its first rewrite here is learnt under a key of its own, not under the
//! bare signature, whose writes onto free pages (a load, a table's growth)
//! would otherwise be mixed with every page's first rewrite after each
//! restart. The sizes at first sight are kept per file in a second small
//! table ([`FILES`] slots, direct-mapped; a file that loses its slot is
//! seen again at its next open).
//!
//! Only `O_DIRECT` writes to regular files: a buffered write's hint is
//! read per file at writeback (F2FS takes the inode's hint when it writes
//! the page back), so a per-write stream within one file cannot reach the
//! device there, and flipping the file's hint between writes would only
//! blur its class.
//!
//! Hand-written, not a `HashMap`: the table is touched inside `write` by
//! any thread, possibly in a signal handler, under the shim's re-entrancy
//! guard, where allocating is not allowed. It is one anonymous mapping
//! made at the first tracked write (`PCSTREAM_PAGE_AGES` slots, 0 = off),
//! 4-way set-associative with 16-byte slots (one cache line per set): a
//! page hashes to a set, and a new page replaces the set's oldest, so the
//! table remembers the most recently written pages and an old page simply
//! reads as free. Slots are pairs of relaxed atomics: two threads writing
//! one set at once can lose an update or pair a tag with the other's
//! clock, which costs one write its class (a wrong bucket), never memory
//! safety. Deaths the shim sees (unlink, truncate) drop their pages, so a
//! reused inode number does not inherit its predecessor's ages.

use crate::events::FileId;
use pcstream_placement::signature::mix64;
pub use pcstream_placement::signature::AGE_OLDER;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Slots per set.
const WAYS: usize = 4;
/// Default slot count (`PCSTREAM_PAGE_AGES`): 262,144 pages (1 GiB of
/// distinct 4 KiB pages) in 4 MiB.
pub const DEFAULT_SLOTS: usize = 1 << 18;
/// Pages of one write whose ages are recorded (the first page's age is
/// the write's class); beyond, a write's pages read as free later.
const MAX_PAGES_PER_WRITE: u64 = 4096;
/// Pages dropped one by one at a death; a larger range scans the table.
const MAX_FORGET_PROBES: u64 = 4096;
const PAGE: u64 = 4096;

#[repr(C, align(64))]
struct Set {
    /// File tag (never 0) per way; 0 = empty.
    tags: [AtomicU64; WAYS],
    /// `page << 32 | clock` per way (clock in pages, wrapping).
    words: [AtomicU64; WAYS],
}

const _: () = assert!(std::mem::size_of::<Set>() == 64);

/// Sets (a power of two) once the table is made; 0 before; `usize::MAX`
/// when off.
static SETS: AtomicUsize = AtomicUsize::new(0);
static TABLE: AtomicPtr<Set> = AtomicPtr::new(std::ptr::null_mut());
/// Slots configured (`PCSTREAM_PAGE_AGES`), read at the first use.
static SLOTS: AtomicUsize = AtomicUsize::new(DEFAULT_SLOTS);
/// This process's clock: bytes written by tracked writes.
static CLOCK: AtomicU64 = AtomicU64::new(0);

/// Files whose size at first sight is kept (direct-mapped by file tag).
pub const FILES: usize = 1024;

/// A file's size, in pages, when this process first saw it opened
/// `O_DIRECT`: its pages below are older than anything the page table
/// holds.
struct FileSlot {
    /// File tag (never 0); 0 = empty.
    tag: AtomicU64,
    /// Pages (rounded up) that held data at first sight.
    pages: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const NO_FILE: FileSlot = FileSlot {
    tag: AtomicU64::new(0),
    pages: AtomicU64::new(0),
};
static FILE_TABLE: [FileSlot; FILES] = [NO_FILE; FILES];

fn file_slot(tag: u64) -> &'static FileSlot {
    &FILE_TABLE[(mix64(tag) as usize) & (FILES - 1)]
}

/// Sets the table's size (library constructor; 0 turns it off).
pub fn configure(slots: usize) {
    SLOTS.store(slots, Ordering::Relaxed);
}

/// The table, made at the first call (`None` when off or the mapping
/// failed).
fn table() -> Option<&'static [Set]> {
    match SETS.load(Ordering::Acquire) {
        usize::MAX => None,
        0 => make(),
        _ => made(),
    }
}

/// The table when it was made (`None` before the first tracked write,
/// or when off).
fn made() -> Option<&'static [Set]> {
    let n = SETS.load(Ordering::Acquire);
    if n == 0 || n == usize::MAX {
        return None;
    }
    // SAFETY: TABLE holds a mapping of n sets, never unmapped once
    // published (Release, before SETS).
    Some(unsafe { std::slice::from_raw_parts(TABLE.load(Ordering::Acquire), n) })
}

#[cold]
#[inline(never)]
fn make() -> Option<&'static [Set]> {
    let slots = SLOTS.load(Ordering::Relaxed);
    let sets = (slots / WAYS).checked_next_power_of_two().unwrap_or(0);
    if sets == 0 || slots == 0 {
        SETS.store(usize::MAX, Ordering::Release);
        return None;
    }
    let bytes = sets * std::mem::size_of::<Set>();
    // SAFETY: a fresh anonymous private mapping; zero-filled = every slot
    // empty; pages materialise as sets are touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        SETS.store(usize::MAX, Ordering::Release);
        return None;
    }
    match TABLE.compare_exchange(
        std::ptr::null_mut(),
        p.cast(),
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => SETS.store(sets, Ordering::Release),
        Err(_) => {
            // Another thread made it first: wait for its SETS, drop ours.
            // SAFETY: p is our own mapping of `bytes`, not published.
            unsafe { libc::munmap(p, bytes) };
            while SETS.load(Ordering::Acquire) == 0 {
                std::hint::spin_loop();
            }
        }
    }
    table()
}

fn tag_of(id: FileId) -> u64 {
    mix64(id.dev ^ mix64(id.ino)).max(1)
}

fn set_of(sets: &[Set], tag: u64, page: u64) -> &Set {
    let h = mix64(tag ^ page.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    &sets[(h as usize) & (sets.len() - 1)]
}

/// A regular file opened (or switched to) `O_DIRECT` with `size` bytes:
/// the first time this process sees it (since it was last emptied), its
/// pages below `size` are older than the process's page table. Later opens
/// keep the first size: pages written since are in the page table.
pub fn opened(id: FileId, size: u64) {
    let tag = tag_of(id);
    let slot = file_slot(tag);
    if slot.tag.load(Ordering::Relaxed) != tag {
        // Pages before the tag: a racing reader sees the new tag with the
        // old count at worst (one write's class).
        slot.pages.store(size.div_ceil(PAGE), Ordering::Relaxed);
        slot.tag.store(tag, Ordering::Relaxed);
    }
}

/// File `id` is gone (its last link, whatever size it had: another
/// process may have shrunk it): its size at first sight goes too, so that
/// a new file on the same inode number starts free.
pub fn gone(id: FileId) {
    let tag = tag_of(id);
    let slot = file_slot(tag);
    if slot.tag.load(Ordering::Relaxed) == tag {
        slot.tag.store(0, Ordering::Relaxed);
    }
}

/// Whether `page` of the file tagged `tag` held data when this process
/// first saw the file.
fn older(tag: u64, page: u64) -> bool {
    let slot = file_slot(tag);
    slot.tag.load(Ordering::Relaxed) == tag && page < slot.pages.load(Ordering::Relaxed)
}

/// The age class of a page last written at clock `then`, now `now`.
pub fn class_of(now: u32, then: u32) -> u32 {
    let life = now.wrapping_sub(then).max(1);
    1 + life.ilog2() / 2
}

/// Records an `O_DIRECT` write of `len` bytes at `offset` of file `id`
/// and returns its age class: 1 + the bucket of the time since its first
/// page was last written here; when the table does not hold that page,
/// [`AGE_OLDER`] if it held data when this process first saw the file
/// ([`opened`]), else 0 (a free page; also when the table is off).
pub fn touch(id: FileId, offset: u64, len: u64) -> u32 {
    let Some(sets) = table() else { return 0 };
    let tag = tag_of(id);
    let now_bytes = CLOCK.fetch_add(len, Ordering::Relaxed);
    let first = offset / PAGE;
    let end = offset.saturating_add(len).div_ceil(PAGE).max(first + 1);
    let mut class = 0;
    for page in first..end.min(first + MAX_PAGES_PER_WRITE) {
        // Each page at the clock of its first byte in the write (as the
        // daemon's clock places it).
        let at = (now_bytes + (page * PAGE).saturating_sub(offset)) / PAGE;
        let old = record(set_of(sets, tag, page), tag, page, at as u32);
        if page == first {
            class = match old {
                Some(then) => class_of(at as u32, then),
                None if older(tag, page) => AGE_OLDER,
                None => 0,
            };
        }
    }
    class
}

/// Stores `clock` for (`tag`, `page`) in `set` (in the slot it had, else
/// an empty one, else the one written longest ago); returns the clock it
/// had.
fn record(set: &Set, tag: u64, page: u64, clock: u32) -> Option<u32> {
    let key = page & 0xffff_ffff;
    let word = key << 32 | u64::from(clock);
    let (mut victim, mut victim_age, mut empty) = (0, 0u32, false);
    for w in 0..WAYS {
        let t = set.tags[w].load(Ordering::Relaxed);
        let v = set.words[w].load(Ordering::Relaxed);
        if t == tag && v >> 32 == key {
            set.words[w].store(word, Ordering::Relaxed);
            return Some(v as u32);
        }
        if empty {
            continue;
        }
        if t == 0 {
            (victim, empty) = (w, true);
            continue;
        }
        let age = clock.wrapping_sub(v as u32);
        if age >= victim_age {
            (victim, victim_age) = (w, age);
        }
    }
    set.words[victim].store(word, Ordering::Relaxed);
    set.tags[victim].store(tag, Ordering::Relaxed);
    None
}

/// Forgets the pages of file `id` from byte `from` on, up to `to` (its
/// size before: a truncation, or an unlink from 0; or a punched hole):
/// they are free. A death of the file's tail lowers its size at first
/// sight (to 0 for an unlink, whose [`gone`] then drops it); a hole
/// punched inside that size does not (one number per file): a write into
/// it reads as [`AGE_OLDER`].
pub fn forget(id: FileId, from: u64, to: u64) {
    let tag = tag_of(id);
    let slot = file_slot(tag);
    if slot.tag.load(Ordering::Relaxed) == tag
        && to.div_ceil(PAGE) >= slot.pages.load(Ordering::Relaxed)
    {
        slot.pages.fetch_min(from.div_ceil(PAGE), Ordering::Relaxed);
    }
    // Nothing more to forget before the first tracked write made the table.
    let Some(sets) = made() else { return };
    let first = from.div_ceil(PAGE);
    let end = to.div_ceil(PAGE);
    if end <= first {
        return;
    }
    // Page keys are the low 32 bits of the page number (16 TiB files).
    let (lo, hi) = (first.min(0xffff_ffff), end.min(1 << 32));
    let drop = |set: &Set| {
        for w in 0..WAYS {
            let page = set.words[w].load(Ordering::Relaxed) >> 32;
            if set.tags[w].load(Ordering::Relaxed) == tag && page >= lo && page < hi {
                set.tags[w].store(0, Ordering::Relaxed);
            }
        }
    };
    if end - first <= MAX_FORGET_PROBES {
        for page in first..end {
            drop(set_of(sets, tag, page));
        }
    } else {
        sets.iter().for_each(drop);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(ino: u64) -> FileId {
        FileId { dev: 8, ino }
    }

    #[test]
    fn classes_are_the_engines_buckets_of_the_previous_lifetime() {
        // floor(log2(life) / 2) + 1, life in pages, at least 1.
        assert_eq!(class_of(10, 10), 1);
        assert_eq!(class_of(13, 10), 1);
        assert_eq!(class_of(14, 10), 2);
        assert_eq!(class_of(26, 10), 3);
        assert_eq!(class_of(5, u32::MAX - 10), 3, "the clock wraps: 16 pages");
        for life in [1u32, 2, 3, 4, 15, 16, 1000, 1 << 20] {
            let engine = ((life as f64).log2() / 2.0) as u32;
            assert_eq!(class_of(life, 0), engine + 1, "life {life}");
        }
    }

    /// One test for the process-wide table (tests run in threads).
    #[test]
    fn rewrites_read_their_age_deaths_and_eviction_free_pages() {
        configure(1024);
        let hot = f(1);
        assert_eq!(touch(hot, 0, 4 * PAGE), 0, "free pages");
        // 60 pages elsewhere, then the first page again: ~64 pages old.
        for i in 0..15 {
            assert_eq!(touch(f(2), (1 << 30) + i * 4 * PAGE, 4 * PAGE), 0);
        }
        let c = touch(hot, 0, PAGE);
        assert_eq!(c, class_of(64, 0), "rewritten after 64 pages");
        // Rewritten at once: the shortest class.
        assert_eq!(touch(hot, PAGE, PAGE), class_of(65, 1));
        assert_eq!(touch(hot, PAGE, PAGE), 1);
        // A truncation frees what lies beyond the new size.
        forget(hot, PAGE, 4 * PAGE);
        assert_eq!(touch(hot, PAGE, PAGE), 0);
        assert_eq!(touch(hot, 0, PAGE), class_of(4, 0), "page 0 stays");
        // An unlink (from 0, a long file: the whole table is scanned).
        forget(hot, 0, 1 << 40);
        assert_eq!(touch(hot, 0, PAGE), 0);
        // 1024 slots: after writing many more pages, an old one is
        // evicted and reads as free, never as another page's age.
        for i in 0..20_000 {
            touch(f(3), i * PAGE, PAGE);
        }
        assert_eq!(touch(f(2), 1 << 30, PAGE), 0);

        // A file seen opened with 10 pages of data (a restart): their
        // first rewrites are older than the process, then aged as usual;
        // pages beyond are free.
        let db = f(4);
        opened(db, 10 * PAGE - 100);
        assert_eq!(touch(db, 9 * PAGE, PAGE), AGE_OLDER);
        assert_eq!(touch(db, 9 * PAGE, PAGE), 1, "then its own age");
        assert_eq!(touch(db, 10 * PAGE, PAGE), 0, "beyond: free");
        // Opened again later: the first size stays.
        opened(db, 11 * PAGE);
        assert_eq!(touch(db, 10 * PAGE, PAGE), 1);
        // A truncation to 4 pages lowers it; a hole inside does not.
        forget(db, 4 * PAGE, 11 * PAGE);
        assert_eq!(touch(db, 5 * PAGE, PAGE), 0, "truncated away: free");
        forget(db, PAGE, 2 * PAGE);
        assert_eq!(touch(db, PAGE, PAGE), AGE_OLDER, "a punched hole");
        assert_eq!(touch(db, 2 * PAGE, PAGE), AGE_OLDER);
        // An unlink forgets it: the inode may come back as a new file.
        forget(db, 0, 1 << 40);
        assert_eq!(touch(db, 3 * PAGE, PAGE), 0);
        // Also when the file had shrunk below its first size elsewhere.
        let other = f(5);
        opened(other, 8 * PAGE);
        forget(other, 0, 2 * PAGE);
        assert_eq!(touch(other, 4 * PAGE, PAGE), AGE_OLDER);
        gone(other);
        assert_eq!(touch(other, 5 * PAGE, PAGE), 0);
    }
}
