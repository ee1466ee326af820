//! The PC→stream mapper: groups signatures of similar lifetime into streams.
//!
//! Feature: one point per signature on `log2(lifetime in pages)`, weighted by
//! the pages the signature wrote (its volume), so a heavy activity pulls its
//! cluster's centroid and a handful of tiny signatures cannot claim streams.
//! k-means ([`cluster_1d`]) makes `m` clusters for the `m` data streams
//! `1..=m` of an `m+1`-stream device; clusters are ordered by centroid, so
//! stream 1 holds the shortest-lived data. Signatures without an estimate go
//! to stream 0 ("unknown"), as in the paper.
//!
//! Feature of a signature: its EWMA lifetime estimate once some of its data
//! died. A signature none of whose data has died yet, but which first wrote
//! at least `censor_min_age` pages ago, gets a *censored* estimate from the
//! age of its first write, a lower bound of its lifetime: data that outlives
//! everything is then placed with the longest-lived data instead of in the
//! unknown stream. The estimate is twice the age (`never_died_beyond_age_log2`
//! = 1): what has lived its age with no death lives, at the median, as long
//! again (Gott's estimate: a scale-free lifetime, P(L > x | L > a) = a / x),
//! so it is not clustered with data that dies *at* that age, which the bare
//! age would claim. When such a signature's data starts to die, the next
//! check counts it as changed however little its feature moved
//! (`recluster_on_first_deaths`): its estimate now rests on deaths. The
//! paper has no such rule; `censor = false` turns it off.
//!
//! Partly censored (`censor_partial_share`, not in the paper): a signature
//! that has heard deaths, but of fewer than half the pages it wrote, is
//! estimated at least at its Little's-law lifetime, live pages × age /
//! pages written ([`crate::lifetime::SigStats::little_log2`]). The deaths
//! heard are then the minority that died soon (a database's rewritten
//! pages beside the many it wrote once), and their mean is the
//! shortest lives, not the signature's: the pages that stay are placed
//! with the short-lived ones and the device copies them. With no death
//! heard the two estimates agree: the age.
//!
//! Re-clustering (paper §5.2: "when 10% of the PC lifetime entries changed"):
//! at check points the mapper compares each signature's feature with the one
//! it had at the last clustering. Checks are spaced `now / 4` pages apart, at
//! least `first_interval` and at most `check_interval`: a young run (a
//! compiler's first MiB) is mapped within a few checks, a long one is checked
//! every `check_interval` pages, so the work stays bounded (`spacing`, the
//! oracle's re-fit schedule too). A signature counts as changed when it is
//! new or moved by at least `change_threshold_log2` (1.0 = a factor of two).
//! When at least `change_fraction` (10%) of the signatures changed, it
//! re-clusters. Everything is deterministic: signatures are visited in sorted
//! order and k-means is seeded.
//!
//! Between re-clusterings (not in the paper; `place_new_keys`): at each
//! check that does not re-cluster, a signature with no stream yet whose
//! feature is censored (none of its data has died) gets the stream of the
//! nearest centroid. The paper leaves it in stream 0 until 10% of the
//! signatures have changed, which with hundreds of keys can take a whole
//! pass: a new heavy key (a database re-load writing pages that will never
//! die) then borrows whatever its writer's stream is, and lands beside
//! data it strands. A new signature whose data has started to die waits
//! for the re-clustering: its first deaths are its shortest lives, an
//! estimate biased short.
//!
//! Stream 0's cluster (not in the paper; [`Mapper::set_stream0_key`]):
//! the caller may name one key (the learner's key for writes without a
//! signature: a block trace's file-system journal and metadata, which the
//! device already holds in stream 0) that is clustered with the others
//! into one more cluster; when the key carries at least half that
//! cluster's weight ([`STREAM0_SHARE`]) the cluster is stream 0, so data
//! keys of the journal's lifetime share stream 0 and leave the data
//! streams to the other lifetimes; otherwise the data are clustered
//! without the key, which stays alone in stream 0.
//!
//! Stream ids: the clusters of a re-clustering keep centroid order and are
//! numbered by rank, stream 1 the shortest-lived (the paper). With
//! `stable_ids` (off by default) they are numbered instead so that as
//! much weight as possible stays in the stream it had
//! ([`crate::stream_ids`]; unused ids are then skipped, their centroid
//! NaN): rank renumbers every cluster above one that appears or goes, but
//! over the bench's workloads the stable numbering was level with rank
//! and cost H2 (docs/placement-log.md). A longest-lived cluster made only of
//! never-died keys takes the highest id, not the next one up
//! (`never_died_on_top`, not in the paper): a raw namespace's fill is
//! placed before anything has died, alone in one cluster; numbered from
//! the bottom it took id 1, and the short-lived classes that appeared
//! below it later took id 1 too, so the device copied the fill, cold, at
//! every collection of the hot stream (docs/placement-log.md). By rank,
//! the longest-lived cluster then keeps the highest id while most of its
//! weight had it, and the others are ranked below it. Then,
//! with `hysteresis_log2` (off by default), a signature keeps its old
//! stream while that stream's new centroid is nearly as close as the
//! nearest one.
//!
//!
//! k-means itself is [`crate::kmeans`].

