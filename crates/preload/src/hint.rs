//! Streams → kernel write-lifetime hints.
//!
//! * the static mapping (`PCSTREAM_MAP`): signature → stream, loaded once at
//!   init into an immutable sorted table (lock-free binary search);
//! * the per-inode hint cache: the last `RWH_WRITE_LIFE_*` value known to be
//!   on each (dev, ino), packed with a hash of the inode into one atomic word
//!   per entry, so `F_SET_RW_HINT` is only called when the hint changes;
//!   every change moves an epoch (`state.rs`), and a descriptor's table
//!   entry (`files.rs`) keeps a copy of its inode's hint tagged with the
//!   epoch it was read in, so a repeat write reads neither this cache nor
//!   its hash;
//! * reading what an application meant by its own `F_SET_RW_HINT` argument
//!   (RocksDB 7.8 passes a pointer to a 4-byte enum).

use crate::events::FileId;
use pcstream_placement::hint::{RwHint, F_GET_RW_HINT, F_SET_RW_HINT};
use pcstream_placement::signature::{mix64, Signature};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// A bad line in a mapping file.
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    /// The file could not be read.
    #[error("pcstream: {path}: {source}")]
    Io {
        /// The mapping file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not `<signature-hex> <stream>`.
    #[error("pcstream: {path}:{line}: {what}")]
    Syntax {
        /// The mapping file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        what: String,
    },
}

/// Largest mapping file read (16 MiB: about 400,000 lines).
pub const MAX_MAP_BYTES: u64 = 16 << 20;

/// A static signature → stream mapping.
#[derive(Debug, Default)]
pub struct Map {
    entries: Box<[(u64, u32)]>,
}

