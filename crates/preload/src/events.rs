//! Events out of the shim: a hand-written protobuf encoder into fixed
//! buffers, and the per-thread batches they accumulate in.
//!
//! Encoding follows `proto/pcstream.proto` (`Event`, `EventBatch`) byte for
//! byte in canonical form; the tests decode the bytes with prost. Nested
//! messages are encoded into small stack buffers and copied, so nothing
//! allocates. Paths are truncated to [`MAX_PATH`] bytes.
//!
//! Batches live in a static pool of [`SLOTS`] slots instead of thread-locals
//! with destructors (registering a TLS destructor allocates). A thread claims
//! a slot on its first event and keeps its index in a const-initialised
//! thread-local; slot states make the hot path lock-free and let another
//! thread flush an idle slot (at exit, or when its owner died).

use crate::record;
use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Longest path (bytes) carried in an event.
pub const MAX_PATH: usize = 1024;
/// Batch slots (threads with pending events at once).
pub const SLOTS: usize = 256;
/// Bytes of encoded events per batch.
pub const BATCH: usize = 16 * 1024;

// ---------------------------------------------------------------------------
// Encoder
// ---------------------------------------------------------------------------

/// Appends protobuf fields to a fixed buffer; overflow sets a flag and
/// further writes are ignored.
#[derive(Debug)]
pub struct Enc<'a> {
    buf: &'a mut [u8],
    pos: usize,
    overflow: bool,
}

/// Length of `v` as a varint.
pub const fn varint_len(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    // ceil(bits / 7) for 1..=64 without a division.
    (bits * 9 + 64) / 64
}

impl<'a> Enc<'a> {
    /// An encoder writing at the start of `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Enc {
            buf,
            pos: 0,
            overflow: false,
        }
    }

    /// Bytes written so far (meaningless after overflow).
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.pos]
    }

    /// Whether everything fit.
    pub fn ok(&self) -> bool {
        !self.overflow
    }

    /// Raw bytes.
    #[inline(always)]
    pub fn raw(&mut self, b: &[u8]) {
        if self.overflow || self.buf.len() - self.pos < b.len() {
            self.overflow = true;
            return;
        }
        if b.len() <= 16 {
            // Short copies inline (a memcpy call costs more than the copy).
            for (d, s) in self.buf[self.pos..self.pos + b.len()].iter_mut().zip(b) {
                *d = *s;
            }
        } else {
            self.buf[self.pos..self.pos + b.len()].copy_from_slice(b);
        }
        self.pos += b.len();
    }

    /// A varint.
    #[inline(always)]
    pub fn varint(&mut self, mut v: u64) {
        if self.overflow || self.buf.len() - self.pos < varint_len(v) {
            self.overflow = true;
            return;
        }
        while v >= 0x80 {
            self.buf[self.pos] = (v as u8) | 0x80;
            v >>= 7;
            self.pos += 1;
        }
        self.buf[self.pos] = v as u8;
        self.pos += 1;
    }

    #[inline(always)]
    fn key(&mut self, field: u32, wire_type: u32) {
        self.varint(((field << 3) | wire_type) as u64);
    }

    /// A varint field (omitted when 0, as proto3 does).
    #[inline(always)]
    pub fn uint(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.key(field, 0);
            self.varint(v);
        }
    }

    /// An int32 field (negative values take 10 bytes, as proto3 does).
    #[inline(always)]
    pub fn int32(&mut self, field: u32, v: i32) {
        self.uint(field, v as i64 as u64);
    }

    /// A bool field.
    #[inline(always)]
    pub fn boolean(&mut self, field: u32, v: bool) {
        self.uint(field, v as u64);
    }

    /// A bytes/string field (omitted when empty).
    pub fn bytes_field(&mut self, field: u32, b: &[u8]) {
        if !b.is_empty() {
            self.key(field, 2);
            self.varint(b.len() as u64);
            self.raw(b);
        }
    }

    /// A bytes/string field that is written even when empty (repeated entries).
    pub fn bytes_always(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.raw(b);
    }

    /// A nested message encoded in place by `f`: one length byte is
    /// reserved and the body shifted in the rare case it needs more.
    #[inline(always)]
    pub fn message(&mut self, field: u32, f: impl FnOnce(&mut Self)) {
        self.key(field, 2);
        let at = self.pos;
        self.raw(&[0]);
        if self.overflow {
            return;
        }
        f(self);
        if self.overflow {
            return;
        }
        let n = self.pos - at - 1;
        if n < 0x80 {
            self.buf[at] = n as u8;
            return;
        }
        let vl = varint_len(n as u64);
        if self.buf.len() - self.pos < vl - 1 {
            self.overflow = true;
            return;
        }
        self.buf.copy_within(at + 1..self.pos, at + vl);
        let end = self.pos + vl - 1;
        self.pos = at;
        self.varint(n as u64);
        self.pos = end;
    }
}

