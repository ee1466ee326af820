//! The online engine: shim events in, [`PcStream`] policies learning, a
//! signature → stream mapping out. This is what `pcstreamd` runs; the
//! learning itself is the `pcstream` policy's code, unchanged (one
//! [`PcStream`] per learner), fed exactly as `pcstream_replay` feeds it for a
//! file-level trace replayed write-through (`writeback_pages = 1`) on the
//! byte clock (`ReplayOptions::byte_clock`): the logical clock counts the
//! bytes written by all clients, in 4 KiB pages; every page a write
//! touches is placed in file-page order at the clock of its first byte in
//! the write (a 100-byte append advances the clock by 100 bytes, not by
//! the page it touches), then the clock has advanced by the write's
//! length; an invalidation ends the lives of the pages it covers at the
//! current clock.
//! The online = offline test (`tests/tests/daemon_online.rs`) holds the two
//! together.
//!
//! Learners: one per uid, or a single shared one
//! ([`OnlineConfig::share_between_users`]); events of one uid never touch
//! another uid's learner. Each of those is further split by learning
//! domain ([`crate::delivery::Domain`], a [`LearnerKey`]): the caller of
//! [`Engine::ingest_in`] says which domain each event's file is in (the
//! daemon from the file's device, found once per device); writes to F2FS
//! files are clustered into two classes for F2FS's warm and cold logs (its
//! hot log follows F2FS's own rules), writes to a raw block device with N
//! write streams into min(N, 5), everything else into
//! the four `F_SET_RW_HINT` classes. [`Engine::ingest`] puts every event in
//! the default `hints` domain (what the offline replay compares with). The engine also keeps what tools show about a
//! signature (its frames, the programs that used it), bounded by
//! [`OnlineConfig::max_signatures`].
//!
//! It does no I/O: the daemon decodes datagrams, gives each batch to
//! [`Engine::ingest`] with the sender's kernel-verified uid and pid, and
//! publishes [`Engine::mapping`] when [`Engine::generation`] moves.

use crate::delivery::Domain;
use crate::hint::RwHint;
use crate::lifetime::SigStats;
use crate::pcstream::{PcStream, PcStreamConfig};
use crate::placement::{Placement, StreamId, WriteCtx};
use crate::wire::{self, event::Kind};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Bytes per logical page (the clock's unit).
pub const PAGE: u64 = 4096;

/// Learner key of the shared learner (`share_between_users = true`).
pub const SHARED: u32 = u32::MAX;

/// Largest write a `write()` call can make (Linux `MAX_RW_COUNT`); a write
/// event claiming more cannot come from a shim and is ignored (counted), so
/// a forged event cannot make the engine walk 2^52 pages.
pub const MAX_WRITE_BYTES: u64 = 0x7fff_f000;

/// Programs remembered per signature.
const MAX_PROGRAMS: usize = 8;
/// Processes whose executable name is remembered.
const MAX_PROCESSES: usize = 65536;

/// Settings of the online engine.
#[derive(Debug, Clone, PartialEq)]
pub struct OnlineConfig {
    /// Stream ids of the device, 0 included (4 RW-hint classes + default = 5).
    pub streams: u32,
    /// The `pcstream` policy's settings.
    pub policy: PcStreamConfig,
    /// One learner for every uid instead of one per uid.
    pub share_between_users: bool,
    /// Signatures whose frames and programs are remembered.
    pub max_signatures: usize,
    /// Learn a write that carries an age class (`WriteEvent.age_class`:
    /// the shim saw the page it overwrites written that long ago) under
    /// its signature refined by the class ([`age_key`]), the key the shim
    /// looks its stream up by; else under the bare signature.
    pub refine_by_age: bool,
}

pub use crate::signature::age_key;

/// Counters of the engine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EngineCounters {
    /// Batches ingested.
    pub batches: u64,
    /// Events ingested.
    pub events: u64,
    /// Write events.
    pub writes: u64,
    /// Invalidation events.
    pub invalidations: u64,
    /// Events the shims reported dropped (`ProcessEvent.dropped` at exit).
    pub client_dropped: u64,
    /// Signature descriptions not kept because the cap was reached.
    pub signatures_untracked: u64,
    /// Write events longer than [`MAX_WRITE_BYTES`], ignored.
    #[serde(default)]
    pub oversized_writes: u64,
}

