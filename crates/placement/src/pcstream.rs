//! `pcstream`: signature → stream, learned online from the data's lifetimes.
//!
//! Each write is placed by looking its signature up in the [`Mapper`]'s table
//! (unknown → stream 0), then handed to the [`LifetimeManager`], which ends
//! the lives it overwrites and records the new data. TRIMs and file
//! invalidations (punch, truncate, unlink) end lives too. After each event the
//! mapper's re-cluster rule is applied (cheap unless its interval elapsed).
//!
//! Keying: a write that names a file is tracked by `(file, page in file)`,
//! whose lives end by overwrite or [`Placement::invalidate_file`]; a write
//! without a file (block traces) by its LBA, whose lives end by overwrite or
//! [`Placement::trim`]. `key_by_lba` forces LBA keying for every write (for
//! traces whose deletions are only visible as TRIMs).
//!
//! Beyond the PC ([`RefineConfig`]): a write is learnt and placed under a
//! *key*, its signature refined by the application's own hint and by the
//! previous lifetime of the page it overwrites; an append to a file that
//! was only ever appended goes to the stream of the key that appended most
//! of it (file affinity: the file dies whole); `pcstream-paper`
//! ([`PcStream::paper`]) is the paper's algorithm without them. What the
//! simulator runs as `pcstream` is [`PcStreamDual`]: one learner keyed by
//! file page and one by LBA, placing with the one whose streams the
//! device's deaths agree with.
//!
//! This is the same code the daemon runs online; the signature table survives
//! restarts through [`PcStream::export_sigs`] / [`PcStream::import_sigs`].

use crate::lifetime::{LifetimeConfig, LifetimeManager, SigStats, LBA_SPACE};
use crate::mapper::{Mapper, MapperConfig};
use crate::placement::{Placement, StreamId, WriteCtx};
use crate::write_count::WriteCounts;

/// Tunables of the `pcstream` policy.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PcStreamConfig {
    /// Lifetime manager settings.
    pub lifetime: LifetimeConfig,
    /// Mapper settings.
    pub mapper: MapperConfig,
    /// Track every write by LBA even when it names a file. Default false.
    /// The `pcstream` policy then runs this LBA-keyed learner alone (what a
    /// block-layer implementation sees) instead of both learners.
    pub key_by_lba: bool,
    /// Signals beyond the PC that refine a write's key (see the module docs).
    pub refine: RefineConfig,
    /// Place the device's GC copies too (simulator GC hook): a copy of a
    /// page of age `g` goes to the stream whose learnt lifetime is nearest
    /// `2g` (its age is a lower bound of its lifetime). Default false.
    pub gc_by_age: bool,
    /// Stream ids kept for the device's GC copies, placed by age
    /// ([`crate::gc_age`]; simulator GC hook, `PcStreamDual` only): the
    /// learners place host data in the others. `None`: the simulator
    /// decides for its device (3 without internal streams, 0 with);
    /// `Some(0)` leaves GC copies to the device. Ignored when fewer than
    /// two data streams would be left. Default `None`.
    pub gc_streams: Option<u32>,
}

/// Which online signals refine a PC signature into the key a write is
/// learnt and placed under. Everything off is the paper's algorithm
/// (`pcstream-paper`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RefineConfig {
    /// The application's own write-lifetime hint for the file (RocksDB's
    /// per-level hints): one key per (signature, hint). Default true.
    pub app_hint: bool,
    /// The previous lifetime of the page an overwrite ends, in buckets of
    /// `prev_bucket_log2` (log2 units): one key per (signature, bucket);
    /// writes onto free pages keep the bare key. Default true.
    pub prev_lifetime: bool,
    /// Width of a previous-lifetime bucket, log2 units. Default 2 (×4).
    pub prev_bucket_log2: f64,
    /// Place a write that overwrites nothing of its file (an append, a new
    /// file) in the stream of the key that has appended most of the file's
    /// pages since it was created or emptied, while the file was never
    /// updated in place: one file's pieces written by several code paths
    /// (an SST's data blocks, index and footer) die together when the file
    /// dies. Learning stays per key. Default true.
    pub file_affinity: bool,
    /// The number of times the written address was written before,
    /// relative to the average written address's, in log2 buckets
    /// ([`WriteCounts::relative_bucket`]): one key per (signature,
    /// bucket); first writes keep the bare key. The LBA-keyed learner
    /// only (`key_by_lba`): in [`PcStreamDual`] the file learner, which
    /// keys writes without a file by LBA too, goes without, and the
    /// device's deaths decide between them. Default true.
    pub lba_writes: bool,
}

