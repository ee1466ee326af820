//! Where the namespace's data lives: sparse in memory or in a backing file
//! (sparse on the file system, so it survives a target restart). Blocks
//! never written read as zeros.
//!
//! Every connection reads and writes the store directly, outside the
//! device mutex (which guards only the simulator and the counters). The
//! memory store is cut into regions, each an anonymous mapping made on
//! its first write (pre-faulted in one call, so a region costs one
//! syscall instead of one page fault per block) behind its own lock: no
//! allocation per block, no global lock, and writes of different regions
//! run in parallel. Writes take byte offsets so transport data can land
//! in place as it arrives. Deallocating file data punches a hole in the
//! file (it gives the space back and costs no writes), falling back to
//! writing zeros only where the file system cannot punch holes.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use memmap2::{MmapMut, MmapOptions};

/// Smallest memory region (bytes); larger namespaces use larger regions so
/// a namespace never needs more than [`MAX_REGIONS`] mappings.
const MIN_REGION: u64 = 1 << 20;
/// Most regions (mappings) of one memory store.
const MAX_REGIONS: u64 = 8192;

type Region = RwLock<Option<MmapMut>>;

/// The data of a namespace: `bytes` bytes addressed by byte offset.
#[derive(Debug)]
pub enum Store {
    /// Written regions only, in memory.
    Memory {
        /// Region size in bytes (a power of two).
        region: u64,
        /// Region `i` covers bytes `i·region ..`.
        regions: Vec<Region>,
        /// Namespace size in bytes.
        bytes: u64,
    },
    /// A file of `bytes` bytes.
    File {
        /// The open file.
        file: File,
        /// Namespace size in bytes.
        bytes: u64,
    },
}

fn read_lock(r: &Region) -> RwLockReadGuard<'_, Option<MmapMut>> {
    r.read().unwrap_or_else(|e| e.into_inner())
}

fn write_lock(r: &Region) -> RwLockWriteGuard<'_, Option<MmapMut>> {
    r.write().unwrap_or_else(|e| e.into_inner())
}

fn out_of_range(at: u64, len: usize, bytes: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{len} bytes at {at} are outside the {bytes}-byte namespace"),
    )
}

impl Store {
    /// An empty in-memory store of `bytes` bytes.
    pub fn memory(bytes: u64) -> Store {
        let region = bytes
            .div_ceil(MAX_REGIONS)
            .next_power_of_two()
            .max(MIN_REGION);
        let n = bytes.div_ceil(region) as usize;
        Store::Memory {
            region,
            regions: (0..n).map(|_| RwLock::new(None)).collect(),
            bytes,
        }
    }

