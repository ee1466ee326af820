//! Block-trace readers: MSR-Cambridge CSV, blkparse text output and fio
//! iolog v2/v3, each yielding [`Record`]s (byte ranges) one line at a time
//! without allocating per line. A malformed line is an error naming the
//! file and line; lines that carry no I/O (headers, summaries, file
//! open/close) are skipped.
//!
//! Formats (fields separated by commas for MSR, by white space otherwise):
//! - `msr`: `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`
//!   with `Type` `Read` or `Write`, offset and size in bytes; an optional
//!   8th field is the stream id of a write.
//! - `blkparse`: the default text output of `blkparse`:
//!   `maj,min cpu seq time pid action rwbs sector + count [process]`.
//!   Only events of one action are used (`D`, issued to the device, by
//!   default); `rwbs` containing `D` is a discard, else `W` a write, else
//!   `R` a read; other events (flushes, plugs, messages) and lines that do
//!   not start with `maj,min` (the per-CPU summary) are skipped. Sectors are
//!   512 bytes.
//! - `fio`: first line `fio version 2 iolog` or `fio version 3 iolog`; then
//!   `file action [offset length]` (v2) or `time file action [offset
//!   length]` (v3); `read`/`write`/`trim` are I/O, `add`/`open`/`close`/
//!   `sync`/`datasync`/`wait` are skipped. All files share one address
//!   space. An optional extra last field is the stream id of a write.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Trace formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// MSR-Cambridge CSV.
    Msr,
    /// blkparse default text output.
    Blkparse,
    /// fio iolog v2 or v3.
    Fio,
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "msr" => Ok(Format::Msr),
            "blkparse" => Ok(Format::Blkparse),
            "fio" => Ok(Format::Fio),
            _ => Err(format!("unknown trace format `{s}` (msr, blkparse, fio)")),
        }
    }
}

/// What a record does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Read (ignored by the simulator).
    Read,
    /// Write.
    Write,
    /// Discard / TRIM.
    Discard,
}

/// One I/O of a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// What it does.
    pub kind: Kind,
    /// First byte.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// Stream id carried by the trace, if any.
    pub stream: Option<u32>,
    /// 1-based line number in the file.
    pub line: u64,
}

impl Record {
    /// The pages `(first, count)` the record touches with `page_size`-byte
    /// pages. A write covers every page it touches (a partial page is
    /// rewritten whole); a discard covers only the pages it fully contains.
    pub fn pages(&self, page_size: u32) -> (u64, u64) {
        let ps = u64::from(page_size);
        let end = self.offset.saturating_add(self.len);
        match self.kind {
            Kind::Discard => {
                let first = self.offset.div_ceil(ps);
                let last = end / ps;
                (first, last.saturating_sub(first))
            }
            _ => {
                let first = self.offset / ps;
                let last = if self.len == 0 {
                    first
                } else {
                    end.div_ceil(ps)
                };
                (first, last - first)
            }
        }
    }
}

/// A trace that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file cannot be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The trace file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A line is malformed.
    #[error("{path}:{line}: {msg}")]
    Parse {
        /// The trace file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What is wrong.
        msg: String,
    },
}

/// Options for the blkparse reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlkparseOptions {
    /// The action whose events are used (`D` = issued, `Q` = queued, `C` = completed).
    pub action: char,
}

impl Default for BlkparseOptions {
    fn default() -> Self {
        BlkparseOptions { action: 'D' }
    }
}

/// Reads a trace file record by record.
#[derive(Debug)]
pub struct BlockTraceReader<R> {
    path: PathBuf,
    input: R,
    format: Format,
    blkparse: BlkparseOptions,
    buf: String,
    bytes_buf: Vec<u8>,
    line: u64,
    bytes: u64,
    fio_version: u8,
    done: bool,
}

