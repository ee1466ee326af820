//! Per-signature breakdown of pcstream's placement on a replay: for each
//! program-context signature, where pcstream put its pages in the measured
//! pass, what lifetime pcstream had learnt for it, and how long its pages
//! really lived on the device (the replay's deaths: overwrite or TRIM at
//! the page's address). Set side by side, the two lifetimes show what
//! pcstream learns from (file deaths) against what the flash sees.
//!
//! The policy is the shipped `pcstream` (both learners, the one whose
//! streams separate device lifetimes better placing), or the LBA-keyed
//! learner alone with `key_by_lba`. Its *prediction* for a page is the
//! lifetime of the stream it chose: for the dual, what that stream stood
//! for when the page was written (the device lifetime of the stream's
//! recent pages, learnt online from the device's deaths,
//! [`PcStreamDual::placed_for`]); for the LBA learner alone, the stream's
//! k-means centroid at the end of the pass (stream ids keep their clusters
//! across re-clusterings). The row's error is the median over the signature's pages of
//! |log2 prediction − log2 device lifetime|, pages in stream 0 (nothing
//! predicted) and pages still live at the end left out.
//!
//! Each page is attributed to the rule that placed it (the placing
//! learner's [`Placement::placed_by`]: its key's cluster and what the
//! key's lifetime rested on, a new key's fallback, file affinity), and
//! each row says how much of its device lifetimes' spread the address's
//! history and the page's place in its device write explain
//! (`crate::separability`).
//!
//! Beside it, each row shows how `pcstream-paper` (the paper's algorithm)
//! placed the same pages and what it learnt, so a signature that the two
//! place differently stands out (issue #28: where pcstream's own rules
//! help or hurt).
//!
//! Both policies are driven exactly as [`crate::simulate`] drives them,
//! on a device of their own sized and aged the same way ([`crate::pass`]'s
//! `to_device`, same clock and configuration): they hear the same device
//! reports ([`pcstream_placement::placement::Placement::device_writes`])
//! and install the same GC hook, so the breakdown is the measured run's
//! placement page by page (pcstream's GC streams on demand, which give
//! stream ids to its learners or keep them for GC copies once the device
//! reports its GC share, renumber its streams; a breakdown without the
//! device showed stream ids the measured run never used).

use crate::error::{ReplayError, RunError};
use crate::experiment::{policy_config_for, Job};
use crate::ops::Op;
use crate::ops::WriteClass;
use crate::pass::{run_passes, DeviceFeedback, PassEvent, PolicySlot};
use crate::separability::{history_group, tail_group, Explained, LastWrite};
use crate::sizing::{aged_ssd, layout, DeviceLayout};
use crate::Replay;
use pcstream_placement::dual::PcStreamDual;
use pcstream_placement::pcstream::PcStream;
use pcstream_placement::placement::{PlacedBy, Placement};
use std::collections::HashMap;

/// One signature's row.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SignatureRow {
    /// The signature; `None` for device writes without one (file-system
    /// metadata and journal, data the shim did not see).
    pub signature: Option<u64>,
    /// Host pages written in the measured pass.
    pub pages: u64,
    /// Pages per stream in the measured pass, most first.
    pub streams: Vec<(u32, u64)>,
    /// pcstream's lifetime estimate at the end, log2 pages (`None`: no
    /// death seen yet).
    pub estimate_log2: Option<f64>,
    /// Pages whose death pcstream saw (all passes).
    pub learnt_dead_pages: u64,
    /// Pages of the measured pass that died on the device within the pass.
    pub device_dead_pages: u64,
    /// Their lifetimes on the device (host pages written in between):
    /// 10th, 50th and 90th percentiles.
    pub device_lifetime_p10: Option<u64>,
    /// Median device lifetime.
    pub device_lifetime_p50: Option<u64>,
    /// 90th percentile device lifetime.
    pub device_lifetime_p90: Option<u64>,
    /// Median over the pages placed in a data stream of the lifetime that
    /// stream stands for on the device (log2 pages; see the module docs):
    /// what pcstream placed them for.
    pub placed_for_log2: Option<f64>,
    /// Median over those pages that died within the pass of |log2 placed-for
    /// − log2 device lifetime|: 1.0 means a factor of 2 off.
    pub error_log2_p50: Option<f64>,
    /// The same pages as `pcstream-paper` (the paper's algorithm: one
    /// file-keyed learner, the PC alone) placed them in the measured pass:
    /// pages per stream, most first. Where the two differ is where
    /// pcstream's own rules moved the signature's pages.
    pub paper_streams: Vec<(u32, u64)>,
    /// `pcstream-paper`'s lifetime estimate at the end, log2 pages.
    pub paper_estimate_log2: Option<f64>,
    /// Pages the shipped pcstream placed with its LBA-keyed learner (the
    /// rest with the file-keyed one, the paper's keying); all of them with
    /// `key_by_lba`.
    pub lba_learner_pages: u64,
    /// Standard deviation of the log2 device lifetimes of the pages that
    /// died within the pass (`crate::separability`).
    pub device_spread_log2: Option<f64>,
    /// Share of their variance that the time since each page's address was
    /// last written explains (what previous-lifetime keys can use).
    pub explained_by_history: Option<f64>,
    /// Share of their variance that each page's place in its device write
    /// explains (last page, second last, …): a part no host placement can
    /// use, as one device write carries one stream.
    pub explained_by_write_tail: Option<f64>,
    /// The rules that placed its pages in the measured pass (the placing
    /// learner's [`Placement::placed_by`]), pages each, most first.
    pub rules: Vec<(String, u64)>,
    /// Its pages placed under a refined key (the signature refined by the
    /// application's hint, the page's previous lifetime or its address's
    /// write interval) rather than the bare signature.
    pub refined_pages: u64,
}