impl Default for RefineConfig {
    fn default() -> Self {
        RefineConfig {
            app_hint: true,
            prev_lifetime: true,
            prev_bucket_log2: 2.0,
            file_affinity: true,
            lba_writes: true,
        }
    }
}

impl RefineConfig {
    /// No refinement: the PC signature alone (the paper).
    pub fn none() -> Self {
        RefineConfig {
            app_hint: false,
            prev_lifetime: false,
            prev_bucket_log2: 2.0,
            file_affinity: false,
            lba_writes: false,
        }
    }
}

impl PcStreamConfig {
    /// The paper's algorithm: no refinement, no hysteresis, no merging, ids
    /// by rank.
    pub fn paper() -> Self {
        let mut c = PcStreamConfig {
            refine: RefineConfig::none(),
            ..Default::default()
        };
        c.mapper.hysteresis_log2 = 0.0;
        c.mapper.min_gap_log2 = 0.0;
        c.mapper.stable_ids = false;
        c
    }
}

/// Keys tracked per file for `file_affinity`.
const AFFINITY_KEYS: usize = 4;

/// Mixes a refinement into a key (splitmix64 finaliser; never 0).
pub fn refine_key(key: u64, salt: u64) -> u64 {
    let mut z = key ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    z.max(1)
}

/// The `pcstream` policy. See the module docs.
#[derive(Debug)]
pub struct PcStream {
    name: &'static str,
    streams: u32,
    key_by_lba: bool,
    refine: RefineConfig,
    gc_by_age: bool,
    /// PC signatures that were refined, and the refined keys (reports
    /// count signatures, not keys).
    signatures: std::collections::HashSet<u64>,
    refined: std::collections::HashSet<u64>,
    /// Per file: pages appended by each key since it was created or
    /// emptied, at most [`AFFINITY_KEYS`] keys (`file_affinity`).
    file_keys: std::collections::HashMap<(u64, u64), Vec<(u64, u64)>>,
    /// Per LBA: writes so far (`lba_writes`).
    counts: WriteCounts,
    lm: LifetimeManager,
    mapper: Mapper,
}

impl PcStream {
    /// `pcstream` for a device with `streams` stream ids (0 = unknown).
    pub fn new(streams: u32, cfg: PcStreamConfig) -> Self {
        let streams = streams.max(1);
        PcStream {
            name: "pcstream",
            streams,
            key_by_lba: cfg.key_by_lba,
            refine: cfg.refine.clone(),
            gc_by_age: cfg.gc_by_age,
            signatures: Default::default(),
            refined: Default::default(),
            file_keys: Default::default(),
            counts: Default::default(),
            lm: LifetimeManager::new(cfg.lifetime),
            mapper: Mapper::new(streams, cfg.mapper),
        }
    }

    /// The paper's algorithm under the name `pcstream-paper`: `cfg` with
    /// refinement, hysteresis, merging and stable stream ids off.
    pub fn paper(streams: u32, cfg: PcStreamConfig) -> Self {
        let mut cfg = cfg;
        cfg.refine = RefineConfig::none();
        cfg.mapper.hysteresis_log2 = 0.0;
        cfg.mapper.min_gap_log2 = 0.0;
        cfg.mapper.stable_ids = false;
        let mut p = PcStream::new(streams, cfg);
        p.name = "pcstream-paper";
        p
    }

    /// The key a write of `sig` is learnt and placed under (see
    /// [`RefineConfig`]).
    /// Also whether the write overwrites live data of its space.
    fn key_of(&self, sig: u64, w: &WriteCtx, space: (u64, u64), first: u64) -> (u64, bool) {
        let born = self.lm.born_at(space, first);
        if sig == 0 {
            return (0, born.is_some());
        }
        let mut key = sig;
        if self.refine.app_hint && w.app_hint >= 2 {
            key = refine_key(key, 0x100 | u64::from(w.app_hint));
        }
        if self.refine.prev_lifetime {
            if let Some(born) = born {
                let life = w.time.saturating_sub(born).max(1) as f64;
                let b = (life.log2() / self.refine.prev_bucket_log2.max(0.1)) as u64;
                key = refine_key(key, 0x1_0000 | b);
            }
        }
        if self.refine.lba_writes && self.key_by_lba {
            let b = self.counts.relative_bucket(first);
            if b > 0 {
                key = refine_key(key, 0x2_0000 | b);
            }
        }
        (key, born.is_some())
    }

    /// The lifetime manager (signature statistics, counters).
    pub fn lifetimes(&self) -> &LifetimeManager {
        &self.lm
    }

