//! Every placement policy by name, and one configuration for all of them:
//! what the simulator's `--policy` flag and the daemon's config select from.
//!
//! | name | module | uses |
//! | --- | --- | --- |
//! | `baseline` | [`crate::placement::Baseline`] | nothing: one stream |
//! | `autostream-sfr` | [`crate::autostream`] | LBA write counts with decay |
//! | `autostream-mq` | [`crate::autostream`] | LBA multi-queue with expiry |
//! | `sepbit` | [`crate::sepbit`] | LBA invalidation times; places GC copies too |
//! | `app-hints` | [`crate::app_hints`] | the application's `F_SET_RW_HINT`s |
//! | `pcstream` | [`crate::pcstream`] | PC signatures refined by online signals, lifetimes learned online |
//! | `pcstream-paper` | [`crate::pcstream`] | the paper's algorithm: PC signatures alone |
//! | `oracle` | [`crate::oracle`] | each write's true death time |
//!
//! Internal (GC) streams are a device option of the simulator, orthogonal to
//! the policy.

use crate::app_hints::AppHints;
use crate::autostream::{AutoStreamConfig, AutoStreamMq, AutoStreamSfr};
use crate::dual::PcStreamDual;
use crate::oracle::{Oracle, OracleConfig};
use crate::pcstream::{PcStream, PcStreamConfig};
use crate::placement::{Baseline, Placement};
use crate::sepbit::SepBit;

/// Names accepted by [`build`], in report order.
pub const POLICY_NAMES: &[&str] = &[
    "baseline",
    "autostream-sfr",
    "autostream-mq",
    "sepbit",
    "app-hints",
    "pcstream",
    "pcstream-paper",
    "oracle",
];

/// Policies [`build`] also knows that reports leave out unless asked
/// for: `oracle-write`, the oracle that must place whole device writes
/// (a page's stream is its write's), the bound for any host placement.
pub const EXTRA_POLICY_NAMES: &[&str] = &["oracle-write"];

/// Configuration of every policy.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyConfig {
    /// Stream ids the device offers, default stream included (PM963: 9).
    pub streams: u32,
    /// AutoStream (both variants).
    pub autostream: AutoStreamConfig,
    /// pcstream.
    pub pcstream: PcStreamConfig,
    /// oracle.
    pub oracle: OracleConfig,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            streams: 9,
            autostream: AutoStreamConfig::default(),
            pcstream: PcStreamConfig::default(),
            oracle: OracleConfig::default(),
        }
    }
}

/// A configuration value out of its range; `key` is its dotted path
/// (e.g. `pcstream.lifetime.chunk_pages`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("placement config: {key} = {value}: {expected}")]
pub struct PolicyConfigError {
    /// Dotted path of the offending key.
    pub key: &'static str,
    /// The value found.
    pub value: String,
    /// What was expected.
    pub expected: &'static str,
}

impl PolicyConfig {
    /// Checks every value's range (the constructors clamp silently; a config
    /// file should be rejected with the key named instead).
    pub fn validate(&self) -> Result<(), PolicyConfigError> {
        fn check<T: std::fmt::Display>(
            key: &'static str,
            value: T,
            ok: bool,
            expected: &'static str,
        ) -> Result<(), PolicyConfigError> {
            if ok {
                Ok(())
            } else {
                Err(PolicyConfigError {
                    key,
                    value: value.to_string(),
                    expected,
                })
            }
        }
        let (a, l, m) = (
            &self.autostream,
            &self.pcstream.lifetime,
            &self.pcstream.mapper,
        );
        check(
            "streams",
            self.streams,
            (1..=65536).contains(&self.streams),
            "1..=65536",
        )?;
        check(
            "autostream.chunk_pages",
            a.chunk_pages,
            a.chunk_pages >= 1,
            "at least 1",
        )?;
        check(
            "autostream.decay_period",
            a.decay_period,
            a.decay_period >= 1,
            "at least 1",
        )?;
        check(
            "autostream.log_base",
            a.log_base,
            a.log_base > 1.0,
            "a number above 1",
        )?;
        check(
            "pcstream.lifetime.chunk_pages",
            l.chunk_pages,
            l.chunk_pages >= 1,
            "at least 1",
        )?;
        check(
            "pcstream.lifetime.max_entries",
            l.max_entries,
            l.max_entries >= 1,
            "at least 1",
        )?;
        check(
            "pcstream.lifetime.ewma_alpha_per_mib",
            l.ewma_alpha_per_mib,
            l.ewma_alpha_per_mib > 0.0 && l.ewma_alpha_per_mib <= 1.0,
            "in (0, 1]",
        )?;
        check(
            "pcstream.mapper.check_interval",
            m.check_interval,
            m.check_interval >= 1,
            "at least 1",
        )?;
        check(
            "pcstream.mapper.change_fraction",
            m.change_fraction,
            (0.0..=1.0).contains(&m.change_fraction),
            "in [0, 1]",
        )?;
        check(
            "pcstream.mapper.change_threshold_log2",
            m.change_threshold_log2,
            m.change_threshold_log2 >= 0.0,
            "at least 0",
        )?;
        check(
            "pcstream.mapper.replicas",
            m.replicas,
            m.replicas >= 1,
            "at least 1",
        )?;
        check(
            "pcstream.mapper.n_runs",
            m.n_runs,
            m.n_runs >= 1,
            "at least 1",
        )?;
        check(
            "oracle.refit_interval",
            self.oracle.refit_interval,
            self.oracle.refit_interval >= 1,
            "at least 1",
        )
    }
}

