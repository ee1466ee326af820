//! `pcstreamctl status | contexts | streams | watch | export | import`: the
//! gRPC client of pcstreamd on `<runtime dir>/ctl.sock` (`--runtime-dir`,
//! else `$PCSTREAM_RUNTIME_DIR`, else `/run/pcstream`). Human tables by
//! default, `--json` for machines; a daemon that is not running is one line
//! naming the socket tried.

mod watch;

use anyhow::{anyhow, Context as _};
use clap::{Args, Subcommand};
use hyper_util::rt::TokioIo;
use pcstream_placement::wire;
use std::io::Write;
use std::path::{Path, PathBuf};
use tonic::transport::{Channel, Endpoint};

#[allow(missing_docs, clippy::all, missing_debug_implementations)]
mod proto {
    tonic::include_proto!("pcstream.v1");
}
pub(crate) use proto::pc_stream_client::PcStreamClient;
/// The client's transport.
pub(crate) type TonicChannel = Channel;

/// Where the daemon is, shared by the daemon subcommands.
#[derive(Debug, Clone, Args)]
pub struct Conn {
    /// pcstreamd's runtime directory (holds ctl.sock) [env: PCSTREAM_RUNTIME_DIR; default /run/pcstream]
    #[arg(long)]
    pub runtime_dir: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The daemon subcommands.
#[derive(Debug, Subcommand)]
pub enum DaemonCmd {
    /// The daemon's counters: clients, events/s, drops, memory, signatures.
    Status(Conn),
    /// Program contexts the daemon learnt: call path, lifetime, stream, bytes.
    Contexts(ContextsArgs),
    /// Streams: lifetime centroid, member signatures, bytes, hint.
    Streams(Conn),
    /// Live view of streams and top contexts (plain lines when not a terminal).
    Watch(WatchArgs),
    /// Write the learned table to a file (JSON), for another host.
    Export(ExportArgs),
    /// Load a learned table exported by `export` (root or the daemon's user).
    Import(ImportArgs),
    /// Pin a signature to a stream by hand (root or the daemon's user).
    Pin(PinArgs),
    /// Re-cluster every learner now (root or the daemon's user).
    Recluster(Conn),
}

/// `pin` options.
#[derive(Debug, Clone, Args)]
pub struct PinArgs {
    #[command(flatten)]
    pub conn: Conn,
    /// Signature (hex, as `contexts` prints it).
    pub signature: String,
    /// Stream id (0 .. streams-1).
    pub stream: u32,
    /// Learner (uid) whose table to change (default: your uid).
    #[arg(long)]
    pub uid: Option<u32>,
}

/// `contexts` options.
#[derive(Debug, Clone, Args)]
pub struct ContextsArgs {
    #[command(flatten)]
    pub conn: Conn,
    /// Show at most N contexts (heaviest first; 0 = all).
    #[arg(long, default_value_t = 20)]
    pub limit: u32,
    /// Frames as module+offset only (no symbol lookup).
    #[arg(long)]
    pub raw: bool,
}

/// `watch` options.
#[derive(Debug, Clone, Args)]
pub struct WatchArgs {
    #[command(flatten)]
    pub conn: Conn,
    /// Refresh period, milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub interval_ms: u64,
    /// Stop after N refreshes (0 = until q / Ctrl-C).
    #[arg(long, default_value_t = 0)]
    pub count: u64,
}

/// `export` options.
#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub conn: Conn,
    /// Output file ("-" = stdout).
    #[arg(short, long, default_value = "-")]
    pub output: PathBuf,
}

/// `import` options.
#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    #[command(flatten)]
    pub conn: Conn,
    /// A file written by `pcstreamctl export`.
    pub file: PathBuf,
}