pub use crate::kmeans::{cluster_1d, cluster_1d_exact};
use crate::lifetime::LifetimeManager;
use crate::placement::StreamId;
pub use crate::stream_ids::Clustering;
use crate::stream_ids::{merge_close, merge_close_nearest, order_preserving_ids};
use std::collections::HashMap;

/// Share of its cluster's weight the stream-0 key must carry for that
/// cluster to be stream 0 ([`Mapper::set_stream0_key`]): the cluster is
/// then the journal's, not a data cluster the journal falls into.
pub const STREAM0_SHARE: f64 = 0.5;

/// Tunables of the mapper.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MapperConfig {
    /// Seed of k-means++ initialisation. Default 0x5eed.
    pub seed: u64,
    /// Shortest spacing (pages) of re-cluster checks, used while the run is
    /// young (see the module docs). Default 256 (1 MiB written).
    pub first_interval: u64,
    /// Longest spacing (pages) of re-cluster checks, reached once `now / 4`
    /// exceeds it. Default 16384 (64 MiB written).
    #[serde(alias = "min_interval")]
    pub check_interval: u64,
    /// Fraction of signatures that must have changed to re-cluster. Default 0.10.
    pub change_fraction: f64,
    /// How far (log2 units) a feature must move to count as changed. Default 1.0.
    pub change_threshold_log2: f64,
    /// Give never-died signatures a censored estimate (see module docs). Default true.
    pub censor: bool,
    /// Age (pages) after which a never-died signature gets a censored
    /// estimate. Default 16384.
    pub censor_min_age: u64,
    /// A signature at least `censor_min_age` old of whose written pages
    /// fewer than this share have died is estimated at least at its
    /// Little's-law lifetime ([`SigStats::little_log2`]: live pages ×
    /// age / written pages), not only by the deaths heard, which are
    /// then its shortest lives (see the module docs). 0 = off (the
    /// paper). Default 0.5.
    ///
    /// [`SigStats::little_log2`]: crate::lifetime::SigStats::little_log2
    pub censor_partial_share: f64,
    /// Row budget for weight replication. Default 1024.
    pub replicas: usize,
    /// k-means restarts. Default 4.
    pub n_runs: usize,
    /// Pages of the device's erase unit (block, or FDP reclaim unit): sets
    /// the shortest lifetime worth telling apart ([`resolution_floor`]).
    /// 0 = unknown, no floor. Default 0; the simulator sets its block size.
    pub erase_unit_pages: u64,
    /// Hysteresis (log2 units) of a re-clustering: a signature keeps the
    /// stream it had when its feature is at most this much farther from
    /// that stream's new centroid than from the nearest one, so a
    /// signature whose data spans lifetimes does not hop between streams
    /// at every re-clustering. 0 = none (the paper). Default 0: with
    /// `stable_ids` it only made keys lag behind their lifetime
    /// (docs/placement.md).
    pub hysteresis_log2: f64,
    /// Adjacent clusters whose centroids are closer than this (log2 units)
    /// share a stream: data whose lifetimes differ by less gains nothing
    /// from being apart, and each stream's blocks fill more slowly. 0 =
    /// every cluster its own stream (the paper). Default 1.
    pub min_gap_log2: f64,
    /// After `min_gap_log2` merged clusters, give every signature the
    /// nearest of the merged centroids (one nearest-centroid step), so the
    /// members of a cluster that lay between two others split between
    /// them by their own lifetimes instead of all joining the lower one
    /// (the merge runs left to right). false: the merged clusters as they
    /// are (before 2026-11-29). Default true.
    pub min_gap_reassign: bool,
    /// Number a re-clustering's clusters so that as much weight as
    /// possible keeps its stream, in centroid order
    /// ([`crate::stream_ids`]); false numbers them by rank (the paper).
    /// Default false since 2026-12-06: by rank was level with it over
    /// the bench's tuning and held-out sets and lower on H2
    /// (docs/placement-log.md, "Stream ids by rank again").
    pub stable_ids: bool,
    /// At a check that does not re-cluster, give a signature with a
    /// censored feature but no stream the stream of the nearest centroid
    /// (see the module docs); false leaves it in stream 0 until the next
    /// re-clustering (the paper). Default true.
    pub place_new_keys: bool,
    /// How far beyond its age (log2 units) a never-died signature's
    /// censored feature lies: 1 = twice its age, the median lifetime of
    /// what has lived its age under a scale-free lifetime (see the module
    /// docs); 0 = its age. On a raw namespace where fio's cold job (written
    /// once) ran beside a hot one whose pages die at about the cold job's
    /// age when first clustered, the age put the two in one stream and the
    /// device's WAF was 1.18 from an empty table; twice the age, 1.04
    /// (docs/placement-log.md). Default 1.
    pub never_died_beyond_age_log2: f64,
    /// A signature clustered on its censored feature whose data has begun
    /// to die counts as changed at the next check, however little its
    /// feature moved (see the module docs): otherwise the 10% rule waits
    /// until the feature moves `change_threshold_log2`, and data placed by
    /// the other's age keeps arriving in the stream the two share.
    /// false: only the move counts (the paper). Default true.
    pub recluster_on_first_deaths: bool,
    /// A new longest-lived cluster (none of its weight had a stream)
    /// none of whose keys has seen a death gets the highest stream id
    /// instead of the next one up (see the module docs): what a run
    /// writes before anything dies (a fill, a load) is placed apart from
    /// the short-lived clusters that appear below it later, instead of in
    /// the id they come to claim. With `stable_ids` the numbering keeps
    /// it there after; by rank, the longest-lived cluster keeps the
    /// highest id while most of its weight had it. false: numbered from
    /// the bottom (the paper). Default true.
    pub never_died_on_top: bool,
}