/// A policy name [`build`] does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown placement policy {name:?} (known: {}, {})", POLICY_NAMES.join(", "), EXTRA_POLICY_NAMES.join(", "))]
pub struct UnknownPolicy {
    /// The name asked for.
    pub name: String,
}

/// Builds the policy called `name`. `baseline` always uses one stream.
pub fn build(name: &str, cfg: &PolicyConfig) -> Result<Box<dyn Placement + Send>, UnknownPolicy> {
    let m = cfg.streams.max(1);
    Ok(match name {
        "baseline" => Box::new(Baseline),
        "autostream-sfr" => Box::new(AutoStreamSfr::new(m, cfg.autostream.clone())),
        "autostream-mq" => Box::new(AutoStreamMq::new(m, cfg.autostream.clone())),
        "sepbit" => Box::new(SepBit::new(m)),
        "app-hints" => Box::new(AppHints::new(m)),
        // `key_by_lba`: the LBA-keyed learner alone (what a block-layer
        // implementation sees); else both, the sharper one placing.
        "pcstream" if cfg.pcstream.key_by_lba => Box::new(PcStream::new(m, cfg.pcstream.clone())),
        "pcstream" => Box::new(PcStreamDual::new(m, cfg.pcstream.clone())),
        "pcstream-paper" => Box::new(PcStream::paper(m, cfg.pcstream.clone())),
        "oracle" => Box::new(Oracle::new(m, cfg.oracle.clone())),
        "oracle-write" => Box::new(Oracle::per_write(m, cfg.oracle.clone())),
        _ => {
            return Err(UnknownPolicy {
                name: name.to_string(),
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::WriteCtx;
    use proptest::prelude::*;

    fn ctx() -> impl Strategy<Value = (WriteCtx, u8)> {
        (
            (
                any::<u64>(),
                prop_oneof![0u64..1000, any::<u64>()],
                0u32..600,
            ),
            (
                proptest::option::of((0u64..3, 0u64..3)),
                prop_oneof![0u64..1000, any::<u64>()],
                proptest::option::of(0u64..6),
            ),
            (0u8..8, proptest::option::of(any::<u64>()), 0u8..4),
        )
            .prop_map(
                |((time, lpn, pages), (file, file_page, sig), (app_hint, death, ev))| {
                    (
                        WriteCtx {
                            time,
                            lpn,
                            pages,
                            file,
                            file_page,
                            signature: sig,
                            app_hint,
                            death,
                            write_death: death,
                        },
                        ev,
                    )
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Any event sequence, however odd (time going backwards, lengths
        /// at the end of the address space, zero-page writes), leaves every
        /// policy answering with one of its own streams.
        #[test]
        fn policies_never_panic_and_stay_in_range(
            evs in proptest::collection::vec(ctx(), 1..60),
            streams in 1u32..10,
        ) {
            let mut cfg = PolicyConfig { streams, ..Default::default() };
            cfg.pcstream.mapper.check_interval = 8;
            cfg.pcstream.lifetime.max_entries = 64;
            for name in POLICY_NAMES.iter().chain(EXTRA_POLICY_NAMES) {
                let mut p = build(name, &cfg).unwrap();
                for (w, ev) in &evs {
                    match ev {
                        0 => p.trim(w.lpn, w.pages, w.time),
                        1 => p.invalidate_file(w.file.unwrap_or((0, 0)), w.file_page, u64::MAX, w.time),
                        _ => {
                            let s = p.place(w);
                            prop_assert!(s < p.streams(), "{} gave {} of {}", name, s, p.streams());
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn validate_names_the_bad_key() {
        assert_eq!(PolicyConfig::default().validate(), Ok(()));
        let mut c = PolicyConfig::default();
        c.pcstream.lifetime.ewma_alpha_per_mib = f64::NAN;
        let e = c.validate().unwrap_err();
        assert_eq!(e.key, "pcstream.lifetime.ewma_alpha_per_mib");
        assert!(e.to_string().contains("NaN"), "{e}");
        let c = PolicyConfig {
            streams: 0,
            ..Default::default()
        };
        assert_eq!(c.validate().unwrap_err().key, "streams");
        let mut c = PolicyConfig::default();
        c.autostream.log_base = 1.0;
        assert_eq!(c.validate().unwrap_err().key, "autostream.log_base");
    }

    #[test]
    fn every_name_builds_and_reports_its_name() {
        let cfg = PolicyConfig::default();
        for n in POLICY_NAMES.iter().chain(EXTRA_POLICY_NAMES) {
            let p = build(n, &cfg).unwrap();
            assert_eq!(p.name(), *n);
            assert!(p.streams() >= 1 && p.streams() <= cfg.streams);
        }
        let e = build("autostream", &cfg).err().unwrap();
        assert!(e.to_string().contains("autostream-sfr"), "{e}");
    }

    #[test]
    fn key_by_lba_runs_the_lba_learner_alone() {
        let has = |p: &dyn Placement, k| p.counters().iter().any(|c| c.0 == k);
        let mut cfg = PolicyConfig::default();
        let dual = build("pcstream", &cfg).unwrap();
        assert!(has(&*dual, "placed_by_lba"), "both learners by default");
        cfg.pcstream.key_by_lba = true;
        let one = build("pcstream", &cfg).unwrap();
        assert_eq!(one.name(), "pcstream");
        assert!(!has(&*one, "placed_by_lba"), "one learner, keyed by LBA");
    }
}
