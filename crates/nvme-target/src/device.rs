//! The namespace behind every controller: the ftl-sim SSD model (one
//! simulator stream per reclaim unit handle, GC running as writes arrive),
//! the data store, the FDP counters and event log, and the optional block
//! trace of what the host wrote (fio iolog v2, which `pcstreamctl sim
//! --trace … --format fio` replays into the same model). A trace that
//! cannot be written is a trace error, not an I/O error: it is logged once,
//! tracing stops and the host's commands carry on.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;

use ftl_sim::{Config, Geometry, Ssd};
use serde::Serialize;

use crate::store::Store;

/// Logical block size (= the simulator's page size).
pub const BLOCK: usize = 4096;
/// Most FDP events kept (oldest dropped first).
const MAX_EVENTS: usize = 64;

/// FDP event types (TP4146 "FDP events").
pub mod event {
    /// A reclaim unit was not fully written when its handle moved on.
    pub const RU_NOT_FULLY_WRITTEN: u8 = 0x00;
    /// A write named a placement identifier the namespace does not have.
    pub const INVALID_PID: u8 = 0x03;
}

/// Reclaim unit handle usage attributes (RUH usage log, RUHA).
pub mod ruha {
    /// No write has used the handle.
    pub const UNUSED: u8 = 0;
    /// A write named the handle by its placement identifier.
    pub const HOST: u8 = 1;
    /// The controller chose the handle for writes without a placement identifier.
    pub const CONTROLLER: u8 = 2;
}

/// What the device looks like; from flags or TOML (missing keys take the defaults).
#[derive(Debug, Clone, PartialEq, serde::Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeviceConfig {
    /// Namespace capacity in bytes (rounded down to whole blocks).
    pub capacity: u64,
    /// Reclaim unit handles (= simulator streams), 1..=128.
    pub ruhs: u16,
    /// Reclaim unit size in bytes (= the simulator's erase block).
    pub ru_size: u64,
    /// Over-provisioning (physical − logical) / logical.
    pub op: f64,
    /// GC copies go to a per-RUH internal stream.
    pub internal_streams: bool,
    /// Keep the data in this file instead of memory.
    pub backing: Option<PathBuf>,
    /// Log host writes and deallocations here as a fio iolog v2 block trace.
    pub trace: Option<PathBuf>,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        DeviceConfig {
            capacity: 1 << 30,
            ruhs: 8,
            ru_size: 1 << 20,
            op: ftl_sim::paper::OP,
            internal_streams: false,
            backing: None,
            trace: None,
        }
    }
}

/// Why a device cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// A value out of range.
    #[error("{0}")]
    Invalid(String),
    /// The simulator rejected the geometry.
    #[error("simulator: {0}")]
    Sim(#[from] ftl_sim::ConfigError),
    /// The backing or trace file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: io::Error,
    },
}

impl DeviceConfig {
    /// The simulator configuration this device runs (also what an offline
    /// replay of its trace must use).
    pub fn sim_config(&self) -> Result<Config, DeviceError> {
        if !(1..=128).contains(&self.ruhs) {
            return Err(DeviceError::Invalid(format!(
                "ruhs: {} is outside 1..=128",
                self.ruhs
            )));
        }
        if self.ru_size < BLOCK as u64 * 16
            || !self.ru_size.is_multiple_of(BLOCK as u64)
            || self.ru_size > 1 << 30
        {
            return Err(DeviceError::Invalid(format!(
                "ru size: {} is not a multiple of {BLOCK} between 64 KiB and 1 GiB",
                self.ru_size
            )));
        }
        let pages = self.capacity / BLOCK as u64;
        if pages < 1024 {
            return Err(DeviceError::Invalid(format!(
                "capacity: {} bytes is below 4 MiB",
                self.capacity
            )));
        }
        if !(self.op.is_finite() && self.op > 0.0 && self.op <= 4.0) {
            return Err(DeviceError::Invalid(format!(
                "op: {} is outside (0, 4]",
                self.op
            )));
        }
        let ppb = self.ru_size / BLOCK as u64;
        let phys = ((pages as f64) * (1.0 + self.op)).ceil() as u64;
        let blocks = phys.div_ceil(ppb) + 1;
        let blocks = u32::try_from(blocks).map_err(|_| {
            DeviceError::Invalid(format!("capacity: {} bytes is too large", self.capacity))
        })?;
        let cfg = Config {
            geometry: Geometry {
                channels: 1,
                ways: 1,
                blocks_per_unit: blocks,
                pages_per_block: ppb as u32,
                page_size: BLOCK as u32,
            },
            op: self.op,
            streams: u32::from(self.ruhs),
            internal_streams: self.internal_streams,
            ..Config::default()
        };
        match cfg.validate() {
            // The simulator's words are blocks and streams; a target's
            // user set reclaim units and RUHs.
            Err(ftl_sim::ConfigError::TooLittleSpare {
                spare,
                open,
                reserve,
                ..
            }) => Err(DeviceError::Invalid(format!(
                "op {}: {spare} spare reclaim units of {} KiB cannot hold one open unit per \
                 RUH ({open}), the GC reserve of {reserve} and one unit of slack; raise --op or \
                 --capacity, or lower --ruhs or --ru-size",
                self.op,
                self.ru_size >> 10
            ))),
            r => r.map(|()| cfg).map_err(DeviceError::from),
        }
    }
}