    /// The mapper (signature → stream table, centroids, generation).
    pub fn mapper(&self) -> &Mapper {
        &self.mapper
    }

    /// Forces a re-clustering at logical time `now` (e.g. after a reload).
    pub fn recluster_now(&mut self, now: u64) {
        let f = self.mapper.features(&self.lm, now);
        self.mapper.recluster(&f);
    }

    /// The signature table, sorted, for persisting.
    pub fn export_sigs(&self) -> Vec<(u64, SigStats)> {
        self.lm
            .sigs_sorted()
            .into_iter()
            .map(|(k, s)| (k, s.clone()))
            .collect()
    }

    /// Reloads a persisted signature table and re-clusters at `now`, so
    /// known signatures are placed from their first write.
    pub fn import_sigs(&mut self, sigs: impl IntoIterator<Item = (u64, SigStats)>, now: u64) {
        self.lm.load_sigs(sigs);
        self.recluster_now(now);
    }
}

impl Placement for PcStream {
    fn name(&self) -> &str {
        self.name
    }

    fn streams(&self) -> u32 {
        self.streams
    }

    fn place(&mut self, w: &WriteCtx) -> StreamId {
        let sig = w.signature.unwrap_or(0);
        let (space, first) = match w.file {
            Some(f) if !self.key_by_lba => (f, w.file_page),
            _ => (LBA_SPACE, w.lpn),
        };
        let (key, overwrote) = self.key_of(sig, w, space, first);
        if sig != 0 && key != sig && self.refined.insert(key) {
            self.signatures.insert(sig);
        }
        // A refined key not clustered yet borrows its signature's stream.
        let mut stream = match self.mapper.stream(key) {
            0 => self.mapper.stream(sig),
            s => s,
        };
        if let (true, Some(f)) = (
            self.refine.file_affinity && !self.key_by_lba && sig != 0,
            w.file,
        ) {
            let keys = self.file_keys.entry(f).or_default();
            if overwrote {
                // Updated in place: its pages no longer die together.
                keys.clear();
                keys.push((0, u64::MAX));
            } else if keys.first() != Some(&(0, u64::MAX)) {
                if let Some(k) = keys.iter_mut().find(|k| k.0 == key) {
                    k.1 += u64::from(w.pages);
                } else if keys.len() < AFFINITY_KEYS {
                    keys.push((key, u64::from(w.pages)));
                }
                // The key that appended most of the file so far.
                let top = keys.iter().max_by_key(|k| k.1).map_or(key, |k| k.0);
                if top != key {
                    stream = match self.mapper.stream(top) {
                        0 => stream,
                        s => s,
                    };
                }
            }
        }
        let pages = u64::from(w.pages);
        if self.refine.lba_writes && self.key_by_lba {
            self.counts.bump(first, pages);
        }
        self.lm.write(space, first, pages, key, w.time);
        self.mapper
            .maybe_recluster(&self.lm, w.time.saturating_add(pages));
        stream
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = self.lm.counters();
        vec![
            (
                "signatures",
                // Bare keys, plus the refined signatures never seen bare.
                self.lm
                    .sigs_sorted()
                    .iter()
                    .filter(|(k, _)| !self.refined.contains(k))
                    .count() as u64
                    + self
                        .signatures
                        .iter()
                        .filter(|s| self.lm.sig(**s).is_none())
                        .count() as u64,
            ),
            ("keys", self.lm.sig_count() as u64),
            ("mapped_signatures", self.mapper.table().len() as u64),
            ("reclusters", self.mapper.generation()),
            ("live_entries", self.lm.live_entries() as u64),
            ("deaths", c.deaths),
            ("evictions", c.evictions),
        ]
    }

    fn trim(&mut self, lpn: u64, pages: u32, time: u64) {
        self.lm.invalidate(LBA_SPACE, lpn, u64::from(pages), time);
        self.mapper.maybe_recluster(&self.lm, time);
    }

    fn invalidate_file(&mut self, file: (u64, u64), first_page: u64, pages: u64, time: u64) {
        if first_page == 0 && pages == u64::MAX {
            self.file_keys.remove(&file);
        }
        if !self.key_by_lba {
            self.lm.invalidate(file, first_page, pages, time);
            self.mapper.maybe_recluster(&self.lm, time);
        }
    }
}