impl Default for MapperConfig {
    fn default() -> Self {
        MapperConfig {
            seed: 0x5eed,
            first_interval: 256,
            check_interval: 16384,
            change_fraction: 0.10,
            change_threshold_log2: 1.0,
            censor: true,
            censor_min_age: 16384,
            censor_partial_share: 0.5,
            replicas: 1024,
            n_runs: 4,
            erase_unit_pages: 0,
            hysteresis_log2: 0.0,
            min_gap_log2: 1.0,
            min_gap_reassign: true,
            stable_ids: false,
            place_new_keys: true,
            never_died_beyond_age_log2: 1.0,
            recluster_on_first_deaths: true,
            never_died_on_top: true,
        }
    }
}

/// The shortest lifetime (log2 pages) the device can tell apart, `None`
/// without an erase unit. Data that dies before the block it went to is
/// full leaves that block entirely dead: the device copies none of it,
/// whichever of two such lifetimes it had. The stream holding the
/// shortest-lived data fills a block in `erase_unit_pages / share` pages,
/// `share` being that stream's part of the writes, so the floor is the
/// smallest `F ≥ log2(erase_unit_pages)` with `F ≥ log2(erase_unit_pages /
/// share(F))`, `share(F)` the weight of the features at or below `F`: a
/// floor that what lies under it justifies. (A lone short signature with a
/// sliver of the writes would fill its own blocks slowly; it joins the
/// next signatures up rather than pulling the floor over them.) Splitting
/// such data over several streams only slows each one's blocks down: pages
/// written close in time, which die close in time when a file system
/// reuses freed space in order, end up in blocks spanning a longer stretch.
pub fn resolution_floor(feats: &[Feature], erase_unit_pages: u64) -> Option<f64> {
    if erase_unit_pages == 0 {
        return None;
    }
    let unit = erase_unit_pages as f64;
    let base = unit.log2();
    let total: f64 = feats.iter().map(|f| f.weight.max(0.0)).sum();
    let mut pts: Vec<(f64, f64)> = feats
        .iter()
        .map(|f| (f.log2_lifetime, f.weight.max(0.0)))
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut i = pts.partition_point(|p| p.0 <= base);
    let mut below: f64 = pts[..i].iter().map(|p| p.1).sum();
    let mut lo = base;
    loop {
        let want = if below > 0.0 {
            lo.max((unit * total / below).log2())
        } else {
            f64::INFINITY
        };
        match pts.get(i) {
            // The next signature lies under the floor the share asks for:
            // it joins the share.
            Some(&(x, w)) if want >= x => {
                below += w;
                lo = x;
                i += 1;
            }
            _ => return Some(if want.is_finite() { want } else { base }),
        }
    }
}

