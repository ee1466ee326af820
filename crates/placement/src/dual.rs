//! [`PcStreamDual`]: `pcstream` as the simulator runs it, two learners
//! (file-keyed and LBA-keyed) over the same writes, placing with the one
//! whose streams the device's deaths agree with, and predicting each
//! stream's lifetime *on the device* from those deaths. Replay only: the
//! daemon sees no LBAs and runs one file-keyed [`PcStream`].

use crate::gc_age::AgeClasses;
use crate::mapper::nearest_stream;
use crate::pcstream::{PcStream, PcStreamConfig};
use crate::placement::{Placement, StreamId, WriteCtx};
use crate::write_count::WriteCounts;

/// `pcstream` as the simulator runs it: two learners over the same writes,
/// one keyed by file page (the lifetimes the shim sees: overwrites, unlinks,
/// truncates) and one by LBA (the lifetimes the device sees: overwrites of
/// the LBA and TRIMs), each refined the same way. Every write goes to both;
/// it is placed by the one whose streams hold data that dies together *on
/// the device*: for each LBA the dual policy remembers when it was written
/// and which stream each learner chose, and when the device sees it die
/// (overwrite or TRIM) it adds log2(lifetime) to that stream's statistics,
/// per learner. The learner with the lower pooled within-stream variance
/// places, re-decided every [`DECIDE_EVERY`] pages; a tie (within
/// [`LBA_PREFERENCE`]) goes to the LBA learner, the device's own view.
/// Where the file system reuses freed blocks soon (SQLite's journal) the
/// device's view is the sharper one; where files die whole at unrelated
/// LBAs (RocksDB's tables) the file view is.
///
/// The same deaths make its *prediction*: the lifetime a page placed in a
/// stream will have on the device is that stream's recent device lifetime
/// ([`PcStreamDual::device_lifetimes`]: the median of the lifetimes of the
/// last ≈ [`DEVICE_WINDOW`] pages that died from it, which minimises the
/// median factor between prediction and lifetime). The learners cluster by the
/// lifetimes they hear (the file view orders deaths best where files die
/// whole: clustering the file learner's keys by their device lifetimes
/// instead cost RocksDB 0.009 WAF at the paper's scale, docs/placement.md),
/// and the device's deaths say how long each cluster really lives, in the
/// setting being placed for: with TRIM a deleted file's pages die with it,
/// without they die when the file system reuses their blocks.
///
/// Memory: 10 bytes per LBA below 2^28 (LBAs above are not scored); the
/// GC hook reads the LBA learner's write history (12 bytes per LBA).
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
    /// Per learner, per stream: recent device lifetimes.
    device: [Vec<DeviceLives>; 2],
    next_decision: u64,
    switches: u64,
    gc_by_age: bool,
    /// [`PcStreamDual::placed_for`] as of the latest decision (the GC hook
    /// and [`PcStreamDual::placed_for_handle`] read it).
    placed_for_now: std::sync::Arc<std::sync::Mutex<Vec<f64>>>,
    /// `use_lba`, for [`PcStreamDual::uses_lba_handle`].
    uses_lba_now: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Stream ids of the device (the learners get fewer with `gc_streams`).
    streams: u32,
    /// Stream ids kept for GC copies by age (`gc_streams`), the last ones.
    gc_streams: u32,
    /// Whether the GC streams are in use (the GC hook is offered): from
    /// the start, or once copies reach [`GC_STREAMS_FROM`] of the
    /// device's writes, recently and since its first copy (GC streams on
    /// demand).
    gc_on: bool,
    /// Recent share of GC copies in the device's writes (decayed over
    /// [`GC_SHARE_REPORTS`] device reports); `None` before the device's
    /// first copy.
    gc_share: Option<f64>,
    /// Host pages and GC copies the device reported since its first copy
    /// (the lasting share, beside the recent one).
    since_first_copy: (u64, u64),
    /// Time of the latest write.
    last_time: u64,
    /// Stream ids the learners place in now.
    host_n: u32,
    /// whether `gc_streams` are kept on demand (the default).
    on_demand: bool,
    /// The LBA learner's per-LBA write history, for the GC hook
    /// (`gc_streams` without `gc_age_only`).
    rates: Option<std::sync::Arc<std::sync::Mutex<WriteCounts>>>,
}

