//! AutoStream (Yang et al., SYSTOR'17): LBA-based automatic stream assignment,
//! the baseline PCStream is measured against. Two variants:
//!
//! * **SFR** (sequentiality, frequency, recency): per chunk of
//!   `chunk_pages` pages a write count, halved once per `decay_period` pages
//!   of logical time since the chunk's last access; stream =
//!   `min(⌊log_base(count)⌋, streams − 1)`; a write that starts where the
//!   previous write ended keeps the previous write's stream (sequential
//!   continuation).
//! * **MQ** (multi-queue): per chunk a reference count that never decays;
//!   queue = `min(⌊log_base(refs)⌋, streams − 1)`, one LRU queue per stream.
//!   Each chunk carries an expiry time `now + lifetime`, where `lifetime` is
//!   the gap between the last two accesses of the hottest chunk (the one with
//!   most references) when it became hottest. On every write the head of each
//!   queue above 0 is demoted one queue if it has expired (and re-armed).
//!   Demoting the hottest chunk passes the title to the next most referenced.
//!
//! Parameters chosen here (the original paper leaves them open and public
//! re-implementations differ, see docs/DESIGN.md §4):
//!
//! | parameter | default | why |
//! | --- | --- | --- |
//! | `chunk_pages` | 256 (1 MiB) | the PCStream authors' re-implementation (they also tried 2 MiB) |
//! | `decay_period` | 65536 pages (256 MiB written) | logical time instead of their 30 s wall clock, so a replay is reproducible |
//! | `log_base` | 10 | as the re-implementation: counts only decay across idle periods, so they grow with the trace; log2 would put every chunk of a long trace in the top stream of a small device |
//! | stream of a write | after counting the write | the write's own access is part of the chunk's hotness |
//!
//! Both use every stream id `0..streams` (no "unknown" stream: AutoStream
//! classifies every write), and only the LBA (`WriteCtx::lpn`); TRIMs are
//! ignored, as in the original.

use crate::placement::{Placement, StreamId, WriteCtx};
use std::collections::{BTreeSet, HashMap};

/// Tunables shared by both AutoStream variants.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AutoStreamConfig {
    /// Pages per chunk. Default 256 (1 MiB).
    pub chunk_pages: u32,
    /// SFR: logical time (pages) after which a chunk's count halves. Default 65536.
    pub decay_period: u64,
    /// Base of the logarithm that turns counts into streams. Default 10.
    pub log_base: f64,
    /// SFR: a write starting where the previous one ended keeps its stream. Default true.
    pub sequential_continuation: bool,
}

impl Default for AutoStreamConfig {
    fn default() -> Self {
        AutoStreamConfig {
            chunk_pages: 256,
            decay_period: 65536,
            log_base: 10.0,
            sequential_continuation: true,
        }
    }
}

/// Most chunks one write updates (4 GiB at 1 MiB chunks): a bogus length in
/// a trace must not stall a replay.
const MAX_CHUNKS_PER_WRITE: u64 = 4096;

/// Chunks `first..=last` a write of `pages` pages at `lpn` touches (capped).
fn chunk_range(lpn: u64, pages: u32, chunk_pages: u32) -> (u64, u64) {
    let cp = u64::from(chunk_pages);
    let first = lpn / cp;
    let last = lpn.saturating_add(u64::from(pages.max(1)) - 1) / cp;
    (
        first,
        last.min(first.saturating_add(MAX_CHUNKS_PER_WRITE - 1)),
    )
}

fn level(count: u64, base: f64, streams: u32) -> StreamId {
    if count <= 1 || streams <= 1 {
        return 0;
    }
    let base = if base > 1.0 { base } else { 2.0 };
    // Small epsilon so exact powers land on their level despite rounding.
    let l = ((count as f64).ln() / base.ln() + 1e-9).floor() as u64;
    l.min(u64::from(streams - 1)) as StreamId
}

/// AutoStream-SFR. See the module docs.
#[derive(Debug)]
pub struct AutoStreamSfr {
    cfg: AutoStreamConfig,
    streams: u32,
    chunks: HashMap<u64, (u64, u64)>,
    prev_end: Option<u64>,
    prev_stream: StreamId,
}

impl AutoStreamSfr {
    /// SFR for a device with `streams` stream ids.
    pub fn new(streams: u32, mut cfg: AutoStreamConfig) -> Self {
        cfg.chunk_pages = cfg.chunk_pages.max(1);
        cfg.decay_period = cfg.decay_period.max(1);
        AutoStreamSfr {
            cfg,
            streams: streams.max(1),
            chunks: HashMap::new(),
            prev_end: None,
            prev_stream: 0,
        }
    }

    fn touch(&mut self, chunk: u64, now: u64) -> u64 {
        let e = self.chunks.entry(chunk).or_insert((0, now));
        let periods = now.saturating_sub(e.1) / self.cfg.decay_period;
        e.0 = if periods >= 64 { 0 } else { e.0 >> periods };
        e.0 += 1;
        e.1 = now;
        e.0
    }
}

