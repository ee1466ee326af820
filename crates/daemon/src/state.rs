//! The daemon's state behind one lock: the engine, hand-pinned streams, the
//! publisher, counters. Every task (ingest, gRPC, saver, signals) goes
//! through [`Shared`].

use crate::config::Config;
use crate::publish::Publisher;
use pcstream_placement::delivery::Domain;
use pcstream_placement::online::{Engine, EngineState, LearnerKey, Mapping};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Client processes remembered for the `clients` count.
const MAX_CLIENTS: usize = 65536;

/// Everything mutable, under one lock.
#[derive(Debug)]
pub struct Inner {
    /// The learning engine.
    pub engine: Engine,
    /// Streams pinned by SetStreams: (learner key, signature) → stream
    /// (in the learner's `hints` domain).
    pub pins: BTreeMap<(u32, u64), u32>,
    /// The learning domain of each device's writes.
    pub classifier: crate::domains::Classifier,
    /// The table files.
    pub publisher: Publisher,
    /// Engine generation last published.
    pub published_generation: u64,
    /// Pins changed since the last publish.
    pub pins_dirty: bool,
    /// When the mapping last changed.
    pub last_recluster: Option<Instant>,
    /// Client pids seen.
    pub clients: HashSet<u32>,
    /// Events counted at the last rate sample, and when.
    pub rate_mark: (u64, Instant, f64),
    /// Per-uid bounds.
    pub quota: crate::quota::Quota,
}

/// Lock-free counters.
#[derive(Debug, Default)]
pub struct Counters {
    /// Datagrams rejected (undecodable, truncated, no credentials).
    pub malformed: AtomicU64,
    /// gRPC requests refused.
    pub rejected: AtomicU64,
    /// Publishing failures.
    pub publish_errors: AtomicU64,
}

/// Shared by every task.
#[derive(Debug)]
pub struct Shared {
    /// The configuration in force.
    pub config: Mutex<Config>,
    /// The state.
    pub inner: Mutex<Inner>,
    /// Counters.
    pub counters: Counters,
    /// Start time.
    pub started: Instant,
    /// Mapping generation announcements (Watch).
    pub mapping_tx: tokio::sync::watch::Sender<u64>,
    /// The daemon's own uid (allowed to mutate, with root).
    pub own_uid: u32,
    /// The kernel's datagram queue of `events.sock` ([`crate::ingest::bind`]).
    pub event_queue: u32,
}

impl Inner {
    /// A fresh state for `cfg`, optionally from a saved state.
    pub fn new(cfg: &Config, saved: Option<EngineState>) -> Inner {
        let mut engine = Engine::new(cfg.online());
        if let Some(st) = saved {
            match engine.import(st) {
                Ok(n) => tracing::info!(signatures = n, "state reloaded"),
                Err(e) => tracing::error!(error = %e, "state not loaded"),
            }
        }
        Inner {
            engine,
            pins: BTreeMap::new(),
            classifier: crate::domains::Classifier::new(cfg),
            publisher: Publisher::new(&cfg.runtime_dir, cfg.streams),
            published_generation: u64::MAX,
            pins_dirty: false,
            last_recluster: None,
            clients: HashSet::new(),
            rate_mark: (0, Instant::now(), 0.0),
            quota: crate::quota::Quota::new(cfg.max_signatures_per_user),
        }
    }

    /// The engine's mapping with the pins applied.
    pub fn mapping(&self) -> Mapping {
        let mut m = self.engine.mapping();
        if self.pins.is_empty() {
            return m;
        }
        let mut idx: BTreeMap<(LearnerKey, u64), usize> = BTreeMap::new();
        for (i, e) in m.iter().enumerate() {
            idx.insert((e.0, e.1), i);
        }
        for (&(k, sig), &s) in &self.pins {
            let h = Engine::hint_of(s);
            let k = LearnerKey::hints(k);
            match idx.get(&(k, sig)) {
                Some(&i) => m[i] = (k, sig, s, h),
                None => m.push((k, sig, s, h)),
            }
        }
        m
    }

    /// The stream `sig` is pinned to by hand in learner `key` (pins are
    /// for the hints domain only).
    pub fn pin(&self, key: LearnerKey, sig: u64) -> Option<u32> {
        (key.domain == Domain::Hints)
            .then(|| self.pins.get(&(key.uid, sig)).copied())
            .flatten()
    }

    /// Stream of a signature in learner `key` as published, pins applied.
    pub fn stream(&self, key: LearnerKey, sig: u64) -> u32 {
        self.pin(key, sig)
            .unwrap_or_else(|| self.engine.stream_in(key, sig))
    }

    /// Notes a client pid.
    pub fn saw_client(&mut self, pid: u32) {
        if self.clients.len() >= MAX_CLIENTS {
            self.clients.clear();
        }
        self.clients.insert(pid);
    }

    /// Publishes when the mapping moved; returns whether it did.
    pub fn publish_if_changed(&mut self, counters: &Counters) -> bool {
        let g = self.engine.generation();
        if g == self.published_generation && !self.pins_dirty {
            return false;
        }
        let m = self.mapping();
        match self
            .publisher
            .publish(&m, &self.classifier.device_entries())
        {
            Ok(changed) => {
                if g != self.published_generation {
                    self.last_recluster = Some(Instant::now());
                }
                tracing::debug!(generation = g, changed, "mapping published");
            }
            Err(e) => {
                counters.publish_errors.fetch_add(1, Ordering::Relaxed);
                tracing::error!(error = %e, "publishing the mapping failed");
            }
        }
        self.published_generation = g;
        self.pins_dirty = false;
        true
    }

    /// Events per second since the last call (at most once a second).
    pub fn events_per_s(&mut self) -> f64 {
        let ev = self.engine.counters().events;
        let (e0, t0, r) = self.rate_mark;
        let dt = t0.elapsed().as_secs_f64();
        if dt >= 1.0 {
            let rate = (ev - e0) as f64 / dt;
            self.rate_mark = (ev, Instant::now(), rate);
            rate
        } else {
            r
        }
    }
}

impl Shared {
    /// Publishes if needed and announces a new generation to watchers.
    pub fn after_change(&self, inner: &mut Inner) {
        if inner.publish_if_changed(&self.counters) {
            self.mapping_tx.send_replace(inner.publisher.generation());
        }
    }
}
