//! `pcstreamctl device /dev/nvmeX[nY]`: what an NVMe device offers for data
//! placement (without a device: the host's listing, `devices.rs`), read through admin (and I/O) passthrough ioctls
//! (`nvme-cli-sys`): identity, FDP support and configuration (RUHs, RU
//! size), RUH usage and status, FDP statistics as WAF, recent FDP events,
//! Streams directive support. A table, `--json`, or `--watch SECS` for a
//! refreshing WAF line.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use nvme_cli_sys::nvme_passthru_cmd;
use serde::Serialize;

/// `pcstreamctl device` options.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
pcstreamctl device\n  \
pcstreamctl device --json\n  \
pcstreamctl device /dev/nvme0n1\n  \
pcstreamctl device /dev/nvme0 --json\n  \
pcstreamctl device /dev/nvme0n1 --watch 2")]
pub struct DeviceArgs {
    /// Controller (/dev/nvmeX) or namespace (/dev/nvmeXnY) device; without
    /// one: every block device (write streams, granularity, FDP) and every
    /// mounted file system with whether learnt hints reach its device.
    pub path: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Print the FDP statistics' WAF every SECS seconds until interrupted.
    #[arg(long, value_name = "SECS", requires = "path")]
    pub watch: Option<u64>,
}

/// One FDP configuration (log 20h descriptor).
#[derive(Debug, Serialize, PartialEq)]
pub struct FdpConfig {
    /// Index in the log.
    pub index: usize,
    /// Valid configuration (FDPA bit 7).
    pub valid: bool,
    /// Reclaim groups.
    pub nrg: u32,
    /// Reclaim unit handles.
    pub nruh: u16,
    /// Reclaim unit nominal size, bytes.
    pub runs: u64,
    /// RUH types (1 initially isolated, 2 persistently isolated).
    pub ruh_types: Vec<u8>,
}

/// One FDP event (log 23h).
#[derive(Debug, Serialize, PartialEq)]
pub struct Event {
    /// Event type.
    pub kind: u8,
    /// Placement identifier.
    pub pid: u16,
    /// Timestamp field (ms).
    pub timestamp: u64,
}

/// Everything the command reports.
#[derive(Debug, Serialize)]
pub struct Report {
    pub(crate) model: String,
    pub(crate) serial: String,
    pub(crate) firmware: String,
    pub(crate) nsid: u32,
    pub(crate) endgid: u16,
    pub(crate) fdp_supported: bool,
    pub(crate) fdp_enabled: bool,
    pub(crate) fdp_config_index: u8,
    pub(crate) streams_supported: bool,
    pub(crate) configs: Vec<FdpConfig>,
    /// RUH attributes from the usage log (1 host specified, 2 controller specified).
    pub(crate) ruh_usage: Vec<u8>,
    /// Per placement id: reclaim unit available media writes (logical blocks), namespaces only.
    pub(crate) ruamw: Vec<u64>,
    pub(crate) host_bytes: u128,
    pub(crate) media_bytes: u128,
    pub(crate) erased_bytes: u128,
    pub(crate) waf: Option<f64>,
    pub(crate) events: Vec<Event>,
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or_default())
}
fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default())
}
fn le128(b: &[u8], at: usize) -> u128 {
    u128::from_le_bytes(b[at..at + 16].try_into().unwrap_or_default())
}
fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b)
        .trim_end_matches([' ', '\0'])
        .to_string()
}

struct Dev {
    file: File,
    path: PathBuf,
}

impl Dev {
    /// Runs an admin (or, with `io`, an I/O) command that reads `len` bytes.
    fn cmd(
        &self,
        io: bool,
        opcode: u8,
        nsid: u32,
        cdw: [u32; 4],
        len: usize,
    ) -> anyhow::Result<(Vec<u8>, u32)> {
        let mut buf = vec![0u8; len];
        let mut c = nvme_passthru_cmd {
            opcode,
            nsid,
            addr: buf.as_mut_ptr() as u64,
            data_len: len as u32,
            cdw10: cdw[0],
            cdw11: cdw[1],
            cdw12: cdw[2],
            cdw13: cdw[3],
            ..Default::default()
        };
        let fd = self.file.as_raw_fd();
        // SAFETY: `c` is a valid passthrough command whose data pointer and
        // length describe `buf`, which outlives the call.
        let r = unsafe {
            if io {
                nvme_cli_sys::nvme_ioctl_io_cmd(fd, &mut c)
            } else {
                nvme_cli_sys::nvme_ioctl_admin_cmd(fd, &mut c)
            }
        };
        match r {
            Ok(0) => Ok((buf, c.result)),
            Ok(status) => bail!(
                "{}: opcode {opcode:#04x} failed with NVMe status {status:#x}",
                self.path.display()
            ),
            Err(e) if e as i32 == libc::ENOTTY => bail!(
                "{}: not an NVMe device (it does not take NVMe commands)",
                self.path.display()
            ),
            Err(e) => bail!("{}: opcode {opcode:#04x}: {e}", self.path.display()),
        }
    }