impl BlockTraceReader<BufReader<File>> {
    /// Opens `path` as a trace in `format`.
    pub fn open(path: &Path, format: Format) -> Result<Self, TraceError> {
        let f = File::open(path).map_err(|source| TraceError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(BlockTraceReader::new(
            path.to_path_buf(),
            BufReader::with_capacity(1 << 16, f),
            format,
        ))
    }
}

/// Longest line a reader accepts: a block-trace line is under 200 bytes, so
/// this only stops a binary or corrupt file from being read into memory whole.
pub const MAX_LINE: usize = 64 << 10;

/// Longest piece of input quoted in an error message.
const MAX_QUOTE: usize = 40;

/// `s` in backquotes, cut to [`MAX_QUOTE`] characters with its length if longer.
fn quote(s: &str) -> String {
    if s.len() <= MAX_QUOTE {
        return format!("`{s}`");
    }
    let mut end = MAX_QUOTE;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("`{}…` ({} bytes)", &s[..end], s.len())
}

/// Why a line could not be read.
enum LineError {
    Io(std::io::Error),
    /// The line is longer than [`MAX_LINE`].
    TooLong,
    /// The line (of this many bytes) is not UTF-8.
    NotText(usize),
}

/// Reads one line (newline included) into `out` through `scratch`, never
/// holding more than [`MAX_LINE`] bytes of it; returns its length, 0 at EOF.
fn read_line_bounded<R: BufRead>(
    input: &mut R,
    scratch: &mut Vec<u8>,
    out: &mut String,
) -> Result<usize, LineError> {
    scratch.clear();
    loop {
        let avail = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(LineError::Io(e)),
        };
        if avail.is_empty() {
            break;
        }
        let (take, done) = match avail.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (avail.len(), false),
        };
        if scratch.len() + take > MAX_LINE + 1 {
            return Err(LineError::TooLong);
        }
        scratch.extend_from_slice(&avail[..take]);
        input.consume(take);
        if done {
            break;
        }
    }
    match std::str::from_utf8(scratch) {
        Ok(text) => {
            out.push_str(text);
            Ok(scratch.len())
        }
        Err(_) => Err(LineError::NotText(scratch.len())),
    }
}

fn num<T: FromStr>(field: Option<&str>, what: &str) -> Result<T, String> {
    let f = field.ok_or_else(|| format!("missing {what}"))?;
    f.trim()
        .parse()
        .map_err(|_| format!("{what} {} is not a non-negative integer", quote(f)))
}

impl<R: BufRead> BlockTraceReader<R> {
    /// A reader over any buffered input; `path` names it in errors.
    pub fn new(path: PathBuf, input: R, format: Format) -> Self {
        BlockTraceReader {
            path,
            input,
            format,
            blkparse: BlkparseOptions::default(),
            buf: String::new(),
            bytes_buf: Vec::new(),
            line: 0,
            bytes: 0,
            fio_version: 0,
            done: false,
        }
    }

    /// Sets the blkparse options.
    pub fn with_blkparse(mut self, o: BlkparseOptions) -> Self {
        self.blkparse = o;
        self
    }

    /// Bytes of input consumed so far (for progress).
    pub fn bytes_read(&self) -> u64 {
        self.bytes
    }

    fn error(&self, msg: String) -> TraceError {
        TraceError::Parse {
            path: self.path.clone(),
            // An empty file's error is about its (missing) first line.
            line: self.line.max(1),
            msg,
        }
    }

    /// The next record, `None` at the end of the file.
    pub fn next_record(&mut self) -> Option<Result<Record, TraceError>> {
        loop {
            if self.done {
                return None;
            }
            self.buf.clear();
            match read_line_bounded(&mut self.input, &mut self.bytes_buf, &mut self.buf) {
                Ok(0) => {
                    self.done = true;
                    if self.format == Format::Fio && self.fio_version == 0 {
                        return Some(Err(self.error("empty fio iolog (no version line)".into())));
                    }
                    return None;
                }
                Ok(n) => {
                    self.line += 1;
                    self.bytes += n as u64;
                }
                Err(LineError::Io(e)) => {
                    self.done = true;
                    let msg = format!("read error: {e}");
                    return Some(Err(self.error(msg)));
                }
                Err(LineError::TooLong) => {
                    self.done = true;
                    self.line += 1;
                    let msg = format!("line longer than the {MAX_LINE}-byte limit");
                    return Some(Err(self.error(msg)));
                }
                Err(LineError::NotText(n)) => {
                    self.done = true;
                    self.line += 1;
                    self.bytes += n as u64;
                    return Some(Err(self.error("line is not UTF-8 text".into())));
                }
            }
            let parsed = match self.format {
                Format::Msr => parse_msr(&self.buf, self.line),
                Format::Blkparse => parse_blkparse(&self.buf, self.line, self.blkparse.action),
                Format::Fio => {
                    if self.fio_version == 0 {
                        match self.buf.trim() {
                            "fio version 2 iolog" => self.fio_version = 2,
                            "fio version 3 iolog" => self.fio_version = 3,
                            other => {
                                self.done = true;
                                let msg = format!(
                                    "expected `fio version 2 iolog` or `fio version 3 iolog`, found {}",
                                    quote(other)
                                );
                                return Some(Err(self.error(msg)));
                            }
                        }
                        Ok(None)
                    } else {
                        parse_fio(&self.buf, self.line, self.fio_version)
                    }
                }
            };
            match parsed {
                Ok(Some(r)) => return Some(Ok(r)),
                Ok(None) => continue,
                Err(msg) => return Some(Err(self.error(msg))),
            }
        }
    }
}

