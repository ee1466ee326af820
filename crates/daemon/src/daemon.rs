//! The daemon's life cycle: directories, sockets, tasks, signals.
//! Start: lock the runtime and state directories ([`crate::lock`]: one
//! daemon each), load config and state, bind `events.sock` and `ctl.sock`, publish
//! the reloaded mapping, `READY=1`. Run: ingest, gRPC, a periodic save.
//! SIGHUP: config re-read (the engine rebuilt from its exported state when
//! engine settings changed). SIGTERM/SIGINT: `STOPPING=1`, stop accepting,
//! save, remove the sockets, exit 0.

use crate::config::Config;
use crate::state::{Counters, Inner, Shared};
use crate::{conn, ingest, lock, notify, persist, rpc};
use anyhow::Context as _;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::UnixListener;
use tokio::signal::unix::{signal, SignalKind};

fn make_dir(p: &Path, mode: u32) -> anyhow::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(p)
        .with_context(|| format!("create directory {}", p.display()))
}

fn set_mode(p: &Path, mode: u32) -> anyhow::Result<()> {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", p.display()))
}

/// Saves the state now (logged; errors are not fatal).
pub fn save(shared: &Shared) {
    let st = shared
        .inner
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .engine
        .export();
    let dir = shared
        .config
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .state_dir
        .clone();
    let t = Instant::now();
    match persist::save(&dir, &st) {
        Ok(()) => tracing::info!(
            path = %persist::state_path(&dir).display(),
            signatures = st.learners.iter().map(|l| l.sigs.len()).sum::<usize>(),
            ms = t.elapsed().as_millis() as u64,
            "state saved"
        ),
        Err(e) => tracing::error!(error = %format!("{e:#}"), "saving state failed"),
    }
}

fn reload(shared: &Shared, path: Option<&Path>, overrides: &(Option<PathBuf>, Option<PathBuf>)) {
    let mut cfg = match Config::load(path) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "SIGHUP: configuration not reloaded");
            return;
        }
    };
    let mut cur = shared.config.lock().unwrap_or_else(|e| e.into_inner());
    cfg.runtime_dir = overrides.0.clone().unwrap_or(cfg.runtime_dir);
    cfg.state_dir = overrides.1.clone().unwrap_or(cfg.state_dir);
    if cfg.runtime_dir != cur.runtime_dir || cfg.state_dir != cur.state_dir {
        tracing::warn!("SIGHUP: runtime_dir/state_dir changes need a restart; kept");
        cfg.runtime_dir = cur.runtime_dir.clone();
        cfg.state_dir = cur.state_dir.clone();
    }
    if cfg.online() != cur.online() {
        let mut inner = shared.inner.lock().unwrap_or_else(|e| e.into_inner());
        let st = inner.engine.export();
        *inner = Inner::new(&cfg, Some(st));
        shared.after_change(&mut inner);
    }
    {
        let mut inner = shared.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.quota.set_limit(cfg.max_signatures_per_user);
        if cfg.devices != cur.devices {
            inner.classifier = crate::domains::Classifier::new(&cfg);
        }
    }
    tracing::info!("SIGHUP: configuration reloaded");
    *cur = cfg;
}

