//! SVG charts of a `compare` report (plotters): with several traces, WAF of
//! every policy grouped by trace; per trace, WAF bars and
//! normalised-IOPS bars per policy (internal streams off/on side by side),
//! and per-stream lifetime box plots for every policy on a log scale
//! (paper Fig. 11: box = p25..p75, line = median).

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::report::{Report, RunReport, TraceReport};

const OFF: RGBColor = RGBColor(0x4c, 0x72, 0xb0);
const ON: RGBColor = RGBColor(0xdd, 0x84, 0x52);

/// Writes every chart of `report` into `dir` (created if missing); returns the files.
pub fn write_all(report: &Report, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut files = Vec::new();
    if report.traces.len() > 1 {
        for internal in [false, true] {
            if !report.settings.internal_streams.contains(&internal) {
                continue;
            }
            let f = dir.join(format!(
                "all-waf-internal-{}.svg",
                if internal { "on" } else { "off" }
            ));
            all_traces(&f, report, internal).with_context(|| format!("writing {}", f.display()))?;
            files.push(f);
        }
    }
    for (i, t) in report.traces.iter().enumerate() {
        let stem = Path::new(&t.path)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "trace".into());
        let base = format!("{}-{}", i + 1, sanitize(&stem));
        let f = dir.join(format!("{base}-waf.svg"));
        bars(&f, t, "WAF", "write amplification", |r| Some(r.waf))
            .with_context(|| format!("writing {}", f.display()))?;
        files.push(f);
        if t.runs.iter().any(|r| r.iops_normalized.is_some()) {
            let f = dir.join(format!("{base}-iops.svg"));
            bars(
                &f,
                t,
                "IOPS normalised to baseline",
                "IOPS / baseline",
                |r| r.iops_normalized,
            )
            .with_context(|| format!("writing {}", f.display()))?;
            files.push(f);
        }
        for internal in [false, true] {
            let runs: Vec<&RunReport> = t
                .runs
                .iter()
                .filter(|r| r.internal_streams == internal)
                .collect();
            if runs.is_empty() {
                continue;
            }
            let f = dir.join(format!(
                "{base}-lifetimes-internal-{}.svg",
                if internal { "on" } else { "off" }
            ));
            lifetimes(&f, t, &runs, internal)
                .with_context(|| format!("writing {}", f.display()))?;
            files.push(f);
        }
    }
    Ok(files)
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("plotting: {e:?}")
}

fn title_of(t: &TraceReport) -> String {
    let name = Path::new(&t.path)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| t.path.clone());
    let src = match t.source {
        pcstream_replay::Source::GroundTruth => "ground truth",
        pcstream_replay::Source::FsAlloc => "allocation model",
    };
    format!("{name} ({src})")
}

/// Policies in report order (first appearance).
fn policies(t: &TraceReport) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in &t.runs {
        if !v.contains(&r.policy) {
            v.push(r.policy.clone());
        }
    }
    v
}

