//! NVMe/TCP wire format (NVMe over Fabrics TCP Transport Specification 1.0,
//! §3.6 "PDU formats"): the common header, every fixed-layout PDU header as a
//! `#[repr(C)]` little-endian struct read and written through `zerocopy`,
//! the 64-byte submission queue entry and 16-byte completion, and the
//! validation that turns a received header into a [`Frame`] or a
//! [`PduError`] naming what is wrong. Every length read from the wire is
//! checked against [`Limits`] before anything is sized by it.

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// PDU types (§3.6.1, table "PDU type").
pub mod ty {
    /// Initialize Connection Request (host → controller).
    pub const IC_REQ: u8 = 0x00;
    /// Initialize Connection Response.
    pub const IC_RESP: u8 = 0x01;
    /// Host-to-controller terminate connection request.
    pub const H2C_TERM: u8 = 0x02;
    /// Controller-to-host terminate connection request.
    pub const C2H_TERM: u8 = 0x03;
    /// Command capsule.
    pub const CMD: u8 = 0x04;
    /// Response capsule.
    pub const RSP: u8 = 0x05;
    /// Host-to-controller data.
    pub const H2C_DATA: u8 = 0x06;
    /// Controller-to-host data.
    pub const C2H_DATA: u8 = 0x07;
    /// Ready to transfer.
    pub const R2T: u8 = 0x09;
}

/// Common-header flags (§3.6.2).
pub mod flags {
    /// A header digest follows the PDU header.
    pub const HDGST: u8 = 0x01;
    /// A data digest follows the PDU data.
    pub const DDGST: u8 = 0x02;
    /// Last data PDU of a transfer (H2CData, C2HData).
    pub const DATA_LAST: u8 = 0x04;
    /// C2HData: the command succeeded, no response capsule follows.
    pub const DATA_SUCCESS: u8 = 0x08;
}

/// Fatal error status of a terminate-connection request (§3.6.2.4/5, FES).
pub mod fes {
    /// A header field holds an invalid value.
    pub const INVALID_HEADER: u16 = 0x01;
    /// A PDU arrived out of sequence.
    pub const SEQUENCE: u16 = 0x02;
    /// The header digest did not match.
    pub const HEADER_DIGEST: u16 = 0x03;
    /// Data outside the range the controller asked for.
    pub const DATA_RANGE: u16 = 0x04;
    /// The data digest did not match (reported in the response instead, kept for completeness).
    pub const DATA_DIGEST: u16 = 0x05;
    /// A parameter the controller does not support.
    pub const UNSUPPORTED: u16 = 0x06;
}

/// Common header of every PDU (§3.6.2, 8 bytes).
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct CommonHeader {
    /// PDU type ([`ty`]).
    pub pdu_type: u8,
    /// [`flags`].
    pub flags: u8,
    /// Header length (common + PDU-specific header).
    pub hlen: u8,
    /// Offset of the data from the start of the PDU (0: no data).
    pub pdo: u8,
    /// Total PDU length including header, digests, padding and data.
    pub plen: U32,
}

/// ICReq (§3.6.2.2, 128 bytes).
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct IcReq {
    /// Common header.
    pub hdr: CommonHeader,
    /// PDU format version (0).
    pub pfv: U16,
    /// Host PDU data alignment (dwords, 0-based).
    pub hpda: u8,
    /// Bit 0 header digest, bit 1 data digest wanted.
    pub digest: u8,
    /// Most outstanding R2Ts per command the host accepts (0-based).
    pub maxr2t: U32,
    /// Reserved.
    pub rsvd: [u8; 112],
}

/// ICResp (§3.6.2.3, 128 bytes).
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct IcResp {
    /// Common header.
    pub hdr: CommonHeader,
    /// PDU format version (0).
    pub pfv: U16,
    /// Controller PDU data alignment (dwords, 0-based).
    pub cpda: u8,
    /// Digests enabled (bit 0 header, bit 1 data).
    pub digest: u8,
    /// Largest H2CData payload the controller accepts.
    pub maxh2cdata: U32,
    /// Reserved.
    pub rsvd: [u8; 112],
}

