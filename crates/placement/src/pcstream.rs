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
//! simulator runs as `pcstream` is
//! [`PcStreamDual`](crate::dual::PcStreamDual): one learner keyed by file
//! page and one by LBA, placing with the one whose streams the device's
//! deaths agree with.
//!
//! This is the same code the daemon runs online; the signature table survives
//! restarts through [`PcStream::export_sigs`] / [`PcStream::import_sigs`].

use crate::lifetime::{LifetimeConfig, LifetimeManager, SigStats, LBA_SPACE};
use crate::mapper::{nearest_stream, Basis, Mapper, MapperConfig};
use crate::placement::{PlacedBy, Placement, StreamId, WriteCtx};
use crate::write_count::WriteCounts;

mod run;

/// Tunables of the `pcstream` policy.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
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
    /// two data streams would be left. Default `None`. The dual keeps them
    /// only while GC copies are frequent (`PcStreamDual`, "GC streams on
    /// demand" in docs/placement-log.md).
    pub gc_streams: Option<u32>,
    /// With `gc_streams`: place a GC copy by its age alone (SepBIT's
    /// estimate), not by the larger of its age and its address's write
    /// interval ([`WriteCounts::interval`]). Default false.
    pub gc_age_only: bool,
    /// Learn the writes that carry no signature (a block trace's
    /// file-system journal and metadata) under a key of their own,
    /// [`UNATTRIBUTED_KEY`], clustered with the others: its cluster is
    /// stream 0, where the device keeps such writes anyway, so data keys
    /// of the journal's lifetime join it there and the data streams are
    /// left to other lifetimes ([`Mapper::set_stream0_key`]). False:
    /// they are placed in stream 0 and learnt by nobody (the paper).
    /// Default true.
    pub learn_unattributed: bool,
}

impl Default for PcStreamConfig {
    fn default() -> Self {
        PcStreamConfig {
            lifetime: LifetimeConfig::default(),
            mapper: MapperConfig::default(),
            key_by_lba: false,
            refine: RefineConfig::default(),
            gc_by_age: false,
            gc_streams: None,
            gc_age_only: false,
            learn_unattributed: true,
        }
    }
}

/// The key writes without a signature are learnt under
/// (`learn_unattributed`): "unattrib" in ASCII; signatures are 64-bit
/// hashes of return addresses, so a clash is as likely as any other.
pub const UNATTRIBUTED_KEY: u64 = 0x756e_6174_7472_6962;

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
    /// The written address's write interval (host pages per write since
    /// its first write: the mean of its lifetimes so far), in log2 buckets
    /// ([`WriteCounts::interval_bucket`]): one key per (signature,
    /// bucket); first writes keep the bare key. The LBA-keyed learner
    /// only (`key_by_lba`): in [`PcStreamDual`](crate::dual::PcStreamDual)
    /// the file learner, which keys writes without a file by LBA too, goes
    /// without, and the device's deaths decide between them. Default true.
    pub lba_writes: bool,
    /// A refined key that no clustering has placed yet goes to the stream
    /// whose centroid is nearest its address's write interval, instead of
    /// borrowing its signature's stream. The LBA-keyed learner with
    /// `lba_writes` only (the interval is kept there), and only once the
    /// address was written [`MIN_SETTLED_WRITES`] times (before, its
    /// interval is the time since its first write, not a mean of
    /// lifetimes); otherwise it still borrows. Default true.
    pub new_keys_by_interval: bool,
}

impl Default for RefineConfig {
    fn default() -> Self {
        RefineConfig {
            app_hint: true,
            prev_lifetime: true,
            prev_bucket_log2: 2.0,
            file_affinity: true,
            lba_writes: true,
            new_keys_by_interval: true,
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
            new_keys_by_interval: false,
        }
    }
}

impl PcStreamConfig {
    /// The paper's algorithm: no refinement, no hysteresis, no merging, ids
    /// by rank, new keys only at re-clusterings, unattributed writes not
    /// learnt.
    pub fn paper() -> Self {
        PcStreamConfig::default().into_paper()
    }

