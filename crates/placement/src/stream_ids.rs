//! From the clusters of a re-clustering to stream ids: adjacent clusters
//! closer than `min_gap_log2` share a stream (`merge_close`), and each
//! remaining cluster gets an id (`order_preserving_ids`).
//!
//! The clusters of a re-clustering are ordered by centroid, and stream ids
//! must keep that order (stream 1 holds the shortest-lived data). Numbering
//! them by rank (cluster `i` → stream `i + 1`) renumbers every cluster above
//! one that appears or disappears: a heavy signature whose lifetime did not
//! move then changes stream only because a light one was added below it,
//! and its next pages share erase blocks with what the stream held before.
//! `order_preserving_ids` instead picks, among the strictly increasing
//! maps from clusters to the stream ids `1..=streams`, the one under which
//! the most weight stays in the stream it had at the previous clustering
//! (exact, by dynamic programming over clusters × streams); with no history
//! it is the rank.

/// Result of a 1-D clustering (the mapper's k-means, `crate::mapper`):
/// what this module turns into stream ids.
#[derive(Debug, Clone, PartialEq)]
pub struct Clustering {
    /// Weighted centroids, ascending; no cluster is empty.
    pub centroids: Vec<f64>,
    /// For each input point, the index of its centroid.
    pub labels: Vec<usize>,
}

/// Merges adjacent clusters whose centroids are closer than `gap` (log2
/// units), left to right; centroids of merged clusters are recomputed from
/// `pts` (the clustered `(value, weight)` points).
pub(crate) fn merge_close(c: Clustering, pts: &[(f64, f64)], gap: f64) -> Clustering {
    if gap <= 0.0 || c.centroids.len() < 2 {
        return c;
    }
    let mut group = vec![0usize; c.centroids.len()];
    let mut anchor = c.centroids[0];
    for j in 1..c.centroids.len() {
        if c.centroids[j] - anchor < gap {
            group[j] = group[j - 1];
        } else {
            group[j] = group[j - 1] + 1;
            anchor = c.centroids[j];
        }
    }
    let n = group[group.len() - 1] + 1;
    let (mut sum, mut wsum, mut cnt) = (vec![0.0; n], vec![0.0; n], vec![0usize; n]);
    let labels: Vec<usize> = c.labels.iter().map(|&l| group[l]).collect();
    for (&(x, w), &l) in pts.iter().zip(&labels) {
        let w = if w.is_finite() && w > 0.0 { w } else { 0.0 };
        sum[l] += x * w;
        wsum[l] += w;
        cnt[l] += 1;
    }
    let centroids = (0..n)
        .map(|g| {
            if wsum[g] > 0.0 {
                sum[g] / wsum[g]
            } else {
                // Weight-less group: its first member cluster's centroid.
                c.centroids[group.iter().position(|&x| x == g).unwrap_or(0)]
            }
        })
        .collect();
    Clustering { centroids, labels }
}

/// [`merge_close`], then every point to the nearest merged centroid and
/// the centroids recomputed (one nearest-centroid step). The merge runs
/// left to right and keeps the finer clustering's boundaries: a cluster
/// lying between two others, closer than `gap` to the lower one, goes to
/// it whole, its upper members too, though they lie nearer the upper
/// cluster (fio-skew with internal streams, docs/placement-log.md). The
/// step gives those members to the upper one. Without a merge, `c` as it
/// is.
pub(crate) fn merge_close_nearest(c: Clustering, pts: &[(f64, f64)], gap: f64) -> Clustering {
    let n = c.centroids.len();
    let m = merge_close(c, pts, gap);
    if m.centroids.len() < n {
        crate::kmeans::reassign(pts, &m.centroids)
    } else {
        m
    }
}

