//! Per-thread event batches, and how an event gets into one.
//!
//! Batches live in a static pool of [`SLOTS`] slots instead of thread-locals
//! with destructors (registering a TLS destructor allocates). A thread claims
//! a slot on its first event and keeps its index in its [`Thread`] state;
//! slot states make the hot path lock-free and let another thread flush an
//! idle slot (at exit, or when its owner died).
//!
//! A write is not encoded when it happens: it is appended to the slot as a
//! fixed-size [`RawWrite`] (a timestamp and the event's fields), and the
//! records are encoded into the slot's protobuf buffer in one pass when the
//! batch is flushed, when [`RAWS`] of them are pending, or before any other
//! event of the thread is added (so the thread's events stay in order).
//! Consecutive writes that continue each other extend the last record (see
//! [`MAX_RUN`]). The bytes produced are exactly those of encoding each event
//! as it came.

use crate::clock::Anchor;
use crate::events::{encode_event, Enc, FileId, Kind, WriteEncoder};
use crate::record;
use crate::tls::{Thread, NO_SLOT};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Batch slots (threads with pending events at once).
pub const SLOTS: usize = 256;
pub use crate::events::BATCH;
/// Raw write records a slot holds before encoding them.
pub const RAWS: usize = 128;
/// Longest coalesced write run (the daemon's live-data chunk size).
pub const MAX_RUN: u64 = 1 << 20;
/// `WriteEvent.call` of a stdio write, whose runs ignore the call path
/// ([`RawWrite`]).
const STDIO: u16 = crate::events::WriteCall::Fwrite as u16;
/// Bytes a stdio run may skip: what `putc`/`fputc` (not interposed: often
/// inlined into the program) wrote to the stream between two calls.
pub const STDIO_GAP: u64 = 512;

const FREE: u32 = 0;
const IDLE: u32 = 1;
const BUSY: u32 = 2;
const SWEEP: u32 = 3;

const POOL_FULL: u32 = u32::MAX - 1;

/// A `WriteEvent` waiting to be encoded: 64 bytes, one cache line in a
/// slot's [`Raws`] (not aligned itself, so a record built on the stack
/// needs no realigned frame).
///
/// Consecutive writes of one thread that continue each other (same file,
/// signature, stream, hint and call; each starting where the previous one
/// ended) are one record, so one `WriteEvent` (time = the first write's), up
/// to [`MAX_RUN`] bytes or until anything else happens on the thread: a
/// sequential writer costs one event per run instead of one per call.
///
/// A run of stdio calls ([`STDIO`]) continues whatever call path each came
/// from, and is the first call's signature and stream: libc hands their
/// bytes to the kernel mixed in its buffer flushes, they share the file
/// and its deaths, and a program printing from many call sites (cc1
/// writing a `.s`: ~600,000 stdio calls per translation unit from
/// hundreds of call paths) would otherwise cost an event per call (docs/shim.md, "stdio").
/// Such a run also covers up to [`STDIO_GAP`] bytes between two calls,
/// which `putc` wrote unseen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct RawWrite {
    /// `Event.time_ns`.
    pub time: u64,
    /// `WriteEvent.file`.
    pub file: FileId,
    /// `WriteEvent.offset`.
    pub offset: u64,
    /// `WriteEvent.len`.
    pub len: u64,
    /// `WriteEvent.signature`.
    pub signature: u64,
    /// `WriteEvent.native_signature`: a Java write's native call path,
    /// recorded beside its Java one (`java.rs`, record mode); 0 otherwise.
    pub native: u64,
    /// `WriteEvent.stream` (a stream id: write streams and FDP placement
    /// handles are 16-bit).
    pub stream: u16,
    /// `WriteEvent.hint` (an `RWH_WRITE_LIFE_*` value or a raw node's
    /// hint: < 256).
    pub hint: u8,
    /// `WriteEvent.age_class` (`pageage.rs`: at most 127).
    pub age: u8,
    /// `WriteEvent.call`.
    pub call: u16,
    /// Writes merged into this record (`WriteEvent.calls` - 1, at most
    /// [`MAX_CONTS`]; its batch age is checked every 64).
    conts: u16,
}