/// `pcstream` as the simulator runs it: two learners over the same writes,
/// one keyed by file page (the lifetimes the shim sees: overwrites, unlinks,
/// truncates) and one by LBA (the lifetimes the device sees: overwrites of
/// the LBA and TRIMs), each refined the same way. Every write goes to both;
/// it is placed by the one whose streams hold data that dies together *on
/// the device*: for each LBA the dual policy remembers when it was written
/// and which stream each learner chose, and when the device sees it die
/// (overwrite or TRIM) it adds log2(lifetime) to that stream's statistics,
/// per learner. The learner with the lower pooled within-stream variance
/// places, re-decided every [`DECIDE_EVERY`] pages. Where the file system
/// reuses freed blocks soon (SQLite's journal) the device's view is the
/// sharper one; where files die whole at unrelated LBAs (RocksDB's tables)
/// the file view is. Memory: 10 bytes per LBA below 2^28 (LBAs above are
/// not scored).
#[derive(Debug)]
pub struct PcStreamDual {
    by_file: PcStream,
    by_lba: PcStream,
    use_lba: bool,
    /// Per LBA: host time of its last write (`u64::MAX` = none).
    born: Vec<u64>,
    /// Per LBA: the stream each learner chose for its last write.
    chosen: Vec<[u8; 2]>,
    /// Per learner, per stream: (pages, mean, m2) of log2 device lifetime.
    score: [Vec<(f64, f64, f64)>; 2],
    next_decision: u64,
    switches: u64,
    gc_by_age: bool,
    /// Centroids (log2 pages) of streams `1..` of the placing learner, for
    /// the GC hook.
    centroids: std::sync::Arc<std::sync::Mutex<Vec<f64>>>,
    /// Stream ids of the device (the learners get fewer with `gc_streams`).
    streams: u32,
    /// Stream ids kept for GC copies by age (`gc_streams`), the last ones.
    gc_streams: u32,
}

/// [`PcStreamDual`]'s GC placement (`gc_by_age`).
#[derive(Debug)]
struct AgeGc {
    centroids: std::sync::Arc<std::sync::Mutex<Vec<f64>>>,
}

impl crate::placement::GcPlacement for AgeGc {
    fn collected(&mut self, _stream: Option<StreamId>, _opened: u64, _now: u64) {}

    fn place_gc(&mut self, stream: Option<StreamId>, written: u64, now: u64) -> StreamId {
        let c = self.centroids.lock().unwrap_or_else(|e| e.into_inner());
        if c.is_empty() {
            return stream.unwrap_or(0);
        }
        let x = (now.saturating_sub(written).max(1) as f64 * 2.0).log2();
        // Unused streams have a NaN centroid: never nearest.
        let mut best: Option<usize> = None;
        for (j, v) in c.iter().enumerate() {
            if v.is_finite() && best.is_none_or(|b| (x - v).abs() < (x - c[b]).abs()) {
                best = Some(j);
            }
        }
        best.map_or(stream.unwrap_or(0), |b| b as StreamId + 1)
    }
}

/// Pages between two choices of [`PcStreamDual`]'s learner.
pub const DECIDE_EVERY: u64 = 16384;

/// Largest LBA scored by [`PcStreamDual`].
const SCORED_PAGES: u64 = 1 << 28;

fn by_lba_gc(p: &PcStream) -> bool {
    p.gc_by_age
}

impl PcStreamDual {
    /// Both learners for a device with `streams` stream ids (`cfg.key_by_lba`
    /// is ignored: one of each).
    pub fn new(streams: u32, cfg: PcStreamConfig) -> Self {
        let all = streams.max(1);
        let gc_streams = match cfg.gc_streams.unwrap_or(0) {
            g if all > g.saturating_add(2) => g,
            _ => 0,
        };
        let streams = all - gc_streams;
        let by_file = PcStream::new(
            streams,
            PcStreamConfig {
                key_by_lba: false,
                ..cfg.clone()
            },
        );
        let by_lba = PcStream::new(
            streams,
            PcStreamConfig {
                key_by_lba: true,
                ..cfg
            },
        );
        let n = by_file.streams as usize;
        let gc_by_age = by_lba_gc(&by_lba);
        PcStreamDual {
            gc_by_age,
            streams: all,
            gc_streams,
            centroids: Default::default(),
            by_file,
            by_lba,
            use_lba: false,
            born: Vec::new(),
            chosen: Vec::new(),
            score: [vec![(0.0, 0.0, 0.0); n], vec![(0.0, 0.0, 0.0); n]],
            next_decision: DECIDE_EVERY,
            switches: 0,
        }
    }

    /// Whether writes are currently placed by the LBA-keyed learner.
    pub fn uses_lba(&self) -> bool {
        self.use_lba
    }