/// The stream (`centroids[s - 1]` is stream `s`'s) whose centroid is
/// nearest `x`, the lower one on a tie; `None` without a finite centroid
/// (unused stream ids have a NaN centroid: never nearest).
pub fn nearest_stream(centroids: &[f64], x: f64) -> Option<StreamId> {
    centroids
        .iter()
        .enumerate()
        .filter(|(_, c)| c.is_finite())
        .min_by(|a, b| (x - a.1).abs().total_cmp(&(x - b.1).abs()))
        .map(|(j, _)| j as StreamId + 1)
}

/// Pages from `now` to the next periodic check: `now / 4`, at least
/// `first` and at most `longest` (and at least 1), so a young run is looked
/// at often and a long one every `longest` pages.
pub(crate) fn spacing(now: u64, first: u64, longest: u64) -> u64 {
    (now / 4).max(first).min(longest).max(1)
}

/// One signature as the mapper saw it at a clustering.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Feature {
    /// The signature.
    pub sig: u64,
    /// log2(lifetime in pages): estimate, or censored lower bound.
    pub log2_lifetime: f64,
    /// Weight (pages written).
    pub weight: f64,
    /// Whether the value is a censored lower bound (no death seen yet).
    pub censored: bool,
}

/// What a key's lifetime feature rested on when a clustering placed it:
/// the rule behind its stream, for `compare --explain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Basis {
    /// The lifetimes of its pages that died (EWMA).
    Deaths,
    /// Raised by Little's law: most of what it wrote is still live
    /// ([`MapperConfig::censor_partial_share`]).
    Little,
    /// None of its pages died yet: estimated from its age, a lower bound
    /// ([`MapperConfig::censor`], [`MapperConfig::never_died_beyond_age_log2`]).
    NeverDied,
    /// Raised to the device's resolution ([`resolution_floor`]).
    Floor,
}

impl Basis {
    /// One word for tables (`pcstreamctl contexts`).
    pub fn name(self) -> &'static str {
        match self {
            Basis::Deaths => "deaths",
            Basis::Little => "little",
            Basis::NeverDied => "age",
            Basis::Floor => "floor",
        }
    }

    /// A few words for reports.
    pub fn label(self) -> &'static str {
        match self {
            Basis::Deaths => "its key's cluster, learnt from deaths",
            Basis::Little => "its key's cluster, raised by Little's law (mostly live)",
            Basis::NeverDied => "its key's cluster, never died (by its age)",
            Basis::Floor => "its key's cluster, at the erase-unit floor",
        }
    }
}