/// Most continuations one record takes: a run of more calls goes on in
/// a new record (one more event per 65,536 calls of a run).
const MAX_CONTS: u16 = u16::MAX;

impl RawWrite {
    /// A record of one write (its time is set when it is added).
    pub fn new(
        file: FileId,
        offset: u64,
        len: u64,
        signature: u64,
        stream: u32,
        hint: u32,
        call: u32,
    ) -> RawWrite {
        RawWrite {
            time: 0,
            file,
            offset,
            len,
            signature,
            native: 0,
            stream: stream.min(u32::from(u16::MAX)) as u16,
            hint: hint.min(255) as u8,
            age: 0,
            call: call.min(u32::from(u16::MAX)) as u16,
            conts: 0,
        }
    }

    /// This record with age class `age` (`WriteEvent.age_class`; at most
    /// 127, one byte of varint: the encoder's entry stays < 128 bytes).
    pub fn with_age(mut self, age: u32) -> RawWrite {
        self.age = age.min(127) as u8;
        self
    }

    /// This record with the native signature recorded beside a Java one
    /// (`WriteEvent.native_signature`; 0: none).
    pub fn with_native(mut self, native: u64) -> RawWrite {
        self.native = native;
        self
    }

    /// The length of this record extended by `w`, when `w` continues it.
    #[inline(always)]
    fn continued_by(&self, w: &RawWrite) -> Option<u64> {
        if self.file != w.file
            || (self.hint, self.age, self.call) != (w.hint, w.age, w.call)
            || self.native != w.native
            || self.conts == MAX_CONTS
        {
            return None;
        }
        let end = self.offset.wrapping_add(self.len);
        let len = if (self.signature, self.stream) == (w.signature, w.stream) && end == w.offset {
            self.len + w.len
        } else if self.call == STDIO && w.offset.wrapping_sub(end) <= STDIO_GAP {
            // The gap is what putc wrote between two interposed calls.
            w.offset + w.len - self.offset
        } else {
            return None;
        };
        (len <= MAX_RUN).then_some(len)
    }

    /// `WriteEvent.calls`: the calls this record stands for when more than
    /// one (0, not encoded: one call).
    fn calls(&self) -> u64 {
        if self.conts == 0 {
            0
        } else {
            u64::from(self.conts) + 1
        }
    }

    fn fields(&self) -> [u64; 8] {
        [
            self.offset,
            self.len,
            self.signature,
            self.stream as u64,
            self.hint as u64,
            self.call as u64,
            self.age as u64,
            self.native,
        ]
    }
}

const _: () = assert!(std::mem::size_of::<RawWrite>() == 64);

/// A slot's raw records, each in its own cache line.
#[repr(C, align(64))]
struct Raws([RawWrite; RAWS]);

const NO_RAW: RawWrite = RawWrite {
    time: 0,
    file: FileId { dev: 0, ino: 0 },
    offset: 0,
    len: 0,
    signature: 0,
    native: 0,
    stream: 0,
    hint: 0,
    age: 0,
    call: 0,
    conts: 0,
};

/// A slot's bookkeeping (one cache line with the slot's state and tid).
#[derive(Debug, Clone, Copy)]
struct Head {
    /// Encoded bytes in `buf`.
    len: usize,
    /// Encoded events in `buf`.
    count: u32,
    /// Pending raw records.
    nraw: u32,
    /// Time base of the batch (read when it started).
    anchor: Anchor,
    /// How long the batch may stay pending, in the anchor's units.
    span: u64,
}

const EMPTY_HEAD: Head = Head {
    len: 0,
    count: 0,
    nraw: 0,
    anchor: Anchor {
        tsc: 0,
        ns: 0,
        rate: 0,
    },
    span: 0,
};

/// The header (state, tid, [`Head`]) in the first cache line.
#[repr(C, align(64))]
struct Slot {
    state: AtomicU32,
    tid: AtomicU32,
    /// When the pending batch started (`CLOCK_MONOTONIC` ns; 0: nothing
    /// pending), so a sweep takes only slots it will flush, not every idle
    /// slot to look at its age.
    since: AtomicU64,
    // The fields below belong to whoever moved `state` to BUSY or SWEEP.
    head: UnsafeCell<Head>,
    raws: UnsafeCell<Raws>,
    /// The thread's last write record once encoded (a drain), kept so a
    /// stdio run cut by a flush goes on from where it ended
    /// ([`push_new_write`]).
    tail: UnsafeCell<RawWrite>,
    buf: UnsafeCell<[u8; BATCH]>,
}