// ---------------------------------------------------------------------------
// Event kinds
// ---------------------------------------------------------------------------

/// `FileId`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileId {
    /// st_dev.
    pub dev: u64,
    /// st_ino.
    pub ino: u64,
}

#[inline(always)]
fn file_id(e: &mut Enc<'_>, field: u32, f: FileId) {
    e.message(field, |e| {
        e.uint(1, f.dev);
        e.uint(2, f.ino);
    });
}

// The enum values come from the proto (generated in `pcstream_placement::wire`),
// so the hand-written encoder cannot drift from the schema.
pub use pcstream_placement::wire::{InvalidateKind, ProcessEventKind as ProcessKind, WriteCall};

/// One event's payload (the `Event.kind` oneof).
#[derive(Debug)]
pub enum Kind<'a> {
    /// `WriteEvent`.
    Write {
        file: FileId,
        offset: u64,
        len: u64,
        signature: u64,
        stream: u32,
        hint: u32,
        call: WriteCall,
    },
    /// `InvalidateEvent`.
    Invalidate {
        file: FileId,
        kind: InvalidateKind,
        offset: u64,
        len: u64,
    },
    /// `AppHintEvent`.
    AppHint {
        file: FileId,
        requested: u64,
        accepted: bool,
        errno: i32,
        repaired: bool,
    },
    /// `SignatureInfo`.
    Signature {
        signature: u64,
        frames: &'a [(u64, u64)],
        method: u32,
    },
    /// `ModuleInfo`.
    Module {
        key: u64,
        build_id: &'a [u8],
        path: &'a [u8],
        size: u64,
    },
    /// `OpenEvent`.
    Open {
        file: FileId,
        path: &'a [u8],
        flags: i32,
    },
    /// `ProcessEvent`.
    Process {
        kind: ProcessKind,
        ppid: u32,
        exe: &'a [u8],
        argv: &'a [Vec<u8>],
        dropped: u64,
    },
}

fn trunc(p: &[u8]) -> &[u8] {
    &p[..p.len().min(MAX_PATH)]
}

