//! Per-signature breakdown of pcstream's placement on a replay: for each
//! program-context signature, where pcstream put its pages in the measured
//! pass, what lifetime pcstream had learnt for it, and how long its pages
//! really lived on the device (the replay's deaths: overwrite or TRIM at
//! the page's address). Set side by side, the two lifetimes show what
//! pcstream learns from (file deaths) against what the flash sees.
//!
//! The placement does not depend on the device's state, only on the
//! replay, so this drives the policy through the same passes as
//! [`crate::simulate`] ([`crate::pass`]'s `drive_pass`, same clock and
//! configuration) without simulating GC.

use crate::error::{ReplayError, RunError};
use crate::experiment::{policy_config_for, Job};
use crate::ops::WriteClass;
use crate::pass::{drive_pass, PassEvent, PolicySlot};
use crate::sizing::layout;
use pcstream_placement::pcstream::PcStream;
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
}

#[derive(Default)]
struct Acc {
    pages: u64,
    streams: HashMap<u32, u64>,
    lives: Vec<u64>,
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
    let mut pc = PcStream::new(cfg.streams, cfg.pcstream.clone());
    let n = r.host_pages();
    let passes = u64::from(r.run_mode.warmup_passes) + 1;
    let mut acc: HashMap<Option<u64>, Acc> = HashMap::new();
    for pass in 0..passes {
        let measured = pass + 1 == passes;
        let mut slot = PolicySlot {
            base: &mut pc,
            fresh: None,
        };
        drive_pass(r, &mut slot, None, cfg.streams, pass * n, |ev| {
            if let PassEvent::Page {
                stream,
                k,
                signature,
                class,
                ..
            } = ev
            {
                if measured {
                    let key = match class {
                        WriteClass::Data => signature,
                        WriteClass::Metadata => None,
                    };
                    let a = acc.entry(key).or_default();
                    a.pages += 1;
                    *a.streams.entry(stream).or_default() += 1;
                    if let Some(d) = r.death(k) {
                        a.lives.push(d - k);
                    }
                }
            }
            Ok(())
        })?;
    }
    let mut rows: Vec<SignatureRow> = acc
        .into_iter()
        .map(|(signature, mut a)| {
            a.lives.sort_unstable();
            let mut streams: Vec<(u32, u64)> = a.streams.into_iter().collect();
            streams.sort_unstable_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
            let st = signature.and_then(|s| pc.lifetimes().sig(s));
            SignatureRow {
                signature,
                pages: a.pages,
                streams,
                estimate_log2: st.and_then(|s| s.estimate_log2()),
                learnt_dead_pages: st.map_or(0, |s| s.dead_pages),
                device_dead_pages: a.lives.len() as u64,
                device_lifetime_p10: percentile(&a.lives, 0.1),
                device_lifetime_p50: percentile(&a.lives, 0.5),
                device_lifetime_p90: percentile(&a.lives, 0.9),
            }
        })
        .collect();
    rows.sort_by(|a, b| b.pages.cmp(&a.pages).then(a.signature.cmp(&b.signature)));
    Ok(rows)
}
