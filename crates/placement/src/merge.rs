//! Merging the shim's per-process trace files into one trace ordered by time.
//!
//! Each per-process file holds `EventBatch`es flushed per thread, so batches
//! of one process interleave out of time order (a quiet thread flushes late).
//! The merge therefore works in two streaming passes:
//!
//! 1. **Index**: scan every file once, remembering for each batch its byte
//!    range and smallest timestamp (≈40 bytes per batch), and keeping the
//!    process's `ModuleInfo`/`SignatureInfo` events (one per module and call
//!    path, small).
//! 2. **Merge**: walk the index in order of smallest timestamp; a batch is
//!    read back (`pread`) only once the output has reached its first event,
//!    and its events join a heap of open batches. Memory is the index plus the
//!    batches that overlap in time (about one per active thread), not the trace.
//!
//! Events are re-batched per process in time order. A `SignatureInfo` (and the
//! `ModuleInfo`s its frames need) is guaranteed to precede the first write
//! that uses it in the same process: if a racing thread's write is stamped
//! earlier than the info, the info is moved up to just before that write.
//! Ties in time keep file order (file, batch, position).
//!
//! Files are read with [`TraceReader`] (the one reader of the trace framing:
//! magic, varint length, record limit, torn tail); a file that is bad after a
//! good prefix is merged up to there and named in
//! [`MergeSummary::bad_parts`]. `pcstreamctl record` calls [`merge`].

use crate::trace::{TraceError, TraceReader, TraceWriter};
use crate::wire::{self, event::Kind, trace_record::Record};
use prost::Message;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Why a merge failed (a bad per-process file is not a failure: it is
/// merged up to the bad record and named in [`MergeSummary::bad_parts`]).
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// Writing the merged trace failed.
    #[error(transparent)]
    Write(#[from] TraceError),
    /// A per-process file could not be opened again for the merge pass.
    #[error("reopening {path}: {source}")]
    Reopen {
        /// The per-process file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// An indexed record could not be read back.
    #[error("{path}: reading back byte offset {offset}: {source}")]
    ReadBack {
        /// The per-process file.
        path: PathBuf,
        /// Byte offset of the record's body.
        offset: u64,
        /// The error.
        source: io::Error,
    },
    /// An indexed record no longer decodes to the batch it was.
    #[error("{path}: byte offset {offset}: changed while merging")]
    Changed {
        /// The per-process file.
        path: PathBuf,
        /// Byte offset of the record's body.
        offset: u64,
        /// The decoder's complaint, if it failed.
        #[source]
        source: Option<prost::DecodeError>,
    },
}

/// Events per output batch at most.
pub const OUT_BATCH_EVENTS: usize = 4096;
/// Per-process files kept open at once during the merge.
const MAX_OPEN_FILES: usize = 256;

/// What a merge saw and wrote.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct MergeSummary {
    /// Per-process files read.
    pub parts: usize,
    /// Traced process images: readable per-process files (a fork child and
    /// each program it execs have one file each).
    pub processes: usize,
    /// Distinct pids among them (what `trace-stats` counts as processes).
    pub pids: usize,
    /// Events written to the merged trace.
    pub events: u64,
    /// Write calls (as the application made them: a coalesced event
    /// counts as the calls it stands for).
    pub writes: u64,
    /// Bytes written by the traced processes.
    pub bytes_written: u64,
    /// Distinct signatures of writes.
    pub signatures: usize,
    /// Invalidation events (unlink, truncate, punch hole, rename-replace).
    pub invalidations: u64,
    /// The applications' own F_SET_RW_HINT calls.
    pub app_hints: u64,
    /// Events the shims reported dropped (sum over processes of the last count).
    pub dropped: u64,
    /// Batches missing from the per-process files (gaps in `EventBatch.seq`).
    pub missing_batches: u64,
    /// Files whose last record was cut short (process killed mid-append).
    pub torn_parts: usize,
    /// Files that could not be read completely, with the reason.
    pub bad_parts: Vec<String>,
    /// Batches that started before an earlier batch of the same file ended.
    pub reordered_batches: u64,
    /// Info events moved up to precede their first use.
    pub moved_infos: u64,
    /// Most batches held in memory at once.
    pub max_open_batches: usize,
    /// Wall-clock time the merge took, in milliseconds (set by the caller).
    pub merge_ms: u64,
}

/// One batch located in a per-process file.
#[derive(Debug, Clone, Copy)]
struct BatchRef {
    min_t: u64,
    part: u32,
    ord: u32,
    /// Byte offset and length of the encoded `TraceRecord`.
    off: u64,
    len: u32,
}

#[derive(Debug, Default)]
struct Part {
    path: PathBuf,
    pid: u32,
    /// Info events by (signature | module key), first occurrence.
    sig_info: HashMap<u64, wire::Event>,
    mod_info: HashMap<u64, wire::Event>,
    readable: bool,
}

/// Pid from a `<pid>-<start>.pcstrace` file name, 0 when it has none.
fn pid_from_name(path: &Path) -> u32 {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.split(['-', '.']).next())
        .and_then(|p| p.parse().ok())
        .unwrap_or(0)
}