    /// Opens (creating if needed) a backing file sized to `bytes`; existing
    /// contents are kept: a shorter file is extended, a longer one refused
    /// (truncating it would destroy data past the namespace).
    pub fn file(path: &Path, bytes: u64) -> io::Result<Store> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let size = file.metadata()?.len();
        if size > bytes {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the file is {size} bytes, larger than the capacity of {bytes} bytes; \
                     refusing to truncate it (give a capacity of at least {size} bytes, or another file)"
                ),
            ));
        }
        if size < bytes {
            file.set_len(bytes)?;
        }
        Ok(Store::File { file, bytes })
    }

    /// Namespace size in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Store::Memory { bytes, .. } | Store::File { bytes, .. } => *bytes,
        }
    }

    /// Whether the namespace has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn check(&self, at: u64, len: usize) -> io::Result<()> {
        match at.checked_add(len as u64) {
            Some(end) if end <= self.len() => Ok(()),
            _ => Err(out_of_range(at, len, self.len())),
        }
    }

    /// Calls `f(region index, offset in region, range of the request)` for
    /// each region piece of `len` bytes at `at`.
    fn pieces(region: u64, at: u64, len: usize, mut f: impl FnMut(usize, usize, usize, usize)) {
        let mut done = 0usize;
        while done < len {
            let pos = at + done as u64;
            let (i, off) = ((pos / region) as usize, (pos % region) as usize);
            let n = (len - done).min(region as usize - off);
            f(i, off, done, done + n);
            done += n;
        }
    }

    /// Reads `buf.len()` bytes at byte offset `at`.
    pub fn read_at(&self, at: u64, buf: &mut [u8]) -> io::Result<()> {
        self.check(at, buf.len())?;
        match self {
            Store::Memory {
                region, regions, ..
            } => {
                Store::pieces(*region, at, buf.len(), |i, off, s, e| {
                    match &*read_lock(&regions[i]) {
                        Some(m) => buf[s..e].copy_from_slice(&m[off..off + e - s]),
                        None => buf[s..e].fill(0),
                    }
                });
                Ok(())
            }
            Store::File { file, .. } => file.read_exact_at(buf, at),
        }
    }

    /// Writes `data` at byte offset `at`.
    pub fn write_at(&self, at: u64, data: &[u8]) -> io::Result<()> {
        self.check(at, data.len())?;
        match self {
            Store::Memory {
                region, regions, ..
            } => {
                let mut err = None;
                Store::pieces(*region, at, data.len(), |i, off, s, e| {
                    let mut g = write_lock(&regions[i]);
                    if g.is_none() {
                        match MmapOptions::new()
                            .len(*region as usize)
                            .populate()
                            .map_anon()
                        {
                            Ok(m) => *g = Some(m),
                            Err(e2) => {
                                err.get_or_insert(e2);
                                return;
                            }
                        }
                    }
                    if let Some(m) = g.as_mut() {
                        m[off..off + e - s].copy_from_slice(&data[s..e]);
                    }
                });
                err.map_or(Ok(()), Err)
            }
            Store::File { file, .. } => file.write_all_at(data, at),
        }
    }

    /// Makes `len` bytes at `at` read as zeros (deallocate, write zeroes);
    /// whole memory regions are given back.
    pub fn zero(&self, at: u64, len: u64) -> io::Result<()> {
        let too_big = || out_of_range(at, usize::MAX, self.len());
        let len_usize = usize::try_from(len).map_err(|_| too_big())?;
        self.check(at, len_usize)?;
        match self {
            Store::Memory {
                region, regions, ..
            } => {
                Store::pieces(*region, at, len_usize, |i, off, s, e| {
                    let mut g = write_lock(&regions[i]);
                    if e - s == *region as usize {
                        *g = None;
                    } else if let Some(m) = g.as_mut() {
                        m[off..off + e - s].fill(0);
                    }
                });
                Ok(())
            }
            Store::File { file, .. } => match punch_hole(file, at, len) {
                Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOSYS)) => {
                    write_zeros(file, at, len)
                }
                r => r,
            },
        }
    }

    /// Makes written data durable (a flush).
    pub fn flush(&self) -> io::Result<()> {
        match self {
            Store::Memory { .. } => Ok(()),
            Store::File { file, .. } => file.sync_data(),
        }
    }
}

