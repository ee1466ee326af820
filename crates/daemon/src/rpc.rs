//! The gRPC service (tonic) on `ctl.sock`: Status, Contexts, Streams,
//! Watch (a server stream of mapping changes), and the mutating calls
//! SetStreams, Recluster, Import — allowed only to root and the daemon's own
//! uid, checked from the connection's peer credentials (`SO_PEERCRED`);
//! over the optional TCP listener there are none, so they are refused there.
//! Every request answered with an error is counted (`rejected_requests`)
//! by a layer around the whole server ([`count_failures`]): refusals and
//! invalid arguments from the handlers, and what never reaches a handler —
//! a body that is not the method's protobuf message, an oversized message,
//! an unknown method. The counter is bounded work per request; nothing a
//! client sends stops the server.

use crate::state::Shared;
use pcstream_placement::delivery::{self, Domain};
use pcstream_placement::online::{EngineState, LearnerKey, SHARED};
use pcstream_placement::wire::{self};
use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// Largest request body the control socket decodes: an `Import` of a
/// table of 64 MiB (`pcstreamctl import`'s cap: an export of some 100,000
/// signatures, the default `max_signatures`) plus its framing. tonic's own
/// default, 4 MiB, refused the import of any table past ~7,000 signatures
/// that `export` had written.
pub const MAX_REQUEST_BYTES: usize = (64 << 20) + 1024;

/// The generated server.
#[allow(missing_docs, clippy::all, missing_debug_implementations)]
pub mod proto {
    tonic::include_proto!("pcstream.v1");
}

pub use proto::pc_stream_server::PcStreamServer;

/// The service.
#[derive(Debug, Clone)]
pub struct Service {
    shared: Arc<Shared>,
}

impl Service {
    /// A service over the daemon's state.
    pub fn new(shared: Arc<Shared>) -> Self {
        Service { shared }
    }

    /// A refusal (counted by [`count_failures`] on its way out).
    fn reject(&self, s: Status) -> Status {
        tracing::debug!(status = %s, "request refused");
        s
    }

