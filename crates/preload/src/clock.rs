//! Event timestamps: `CLOCK_MONOTONIC` nanoseconds, cheaply.
//!
//! `clock_gettime` costs ~60 ns in a VM, more than half the per-write
//! budget. Each thread reads it precisely at the start of every batch and
//! anchors `(tsc, ns)`; later events of the batch interpolate with `rdtsc`
//! and a process-wide TSC rate calibrated against `CLOCK_MONOTONIC` (first
//! after ~8 ms, then refined as the span since initialisation doubles).
//! Batches live ≤ `PCSTREAM_FLUSH_MS`, so interpolation error stays in the
//! microseconds. Without an invariant TSC (`constant_tsc` and `nonstop_tsc`
//! in /proc/cpuinfo) every event reads `clock_gettime`.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static USE_TSC: AtomicBool = AtomicBool::new(false);
static BASE_TSC: AtomicU64 = AtomicU64::new(0);
static BASE_NS: AtomicU64 = AtomicU64::new(0);
/// Nanoseconds per TSC tick as 32.32 fixed point (0 = not calibrated yet).
static RATE: AtomicU64 = AtomicU64::new(0);
/// TSC span the current RATE was measured over.
static SPAN: AtomicU64 = AtomicU64::new(0);

const FIRST_SPAN_TICKS: u64 = 1 << 24; // ~8 ms at 2 GHz

thread_local! {
    /// This thread's anchor `(tsc, ns)`; tsc 0 = none.
    static ANCHOR: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

#[inline(always)]
fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86_64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Precise `CLOCK_MONOTONIC` in nanoseconds (vDSO).
#[inline]
pub fn precise_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sets the calibration base (library constructor). Reads /proc/cpuinfo.
pub fn init() {
    let invariant = std::fs::read_to_string("/proc/cpuinfo")
        .map(|s| {
            let flags = s.lines().find(|l| l.starts_with("flags")).unwrap_or("");
            let has = |f: &str| flags.split_whitespace().any(|x| x == f);
            has("constant_tsc") && has("nonstop_tsc")
        })
        .unwrap_or(false);
    BASE_TSC.store(rdtsc(), Ordering::Relaxed);
    BASE_NS.store(precise_ns(), Ordering::Relaxed);
    USE_TSC.store(invariant, Ordering::Release);
}

/// A precise reading that also re-anchors this thread (batch start) and
/// refines the process-wide rate.
pub fn anchor_ns() -> u64 {
    let t = rdtsc();
    let ns = precise_ns();
    if USE_TSC.load(Ordering::Acquire) {
        ANCHOR.with(|a| a.set((t, ns)));
        let span = t.wrapping_sub(BASE_TSC.load(Ordering::Relaxed));
        let have = SPAN.load(Ordering::Relaxed);
        if span >= FIRST_SPAN_TICKS && span >= have.saturating_mul(2) && span < 1 << 62 {
            let dns = ns.saturating_sub(BASE_NS.load(Ordering::Relaxed));
            let rate = ((dns as u128) << 32) / span as u128;
            if rate > 0 && rate < 1 << 40 {
                RATE.store(rate as u64, Ordering::Relaxed);
                SPAN.store(span, Ordering::Relaxed);
            }
        }
    }
    ns
}

/// `CLOCK_MONOTONIC` nanoseconds for an event inside a batch.
#[inline]
pub fn now_ns() -> u64 {
    let rate = RATE.load(Ordering::Relaxed);
    let (t0, ns0) = ANCHOR.with(|a| a.get());
    if rate == 0 || t0 == 0 {
        return anchor_ns();
    }
    let dt = rdtsc().wrapping_sub(t0);
    if dt > 1 << 40 {
        return anchor_ns();
    }
    ns0 + ((dt as u128 * rate as u128) >> 32) as u64
}

/// Forgets this thread's anchor (fork child: its TLS is a copy).
pub fn reset_thread() {
    ANCHOR.with(|a| a.set((0, 0)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolated_time_tracks_the_clock() {
        init();
        // Let the calibration span pass, then anchor (calibrates the rate).
        std::thread::sleep(std::time::Duration::from_millis(20));
        anchor_ns();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let before = precise_ns();
        let t = now_ns();
        let after = precise_ns();
        if USE_TSC.load(Ordering::Relaxed) {
            assert!(RATE.load(Ordering::Relaxed) > 0);
        }
        // Interpolation error well under a millisecond over 5 ms.
        assert!(
            t + 200_000 >= before && t <= after + 200_000,
            "{before} {t} {after}"
        );
    }
}
