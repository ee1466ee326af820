//! libpcstream.so: the `LD_PRELOAD` shim that observes every write of an
//! unmodified program, names its program context (the call path that reached
//! the write), tags the file with the write-lifetime hint of that context's
//! stream, and reports events to the daemon and/or a per-process trace file.
//!
//! It never changes what the application sees (results, `errno`, descriptor
//! numbers), allocates nothing and takes no lock on the write path, and
//! spawns no thread. The contract with the rest of pcstream (environment,
//! trace files, events) is `docs/shim.md`.
//!
//! Start reading at [`hooks`] (every entry point, in one table), then
//! [`track`] (what each call means). The hard problems each have a module:
//! [`real`] (the libc functions behind ours), [`signature`] (frame-pointer
//! walk, CFI walk and stack scan), [`stack`] (readable stack bounds),
//! [`cfi`] (`.eh_frame` unwind rules),
//! [`callsite`] (scan validation), [`ehhdr`] (`.eh_frame_hdr` tables and
//! the memo they share), [`modules`] (loaded objects and build-ids),
//! [`clock`] (cheap event timestamps), [`hint`] (mapping and per-inode hint
//! cache), [`domain`] (a file's learning domain: the key its call paths
//! are looked up under), [`rawdev`] (block devices with write streams), [`capi`] (the
//! opt-in C API of `include/pcstream.h`), [`files`] (per-descriptor knowledge), [`events`] (protobuf
//! encoding), [`batch`] (per-thread batches), [`record`] (trace file and
//! daemon socket), [`hot`] (the write path's cache line), [`state`] (life cycle, re-entrancy guard, fork), [`tls`]
//! (per-thread state), [`config`] (environment options), [`sys`] (errno
//! and stat wrappers).
//!
//! The modules are private to the crate (so the library addresses its own
//! statics and functions directly, not through the GOT); `bench_api` is
//! what the criterion bench reaches.

// The crate is a cdylib whose modules are all private: its guide above links
// them for `cargo doc --document-private-items`.
#![allow(rustdoc::private_intra_doc_links)]

pub(crate) mod batch;
#[doc(hidden)]
pub mod bench_api;
pub(crate) mod callsite;
pub(crate) mod capi;
pub(crate) mod cfi;
pub(crate) mod clock;
pub(crate) mod config;
pub(crate) mod context;
pub(crate) mod domain;
pub(crate) mod ehhdr;
pub(crate) mod events;
pub(crate) mod files;
pub(crate) mod hint;
pub(crate) mod hooks;
pub(crate) mod hot;
pub(crate) mod java;
pub(crate) mod live;
pub(crate) mod modules;
pub(crate) mod pageage;
pub(crate) mod rawdev;
pub(crate) mod real;
pub(crate) mod record;
pub(crate) mod seen;
pub(crate) mod signature;
pub(crate) mod stack;
pub(crate) mod state;
pub(crate) mod sys;
pub(crate) mod syslog;
pub(crate) mod tls;
pub(crate) mod track;

use libc::{c_char, c_int};

extern "C" fn constructor(argc: c_int, argv: *const *const c_char, _envp: *const *const c_char) {
    let _ = std::panic::catch_unwind(|| {
        hooks::init();
        // SAFETY: the dynamic loader passes argc/argv to .init_array functions.
        unsafe { state::init(argc, argv) }
    });
}

extern "C" fn destructor() {
    let _ = std::panic::catch_unwind(state::fini);
}

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn(c_int, *const *const c_char, *const *const c_char) = constructor;

#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = destructor;
