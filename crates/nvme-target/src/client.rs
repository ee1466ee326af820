//! A small NVMe/TCP host: enough to connect an admin and I/O queues, run
//! admin and I/O commands (in-capsule or R2T-driven host data, C2HData
//! reads) one at a time or pipelined. The target's tests and bench drive
//! the target with it; it is not a general NVMe driver.

use std::collections::HashMap;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, IntoBytes};

use crate::controller::op;
use crate::pdu::{self, flags, ty, CommonHeader, Cqe, DataHeader, IcReq, IcResp, Sqe, HLEN_DATA};

/// Host NQN the client uses.
pub const HOST_NQN: &str = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-pcstreamtest";

/// One completed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// Command id.
    pub cid: u16,
    /// Status (SCT << 8 | SC, DNR 0x4000), 0 = success.
    pub status: u16,
    /// Completion dwords 0–1.
    pub result: u64,
    /// Data the controller sent.
    pub data: Vec<u8>,
}

impl Completion {
    /// Status without the DNR / more bits.
    pub fn code(&self) -> u16 {
        self.status & 0x7ff
    }
}

fn proto(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Host data of a command: owned, or shared by many commands (the bench
/// writes one buffer over and over without copying it per command).
#[derive(Debug, Clone)]
pub enum Payload {
    /// Owned bytes.
    Owned(Vec<u8>),
    /// Shared bytes.
    Shared(Arc<[u8]>),
}

impl Payload {
    fn bytes(&self) -> &[u8] {
        match self {
            Payload::Owned(v) => v,
            Payload::Shared(a) => a,
        }
    }
}

impl From<Vec<u8>> for Payload {
    fn from(v: Vec<u8>) -> Payload {
        Payload::Owned(v)
    }
}

impl From<Arc<[u8]>> for Payload {
    fn from(a: Arc<[u8]>) -> Payload {
        Payload::Shared(a)
    }
}

#[derive(Debug)]
struct Inflight {
    out: Payload,
    data: Vec<u8>,
}

/// One queue's connection.
#[derive(Debug)]
pub struct Client {
    rd: BufReader<TcpStream>,
    wr: BufWriter<TcpStream>,
    addr: SocketAddr,
    next_cid: u16,
    maxh2c: usize,
    inflight: HashMap<u16, Inflight>,
    /// Receive scratch buffer (reused for every PDU).
    scratch: Vec<u8>,
    /// Controller id (from Connect).
    pub cntlid: u16,
    hdgst: bool,
    ddgst: bool,
}

impl Client {
    /// Opens a TCP connection and exchanges ICReq/ICResp (no digests).
    pub fn open(addr: SocketAddr) -> io::Result<Client> {
        Client::open_with(addr, 0)
    }

    /// As [`Client::open`], asking for digests (bit 0 header, bit 1 data).
    pub fn open_with(addr: SocketAddr, digest: u8) -> io::Result<Client> {
        let s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        let mut c = Client {
            rd: BufReader::with_capacity(256 * 1024, s.try_clone()?),
            wr: BufWriter::with_capacity(256 * 1024, s),
            addr,
            next_cid: 0,
            maxh2c: 0,
            inflight: HashMap::new(),
            scratch: Vec::new(),
            cntlid: 0,
            hdgst: false,
            ddgst: false,
        };
        let req = IcReq {
            hdr: pdu::header(ty::IC_REQ, 0, pdu::HLEN_IC, 0, pdu::HLEN_IC),
            pfv: U16::new(0),
            hpda: 0,
            digest,
            maxr2t: U32::new(0),
            rsvd: [0; 112],
        };
        c.wr.write_all(req.as_bytes())?;
        c.wr.flush()?;
        let mut b = [0u8; 128];
        c.rd.read_exact(&mut b)?;
        let resp = IcResp::read_from_bytes(&b[..]).map_err(|_| proto("short ICResp".into()))?;
        if resp.hdr.pdu_type != ty::IC_RESP {
            return Err(proto(format!(
                "expected ICResp, got PDU type {}",
                resp.hdr.pdu_type
            )));
        }
        c.maxh2c = resp.maxh2cdata.get() as usize;
        c.hdgst = resp.digest & 1 != 0;
        c.ddgst = resp.digest & 2 != 0;
        Ok(c)
    }

    /// Connects queue `qid` of controller `cntlid` (0xffff: a new one on the admin queue).
    pub fn connect(addr: SocketAddr, subnqn: &str, qid: u16, cntlid: u16) -> io::Result<Client> {
        Client::connect_with(addr, subnqn, qid, cntlid, 0)
    }

    /// As [`Client::connect`], asking for digests (bit 0 header, bit 1 data).
    pub fn connect_with(
        addr: SocketAddr,
        subnqn: &str,
        qid: u16,
        cntlid: u16,
        digest: u8,
    ) -> io::Result<Client> {
        let mut c = Client::open_with(addr, digest)?;
        let r = c.send_connect(subnqn, qid, cntlid, 127, 0)?;
        if r.status != 0 {
            return Err(proto(format!("connect failed: status {:#x}", r.status)));
        }
        Ok(c)
    }

    /// Sends a Fabrics Connect for queue `qid` of controller `cntlid`
    /// (0xffff: a new one) with submission queue size `sqsize` (0-based)
    /// and keep alive timeout `kato_ms`, and returns its completion; the
    /// client is connected when its status is 0.
    pub fn send_connect(
        &mut self,
        subnqn: &str,
        qid: u16,
        cntlid: u16,
        sqsize: u16,
        kato_ms: u32,
    ) -> io::Result<Completion> {
        let mut data = vec![0u8; 1024];
        data[16..18].copy_from_slice(&cntlid.to_le_bytes());
        data[256..256 + subnqn.len()].copy_from_slice(subnqn.as_bytes());
        data[512..512 + HOST_NQN.len()].copy_from_slice(HOST_NQN.as_bytes());
        let mut sqe = Sqe::new(op::FABRICS, 0, u32::from(op::FCTYPE_CONNECT));
        sqe.set(10, u32::from(qid) << 16)
            .set(11, u32::from(sqsize))
            .set(12, kato_ms);
        let r = self.exec(sqe, &data, 0)?;
        if r.status == 0 {
            self.cntlid = r.result as u16;
        }
        Ok(r)
    }

    /// A new controller's admin queue, enabled (CC.EN = 1).
    pub fn admin(addr: SocketAddr, subnqn: &str) -> io::Result<Client> {
        Client::admin_with_kato(addr, subnqn, 0)
    }

    /// As [`Client::admin`], with keep alive timeout `kato_ms` (0: none).
    pub fn admin_with_kato(addr: SocketAddr, subnqn: &str, kato_ms: u32) -> io::Result<Client> {
        let mut c = Client::open(addr)?;
        let r = c.send_connect(subnqn, 0, 0xffff, 31, kato_ms)?;
        if r.status != 0 {
            return Err(proto(format!("connect failed: status {:#x}", r.status)));
        }
        let r = c.set_cc(1 | (6 << 16) | (4 << 20))?;
        if r.status != 0 {
            return Err(proto(format!("CC.EN failed: status {:#x}", r.status)));
        }
        Ok(c)
    }

    /// Property Set of CC (the controller configuration: enable, shutdown).
    pub fn set_cc(&mut self, cc: u32) -> io::Result<Completion> {
        let mut sqe = Sqe::new(op::FABRICS, 0, u32::from(op::FCTYPE_PROP_SET));
        sqe.set(10, 0).set(11, 0x14).set(12, cc);
        self.exec(sqe, &[], 0)
    }

    /// Property Get of a 4-byte register (0x1c: CSTS).
    pub fn get_prop(&mut self, offset: u32) -> io::Result<u64> {
        let mut sqe = Sqe::new(op::FABRICS, 0, u32::from(op::FCTYPE_PROP_GET));
        sqe.set(10, 0).set(11, offset);
        Ok(self.exec(sqe, &[], 0)?.result)
    }

    /// I/O queue `qid` of this admin queue's controller.
    pub fn io_queue(&self, subnqn: &str, qid: u16) -> io::Result<Client> {
        Client::connect(self.addr, subnqn, qid, self.cntlid)
    }

    /// The raw socket, after sending what is buffered (tests send malformed
    /// PDUs through it).
    pub fn socket(&mut self) -> &mut TcpStream {
        let _ = self.wr.flush();
        self.wr.get_mut()
    }

    /// Sends a command without waiting; host data goes in the capsule when
    /// it fits 8 KiB, else on R2T. Returns the command id.
    pub fn submit(&mut self, sqe: Sqe, out: &[u8], in_len: usize) -> io::Result<u16> {
        self.submit_owned(sqe, out.to_vec(), in_len)
    }

    /// As [`Client::submit`], taking the data by value (no copy for R2T data).
    pub fn submit_owned(
        &mut self,
        mut sqe: Sqe,
        out: impl Into<Payload>,
        in_len: usize,
    ) -> io::Result<u16> {
        let out = out.into();
        let cid = self.next_cid;
        self.next_cid = self.next_cid.wrapping_add(1);
        sqe.dw[0] = U32::new((sqe.dw[0].get() & 0xffff) | u32::from(cid) << 16);
        let n = out.bytes().len();
        let in_capsule = n != 0 && n <= 8192;
        let len = if n == 0 { in_len } else { n };
        sqe.set_sgl(len as u32, in_capsule);
        let data: &[u8] = if in_capsule { out.bytes() } else { &[] };
        self.send(ty::CMD, 0, sqe.as_bytes(), data)?;
        self.inflight.insert(
            cid,
            Inflight {
                out: if in_capsule {
                    Payload::Owned(Vec::new())
                } else {
                    out
                },
                data: Vec::new(),
            },
        );
        Ok(cid)
    }

    /// Sends one PDU: common header, `body` (rest of the header), digests
    /// as negotiated, `data`.
    fn send(&mut self, t: u8, fl: u8, body: &[u8], data: &[u8]) -> io::Result<()> {
        let hlen = 8 + body.len();
        let hd = if self.hdgst { 4 } else { 0 };
        let dd = if self.ddgst && !data.is_empty() { 4 } else { 0 };
        let mut fl = fl;
        if self.hdgst {
            fl |= flags::HDGST;
        }
        if dd != 0 {
            fl |= flags::DDGST;
        }
        let (pdo, plen) = if data.is_empty() {
            (0, hlen + hd)
        } else {
            (hlen + hd, hlen + hd + data.len() + dd)
        };
        let mut head = [0u8; 8 + 64];
        head[..8].copy_from_slice(pdu::header(t, fl, hlen, pdo, plen).as_bytes());
        head[8..hlen].copy_from_slice(body);
        let head = &head[..hlen];
        self.wr.write_all(head)?;
        if self.hdgst {
            self.wr.write_all(&pdu::digest(head).to_le_bytes())?;
        }
        self.wr.write_all(data)?;
        if dd != 0 {
            self.wr.write_all(&pdu::digest(data).to_le_bytes())?;
        }
        Ok(())
    }

    /// Reads PDUs (answering R2Ts) until one command completes.
    /// Commands submitted since the last call stay buffered until this
    /// would block on the socket, so a pipelining caller sends them in
    /// batches (one write for many capsules).
    pub fn poll(&mut self) -> io::Result<Completion> {
        loop {
            if self.rd.buffer().len() < 8 {
                self.wr.flush()?;
            }
            let mut hb = [0u8; 8];
            self.rd.read_exact(&mut hb)?;
            let h = CommonHeader::read_from_bytes(&hb[..]).map_err(|_| proto("header".into()))?;
            let plen = h.plen.get() as usize;
            if !(8..=(4 << 20)).contains(&plen) {
                return Err(proto(format!("PDU length {plen}")));
            }
            let mut pdu = std::mem::take(&mut self.scratch);
            pdu.clear();
            pdu.extend_from_slice(&hb);
            pdu.resize(plen, 0);
            if self.rd.buffer().len() < plen - 8 {
                self.wr.flush()?;
            }
            let r = self
                .rd
                .read_exact(&mut pdu[8..])
                .and_then(|()| self.on_pdu(&h, &pdu));
            self.scratch = pdu;
            if let Some(c) = r? {
                return Ok(c);
            }
        }
    }

    /// Handles one received PDU; a completion when it completes a command.
    fn on_pdu(&mut self, h: &CommonHeader, pdu: &[u8]) -> io::Result<Option<Completion>> {
        {
            let hlen = usize::from(h.hlen);
            if self.hdgst && h.pdu_type != ty::C2H_TERM {
                let got = pdu
                    .get(hlen..hlen + 4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                if got != Some(pdu::digest(&pdu[..hlen.min(pdu.len())])) {
                    return Err(proto(format!(
                        "header digest mismatch on PDU type {:#x}",
                        h.pdu_type
                    )));
                }
            }
            match h.pdu_type {
                ty::RSP => {
                    let cqe = Cqe::read_from_bytes(&pdu[8..24]).map_err(|_| proto("CQE".into()))?;
                    let cid = cqe.cid.get();
                    let f = self
                        .inflight
                        .remove(&cid)
                        .map(|f| f.data)
                        .unwrap_or_default();
                    return Ok(Some(Completion {
                        cid,
                        status: cqe.status.get() >> 1,
                        result: cqe.result.get(),
                        data: f,
                    }));
                }
                ty::C2H_DATA => {
                    let d = DataHeader::read_from_bytes(&pdu[..HLEN_DATA])
                        .map_err(|_| proto("C2H".into()))?;
                    let pdo = usize::from(h.pdo);
                    let n = d.length.get() as usize;
                    if pdo + n > pdu.len() {
                        return Err(proto("C2HData length".into()));
                    }
                    if self.ddgst {
                        let got = pdu
                            .get(pdo + n..pdo + n + 4)
                            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                        if got != Some(pdu::digest(&pdu[pdo..pdo + n])) {
                            return Err(proto("C2HData data digest mismatch".into()));
                        }
                    }
                    let f = self.inflight.get_mut(&d.cid.get()).ok_or_else(|| {
                        proto(format!("C2HData for unknown command {}", d.cid.get()))
                    })?;
                    let off = d.offset.get() as usize;
                    if f.data.len() < off + n {
                        f.data.resize(off + n, 0);
                    }
                    f.data[off..off + n].copy_from_slice(&pdu[pdo..pdo + n]);
                }
                ty::R2T => {
                    let d = DataHeader::read_from_bytes(&pdu[..HLEN_DATA])
                        .map_err(|_| proto("R2T".into()))?;
                    let cid = d.cid.get();
                    let out = self
                        .inflight
                        .get_mut(&cid)
                        .map(|f| std::mem::replace(&mut f.out, Payload::Owned(Vec::new())))
                        .ok_or_else(|| proto(format!("R2T for unknown command {cid}")))?;
                    let (mut off, end) = (
                        d.offset.get() as usize,
                        (d.offset.get() + d.length.get()) as usize,
                    );
                    if end > out.bytes().len() {
                        return Err(proto("R2T beyond the data".into()));
                    }
                    while off < end {
                        let n = (end - off).min(self.maxh2c);
                        let last = if off + n == end { flags::DATA_LAST } else { 0 };
                        let hdr = DataHeader {
                            hdr: pdu::header(0, 0, 0, 0, 0),
                            cid: U16::new(cid),
                            ttag: d.ttag,
                            offset: U32::new(off as u32),
                            length: U32::new(n as u32),
                            rsvd: [0; 4],
                        };
                        self.send(
                            ty::H2C_DATA,
                            last,
                            &hdr.as_bytes()[8..],
                            &out.bytes()[off..off + n],
                        )?;
                        off += n;
                    }
                }
                ty::C2H_TERM => {
                    let fes = u16::from_le_bytes([pdu[8], pdu[9]]);
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        format!("controller terminated the connection (FES {fes:#x})"),
                    ));
                }
                t => return Err(proto(format!("unexpected PDU type {t:#x}"))),
            }
        }
        Ok(None)
    }

    /// Runs one command to completion.
    pub fn exec(&mut self, sqe: Sqe, out: &[u8], in_len: usize) -> io::Result<Completion> {
        let cid = self.submit(sqe, out, in_len)?;
        let c = self.poll()?;
        if c.cid != cid {
            return Err(proto(format!(
                "completion for {} while waiting for {cid}",
                c.cid
            )));
        }
        Ok(c)
    }

    /// Runs every command of `cmds` keeping up to `depth` in flight; returns
    /// how many failed.
    pub fn pipeline<D: Into<Payload>>(
        &mut self,
        depth: usize,
        cmds: impl IntoIterator<Item = (Sqe, D)>,
    ) -> io::Result<u64> {
        let mut failed = 0;
        let mut n = 0usize;
        for (sqe, out) in cmds {
            if n == depth {
                failed += u64::from(self.poll()?.status != 0);
                n -= 1;
            }
            self.submit_owned(sqe, out, 0)?;
            n += 1;
        }
        while n > 0 {
            failed += u64::from(self.poll()?.status != 0);
            n -= 1;
        }
        Ok(failed)
    }

    /// A Write of `data` at `slba` on namespace 1, placed by FDP placement id `pid`.
    pub fn write_cmd(slba: u64, blocks: u32, pid: Option<u16>) -> Sqe {
        let mut s = Sqe::new(op::WRITE, 0, 1);
        let dtype = if pid.is_some() { 2u32 << 20 } else { 0 };
        s.set(10, slba as u32)
            .set(11, (slba >> 32) as u32)
            .set(12, (blocks - 1) | dtype)
            .set(13, u32::from(pid.unwrap_or(0)) << 16);
        s
    }

    /// Writes `data` (whole 4 KiB blocks) at `slba`.
    pub fn write(&mut self, slba: u64, data: &[u8], pid: Option<u16>) -> io::Result<Completion> {
        self.exec(
            Client::write_cmd(slba, (data.len() / 4096) as u32, pid),
            data,
            0,
        )
    }

    /// Reads `blocks` blocks at `slba`.
    pub fn read(&mut self, slba: u64, blocks: u32) -> io::Result<Completion> {
        let mut s = Sqe::new(op::READ, 0, 1);
        s.set(10, slba as u32)
            .set(11, (slba >> 32) as u32)
            .set(12, blocks - 1);
        self.exec(s, &[], blocks as usize * 4096)
    }

    /// Get Log Page `lid` with log-specific id `lsi`, `len` bytes.
    pub fn get_log(&mut self, lid: u8, lsi: u16, len: usize) -> io::Result<Completion> {
        let numd = (len / 4 - 1) as u32;
        let mut s = Sqe::new(op::GET_LOG_PAGE, 0, 0xffff_ffff);
        s.set(10, u32::from(lid) | (numd & 0xffff) << 16)
            .set(11, (numd >> 16) | u32::from(lsi) << 16);
        self.exec(s, &[], len)
    }

    /// Identify with `cns` for namespace `nsid`.
    pub fn identify(&mut self, cns: u8, nsid: u32) -> io::Result<Completion> {
        let mut s = Sqe::new(op::IDENTIFY, 0, nsid);
        s.set(10, u32::from(cns));
        self.exec(s, &[], 4096)
    }
}
