//! The experiment harness: a device sized and aged for each [`Job`], the
//! trace replayed through the job's policy (with the replay's warm-up passes
//! and round marks), the statistics collected ([`simulate`]), and many jobs
//! run on worker threads ([`simulate_all`]).

use crate::error::{ReplayError, RunError};
use crate::ops::Replay;
use crate::pass::{run_passes, DeviceFeedback, MakePolicy, PolicySlot, RunCounters};
use crate::sizing::{aged_ssd, layout, DeviceLayout, DeviceSpec};
use ftl_sim::Stats;
use pcstream_placement::policies::{self, PolicyConfig};

/// One policy run of [`simulate`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunResult {
    /// Policy name.
    pub policy: String,
    /// Whether the device had internal GC streams.
    pub internal_streams: bool,
    /// The device used.
    pub layout: DeviceLayout,
    /// Device statistics after the replay (the cold fill excluded).
    pub stats: Stats,
    /// Stream use as placed by the policy.
    pub counters: RunCounters,
    /// The policy's own counters (signatures, re-clusterings, ...).
    pub policy_counters: Vec<(String, u64)>,
    /// Wall-clock seconds of the replay (aging excluded).
    pub seconds: f64,
}

/// One job for [`simulate_all`].
#[derive(Debug, Clone)]
pub struct Job<'a> {
    /// The trace.
    pub replay: &'a Replay,
    /// Policy name ([`pcstream_placement::policies::POLICY_NAMES`]).
    pub policy: String,
    /// The device.
    pub spec: DeviceSpec,
}

/// pcstream's GC streams on a device without internal streams (see
/// `pcstream_placement::gc_age`).
pub const DEFAULT_GC_STREAMS: u32 = 3;

/// The policies' configuration on a device: `policy_cfg` with the device's
/// stream count and, unless it names them, the device's erase block as
/// pcstream's lifetime resolution (`MapperConfig::erase_unit_pages`) and
/// pcstream's GC streams ([`DEFAULT_GC_STREAMS`] without internal streams,
/// none with).
pub fn policy_config_for(
    spec: &DeviceSpec,
    layout: &DeviceLayout,
    policy_cfg: &PolicyConfig,
) -> PolicyConfig {
    let mut cfg = PolicyConfig {
        streams: spec.streams,
        ..policy_cfg.clone()
    };
    if cfg.pcstream.mapper.erase_unit_pages == 0 {
        cfg.pcstream.mapper.erase_unit_pages = u64::from(layout.config.geometry.pages_per_block);
    }
    if cfg.pcstream.gc_streams.is_none() {
        // A device with internal streams keeps GC copies apart by itself.
        cfg.pcstream.gc_streams = Some(if spec.internal_streams {
            0
        } else {
            DEFAULT_GC_STREAMS
        });
    }
    cfg
}

/// Sizes and ages a device for `job`, replays the trace through the policy
/// and collects the statistics.
pub fn simulate(job: &Job<'_>, policy_cfg: &PolicyConfig) -> Result<RunResult, ReplayError> {
    let bad = |e: RunError| ReplayError::Run {
        policy: job.policy.clone(),
        source: e,
    };
    let layout = layout(job.replay, &job.spec).map_err(|e| bad(e.into()))?;
    let cfg = policy_config_for(&job.spec, &layout, policy_cfg);
    let make = || policies::build(&job.policy, &cfg).map_err(|e| bad(e.into()));
    let mut policy = make()?;
    let mut ssd = aged_ssd(job.replay, &layout).map_err(|e| bad(e.into()))?;
    // The policy's GC hook, now or (asked again after each device report)
    // once it has one.
    let mut fb = DeviceFeedback::default();
    fb.ask_hook(policy.as_mut(), &mut ssd);
    let mode = job.replay.run_mode;
    let fresh: Option<MakePolicy<'_>> = if mode.clear_at_marks {
        Some(&make)
    } else {
        None
    };
    let mut slot = PolicySlot {
        base: policy.as_mut(),
        fresh: None,
    };
    let (counters, seconds) = run_passes(
        job.replay,
        &mut slot,
        fresh,
        &mut ssd,
        &mut fb,
        |_, _, _, _| {},
    )?;
    let policy_counters = slot
        .get()
        .counters()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    Ok(RunResult {
        policy: job.policy.clone(),
        internal_streams: job.spec.internal_streams,
        layout,
        stats: ssd.stats(),
        counters,
        policy_counters,
        seconds,
    })
}

/// Runs every job on `threads` worker threads (each run owns its device and
/// policy; replays are shared read-only). Results are in job order.
pub fn simulate_all(
    jobs: &[Job<'_>],
    policy_cfg: &PolicyConfig,
    threads: usize,
) -> Vec<Result<RunResult, ReplayError>> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<Result<RunResult, ReplayError>>>> =
        jobs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|sc| {
        for _ in 0..threads.clamp(1, jobs.len().max(1)) {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let r = simulate(job, policy_cfg);
                *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    slots
        .into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every job ran")
        })
        .collect()
}
