//! The pass driver: one pass over a replay, every write placed page by page
//! by a policy (replaced by a fresh instance at round marks when asked),
//! TRIMs and file invalidations told to it, and each placed page handed to
//! a sink: the simulated device ([`run`], `to_device`), with a breakdown
//! beside it ([`crate::signatures`]).

use crate::error::ReplayError;
use crate::ops::{Op, Replay, WriteClass};
use ftl_sim::Ssd;
use pcstream_placement::placement::{Placement, StreamId, WriteCtx, DEVICE_REPORT_PAGES};

/// What one replay run measured, beyond the device's own statistics.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct RunCounters {
    /// Host pages written per stream id.
    pub pages_per_stream: Vec<u64>,
    /// Host pages written to stream 0.
    pub stream0_pages: u64,
}

/// Replays `replay` into `ssd`, placing every page with `policy` (one pass,
/// [`Replay::run_mode`] not applied: see [`crate::simulate`]). The policy
/// hears the device's writes ([`Placement::device_writes`]); its GC hook
/// is the caller's to install.
pub fn run(
    replay: &Replay,
    policy: &mut dyn Placement,
    ssd: &mut Ssd,
) -> Result<RunCounters, ReplayError> {
    let mut c = RunCounters::for_streams(ssd.config().streams);
    let mut slot = PolicySlot {
        base: policy,
        fresh: None,
    };
    let mut fb = DeviceFeedback {
        hooked: true,
        ..DeviceFeedback::default()
    };
    run_pass(replay, &mut slot, None, ssd, 0, &mut c, &mut fb)?;
    Ok(c)
}

/// What the simulated device tells the policy during a run: its writes
/// since the previous report ([`Placement::device_writes`], every
/// [`DEVICE_REPORT_PAGES`] host pages), and, until the policy has given
/// a GC hook, a new request for one after each report.
#[derive(Debug, Default)]
pub(crate) struct DeviceFeedback {
    /// Whether a GC hook is installed (or the caller installs it).
    pub(crate) hooked: bool,
    /// Device counters at the previous report.
    host: u64,
    gc: u64,
}

impl DeviceFeedback {
    /// Installs the policy's GC hook if it has one now.
    pub(crate) fn ask_hook(&mut self, policy: &mut dyn Placement, ssd: &mut Ssd) {
        if !self.hooked {
            if let Some(h) = policy.gc_placement() {
                // With a hook the device keeps one more free block per
                // stream (`Ssd::set_gc_placement`): collect up to that
                // first, as its own GC would have had it been there from
                // the start, so a hook installed mid-run finds the
                // blocks its copies may open.
                let want = u64::from(ssd.config().gc_free_blocks + ssd.config().streams);
                while ssd.block_counts().free < want {
                    match ssd.gc_step() {
                        Ok(true) => {}
                        _ => break,
                    }
                }
                ssd.set_gc_placement(h);
                self.hooked = true;
            }
        }
    }

    fn report(&mut self, policy: &mut dyn Placement, ssd: &mut Ssd) {
        let st = ssd.stats();
        if st.host_pages < self.host || st.gc_pages < self.gc {
            // The counters were reset (end of the warm-up passes).
            self.host = 0;
            self.gc = 0;
        }
        policy.device_writes(st.host_pages - self.host, st.gc_pages - self.gc);
        self.host = st.host_pages;
        self.gc = st.gc_pages;
        self.ask_hook(policy, ssd);
    }
}

impl RunCounters {
    pub(crate) fn for_streams(streams: u32) -> RunCounters {
        RunCounters {
            pages_per_stream: vec![0; streams.max(1) as usize],
            stream0_pages: 0,
        }
    }
}

/// The policy a pass places with: the caller's, until a round mark
/// replaces it by a fresh instance.
pub(crate) struct PolicySlot<'a> {
    pub(crate) base: &'a mut dyn Placement,
    pub(crate) fresh: Option<Box<dyn Placement + Send>>,
}

impl PolicySlot<'_> {
    pub(crate) fn get(&mut self) -> &mut dyn Placement {
        match self.fresh.as_deref_mut() {
            Some(p) => p,
            None => &mut *self.base,
        }
    }
}

/// A fresh policy instance for [`RunMode::clear_at_marks`].
pub(crate) type MakePolicy<'a> = &'a dyn Fn() -> Result<Box<dyn Placement + Send>, ReplayError>;

