//! Hosts that misbehave, over real loopback TCP: sockets that never send
//! an ICReq or a Connect, PDUs left half sent, controllers whose host stops
//! sending keep alives, I/O queues whose controller went away, oversized
//! queues and data, commands before the controller is enabled. Each must
//! cost the target a bounded time and memory (a deadline closes the
//! connection) and never another host its service.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use nvme_target::client::Client;
use nvme_target::pdu::{self, Sqe};
use nvme_target::server::MAX_CONNECTIONS;
use nvme_target::{DeviceConfig, Running, Target, Timeouts, DEFAULT_NQN};
use zerocopy::IntoBytes;

fn small() -> DeviceConfig {
    DeviceConfig {
        capacity: 64 << 20,
        ruhs: 4,
        ru_size: 256 << 10,
        ..DeviceConfig::default()
    }
}

fn start_with(t: Timeouts) -> Running {
    Target::bind("127.0.0.1:0", small(), DEFAULT_NQN)
        .unwrap()
        .with_timeouts(t)
        .start()
        .unwrap()
}

/// Deadlines short enough for a test, and a grace of 0 after KATO (so a
/// controller with KATO k is deleted after 2k without a command).
fn short() -> Timeouts {
    Timeouts {
        icreq: Duration::from_millis(300),
        connect: Duration::from_millis(300),
        pdu: Duration::from_millis(300),
        send: Duration::from_secs(5),
        kato_grace: Duration::ZERO,
        tick: Duration::from_millis(20),
    }
}

/// How long until the target closes `s` (reads to EOF); None if it is
/// still open after `limit`.
fn closed_within(s: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    s.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Some(t0.elapsed()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::ConnectionReset) => {
                return Some(t0.elapsed())
            }
            Err(_) => return None,
        }
        if t0.elapsed() > limit {
            return None;
        }
    }
}

/// A write and its read back on a new controller.
fn session(t: &Running) -> std::io::Result<()> {
    let a = Client::admin(t.addr(), DEFAULT_NQN)?;
    let mut q = a.io_queue(DEFAULT_NQN, 1)?;
    let d = vec![0x5a; 8192];
    assert_eq!(q.write(8, &d, Some(1))?.status, 0);
    assert_eq!(q.read(8, 2)?.data, d);
    Ok(())
}

