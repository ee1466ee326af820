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
//! at least `censor_min_age` pages ago, gets `log2(age of its first write)`, a
//! lower bound of its lifetime (a *censored* estimate): data that outlives
//! everything is then placed with the longest-lived data instead of in the
//! unknown stream. The paper has no such rule; `censor = false` turns it off.
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
//! Stream ids: the clusters of a re-clustering keep centroid order, but are
//! numbered so that as much weight as possible stays in the stream it had
//! ([`crate::stream_ids`], `stable_ids`); numbering by rank (the paper)
//! renumbers every cluster above one that appears or goes. Unused ids are
//! skipped (their centroid is NaN). Then, with `hysteresis_log2` (off by
//! default), a signature keeps its old stream while that stream's new
//! centroid is nearly as close as the nearest one.
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
    /// Default true.
    pub stable_ids: bool,
    /// At a check that does not re-cluster, give a signature with a
    /// censored feature but no stream the stream of the nearest centroid
    /// (see the module docs); false leaves it in stream 0 until the next
    /// re-clustering (the paper). Default true.
    pub place_new_keys: bool,
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
            replicas: 1024,
            n_runs: 4,
            erase_unit_pages: 0,
            hysteresis_log2: 0.0,
            min_gap_log2: 1.0,
            min_gap_reassign: true,
            stable_ids: true,
            place_new_keys: true,
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
        let feats = self.features(lm, now);
        if feats.is_empty() {
            // Nothing learnt yet: only forget placements above the top.
            self.assign.retain(|_, s| (*s as usize) <= clusters);
            self.centroids.truncate(clusters);
            self.generation += 1;
            return;
        }
        self.recluster(&feats);
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
        let mut feats = self.raw_features(lm, now);
        if let Some(floor) = resolution_floor(&feats, self.cfg.erase_unit_pages) {
            for f in &mut feats {
                f.log2_lifetime = f.log2_lifetime.max(floor);
            }
        }
        feats
    }

    fn raw_features(&self, lm: &LifetimeManager, now: u64) -> Vec<Feature> {
        lm.sigs_sorted()
            .into_iter()
            .filter_map(|(sig, s)| {
                let weight = s.written_pages as f64;
                if let Some(x) = s.estimate_log2() {
                    return Some(Feature {
                        sig,
                        log2_lifetime: x,
                        weight,
                        censored: false,
                    });
                }
                let age = now.saturating_sub(s.first_write);
                (self.cfg.censor && age >= self.cfg.censor_min_age.max(1)).then(|| Feature {
                    sig,
                    log2_lifetime: (age as f64).log2(),
                    weight,
                    censored: true,
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
        let feats = self.features(lm, now);
        if feats.is_empty() {
            return false;
        }
        let changed = feats
            .iter()
            .filter(|f| match self.clustered.get(&f.sig) {
                None => true,
                Some(old) => (f.log2_lifetime - old).abs() >= self.cfg.change_threshold_log2,
            })
            .count();
        if (changed as f64) < self.cfg.change_fraction * feats.len() as f64 || changed == 0 {
            return self.cfg.place_new_keys && self.place_new(&feats);
        }
        self.recluster(&feats);
        true
    }

    /// Gives each censored signature of `feats` that has no stream the
    /// stream of the nearest centroid; returns whether any got one.
    fn place_new(&mut self, feats: &[Feature]) -> bool {
        let c = &self.centroids;
        let mut added = false;
        for f in feats {
            if !f.censored || self.assign.contains_key(&f.sig) {
                continue;
            }
            if let Some(s) = nearest_stream(c, f.log2_lifetime) {
                self.assign.insert(f.sig, s);
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
        let ids = if self.cfg.stable_ids {
            order_preserving_ids(&kept, self.clusters)
        } else {
            (1..=centroids.len() as u32).collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifetime::{LifetimeConfig, LBA_SPACE};

    fn lm() -> LifetimeManager {
        LifetimeManager::new(LifetimeConfig {
            chunk_pages: 1,
            max_entries: 1 << 20,
            ewma_alpha_per_mib: 1.0,
        })
    }

    #[test]
    fn unknown_signatures_map_to_stream_zero_and_order_follows_lifetime() {
        let mut m = lm();
        let cfg = MapperConfig {
            check_interval: 10,
            censor: false,
            ..Default::default()
        };
        let mut map = Mapper::new(3, cfg);
        // sig 1 lives 2 pages, sig 2 lives 1000 pages, sig 3 never dies.
        m.write(LBA_SPACE, 0, 1, 2, 0);
        for t in 0..1000 {
            m.write(LBA_SPACE, 10 + t % 2, 1, 1, t + 1);
        }
        m.write(LBA_SPACE, 0, 1, 2, 1001);
        m.write(LBA_SPACE, 50, 1, 3, 1002);
        assert!(map.maybe_recluster(&m, 1003));
        assert_eq!(map.stream(1), 1);
        assert_eq!(map.stream(2), 2);
        assert_eq!(map.stream(3), 0);
        assert_eq!(map.stream(99), 0);
        assert_eq!(map.generation(), 1);
        // Nothing changed: no re-cluster even after the interval.
        assert!(!map.maybe_recluster(&m, 5000));
        assert_eq!(map.generation(), 1);
    }

    /// The table a user imported (ten signatures, one with an EWMA of
    /// −1e300) re-clustered as `import_sigs` does: it panicked in linfa
    /// before k-means clamped its input; now the absurd signature gets the
    /// shortest-lived stream and the others keep their order.
    #[test]
    fn an_absurd_loaded_estimate_does_not_panic_the_reclustering() {
        let mut m = lm();
        let stats = |x: f64| crate::lifetime::SigStats {
            written_pages: 10,
            first_write: 1,
            last_write: 10,
            deaths: 2,
            dead_pages: 2,
            ewma_log2: x,
            ewma_weight: 0.5,
            mean_log2: 1.0,
            m2_log2: 1.0,
            hist: vec![0; 48],
        };
        m.load_sigs((1..=10).map(|s| (s, stats(if s == 1 { -1e300 } else { s as f64 }))));
        for erase_unit_pages in [0, 256] {
            let mut map = Mapper::new(
                5,
                MapperConfig {
                    erase_unit_pages,
                    ..Default::default()
                },
            );
            let f = map.features(&m, 1000);
            map.recluster(&f);
            assert_eq!(map.stream(1), 1);
            assert!((2..=10).all(|s| map.stream(s) >= 1), "{:?}", map.table());
        }
    }

    #[test]
    fn ten_percent_rule_and_check_interval() {
        let mut m = lm();
        let mut map = Mapper::new(
            3,
            MapperConfig {
                check_interval: 100,
                censor: false,
                ..Default::default()
            },
        );
        // 20 signatures, each with lifetime 4.
        let mut t = 0;
        for s in 1..=20u64 {
            m.write(LBA_SPACE, s, 1, s, t);
            m.write(LBA_SPACE, s, 1, s, t + 4);
            t += 5;
        }
        assert!(map.maybe_recluster(&m, t));
        // One signature (5%) changes a lot: not enough.
        m.write(LBA_SPACE, 1, 1, 1, t + 4000);
        assert!(!map.maybe_recluster(&m, t + 4001), "interval not elapsed");
        assert!(!map.maybe_recluster(&m, t + 5000), "only 5% changed");
        // A second one (10%): re-cluster at the next check.
        m.write(LBA_SPACE, 2, 1, 2, t + 9000);
        assert!(!map.maybe_recluster(&m, t + 5050), "interval not elapsed");
        assert!(map.maybe_recluster(&m, t + 9001));
        assert_eq!(map.generation(), 2);
        assert!(map.stream(1) > map.stream(3));
    }

    #[test]
    fn young_runs_are_checked_often_and_long_runs_at_the_check_interval() {
        let mut m = lm();
        let mut map = Mapper::new(
            3,
            MapperConfig {
                censor: false,
                ..Default::default()
            },
        );
        assert_eq!(map.config().first_interval, 256);
        assert_eq!(map.config().check_interval, 16384);
        // Two signatures whose data dies within the first MiB written: a
        // default mapper places them long before 16384 pages.
        let mut t = 0;
        let mut mapped_at = None;
        while t < 4096 && mapped_at.is_none() {
            m.write(LBA_SPACE, t % 2, 1, 1, t); // dies after 2 pages
            m.write(LBA_SPACE, 100 + (t / 64) % 2, 1, 2, t + 1); // ≈ 128 pages
            t += 2;
            if map.maybe_recluster(&m, t) {
                mapped_at = Some(t);
            }
        }
        let at = mapped_at.expect("mapped within 4096 pages");
        assert!(at <= 512, "first mapping at {at}");
        assert_eq!(map.stream(1), 1);
        assert_eq!(map.stream(2), 2);
        // Past 4 × 16384 pages checks are 16384 apart: nothing is looked at
        // in between, however much changes.
        assert!(!map.maybe_recluster(&m, 100_000), "nothing changed");
        m.write(LBA_SPACE, 500, 1, 3, 100_001);
        m.write(LBA_SPACE, 500, 1, 3, 100_003);
        assert!(!map.maybe_recluster(&m, 100_004), "checked too early");
        assert!(!map.maybe_recluster(&m, 116_383), "checked too early");
        assert!(
            map.maybe_recluster(&m, 116_384),
            "new signature after the interval"
        );
        assert_ne!(map.stream(3), 0);
    }

    #[test]
    fn censored_estimate_places_never_dying_data_last() {
        let mut m = lm();
        let mut map = Mapper::new(
            3,
            MapperConfig {
                check_interval: 10,
                censor_min_age: 100,
                ..Default::default()
            },
        );
        m.write(LBA_SPACE, 1000, 1, 9, 0); // never dies
        for t in 1..500 {
            m.write(LBA_SPACE, t % 3, 1, 1, t);
        }
        assert!(map.maybe_recluster(&m, 500));
        assert_eq!(map.stream(1), 1);
        assert_eq!(map.stream(9), 2);
        let f = map.features(&m, 500);
        assert!(f.iter().any(|f| f.sig == 9 && f.censored));
    }

    fn feat(sig: u64, x: f64, w: f64) -> Feature {
        Feature {
            sig,
            log2_lifetime: x,
            weight: w,
            censored: false,
        }
    }

    #[test]
    fn the_floor_is_the_fill_time_of_the_stream_holding_the_short_lived_data() {
        // 90% of the writes die within 2–32 pages, 10% at 2^12. With
        // 64-page blocks the short-lived stream fills one in 64 / 0.9 pages.
        let feats = [
            feat(1, 1.0, 30.0),
            feat(2, 3.0, 30.0),
            feat(3, 5.0, 30.0),
            feat(4, 12.0, 10.0),
        ];
        assert_eq!(resolution_floor(&feats, 0), None, "unknown device");
        let f = resolution_floor(&feats, 64).unwrap();
        assert!((f - (64.0f64 / 0.9).log2()).abs() < 1e-9, "{f}");
        // A lone short signature with 1% of the writes fills its blocks
        // slowly: everything up to 64 / 0.01 pages looks alike.
        // A lone short signature with 1% of the writes would fill blocks of
        // its own only every 6400 pages; it joins the next one up (2^9, half
        // the writes, whose stream fills a block in 128 pages) instead of
        // pulling the floor over it.
        let feats = [feat(1, 1.0, 1.0), feat(2, 9.0, 49.0), feat(3, 14.0, 50.0)];
        assert_eq!(resolution_floor(&feats, 64), Some(9.0));
        // Nothing below a block: the floor moves nothing.
        let feats = [feat(1, 10.0, 1.0), feat(2, 14.0, 1.0)];
        assert_eq!(resolution_floor(&feats, 64), Some(10.0));
        assert_eq!(resolution_floor(&[], 64), Some(6.0));
    }

    #[test]
    fn lifetimes_shorter_than_a_block_fill_share_one_stream() {
        // Three compiler-like signatures dying after 2, 8 and 32 pages and
        // one long-lived one, on 4 data streams: without a device the three
        // short ones get streams of their own; with 64-page blocks the
        // device cannot tell them apart, and they share one.
        let run = |erase_unit_pages| {
            let mut m = lm();
            let mut map = Mapper::new(
                5,
                MapperConfig {
                    first_interval: 1,
                    erase_unit_pages,
                    ..Default::default()
                },
            );
            let mut t = 0;
            for round in 0..40u64 {
                for (sig, life) in [(1u64, 2u64), (2, 8), (3, 32)] {
                    let lba = 10_000 * sig + round;
                    m.write(LBA_SPACE, lba, 1, sig, t);
                    m.invalidate(LBA_SPACE, lba, 1, t + life);
                    t += 1;
                }
                m.write(LBA_SPACE, 90_000, 1, 4, t);
                t += 1;
            }
            m.invalidate(LBA_SPACE, 90_000, 1, t + (1 << 14));
            t += 1 << 14;
            map.recluster(&map.features(&m, t));
            [1, 2, 3, 4].map(|s| map.stream(s))
        };
        let free = run(0);
        assert!(free[0] != free[1] && free[1] != free[2], "{free:?}");
        let floored = run(64);
        assert!(
            floored[0] == floored[1] && floored[1] == floored[2],
            "{floored:?}"
        );
        assert!(floored[3] > floored[0], "{floored:?}");
    }

    /// A signature whose feature sits between two clusters keeps its
    /// stream across re-clusterings while it moves less than the
    /// hysteresis; without hysteresis (the default) it follows the nearest
    /// centroid.
    /// 20 signatures of two lifetimes are clustered. Then two new ones
    /// (under 10% changed: no re-clustering): at the next check the one
    /// none of whose data has died (a censored estimate: data with no
    /// death in sight) gets the stream of the nearest centroid, and the
    /// table's generation moves for the daemon to publish it; the one
    /// whose first death is in waits for the next re-clustering (an
    /// early estimate is biased towards its shortest lives). The paper's
    /// rule leaves both in stream 0.
    #[test]
    fn a_new_never_dying_signature_is_placed_between_reclusterings() {
        for place_new_keys in [true, false] {
            let mut m = lm();
            let mut map = Mapper::new(
                3,
                MapperConfig {
                    check_interval: 100,
                    censor_min_age: 100,
                    place_new_keys,
                    ..Default::default()
                },
            );
            // Sigs 1..=10 live 4 pages, 11..=20 live 1000.
            let mut t = 0;
            for s in 1..=20u64 {
                m.write(LBA_SPACE, s, 1, s, t);
                let life = if s <= 10 { 4 } else { 1000 };
                m.write(LBA_SPACE, s, 1, s, t + life);
                t += 1001;
            }
            assert!(map.maybe_recluster(&m, t));
            let (short, long) = (map.stream(1), map.stream(11));
            assert!(short >= 1 && long > short);
            let g = map.generation();
            // Sig 21 never dies; sig 22's first page lived 1500 pages.
            m.write(LBA_SPACE, 21, 1, 21, t);
            m.write(LBA_SPACE, 22, 1, 22, t);
            m.write(LBA_SPACE, 22, 1, 22, t + 1500);
            let changed = map.maybe_recluster(&m, t + 2000);
            assert_eq!(map.reclusters(), 1, "10% changed: no re-clustering");
            assert_eq!(map.stream(22), 0);
            if place_new_keys {
                assert!(changed);
                assert_eq!(map.stream(21), long);
                assert_eq!(map.generation(), g + 1);
            } else {
                assert!(!changed);
                assert_eq!(map.stream(21), 0);
                assert_eq!(map.generation(), g);
            }
        }
    }

    /// The stream-0 key (the journal's writes) with a data key of its
    /// lifetime: when the key carries most of its cluster, the cluster is
    /// stream 0 and the other data get both data streams.
    #[test]
    fn the_journals_cluster_is_stream_0_when_the_journal_carries_it() {
        let mut map = Mapper::new(3, MapperConfig::default());
        map.set_stream0_key(99);
        map.recluster(&[
            feat(1, 8.0, 10.0),
            feat(2, 14.0, 100.0),
            feat(3, 22.0, 100.0),
            feat(99, 8.2, 50.0),
        ]);
        assert_eq!(map.assigned(1), Some(0), "the journal's lifetime");
        assert_eq!(map.assigned(99), Some(0));
        let (a, b) = (map.stream(2), map.stream(3));
        assert!(a >= 1 && b > a, "{a} {b}");
        assert_eq!(map.centroids().iter().filter(|c| c.is_finite()).count(), 2);
        assert!(
            map.table().iter().all(|&(k, _)| k != 99),
            "the journal's key is not a signature"
        );
        assert_eq!(map.table().len(), 3);
    }

    /// A light stream-0 key inside a heavy data cluster (RocksDB's
    /// metadata beside its compaction output): the data are clustered as
    /// if it were not there, the key alone in stream 0.
    #[test]
    fn a_journal_inside_a_data_cluster_leaves_it_a_data_stream() {
        let data = [feat(1, 8.0, 100.0), feat(2, 21.0, 100.0)];
        let mut plain = Mapper::new(3, MapperConfig::default());
        plain.recluster(&data);
        let mut map = Mapper::new(3, MapperConfig::default());
        map.set_stream0_key(99);
        let mut feats = data.to_vec();
        feats.push(feat(99, 21.0, 1.0));
        map.recluster(&feats);
        assert_eq!(map.assigned(99), Some(0));
        assert_eq!(map.table(), plain.table());
        assert_eq!(map.centroids(), plain.centroids());
        assert_eq!(map.stream(2), 2);
    }

    #[test]
    fn hysteresis_keeps_a_borderline_signature_in_its_stream() {
        let feats = |x: f64| {
            vec![
                Feature {
                    sig: 1,
                    log2_lifetime: 4.0,
                    weight: 100.0,
                    censored: false,
                },
                Feature {
                    sig: 2,
                    log2_lifetime: 20.0,
                    weight: 100.0,
                    censored: false,
                },
                Feature {
                    sig: 3,
                    log2_lifetime: x,
                    weight: 1.0,
                    censored: false,
                },
            ]
        };
        for (h, want) in [
            (Some(1.0), [1, 1, 1]),
            (Some(0.0), [1, 2, 1]),
            (None, [1, 2, 1]),
        ] {
            // None: the default, which follows the nearest centroid.
            let mut cfg = MapperConfig::default();
            if let Some(h) = h {
                cfg.hysteresis_log2 = h;
            }
            let mut m = Mapper::new(3, cfg);
            let mut got = Vec::new();
            for x in [11.5, 12.2, 11.0] {
                m.recluster(&feats(x));
                got.push(m.stream(3));
            }
            assert_eq!(got, want, "hysteresis {h:?}");
        }
    }

    /// A light short-lived signature stops and starts writing: by rank,
    /// the heavy clusters above it are renumbered each time (their next
    /// pages share erase blocks with another cluster's); with stable ids
    /// they keep their streams, and order still follows lifetime.
    #[test]
    fn a_light_cluster_coming_and_going_does_not_renumber_the_heavy_ones() {
        let run = |stable_ids| {
            let mut m = Mapper::new(
                5,
                MapperConfig {
                    stable_ids,
                    ..Default::default()
                },
            );
            let heavy = [feat(1, 10.0, 100.0), feat(2, 20.0, 100.0)];
            let light = feat(3, 3.0, 1.0);
            let mut got = Vec::new();
            for with_light in [true, false, true] {
                let mut f = heavy.to_vec();
                if with_light {
                    f.push(light);
                }
                m.recluster(&f);
                got.push((m.stream(1), m.stream(2)));
                if with_light {
                    assert!(m.stream(3) < m.stream(1), "order follows lifetime");
                }
            }
            got
        };
        assert_eq!(run(true), vec![(2, 3); 3]);
        assert_eq!(run(false), vec![(2, 3), (1, 2), (2, 3)]);
    }
}