/// What tools show about a signature.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SigInfo {
    /// Frames, innermost first: (module key, offset).
    pub frames: Vec<(u64, u64)>,
    /// Executables that wrote through it (at most 8).
    pub programs: BTreeSet<String>,
    /// For a key refined by age ([`age_key`]): the signature it refines
    /// and the age class (its frames are that signature's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refines: Option<(u64, u32)>,
}

/// A loaded module as a shim described it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModuleDesc {
    /// Path of the mapped file.
    pub path: String,
    /// GNU build-id, hex (empty when none).
    pub build_id: String,
}

/// Which learner an event goes to: its sender's uid (or [`SHARED`]) and
/// the learning domain of its file. Ordered by uid, then domain (`hints`
/// first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LearnerKey {
    /// uid, or [`SHARED`].
    pub uid: u32,
    /// Learning domain.
    pub domain: Domain,
}

impl LearnerKey {
    /// The `hints`-domain learner of `uid`.
    pub const fn hints(uid: u32) -> LearnerKey {
        LearnerKey {
            uid,
            domain: Domain::Hints,
        }
    }
}

/// What the caller knows about a domain's device: its write streams (a
/// `raw` domain clusters into min(that, 5)) and its erase unit (the
/// mapper's resolution floor, the larger of this and the configured one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DomainSpec {
    /// The domain.
    pub domain: Domain,
    /// Write streams of the device behind it (0: unknown / none).
    pub device_streams: u32,
    /// Erase unit (FDP reclaim unit) in pages (0: unknown).
    pub erase_unit_pages: u64,
}

impl DomainSpec {
    /// The default domain: four hint classes, no device facts.
    pub const HINTS: DomainSpec = DomainSpec {
        domain: Domain::Hints,
        device_streams: 0,
        erase_unit_pages: 0,
    };
}

/// One learner's persisted table.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LearnerState {
    /// uid, or [`SHARED`].
    pub key: u32,
    /// Learning domain (absent in states saved before domains: `hints`).
    #[serde(default)]
    pub domain: Domain,
    /// The domain's device write streams ([`DomainSpec::device_streams`]).
    #[serde(default)]
    pub device_streams: u32,
    /// The domain's erase unit in pages ([`DomainSpec::erase_unit_pages`]).
    #[serde(default)]
    pub erase_unit_pages: u64,
    /// Signature statistics, sorted by signature.
    pub sigs: Vec<(u64, SigStats)>,
}

/// Everything the engine persists or exports (see [`Engine::export`]).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EngineState {
    /// Format version ([`STATE_VERSION`]).
    pub version: u32,
    /// Logical clock when saved (pages: `clock_bytes / 4096`).
    pub clock: u64,
    /// The same in bytes (absent from states saved before it: `clock` pages).
    #[serde(default)]
    pub clock_bytes: u64,
    /// Per-learner signature tables.
    pub learners: Vec<LearnerState>,
    /// Signature descriptions, sorted by signature.
    pub signatures: Vec<(u64, SigInfo)>,
    /// Module descriptions, sorted by key.
    pub modules: Vec<(u64, ModuleDesc)>,
    /// What each learner's signatures wrote, sorted by (key, signature)
    /// (absent from states saved before it).
    #[serde(default)]
    pub usage: Vec<(u32, u64, Usage)>,
}

/// What the write events of one signature carried: calls and bytes, as
/// the shim counted them (`WriteEvent.calls`, `WriteEvent.len`), the same
/// figures `trace-stats` gives for a recording.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    /// Write calls.
    pub calls: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// Version of [`EngineState`].
pub const STATE_VERSION: u32 = 1;

impl EngineState {
    /// Checks a state read from a file before anything of it is applied:
    /// the format version, and every learner's signature statistics
    /// ([`SigStats::check`]: finite, in range). The error is one line
    /// naming the learner, the signature and the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.version != STATE_VERSION {
            return Err(format!(
                "state format version {} is not supported (expected {STATE_VERSION})",
                self.version
            ));
        }
        for l in &self.learners {
            for (sig, s) in &l.sigs {
                s.check().map_err(|why| {
                    let uid = if l.key == SHARED {
                        "shared".to_string()
                    } else {
                        format!("uid {}", l.key)
                    };
                    format!(
                        "learner {uid} ({}), signature {sig:016x}: {why}",
                        l.domain.name()
                    )
                })?;
            }
        }
        Ok(())
    }
}

/// (learner, signature, stream, hint), the published mapping: the stream
/// and hint as the learner's domain publishes them
/// ([`Domain::publish`]); a table keys the entry by
/// [`crate::delivery::table_key`].
pub type Mapping = Vec<(LearnerKey, u64, StreamId, u8)>;

