//! The shim's life cycle: initialisation (library constructor), the
//! per-thread re-entrancy guard, fork handling and exit.
//!
//! States: `UNINIT` → `ACTIVE`, `DORMANT` (nothing to do yet: no trace
//! directory, no daemon socket, no mapping) or `PASSTHROUGH` (disabled).
//! `DORMANT` → `ACTIVE` when a daemon appears (`live.rs` looks at most once
//! per `PCSTREAM_FLUSH_MS`). Entry points do real work only in `ACTIVE` and
//! when this thread is not already inside the shim (a signal handler
//! interrupting the shim, or the shim's own libc calls).

use crate::batch;
use crate::config::Config;
use crate::events::{Kind, ProcessKind};
use crate::seen::SeenSet;
use crate::tls::{self, Thread};
use crate::{files, hint, modules, real, record, signature};
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use crate::hot::{ACTIVE, DORMANT, HOT, PASSTHROUGH, WAKING};

static CONFIG: OnceLock<Config> = OnceLock::new();
/// EXIT was written (by `fini` or `_exit`): write it once.
static EXITED: AtomicBool = AtomicBool::new(false);
static ARGV: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
/// `/proc/self/exe`, read at init (a dormant process's START is sent when
/// the daemon appears, from any context: nothing is allocated then).
static EXE: OnceLock<Vec<u8>> = OnceLock::new();

/// Signatures already described in this process (`SignatureInfo` sent).
pub static SEEN_SIGS: SeenSet<8192> = SeenSet::new();
/// Inodes already named in this process (`OpenEvent` sent).
pub static SEEN_FILES: SeenSet<8192> = SeenSet::new();

/// Proof that this thread is inside the shim with the shim active. Holds a
/// pointer to the thread's state (its guard flag, stack bounds and batch
/// slot), so an intercepted call costs one thread-local lookup.
#[derive(Debug)]
pub struct Guard(*const Thread);

impl Guard {
    /// Enters the shim, or `None` when the call must pass straight through.
    #[inline(always)]
    pub fn enter() -> Option<Guard> {
        let s = HOT.state.load(Ordering::Acquire);
        if s != ACTIVE {
            if s == DORMANT && crate::live::look_due() {
                wake();
            }
            return None;
        }
        tls::with(|t| {
            if t.in_shim.get() {
                None
            } else {
                t.in_shim.set(true);
                Some(Guard(t as *const Thread))
            }
        })
    }

    /// This thread's state.
    #[inline(always)]
    pub fn thread(&self) -> &Thread {
        // SAFETY: the state is this thread's thread-local; the guard lives on
        // this thread's stack within one call, so the thread (and its
        // thread-locals) outlive it. Thread has no destructor.
        unsafe { &*self.0 }
    }

    #[inline(always)]
    fn flag(&self) -> &std::cell::Cell<bool> {
        &self.thread().in_shim
    }

    /// Like [`Guard::enter`] for calls that would produce a write event: a
    /// re-entrant one (a signal handler writing while this thread is inside
    /// the shim) passes through untraced and is counted as dropped.
    #[inline(always)]
    pub fn enter_write() -> Option<Guard> {
        let g = Guard::enter();
        if g.is_none() && HOT.state.load(Ordering::Relaxed) == ACTIVE && events_on() {
            batch::count_dropped(1);
        }
        g
    }

    /// Runs the real call with the guard released (signal handlers that
    /// interrupt the real call are traced like any other code).
    #[inline(always)]
    pub fn call<R>(&self, f: impl FnOnce() -> R) -> R {
        self.flag().set(false);
        let r = f();
        self.flag().set(true);
        r
    }

    /// Runs shim work: errno preserved, panics contained.
    #[inline(always)]
    pub fn observe<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        observe_with(self.thread().errno(), f)
    }
}

impl Drop for Guard {
    #[inline(always)]
    fn drop(&mut self) {
        self.flag().set(false);
    }
}

/// Runs `f` keeping `errno` as it was and containing any panic.
#[inline(always)]
pub fn observe<R>(f: impl FnOnce() -> R) -> Option<R> {
    observe_with(crate::sys::errno_loc(), f)
}

/// [`observe`] with this thread's `errno` location at hand.
#[inline(always)]
fn observe_with<R>(e: *mut i32, f: impl FnOnce() -> R) -> Option<R> {
    // SAFETY: e is this thread's errno.
    let saved = unsafe { *e };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok();
    // SAFETY: as above.
    unsafe { *e = saved };
    r
}

