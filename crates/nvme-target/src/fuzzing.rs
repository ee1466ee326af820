//! The body of the `nvme_pdu` fuzz target (`fuzz/fuzz_targets/nvme_pdu.rs`),
//! here so a unit test runs it on random inputs in every CI run: the first
//! bytes are a PDU header checked against the limits and, when it passes,
//! decoded as its PDU type; the rest is a command (SQE) and its data,
//! executed by a connected admin (enabled) or I/O queue of a small device. Nothing
//! may panic, and nothing may size a buffer beyond the limits.

use std::sync::{Arc, OnceLock};

use zerocopy::FromBytes;

use crate::controller::{host_to_ctrl, Queue, Shared};
use crate::device::{Device, DeviceConfig};
use crate::pdu::{self, check_header, CommonHeader, DataHeader, IcReq, Limits, Sqe};

fn shared() -> &'static Arc<Shared> {
    static S: OnceLock<Arc<Shared>> = OnceLock::new();
    S.get_or_init(|| {
        let d = Device::new(DeviceConfig {
            capacity: 16 << 20,
            ruhs: 4,
            ru_size: 64 << 10,
            ..DeviceConfig::default()
        })
        .expect("fuzz device");
        Arc::new(Shared::new(
            d,
            crate::DEFAULT_NQN.into(),
            "127.0.0.1".into(),
            4420,
        ))
    })
}

fn connected(sh: &Shared, qid: u16, cntlid: u16) -> Queue {
    let mut q = Queue::default();
    let mut data = vec![0u8; 1024];
    data[16..18].copy_from_slice(&cntlid.to_le_bytes());
    data[256..256 + crate::DEFAULT_NQN.len()].copy_from_slice(crate::DEFAULT_NQN.as_bytes());
    let mut c = Sqe::new(0x7f, 0, 1);
    c.set(10, u32::from(qid) << 16).set(11, 31);
    let _ = q.execute(sh, &c, &data);
    if qid == 0 {
        // CC.EN with the I/O queue entry sizes: commands may run.
        let mut cc = Sqe::new(0x7f, 0, 0);
        cc.set(11, 0x14).set(12, 1 | 6 << 16 | 4 << 20);
        let _ = q.execute(sh, &cc, &[]);
    }
    q
}

/// Decodes `data` as a PDU header, then executes the rest as a command.
pub fn pdu_and_command(data: &[u8]) {
    let lim = Limits::default();
    if data.len() < 9 {
        return;
    }
    let (flags_byte, data) = (data[0], &data[1..]);
    if let Ok(h) = CommonHeader::read_from_bytes(&data[..8]) {
        if let Ok(f) = check_header(&h, &lim, flags_byte & 1 != 0, flags_byte & 2 != 0) {
            assert!(
                f.plen <= pdu::HLEN_IC + 8 + 128 + lim.max_h2c as usize + lim.in_capsule as usize
            );
            assert!(f.pdo + f.data_len <= f.plen);
            let _ = IcReq::read_from_prefix(data);
            let _ = DataHeader::read_from_prefix(data);
        }
    }
    let Ok((sqe, rest)) = Sqe::read_from_prefix(data) else {
        return;
    };
    let sh = shared();
    let mut admin = connected(sh, 0, 0xffff);
    let cntlid = admin.ctrl.as_ref().map_or(0, |c| c.id.cntlid);
    let mut io = connected(sh, 1, cntlid);
    let _ = host_to_ctrl(&sqe);
    let q = if flags_byte & 4 != 0 {
        &mut io
    } else {
        &mut admin
    };
    let r = q.execute(sh, &sqe, rest);
    assert!(r.data.len() <= 4 << 20, "reply of {} bytes", r.data.len());
    io.close(sh);
    admin.close(sh);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_pdus_and_commands_never_panic() {
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let opcodes = [
            0x00u8, 0x01, 0x02, 0x06, 0x08, 0x09, 0x0a, 0x0c, 0x12, 0x18, 0x19, 0x1a, 0x1d, 0x7f,
        ];
        for i in 0..20_000u64 {
            let len = (next() % 200) as usize;
            let mut buf: Vec<u8> = (0..len.max(80)).map(|_| next() as u8).collect();
            // Half the inputs get a known opcode and a small LBA so commands get past the first checks.
            if i % 2 == 0 {
                // byte 0 is the fuzzer's flags; the SQE starts at byte 1.
                buf[1] = opcodes[(next() % opcodes.len() as u64) as usize];
                buf[5..9].copy_from_slice(&1u32.to_le_bytes());
                buf[43..49].fill(0); // SLBA < 64 Ki blocks
                buf[50] = 0; // NLB < 256
            }
            pdu_and_command(&buf);
        }
    }

    /// scripts/fuzz.sh's finding of 2026-11-25: a read of 1025 blocks on
    /// the I/O queue made a 4 MiB + 4 KiB reply; reads past MDTS are refused.
    #[test]
    fn a_read_past_mdts_is_refused_not_allocated() {
        let input: [u8; 65] = [
            127, 2, 0, 0, 1, 1, 0, 0, 0, 0, 59, 0, 0, 1, 0, 83, 0, 0, 0, 7, 0, 255, 253, 255, 255,
            255, 255, 255, 0, 0, 0, 0, 0, 0, 16, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4,
            104, 0, 6, 218, 255, 0, 77, 1, 0, 0, 0, 59, 16, 0,
        ];
        pdu_and_command(&input);
        let (sqe, _) = Sqe::read_from_prefix(&input[1..]).unwrap();
        let sh = shared();
        let admin = connected(sh, 0, 0xffff);
        let mut io = connected(sh, 1, admin.ctrl.as_ref().map_or(0, |c| c.id.cntlid));
        let r = io.execute(sh, &sqe, &[]);
        assert!(r.data.is_empty(), "{} bytes", r.data.len());
        assert_eq!(
            r.status & 0x7ff,
            crate::controller::sc::INVALID_FIELD,
            "{:#x}",
            r.status
        );
    }
}