/// The policy broken down: the shipped dual learner, or one learner.
enum Learner {
    Dual(Box<PcStreamDual>),
    One(Box<PcStream>),
}

impl Learner {
    fn placement(&mut self) -> &mut dyn Placement {
        match self {
            Learner::Dual(p) => &mut **p,
            Learner::One(p) => &mut **p,
        }
    }

    /// The learner whose choices were placing at the end.
    fn placing(&self) -> &PcStream {
        match self {
            Learner::Dual(p) => p.placing(),
            Learner::One(p) => p,
        }
    }

    /// What each stream `1..` (index `s − 1`) is placed for as the policy
    /// places, log2 pages: the dual's handle on it (device lifetimes learnt
    /// from the device's deaths, as of its latest decision); none for the
    /// LBA learner alone (its end-of-pass centroids are used).
    /// Whether the LBA-keyed learner places now, readable while the
    /// policy is borrowed (`None`: always, the LBA learner alone).
    fn uses_lba(&self) -> Option<std::sync::Arc<std::sync::atomic::AtomicBool>> {
        match self {
            Learner::Dual(p) => Some(p.uses_lba_handle()),
            Learner::One(_) => None,
        }
    }

    fn placed_for(&self) -> Option<std::sync::Arc<std::sync::Mutex<Vec<f64>>>> {
        match self {
            Learner::Dual(p) => Some(p.placed_for_handle()),
            Learner::One(_) => None,
        }
    }
}

#[derive(Default)]
struct Acc {
    pages: u64,
    /// Pages placed by the LBA-keyed learner.
    by_lba: u64,
    streams: HashMap<u32, u64>,
    /// Device lifetimes of the pages that died, per stream they went to.
    lives: HashMap<u32, Vec<u64>>,
    /// Pages per prediction (log2 pages, in [`HIST_STEP`]s) they were placed for.
    placed: Hist,
    /// Dead pages per |log2 prediction − log2 device lifetime|.
    errors: Hist,
    /// Log2 device lifetimes grouped by the time since the address's
    /// previous write, and by place in the device write.
    by_history: Explained,
    by_tail: Explained,
    /// Pages per rule that placed them, and those under refined keys.
    rules: HashMap<&'static str, u64>,
    refined: u64,
}

/// Resolution of the medians of [`Acc`], log2 units (a 1.1% factor).
const HIST_STEP: f64 = 1.0 / 64.0;

/// Counts per value rounded to [`HIST_STEP`]: medians of per-page values
/// without a vector per page (10⁷ pages at the paper's scale).
#[derive(Default)]
struct Hist(std::collections::BTreeMap<i64, u64>);

impl Hist {
    fn add(&mut self, v: f64, n: u64) {
        *self.0.entry((v / HIST_STEP).round() as i64).or_default() += n;
    }

    fn median(&self) -> Option<f64> {
        let half = self.0.values().sum::<u64>().div_ceil(2);
        let mut seen = 0;
        self.0.iter().find_map(|(&b, &n)| {
            seen += n;
            (seen >= half.max(1)).then_some(b as f64 * HIST_STEP)
        })
    }
}

