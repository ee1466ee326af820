//! Java call paths: a write whose native path enters through the JDK's I/O
//! natives (`libjava.so`, `libnio.so`: `FileOutputStream`,
//! `RandomAccessFile`, `FileChannel`, the NIO dispatchers) gets the
//! signature of its top Java frames instead of the native one, which is the
//! same for every Java caller (`handleWrite ← writeBytes ←
//! Java_java_io_FileOutputStream_writeBytes ← JavaCalls::call_helper`).
//!
//! The test is the write's return address: inside `libjava.so` or
//! `libnio.so`, the JDK's natives call `write`/`pwrite`/`writev` directly.
//! The native path is then not captured at all (it would end in JIT code,
//! where the unwinder falls back to a stack scan on every write).
//!
//! No JDK change and no `-agentpath`: the first such write finds the JVM
//! (`JNI_GetCreatedJavaVMs`, exported by `libjvm.so`, which the `java`
//! launcher loads `RTLD_GLOBAL`) and takes a JVMTI environment in the live
//! phase (`GetEnv`, no capabilities). A write on a new call path then asks JVMTI for
//! the current thread's stack (`GetStackTrace`) and hashes its first K
//! frames outside the JDK's I/O plumbing
//! (`pcstream_placement::java::is_io_plumbing`; K = `PCSTREAM_JAVA_FRAMES`,
//! 16, the most a signature holds: Java's I/O goes through layers of its
//! own) as `(method key, bci)`.
//! Method keys come from the class, method name and descriptor
//! (`pcstream_placement::java`), never from jmethodIDs; each jmethodID is
//! named once and remembered in a lock-free table, and its `ModuleInfo`
//! (path `java:<class>.<method><descriptor>`) is emitted then.
//!
//! A repeat is recognised without JVMTI (which costs about 0.9 µs a walk):
//! [`fingerprint`] keys the Java path by the stack's return addresses into
//! JIT code; a process-wide table maps keys to signatures, confirmed by
//! walks before it is trusted and sampled after.
//!
//! Anything that fails (no JVM yet, the JVM not live yet, a JVMTI error, a
//! full table) leaves the write its native signature: the shim degrades,
//! never fails. Writes from the JVM's own native code (GC logs, perf data)
//! never pass through those libraries and keep their native signatures.
//!
//! Hand-written FFI (a handful of slots of the JNI invocation and JVMTI
//! function tables, from the JDK's `jni.h`/`jvmti.h`): the shim links no
//! JDK and no binding crate exists for the part it needs.

mod fingerprint;

use crate::modules::Table;
use crate::state::{self, events_on, SEEN_SIGS};
use crate::tls::Thread;
use fingerprint::{cache_get, cache_put, AMBIGUOUS, CONFIRMED, VERIFY_ONE_IN};
use libc::{c_char, c_void};
use pcstream_placement::java as jframe;
use pcstream_placement::signature::{mix64, SignatureBuilder};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// Whether a JVM was loaded into this process (set from the module table).
static JVM_LOADED: AtomicBool = AtomicBool::new(false);

/// JVMTI environment state.
static STATE: AtomicU8 = AtomicU8::new(UNTRIED);
const UNTRIED: u8 = 0;
const BUSY: u8 = 1;
const READY: u8 = 2;
const UNAVAILABLE: u8 = 3;
/// `jvmtiEnv*` once READY.
static ENV: AtomicUsize = AtomicUsize::new(0);
/// `JavaVM*` once READY.
static VM: AtomicUsize = AtomicUsize::new(0);

/// Stack frames asked of JVMTI (the plumbing skipped plus K).
const DEPTH: usize = 32;

const JNI_OK: i32 = 0;
const JNI_VERSION_1_6: i32 = 0x0001_0006;
const JVMTI_VERSION_1_2: i32 = 0x3001_0200;

// Slots (0-based) of the function tables, from jni.h and jvmti.h (slot
// numbers there are 1-based).
const VM_GET_ENV: usize = 6;
const JNI_DELETE_LOCAL_REF: usize = 23;
const TI_DEALLOCATE: usize = 46;
const TI_GET_CLASS_SIGNATURE: usize = 47;
const TI_GET_METHOD_NAME: usize = 63;
const TI_GET_METHOD_DECLARING_CLASS: usize = 64;
const TI_GET_STACK_TRACE: usize = 103;

