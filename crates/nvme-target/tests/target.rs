//! The target over real loopback TCP, driven by the crate's NVMe/TCP
//! client: discovery, admin pages, I/O that reads back what was written,
//! FDP placement and statistics (and their WAF against an offline replay of
//! the target's own trace), a backing file across a restart, a host that
//! disconnects mid-transfer, and malformed PDUs on one connection while
//! another keeps doing I/O.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use nvme_target::client::Client;
use nvme_target::pages::{DISCOVERY_NQN, ENDGID};
use nvme_target::pdu::{self, ty, DataHeader, HLEN_CMD, HLEN_DATA};
use nvme_target::{DeviceConfig, Running, Target, DEFAULT_NQN};
use zerocopy::little_endian::{U16, U32};
use zerocopy::IntoBytes;

fn small(ruhs: u16) -> DeviceConfig {
    DeviceConfig {
        capacity: 64 << 20,
        ruhs,
        ru_size: 256 << 10,
        ..DeviceConfig::default()
    }
}

fn start(cfg: DeviceConfig) -> Running {
    Target::bind("127.0.0.1:0", cfg, DEFAULT_NQN)
        .unwrap()
        .start()
        .unwrap()
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64 * 7) >> 2) as u8)
        .collect()
}

fn fdp_waf(admin: &mut Client) -> (u64, u64, f64) {
    let s = admin.get_log(0x22, ENDGID, 64).unwrap();
    assert_eq!(s.status, 0);
    let (host, media) = (u64_at(&s.data, 0), u64_at(&s.data, 16));
    (host, media, media as f64 / host as f64)
}

#[test]
fn discovery_finds_the_subsystem() {
    let t = start(small(4));
    let mut d = Client::connect(t.addr(), DISCOVERY_NQN, 0, 0xffff).unwrap();
    let id = d.identify(1, 0).unwrap();
    assert_eq!(id.data[111], 2, "discovery controller type");
    let log = d.get_log(0x70, 0, 2048).unwrap();
    assert_eq!(log.status, 0);
    assert_eq!(u64_at(&log.data, 8), 1, "one record");
    let e = &log.data[1024..];
    assert_eq!(e[0], 3, "TCP");
    let nqn = String::from_utf8_lossy(&e[256..256 + DEFAULT_NQN.len()]);
    assert_eq!(nqn, DEFAULT_NQN);
    assert_eq!(
        String::from_utf8_lossy(&e[32..37]).trim(),
        t.addr().port().to_string()
    );
    // I/O commands and FDP logs are not for the discovery controller.
    assert_ne!(d.get_log(0x22, ENDGID, 64).unwrap().status, 0);
}

#[test]
fn identify_and_fdp_pages_describe_the_device() {
    let t = start(small(6));
    let mut a = Client::admin(t.addr(), DEFAULT_NQN).unwrap();
    let c = a.identify(1, 0).unwrap();
    assert_eq!(c.status, 0);
    assert_ne!(u32_at(&c.data, 96) & (1 << 19), 0, "CTRATT.FDPS");
    assert_eq!(u32_at(&c.data, 516), 1, "one namespace");
    assert!(c.data[768..].starts_with(DEFAULT_NQN.as_bytes()));
    let ns = a.identify(0, 1).unwrap();
    let nsze = u64_at(&ns.data, 0);
    assert_eq!(nsze, (64 << 20) / 4096);
    assert_eq!(ns.data[130], 12, "4 KiB blocks");
    assert_eq!(u16_at(&ns.data, 102), ENDGID);
    assert_eq!(a.identify(0, 2).unwrap().code(), 0x00b, "no namespace 2");
    let list = a.identify(2, 0).unwrap();
    assert_eq!((u32_at(&list.data, 0), u32_at(&list.data, 4)), (1, 0));
    let descs = a.identify(3, 1).unwrap();
    assert_eq!((descs.data[0], descs.data[1]), (2, 16));
    let indep = a.identify(8, 1).unwrap();
    assert_eq!(indep.data[14] & 1, 1, "namespace ready");

    let cfg = a.get_log(0x20, ENDGID, 512).unwrap();
    assert_eq!(cfg.status, 0);
    let d = &cfg.data[16..];
    assert_eq!(u16_at(d, 8), 6, "NRUH");
    assert_eq!(u64_at(d, 16), 256 << 10, "RU size");
    assert_eq!(
        a.get_log(0x20, 7, 512).unwrap().code(),
        0x002,
        "wrong endurance group"
    );
    let usage = a.get_log(0x21, ENDGID, 64).unwrap();
    assert_eq!(u16_at(&usage.data, 0), 6);

    // Get Features FDP (1Dh) says enabled; number of queues is granted.
    let mut s = pdu::Sqe::new(0x0a, 0, 0);
    s.set(10, 0x1d).set(11, u32::from(ENDGID));
    assert_eq!(a.exec(s, &[], 0).unwrap().result & 1, 1);
    let mut s = pdu::Sqe::new(0x0a, 0, 0);
    s.set(10, 0x07);
    assert!(a.exec(s, &[], 0).unwrap().result & 0xffff >= 1);
    // Keep Alive, and an unknown opcode is refused without ending the queue.
    assert_eq!(a.exec(pdu::Sqe::new(0x18, 0, 0), &[], 0).unwrap().status, 0);
    assert_eq!(
        a.exec(pdu::Sqe::new(0xc3, 0, 0), &[], 0).unwrap().code(),
        0x001
    );
    let smart = a.get_log(0x02, 0, 512).unwrap();
    assert_eq!(smart.data[3], 100);
}