    /// `self` with everything the paper does not have turned off (the
    /// other tunables kept).
    pub fn into_paper(mut self) -> Self {
        self.refine = RefineConfig::none();
        self.mapper.hysteresis_log2 = 0.0;
        self.mapper.min_gap_log2 = 0.0;
        self.mapper.stable_ids = false;
        self.mapper.place_new_keys = false;
        self.mapper.never_died_beyond_age_log2 = 0.0;
        self.mapper.recluster_on_first_deaths = false;
        self.mapper.never_died_on_top = false;
        self.mapper.censor_partial_share = 0.0;
        self.learn_unattributed = false;
        self
    }
}

/// Writes an address must have had before its write interval places an
/// unclustered key (`new_keys_by_interval`): the interval is then the mean
/// of at least two lifetimes, not the time since its first write.
pub const MIN_SETTLED_WRITES: u32 = 3;

/// Keys tracked per file for `file_affinity`.
const AFFINITY_KEYS: usize = 4;

pub use crate::signature::refine_key;

/// The `pcstream` policy. See the module docs.
#[derive(Debug)]
pub struct PcStream {
    name: &'static str,
    streams: u32,
    key_by_lba: bool,
    refine: RefineConfig,
    /// PC signatures that were refined, and the refined keys (reports
    /// count signatures, not keys).
    signatures: std::collections::HashSet<u64>,
    refined: std::collections::HashSet<u64>,
    /// Per file: pages appended by each key since it was created or
    /// emptied, at most [`AFFINITY_KEYS`] keys (`file_affinity`).
    file_keys: std::collections::HashMap<(u64, u64), Vec<(u64, u64)>>,
    /// Per LBA: first write and writes so far (`lba_writes`, or
    /// [`PcStream::shared_write_counts`]), shared with a GC hook.
    counts: std::sync::Arc<std::sync::Mutex<WriteCounts>>,
    /// Whether `counts` is kept (an LBA-keyed learner with `lba_writes`,
    /// or asked for by [`PcStream::shared_write_counts`]).
    keep_counts: bool,
    lm: LifetimeManager,
    mapper: Mapper,
    /// The key of writes without a signature: [`UNATTRIBUTED_KEY`] with
    /// `learn_unattributed`, else 0 (not learnt).
    unattributed: u64,
    /// The latest write's signature, key and branch
    /// ([`Placement::placed_by`]).
    last: (u64, u64, How),
}

/// Which branch of [`PcStream`]'s placement placed a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// Its key's cluster.
    Clustered,
    /// A new LBA key, by its address's write interval.
    ByInterval,
    /// A new key: its bare signature's stream (0 when none).
    Fallback,
    /// File affinity changed the stream.
    FileAffinity,
}

/// [`PlacedBy::rule`] of a write without a signature.
pub const RULE_UNSIGNED: &str = "no signature: the unattributed writes' cluster";
/// [`PlacedBy::rule`] of a key a clustering placed before the rule was recorded.
pub const RULE_CLUSTERED: &str = "its key's cluster";
/// [`PlacedBy::rule`] of a new LBA key placed by its write interval.
pub const RULE_BY_INTERVAL: &str = "a new key, by its address's write interval";
/// [`PlacedBy::rule`] of a new refined key placed with its bare signature.
pub const RULE_AS_SIGNATURE: &str = "a new key, with its bare signature's stream";
/// [`PlacedBy::rule`] of a key nothing is known of yet.
pub const RULE_UNKNOWN: &str = "nothing learnt yet: stream 0";
/// [`PlacedBy::rule`] of an append placed with its file's main writer.
pub const RULE_FILE_AFFINITY: &str = "file affinity: an append follows its file's main writer";

impl PcStream {
    /// `pcstream` for a device with `streams` stream ids (0 = unknown).
    pub fn new(streams: u32, cfg: PcStreamConfig) -> Self {
        let streams = streams.max(1);
        let unattributed = if cfg.learn_unattributed {
            UNATTRIBUTED_KEY
        } else {
            0
        };
        let mut mapper = Mapper::new(streams, cfg.mapper);
        if unattributed != 0 {
            mapper.set_stream0_key(unattributed);
        }
        PcStream {
            name: "pcstream",
            streams,
            key_by_lba: cfg.key_by_lba,
            refine: cfg.refine.clone(),
            signatures: Default::default(),
            refined: Default::default(),
            file_keys: Default::default(),
            counts: Default::default(),
            keep_counts: cfg.key_by_lba && cfg.refine.lba_writes,
            lm: LifetimeManager::new(cfg.lifetime),
            mapper,
            unattributed,
            last: (0, 0, How::Fallback),
        }
    }