/// `jvmtiFrameInfo`.
#[repr(C)]
#[derive(Clone, Copy)]
struct FrameInfo {
    method: usize,
    location: i64,
}

type GetCreatedVms = unsafe extern "C" fn(*mut usize, i32, *mut i32) -> i32;
type GetEnv = unsafe extern "C" fn(usize, *mut usize, i32) -> i32;
type DeleteLocalRef = unsafe extern "C" fn(usize, usize);
type Deallocate = unsafe extern "C" fn(usize, *mut c_char) -> i32;
type GetClassSignature =
    unsafe extern "C" fn(usize, usize, *mut *mut c_char, *mut *mut c_char) -> i32;
type GetMethodName =
    unsafe extern "C" fn(usize, usize, *mut *mut c_char, *mut *mut c_char, *mut *mut c_char) -> i32;
type GetMethodDeclaringClass = unsafe extern "C" fn(usize, usize, *mut usize) -> i32;
type GetStackTrace = unsafe extern "C" fn(usize, usize, i32, i32, *mut FrameInfo, *mut i32) -> i32;

/// Slot `i` of the function table behind an interface pointer (`JavaVM*`,
/// `JNIEnv*`, `jvmtiEnv*`: each points to a pointer to its table).
///
/// # Safety
/// `obj` must be a live interface pointer whose table has more than `i`
/// slots, and `F` the slot's function type.
unsafe fn slot<F: Copy>(obj: usize, i: usize) -> F {
    // SAFETY: per the contract, *obj is the table and slot i exists.
    unsafe {
        let table = *(obj as *const *const usize);
        std::mem::transmute_copy::<usize, F>(&*table.add(i))
    }
}

/// `PCSTREAM_JAVA`: Java call paths on (the default).
static ENABLED: AtomicBool = AtomicBool::new(true);

/// `PCSTREAM_JAVA_FRAMES`: Java frames per signature.
static FRAMES: AtomicUsize = AtomicUsize::new(crate::config::MAX_FRAMES);

/// Whether a Java write's native signature is recorded beside its Java
/// one (`PCSTREAM_JAVA_NATIVE` while recording, Java call paths on): see
/// [`native_beside`].
static NATIVE_BESIDE: AtomicBool = AtomicBool::new(false);

/// Turns Java call paths on or off (`PCSTREAM_JAVA`) and sets their depth
/// (`PCSTREAM_JAVA_FRAMES`), at init; `native_beside`: the shim records a
/// trace and `PCSTREAM_JAVA_NATIVE` asks for a Java write's native
/// signature beside its Java one ([`native_beside`]).
pub fn configure(on: bool, frames: usize, native_beside: bool) {
    FRAMES.store(frames, Ordering::Relaxed);
    ENABLED.store(on, Ordering::Relaxed);
    NATIVE_BESIDE.store(on && native_beside, Ordering::Relaxed);
    if !on {
        JVM_LOADED.store(false, Ordering::Relaxed);
    }
}

/// Whether Java writes' native signatures are recorded beside their Java
/// ones: asked for while recording (`PCSTREAM_JAVA_NATIVE`), with a JVM
/// in the process. A write's native signature is what it would have had
/// with Java call paths off (`PCSTREAM_JAVA=0`): the paper's PCStream
/// without its JDK change, which `pcstreamctl compare
/// --native-signatures` replays from the same trace
/// (`WriteEvent.native_signature`). Two relaxed loads: what every other
/// write pays.
#[inline(always)]
pub fn native_beside() -> bool {
    NATIVE_BESIDE.load(Ordering::Relaxed) && JVM_LOADED.load(Ordering::Relaxed)
}

/// Whether the write behind `rec` was called from the JDK's I/O natives
/// (its return address in one): a Java write.
///
/// # Safety
/// `rec` is the entry trampoline's frame record on this thread's stack.
#[inline(always)]
pub unsafe fn from_jdk_natives(table: &Table, rec: *const usize) -> bool {
    // SAFETY: the record's two words are on this thread's stack.
    let ra = unsafe { *rec.add(1) };
    in_jdk_natives(table, ra)
}

/// Notes that a module of the table is the JVM (`modules.rs`).
pub fn note_module(path: &[u8]) {
    if path.ends_with(b"/libjvm.so") && ENABLED.load(Ordering::Relaxed) {
        JVM_LOADED.store(true, Ordering::Relaxed);
    }
}