impl Placement for AutoStreamSfr {
    fn name(&self) -> &str {
        "autostream-sfr"
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("chunks", self.chunks.len() as u64)]
    }

    fn streams(&self) -> u32 {
        self.streams
    }

    fn place(&mut self, w: &WriteCtx) -> StreamId {
        let (first, last) = chunk_range(w.lpn, w.pages, self.cfg.chunk_pages);
        let count = self.touch(first, w.time);
        for c in (first..=last).skip(1) {
            self.touch(c, w.time);
        }
        let s = if self.cfg.sequential_continuation && self.prev_end == Some(w.lpn) {
            self.prev_stream
        } else {
            level(count, self.cfg.log_base, self.streams)
        };
        self.prev_end = Some(w.lpn.saturating_add(u64::from(w.pages.max(1))));
        self.prev_stream = s;
        s
    }
}

const NIL: u32 = u32::MAX;

#[derive(Debug, Clone)]
struct MqChunk {
    refs: u64,
    last: u64,
    expire: u64,
    queue: u32,
    prev: u32,
    next: u32,
}

/// AutoStream-MQ. See the module docs.
#[derive(Debug)]
pub struct AutoStreamMq {
    cfg: AutoStreamConfig,
    streams: u32,
    index: HashMap<u64, u32>,
    chunks: Vec<MqChunk>,
    /// (head, tail) per queue; head = least recently used.
    queues: Vec<(u32, u32)>,
    /// (refs, slot) of every chunk, to find the next hottest.
    by_refs: BTreeSet<(u64, u32)>,
    hottest: u32,
    max_refs: u64,
    lifetime: u64,
}

impl AutoStreamMq {
    /// MQ for a device with `streams` stream ids.
    pub fn new(streams: u32, mut cfg: AutoStreamConfig) -> Self {
        cfg.chunk_pages = cfg.chunk_pages.max(1);
        let streams = streams.max(1);
        AutoStreamMq {
            cfg,
            streams,
            index: HashMap::new(),
            chunks: Vec::new(),
            queues: vec![(NIL, NIL); streams as usize],
            by_refs: BTreeSet::new(),
            hottest: NIL,
            max_refs: 0,
            lifetime: 0,
        }
    }

    fn unlink(&mut self, i: u32) {
        let (q, p, n) = {
            let c = &self.chunks[i as usize];
            (c.queue as usize, c.prev, c.next)
        };
        if p == NIL {
            self.queues[q].0 = n;
        } else {
            self.chunks[p as usize].next = n;
        }
        if n == NIL {
            self.queues[q].1 = p;
        } else {
            self.chunks[n as usize].prev = p;
        }
    }

    fn push_tail(&mut self, i: u32, q: u32) {
        let t = self.queues[q as usize].1;
        {
            let c = &mut self.chunks[i as usize];
            c.queue = q;
            c.prev = t;
            c.next = NIL;
        }
        if t == NIL {
            self.queues[q as usize].0 = i;
        } else {
            self.chunks[t as usize].next = i;
        }
        self.queues[q as usize].1 = i;
    }

    fn access(&mut self, id: u64, now: u64) -> StreamId {
        let i = match self.index.get(&id) {
            Some(&i) => {
                self.unlink(i);
                i
            }
            None => {
                let i = self.chunks.len() as u32;
                self.chunks.push(MqChunk {
                    refs: 0,
                    last: now,
                    expire: now,
                    queue: 0,
                    prev: NIL,
                    next: NIL,
                });
                self.index.insert(id, i);
                i
            }
        };
        let (old_refs, last) = (self.chunks[i as usize].refs, self.chunks[i as usize].last);
        let refs = old_refs + 1;
        self.by_refs.remove(&(old_refs, i));
        self.by_refs.insert((refs, i));
        if refs > self.max_refs {
            self.lifetime = now.saturating_sub(last);
            self.max_refs = refs;
            self.hottest = i;
        }
        let q = level(refs, self.cfg.log_base, self.streams);
        {
            let c = &mut self.chunks[i as usize];
            c.refs = refs;
            c.last = now;
            c.expire = now.saturating_add(self.lifetime);
        }
        self.push_tail(i, q);
        self.demote(now);
        // The chunk itself may have been demoted just now (expired at once).
        self.chunks[i as usize].queue
    }

    fn demote(&mut self, now: u64) {
        for q in (1..self.streams).rev() {
            let h = self.queues[q as usize].0;
            if h == NIL || self.chunks[h as usize].expire >= now {
                continue;
            }
            if h == self.hottest {
                if let Some(&(r, j)) = self.by_refs.iter().rev().find(|e| e.1 != h) {
                    self.hottest = j;
                    self.max_refs = r;
                }
            }
            self.unlink(h);
            self.chunks[h as usize].expire = now.saturating_add(self.lifetime);
            self.push_tail(h, q - 1);
        }
    }