/// What stream `s` stands for in `v` (index `s − 1`, log2 pages); none
/// for stream 0 or a stream without a finite value.
fn stands_for(v: &[f64], s: u32) -> Option<f64> {
    (s as usize)
        .checked_sub(1)
        .and_then(|i| v.get(i))
        .copied()
        .filter(|c| c.is_finite())
}

/// `pages` pages placed for `pred` (log2 pages), of which those in `lives`
/// died on the device after that many host pages.
fn score(
    placed: &mut Hist,
    errors: &mut Hist,
    pred: f64,
    pages: u64,
    lives: impl IntoIterator<Item = u64>,
) {
    placed.add(pred, pages);
    for v in lives {
        errors.add((pred - (v.max(1) as f64).log2()).abs(), 1);
    }
}

/// A page of the measured pass, as [`each_measured_page`] reports it.
struct MeasuredPage {
    /// The policy's stream.
    stream: u32,
    /// Its index in the pass.
    k: u64,
    /// Its signature (`None` for a device write without one or for
    /// file-system metadata).
    key: Option<u64>,
    /// Pages after it in its device write (0: the last).
    from_end: u64,
    /// Host pages since its address was last written, warm-up passes
    /// included (`None`: never).
    since_written: Option<u64>,
    /// Why the policy placed it there, where it says.
    placed_by: Option<PlacedBy>,
}

/// Drives `policy` through the replay's warm-up passes and its measured
/// pass on a device of its own, as [`crate::simulate`] does (same clock,
/// same device reports and GC hook), calling `page` for each page of the
/// measured pass.
fn each_measured_page(
    r: &Replay,
    dev: &DeviceLayout,
    policy: &mut dyn Placement,
    mut page: impl FnMut(MeasuredPage),
) -> Result<(), ReplayError> {
    let mut ssd = aged_ssd(r, dev).map_err(|e| ReplayError::Run {
        policy: policy.name().to_string(),
        source: RunError::from(e),
    })?;
    let mut fb = DeviceFeedback::default();
    fb.ask_hook(policy, &mut ssd);
    let n = r.host_pages();
    let mut last = LastWrite::default();
    let mut slot = PolicySlot {
        base: policy,
        fresh: None,
    };
    run_passes(
        r,
        &mut slot,
        None,
        &mut ssd,
        &mut fb,
        |pass, measured, ev, policy| {
            let &PassEvent::Page {
                index,
                lpn,
                stream,
                k,
                signature,
                class,
            } = ev
            else {
                return;
            };
            let since_written = last.write(lpn, u64::from(pass) * n + k);
            if !measured {
                return;
            }
            let key = match class {
                WriteClass::Data => signature,
                WriteClass::Metadata => None,
            };
            let from_end = match r.ops.get(index) {
                Some(&Op::Write {
                    lpn: first, pages, ..
                }) => (first + u64::from(pages)).saturating_sub(lpn + 1),
                _ => 0,
            };
            page(MeasuredPage {
                stream,
                k,
                key,
                from_end,
                since_written,
                placed_by: policy.placed_by(),
            });
        },
    )?;
    Ok(())
}

/// Pages per key (a stream, or a rule's words), most first (ties: the
/// lower key first).
fn most_first<K: Ord>(m: HashMap<K, u64>) -> Vec<(K, u64)> {
    let mut v: Vec<(K, u64)> = m.into_iter().collect();
    v.sort_unstable_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
    v
}

fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    Some(sorted[i])
}