#[test]
fn io_reads_back_what_was_written_and_placement_reaches_the_ruh() {
    let t = start(small(4));
    let a = Client::admin(t.addr(), DEFAULT_NQN).unwrap();
    let mut q = a.io_queue(DEFAULT_NQN, 1).unwrap();
    let small_w = pattern(1, 4096);
    let big_w = pattern(2, 512 * 1024); // R2T, several H2CData PDUs
    assert_eq!(q.write(10, &small_w, Some(2)).unwrap().status, 0);
    assert_eq!(q.write(100, &big_w, Some(3)).unwrap().status, 0);
    assert_eq!(q.read(10, 1).unwrap().data, small_w);
    assert_eq!(q.read(100, 128).unwrap().data, big_w);
    assert_eq!(
        q.read(5000, 1).unwrap().data,
        vec![0; 4096],
        "never written"
    );
    let s = t.stats();
    assert_eq!(s.ruh_host_bytes, vec![0, 0, 4096, 512 * 1024]);

    // Out of range, and the RUH status seen through I/O Management Receive.
    let nlb = (64u64 << 20) / 4096;
    assert_eq!(
        q.write(nlb - 1, &pattern(3, 8192), None).unwrap().code(),
        0x080
    );
    // The same for a write whose data would come by R2T: refused before
    // any data is asked for; an unknown directive type likewise.
    assert_eq!(
        q.write(nlb - 8, &pattern(3, 65536), None).unwrap().code(),
        0x080
    );
    let mut bad_dtype = Client::write_cmd(0, 16, None);
    bad_dtype.set(12, 15 | 7 << 20);
    assert_eq!(
        q.exec(bad_dtype, &pattern(3, 65536), 0).unwrap().code(),
        0x002
    );
    // A write across a 1 MiB boundary of the in-memory store.
    let across = pattern(4, 512 * 1024);
    assert_eq!(q.write(200, &across, Some(3)).unwrap().status, 0);
    assert_eq!(q.read(200, 128).unwrap().data, across);
    assert_eq!(q.read(100, 100).unwrap().data, big_w[..100 * 4096]);
    let mut r = pdu::Sqe::new(0x12, 0, 1);
    r.set(10, 1).set(11, (16 + 4 * 32) / 4 - 1);
    let st = q.exec(r, &[], 16 + 4 * 32).unwrap();
    assert_eq!(u16_at(&st.data, 14), 4);
    let ru_blocks = (256 << 10) / 4096;
    assert_eq!(
        u64_at(&st.data, 16 + 2 * 32 + 8),
        ru_blocks - 1,
        "RUH 2 used one block"
    );

    // Deallocate (DSM) makes blocks read as zeros.
    let mut range = vec![0u8; 16];
    range[4..8].copy_from_slice(&1u32.to_le_bytes());
    range[8..16].copy_from_slice(&10u64.to_le_bytes());
    let mut dsm = pdu::Sqe::new(0x09, 0, 1);
    dsm.set(10, 0).set(11, 1 << 2);
    assert_eq!(q.exec(dsm, &range, 0).unwrap().status, 0);
    assert_eq!(q.read(10, 1).unwrap().data, vec![0; 4096]);
    // Flush.
    assert_eq!(q.exec(pdu::Sqe::new(0x00, 0, 1), &[], 0).unwrap().status, 0);
    // An invalid placement id is an FDP event and lands in RUH 0.
    assert_eq!(q.write(0, &small_w, Some(9)).unwrap().status, 0);
    let mut a = a;
    let ev = a.get_log(0x23, ENDGID, 128).unwrap();
    assert_eq!(u32_at(&ev.data, 0), 1);
    assert_eq!((ev.data[64], u16_at(&ev.data, 66)), (3, 9));
}

