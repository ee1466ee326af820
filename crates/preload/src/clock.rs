//! Event timestamps: `CLOCK_MONOTONIC` nanoseconds, cheaply.
//!
//! `clock_gettime` costs ~60 ns in a VM, more than half the per-write
//! budget. A batch reads it precisely when it starts and keeps that
//! [`Anchor`] `(tsc, ns, rate)` in its slot; later events of the batch
//! interpolate with `rdtsc` and the process-wide TSC rate known when the
//! batch started (calibrated against `CLOCK_MONOTONIC`: first after ~8 ms,
//! then refined as the span since initialisation doubles). One rate per
//! batch keeps a batch's times ordered. Batches live ≤ `PCSTREAM_FLUSH_MS`,
//! so interpolation error stays in the microseconds. Without an invariant
//! TSC, or before the first calibration, every event reads
//! `clock_gettime`. The TSC counts as invariant when CPUID says so (leaf
//! 8000_0007h, EDX bit 8: what Linux turns into `constant_tsc` and
//! `nonstop_tsc`) or when the kernel's own clock source is `tsc`. Not
//! `/proc/cpuinfo`: the kernel formats every CPU's entry for it, ~150 µs
//! of every process's start (a build's hundreds of short processes).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static USE_TSC: AtomicBool = AtomicBool::new(false);
static BASE_TSC: AtomicU64 = AtomicU64::new(0);
static BASE_NS: AtomicU64 = AtomicU64::new(0);
/// Nanoseconds per TSC tick as 32.32 fixed point (0 = not calibrated yet).
static RATE: AtomicU64 = AtomicU64::new(0);
/// TSC span the current RATE was measured over.
static SPAN: AtomicU64 = AtomicU64::new(0);

const FIRST_SPAN_TICKS: u64 = 1 << 24; // ~8 ms at 2 GHz

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

/// Whether the TSC ticks at a constant rate in every P- and C-state:
/// CPUID's invariant-TSC bit, else the kernel using the TSC as its clock
/// source (a hypervisor may hide the bit and still give a stable TSC).
fn invariant_tsc() -> bool {
    use core::arch::x86_64::__cpuid;
    // Leaf 8000_0000h gives the highest extended leaf, asked before
    // leaf 8000_0007h.
    let bit = __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0;
    bit || std::fs::read("/sys/devices/system/clocksource/clocksource0/current_clocksource")
        .is_ok_and(|s| s.trim_ascii() == b"tsc")
}

/// Sets the calibration base (library constructor).
pub fn init() {
    let invariant = invariant_tsc();
    BASE_TSC.store(rdtsc(), Ordering::Relaxed);
    BASE_NS.store(precise_ns(), Ordering::Relaxed);
    USE_TSC.store(invariant, Ordering::Release);
}

/// A precise reading `(tsc, ns)` against which later events interpolate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Anchor {
    /// TSC at the reading.
    pub tsc: u64,
    /// `CLOCK_MONOTONIC` nanoseconds at the reading.
    pub ns: u64,
    /// Nanoseconds per tick (32.32 fixed point) for this anchor's events;
    /// 0: every event reads the clock precisely.
    pub rate: u64,
}

/// Most ticks an interpolation spans (~6 min at 3 GHz); beyond, read the clock.
const MAX_SPAN_TICKS: u64 = 1 << 40;

impl Anchor {
    /// Reads the clock precisely (a batch starts), refining the
    /// process-wide rate on the way.
    pub fn read() -> Anchor {
        let t = rdtsc();
        let ns = precise_ns();
        if !USE_TSC.load(Ordering::Acquire) {
            return Anchor {
                tsc: t,
                ns,
                rate: 0,
            };
        }
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
        Anchor {
            tsc: t,
            ns,
            rate: RATE.load(Ordering::Relaxed),
        }
    }

    /// Ticks (or nanoseconds, without a rate) in `ns` nanoseconds, capped
    /// to what an interpolation may span (computed once per batch).
    pub fn span(&self, ns: u64) -> u64 {
        if self.rate == 0 {
            return ns;
        }
        (((ns as u128) << 32) / self.rate as u128).min(MAX_SPAN_TICKS as u128) as u64
    }

    /// `CLOCK_MONOTONIC` nanoseconds now, and whether more than `span`
    /// (from [`Anchor::span`]) passed since the anchor: then the time is
    /// read precisely instead of interpolated.
    #[inline(always)]
    pub fn now(&self, span: u64) -> (u64, bool) {
        if self.rate == 0 {
            let ns = precise_ns();
            return (ns, ns.wrapping_sub(self.ns) >= span);
        }
        let dt = rdtsc().wrapping_sub(self.tsc);
        if dt >= span {
            return (precise_ns(), true);
        }
        (
            self.ns + ((dt as u128 * self.rate as u128) >> 32) as u64,
            false,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolated_time_tracks_the_clock() {
        init();
        // Let the calibration span pass, then anchor (calibrates the rate).
        std::thread::sleep(std::time::Duration::from_millis(20));
        let a = Anchor::read();
        let span = a.span(1_000_000_000);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let before = precise_ns();
        let (t, old) = a.now(span);
        let after = precise_ns();
        assert!(!old, "5 ms is within a 1 s span");
        if USE_TSC.load(Ordering::Relaxed) {
            assert!(a.rate > 0 && RATE.load(Ordering::Relaxed) > 0);
        }
        // Interpolation error well under a millisecond over 5 ms.
        assert!(
            t + 200_000 >= before && t <= after + 200_000,
            "{before} {t} {after}"
        );
        // Past the span: read precisely, and say so.
        let (t, old) = a.now(a.span(1_000_000));
        assert!(old && t >= after, "{t} {after}");
    }
}