/// Pass 1 over one file: batch index and info events. Errors after a good
/// prefix are reported in `summary.bad_parts` and end the file there.
fn index_part(
    idx: u32,
    path: &Path,
    index: &mut Vec<BatchRef>,
    summary: &mut MergeSummary,
) -> Result<Part, TraceError> {
    let mut part = Part {
        path: path.to_path_buf(),
        pid: pid_from_name(path),
        ..Default::default()
    };
    let Some(mut sc) = TraceReader::open_part(path)? else {
        return Ok(part);
    };
    part.readable = true;
    let mut ord = 0u32;
    let mut prev_max = 0u64;
    let mut seqs = Vec::new();
    loop {
        let (span, rec) = match sc.next_located() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                summary.bad_parts.push(e.to_string());
                break;
            }
        };
        let (off, len) = (span.body_offset, span.body_len);
        let Some(Record::Batch(batch)) = rec.record else {
            continue; // header (or a foreign record kind): not part of the merged stream
        };
        if batch.events.is_empty() {
            continue;
        }
        if part.pid == 0 {
            part.pid = batch.pid;
        }
        seqs.push(batch.seq);
        let min_t = batch.events.iter().map(|e| e.time_ns).min().unwrap_or(0);
        let max_t = batch.events.iter().map(|e| e.time_ns).max().unwrap_or(0);
        if ord > 0 && min_t < prev_max {
            summary.reordered_batches += 1;
        }
        prev_max = prev_max.max(max_t);
        for ev in &batch.events {
            match &ev.kind {
                Some(Kind::Signature(s)) => {
                    part.sig_info
                        .entry(s.signature)
                        .or_insert_with(|| ev.clone());
                }
                Some(Kind::Module(m)) => {
                    part.mod_info
                        .entry(m.module_key)
                        .or_insert_with(|| ev.clone());
                }
                _ => {}
            }
        }
        index.push(BatchRef {
            min_t,
            part: idx,
            ord,
            off,
            len,
        });
        ord += 1;
    }
    if sc.torn() {
        summary.torn_parts += 1;
    }
    seqs.sort_unstable();
    seqs.dedup();
    if let (Some(first), Some(last)) = (seqs.first(), seqs.last()) {
        summary.missing_batches += (last - first + 1).saturating_sub(seqs.len() as u64);
    }
    Ok(part)
}

/// A batch being merged: its events sorted by time, and the next one's index.
#[derive(Debug)]
struct Open {
    part: u32,
    ord: u32,
    pos: u32,
    events: Vec<wire::Event>,
}

impl Open {
    fn key(&self) -> (u64, u32, u32, u32) {
        (
            self.events[self.pos as usize].time_ns,
            self.part,
            self.ord,
            self.pos,
        )
    }
}

