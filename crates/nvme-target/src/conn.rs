//! One NVMe/TCP connection (= one queue): ICReq/ICResp, command capsules
//! with in-capsule data, R2T / H2CData for larger host data, C2HData for
//! controller data, response capsules, digests when the host asks. A PDU
//! that breaks the protocol ends this connection with a C2HTermReq naming
//! the error; other connections and the target carry on.
//!
//! Responses are buffered and flushed only when no more received bytes are
//! waiting, so a host that pipelines commands gets its completions batched.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, IntoBytes};

use crate::controller::{host_to_ctrl, sc, Queue, Reply, Shared};
use crate::pdu::{
    self, check_header, flags, ty, CommonHeader, Cqe, DataHeader, IcReq, IcResp, Limits, PduError,
    Sqe, TermHeader, HLEN_DATA, HLEN_RSP, HLEN_TERM, SGL_IN_CAPSULE, SGL_TRANSPORT,
};

/// Largest C2HData payload sent in one PDU.
const C2H_CHUNK: usize = 128 * 1024;

/// A write waiting for its H2CData.
#[derive(Debug)]
struct Pending {
    sqe: Sqe,
    want: usize,
    buf: Vec<u8>,
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
}

/// The per-connection state machine.
#[derive(Debug)]
pub struct Connection {
    shared: Arc<Shared>,
    lim: Limits,
    rd: BufReader<TcpStream>,
    wr: BufWriter<TcpStream>,
    hdgst: bool,
    ddgst: bool,
    queue: Queue,
    pending: HashMap<u16, Pending>,
    pdu: Vec<u8>,
}

impl Connection {
    /// Wraps an accepted socket.
    pub fn new(shared: Arc<Shared>, stream: TcpStream, lim: Limits) -> io::Result<Connection> {
        stream.set_nodelay(true)?;
        Ok(Connection {
            shared,
            lim,
            rd: BufReader::with_capacity(256 * 1024, stream.try_clone()?),
            wr: BufWriter::with_capacity(256 * 1024, stream),
            hdgst: false,
            ddgst: false,
            queue: Queue::default(),
            pending: HashMap::new(),
            pdu: Vec::new(),
        })
    }

    /// Serves the connection until the host closes it or breaks the protocol.
    pub fn run(mut self) -> Result<(), ConnError> {
        let r = self.serve();
        if let Err(ConnError::Protocol(e)) = &r {
            let _ = self.terminate(e);
        }
        let _ = self.wr.flush();
        if let (0, Some(c)) = (self.queue.qid, &self.queue.ctrl) {
            self.shared.drop_ctrl(c.id.cntlid);
        }
        r
    }

    fn serve(&mut self) -> Result<(), ConnError> {
        let mut connected = false;
        loop {
            if self.rd.buffer().is_empty() {
                self.wr.flush()?;
                if self.rd.fill_buf()?.is_empty() {
                    return Ok(()); // orderly close between PDUs
                }
            }
            let mut hb = [0u8; 8];
            self.rd.read_exact(&mut hb)?;
            let h = CommonHeader::read_from_bytes(&hb).map_err(|_| PduError::BadType(hb[0]))?;
            let f = check_header(&h, &self.lim, self.hdgst, self.ddgst)?;
            if (f.ty == ty::IC_REQ) == connected {
                return Err(PduError::Sequence(f.ty).into());
            }
            // The PDU is bounded by check_header's limits before this resize.
            self.pdu.clear();
            self.pdu.extend_from_slice(&hb);
            self.pdu.resize(f.plen, 0);
            self.rd.read_exact(&mut self.pdu[8..])?;
            if self.hdgst && f.ty != ty::IC_REQ && f.ty != ty::H2C_TERM {
                let want = pdu::digest(&self.pdu[..f.hlen]);
                let got =
                    u32::from_le_bytes(self.pdu[f.hlen..f.hlen + 4].try_into().unwrap_or_default());
                if want != got {
                    return Err(PduError::HeaderDigest.into());
                }
            }
            if self.ddgst && f.data_len > 0 && f.ty != ty::H2C_TERM {
                let d = &self.pdu[f.pdo..f.pdo + f.data_len];
                let got = u32::from_le_bytes(self.pdu[f.plen - 4..].try_into().unwrap_or_default());
                if pdu::digest(d) != got {
                    return Err(PduError::DataDigest.into());
                }
            }
            match f.ty {
                ty::IC_REQ => {
                    self.ic_req()?;
                    connected = true;
                }
                ty::CMD => self.command(f.pdo, f.data_len)?,
                ty::H2C_DATA => self.h2c_data(f.pdo, f.data_len, f.flags)?,
                ty::H2C_TERM => return Ok(()),
                t => return Err(PduError::BadType(t).into()),
            }
        }
    }