/// Signature → stream table, re-clustered by the 10% rule.
#[derive(Debug)]
pub struct Mapper {
    cfg: MapperConfig,
    clusters: usize,
    assign: HashMap<u64, StreamId>,
    clustered: HashMap<u64, f64>,
    centroids: Vec<f64>,
    next_check: u64,
    generation: u64,
    reclusters: u64,
    stream0_key: Option<u64>,
    /// Per key placed by a clustering of the lifetime manager's features
    /// ([`Mapper::maybe_recluster`], [`Mapper::set_streams`],
    /// [`Mapper::recluster_from`]), what its feature rested on then.
    basis: HashMap<u64, Basis>,
}

impl Mapper {
    /// A mapper for a device with `streams` stream ids (`0` = unknown, so
    /// `streams - 1` clusters).
    pub fn new(streams: u32, cfg: MapperConfig) -> Self {
        Mapper {
            cfg,
            clusters: streams.saturating_sub(1) as usize,
            assign: HashMap::new(),
            clustered: HashMap::new(),
            centroids: Vec::new(),
            next_check: 0,
            generation: 0,
            reclusters: 0,
            stream0_key: None,
            basis: HashMap::new(),
        }
    }

    /// Re-clusters at once into `streams − 1` clusters (a device whose
    /// stream ids the policy now shares with something else: the dual's
    /// GC streams). Keys mapped above the new top stream are re-placed
    /// by this clustering; with stable ids the others keep their streams
    /// where the order allows.
    pub fn set_streams(&mut self, streams: u32, lm: &LifetimeManager, now: u64) {
        let clusters = streams.saturating_sub(1) as usize;
        if clusters == self.clusters {
            return;
        }
        self.clusters = clusters;
        let (feats, basis) = self.features_and_basis(lm, now);
        if feats.is_empty() {
            // Nothing learnt yet: only forget placements above the top.
            self.assign.retain(|_, s| (*s as usize) <= clusters);
            self.centroids.truncate(clusters);
            self.generation += 1;
            return;
        }
        self.recluster_noting(&feats, basis);
    }

    /// Re-clusters at once from `lm`'s features at `now` (after a reload,
    /// or asked for), remembering what each rested on.
    pub fn recluster_from(&mut self, lm: &LifetimeManager, now: u64) {
        let (feats, basis) = self.features_and_basis(lm, now);
        self.recluster_noting(&feats, basis);
    }

    /// [`Mapper::recluster`], remembering what each feature rested on
    /// (`basis`, beside `feats`).
    fn recluster_noting(&mut self, feats: &[Feature], basis: Vec<Basis>) {
        self.recluster(feats);
        self.basis = feats.iter().map(|f| f.sig).zip(basis).collect();
    }

    /// What `key`'s feature rested on when a clustering (or the placing of
    /// new keys) gave it its stream; `None` for a key placed otherwise.
    pub fn basis(&self, key: u64) -> Option<Basis> {
        self.basis.get(&key).copied()
    }

    /// Clusters `key` with the signatures, in one more cluster than there
    /// are data streams, and maps `key`'s cluster to stream 0 (see the
    /// module docs). `key` itself is not in [`Mapper::table`].
    pub fn set_stream0_key(&mut self, key: u64) {
        self.stream0_key = Some(key);
    }

    /// Stream a clustering gave `sig`; `None` when it has none yet (stream
    /// 0 may be a clustering's answer, see [`Mapper::set_stream0_key`]).
    #[inline]
    pub fn assigned(&self, sig: u64) -> Option<StreamId> {
        self.assign.get(&sig).copied()
    }

    /// The configuration in force.
    pub fn config(&self) -> &MapperConfig {
        &self.cfg
    }