/// One pass over the replay starting at replay clock `clock0` (policies see
/// times and deaths shifted by it); with `fresh`, the policy is replaced at
/// every round mark. Returns the clock after the pass.
pub(crate) fn run_pass(
    replay: &Replay,
    slot: &mut PolicySlot<'_>,
    fresh: Option<MakePolicy<'_>>,
    ssd: &mut Ssd,
    clock0: u64,
    c: &mut RunCounters,
    fb: &mut DeviceFeedback,
) -> Result<u64, ReplayError> {
    let streams = ssd.config().streams;
    drive_pass(replay, slot, fresh, streams, clock0, |ev, policy| {
        to_device(replay, ssd, fb, c, &ev, policy)
    })
}

/// Every pass of a run on `ssd`, as [`crate::simulate`] measures it: the
/// replay's warm-up passes ([`crate::ops::RunMode::warmup_passes`]), the
/// device's statistics reset, then the measured pass, each through
/// [`to_device`]. `sink` hears every event of every pass after the device
/// has, with the pass's number (0-based) and whether it is the measured
/// one. Returns the measured pass's counters and its wall-clock seconds.
pub(crate) fn run_passes(
    replay: &Replay,
    slot: &mut PolicySlot<'_>,
    fresh: Option<MakePolicy<'_>>,
    ssd: &mut Ssd,
    fb: &mut DeviceFeedback,
    mut sink: impl FnMut(u32, bool, &PassEvent, &mut dyn Placement),
) -> Result<(RunCounters, f64), ReplayError> {
    let streams = ssd.config().streams;
    let warmup = replay.run_mode.warmup_passes;
    let mut clock = 0;
    let mut t0 = std::time::Instant::now();
    let mut counters = RunCounters::for_streams(streams);
    for pass in 0..=warmup {
        let measured = pass == warmup;
        if measured {
            if warmup > 0 {
                ssd.reset_stats();
            }
            t0 = std::time::Instant::now();
        }
        counters = RunCounters::for_streams(streams);
        clock = drive_pass(replay, slot, fresh, streams, clock, |ev, policy| {
            to_device(replay, ssd, fb, &mut counters, &ev, policy)?;
            sink(pass, measured, &ev, policy);
            Ok(())
        })?;
    }
    Ok((counters, t0.elapsed().as_secs_f64()))
}

/// The device's side of one [`drive_pass`] event: the page written to
/// `ssd` in its stream, the policy told of the device's writes every
/// [`DEVICE_REPORT_PAGES`] host pages (and asked for its GC hook), the
/// counters kept; or the TRIM applied. Every pass that simulates the
/// device goes through here, so a breakdown that replays beside it
/// ([`crate::signatures`]) sees the policy decide as the measured run did.
pub(crate) fn to_device(
    replay: &Replay,
    ssd: &mut Ssd,
    fb: &mut DeviceFeedback,
    c: &mut RunCounters,
    ev: &PassEvent,
    policy: &mut dyn Placement,
) -> Result<(), ReplayError> {
    match *ev {
        PassEvent::Page {
            index, lpn, stream, ..
        } => {
            ssd.write(lpn, stream)
                .map_err(|source| ReplayError::Sim { index, source })?;
            if ssd.clock().is_multiple_of(DEVICE_REPORT_PAGES) {
                fb.report(policy, ssd);
            }
            c.pages_per_stream[stream as usize] += 1;
            if stream == 0 {
                c.stream0_pages += 1;
            }
            Ok(())
        }
        PassEvent::Trim { index, lpn, pages } => {
            // Only pages the replay writes: the others may hold the
            // cold data of the ageing, which the workload never frees.
            let mut p = lpn;
            while p < lpn + pages {
                if !replay.touches(p) {
                    p += 1;
                    continue;
                }
                let start = p;
                while p < lpn + pages && replay.touches(p) {
                    p += 1;
                }
                ssd.trim(start, p - start)
                    .map_err(|source| ReplayError::Sim { index, source })?;
            }
            Ok(())
        }
    }
}