/// The runtime directory the client uses.
pub fn runtime_dir(c: &Conn) -> PathBuf {
    c.runtime_dir
        .clone()
        .or_else(|| std::env::var_os(pcstream_placement::env::RUNTIME_DIR).map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/run/pcstream"))
}

async fn connect(sock: &Path) -> anyhow::Result<PcStreamClient<Channel>> {
    let p = sock.to_path_buf();
    let ch = Endpoint::try_from("http://[::1]:0")?
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let p = p.clone();
            async move {
                Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(p).await?))
            }
        }))
        .await
        .map_err(|e| {
            let why = std::error::Error::source(&e)
                .map(|s| s.to_string())
                .unwrap_or_else(|| e.to_string());
            anyhow!(
                "pcstreamd is not reachable at {} ({why}): is the daemon running?",
                sock.display()
            )
        })?;
    Ok(PcStreamClient::new(ch).max_decoding_message_size(256 << 20))
}

/// A failed call as one line: the daemon's own message, or, when the
/// connection broke under the call ([`lost_connection`]), that the daemon
/// went away, instead of hyper's "h2 protocol error: http2 error".
pub(crate) fn status_err(sock: &Path, s: tonic::Status) -> anyhow::Error {
    if lost_connection(&s) {
        return anyhow!(
            "lost the connection to pcstreamd at {} (did it exit? see its log)",
            sock.display()
        );
    }
    anyhow!("pcstreamd ({}): {}", sock.display(), s.message())
}

/// Whether `s` is the client's own account of a broken connection (the
/// daemon exited or crashed mid-call, or between a `watch`'s calls) rather
/// than an answer from the daemon. tonic makes such a status from the
/// transport's error (hyper, h2, the socket), which it keeps as the
/// status's source; a status the daemon sent is read from its headers and
/// has none. Only the codes tonic gives those errors count.
fn lost_connection(s: &tonic::Status) -> bool {
    use tonic::Code;
    let transport_code = matches!(
        s.code(),
        Code::Unknown | Code::Unavailable | Code::Internal | Code::Cancelled
    );
    transport_code && std::error::Error::source(s).is_some()
}

/// Runs a daemon subcommand.
pub fn run(cmd: DaemonCmd) -> anyhow::Result<std::process::ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let conn = match &cmd {
        DaemonCmd::Status(c) | DaemonCmd::Streams(c) | DaemonCmd::Recluster(c) => c.clone(),
        DaemonCmd::Pin(a) => a.conn.clone(),
        DaemonCmd::Contexts(a) => a.conn.clone(),
        DaemonCmd::Watch(a) => a.conn.clone(),
        DaemonCmd::Export(a) => a.conn.clone(),
        DaemonCmd::Import(a) => a.conn.clone(),
    };
    rt.block_on(run_async(conn, cmd))?;
    Ok(std::process::ExitCode::SUCCESS)
}