/// The configuration (defaults before init).
pub fn cfg() -> &'static Config {
    static DEFAULT: OnceLock<Config> = OnceLock::new();
    CONFIG
        .get()
        .unwrap_or_else(|| DEFAULT.get_or_init(Config::default))
}

/// Signature capture parameters (from the configuration).
#[inline(always)]
pub fn params() -> signature::Params {
    signature::Params {
        frames: HOT.frames.load(Ordering::Relaxed) as usize,
        unwind: crate::config::Unwind::from_index(HOT.unwind.load(Ordering::Relaxed)),
        scan_words: HOT.scan_words.load(Ordering::Relaxed) as usize,
    }
}

fn set_hot(c: &Config) {
    HOT.unwind.store(c.unwind.index(), Ordering::Relaxed);
    HOT.frames.store(c.frames as u32, Ordering::Relaxed);
    HOT.scan_words.store(
        c.scan_words.min(u32::MAX as usize) as u32,
        Ordering::Relaxed,
    );
    HOT.flush_ns.store(c.flush_ns, Ordering::Relaxed);
}

/// Whether events are produced (a trace file or a daemon socket).
#[inline(always)]
pub fn events_on() -> bool {
    HOT.events.load(Ordering::Relaxed)
}

/// How old a thread's batch must be for `fsync`/`fdatasync` to flush it
/// (at most `PCSTREAM_FLUSH_MS`). A sync used to flush every time: under a
/// live pcstreamd a PostgreSQL backend, which `fdatasync`s its WAL at every
/// commit, then sent a batch per transaction (a connection to `events.seq`
/// each) and pgbench ran at 0.56× native tps. At 5 ms a backend still sent
/// ~200 batches a second of ~20 events each, and the connections, not the
/// daemon's learning, cost pgbench 5 % (0.949× native tps against 0.985×
/// at 50 ms, side by side, docs/performance.md). A thread that syncs and then goes
/// quiet leaves at most 50 ms of events unsent until the next sweep or its
/// exit; the events are the same, only later.
pub const SYNC_FLUSH_NS: u64 = 50_000_000;

/// The batch age at which a sync flushes ([`SYNC_FLUSH_NS`], or the flush
/// age when that is shorter).
#[inline]
pub fn sync_flush_ns() -> u64 {
    HOT.flush_ns.load(Ordering::Relaxed).min(SYNC_FLUSH_NS)
}

/// Pushes an event to this thread's batch.
pub fn emit(kind: &Kind<'_>) {
    if events_on() {
        tls::with(|t| emit_on(t, kind));
    }
}

/// [`emit`] with this thread's state at hand (events known to be on).
#[inline]
pub fn emit_on(t: &Thread, kind: &Kind<'_>) {
    batch::push(
        t,
        kind,
        HOT.flush_ns.load(Ordering::Relaxed),
        HOT.finished.load(Ordering::Relaxed),
    );
}

/// Pushes a write to this thread's batch (events known to be on).
#[inline(always)]
pub fn emit_write(t: &Thread, w: batch::RawWrite) {
    batch::push_write(
        t,
        w,
        HOT.flush_ns.load(Ordering::Relaxed),
        HOT.finished.load(Ordering::Relaxed),
    );
}

fn debug(msg: std::fmt::Arguments<'_>) {
    if cfg().debug {
        eprintln!("pcstream[{}]: {msg}", record::pid());
    }
}

fn now_unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn exe() -> Vec<u8> {
    std::fs::read_link("/proc/self/exe")
        .map(|p| p.into_os_string().into_encoded_bytes())
        .unwrap_or_default()
}

fn open_trace_file(start_mono_ns: u64) {
    let c = cfg();
    if let Some(dir) = &c.record_dir {
        let argv = ARGV.get().map(|v| v.as_slice()).unwrap_or(&[]);
        let h = record::HeaderInfo {
            start_mono_ns,
            start_unix_ns: now_unix_ns(),
            command: argv,
        };
        match record::open_trace(dir, &h) {
            Ok(p) => debug(format_args!("recording to {}", p.display())),
            // Never on the application's stderr: the recorder's summary
            // shows a process without a trace (PCSTREAM_DEBUG says why).
            Err(e) => debug(format_args!("cannot record: {e}")),
        }
    }
}