/// The online engine. See the module docs.
#[derive(Debug)]
pub struct Engine {
    cfg: OnlineConfig,
    /// Bytes written by all clients (the logical clock, in bytes).
    bytes: u64,
    learners: BTreeMap<LearnerKey, PcStream>,
    /// The spec each domain's learners were made with.
    domains: BTreeMap<Domain, DomainSpec>,
    counters: EngineCounters,
    sigs: HashMap<u64, SigInfo>,
    modules: HashMap<u64, ModuleDesc>,
    exes: HashMap<u32, String>,
    /// (uid or [`SHARED`], signature) → what it wrote, all domains
    /// together; at most `max_signatures` entries (further pairs are not
    /// counted).
    usage: HashMap<(u32, u64), Usage>,
}

/// Page range `[first, first + pages)` a shim invalidation kills
/// (`pages = u64::MAX`: to the end of the file); the same rule the replay uses.
pub fn invalidated_pages(i: &wire::InvalidateEvent) -> (u64, u64) {
    let kind = wire::InvalidateKind::try_from(i.kind).unwrap_or(wire::InvalidateKind::Unspecified);
    match kind {
        wire::InvalidateKind::Unlink
        | wire::InvalidateKind::RenameReplace
        | wire::InvalidateKind::CloseUnlinked => (0, u64::MAX),
        wire::InvalidateKind::Truncate => (i.offset.div_ceil(PAGE), u64::MAX),
        _ => {
            // Only whole pages inside a punched range die.
            let first = i.offset.div_ceil(PAGE);
            let end = i.offset.saturating_add(i.len) / PAGE;
            (first, end.saturating_sub(first))
        }
    }
}

/// The logical clock (pages) at which page `page` of a write starting at
/// byte `offset` is placed when the byte clock stood at `bytes` before
/// the write: the clock of the write's first byte in that page. The
/// replay's byte clock uses the same rule.
pub fn page_time(bytes: u64, offset: u64, page: u64) -> u64 {
    bytes.saturating_add(page.saturating_mul(PAGE).saturating_sub(offset)) / PAGE
}

/// Decodes one event datagram's payload (what `pcstreamd` receives on
/// `events.sock`). Bounded: prost never allocates more than the payload's
/// length implies. The fuzz target `daemon_datagram` drives it.
pub fn decode_batch(buf: &[u8]) -> Result<wire::EventBatch, prost::DecodeError> {
    <wire::EventBatch as prost::Message>::decode(buf)
}