/// pcstream's placement of `job.replay` by signature, heaviest first (the
/// job's policy name is ignored: this is pcstream's breakdown). Runs the
/// replay's warm-up passes first, as [`crate::simulate`] does;
/// refuses `clear_at_marks`, whose fresh tables have no single breakdown.
pub fn pcstream_signatures(
    job: &Job<'_>,
    policy_cfg: &pcstream_placement::policies::PolicyConfig,
) -> Result<Vec<SignatureRow>, ReplayError> {
    let bad = |e: RunError| ReplayError::Run {
        policy: "pcstream".into(),
        source: e,
    };
    let r = job.replay;
    if r.run_mode.clear_at_marks {
        return Err(bad(RunError::ClearAtMarks));
    }
    let dev = layout(r, &job.spec).map_err(|e| bad(e.into()))?;
    let cfg = policy_config_for(&job.spec, &dev, policy_cfg);
    cfg.validate().map_err(|e| bad(e.into()))?;
    let mut pc = if cfg.pcstream.key_by_lba {
        Learner::One(Box::new(PcStream::new(cfg.streams, cfg.pcstream.clone())))
    } else {
        Learner::Dual(Box::new(PcStreamDual::new(
            cfg.streams,
            cfg.pcstream.clone(),
        )))
    };
    let mut acc: HashMap<Option<u64>, Acc> = HashMap::new();
    let live_prediction = pc.placed_for();
    let uses_lba = pc.uses_lba();
    each_measured_page(r, &dev, pc.placement(), |p| {
        let MeasuredPage { stream, k, key, .. } = p;
        let a = acc.entry(key).or_default();
        a.pages += 1;
        if let Some(by) = p.placed_by {
            *a.rules.entry(by.rule).or_default() += 1;
            a.refined += u64::from(by.refined);
        }
        a.by_lba += u64::from(
            uses_lba
                .as_ref()
                .is_none_or(|u| u.load(std::sync::atomic::Ordering::Relaxed)),
        );
        *a.streams.entry(stream).or_default() += 1;
        let death = r.death(k);
        if let Some(d) = death {
            a.lives.entry(stream).or_default().push(d - k);
            let x = ((d - k).max(1) as f64).log2();
            a.by_history.add(history_group(p.since_written), x);
            a.by_tail.add(tail_group(p.from_end), x);
        }
        // What the stream was placed for at this write.
        let pred = live_prediction
            .as_ref()
            .and_then(|h| stands_for(&h.lock().unwrap_or_else(|e| e.into_inner()), stream));
        if let Some(c) = pred {
            score(&mut a.placed, &mut a.errors, c, 1, death.map(|d| d - k));
        }
    })?;
    // The paper's algorithm through the same passes, beside it.
    let mut paper = PcStream::paper(cfg.streams, cfg.pcstream.clone());
    let mut paper_acc: HashMap<Option<u64>, HashMap<u32, u64>> = HashMap::new();
    each_measured_page(r, &dev, &mut paper, |p| {
        *paper_acc
            .entry(p.key)
            .or_default()
            .entry(p.stream)
            .or_default() += 1;
    })?;
    let placing = pc.placing();
    // What the streams stand for at the end (the LBA learner alone).
    let centroids = placing.mapper().centroids();
    let mut rows: Vec<SignatureRow> = acc
        .into_iter()
        .map(|(signature, mut a)| {
            if live_prediction.is_none() {
                for (&s, &n) in &a.streams {
                    if let Some(c) = stands_for(centroids, s) {
                        let l = a.lives.get(&s).into_iter().flatten().copied();
                        score(&mut a.placed, &mut a.errors, c, n, l);
                    }
                }
            }
            let mut lives: Vec<u64> = a.lives.values().flatten().copied().collect();
            lives.sort_unstable();
            let placed_for_log2 = a.placed.median();
            let streams = most_first(a.streams);
            let st = signature.and_then(|s| placing.lifetimes().sig(s));
            let paper_st = signature.and_then(|s| paper.lifetimes().sig(s));
            SignatureRow {
                signature,
                pages: a.pages,
                streams,
                estimate_log2: st.and_then(|s| s.estimate_log2()),
                learnt_dead_pages: st.map_or(0, |s| s.dead_pages),
                device_dead_pages: lives.len() as u64,
                device_lifetime_p10: percentile(&lives, 0.1),
                device_lifetime_p50: percentile(&lives, 0.5),
                device_lifetime_p90: percentile(&lives, 0.9),
                placed_for_log2,
                error_log2_p50: a.errors.median(),
                paper_streams: most_first(paper_acc.remove(&signature).unwrap_or_default()),
                paper_estimate_log2: paper_st.and_then(|s| s.estimate_log2()),
                lba_learner_pages: a.by_lba,
                device_spread_log2: a.by_tail.spread(),
                explained_by_history: a.by_history.share(),
                explained_by_write_tail: a.by_tail.share(),
                rules: most_first(a.rules)
                    .into_iter()
                    .map(|(rule, n)| (rule.to_string(), n))
                    .collect(),
                refined_pages: a.refined,
            }
        })
        .collect();
    rows.sort_by(|a, b| b.pages.cmp(&a.pages).then(a.signature.cmp(&b.signature)));
    Ok(rows)
}