/// Deallocates `len` bytes at `at` of `file` (they read as zeros; the
/// file keeps its size).
fn punch_hole(file: &File, at: u64, len: u64) -> io::Result<()> {
    let range =
        |v: u64| libc::off_t::try_from(v).map_err(|_| out_of_range(at, usize::MAX, u64::MAX));
    let (off, n) = (range(at)?, range(len)?);
    // SAFETY: fallocate on a descriptor this store owns; it touches nothing
    // in this process's memory, and PUNCH_HOLE | KEEP_SIZE only changes the
    // file's bytes in [at, at + len), never its length.
    let r = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            off,
            n,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Writes `len` zero bytes at `at` (where holes cannot be punched).
fn write_zeros(file: &File, at: u64, len: u64) -> io::Result<()> {
    const CHUNK: u64 = 1 << 20;
    let zeros = vec![0u8; CHUNK.min(len) as usize];
    let mut done = 0;
    while done < len {
        let k = (len - done).min(CHUNK);
        file.write_all_at(&zeros[..k as usize], at + done)?;
        done += k;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(s: Store) {
        let mut buf = vec![7u8; 1024];
        s.read_at(3 * 512, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
        let data: Vec<u8> = (0..1024).map(|i| i as u8).collect();
        s.write_at(3 * 512, &data).unwrap();
        s.read_at(3 * 512, &mut buf).unwrap();
        assert_eq!(buf, data);
        s.zero(4 * 512, 512).unwrap();
        s.read_at(3 * 512, &mut buf).unwrap();
        assert_eq!(&buf[..512], &data[..512]);
        assert!(buf[512..].iter().all(|&b| b == 0));
        assert!(s.write_at(s.len() - 10, &data).is_err());
        assert!(s.read_at(u64::MAX - 1, &mut buf).is_err());
    }

    #[test]
    fn memory_and_file_read_back_what_was_written() {
        roundtrip(Store::memory(16 * 512));
        let dir = tempfile::tempdir().unwrap();
        roundtrip(Store::file(&dir.path().join("ns"), 16 * 512).unwrap());
    }

    #[test]
    fn writes_across_memory_regions_and_whole_region_zeroing() {
        let s = Store::memory(8 << 20);
        let Store::Memory { region, .. } = &s else {
            unreachable!()
        };
        let region = *region;
        let data: Vec<u8> = (0..3 * region as usize).map(|i| (i / 4096) as u8).collect();
        s.write_at(region / 2, &data).unwrap();
        let mut back = vec![0u8; data.len()];
        s.read_at(region / 2, &mut back).unwrap();
        assert_eq!(back, data);
        s.zero(region, region).unwrap();
        s.read_at(region / 2, &mut back).unwrap();
        let half = region as usize / 2;
        assert_eq!(&back[..half], &data[..half]);
        assert!(back[half..half + region as usize].iter().all(|&b| b == 0));
        assert_eq!(
            &back[half + region as usize..],
            &data[half + region as usize..]
        );
        if let Store::Memory { regions, .. } = &s {
            assert!(
                read_lock(&regions[1]).is_none(),
                "a zeroed region is given back"
            );
        }
    }

    #[test]
    fn file_deallocation_punches_holes() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ns");
        let s = Store::file(&p, 64 << 20).unwrap();
        let data = vec![0xa5u8; 1 << 20];
        s.write_at(8 << 20, &data).unwrap();
        s.flush().unwrap();
        let blocks = || std::fs::metadata(&p).unwrap().blocks() * 512;
        assert!(blocks() >= 1 << 20, "{} bytes allocated", blocks());
        // Deallocating the whole namespace gives the space back instead of
        // writing 64 MiB of zeros; the file keeps its size.
        s.zero(0, 64 << 20).unwrap();
        s.flush().unwrap();
        assert!(blocks() < 64 << 10, "{} bytes allocated", blocks());
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 64 << 20);
        let mut back = vec![1u8; 1 << 20];
        s.read_at(8 << 20, &mut back).unwrap();
        assert!(back.iter().all(|&b| b == 0));
        // A part of a block in the middle: zeros there, data around it.
        s.write_at(0, &data[..3 * 4096]).unwrap();
        s.zero(4096 + 100, 1000).unwrap();
        let mut back = vec![0u8; 3 * 4096];
        s.read_at(0, &mut back).unwrap();
        assert!(back[4096 + 100..4096 + 1100].iter().all(|&b| b == 0));
        assert!(back[..4096 + 100].iter().all(|&b| b == 0xa5));
        assert!(back[4096 + 1100..].iter().all(|&b| b == 0xa5));
    }

    #[test]
    fn region_count_stays_bounded() {
        let s = Store::memory(1 << 40);
        if let Store::Memory { regions, .. } = &s {
            assert!(regions.len() as u64 <= MAX_REGIONS);
        }
    }
}