    fn log(&self, lid: u8, lsi: u16, len: usize) -> anyhow::Result<Vec<u8>> {
        let numd = (len / 4 - 1) as u32;
        let cdw10 = u32::from(lid) | (numd & 0xffff) << 16;
        let cdw11 = (numd >> 16) | u32::from(lsi) << 16;
        Ok(self
            .cmd(false, 0x02, 0xffff_ffff, [cdw10, cdw11, 0, 0], len)?
            .0)
    }
}

fn parse_configs(b: &[u8]) -> Vec<FdpConfig> {
    let n = usize::from(le16(b, 0)) + 1;
    let size = (le32(b, 4) as usize).min(b.len());
    let mut out = Vec::new();
    let mut at = 16;
    for index in 0..n {
        if at + 64 > size {
            break;
        }
        let d = &b[at..];
        let dsze = usize::from(le16(d, 0));
        let nruh = le16(d, 8);
        let ruh_types = (0..usize::from(nruh))
            .filter_map(|i| d.get(64 + 4 * i).copied())
            .collect();
        out.push(FdpConfig {
            index,
            valid: d[2] & 0x80 != 0,
            nrg: le32(d, 4),
            nruh,
            runs: le64(d, 16),
            ruh_types,
        });
        if dsze < 64 {
            break;
        }
        at += dsze;
    }
    out
}

fn read(dev: &Dev) -> anyhow::Result<Report> {
    let fd = dev.file.as_raw_fd();
    // SAFETY: NVME_IOCTL_ID takes no argument; on a controller node it fails (ENOTTY).
    let nsid = match unsafe { nvme_cli_sys::nvme_ioctl_id(fd) } {
        Ok(n) if n > 0 => n as u32,
        _ => 1,
    };
    let (ctrl, _) = dev
        .cmd(false, 0x06, 0, [1, 0, 0, 0], 4096)
        .context("identify controller")?;
    let (ns, _) = dev
        .cmd(false, 0x06, nsid, [0, 0, 0, 0], 4096)
        .context("identify namespace")?;
    let endgid = le16(&ns, 102);
    let fdp_supported = le32(&ctrl, 96) & (1 << 19) != 0;
    let mut r = Report {
        model: text(&ctrl[24..64]),
        serial: text(&ctrl[4..24]),
        firmware: text(&ctrl[64..72]),
        nsid,
        endgid,
        fdp_supported,
        fdp_enabled: false,
        fdp_config_index: 0,
        streams_supported: false,
        configs: Vec::new(),
        ruh_usage: Vec::new(),
        ruamw: Vec::new(),
        host_bytes: 0,
        media_bytes: 0,
        erased_bytes: 0,
        waf: None,
        events: Vec::new(),
    };
    if le16(&ctrl, 256) & (1 << 5) != 0 {
        if let Ok((d, _)) = dev.cmd(false, 0x1a, nsid, [4096 / 4 - 1, 1, 0, 0], 4096) {
            r.streams_supported = d[0] & 0b10 != 0;
        }
    }
    if !fdp_supported {
        return Ok(r);
    }
    let (_, fdp) = dev
        .cmd(false, 0x0a, 0, [0x1d, u32::from(endgid), 0, 0], 0)
        .context("get feature FDP")?;
    r.fdp_enabled = fdp & 1 != 0;
    r.fdp_config_index = (fdp >> 8) as u8;
    let head = dev.log(0x20, endgid, 16).context("FDP configurations")?;
    let size = (le32(&head, 4) as usize).clamp(16, 1 << 20);
    r.configs = parse_configs(&dev.log(0x20, endgid, size.div_ceil(4) * 4)?);
    let nruh = r
        .configs
        .get(usize::from(r.fdp_config_index))
        .map_or(0, |c| c.nruh);
    let usage = dev
        .log(0x21, endgid, 8 + 8 * usize::from(nruh))
        .context("RUH usage")?;
    r.ruh_usage = (0..usize::from(le16(&usage, 0).min(nruh)))
        .map(|i| usage[8 + 8 * i])
        .collect();
    let stats = dev.log(0x22, endgid, 64).context("FDP statistics")?;
    r.host_bytes = le128(&stats, 0);
    r.media_bytes = le128(&stats, 16);
    r.erased_bytes = le128(&stats, 32);
    r.waf = (r.host_bytes > 0).then(|| r.media_bytes as f64 / r.host_bytes as f64);
    let ev = dev.log(0x23, endgid, 64 + 64 * 63).context("FDP events")?;
    let n = (le32(&ev, 0) as usize).min(63);
    r.events = (0..n)
        .map(|i| {
            let e = &ev[64 + 64 * i..];
            Event {
                kind: e[0],
                pid: le16(e, 2),
                timestamp: le64(e, 4) & 0xffff_ffff_ffff,
            }
        })
        .collect();
    if nsid != 0 && nruh > 0 {
        let len = 16 + 32 * usize::from(nruh);
        if let Ok((st, _)) = dev.cmd(true, 0x12, nsid, [1, (len / 4 - 1) as u32, 0, 0], len) {
            let k = usize::from(le16(&st, 14).min(nruh));
            r.ruamw = (0..k).map(|i| le64(&st, 16 + 32 * i + 8)).collect();
        }
    }
    Ok(r)
}

