//! Where the namespace's data lives: sparse in memory (a map of written
//! logical blocks) or in a backing file (sparse on the file system, so it
//! survives a target restart). Blocks never written read as zeros.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// The data of a namespace, one logical block of `block` bytes at a time.
#[derive(Debug)]
pub enum Store {
    /// Written blocks only, in memory.
    Memory {
        /// Block size in bytes.
        block: usize,
        /// Logical block → its data.
        blocks: HashMap<u64, Box<[u8]>>,
    },
    /// A file of `blocks × block` bytes.
    File {
        /// Block size in bytes.
        block: usize,
        /// The open file.
        file: File,
    },
}

impl Store {
    /// An empty in-memory store.
    pub fn memory(block: usize) -> Store {
        Store::Memory {
            block,
            blocks: HashMap::new(),
        }
    }

    /// Opens (creating if needed) a backing file sized to `bytes`; existing
    /// contents are kept.
    pub fn file(path: &Path, block: usize, bytes: u64) -> io::Result<Store> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        if file.metadata()?.len() != bytes {
            file.set_len(bytes)?;
        }
        Ok(Store::File { block, file })
    }

    /// Reads `buf.len()` bytes (whole blocks) from logical block `lba`.
    pub fn read(&self, lba: u64, buf: &mut [u8]) -> io::Result<()> {
        match self {
            Store::Memory { block, blocks } => {
                for (i, chunk) in buf.chunks_mut(*block).enumerate() {
                    match blocks.get(&(lba + i as u64)) {
                        Some(b) => chunk.copy_from_slice(&b[..chunk.len()]),
                        None => chunk.fill(0),
                    }
                }
                Ok(())
            }
            Store::File { block, file } => file.read_exact_at(buf, lba * *block as u64),
        }
    }

    /// Writes `data` (whole blocks) at logical block `lba`.
    pub fn write(&mut self, lba: u64, data: &[u8]) -> io::Result<()> {
        match self {
            Store::Memory { block, blocks } => {
                for (i, chunk) in data.chunks(*block).enumerate() {
                    match blocks.get_mut(&(lba + i as u64)) {
                        Some(b) => b[..chunk.len()].copy_from_slice(chunk),
                        None => {
                            blocks.insert(lba + i as u64, chunk.into());
                        }
                    }
                }
                Ok(())
            }
            Store::File { block, file } => file.write_all_at(data, lba * *block as u64),
        }
    }

    /// Makes `n` blocks from `lba` read as zeros (deallocate, write zeroes).
    pub fn zero(&mut self, lba: u64, n: u64) -> io::Result<()> {
        match self {
            Store::Memory { blocks, .. } => {
                if n as usize > blocks.len() {
                    blocks.retain(|k, _| !(lba..lba + n).contains(k));
                } else {
                    for b in lba..lba + n {
                        blocks.remove(&b);
                    }
                }
                Ok(())
            }
            Store::File { block, file } => {
                let zeros = vec![0u8; 256 * *block];
                let mut at = lba;
                while at < lba + n {
                    let k = (lba + n - at).min(256);
                    file.write_all_at(&zeros[..k as usize * *block], at * *block as u64)?;
                    at += k;
                }
                Ok(())
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(mut s: Store) {
        let mut buf = vec![7u8; 1024];
        s.read(3, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
        let data: Vec<u8> = (0..1024).map(|i| i as u8).collect();
        s.write(3, &data).unwrap();
        s.read(3, &mut buf).unwrap();
        assert_eq!(buf, data);
        s.zero(4, 1).unwrap();
        s.read(3, &mut buf).unwrap();
        assert_eq!(&buf[..512], &data[..512]);
        assert!(buf[512..].iter().all(|&b| b == 0));
    }

    #[test]
    fn memory_and_file_read_back_what_was_written() {
        roundtrip(Store::memory(512));
        let dir = tempfile::tempdir().unwrap();
        roundtrip(Store::file(&dir.path().join("ns"), 512, 16 * 512).unwrap());
    }
}