/// [`PcStreamDual`]'s GC placement (`gc_by_age`).
#[derive(Debug)]
struct AgeGc {
    /// What each stream `1..` stands for, log2 pages (the dual's
    /// `placed_for_now`).
    placed_for: std::sync::Arc<std::sync::Mutex<Vec<f64>>>,
}

impl crate::placement::GcPlacement for AgeGc {
    fn collected(&mut self, _stream: Option<StreamId>, _opened: u64, _now: u64) {}

    fn place_gc(
        &mut self,
        stream: Option<StreamId>,
        _lpn: u64,
        written: u64,
        now: u64,
    ) -> StreamId {
        let c = self.placed_for.lock().unwrap_or_else(|e| e.into_inner());
        if c.is_empty() {
            return stream.unwrap_or(0);
        }
        let x = (now.saturating_sub(written).max(1) as f64 * 2.0).log2();
        nearest_stream(&c, x).unwrap_or(stream.unwrap_or(0))
    }
}

/// How much lower the file learner's pooled variance must be than the LBA
/// learner's for [`PcStreamDual`] to place with it: a tie goes to the LBA
/// learner, whose streams are the ones the device's GC sees die. The
/// variance of log2 device lifetimes cannot tell the learners apart on
/// SQLite's WAL (7.20 against 7.19, both ways in turn, while the LBA
/// learner's placement gives 1.020 with internal streams and the file
/// learner's 1.033). 5%: measured at 1, 2, 3, 5, 10 and 20% with the
/// EWMA estimate alone (1% kept: 2% and more lost the in-place scenario
/// on its one seed then) and at 0, 1, 5, 10 and 20% with partly censored
/// keys (Little's law): 5% takes sqlite-wal with internal streams from
/// 1.014 to 1.009 and the in-place scenario's mean of eight seeds from
/// 2.746 to 2.728, the rest of the tuning set unchanged; 10% moves
/// mixed-sqlite-gcc, 20% RocksDB, whose file learner is 20–30% lower
/// (docs/placement-log.md, "A tie goes to the LBA learner" and "The LBA
/// learner's 5 % with partly censored keys").
pub const LBA_PREFERENCE: f64 = 0.05;

/// Whether the LBA learner places, given the pooled variances of the file
/// learner's (`file`) and its own (`lba`) streams ([`LBA_PREFERENCE`]).
fn lba_places(file: f64, lba: f64) -> bool {
    lba < file * (1.0 + LBA_PREFERENCE)
}

/// Pages between two choices of [`PcStreamDual`]'s learner.
pub const DECIDE_EVERY: u64 = 16384;

/// Share of the device's writes (host pages + GC copies) that GC copies
/// must reach for [`PcStreamDual`] to keep stream ids for them (GC
/// streams on demand), over the last few device reports and since the
/// device's first copy: half of what one of 8 data streams carries.
/// Below it the ids hold more host lifetimes apart, and the device keeps
/// no extra free blocks for a GC hook, which is worth more than keeping
/// the few copies apart (docs/placement-log.md, "GC streams on demand").
pub const GC_STREAMS_FROM: f64 = 1.0 / 16.0;

/// Device reports ([`Placement::device_writes`]; the simulator's come
/// every 64 MiB of host writes) the GC share is averaged over
/// (exponential decay).
pub const GC_SHARE_REPORTS: f64 = 4.0;

/// Dead pages a stream's predicted device lifetime is taken over: a death
/// weighs `e` times less than the one `DEVICE_WINDOW` deaths after it.
pub const DEVICE_WINDOW: f64 = 65536.0;

/// Histogram bins per log2 unit of [`DeviceLives`].
const BINS_PER_LOG2: f64 = 4.0;
/// Bins of [`DeviceLives`]: lifetimes up to 2^48 pages.
const BINS: usize = 48 * BINS_PER_LOG2 as usize;