    /// The learner currently placing (its mapper and lifetimes).
    pub fn placing(&self) -> &PcStream {
        if self.use_lba {
            &self.by_lba
        } else {
            &self.by_file
        }
    }

    /// Pooled within-stream variance of log2(device lifetime) of learner
    /// `v` (0 = file, 1 = LBA), `None` before any death.
    pub fn pooled_variance(&self, v: usize) -> Option<f64> {
        let (m2, n) = self.score[v]
            .iter()
            .fold((0.0, 0.0), |(m, k), s| (m + s.2, k + s.0));
        (n > 0.0).then(|| m2 / n)
    }

    /// LBA `lpn` died on the device at `now`: scores both learners' choices.
    fn died(&mut self, lpn: u64, now: u64) {
        let i = lpn as usize;
        let Some(&born) = self.born.get(i) else {
            return;
        };
        if born == u64::MAX {
            return;
        }
        self.born[i] = u64::MAX;
        let x = (now.saturating_sub(born).max(1) as f64).log2();
        for v in 0..2 {
            let s = &mut self.score[v][usize::from(self.chosen[i][v])];
            s.0 += 1.0;
            let d = x - s.1;
            s.1 += d / s.0;
            s.2 += d * (x - s.1);
        }
    }

    fn decide(&mut self, now: u64) {
        if now < self.next_decision {
            return;
        }
        self.next_decision = now.saturating_add(DECIDE_EVERY);
        if let (Some(f), Some(l)) = (self.pooled_variance(0), self.pooled_variance(1)) {
            let lba = l < f;
            if lba != self.use_lba {
                self.use_lba = lba;
                self.switches += 1;
            }
        }
        if self.gc_by_age {
            let p = if self.use_lba {
                &self.by_lba
            } else {
                &self.by_file
            };
            *self.centroids.lock().unwrap_or_else(|e| e.into_inner()) =
                p.mapper.centroids().to_vec();
        }
    }
}

impl Placement for PcStreamDual {
    fn name(&self) -> &str {
        "pcstream"
    }

    fn streams(&self) -> u32 {
        self.streams
    }

    fn place(&mut self, w: &WriteCtx) -> StreamId {
        let a = self.by_file.place(w);
        let b = self.by_lba.place(w);
        for k in 0..u64::from(w.pages) {
            let lpn = w.lpn.saturating_add(k);
            if lpn >= SCORED_PAGES {
                break;
            }
            self.died(lpn, w.time);
            let i = lpn as usize;
            if i >= self.born.len() {
                let n = (i + 1).next_power_of_two().min(SCORED_PAGES as usize);
                self.born.resize(n, u64::MAX);
                self.chosen.resize(n, [0, 0]);
            }
            self.born[i] = w.time;
            self.chosen[i] = [a.min(255) as u8, b.min(255) as u8];
        }
        self.decide(w.time);
        if self.use_lba {
            b
        } else {
            a
        }
    }

    fn trim(&mut self, lpn: u64, pages: u32, time: u64) {
        self.by_file.trim(lpn, pages, time);
        self.by_lba.trim(lpn, pages, time);
        for k in 0..u64::from(pages) {
            let p = lpn.saturating_add(k);
            if p >= SCORED_PAGES || p as usize >= self.born.len() {
                break;
            }
            self.died(p, time);
        }
    }

    fn invalidate_file(&mut self, file: (u64, u64), first_page: u64, pages: u64, time: u64) {
        self.by_file.invalidate_file(file, first_page, pages, time);
        self.by_lba.invalidate_file(file, first_page, pages, time);
    }