    /// Stream of a signature (0 when unknown).
    #[inline]
    pub fn stream(&self, sig: u64) -> StreamId {
        self.assign.get(&sig).copied().unwrap_or(0)
    }

    /// Version of the table: bumps whenever it changes (a re-clustering, or
    /// new signatures placed between re-clusterings).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Number of re-clusterings so far.
    pub fn reclusters(&self) -> u64 {
        self.reclusters
    }

    /// Centroids (log2 pages) of streams `1..` (entry `s - 1` is stream
    /// `s`'s), ascending; NaN for a stream no cluster uses (stream ids keep
    /// their clusters across re-clusterings, so some may be skipped).
    pub fn centroids(&self) -> &[f64] {
        &self.centroids
    }

    /// The signature → stream table, sorted by signature.
    pub fn table(&self) -> Vec<(u64, StreamId)> {
        let mut v: Vec<_> = self
            .assign
            .iter()
            .filter(|(k, _)| Some(**k) != self.stream0_key)
            .map(|(k, s)| (*k, *s))
            .collect();
        v.sort_unstable();
        v
    }

    /// Current features of all signatures that have one, sorted by
    /// signature, floored at the device's resolution ([`resolution_floor`]).
    pub fn features(&self, lm: &LifetimeManager, now: u64) -> Vec<Feature> {
        self.features_and_basis(lm, now).0
    }

    /// [`Mapper::features`], and beside each what it rests on.
    fn features_and_basis(&self, lm: &LifetimeManager, now: u64) -> (Vec<Feature>, Vec<Basis>) {
        let (mut feats, mut basis): (Vec<Feature>, Vec<Basis>) =
            self.raw_features(lm, now).into_iter().unzip();
        if let Some(floor) = resolution_floor(&feats, self.cfg.erase_unit_pages) {
            for (f, b) in feats.iter_mut().zip(&mut basis) {
                if floor > f.log2_lifetime {
                    f.log2_lifetime = floor;
                    *b = Basis::Floor;
                }
            }
        }
        (feats, basis)
    }

    fn raw_features(&self, lm: &LifetimeManager, now: u64) -> Vec<(Feature, Basis)> {
        lm.sigs_sorted()
            .into_iter()
            .filter_map(|(sig, s)| {
                let weight = s.written_pages as f64;
                let age = now.saturating_sub(s.first_write);
                let old = self.cfg.censor && age >= self.cfg.censor_min_age.max(1);
                if let Some(x) = s.estimate_log2() {
                    let little = (old && s.dead_share() < self.cfg.censor_partial_share)
                        .then(|| s.little_log2(now))
                        .flatten()
                        .filter(|&l| l > x);
                    let f = Feature {
                        sig,
                        log2_lifetime: little.unwrap_or(x),
                        weight,
                        censored: false,
                    };
                    let b = if little.is_some() {
                        Basis::Little
                    } else {
                        Basis::Deaths
                    };
                    return Some((f, b));
                }
                old.then(|| {
                    let f = Feature {
                        sig,
                        log2_lifetime: (age as f64).log2() + self.cfg.never_died_beyond_age_log2,
                        weight,
                        censored: true,
                    };
                    (f, Basis::NeverDied)
                })
            })
            .collect()
    }

    /// The logical time from which [`Mapper::maybe_recluster`] looks at
    /// the table again (before it, it does nothing).
    pub fn next_check(&self) -> u64 {
        self.next_check
    }

    /// Applies the re-cluster rule at logical time `now` (and, with
    /// `place_new_keys`, places new signatures); returns whether the table
    /// changed. Cheap when the check interval has not elapsed.
    #[inline]
    pub fn maybe_recluster(&mut self, lm: &LifetimeManager, now: u64) -> bool {
        if now < self.next_check {
            return false;
        }
        self.check(lm, now)
    }