async fn run_async(conn: Conn, cmd: DaemonCmd) -> anyhow::Result<()> {
    let sock = runtime_dir(&conn).join("ctl.sock");
    let mut c = connect(&sock).await?;
    let e = |s| status_err(&sock, s);
    match cmd {
        DaemonCmd::Status(_) => {
            let r = c
                .status(wire::StatusRequest {})
                .await
                .map_err(e)?
                .into_inner();
            if conn.json {
                println!("{}", serde_json::to_string_pretty(&status_json(&r))?);
            } else {
                print!("{}", status_text(&r));
            }
        }
        DaemonCmd::Contexts(a) => {
            let r = c
                .contexts(wire::ContextsRequest {
                    symbolize: !a.raw,
                    limit: a.limit,
                })
                .await
                .map_err(e)?
                .into_inner();
            let mut sym = crate::symbolize::Symbolizer::new();
            let rows: Vec<_> = r
                .contexts
                .iter()
                .map(|x| context_json(x, (!a.raw).then_some(&mut sym)))
                .collect();
            if conn.json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                print!("{}", contexts_text(&rows));
            }
        }
        DaemonCmd::Streams(_) => {
            let r = c
                .streams(wire::StreamsRequest {})
                .await
                .map_err(e)?
                .into_inner();
            if conn.json {
                println!("{}", serde_json::to_string_pretty(&streams_json(&r))?);
            } else {
                print!("{}", streams_text(&r));
            }
        }
        DaemonCmd::Watch(a) => watch::run(&mut c, &sock, &conn, &a).await?,
        DaemonCmd::Export(a) => {
            let r = c
                .export(wire::ExportRequest {})
                .await
                .map_err(e)?
                .into_inner();
            if a.output == Path::new("-") {
                std::io::stdout().write_all(&r.state_json)?;
            } else {
                std::fs::write(&a.output, &r.state_json)
                    .with_context(|| format!("write {}", a.output.display()))?;
                eprintln!(
                    "exported {} bytes to {}",
                    r.state_json.len(),
                    a.output.display()
                );
            }
        }
        DaemonCmd::Pin(a) => {
            let sig = u64::from_str_radix(a.signature.trim_start_matches("0x"), 16)
                .map_err(|_| anyhow!("signature {:?} is not hexadecimal", a.signature))?;
            // SAFETY: getuid has no preconditions.
            let uid = a.uid.unwrap_or_else(|| unsafe { libc::getuid() });
            let r = c
                .set_streams(wire::SetStreamsRequest {
                    uid,
                    signature_to_stream: [(sig, a.stream)].into_iter().collect(),
                })
                .await
                .map_err(e)?
                .into_inner();
            println!("pinned {} signature(s)", r.applied);
        }
        DaemonCmd::Recluster(_) => {
            let r = c
                .recluster(wire::ReclusterRequest {})
                .await
                .map_err(e)?
                .into_inner();
            println!("re-clustered: mapping generation {}", r.mapping_generation);
        }
        DaemonCmd::Import(a) => {
            let data = read_table(&a.file)?;
            let r = c
                .import(wire::ImportRequest { state_json: data })
                .await
                .map_err(e)?
                .into_inner();
            if conn.json {
                println!("{}", serde_json::json!({ "signatures": r.signatures }));
            } else {
                println!(
                    "imported {} signatures from {}",
                    r.signatures,
                    a.file.display()
                );
            }
        }
    }
    Ok(())
}

/// Largest table `import` sends (and pcstreamd accepts): 64 MiB, some
/// 100,000 signatures of JSON (pcstreamd decodes as much).
pub const MAX_IMPORT_BYTES: u64 = 64 << 20;

/// Reads a table to import: a regular file of at most
/// [`MAX_IMPORT_BYTES`] (not a device or FIFO that never ends).
fn read_table(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    pcstream_placement::readfile::read_bounded(path, MAX_IMPORT_BYTES)
        .with_context(|| format!("read {}", path.display()))
}

pub(crate) fn status_json(r: &wire::StatusReply) -> serde_json::Value {
    serde_json::json!({
        "version": r.version, "uptime_s": r.uptime_s, "clients": r.clients,
        "events": r.events, "events_per_s": r.events_per_s, "batches": r.batches,
        "events_dropped_by_clients": r.events_dropped, "malformed_datagrams": r.malformed,
        "rejected_requests": r.rejected_requests, "over_quota_events": r.over_quota_events,
        "event_queue_datagrams": r.event_queue_datagrams,
        "signatures": r.signatures,
        "learners": r.learners, "streams": r.streams, "mapping_generation": r.mapping_generation,
        "last_recluster_s_ago": r.last_recluster_s, "live_chunks": r.live_chunks,
        "live_chunks_cap": r.live_chunks_cap, "rss_bytes": r.rss_bytes, "clock_pages": r.clock_pages,
        "devices": r.devices.iter().map(|d| serde_json::json!({
            "dev": d.dev, "node": d.node, "path": d.path, "domain": d.domain,
            "classes": d.classes, "device_streams": d.device_streams,
            "erase_unit_bytes": d.erase_unit_bytes, "disks": d.disks, "why": d.why,
            "configured": d.configured, "hints_lost": d.hints_lost,
        })).collect::<Vec<_>>(),
        "warnings": r.warnings,
        "clock_bytes": r.clock_bytes,
    })
}