impl PartialEq for Open {
    fn eq(&self, o: &Self) -> bool {
        self.key() == o.key()
    }
}
impl Eq for Open {}
impl PartialOrd for Open {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Open {
    fn cmp(&self, o: &Self) -> Ordering {
        o.key().cmp(&self.key()) // min-heap
    }
}

/// Output side: re-batches events per process, tracks what was emitted.
struct Out<W: io::Write> {
    w: TraceWriter<W>,
    cur: Option<u32>,
    pid: u32,
    events: Vec<wire::Event>,
    seq: Vec<u64>,
    sigs_done: HashSet<(u32, u64)>,
    mods_done: HashSet<(u32, u64)>,
    write_sigs: HashSet<u64>,
    dropped: Vec<u64>,
    summary: MergeSummary,
}

impl<W: io::Write> Out<W> {
    fn flush(&mut self) -> Result<(), MergeError> {
        if let Some(p) = self.cur {
            if !self.events.is_empty() {
                let seq = &mut self.seq[p as usize];
                let rec = wire::TraceRecord {
                    record: Some(Record::Batch(wire::EventBatch {
                        pid: self.pid,
                        seq: *seq,
                        events: std::mem::take(&mut self.events),
                    })),
                };
                *seq += 1;
                self.w.write_record(&rec)?;
            }
        }
        Ok(())
    }

    fn push(&mut self, part: u32, pid: u32, ev: wire::Event) -> Result<(), MergeError> {
        if self.cur != Some(part) || self.events.len() >= OUT_BATCH_EVENTS {
            self.flush()?;
            self.cur = Some(part);
            self.pid = pid;
        }
        self.summary.events += 1;
        self.events.push(ev);
        Ok(())
    }

    fn emit_module(
        &mut self,
        p: &Part,
        pidx: u32,
        key: u64,
        t: u64,
        tid: u32,
    ) -> Result<(), MergeError> {
        if self.mods_done.insert((pidx, key)) {
            if let Some(ev) = p.mod_info.get(&key) {
                let mut ev = ev.clone();
                if ev.time_ns > t {
                    ev.time_ns = t;
                    ev.tid = tid;
                    self.summary.moved_infos += 1;
                }
                self.push(pidx, p.pid, ev)?;
            }
        }
        Ok(())
    }

    /// Emits the info for `sig` (and its modules) unless already done.
    fn emit_signature(
        &mut self,
        p: &Part,
        pidx: u32,
        sig: u64,
        t: u64,
        tid: u32,
    ) -> Result<(), MergeError> {
        if !self.sigs_done.insert((pidx, sig)) {
            return Ok(());
        }
        let Some(ev) = p.sig_info.get(&sig) else {
            return Ok(());
        };
        let mut ev = ev.clone();
        if let Some(Kind::Signature(s)) = &ev.kind {
            for f in &s.frames {
                self.emit_module(p, pidx, f.module_key, t, tid)?;
            }
        }
        if ev.time_ns > t {
            ev.time_ns = t;
            ev.tid = tid;
            self.summary.moved_infos += 1;
        }
        self.push(pidx, p.pid, ev)
    }