    fn allow_mutation<T>(&self, req: &Request<T>) -> Result<(), Status> {
        let uid = req
            .extensions()
            .get::<tonic::transport::server::UdsConnectInfo>()
            .and_then(|i| i.peer_cred)
            .map(|c| c.uid());
        match uid {
            Some(0) => Ok(()),
            Some(u) if u == self.shared.own_uid => Ok(()),
            Some(u) => Err(self.reject(Status::permission_denied(format!(
                "uid {u} may not change pcstreamd's mapping (root or uid {} only)",
                self.shared.own_uid
            )))),
            None => Err(self.reject(Status::permission_denied(
                "no peer credentials on this connection: mutating calls only on ctl.sock",
            ))),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, crate::state::Inner> {
        self.shared.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The layer that counts every gRPC response carrying an error status in
/// its headers (a trailers-only response: how tonic answers a request it
/// refuses, cannot decode or does not know) in `rejected_requests`.
pub fn count_failures(
    shared: Arc<Shared>,
) -> tower::util::MapResponseLayer<
    impl Fn(
            tonic::codegen::http::Response<tonic::body::Body>,
        ) -> tonic::codegen::http::Response<tonic::body::Body>
        + Clone,
> {
    tower::util::MapResponseLayer::new(
        move |r: tonic::codegen::http::Response<tonic::body::Body>| {
            let failed = r
                .headers()
                .get("grpc-status")
                .is_some_and(|v| v.as_bytes() != b"0");
            if failed {
                let n = shared.counters.rejected.fetch_add(1, Ordering::Relaxed);
                if n < 10 || n.is_power_of_two() {
                    let msg = status_message(r.headers());
                    tracing::warn!(rejected = n + 1, message = msg, "gRPC request rejected");
                }
            }
            r
        },
    )
}

/// The message of an error response as its handler wrote it: the
/// `grpc-message` header holds it percent-encoded (gRPC's wire form, what
/// the log showed before: `import:%20invalid%20type…`). Only the status
/// and message headers are handed to tonic's decoder.
fn status_message(headers: &tonic::codegen::http::HeaderMap) -> String {
    let mut h = tonic::codegen::http::HeaderMap::new();
    for name in ["grpc-status", "grpc-message"] {
        if let Some(v) = headers.get(name) {
            h.insert(name, v.clone());
        }
    }
    Status::from_header_map(&h).map_or_else(String::new, |s| s.message().to_string())
}

/// Resident set size of this process, bytes.
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |p| p * 4096)
}

fn frame_text(e: &pcstream_placement::online::Engine, module: u64, offset: u64) -> String {
    match e.module(module) {
        Some(m) => format!("{}+{offset:#x}", m.path),
        None => format!("{module:016x}+{offset:#x}"),
    }
}

type WatchStream =
    Pin<Box<dyn tokio_stream::Stream<Item = Result<wire::MappingUpdate, Status>> + Send>>;

fn updates(inner: &crate::state::Inner) -> Vec<wire::MappingUpdate> {
    let mut by: BTreeMap<LearnerKey, wire::MappingUpdate> = BTreeMap::new();
    let g = inner.publisher.generation();
    for (k, sig, s, _) in inner.mapping() {
        let u = by.entry(k).or_insert_with(|| wire::MappingUpdate {
            generation: g,
            uid: k.uid,
            domain: k.domain.name(),
            ..Default::default()
        });
        u.signature_to_stream.insert(sig, s);
    }
    by.into_values().collect()
}

#[tonic::async_trait]
impl proto::pc_stream_server::PcStream for Service {
    async fn status(
        &self,
        _req: Request<wire::StatusRequest>,
    ) -> Result<Response<wire::StatusReply>, Status> {
        let mut inner = self.lock();
        let rate = inner.events_per_s();
        let e = &inner.engine;
        let c = e.counters();
        let live: u64 = e
            .learners()
            .values()
            .map(|l| l.lifetimes().live_entries() as u64)
            .sum();
        let cap = e.config().policy.lifetime.max_entries as u64 * e.learners().len().max(1) as u64;
        let sigs: usize = e
            .learners()
            .values()
            .map(|l| l.lifetimes().sig_count())
            .sum();
        Ok(Response::new(wire::StatusReply {
            version: env!("CARGO_PKG_VERSION").into(),
            uptime_s: self.shared.started.elapsed().as_secs(),
            clients: inner.clients.len() as u32,
            events: c.events,
            events_dropped: c.client_dropped,
            signatures: sigs as u32,
            streams: e.config().streams,
            mapping_generation: inner.publisher.generation(),
            events_per_s: rate,
            malformed: self.shared.counters.malformed.load(Ordering::Relaxed),
            live_chunks: live,
            live_chunks_cap: cap,
            rss_bytes: rss_bytes(),
            last_recluster_s: inner
                .last_recluster
                .map_or(0, |t| t.elapsed().as_secs().max(1)),
            learners: e.learners().len() as u32,
            clock_pages: e.clock(),
            clock_bytes: e.clock_bytes(),
            batches: c.batches,
            rejected_requests: self.shared.counters.rejected.load(Ordering::Relaxed),
            over_quota_events: inner.quota.over,
            event_queue_datagrams: self.shared.event_queue,
            devices: inner
                .classifier
                .seen()
                .into_iter()
                .map(|s| wire::DeviceStatus {
                    dev: delivery::dev_name(s.dev),
                    node: s.node,
                    path: s.delivery.kind.name().into(),
                    domain: s.spec.domain.name(),
                    classes: s.delivery.classes,
                    device_streams: s.delivery.device_streams,
                    erase_unit_bytes: s.delivery.erase_unit_bytes,
                    disks: s.delivery.disks.clone(),
                    why: s.delivery.why.clone(),
                    configured: s.configured,
                    hints_lost: s.delivery.hints_lost(),
                })
                .collect(),
            warnings: inner.classifier.warnings(),
        }))
    }

    async fn contexts(
        &self,
        req: Request<wire::ContextsRequest>,
    ) -> Result<Response<wire::ContextsReply>, Status> {
        let limit = req.get_ref().limit as usize;
        let inner = self.lock();
        let e = &inner.engine;
        let mut out = Vec::new();
        for (&key, l) in e.learners() {
            for (sig, s) in l.lifetimes().sigs_sorted() {
                let info = e.sig_info(sig);
                let usage = e.usage(key.uid, sig).unwrap_or_default();
                let refines = info.and_then(|i| i.refines).unwrap_or_default();
                out.push(wire::Context {
                    calls: usage.calls,
                    bytes: usage.bytes,
                    signature: sig,
                    stream: inner.stream(key, sig),
                    mean_log2_lifetime_pages: s.mean_log2,
                    lifetime_samples: s.deaths,
                    bytes_written: s.written_pages * 4096,
                    frames: info
                        .map(|i| i.frames.iter().map(|&(m, o)| frame_text(e, m, o)).collect())
                        .unwrap_or_default(),
                    uid: key.uid,
                    domain: key.domain.name(),
                    programs: info
                        .map(|i| i.programs.iter().cloned().collect())
                        .unwrap_or_default(),
                    dead_pages: s.dead_pages,
                    lifetime_histogram: s.hist.clone(),
                    estimate_log2_lifetime_pages: s.estimate_log2().unwrap_or(f64::NAN),
                    refines: refines.0,
                    age_class: refines.1,
                    placed_by: if inner.pin(key, sig).is_some() {
                        "pinned".into()
                    } else {
                        l.mapper()
                            .basis(sig)
                            .map_or_else(String::new, |b| b.name().into())
                    },
                });
            }
        }
        out.sort_by(|a, b| {
            b.bytes_written
                .cmp(&a.bytes_written)
                .then(a.signature.cmp(&b.signature))
        });
        if limit > 0 {
            out.truncate(limit);
        }
        Ok(Response::new(wire::ContextsReply { contexts: out }))
    }

    async fn streams(
        &self,
        _req: Request<wire::StreamsRequest>,
    ) -> Result<Response<wire::StreamsReply>, Status> {
        let inner = self.lock();
        let e = &inner.engine;
        let mut out = Vec::new();
        for (&key, l) in e.learners() {
            let n = e.learner_streams(key.domain);
            let devices = inner.classifier.devices_of(key.domain);
            let mut rows: Vec<wire::StreamInfo> = (0..n)
                .map(|s| (s, e.publish(key.domain, s)))
                .map(|(s, (stream, hint))| wire::StreamInfo {
                    stream,
                    centroid_log2_lifetime_pages: if s == 0 {
                        f64::NAN
                    } else {
                        l.mapper()
                            .centroids()
                            .get(s as usize - 1)
                            .copied()
                            .unwrap_or(f64::NAN)
                    },
                    uid: key.uid,
                    hint: u32::from(hint),
                    domain: key.domain.name(),
                    devices: devices.clone(),
                    ..Default::default()
                })
                .collect();
            for (sig, st) in l.lifetimes().sigs_sorted() {
                // Rows are the learner's own stream ids; pins (hints domain
                // only) are published ids, which there are the same.
                let s = if key.domain == Domain::Hints {
                    inner.stream(key, sig)
                } else {
                    l.mapper().stream(sig)
                };
                let s = s.min(n - 1) as usize;
                rows[s].signatures += 1;
                rows[s].bytes_written += st.written_pages * 4096;
            }
            out.extend(rows);
        }
        Ok(Response::new(wire::StreamsReply {
            streams: out,
            mapping_generation: inner.publisher.generation(),
        }))
    }

    type WatchStream = WatchStream;

    async fn watch(
        &self,
        _req: Request<wire::WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let mut rx = self.shared.mapping_tx.subscribe();
        let shared = self.shared.clone();
        let (tx, out) = tokio::sync::mpsc::channel(16);
        tokio::spawn(async move {
            loop {
                let ups = {
                    let inner = shared.inner.lock().unwrap_or_else(|e| e.into_inner());
                    updates(&inner)
                };
                for u in ups {
                    if tx.send(Ok(u)).await.is_err() {
                        return;
                    }
                }
                rx.borrow_and_update();
                if rx.changed().await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(out),
        )))
    }

    async fn set_streams(
        &self,
        req: Request<wire::SetStreamsRequest>,
    ) -> Result<Response<wire::SetStreamsReply>, Status> {
        self.allow_mutation(&req)?;
        let r = req.into_inner();
        let mut inner = self.lock();
        let n = inner.engine.config().streams;
        if let Some((sig, s)) = r.signature_to_stream.iter().find(|(_, &s)| s >= n) {
            return Err(self.reject(Status::invalid_argument(format!(
                "stream {s} for signature {sig:016x} is out of range: the streams are 0 to {}",
                n.saturating_sub(1)
            ))));
        }
        let key = inner.engine.key_of(r.uid);
        let key = if inner.engine.config().share_between_users {
            SHARED
        } else {
            key
        };
        for (&sig, &s) in &r.signature_to_stream {
            inner.pins.insert((key, sig), s);
        }
        inner.pins_dirty = true;
        self.shared.after_change(&mut inner);
        Ok(Response::new(wire::SetStreamsReply {
            applied: r.signature_to_stream.len() as u32,
        }))
    }

    async fn recluster(
        &self,
        req: Request<wire::ReclusterRequest>,
    ) -> Result<Response<wire::ReclusterReply>, Status> {
        self.allow_mutation(&req)?;
        let mut inner = self.lock();
        inner.engine.recluster();
        inner.pins_dirty = true;
        self.shared.after_change(&mut inner);
        Ok(Response::new(wire::ReclusterReply {
            mapping_generation: inner.publisher.generation(),
        }))
    }

    async fn export(
        &self,
        _req: Request<wire::ExportRequest>,
    ) -> Result<Response<wire::ExportReply>, Status> {
        let st = self.lock().engine.export();
        let json = serde_json::to_vec(&st).map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(wire::ExportReply { state_json: json }))
    }

    async fn import(
        &self,
        req: Request<wire::ImportRequest>,
    ) -> Result<Response<wire::ImportReply>, Status> {
        self.allow_mutation(&req)?;
        let st: EngineState = crate::persist::parse(&req.get_ref().state_json)
            .map_err(|e| self.reject(Status::invalid_argument(format!("import: {e}"))))?;
        let mut inner = self.lock();
        let n = inner
            .engine
            .import(st)
            .map_err(|e| self.reject(Status::invalid_argument(format!("import: {e}"))))?;
        inner.pins_dirty = true;
        self.shared.after_change(&mut inner);
        Ok(Response::new(wire::ImportReply {
            signatures: n as u32,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rejected_requests_message_is_logged_decoded() {
        let s = Status::invalid_argument("import: invalid type: string \"abc\", 100% wrong");
        let mut headers = tonic::codegen::http::HeaderMap::new();
        s.add_header(&mut headers).unwrap();
        assert!(headers["grpc-message"].to_str().unwrap().contains("%20"));
        assert_eq!(
            status_message(&headers),
            "import: invalid type: string \"abc\", 100% wrong"
        );
        assert_eq!(status_message(&Default::default()), "");
    }
}