#[test]
fn sockets_that_never_send_an_icreq_are_closed_and_free_their_slots() {
    // The default deadlines: 10 s for the ICReq.
    let t = Target::bind("127.0.0.1:0", small(), DEFAULT_NQN)
        .unwrap()
        .start()
        .unwrap();
    let t0 = Instant::now();
    let mut idle: Vec<TcpStream> = (0..MAX_CONNECTIONS)
        .map(|_| TcpStream::connect(t.addr()).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    assert!(session(&t).is_err(), "every slot is taken");
    for s in &mut idle {
        let left = Duration::from_secs(25).saturating_sub(t0.elapsed());
        assert!(
            closed_within(s, left).is_some(),
            "an idle socket was still open after {:?}",
            t0.elapsed()
        );
    }
    assert!(t0.elapsed() >= Duration::from_secs(9), "{:?}", t0.elapsed());
    // Their threads are gone a moment after their sockets.
    let mut ok = session(&t);
    for _ in 0..50 {
        if ok.is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        ok = session(&t);
    }
    ok.unwrap();
}

#[test]
fn a_host_that_stalls_before_connect_or_mid_pdu_is_closed() {
    let t = start_with(short());
    // ICReq answered, no Connect.
    let mut c = Client::open(t.addr()).unwrap();
    let d = closed_within(c.socket(), Duration::from_secs(5)).expect("no Connect: closed");
    assert!(d >= Duration::from_millis(250), "{d:?}");
    // Connected, then half a command capsule.
    let mut a = Client::admin(t.addr(), DEFAULT_NQN).unwrap();
    let mut capsule = pdu::header(pdu::ty::CMD, 0, pdu::HLEN_CMD, 0, pdu::HLEN_CMD)
        .as_bytes()
        .to_vec();
    capsule.extend_from_slice(&[0u8; 20]);
    let s = a.socket();
    s.write_all(&capsule).unwrap();
    closed_within(s, Duration::from_secs(5)).expect("half a PDU: closed");
    // A connected queue with no keep alive timeout may idle: no deadline.
    let mut b = Client::admin(t.addr(), DEFAULT_NQN).unwrap();
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(b.identify(1, 0).unwrap().status, 0);
    session(&t).unwrap();
}

fn keep_alive(c: &mut Client) -> std::io::Result<u16> {
    Ok(c.exec(Sqe::new(0x18, 0, 0), &[], 0)?.status)
}

#[test]
fn keep_alive_timeout_deletes_the_controller_and_its_queues() {
    let t = start_with(short());
    // KATO 200 ms, then silence: after 2 × KATO both queues are closed.
    let mut quiet = Client::admin_with_kato(t.addr(), DEFAULT_NQN, 200).unwrap();
    let mut s = Sqe::new(0x0a, 0, 0);
    s.set(10, 0x0f);
    assert_eq!(
        quiet.exec(s, &[], 0).unwrap().result,
        200,
        "Get Features KATO"
    );
    let mut quiet_io = quiet.io_queue(DEFAULT_NQN, 1).unwrap();
    let cntlid = quiet.cntlid;
    // Kept alive by Keep Alive commands, or by I/O alone (traffic-based).
    let mut kept = Client::admin_with_kato(t.addr(), DEFAULT_NQN, 200).unwrap();
    let mut busy = Client::admin_with_kato(t.addr(), DEFAULT_NQN, 200).unwrap();
    let mut busy_io = busy.io_queue(DEFAULT_NQN, 1).unwrap();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(1200) {
        assert_eq!(keep_alive(&mut kept).unwrap(), 0);
        assert_eq!(busy_io.write(1, &[7u8; 4096], None).unwrap().status, 0);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(keep_alive(&mut quiet).is_err(), "admin queue closed");
    assert!(
        quiet_io.write(0, &[1u8; 4096], None).is_err(),
        "I/O queue closed"
    );
    let e = Client::connect(t.addr(), DEFAULT_NQN, 2, cntlid).unwrap_err();
    assert!(e.to_string().contains("connect failed"), "{e}");
    assert_eq!(keep_alive(&mut kept).unwrap(), 0);
    assert_eq!(keep_alive(&mut busy).unwrap(), 0);
    // KATO 0: no timeout.
    let mut forever = Client::admin_with_kato(t.addr(), DEFAULT_NQN, 0).unwrap();
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(keep_alive(&mut forever).unwrap(), 0);
}

#[test]
fn closing_the_admin_queue_tears_down_its_io_queues() {
    let t = start_with(short());
    let a = Client::admin(t.addr(), DEFAULT_NQN).unwrap();
    let mut q = a.io_queue(DEFAULT_NQN, 1).unwrap();
    assert_eq!(q.write(0, &[1u8; 4096], None).unwrap().status, 0);
    let cntlid = a.cntlid;
    drop(a);
    closed_within(q.socket(), Duration::from_secs(5)).expect("I/O queue closed");
    let e = Client::connect(t.addr(), DEFAULT_NQN, 2, cntlid).unwrap_err();
    assert!(e.to_string().contains("connect failed"), "{e}");
}

/// Sends `sqe` with a transport SGL of `len` bytes (data the target must
/// ask for) and returns the type of the first PDU that comes back and,
/// when it is a response, its status (SCT << 8 | SC, DNR).
fn first_answer(c: &mut Client, mut sqe: Sqe, cid: u16, len: u32) -> (u8, u16) {
    sqe.dw[0] = (sqe.dw[0].get() & 0xffff | u32::from(cid) << 16).into();
    sqe.set_sgl(len, false);
    let mut capsule = pdu::header(pdu::ty::CMD, 0, pdu::HLEN_CMD, 0, pdu::HLEN_CMD)
        .as_bytes()
        .to_vec();
    capsule.extend_from_slice(sqe.as_bytes());
    let s = c.socket();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&capsule).unwrap();
    let mut h = [0u8; 8];
    s.read_exact(&mut h).unwrap();
    let plen = u32::from_le_bytes(h[4..8].try_into().unwrap()) as usize;
    let mut rest = vec![0u8; plen - 8];
    s.read_exact(&mut rest).unwrap();
    let status = if h[0] == pdu::ty::RSP {
        u16::from_le_bytes([rest[14], rest[15]]) >> 1
    } else {
        0
    };
    (h[0], status)
}

#[test]
fn oversized_queues_and_data_are_refused_before_any_r2t() {
    let t = start_with(short());
    // SQSIZE above CAP.MQES (127), admin and I/O: Connect Invalid
    // Parameters, IATTR 0 / IPO 44 (the SQSIZE field).
    for qid in [0u16, 1] {
        let a = Client::admin(t.addr(), DEFAULT_NQN).unwrap();
        let mut c = Client::open(t.addr()).unwrap();
        let cntlid = if qid == 0 { 0xffff } else { a.cntlid };
        let r = c.send_connect(DEFAULT_NQN, qid, cntlid, 65535, 0).unwrap();
        assert_eq!((r.code(), r.result), (0x182, 44), "qid {qid}");
        let r = c.send_connect(DEFAULT_NQN, qid, cntlid, 128, 0).unwrap();
        assert_eq!(r.code(), 0x182, "qid {qid}");
        let r = c.send_connect(DEFAULT_NQN, qid, cntlid, 127, 0).unwrap();
        assert_eq!(r.status, 0, "qid {qid}");
    }
    // A Connect with 1 MiB of data: refused, not fetched.
    let mut c = Client::open(t.addr()).unwrap();
    let mut connect = Sqe::new(0x7f, 0, 1);
    connect.set(10, 0).set(11, 31);
    assert_eq!(
        first_answer(&mut c, connect, 1, 1 << 20),
        (pdu::ty::RSP, 0x00f | 0x4000)
    );
    let a = Client::admin(t.addr(), DEFAULT_NQN).unwrap();
    let mut q = a.io_queue(DEFAULT_NQN, 1).unwrap();
    // Compare (05h, not implemented) with 1 MiB of data: Invalid Opcode at once.
    assert_eq!(
        first_answer(&mut q, Sqe::new(0x05, 0, 1), 1, 1 << 20),
        (pdu::ty::RSP, 0x001 | 0x4000)
    );
    // Dataset Management takes at most 4 KiB (256 ranges).
    let mut dsm = Sqe::new(0x09, 0, 1);
    dsm.set(10, 0).set(11, 1 << 2);
    assert_eq!(
        first_answer(&mut q, dsm, 2, 64 << 10),
        (pdu::ty::RSP, 0x00f | 0x4000)
    );
    // 4 KiB is fine; a connection buffers at most 256 KiB of such data:
    // 64 DSMs are asked for their data, then the target answers Command
    // Interrupted (retry) until some complete.
    let answers: Vec<(u8, u16)> = (0..70)
        .map(|i| first_answer(&mut q, dsm, 10 + i, 4096))
        .collect();
    assert!(
        answers[..64].iter().all(|&a| a == (pdu::ty::R2T, 0)),
        "{answers:?}"
    );
    assert!(
        answers[64..].iter().all(|&a| a == (pdu::ty::RSP, 0x021)),
        "{answers:?}"
    );
    // Other hosts are served meanwhile.
    session(&t).unwrap();
}

#[test]
fn controller_state_is_enforced_as_nvmet_does() {
    const CC: u32 = 1 | 6 << 16 | 4 << 20; // EN, IOSQES 6, IOCQES 4
    const CSTS: u32 = 0x1c;
    let t = start_with(short());
    let mut a = Client::open(t.addr()).unwrap();
    assert_eq!(
        a.send_connect(DEFAULT_NQN, 0, 0xffff, 31, 0)
            .unwrap()
            .status,
        0
    );
    let cntlid = a.cntlid;
    // Before CC.EN: only Fabrics commands; I/O queues connect but their
    // commands fail with Command Sequence Error.
    assert_eq!(a.identify(1, 0).unwrap().code(), 0x00c);
    assert_eq!(a.get_prop(CSTS).unwrap(), 0);
    let mut q = Client::connect(t.addr(), DEFAULT_NQN, 1, cntlid).unwrap();
    assert_eq!(q.write(0, &[1u8; 4096], None).unwrap().code(), 0x00c);
    // Enabled without the I/O queue entry sizes: CSTS.CFS, still not ready.
    assert_eq!(a.set_cc(1).unwrap().status, 0);
    assert_eq!(a.get_prop(CSTS).unwrap(), 2);
    assert_eq!(a.identify(1, 0).unwrap().code(), 0x00c);
    // Disabled again (that tears its I/O queue down), then enabled right.
    assert_eq!(a.set_cc(0).unwrap().status, 0);
    closed_within(q.socket(), Duration::from_secs(5)).expect("queue 1 torn down");
    assert_eq!(a.set_cc(CC).unwrap().status, 0);
    assert_eq!(a.get_prop(CSTS).unwrap(), 1);
    assert_eq!(a.identify(1, 0).unwrap().status, 0);
    let mut q = Client::connect(t.addr(), DEFAULT_NQN, 1, cntlid).unwrap();
    assert_eq!(q.write(0, &[1u8; 4096], None).unwrap().status, 0);
    // A second I/O queue 1: refused (Command Sequence Error); queue 2 joins.
    let e = Client::connect(t.addr(), DEFAULT_NQN, 1, cntlid).unwrap_err();
    assert!(e.to_string().contains("status 0x400c"), "{e}");
    let mut q2 = Client::connect(t.addr(), DEFAULT_NQN, 2, cntlid).unwrap();
    // CC.EN 1 -> 0 (a reset): not ready, CC cleared, I/O queues torn down.
    assert_eq!(a.set_cc(0).unwrap().status, 0);
    assert_eq!(a.get_prop(CSTS).unwrap() & 1, 0);
    assert_eq!(a.get_prop(0x14).unwrap(), 0);
    assert_eq!(a.identify(1, 0).unwrap().code(), 0x00c);
    closed_within(q.socket(), Duration::from_secs(5)).expect("queue 1 torn down");
    closed_within(q2.socket(), Duration::from_secs(5)).expect("queue 2 torn down");
    // Enabled again, queue 1 may connect anew; a shutdown (CC.SHN) reports
    // itself complete and tears the I/O queues down too.
    assert_eq!(a.set_cc(CC).unwrap().status, 0);
    let mut q3 = Client::connect(t.addr(), DEFAULT_NQN, 1, cntlid).unwrap();
    assert_eq!(q3.write(1, &[2u8; 4096], None).unwrap().status, 0);
    assert_eq!(a.set_cc(CC | 1 << 14).unwrap().status, 0);
    assert_eq!(a.get_prop(CSTS).unwrap(), 2 << 2);
    closed_within(q3.socket(), Duration::from_secs(5)).expect("queue torn down by shutdown");
    assert_eq!(a.identify(1, 0).unwrap().code(), 0x00c);
    // Only the host's own queue went: others are served.
    session(&t).unwrap();
}
