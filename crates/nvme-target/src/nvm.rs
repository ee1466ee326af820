//! The I/O commands of the NVM command set on namespace 1: Read, Write
//! (checked into a [`WritePlan`] before its data is taken), Flush, Dataset
//! Management and Write Zeroes (deallocation), I/O Management Receive/Send
//! (RUH status, RUH update). [`crate::controller`] checks and dispatches
//! them.

use crate::controller::{op, sc, Ctrl, Queue, Reply, Shared};
use crate::device::BLOCK;
use crate::pages;
use crate::pdu::Sqe;

/// A validated Write: where its data goes and which handle places it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WritePlan {
    /// First logical block.
    pub slba: u64,
    /// Logical blocks.
    pub nlb: u64,
    /// Placement identifier (None: the controller chooses).
    pub pid: Option<u16>,
}

impl WritePlan {
    /// Byte offset of the data in the namespace.
    pub fn byte_offset(&self) -> u64 {
        self.slba * BLOCK as u64
    }
    /// Bytes of data.
    pub fn bytes(&self) -> usize {
        self.nlb as usize * BLOCK
    }
}

fn ns_check(ctrl: &Ctrl, sqe: &Sqe) -> Result<(), Reply> {
    if ctrl.id.discovery {
        return Err(Reply::status(sc::INVALID_OPCODE));
    }
    let opcode = sqe.opcode();
    if opcode != op::FLUSH && sqe.nsid() != 1
        || opcode == op::FLUSH && !matches!(sqe.nsid(), 1 | 0xffff_ffff)
    {
        return Err(Reply::status(sc::INVALID_NS));
    }
    Ok(())
}

fn lba_range(sqe: &Sqe) -> (u64, u64) {
    (
        u64::from(sqe.cdw(10)) | u64::from(sqe.cdw(11)) << 32,
        u64::from(sqe.cdw(12) as u16) + 1,
    )
}

/// Checks a Write command (namespace, range, data length, placement
/// directive) before its data is taken.
fn plan_write(sh: &Shared, ctrl: &Ctrl, sqe: &Sqe, data_len: usize) -> Result<WritePlan, Reply> {
    ns_check(ctrl, sqe)?;
    let (slba, nlb) = lba_range(sqe);
    if !sh.in_range(slba, nlb) {
        return Err(Reply::status(sc::LBA_RANGE));
    }
    if data_len as u64 != nlb * BLOCK as u64 {
        return Err(Reply::status(sc::SGL_LENGTH));
    }
    let dspec = (sqe.cdw(13) >> 16) as u16;
    let pid = match (sqe.cdw(12) >> 20) & 0xf {
        0 => None,
        1 => Some(dspec % sh.ruhs), // Streams: stream id → handle
        2 => Some(dspec),           // FDP: placement id (one reclaim group)
        _ => return Err(Reply::status(sc::INVALID_FIELD)),
    };
    Ok(WritePlan { slba, nlb, pid })
}

fn io_result(r: std::io::Result<()>) -> Reply {
    match r {
        Ok(()) => Reply::ok(),
        Err(e) => {
            tracing::warn!("I/O failed: {e}");
            Reply::status(sc::INTERNAL)
        }
    }
}

impl Queue {
    /// For a Write on an I/O queue whose data the transport will fetch:
    /// the checked plan (the transport puts the data straight into
    /// [`Shared::store`] at [`WritePlan::byte_offset`], then calls
    /// [`Queue::commit_write`]), or the error reply to send instead of
    /// asking for the data. None: not such a command.
    pub fn plan_write(&self, sh: &Shared, sqe: &Sqe) -> Option<Result<WritePlan, Reply>> {
        let ctrl = self.ctrl.as_ref()?;
        if self.qid == 0 || sqe.opcode() != op::WRITE {
            return None;
        }
        Some(plan_write(sh, ctrl, sqe, sqe.sgl_len() as usize))
    }

    /// Places a planned write whose data is in the store.
    pub fn commit_write(&self, sh: &Shared, plan: &WritePlan) -> Reply {
        io_result(sh.dev().place(plan.slba, plan.nlb, plan.pid, 1))
    }
}

