//! The data structures the admin commands return, built from the device:
//! Identify (controller, namespace, command-set independent namespace,
//! active namespace list, namespace descriptors, I/O command sets), the log
//! pages (error, SMART / health, FDP configurations 20h, RUH usage 21h, FDP
//! statistics 22h, FDP events 23h, discovery 70h) and the RUH status of I/O
//! Management Receive. Offsets follow NVMe Base 2.0 and TP4146 (FDP), the
//! same layouts Linux's `include/linux/nvme.h` and nvme-cli read; the
//! fixed-size FDP records are `zerocopy` structs.

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::device::{Device, BLOCK};

/// NQN of the discovery subsystem.
pub const DISCOVERY_NQN: &str = "nqn.2014-08.org.nvmexpress.discovery";
/// Endurance group of the namespace (Identify Namespace ENDGID, FDP log LSI).
pub const ENDGID: u16 = 1;
/// Bytes of data a command capsule may carry (ICDOFF 0, IOCCSZ).
pub const IN_CAPSULE: u32 = 8192;
/// MDTS as a power of two of 4 KiB pages (2^8 × 4 KiB = 1 MiB).
pub const MDTS: u8 = 8;

/// Who the controller is.
#[derive(Debug, Clone)]
pub struct Identity {
    /// Subsystem NQN.
    pub subnqn: String,
    /// Serial number (≤ 20 ASCII).
    pub serial: String,
    /// Controller id.
    pub cntlid: u16,
    /// A discovery controller.
    pub discovery: bool,
}

fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
    buf[at..at + bytes.len()].copy_from_slice(bytes);
}

/// An ASCII field padded with spaces.
fn ascii(buf: &mut [u8], at: usize, len: usize, s: &str) {
    let f = &mut buf[at..at + len];
    f.fill(b' ');
    let b = s.as_bytes();
    let n = b.len().min(len);
    f[..n].copy_from_slice(&b[..n]);
}

/// A NUL-padded string field.
fn cstr(buf: &mut [u8], at: usize, len: usize, s: &str) {
    let b = s.as_bytes();
    let n = b.len().min(len - 1);
    buf[at..at + n].copy_from_slice(&b[..n]);
}

/// Identify Controller (CNS 01h, NVMe Base 2.0 Figure 275).
pub fn identify_ctrl(id: &Identity, ruhs: u16) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    put(&mut b, 0, &0x1b36u16.to_le_bytes()); // VID
    put(&mut b, 2, &0x1af4u16.to_le_bytes()); // SSVID
    ascii(&mut b, 4, 20, &id.serial);
    ascii(&mut b, 24, 40, "pcstream ftl-sim FDP");
    ascii(&mut b, 64, 8, env!("CARGO_PKG_VERSION"));
    b[77] = MDTS;
    put(&mut b, 78, &id.cntlid.to_le_bytes());
    put(&mut b, 80, &0x0002_0000u32.to_le_bytes()); // VER 2.0
    if !id.discovery {
        put(&mut b, 92, &(1u32 << 8).to_le_bytes()); // OAES: namespace attribute notices
        put(&mut b, 96, &(1u32 << 19).to_le_bytes()); // CTRATT: FDPS
    }
    b[111] = if id.discovery { 2 } else { 1 }; // CNTRLTYPE
    put(&mut b, 256, &(1u16 << 5).to_le_bytes()); // OACS: directives
    b[258] = 3; // ACL
    b[259] = 3; // AERL
    b[260] = 1 << 1; // FRMW: slot 1 read-only
    b[261] = 1 << 2; // LPA: extended data for Get Log Page
    b[262] = 15; // ELPE
    put(&mut b, 320, &10u16.to_le_bytes()); // KAS: 1 s granularity
    put(&mut b, 340, &ENDGID.to_le_bytes()); // ENDGIDMAX
    b[512] = 0x66; // SQES
    b[513] = 0x44; // CQES
    put(&mut b, 514, &128u16.to_le_bytes()); // MAXCMD
    put(&mut b, 516, &u32::from(!id.discovery).to_le_bytes()); // NN
    if !id.discovery {
        put(&mut b, 520, &((1u16 << 2) | (1 << 3)).to_le_bytes()); // ONCS: DSM, write zeroes
        b[524] = 1; // VWC present
    }
    put(&mut b, 536, &((1u32 << 0) | (1 << 20)).to_le_bytes()); // SGLS (+ offset)
    let _ = ruhs;
    cstr(&mut b, 768, 256, &id.subnqn);
    // NVMe over Fabrics attributes (bytes 1792..)
    put(&mut b, 1792, &((64 + IN_CAPSULE) / 16).to_le_bytes()); // IOCCSZ
    put(&mut b, 1796, &1u32.to_le_bytes()); // IORCSZ
    b[1803] = 1; // MSDBD
    b
}