/// Encodes the fields of one `Event` (not its length prefix).
pub fn encode_event(e: &mut Enc<'_>, time_ns: u64, tid: u32, kind: &Kind<'_>) {
    e.uint(1, time_ns);
    e.uint(2, tid as u64);
    match *kind {
        Kind::Write {
            file,
            offset,
            len,
            signature,
            stream,
            hint,
            call,
        } => e.message(10, |e| {
            file_id(e, 1, file);
            e.uint(2, offset);
            e.uint(3, len);
            e.uint(4, signature);
            e.uint(5, stream as u64);
            e.uint(6, hint as u64);
            e.uint(7, call as u64);
        }),
        Kind::Invalidate {
            file,
            kind,
            offset,
            len,
        } => e.message(11, |e| {
            file_id(e, 1, file);
            e.uint(2, kind as u64);
            e.uint(3, offset);
            e.uint(4, len);
        }),
        Kind::AppHint {
            file,
            requested,
            accepted,
            errno,
            repaired,
        } => e.message(12, |e| {
            file_id(e, 1, file);
            e.uint(2, requested);
            e.boolean(3, accepted);
            e.int32(4, errno);
            e.boolean(5, repaired);
        }),
        Kind::Signature {
            signature,
            frames,
            method,
        } => e.message(13, |e| {
            e.uint(1, signature);
            for &(key, offset) in frames {
                e.message(2, |e| {
                    e.uint(1, key);
                    e.uint(2, offset);
                });
            }
            e.uint(3, method as u64);
        }),
        Kind::Module {
            key,
            build_id,
            path,
            size,
        } => e.message(14, |e| {
            e.uint(1, key);
            e.bytes_field(2, &build_id[..build_id.len().min(64)]);
            e.bytes_field(3, trunc(path));
            e.uint(4, size);
        }),
        Kind::Open { file, path, flags } => e.message(15, |e| {
            file_id(e, 1, file);
            e.bytes_field(2, trunc(path));
            e.int32(3, flags);
        }),
        Kind::Process {
            kind,
            ppid,
            exe,
            argv,
            dropped,
        } => {
            // Not a hot-path event: encode on the heap (argv may be long).
            // Long command lines are cut to fit one batch.
            let mut v = vec![0u8; BATCH - 64];
            let mut inner = Enc::new(&mut v);
            inner.uint(1, kind as u64);
            inner.uint(2, ppid as u64);
            inner.bytes_field(3, trunc(exe));
            let mut room = BATCH / 2;
            for a in argv {
                let a = &a[..a.len().min(room)];
                room -= a.len();
                inner.bytes_always(4, a);
            }
            inner.uint(5, dropped);
            let n = inner.pos;
            e.bytes_always(16, &v[..n]);
        }
    }
}

// ---------------------------------------------------------------------------
// Per-thread batches
// ---------------------------------------------------------------------------

const FREE: u32 = 0;
const IDLE: u32 = 1;
const BUSY: u32 = 2;
const SWEEP: u32 = 3;

/// Longest coalesced write run (the daemon's live-data chunk size).
pub const MAX_RUN: u64 = 1 << 20;

/// Consecutive writes of one thread that continue each other (same file,
/// signature, stream, hint and call; each starting where the previous one
/// ended) are reported as one `WriteEvent` (time = the first write's), up to
/// [`MAX_RUN`] bytes or until anything else happens on the thread: a
/// sequential writer costs one event per run instead of one per call.
#[derive(Debug, Clone, Copy)]
struct Run {
    active: bool,
    time: u64,
    tid: u32,
    conts: u32,
    file: FileId,
    /// offset, len, signature, stream, hint, call.
    w: [u64; 6],
}

const NO_RUN: Run = Run {
    active: false,
    time: 0,
    tid: 0,
    conts: 0,
    file: FileId { dev: 0, ino: 0 },
    w: [0; 6],
};

/// The header fields (everything but `buf`) first, in one 128-byte-aligned
/// pair of cache lines.
#[repr(C, align(128))]
struct Slot {
    state: AtomicU32,
    tid: AtomicU32,
    // The fields below belong to whoever moved `state` to BUSY or SWEEP.
    len: UnsafeCell<usize>,
    count: UnsafeCell<u32>,
    first_ns: UnsafeCell<u64>,
    run: UnsafeCell<Run>,
    buf: UnsafeCell<[u8; BATCH]>,
}

// SAFETY: the UnsafeCell fields are only touched by the thread that won the
// state transition to BUSY/SWEEP (exclusive ownership by protocol).
unsafe impl Sync for Slot {}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    state: AtomicU32::new(FREE),
    tid: AtomicU32::new(0),
    len: UnsafeCell::new(0),
    count: UnsafeCell::new(0),
    first_ns: UnsafeCell::new(0),
    run: UnsafeCell::new(NO_RUN),
    buf: UnsafeCell::new([0; BATCH]),
};

static POOL: [Slot; SLOTS] = [EMPTY; SLOTS];
static DROPPED: AtomicU64 = AtomicU64::new(0);

const NO_SLOT: u32 = u32::MAX;
const POOL_FULL: u32 = u32::MAX - 1;

thread_local! {
    static MY_SLOT: Cell<u32> = const { Cell::new(NO_SLOT) };
    static MY_TID: Cell<u32> = const { Cell::new(0) };
}