impl<R: BufRead> Iterator for BlockTraceReader<R> {
    type Item = Result<Record, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_record()
    }
}

/// The optional stream id that may end an MSR or fio line, then nothing
/// more (`too_many` is the error otherwise).
fn stream_then_end<'a>(
    rest: &mut impl Iterator<Item = &'a str>,
    too_many: &str,
) -> Result<Option<u32>, String> {
    let stream = match rest.next() {
        Some(s) => Some(num(Some(s), "stream id")?),
        None => None,
    };
    if rest.next().is_some() {
        return Err(too_many.into());
    }
    Ok(stream)
}

fn parse_msr(line: &str, no: u64) -> Result<Option<Record>, String> {
    let line = line.trim();
    if line.is_empty() || (no == 1 && line.starts_with("Timestamp")) {
        return Ok(None);
    }
    let mut f = line.split(',');
    let _ts: u64 = num(f.next(), "timestamp")?;
    let _host = f.next().ok_or("missing hostname")?;
    let _disk: u64 = num(f.next(), "disk number")?;
    let ty = f.next().ok_or("missing type")?.trim();
    let kind = if ty.eq_ignore_ascii_case("write") {
        Kind::Write
    } else if ty.eq_ignore_ascii_case("read") {
        Kind::Read
    } else {
        return Err(format!("type {} is neither Read nor Write", quote(ty)));
    };
    let offset = num(f.next(), "offset")?;
    let len = num(f.next(), "size")?;
    let _resp: u64 = num(f.next(), "response time")?;
    let stream = stream_then_end(&mut f, "more than 8 fields")?;
    Ok(Some(Record {
        kind,
        offset,
        len,
        stream,
        line: no,
    }))
}

fn is_dev(tok: &str) -> bool {
    match tok.split_once(',') {
        Some((a, b)) => {
            !a.is_empty()
                && !b.is_empty()
                && a.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
        }
        None => false,
    }
}

fn parse_blkparse(line: &str, no: u64, action: char) -> Result<Option<Record>, String> {
    let mut t = line.split_ascii_whitespace();
    match t.next() {
        Some(dev) if is_dev(dev) => {}
        _ => return Ok(None), // blank, summary or header line
    }
    let _cpu: u64 = num(t.next(), "cpu")?;
    let _seq: u64 = num(t.next(), "sequence number")?;
    let ts = t.next().ok_or("missing timestamp")?;
    if ts.parse::<f64>().is_err() {
        return Err(format!("timestamp {} is not a number", quote(ts)));
    }
    let _pid: u64 = num(t.next(), "pid")?;
    let act = t.next().ok_or("missing action")?;
    let mut ac = act.chars();
    if ac.next() != Some(action) || ac.next().is_some() {
        return Ok(None);
    }
    let rwbs = t.next().ok_or("missing rwbs")?;
    let kind = if rwbs.contains('D') {
        Kind::Discard
    } else if rwbs.contains('W') {
        Kind::Write
    } else if rwbs.contains('R') {
        Kind::Read
    } else {
        return Ok(None); // flush, barrier-only or message
    };
    let sector: u64 = num(t.next(), "sector")?;
    if t.next() != Some("+") {
        return Err("expected `sector + count`".into());
    }
    let count: u64 = num(t.next(), "sector count")?;
    let offset = sector
        .checked_mul(512)
        .ok_or_else(|| format!("sector {sector} is too large"))?;
    Ok(Some(Record {
        kind,
        offset,
        len: count.saturating_mul(512),
        stream: None,
        line: no,
    }))
}