// SAFETY: the UnsafeCell fields are only touched by the thread that won the
// state transition to BUSY/SWEEP (exclusive ownership by protocol).
unsafe impl Sync for Slot {}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    state: AtomicU32::new(FREE),
    tid: AtomicU32::new(0),
    since: AtomicU64::new(0),
    head: UnsafeCell::new(EMPTY_HEAD),
    raws: UnsafeCell::new(Raws([NO_RAW; RAWS])),
    tail: UnsafeCell::new(NO_RAW),
    buf: UnsafeCell::new([0; BATCH]),
};

static POOL: [Slot; SLOTS] = [EMPTY; SLOTS];
/// Slots claimed so far (the highest index + 1; claims fill the pool from
/// its start): what sweeps, reclaims and a fork child look at. Each slot is
/// ~25 KiB, so touching all 256 at every process exit (the final sweep) or
/// fork cost a page fault apiece, ~0.3 ms a process.
static USED: AtomicUsize = AtomicUsize::new(0);

/// The slots claimed so far.
#[inline]
fn used() -> &'static [Slot] {
    &POOL[..USED.load(Ordering::Acquire).min(SLOTS)]
}
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// A slot held by this thread (state BUSY or SWEEP): its cells are ours
/// until [`Held::release`] (or drop).
struct Held {
    slot: &'static Slot,
}

impl Held {
    /// The thread's last drained write record ([`Slot::tail`]).
    fn tail(&mut self) -> &mut RawWrite {
        // SAFETY: held, as in `parts`.
        unsafe { &mut *self.slot.tail.get() }
    }

    /// The slot's cells (one borrow at a time: `&mut self`).
    #[inline(always)]
    fn parts(&mut self) -> (&mut Head, &mut [RawWrite; RAWS], &mut [u8; BATCH]) {
        // SAFETY: held (BUSY/SWEEP): the cells are exclusively ours, and
        // `&mut self` keeps these borrows the only ones.
        unsafe {
            (
                &mut *self.slot.head.get(),
                &mut (*self.slot.raws.get()).0,
                &mut *self.slot.buf.get(),
            )
        }
    }
}

impl Drop for Held {
    #[inline(always)]
    fn drop(&mut self) {
        self.slot.state.store(IDLE, Ordering::Release);
    }
}

/// Events dropped so far (no slot, busy slot, failed send).
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Counts `n` dropped events.
pub fn count_dropped(n: u64) {
    DROPPED.fetch_add(n, Ordering::Relaxed);
}

fn thread_alive(tid: u32) -> bool {
    // SAFETY: signal 0 only checks existence; getpid has no preconditions.
    let r = unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid as i64, 0) };
    !(r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH))
}

/// Claims a slot for thread `tid`: its index + 1 (what [`Thread::slot`]
/// holds), or [`POOL_FULL`].
fn claim(tid: u32) -> u32 {
    for (i, s) in POOL.iter().enumerate() {
        if s.state
            .compare_exchange(FREE, IDLE, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            s.tid.store(tid, Ordering::Relaxed);
            USED.fetch_max(i + 1, Ordering::AcqRel);
            return i as u32 + 1;
        }
    }
    // Reclaim the slot of a thread that exited.
    for (i, s) in used().iter().enumerate() {
        let owner = s.tid.load(Ordering::Relaxed);
        if owner != tid
            && s.state.load(Ordering::Relaxed) == IDLE
            && !thread_alive(owner)
            && s.state
                .compare_exchange(IDLE, SWEEP, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            let mut h = Held { slot: s };
            flush(&mut h);
            *h.tail() = NO_RAW; // the dead thread's run is not ours
            s.tid.store(tid, Ordering::Relaxed);
            return i as u32 + 1;
        }
    }
    POOL_FULL
}

