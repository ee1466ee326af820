//! `pcstreamctl watch`: the daemon's live view.
//!
//! On a terminal (stdout and stdin both, no `--json`): a ratatui screen in
//! the alternate screen and raw mode, redrawn every `--interval-ms` — a
//! status line (uptime, clients, events/s, drops, signatures, RSS), a
//! sparkline of events/s, the streams (hint, signatures, bytes, centroid
//! lifetime), the top contexts (stream, bytes, lifetime estimate, programs,
//! call path, symbolized) and the mapping updates the daemon's Watch stream
//! sends (each re-clustering, and each new signature placed between them). `q`, Esc or Ctrl-C leave it; the terminal
//! is restored on every exit path (ratatui's panic hook included).
//!
//! Otherwise: one plain line per refresh and one per mapping update
//! (`--json`: one JSON object per line), what a log or a pipe wants.

use super::{context_json, human_bytes, status_err, status_json, Conn, WatchArgs};
use super::{PcStreamClient, TonicChannel};
use pcstream_placement::wire;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, List, ListItem, Paragraph, Row, Sparkline, Table};
use std::collections::VecDeque;
use std::io::IsTerminal;
use std::path::Path;

/// Events/s samples kept for the sparkline.
const HISTORY: usize = 240;
/// Mapping updates listed.
const KEPT_UPDATES: usize = 50;
/// Contexts listed.
const TOP: u32 = 20;

/// Runs `watch` (see the module docs).
pub async fn run(
    c: &mut PcStreamClient<TonicChannel>,
    sock: &Path,
    conn: &Conn,
    a: &WatchArgs,
) -> anyhow::Result<()> {
    let tty = std::io::stdout().is_terminal() && std::io::stdin().is_terminal() && !conn.json;
    let mut updates = c
        .watch(wire::WatchRequest {})
        .await
        .map_err(|s| status_err(sock, s))?
        .into_inner();
    let mut view = View::default();
    let mut term = tty.then(ratatui::init);
    // Keys are read on a thread of their own (crossterm's read blocks).
    let (keys_tx, mut keys) = tokio::sync::mpsc::channel::<()>(1);
    if tty {
        std::thread::spawn(move || loop {
            match event::poll(std::time::Duration::from_millis(100)) {
                Ok(true) => {}
                Ok(false) if keys_tx.is_closed() => return,
                Ok(false) => continue,
                Err(_) => return,
            }
            if let Ok(Event::Key(k)) = event::read() {
                let ctrl_c =
                    k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                let quit = matches!(k.code, KeyCode::Char('q' | 'Q') | KeyCode::Esc) || ctrl_c;
                if k.kind == KeyEventKind::Press && quit {
                    let _ = keys_tx.blocking_send(());
                    return;
                }
            }
        });
    }
    let r = async {
        let mut n = 0u64;
        let mut tick =
            tokio::time::interval(std::time::Duration::from_millis(a.interval_ms.max(50)));
        let ctrl_c = tokio::signal::ctrl_c();
        tokio::pin!(ctrl_c);
        loop {
            tokio::select! {
                _ = &mut ctrl_c => return Ok(()),
                _ = keys.recv() => return Ok(()),
                u = updates.message() => {
                    let Some(u) = u.map_err(|s| status_err(sock, s))? else {
                        anyhow::bail!("pcstreamd ({}) closed the watch stream", sock.display());
                    };
                    if tty {
                        view.mapping(&u);
                    } else if conn.json {
                        println!("{}", serde_json::json!({"event": "mapping", "uid": u.uid,
                            "generation": u.generation, "signatures": u.signature_to_stream.len()}));
                    } else {
                        println!("mapping generation {} uid {}: {} signatures mapped",
                            u.generation, u.uid, u.signature_to_stream.len());
                    }
                }
                _ = tick.tick() => {
                    let st = c.status(wire::StatusRequest {}).await
                        .map_err(|s| status_err(sock, s))?.into_inner();
                    if let Some(t) = term.as_mut() {
                        let sr = c.streams(wire::StreamsRequest {}).await
                            .map_err(|s| status_err(sock, s))?.into_inner();
                        let cx = c.contexts(wire::ContextsRequest { symbolize: true, limit: TOP }).await
                            .map_err(|s| status_err(sock, s))?.into_inner();
                        view.refresh(sock, st, sr, cx);
                        t.draw(|f| view.draw(f))?;
                    } else if conn.json {
                        println!("{}", serde_json::json!({"event": "status", "status": status_json(&st)}));
                    } else {
                        println!("events {} ({:.0}/s) signatures {} generation {} clients {} rss {:.1} MiB",
                            st.events, st.events_per_s, st.signatures, st.mapping_generation,
                            st.clients, st.rss_bytes as f64 / 1048576.0);
                    }
                    n += 1;
                    if a.count > 0 && n >= a.count {
                        return Ok(());
                    }
                }
            }
        }
    }
    .await;
    if term.take().is_some() {
        ratatui::restore();
    }
    r
}

/// What the screen shows, kept between refreshes.
#[derive(Default)]
struct View {
    title: String,
    status: Option<wire::StatusReply>,
    streams: Vec<wire::StreamInfo>,
    contexts: Vec<serde_json::Value>,
    rates: VecDeque<u64>,
    /// (time, generation, uid, signatures mapped), newest first.
    updates: VecDeque<(String, u64, u32, usize)>,
    seen: u64,
    sym: Option<crate::symbolize::Symbolizer>,
}

