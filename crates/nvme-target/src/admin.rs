//! The admin commands' bodies: Identify, Get Log Page, Get/Set Features
//! (number of queues, FDP, FDP events, keep alive timer) and Directive
//! Receive/Send for the Streams directive. [`crate::controller`] checks and
//! dispatches them; [`crate::pages`] builds what they return.

use std::sync::atomic::Ordering;

use crate::controller::{sc, Ctrl, Reply, Shared};
use crate::device::BLOCK;
use crate::pages;
use crate::pdu::Sqe;

pub(crate) fn identify(sh: &Shared, ctrl: &Ctrl, sqe: &Sqe) -> Reply {
    let cns = sqe.cdw(10) as u8;
    let nsid = sqe.nsid();
    let csi = (sqe.cdw(11) >> 24) as u8;
    let ns_ok = nsid == 1 && !ctrl.id.discovery;
    match cns {
        0x01 => Reply::data(pages::identify_ctrl(&ctrl.id, sh.dev().ruhs())),
        0x00 if ns_ok => Reply::data(pages::identify_ns(&sh.dev())),
        0x08 if ns_ok => Reply::data(pages::identify_ns_cs_indep()),
        0x03 if ns_ok => Reply::data(pages::ns_descriptors()),
        0x05 if ns_ok && csi == 0 => Reply::data(vec![0; 4096]),
        0x00 | 0x03 | 0x05 | 0x08 => Reply::status(sc::INVALID_NS),
        0x02 | 0x07 if !ctrl.id.discovery => Reply::data(pages::active_ns_list(nsid)),
        0x06 if csi == 0 => Reply::data(vec![0; 4096]),
        0x1c => Reply::data(pages::io_command_sets()),
        _ => Reply::status(sc::INVALID_FIELD),
    }
}

pub(crate) fn get_log(sh: &Shared, discovery: bool, sqe: &Sqe) -> Reply {
    let lid = sqe.cdw(10) as u8;
    let numd = ((sqe.cdw(10) >> 16) | (sqe.cdw(11) & 0xffff) << 16) as u64 + 1;
    let lsi = (sqe.cdw(11) >> 16) as u16;
    let offset = u64::from(sqe.cdw(12)) | u64::from(sqe.cdw(13)) << 32;
    let page = match lid {
        0x70 if discovery => pages::discovery_log(&sh.subnqn, &sh.addr, sh.port),
        _ if discovery => return Reply::status(sc::INVALID_LOG_PAGE),
        0x01 => vec![0; 64],
        0x02 => pages::smart_log(&sh.dev()),
        0x03 => vec![0; 512],
        0x20..=0x23 if lsi != pages::ENDGID => return Reply::status(sc::INVALID_FIELD),
        0x20 => pages::fdp_configs(&sh.dev()),
        0x21 => pages::ruh_usage(&sh.dev()),
        0x22 => pages::fdp_stats(&sh.dev()),
        0x23 => pages::fdp_events(&sh.dev()),
        _ => return Reply::status(sc::INVALID_LOG_PAGE),
    };
    if offset % 4 != 0 || offset > page.len() as u64 {
        return Reply::status(sc::INVALID_FIELD);
    }
    let end = (offset + numd * 4).min(page.len() as u64);
    let mut out = page[offset as usize..end as usize].to_vec();
    out.resize((numd * 4).min(1 << 20) as usize, 0);
    Reply::data(out)
}

