//! The `PCSTREAM_*` environment variables: one name each, shared by the shim
//! (which reads them), the CLI (which sets them for the commands it runs) and
//! the tests. Plain `&str` constants, usable without the `learn` feature.

/// `1` turns the shim off (it forwards every call untouched).
pub const DISABLE: &str = "PCSTREAM_DISABLE";
/// Directory the shim writes per-process trace files into (record mode).
pub const RECORD_DIR: &str = "PCSTREAM_RECORD_DIR";
/// Unix datagram socket of the daemon the shim sends events to.
pub const SOCKET: &str = "PCSTREAM_SOCKET";
/// Static signature → stream map file (lines `<signature-hex> <stream>`).
pub const MAP: &str = "PCSTREAM_MAP";
/// Maximum stack frames per signature (1..=[`MAX_FRAMES`]).
pub const FRAMES: &str = "PCSTREAM_FRAMES";
/// The most frames a signature holds (`FRAMES`, `JAVA_FRAMES`).
pub const MAX_FRAMES: usize = 16;
/// Stack unwinder: one of [`UNWIND_METHODS`].
pub const UNWIND: &str = "PCSTREAM_UNWIND";
/// The values `UNWIND` takes.
pub const UNWIND_METHODS: [&str; 4] = ["auto", "fp", "scan", "exact"];
/// Stack words the `scan` unwinder reads (16..=65536).
pub const SCAN_WORDS: &str = "PCSTREAM_SCAN_WORDS";
/// `1` makes the shim replace the application's own write-life hints.
pub const FIX_APP_HINTS: &str = "PCSTREAM_FIX_APP_HINTS";
/// Longest time events wait in a batch before being sent, in milliseconds.
pub const FLUSH_MS: &str = "PCSTREAM_FLUSH_MS";
/// `1` makes the shim log its decisions to standard error.
pub const DEBUG: &str = "PCSTREAM_DEBUG";
/// Path of the shim library (`libpcstream.so`) the CLI preloads.
pub const SHIM: &str = "PCSTREAM_SHIM";
/// Working directory of a `record --device-trace` command (the scratch file system).
pub const DEVICE_DIR: &str = "PCSTREAM_DEVICE_DIR";
/// Directory of the daemon's runtime files (its sockets and mapping tables)
/// that the shim looks in for push-back mappings.
pub const RUNTIME_DIR: &str = "PCSTREAM_RUNTIME_DIR";

/// Root of sysfs where the shim reads a block device's write streams
/// (default `/sys`): for tests, which need a device with write streams on a
/// host that has none.
pub const SYSFS: &str = "PCSTREAM_SYSFS";
/// The system log's socket the shim sends its warnings to (default
/// `/dev/log`; never the application's stderr).
pub const SYSLOG: &str = "PCSTREAM_SYSLOG";
/// `0` turns Java call paths off: JVM writes keep their native signatures.
pub const JAVA: &str = "PCSTREAM_JAVA";
/// Java frames per signature (1..=16, default 16; JDK I/O plumbing not counted).
pub const JAVA_FRAMES: &str = "PCSTREAM_JAVA_FRAMES";
/// `1`, while recording: a Java write's native signature is recorded beside
/// its Java call path (`WriteEvent.native_signature`, for `compare
/// --native-signatures`). Default 0: it costs a native capture per Java write.
pub const JAVA_NATIVE: &str = "PCSTREAM_JAVA_NATIVE";
/// Pages whose last write the shim remembers to give in-place `O_DIRECT`
/// writes their age class (default 262144, 4 MiB; 0 = off).
pub const PAGE_AGES: &str = "PCSTREAM_PAGE_AGES";

/// Every variable the shim reads, for tests and documentation.
pub const SHIM_VARS: &[&str] = &[
    DISABLE,
    RECORD_DIR,
    SOCKET,
    MAP,
    FRAMES,
    UNWIND,
    SCAN_WORDS,
    FIX_APP_HINTS,
    FLUSH_MS,
    DEBUG,
    SYSFS,
    SYSLOG,
    JAVA,
    JAVA_FRAMES,
    JAVA_NATIVE,
    PAGE_AGES,
];