fn file_of(f: &Option<wire::FileId>) -> (u64, u64) {
    f.as_ref().map(|f| (f.dev, f.ino)).unwrap_or((0, 0))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Engine {
    /// An empty engine.
    pub fn new(cfg: OnlineConfig) -> Self {
        Engine {
            cfg,
            bytes: 0,
            learners: BTreeMap::new(),
            domains: BTreeMap::new(),
            counters: EngineCounters::default(),
            sigs: HashMap::new(),
            modules: HashMap::new(),
            exes: HashMap::new(),
            usage: HashMap::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &OnlineConfig {
        &self.cfg
    }

    /// Logical clock: 4 KiB pages' worth of bytes written by all clients
    /// so far ([`Engine::clock_bytes`] / [`PAGE`]).
    pub fn clock(&self) -> u64 {
        self.bytes / PAGE
    }

    /// Bytes written by all clients so far (what the write events carry).
    pub fn clock_bytes(&self) -> u64 {
        self.bytes
    }

    /// What signature `sig` wrote for uid (or [`SHARED`]) `key`, all
    /// domains together (calls and bytes the write events carried), when
    /// counted.
    pub fn usage(&self, key: u32, sig: u64) -> Option<Usage> {
        self.usage.get(&(key, sig)).copied()
    }

    /// Counters.
    pub fn counters(&self) -> EngineCounters {
        self.counters
    }

    /// The learner key for events of `uid`.
    pub fn key_of(&self, uid: u32) -> u32 {
        if self.cfg.share_between_users {
            SHARED
        } else {
            uid
        }
    }

    fn learner(&mut self, key: LearnerKey, spec: DomainSpec) -> &mut PcStream {
        let spec = *self.domains.entry(key.domain).or_insert(DomainSpec {
            domain: key.domain,
            ..spec
        });
        let streams = self.learner_streams(key.domain);
        let pcfg = &self.cfg.policy;
        self.learners.entry(key).or_insert_with(|| {
            let mut c = pcfg.clone();
            c.mapper.erase_unit_pages = c.mapper.erase_unit_pages.max(spec.erase_unit_pages);
            PcStream::new(streams, c)
        })
    }

    /// Stream ids (0 included) a learner of `domain` clusters into: the
    /// configured `streams` for `hints`, the domain's own count otherwise.
    pub fn learner_streams(&self, domain: Domain) -> u32 {
        match domain {
            Domain::Hints => self.cfg.streams,
            d => d.learner_streams(self.device_streams(d)),
        }
    }

    /// The write streams of the device behind `domain` (0: unknown, or not
    /// a raw device's domain).
    fn device_streams(&self, domain: Domain) -> u32 {
        self.domains.get(&domain).map_or(0, |s| s.device_streams)
    }

    /// The (stream, hint) `domain` publishes for its learners' stream `s`
    /// ([`Domain::publish`] with the domain's device).
    pub fn publish(&self, domain: Domain, s: StreamId) -> (StreamId, u8) {
        domain.publish(s, self.device_streams(domain))
    }

    /// The spec a domain's learners were made with (`None`: not seen yet).
    pub fn domain_spec(&self, domain: Domain) -> Option<DomainSpec> {
        self.domains.get(&domain).copied()
    }

    /// The learners, by key.
    pub fn learners(&self) -> &BTreeMap<LearnerKey, PcStream> {
        &self.learners
    }

    /// The learners of events from `uid` (every domain).
    pub fn learners_of(&self, uid: u32) -> impl Iterator<Item = (&LearnerKey, &PcStream)> {
        let k = self.key_of(uid);
        self.learners.iter().filter(move |(l, _)| l.uid == k)
    }

    /// Sum of the learners' mapping generations: moves whenever a mapping changed.
    pub fn generation(&self) -> u64 {
        self.learners
            .values()
            .map(|l| l.mapper().generation())
            .sum()
    }

    /// Remembers that `key` is `sig` refined by age class `class` (shown
    /// with `sig`'s frames), within [`OnlineConfig::max_signatures`].
    fn note_refined(&mut self, key: u64, sig: u64, class: u32) {
        if self.sigs.contains_key(&key) || self.sigs.len() >= self.cfg.max_signatures {
            return;
        }
        let frames = self
            .sigs
            .get(&sig)
            .map(|i| i.frames.clone())
            .unwrap_or_default();
        self.sigs.insert(
            key,
            SigInfo {
                frames,
                programs: BTreeSet::new(),
                refines: Some((sig, class)),
            },
        );
    }

    /// Ingests one batch sent by process `pid` of user `uid`, every event
    /// in the `hints` domain.
    pub fn ingest(&mut self, uid: u32, pid: u32, batch: &wire::EventBatch) {
        self.ingest_in(uid, pid, batch, &mut |_| DomainSpec::HINTS);
    }

    /// Ingests one batch, each write and invalidation in the domain
    /// `domain_of` gives for its file.
    pub fn ingest_in(
        &mut self,
        uid: u32,
        pid: u32,
        batch: &wire::EventBatch,
        domain_of: &mut dyn FnMut(&wire::FileId) -> DomainSpec,
    ) {
        self.counters.batches += 1;
        for e in &batch.events {
            self.apply_in(uid, pid, e, domain_of);
        }
    }

    /// Applies one event of process `pid` of user `uid` (`hints` domain).
    pub fn apply(&mut self, uid: u32, pid: u32, e: &wire::Event) {
        self.apply_in(uid, pid, e, &mut |_| DomainSpec::HINTS);
    }

    /// Applies one event, its file in the domain `domain_of` gives.
    pub fn apply_in(
        &mut self,
        uid: u32,
        pid: u32,
        e: &wire::Event,
        domain_of: &mut dyn FnMut(&wire::FileId) -> DomainSpec,
    ) {
        self.counters.events += 1;
        let uid_key = self.key_of(uid);
        let mut key_for = |f: &Option<wire::FileId>| {
            let spec = f.as_ref().map_or(DomainSpec::HINTS, &mut *domain_of);
            (
                LearnerKey {
                    uid: uid_key,
                    domain: spec.domain,
                },
                spec,
            )
        };
        match &e.kind {
            Some(Kind::Write(w)) => {
                self.counters.writes += 1;
                if w.len == 0 {
                    return;
                }
                if w.len > MAX_WRITE_BYTES {
                    self.counters.oversized_writes += 1;
                    return;
                }
                let cap = self.cfg.max_signatures;
                let n = self.usage.len();
                if let Some(u) = match self.usage.entry((uid_key, w.signature)) {
                    std::collections::hash_map::Entry::Occupied(o) => Some(o.into_mut()),
                    std::collections::hash_map::Entry::Vacant(v) if n < cap => {
                        Some(v.insert(Usage::default()))
                    }
                    std::collections::hash_map::Entry::Vacant(_) => None,
                } {
                    u.calls += w.call_count();
                    u.bytes += w.len;
                }
                if w.signature != 0 {
                    if let Some(exe) = self.exes.get(&pid) {
                        if let Some(info) = self.sigs.get_mut(&w.signature) {
                            if info.programs.len() < MAX_PROGRAMS && !info.programs.contains(exe) {
                                info.programs.insert(exe.clone());
                            }
                        }
                    }
                }
                let sig = if self.cfg.refine_by_age {
                    let k = age_key(w.signature, w.age_class);
                    if k != w.signature {
                        self.note_refined(k, w.signature, w.age_class);
                    }
                    k
                } else {
                    w.signature
                };
                let file = Some(file_of(&w.file));
                let first = w.offset / PAGE;
                let end = w.offset.saturating_add(w.len).div_ceil(PAGE);
                let bytes = self.bytes;
                let (key, spec) = key_for(&w.file);
                let l = self.learner(key, spec);
                // Page by page (each page at its own clock), in one step
                // per chunk when the write appends.
                l.place_pages(
                    &WriteCtx {
                        lpn: first,
                        pages: 1,
                        file,
                        file_page: first,
                        signature: (sig != 0).then_some(sig),
                        ..Default::default()
                    },
                    end - first,
                    |i| page_time(bytes, w.offset, first + i),
                );
                self.bytes = bytes.saturating_add(w.len);
            }
            Some(Kind::Invalidate(i)) => {
                self.counters.invalidations += 1;
                let (first, pages) = invalidated_pages(i);
                let clock = self.clock();
                let (key, spec) = key_for(&i.file);
                self.learner(key, spec)
                    .invalidate_file(file_of(&i.file), first, pages, clock);
            }
            Some(Kind::Signature(s)) => {
                if !self.sigs.contains_key(&s.signature) {
                    if self.sigs.len() >= self.cfg.max_signatures {
                        self.counters.signatures_untracked += 1;
                        return;
                    }
                    let mut info = SigInfo {
                        frames: s.frames.iter().map(|f| (f.module_key, f.offset)).collect(),
                        ..Default::default()
                    };
                    if let Some(exe) = self.exes.get(&pid) {
                        info.programs.insert(exe.clone());
                    }
                    self.sigs.insert(s.signature, info);
                }
            }
            Some(Kind::Module(m)) => {
                if self.modules.len() < self.cfg.max_signatures {
                    self.modules
                        .entry(m.module_key)
                        .or_insert_with(|| ModuleDesc {
                            path: m.path.clone(),
                            build_id: hex(&m.build_id),
                        });
                }
            }
            Some(Kind::Process(p)) => {
                let kind = wire::ProcessEventKind::try_from(p.kind)
                    .unwrap_or(wire::ProcessEventKind::Unspecified);
                match kind {
                    wire::ProcessEventKind::Exit => {
                        self.counters.client_dropped += p.dropped;
                        self.exes.remove(&pid);
                    }
                    _ => {
                        // A fork child (a server's worker: PostgreSQL's
                        // backends, nginx's workers) runs its parent's
                        // program; its FORK_CHILD names none.
                        let name = if !p.exe.is_empty() {
                            p.exe.rsplit('/').next().unwrap_or(&p.exe).to_string()
                        } else if kind == wire::ProcessEventKind::ForkChild {
                            match self.exes.get(&p.ppid) {
                                Some(parent) => parent.clone(),
                                None => return,
                            }
                        } else {
                            return;
                        };
                        if self.exes.len() >= MAX_PROCESSES {
                            self.exes.clear();
                        }
                        self.exes.insert(pid, name);
                    }
                }
            }
            Some(Kind::AppHint(_)) | Some(Kind::Open(_)) | None => {}
        }
    }

    /// Stream of `sig` for events of `uid` in the `hints` domain.
    pub fn stream(&self, uid: u32, sig: u64) -> StreamId {
        self.stream_in(LearnerKey::hints(self.key_of(uid)), sig)
    }

    /// Stream of `sig` in learner `key`, as its domain publishes it.
    pub fn stream_in(&self, key: LearnerKey, sig: u64) -> StreamId {
        self.learners
            .get(&key)
            .map_or(0, |l| self.publish(key.domain, l.mapper().stream(sig)).0)
    }

    /// The hint a stream stands for (`RWH_WRITE_LIFE_*`).
    pub fn hint_of(stream: StreamId) -> u8 {
        RwHint::for_stream(stream).raw() as u8
    }

    /// Every learner's signature → (stream, hint) table as its domain
    /// publishes it, sorted by (key, signature).
    pub fn mapping(&self) -> Mapping {
        let mut v = Vec::new();
        for (&k, l) in &self.learners {
            let device_streams = self.device_streams(k.domain);
            for (sig, s) in l.mapper().table() {
                let (p, h) = k.domain.publish(s, device_streams);
                v.push((k, sig, p, h));
            }
        }
        v
    }

    /// Forces every learner to re-cluster now.
    pub fn recluster(&mut self) {
        let now = self.clock();
        for l in self.learners.values_mut() {
            l.recluster_now(now);
        }
    }

    /// Description of a signature.
    pub fn sig_info(&self, sig: u64) -> Option<&SigInfo> {
        self.sigs.get(&sig)
    }

    /// Description of a module.
    pub fn module(&self, key: u64) -> Option<&ModuleDesc> {
        self.modules.get(&key)
    }

    /// The learned state (persisted by the daemon, exported between hosts).
    pub fn export(&self) -> EngineState {
        let mut signatures: Vec<_> = self.sigs.iter().map(|(k, v)| (*k, v.clone())).collect();
        signatures.sort_unstable_by_key(|s| s.0);
        let mut modules: Vec<_> = self.modules.iter().map(|(k, v)| (*k, v.clone())).collect();
        modules.sort_unstable_by_key(|m| m.0);
        let mut usage: Vec<_> = self.usage.iter().map(|(&(k, s), &u)| (k, s, u)).collect();
        usage.sort_unstable_by_key(|u| (u.0, u.1));
        EngineState {
            version: STATE_VERSION,
            clock: self.clock(),
            clock_bytes: self.bytes,
            learners: self
                .learners
                .iter()
                .map(|(&key, l)| {
                    let spec = self
                        .domains
                        .get(&key.domain)
                        .copied()
                        .unwrap_or(DomainSpec::HINTS);
                    LearnerState {
                        key: key.uid,
                        domain: key.domain,
                        device_streams: spec.device_streams,
                        erase_unit_pages: spec.erase_unit_pages,
                        sigs: l.export_sigs(),
                    }
                })
                .collect(),
            signatures,
            modules,
            usage,
        }
    }

    /// Loads a saved or exported state: signature statistics are merged
    /// into the learners (a loaded signature replaces a known one), each
    /// learner re-clusters, so known signatures are placed from their first
    /// write. With `share_between_users` every table goes to the shared
    /// learner. Returns the signatures loaded. All or nothing: a state
    /// that fails [`EngineState::validate`] is refused whole, the engine
    /// unchanged.
    pub fn import(&mut self, st: EngineState) -> Result<usize, String> {
        st.validate()?;
        self.bytes = self
            .bytes
            .max(st.clock_bytes)
            .max(st.clock.saturating_mul(PAGE));
        let mut n = 0;
        let now = self.clock();
        for ls in st.learners {
            let uid = if self.cfg.share_between_users {
                SHARED
            } else {
                ls.key
            };
            n += ls.sigs.len();
            let spec = DomainSpec {
                domain: ls.domain,
                device_streams: ls.device_streams,
                erase_unit_pages: ls.erase_unit_pages,
            };
            let key = LearnerKey {
                uid,
                domain: ls.domain,
            };
            self.learner(key, spec).import_sigs(ls.sigs, now);
        }
        for (k, v) in st.signatures {
            if self.sigs.len() < self.cfg.max_signatures || self.sigs.contains_key(&k) {
                self.sigs.insert(k, v);
            }
        }
        for (k, v) in st.modules {
            if self.modules.len() < self.cfg.max_signatures {
                self.modules.entry(k).or_insert(v);
            }
        }
        for (key, sig, u) in st.usage {
            let key = if self.cfg.share_between_users {
                SHARED
            } else {
                key
            };
            if self.usage.len() < self.cfg.max_signatures || self.usage.contains_key(&(key, sig)) {
                self.usage.insert((key, sig), u);
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests;