/// Events dropped so far (no slot, busy slot, failed send).
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Counts `n` dropped events.
pub fn count_dropped(n: u64) {
    DROPPED.fetch_add(n, Ordering::Relaxed);
}

/// This thread's id (cached; the cache is reset in a fork child).
#[inline]
pub fn tid() -> u32 {
    let t = MY_TID.with(|c| c.get());
    if t != 0 {
        return t;
    }
    // SAFETY: gettid has no preconditions.
    let t = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
    MY_TID.with(|c| c.set(t));
    t
}

/// `CLOCK_MONOTONIC` in nanoseconds (precise).
pub fn now_ns() -> u64 {
    crate::clock::precise_ns()
}

fn thread_alive(tid: u32) -> bool {
    // SAFETY: signal 0 only checks existence; getpid has no preconditions.
    let r = unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid as i64, 0) };
    !(r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH))
}

fn claim(tid: u32) -> u32 {
    for (i, s) in POOL.iter().enumerate() {
        if s.state
            .compare_exchange(FREE, IDLE, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            s.tid.store(tid, Ordering::Relaxed);
            return i as u32;
        }
    }
    // Reclaim the slot of a thread that exited.
    for (i, s) in POOL.iter().enumerate() {
        let owner = s.tid.load(Ordering::Relaxed);
        if owner != tid
            && s.state.load(Ordering::Relaxed) == IDLE
            && !thread_alive(owner)
            && s.state
                .compare_exchange(IDLE, SWEEP, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            flush_locked(s);
            s.tid.store(tid, Ordering::Relaxed);
            s.state.store(IDLE, Ordering::Release);
            return i as u32;
        }
    }
    POOL_FULL
}

/// Sends/records the slot's events and empties it. The caller owns the slot
/// (BUSY or SWEEP).
fn flush_locked(s: &Slot) {
    close_run(s);
    // SAFETY: the caller owns the slot's cells (state protocol).
    let (len, count, buf) = unsafe { (&mut *s.len.get(), &mut *s.count.get(), &*s.buf.get()) };
    if *len > 0 {
        record::emit_batch(&buf[..*len], *count);
    }
    *len = 0;
    *count = 0;
}

/// Encodes the slot's pending write run (if any) at the end of its batch,
/// emitting the batch first when it is full. The caller owns the slot.
fn close_run(s: &Slot) {
    // SAFETY: the caller owns the slot's cells (state protocol).
    let (len, count, first, run, buf) = unsafe {
        (
            &mut *s.len.get(),
            &mut *s.count.get(),
            &mut *s.first_ns.get(),
            &mut *s.run.get(),
            &mut *s.buf.get(),
        )
    };
    if !run.active {
        return;
    }
    run.active = false;
    if let Some(n) = encode_write_entry(&mut buf[*len..], run.time, run.tid, run.file, &run.w) {
        *len += n;
        *count += 1;
        return;
    }
    if *len > 0 {
        record::emit_batch(&buf[..*len], *count);
    }
    *len = 0;
    *count = 0;
    match encode_write_entry(&mut buf[..], run.time, run.tid, run.file, &run.w) {
        Some(n) => {
            *len = n;
            *count = 1;
            *first = run.time;
        }
        None => count_dropped(1),
    }
}

