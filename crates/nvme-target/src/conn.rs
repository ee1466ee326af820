//! One NVMe/TCP connection (= one queue): ICReq/ICResp, command capsules
//! with in-capsule data, R2T / H2CData for larger host data, C2HData for
//! controller data, response capsules, digests when the host asks. A PDU
//! that breaks the protocol ends this connection with a C2HTermReq naming
//! the error; other connections and the target carry on.
//!
//! The data path is hand-written for speed: PDUs are decoded in place from
//! a receive buffer that one large read fills with many of them; write data
//! (in-capsule or H2CData) goes from there straight into the store (a Write
//! that needs R2T is checked before its data is asked for), so the only
//! user-space copy is into the store and only the model step takes the
//! device lock. Responses are buffered and flushed only when the
//! connection would block, so a host that pipelines commands gets its
//! completions batched.

use std::collections::HashMap;
use std::io::{self, BufWriter, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, IntoBytes};

use crate::controller::{host_to_ctrl, sc, Closer, Queue, Reply, Shared, WritePlan};
use crate::pdu::{
    self, check_header, flags, ty, CommonHeader, Cqe, DataHeader, Frame, IcReq, IcResp, Limits,
    PduError, Sqe, TermHeader, HLEN_DATA, HLEN_RSP, HLEN_TERM, SGL_IN_CAPSULE, SGL_TRANSPORT,
};
use crate::timeouts::{Clock, Timeouts};

/// Largest C2HData payload sent in one PDU.
const C2H_CHUNK: usize = 128 * 1024;

/// Receive buffer: holds at least one whole PDU, read from the socket in
/// large chunks; PDUs are decoded in place.
const RX_BUF: usize = 512 * 1024;
/// Below this much room at the end, the unread bytes move to the front.
const RX_ROOM: usize = 64 * 1024;
/// Most host data of commands other than Write a connection holds while
/// their R2T transfers run (Write data goes straight to the store); past
/// it a command is answered Command Interrupted, to be retried. Linux
/// sends such data in the capsule, so only a misbehaving host meets it.
pub const MAX_BUFFERED: usize = 256 * 1024;

/// A transfer waiting for its H2CData.
#[derive(Debug)]
struct Pending {
    sqe: Sqe,
    want: usize,
    got: usize,
    /// Where the data goes.
    sink: Sink,
}