/// Takes this thread's slot (claiming one on first use); `None` when the
/// pool is full (or another thread's sweep of it never ends).
#[inline(always)]
fn acquire(t: &Thread) -> Option<Held> {
    let mut idx = t.slot.get();
    if idx == NO_SLOT {
        idx = claim(t.tid());
        t.slot.set(idx);
    }
    let slot = POOL.get(idx.wrapping_sub(1) as usize)?;
    if slot
        .state
        .compare_exchange(IDLE, BUSY, Ordering::Acquire, Ordering::Relaxed)
        .is_ok()
    {
        return Some(Held { slot });
    }
    acquire_contended(slot)
}

/// How long a thread waits for its own slot while another thread sweeps it
/// before the event is dropped (and counted).
const SWEEP_WAIT_NS: u64 = 2_000_000_000;

/// [`acquire`] when the thread's own slot is not idle: another thread is
/// sweeping it (flushing it: a bounded piece of work, an `open`, a `writev`
/// and a `close`), so wait for it rather than drop the event.
///
/// The wait is bounded by *time*, not by a number of tries: on a loaded
/// machine (or a shared VM whose vCPU is descheduled) a sweeper can be off
/// the CPU for tens of milliseconds in the middle of its flush, while the
/// waiting thread, alone on its CPU, gets each `sched_yield` back at once;
/// the former bound of 16,384 yields (a few ms) ran out there and the event
/// was dropped (issue #11: 1 dropped event in 100 contended runs). So:
/// spin briefly, then yield, then sleep 50 µs at a time (an idle CPU lets the
/// scheduler move the preempted sweeper to it), up to [`SWEEP_WAIT_NS`] (a
/// sweeper that never finishes, e.g. stopped by a debugger: the event is
/// dropped and counted). Not a lock: no thread ever waits for one that waits
/// for it (the sweeper only takes idle slots and never waits), and
/// async-signal-safe (atomics, `clock_gettime`, `sched_yield`, `nanosleep`).
#[cold]
#[inline(never)]
fn acquire_contended(slot: &'static Slot) -> Option<Held> {
    let mut deadline = 0u64;
    let mut i = 0u32;
    loop {
        match slot
            .state
            .compare_exchange(IDLE, BUSY, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => return Some(Held { slot }),
            Err(SWEEP) => {}
            // BUSY: this thread holds it itself (a signal handler under a
            // held slot cannot get here: the guard stops it first).
            Err(_) => return None,
        }
        i = i.saturating_add(1);
        if i < 64 {
            std::hint::spin_loop();
            continue;
        }
        let now = crate::clock::precise_ns();
        if deadline == 0 {
            deadline = now + SWEEP_WAIT_NS;
        } else if now > deadline {
            return None;
        }
        if i < 256 {
            // SAFETY: sched_yield has no preconditions.
            unsafe { libc::sched_yield() };
        } else {
            let ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 50_000,
            };
            // SAFETY: a plain relative sleep; EINTR only shortens it.
            unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
        }
    }
}

/// Tries to take any slot (idle) for a flush by another thread.
fn acquire_idle(slot: &'static Slot) -> Option<Held> {
    if slot.state.load(Ordering::Relaxed) != IDLE {
        return None;
    }
    slot.state
        .compare_exchange(IDLE, SWEEP, Ordering::Acquire, Ordering::Relaxed)
        .ok()?;
    Some(Held { slot })
}

/// Encodes the pending raw records at the end of the buffer, emitting the
/// buffer whenever it fills up.
fn drain(h: &mut Held) {
    let tid = h.slot.tid.load(Ordering::Relaxed);
    let (head, raws, buf) = h.parts();
    let nraw = head.nraw as usize;
    if nraw == 0 {
        return;
    }
    head.nraw = 0;
    let last = raws[nraw - 1];
    let mut enc = WriteEncoder::new(tid);
    for r in &raws[..nraw] {
        let w = r.fields();
        if let Some(n) = enc.entry(&mut buf[head.len..], r.time, r.file, &w, r.calls()) {
            head.len += n;
            head.count += 1;
            continue;
        }
        emit(head, buf);
        match enc.entry(&mut buf[..], r.time, r.file, &w, r.calls()) {
            Some(n) => {
                head.len = n;
                head.count = 1;
            }
            None => count_dropped(1),
        }
    }
    *h.tail() = last;
}