    fn gc_placement(&mut self) -> Option<Box<dyn crate::placement::GcPlacement + Send>> {
        if self.gc_streams > 0 {
            return Some(Box::new(crate::gc_age::AgeClasses::new(
                self.streams - self.gc_streams,
                self.gc_streams,
            )));
        }
        self.gc_by_age.then(|| {
            Box::new(AgeGc {
                centroids: std::sync::Arc::clone(&self.centroids),
            }) as Box<dyn crate::placement::GcPlacement + Send>
        })
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let p = if self.use_lba {
            &self.by_lba
        } else {
            &self.by_file
        };
        let mut c = p.counters();
        c.push(("placed_by_lba", u64::from(self.use_lba)));
        c.push(("view_switches", self.switches));
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> PcStreamConfig {
        PcStreamConfig {
            lifetime: LifetimeConfig {
                chunk_pages: 1,
                ..Default::default()
            },
            mapper: MapperConfig {
                check_interval: 64,
                censor_min_age: 256,
                ..Default::default()
            },
            key_by_lba: false,
            refine: RefineConfig::default(),
            gc_by_age: false,
            gc_streams: None,
        }
    }

    fn write(t: u64, file: u64, page: u64, sig: u64) -> WriteCtx {
        WriteCtx {
            time: t,
            lpn: 1_000_000 + t,
            pages: 1,
            file: Some((1, file)),
            file_page: page,
            signature: Some(sig),
            ..Default::default()
        }
    }

    #[test]
    fn learns_from_unlinks_and_persists_across_restart() {
        // The PC alone (as the daemon runs it: the shim looks streams up
        // by signature).
        let paper = PcStreamConfig {
            refine: RefineConfig::none(),
            ..cfg()
        };
        let cfg = || paper.clone();
        let mut p = PcStream::new(3, cfg());
        let mut t = 0;
        // sig 1: 8-page temp files deleted once written (lifetimes 1..8);
        // sig 2: two pages of one file rewritten alternately (lifetime 18).
        for round in 0..100u64 {
            for pg in 0..8 {
                p.place(&write(t, 100 + round, pg, 1));
                t += 1;
            }
            p.invalidate_file((1, 100 + round), 0, u64::MAX, t);
            p.place(&write(t, 7, round % 2, 2));
            t += 1;
        }
        assert_eq!(p.mapper().stream(1), 1);
        assert_eq!(p.mapper().stream(2), 2);
        assert_eq!(p.place(&write(t, 9, 0, 77)), 0, "unknown signature");
        let c: std::collections::BTreeMap<_, _> = p.counters().into_iter().collect();
        assert_eq!(c["signatures"], 3);
        assert_eq!(c["mapped_signatures"], 2);
        assert!(c["reclusters"] >= 1);
        let saved = p.export_sigs();
        let mut q = PcStream::new(3, cfg());
        q.import_sigs(saved, 0);
        assert_eq!(
            q.place(&write(0, 500, 0, 1)),
            1,
            "known from the first write"
        );
        assert_eq!(q.place(&write(1, 501, 0, 2)), 2);
    }

    #[test]
    fn lba_writes_learn_from_trims() {
        let mut p = PcStream::new(3, cfg());
        for t in 0..2000u64 {
            let (lpn, sig) = if t % 2 == 0 {
                (t % 10, 1)
            } else {
                (5000 + t, 2)
            };
            let w = WriteCtx {
                time: t,
                lpn,
                pages: 1,
                signature: Some(sig),
                ..Default::default()
            };
            p.place(&w);
            if t % 2 == 1 && t > 600 {
                p.trim(5000 + t - 600, 1, t);
            }
        }
        assert_eq!(p.mapper().stream(1), 1);
        assert_eq!(p.mapper().stream(2), 2);
    }

    fn hinted(t: u64, file: u64, page: u64, sig: u64, hint: u8) -> WriteCtx {
        WriteCtx {
            app_hint: hint,
            ..write(t, file, page, sig)
        }
    }

    /// One code path writes files the application hints SHORT (deleted at
    /// once) and files it hints EXTREME (kept): refined by the hint, the
    /// two are learnt apart and placed apart; the paper's PC alone cannot.
    #[test]
    fn the_app_hint_splits_one_signature() {
        let run = |mut p: PcStream| {
            let mut t = 0;
            for round in 0..200u64 {
                // A short file: 8 pages, unlinked right away.
                for pg in 0..8 {
                    p.place(&hinted(t, 1000 + round, pg, 1, 2));
                    t += 1;
                }
                p.invalidate_file((1, 1000 + round), 0, u64::MAX, t);
                // A long one: 8 pages, unlinked 100 rounds later.
                for pg in 0..8 {
                    p.place(&hinted(t, 5000 + round, pg, 1, 5));
                    t += 1;
                }
                if round >= 100 {
                    p.invalidate_file((1, 5000 + round - 100), 0, u64::MAX, t);
                }
                // Another signature of a middle lifetime.
                p.place(&write(t, 7, round % 40, 2));
                t += 1;
            }
            let s = p.place(&hinted(t, 9000, 0, 1, 2));
            let l = p.place(&hinted(t + 1, 9001, 0, 1, 5));
            (s, l)
        };
        let (s, l) = run(PcStream::new(4, cfg()));
        assert!(s < l, "refined: short {s} long {l}");
        let mut paper = cfg();
        paper.refine = RefineConfig::none();
        let (s, l) = run(PcStream::new(4, paper));
        assert_eq!(s, l, "the PC alone cannot tell them apart");
    }

    /// Long-lived files, each appended by sig 1 (data) then sig 2 (a small
    /// index at the end), beside short temp files sig 2 writes alone: sig 2
    /// is learnt short-lived, yet the index pages of a long file go with
    /// the file's data (file affinity); a file updated in place loses it.
    #[test]
    fn appended_pieces_of_a_file_follow_its_main_writer() {
        let run = |file_affinity| {
            let mut c = cfg();
            c.refine.file_affinity = file_affinity;
            let mut p = PcStream::new(4, c);
            let mut t = 0;
            for round in 0..300u64 {
                let f = 1000 + round;
                for pg in 0..30 {
                    p.place(&write(t, f, pg, 1));
                    t += 1;
                }
                p.place(&write(t, f, 30, 2));
                t += 1;
                if round >= 100 {
                    p.invalidate_file((1, f - 100), 0, u64::MAX, t);
                }
                // A temp file of sig 2, deleted at once.
                for pg in 0..4 {
                    p.place(&write(t, 9000 + round, pg, 2));
                    t += 1;
                }
                p.invalidate_file((1, 9000 + round), 0, u64::MAX, t);
            }
            let mut data = 0;
            for pg in 0..30 {
                data = p.place(&write(t, 5000, pg, 1));
                t += 1;
            }
            let index = p.place(&write(t, 5000, 30, 2));
            let temp = p.place(&write(t + 1, 5001, 0, 2));
            // File 5000 rewritten in place: its pieces part again.
            p.place(&write(t + 2, 5000, 0, 1));
            let after = p.place(&write(t + 3, 5000, 31, 2));
            (data, index, temp, after)
        };
        let (data, index, temp, after) = run(true);
        assert!(temp < data, "sig 2 alone is short-lived: {temp} vs {data}");
        assert_eq!(index, data, "the index goes with its file");
        assert_eq!(after, temp, "in place: each key its own stream");
        let (data, index, _, _) = run(false);
        assert!(index < data, "without affinity: {index} vs {data}");
    }

    /// One code path rewrites a few hot pages of a file again and again and
    /// the rest of the file rarely (SQLite's pager): refined by the page's
    /// previous lifetime, a hot page's rewrite goes to a shorter stream
    /// than a cold page's.
    #[test]
    fn the_previous_lifetime_splits_hot_and_cold_pages() {
        let mut p = PcStream::new(4, cfg());
        let mut t = 0;
        let mut x = 1u64;
        for _ in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // 9 writes in 10 to 16 hot pages, 1 in 10 to 4096 cold ones.
            let page = if (x >> 60) < 14 {
                (x >> 33) % 16
            } else {
                16 + (x >> 33) % 4096
            };
            p.place(&write(t, 7, page, 1));
            t += 1;
        }
        let hot = p.place(&write(t, 7, 3, 1));
        let cold = p.place(&write(t + 1, 7, 16 + 2049, 1));
        assert!(hot < cold, "hot {hot} cold {cold}");
        let paper = PcStream::paper(4, cfg());
        assert_eq!(paper.name(), "pcstream-paper");
    }

