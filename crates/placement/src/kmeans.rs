//! 1-D weighted k-means of `(log2 lifetime, weight)` points: what the
//! mapper ([`crate::mapper`]) clusters signatures with, and the exact
//! dynamic program the oracle fits its streams with.
//!
//! The mapper's k-means: linfa-clustering's `KMeans` (k-means++ init seeded with
//! `seed`, `n_runs` restarts, best inertia kept). linfa 0.8 ignores dataset
//! sample weights (its centroid update is an unweighted mean), so weights are
//! honoured by replication: each point (a signature) is repeated in proportion to its
//! volume within a budget of `replicas` rows (at least once). The final
//! assignment and the reported centroids are then recomputed exactly, with the
//! true weights, by nearest centroid. With no more distinct values than
//! clusters no k-means is needed: each distinct value is its own cluster.
//!
//! Degenerate input never panics: values are clamped to ±[`MAX_VALUE`] and
//! weights to [`MAX_WEIGHT`] before linfa sees them (a value of −1e300 made
//! its k-means++ draw from an infinite range: "Uniform::new: range
//! overflow"), and should linfa panic all the same the clustering falls
//! back to equal-weight quantiles.

use crate::stream_ids::Clustering;
use linfa::prelude::*;
use linfa_clustering::{KMeans, KMeansInit};
use ndarray::Array2;
use rand_xoshiro_linfa::rand_core::SeedableRng;
use rand_xoshiro_linfa::Xoshiro256Plus;

/// Largest magnitude of a value clustered: its squared distances, summed
/// over every row linfa gets, stay far from overflowing (log2 lifetimes
/// lie within 0..64).
pub const MAX_VALUE: f64 = 1e12;

/// Largest weight of a point: weighted sums of clamped values stay finite.
pub const MAX_WEIGHT: f64 = 1e30;

/// Weighted k-means of 1-D `(value, weight)` points into at most `k`
/// clusters, deterministic for a given `seed`. Non-finite values and
/// non-positive weights are treated as weight-less points that still get a
/// label; finite values beyond ±[`MAX_VALUE`] and weights beyond
/// [`MAX_WEIGHT`] are clamped. See the module docs for how linfa is used.
pub fn cluster_1d(
    points: &[(f64, f64)],
    k: usize,
    seed: u64,
    replicas: usize,
    n_runs: usize,
) -> Clustering {
    let clean: Vec<(f64, f64)> = points
        .iter()
        .map(|&(x, w)| {
            let x = if x.is_finite() {
                x.clamp(-MAX_VALUE, MAX_VALUE)
            } else {
                0.0
            };
            let w = if w.is_finite() && w > 0.0 {
                w.min(MAX_WEIGHT)
            } else {
                0.0
            };
            (x, w)
        })
        .collect();
    if clean.is_empty() || k == 0 {
        return Clustering {
            centroids: Vec::new(),
            labels: vec![0; clean.len()],
        };
    }
    let mut distinct: Vec<f64> = clean.iter().map(|p| p.0).collect();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    let seeds = if distinct.len() <= k {
        distinct
    } else {
        linfa_centroids(&clean, k, seed, replicas, n_runs)
            .unwrap_or_else(|| quantile_centroids(&clean, k))
    };
    finish(&clean, &seeds)
}