/// H2CData, C2HData and R2T share this layout (§3.6.2.8–11, 24 bytes).
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct DataHeader {
    /// Common header.
    pub hdr: CommonHeader,
    /// Command the data belongs to.
    pub cid: U16,
    /// Transfer tag (from the R2T; 0 for C2HData).
    pub ttag: U16,
    /// Offset of this data within the command's data.
    pub offset: U32,
    /// Bytes of data (R2T: bytes asked for).
    pub length: U32,
    /// Reserved.
    pub rsvd: [u8; 4],
}

/// H2CTermReq / C2HTermReq header (§3.6.2.4/5, 24 bytes).
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct TermHeader {
    /// Common header.
    pub hdr: CommonHeader,
    /// Fatal error status ([`fes`]).
    pub fes: U16,
    /// Fatal error information (byte offset of the bad field).
    pub fei: U32,
    /// Reserved.
    pub rsvd: [u8; 10],
}

/// Completion queue entry (NVMe Base 2.0 §4.6, 16 bytes).
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct Cqe {
    /// Command-specific result (dword 0 and 1).
    pub result: U64,
    /// Submission queue head pointer.
    pub sq_head: U16,
    /// Submission queue id.
    pub sq_id: U16,
    /// Command identifier.
    pub cid: U16,
    /// Status field: phase bit 0, SC bits 1–8, SCT bits 9–11, DNR bit 15.
    pub status: U16,
}

/// Submission queue entry (NVMe Base 2.0 §4.2, 64 bytes) as 16 dwords, with
/// accessors for the fields every command shares.
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct Sqe {
    /// Command dwords 0–15.
    pub dw: [U32; 16],
}

impl Sqe {
    /// Opcode (CDW0 bits 7:0).
    pub fn opcode(&self) -> u8 {
        self.dw[0].get() as u8
    }
    /// Command identifier (CDW0 bits 31:16).
    pub fn cid(&self) -> u16 {
        (self.dw[0].get() >> 16) as u16
    }
    /// Namespace id (also the fabrics command type in its low byte).
    pub fn nsid(&self) -> u32 {
        self.dw[1].get()
    }
    /// Command dword `n` (10–15).
    pub fn cdw(&self, n: usize) -> u32 {
        self.dw[n].get()
    }
    /// SGL descriptor length (bytes 32–35).
    pub fn sgl_len(&self) -> u32 {
        self.dw[8].get()
    }
    /// SGL descriptor type byte (byte 39).
    pub fn sgl_type(&self) -> u8 {
        (self.dw[9].get() >> 24) as u8
    }
    /// A new command with opcode, id and namespace (for clients).
    pub fn new(opcode: u8, cid: u16, nsid: u32) -> Sqe {
        let mut s = Sqe::default();
        s.dw[0] = U32::new(u32::from(opcode) | u32::from(cid) << 16);
        s.dw[1] = U32::new(nsid);
        s
    }
    /// Sets command dword `n`.
    pub fn set(&mut self, n: usize, v: u32) -> &mut Sqe {
        self.dw[n] = U32::new(v);
        self
    }
    /// Describes `len` bytes of data: in the capsule or by the transport.
    pub fn set_sgl(&mut self, len: u32, in_capsule: bool) -> &mut Sqe {
        self.dw[8] = U32::new(len);
        self.dw[9] = U32::new(
            u32::from(if in_capsule {
                SGL_IN_CAPSULE
            } else {
                SGL_TRANSPORT
            }) << 24,
        );
        self
    }
}

/// SGL data block descriptor, offset subtype: the data is in the capsule.
pub const SGL_IN_CAPSULE: u8 = 0x01;
/// SGL transport data block descriptor (TCP transport subtype 0xA).
pub const SGL_TRANSPORT: u8 = 0x5A;

/// Header lengths (hlen) of each PDU type.
pub const HLEN_IC: usize = 128;
/// Command capsule header: common header + SQE.
pub const HLEN_CMD: usize = 72;
/// Response capsule header: common header + CQE.
pub const HLEN_RSP: usize = 24;
/// Data and R2T headers.
pub const HLEN_DATA: usize = 24;
/// Terminate request header.
pub const HLEN_TERM: usize = 24;