    fn check(&mut self, lm: &LifetimeManager, now: u64) -> bool {
        self.next_check = now.saturating_add(spacing(
            now,
            self.cfg.first_interval,
            self.cfg.check_interval,
        ));
        let (feats, basis) = self.features_and_basis(lm, now);
        if feats.is_empty() {
            return false;
        }
        let changed = feats
            .iter()
            .filter(|f| match self.clustered.get(&f.sig) {
                None => true,
                Some(old) => {
                    (f.log2_lifetime - old).abs() >= self.cfg.change_threshold_log2
                        || (self.cfg.recluster_on_first_deaths
                            && !f.censored
                            && self.basis.get(&f.sig) == Some(&Basis::NeverDied))
                }
            })
            .count();
        if (changed as f64) < self.cfg.change_fraction * feats.len() as f64 || changed == 0 {
            return self.cfg.place_new_keys && self.place_new(&feats, &basis);
        }
        self.recluster_noting(&feats, basis);
        true
    }

    /// Gives each censored signature of `feats` that has no stream the
    /// stream of the nearest centroid, remembering what its feature rested
    /// on (`basis`, beside `feats`); returns whether any got one.
    fn place_new(&mut self, feats: &[Feature], basis: &[Basis]) -> bool {
        let c = &self.centroids;
        let mut added = false;
        for (f, &b) in feats.iter().zip(basis) {
            if !f.censored || self.assign.contains_key(&f.sig) {
                continue;
            }
            if let Some(s) = nearest_stream(c, f.log2_lifetime) {
                self.assign.insert(f.sig, s);
                self.basis.insert(f.sig, b);
                added = true;
            }
        }
        if added {
            self.generation += 1;
        }
        added
    }