/// Identify Namespace (CNS 00h, NVM command set, Figure 97 of the NVM spec).
pub fn identify_ns(d: &Device) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    let n = d.nlb();
    put(&mut b, 0, &n.to_le_bytes()); // NSZE
    put(&mut b, 8, &n.to_le_bytes()); // NCAP
    put(&mut b, 16, &n.to_le_bytes()); // NUSE
    b[24] = 1 << 2; // NSFEAT: deallocated/unwritten error (DAE) — reads of holes return zeros
    b[25] = 0; // NLBAF (0-based)
    b[26] = 0; // FLBAS
    b[33] = 1 | (1 << 3); // DLFEAT: deallocated reads zeros, write zeroes deallocates
    put(&mut b, 48, &u128::from(n * BLOCK as u64).to_le_bytes()); // NVMCAP
    put(&mut b, 102, &ENDGID.to_le_bytes()); // ENDGID
    put(&mut b, 104, &nguid()); // NGUID
    b[128 + 2] = BLOCK.trailing_zeros() as u8; // LBAF0: LBADS
    b
}

/// The namespace's globally unique id.
pub fn nguid() -> [u8; 16] {
    *b"pcstream-ftlsim1"
}

/// I/O Command Set Independent Identify Namespace (CNS 08h).
pub fn identify_ns_cs_indep() -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    put(&mut b, 12, &ENDGID.to_le_bytes()); // ENDGID
    b[14] = 1; // NSTAT: ready
    b
}

/// Active namespace list (CNS 02h) after `after`.
pub fn active_ns_list(after: u32) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    if after < 1 {
        put(&mut b, 0, &1u32.to_le_bytes());
    }
    b
}

/// Namespace identification descriptors (CNS 03h): NGUID and CSI.
pub fn ns_descriptors() -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    b[0] = 2; // NIDT: NGUID
    b[1] = 16;
    put(&mut b, 4, &nguid());
    b[20] = 4; // NIDT: CSI
    b[21] = 1;
    b[24] = 0; // NVM
    b
}

/// I/O Command Set data structure (CNS 1Ch): vector 0 = NVM only.
pub fn io_command_sets() -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    b[0] = 1;
    b
}

/// Discovery log page (70h): header and one entry for the subsystem.
pub fn discovery_log(subnqn: &str, addr: &str, port: u16) -> Vec<u8> {
    let mut b = vec![0u8; 2048];
    put(&mut b, 0, &1u64.to_le_bytes()); // GENCTR
    put(&mut b, 8, &1u64.to_le_bytes()); // NUMREC
    let e = &mut b[1024..];
    e[0] = 3; // TRTYPE: TCP
    e[1] = if addr.contains(':') { 2 } else { 1 }; // ADRFAM
    e[2] = 2; // SUBTYPE: NVMe subsystem
    e[3] = 0x02; // TREQ: secure channel not required
    put(e, 4, &1u16.to_le_bytes()); // PORTID
    put(e, 6, &0xffffu16.to_le_bytes()); // CNTLID: dynamic
    put(e, 8, &128u16.to_le_bytes()); // ASQSZ
    ascii(e, 32, 32, &port.to_string());
    cstr(e, 256, 256, subnqn);
    ascii(e, 512, 256, addr);
    b
}

/// SMART / health information (02h).
pub fn smart_log(d: &Device) -> Vec<u8> {
    let s = d.stats();
    let mut b = vec![0u8; 512];
    put(&mut b, 1, &313u16.to_le_bytes()); // composite temperature, K
    b[3] = 100; // available spare
    b[4] = 10; // threshold
    let units = |bytes: u64| u128::from(bytes.div_ceil(512_000));
    put(&mut b, 32, &units(s.read_bytes).to_le_bytes());
    put(&mut b, 48, &units(s.host_bytes).to_le_bytes());
    put(&mut b, 64, &u128::from(s.reads).to_le_bytes());
    put(&mut b, 80, &u128::from(s.writes).to_le_bytes());
    b
}

/// FDP configurations log header (20h).
#[derive(Debug, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct FdpConfigHeader {
    /// Number of configurations (0-based).
    pub ncfg: U16,
    /// Version.
    pub version: u8,
    /// Reserved.
    pub rsvd: u8,
    /// Size of the whole log in bytes.
    pub size: U32,
    /// Reserved.
    pub rsvd2: [u8; 8],
}

/// FDP configuration descriptor (TP4146, 64 bytes, then RUH descriptors).
#[derive(Debug, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct FdpConfigDesc {
    /// Descriptor size including RUH descriptors.
    pub dsze: U16,
    /// Attributes: bit 7 valid, bits 3:0 RGIF.
    pub fdpa: u8,
    /// Vendor specific size (16-byte units).
    pub vss: u8,
    /// Reclaim groups.
    pub nrg: U32,
    /// Reclaim unit handles.
    pub nruh: U16,
    /// Most placement ids per namespace.
    pub maxpids: U16,
    /// Namespaces supported.
    pub nnss: U32,
    /// Reclaim unit nominal size, bytes.
    pub runs: U64,
    /// Estimated reclaim unit time limit (0: none).
    pub erutl: U32,
    /// Reserved.
    pub rsvd: [u8; 36],
}