#[derive(Debug)]
enum Sink {
    /// A checked Write: straight into the store, then placed.
    Store(WritePlan, io::Result<()>),
    /// Anything else: collected, then executed.
    Buffer(Vec<u8>),
}

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    /// The host broke the protocol (a terminate request was sent).
    #[error("protocol error: {0}")]
    Protocol(#[from] PduError),
    /// The socket failed or closed mid-PDU.
    #[error("socket: {0}")]
    Io(#[from] io::Error),
    /// The host missed a deadline ([`Timeouts`]).
    #[error("timed out: {0}")]
    Timeout(String),
    /// The queue's controller tore it down (the controller was deleted or
    /// disabled).
    #[error("torn down by controller {0}")]
    TornDown(u16),
}

/// The socket's receive side: a buffer PDUs are decoded from in place.
#[derive(Debug)]
struct Rx {
    sock: Arc<TcpStream>,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl Rx {
    fn avail(&self) -> usize {
        self.end - self.start
    }

    fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// One read from the socket, with room for `want` unread bytes in the
    /// buffer (`want` ≤ its size). Returns the bytes read (0: end of stream).
    fn fill(&mut self, want: usize) -> io::Result<usize> {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        } else if self.buf.len() - self.start < want || self.buf.len() - self.end < RX_ROOM {
            self.buf.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
        }
        loop {
            match (&*self.sock).read(&mut self.buf[self.end..]) {
                Ok(n) => {
                    self.end += n;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// The per-connection state machine.
#[derive(Debug)]
pub struct Connection {
    rx: Rx,
    st: State,
    clock: Clock,
}

/// Everything but the receive buffer (so handlers can borrow a PDU from it).
#[derive(Debug)]
struct State {
    shared: Arc<Shared>,
    lim: Limits,
    wr: BufWriter<TcpStream>,
    hdgst: bool,
    ddgst: bool,
    queue: Queue,
    pending: HashMap<u16, Pending>,
    /// Bytes of [`Sink::Buffer`]s reserved (≤ [`MAX_BUFFERED`]).
    buffered: usize,
    /// Start of the PDU that ended the connection (echoed in C2HTermReq).
    echo: Vec<u8>,
}

impl Connection {
    /// Wraps an accepted socket.
    pub fn new(
        shared: Arc<Shared>,
        stream: TcpStream,
        lim: Limits,
        timeouts: Timeouts,
    ) -> io::Result<Connection> {
        stream.set_nodelay(true)?;
        // Reads wake every tick to check the deadlines; a send that makes
        // no progress for `send` fails.
        stream.set_read_timeout(Some(timeouts.tick.max(std::time::Duration::from_millis(1))))?;
        stream.set_write_timeout(Some(timeouts.send.max(std::time::Duration::from_millis(1))))?;
        let rx_sock = Arc::new(stream.try_clone()?);
        let closer = {
            let s = rx_sock.clone();
            Closer(Arc::new(move || {
                let _ = s.shutdown(Shutdown::Both);
            }))
        };
        Ok(Connection {
            clock: Clock::new(timeouts),
            rx: Rx {
                sock: rx_sock,
                // Room for the largest PDU the limits let through, and more.
                buf: vec![0u8; RX_BUF.max(2 * lim.max_h2c.max(lim.in_capsule) as usize)]
                    .into_boxed_slice(),
                start: 0,
                end: 0,
            },
            st: State {
                shared,
                lim,
                wr: BufWriter::with_capacity(256 * 1024, stream),
                hdgst: false,
                ddgst: false,
                queue: Queue::new(Some(closer)),
                pending: HashMap::new(),
                buffered: 0,
                echo: Vec::new(),
            },
        })
    }

    /// Serves the connection until the host closes it or breaks the protocol.
    pub fn run(mut self) -> Result<(), ConnError> {
        let r = self.serve();
        let st = &mut self.st;
        if let Err(ConnError::Protocol(e)) = &r {
            let _ = st.terminate(e);
        }
        let _ = st.wr.flush();
        st.queue.close(&st.shared);
        r
    }

    /// Makes `want` bytes readable, flushing responses before blocking.
    /// False: the host closed the connection with nothing unread. Checks
    /// the deadlines after every read and every tick without one.
    fn need(&mut self, want: usize) -> Result<bool, ConnError> {
        while self.rx.avail() < want {
            if self.rx.avail() > 0 {
                self.clock.pdu_begun();
            }
            self.st.wr.flush()?;
            match self.rx.fill(want) {
                Ok(0) => {
                    if self.st.queue.torn_down() {
                        return Err(ConnError::TornDown(self.st.cntlid()));
                    }
                    if self.rx.avail() == 0 {
                        return Ok(false);
                    }
                    return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
                }
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => return Err(e.into()),
            }
            if self.st.queue.torn_down() {
                return Err(ConnError::TornDown(self.st.cntlid()));
            }
            let q = &self.st.queue;
            self.clock
                .check(q.ctrl.as_deref(), q.qid == 0)
                .map_err(ConnError::Timeout)?;
        }
        Ok(true)
    }

    fn serve(&mut self) -> Result<(), ConnError> {
        loop {
            if !self.need(8)? {
                return Ok(()); // orderly close between PDUs
            }
            let hb = &self.rx.data()[..8];
            let h = CommonHeader::read_from_bytes(hb).map_err(|_| PduError::BadType(hb[0]))?;
            let checked =
                check_header(&h, &self.st.lim, self.st.hdgst, self.st.ddgst).and_then(|f| {
                    if (f.ty == ty::IC_REQ) == self.clock.initialized() {
                        Err(PduError::Sequence(f.ty))
                    } else {
                        Ok(f)
                    }
                });
            let f = match checked {
                Ok(f) => f,
                Err(e) => {
                    self.st.echo = self.rx.data()[..self.rx.avail().min(pdu::HLEN_CMD)].to_vec();
                    return Err(e.into());
                }
            };
            // The PDU is bounded by check_header's limits (≤ RX_BUF).
            if !self.need(f.plen)? {
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
            }
            let at = self.rx.start;
            let pdu = &self.rx.buf[at..at + f.plen];
            let r = self.st.pdu(pdu, &f);
            if r.is_err() {
                self.st.echo = pdu[..f.plen.min(pdu::HLEN_CMD)].to_vec();
            }
            self.rx.start += f.plen;
            self.clock.pdu_done();
            match r? {
                Flow::Go if f.ty == ty::IC_REQ => self.clock.ic_done(),
                Flow::Go => {}
                Flow::Close => return Ok(()),
            }
        }
    }
}

/// What the connection does after a PDU.
enum Flow {
    Go,
    Close,
}

impl State {
    fn cntlid(&self) -> u16 {
        self.queue.ctrl.as_ref().map_or(0, |c| c.id.cntlid)
    }

    /// Checks the digests and dispatches one whole PDU.
    fn pdu(&mut self, pdu: &[u8], f: &Frame) -> Result<Flow, ConnError> {
        if self.hdgst && f.ty != ty::IC_REQ && f.ty != ty::H2C_TERM {
            let want = pdu::digest(&pdu[..f.hlen]);
            let got = u32::from_le_bytes(pdu[f.hlen..f.hlen + 4].try_into().unwrap_or_default());
            if want != got {
                return Err(PduError::HeaderDigest.into());
            }
        }
        if self.ddgst && f.data_len > 0 && f.ty != ty::H2C_TERM {
            let d = &pdu[f.pdo..f.pdo + f.data_len];
            let got = u32::from_le_bytes(pdu[f.plen - 4..].try_into().unwrap_or_default());
            if pdu::digest(d) != got {
                return Err(PduError::DataDigest.into());
            }
        }
        let data = &pdu[f.pdo..f.pdo + f.data_len];
        match f.ty {
            ty::IC_REQ => self.ic_req(pdu)?,
            ty::CMD => self.command(pdu, data)?,
            ty::H2C_DATA => self.h2c_data(pdu, data, f.flags)?,
            ty::H2C_TERM => return Ok(Flow::Close),
            t => return Err(PduError::BadType(t).into()),
        }
        Ok(Flow::Go)
    }

    fn ic_req(&mut self, pdu: &[u8]) -> Result<(), ConnError> {
        let req = IcReq::read_from_bytes(pdu).map_err(|_| PduError::BadType(0))?;
        if req.pfv.get() != 0 {
            return Err(
                PduError::Unsupported(format!("PDU format version {}", req.pfv.get())).into(),
            );
        }
        if req.hpda != 0 {
            return Err(
                PduError::Unsupported(format!("host PDU data alignment {}", req.hpda)).into(),
            );
        }
        self.hdgst = req.digest & 1 != 0;
        self.ddgst = req.digest & 2 != 0;
        tracing::info!(
            header_digest = self.hdgst,
            data_digest = self.ddgst,
            "transport initialized"
        );
        let resp = IcResp {
            hdr: pdu::header(ty::IC_RESP, 0, pdu::HLEN_IC, 0, pdu::HLEN_IC),
            pfv: U16::new(0),
            cpda: 0,
            digest: req.digest & 3,
            maxh2cdata: U32::new(self.lim.max_h2c),
            rsvd: [0; 112],
        };
        self.wr.write_all(resp.as_bytes())?;
        Ok(())
    }

    fn command(&mut self, pdu: &[u8], data: &[u8]) -> Result<(), ConnError> {
        let sqe = Sqe::read_from_bytes(&pdu[8..72]).map_err(|_| PduError::BadType(ty::CMD))?;
        if let Some(c) = &self.queue.ctrl {
            c.touch();
        }
        let len = sqe.sgl_len() as usize;
        if !host_to_ctrl(&sqe) || len == 0 {
            if !data.is_empty() {
                return Err(PduError::DataRange(format!(
                    "command {} carries data it does not take",
                    sqe.cid()
                ))
                .into());
            }
            return self.finish(&sqe, &[]);
        }
        if len > self.lim.max_transfer as usize {
            return self.respond(
                sqe.cid(),
                &Reply {
                    status: sc::SGL_LENGTH | sc::DNR,
                    ..Reply::default()
                },
            );
        }
        match sqe.sgl_type() {
            SGL_IN_CAPSULE => {
                if data.len() != len {
                    return Err(PduError::DataRange(format!(
                        "command {}: {} bytes in the capsule, SGL says {len}",
                        sqe.cid(),
                        data.len()
                    ))
                    .into());
                }
                self.finish(&sqe, data)
            }
            SGL_TRANSPORT if data.is_empty() => {
                let cid = sqe.cid();
                if self.pending.contains_key(&cid)
                    || self.pending.len() > usize::from(self.queue.sqsize).max(1)
                {
                    return Err(PduError::Sequence(ty::CMD).into());
                }
                // Nothing is asked for or buffered for a command that
                // cannot run or takes less data.
                if let Err(reply) = self.queue.admit(&sqe, len) {
                    return self.respond(cid, &reply);
                }
                let sink = match self.queue.plan_write(&self.shared, &sqe) {
                    Some(Ok(plan)) => Sink::Store(plan, Ok(())),
                    Some(Err(reply)) => return self.respond(cid, &reply),
                    // admit bounds len by the command (≤ 4 KiB), this the total.
                    None if self.buffered + len > MAX_BUFFERED => {
                        return self.respond(
                            cid,
                            &Reply {
                                status: sc::CMD_INTERRUPTED,
                                ..Reply::default()
                            },
                        );
                    }
                    None => {
                        self.buffered += len;
                        Sink::Buffer(Vec::with_capacity(len))
                    }
                };
                self.pending.insert(
                    cid,
                    Pending {
                        sqe,
                        want: len,
                        got: 0,
                        sink,
                    },
                );
                self.send_data_header(ty::R2T, 0, cid, 0, len as u32)?;
                Ok(())
            }
            t => self.respond(
                sqe.cid(),
                &Reply {
                    status: if t == SGL_IN_CAPSULE || t == SGL_TRANSPORT {
                        sc::SGL_LENGTH
                    } else {
                        0x011
                    } | sc::DNR,
                    ..Reply::default()
                },
            ),
        }
    }

    fn h2c_data(&mut self, pdu: &[u8], data: &[u8], fl: u8) -> Result<(), ConnError> {
        let h = DataHeader::read_from_bytes(&pdu[..HLEN_DATA])
            .map_err(|_| PduError::BadType(ty::H2C_DATA))?;
        let ttag = h.ttag.get();
        let Some(p) = self.pending.get_mut(&ttag) else {
            return Err(PduError::DataRange(format!("no transfer with tag {ttag}")).into());
        };
        let off = h.offset.get() as usize;
        if h.cid.get() != p.sqe.cid()
            || off != p.got
            || h.length.get() as usize != data.len()
            || off + data.len() > p.want
        {
            return Err(PduError::DataRange(format!(
                "tag {ttag}: {} bytes at {off}, expected at {} of {}",
                data.len(),
                p.got,
                p.want
            ))
            .into());
        }
        match &mut p.sink {
            Sink::Store(plan, result) => {
                if result.is_ok() {
                    *result = self
                        .shared
                        .store
                        .write_at(plan.byte_offset() + off as u64, data);
                }
            }
            Sink::Buffer(buf) => buf.extend_from_slice(data),
        }
        p.got += data.len();
        if p.got == p.want {
            if fl & flags::DATA_LAST == 0 {
                return Err(PduError::DataRange(format!(
                    "tag {ttag}: last PDU without the LAST flag"
                ))
                .into());
            }
            if let Some(p) = self.pending.remove(&ttag) {
                match p.sink {
                    Sink::Store(plan, Ok(())) => {
                        let reply = self.queue.commit_write(&self.shared, &plan);
                        self.respond(p.sqe.cid(), &reply)?;
                    }
                    Sink::Store(_, Err(e)) => {
                        tracing::warn!("I/O failed: {e}");
                        let reply = Reply {
                            status: sc::INTERNAL | sc::DNR,
                            ..Reply::default()
                        };
                        self.respond(p.sqe.cid(), &reply)?;
                    }
                    Sink::Buffer(buf) => {
                        self.buffered -= p.want;
                        self.finish(&p.sqe, &buf)?
                    }
                }
            }
        }
        Ok(())
    }

    fn finish(&mut self, sqe: &Sqe, data: &[u8]) -> Result<(), ConnError> {
        let reply = self.queue.execute(&self.shared, sqe, data);
        if reply.deferred {
            return Ok(());
        }
        if reply.status & 0x3fff == 0 && !reply.data.is_empty() {
            let len = (sqe.sgl_len() as usize).min(reply.data.len());
            let mut off = 0;
            while off < len {
                let n = (len - off).min(C2H_CHUNK);
                let last = if off + n == len { flags::DATA_LAST } else { 0 };
                let chunk = &reply.data[off..off + n];
                self.send_data_pdu(sqe.cid(), off as u32, chunk, last)?;
                off += n;
            }
        }
        self.respond(sqe.cid(), &reply)
    }

    fn hd_len(&self) -> usize {
        if self.hdgst {
            4
        } else {
            0
        }
    }

    fn send_header(&mut self, hdr: &[u8]) -> io::Result<()> {
        self.wr.write_all(hdr)?;
        if self.hdgst {
            self.wr.write_all(&pdu::digest(hdr).to_le_bytes())?;
        }
        Ok(())
    }

    fn send_data_header(
        &mut self,
        t: u8,
        fl: u8,
        cid: u16,
        offset: u32,
        length: u32,
    ) -> io::Result<()> {
        let hd = self.hd_len();
        let h = DataHeader {
            hdr: pdu::header(
                t,
                fl | if self.hdgst { flags::HDGST } else { 0 },
                HLEN_DATA,
                0,
                HLEN_DATA + hd,
            ),
            cid: U16::new(cid),
            ttag: U16::new(cid),
            offset: U32::new(offset),
            length: U32::new(length),
            rsvd: [0; 4],
        };
        self.send_header(h.as_bytes())
    }

    fn send_data_pdu(&mut self, cid: u16, offset: u32, data: &[u8], last: u8) -> io::Result<()> {
        let hd = self.hd_len();
        let dd = if self.ddgst { 4 } else { 0 };
        let pdo = HLEN_DATA + hd;
        let mut fl = last;
        if self.hdgst {
            fl |= flags::HDGST;
        }
        if self.ddgst {
            fl |= flags::DDGST;
        }
        let h = DataHeader {
            hdr: pdu::header(ty::C2H_DATA, fl, HLEN_DATA, pdo, pdo + data.len() + dd),
            cid: U16::new(cid),
            ttag: U16::new(0),
            offset: U32::new(offset),
            length: U32::new(data.len() as u32),
            rsvd: [0; 4],
        };
        self.send_header(h.as_bytes())?;
        self.wr.write_all(data)?;
        if self.ddgst {
            self.wr.write_all(&pdu::digest(data).to_le_bytes())?;
        }
        Ok(())
    }

    fn respond(&mut self, cid: u16, reply: &Reply) -> Result<(), ConnError> {
        let hd = self.hd_len();
        let cqe = Cqe {
            result: U64::new(reply.result),
            sq_head: U16::new(0),
            sq_id: U16::new(self.queue.qid),
            cid: U16::new(cid),
            status: U16::new(reply.status << 1),
        };
        let mut b = [0u8; HLEN_RSP];
        let fl = if self.hdgst { flags::HDGST } else { 0 };
        b[..8].copy_from_slice(pdu::header(ty::RSP, fl, HLEN_RSP, 0, HLEN_RSP + hd).as_bytes());
        b[8..].copy_from_slice(cqe.as_bytes());
        self.send_header(&b)?;
        Ok(())
    }

    fn terminate(&mut self, e: &PduError) -> io::Result<()> {
        tracing::info!("connection ended: {e}");
        let echo = std::mem::take(&mut self.echo);
        let t = TermHeader {
            hdr: pdu::header(ty::C2H_TERM, 0, HLEN_TERM, 0, HLEN_TERM + echo.len()),
            fes: U16::new(e.fes()),
            fei: U32::new(0),
            rsvd: [0; 10],
        };
        self.wr.write_all(t.as_bytes())?;
        self.wr.write_all(&echo)?;
        self.wr.flush()
    }
}