    /// k-means of `feats` into the data streams' clusters: their centroids
    /// (unordered ids) and each feature's label, `None` for stream 0. With
    /// a stream-0 key, one more cluster is made; the key's cluster is
    /// stream 0 when the key carries at least [`STREAM0_SHARE`] of its
    /// weight. Otherwise the key fell inside a data cluster (RocksDB's
    /// metadata, 1% of the writes, lives as long as compaction output) and
    /// the data are clustered without it, the key alone in stream 0.
    fn cluster(&self, feats: &[Feature]) -> (Vec<f64>, Vec<Option<usize>>) {
        let run = |pts: &[(f64, f64)], k: usize| {
            let c = cluster_1d(pts, k, self.cfg.seed, self.cfg.replicas, self.cfg.n_runs);
            if self.cfg.min_gap_reassign {
                merge_close_nearest(c, pts, self.cfg.min_gap_log2)
            } else {
                merge_close(c, pts, self.cfg.min_gap_log2)
            }
        };
        let pts: Vec<(f64, f64)> = feats.iter().map(|f| (f.log2_lifetime, f.weight)).collect();
        let zero = self
            .stream0_key
            .and_then(|k| feats.iter().position(|f| f.sig == k));
        let Some(zi) = zero else {
            let c = run(&pts, self.clusters);
            return (c.centroids, c.labels.into_iter().map(Some).collect());
        };
        let c = run(&pts, self.clusters + 1);
        let z = c.labels[zi];
        let in_z: f64 = pts
            .iter()
            .zip(&c.labels)
            .filter(|&(_, &l)| l == z)
            .map(|(p, _)| p.1.max(0.0))
            .sum();
        if pts[zi].1.max(0.0) >= STREAM0_SHARE * in_z {
            let centroids = c
                .centroids
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != z)
                .map(|(_, &x)| x)
                .collect();
            let labels = c
                .labels
                .iter()
                .map(|&l| (l != z).then(|| if l > z { l - 1 } else { l }))
                .collect();
            return (centroids, labels);
        }
        let mut rest = pts;
        rest.remove(zi);
        let c = run(&rest, self.clusters);
        let mut labels: Vec<Option<usize>> = c.labels.into_iter().map(Some).collect();
        labels.insert(zi, None);
        (c.centroids, labels)
    }

    /// Recomputes the table from `feats` unconditionally.
    pub fn recluster(&mut self, feats: &[Feature]) {
        let (centroids, labels) = self.cluster(feats);
        let old = std::mem::take(&mut self.assign);
        // Stream ids in centroid order, keeping as much weight as possible
        // in the stream it had (crate::stream_ids).
        let mut kept = vec![vec![0.0; self.clusters]; centroids.len()];
        for (f, l) in feats.iter().zip(&labels) {
            if let (Some(l), Some(&s)) = (l, old.get(&f.sig)) {
                if s >= 1 && (s as usize) <= self.clusters {
                    kept[*l][s as usize - 1] += f.weight.max(0.0);
                }
            }
        }
        // `never_died_on_top`: a new top cluster (none of its weight had a
        // stream) of never-died keys only takes the highest id; by rank, a
        // top cluster most of whose weight had that id keeps it (stable
        // ids keep it there themselves). Kept only while never-died, by
        // rank, it cost mixed-sqlite-gcc 0.016 with internal streams
        // (docs/placement-log.md, "Stream ids by rank again").
        let (top_new, top_stays) = kept.last().map_or((false, false), |row| {
            let had: f64 = row.iter().sum();
            (had == 0.0, 2.0 * row[row.len() - 1] > had)
        });
        let fill_on_top = self.cfg.never_died_on_top
            && ((top_new && top_is_never_died(feats, &labels, centroids.len()))
                || (!self.cfg.stable_ids && top_stays));
        let ids = if self.cfg.stable_ids {
            if fill_on_top {
                // The least weight that counts, for the highest id: it
                // breaks the numbering's ties only (with no history it
                // starts at the bottom).
                if let Some(top) = kept.last_mut().and_then(|row| row.last_mut()) {
                    *top = f64::MIN_POSITIVE;
                }
            }
            order_preserving_ids(&kept, self.clusters)
        } else {
            let mut ids: Vec<u32> = (1..=centroids.len() as u32).collect();
            if let Some(top) = ids.last_mut().filter(|_| fill_on_top) {
                *top = self.clusters as u32;
            }
            ids
        };
        let top = ids.last().map_or(0, |&s| s as usize);
        let mut by_stream = vec![f64::NAN; top];
        for (&s, &x) in ids.iter().zip(&centroids) {
            by_stream[s as usize - 1] = x;
        }
        self.clustered.clear();
        let h = self.cfg.hysteresis_log2;
        for (f, &l) in feats.iter().zip(&labels) {
            self.clustered.insert(f.sig, f.log2_lifetime);
            let Some(l) = l else {
                self.assign.insert(f.sig, 0);
                continue;
            };
            if centroids.is_empty() {
                continue;
            }
            let mut stream = ids[l];
            // Hysteresis: stay in the old stream while its centroid is
            // nearly as close as the nearest one.
            if let Some(&prev) = old.get(&f.sig) {
                let prev_c = by_stream.get((prev as usize).wrapping_sub(1)).copied();
                if let Some(pc) = prev_c.filter(|v| h > 0.0 && prev >= 1 && v.is_finite()) {
                    let x = f.log2_lifetime;
                    let d_new = (x - centroids[l]).abs();
                    if (x - pc).abs() <= d_new + h {
                        stream = prev;
                    }
                }
            }
            self.assign.insert(f.sig, stream);
        }
        self.centroids = by_stream;
        self.generation += 1;
        self.reclusters += 1;
    }
}

/// Whether the last (longest-lived) of `clusters` clusters has members
/// and all of them are never-died keys (censored features).
fn top_is_never_died(feats: &[Feature], labels: &[Option<usize>], clusters: usize) -> bool {
    let Some(last) = clusters.checked_sub(1) else {
        return false;
    };
    let mut censored = feats
        .iter()
        .zip(labels)
        .filter(|(_, l)| **l == Some(last))
        .map(|(f, _)| f.censored);
    // Not empty, and every member censored.
    censored.next() == Some(true) && censored.all(|c| c)
}

#[cfg(test)]
mod tests;