#[test]
fn several_queues_and_pipelined_commands() {
    let t = start(small(4));
    let a = Client::admin(t.addr(), DEFAULT_NQN).unwrap();
    let threads: Vec<_> = (1..=3u16)
        .map(|qid| {
            let mut q = a.io_queue(DEFAULT_NQN, qid).unwrap();
            std::thread::spawn(move || {
                let base = u64::from(qid) * 1000;
                let cmds = (0..200u64).map(|i| {
                    (
                        Client::write_cmd(base + i % 100, 2, Some(qid)),
                        pattern(base + i, 8192),
                    )
                });
                assert_eq!(q.pipeline(16, cmds).unwrap(), 0);
                // The last write of each block wins.
                for i in 100..200u64 {
                    let got = q.read(base + i % 100, 2).unwrap().data;
                    if i % 100 == 99 {
                        assert_eq!(got, pattern(base + i, 8192));
                    } else {
                        assert_eq!(got[..4096], pattern(base + i, 8192)[..4096]);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = t.stats();
    assert_eq!(s.ruh_host_bytes[1..], [200 * 8192, 200 * 8192, 200 * 8192]);
}

/// Sends `bytes` on a fresh connection (after ICReq when `ic`) and returns
/// what came back until the target closed the connection.
fn misbehave(t: &Running, ic: bool, bytes: &[u8]) -> Vec<u8> {
    let mut s = if ic {
        let mut c = Client::admin(t.addr(), DEFAULT_NQN).unwrap();
        c.socket().try_clone().unwrap()
    } else {
        TcpStream::connect(t.addr()).unwrap()
    };
    // A guard against a hang, not a timing assertion.
    s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    s.write_all(bytes).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut back = Vec::new();
    let _ = s.read_to_end(&mut back);
    back
}

fn header(t: u8, hlen: usize, pdo: usize, plen: u32) -> Vec<u8> {
    let mut h = pdu::header(t, 0, hlen, pdo, 0).as_bytes().to_vec();
    h[4..8].copy_from_slice(&plen.to_le_bytes());
    h
}

fn term_fes(back: &[u8]) -> Option<u16> {
    let at = back
        .windows(2)
        .position(|w| w[0] == ty::C2H_TERM && w[1] == 0)?;
    Some(u16_at(back, at + 8))
}

#[test]
fn malformed_pdus_end_their_connection_only() {
    let t = start(small(4));
    let a = Client::admin(t.addr(), DEFAULT_NQN).unwrap();
    let mut q = a.io_queue(DEFAULT_NQN, 1).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut i = 0u64;
            // Bounded, so a failure elsewhere cannot leave it spinning.
            while (!stop.load(Ordering::Relaxed) || i < 50) && i < 200_000 {
                let d = pattern(i, 8192);
                assert_eq!(q.write(i % 500 * 2, &d, Some(1)).unwrap().status, 0);
                assert_eq!(q.read(i % 500 * 2, 2).unwrap().data, d);
                i += 1;
            }
            i
        })
    };
    // A command before ICReq: sequence error.
    let mut cmd = header(ty::CMD, HLEN_CMD, 0, HLEN_CMD as u32);
    cmd.extend_from_slice(pdu::Sqe::new(0x06, 0, 0).as_bytes());
    assert_eq!(
        term_fes(&misbehave(&t, false, &cmd)),
        Some(pdu::fes::SEQUENCE)
    );
    // ICReq twice.
    let ic = header(ty::IC_REQ, 128, 0, 128)
        .into_iter()
        .chain([0u8; 120])
        .collect::<Vec<_>>();
    assert_eq!(
        term_fes(&misbehave(&t, true, &ic)),
        Some(pdu::fes::SEQUENCE)
    );
    // Wrong header length, unknown type, an oversized PDU (4 GiB claimed).
    for bad in [
        header(ty::CMD, 60, 0, 72),
        header(0x42, 24, 0, 24),
        header(ty::CMD, HLEN_CMD, HLEN_CMD, u32::MAX),
        header(ty::H2C_DATA, HLEN_DATA, HLEN_DATA, 64 << 20),
    ] {
        assert_eq!(
            term_fes(&misbehave(&t, true, &bad)),
            Some(pdu::fes::INVALID_HEADER),
            "{bad:?}"
        );
    }
    // Truncated: a header promising more than is sent, then EOF.
    let mut trunc = header(ty::CMD, HLEN_CMD, 0, HLEN_CMD as u32);
    trunc.extend_from_slice(&[0u8; 20]);
    misbehave(&t, true, &trunc);
    misbehave(&t, false, &[0x00, 0x00, 128]);
    // H2CData nobody asked for, and data at the wrong offset of a real transfer.
    let h2c = |ttag: u16, offset: u32, len: usize| {
        let mut b = DataHeader {
            hdr: pdu::header(
                ty::H2C_DATA,
                pdu::flags::DATA_LAST,
                HLEN_DATA,
                HLEN_DATA,
                HLEN_DATA + len,
            ),
            cid: U16::new(ttag),
            ttag: U16::new(ttag),
            offset: U32::new(offset),
            length: U32::new(len as u32),
            rsvd: [0; 4],
        }
        .as_bytes()
        .to_vec();
        b.extend(std::iter::repeat_n(0u8, len));
        b
    };
    assert_eq!(
        term_fes(&misbehave(&t, true, &h2c(77, 0, 4096))),
        Some(pdu::fes::DATA_RANGE)
    );
    {
        // A real 64 KiB write asks for data (R2T); the host answers out of order.
        let mut c = Client::admin(t.addr(), DEFAULT_NQN).unwrap();
        let mut io = c.io_queue(DEFAULT_NQN, 2).unwrap();
        let cid = io
            .submit(Client::write_cmd(0, 16, None), &pattern(9, 65536), 0)
            .unwrap();
        let s = io.socket();
        s.flush().unwrap();
        let mut r2t = [0u8; 24];
        s.read_exact(&mut r2t).unwrap();
        assert_eq!(r2t[0], ty::R2T);
        s.write_all(&h2c(cid, 8192, 4096)).unwrap();
        let mut back = Vec::new();
        let _ = s.read_to_end(&mut back);
        assert_eq!(term_fes(&back), Some(pdu::fes::DATA_RANGE));
        let _ = c.identify(1, 0); // the admin queue of that host is still fine
    }
    stop.store(true, Ordering::Relaxed);
    let done = worker.join().unwrap();
    assert!(done >= 50);
    // And the target still accepts new hosts.
    let mut a2 = Client::admin(t.addr(), DEFAULT_NQN).unwrap();
    assert_eq!(a2.identify(1, 0).unwrap().status, 0);
}

/// Two temperatures: a hot quarter of the space rewritten often, the rest
/// rarely. Returns the FDP statistics WAF.
fn two_temperatures(t: &Running, separate: bool) -> f64 {
    let mut a = Client::admin(t.addr(), DEFAULT_NQN).unwrap();
    let mut q = a.io_queue(DEFAULT_NQN, 1).unwrap();
    let nlb = (64u64 << 20) / 4096;
    let data = vec![0x5au8; 4096];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let hot = nlb / 8;
    let mut cmds = Vec::new();
    for lba in 0..nlb - 64 {
        cmds.push((Client::write_cmd(lba, 1, Some(0)), data.clone()));
    }
    for _ in 0..nlb * 3 {
        let r = rnd();
        let (lba, pid) = if r % 10 < 9 {
            (rnd() % hot, u16::from(separate))
        } else {
            (hot + rnd() % (nlb - 64 - hot), 0)
        };
        cmds.push((Client::write_cmd(lba, 1, Some(pid)), data.clone()));
    }
    assert_eq!(q.pipeline(32, cmds).unwrap(), 0);
    fdp_waf(&mut a).2
}

#[test]
fn separating_temperatures_lowers_the_fdp_waf() {
    let one = two_temperatures(&start(small(2)), false);
    let two = two_temperatures(&start(small(2)), true);
    assert!(one > 1.2, "mixed WAF {one}");
    assert!(two < one * 0.9, "separate {two} vs mixed {one}");
}

/// Replays a fio iolog written by the target into a fresh model.
fn replay(trace: &Path, cfg: &DeviceConfig) -> f64 {
    use ftl_sim::workload::trace::{BlockTraceReader, Format, Kind};
    let mut ssd = ftl_sim::Ssd::new(cfg.sim_config().unwrap()).unwrap();
    let mut r = BlockTraceReader::open(trace, Format::Fio).unwrap();
    while let Some(rec) = r.next_record() {
        let rec = rec.unwrap();
        let (first, n) = rec.pages(4096);
        match rec.kind {
            Kind::Write => ssd.write_pages(first, n, rec.stream.unwrap_or(0)).unwrap(),
            Kind::Discard => ssd.trim(first, n).unwrap(),
            Kind::Read => {}
        }
    }
    ssd.stats().waf
}

#[test]
fn fdp_statistics_waf_equals_an_offline_replay_of_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = DeviceConfig {
        trace: Some(dir.path().join("trace.fio")),
        ..small(3)
    };
    let mut t = start(cfg.clone());
    let mut a = Client::admin(t.addr(), DEFAULT_NQN).unwrap();
    let mut q = a.io_queue(DEFAULT_NQN, 1).unwrap();
    let nlb = (64u64 << 20) / 4096;
    let mut x = 12345u64;
    let cmds = (0..nlb * 2).map(|i| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let lba = (x >> 20) % (nlb - 4);
        (
            Client::write_cmd(lba, 4, Some((i % 3) as u16)),
            vec![1u8; 16384],
        )
    });
    assert_eq!(q.pipeline(32, cmds).unwrap(), 0);
    let mut range = vec![0u8; 16];
    range[4..8].copy_from_slice(&256u32.to_le_bytes());
    let mut dsm = pdu::Sqe::new(0x09, 0, 1);
    dsm.set(11, 1 << 2);
    assert_eq!(q.exec(dsm, &range, 0).unwrap().status, 0);
    assert_eq!(q.exec(pdu::Sqe::new(0x00, 0, 1), &[], 0).unwrap().status, 0);
    let (host, _, waf) = fdp_waf(&mut a);
    assert_eq!(host, nlb * 2 * 16384);
    assert!(waf > 1.0);
    t.stop();
    let offline = replay(&dir.path().join("trace.fio"), &cfg);
    assert_eq!(waf, offline);
}

#[test]
fn a_backing_file_keeps_data_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = DeviceConfig {
        backing: Some(dir.path().join("ns.img")),
        ..small(2)
    };
    let d = pattern(42, 65536);
    {
        let t = start(cfg.clone());
        let a = Client::admin(t.addr(), DEFAULT_NQN).unwrap();
        let mut q = a.io_queue(DEFAULT_NQN, 1).unwrap();
        assert_eq!(q.write(77, &d, Some(1)).unwrap().status, 0);
    }
    let t = start(cfg);
    let a = Client::admin(t.addr(), DEFAULT_NQN).unwrap();
    let mut q = a.io_queue(DEFAULT_NQN, 1).unwrap();
    assert_eq!(q.read(77, 16).unwrap().data, d);
}