impl Map {
    /// Parses mapping text (`path` only names the file in errors).
    pub fn parse(path: &Path, text: &str) -> Result<Map, MapError> {
        let mut v = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = |what: String| MapError::Syntax {
                path: path.to_path_buf(),
                line: i + 1,
                what,
            };
            let mut it = line.split_whitespace();
            let (Some(sig), Some(stream), None) = (it.next(), it.next(), it.next()) else {
                return Err(bad(format!(
                    "expected `<signature-hex> <stream>`, got {line:?}"
                )));
            };
            let sig: Signature = sig
                .parse()
                .map_err(|e| bad(format!("bad signature {sig:?}: {e}")))?;
            let stream: u32 = stream
                .parse()
                .map_err(|e| bad(format!("bad stream {stream:?}: {e}")))?;
            v.push((sig.0, stream));
        }
        v.sort_unstable();
        v.dedup_by_key(|e| e.0);
        Ok(Map {
            entries: v.into_boxed_slice(),
        })
    }

    /// Reads and parses a mapping file: a regular file of at most
    /// [`MAX_MAP_BYTES`], opened non-blocking (a FIFO or a device named by
    /// mistake is refused at once instead of blocking the program's start
    /// or filling its memory).
    pub fn load(path: &Path) -> Result<Map, MapError> {
        let text = pcstream_placement::readfile::read_bounded_text(path, MAX_MAP_BYTES).map_err(
            |source| MapError::Io {
                path: path.to_path_buf(),
                source,
            },
        )?;
        Map::parse(path, &text)
    }

    /// Stream of a signature (0 when unmapped).
    #[inline]
    pub fn stream(&self, sig: u64) -> u32 {
        match self.entries.binary_search_by_key(&sig, |e| e.0) {
            Ok(i) => self.entries[i].1,
            Err(_) => 0,
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

static MAP: OnceLock<Map> = OnceLock::new();

/// Installs the static mapping (init).
pub fn install_map(m: Map) {
    let _ = MAP.set(m);
}

/// Whether a non-empty mapping is installed.
#[inline]
pub fn have_map() -> bool {
    MAP.get().is_some_and(|m| !m.is_empty())
}

/// Stream of a signature under the installed mapping (0 = unknown).
#[inline]
pub fn stream_for(sig: u64) -> u32 {
    MAP.get().map_or(0, |m| m.stream(sig))
}

// ---------------------------------------------------------------------------
// Per-inode hint cache
// ---------------------------------------------------------------------------

const CACHE: usize = 4096;
#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);
static HINTS: [AtomicU64; CACHE] = [ZERO; CACHE];

fn tag(f: FileId) -> (usize, u64) {
    let h = mix64(f.dev.rotate_left(32) ^ mix64(f.ino));
    ((h as usize) % CACHE, h & !7)
}

/// The hint last known to be on the inode, if known.
#[inline]
pub fn cached(f: FileId) -> Option<u64> {
    let (i, t) = tag(f);
    let v = HINTS[i].load(Ordering::Relaxed);
    (v & !7 == t && v & 7 != 0).then(|| (v & 7) - 1)
}

/// Records the hint now on the inode (a change moves the epoch that
/// descriptors' copies of their inode's hint are checked against).
pub fn remember(f: FileId, hint: u64) {
    if hint <= 5 {
        let (i, t) = tag(f);
        if HINTS[i].swap(t | (hint + 1), Ordering::Relaxed) != t | (hint + 1) {
            crate::hot::bump_hint_epoch();
        }
    }
}

/// Forgets an inode (it was deleted; its number may be reused).
pub fn forget(f: FileId) {
    let (i, t) = tag(f);
    let v = HINTS[i].load(Ordering::Relaxed);
    if v & !7 == t
        && HINTS[i]
            .compare_exchange(v, 0, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        crate::hot::bump_hint_epoch();
    }
}

/// `fcntl(fd, cmd, &u64)` (a raw syscall); returns (rc, errno).
fn fcntl_u64(fd: i32, cmd: i32, v: &mut u64) -> (i32, i32) {
    // F_{GET,SET}_RW_HINT take a pointer to a u64 that we own.
    let rc = crate::sys::fcntl(fd, cmd, v as *mut u64 as usize);
    let errno = if rc < 0 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    } else {
        0
    };
    (rc, errno)
}

/// Sets `hint` on the file behind `fd` unless the cache says it is there.
/// Returns the hint now known to be on the inode (0 when unknown).
pub fn apply(fd: i32, f: FileId, hint: RwHint) -> u64 {
    let want = hint.raw();
    if cached(f) == Some(want) {
        return want;
    }
    let mut v = want;
    let (rc, _) = fcntl_u64(fd, F_SET_RW_HINT, &mut v);
    if rc == 0 {
        remember(f, want);
        want
    } else {
        cached(f).unwrap_or(0)
    }
}

/// Reads the inode's current hint into the cache (when the file is opened).
pub fn refresh(fd: i32, f: FileId) {
    let mut v = 0u64;
    if fcntl_u64(fd, F_GET_RW_HINT, &mut v).0 == 0 {
        remember(f, v);
    }
}

/// What an application meant by the 8 bytes its `F_SET_RW_HINT` argument
/// points to: the u64 when valid, else the low 4 bytes when those are a
/// valid hint (a 4-byte enum followed by stack garbage). `None` when neither.
pub fn intended(raw: u64) -> Option<u64> {
    if RwHint::from_raw(raw).is_some() {
        return Some(raw);
    }
    let low = raw & 0xffff_ffff;
    RwHint::from_raw(low).map(|_| low)
}

/// Applies an application's intended hint correctly (the repair of a
/// malformed call). Returns whether it worked.
pub fn repair(fd: i32, f: FileId, hint: u64) -> bool {
    let mut v = hint;
    let ok = fcntl_u64(fd, F_SET_RW_HINT, &mut v).0 == 0;
    if ok {
        remember(f, hint);
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_parses_comments_and_hex() {
        let m = Map::parse(
            Path::new("m"),
            "# comment\n00000000000000ff 2\n0x10 3 # trailing\n\n",
        )
        .unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m.stream(0xff), 2);
        assert_eq!(m.stream(0x10), 3);
        assert_eq!(m.stream(0x11), 0);
    }

    #[test]
    fn map_errors_name_file_and_line() {
        let e = Map::parse(Path::new("/etc/m.map"), "ff 1\nzz 2\n").unwrap_err();
        assert_eq!(e.to_string().split(": ").next(), Some("pcstream"));
        assert!(e.to_string().contains("/etc/m.map:2"), "{e}");
        let e = Map::parse(Path::new("m"), "ff\n").unwrap_err();
        assert!(e.to_string().contains("m:1"), "{e}");
        let e = Map::parse(Path::new("m"), "ff -1\n").unwrap_err();
        assert!(e.to_string().contains("bad stream"), "{e}");
    }

    #[test]
    fn map_load_refuses_what_is_not_a_small_regular_file() {
        let e = Map::load(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(e.to_string(), "pcstream: /dev/zero: not a regular file");
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.map");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_MAP_BYTES + 1).unwrap(); // sparse
        let e = Map::load(&big).unwrap_err();
        assert!(e.to_string().ends_with("larger than 16 MiB"), "{e}");
        let ok = dir.path().join("ok.map");
        std::fs::write(&ok, "ff 2\n").unwrap();
        assert_eq!(Map::load(&ok).unwrap().stream(0xff), 2);
    }

    #[test]
    fn intended_reads_four_byte_enums() {
        assert_eq!(intended(3), Some(3));
        assert_eq!(intended(0xdead_beef_0000_0004), Some(4));
        assert_eq!(intended(0xdead_beef_0000_0009), None);
        assert_eq!(intended(6), None);
    }

    #[test]
    fn cache_round_trip_and_forget() {
        let f = FileId { dev: 9, ino: 1234 };
        assert_eq!(cached(f), None);
        remember(f, 3);
        assert_eq!(cached(f), Some(3));
        remember(f, 0);
        assert_eq!(cached(f), Some(0));
        forget(f);
        assert_eq!(cached(f), None);
    }
}