/// Bounds every wire length is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest in-capsule data the controller accepts.
    pub in_capsule: u32,
    /// Largest H2CData payload (advertised in ICResp).
    pub max_h2c: u32,
    /// Largest data transfer of one command.
    pub max_transfer: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            in_capsule: 8192,
            max_h2c: 128 * 1024,
            max_transfer: 1 << 20,
        }
    }
}

/// Why a received PDU header is rejected; each maps to a fatal error status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PduError {
    /// A PDU type the controller never receives.
    #[error("PDU type {0:#04x} is not one a host sends")]
    BadType(u8),
    /// hlen does not match the PDU type.
    #[error("PDU type {ty:#04x}: header length {hlen}, expected {want}")]
    BadHlen {
        /// PDU type.
        ty: u8,
        /// Received hlen.
        hlen: u8,
        /// Expected hlen.
        want: usize,
    },
    /// plen smaller than the header or larger than the limit.
    #[error("PDU type {ty:#04x}: length {plen} is outside {min}..={max}")]
    BadPlen {
        /// PDU type.
        ty: u8,
        /// Received plen.
        plen: u32,
        /// Smallest valid.
        min: u32,
        /// Largest accepted.
        max: u32,
    },
    /// pdo inconsistent with hlen / plen.
    #[error("PDU type {ty:#04x}: data offset {pdo} is invalid for header length {hlen} and length {plen}")]
    BadPdo {
        /// PDU type.
        ty: u8,
        /// Received pdo.
        pdo: u8,
        /// Received hlen.
        hlen: u8,
        /// Received plen.
        plen: u32,
    },
    /// The first PDU was not ICReq, or ICReq came twice.
    #[error("PDU type {0:#04x} out of sequence")]
    Sequence(u8),
    /// Header digest mismatch.
    #[error("header digest mismatch")]
    HeaderDigest,
    /// Data digest mismatch.
    #[error("data digest mismatch")]
    DataDigest,
    /// H2CData for no transfer, or outside the range asked for.
    #[error("H2CData out of range: {0}")]
    DataRange(String),
    /// A parameter the controller does not support.
    #[error("unsupported: {0}")]
    Unsupported(String),
}

impl PduError {
    /// The fatal error status a terminate request reports for this error.
    pub fn fes(&self) -> u16 {
        match self {
            PduError::BadType(_)
            | PduError::BadHlen { .. }
            | PduError::BadPlen { .. }
            | PduError::BadPdo { .. } => fes::INVALID_HEADER,
            PduError::Sequence(_) => fes::SEQUENCE,
            PduError::HeaderDigest => fes::HEADER_DIGEST,
            PduError::DataDigest => fes::DATA_DIGEST,
            PduError::DataRange(_) => fes::DATA_RANGE,
            PduError::Unsupported(_) => fes::UNSUPPORTED,
        }
    }
}

/// A validated header: what the rest of the PDU holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// PDU type.
    pub ty: u8,
    /// Flags.
    pub flags: u8,
    /// Header length.
    pub hlen: usize,
    /// Bytes of data in the PDU (0: none).
    pub data_len: usize,
    /// Offset of the data from the PDU start.
    pub pdo: usize,
    /// Total PDU length.
    pub plen: usize,
}