    fn event(&mut self, p: &Part, pidx: u32, ev: wire::Event) -> Result<(), MergeError> {
        match &ev.kind {
            Some(Kind::Signature(s)) => {
                return self.emit_signature(p, pidx, s.signature, ev.time_ns, ev.tid);
            }
            Some(Kind::Module(m)) if !self.mods_done.insert((pidx, m.module_key)) => {
                return Ok(());
            }
            Some(Kind::Write(w)) => {
                self.summary.writes += w.call_count();
                self.summary.bytes_written += w.len;
                if w.signature != 0 {
                    self.write_sigs.insert(w.signature);
                    self.emit_signature(p, pidx, w.signature, ev.time_ns, ev.tid)?;
                }
            }
            Some(Kind::Invalidate(_)) => self.summary.invalidations += 1,
            Some(Kind::AppHint(_)) => self.summary.app_hints += 1,
            Some(Kind::Process(pe)) => {
                let d = &mut self.dropped[pidx as usize];
                *d = (*d).max(pe.dropped);
            }
            _ => {}
        }
        self.push(pidx, p.pid, ev)
    }
}

/// Reads one indexed batch back, its events sorted by time (stable).
fn read_batch(
    parts: &[Part],
    files: &mut HashMap<u32, File>,
    b: &BatchRef,
    buf: &mut Vec<u8>,
) -> Result<Vec<wire::Event>, MergeError> {
    let path = &parts[b.part as usize].path;
    if !files.contains_key(&b.part) {
        if files.len() >= MAX_OPEN_FILES {
            files.clear();
        }
        let f = File::open(path).map_err(|source| MergeError::Reopen {
            path: path.clone(),
            source,
        })?;
        files.insert(b.part, f);
    }
    let f = &files[&b.part];
    buf.resize(b.len as usize, 0);
    f.read_exact_at(buf, b.off)
        .map_err(|source| MergeError::ReadBack {
            path: path.clone(),
            offset: b.off,
            source,
        })?;
    let changed = |source| MergeError::Changed {
        path: path.clone(),
        offset: b.off,
        source,
    };
    let rec = wire::TraceRecord::decode(buf.as_slice()).map_err(|e| changed(Some(e)))?;
    let Some(Record::Batch(batch)) = rec.record else {
        return Err(changed(None));
    };
    let mut events = batch.events;
    events.sort_by_key(|e| e.time_ns);
    Ok(events)
}

/// Merges per-process trace files `parts` into `out` (header first, then
/// events in time order) and returns what it saw.
pub fn merge<W: io::Write>(
    parts_paths: &[PathBuf],
    header: wire::TraceHeader,
    out: TraceWriter<W>,
) -> Result<(MergeSummary, W), MergeError> {
    let mut summary = MergeSummary {
        parts: parts_paths.len(),
        ..Default::default()
    };
    let mut index = Vec::new();
    let mut parts = Vec::with_capacity(parts_paths.len());
    for (i, p) in parts_paths.iter().enumerate() {
        match index_part(i as u32, p, &mut index, &mut summary) {
            Ok(part) => parts.push(part),
            Err(e) => {
                summary.bad_parts.push(e.to_string());
                parts.push(Part {
                    path: p.clone(),
                    ..Default::default()
                });
            }
        }
    }
    summary.processes = parts.iter().filter(|p| p.readable).count();
    summary.pids = parts
        .iter()
        .filter(|p| p.readable)
        .map(|p| p.pid)
        .collect::<std::collections::HashSet<_>>()
        .len();
    index.sort_by_key(|b| (b.min_t, b.part, b.ord));

    let mut out = Out {
        w: out,
        cur: None,
        pid: 0,
        events: Vec::with_capacity(OUT_BATCH_EVENTS),
        seq: vec![0; parts.len()],
        sigs_done: HashSet::new(),
        mods_done: HashSet::new(),
        write_sigs: HashSet::new(),
        dropped: vec![0; parts.len()],
        summary,
    };
    out.w.write_record(&wire::TraceRecord {
        record: Some(Record::Header(header)),
    })?;

    let mut heap: BinaryHeap<Open> = BinaryHeap::new();
    let mut files = HashMap::new();
    let mut buf = Vec::new();
    let mut next = 0;
    loop {
        while next < index.len()
            && heap
                .peek()
                .is_none_or(|top| index[next].min_t <= top.key().0)
        {
            let b = index[next];
            next += 1;
            let events = read_batch(&parts, &mut files, &b, &mut buf)?;
            if !events.is_empty() {
                heap.push(Open {
                    part: b.part,
                    ord: b.ord,
                    pos: 0,
                    events,
                });
            }
        }
        out.summary.max_open_batches = out.summary.max_open_batches.max(heap.len());
        let Some(mut top) = heap.pop() else { break };
        let ev = std::mem::take(&mut top.events[top.pos as usize]);
        top.pos += 1;
        let pidx = top.part;
        if (top.pos as usize) < top.events.len() {
            heap.push(top);
        }
        out.event(&parts[pidx as usize], pidx, ev)?;
    }
    out.flush()?;
    let w = out.w.finish()?;
    let mut summary = out.summary;
    summary.signatures = out.write_sigs.len();
    summary.dropped = out.dropped.iter().sum();
    Ok((summary, w))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(t: u64, tid: u32, kind: Kind) -> wire::Event {
        wire::Event {
            time_ns: t,
            tid,
            kind: Some(kind),
        }
    }
    fn write(sig: u64, len: u64) -> Kind {
        Kind::Write(wire::WriteEvent {
            file: Some(wire::FileId { dev: 1, ino: 9 }),
            len,
            signature: sig,
            ..Default::default()
        })
    }
    fn sig_info(sig: u64, module: u64) -> Kind {
        Kind::Signature(wire::SignatureInfo {
            signature: sig,
            frames: vec![wire::Frame {
                module_key: module,
                offset: 0x10,
            }],
            method: 0,
        })
    }
    fn module(key: u64) -> Kind {
        Kind::Module(wire::ModuleInfo {
            module_key: key,
            path: "/bin/x".into(),
            ..Default::default()
        })
    }

    fn part_file(dir: &Path, name: &str, pid: u32, batches: Vec<Vec<wire::Event>>) -> PathBuf {
        let p = dir.join(name);
        let mut w = TraceWriter::create(&p).unwrap();
        w.write_record(&wire::TraceRecord {
            record: Some(Record::Header(wire::TraceHeader::default())),
        })
        .unwrap();
        for (i, events) in batches.into_iter().enumerate() {
            w.write_record(&wire::TraceRecord {
                record: Some(Record::Batch(wire::EventBatch {
                    pid,
                    seq: i as u64,
                    events,
                })),
            })
            .unwrap();
        }
        w.finish().unwrap();
        p
    }

    fn merged(parts: &[PathBuf]) -> (MergeSummary, Vec<(u32, wire::Event)>) {
        let w = TraceWriter::new("mem".into(), Vec::new()).unwrap();
        let header = wire::TraceHeader {
            command: vec!["cmd".into()],
            ..Default::default()
        };
        let (s, bytes) = merge(parts, header, w).unwrap();
        let mut r = TraceReader::new("mem".into(), bytes.as_slice()).unwrap();
        let first = r.next_record().unwrap().unwrap();
        assert!(matches!(first.record, Some(Record::Header(h)) if h.command == ["cmd"]));
        let mut out = Vec::new();
        for rec in r {
            match rec.unwrap().record {
                Some(Record::Batch(b)) => out.extend(b.events.into_iter().map(|e| (b.pid, e))),
                other => panic!("unexpected record {other:?}"),
            }
        }
        (s, out)
    }

    #[test]
    fn the_summary_counts_write_calls_not_events() {
        let d = tempfile::tempdir().unwrap();
        let coalesced = Kind::Write(wire::WriteEvent {
            file: Some(wire::FileId { dev: 1, ino: 9 }),
            len: 300,
            signature: 7,
            calls: 3,
            ..Default::default()
        });
        let a = part_file(
            d.path(),
            "a.pcstrace",
            1,
            vec![vec![ev(1, 1, write(7, 100)), ev(2, 1, coalesced)]],
        );
        let (s, _) = merged(&[a]);
        assert_eq!((s.writes, s.bytes_written), (4, 400));
    }

    #[test]
    fn interleaved_thread_batches_and_processes_come_out_in_time_order() {
        let d = tempfile::tempdir().unwrap();
        // Process 10: thread 2's batch (t=5..50) is flushed after thread 1's (t=10..100).
        let a = part_file(
            d.path(),
            "10-1.pcstrace",
            10,
            vec![
                vec![ev(10, 1, write(7, 1)), ev(100, 1, write(7, 2))],
                vec![ev(5, 2, write(7, 4)), ev(50, 2, write(7, 8))],
            ],
        );
        let b = part_file(
            d.path(),
            "20-2.pcstrace",
            20,
            vec![vec![ev(1, 3, write(8, 16)), ev(60, 3, write(8, 32))]],
        );
        let (s, out) = merged(&[a, b]);
        let times: Vec<u64> = out.iter().map(|(_, e)| e.time_ns).collect();
        assert_eq!(times, [1, 5, 10, 50, 60, 100]);
        let pids: Vec<u32> = out.iter().map(|(p, _)| *p).collect();
        assert_eq!(pids, [20, 10, 10, 10, 20, 10]);
        assert_eq!(s.events, 6);
        assert_eq!(s.bytes_written, 63);
        assert_eq!(s.signatures, 2);
        assert_eq!(s.processes, 2);
        assert_eq!(s.pids, 2);
        assert_eq!(s.reordered_batches, 1);
        assert_eq!(s.missing_batches, 0);
    }

    #[test]
    fn seq_gaps_count_as_missing_batches() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("10-1.pcstrace");
        let mut w = TraceWriter::create(&p).unwrap();
        for seq in [0u64, 1, 4] {
            w.write_record(&wire::TraceRecord {
                record: Some(Record::Batch(wire::EventBatch {
                    pid: 10,
                    seq,
                    events: vec![ev(seq, 1, write(7, 1))],
                })),
            })
            .unwrap();
        }
        w.finish().unwrap();
        let (s, out) = merged(&[p]);
        assert_eq!(out.len(), 3);
        assert_eq!(s.missing_batches, 2);
    }