#[test]
fn io_queue_needs_a_known_controller_and_subsystem() {
    let t = start(small(2));
    let e = Client::connect(t.addr(), DEFAULT_NQN, 1, 999).unwrap_err();
    assert!(e.to_string().contains("connect failed"), "{e}");
    let e = Client::connect(t.addr(), "nqn.2026-01.example:other", 0, 0xffff).unwrap_err();
    assert!(e.to_string().contains("connect failed"), "{e}");
}

#[test]
fn header_and_data_digests_when_the_host_asks() {
    let t = start(small(2));
    let a = Client::connect_with(t.addr(), DEFAULT_NQN, 0, 0xffff, 3).unwrap();
    let mut a = a;
    // CC.EN, with the I/O queue entry sizes (64 and 16 bytes) it needs.
    assert_eq!(a.set_cc(1 | 6 << 16 | 4 << 20).unwrap().status, 0);
    let mut q = Client::connect_with(t.addr(), DEFAULT_NQN, 1, a.cntlid, 3).unwrap();
    let small_w = pattern(5, 4096); // in-capsule, data digest
    let big_w = pattern(6, 256 * 1024); // R2T + two H2CData, each with digests
    assert_eq!(q.write(1, &small_w, Some(1)).unwrap().status, 0);
    assert_eq!(q.write(64, &big_w, None).unwrap().status, 0);
    // The client checks the controller's header and data digests on every PDU.
    assert_eq!(q.read(1, 1).unwrap().data, small_w);
    assert_eq!(q.read(64, 64).unwrap().data, big_w);
    // A command whose header digest is wrong ends the connection (FES 3).
    let mut raw = Client::open_with(t.addr(), 1).unwrap();
    let mut bad = header(ty::CMD, HLEN_CMD, 0, HLEN_CMD as u32 + 4);
    bad[1] = pdu::flags::HDGST;
    bad.extend_from_slice(pdu::Sqe::new(0x06, 0, 0).as_bytes());
    bad.extend_from_slice(&0xdead_beefu32.to_le_bytes());
    let s = raw.socket();
    s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    s.write_all(&bad).unwrap();
    let mut back = Vec::new();
    let _ = s.read_to_end(&mut back);
    assert_eq!(term_fes(&back), Some(pdu::fes::HEADER_DIGEST));
}