/// Library constructor body. `argv` as handed to `.init_array` functions.
///
/// # Safety
/// `argv` must be null or a null-terminated array of C strings.
pub unsafe fn init(argc: i32, argv: *const *const libc::c_char) {
    tls::with(|t| t.in_shim.set(true));
    crate::hot::set_tls_off(tls::offset());
    real::resolve_all();
    let (c, bad) = Config::from_env();
    for b in &bad {
        crate::syslog::warn(&c.syslog, c.debug, &b.to_string());
    }
    if c.disabled {
        HOT.state.store(PASSTHROUGH, Ordering::Release);
        tls::with(|t| t.in_shim.set(false));
        return;
    }
    // Relative paths would move with the application's chdir (fork children
    // create their trace files later; the socket is addressed per send).
    let mut c = c;
    if let Ok(abs) = std::path::absolute(&c.runtime_dir) {
        c.runtime_dir = abs;
    }
    for p in [&mut c.record_dir, &mut c.map].into_iter().flatten() {
        if let Ok(abs) = std::path::absolute(&*p) {
            *p = abs;
        }
    }
    if let Ok(abs) = std::path::absolute(&c.socket) {
        c.socket = abs;
    }
    set_hot(&c);
    crate::java::configure(
        c.java,
        c.java_frames,
        c.java_native && c.record_dir.is_some(),
    );
    crate::pageage::configure(c.page_ages);
    let _ = CONFIG.set(c);
    let mut args = Vec::new();
    if !argv.is_null() {
        for i in 0..argc.max(0) as usize {
            // SAFETY: argv has argc entries (caller contract).
            let p = unsafe { *argv.add(i) };
            if p.is_null() {
                break;
            }
            // SAFETY: each entry is a NUL-terminated C string.
            args.push(unsafe { CStr::from_ptr(p) }.to_bytes().to_vec());
        }
    }
    let _ = ARGV.set(args);
    signature::init_stack_facts();
    crate::rawdev::init(&cfg().sysfs);
    crate::clock::init();
    modules::refresh();
    // SAFETY: getpid has no preconditions.
    record::set_pid(unsafe { libc::getpid() } as u32);
    let c = cfg();
    if let Some(p) = &c.map {
        match hint::Map::load(p) {
            Ok(m) => {
                debug(format_args!(
                    "{} mapping entries from {}",
                    m.len(),
                    p.display()
                ));
                hint::install_map(m);
            }
            Err(e) => crate::syslog::warn(&c.syslog, c.debug, &format!("{e} (mapping ignored)")),
        }
    }
    crate::live::init(&c.runtime_dir, &c.socket, crate::clock::precise_ns());
    if crate::live::present() {
        debug(format_args!(
            "live mapping table in {} (generation {})",
            c.runtime_dir.display(),
            crate::live::generation()
        ));
    }
    if record::open_socket(&c.socket) {
        debug(format_args!("sending events to {}", c.socket.display()));
    }
    open_trace_file(crate::clock::precise_ns());
    HOT.events.store(record::active(), Ordering::Relaxed);
    let _ = EXE.set(exe());
    // SAFETY: registering plain extern "C" handlers.
    unsafe { libc::pthread_atfork(None, Some(after_fork_parent), Some(after_fork_child)) };
    if !record::active() && !hint::have_map() && !crate::live::present() {
        // Nothing to do until a daemon appears (`live::look`).
        HOT.state.store(DORMANT, Ordering::Release);
        tls::with(|t| t.in_shim.set(false));
        return;
    }
    HOT.state.store(ACTIVE, Ordering::Release);
    emit_start();
    tls::with(|t| t.in_shim.set(false));
}

/// The START event of this process.
fn emit_start() {
    emit(&Kind::Process {
        kind: ProcessKind::Start,
        // SAFETY: getppid has no preconditions.
        ppid: unsafe { libc::getppid() } as u32,
        exe: EXE.get().map_or(&[], |e| e.as_slice()),
        argv: ARGV.get().map(|v| v.as_slice()).unwrap_or(&[]),
        dropped: 0,
    });
}

/// A dormant process's look for the daemon may be due ([`Guard::enter`]): when
/// `events.sock` has appeared, events go to it from now on and the shim is
/// active (START sent, the table mapped by `live::look`). Allocation-free
/// and lock-free (it may run in a signal handler or inside an allocator);
/// the call that runs it passes through.
#[cold]
#[inline(never)]
fn wake() {
    // Not in a vfork child (posix_spawn's file actions call dup2/close in
    // one): it shares the suspended parent's memory; the parent looks itself.
    // SAFETY: getpid has no preconditions.
    if unsafe { libc::getpid() } as u32 != record::pid() {
        return;
    }
    tls::with(|t| {
        if t.in_shim.replace(true) {
            return;
        }
        if crate::live::look(HOT.flush_ns.load(Ordering::Relaxed))
            && HOT
                .state
                .compare_exchange(DORMANT, WAKING, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            observe(|| {
                record::open_socket(&cfg().socket);
                HOT.events.store(record::active(), Ordering::Relaxed);
            });
            HOT.state.store(ACTIVE, Ordering::Release);
            observe(emit_start);
        }
        t.in_shim.set(false);
    });
}