/// Exact weighted 1-D k-means by dynamic programming over the sorted points
/// (O(k·n²); for small `n`, e.g. a histogram's bins). Optimal, so
/// deterministic without a seed; used by the oracle, which must not lose to a
/// k-means local optimum. Same contract as [`cluster_1d`].
pub fn cluster_1d_exact(points: &[(f64, f64)], k: usize) -> Clustering {
    let mut v: Vec<(f64, f64)> = points
        .iter()
        .map(|&(x, w)| (if x.is_finite() { x } else { 0.0 }, w.max(0.0)))
        .filter(|p| p.1 > 0.0 && p.1.is_finite())
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = v.len();
    let k = k.min(n);
    if k == 0 {
        return Clustering {
            centroids: Vec::new(),
            labels: vec![0; points.len()],
        };
    }
    // Prefix sums of w, w·x, w·x².
    let mut pw = vec![0.0; n + 1];
    let mut px = vec![0.0; n + 1];
    let mut pxx = vec![0.0; n + 1];
    for (i, &(x, w)) in v.iter().enumerate() {
        pw[i + 1] = pw[i] + w;
        px[i + 1] = px[i] + w * x;
        pxx[i + 1] = pxx[i] + w * x * x;
    }
    let cost = |i: usize, j: usize| {
        let w = pw[j] - pw[i];
        let sx = px[j] - px[i];
        (pxx[j] - pxx[i] - sx * sx / w).max(0.0)
    };
    // d[c][j]: best cost of the first j points in c+1 clusters; arg = start of the last.
    let mut d = vec![vec![f64::INFINITY; n + 1]; k];
    let mut arg = vec![vec![0usize; n + 1]; k];
    for (j, slot) in d[0].iter_mut().enumerate().skip(1) {
        *slot = cost(0, j);
    }
    for c in 1..k {
        for j in c + 1..=n {
            for i in c..j {
                let t = d[c - 1][i] + cost(i, j);
                if t < d[c][j] {
                    d[c][j] = t;
                    arg[c][j] = i;
                }
            }
        }
    }
    let mut centroids = Vec::with_capacity(k);
    let mut j = n;
    for c in (0..k).rev() {
        let i = if c == 0 { 0 } else { arg[c][j] };
        centroids.push((px[j] - px[i]) / (pw[j] - pw[i]));
        j = i;
    }
    finish(points, &centroids)
}

/// Runs linfa's k-means on the weight-replicated points; `None` when it
/// fails, or panics (caught: the caller falls back to quantiles; the points
/// are clamped so that it should not).
fn linfa_centroids(
    pts: &[(f64, f64)],
    k: usize,
    seed: u64,
    replicas: usize,
    n_runs: usize,
) -> Option<Vec<f64>> {
    std::panic::catch_unwind(|| linfa_fit(pts, k, seed, replicas, n_runs))
        .ok()
        .flatten()
}

fn linfa_fit(
    pts: &[(f64, f64)],
    k: usize,
    seed: u64,
    replicas: usize,
    n_runs: usize,
) -> Option<Vec<f64>> {
    let total: f64 = pts.iter().map(|p| p.1).sum();
    let mut rows = Vec::with_capacity(pts.len() + replicas);
    for &(x, w) in pts {
        let r = if total > 0.0 {
            ((w / total) * replicas as f64).round().max(1.0) as usize
        } else {
            1
        };
        rows.extend(std::iter::repeat_n(x, r));
    }
    let n = rows.len();
    let data = Array2::from_shape_vec((n, 1), rows).ok()?;
    let ds = DatasetBase::from(data);
    let model = KMeans::params_with_rng(k, Xoshiro256Plus::seed_from_u64(seed))
        .n_runs(n_runs.max(1))
        .max_n_iterations(200)
        .tolerance(1e-6)
        .init_method(KMeansInit::KMeansPlusPlus)
        .fit(&ds)
        .ok()?;
    let c: Vec<f64> = model.centroids().iter().copied().collect();
    c.iter().all(|v| v.is_finite()).then_some(c)
}

/// Deterministic fallback: centroids at equal-weight quantiles.
fn quantile_centroids(pts: &[(f64, f64)], k: usize) -> Vec<f64> {
    let mut v: Vec<(f64, f64)> = pts.iter().map(|&(x, w)| (x, w.max(1e-12))).collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = v.iter().map(|p| p.1).sum();
    let mut out = Vec::with_capacity(k);
    let mut acc = 0.0;
    let mut i = 0;
    for q in 0..k {
        let target = total * (q as f64 + 0.5) / k as f64;
        while i + 1 < v.len() && acc + v[i].1 < target {
            acc += v[i].1;
            i += 1;
        }
        out.push(v[i].0);
    }
    out
}