/// Runs the daemon until SIGTERM/SIGINT.
pub async fn run(
    cfg: Config,
    config_path: Option<PathBuf>,
    overrides: (Option<PathBuf>, Option<PathBuf>),
) -> anyhow::Result<()> {
    ingest::never_preempt_applications();
    make_dir(&cfg.runtime_dir, 0o755)?;
    make_dir(&cfg.state_dir, 0o700)?;
    // Held until the daemon returns; before them nothing in either
    // directory is touched, so a second daemon leaves the first one's alone.
    let _locks = (
        lock::acquire(&cfg.runtime_dir, lock::RUNTIME_LOCK, "is running on")?,
        lock::acquire(&cfg.state_dir, lock::STATE_LOCK, "uses the state directory")?,
    );
    set_mode(&cfg.runtime_dir, 0o755)?;
    set_mode(&cfg.state_dir, 0o700)?;
    let saved = persist::load(&cfg.state_dir);
    let (mapping_tx, _) = tokio::sync::watch::channel(0u64);
    let mut inner = Inner::new(&cfg, saved);
    let (events, event_queue) = ingest::bind(&cfg.runtime_dir, cfg.event_queue_datagrams)?;
    let events_conn = conn::bind(&cfg.runtime_dir)?;
    let ctl_path = cfg.runtime_dir.join("ctl.sock");
    let _ = std::fs::remove_file(&ctl_path);
    let ctl = UnixListener::bind(&ctl_path)
        .with_context(|| format!("cannot bind gRPC socket {}", ctl_path.display()))?;
    std::fs::set_permissions(&ctl_path, std::fs::Permissions::from_mode(0o666))?;
    let shared = Arc::new(Shared {
        config: Mutex::new(cfg.clone()),
        inner: Mutex::new({
            inner.published_generation = u64::MAX;
            inner
        }),
        counters: Counters::default(),
        started: Instant::now(),
        mapping_tx,
        own_uid: nix::unistd::geteuid().as_raw(),
        event_queue,
    });
    {
        let mut inner = shared.inner.lock().unwrap_or_else(|e| e.into_inner());
        shared.after_change(&mut inner);
    }
    ingest::spawn(events, events_conn, shared.clone())?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let svc = rpc::PcStreamServer::new(rpc::Service::new(shared.clone()))
        .max_decoding_message_size(rpc::MAX_REQUEST_BYTES);
    let mut stop_unix = stop_rx.clone();
    let grpc_unix = tokio::spawn(
        tonic::transport::Server::builder()
            .layer(rpc::count_failures(shared.clone()))
            .add_service(svc.clone())
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::UnixListenerStream::new(ctl),
                async move {
                    let _ = stop_unix.wait_for(|s| *s).await;
                },
            ),
    );
    let grpc_tcp = if cfg.grpc_tcp.is_empty() {
        None
    } else {
        let addr: std::net::SocketAddr = cfg.grpc_tcp.parse()?;
        let mut stop_tcp = stop_rx.clone();
        Some(tokio::spawn(
            tonic::transport::Server::builder()
                .layer(rpc::count_failures(shared.clone()))
                .add_service(svc)
                .serve_with_shutdown(addr, async move {
                    let _ = stop_tcp.wait_for(|s| *s).await;
                }),
        ))
    };
    tracing::info!(
        runtime_dir = %cfg.runtime_dir.display(),
        state_dir = %cfg.state_dir.display(),
        streams = cfg.streams,
        share_between_users = cfg.share_between_users,
        "pcstreamd ready"
    );
    notify::notify("READY=1\nSTATUS=learning");

    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    let mut last_save = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hup.recv() => {
                notify::notify("RELOADING=1");
                reload(&shared, config_path.as_deref(), &overrides);
                notify::notify("READY=1");
            }
            _ = tick.tick() => {
                let every = shared.config.lock().unwrap_or_else(|e| e.into_inner()).save_interval_s;
                if every > 0 && last_save.elapsed() >= Duration::from_secs(every) {
                    save(&shared);
                    last_save = Instant::now();
                }
            }
        }
    }
    notify::notify("STOPPING=1");
    tracing::info!("stopping");
    let _ = stop_tx.send(true);
    let _ = grpc_unix.await;
    if let Some(t) = grpc_tcp {
        let _ = t.await;
    }
    save(&shared);
    let _ = std::fs::remove_file(cfg.runtime_dir.join("events.sock"));
    let _ = std::fs::remove_file(cfg.runtime_dir.join(conn::SOCKET_NAME));
    let _ = std::fs::remove_file(&ctl_path);
    Ok(())
}