    #[test]
    fn signature_info_is_moved_before_its_first_use() {
        let d = tempfile::tempdir().unwrap();
        // Thread 2 wrote with signature 7 at t=5, but thread 1 stamped the
        // info (and the module) at t=6.
        let a = part_file(
            d.path(),
            "10-1.pcstrace",
            10,
            vec![
                vec![
                    ev(6, 1, module(3)),
                    ev(6, 1, sig_info(7, 3)),
                    ev(7, 1, write(7, 1)),
                ],
                vec![ev(5, 2, write(7, 4))],
            ],
        );
        let (s, out) = merged(&[a]);
        let kinds: Vec<&str> = out
            .iter()
            .map(|(_, e)| match e.kind {
                Some(Kind::Module(_)) => "module",
                Some(Kind::Signature(_)) => "sig",
                Some(Kind::Write(_)) => "write",
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["module", "sig", "write", "write"]);
        assert!(out.windows(2).all(|w| w[0].1.time_ns <= w[1].1.time_ns));
        assert_eq!(s.moved_infos, 2);
    }

    #[test]
    fn torn_and_empty_and_foreign_files_are_reported_not_fatal() {
        let d = tempfile::tempdir().unwrap();
        let a = part_file(
            d.path(),
            "10-1.pcstrace",
            10,
            vec![vec![ev(1, 1, write(7, 1))], vec![ev(2, 1, write(7, 1))]],
        );
        let len = std::fs::metadata(&a).unwrap().len();
        let f = std::fs::OpenOptions::new().write(true).open(&a).unwrap();
        f.set_len(len - 2).unwrap();
        let empty = d.path().join("11-1.pcstrace");
        std::fs::write(&empty, b"").unwrap();
        let junk = d.path().join("12-1.pcstrace");
        std::fs::write(&junk, b"hello world").unwrap();
        let (s, out) = merged(&[a, empty, junk]);
        assert_eq!(out.len(), 1);
        assert_eq!(s.torn_parts, 1);
        assert_eq!(s.bad_parts.len(), 1);
        assert!(
            s.bad_parts[0].contains("12-1.pcstrace"),
            "{:?}",
            s.bad_parts
        );
    }

    #[test]
    fn output_batches_are_per_process_and_bounded() {
        let d = tempfile::tempdir().unwrap();
        let n = OUT_BATCH_EVENTS as u64 * 2 + 5;
        let a = part_file(
            d.path(),
            "10-1.pcstrace",
            10,
            vec![(0..n).map(|t| ev(t, 1, write(7, 1))).collect()],
        );
        let w = TraceWriter::new("mem".into(), Vec::new()).unwrap();
        let (_, bytes) = merge(&[a], wire::TraceHeader::default(), w).unwrap();
        let sizes: Vec<(u64, usize)> = TraceReader::new("mem".into(), bytes.as_slice())
            .unwrap()
            .filter_map(|r| match r.unwrap().record {
                Some(Record::Batch(b)) => Some((b.seq, b.events.len())),
                _ => None,
            })
            .collect();
        assert_eq!(
            sizes,
            [(0, OUT_BATCH_EVENTS), (1, OUT_BATCH_EVENTS), (2, 5)]
        );
    }

    /// Peak resident memory of this process in KiB (VmHWM).
    fn peak_rss_kib() -> u64 {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmHWM:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            })
            .unwrap_or(0)
    }

    /// Merge throughput and memory on a synthetic trace. Run with
    /// `PCSTREAM_BENCH_EVENTS=20000000 cargo test --release -p pcstream-placement merge_throughput -- --ignored --nocapture`
    /// (default 5M events): 4 processes × 8 threads, 256-event batches
    /// flushed round-robin so that batches interleave out of time order.
    #[test]
    #[ignore = "benchmark; prints a table"]
    fn merge_throughput() {
        let total: u64 = std::env::var("PCSTREAM_BENCH_EVENTS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(5_000_000);
        let (procs, threads, per_batch) = (4u64, 8u64, 256u64);
        let d = tempfile::tempdir().unwrap();
        let t0 = std::time::Instant::now();
        let mut parts = Vec::new();
        let per_thread = total / procs / threads;
        for p in 0..procs {
            let path = d.path().join(format!("{}-1.pcstrace", 100 + p));
            let mut w = TraceWriter::create(&path).unwrap();
            let mut seq = 0;
            for b in 0..per_thread.div_ceil(per_batch) {
                for t in 0..threads {
                    let events = (b * per_batch..((b + 1) * per_batch).min(per_thread))
                        .map(|i| {
                            // Thread t's i-th event; threads are skewed in time.
                            let time = i * 1000 + t * 37 + p * 11 + (t * per_batch * 500);
                            ev(time, t as u32, write(t + 1, 4096))
                        })
                        .collect();
                    w.write_record(&wire::TraceRecord {
                        record: Some(Record::Batch(wire::EventBatch {
                            pid: (100 + p) as u32,
                            seq,
                            events,
                        })),
                    })
                    .unwrap();
                    seq += 1;
                }
            }
            w.finish().unwrap();
            parts.push(path);
        }
        let gen_s = t0.elapsed().as_secs_f64();
        let in_bytes: u64 = parts
            .iter()
            .map(|p| std::fs::metadata(p).unwrap().len())
            .sum();
        let rss0 = peak_rss_kib();
        let out = d.path().join("merged.pcstrace");
        let t1 = std::time::Instant::now();
        let (s, _) = merge(
            &parts,
            wire::TraceHeader::default(),
            TraceWriter::create(&out).unwrap(),
        )
        .unwrap();
        let secs = t1.elapsed().as_secs_f64();
        let rss1 = peak_rss_kib();
        println!("| events | parts | input MiB | merge s | Mevents/s | max open batches | peak RSS MiB (before → after) | reordered batches |");
        println!("|---|---|---|---|---|---|---|---|");
        println!(
            "| {} | {} | {:.1} | {:.2} | {:.2} | {} | {:.0} → {:.0} | {} |",
            s.events,
            parts.len(),
            in_bytes as f64 / 1048576.0,
            secs,
            s.events as f64 / secs / 1e6,
            s.max_open_batches,
            rss0 as f64 / 1024.0,
            rss1 as f64 / 1024.0,
            s.reordered_batches
        );
        println!("(generating the input took {gen_s:.1} s)");
        assert_eq!(s.events, procs * threads * per_thread);
    }
}
