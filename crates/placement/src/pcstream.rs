//! `pcstream`: signature → stream, learned online from the data's lifetimes.
//!
//! Each write is placed by looking its signature up in the [`Mapper`]'s table
//! (unknown → stream 0), then handed to the [`LifetimeManager`], which ends
//! the lives it overwrites and records the new data. TRIMs and file
//! invalidations (punch, truncate, unlink) end lives too. After each event the
//! mapper's re-cluster rule is applied (cheap unless its interval elapsed).
//!
//! Keying: a write that names a file is tracked by `(file, page in file)`,
//! whose lives end by overwrite or [`Placement::invalidate_file`]; a write
//! without a file (block traces) by its LBA, whose lives end by overwrite or
//! [`Placement::trim`]. `key_by_lba` forces LBA keying for every write (for
//! traces whose deletions are only visible as TRIMs).
//!
//! This is the same code the daemon runs online; the signature table survives
//! restarts through [`PcStream::export_sigs`] / [`PcStream::import_sigs`].

use crate::lifetime::{LifetimeConfig, LifetimeManager, SigStats, LBA_SPACE};
use crate::mapper::{Mapper, MapperConfig};
use crate::placement::{Placement, StreamId, WriteCtx};

/// Tunables of the `pcstream` policy.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PcStreamConfig {
    /// Lifetime manager settings.
    pub lifetime: LifetimeConfig,
    /// Mapper settings.
    pub mapper: MapperConfig,
    /// Track every write by LBA even when it names a file. Default false.
    pub key_by_lba: bool,
}

/// The `pcstream` policy. See the module docs.
#[derive(Debug)]
pub struct PcStream {
    streams: u32,
    key_by_lba: bool,
    lm: LifetimeManager,
    mapper: Mapper,
}

impl PcStream {
    /// `pcstream` for a device with `streams` stream ids (0 = unknown).
    pub fn new(streams: u32, cfg: PcStreamConfig) -> Self {
        let streams = streams.max(1);
        PcStream {
            streams,
            key_by_lba: cfg.key_by_lba,
            lm: LifetimeManager::new(cfg.lifetime),
            mapper: Mapper::new(streams, cfg.mapper),
        }
    }

    /// The lifetime manager (signature statistics, counters).
    pub fn lifetimes(&self) -> &LifetimeManager {
        &self.lm
    }

    /// The mapper (signature → stream table, centroids, generation).
    pub fn mapper(&self) -> &Mapper {
        &self.mapper
    }

    /// Forces a re-clustering at logical time `now` (e.g. after a reload).
    pub fn recluster_now(&mut self, now: u64) {
        let f = self.mapper.features(&self.lm, now);
        self.mapper.recluster(&f);
    }

    /// The signature table, sorted, for persisting.
    pub fn export_sigs(&self) -> Vec<(u64, SigStats)> {
        self.lm
            .sigs_sorted()
            .into_iter()
            .map(|(k, s)| (k, s.clone()))
            .collect()
    }

    /// Reloads a persisted signature table and re-clusters at `now`, so
    /// known signatures are placed from their first write.
    pub fn import_sigs(&mut self, sigs: impl IntoIterator<Item = (u64, SigStats)>, now: u64) {
        self.lm.load_sigs(sigs);
        self.recluster_now(now);
    }
}

impl Placement for PcStream {
    fn name(&self) -> &str {
        "pcstream"
    }

    fn streams(&self) -> u32 {
        self.streams
    }

    fn place(&mut self, w: &WriteCtx) -> StreamId {
        let sig = w.signature.unwrap_or(0);
        let stream = self.mapper.stream(sig);
        let (space, first) = match w.file {
            Some(f) if !self.key_by_lba => (f, w.file_page),
            _ => (LBA_SPACE, w.lpn),
        };
        let pages = u64::from(w.pages);
        self.lm.write(space, first, pages, sig, w.time);
        self.mapper
            .maybe_recluster(&self.lm, w.time.saturating_add(pages));
        stream
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = self.lm.counters();
        vec![
            ("signatures", self.lm.sig_count() as u64),
            ("mapped_signatures", self.mapper.table().len() as u64),
            ("reclusters", self.mapper.generation()),
            ("live_entries", self.lm.live_entries() as u64),
            ("deaths", c.deaths),
            ("evictions", c.evictions),
        ]
    }

    fn trim(&mut self, lpn: u64, pages: u32, time: u64) {
        self.lm.invalidate(LBA_SPACE, lpn, u64::from(pages), time);
        self.mapper.maybe_recluster(&self.lm, time);
    }

    fn invalidate_file(&mut self, file: (u64, u64), first_page: u64, pages: u64, time: u64) {
        if !self.key_by_lba {
            self.lm.invalidate(file, first_page, pages, time);
            self.mapper.maybe_recluster(&self.lm, time);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> PcStreamConfig {
        PcStreamConfig {
            lifetime: LifetimeConfig {
                chunk_pages: 1,
                ..Default::default()
            },
            mapper: MapperConfig {
                check_interval: 64,
                censor_min_age: 256,
                ..Default::default()
            },
            key_by_lba: false,
        }
    }

    fn write(t: u64, file: u64, page: u64, sig: u64) -> WriteCtx {
        WriteCtx {
            time: t,
            lpn: 1_000_000 + t,
            pages: 1,
            file: Some((1, file)),
            file_page: page,
            signature: Some(sig),
            ..Default::default()
        }
    }

    #[test]
    fn learns_from_unlinks_and_persists_across_restart() {
        let mut p = PcStream::new(3, cfg());
        let mut t = 0;
        // sig 1: 8-page temp files deleted once written (lifetimes 1..8);
        // sig 2: two pages of one file rewritten alternately (lifetime 18).
        for round in 0..100u64 {
            for pg in 0..8 {
                p.place(&write(t, 100 + round, pg, 1));
                t += 1;
            }
            p.invalidate_file((1, 100 + round), 0, u64::MAX, t);
            p.place(&write(t, 7, round % 2, 2));
            t += 1;
        }
        assert_eq!(p.mapper().stream(1), 1);
        assert_eq!(p.mapper().stream(2), 2);
        assert_eq!(p.place(&write(t, 9, 0, 77)), 0, "unknown signature");
        let c: std::collections::BTreeMap<_, _> = p.counters().into_iter().collect();
        assert_eq!(c["signatures"], 3);
        assert_eq!(c["mapped_signatures"], 2);
        assert!(c["reclusters"] >= 1);
        let saved = p.export_sigs();
        let mut q = PcStream::new(3, cfg());
        q.import_sigs(saved, 0);
        assert_eq!(
            q.place(&write(0, 500, 0, 1)),
            1,
            "known from the first write"
        );
        assert_eq!(q.place(&write(1, 501, 0, 2)), 2);
    }

    #[test]
    fn lba_writes_learn_from_trims() {
        let mut p = PcStream::new(3, cfg());
        for t in 0..2000u64 {
            let (lpn, sig) = if t % 2 == 0 {
                (t % 10, 1)
            } else {
                (5000 + t, 2)
            };
            let w = WriteCtx {
                time: t,
                lpn,
                pages: 1,
                signature: Some(sig),
                ..Default::default()
            };
            p.place(&w);
            if t % 2 == 1 && t > 600 {
                p.trim(5000 + t - 600, 1, t);
            }
        }
        assert_eq!(p.mapper().stream(1), 1);
        assert_eq!(p.mapper().stream(2), 2);
    }
}