/// Sends/records the encoded part of the batch and empties it.
fn emit(head: &mut Head, buf: &[u8; BATCH]) {
    if head.len > 0 && !record::emit_batch(&buf[..head.len], head.count) {
        count_dropped(head.count as u64);
    }
    head.len = 0;
    head.count = 0;
}

/// Encodes, sends/records everything pending and empties the slot.
fn flush(h: &mut Held) {
    drain(h);
    let (head, _, buf) = h.parts();
    emit(head, buf);
    h.slot.since.store(0, Ordering::Relaxed);
}

/// The batch is empty: starts it (reads the clock precisely); its time.
#[inline]
fn start(since: &AtomicU64, head: &mut Head, flush_ns: u64) -> u64 {
    head.anchor = Anchor::read();
    head.span = head.anchor.span(flush_ns);
    since.store(head.anchor.ns.max(1), Ordering::Relaxed);
    head.anchor.ns
}

/// The time of a new event, and whether the batch is old (its time read
/// precisely then). Starts the batch when empty.
#[inline(always)]
fn event_time(since: &AtomicU64, head: &mut Head, flush_ns: u64) -> (u64, bool) {
    if head.len == 0 && head.nraw == 0 {
        return (start(since, head, flush_ns), false);
    }
    head.anchor.now(head.span)
}

/// After adding an event: flushes when asked to or when the batch is old
/// (then also other threads' idle old batches).
#[inline(always)]
fn finish(mut h: Held, now: u64, old: bool, flush_ns: u64, force: bool) {
    if old {
        crate::live::check(now, flush_ns);
    }
    if force || old {
        flush(&mut h);
        drop(h);
        if !force {
            sweep(Some(now.saturating_sub(flush_ns)));
        }
    }
}

/// Adds a write to this thread's batch: extends the last record when the
/// write continues it (no clock read), else appends a record. Nothing is
/// encoded here. The continuation is inline (what a sequential writer
/// does); the rest is out of line.
#[inline(always)]
pub fn push_write(t: &Thread, w: RawWrite, flush_ns: u64, force: bool) {
    let Some(mut h) = acquire(t) else {
        count_dropped(1);
        return;
    };
    let (head, raws, _) = h.parts();
    let n = head.nraw as usize;
    if n > 0 {
        let last = &mut raws[n - 1];
        if let Some(len) = last.continued_by(&w) {
            last.len = len;
            last.conts = last.conts.wrapping_add(1);
            // A continuation costs no clock read; the batch age is checked
            // every 64 of them.
            if force || last.conts % 64 == 0 {
                check_age(h, flush_ns, force);
            }
            return;
        }
    }
    push_new_write(h, w, flush_ns, force);
}

/// The batch age check of [`push_write`] after a continuation.
#[inline(never)]
fn check_age(mut h: Held, flush_ns: u64, force: bool) {
    let (head, _, _) = h.parts();
    let (now, old) = head.anchor.now(head.span);
    finish(h, now, old, flush_ns, force);
}

/// [`push_write`] of a write that continues nothing: a new record.
#[inline(never)]
fn push_new_write(mut h: Held, mut w: RawWrite, flush_ns: u64, force: bool) {
    if h.parts().0.nraw as usize == RAWS {
        drain(&mut h);
    }
    if w.call == STDIO {
        // A stdio run cut by a flush or by MAX_RUN goes on from where its
        // last event ended: the bytes putc wrote in between are the run's
        // whatever the cut (as when it was not cut).
        let (head, raws, _) = h.parts();
        let prev = match head.nraw as usize {
            0 => *h.tail(),
            n => raws[n - 1],
        };
        let end = prev.offset.wrapping_add(prev.len);
        let gap = w.offset.wrapping_sub(end);
        // The same run: the same signature on the same file (a stream or
        // hint that changed in between, a re-clustering under a live
        // mapping, cut the event, not the run).
        if prev.call == STDIO
            && (prev.file, prev.signature) == (w.file, w.signature)
            && gap > 0
            && gap <= STDIO_GAP
        {
            w.offset = end;
            w.len += gap;
        }
    }
    let slot = h.slot;
    let (head, raws, _) = h.parts();
    let (now, old) = event_time(&slot.since, head, flush_ns);
    let slot = &mut raws[head.nraw as usize];
    *slot = w;
    slot.time = now;
    head.nraw += 1;
    finish(h, now, old, flush_ns, force);
}