impl View {
    fn mapping(&mut self, u: &wire::MappingUpdate) {
        self.seen += 1;
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let hms = format!("{:02}:{:02}:{:02}", t / 3600 % 24, t / 60 % 60, t % 60);
        self.updates
            .push_front((hms, u.generation, u.uid, u.signature_to_stream.len()));
        self.updates.truncate(KEPT_UPDATES);
    }

    fn refresh(
        &mut self,
        sock: &Path,
        st: wire::StatusReply,
        sr: wire::StreamsReply,
        cx: wire::ContextsReply,
    ) {
        self.title = format!(
            " pcstreamctl watch — {}  (q, Esc or Ctrl-C to quit) ",
            sock.display()
        );
        self.rates.push_back(st.events_per_s.max(0.0) as u64);
        while self.rates.len() > HISTORY {
            self.rates.pop_front();
        }
        let sym = self
            .sym
            .get_or_insert_with(crate::symbolize::Symbolizer::new);
        self.contexts = cx
            .contexts
            .iter()
            .map(|x| context_json(x, Some(&mut *sym)))
            .collect();
        self.streams = sr.streams;
        self.status = Some(st);
    }

    fn draw(&self, f: &mut ratatui::Frame<'_>) {
        let [head, spark, mid, bottom] = Layout::vertical([
            Constraint::Length(4),
            Constraint::Length(5),
            Constraint::Length(self.streams.len().clamp(1, 12) as u16 + 3),
            Constraint::Min(5),
        ])
        .areas(f.area());
        let bold = Style::default().add_modifier(Modifier::BOLD);
        let text = match &self.status {
            Some(s) => vec![
                Line::from(format!(
                    "pcstreamd {}  up {} s  clients {}  events {} ({:.0}/s)  dropped by clients {}  malformed {}",
                    s.version, s.uptime_s, s.clients, s.events, s.events_per_s, s.events_dropped, s.malformed
                )),
                Line::from(format!(
                    "signatures {} in {} learner(s)  mapping generation {}  mapping updates seen {}  live chunks {}/{}  RSS {:.1} MiB",
                    s.signatures, s.learners, s.mapping_generation, self.seen, s.live_chunks,
                    s.live_chunks_cap, s.rss_bytes as f64 / 1048576.0
                )),
            ],
            None => vec![Line::from("waiting for pcstreamd…")],
        };
        f.render_widget(
            Paragraph::new(text).block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(self.title.as_str()),
            ),
            head,
        );
        let rates: Vec<u64> = self.rates.iter().copied().collect();
        f.render_widget(
            Sparkline::default()
                .block(Block::default().borders(Borders::ALL).title(" events/s "))
                .data(&rates),
            spark,
        );
        let rows = self.streams.iter().map(|s| {
            let c = if s.centroid_log2_lifetime_pages.is_finite() {
                human_bytes(2f64.powf(s.centroid_log2_lifetime_pages) * 4096.0)
            } else {
                "-".into()
            };
            let uid = if s.uid == u32::MAX {
                "all".into()
            } else {
                s.uid.to_string()
            };
            Row::new(vec![
                uid,
                s.stream.to_string(),
                s.hint.to_string(),
                s.signatures.to_string(),
                human_bytes(s.bytes_written as f64),
                c,
            ])
        });
        f.render_widget(
            Table::new(rows, [6, 7, 5, 11, 12, 16].map(Constraint::Length))
                .header(
                    Row::new([
                        "UID",
                        "STREAM",
                        "HINT",
                        "SIGNATURES",
                        "WRITTEN",
                        "CENTROID LIFE",
                    ])
                    .style(bold),
                )
                .block(Block::default().borders(Borders::ALL).title(" streams ")),
            mid,
        );
        let [ctx, recl] =
            Layout::horizontal([Constraint::Min(40), Constraint::Length(42)]).areas(bottom);
        let rows = self.contexts.iter().map(|r| {
            let life = r["lifetime_estimate_bytes"]
                .as_f64()
                .map_or("-".into(), human_bytes);
            let progs = super::programs_label(r);
            let frames: Vec<&str> = r["frames"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|p| p.as_str())
                        .map(|f| f.split("  ").next().unwrap_or(f))
                        .collect()
                })
                .unwrap_or_default();
            Row::new(vec![
                r["signature"].as_str().unwrap_or("").to_string(),
                r["stream"].to_string(),
                human_bytes(r["bytes_written"].as_f64().unwrap_or(0.0)),
                life,
                progs.join(","),
                frames.join(" < "),
            ])
        });
        f.render_widget(
            Table::new(
                rows,
                [
                    Constraint::Length(17),
                    Constraint::Length(6),
                    Constraint::Length(11),
                    Constraint::Length(11),
                    Constraint::Length(12),
                    Constraint::Min(10),
                ],
            )
            .header(
                Row::new([
                    "SIGNATURE",
                    "STREAM",
                    "WRITTEN",
                    "LIFETIME",
                    "PROGRAMS",
                    "CALL PATH",
                ])
                .style(bold),
            )
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(" top contexts "),
            ),
            ctx,
        );
        let items: Vec<ListItem<'_>> = self
            .updates
            .iter()
            .map(|(t, g, uid, n)| {
                let uid = if *uid == u32::MAX {
                    "all".into()
                } else {
                    uid.to_string()
                };
                ListItem::new(format!("{t} gen {g} uid {uid}: {n} mapped"))
            })
            .collect();
        f.render_widget(
            List::new(items).block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(" mapping updates "),
            ),
            recl,
        );
    }
}