/// One FDP event as the log page reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FdpEvent {
    /// [`event`] type.
    pub kind: u8,
    /// Placement identifier concerned.
    pub pid: u16,
    /// Milliseconds since the target started.
    pub timestamp_ms: u64,
    /// Namespace.
    pub nsid: u32,
}

/// Counters the FDP statistics, SMART log and `--json` report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceStats {
    /// Host bytes written (FDP statistics HBMW).
    pub host_bytes: u64,
    /// Media bytes written = host + GC copies (MBMW).
    pub media_bytes: u64,
    /// Media bytes erased (MBE).
    pub erased_bytes: u64,
    /// media / host.
    pub waf: f64,
    /// Host bytes written per RUH.
    pub ruh_host_bytes: Vec<u64>,
    /// Bytes GC copied per RUH, by the RUH the host last wrote them to:
    /// which handle's data the device had to move.
    pub ruh_gc_bytes: Vec<u64>,
    /// Read commands / write commands.
    pub reads: u64,
    /// Write commands.
    pub writes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes the host deallocated (Dataset Management, Write Zeroes) that
    /// held data: what a file system's discards told the device was dead.
    pub trimmed_bytes: u64,
    /// Bytes of the namespace the device holds as live now (written and not
    /// deallocated since): what its GC must keep.
    pub valid_bytes: u64,
}

/// The namespace state shared by every connection (behind one mutex).
#[derive(Debug)]
pub struct Device {
    cfg: DeviceConfig,
    ssd: Ssd,
    store: Arc<Store>,
    nlb: u64,
    ru_pages: u64,
    /// Pages written into each RUH's current reclaim unit.
    ru_fill: Vec<u64>,
    events: VecDeque<FdpEvent>,
    /// Per RUH: event types enabled (bit = type, for types 0..=3).
    event_mask: Vec<u8>,
    /// Per RUH: usage attribute (RUH usage log RUHA: 0 unused, 1 named by a
    /// write's placement id, 2 chosen by the controller for unplaced writes).
    ruh_attr: Vec<u8>,
    trace: Option<BufWriter<File>>,
    /// Why tracing stopped, once a trace write failed.
    trace_error: Option<String>,
    started: std::time::Instant,
    reads: u64,
    writes: u64,
    read_bytes: u64,
}