    fn ic_req(&mut self) -> Result<(), ConnError> {
        let req = IcReq::read_from_bytes(&self.pdu[..]).map_err(|_| PduError::BadType(0))?;
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

    fn command(&mut self, pdo: usize, data_len: usize) -> Result<(), ConnError> {
        let sqe = Sqe::read_from_bytes(&self.pdu[8..72]).map_err(|_| PduError::BadType(ty::CMD))?;
        let len = sqe.sgl_len() as usize;
        if !host_to_ctrl(&sqe) || len == 0 {
            if data_len != 0 {
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
                if data_len != len {
                    return Err(PduError::DataRange(format!(
                        "command {}: {data_len} bytes in the capsule, SGL says {len}",
                        sqe.cid()
                    ))
                    .into());
                }
                let data = self.pdu[pdo..pdo + data_len].to_vec();
                self.finish(&sqe, &data)
            }
            SGL_TRANSPORT if data_len == 0 => {
                let cid = sqe.cid();
                if self.pending.contains_key(&cid)
                    || self.pending.len() > usize::from(self.queue.sqsize).max(1)
                {
                    return Err(PduError::Sequence(ty::CMD).into());
                }
                self.pending.insert(
                    cid,
                    Pending {
                        sqe,
                        want: len,
                        // len ≤ max_transfer and pending ≤ sqsize bound this.
                        buf: Vec::with_capacity(len),
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

    fn h2c_data(&mut self, pdo: usize, data_len: usize, fl: u8) -> Result<(), ConnError> {
        let h = DataHeader::read_from_bytes(&self.pdu[..HLEN_DATA])
            .map_err(|_| PduError::BadType(ty::H2C_DATA))?;
        let ttag = h.ttag.get();
        let Some(p) = self.pending.get_mut(&ttag) else {
            return Err(PduError::DataRange(format!("no transfer with tag {ttag}")).into());
        };
        let off = h.offset.get() as usize;
        if h.cid.get() != p.sqe.cid()
            || off != p.buf.len()
            || h.length.get() as usize != data_len
            || off + data_len > p.want
        {
            return Err(PduError::DataRange(format!(
                "tag {ttag}: {data_len} bytes at {off}, expected at {} of {}",
                p.buf.len(),
                p.want
            ))
            .into());
        }
        p.buf.extend_from_slice(&self.pdu[pdo..pdo + data_len]);
        if p.buf.len() == p.want {
            if fl & flags::DATA_LAST == 0 {
                return Err(PduError::DataRange(format!(
                    "tag {ttag}: last PDU without the LAST flag"
                ))
                .into());
            }
            if let Some(p) = self.pending.remove(&ttag) {
                self.finish(&p.sqe, &p.buf)?;
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
        let echo = self.pdu.len().min(pdu::HLEN_CMD);
        let t = TermHeader {
            hdr: pdu::header(ty::C2H_TERM, 0, HLEN_TERM, 0, HLEN_TERM + echo),
            fes: U16::new(e.fes()),
            fei: U32::new(0),
            rsvd: [0; 10],
        };
        self.wr.write_all(t.as_bytes())?;
        let echo_bytes = self.pdu[..echo].to_vec();
        self.wr.write_all(&echo_bytes)?;
        self.wr.flush()
    }
}