/// Where the writes seen so far go: one line per device, then the warnings.
fn devices_text(r: &wire::StatusReply) -> String {
    let mut s = String::new();
    if !r.devices.is_empty() {
        s.push_str(
            "devices (where learnt placement goes)
",
        );
        for d in &r.devices {
            s.push_str(&format!(
                "  {:<9} {:<5} {:<6} {:<13} {} class(es){}  {}{}\n",
                d.dev,
                if d.node { "node" } else { "files" },
                d.path,
                d.domain,
                d.classes,
                if d.device_streams > 0 {
                    format!(", {} write streams", d.device_streams)
                } else {
                    String::new()
                },
                d.why,
                if d.configured { " (configured)" } else { "" }
            ));
        }
    }
    for w in &r.warnings {
        s.push_str(&format!("warning: {w}\n"));
    }
    s
}

fn status_text(r: &wire::StatusReply) -> String {
    let recl = if r.last_recluster_s == 0 {
        "never".to_string()
    } else {
        format!("{} s ago", r.last_recluster_s)
    };
    format!(
        "pcstreamd {}  up {} s\n\
         clients            {}\n\
         events             {} ({:.0}/s), {} batches\n\
         dropped by clients {} (events.sock queues {} datagrams)\n\
         malformed          {} datagrams, {} refused requests\n\
         signatures         {} in {} learner(s), {} events over the per-uid bound\n\
         streams            {} (mapping generation {}, last change {recl})\n\
         live chunks        {} of {}\n\
         memory (RSS)       {:.1} MiB\n\
         logical clock      {} pages ({:.1} MiB written)\n",
        r.version,
        r.uptime_s,
        r.clients,
        r.events,
        r.events_per_s,
        r.batches,
        r.events_dropped,
        r.event_queue_datagrams,
        r.malformed,
        r.rejected_requests,
        r.signatures,
        r.learners,
        r.over_quota_events,
        r.streams,
        r.mapping_generation,
        r.live_chunks,
        r.live_chunks_cap,
        r.rss_bytes as f64 / 1048576.0,
        r.clock_pages,
        r.clock_bytes as f64 / 1048576.0,
    ) + &devices_text(r)
}

/// Splits "path+0xoffset".
fn split_frame(f: &str) -> Option<(&str, u64)> {
    let (p, o) = f.rsplit_once("+0x")?;
    Some((p, u64::from_str_radix(o, 16).ok()?))
}

pub(crate) fn context_json(
    x: &wire::Context,
    sym: Option<&mut crate::symbolize::Symbolizer>,
) -> serde_json::Value {
    let frames: Vec<String> = match sym {
        Some(s) => x
            .frames
            .iter()
            .map(|f| match split_frame(f) {
                Some((p, o))
                    if p.starts_with('/') || p.starts_with(pcstream_placement::java::PREFIX) =>
                {
                    let key = pcstream_placement::signature::module_key_from_path(p.as_bytes(), 0);
                    s.resolve(key, p, &[], o).display()
                }
                _ => f.clone(),
            })
            .collect(),
        None => x.frames.clone(),
    };
    let life = |v: f64| (v.is_finite()).then(|| 2f64.powf(v) * 4096.0);
    serde_json::json!({
        "signature": format!("{:016x}", x.signature), "uid": x.uid, "stream": x.stream,
        "domain": if x.domain.is_empty() { "hints" } else { x.domain.as_str() },
        "bytes_written": x.bytes_written, "calls": x.calls, "bytes": x.bytes,
        "deaths": x.lifetime_samples, "dead_pages": x.dead_pages,
        "lifetime_estimate_bytes": life(x.estimate_log2_lifetime_pages),
        "lifetime_mean_bytes": (x.lifetime_samples > 0).then(|| 2f64.powf(x.mean_log2_lifetime_pages) * 4096.0),
        "lifetime_histogram_log2_pages": x.lifetime_histogram, "programs": x.programs, "frames": frames,
        "refines": (x.refines != 0).then(|| format!("{:016x}", x.refines)),
        "placed_by": (!x.placed_by.is_empty()).then_some(x.placed_by.as_str()),
        "age_class": (x.refines != 0).then_some(x.age_class),
    })
}