/// One bar per policy (two, off and on, when both internal settings ran).
fn bars(
    path: &Path,
    t: &TraceReport,
    what: &str,
    y_desc: &str,
    value: impl Fn(&RunReport) -> Option<f64>,
) -> anyhow::Result<()> {
    let pols = policies(t);
    let modes: Vec<bool> = [false, true]
        .into_iter()
        .filter(|m| t.runs.iter().any(|r| r.internal_streams == *m))
        .collect();
    let n = pols.len();
    let ymax = t
        .runs
        .iter()
        .filter_map(&value)
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.3;
    let root = SVGBackend::new(path, (120 * n as u32 + 160, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{what} — {}", title_of(t)), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..ymax)
        .map_err(err)?;
    let names = pols.clone();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&move |x: &f64| {
            category_at(*x, names.len()).map_or_else(String::new, |i| names[i].clone())
        })
        .y_desc(y_desc)
        .draw()
        .map_err(err)?;
    let width = 0.7 / modes.len() as f64;
    for (k, &m) in modes.iter().enumerate() {
        let color = if m { ON } else { OFF };
        let pts: Vec<(f64, f64)> = pols
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let r = t
                    .runs
                    .iter()
                    .find(|r| &r.policy == p && r.internal_streams == m)?;
                Some((i as f64 - 0.35 + width * k as f64, value(r)?))
            })
            .collect();
        let s = chart
            .draw_series(pts.iter().map(|&(x, v)| {
                Rectangle::new([(x + 0.02, 0.0), (x + width - 0.02, v)], color.filled())
            }))
            .map_err(err)?;
        if modes.len() > 1 {
            s.label(format!("internal streams {}", if m { "on" } else { "off" }))
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        chart
            .draw_series(pts.iter().map(|&(x, v)| {
                Text::new(
                    format!("{v:.2}"),
                    (x + 0.04, v + ymax * 0.05),
                    ("sans-serif", 12).into_font().color(&BLACK),
                )
            }))
            .map_err(err)?;
    }
    if modes.len() > 1 {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

/// The category (bar group, stream) an x-axis tick stands for: ticks sit at
/// the integers `0..n`; anything between them gets no label.
fn category_at(x: f64, n: usize) -> Option<usize> {
    let i = x.round();
    ((x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < n).then_some(i as usize)
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(0x4c, 0x72, 0xb0),
    RGBColor(0xdd, 0x84, 0x52),
    RGBColor(0x55, 0xa8, 0x68),
    RGBColor(0xc4, 0x4e, 0x52),
    RGBColor(0x81, 0x72, 0xb3),
    RGBColor(0x93, 0x78, 0x60),
    RGBColor(0xda, 0x8b, 0xc3),
    RGBColor(0x8c, 0x8c, 0x8c),
];

/// WAF of every policy (bars, one colour each) grouped by trace (paper Fig. 9 style).
fn all_traces(path: &Path, report: &Report, internal: bool) -> anyhow::Result<()> {
    let pols = &report.settings.policies;
    let n = report.traces.len();
    let ymax = report
        .traces
        .iter()
        .flat_map(|t| t.runs.iter().map(|r| r.waf))
        .fold(1.0f64, f64::max)
        * 1.6;
    let root = SVGBackend::new(path, ((60 * pols.len() * n) as u32 + 200, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "WAF per trace, internal streams {}",
                if internal { "on" } else { "off" }
            ),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..ymax)
        .map_err(err)?;
    let names: Vec<String> = report
        .traces
        .iter()
        .map(|t| {
            Path::new(&t.path)
                .parent()
                .and_then(|d| d.file_name())
                .map(|d| format!("{}/{}", d.to_string_lossy(), title_of(t)))
                .unwrap_or_else(|| title_of(t))
        })
        .collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&move |x: &f64| {
            category_at(*x, names.len()).map_or_else(String::new, |i| names[i].clone())
        })
        .y_desc("write amplification")
        .draw()
        .map_err(err)?;
    let width = 0.8 / pols.len().max(1) as f64;
    for (k, p) in pols.iter().enumerate() {
        let color = PALETTE[k % PALETTE.len()];
        let pts: Vec<(f64, f64)> = report
            .traces
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                let r = t
                    .runs
                    .iter()
                    .find(|r| &r.policy == p && r.internal_streams == internal)?;
                Some((i as f64 - 0.4 + width * k as f64, r.waf))
            })
            .collect();
        chart
            .draw_series(pts.iter().map(|&(x, v)| {
                Rectangle::new([(x + 0.01, 0.0), (x + width - 0.01, v)], color.filled())
            }))
            .map_err(err)?
            .label(p.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// One panel per policy: a box per stream (p25..p75, median line), log y.
fn lifetimes(
    path: &Path,
    t: &TraceReport,
    runs: &[&RunReport],
    internal: bool,
) -> anyhow::Result<()> {
    let n = runs.len();
    let (mut lo, mut hi) = (f64::MAX, 1.0f64);
    for r in runs {
        for s in &r.per_stream {
            for v in [s.lifetime_p25, s.lifetime_p75].into_iter().flatten() {
                lo = lo.min(v.max(1.0));
                hi = hi.max(v);
            }
        }
    }
    if lo > hi {
        lo = 1.0;
    }
    let (lo, hi) = (lo / 2.0, hi * 2.0);
    let streams = runs
        .iter()
        .flat_map(|r| r.per_stream.iter().map(|s| s.stream + 1))
        .max()
        .unwrap_or(1)
        .max(1) as usize;
    let cols = n.min(3);
    let rows = n.div_ceil(cols);
    let root =
        SVGBackend::new(path, (340 * cols as u32, 300 * rows as u32 + 40)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let root = root
        .titled(
            &format!(
                "Per-stream lifetimes (pages; box p25–p75, line median), internal streams {} — {}",
                if internal { "on" } else { "off" },
                title_of(t)
            ),
            ("sans-serif", 16),
        )
        .map_err(err)?;
    let panels = root.split_evenly((rows, cols));
    for (r, area) in runs.iter().zip(panels.iter()) {
        panel(area, r, streams, lo, hi)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

fn panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    r: &RunReport,
    streams: usize,
    lo: f64,
    hi: f64,
) -> anyhow::Result<()> {
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{} (WAF {:.2})", r.policy, r.waf),
            ("sans-serif", 14),
        )
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(52)
        .build_cartesian_2d(-0.5f64..(streams as f64 - 0.5), (lo..hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(streams + 1)
        .x_label_formatter(&|x: &f64| {
            category_at(*x, streams).map_or_else(String::new, |i| i.to_string())
        })
        .x_desc("stream")
        .y_label_formatter(&|y: &f64| format!("{y:.0e}"))
        .draw()
        .map_err(err)?;
    let boxes: Vec<(f64, f64, f64, f64)> = r
        .per_stream
        .iter()
        .filter_map(|s| {
            Some((
                f64::from(s.stream),
                s.lifetime_p25?.max(lo),
                s.lifetime_p50?.max(lo),
                s.lifetime_p75?.max(lo),
            ))
        })
        .collect();
    chart
        .draw_series(boxes.iter().map(|&(x, a, _, c)| {
            Rectangle::new(
                [(x - 0.3, a), (x + 0.3, c.max(a * 1.02))],
                OFF.mix(0.35).filled(),
            )
        }))
        .map_err(err)?;
    chart
        .draw_series(boxes.iter().map(|&(x, a, _, c)| {
            Rectangle::new(
                [(x - 0.3, a), (x + 0.3, c.max(a * 1.02))],
                OFF.stroke_width(1),
            )
        }))
        .map_err(err)?;
    chart
        .draw_series(boxes.iter().map(|&(x, _, m, _)| {
            PathElement::new(vec![(x - 0.3, m), (x + 0.3, m)], BLACK.stroke_width(2))
        }))
        .map_err(err)?;
    Ok(())
}