/// Adds a write to this thread's batch, extending the pending run when it
/// continues it (no clock read, no encoding).
#[inline]
fn append_write(flush_ns: u64, force: bool, file: FileId, w: [u64; 6]) {
    let Some(s) = acquire() else {
        count_dropped(1);
        return;
    };
    // The slot's owner tid is ours while we hold its index (claim stored
    // it): one thread-local access fewer than `tid()`.
    let tid = s.tid.load(Ordering::Relaxed);
    // Borrows of the slot's cells are kept short: `close_run` and
    // `flush_locked` take their own.
    let continued = {
        // SAFETY: we moved the slot to BUSY: its cells are ours until we release it.
        let run = unsafe { &mut *s.run.get() };
        let c = run.active
            && run.file == file
            && run.w[2..] == w[2..]
            && run.w[0].wrapping_add(run.w[1]) == w[0]
            && run.w[1] + w[1] <= MAX_RUN;
        if c {
            run.w[1] += w[1];
            run.conts = run.conts.wrapping_add(1);
        }
        c.then_some(run.conts)
    };
    let now = match continued {
        // A continuation costs no clock read; the batch age is checked every
        // 64 of them.
        Some(conts) if !force && conts % 64 != 0 => {
            s.state.store(IDLE, Ordering::Release);
            return;
        }
        Some(_) => crate::clock::now_ns(),
        None => {
            close_run(s);
            // SAFETY: as above; close_run's borrows have ended.
            let (len, first, run) =
                unsafe { (*s.len.get(), &mut *s.first_ns.get(), &mut *s.run.get()) };
            let now = if len == 0 {
                let t = crate::clock::anchor_ns();
                *first = t;
                t
            } else {
                crate::clock::now_ns()
            };
            *run = Run {
                active: true,
                time: now,
                tid,
                conts: 0,
                file,
                w,
            };
            now
        }
    };
    finish_append(s, now, flush_ns, force);
}

/// Flushes the slot when asked to or when its batch is old, then releases it.
#[inline]
fn finish_append(s: &Slot, now: u64, flush_ns: u64, force: bool) {
    // SAFETY: the caller holds the slot (BUSY).
    let first = unsafe { *s.first_ns.get() };
    if force || now.saturating_sub(first) >= flush_ns {
        flush_locked(s);
        s.state.store(IDLE, Ordering::Release);
        if !force {
            sweep(Some(now.saturating_sub(flush_ns)));
        }
        return;
    }
    s.state.store(IDLE, Ordering::Release);
}

/// Takes this thread's slot (claiming one on first use); `None` when the
/// pool is full or the slot is being flushed by another thread.
#[inline]
fn acquire() -> Option<&'static Slot> {
    let mut idx = MY_SLOT.with(|c| c.get());
    if idx == NO_SLOT {
        idx = claim(tid());
        MY_SLOT.with(|c| c.set(idx));
    }
    let s = POOL.get(idx as usize)?;
    s.state
        .compare_exchange(IDLE, BUSY, Ordering::Acquire, Ordering::Relaxed)
        .ok()?;
    Some(s)
}

/// Adds one event to this thread's batch (flushing it when full or old).
/// `flush_ns`: the age after which the batch is flushed; `force`: flush now.
///
/// The event is encoded in place at the end of the batch, so nothing is
/// copied or zeroed on the way.
pub fn push(kind: &Kind<'_>, flush_ns: u64, force: bool) {
    if let Kind::Process { exe, argv, .. } = kind {
        let tid = tid();
        if exe.is_empty() && argv.is_empty() {
            // Fork child, exit (also from `_exit`, maybe in a signal
            // handler): small, encoded in place, no allocation.
            append_with(flush_ns, force, |buf, now| {
                let mut e = Enc::new(buf);
                e.message(3, |e| encode_event(e, now, tid, kind));
                e.ok().then_some(e.pos)
            });
            return;
        }
        // Not a hot-path event (start): argv may be long.
        let now = crate::clock::anchor_ns();
        let mut heap = vec![0u8; BATCH];
        let mut e = Enc::new(&mut heap);
        encode_event(&mut e, now, tid, kind);
        if !e.ok() {
            count_dropped(1);
            return;
        }
        let n = e.pos;
        append_with(flush_ns, force, |buf, _| {
            let mut e = Enc::new(buf);
            e.message(3, |e| e.raw(&heap[..n]));
            e.ok().then_some(e.pos)
        });
        return;
    }
    if let Kind::Write {
        file,
        offset,
        len,
        signature,
        stream,
        hint,
        call,
    } = *kind
    {
        let w = [
            offset,
            len,
            signature,
            stream as u64,
            hint as u64,
            call as u64,
        ];
        append_write(flush_ns, force, file, w);
        return;
    }
    let tid = tid();
    append_with(flush_ns, force, |buf, now| {
        let mut e = Enc::new(buf);
        e.message(3, |e| encode_event(e, now, tid, kind));
        e.ok().then_some(e.pos)
    });
}