    /// Queue (= stream) a chunk of LBA `lpn` is in now, if it was ever written.
    pub fn queue_of(&self, lpn: u64) -> Option<StreamId> {
        let id = lpn / u64::from(self.cfg.chunk_pages);
        self.index.get(&id).map(|&i| self.chunks[i as usize].queue)
    }
}

impl Placement for AutoStreamMq {
    fn name(&self) -> &str {
        "autostream-mq"
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("chunks", self.chunks.len() as u64)]
    }

    fn streams(&self) -> u32 {
        self.streams
    }

    fn place(&mut self, w: &WriteCtx) -> StreamId {
        let (first, last) = chunk_range(w.lpn, w.pages, self.cfg.chunk_pages);
        let s = self.access(first, w.time);
        for c in (first..=last).skip(1) {
            self.access(c, w.time);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(time: u64, lpn: u64) -> WriteCtx {
        WriteCtx {
            time,
            lpn,
            pages: 1,
            ..Default::default()
        }
    }

    #[test]
    fn level_is_log_of_count_capped() {
        assert_eq!(level(1, 2.0, 9), 0);
        assert_eq!(level(2, 2.0, 9), 1);
        assert_eq!(level(7, 2.0, 9), 2);
        assert_eq!(level(8, 2.0, 9), 3);
        assert_eq!(level(1 << 20, 2.0, 9), 8);
        assert_eq!(level(99, 10.0, 9), 1);
        assert_eq!(level(100, 10.0, 9), 2);
        assert_eq!(level(100, 2.0, 1), 0);
    }

    #[test]
    fn sfr_hot_chunk_climbs_and_cools_down() {
        let cfg = AutoStreamConfig {
            chunk_pages: 4,
            decay_period: 100,
            log_base: 2.0,
            sequential_continuation: false,
        };
        let mut p = AutoStreamSfr::new(5, cfg);
        let mut s = 0;
        for t in 0..16 {
            s = p.place(&w(t, 1));
        }
        assert_eq!(s, 4, "16 writes → log2 16 = 4");
        assert_eq!(p.place(&w(16, 400)), 0, "a fresh chunk is cold");
        // 17 accesses, then 3 decay periods: 17 >> 3 = 2, +1 = 3 → level 1.
        assert_eq!(p.place(&w(16 + 300, 2)), 1);
    }

    #[test]
    fn huge_writes_touch_a_bounded_number_of_chunks() {
        assert_eq!(chunk_range(10, 1, 256), (0, 0));
        assert_eq!(chunk_range(255, 2, 256), (0, 1));
        assert_eq!(chunk_range(0, u32::MAX, 256), (0, MAX_CHUNKS_PER_WRITE - 1));
        assert_eq!(chunk_range(u64::MAX, u32::MAX, 1).0, u64::MAX);
        let mut p = AutoStreamMq::new(4, AutoStreamConfig::default());
        let big = WriteCtx {
            lpn: 0,
            pages: u32::MAX,
            ..Default::default()
        };
        p.place(&big);
        assert_eq!(p.index.len() as u64, MAX_CHUNKS_PER_WRITE);
    }

    #[test]
    fn sfr_sequential_write_keeps_the_stream() {
        let cfg = AutoStreamConfig {
            chunk_pages: 4,
            log_base: 2.0,
            ..Default::default()
        };
        let mut p = AutoStreamSfr::new(5, cfg);
        for t in 0..8 {
            p.place(&w(t, 0));
        }
        let hot = p.place(&w(8, 3));
        assert!(hot >= 3);
        // lpn 4 starts a cold chunk but continues the previous write.
        assert_eq!(p.place(&w(9, 4)), hot);
        assert_eq!(p.place(&w(10, 40)), 0);
    }

    #[test]
    fn mq_promotes_by_refs_and_demotes_expired_chunks() {
        let cfg = AutoStreamConfig {
            chunk_pages: 1,
            log_base: 2.0,
            ..Default::default()
        };
        let mut p = AutoStreamMq::new(4, cfg);
        // Chunk 0 is rewritten every other write: it becomes the hottest with
        // an inter-access lifetime of 2.
        let mut t = 0;
        let mut s0 = 0;
        for i in 0..16 {
            s0 = p.place(&w(t, 0));
            t += 1;
            p.place(&w(t, 100 + i));
            t += 1;
        }
        assert_eq!(s0, 3, "16 refs → queue min(4, 3)");
        assert_eq!(p.queue_of(100), Some(0));
        // Chunk 0 stops being written: its expiry (lifetime 2) passes and it
        // sinks one queue per write until queue 0.
        for i in 0..16 {
            p.place(&w(t, 1000 + i));
            t += 1;
        }
        assert_eq!(p.queue_of(0), Some(0));
        // Rewritten, it climbs straight back: refs never decay in MQ.
        assert_eq!(p.place(&w(t, 0)), 3);
    }
}