fn parse_fio(line: &str, no: u64, version: u8) -> Result<Option<Record>, String> {
    let mut t = line.split_ascii_whitespace();
    let Some(first) = t.next() else {
        return Ok(None);
    };
    if version == 3 {
        if first.parse::<u64>().is_err() {
            return Err(format!("timestamp {} is not an integer", quote(first)));
        }
        t.next().ok_or("missing file name")?;
    }
    let action = t.next().ok_or("missing action")?;
    let kind = match action {
        "read" => Kind::Read,
        "write" => Kind::Write,
        "trim" => Kind::Discard,
        "add" | "open" | "close" | "sync" | "datasync" | "wait" => return Ok(None),
        other => return Err(format!("unknown action {}", quote(other))),
    };
    let offset = num(t.next(), "offset")?;
    let len = num(t.next(), "length")?;
    let stream = stream_then_end(&mut t, "too many fields")?;
    Ok(Some(Record {
        kind,
        offset,
        len,
        stream,
        line: no,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(format: Format, text: &str) -> Vec<Result<Record, String>> {
        BlockTraceReader::new(PathBuf::from("t.txt"), text.as_bytes(), format)
            .map(|r| r.map_err(|e| e.to_string()))
            .collect()
    }

    #[test]
    fn msr_lines() {
        let t = "128166372003061629,wdev,0,Read,3154152960,4096,2170\n\
                 128166372016382155,wdev,0,Write,8192,12288,1105,3\n\n";
        let r = read(Format::Msr, t);
        assert_eq!(r.len(), 2);
        let w = r[1].as_ref().unwrap();
        assert_eq!(
            (w.kind, w.offset, w.len, w.stream, w.line),
            (Kind::Write, 8192, 12288, Some(3), 2)
        );
        assert_eq!(r[0].as_ref().unwrap().kind, Kind::Read);
    }

    #[test]
    fn endless_or_binary_lines_are_bounded_errors() {
        // A file with no newline (`/dev/zero`) stops at the line limit, for every format.
        for format in [Format::Msr, Format::Blkparse, Format::Fio] {
            let zeros = std::io::BufReader::new(std::io::Read::take(std::io::repeat(0), 64 << 20));
            let mut r = BlockTraceReader::new(PathBuf::from("z"), zeros, format);
            let e = r.next().unwrap().unwrap_err().to_string();
            assert_eq!(
                e,
                format!("z:1: line longer than the {MAX_LINE}-byte limit")
            );
            assert!(r.next().is_none(), "one error, then the end");
        }
        let r = read(Format::Msr, "1,h,0,Write,0,4096,1\n");
        assert!(r[0].is_ok());
        let bytes: &[u8] = b"1,h,0,Write,0,4096,1\n\xff\xfe\n";
        let r: Vec<_> = BlockTraceReader::new(PathBuf::from("b"), bytes, Format::Msr).collect();
        assert_eq!(
            r[1].as_ref().unwrap_err().to_string(),
            "b:2: line is not UTF-8 text"
        );
    }

    #[test]
    fn long_fields_are_elided_in_errors() {
        let t = format!("1,h,0,Write,{},4096,1\n", "9".repeat(20_000));
        let e = read(Format::Msr, &t).remove(0).unwrap_err();
        assert_eq!(
            e,
            format!(
                "t.txt:1: offset `{}…` (20000 bytes) is not a non-negative integer",
                "9".repeat(40)
            )
        );
    }

    #[test]
    fn msr_errors_name_file_and_line() {
        let t = "1,h,0,Write,0,4096,1\n1,h,0,Write,abc,4096,1\n";
        let r = read(Format::Msr, t);
        assert_eq!(
            r[1].as_ref().unwrap_err(),
            "t.txt:2: offset `abc` is not a non-negative integer"
        );
        let r = read(Format::Msr, "1,h,0,Erase,0,4096,1\n");
        assert!(r[0]
            .as_ref()
            .unwrap_err()
            .starts_with("t.txt:1: type `Erase`"));
        let r = read(Format::Msr, "1,h,0,Write,0\n");
        assert_eq!(r[0].as_ref().unwrap_err(), "t.txt:1: missing size");
    }

    #[test]
    fn blkparse_lines() {
        let t = "  8,0    3        1     0.000000000   697  Q  WS 3138328 + 8 [kworker/3:1H]\n\
                 \x20 8,0    3        2     0.000001000   697  D  WS 3138328 + 8 [kworker/3:1H]\n\
                 \x20 8,0    3        3     0.000002000   697  D  FN [kworker]\n\
                 \x20 8,0    0        4     0.000003000     0  D   D 2048 + 16 [fstrim]\n\
                 \x20 8,0    1        5     0.000004000    12  D   R 100 + 8 [cat]\n\
                 \x20 8,0    1        0     0.000005000    12  m   N cfq12 insert\n\
                 CPU0 (8,0):\n Reads Queued:           0,        0KiB\n";
        let r: Vec<Record> = read(Format::Blkparse, t)
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(r.len(), 3);
        assert_eq!(
            (r[0].kind, r[0].offset, r[0].len, r[0].line),
            (Kind::Write, 3138328 * 512, 4096, 2)
        );
        assert_eq!(
            (r[1].kind, r[1].offset, r[1].len),
            (Kind::Discard, 2048 * 512, 8192)
        );
        assert_eq!(r[2].kind, Kind::Read);
        let q = BlockTraceReader::new(PathBuf::from("t"), t.as_bytes(), Format::Blkparse)
            .with_blkparse(BlkparseOptions { action: 'Q' })
            .count();
        assert_eq!(q, 1);
        let bad = read(Format::Blkparse, "8,0 0 1 0.1 5 D W 12 - 8 [x]\n");
        assert_eq!(
            bad[0].as_ref().unwrap_err(),
            "t.txt:1: expected `sector + count`"
        );
        let bad = read(Format::Blkparse, "8,0 0 1 zz 5 D W 12 + 8 [x]\n");
        assert!(bad[0]
            .as_ref()
            .unwrap_err()
            .starts_with("t.txt:1: timestamp"));
    }

    #[test]
    fn fio_v2_and_v3() {
        let v2 = "fio version 2 iolog\n/dev/sdb add\n/dev/sdb open\n/dev/sdb write 4096 8192\n\
                  /dev/sdb trim 0 65536\n/dev/sdb read 0 4096\n/dev/sdb write 0 4096 5\n/dev/sdb close\n";
        let r: Vec<Record> = read(Format::Fio, v2)
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(r.len(), 4);
        assert_eq!(
            (r[0].kind, r[0].offset, r[0].len, r[0].line),
            (Kind::Write, 4096, 8192, 4)
        );
        assert_eq!(r[1].kind, Kind::Discard);
        assert_eq!(r[3].stream, Some(5));
        let v3 =
            "fio version 3 iolog\n0 /dev/sdb add\n10 /dev/sdb open\n20 /dev/sdb write 0 4096\n";
        let r: Vec<Record> = read(Format::Fio, v3)
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!((r[0].kind, r[0].line), (Kind::Write, 4));
        let bad = read(Format::Fio, "fio version 3 iolog\nx /dev/sdb write 0 1\n");
        assert_eq!(
            bad[0].as_ref().unwrap_err(),
            "t.txt:2: timestamp `x` is not an integer"
        );
        let bad = read(Format::Fio, "fio version 2 iolog\n/dev/sdb frob 0 1\n");
        assert_eq!(
            bad[0].as_ref().unwrap_err(),
            "t.txt:2: unknown action `frob`"
        );
        let bad = read(Format::Fio, "hello\n/dev/sdb write 0 1\n");
        assert_eq!(bad.len(), 1);
        assert!(bad[0]
            .as_ref()
            .unwrap_err()
            .starts_with("t.txt:1: expected `fio version"));
        assert_eq!(read(Format::Fio, "").len(), 1);
    }

    #[test]
    fn pages_cover_writes_and_fit_discards() {
        let r = |kind, offset, len| Record {
            kind,
            offset,
            len,
            stream: None,
            line: 1,
        };
        assert_eq!(r(Kind::Write, 0, 4096).pages(4096), (0, 1));
        assert_eq!(r(Kind::Write, 100, 4096).pages(4096), (0, 2));
        assert_eq!(r(Kind::Write, 4096, 0).pages(4096), (1, 0));
        assert_eq!(r(Kind::Discard, 100, 8192).pages(4096), (1, 1));
        assert_eq!(r(Kind::Discard, 100, 100).pages(4096), (1, 0));
        assert_eq!(r(Kind::Discard, 8192, 8192).pages(4096), (2, 2));
    }

    mod fuzz {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn arbitrary_input_never_panics(text in "\\PC{0,400}", fmt in 0u8..3) {
                let format = [Format::Msr, Format::Blkparse, Format::Fio][fmt as usize];
                let reader = BlockTraceReader::new(PathBuf::from("f"), text.as_bytes(), format);
                for r in reader.take(1000) {
                    if let Err(TraceError::Parse { line, .. }) = r {
                        prop_assert!(line >= 1);
                    }
                }
            }
        }
    }
}