/// Exponentially decayed histogram of log2(device lifetime) of one
/// stream's dead pages; its median is the stream's prediction.
#[derive(Debug, Clone)]
struct DeviceLives {
    bins: Vec<f64>,
    /// Weight of the next death (grows by `1 + 1/DEVICE_WINDOW` per death,
    /// which decays every older one relative to it).
    next: f64,
    total: f64,
}

impl DeviceLives {
    fn new() -> Self {
        DeviceLives {
            bins: vec![0.0; BINS],
            next: 1.0,
            total: 0.0,
        }
    }

    fn add(&mut self, log2_life: f64) {
        let b = ((log2_life * BINS_PER_LOG2) as usize).min(BINS - 1);
        self.bins[b] += self.next;
        self.total += self.next;
        self.next *= 1.0 + 1.0 / DEVICE_WINDOW;
        if self.next > 1e200 {
            // Rescale before overflow; the distribution is unchanged.
            for v in &mut self.bins {
                *v *= 1e-200;
            }
            self.total *= 1e-200;
            self.next *= 1e-200;
        }
    }

    /// The weighted median, log2 pages (bin centre); NaN when empty.
    fn median(&self) -> f64 {
        if self.total <= 0.0 {
            return f64::NAN;
        }
        let mut seen = 0.0;
        for (b, v) in self.bins.iter().enumerate() {
            seen += v;
            if seen >= self.total / 2.0 {
                return (b as f64 + 0.5) / BINS_PER_LOG2;
            }
        }
        (BINS as f64 - 0.5) / BINS_PER_LOG2
    }
}

/// Largest LBA scored by [`PcStreamDual`].
const SCORED_PAGES: u64 = 1 << 28;

impl PcStreamDual {
    /// Both learners for a device with `streams` stream ids (`cfg.key_by_lba`
    /// is ignored: one of each).
    pub fn new(streams: u32, cfg: PcStreamConfig) -> Self {
        let all = streams.max(1);
        let gc_by_age = cfg.gc_by_age;
        let gc_streams = match cfg.gc_streams.unwrap_or(0) {
            g if all > g.saturating_add(2) => g,
            _ => 0,
        };
        let on_demand = gc_streams > 0;
        let streams = all - gc_streams;
        let wants_rates = gc_streams > 0 && !cfg.gc_age_only;
        let by_file = PcStream::new(
            streams,
            PcStreamConfig {
                key_by_lba: false,
                ..cfg.clone()
            },
        );
        let mut by_lba = PcStream::new(
            streams,
            PcStreamConfig {
                key_by_lba: true,
                ..cfg
            },
        );
        let rates = if wants_rates {
            by_lba.shared_write_counts()
        } else {
            None
        };
        // Every id the learners may come to use (GC streams on demand).
        let n = all as usize;
        PcStreamDual {
            gc_by_age,
            streams: all,
            gc_streams,
            gc_on: gc_streams > 0 && !on_demand,
            gc_share: None,
            since_first_copy: (0, 0),
            last_time: 0,
            host_n: streams,
            on_demand,
            placed_for_now: Default::default(),
            uses_lba_now: Default::default(),
            by_file,
            by_lba,
            use_lba: false,
            born: Vec::new(),
            chosen: Vec::new(),
            score: [vec![(0.0, 0.0, 0.0); n], vec![(0.0, 0.0, 0.0); n]],
            device: [vec![DeviceLives::new(); n], vec![DeviceLives::new(); n]],
            next_decision: DECIDE_EVERY,
            switches: 0,
            rates,
        }
    }

    /// Keeps the GC streams (`gc_streams`) from the start, whatever the
    /// GC copies' share (as before GC streams on demand, for comparison).
    pub fn gc_streams_from_start(mut self) -> Self {
        self.on_demand = false;
        self.gc_on = self.gc_streams > 0;
        self
    }

    /// Whether GC copies go to GC streams of their own now (`gc_streams`,
    /// from the start or, GC streams on demand, once they are frequent).
    pub fn gc_streams_on(&self) -> bool {
        self.gc_on
    }

    /// Stream ids the learners place host data in now (ids `0..`).
    pub fn host_streams(&self) -> u32 {
        self.host_n
    }

    fn set_host_streams(&mut self, n: u32) {
        if n != self.host_n {
            self.host_n = n;
            self.by_file.set_streams(n, self.last_time);
            self.by_lba.set_streams(n, self.last_time);
        }
    }

