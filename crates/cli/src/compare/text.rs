//! The human-readable `compare` report: per trace its source, join
//! statistics and device, then the paper's tables.

use std::fmt::Write as _;

use super::report::{Report, TraceReport};
use pcstream_replay::signatures::SignatureRow;

/// Bytes of `pages` 4 KiB pages, human-readable.
fn size(pages: u64) -> String {
    let b = pages as f64 * 4096.0;
    if b >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", b / (1u64 << 20) as f64)
    }
}

/// A page count (lifetime) in k/M/G.
fn pages_short(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v >= 1e9 => format!("{:.1}G", v / 1e9),
        Some(v) if v >= 1e6 => format!("{:.1}M", v / 1e6),
        Some(v) if v >= 1e4 => format!("{:.0}k", v / 1e3),
        Some(v) => format!("{v:.0}"),
    }
}

fn pct(n: u64, d: u64) -> f64 {
    if d == 0 {
        0.0
    } else {
        100.0 * n as f64 / d as f64
    }
}

fn opt_u(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// The one-line note for a trace on which GC copied (almost) nothing, so that
/// every policy's WAF is about 1: it says so and gives the commands that age the device.
fn gc_note(t: &TraceReport) -> Option<String> {
    let most_gc = t
        .runs
        .iter()
        .map(|r| r.gc_pages as f64 / r.host_pages.max(1) as f64)
        .fold(0.0, f64::max);
    if most_gc >= 0.01 {
        return None;
    }
    let copied = if t.runs.iter().all(|r| r.gc_pages == 0) {
        "nothing".to_string()
    } else {
        format!(
            "under 1% of the host writes ({:.2}% at most)",
            most_gc * 100.0
        )
    };
    Some(format!(
        "note: GC copied {copied} under every policy, so placement cannot show (WAF ≈ 1); age the device with \
         the workload's own data: pcstreamctl record --device-trace --device-fill 0.9 -o DIR -- CMD, then \
         pcstreamctl compare --prefill 0 --warmup-passes 1 DIR (docs/compare.md)"
    ))
}

/// The human-readable report: per trace, its source, join statistics and
/// device, then the paper's tables.
pub fn render(rep: &Report) -> String {
    let mut o = String::new();
    let st = &rep.settings;
    let _ = writeln!(
        o,
        "compare: {} trace(s) × {} policies, internal streams {}{}; {} streams, OP {:.0}%, {:.0}% cold pre-fill (unless a trace brings its own fill), TRIM {}",
        rep.traces.len(),
        st.policies.len(),
        match st.internal_streams.as_slice() {
            [false] => "off",
            [true] => "on",
            _ => "off and on",
        },
        match (st.internal_streams.contains(&false), st.shared_gc_block) {
            (false, _) => "",
            (true, false) => " (off: GC copies go back into their stream)",
            (true, true) => " (off: GC copies share one GC block)",
        },
        st.streams,
        st.op * 100.0,
        st.prefill * 100.0,
        if st.trim { "on" } else { "off" }
    );
    if st.warmup_passes > 0 || st.clear_at_marks {
        let _ = writeln!(
            o,
            "policies: {} warm-up pass(es) with tables kept{}",
            st.warmup_passes,
            if st.clear_at_marks {
                "; tables cleared at every round mark"
            } else {
                ""
            }
        );
    }
    if st.native_signatures {
        let _ = writeln!(
            o,
            "signatures: Java writes under their native signatures (the JDK native they went \
             through: what the paper's PCStream sees without its JDK change)"
        );
    }
    for t in &rep.traces {
        let j = &t.join;
        let d = &t.device;
        let _ = writeln!(o, "\n== {} ==", t.path);
        if let Some(note) = gc_note(t) {
            let _ = writeln!(o, "{note}");
        }
        let _ = writeln!(o, "source: {}", t.source_text);
        let _ = writeln!(
            o,
            "join: {} pages written: {} file data ({:.1}% of it with a signature; {} signatures), {} metadata; {} pages trimmed",
            j.write_pages,
            j.data_pages,
            pct(j.signed_pages, j.data_pages),
            j.signatures,
            j.metadata_pages,
            j.trim_pages
        );
        let _ = writeln!(
            o,
            "      shim: {} write events, {} invalidations; {} flushes",
            j.shim_writes, j.shim_invalidations, j.flushes
        );
        let _ = writeln!(
            o,
            "device: {} ch × {} ways × {} blocks × {} pages × {} KiB = {} raw; logical {} \
             ({:.2} × the traced {}; footprint {}, peak live {}); cold pre-fill {} in stream 0",
            d.channels,
            d.ways,
            d.blocks_per_unit,
            d.pages_per_block,
            d.page_size / 1024,
            size(d.physical_pages),
            size(d.logical_pages),
            d.scale,
            size(t.trace_logical_pages),
            size(t.footprint_pages),
            size(t.peak_live_pages),
            size(d.cold_pages)
        );
        if j.ageing_pages > 0 {
            let _ = writeln!(
                o,
                "        aged by the recording's own fill: {} written before the workload started, \
                 replayed into stream 0 first and not measured (--prefill does not apply)",
                size(j.ageing_pages)
            );
        }
        if let Some(f) = t.confined_from_pages {
            let _ = writeln!(
                o,
                "        the trace's writes spread over {}: re-allocated into {} (5/4 of the peak live data) \
                 as on the aged device",
                size(f),
                size(t.footprint_pages.max(1))
            );
        }
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "{:<15} {:>3} {:>7} {:>9} {:>9} {:>7} {:>10} {:>8}",
            "policy", "int", "WAF", "IOPS/base", "stream 0", "streams", "signatures", "reclust."
        );
        for r in &t.runs {
            let _ = writeln!(
                o,
                "{:<15} {:>3} {:>7.3} {:>9} {:>8.1}% {:>7} {:>10} {:>8}",
                r.policy,
                if r.internal_streams { "on" } else { "off" },
                r.waf,
                r.iops_normalized
                    .map_or_else(|| "-".into(), |v| format!("{v:.2}")),
                r.stream0_share * 100.0,
                r.streams_used,
                opt_u(r.signatures),
                opt_u(r.reclusterings)
            );
        }
        let _ = writeln!(
            o,
            "\nper-stream lifetimes (host pages written between a page's write and its invalidation):"
        );
        let _ = writeln!(
            o,
            "{:<15} {:>3} {:>6} {:>8} {:>10} {:>10} {:>8} {:>8} {:>8}",
            "policy", "int", "stream", "share", "written", "dead", "p25", "p50", "p75"
        );
        for r in &t.runs {
            for s in &r.per_stream {
                let _ = writeln!(
                    o,
                    "{:<15} {:>3} {:>6} {:>7.1}% {:>10} {:>10} {:>8} {:>8} {:>8}",
                    r.policy,
                    if r.internal_streams { "on" } else { "off" },
                    s.stream,
                    pct(s.host_pages, r.host_pages),
                    s.host_pages,
                    s.dead_pages,
                    pages_short(s.lifetime_p25),
                    pages_short(s.lifetime_p50),
                    pages_short(s.lifetime_p75)
                );
            }
        }
        if !t.signatures.is_empty() {
            render_signatures(&mut o, t);
        }
    }
    o
}