/// Appends one `EventBatch.events` entry (tag and length included) that
/// `enc(buf, now)` writes at the start of `buf`, returning its size (`None`:
/// it did not fit), after the pending writes.
fn push_encoded(
    t: &Thread,
    flush_ns: u64,
    force: bool,
    enc: impl Fn(&mut [u8], u64) -> Option<usize>,
) {
    let Some(mut h) = acquire(t) else {
        count_dropped(1);
        return;
    };
    drain(&mut h); // keep the thread's events in order
    let slot = h.slot;
    let (head, _, buf) = h.parts();
    let (now, old) = event_time(&slot.since, head, flush_ns);
    if let Some(n) = enc(&mut buf[head.len..], now) {
        head.len += n;
        head.count += 1;
    } else if head.len > 0 {
        emit(head, buf); // full: emit, retry once in the empty buffer
        match enc(&mut buf[..], now) {
            Some(n) => {
                head.len = n;
                head.count = 1;
            }
            None => count_dropped(1),
        }
    } else {
        count_dropped(1);
    }
    finish(h, now, old, flush_ns, force);
}

/// Adds one event to this thread's batch (flushing it when old or when
/// `force`). `flush_ns`: the age after which the batch is flushed.
pub fn push(t: &Thread, kind: &Kind<'_>, flush_ns: u64, force: bool) {
    if let Kind::Write {
        file,
        offset,
        len,
        signature,
        stream,
        hint,
        call,
        age_class,
        native_signature,
    } = *kind
    {
        let w = RawWrite::new(file, offset, len, signature, stream, hint, call as u32)
            .with_age(age_class)
            .with_native(native_signature);
        push_write(t, w, flush_ns, force);
        return;
    }
    let tid = t.tid();
    if let Kind::Process { exe, argv, .. } = kind {
        if !exe.is_empty() || !argv.is_empty() {
            // Not a hot-path event (start): argv may be long.
            let now = crate::clock::precise_ns();
            let mut heap = vec![0u8; BATCH];
            let mut e = Enc::new(&mut heap);
            encode_event(&mut e, now, tid, kind);
            if !e.ok() {
                count_dropped(1);
                return;
            }
            let n = e.bytes().len();
            push_encoded(t, flush_ns, force, |buf, _| {
                let mut e = Enc::new(buf);
                e.bytes_always(3, &heap[..n]);
                e.ok().then(|| e.bytes().len())
            });
            return;
        }
    }
    // Everything else (fork child and exit included: also from `_exit`,
    // maybe in a signal handler) is small: encoded in place, no allocation.
    push_encoded(t, flush_ns, force, |buf, now| {
        let mut e = Enc::new(buf);
        e.message(3, |e| encode_event(e, now, tid, kind));
        e.ok().then(|| e.bytes().len())
    });
}

/// This thread's slot, taken from idle (`None`: it has none yet, or
/// another thread is sweeping it).
fn mine_idle(t: &Thread) -> Option<Held> {
    POOL.get(t.slot.get().wrapping_sub(1) as usize)
        .and_then(acquire_idle)
}

/// Flushes this thread's pending batch, if any.
pub fn flush_mine(t: &Thread) {
    if let Some(mut h) = mine_idle(t) {
        flush(&mut h);
    }
}

/// Flushes this thread's pending batch if it started at least `age_ns` ago
/// (what `fsync`/`fdatasync` do: a server syncing at every commit would
/// otherwise send a batch per transaction, see [`crate::state::SYNC_FLUSH_NS`]).
pub fn flush_mine_older(t: &Thread, age_ns: u64) {
    if let Some(mut h) = mine_idle(t) {
        let (head, _, _) = h.parts();
        if head.len == 0 && head.nraw == 0 {
            return;
        }
        let (_, old) = head.anchor.now(head.anchor.span(age_ns));
        if old {
            flush(&mut h);
        }
    }
}