/// Deallocates `n` blocks at `slba`: the store first, without the device
/// lock (writing zeros where a file cannot punch holes takes long), then
/// the model.
fn deallocate(sh: &Shared, slba: u64, n: u64) -> std::io::Result<()> {
    sh.store.zero(slba * BLOCK as u64, n * BLOCK as u64)?;
    sh.dev().unmap(slba, n)
}

pub(crate) fn io(sh: &Shared, ctrl: &Ctrl, sqe: &Sqe, data: &[u8]) -> Reply {
    if let Err(r) = ns_check(ctrl, sqe) {
        return r;
    }
    let opcode = sqe.opcode();
    let (slba, nlb) = lba_range(sqe);
    match opcode {
        op::WRITE => {
            return match plan_write(sh, ctrl, sqe, data.len()) {
                Ok(p) => match sh.store.write_at(p.byte_offset(), data) {
                    Ok(()) => io_result(sh.dev().place(p.slba, p.nlb, p.pid, 1)),
                    Err(e) => io_result(Err(e)),
                },
                Err(r) => r,
            };
        }
        op::READ => {
            // Past MDTS (1 MiB) a read would make the target allocate what
            // the host asks (NLB allows 256 MiB per command): refused, as
            // the specification says, with Invalid Field in Command.
            if nlb * BLOCK as u64 > (BLOCK as u64) << pages::MDTS {
                return Reply::status(sc::INVALID_FIELD);
            }
            if !sh.in_range(slba, nlb) {
                return Reply::status(sc::LBA_RANGE);
            }
            if sqe.sgl_len() as u64 != nlb * BLOCK as u64 {
                return Reply::status(sc::SGL_LENGTH);
            }
            let mut buf = vec![0u8; (nlb as usize) * BLOCK];
            return match sh.store.read_at(slba * BLOCK as u64, &mut buf) {
                Ok(()) => {
                    sh.dev().count_read(buf.len() as u64);
                    Reply::data(buf)
                }
                Err(e) => io_result(Err(e)),
            };
        }
        _ => {}
    }
    let wrap = io_result;
    match opcode {
        op::WRITE_ZEROES if !sh.in_range(slba, nlb) => return Reply::status(sc::LBA_RANGE),
        op::WRITE_ZEROES => return wrap(deallocate(sh, slba, nlb)),
        op::DSM => {
            let nr = (sqe.cdw(10) & 0xff) as usize + 1;
            if data.len() < nr * 16 {
                return Reply::status(sc::SGL_LENGTH);
            }
            if sqe.cdw(11) & (1 << 2) == 0 {
                return Reply::ok(); // hints only
            }
            for r in data.chunks_exact(16).take(nr) {
                let n = u64::from(u32::from_le_bytes(r[4..8].try_into().unwrap_or_default()));
                let s = u64::from_le_bytes(r[8..16].try_into().unwrap_or_default());
                if !sh.in_range(s, n) {
                    return Reply::status(sc::LBA_RANGE);
                }
                if n > 0 {
                    if let Err(e) = deallocate(sh, s, n) {
                        return wrap(Err(e));
                    }
                }
            }
            return Reply::ok();
        }
        _ => {}
    }
    let mut dev = sh.dev();
    match opcode {
        op::FLUSH => wrap(dev.flush()),
        op::IO_MGMT_RECV => {
            if sqe.cdw(10) as u8 != 1 {
                return Reply::status(sc::INVALID_FIELD);
            }
            let numd = (u64::from(sqe.cdw(11)) + 1).min(1 << 18);
            let mut b = pages::ruh_status(&dev);
            b.resize((numd * 4) as usize, 0);
            Reply::data(b)
        }
        op::IO_MGMT_SEND => {
            if sqe.cdw(10) as u8 != 1 {
                return Reply::status(sc::INVALID_FIELD);
            }
            let npid = (sqe.cdw(10) >> 16) as usize + 1;
            if data.len() < npid * 2 {
                return Reply::status(sc::SGL_LENGTH);
            }
            for p in data.chunks_exact(2).take(npid) {
                if !dev.ruh_update(u16::from_le_bytes([p[0], p[1]]), 1) {
                    return Reply::status(sc::INVALID_FIELD);
                }
            }
            Reply::ok()
        }
        _ => Reply::status(sc::INVALID_OPCODE),
    }
}
