//! Trace files: the on-disk form of recorded shim events and device requests.
//!
//! Layout: the 8-byte magic [`MAGIC`] followed by [`wire::TraceRecord`]s, each
//! prefixed by its length as a protobuf varint. The shim appends encoded
//! `TraceRecord { batch }` frames to a per-process file; `pcstreamctl record`
//! merges those into one trace ordered by time ([`crate::merge`]). This is
//! the one reader of that framing: readers report the file and byte offset
//! of anything malformed and never panic on bad input, and no length prefix
//! allocates more than [`MAX_RECORD`].

use crate::wire;
use prost::Message;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

/// First bytes of every trace file.
pub const MAGIC: &[u8; 8] = b"PCSTRC01";

/// Largest record a reader accepts (a corrupt length must not allocate gigabytes).
pub const MAX_RECORD: u64 = 64 << 20;

/// The merged trace's name inside a `pcstreamctl record` output directory.
pub const TRACE_FILE: &str = "trace.pcstrace";

/// Resolves a TRACE argument: a trace file, or a `record` output directory
/// (its [`TRACE_FILE`]). Every command that reads a trace goes through this.
pub fn resolve_trace(p: &Path) -> PathBuf {
    if p.is_dir() {
        p.join(TRACE_FILE)
    } else {
        p.to_path_buf()
    }
}

/// Where a record lies in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordSpan {
    /// Byte offset of the record's length prefix.
    pub offset: u64,
    /// Byte offset of the encoded record after the prefix.
    pub body_offset: u64,
    /// Length of the encoded record.
    pub body_len: u32,
}

/// What went wrong reading or writing a trace file.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        /// The trace file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The file does not start with the trace magic.
    #[error("{path}: not a pcstream trace (missing magic \"PCSTRC01\")")]
    BadMagic {
        /// The trace file.
        path: PathBuf,
    },
    /// A record is malformed.
    #[error("{path}: byte offset {offset}: {what}")]
    Corrupt {
        /// The trace file.
        path: PathBuf,
        /// Byte offset of the record's length prefix.
        offset: u64,
        /// What is wrong.
        what: String,
    },
}

/// Reads records from a trace file in order.
#[derive(Debug)]
pub struct TraceReader<R> {
    path: PathBuf,
    inner: R,
    offset: u64,
    buf: Vec<u8>,
    /// Whether a truncated final record (a writer killed mid-append) is
    /// tolerated as end of file rather than reported.
    tolerate_torn_tail: bool,
    /// Whether the file ended inside a record (only with `tolerate_torn_tail`).
    torn: bool,
}

impl TraceReader<BufReader<File>> {
    /// Opens a trace file and checks its magic.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref().to_path_buf();
        let f = File::open(&path).map_err(|source| TraceError::Io {
            path: path.clone(),
            source,
        })?;
        TraceReader::new(path, BufReader::with_capacity(1 << 20, f))
    }

    /// Opens a per-process file of the shim for merging: `Ok(None)` when it
    /// is empty (a process that died at once), a torn last record tolerated
    /// (see [`TraceReader::torn`]).
    pub fn open_part(path: impl AsRef<Path>) -> Result<Option<Self>, TraceError> {
        let path = path.as_ref().to_path_buf();
        let io = |source| TraceError::Io {
            path: path.clone(),
            source,
        };
        let mut r = BufReader::with_capacity(1 << 20, File::open(&path).map_err(io)?);
        loop {
            match r.fill_buf() {
                Ok([]) => return Ok(None),
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io(e)),
            }
        }
        Ok(Some(TraceReader::new(path, r)?.tolerate_torn_tail(true)))
    }
}