/// Flushes every idle slot whose batch started before `older_than` (all idle
/// slots when `None`), e.g. at exit or for threads that went quiet.
pub fn sweep(older_than: Option<u64>) {
    for s in used() {
        // An age sweep skips, without taking them, slots with nothing old
        // pending (`since` may be stale: the owner or a later sweep flushes
        // them); the final sweep (`None`) looks at every idle slot.
        if let Some(t) = older_than {
            let since = s.since.load(Ordering::Relaxed);
            if since == 0 || since > t {
                continue;
            }
        }
        let Some(mut h) = acquire_idle(s) else {
            continue;
        };
        let (head, _, _) = h.parts();
        let pending = head.len > 0 || head.nraw > 0;
        if pending && older_than.is_none_or(|t| head.anchor.ns <= t) {
            flush(&mut h);
        }
    }
}

/// In a fork child: forget the parent's batches and threads.
pub fn after_fork_child(t: &Thread) {
    for s in used() {
        // SAFETY: the child is single-threaded right after fork; nobody else
        // can own a slot's cells.
        unsafe {
            *s.head.get() = EMPTY_HEAD;
            *s.tail.get() = NO_RAW;
        }
        s.since.store(0, Ordering::Relaxed);
        s.state.store(FREE, Ordering::Relaxed);
        s.tid.store(0, Ordering::Relaxed);
    }
    USED.store(0, Ordering::Release);
    t.reset_after_fork();
    DROPPED.store(0, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{InvalidateKind, WriteCall};
    use pcstream_placement::wire;
    use prost::Message;

    /// This thread's pending events, encoded (as a flush would) and decoded.
    fn pending(t: &Thread) -> Vec<wire::Event> {
        let mut h = acquire(t).expect("this thread's slot");
        drain(&mut h);
        let (head, _, buf) = h.parts();
        let b = wire::EventBatch::decode(&buf[..head.len]).expect("prost decodes the batch");
        assert_eq!(b.events.len(), head.count as usize);
        b.events
    }

    #[test]
    fn writes_are_encoded_later_in_order_and_runs_coalesce() {
        crate::clock::init();
        crate::tls::with(|t| {
            let f = FileId { dev: 1, ino: 2 };
            let w = |offset, len, sig| {
                RawWrite::new(f, offset, len, sig, 1, 2, WriteCall::Pwrite as u32)
            };
            push_write(t, w(0, 4096, 9), u64::MAX, false);
            push_write(t, w(4096, 4096, 9), u64::MAX, false); // continues the run
            push_write(t, w(8192, 1, 8), u64::MAX, false); // other signature
            let inv = Kind::Invalidate {
                file: f,
                kind: InvalidateKind::Unlink,
                offset: 0,
                len: 5,
            };
            push(t, &inv, u64::MAX, false);
            // More scattered writes than a slot holds raw.
            let more = RAWS as u64 + 10;
            for i in 0..more {
                push_write(t, w(1 << 30 | i << 20, 7, 9), u64::MAX, false);
            }
            let ev = pending(t);
            assert_eq!(ev.len(), 3 + more as usize);
            let write = |e: &wire::Event| match &e.kind {
                Some(wire::event::Kind::Write(w)) => (w.offset, w.len, w.signature),
                k => panic!("not a write: {k:?}"),
            };
            assert_eq!(write(&ev[0]), (0, 8192, 9));
            assert_eq!(write(&ev[1]), (8192, 1, 8));
            assert!(matches!(ev[2].kind, Some(wire::event::Kind::Invalidate(_))));
            for (i, e) in ev[3..].iter().enumerate() {
                assert_eq!(write(e), (1 << 30 | (i as u64) << 20, 7, 9));
            }
            let Some(wire::event::Kind::Write(w0)) = &ev[0].kind else {
                unreachable!()
            };
            assert_eq!(
                (w0.file, w0.stream, w0.hint, w0.call, w0.calls),
                (
                    Some(wire::FileId { dev: 1, ino: 2 }),
                    1,
                    2,
                    WriteCall::Pwrite as i32,
                    2
                )
            );
            assert!(ev.iter().all(|e| e.tid == t.tid()));
            assert!(ev.windows(2).all(|p| p[0].time_ns <= p[1].time_ns));
            assert!(ev[0].time_ns > 0);
        });
    }

    #[test]
    fn a_stdio_run_is_one_event_whatever_call_paths_wrote_it() {
        crate::clock::init();
        crate::tls::with(|t| {
            let f = FileId { dev: 5, ino: 6 };
            let w = |offset, sig, stream, hint, call: WriteCall| {
                RawWrite::new(f, offset, 10, sig, stream, hint, call as u32)
            };
            // stdio: three call paths (one mapped to stream 3), one hint.
            push_write(t, w(0, 7, 0, 4, WriteCall::Fwrite), u64::MAX, false);
            push_write(t, w(10, 8, 3, 4, WriteCall::Fwrite), u64::MAX, false);
            push_write(t, w(20, 9, 0, 4, WriteCall::Fwrite), u64::MAX, false);
            // The inode's hint changed: a new run.
            push_write(t, w(30, 9, 0, 2, WriteCall::Fwrite), u64::MAX, false);
            // 10 bytes that putc wrote, then a call: the same run.
            push_write(t, w(50, 9, 0, 2, WriteCall::Fwrite), u64::MAX, false);
            // Sought past the gap: a new run.
            push_write(t, w(1000, 9, 0, 2, WriteCall::Fwrite), u64::MAX, false);
            // write(2) from two call paths: two events.
            push_write(t, w(1010, 7, 0, 2, WriteCall::Write), u64::MAX, false);
            push_write(t, w(1020, 8, 0, 2, WriteCall::Write), u64::MAX, false);
            let ev: Vec<_> = pending(t)
                .into_iter()
                .map(|e| match e.kind {
                    Some(wire::event::Kind::Write(w)) => {
                        (w.offset, w.len, w.signature, w.stream, w.hint, w.calls)
                    }
                    k => panic!("not a write: {k:?}"),
                })
                .collect();
            assert_eq!(
                ev,
                [
                    (0, 30, 7, 0, 4, 3),
                    (30, 30, 9, 0, 2, 2),
                    (1000, 10, 9, 0, 2, 0),
                    (1010, 10, 7, 0, 2, 0),
                    (1020, 10, 8, 0, 2, 0)
                ]
            );
        });
    }

    #[test]
    fn a_stdio_run_cut_by_a_flush_goes_on_from_where_it_ended() {
        crate::clock::init();
        crate::tls::with(|t| {
            let f = FileId { dev: 7, ino: 8 };
            let w = |offset, len, sig| {
                RawWrite::new(f, offset, len, sig, 2, 3, WriteCall::Fwrite as u32)
            };
            push_write(t, w(0, 10, 7), u64::MAX, false);
            push_write(t, w(10, 10, 7), u64::MAX, false);
            flush_mine(t);
            assert!(pending(t).is_empty());
            // 5 bytes further on (putc's), the run's signature (track.rs
            // gives a continuing call the run's): the new event starts where
            // the flushed one ended, so the run's bytes do not depend on
            // when it was flushed.
            push_write(t, w(25, 10, 7), u64::MAX, false);
            // Past the gap, or another file: its own offset.
            push_write(t, w(35 + STDIO_GAP + 1, 10, 7), u64::MAX, false);
            let ev: Vec<_> = pending(t)
                .into_iter()
                .map(|e| match e.kind {
                    Some(wire::event::Kind::Write(w)) => (w.offset, w.len, w.signature),
                    k => panic!("not a write: {k:?}"),
                })
                .collect();
            assert_eq!(ev, [(20, 15, 7), (35 + STDIO_GAP + 1, 10, 7)]);
        });
    }

    #[test]
    fn a_forced_push_flushes_everything() {
        crate::clock::init();
        crate::tls::with(|t| {
            let f = FileId { dev: 3, ino: 4 };
            push_write(t, RawWrite::new(f, 0, 1, 5, 0, 0, 1), u64::MAX, false);
            push_write(t, RawWrite::new(f, 9, 1, 5, 0, 0, 1), u64::MAX, true);
            assert!(pending(t).is_empty());
        });
    }
}
