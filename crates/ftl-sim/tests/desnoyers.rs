//! Uniform random writes with greedy GC against Desnoyers' analytical model
//! of greedy cleaning (SYSTOR'12), computed here from `ftl_sim::model`:
//! the simulated steady-state WAF must be within 3 % of the model at OP 7 %,
//! 11 % and 28 %.
//!
//! The device has the paper's 384 pages per block but a quarter of the
//! default geometry's blocks (2048), to keep CI fast; the default geometry
//! was checked by hand (see docs/ftl-sim.md). Slow in debug builds, so it
//! runs only with `--release` (as CI does).

use ftl_sim::workload::synthetic::{Generator, Pattern};
use ftl_sim::{model, Config, Geometry, Ssd};

/// Fills the device, runs `warm` device-writes of uniform random writes to
/// reach the steady state, resets the counters and measures `measure`
/// device-writes. Returns (simulated WAF, model WAF).
fn run(op: f64, blocks_per_unit: u32, warm: f64, measure: f64) -> (f64, f64) {
    let cfg = Config {
        geometry: Geometry {
            blocks_per_unit,
            ..Geometry::default()
        },
        op,
        streams: 1,
        ..Config::default()
    };
    let ppb = cfg.geometry.pages_per_block;
    let mut ssd = Ssd::new(cfg).unwrap();
    let l = ssd.logical_pages();
    let mut g = Generator::new(Pattern::Uniform, l, 1, 42).unwrap();
    ssd.prefill(1.0, |_| 0).unwrap();
    for _ in 0..(warm * l as f64) as u64 {
        let (lpn, s) = g.next_write();
        ssd.write(lpn, s).unwrap();
    }
    ssd.reset_stats();
    for _ in 0..(measure * l as f64) as u64 {
        let (lpn, s) = g.next_write();
        ssd.write(lpn, s).unwrap();
    }
    (ssd.stats().waf, model::greedy_waf(op, ppb))
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "slow without optimisations; run with --release"
)]
fn greedy_uniform_matches_the_analytical_model() {
    for op in [0.07, 0.11, 0.28] {
        let (sim, model) = run(op, 128, 3.0, 2.0);
        let err = (sim - model).abs() / model;
        println!(
            "op {op}: simulated WAF {sim:.4}, model {model:.4}, error {:.2} %",
            err * 100.0
        );
        assert!(err < 0.03, "op {op}: simulated {sim} vs model {model}");
    }
}

/// The full default geometry (12 GiB, 7 % OP): `cargo test -p ftl-sim
/// --release --test desnoyers -- --ignored --nocapture`.
#[test]
#[ignore = "minutes; a manual check of the default geometry"]
fn default_geometry_matches_the_model() {
    for op in [0.07, 0.11, 0.28] {
        let (sim, model) = run(op, 512, 3.0, 2.0);
        let err = (sim - model).abs() / model;
        println!(
            "default geometry, op {op}: simulated {sim:.4}, model {model:.4}, error {:.2} %",
            err * 100.0
        );
        assert!(err < 0.03);
    }
}