/// Size of a varint field (0 when the value is 0: proto3 omits it).
#[inline(always)]
const fn field_len(v: u64) -> usize {
    if v == 0 {
        0
    } else {
        1 + varint_len(v)
    }
}

/// Writes bytes into a buffer whose capacity was checked up front.
struct Put {
    p: *mut u8,
}

impl Put {
    #[inline(always)]
    fn byte(&mut self, b: u8) {
        // SAFETY: the caller checked the capacity for everything it writes.
        unsafe {
            self.p.write(b);
            self.p = self.p.add(1);
        }
    }

    #[inline(always)]
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.byte(v as u8 | 0x80);
            v >>= 7;
        }
        self.byte(v as u8);
    }

    #[inline(always)]
    fn uint(&mut self, key: u8, v: u64) {
        if v != 0 {
            self.byte(key);
            self.varint(v);
        }
    }
}

/// The hot path's encoder: one `EventBatch.events` entry holding a
/// `WriteEvent`. The `WriteEvent` body goes to a stack buffer first (its
/// varints written as they come, no sizes computed per field), then the
/// few enclosing lengths are known and the entry is written in one pass
/// with a single capacity check. `w` = offset, len, signature, stream,
/// hint, call. Produces exactly what [`encode_event`] produces (tested).
#[inline]
pub fn encode_write_entry(
    buf: &mut [u8],
    now: u64,
    tid: u32,
    f: FileId,
    w: &[u64; 6],
) -> Option<usize> {
    // Largest body: file 2 + 2 × 11, six fields × 11.
    let mut body = [0u8; 96];
    let start = body.as_mut_ptr();
    let mut b = Put { p: start };
    b.byte(0x0a); // WriteEvent.file
    b.byte(0); // its length, set below (≤ 22: one byte)
    b.uint(0x08, f.dev);
    b.uint(0x10, f.ino);
    // SAFETY: b.p only moved forward inside `body`.
    let fsz = unsafe { b.p.offset_from(start) } as usize - 2;
    for (i, &v) in w.iter().enumerate() {
        b.uint((i as u8 + 2) << 3, v); // WriteEvent fields 2..=7, wire type 0 (varint)
    }
    // SAFETY: as above.
    let wsz = unsafe { b.p.offset_from(start) } as usize;
    body[1] = fsz as u8;
    let esz = field_len(now) + field_len(tid as u64) + 1 + varint_len(wsz as u64) + wsz;
    let total = 1 + varint_len(esz as u64) + esz;
    if buf.len() < total {
        return None;
    }
    let mut p = Put {
        p: buf.as_mut_ptr(),
    };
    p.byte(0x1a); // EventBatch.events
    p.varint(esz as u64);
    p.uint(0x08, now); // Event.time_ns
    p.uint(0x10, tid as u64); // Event.tid
    p.byte(0x52); // Event.write (field 10, length-delimited)
    p.varint(wsz as u64);
    let at = total - wsz;
    buf[at..total].copy_from_slice(&body[..wsz]);
    Some(total)
}

/// Appends one `EventBatch.events` entry (tag and length included) that
/// `enc(buf, now)` writes at the start of `buf`, returning its size (`None`:
/// it did not fit).
#[inline]
fn append_with(flush_ns: u64, force: bool, enc: impl Fn(&mut [u8], u64) -> Option<usize>) {
    let Some(s) = acquire() else {
        count_dropped(1);
        return;
    };
    close_run(s); // keep the thread's events in order
    let mut now = 0;
    for attempt in 0..2 {
        // SAFETY: we moved the slot to BUSY: its cells are ours until we
        // release it; these borrows end before flush_locked takes its own.
        let (len, count, first, buf) = unsafe {
            (
                &mut *s.len.get(),
                &mut *s.count.get(),
                &mut *s.first_ns.get(),
                &mut *s.buf.get(),
            )
        };
        if *len == 0 {
            now = crate::clock::anchor_ns();
            *first = now;
        } else if attempt == 0 {
            now = crate::clock::now_ns();
        }
        let start = *len;
        if let Some(n) = enc(&mut buf[start..], now) {
            *len = start + n;
            *count += 1;
            break;
        } else if start > 0 && attempt == 0 {
            flush_locked(s); // full: flush, retry once in the empty batch
        } else {
            count_dropped(1);
            break;
        }
    }
    finish_append(s, now, flush_ns, force);
}