impl<R: BufRead> TraceReader<R> {
    /// Wraps a reader positioned at the start of a trace (magic included).
    /// `path` is only used in error messages.
    pub fn new(path: PathBuf, mut inner: R) -> Result<Self, TraceError> {
        let mut magic = [0u8; 8];
        match inner.read_exact(&mut magic) {
            Ok(()) if &magic == MAGIC => {}
            Ok(()) => return Err(TraceError::BadMagic { path }),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                return Err(TraceError::BadMagic { path })
            }
            Err(source) => return Err(TraceError::Io { path, source }),
        }
        Ok(TraceReader {
            path,
            inner,
            offset: 8,
            buf: Vec::new(),
            tolerate_torn_tail: false,
            torn: false,
        })
    }

    /// Treat a truncated last record as the end of the trace (per-process files
    /// of a process killed while appending). Off by default.
    pub fn tolerate_torn_tail(mut self, yes: bool) -> Self {
        self.tolerate_torn_tail = yes;
        self
    }

    /// Byte offset of the next record (of the record just read, before reading it).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Whether the file ended inside a record, read as its end (only with
    /// [`TraceReader::tolerate_torn_tail`]).
    pub fn torn(&self) -> bool {
        self.torn
    }

    /// The path given at construction.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn corrupt(&self, offset: u64, what: impl Into<String>) -> TraceError {
        TraceError::Corrupt {
            path: self.path.clone(),
            offset,
            what: what.into(),
        }
    }

    /// Next record, `Ok(None)` at a clean end of file.
    pub fn next_record(&mut self) -> Result<Option<wire::TraceRecord>, TraceError> {
        Ok(self.next_located()?.map(|(_, rec)| rec))
    }

    /// Next record with where it lies in the file (the merge reads records
    /// back by their span), `Ok(None)` at a clean end of file.
    pub fn next_located(&mut self) -> Result<Option<(RecordSpan, wire::TraceRecord)>, TraceError> {
        let start = self.offset;
        // Varint length prefix, byte by byte so EOF before the first byte is clean.
        let mut len: u64 = 0;
        let mut shift = 0;
        let mut nbytes = 0u64;
        loop {
            let mut b = [0u8; 1];
            match self.inner.read(&mut b) {
                Ok(0) if nbytes == 0 => return Ok(None),
                Ok(0) if self.tolerate_torn_tail => {
                    self.torn = true;
                    return Ok(None);
                }
                Ok(0) => return Err(self.corrupt(start, "file ends inside a length prefix")),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(TraceError::Io {
                        path: self.path.clone(),
                        source,
                    })
                }
            }
            nbytes += 1;
            len |= u64::from(b[0] & 0x7f) << shift;
            if b[0] & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift >= 64 {
                return Err(self.corrupt(start, "length prefix is not a valid varint"));
            }
        }
        if len > MAX_RECORD {
            return Err(self.corrupt(
                start,
                format!("record length {len} exceeds the {MAX_RECORD}-byte limit"),
            ));
        }
        self.buf.resize(len as usize, 0);
        if let Err(e) = self.inner.read_exact(&mut self.buf) {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                if self.tolerate_torn_tail {
                    self.torn = true;
                    return Ok(None);
                }
                return Err(self.corrupt(start, format!("file ends inside a {len}-byte record")));
            }
            return Err(TraceError::Io {
                path: self.path.clone(),
                source: e,
            });
        }
        self.offset = start + nbytes + len;
        let span = RecordSpan {
            offset: start,
            body_offset: start + nbytes,
            body_len: len as u32,
        };
        wire::TraceRecord::decode(self.buf.as_slice())
            .map(|rec| Some((span, rec)))
            .map_err(|e| self.corrupt(start, format!("undecodable record: {e}")))
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<wire::TraceRecord, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}

/// Writes a trace file.
#[derive(Debug)]
pub struct TraceWriter<W: Write> {
    path: PathBuf,
    inner: W,
    buf: Vec<u8>,
}

impl TraceWriter<BufWriter<File>> {
    /// Creates (truncates) a trace file and writes the magic.
    pub fn create(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref().to_path_buf();
        let f = File::create(&path).map_err(|source| TraceError::Io {
            path: path.clone(),
            source,
        })?;
        TraceWriter::new(path, BufWriter::with_capacity(1 << 20, f))
    }
}