/// Whether a module is one of the JDK's I/O natives.
pub fn is_io_native(path: &[u8]) -> bool {
    path.ends_with(b"/libjava.so") || path.ends_with(b"/libnio.so")
}

/// The signature and stream of a write called from the JDK's I/O natives
/// (the return address in the trampoline's frame record `rec` lies in
/// one): its Java call path's. `None` for every other write, and when the
/// Java stack cannot be read (the caller then captures the native path).
/// One relaxed load in a process without a JVM.
///
/// # Safety
/// `rec` is the entry trampoline's frame record on this thread's stack.
#[inline(always)]
pub unsafe fn direct(t: &Thread, table: &Table, rec: *const usize) -> Option<(u64, u32)> {
    if !JVM_LOADED.load(Ordering::Relaxed) {
        return None;
    }
    // SAFETY: forwarded caller contract.
    unsafe { direct_jvm(t, table, rec) }
}

/// # Safety
/// As [`direct`].
#[inline(never)]
unsafe fn direct_jvm(t: &Thread, table: &Table, rec: *const usize) -> Option<(u64, u32)> {
    // SAFETY: forwarded caller contract.
    if !unsafe { from_jdk_natives(table, rec) } || env().is_none() {
        return None;
    }
    // SAFETY: forwarded caller contract.
    let Some(f) = (unsafe { fingerprint::fingerprint(t, table, rec) }) else {
        let sig = java_signature(t)?;
        return Some((sig, crate::hint::stream_for(sig)));
    };
    let cached = cache_get(f);
    if let Some((sig, state)) = cached {
        // A trusted entry answers, but one repeat in VERIFY_ONE_IN, drawn
        // at random per thread, is walked anyway.
        if state >= CONFIRMED && !next_random(t).is_multiple_of(VERIFY_ONE_IN) {
            return Some((sig, crate::hint::stream_for(sig)));
        }
    }
    let sig = java_signature(t)?;
    match cached {
        None => cache_put(f, sig, 0),
        Some((_, AMBIGUOUS)) => {}
        Some((c, state)) if c == sig => {
            if state < CONFIRMED {
                cache_put(f, sig, state + 1);
            }
        }
        Some((_, state)) => {
            // Two paths behind one fingerprint: never trusted again.
            cache_put(f, sig, AMBIGUOUS);
            if state >= CONFIRMED {
                fingerprint::note_mismatch();
            }
        }
    }
    Some((sig, crate::hint::stream_for(sig)))
}

/// The thread's next xorshift32 number (a few cycles, where `rdtsc` costs
/// tens on some CPUs), seeded from the thread's state block's address.
#[inline(always)]
fn next_random(t: &Thread) -> u64 {
    let mut x = t.java_rng.get();
    if x == 0 {
        x = (mix64(t as *const Thread as u64) as u32) | 1;
    }
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    t.java_rng.set(x);
    u64::from(x)
}

/// Return addresses known to lie in the JDK's I/O natives (direct-mapped;
/// those modules are never unloaded, so an entry stays true).
static IO_RETURNS: [AtomicUsize; 64] = [ZERO_ID; 64];

/// Whether `ra` lies in `libjava.so`/`libnio.so`: a memo hit, else the
/// module table (a binary search) and the answer remembered.
#[inline]
fn in_jdk_natives(table: &Table, ra: usize) -> bool {
    let slot = &IO_RETURNS[(mix64(ra as u64) % 64) as usize];
    if slot.load(Ordering::Relaxed) == ra {
        return true;
    }
    let yes = table.lookup(ra).is_some_and(|h| h.module.jdk_io);
    if yes {
        slot.store(ra, Ordering::Relaxed);
    }
    yes
}

/// The JVMTI environment, taken on first use; `None` while there is no
/// live JVM (tried again later) or when it cannot be had (never again).
fn env() -> Option<usize> {
    match STATE.load(Ordering::Acquire) {
        READY => return Some(ENV.load(Ordering::Relaxed)),
        UNTRIED => {}
        _ => return None,
    }
    if STATE
        .compare_exchange(UNTRIED, BUSY, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return None; // another thread is taking it: native signature meanwhile
    }
    let (next, env) = take_env();
    if let Some((vm, e)) = env {
        VM.store(vm, Ordering::Relaxed);
        ENV.store(e, Ordering::Relaxed);
        fingerprint::read_code_bounds();
    }
    STATE.store(next, Ordering::Release);
    env.map(|(_, e)| e)
}