/// Every point to its nearest of `centroids`, then the clusters' weighted
/// means (one nearest-centroid step; empty clusters dropped).
pub(crate) fn reassign(pts: &[(f64, f64)], centroids: &[f64]) -> Clustering {
    finish(pts, centroids)
}

/// Assigns points to the nearest seed, recomputes weighted centroids, drops
/// empty clusters and orders them ascending.
fn finish(pts: &[(f64, f64)], seeds: &[f64]) -> Clustering {
    let mut seeds = seeds.to_vec();
    seeds.sort_by(f64::total_cmp);
    seeds.dedup();
    let nearest = |x: f64| -> usize {
        let mut best = 0;
        for (j, c) in seeds.iter().enumerate() {
            if (x - c).abs() < (x - seeds[best]).abs() {
                best = j;
            }
        }
        best
    };
    let raw: Vec<usize> = pts.iter().map(|p| nearest(p.0)).collect();
    let mut sum = vec![0.0; seeds.len()];
    let mut wsum = vec![0.0; seeds.len()];
    let mut count = vec![0usize; seeds.len()];
    for (&(x, w), &l) in pts.iter().zip(&raw) {
        sum[l] += x * w;
        wsum[l] += w;
        count[l] += 1;
    }
    // Seeds are ascending and assignment is by nearest seed, so non-empty
    // clusters stay in ascending order of their members.
    let mut remap = vec![usize::MAX; seeds.len()];
    let mut centroids = Vec::new();
    for j in 0..seeds.len() {
        if count[j] > 0 {
            remap[j] = centroids.len();
            centroids.push(if wsum[j] > 0.0 {
                sum[j] / wsum[j]
            } else {
                seeds[j]
            });
        }
    }
    Clustering {
        centroids,
        labels: raw.into_iter().map(|l| remap[l]).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separates_three_groups_in_order() {
        let pts = [
            (20.0, 5.0),
            (3.0, 1.0),
            (3.2, 1.0),
            (10.0, 2.0),
            (10.5, 2.0),
            (19.0, 5.0),
            (2.9, 1.0),
        ];
        let c = cluster_1d(&pts, 3, 1, 256, 2);
        assert_eq!(c.centroids.len(), 3);
        assert_eq!(c.labels, vec![2, 0, 0, 1, 1, 2, 0]);
        assert!(c.centroids.windows(2).all(|w| w[0] < w[1]));
        assert!((c.centroids[2] - 19.5).abs() < 1e-9);
    }

    #[test]
    fn weights_pull_the_split() {
        // Four close points and a far one, two clusters. Equal weights: the
        // far point is a cluster of its own. Nearly weight-less, it no longer
        // deserves a centroid and the close points split instead.
        let even = [(0.0, 1.0), (1.0, 1.0), (2.0, 1.0), (3.0, 1.0), (10.0, 1.0)];
        assert_eq!(cluster_1d(&even, 2, 7, 512, 4).labels, vec![0, 0, 0, 0, 1]);
        let light = [
            (0.0, 1.0),
            (1.0, 1.0),
            (2.0, 1.0),
            (3.0, 1.0),
            (10.0, 0.001),
        ];
        let c = cluster_1d(&light, 2, 7, 512, 4);
        assert_eq!(c.labels, vec![0, 0, 1, 1, 1]);
        // Reported centroids use the true weights.
        assert!(
            (c.centroids[1] - (5.0 + 0.01) / 2.001).abs() < 1e-9,
            "{:?}",
            c.centroids
        );
    }

    #[test]
    fn deterministic_for_a_seed_and_small_inputs_need_no_kmeans() {
        let pts: Vec<(f64, f64)> = (0..200)
            .map(|i| {
                let h = crate::signature::mix64(i);
                ((h % 4000) as f64 / 100.0, (h >> 40) as f64 % 50.0 + 1.0)
            })
            .collect();
        let a = cluster_1d(&pts, 8, 42, 1024, 4);
        let b = cluster_1d(&pts, 8, 42, 1024, 4);
        assert_eq!(a, b);
        assert!(a.centroids.len() <= 8 && a.centroids.len() >= 6);
        let two = cluster_1d(&[(5.0, 1.0), (1.0, 1.0), (5.0, 3.0)], 8, 0, 64, 1);
        assert_eq!(two.centroids, vec![1.0, 5.0]);
        assert_eq!(two.labels, vec![1, 0, 1]);
        assert!(cluster_1d(&[], 3, 0, 64, 1).centroids.is_empty());
    }

    #[test]
    fn exact_dp_matches_kmeans_on_clear_groups_and_beats_a_bad_split() {
        let pts = [
            (0.0, 1.0),
            (1.0, 1.0),
            (2.0, 1.0),
            (3.0, 1.0),
            (10.0, 0.001),
        ];
        let c = cluster_1d_exact(&pts, 2);
        assert_eq!(c.labels, vec![0, 0, 1, 1, 1]);
        assert_eq!(c, cluster_1d(&pts, 2, 7, 512, 4));
        let hist: Vec<(f64, f64)> = (0..40)
            .map(|i| (i as f64, if i < 20 { 5.0 } else { 1.0 }))
            .collect();
        let c = cluster_1d_exact(&hist, 4);
        assert_eq!(c.centroids.len(), 4);
        let sse = |c: &Clustering| -> f64 {
            hist.iter()
                .zip(&c.labels)
                .map(|(&(x, w), &l)| w * (x - c.centroids[l]).powi(2))
                .sum()
        };
        let heuristic = cluster_1d(&hist, 4, 3, 512, 1);
        assert!(sse(&c) <= sse(&heuristic) + 1e-9);
        assert!(cluster_1d_exact(&[], 3).centroids.is_empty());
    }

    /// Inputs that reach k-means from a bad table: before the clamping
    /// the first panicked in linfa's k-means++ ("Uniform::new: range
    /// overflow"). Each clusters without panicking, every point labelled.
    #[test]
    fn degenerate_inputs_never_panic() {
        let mut huge: Vec<(f64, f64)> = (1..=10).map(|i| (f64::from(i), 10.0)).collect();
        huge.insert(0, (-1e300, 10.0));
        let c = cluster_1d(&huge, 4, 0x5eed, 1024, 4);
        assert_eq!(c.labels.len(), huge.len());
        assert!(c.centroids.iter().all(|x| x.is_finite()), "{c:?}");
        assert_eq!(c.labels[0], 0, "the absurd point is the lowest cluster");
        let cases: Vec<Vec<(f64, f64)>> = vec![
            // Far apart both ways, and huge weights.
            (0..20)
                .map(|i| {
                    (
                        if i % 2 == 0 { 1e308 } else { -1e308 } / f64::from(i + 1),
                        1e300,
                    )
                })
                .collect(),
            // Non-finite values and weights.
            (0..20)
                .map(|i| match i % 4 {
                    0 => (f64::NAN, 1.0),
                    1 => (f64::INFINITY, f64::NAN),
                    2 => (f64::from(i), f64::INFINITY),
                    _ => (f64::NEG_INFINITY, -1.0),
                })
                .collect(),
            // All equal.
            vec![(3.0, 1.0); 50],
            // Zero weights.
            (0..20).map(|i| (f64::from(i), 0.0)).collect(),
            // Values closer than their squares can tell apart.
            (0..20).map(|i| (f64::from(i) * 1e-200, 1.0)).collect(),
        ];
        for pts in &cases {
            for k in [1, 2, 4, 30] {
                let c = cluster_1d(pts, k, 7, 1024, 4);
                assert_eq!(c.labels.len(), pts.len());
                assert!(c.labels.iter().all(|&l| l < c.centroids.len()), "{c:?}");
            }
        }
        // All equal: one cluster at the value.
        assert_eq!(cluster_1d(&cases[2], 4, 7, 64, 1).centroids, vec![3.0]);
    }

    #[test]
    fn quantile_fallback_orders_and_covers() {
        let pts = [(1.0, 1.0), (2.0, 1.0), (9.0, 1.0), (10.0, 1.0)];
        let c = finish(&pts, &quantile_centroids(&pts, 2));
        assert_eq!(c.labels, vec![0, 0, 1, 1]);
    }
}