#[test]
fn a_host_gone_mid_transfer_leaves_the_model_and_other_queues_alone() {
    let t = start(small(4));
    let a = Client::admin(t.addr(), DEFAULT_NQN).unwrap();
    let mut other = a.io_queue(DEFAULT_NQN, 1).unwrap();
    assert_eq!(
        other.write(0, &pattern(5, 8192), Some(1)).unwrap().status,
        0
    );
    let before = t.stats();
    {
        // A 64 KiB write to RUH 2: the target asks for the data (R2T), the
        // host sends half of it and disconnects.
        let mut q = a.io_queue(DEFAULT_NQN, 2).unwrap();
        let cid = q
            .submit(Client::write_cmd(64, 16, Some(2)), &pattern(6, 65536), 0)
            .unwrap();
        let s = q.socket();
        let mut r2t = [0u8; 24];
        s.read_exact(&mut r2t).unwrap();
        assert_eq!(r2t[0], ty::R2T);
        let mut half = DataHeader {
            hdr: pdu::header(ty::H2C_DATA, 0, HLEN_DATA, HLEN_DATA, HLEN_DATA + 32768),
            cid: U16::new(cid),
            ttag: U16::from_bytes([r2t[10], r2t[11]]),
            offset: U32::new(0),
            length: U32::new(32768),
            rsvd: [0; 4],
        }
        .as_bytes()
        .to_vec();
        half.extend_from_slice(&pattern(6, 32768));
        s.write_all(&half).unwrap();
        s.shutdown(std::net::Shutdown::Both).unwrap();
    }
    // The other queue keeps working, and the unfinished write was never
    // counted or placed.
    for i in 0..50u64 {
        let d = pattern(100 + i, 4096);
        assert_eq!(other.write(200 + i, &d, Some(3)).unwrap().status, 0);
        assert_eq!(other.read(200 + i, 1).unwrap().data, d);
    }
    let after = t.stats();
    assert_eq!(after.writes, before.writes + 50);
    assert_eq!(after.ruh_host_bytes[2], 0);
    assert_eq!(after.ruh_host_bytes[3], 50 * 4096);
}