pub(crate) fn features(sh: &Shared, ctrl: &Ctrl, sqe: &Sqe, set: Option<&[u8]>) -> Reply {
    let fid = sqe.cdw(10) as u8;
    let save = sqe.cdw(10) >> 31 != 0;
    if set.is_some() && save {
        return Reply::status(sc::FEATURE_NOT_SAVEABLE);
    }
    let q = u64::from(ctrl.queues);
    match (fid, set) {
        (0x07, _) => Reply::result(q | q << 16), // number of queues
        (0x1d, None) => {
            if sqe.cdw(11) as u16 != pages::ENDGID {
                return Reply::status(sc::INVALID_FIELD);
            }
            Reply::result(1) // FDPE, configuration index 0
        }
        (0x1d, Some(_)) => {
            // FDP is fixed on (one configuration); enabling it again is a no-op.
            if sqe.cdw(12) & 1 == 1 && (sqe.cdw(12) >> 8) as u8 == 0 {
                Reply::ok()
            } else {
                Reply::status(sc::INVALID_FIELD)
            }
        }
        (0x1e, set) => {
            let pid = sqe.cdw(11) as u16;
            let noet = (sqe.cdw(11) >> 16) as u8;
            let mut dev = sh.dev();
            let Some(mask) = dev.event_mask(pid) else {
                return Reply::status(sc::INVALID_FIELD);
            };
            match set {
                None => {
                    let mut d = pages::fdp_event_config(mask);
                    d.truncate(2 * usize::from(noet.max(1)).min(4));
                    Reply {
                        result: (d.len() / 2) as u64,
                        ..Reply::data(d)
                    }
                }
                Some(data) => {
                    let on = sqe.cdw(12) & 1 == 1;
                    for &kind in data.iter().take(usize::from(noet)) {
                        if !dev.set_event(pid, kind, on) {
                            return Reply::status(sc::INVALID_FIELD);
                        }
                    }
                    Reply::ok()
                }
            }
        }
        (0x0f, None) => Reply::result(u64::from(ctrl.kato_ms.load(Ordering::Relaxed))),
        (0x0f, Some(_)) => {
            // Keep Alive Timer: a new KATO, counted from now.
            ctrl.kato_ms.store(sqe.cdw(11), Ordering::Relaxed);
            ctrl.touch();
            Reply::ok()
        }
        (0x0b | 0x0c | 0x0e, _) => Reply::ok(), // async event config, …
        _ => Reply::status(sc::INVALID_FIELD),
    }
}

/// Streams directive (type 1): identify parameters. Directive type 0 is Identify.
pub(crate) fn directive_recv(sh: &Shared, sqe: &Sqe) -> Reply {
    let doper = sqe.cdw(11) as u8;
    let dtype = (sqe.cdw(11) >> 8) as u8;
    match (dtype, doper) {
        (0, 1) => {
            let mut b = vec![0u8; 4096];
            b[0] = 0b11; // supported: identify, streams
            b[32] = 0b11; // enabled
            Reply::data(b)
        }
        (1, 1) => {
            let n = sh.dev().ruhs();
            let mut b = vec![0u8; 32];
            b[0..2].copy_from_slice(&n.to_le_bytes()); // MSL
            b[2..4].copy_from_slice(&n.to_le_bytes()); // NSSA
            b[4..6].copy_from_slice(&n.to_le_bytes()); // NSSO
            b[16..20].copy_from_slice(&(sh.dev().ru_size() as u32 / BLOCK as u32).to_le_bytes()); // SWS
            b[20..22].copy_from_slice(&1u16.to_le_bytes()); // SGS
            b[22..24].copy_from_slice(&n.to_le_bytes()); // NSA
            b[24..26].copy_from_slice(&n.to_le_bytes()); // NSO
            Reply::data(b)
        }
        (1, 3) => Reply::result(u64::from(sh.dev().ruhs())), // allocate resources
        _ => Reply::status(sc::INVALID_FIELD),
    }
}

pub(crate) fn directive_send(sqe: &Sqe) -> Reply {
    let doper = sqe.cdw(11) as u8;
    let dtype = (sqe.cdw(11) >> 8) as u8;
    match (dtype, doper) {
        (0, 1) | (1, 1) | (1, 2) => Reply::ok(), // enable, release identifier / resources
        _ => Reply::status(sc::INVALID_FIELD),
    }
}