/// The lifetime typical of a device write of `pages` pages from page `k`
/// of the pass: 2^(the mean log2 lifetime of its pages), a page never
/// invalidated counting as 2^60; `None` when that mean is 2^60 or more
/// (`WriteCtx::write_death`, for `oracle-write`).
pub(crate) fn write_lifetime(replay: &Replay, k: u64, pages: u32) -> Option<u64> {
    use pcstream_placement::oracle::NEVER_LOG2;
    let n = pages.max(1);
    let sum: f64 = (0..u64::from(n))
        .map(|i| {
            replay.death(k + i).map_or(NEVER_LOG2, |d| {
                ((d.saturating_sub(k + i)).max(1) as f64)
                    .log2()
                    .min(NEVER_LOG2)
            })
        })
        .sum();
    let mean = sum / f64::from(n);
    (mean < NEVER_LOG2).then(|| mean.exp2().round() as u64)
}

/// What [`drive_pass`] reports to its sink.
pub(crate) enum PassEvent {
    /// One host page placed by the policy.
    Page {
        /// Index of the operation in [`Replay::ops`].
        index: usize,
        /// Logical page.
        lpn: u64,
        /// The policy's stream (clamped to the device's).
        stream: StreamId,
        /// The page's index in the pass (its entry in [`Replay::deaths`]).
        k: u64,
        /// Signature of the write.
        signature: Option<u64>,
        /// Data or metadata.
        class: WriteClass,
    },
    /// Pages discarded (the policy has heard it already).
    Trim {
        /// Index of the operation in [`Replay::ops`].
        index: usize,
        /// First logical page.
        lpn: u64,
        /// Page count.
        pages: u64,
    },
}

/// Drives the policy through one pass of the replay (see [`run_pass`]):
/// every write is placed page by page, TRIMs and file invalidations are
/// told to the policy, and `sink` hears each placed page (its stream
/// clamped to the device's `streams`) and each TRIM, with the policy
/// placing now: the device simulation ([`to_device`]), and a breakdown
/// beside it ([`crate::signatures`]).
pub(crate) fn drive_pass(
    replay: &Replay,
    slot: &mut PolicySlot<'_>,
    fresh: Option<MakePolicy<'_>>,
    streams: u32,
    clock0: u64,
    mut sink: impl FnMut(PassEvent, &mut dyn Placement) -> Result<(), ReplayError>,
) -> Result<u64, ReplayError> {
    let mut clock = clock0;
    let mut next_mark = 0usize;
    let streams = streams.max(1);
    // The policies' time: the pages written, or the byte clock's.
    let times = replay.times.as_ref();
    let page_time = |k: u64, clock: u64| times.map_or(clock, |t| clock0 + t.pages[k as usize]);
    let op_time = |index: usize, clock: u64| times.map_or(clock, |t| clock0 + t.ops[index]);
    for (index, op) in replay.ops.iter().enumerate() {
        match *op {
            Op::Write {
                lpn,
                pages,
                file,
                file_page,
                signature,
                app_hint,
                class,
            } => {
                let typical = if slot.get().needs_write_death() {
                    write_lifetime(replay, clock - clock0, pages)
                } else {
                    None
                };
                for i in 0..u64::from(pages) {
                    if let Some(make) = fresh {
                        while replay
                            .marks
                            .get(next_mark)
                            .is_some_and(|&m| m <= clock - clock0)
                        {
                            slot.fresh = Some(make()?);
                            next_mark += 1;
                        }
                    }
                    let k = clock - clock0;
                    let ctx = WriteCtx {
                        time: page_time(k, clock),
                        lpn: lpn + i,
                        pages: 1,
                        file,
                        file_page: file_page + i,
                        signature,
                        app_hint,
                        death: replay.death(k).map(|d| d + clock0),
                        write_death: typical.map(|l| k + clock0 + l),
                    };
                    let policy = slot.get();
                    let stream: StreamId = policy.place(&ctx).min(streams - 1);
                    sink(
                        PassEvent::Page {
                            index,
                            lpn: lpn + i,
                            stream,
                            k,
                            signature,
                            class,
                        },
                        policy,
                    )?;
                    clock += 1;
                }
            }
            Op::Trim { lpn, pages } => {
                let mut done = 0;
                while done < pages {
                    let n = (pages - done).min(u64::from(u32::MAX)) as u32;
                    slot.get().trim(lpn + done, n, op_time(index, clock));
                    done += u64::from(n);
                }
                sink(PassEvent::Trim { index, lpn, pages }, slot.get())?;
            }
            Op::InvalidateFile {
                file,
                first_page,
                pages,
            } => slot
                .get()
                .invalidate_file(file, first_page, pages, op_time(index, clock)),
        }
    }
    Ok(clock)
}