/// `(next state, (JavaVM*, jvmtiEnv*))`.
fn take_env() -> (u8, Option<(usize, usize)>) {
    // SAFETY: dlsym with a NUL-terminated name.
    let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"JNI_GetCreatedJavaVMs".as_ptr()) };
    if f.is_null() {
        return (UNAVAILABLE, None);
    }
    // SAFETY: the JNI invocation API's function, by its exported name.
    let get_vms: GetCreatedVms = unsafe { std::mem::transmute::<*mut c_void, GetCreatedVms>(f) };
    let (mut vm, mut n) = (0usize, 0i32);
    // SAFETY: room for one JavaVM* and the count.
    if unsafe { get_vms(&mut vm, 1, &mut n) } != JNI_OK || n < 1 || vm == 0 {
        return (UNTRIED, None); // not created yet
    }
    let mut e = 0usize;
    // SAFETY: vm is a live JavaVM*; GetEnv is its slot VM_GET_ENV.
    let rc = unsafe { slot::<GetEnv>(vm, VM_GET_ENV)(vm, &mut e, JVMTI_VERSION_1_2) };
    if rc != JNI_OK || e == 0 {
        return (UNAVAILABLE, None);
    }
    (READY, Some((vm, e)))
}

/// The Java call path's signature of the current thread, described the
/// first time the process sees it.
fn java_signature(t: &Thread) -> Option<u64> {
    let env = env()?;
    let mut frames = [FrameInfo {
        method: 0,
        location: 0,
    }; DEPTH];
    let mut n = 0i32;
    // SAFETY: a live jvmtiEnv*; thread 0 (NULL) is the current thread,
    // which is inside a JNI native of the JDK (a Java thread); the buffer
    // holds DEPTH frames.
    let rc = unsafe {
        slot::<GetStackTrace>(env, TI_GET_STACK_TRACE)(
            env,
            0,
            0,
            DEPTH as i32,
            frames.as_mut_ptr(),
            &mut n,
        )
    };
    if rc != 0 || n <= 0 {
        return None;
    }
    let frames = &frames[..(n as usize).min(DEPTH)];
    let mut named = [(0u64, 0u64, false); DEPTH];
    for (d, f) in named.iter_mut().zip(frames) {
        let (key, plumbing) = method(t, env, f.method)?;
        let bci = if f.location < 0 {
            jframe::NATIVE_BCI
        } else {
            f.location as u64
        };
        *d = (key, bci, plumbing);
    }
    let named = &named[..frames.len()];
    // The first K frames outside the JDK's I/O plumbing (all of them when
    // every frame is plumbing): the streams and buffers between layers of
    // an application's own I/O code name no call site of it.
    let k = FRAMES
        .load(Ordering::Relaxed)
        .clamp(1, crate::config::MAX_FRAMES);
    let mut path = [(0u64, 0u64); crate::config::MAX_FRAMES];
    let mut n = 0;
    let app = named.iter().any(|f| !f.2);
    for f in named.iter().filter(|f| !app || !f.2).take(k) {
        path[n] = (f.0, f.1);
        n += 1;
    }
    let path = &path[..n];
    let mut b = SignatureBuilder::new();
    for f in path {
        b.push(f.0, f.1);
    }
    let sig = b.finish().0;
    if events_on() && SEEN_SIGS.insert(sig) {
        state::emit_on(
            t,
            &crate::events::Kind::Signature {
                signature: sig,
                frames: path,
                method: crate::signature::Method::Java as u32,
            },
        );
    }
    Some(sig)
}

// ---------------------------------------------------------------------------
// Methods: jmethodID → (key, plumbing), named once
// ---------------------------------------------------------------------------

const SLOTS: usize = 16384;
const PROBES: usize = 16;
#[allow(clippy::declare_interior_mutable_const)]
const ZERO_ID: AtomicUsize = AtomicUsize::new(0);
#[allow(clippy::declare_interior_mutable_const)]
const ZERO_KEY: AtomicU64 = AtomicU64::new(0);
/// jmethodID | plumbing bit (jmethodIDs are 8-byte aligned pointers), or
/// RESERVED while a thread fills the slot in.
static IDS: [AtomicUsize; SLOTS] = [ZERO_ID; SLOTS];
static KEYS: [AtomicU64; SLOTS] = [ZERO_KEY; SLOTS];
const RESERVED: usize = 2;