fn print(r: &Report) {
    println!(
        "model        {} (serial {}, firmware {})",
        r.model, r.serial, r.firmware
    );
    println!("namespace    {} (endurance group {})", r.nsid, r.endgid);
    println!(
        "streams      {}",
        if r.streams_supported {
            "supported"
        } else {
            "no"
        }
    );
    if !r.fdp_supported {
        println!("FDP          not supported");
        return;
    }
    println!(
        "FDP          {} (configuration {})",
        if r.fdp_enabled { "enabled" } else { "disabled" },
        r.fdp_config_index
    );
    for c in &r.configs {
        println!(
            "config {}     {} RUHs × {} reclaim groups, RU {} MiB{}",
            c.index,
            c.nruh,
            c.nrg,
            c.runs as f64 / 1048576.0,
            if c.valid { "" } else { " (invalid)" }
        );
    }
    if !r.ruamw.is_empty() {
        println!("RU available (blocks per placement id): {:?}", r.ruamw);
    }
    println!("host bytes   {}", r.host_bytes);
    println!("media bytes  {}", r.media_bytes);
    println!("erased bytes {}", r.erased_bytes);
    match r.waf {
        Some(w) => println!("WAF          {w:.4}"),
        None => println!("WAF          - (nothing written)"),
    }
    for e in &r.events {
        println!(
            "event        type {:#04x} placement id {} at {} ms",
            e.kind, e.pid, e.timestamp
        );
    }
}

/// Reads what the NVMe device at `path` reports.
pub(crate) fn read_path(path: &std::path::Path) -> anyhow::Result<Report> {
    read(&open_dev(path)?)
}

/// Opens a device node (non-blocking: a FIFO named by mistake must not
/// hang); anything but a block or character device is refused by name.
fn open_dev(path: &std::path::Path) -> anyhow::Result<Dev> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("{}", path.display()))?;
    let t = file
        .metadata()
        .with_context(|| format!("{}", path.display()))?
        .file_type();
    if !t.is_block_device() && !t.is_char_device() {
        let what = if t.is_dir() {
            "a directory"
        } else if t.is_fifo() {
            "a FIFO"
        } else if t.is_socket() {
            "a socket"
        } else {
            "a regular file"
        };
        bail!(
            "{}: not an NVMe device ({what}; give a namespace such as /dev/nvme0n1 or a controller such as /dev/nvme0)",
            path.display()
        );
    }
    Ok(Dev {
        file,
        path: path.to_path_buf(),
    })
}

/// Runs the subcommand.
pub fn run(a: DeviceArgs) -> anyhow::Result<ExitCode> {
    let Some(path) = a.path.clone() else {
        let mountinfo =
            std::fs::read_to_string("/proc/self/mountinfo").context("/proc/self/mountinfo")?;
        let l = crate::devices::listing(
            &pcstream_placement::delivery::Sysfs::default(),
            &mountinfo,
            true,
        );
        if a.json {
            println!("{}", serde_json::to_string_pretty(&l)?);
        } else {
            crate::devices::print(&l);
        }
        return Ok(ExitCode::SUCCESS);
    };
    let dev = open_dev(&path)?;
    if let Some(secs) = a.watch {
        loop {
            let r = read(&dev)?;
            let waf = r.waf.map_or("-".to_string(), |w| format!("{w:.4}"));
            println!(
                "host {} MiB, media {} MiB, WAF {waf}",
                r.host_bytes >> 20,
                r.media_bytes >> 20
            );
            std::thread::sleep(Duration::from_secs(secs.max(1)));
        }
    }
    let r = read(&dev)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print(&r);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_not_an_nvme_device_is_named_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(
            &fifo,
            nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
        )
        .unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        for (p, what) in [
            (dir.path(), "a directory"),
            (fifo.as_path(), "a FIFO"),
            (file.as_path(), "a regular file"),
        ] {
            let e = read_path(p).unwrap_err().to_string();
            assert!(e.contains(&format!("not an NVMe device ({what}")), "{e}");
        }
        let e = format!(
            "{:#}",
            read_path(std::path::Path::new("/dev/null")).unwrap_err()
        );
        assert!(e.contains("/dev/null: not an NVMe device"), "{e}");
    }

    #[test]
    fn parses_the_targets_fdp_configuration_log() {
        let d = nvme_target::device::Device::new(nvme_target::DeviceConfig {
            capacity: 64 << 20,
            ruhs: 5,
            ru_size: 512 << 10,
            ..Default::default()
        })
        .unwrap();
        let c = parse_configs(&nvme_target::pages::fdp_configs(&d));
        assert_eq!(
            c,
            vec![FdpConfig {
                index: 0,
                valid: true,
                nrg: 1,
                nruh: 5,
                runs: 512 << 10,
                ruh_types: vec![1; 5]
            }]
        );
        // A truncated log yields what fits, never a panic.
        assert!(parse_configs(&[0u8; 16]).is_empty());
    }
}