impl<W: Write> TraceWriter<W> {
    /// Wraps a writer and writes the magic. `path` is only used in error messages.
    pub fn new(path: PathBuf, mut inner: W) -> Result<Self, TraceError> {
        inner.write_all(MAGIC).map_err(|source| TraceError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(TraceWriter {
            path,
            inner,
            buf: Vec::new(),
        })
    }

    /// Wraps a writer positioned after the magic and records of a trace being
    /// written (e.g. one returned by [`TraceWriter::finish`]), to append more.
    pub fn resume(path: PathBuf, inner: W) -> Self {
        TraceWriter {
            path,
            inner,
            buf: Vec::new(),
        }
    }

    /// Appends one record.
    pub fn write_record(&mut self, rec: &wire::TraceRecord) -> Result<(), TraceError> {
        self.buf.clear();
        rec.encode_length_delimited(&mut self.buf)
            .expect("Vec<u8> grows as needed");
        self.inner
            .write_all(&self.buf)
            .map_err(|source| TraceError::Io {
                path: self.path.clone(),
                source,
            })
    }

    /// Flushes and returns the inner writer.
    pub fn finish(mut self) -> Result<W, TraceError> {
        self.inner.flush().map_err(|source| TraceError::Io {
            path: self.path.clone(),
            source,
        })?;
        Ok(self.inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::trace_record::Record;

    fn batch(pid: u32, seq: u64) -> wire::TraceRecord {
        wire::TraceRecord {
            record: Some(Record::Batch(wire::EventBatch {
                pid,
                seq,
                events: vec![wire::Event {
                    time_ns: seq * 10,
                    tid: pid,
                    kind: Some(wire::event::Kind::Write(wire::WriteEvent {
                        file: Some(wire::FileId { dev: 1, ino: 2 }),
                        offset: 4096,
                        len: 4096,
                        signature: 0xabc,
                        ..Default::default()
                    })),
                }],
            })),
        }
    }

    fn write_all(recs: &[wire::TraceRecord]) -> Vec<u8> {
        let mut w = TraceWriter::new("mem".into(), Vec::new()).unwrap();
        for r in recs {
            w.write_record(r).unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn round_trip() {
        let recs: Vec<_> = (0..100).map(|i| batch(7, i)).collect();
        let bytes = write_all(&recs);
        let got: Vec<_> = TraceReader::new("mem".into(), bytes.as_slice())
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(got, recs);
    }

    #[test]
    fn bad_magic_is_named() {
        let err = TraceReader::new("x.trace".into(), &b"NOTATRACE"[..]).unwrap_err();
        assert!(err.to_string().contains("x.trace"), "{err}");
        assert!(matches!(err, TraceError::BadMagic { .. }));
        assert!(matches!(
            TraceReader::new("e".into(), &b""[..]).unwrap_err(),
            TraceError::BadMagic { .. }
        ));
    }

    #[test]
    fn truncated_record_reports_offset_or_is_tolerated() {
        let bytes = write_all(&[batch(1, 1), batch(1, 2)]);
        let cut = &bytes[..bytes.len() - 3];
        let mut r = TraceReader::new("t".into(), cut).unwrap();
        assert!(r.next_record().unwrap().is_some());
        let err = r.next_record().unwrap_err();
        assert!(err.to_string().contains("byte offset"), "{err}");
        let n = TraceReader::new("t".into(), cut)
            .unwrap()
            .tolerate_torn_tail(true)
            .count();
        assert_eq!(n, 1);
    }

    #[test]
    fn huge_length_is_rejected_without_allocating() {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]);
        let err = TraceReader::new("t".into(), bytes.as_slice())
            .unwrap()
            .next_record()
            .unwrap_err();
        assert!(err.to_string().contains("exceeds"), "{err}");
    }

    #[test]
    fn garbage_record_is_an_error_not_a_panic() {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&[3, 0xff, 0xff, 0xff]);
        let err = TraceReader::new("t".into(), bytes.as_slice())
            .unwrap()
            .next_record()
            .unwrap_err();
        assert!(err.to_string().contains("undecodable"), "{err}");
    }
}