/// Checks a common header against the PDU type's layout and the limits.
/// `hdgst`/`ddgst` say which digests the connection negotiated.
pub fn check_header(
    h: &CommonHeader,
    lim: &Limits,
    hdgst: bool,
    ddgst: bool,
) -> Result<Frame, PduError> {
    let ty = h.pdu_type;
    let (want, max_data) = match ty {
        ty::IC_REQ => (HLEN_IC, 0),
        ty::CMD => (HLEN_CMD, lim.in_capsule),
        ty::H2C_DATA => (HLEN_DATA, lim.max_h2c),
        ty::H2C_TERM => (HLEN_TERM, 152),
        _ => return Err(PduError::BadType(ty)),
    };
    if usize::from(h.hlen) != want {
        return Err(PduError::BadHlen {
            ty,
            hlen: h.hlen,
            want,
        });
    }
    let plen = h.plen.get();
    let hd = if hdgst && ty != ty::IC_REQ { 4 } else { 0 };
    let dd = if ddgst && ty != ty::IC_REQ && ty != ty::H2C_TERM {
        4
    } else {
        0
    };
    let min = (want + hd) as u32;
    // Padding before the data is bounded by the PDU data alignment (≤ 128 bytes).
    let max = min + 128 + max_data + dd;
    if plen < min || plen > max {
        return Err(PduError::BadPlen { ty, plen, min, max });
    }
    let bad_pdo = || PduError::BadPdo {
        ty,
        pdo: h.pdo,
        hlen: h.hlen,
        plen,
    };
    let plen = plen as usize;
    let (pdo, data_len) = if ty == ty::H2C_TERM {
        (want, plen - want)
    } else if plen == want + hd {
        if h.pdo != 0 && usize::from(h.pdo) != plen {
            return Err(bad_pdo());
        }
        (0, 0)
    } else {
        let pdo = usize::from(h.pdo);
        if pdo < want + hd || pdo + dd as usize >= plen {
            return Err(bad_pdo());
        }
        let data_len = plen - pdo - dd as usize;
        if data_len as u32 > max_data {
            return Err(bad_pdo());
        }
        (pdo, data_len)
    };
    Ok(Frame {
        ty,
        flags: h.flags,
        hlen: want,
        data_len,
        pdo,
        plen,
    })
}

/// CRC32C as the digests use it (§3.6.2.1: CRC-32C over the header or data).
pub fn digest(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// A common header for a PDU the controller (or a client) sends.
pub fn header(pdu_type: u8, flags: u8, hlen: usize, pdo: usize, plen: usize) -> CommonHeader {
    CommonHeader {
        pdu_type,
        flags,
        hlen: hlen as u8,
        pdo: pdo as u8,
        plen: U32::new(plen as u32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(ty: u8, hlen: u8, pdo: u8, plen: u32) -> CommonHeader {
        CommonHeader {
            pdu_type: ty,
            flags: 0,
            hlen,
            pdo,
            plen: U32::new(plen),
        }
    }

    #[test]
    fn sizes_match_the_spec() {
        assert_eq!(std::mem::size_of::<CommonHeader>(), 8);
        assert_eq!(std::mem::size_of::<IcReq>(), 128);
        assert_eq!(std::mem::size_of::<IcResp>(), 128);
        assert_eq!(std::mem::size_of::<DataHeader>(), 24);
        assert_eq!(std::mem::size_of::<TermHeader>(), 24);
        assert_eq!(std::mem::size_of::<Cqe>(), 16);
        assert_eq!(std::mem::size_of::<Sqe>(), 64);
    }

    #[test]
    fn accepts_well_formed_headers() {
        let l = Limits::default();
        let f = check_header(&h(ty::CMD, 72, 0, 72), &l, false, false).unwrap();
        assert_eq!((f.data_len, f.pdo), (0, 0));
        let f = check_header(&h(ty::CMD, 72, 72, 72 + 4096), &l, false, false).unwrap();
        assert_eq!((f.data_len, f.pdo), (4096, 72));
        let f = check_header(&h(ty::H2C_DATA, 24, 28, 28 + 512 + 4), &l, true, true).unwrap();
        assert_eq!((f.data_len, f.pdo), (512, 28));
    }

    #[test]
    fn rejects_bad_headers() {
        let l = Limits::default();
        assert_eq!(
            check_header(&h(0x07, 24, 0, 24), &l, false, false),
            Err(PduError::BadType(7))
        );
        assert!(matches!(
            check_header(&h(ty::CMD, 70, 0, 72), &l, false, false),
            Err(PduError::BadHlen { .. })
        ));
        assert!(matches!(
            check_header(&h(ty::CMD, 72, 72, u32::MAX), &l, false, false),
            Err(PduError::BadPlen { .. })
        ));
        assert!(matches!(
            check_header(&h(ty::CMD, 72, 10, 200), &l, false, false),
            Err(PduError::BadPdo { .. })
        ));
        assert!(matches!(
            check_header(
                &h(ty::H2C_DATA, 24, 24, 24 + l.max_h2c + 1),
                &l,
                false,
                false
            ),
            Err(PduError::BadPlen { .. } | PduError::BadPdo { .. })
        ));
    }
}