/// A share in [0, 1] as a whole percentage; `-` for none.
fn share(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{:.0}%", 100.0 * v))
}

/// Below this spread of log2 device lifetimes (a standard deviation, a
/// factor of 1.4) a signature's pages live alike, and what explains the
/// rest of the spread says nothing worth acting on.
const MIN_SPREAD_LOG2: f64 = 0.5;

/// [`share`] of a row's spread, `-` where its lifetimes barely spread.
fn spread_share(r: &SignatureRow, v: Option<f64>) -> String {
    match r.device_spread_log2 {
        Some(sd) if sd >= MIN_SPREAD_LOG2 => share(v),
        _ => "-".to_string(),
    }
}

fn render_signatures(o: &mut String, t: &TraceReport) {
    let _ = writeln!(
        o,
        "\npcstream by signature ({}; measured pass): its streams, the lifetime it learnt \
         (from the deaths it hears), the lifetime of the streams it placed them in (median), the pages' \
         lifetimes on the device (p10 / p50 / p90; `-`: none died), the error (median factor between \
         placed-for and device lifetime), how much of the spread of those lifetimes the time since \
         each address was last written (hist) and the page's place in its device write (tail) explain, \
         and how pcstream-paper (the paper's algorithm) placed the same pages and what it learnt:",
        if t.explained {
            "the signatures asked for".to_string()
        } else {
            format!("the {} heaviest", t.signatures.len())
        }
    );
    let _ = writeln!(
        o,
        "{:<18} {:>6} {:>10} {:<18} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>5} {:>5}  {:<18} {:>8}",
        "signature",
        "share",
        "pages",
        "streams",
        "learnt",
        "placed",
        "dev p10",
        "dev p50",
        "dev p90",
        "error",
        "hist",
        "tail",
        "paper streams",
        "learnt"
    );
    for r in &t.signatures {
        let top3 = |v: &[(u32, u64)]| {
            v.iter()
                .take(3)
                .map(|(s, n)| format!("{s}:{:.0}%", pct(*n, r.pages)))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let _ = writeln!(
            o,
            "{:<18} {:>5.1}% {:>10} {:<18} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>5} {:>5}  {:<18} {:>8}",
            r.signature
                .map_or_else(|| "(none)".to_string(), |s| format!("{s:016x}")),
            pct(r.pages, t.host_pages),
            r.pages,
            top3(&r.streams),
            pages_short(r.estimate_log2.map(f64::exp2)),
            pages_short(r.placed_for_log2.map(f64::exp2)),
            pages_short(r.device_lifetime_p10.map(|v| v as f64)),
            pages_short(r.device_lifetime_p50.map(|v| v as f64)),
            pages_short(r.device_lifetime_p90.map(|v| v as f64)),
            r.error_log2_p50
                .map_or_else(|| "-".to_string(), |e| format!("{:.1}x", e.exp2())),
            spread_share(r, r.explained_by_history),
            spread_share(r, r.explained_by_write_tail),
            top3(&r.paper_streams),
            pages_short(r.paper_estimate_log2.map(f64::exp2)),
        );
    }
    if t.explained {
        for r in &t.signatures {
            let all = |v: &[(u32, u64)]| {
                v.iter()
                    .map(|(s, n)| format!("stream {s}: {n} pages ({:.1}%)", pct(*n, r.pages)))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let sig = r
                .signature
                .map_or_else(|| "(none)".to_string(), |s| format!("{s:016x}"));
            let _ = writeln!(o, "\n{sig}: {} pages in the measured pass", r.pages);
            let learnt = if r.learnt_dead_pages == 0 {
                // Overwrites are learnt under the signature refined by
                // each page's previous lifetime, not under the bare one.
                "no death heard under the bare signature (its overwrites, if any, are learnt under keys \
                 refined by each page's previous lifetime)"
                    .to_string()
            } else {
                format!(
                    "{} ({} dead pages heard)",
                    pages_short(r.estimate_log2.map(f64::exp2)),
                    r.learnt_dead_pages
                )
            };
            let _ = writeln!(o, "  pcstream:       learnt {learnt}; {}", all(&r.streams));
            let _ = writeln!(
                o,
                "                  placed by its LBA-keyed learner: {} pages ({:.1}%), by its \
                 file-keyed one (the paper's keying): {}",
                r.lba_learner_pages,
                pct(r.lba_learner_pages, r.pages),
                r.pages - r.lba_learner_pages
            );
            if !r.rules.is_empty() {
                let rules = r
                    .rules
                    .iter()
                    .map(|(rule, n)| format!("{rule}: {:.1}%", pct(*n, r.pages)))
                    .collect::<Vec<_>>()
                    .join("; ");
                let _ = writeln!(
                    o,
                    "                  the rule that placed them: {rules}; under keys refined \
                     (by hint, previous lifetime or write interval): {:.1}%",
                    pct(r.refined_pages, r.pages)
                );
            }
            let _ = writeln!(
                o,
                "  pcstream-paper: learnt {}; {}",
                pages_short(r.paper_estimate_log2.map(f64::exp2)),
                all(&r.paper_streams)
            );
            let _ = writeln!(
                o,
                "  on the device:  {} of its pages died within the pass, after {} / {} / {} pages \
                 (p10 / p50 / p90)",
                r.device_dead_pages,
                pages_short(r.device_lifetime_p10.map(|v| v as f64)),
                pages_short(r.device_lifetime_p50.map(|v| v as f64)),
                pages_short(r.device_lifetime_p90.map(|v| v as f64)),
            );
            if let Some(sd) = r.device_spread_log2.filter(|&sd| sd < MIN_SPREAD_LOG2) {
                let _ = writeln!(
                    o,
                    "  what separates them: nothing to separate, their lifetimes barely spread \
                     (±{sd:.2} log2 pages)"
                );
            } else if let Some(sd) = r.device_spread_log2 {
                let _ = writeln!(
                    o,
                    "  what separates them: of their spread (±{sd:.1} log2 pages), the time since \
                     their address was last written explains {}, their place in their device \
                     write {} (one device write has one stream: no host placement uses that part)",
                    share(r.explained_by_history),
                    share(r.explained_by_write_tail),
                );
            }
        }
    }
    let _ = writeln!(
        o,
        "(none): device writes without a signature (file-system metadata, journal). \
         `pcstreamctl trace-stats TRACE` shows each signature's call path."
    );
}