    /// The paper's algorithm under the name `pcstream-paper`: `cfg`
    /// [`PcStreamConfig::into_paper`].
    pub fn paper(streams: u32, cfg: PcStreamConfig) -> Self {
        let mut p = PcStream::new(streams, cfg.into_paper());
        p.name = "pcstream-paper";
        p
    }

    /// Places into `streams` stream ids from now on (the dual gives some
    /// of its ids to GC copies, or takes them back), re-clustering at once
    /// at `now`.
    pub(crate) fn set_streams(&mut self, streams: u32, now: u64) {
        let streams = streams.max(1);
        self.streams = streams;
        self.mapper.set_streams(streams, &self.lm, now);
    }

    /// The per-LBA write history of an LBA-keyed learner, kept from now on
    /// even without `lba_writes`, for a reader beside the policy (the
    /// dual's GC hook); `None` for a file-keyed learner.
    pub(crate) fn shared_write_counts(
        &mut self,
    ) -> Option<std::sync::Arc<std::sync::Mutex<WriteCounts>>> {
        self.key_by_lba.then(|| {
            self.keep_counts = true;
            std::sync::Arc::clone(&self.counts)
        })
    }

    /// The key a write of `sig` is learnt and placed under (see
    /// [`RefineConfig`]); `interval` is the written LBA's
    /// [`WriteCounts::interval_bucket`] (0 when not kept).
    /// Also whether the write overwrites live data of its space.
    fn key_of(
        &self,
        sig: u64,
        w: &WriteCtx,
        space: (u64, u64),
        first: u64,
        interval: u64,
    ) -> (u64, bool) {
        let born = self.lm.born_at(space, first);
        if sig == 0 {
            return (self.unattributed, born.is_some());
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
        if self.refine.lba_writes && self.key_by_lba && interval > 0 {
            key = refine_key(key, 0x3_0000 | interval);
        }
        (key, born.is_some())
    }

    /// File affinity: counts `pages` more of file `f` under `key` (or
    /// marks the file updated in place when the write `overwrote`), and
    /// returns the stream of the key that appended most of the file so
    /// far when that key has one, else `stream`.
    fn file_affinity(
        &mut self,
        f: (u64, u64),
        key: u64,
        overwrote: bool,
        pages: u64,
        stream: StreamId,
    ) -> StreamId {
        let keys = self.file_keys.entry(f).or_default();
        if overwrote {
            // Updated in place: its pages no longer die together.
            keys.clear();
            keys.push((0, u64::MAX));
        } else if keys.first() != Some(&(0, u64::MAX)) {
            if let Some(k) = keys.iter_mut().find(|k| k.0 == key) {
                k.1 += pages;
            } else if keys.len() < AFFINITY_KEYS {
                keys.push((key, pages));
            }
            // The key that appended most of the file so far.
            let top = keys.iter().max_by_key(|k| k.1).map_or(key, |k| k.0);
            if top != key {
                if let Some(s) = self.mapper.assigned(top) {
                    return s;
                }
            }
        }
        stream
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
        self.mapper.recluster_from(&self.lm, now);
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
        let pages = u64::from(w.pages);
        // The interval before this write, then this write counted (one
        // lock: a GC hook may share the history).
        let (interval, writes) = if self.keep_counts {
            let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
            let b = c.interval_bucket(first, w.time);
            let n = c.get(first);
            c.bump(first, pages, w.time);
            (b, n)
        } else {
            (0, 0)
        };
        let (key, overwrote) = self.key_of(sig, w, space, first, interval);
        if sig != 0 && key != sig && self.refined.insert(key) {
            self.signatures.insert(sig);
        }
        // A refined key not clustered yet goes by its address's write
        // interval when it has one, else borrows its signature's stream.
        // Which branch placed it, told by `placed_by` (the rule's words
        // are looked up there, off the write path).
        let mut how = How::Fallback;
        let mut stream = match self.mapper.assigned(key) {
            Some(s) => {
                how = How::Clustered;
                s
            }
            None if self.refine.new_keys_by_interval
                && self.refine.lba_writes
                && self.key_by_lba
                && key != 0
                && writes >= MIN_SETTLED_WRITES =>
            {
                // The bucket's middle: bucket b holds log2 intervals in [b − 1, b).
                match nearest_stream(self.mapper.centroids(), interval as f64 - 0.5) {
                    Some(s) => {
                        how = How::ByInterval;
                        s
                    }
                    None => self.mapper.stream(sig),
                }
            }
            None => self.mapper.stream(sig),
        };
        if let (true, Some(f)) = (
            self.refine.file_affinity && !self.key_by_lba && sig != 0,
            w.file,
        ) {
            let own = stream;
            stream = self.file_affinity(f, key, overwrote, pages, stream);
            if stream != own {
                how = How::FileAffinity;
            }
        }
        self.last = (sig, key, how);
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
                    .filter(|(k, _)| !self.refined.contains(k) && *k != self.unattributed)
                    .count() as u64
                    + self
                        .signatures
                        .iter()
                        .filter(|s| self.lm.sig(**s).is_none())
                        .count() as u64,
            ),
            ("keys", self.lm.sig_count() as u64),
            ("mapped_signatures", self.mapper.table().len() as u64),
            ("reclusters", self.mapper.reclusters()),
            ("live_entries", self.lm.live_entries() as u64),
            ("deaths", c.deaths),
            ("evictions", c.evictions),
        ]
    }

    /// The latest write's rule. A clustered key's basis is the latest
    /// clustering's, which is the one that placed the write unless the
    /// write itself triggered a re-clustering.
    fn placed_by(&self) -> Option<PlacedBy> {
        let (sig, key, how) = self.last;
        let rule = match how {
            _ if sig == 0 => RULE_UNSIGNED,
            How::Clustered => self.mapper.basis(key).map_or(RULE_CLUSTERED, Basis::label),
            How::ByInterval => RULE_BY_INTERVAL,
            How::FileAffinity => RULE_FILE_AFFINITY,
            How::Fallback if self.mapper.assigned(sig).is_some() => RULE_AS_SIGNATURE,
            How::Fallback => RULE_UNKNOWN,
        };
        Some(PlacedBy {
            rule,
            refined: sig != 0 && key != sig,
        })
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn cfg() -> PcStreamConfig {
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
            ..Default::default()
        }
    }

    /// A one-page write at LBA `lpn` (no file) at time `t`.
    fn at_lba(t: u64, lpn: u64, sig: Option<u64>) -> WriteCtx {
        WriteCtx {
            time: t,
            lpn,
            pages: 1,
            signature: sig,
            ..Default::default()
        }
    }

    pub(crate) fn write(t: u64, file: u64, page: u64, sig: u64) -> WriteCtx {
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

    /// 100 rounds from time `t`: sig 1 writes an 8-page temp file deleted
    /// once written (lifetimes 1..8), sig 2 one of two pages of a file
    /// rewritten alternately (lifetime 18), and with `grow` sig 3 one more
    /// page of a file that only grows. Returns the time after.
    fn temp_files_and_rewrites(p: &mut PcStream, mut t: u64, grow: bool) -> u64 {
        for round in 0..100u64 {
            for pg in 0..8 {
                p.place(&write(t, 100 + round, pg, 1));
                t += 1;
            }
            p.invalidate_file((1, 100 + round), 0, u64::MAX, t);
            p.place(&write(t, 7, round % 2, 2));
            t += 1;
            if grow {
                p.place(&write(t, 8, round, 3));
                t += 1;
            }
        }
        t
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
        let t = temp_files_and_rewrites(&mut p, 0, false);
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
    fn says_which_rule_placed_each_write() {
        let paper = PcStreamConfig {
            refine: RefineConfig::none(),
            ..cfg()
        };
        let mut p = PcStream::new(4, paper);
        let by = |p: &PcStream| p.placed_by().unwrap();
        p.place(&write(0, 9, 0, 1));
        assert_eq!(by(&p).rule, RULE_UNKNOWN);
        assert!(!by(&p).refined);
        let t = temp_files_and_rewrites(&mut p, 1, true);
        p.place(&write(t, 500, 0, 1));
        assert_eq!(by(&p).rule, Basis::Deaths.label());
        p.place(&write(t + 1, 8, 100, 3));
        assert_eq!(by(&p).rule, Basis::NeverDied.label());
        p.place(&at_lba(t + 2, 5, None));
        assert_eq!(by(&p).rule, RULE_UNSIGNED);
        // Refined by the previous lifetime: an overwrite's key is not the
        // bare signature, a first write's is.
        let mut q = PcStream::new(4, cfg());
        q.place(&write(0, 7, 0, 2));
        assert!(!by(&q).refined);
        q.place(&write(1, 7, 0, 2));
        assert!(by(&q).refined);
        assert_eq!(by(&q).rule, RULE_UNKNOWN, "neither key is learnt yet");
    }

    /// Writes without a signature (a journal ring) are learnt: a light
    /// signature of the journal's lifetime joins it in stream 0 and the
    /// two data streams go to the other lifetimes. Without
    /// `learn_unattributed` (the paper) the journal stays in stream 0
    /// alone and the light signature takes a data stream.
    #[test]
    fn writes_without_a_signature_are_learnt_and_their_cluster_is_stream_0() {
        let run = |learn_unattributed: bool| {
            let mut p = PcStream::new(
                3,
                PcStreamConfig {
                    refine: RefineConfig::none(),
                    learn_unattributed,
                    ..cfg()
                },
            );
            let mut t = 0;
            let mut put = |p: &mut PcStream, lpn: u64, sig: Option<u64>| {
                t += 1;
                p.place(&at_lba(t - 1, lpn, sig))
            };
            let mut last = [0; 4];
            for i in 0..6000u64 {
                // The journal: 2 pages a step over a ring of 64 (lives 32
                // steps); sig 1 the same lifetime, half the pages; sig 2
                // lives 1024 steps, sig 3 outlives the run.
                last[0] = put(&mut p, 10_000 + (2 * i) % 64, None);
                put(&mut p, 10_000 + (2 * i + 1) % 64, None);
                last[1] = put(&mut p, 20_000 + i % 32, Some(1));
                last[2] = put(&mut p, 30_000 + i % 1024, Some(2));
                last[3] = put(&mut p, 40_000 + i, Some(3));
            }
            (last, p)
        };
        let (last, p) = run(true);
        assert_eq!(last[0], 0, "the journal");
        assert_eq!(last[1], 0, "the journal's lifetime");
        assert!(last[2] >= 1 && last[3] > last[2], "{last:?}");
        let c: std::collections::BTreeMap<_, _> = p.counters().into_iter().collect();
        assert_eq!(c["signatures"], 3, "the journal's key is no signature");
        let (last, _) = run(false);
        assert_eq!(last[0], 0);
        assert!(last[1] >= 1, "{last:?}");
    }

    /// A refined key no clustering has placed yet (an address rewritten
    /// under a new previous lifetime) goes to the centroid nearest its
    /// address's write interval, not to its signature's stream.
    #[test]
    fn an_unplaced_refined_key_goes_by_its_addresss_write_interval() {
        let run = |new_keys_by_interval: bool| {
            let mut p = PcStream::new(
                3,
                PcStreamConfig {
                    key_by_lba: true,
                    refine: RefineConfig {
                        new_keys_by_interval,
                        ..RefineConfig::default()
                    },
                    ..cfg()
                },
            );
            let mut t = 0;
            let mut put = |p: &mut PcStream, lpn: u64, sig: u64| {
                t += 1;
                p.place(&at_lba(t - 1, lpn, Some(sig)))
            };
            // Sig 1 rewrites a ring of 8 pages (short-lived); sig 2 fills
            // fresh pages (never rewritten): its bare key is long-lived.
            for i in 0..4000u64 {
                put(&mut p, i % 8, 1);
                put(&mut p, 1_000 + i, 2);
            }
            let short = put(&mut p, 0, 1);
            let long = put(&mut p, 1_000_000, 2);
            assert!(short >= 1 && long > short, "{short} {long}");
            // Sig 2 now rewrites sig 1's hot ring: new keys (sig 2 with
            // an interval), never clustered yet.
            (put(&mut p, 1, 2), short, long)
        };
        let (got, short, _) = run(true);
        assert_eq!(got, short, "by the address's interval");
        let (got, _, long) = run(false);
        assert_eq!(got, long, "borrows its signature's stream");
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
            p.place(&at_lba(t, lpn, Some(sig)));
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
    /// hot pages' previous lifetime but a long write interval (two writes
    /// since their first, thousands of pages ago): refined by the
    /// address's write interval they are learnt apart and placed in a
    /// longer stream; by previous lifetime alone they share the hot pages'
    /// key.
    #[test]
    fn the_write_interval_splits_addresses_the_previous_lifetime_cannot() {
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
}