    /// One code path rewrites 64 hot LBAs at random, and writes each LBA
    /// of a cold region twice, as far apart as a hot page's writes, then
    /// leaves it for a long time. The cold pages' second writes have the
    /// hot pages' previous lifetime but few writes behind them: refined
    /// by the address's write count they are learnt apart and placed in
    /// a longer stream; by previous lifetime alone they share the hot
    /// pages' key.
    #[test]
    fn the_write_count_splits_addresses_the_previous_lifetime_cannot() {
        let run = |lba_writes: bool| {
            let mut c = cfg();
            c.key_by_lba = true;
            c.refine.lba_writes = lba_writes;
            let mut p = PcStream::new(4, c);
            let mut x = 7u64;
            let mut t = 0u64;
            let at = |t: u64, lpn: u64| WriteCtx {
                time: t,
                lpn,
                pages: 1,
                signature: Some(1),
                ..Default::default()
            };
            let mut due = std::collections::VecDeque::new();
            for step in 0..120_000u64 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                p.place(&at(t, (x >> 33) % 64));
                t += 1;
                if step % 4 == 0 {
                    // The cold region: 1024 LBAs, each written twice,
                    // about as far apart as a hot page's writes (64
                    // steps), revisited every 4096 steps.
                    let lpn = 10_000 + (step / 4) % 1024;
                    p.place(&at(t, lpn));
                    t += 1;
                    due.push_back((step + 64, lpn));
                }
                if due.front().is_some_and(|d| d.0 == step) {
                    let (_, lpn) = due.pop_front().unwrap_or_default();
                    p.place(&at(t, lpn));
                    t += 1;
                }
            }
            let hot = p.place(&at(t, 5));
            // The cold page due next, left 4096 steps ago, written twice.
            let next = 10_000 + (120_000 / 4) % 1024;
            p.place(&at(t + 1, next));
            let cold = p.place(&at(t + 97, next));
            let c = p.mapper().centroids().to_vec();
            let life = |s: StreamId| c.get(s as usize - 1).copied().unwrap_or(f64::NAN);
            (hot, cold, life(hot), life(cold))
        };
        let (hot, cold, lh, lc) = run(true);
        assert!(lc > lh + 2.0, "hot {hot} ({lh}) cold {cold} ({lc})");
        let (hot, cold, _, _) = run(false);
        assert_eq!(
            hot, cold,
            "the previous lifetime alone cannot tell them apart"
        );
    }

    /// With `gc_streams`, the dual keeps the last stream ids for the
    /// device's GC copies: host writes land below them, and the GC hook
    /// sends a copy younger than the victims' mean lifespan to the first
    /// GC stream and an old one to the last. Without, there is no hook
    /// and host data may use every stream.
    #[test]
    fn the_dual_keeps_gc_streams_for_copies_by_age() {
        let drive = |p: &mut PcStreamDual| {
            let mut used = std::collections::BTreeSet::new();
            for step in 0..60_000u64 {
                // Six signatures rewriting regions of 4 .. 4096 pages in
                // turn: lifetimes ×4 apart.
                let sig = 1 + step % 6;
                let span = 4u64 << (2 * (sig - 1));
                let lpn = sig * 100_000 + (step / 6) % span;
                let w = WriteCtx {
                    time: step,
                    lpn,
                    pages: 1,
                    signature: Some(sig),
                    ..Default::default()
                };
                used.insert(p.place(&w));
            }
            used
        };
        let mut c = cfg();
        c.gc_streams = Some(2);
        let mut p = PcStreamDual::new(6, c);
        assert_eq!(p.streams(), 6);
        let used = drive(&mut p);
        assert!(used.iter().all(|&s| s < 4), "host streams {used:?}");
        assert!(used.len() >= 3, "host streams {used:?}");
        let mut hook = p.gc_placement().expect("a GC hook");
        for i in 0..16 {
            hook.collected(Some(1), 1000 * i, 1000 * i + 100);
        }
        assert_eq!(hook.place_gc(Some(1), 20_000, 20_050), 4, "young copy");
        assert_eq!(hook.place_gc(Some(1), 0, 20_000), 5, "old copy");

        let mut q = PcStreamDual::new(6, cfg());
        assert!(q.gc_placement().is_none());
        let used = drive(&mut q);
        assert!(used.iter().any(|&s| s >= 4), "host streams {used:?}");
    }

    /// Files deleted at once whose blocks the file system reuses only much
    /// later (device: long-lived), beside in-place hot and cold pages: the
    /// file learner groups the deleted files with the hot pages (both die
    /// young in the file view), the LBA learner with the cold ones, and the
    /// device's deaths side with the LBA learner, which then places.
    #[test]
    fn the_dual_places_with_the_learner_the_device_agrees_with() {
        let mut p = PcStreamDual::new(3, cfg());
        let mut t = 0u64;
        let mut x = 1u64;
        let mut rnd = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 33
        };
        let at = |t: u64, file: u64, page: u64, lpn: u64, sig: u64| WriteCtx {
            lpn,
            ..write(t, file, page, sig)
        };
        for step in 0..120_000u64 {
            // A: 4-page temp files, unlinked once written; next-fit LBAs
            // over a 20000-page region.
            let f = 1000 + step / 4;
            p.place(&at(t, f, step % 4, 100_000 + step % 20_000, 1));
            t += 1;
            if step % 4 == 3 {
                p.invalidate_file((1, f), 0, u64::MAX, t);
            }
            // B: 16 hot pages rewritten in place.
            let b = rnd() % 16;
            p.place(&at(t, 7, b, 50_000 + b, 2));
            t += 1;
            // C: 4096 cold pages rewritten in place.
            let c = rnd() % 4096;
            p.place(&at(t, 8, c, 60_000 + c, 3));
            t += 1;
        }
        let (f, l) = (p.pooled_variance(0).unwrap(), p.pooled_variance(1).unwrap());
        assert!(l < f, "device-lifetime variance: lba {l} file {f}");
        assert!(p.uses_lba());
        let c: std::collections::BTreeMap<_, _> = p.counters().into_iter().collect();
        assert_eq!(c["placed_by_lba"], 1);
    }
}