extern "C" fn after_fork_parent() {
    files::bump_fork_generation();
}

extern "C" fn after_fork_child() {
    observe(|| {
        tls::with(|t| {
            t.in_shim.set(true);
            batch::after_fork_child(t);
        });
        files::bump_fork_generation();
        SEEN_SIGS.clear();
        tls::with(signature::clear_cache);
        SEEN_FILES.clear();
        modules::reset_sent();
        // SAFETY: getpid has no preconditions.
        record::set_pid(unsafe { libc::getpid() } as u32);
        open_trace_file(crate::clock::precise_ns());
        emit(&Kind::Process {
            kind: ProcessKind::ForkChild,
            // SAFETY: getppid has no preconditions.
            ppid: unsafe { libc::getppid() } as u32,
            exe: &[],
            argv: &[],
            dropped: 0,
        });
        tls::with(|t| t.in_shim.set(false));
    });
}

/// Flushes everything pending (before `exec`, at exit).
pub fn flush_all() {
    tls::with(batch::flush_mine);
    batch::sweep(None);
}

/// Every batch flushed, then the EXIT event (once per process).
/// Async-signal-safe: no allocation, no lock (slots are taken with a CAS and
/// skipped when busy), only `clock_gettime`, `writev`, `sendmsg`, `tgkill`.
fn finish() {
    if EXITED.swap(true, Ordering::Relaxed) {
        return;
    }
    HOT.finished.store(true, Ordering::Relaxed);
    // Every thread's pending events first, so EXIT's count covers them
    // and EXIT is the last record of the trace.
    flush_all();
    let dropped = batch::dropped();
    let lost_before = record::lost_so_far();
    emit(&Kind::Process {
        kind: ProcessKind::Exit,
        ppid: 0,
        exe: &[],
        argv: &[],
        dropped,
    });
    // EXIT is flushed at once (`finished`). When its append failed (a full
    // file system), the events it reported as dropped would vanish with
    // it: count them in the trace's loss marker instead. (Another thread's
    // append failing at this very moment makes this count them twice: an
    // over-count, never a silent loss.)
    if dropped > 0 && record::lost_so_far() > lost_before {
        record::count_lost(dropped);
    }
}

/// Library destructor body: the EXIT event and a final flush of every batch.
pub fn fini() {
    if HOT.state.load(Ordering::Acquire) != ACTIVE {
        return;
    }
    let was = tls::with(|t| t.in_shim.replace(true));
    observe(finish);
    let n = crate::rawdev::unexpressed();
    if n > 0 {
        debug(format_args!(
            "{n} raw-device writes had a stream no write hint can express (above min(5, the device's write streams)): their device's hint was left alone"
        ));
    }
    tls::with(|t| t.in_shim.set(was));
}

/// Before the real `_exit`/`_Exit` (which skip the library destructor):
/// the same final flush and EXIT as [`fini`], when it is safe:
/// - not in a `vfork` child (or any child sharing our memory without having
///   gone through `fork`'s handlers): its pid differs from the one the shim
///   recorded, and touching the batches would corrupt the suspended parent's;
/// - not re-entrant (a signal handler calling `_exit` while its thread was
///   inside the shim, possibly holding its batch): then nothing is flushed.
pub fn before_exit() {
    if HOT.state.load(Ordering::Acquire) != ACTIVE || !events_on() {
        return;
    }
    // SAFETY: getpid has no preconditions (a plain syscall in glibc ≥ 2.25).
    if unsafe { libc::getpid() } as u32 != record::pid() {
        return;
    }
    let Some(g) = Guard::enter() else { return };
    g.observe(finish);
    // The guard stays held until the process is gone: nothing after this
    // point is traced.
    std::mem::forget(g);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Unwind;

    #[test]
    fn hot_defaults_are_the_config_defaults() {
        // Before init the hot line holds its initial values.
        let c = Config::default();
        assert_eq!(HOT.flush_ns.load(Ordering::Relaxed), c.flush_ns);
        let p = params();
        assert_eq!(
            (p.frames, p.unwind, p.scan_words),
            (c.frames, c.unwind, c.scan_words)
        );
        for u in [
            Unwind::Auto,
            Unwind::FramePointer,
            Unwind::Scan,
            Unwind::Exact,
        ] {
            assert_eq!(Unwind::from_index(u.index()), u);
        }
    }
}