/// Stream ids (`1..=streams`, strictly increasing) for `clusters` clusters
/// ordered by centroid, given `kept[i][j]`: the weight of cluster `i`'s
/// members that were in stream `j + 1` before (`kept` has one row per
/// cluster, each `streams` long). Maximises the weight that keeps its
/// stream; among equal choices the lowest ids win (so no history gives
/// `1, 2, …`). `clusters` must not exceed `streams`.
pub fn order_preserving_ids(kept: &[Vec<f64>], streams: usize) -> Vec<u32> {
    let k = kept.len();
    if k == 0 {
        return Vec::new();
    }
    assert!(k <= streams, "{k} clusters for {streams} streams");
    // best[i][j]: the most weight kept by clusters 0..=i with cluster i in
    // stream j + 1; -inf where impossible (too few ids left on either side).
    let neg = f64::NEG_INFINITY;
    let mut best = vec![vec![neg; streams]; k];
    let mut from = vec![vec![0usize; streams]; k];
    let w = |i: usize, j: usize| kept[i].get(j).copied().unwrap_or(0.0);
    for (j, b) in best[0].iter_mut().enumerate().take(streams - k + 1) {
        *b = w(0, j);
    }
    for i in 1..k {
        // Running maximum of best[i - 1][..j]; the first (lowest) wins ties.
        let (mut run, mut arg) = (neg, 0);
        for j in i..=streams - k + i {
            if best[i - 1][j - 1] > run {
                run = best[i - 1][j - 1];
                arg = j - 1;
            }
            if run > neg {
                best[i][j] = run + w(i, j);
                from[i][j] = arg;
            }
        }
    }
    // The last cluster's best stream, lowest on ties.
    let mut j = 0;
    for c in 0..streams {
        if best[k - 1][c] > best[k - 1][j] {
            j = c;
        }
    }
    let mut ids = vec![0u32; k];
    for i in (0..k).rev() {
        ids[i] = j as u32 + 1;
        if i > 0 {
            j = from[i][j];
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Clusters closer than the gap share a stream; far ones stay apart.
    #[test]
    fn close_clusters_merge_into_one_stream() {
        let pts = [(4.0, 1.0), (4.4, 1.0), (10.0, 1.0), (20.0, 2.0)];
        let c = Clustering {
            centroids: vec![4.0, 4.4, 10.0, 20.0],
            labels: vec![0, 1, 2, 3],
        };
        let m = merge_close(c.clone(), &pts, 1.0);
        assert_eq!(m.labels, vec![0, 0, 1, 2]);
        assert!((m.centroids[0] - 4.2).abs() < 1e-9, "{:?}", m.centroids);
        assert_eq!(m.centroids[1..], [10.0, 20.0]);
        assert_eq!(merge_close(c.clone(), &pts, 0.0), c);
    }

    /// fio-skew's keys at a re-clustering with 8 data streams (log2
    /// lifetime, thousands of pages written): k-means put the warm job's
    /// key (16.57) alone, a mixed key and a cold one (17.08, 17.50) in a
    /// cluster between it and the cold keys (17.88, 18.07). Merged whole,
    /// the cold key 17.50 joins the warm one; with the nearest-centroid
    /// step it joins the cold keys, and the mixed key stays below.
    #[test]
    fn a_merged_middle_cluster_splits_by_nearest_centroid() {
        let pts = [
            (16.57, 307.0),
            (17.08, 157.0),
            (17.50, 93.0),
            (17.88, 61.0),
            (18.07, 114.0),
        ];
        let c = Clustering {
            centroids: vec![16.57, 17.23, 18.0],
            labels: vec![0, 1, 1, 2, 2],
        };
        let m = merge_close(c.clone(), &pts, 1.0);
        assert_eq!(m.labels, vec![0, 0, 0, 1, 1]);
        let n = merge_close_nearest(c.clone(), &pts, 1.0);
        assert_eq!(n.labels, vec![0, 0, 1, 1, 1]);
        assert!(n.centroids[1] - n.centroids[0] > 1.0, "{:?}", n.centroids);
        // No merge: the same clusters.
        assert_eq!(merge_close_nearest(c.clone(), &pts, 0.5).labels, c.labels);
    }

    #[test]
    fn no_history_is_the_rank() {
        assert_eq!(
            order_preserving_ids(&vec![vec![0.0; 5]; 3], 5),
            vec![1, 2, 3]
        );
        assert!(order_preserving_ids(&[], 4).is_empty());
    }

    /// A cluster appears below, or one between others goes: the others
    /// keep their ids where the order leaves room; where it does not, the
    /// heaviest keeps its id.
    #[test]
    fn clusters_keep_their_streams_when_one_appears_or_goes() {
        // Before: A in 2, B in 3, C in 5 (of 8). Now a new light cluster N
        // appears below A: N, A, B, C.
        let mut kept = vec![vec![0.0; 8]; 4];
        kept[1][1] = 100.0; // A was in stream 2
        kept[2][2] = 80.0; // B in 3
        kept[3][4] = 50.0; // C in 5
        assert_eq!(order_preserving_ids(&kept, 8), vec![1, 2, 3, 5]);
        // A cluster between B and C goes away: the rest keep their ids.
        let kept = vec![
            vec![0.0, 100.0, 0.0, 0.0, 0.0],
            vec![0.0, 0.0, 0.0, 0.0, 50.0],
        ];
        assert_eq!(order_preserving_ids(&kept, 5), vec![2, 5]);
        // No room below: N takes stream 1 and the heaviest of A and B keeps
        // its stream.
        let kept = vec![
            vec![0.0, 0.0, 0.0],
            vec![100.0, 0.0, 0.0],
            vec![0.0, 10.0, 0.0],
        ];
        assert_eq!(order_preserving_ids(&kept, 3), vec![1, 2, 3]);
        let kept = vec![vec![0.0, 0.0], vec![100.0, 0.0]];
        assert_eq!(order_preserving_ids(&kept, 2), vec![1, 2]);
    }

    #[test]
    fn a_cluster_split_keeps_the_heavier_half_in_place() {
        // One cluster in stream 3 splits in two: the heavier half keeps 3.
        let mut kept = vec![vec![0.0; 6]; 2];
        kept[0][2] = 10.0;
        kept[1][2] = 90.0;
        assert_eq!(order_preserving_ids(&kept, 6), vec![1, 3]);
        kept[0][2] = 90.0;
        kept[1][2] = 10.0;
        assert_eq!(order_preserving_ids(&kept, 6), vec![3, 4]);
    }
}