/// Flushes this thread's pending batch, if any.
pub fn flush_mine() {
    let idx = MY_SLOT.with(|c| c.get());
    if let Some(s) = POOL.get(idx as usize) {
        if s.state
            .compare_exchange(IDLE, BUSY, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            flush_locked(s);
            s.state.store(IDLE, Ordering::Release);
        }
    }
}

/// Flushes every idle slot whose batch started before `older_than` (all idle
/// slots when `None`), e.g. at exit or for threads that went quiet.
pub fn sweep(older_than: Option<u64>) {
    for s in POOL.iter() {
        if s.state.load(Ordering::Relaxed) != IDLE {
            continue;
        }
        if s.state
            .compare_exchange(IDLE, SWEEP, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            continue;
        }
        // SAFETY: SWEEP gives us the slot's cells.
        let (len, first, run) = unsafe { (*s.len.get(), *s.first_ns.get(), (*s.run.get()).active) };
        if (len > 0 || run) && older_than.is_none_or(|t| first <= t) {
            flush_locked(s);
        }
        s.state.store(IDLE, Ordering::Release);
    }
}

/// In a fork child: forget the parent's batches and threads.
pub fn after_fork_child() {
    for s in POOL.iter() {
        // SAFETY: the child is single-threaded right after fork; nobody else
        // can own a slot's cells.
        unsafe {
            *s.len.get() = 0;
            *s.count.get() = 0;
            *s.run.get() = NO_RUN;
        }
        s.state.store(FREE, Ordering::Relaxed);
        s.tid.store(0, Ordering::Relaxed);
    }
    MY_SLOT.with(|c| c.set(NO_SLOT));
    MY_TID.with(|c| c.set(0));
    crate::clock::reset_thread();
    DROPPED.store(0, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcstream_placement::wire;
    use prost::Message;

    fn encode(kind: &Kind<'_>) -> wire::Event {
        let mut buf = [0u8; 4096];
        let mut e = Enc::new(&mut buf);
        encode_event(&mut e, 123_456_789, 42, kind);
        assert!(e.ok());
        wire::Event::decode(e.bytes()).expect("prost decodes the shim's bytes")
    }

    #[test]
    fn write_event_decodes() {
        let ev = encode(&Kind::Write {
            file: FileId { dev: 2049, ino: 77 },
            offset: 1 << 40,
            len: 4096,
            signature: 0xdead_beef_0123_4567,
            stream: 3,
            hint: 4,
            call: WriteCall::Pwrite,
        });
        assert_eq!(ev.time_ns, 123_456_789);
        assert_eq!(ev.tid, 42);
        let Some(wire::event::Kind::Write(w)) = ev.kind else {
            panic!("not a write: {ev:?}")
        };
        assert_eq!(w.file, Some(wire::FileId { dev: 2049, ino: 77 }));
        assert_eq!(
            (w.offset, w.len, w.signature),
            (1 << 40, 4096, 0xdead_beef_0123_4567)
        );
        assert_eq!(
            (w.stream, w.hint, w.call),
            (3, 4, wire::WriteCall::Pwrite as i32)
        );
    }

    #[test]
    fn other_events_decode() {
        let frames = [(1u64, 2u64), (u64::MAX, 0)];
        let ev = encode(&Kind::Signature {
            signature: 9,
            frames: &frames,
            method: 2,
        });
        let Some(wire::event::Kind::Signature(s)) = ev.kind else {
            panic!()
        };
        assert_eq!(s.frames.len(), 2);
        assert_eq!((s.frames[1].module_key, s.frames[1].offset), (u64::MAX, 0));
        assert_eq!(s.method, 2);

        let ev = encode(&Kind::AppHint {
            file: FileId::default(),
            requested: 3,
            accepted: false,
            errno: libc::EINVAL,
            repaired: true,
        });
        let Some(wire::event::Kind::AppHint(h)) = ev.kind else {
            panic!()
        };
        assert_eq!(
            (h.requested, h.accepted, h.errno, h.repaired),
            (3, false, libc::EINVAL, true)
        );

        let argv = vec![b"prog".to_vec(), Vec::new(), b"x y".to_vec()];
        let ev = encode(&Kind::Process {
            kind: ProcessKind::Start,
            ppid: 1,
            exe: b"/bin/prog",
            argv: &argv,
            dropped: 0,
        });
        let Some(wire::event::Kind::Process(p)) = ev.kind else {
            panic!()
        };
        assert_eq!(p.argv, vec!["prog", "", "x y"]);
        assert_eq!(p.exe, "/bin/prog");

        let long = vec![b'a'; 5000];
        let ev = encode(&Kind::Open {
            file: FileId { dev: 1, ino: 1 },
            path: &long,
            flags: -1,
        });
        let Some(wire::event::Kind::Open(o)) = ev.kind else {
            panic!()
        };
        assert_eq!(o.path.len(), MAX_PATH);
        assert_eq!(o.flags, -1);
    }

    #[test]
    fn fast_write_encoder_matches_the_generic_one() {
        let cases = [
            (FileId { dev: 0, ino: 5 }, [0u64, 4096, 77, 0, 0, 1]),
            (
                FileId {
                    dev: 2049,
                    ino: 1 << 40,
                },
                [1 << 50, 1, u64::MAX, 4, 5, 5],
            ),
            (FileId::default(), [0; 6]),
            (
                // The largest body the stack buffer must hold.
                FileId {
                    dev: u64::MAX,
                    ino: u64::MAX,
                },
                [
                    u64::MAX,
                    u64::MAX,
                    u64::MAX,
                    u32::MAX as u64,
                    u32::MAX as u64,
                    5,
                ],
            ),
            (
                FileId {
                    dev: 1 << 7,
                    ino: 1 << 14,
                },
                [1 << 21, 1 << 28, 1 << 35, 127, 128, 1],
            ),
        ];
        for (file, w) in cases {
            let mut fast = [0u8; 256];
            let n = encode_write_entry(&mut fast, 99, 7, file, &w).unwrap();
            let mut slow = [0u8; 256];
            let mut e = Enc::new(&mut slow);
            let call = match w[5] {
                1 => WriteCall::Write,
                5 => WriteCall::Fwrite,
                _ => WriteCall::Write,
            };
            let mut w2 = w;
            w2[5] = call as u64;
            e.message(3, |e| {
                encode_event(
                    e,
                    99,
                    7,
                    &Kind::Write {
                        file,
                        offset: w[0],
                        len: w[1],
                        signature: w[2],
                        stream: w[3] as u32,
                        hint: w[4] as u32,
                        call,
                    },
                )
            });
            let mut fast2 = [0u8; 256];
            let n2 = encode_write_entry(&mut fast2, 99, 7, file, &w2).unwrap();
            assert_eq!(&fast2[..n2], e.bytes(), "{file:?} {w:?}");
            assert!(n > 0);
            assert!(encode_write_entry(&mut fast[..n2 - 1], 99, 7, file, &w2).is_none());
        }
    }

    #[test]
    fn varint_lengths() {
        let mut values = vec![0u64, 1, 127, 128, 16383, 16384, u64::MAX];
        for bits in 1..64 {
            values.extend([(1u64 << bits) - 1, 1u64 << bits]);
        }
        for v in values {
            let mut b = [0u8; 10];
            let mut e = Enc::new(&mut b);
            e.varint(v);
            assert_eq!(e.bytes().len(), varint_len(v), "{v}");
        }
    }

    #[test]
    fn overflow_is_reported_not_panicking() {
        let mut b = [0u8; 8];
        let mut e = Enc::new(&mut b);
        e.bytes_field(1, &[7u8; 20]);
        assert!(!e.ok());
    }
}
