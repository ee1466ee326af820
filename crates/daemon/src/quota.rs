//! Per-uid bounds on what one user's events may add to the learning state,
//! applied to each datagram before the engine sees it: one uid cannot grow
//! the daemon without bound nor crowd out everyone else's contexts.
//!
//! * Live data: every learner (one per uid unless `share_between_users`)
//!   has its own live-data table capped at `memory_cap_mib` with LRU
//!   eviction (`pcstream_placement::lifetime`): a uid's flood evicts only
//!   its own chunks.
//! * Signatures: a uid may bring at most `max_signatures_per_user` call
//!   paths into its learner (the shared one counts each uid's own). A write
//!   through one more is learnt as an unknown context (signature 0: it still
//!   advances the clock and ends other data's lives, like any write).
//! * Descriptions (frames and programs, shown by `contexts`): the engine
//!   keeps `max_signatures` of them for all users together, first come;
//!   a uid may add at most `max_signatures_per_user` of them.
//!
//! What is refused is counted (`over_quota_events` in Status).

use pcstream_placement::online::Engine;
use pcstream_placement::wire::{self, event::Kind};
use std::collections::{HashMap, HashSet};

/// Most uids whose own counts are kept (beyond, the counts restart: a
/// bound on this table itself).
const MAX_USERS: usize = 4096;

/// The per-uid counts.
#[derive(Debug, Default)]
pub struct Quota {
    per_user: usize,
    /// uid → signatures it brought into the shared learner.
    introduced: HashMap<u32, usize>,
    /// uid → descriptions it added.
    described: HashMap<u32, usize>,
    /// Events refused or demoted, all uids.
    pub over: u64,
}

impl Quota {
    /// Bounds of `per_user` signatures (and descriptions) per uid.
    pub fn new(per_user: usize) -> Quota {
        Quota {
            per_user,
            ..Default::default()
        }
    }

    /// Changes the bound (config reload).
    pub fn set_limit(&mut self, per_user: usize) {
        self.per_user = per_user;
    }

    /// Applies the bounds to `batch` from `uid`, in place; returns how many
    /// events were refused or demoted.
    pub fn admit(&mut self, engine: &Engine, uid: u32, batch: &mut wire::EventBatch) -> u64 {
        if self.introduced.len() > MAX_USERS || self.described.len() > MAX_USERS {
            self.introduced.clear();
            self.described.clear();
        }
        let shared = engine.config().share_between_users;
        let learners: Vec<_> = engine.learners_of(uid).map(|(_, l)| l).collect();
        let mut fresh: HashSet<u64> = HashSet::new();
        let mut over = 0;
        let limit = self.per_user;
        let own = |q: &Quota| -> usize {
            if shared {
                q.introduced.get(&uid).copied().unwrap_or(0)
            } else {
                learners.iter().map(|l| l.lifetimes().sig_count()).sum()
            }
        };
        let mut used = own(self);
        batch.events.retain_mut(|e| match &mut e.kind {
            Some(Kind::Write(w)) if w.signature != 0 => {
                let sig = w.signature;
                let known = fresh.contains(&sig)
                    || learners.iter().any(|l| l.lifetimes().sig(sig).is_some());
                if !known {
                    if used >= limit {
                        w.signature = 0;
                        over += 1;
                    } else {
                        used += 1;
                        fresh.insert(sig);
                    }
                }
                true
            }
            Some(Kind::Signature(s)) if engine.sig_info(s.signature).is_none() => {
                let n = self.described.entry(uid).or_default();
                if *n >= limit {
                    over += 1;
                    false
                } else {
                    *n += 1;
                    true
                }
            }
            _ => true,
        });
        if shared && !fresh.is_empty() {
            *self.introduced.entry(uid).or_default() += fresh.len();
        }
        self.over += over;
        over
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn write(sig: u64, page: u64) -> wire::Event {
        wire::Event {
            kind: Some(Kind::Write(wire::WriteEvent {
                file: Some(wire::FileId { dev: 1, ino: 1 }),
                offset: page * 4096,
                len: 4096,
                signature: sig,
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    fn desc(sig: u64) -> wire::Event {
        wire::Event {
            kind: Some(Kind::Signature(wire::SignatureInfo {
                signature: sig,
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    fn run(shared: bool) {
        let cfg = Config {
            share_between_users: shared,
            ..Config::default()
        };
        let mut e = Engine::new(cfg.online());
        let mut q = Quota::new(3);
        // uid 1 floods: 10 call paths; only 3 are learnt and described.
        let mut b = wire::EventBatch {
            events: (1..=10).flat_map(|s| [desc(s), write(s, s)]).collect(),
            ..Default::default()
        };
        assert_eq!(q.admit(&e, 1, &mut b), 14);
        e.ingest(1, 10, &b);
        let sigs = |e: &Engine| {
            let mut v: Vec<u64> = e
                .learners()
                .values()
                .flat_map(|l| l.lifetimes().sigs_sorted().into_iter().map(|x| x.0))
                .filter(|&s| s != 0)
                .collect();
            v.sort_unstable();
            v
        };
        assert_eq!(sigs(&e), [1, 2, 3]);
        // Known paths still pass; uid 2 is not crowded out.
        let mut b = wire::EventBatch {
            events: vec![write(2, 20), desc(100), write(100, 21)],
            ..Default::default()
        };
        assert_eq!(q.admit(&e, 1, &mut b), 2);
        let mut b2 = wire::EventBatch {
            events: vec![desc(200), write(200, 30)],
            ..Default::default()
        };
        assert_eq!(q.admit(&e, 2, &mut b2), 0);
        e.ingest(2, 20, &b2);
        assert!(sigs(&e).contains(&200));
        assert!(e.sig_info(200).is_some());
        assert_eq!(q.over, 16);
    }

    #[test]
    fn one_uid_is_bounded_and_cannot_crowd_out_another() {
        run(false);
        run(true);
    }
}