impl Device {
    /// Builds the model, opens the store and the trace.
    pub fn new(cfg: DeviceConfig) -> Result<Device, DeviceError> {
        let sim = cfg.sim_config()?;
        if let Some(total) = crate::memory::mem_total() {
            let need = crate::memory::Estimate::new(&sim, cfg.capacity, cfg.backing.is_none());
            if let Some(e) = need.refusal(total) {
                return Err(DeviceError::Invalid(e));
            }
        }
        let ssd = Ssd::new(sim)?;
        let nlb = (cfg.capacity / BLOCK as u64).min(ssd.logical_pages());
        fn io(path: &std::path::Path) -> impl FnOnce(io::Error) -> DeviceError + '_ {
            move |source| DeviceError::Io {
                path: path.to_path_buf(),
                source,
            }
        }
        let store = Arc::new(match &cfg.backing {
            Some(p) => Store::file(p, nlb * BLOCK as u64).map_err(io(p))?,
            None => Store::memory(nlb * BLOCK as u64),
        });
        let trace = match &cfg.trace {
            Some(p) => {
                let mut w = BufWriter::new(File::create(p).map_err(io(p))?);
                w.write_all(b"fio version 2 iolog\n").map_err(io(p))?;
                Some(w)
            }
            None => None,
        };
        let ruhs = usize::from(cfg.ruhs);
        Ok(Device {
            ru_pages: cfg.ru_size / BLOCK as u64,
            ssd,
            store,
            nlb,
            ru_fill: vec![0; ruhs],
            events: VecDeque::new(),
            event_mask: vec![0b1001; ruhs],
            ruh_attr: vec![ruha::UNUSED; ruhs],
            trace,
            trace_error: None,
            started: std::time::Instant::now(),
            reads: 0,
            writes: 0,
            read_bytes: 0,
            cfg,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &DeviceConfig {
        &self.cfg
    }

    /// Namespace size in logical blocks.
    pub fn nlb(&self) -> u64 {
        self.nlb
    }

    /// Reclaim unit handles.
    pub fn ruhs(&self) -> u16 {
        self.cfg.ruhs
    }

    /// Whether `n` blocks from `slba` are inside the namespace.
    pub fn in_range(&self, slba: u64, n: u64) -> bool {
        slba.checked_add(n).is_some_and(|e| e <= self.nlb)
    }

    /// The data store (connections read and write it without the device lock).
    pub fn store(&self) -> Arc<Store> {
        self.store.clone()
    }

    /// Reads whole blocks.
    pub fn read(&mut self, slba: u64, buf: &mut [u8]) -> io::Result<()> {
        self.count_read(buf.len() as u64);
        self.store.read_at(slba * BLOCK as u64, buf)
    }

    /// Counts a read of `bytes` bytes (the data came from [`Device::store`]).
    pub fn count_read(&mut self, bytes: u64) {
        self.reads += 1;
        self.read_bytes += bytes;
    }

    /// Writes whole blocks: stores them and places them ([`Device::place`]).
    pub fn write(&mut self, slba: u64, data: &[u8], pid: Option<u16>, nsid: u32) -> io::Result<()> {
        self.store.write_at(slba * BLOCK as u64, data)?;
        self.place(slba, (data.len() / BLOCK) as u64, pid, nsid)
    }

    /// Runs `n` blocks at `slba`, already in the store, through the model
    /// via placement identifier `pid` (None: the default handle 0). An
    /// unknown pid is logged as an event and falls back to handle 0, as the
    /// FDP spec's reference implementations do.
    pub fn place(&mut self, slba: u64, n: u64, pid: Option<u16>, nsid: u32) -> io::Result<()> {
        let ruh = match pid {
            Some(p) if p < self.cfg.ruhs => {
                self.ruh_attr[usize::from(p)] = ruha::HOST;
                p
            }
            Some(p) => {
                self.push_event(event::INVALID_PID, p, nsid);
                self.controller_chose(0);
                0
            }
            None => {
                self.controller_chose(0);
                0
            }
        };
        self.ssd
            .write_pages(slba, n, u32::from(ruh))
            .map_err(|e| io::Error::other(e.to_string()))?;
        let r = usize::from(ruh);
        self.ru_fill[r] = (self.ru_fill[r] + n) % self.ru_pages;
        self.writes += 1;
        if let Some(t) = &mut self.trace {
            let r = writeln!(
                t,
                "ns write {} {} {ruh}",
                slba * BLOCK as u64,
                n * BLOCK as u64
            );
            self.traced(r);
        }
        Ok(())
    }

    /// Stops tracing after a failed trace write (logged once).
    fn traced(&mut self, r: io::Result<()>) {
        let Err(e) = r else {
            return;
        };
        let path = self
            .cfg
            .trace
            .as_deref()
            .unwrap_or(std::path::Path::new(""));
        let msg = format!(
            "trace {}: {e}; tracing stopped, the trace is incomplete",
            path.display()
        );
        tracing::error!("{msg}");
        // Its buffered records are dropped, not written again.
        if let Some(t) = self.trace.take() {
            drop(t.into_parts());
        }
        self.trace_error = Some(msg);
    }

    /// Why tracing stopped, if a trace write failed.
    pub fn trace_error(&self) -> Option<&str> {
        self.trace_error.as_deref()
    }

    /// Deallocates (TRIM) or zeroes `n` blocks: they read as zeros and the
    /// model stops counting them as valid.
    pub fn deallocate(&mut self, slba: u64, n: u64) -> io::Result<()> {
        self.store.zero(slba * BLOCK as u64, n * BLOCK as u64)?;
        self.unmap(slba, n)
    }

    /// The model side of [`Device::deallocate`] (the store was zeroed).
    pub fn unmap(&mut self, slba: u64, n: u64) -> io::Result<()> {
        self.ssd
            .trim(slba, n)
            .map_err(|e| io::Error::other(e.to_string()))?;
        if let Some(t) = &mut self.trace {
            let r = writeln!(t, "ns trim {} {}", slba * BLOCK as u64, n * BLOCK as u64);
            self.traced(r);
        }
        Ok(())
    }

    /// Flush: the store and the trace (a trace that fails to flush stops,
    /// as in [`Device::place`]; only the store's failure is an error).
    pub fn flush(&mut self) -> io::Result<()> {
        if let Some(t) = &mut self.trace {
            let r = t.flush();
            self.traced(r);
        }
        self.store.flush()
    }

    /// Moves RUH `pid` to a fresh reclaim unit (I/O Management Send, RUH
    /// update); a partly written unit is reported as an event.
    pub fn ruh_update(&mut self, pid: u16, nsid: u32) -> bool {
        if pid >= self.cfg.ruhs {
            return false;
        }
        let r = usize::from(pid);
        if self.ru_fill[r] != 0 {
            self.push_event(event::RU_NOT_FULLY_WRITTEN, pid, nsid);
        }
        self.ru_fill[r] = 0;
        true
    }

    /// Bytes still writable in RUH `pid`'s current unit, in logical blocks
    /// (RUH status RUAMW).
    pub fn ru_available(&self, pid: u16) -> u64 {
        self.ru_pages - self.ru_fill[usize::from(pid)]
    }

    fn controller_chose(&mut self, r: usize) {
        if self.ruh_attr[r] == ruha::UNUSED {
            self.ruh_attr[r] = ruha::CONTROLLER;
        }
    }

    /// RUH `pid`'s usage attribute ([`ruha`]).
    pub fn ruh_attr(&self, pid: u16) -> u8 {
        self.ruh_attr
            .get(usize::from(pid))
            .copied()
            .unwrap_or(ruha::UNUSED)
    }

    /// Reclaim unit size in bytes.
    pub fn ru_size(&self) -> u64 {
        self.cfg.ru_size
    }

    fn push_event(&mut self, kind: u8, pid: u16, nsid: u32) {
        let enabled = self
            .event_mask
            .get(usize::from(pid))
            .or(self.event_mask.first())
            .is_some_and(|m| kind > 7 || m & (1 << kind) != 0);
        if !enabled {
            return;
        }
        if self.events.len() == MAX_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(FdpEvent {
            kind,
            pid,
            timestamp_ms: self.started.elapsed().as_millis() as u64,
            nsid,
        });
    }

    /// The FDP event log, oldest first.
    pub fn events(&self) -> impl Iterator<Item = &FdpEvent> {
        self.events.iter()
    }

    /// Event types enabled on RUH `pid` (bit per type 0..=7).
    pub fn event_mask(&self, pid: u16) -> Option<u8> {
        self.event_mask.get(usize::from(pid)).copied()
    }

    /// Enables or disables event `kind` on RUH `pid`.
    pub fn set_event(&mut self, pid: u16, kind: u8, on: bool) -> bool {
        match self.event_mask.get_mut(usize::from(pid)) {
            Some(m) if kind < 8 => {
                if on {
                    *m |= 1 << kind;
                } else {
                    *m &= !(1 << kind);
                }
                true
            }
            _ => false,
        }
    }

    /// The counters.
    pub fn stats(&self) -> DeviceStats {
        let s = self.ssd.stats();
        let b = BLOCK as u64;
        DeviceStats {
            host_bytes: s.host_pages * b,
            media_bytes: (s.host_pages + s.gc_pages) * b,
            erased_bytes: s.erases * self.cfg.ru_size,
            waf: s.waf,
            ruh_host_bytes: s.per_stream.iter().map(|p| p.host_pages * b).collect(),
            ruh_gc_bytes: s.per_stream.iter().map(|p| p.gc_pages * b).collect(),
            reads: self.reads,
            writes: self.writes,
            read_bytes: self.read_bytes,
            trimmed_bytes: s.trimmed_pages * b,
            valid_bytes: s.valid_pages * b,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> DeviceConfig {
        DeviceConfig {
            capacity: 64 << 20,
            ruhs: 4,
            ru_size: 256 << 10,
            ..DeviceConfig::default()
        }
    }

    #[test]
    fn placement_reaches_the_model_and_waf_grows_under_overwrites() {
        let mut d = Device::new(small()).unwrap();
        let n = d.nlb();
        let data = vec![1u8; BLOCK];
        let mut x = 7u64;
        for i in 0..n * 3 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            d.write((x >> 16) % n, &data, Some((i % 2) as u16), 1)
                .unwrap();
        }
        let s = d.stats();
        assert!(s.waf > 1.0, "{s:?}");
        assert_eq!(s.ruh_host_bytes.len(), 4);
        assert!(s.ruh_host_bytes[0] > 0 && s.ruh_host_bytes[1] > 0 && s.ruh_host_bytes[2] == 0);
        assert_eq!(s.media_bytes as f64 / s.host_bytes as f64, s.waf);
        // GC copies are told per RUH and add up to media - host.
        assert_eq!(s.ruh_gc_bytes.len(), 4);
        assert!(s.ruh_gc_bytes[0] > 0 && s.ruh_gc_bytes[1] > 0 && s.ruh_gc_bytes[2] == 0);
        assert_eq!(
            s.ruh_gc_bytes.iter().sum::<u64>(),
            s.media_bytes - s.host_bytes
        );
    }

    #[test]
    fn deallocation_counts_only_what_held_data() {
        let mut d = Device::new(small()).unwrap();
        let data = vec![1u8; BLOCK];
        for lba in 0..10 {
            d.write(lba, &data, None, 1).unwrap();
        }
        assert_eq!(d.stats().valid_bytes, 10 * BLOCK as u64);
        // Blocks 5..15: five held data, five were never written.
        d.deallocate(5, 10).unwrap();
        let s = d.stats();
        assert_eq!(s.trimmed_bytes, 5 * BLOCK as u64, "{s:?}");
        assert_eq!(s.valid_bytes, 5 * BLOCK as u64, "{s:?}");
        // Deallocating them again tells the device nothing new.
        d.deallocate(0, 10).unwrap();
        let s = d.stats();
        assert_eq!((s.trimmed_bytes, s.valid_bytes), (10 * BLOCK as u64, 0));
    }

    #[test]
    fn an_invalid_pid_is_an_event_and_goes_to_handle_zero() {
        let mut d = Device::new(small()).unwrap();
        d.write(0, &[0u8; BLOCK], Some(9), 1).unwrap();
        assert_eq!(
            d.events().next().map(|e| (e.kind, e.pid)),
            Some((event::INVALID_PID, 9))
        );
        assert_eq!(d.stats().ruh_host_bytes[0], BLOCK as u64);
    }

    #[test]
    fn usage_attributes_follow_who_chose_the_handle() {
        let mut d = Device::new(small()).unwrap();
        assert!((0..4).all(|p| d.ruh_attr(p) == ruha::UNUSED));
        d.write(0, &[0u8; BLOCK], None, 1).unwrap();
        d.write(1, &[0u8; BLOCK], Some(2), 1).unwrap();
        let attrs: Vec<u8> = (0..4).map(|p| d.ruh_attr(p)).collect();
        assert_eq!(
            attrs,
            [ruha::CONTROLLER, ruha::UNUSED, ruha::HOST, ruha::UNUSED]
        );
        d.write(2, &[0u8; BLOCK], Some(0), 1).unwrap();
        d.write(3, &[0u8; BLOCK], None, 1).unwrap();
        assert_eq!(d.ruh_attr(0), ruha::HOST);
    }

    #[test]
    fn a_larger_backing_file_is_refused_not_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("long.img");
        let f = File::create(&p).unwrap();
        f.set_len(200 << 20).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, b"PRECIOUS", 150 << 20).unwrap();
        let Err(e) = Device::new(DeviceConfig {
            backing: Some(p.clone()),
            ..small()
        }) else {
            panic!("a backing file larger than the capacity was accepted");
        };
        let e = e.to_string();
        assert!(
            e.contains("long.img") && e.contains(&(200u64 << 20).to_string()),
            "{e}"
        );
        assert!(e.contains(&(64u64 << 20).to_string()), "{e}");
        assert!(!e.contains('\n'), "{e}");
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 200 << 20);
        // A shorter file is extended to the capacity, its data kept.
        f.set_len(1 << 20).unwrap();
        let mut d = Device::new(DeviceConfig {
            backing: Some(p.clone()),
            ..small()
        })
        .unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 64 << 20);
        let mut buf = vec![0u8; BLOCK];
        d.read(0, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
    }