    /// With GC streams on demand, at each device report: the GC
    /// copies' share of the device's writes, averaged over the reports
    /// since the device's first copy (decayed over [`GC_SHARE_REPORTS`]).
    /// Once it reaches [`GC_STREAMS_FROM`], and so does their share of all
    /// the writes since that first copy, the last `gc_streams` ids go to
    /// the copies for good (the simulator asks for the GC hook again after
    /// the report and gets it). The lasting share keeps one burst of
    /// copies from taking ids from host data for the rest of a run where
    /// GC stays rare: taking them late makes the learners renumber their
    /// clusters into fewer ids (H2's MVStore, 3 % GC over its run, crossed
    /// the recent share once after a few reports at 9–10 %;
    /// docs/placement-log.md, "GC streams for a lasting share of the
    /// device's writes"). While it is below, the learners take those
    /// ids for host data (re-clustering at once, from the first report
    /// that shows copies: until session 27 only after
    /// [`GC_SHARE_REPORTS`] such reports, which on a small device kept
    /// the ids idle for much of a run; docs/placement-log.md).
    fn watch_gc(&mut self, host_pages: u64, gc_pages: u64) {
        if !self.on_demand || self.gc_on || host_pages + gc_pages == 0 {
            return;
        }
        if gc_pages == 0 && self.gc_share.is_none() {
            // The device has not collected yet.
            return;
        }
        let x = gc_pages as f64 / (host_pages + gc_pages) as f64;
        let share = match self.gc_share {
            None => x,
            Some(s) => s + (x - s) / GC_SHARE_REPORTS,
        };
        self.gc_share = Some(share);
        self.since_first_copy.0 += host_pages;
        self.since_first_copy.1 += gc_pages;
        let (host, gc) = self.since_first_copy;
        let lasting = gc as f64 / (host + gc) as f64;
        if share >= GC_STREAMS_FROM && lasting >= GC_STREAMS_FROM {
            self.gc_on = true;
            self.set_host_streams(self.streams - self.gc_streams);
        } else {
            self.set_host_streams(self.streams);
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
            let j = usize::from(self.chosen[i][v]);
            let s = &mut self.score[v][j];
            s.0 += 1.0;
            let d = x - s.1;
            s.1 += d / s.0;
            s.2 += d * (x - s.1);
            self.device[v][j].add(x);
        }
    }

    /// The placing learner's prediction of how long a page placed in
    /// stream `s` lives on the device, log2 pages, for `s` in `1..`
    /// (index `s − 1`; NaN where none of its pages has died yet).
    pub fn device_lifetimes(&self) -> Vec<f64> {
        let v = usize::from(self.use_lba);
        self.device[v]
            .iter()
            .skip(1)
            .map(DeviceLives::median)
            .collect()
    }