/// FDP configurations (20h): one valid configuration, all RUHs initially isolated.
pub fn fdp_configs(d: &Device) -> Vec<u8> {
    let nruh = d.ruhs();
    let dsze = 64 + 4 * usize::from(nruh);
    let size = 16 + dsze;
    let mut b = Vec::with_capacity(size);
    b.extend_from_slice(
        FdpConfigHeader {
            ncfg: U16::new(0),
            version: 0,
            rsvd: 0,
            size: U32::new(size as u32),
            rsvd2: [0; 8],
        }
        .as_bytes(),
    );
    b.extend_from_slice(
        FdpConfigDesc {
            dsze: U16::new(dsze as u16),
            fdpa: 0x80,
            vss: 0,
            nrg: U32::new(1),
            nruh: U16::new(nruh),
            maxpids: U16::new(nruh.saturating_sub(1)),
            nnss: U32::new(1),
            runs: U64::new(d.ru_size()),
            erutl: U32::new(0),
            rsvd: [0; 36],
        }
        .as_bytes(),
    );
    for _ in 0..nruh {
        b.extend_from_slice(&[1, 0, 0, 0]); // RUHT: initially isolated
    }
    b
}

/// Reclaim unit handle usage (21h): every handle host-specified.
pub fn ruh_usage(d: &Device) -> Vec<u8> {
    let n = d.ruhs();
    let mut b = vec![0u8; 8 + 8 * usize::from(n)];
    put(&mut b, 0, &n.to_le_bytes());
    for i in 0..n {
        b[8 + 8 * usize::from(i)] = d.ruh_attr(i);
    }
    b
}

/// FDP statistics (22h): host bytes with metadata written, media bytes
/// written, media bytes erased, 16 bytes each, then 16 reserved.
pub fn fdp_stats(d: &Device) -> Vec<u8> {
    let s = d.stats();
    let mut b = vec![0u8; 64];
    put(&mut b, 0, &u128::from(s.host_bytes).to_le_bytes());
    put(&mut b, 16, &u128::from(s.media_bytes).to_le_bytes());
    put(&mut b, 32, &u128::from(s.erased_bytes).to_le_bytes());
    b
}

/// FDP events (23h): count, then 64-byte event records.
pub fn fdp_events(d: &Device) -> Vec<u8> {
    let ev: Vec<_> = d.events().copied().collect();
    let mut b = vec![0u8; 64 + 64 * ev.len()];
    put(&mut b, 0, &(ev.len() as u32).to_le_bytes());
    for (i, e) in ev.iter().enumerate() {
        let r = &mut b[64 + 64 * i..128 + 64 * i];
        r[0] = e.kind;
        r[1] = 0x01; // PIV: placement id valid
        put(r, 2, &e.pid.to_le_bytes());
        put(r, 4, &e.timestamp_ms.to_le_bytes()[..6]);
        put(r, 12, &e.nsid.to_le_bytes());
        put(r, 34, &[e.pid as u8]); // RUHID
    }
    b
}

/// RUH status (I/O Management Receive MO 1): one 32-byte descriptor per handle.
pub fn ruh_status(d: &Device) -> Vec<u8> {
    let n = d.ruhs();
    let mut b = vec![0u8; 16 + 32 * usize::from(n)];
    put(&mut b, 14, &n.to_le_bytes()); // NRUHSD
    for p in 0..n {
        let r = &mut b[16 + 32 * usize::from(p)..48 + 32 * usize::from(p)];
        put(r, 0, &p.to_le_bytes()); // PID
        put(r, 2, &p.to_le_bytes()); // RUHID
        put(r, 8, &d.ru_available(p).to_le_bytes()); // RUAMW (logical blocks)
    }
    b
}

/// FDP events enabled on a handle (Get Features 1Eh): 2-byte descriptors.
pub fn fdp_event_config(mask: u8) -> Vec<u8> {
    let mut b = Vec::new();
    for kind in [0u8, 1, 2, 3] {
        b.push(kind);
        b.push(u8::from(mask & (1 << kind) != 0));
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceConfig;

    #[test]
    fn fdp_config_log_has_nruh_and_ru_size_where_linux_reads_them() {
        let d = Device::new(DeviceConfig {
            capacity: 64 << 20,
            ruhs: 6,
            ru_size: 512 << 10,
            ..DeviceConfig::default()
        })
        .unwrap();
        let b = fdp_configs(&d);
        assert_eq!(b.len(), 16 + 64 + 24);
        assert_eq!(
            u32::from_le_bytes(b[4..8].try_into().unwrap()) as usize,
            b.len()
        );
        let desc = &b[16..];
        assert_eq!(desc[2] & 0x80, 0x80);
        assert_eq!(u16::from_le_bytes(desc[8..10].try_into().unwrap()), 6);
        assert_eq!(
            u64::from_le_bytes(desc[16..24].try_into().unwrap()),
            512 << 10
        );
    }
}