    #[test]
    fn a_failing_trace_stops_tracing_and_fails_no_write() {
        let mut d = Device::new(DeviceConfig {
            trace: Some("/dev/full".into()),
            ..small()
        })
        .unwrap();
        for lba in 0..400 {
            d.write(lba, &[lba as u8; BLOCK], Some(1), 1).unwrap();
        }
        d.deallocate(0, 10).unwrap();
        d.flush().unwrap();
        let s = d.stats();
        assert_eq!((s.writes, s.host_bytes), (400, 400 * BLOCK as u64));
        let e = d.trace_error().unwrap_or_default();
        assert!(
            e.contains("/dev/full") && e.contains("tracing stopped"),
            "{e}"
        );
        let mut back = [0u8; BLOCK];
        d.read(399, &mut back).unwrap();
        assert_eq!(back, [399u16 as u8; BLOCK]);
    }

    #[test]
    fn a_capacity_beyond_the_machines_memory_is_refused() {
        let Ok(meminfo) = std::fs::read_to_string("/proc/meminfo") else {
            return;
        };
        let kib: u64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap();
        // Twice the machine's memory in memory: its tables alone are a few
        // hundred MiB, the data could never fit.
        let capacity = (kib * 1024 * 2).next_multiple_of(1 << 30);
        let Err(e) = Device::new(DeviceConfig {
            capacity,
            ruhs: 8,
            ru_size: 1 << 20,
            ..DeviceConfig::default()
        }) else {
            panic!("a {capacity}-byte in-memory namespace was accepted");
        };
        let e = e.to_string();
        assert!(
            e.contains("MemTotal") && e.contains("GiB of memory") && e.contains("--backing"),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn bad_configs_are_named() {
        let e = Device::new(DeviceConfig { ruhs: 0, ..small() }).unwrap_err();
        assert!(e.to_string().contains("ruhs"), "{e}");
        let e = Device::new(DeviceConfig {
            capacity: 1,
            ..small()
        })
        .unwrap_err();
        assert!(e.to_string().contains("capacity"), "{e}");
        // Too little over-provisioning for 4 RUHs of 1 MiB on 64 MiB: told
        // in the target's own flags.
        let e = Device::new(DeviceConfig {
            ru_size: 1 << 20,
            op: 0.07,
            ..small()
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("reclaim units") && e.contains("--ruhs") && e.contains("--op"),
            "{e}"
        );
        assert!(!e.contains("--streams"), "{e}");
    }
}