/// A context row's programs, then for a context refined by age what it
/// refines ([`refined_label`]): what `contexts` and `watch` print.
pub(crate) fn programs_label(r: &serde_json::Value) -> Vec<String> {
    let mut progs: Vec<String> = r["programs"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    progs.extend(refined_label(r));
    progs
}

/// For a context refined by age (`refines`, `age_class`): "PARENT,
/// rewrites after A..B", the call path it refines and the span its pages
/// were rewritten after (4^(class-1)..4^class pages of the writer's own
/// writes); "PARENT, first rewrites of older pages" for pages that held
/// data before the writer first saw their file (`AGE_OLDER`).
fn refined_label(r: &serde_json::Value) -> Option<String> {
    let parent = r["refines"].as_str()?;
    let class = r["age_class"].as_u64()?;
    if class == u64::from(pcstream_placement::signature::AGE_OLDER) {
        return Some(format!("{parent}, first rewrites of older pages"));
    }
    let lo = 4f64.powi(class.clamp(1, 40) as i32 - 1) * 4096.0;
    Some(format!(
        "{parent}, rewrites after {}..{}",
        human_bytes(lo),
        human_bytes(lo * 4.0)
    ))
}

pub(crate) fn human_bytes(b: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < units.len() {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.1} {}", units[i])
}

fn contexts_text(rows: &[serde_json::Value]) -> String {
    let mut s = format!(
        "{:<16} {:>6} {:<11} {:>6} {:>11} {:>7} {:>13} {:<6}  {}\n",
        "SIGNATURE",
        "UID",
        "DOMAIN",
        "STREAM",
        "WRITTEN",
        "DEATHS",
        "LIFETIME",
        "BY",
        "PROGRAMS / CALL PATH"
    );
    for r in rows {
        let life = r["lifetime_estimate_bytes"]
            .as_f64()
            .map_or("-".into(), |b| format!("{} wr", human_bytes(b)));
        let uid = r["uid"].as_u64().unwrap_or(0);
        let uid = if uid == u64::from(u32::MAX) {
            "all".into()
        } else {
            uid.to_string()
        };
        let progs = programs_label(r);
        s.push_str(&format!(
            "{:<16} {:>6} {:<11} {:>6} {:>11} {:>7} {:>13} {:<6}  {}\n",
            r["signature"].as_str().unwrap_or(""),
            uid,
            r["domain"].as_str().unwrap_or("hints"),
            // `Value`'s Display ignores width: format the numbers themselves.
            r["stream"].to_string(),
            human_bytes(r["bytes_written"].as_f64().unwrap_or(0.0)),
            r["deaths"].to_string(),
            life,
            r["placed_by"].as_str().unwrap_or("-"),
            progs.join(",")
        ));
        for f in r["frames"].as_array().into_iter().flatten() {
            s.push_str(&format!("{:>77}{}\n", "", f.as_str().unwrap_or("")));
        }
    }
    s
}

fn streams_json(r: &wire::StreamsReply) -> serde_json::Value {
    let rows: Vec<_> = r
        .streams
        .iter()
        .map(|x| {
            serde_json::json!({
                "uid": x.uid, "stream": x.stream, "hint": x.hint, "signatures": x.signatures,
                "domain": if x.domain.is_empty() { "hints" } else { x.domain.as_str() },
                "devices": x.devices,
                "bytes_written": x.bytes_written,
                "centroid_lifetime_bytes": x.centroid_log2_lifetime_pages.is_finite()
                    .then(|| 2f64.powf(x.centroid_log2_lifetime_pages) * 4096.0),
            })
        })
        .collect();
    serde_json::json!({ "mapping_generation": r.mapping_generation, "streams": rows })
}

fn streams_text(r: &wire::StreamsReply) -> String {
    let mut s = format!("mapping generation {}\n", r.mapping_generation);
    s.push_str(&format!(
        "{:>6} {:<11} {:>6} {:>5} {:>10} {:>11} {:>16}\n",
        "UID", "DOMAIN", "STREAM", "HINT", "SIGNATURES", "WRITTEN", "CENTROID LIFE"
    ));
    let mut last: Option<(u32, &str)> = None;
    for x in &r.streams {
        let domain = if x.domain.is_empty() {
            "hints"
        } else {
            x.domain.as_str()
        };
        if last != Some((x.uid, domain)) {
            last = Some((x.uid, domain));
            let arrive = if x.devices.is_empty() {
                "no device seen yet".to_string()
            } else {
                x.devices.join("; ")
            };
            s.push_str(&format!("  {domain} domain, devices (path): {arrive}\n"));
            // A raw device's learnt classes start at stream 2: stream 1
            // shares placement id 0 with unhinted writes and is left to
            // them (delivery::raw_reserves_first).
            let raw_from_2 = domain.starts_with("raw:")
                && !r
                    .streams
                    .iter()
                    .any(|y| y.uid == x.uid && y.domain == x.domain && y.stream == 1);
            if raw_from_2 {
                s.push_str(
                    "  (stream 1, the device's default placement, is left to writes pcstreamd has not placed)\n",
                );
            }
        }
        let uid = if x.uid == u32::MAX {
            "all".into()
        } else {
            x.uid.to_string()
        };
        let c = if x.centroid_log2_lifetime_pages.is_finite() {
            format!(
                "{} wr",
                human_bytes(2f64.powf(x.centroid_log2_lifetime_pages) * 4096.0)
            )
        } else {
            "-".into()
        };
        s.push_str(&format!(
            "{:>6} {:<11} {:>6} {:>5} {:>10} {:>11} {:>16}\n",
            uid,
            domain,
            x.stream,
            x.hint,
            x.signatures,
            human_bytes(x.bytes_written as f64),
            c
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_columns_line_up_under_their_headers() {
        let row = serde_json::json!({
            "signature": "e1c7514f08ad65a3", "uid": 0, "domain": "hints", "stream": 4,
            "bytes_written": 20.0 * 1048576.0, "deaths": 28,
            "lifetime_estimate_bytes": 12.0 * 1048576.0, "frames": [],
            "placed_by": "little",
        });
        let text = contexts_text(&[row]);
        // What the stream rests on, left-aligned under its header.
        let (head, line) = text.split_once('\n').unwrap();
        assert_eq!(head.find(" BY "), line.find(" little "), "{text}");
        let mut lines = text.lines();
        let (head, line) = (lines.next().unwrap(), lines.next().unwrap());
        // Each right-aligned number ends where its header ends.
        for (h, v) in [("STREAM", " 4 "), ("DEATHS", " 28 ")] {
            let end = head.find(h).unwrap() + h.len();
            let at = line
                .find(v)
                .unwrap_or_else(|| panic!("{v:?} not in {line:?}"));
            assert_eq!(at + v.len() - 1, end, "{h} in\n{head}\n{line}");
        }
    }

    #[test]
    fn a_broken_connection_is_said_so_and_the_daemons_answers_are_kept() {
        let sock = Path::new("/run/x/ctl.sock");
        let lost = "lost the connection to pcstreamd at /run/x/ctl.sock (did it exit? see its log)";
        // What tonic makes of a connection that broke under a call.
        let io = std::io::Error::new(std::io::ErrorKind::BrokenPipe, "broken pipe");
        let s = tonic::Status::from_error(Box::new(io));
        assert_eq!(status_err(sock, s).to_string(), lost);
        // What the daemon answered, read from the response's headers.
        let mut h = tonic::codegen::http::HeaderMap::new();
        tonic::Status::unavailable("busy")
            .add_header(&mut h)
            .unwrap();
        let s = tonic::Status::from_header_map(&h).unwrap();
        assert_eq!(
            status_err(sock, s).to_string(),
            "pcstreamd (/run/x/ctl.sock): busy"
        );
        let s = tonic::Status::invalid_argument("import: bad");
        assert_eq!(
            status_err(sock, s).to_string(),
            "pcstreamd (/run/x/ctl.sock): import: bad"
        );
    }
}