/// A method's key and whether its class is I/O plumbing.
fn method(t: &Thread, env: usize, id: usize) -> Option<(u64, bool)> {
    if id == 0 {
        return None;
    }
    let start = mix64(id as u64) as usize % SLOTS;
    let mut free = None;
    for i in 0..PROBES {
        let s = (start + i) % SLOTS;
        let v = IDS[s].load(Ordering::Acquire);
        if v & !1 == id {
            return Some((KEYS[s].load(Ordering::Relaxed), v & 1 != 0));
        }
        if v == 0 {
            free = Some(s);
            break;
        }
    }
    let (key, plumbing) = name_method(t, env, id)?;
    // A slot is claimed (RESERVED) before its key is written and published
    // with the id after: a reader never pairs an id with another's key.
    if let Some(s) = free {
        if IDS[s]
            .compare_exchange(0, RESERVED, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            KEYS[s].store(key, Ordering::Relaxed);
            IDS[s].store(id | plumbing as usize, Ordering::Release);
        }
    }
    Some((key, plumbing))
}

/// Asks JVMTI for a method's class, name and descriptor; emits its
/// `ModuleInfo`.
fn name_method(t: &Thread, env: usize, id: usize) -> Option<(u64, bool)> {
    let mut class = 0usize;
    // SAFETY: live jvmtiEnv*, a jmethodID from GetStackTrace.
    if unsafe {
        slot::<GetMethodDeclaringClass>(env, TI_GET_METHOD_DECLARING_CLASS)(env, id, &mut class)
    } != 0
    {
        return None;
    }
    let mut csig: *mut c_char = std::ptr::null_mut();
    // SAFETY: class is a local reference from the call above.
    let rc = unsafe {
        slot::<GetClassSignature>(env, TI_GET_CLASS_SIGNATURE)(
            env,
            class,
            &mut csig,
            std::ptr::null_mut(),
        )
    };
    delete_local_ref(class);
    if rc != 0 || csig.is_null() {
        return None;
    }
    let (mut name, mut desc): (*mut c_char, *mut c_char) =
        (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: as above.
    let rc = unsafe {
        slot::<GetMethodName>(env, TI_GET_METHOD_NAME)(
            env,
            id,
            &mut name,
            &mut desc,
            std::ptr::null_mut(),
        )
    };
    let out = (rc == 0 && !name.is_null() && !desc.is_null()).then(|| {
        // SAFETY: JVMTI returns NUL-terminated modified-UTF-8 strings.
        let (c, m, d) = unsafe {
            (
                std::ffi::CStr::from_ptr(csig).to_bytes(),
                std::ffi::CStr::from_ptr(name).to_bytes(),
                std::ffi::CStr::from_ptr(desc).to_bytes(),
            )
        };
        let mut path = [0u8; 384];
        let len = jframe::method_path(c, m, d, &mut path);
        let key = jframe::method_key(&path[..len]);
        if events_on() {
            state::emit_on(
                t,
                &crate::events::Kind::Module {
                    key,
                    build_id: &[],
                    path: &path[..len],
                    size: 0,
                },
            );
        }
        (key, jframe::is_io_plumbing(c))
    });
    for p in [csig, name, desc] {
        if !p.is_null() {
            // SAFETY: memory JVMTI allocated for this environment.
            unsafe { slot::<Deallocate>(env, TI_DEALLOCATE)(env, p) };
        }
    }
    out
}

/// Deletes a JNI local reference made for this thread (GetMethodDeclaringClass
/// returns one; a JNI native's frame would free it on return, but a long
/// native loop would pile them up).
fn delete_local_ref(r: usize) {
    let vm = VM.load(Ordering::Relaxed);
    if vm == 0 || r == 0 {
        return;
    }
    let mut jni = 0usize;
    // SAFETY: vm is the live JavaVM*; the current thread is a Java thread.
    if unsafe { slot::<GetEnv>(vm, VM_GET_ENV)(vm, &mut jni, JNI_VERSION_1_6) } == JNI_OK
        && jni != 0
    {
        // SAFETY: jni is this thread's JNIEnv*, r a local reference of it.
        unsafe { slot::<DeleteLocalRef>(jni, JNI_DELETE_LOCAL_REF)(jni, r) };
    }
}