    fn decide(&mut self, now: u64) {
        if now < self.next_decision {
            return;
        }
        self.next_decision = now.saturating_add(DECIDE_EVERY);
        if let (Some(f), Some(l)) = (self.pooled_variance(0), self.pooled_variance(1)) {
            let lba = lba_places(f, l);
            if lba != self.use_lba {
                self.use_lba = lba;
                self.switches += 1;
                self.uses_lba_now
                    .store(lba, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let now_for = self.placed_for();
        *self
            .placed_for_now
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = now_for;
    }

    /// What each stream `1..` (index `s − 1`) is placed for now, log2
    /// pages: its device lifetime ([`PcStreamDual::device_lifetimes`]), or
    /// the placing learner's centroid where none of its pages has died
    /// yet; NaN for a stream without a cluster.
    pub fn placed_for(&self) -> Vec<f64> {
        let dev = self.device_lifetimes();
        self.placing()
            .mapper()
            .centroids()
            .iter()
            .enumerate()
            .map(|(j, &c)| match dev.get(j) {
                Some(&d) if d.is_finite() && c.is_finite() => d,
                _ => c,
            })
            .collect()
    }

    /// A handle on [`PcStreamDual::placed_for`] as of the latest choice of
    /// learner (every [`DECIDE_EVERY`] pages; empty before the first), for
    /// readers that cannot borrow the policy while it places (the GC hook,
    /// the replay's per-signature report).
    pub fn placed_for_handle(&self) -> std::sync::Arc<std::sync::Mutex<Vec<f64>>> {
        std::sync::Arc::clone(&self.placed_for_now)
    }

    /// A handle on [`PcStreamDual::uses_lba`], for readers that cannot
    /// borrow the policy while it places (the replay's per-signature
    /// report: which learner placed each page).
    pub fn uses_lba_handle(&self) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
        std::sync::Arc::clone(&self.uses_lba_now)
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
        self.last_time = w.time;
        let top = self.host_streams() - 1;
        let a = self.by_file.place(w).min(top);
        let b = self.by_lba.place(w).min(top);
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
            if !self.gc_on {
                // Asked again after each device report.
                return None;
            }
            let ages = AgeClasses::new(self.streams - self.gc_streams, self.gc_streams);
            return Some(Box::new(match &self.rates {
                Some(r) => ages.with_rates(std::sync::Arc::clone(r)),
                None => ages,
            }));
        }
        self.gc_by_age.then(|| {
            Box::new(AgeGc {
                placed_for: std::sync::Arc::clone(&self.placed_for_now),
            }) as Box<dyn crate::placement::GcPlacement + Send>
        })
    }

    fn device_writes(&mut self, host_pages: u64, gc_pages: u64) {
        self.watch_gc(host_pages, gc_pages);
    }

    /// The placing learner's reason for the latest write.
    fn placed_by(&self) -> Option<crate::placement::PlacedBy> {
        self.placing().placed_by()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut c = self.placing().counters();
        c.push(("placed_by_lba", u64::from(self.use_lba)));
        c.push(("view_switches", self.switches));
        c.push(("gc_streams_on", u64::from(self.gc_streams_on())));
        c.push((
            "gc_share_permille",
            self.gc_share.map_or(0, |x| (x * 1000.0).round() as u64),
        ));
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcstream::tests::{cfg, write};

    /// Steps `steps` of six signatures rewriting regions of 4 .. 4096
    /// pages in turn (lifetimes ×4 apart), one page per step at time
    /// `step`; the streams `p` placed them in.
    fn six_signatures(
        p: &mut PcStreamDual,
        steps: std::ops::Range<u64>,
    ) -> std::collections::BTreeSet<StreamId> {
        let mut used = std::collections::BTreeSet::new();
        for step in steps {
            let sig = 1 + step % 6;
            let span = 4u64 << (2 * (sig - 1));
            let w = WriteCtx {
                time: step,
                lpn: sig * 100_000 + (step / 6) % span,
                pages: 1,
                signature: Some(sig),
                ..Default::default()
            };
            used.insert(p.place(&w));
        }
        used
    }

    /// With `gc_streams`, the dual keeps the last stream ids for the
    /// device's GC copies: host writes land below them, and the GC hook
    /// sends a copy younger than the victims' mean lifespan to the first
    /// GC stream and an old one to the last. Without, there is no hook
    /// and host data may use every stream.
    #[test]
    fn the_dual_keeps_gc_streams_for_copies_by_age() {
        let drive = |p: &mut PcStreamDual| six_signatures(p, 0..60_000);
        let mut c = cfg();
        c.gc_streams = Some(2);
        let mut p = PcStreamDual::new(6, c).gc_streams_from_start();
        assert_eq!(p.streams(), 6);
        let used = drive(&mut p);
        assert!(used.iter().all(|&s| s < 4), "host streams {used:?}");
        assert!(used.len() >= 3, "host streams {used:?}");
        let mut hook = p.gc_placement().expect("a GC hook");
        for i in 0..16 {
            hook.collected(Some(1), 1000 * i, 1000 * i + 100);
        }
        // By age alone (an address never written).
        assert_eq!(hook.place_gc(Some(1), 7, 59_990, 60_000), 4, "young copy");
        assert_eq!(hook.place_gc(Some(1), 7, 0, 60_000), 5, "old copy");
        // And by the address's write interval: `drive` rewrote LBA 100_000
        // every 24 pages, LBA 600_000 every 24576.
        assert_eq!(hook.place_gc(Some(1), 100_000, 59_990, 60_000), 4);
        assert_eq!(hook.place_gc(Some(1), 100_000, 0, 60_000), 5);
        assert_eq!(hook.place_gc(Some(1), 600_000, 59_990, 60_000), 5);
        let mut c = cfg();
        c.gc_streams = Some(2);
        c.gc_age_only = true;
        let mut by_age = PcStreamDual::new(6, c).gc_streams_from_start();
        drive(&mut by_age);
        let mut hook = by_age.gc_placement().expect("a GC hook");
        for i in 0..16 {
            hook.collected(Some(1), 1000 * i, 1000 * i + 100);
        }
        assert_eq!(hook.place_gc(Some(1), 600_000, 59_990, 60_000), 4);

        let mut q = PcStreamDual::new(6, cfg());
        assert!(q.gc_placement().is_none());
        let used = drive(&mut q);
        assert!(used.iter().any(|&s| s >= 4), "host streams {used:?}");
    }

    /// GC streams on demand (the default): the GC streams are kept while
    /// the device has not collected and once GC copies reach
    /// [`GC_STREAMS_FROM`] of its writes; from the first report whose
    /// copies are rarer, the learners place host data in those ids too,
    /// and no GC hook is offered until copies grow frequent.
    #[test]
    fn the_dual_keeps_gc_streams_only_while_gc_copies_are_frequent() {
        let drive = |p: &mut PcStreamDual, from: u64, to: u64| six_signatures(p, from..to);
        let mut c = cfg();
        c.gc_streams = Some(2);
        let mut p = PcStreamDual::new(6, c.clone());
        let used = drive(&mut p, 0, 30_000);
        assert!(used.iter().all(|&s| s < 4), "host streams {used:?}");
        // No GC yet: nothing decided.
        p.device_writes(16_384, 0);
        assert_eq!(p.host_streams(), 4);
        assert!(p.gc_placement().is_none());
        // Copies at 1% of the writes: from that report on the learners
        // take every id, still without a hook.
        p.device_writes(16_220, 164);
        assert_eq!(p.host_streams(), 6);
        for _ in 0..GC_SHARE_REPORTS as u32 {
            p.device_writes(16_220, 164);
            assert_eq!(p.host_streams(), 6);
        }
        assert!(!p.gc_streams_on());
        assert!(p.gc_placement().is_none());
        let used = drive(&mut p, 30_000, 60_000);
        assert!(used.iter().any(|&s| s >= 4), "host streams {used:?}");
        // Copies a third of the writes: after one such report the recent
        // share is past GC_STREAMS_FROM but not yet the share since the
        // first copy; after a second, both: the GC streams come back for
        // good.
        p.device_writes(10_000, 5_000);
        assert!(!p.gc_streams_on());
        assert_eq!(p.host_streams(), 6);
        p.device_writes(10_000, 5_000);
        assert!(p.gc_streams_on());
        assert_eq!(p.host_streams(), 4);
        assert!(p.gc_placement().is_some());
        let used = drive(&mut p, 60_000, 90_000);
        assert!(used.iter().all(|&s| s < 4), "host streams {used:?}");
        p.device_writes(16_384, 0);
        assert!(p.gc_streams_on());

        // Frequent from the first copies: the hook at once.
        let mut q = PcStreamDual::new(6, c);
        drive(&mut q, 0, 30_000);
        q.device_writes(12_000, 4_000);
        assert!(q.gc_streams_on());
        assert!(q.gc_placement().is_some());
        assert_eq!(q.host_streams(), 4);
    }

    /// A burst of GC copies in a run where they stay rare (H2's MVStore:
    /// 1–2 % of the device's writes, a few reports at 10 %) lifts the
    /// recent share past [`GC_STREAMS_FROM`] but not the share since the
    /// first copy: the learners keep every id.
    #[test]
    fn a_burst_of_gc_copies_does_not_take_ids_from_host_data() {
        let mut c = cfg();
        c.gc_streams = Some(2);
        let mut p = PcStreamDual::new(6, c);
        six_signatures(&mut p, 0..30_000);
        for _ in 0..40 {
            p.device_writes(16_130, 254);
        }
        assert_eq!(p.host_streams(), 6);
        let mut recent = 0.0;
        for _ in 0..4 {
            p.device_writes(14_800, 1_584);
            recent = p.gc_share.unwrap();
        }
        assert!(recent >= GC_STREAMS_FROM, "recent share {recent}");
        assert!(!p.gc_streams_on());
        assert_eq!(p.host_streams(), 6);
        assert!(p.gc_placement().is_none());
        // Once copies are a lasting share, the GC streams come.
        for _ in 0..40 {
            p.device_writes(12_000, 4_000);
        }
        assert!(p.gc_streams_on());
        assert_eq!(p.host_streams(), 4);
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
        assert!(
            p.uses_lba_handle()
                .load(std::sync::atomic::Ordering::Relaxed),
            "the handle follows the choice"
        );
        let c: std::collections::BTreeMap<_, _> = p.counters().into_iter().collect();
        assert_eq!(c["placed_by_lba"], 1);
    }

    /// Temp files unlinked as soon as written (the file learner hears
    /// lifetimes of a few pages) whose blocks the file system reuses in
    /// order over a 16384-page region (the device sees them die 16384
    /// pages later): what the stream is placed for is the device's
    /// lifetime, not what the file learner heard.
    #[test]
    fn the_dual_predicts_the_device_lifetime_of_its_streams() {
        let region = 16_384u64;
        let mut p = PcStreamDual::new(3, cfg());
        let mut used = std::collections::BTreeSet::new();
        for t in 0..6 * region {
            let f = 1000 + t / 4;
            let w = WriteCtx {
                lpn: 100_000 + t % region,
                ..write(t, f, t % 4, 1)
            };
            used.insert(p.place(&w));
            if t % 4 == 3 {
                p.invalidate_file((1, f), 0, u64::MAX, t + 1);
            }
        }
        assert!(!p.uses_lba());
        assert!(!p
            .uses_lba_handle()
            .load(std::sync::atomic::Ordering::Relaxed));
        let s = *used.iter().max().unwrap();
        assert!(s >= 1, "never clustered: {used:?}");
        let heard = p.placing().mapper().centroids()[s as usize - 1];
        assert!(heard < 4.0, "the file learner heard {heard} (log2)");
        let dev = p.device_lifetimes()[s as usize - 1];
        let want = (region as f64).log2();
        assert!((dev - want).abs() < 0.5, "device lifetime {dev} vs {want}");
        assert_eq!(p.placed_for()[s as usize - 1], dev);
        let handle = p.placed_for_handle();
        let h = handle.lock().unwrap();
        assert!((h[s as usize - 1] - want).abs() < 0.5, "{h:?}");
    }

    /// A tie of the learners' scores goes to the LBA learner: within
    /// [`LBA_PREFERENCE`] (SQLite's WAL, the in-place scenario's 1–3%) it
    /// places; a file learner 10% lower, and RocksDB's (20% lower), keep
    /// their place.
    #[test]
    fn a_tie_goes_to_the_lba_learner() {
        assert!(lba_places(7.20, 7.19));
        assert!(lba_places(7.20, 7.25), "0.7% apart");
        assert!(lba_places(17.46, 17.38));
        assert!(lba_places(4.073, 4.123), "the in-place scenario's 1.2%");
        assert!(!lba_places(4.0, 4.4), "10% apart");
        assert!(!lba_places(1.274, 1.531), "RocksDB's file learner");
    }

    /// The prediction is the median of recent deaths: older ones fade.
    #[test]
    fn device_lives_median_follows_recent_deaths() {
        let mut d = DeviceLives::new();
        assert!(d.median().is_nan());
        for _ in 0..1000 {
            d.add(10.0);
        }
        assert!((d.median() - 10.0).abs() <= 0.25, "{}", d.median());
        for _ in 0..(3.0 * DEVICE_WINDOW) as usize {
            d.add(20.0);
        }
        assert!((d.median() - 20.0).abs() <= 0.25, "{}", d.median());
        // A huge lifetime lands in the last bin, never out of range.
        d.add(1e9);
        assert!(d.median().is_finite());
    }
}
