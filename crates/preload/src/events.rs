//! The events the shim sends, and their hand-written protobuf encoding into
//! fixed buffers (the per-thread batches they go to are `batch.rs`).
//!
//! Encoding follows `proto/pcstream.proto` (`Event`, `EventBatch`) byte for
//! byte in canonical form; the tests decode the bytes with prost. Nested
//! messages are encoded in place (a length byte reserved, the body shifted
//! in the rare case it needs more), so nothing allocates but a process start
//! (its argv). Paths are truncated to [`MAX_PATH`] bytes. `WriteEvent`s, the
//! hot path's events, have their own branch-free encoder
//! ([`encode_write_entry`]).

/// Longest path (bytes) carried in an event.
pub const MAX_PATH: usize = 1024;

/// Bytes of encoded events per batch (`batch.rs`).
pub const BATCH: usize = 16 * 1024;

// ---------------------------------------------------------------------------
// Encoder
// ---------------------------------------------------------------------------

/// Appends protobuf fields to a fixed buffer; overflow sets a flag and
/// further writes are ignored.
#[derive(Debug)]
pub struct Enc<'a> {
    buf: &'a mut [u8],
    pos: usize,
    overflow: bool,
}

/// Length of `v` as a varint.
pub const fn varint_len(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    // ceil(bits / 7) for 1..=64 without a division.
    (bits * 9 + 64) / 64
}

impl<'a> Enc<'a> {
    /// An encoder writing at the start of `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Enc {
            buf,
            pos: 0,
            overflow: false,
        }
    }

    /// Bytes written so far (meaningless after overflow).
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.pos]
    }

    /// Whether everything fit.
    pub fn ok(&self) -> bool {
        !self.overflow
    }

    /// Raw bytes.
    #[inline(always)]
    pub fn raw(&mut self, b: &[u8]) {
        if self.overflow || self.buf.len() - self.pos < b.len() {
            self.overflow = true;
            return;
        }
        if b.len() <= 16 {
            // Short copies inline (a memcpy call costs more than the copy).
            for (d, s) in self.buf[self.pos..self.pos + b.len()].iter_mut().zip(b) {
                *d = *s;
            }
        } else {
            self.buf[self.pos..self.pos + b.len()].copy_from_slice(b);
        }
        self.pos += b.len();
    }

    /// A varint.
    #[inline(always)]
    pub fn varint(&mut self, mut v: u64) {
        if self.overflow || self.buf.len() - self.pos < varint_len(v) {
            self.overflow = true;
            return;
        }
        while v >= 0x80 {
            self.buf[self.pos] = (v as u8) | 0x80;
            v >>= 7;
            self.pos += 1;
        }
        self.buf[self.pos] = v as u8;
        self.pos += 1;
    }

    #[inline(always)]
    fn key(&mut self, field: u32, wire_type: u32) {
        self.varint(((field << 3) | wire_type) as u64);
    }

    /// A varint field (omitted when 0, as proto3 does).
    #[inline(always)]
    pub fn uint(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.key(field, 0);
            self.varint(v);
        }
    }

    /// An int32 field (negative values take 10 bytes, as proto3 does).
    #[inline(always)]
    pub fn int32(&mut self, field: u32, v: i32) {
        self.uint(field, v as i64 as u64);
    }

    /// A bool field.
    #[inline(always)]
    pub fn boolean(&mut self, field: u32, v: bool) {
        self.uint(field, v as u64);
    }

    /// A bytes/string field (omitted when empty).
    pub fn bytes_field(&mut self, field: u32, b: &[u8]) {
        if !b.is_empty() {
            self.key(field, 2);
            self.varint(b.len() as u64);
            self.raw(b);
        }
    }

    /// A bytes/string field that is written even when empty (repeated entries).
    pub fn bytes_always(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.raw(b);
    }

    /// A nested message encoded in place by `f`: one length byte is
    /// reserved and the body shifted in the rare case it needs more.
    #[inline(always)]
    pub fn message(&mut self, field: u32, f: impl FnOnce(&mut Self)) {
        self.key(field, 2);
        let at = self.pos;
        self.raw(&[0]);
        if self.overflow {
            return;
        }
        f(self);
        if self.overflow {
            return;
        }
        let n = self.pos - at - 1;
        if n < 0x80 {
            self.buf[at] = n as u8;
            return;
        }
        let vl = varint_len(n as u64);
        if self.buf.len() - self.pos < vl - 1 {
            self.overflow = true;
            return;
        }
        self.buf.copy_within(at + 1..self.pos, at + vl);
        let end = self.pos + vl - 1;
        self.pos = at;
        self.varint(n as u64);
        self.pos = end;
    }
}

// ---------------------------------------------------------------------------
// Event kinds
// ---------------------------------------------------------------------------

/// `FileId`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileId {
    /// st_dev.
    pub dev: u64,
    /// st_ino.
    pub ino: u64,
}

impl FileId {
    /// The identity of the file `st` describes.
    #[inline]
    pub fn of(st: &libc::stat) -> FileId {
        FileId {
            dev: st.st_dev,
            ino: st.st_ino,
        }
    }
}

#[inline(always)]
fn file_id(e: &mut Enc<'_>, field: u32, f: FileId) {
    e.message(field, |e| {
        e.uint(1, f.dev);
        e.uint(2, f.ino);
    });
}

// The enum values come from the proto (generated in `pcstream_placement::wire`),
// so the hand-written encoder cannot drift from the schema.
pub use pcstream_placement::wire::{InvalidateKind, ProcessEventKind as ProcessKind, WriteCall};

/// One event's payload (the `Event.kind` oneof).
#[derive(Debug)]
pub enum Kind<'a> {
    /// `WriteEvent`.
    Write {
        file: FileId,
        offset: u64,
        len: u64,
        signature: u64,
        stream: u32,
        hint: u32,
        call: WriteCall,
        /// `WriteEvent.age_class` (0: none).
        age_class: u32,
        /// `WriteEvent.native_signature` (0: none).
        native_signature: u64,
    },
    /// `InvalidateEvent`.
    Invalidate {
        file: FileId,
        kind: InvalidateKind,
        offset: u64,
        len: u64,
    },
    /// `AppHintEvent`.
    AppHint {
        file: FileId,
        requested: u64,
        accepted: bool,
        errno: i32,
        repaired: bool,
    },
    /// `SignatureInfo`.
    Signature {
        signature: u64,
        frames: &'a [(u64, u64)],
        method: u32,
    },
    /// `ModuleInfo`.
    Module {
        key: u64,
        build_id: &'a [u8],
        path: &'a [u8],
        size: u64,
    },
    /// `OpenEvent`.
    Open {
        file: FileId,
        path: &'a [u8],
        flags: i32,
    },
    /// `ProcessEvent`.
    Process {
        kind: ProcessKind,
        ppid: u32,
        exe: &'a [u8],
        argv: &'a [Vec<u8>],
        dropped: u64,
    },
}

fn trunc(p: &[u8]) -> &[u8] {
    &p[..p.len().min(MAX_PATH)]
}

/// Encodes the fields of one `Event` (not its length prefix).
pub fn encode_event(e: &mut Enc<'_>, time_ns: u64, tid: u32, kind: &Kind<'_>) {
    e.uint(1, time_ns);
    e.uint(2, tid as u64);
    match *kind {
        Kind::Write {
            file,
            offset,
            len,
            signature,
            stream,
            hint,
            call,
            age_class,
            native_signature,
        } => e.message(10, |e| {
            file_id(e, 1, file);
            e.uint(2, offset);
            e.uint(3, len);
            e.uint(4, signature);
            e.uint(5, stream as u64);
            e.uint(6, hint as u64);
            e.uint(7, call as u64);
            e.uint(9, age_class as u64);
            e.uint(10, native_signature);
        }),
        Kind::Invalidate {
            file,
            kind,
            offset,
            len,
        } => e.message(11, |e| {
            file_id(e, 1, file);
            e.uint(2, kind as u64);
            e.uint(3, offset);
            e.uint(4, len);
        }),
        Kind::AppHint {
            file,
            requested,
            accepted,
            errno,
            repaired,
        } => e.message(12, |e| {
            file_id(e, 1, file);
            e.uint(2, requested);
            e.boolean(3, accepted);
            e.int32(4, errno);
            e.boolean(5, repaired);
        }),
        Kind::Signature {
            signature,
            frames,
            method,
        } => e.message(13, |e| {
            e.uint(1, signature);
            for &(key, offset) in frames {
                e.message(2, |e| {
                    e.uint(1, key);
                    e.uint(2, offset);
                });
            }
            e.uint(3, method as u64);
        }),
        Kind::Module {
            key,
            build_id,
            path,
            size,
        } => e.message(14, |e| {
            e.uint(1, key);
            e.bytes_field(2, &build_id[..build_id.len().min(64)]);
            e.bytes_field(3, trunc(path));
            e.uint(4, size);
        }),
        Kind::Open { file, path, flags } => e.message(15, |e| {
            file_id(e, 1, file);
            e.bytes_field(2, trunc(path));
            e.int32(3, flags);
        }),
        Kind::Process {
            kind,
            ppid,
            exe,
            argv,
            dropped,
        } => {
            // Not a hot-path event: encode on the heap (argv may be long).
            // Long command lines are cut to fit one batch.
            let mut v = vec![0u8; BATCH - 64];
            let mut inner = Enc::new(&mut v);
            inner.uint(1, kind as u64);
            inner.uint(2, ppid as u64);
            inner.bytes_field(3, trunc(exe));
            let mut room = BATCH / 2;
            for a in argv {
                let a = &a[..a.len().min(room)];
                room -= a.len();
                inner.bytes_always(4, a);
            }
            inner.uint(5, dropped);
            let n = inner.pos;
            e.bytes_always(16, &v[..n]);
        }
    }
}

// ---------------------------------------------------------------------------
// The hot path's WriteEvent encoder
// ---------------------------------------------------------------------------

/// Room [`encode_write_entry`] writes into directly; a buffer with less
/// left gets the entry through a stack copy.
pub const WRITE_ENTRY_ROOM: usize = 160;

/// The 7-bit groups of `v < 2^56` spread over the bytes of a `u64`
/// (byte i = bits 7i..7i+7), with no continuation bits yet.
#[inline(always)]
const fn spread7(v: u64) -> u64 {
    let x = (v & 0x0fff_ffff) | ((v & 0x00ff_ffff_f000_0000) << 4);
    let x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x0fff_c000_0fff_c000) << 2);
    (x & 0x007f_007f_007f_007f) | ((x & 0x3f80_3f80_3f80_3f80) << 1)
}

/// Writes `v` as a varint at `p` without branching on its length (up to 16
/// bytes are stored; those past the varint are scratch); returns its end.
///
/// # Safety
/// `p..p+16` must be writable.
#[inline(always)]
unsafe fn put_varint(p: *mut u8, v: u64) -> *mut u8 {
    const CONT: u64 = 0x8080_8080_8080_8080;
    if v < 1 << 56 {
        let n = varint_len(v);
        // Continuation bits on the first n − 1 bytes.
        let cont = CONT & ((1u64 << (8 * (n - 1))) - 1);
        // SAFETY: 8 bytes at p are writable (caller).
        unsafe {
            (p as *mut u64).write_unaligned((spread7(v) | cont).to_le());
            p.add(n)
        }
    } else {
        // 9 or 10 bytes: the low 56 bits, then the top 8 as a 1–2 byte varint.
        let top = v >> 56;
        // SAFETY: 16 bytes at p are writable (caller).
        unsafe {
            (p as *mut u64).write_unaligned((spread7(v & ((1 << 56) - 1)) | CONT).to_le());
            let tail = (top & 0x7f) | ((top >= 0x80) as u64) << 7 | (top >> 7) << 8;
            (p.add(8) as *mut u16).write_unaligned((tail as u16).to_le());
            p.add(9 + (top >= 0x80) as usize)
        }
    }
}

/// A varint field with a one-byte key, omitted when 0 (proto3): the bytes
/// are written either way and the end only advanced when `v != 0`.
///
/// # Safety
/// `p..p+17` must be writable.
#[inline(always)]
unsafe fn put_uint(p: *mut u8, key: u8, v: u64) -> *mut u8 {
    // SAFETY: as the caller guarantees.
    unsafe {
        p.write(key);
        let end = put_varint(p.add(1), v);
        if v != 0 {
            end
        } else {
            p
        }
    }
}

/// Three small varint fields (each omitted when 0) with one-byte keys
/// `key`, `key + 8`, `key + 16`: two bytes each when all are below 128.
///
/// # Safety
/// `p..p+40` must be writable.
#[inline(always)]
unsafe fn put_small3(p: *mut u8, key: u8, v: [u64; 3]) -> *mut u8 {
    // SAFETY: as the caller guarantees.
    unsafe {
        if (v[0] | v[1] | v[2]) >= 0x80 {
            let p = put_uint(p, key, v[0]);
            let p = put_uint(p, key + 8, v[1]);
            return put_uint(p, key + 16, v[2]);
        }
        let mut p = p;
        for (i, &v) in v.iter().enumerate() {
            (p as *mut u16)
                .write_unaligned((u16::from(key + 8 * i as u8) | (v as u16) << 8).to_le());
            p = p.add(2 * (v != 0) as usize);
        }
        p
    }
}

/// Encodes a thread's `WriteEvent` entries (`EventBatch.events` entries
/// holding a `WriteEvent`), branch-free on varint lengths: the parts that
/// repeat from one write to the next (the thread id, the file) are encoded
/// once and copied.
///
/// An entry is at most 1 + 1 + 11 + 6 + 1 + 1 + 71 = 92 bytes before
/// `calls`, `age_class` and `native_signature` (≤ 4 + 2 + 11 more: 109),
/// so both
/// enclosing lengths (`Event`, `WriteEvent`) are single bytes whose place is
/// known before the body is written: the header goes first, the body right
/// after it, and the two lengths are filled in at the end. Produces exactly
/// what [`encode_event`] produces (tested).
#[derive(Debug, Clone)]
pub struct WriteEncoder {
    /// `Event.tid` as encoded (key and varint; nothing for tid 0).
    tid: u64,
    tid_len: usize,
    /// The file `file_bytes` encodes.
    file: FileId,
    /// `WriteEvent.file` as encoded (key, length, `FileId`; ≤ 24 bytes,
    /// the rest scratch).
    file_bytes: [u8; 48],
    file_len: usize,
}

impl WriteEncoder {
    /// An encoder for the writes of thread `tid`.
    pub fn new(tid: u32) -> WriteEncoder {
        let mut t = [0u8; 24];
        // SAFETY: t has 24 writable bytes (a field stores ≤ 17).
        let tid_len = unsafe { put_uint(t.as_mut_ptr(), 0x10, tid as u64).offset_from(t.as_ptr()) };
        let mut e = WriteEncoder {
            tid: u64::from_le_bytes(t[..8].try_into().expect("8 bytes")),
            tid_len: tid_len as usize,
            file: FileId::default(),
            file_bytes: [0; 48],
            file_len: 0,
        };
        e.set_file(FileId::default());
        e
    }

    fn set_file(&mut self, f: FileId) {
        let b = self.file_bytes.as_mut_ptr();
        // SAFETY: 2 + 11 + 11 bytes of field plus ≤ 17 scratch fit in 48.
        unsafe {
            b.write(0x0a); // WriteEvent.file; length at b+1
            let p = put_uint(b.add(2), 0x08, f.dev);
            let p = put_uint(p, 0x10, f.ino);
            let n = p.offset_from(b) as usize;
            b.add(1).write(n as u8 - 2);
            self.file_len = n;
        }
        self.file = f;
    }

    /// Writes one entry at `out`; returns its length.
    ///
    /// # Safety
    /// `out..out+WRITE_ENTRY_ROOM` must be writable.
    #[inline(always)]
    pub unsafe fn entry_at(
        &mut self,
        out: *mut u8,
        now: u64,
        f: FileId,
        w: &[u64; 8],
        calls: u64,
    ) -> usize {
        if f != self.file {
            self.set_file(f);
        }
        // SAFETY: every write below stays within the 92-byte entry plus the
        // scratch bytes a field may store past its end (≤ 32, the file
        // copy), and `calls`, `age_class` and `native_signature` (≤ 11
        // more each): < WRITE_ENTRY_ROOM.
        unsafe {
            out.write(0x1a); // EventBatch.events; length at out+1
            let mut p = put_uint(out.add(2), 0x08, now); // Event.time_ns
            (p as *mut u64).write_unaligned(self.tid.to_le()); // Event.tid
            p = p.add(self.tid_len);
            p.write(0x52); // Event.write (field 10, length-delimited); length at p+1
            let wlen = p.add(1);
            let body = p.add(2);
            (body as *mut [u8; 32]).write_unaligned(
                *(self.file_bytes.as_ptr() as *const [u8; 32]), // WriteEvent.file
            );
            p = body.add(self.file_len);
            p = put_uint(p, 0x10, w[0]); // offset
            p = put_uint(p, 0x18, w[1]); // len
            p = put_uint(p, 0x20, w[2]); // signature
            p = put_small3(p, 0x28, [w[3], w[4], w[5]]); // stream, hint, call
            p = put_uint(p, 0x40, calls); // calls (0: absent, one call)
            p = put_uint(p, 0x48, w[6]); // age_class (0: absent)
            p = put_uint(p, 0x50, w[7]); // native_signature (0: absent)
            wlen.write(p.offset_from(body) as u8);
            out.add(1).write(p.offset_from(out) as u8 - 2);
            p.offset_from(out) as usize
        }
    }

    /// One entry at the start of `buf`; `None` when it does not fit.
    /// `w` = offset, len, signature, stream, hint, call, age class, native
    /// signature; `calls`: the calls
    /// the event stands for when more than one (0: one, not encoded).
    #[inline]
    pub fn entry(
        &mut self,
        buf: &mut [u8],
        now: u64,
        f: FileId,
        w: &[u64; 8],
        calls: u64,
    ) -> Option<usize> {
        if buf.len() >= WRITE_ENTRY_ROOM {
            // SAFETY: buf has WRITE_ENTRY_ROOM writable bytes.
            return Some(unsafe { self.entry_at(buf.as_mut_ptr(), now, f, w, calls) });
        }
        let mut tmp = [0u8; WRITE_ENTRY_ROOM];
        // SAFETY: tmp has WRITE_ENTRY_ROOM writable bytes.
        let n = unsafe { self.entry_at(tmp.as_mut_ptr(), now, f, w, calls) };
        let dst = buf.get_mut(..n)?;
        dst.copy_from_slice(&tmp[..n]);
        Some(n)
    }
}

/// One `WriteEvent` entry on its own (see [`WriteEncoder`], which a batch
/// uses for all its writes).
#[cfg(test)]
pub fn encode_write_entry(
    buf: &mut [u8],
    now: u64,
    tid: u32,
    f: FileId,
    w: &[u64; 8],
) -> Option<usize> {
    WriteEncoder::new(tid).entry(buf, now, f, w, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcstream_placement::wire;
    use prost::Message;

    fn encode(kind: &Kind<'_>) -> wire::Event {
        let mut buf = [0u8; 4096];
        let mut e = Enc::new(&mut buf);
        encode_event(&mut e, 123_456_789, 42, kind);
        assert!(e.ok());
        wire::Event::decode(e.bytes()).expect("prost decodes the shim's bytes")
    }

    #[test]
    fn write_event_decodes() {
        let ev = encode(&Kind::Write {
            file: FileId { dev: 2049, ino: 77 },
            offset: 1 << 40,
            len: 4096,
            signature: 0xdead_beef_0123_4567,
            stream: 3,
            hint: 4,
            call: WriteCall::Pwrite,
            age_class: 3,
            native_signature: 0x0123_4567_89ab_cdef,
        });
        assert_eq!(ev.time_ns, 123_456_789);
        assert_eq!(ev.tid, 42);
        let Some(wire::event::Kind::Write(w)) = ev.kind else {
            panic!("not a write: {ev:?}")
        };
        assert_eq!(w.file, Some(wire::FileId { dev: 2049, ino: 77 }));
        assert_eq!(
            (w.offset, w.len, w.signature),
            (1 << 40, 4096, 0xdead_beef_0123_4567)
        );
        assert_eq!(
            (w.stream, w.hint, w.call, w.age_class),
            (3, 4, wire::WriteCall::Pwrite as i32, 3)
        );
        assert_eq!(w.native_signature, 0x0123_4567_89ab_cdef);
    }

    #[test]
    fn other_events_decode() {
        let frames = [(1u64, 2u64), (u64::MAX, 0)];
        let ev = encode(&Kind::Signature {
            signature: 9,
            frames: &frames,
            method: 2,
        });
        let Some(wire::event::Kind::Signature(s)) = ev.kind else {
            panic!()
        };
        assert_eq!(s.frames.len(), 2);
        assert_eq!((s.frames[1].module_key, s.frames[1].offset), (u64::MAX, 0));
        assert_eq!(s.method, 2);

        let ev = encode(&Kind::AppHint {
            file: FileId::default(),
            requested: 3,
            accepted: false,
            errno: libc::EINVAL,
            repaired: true,
        });
        let Some(wire::event::Kind::AppHint(h)) = ev.kind else {
            panic!()
        };
        assert_eq!(
            (h.requested, h.accepted, h.errno, h.repaired),
            (3, false, libc::EINVAL, true)
        );

        let argv = vec![b"prog".to_vec(), Vec::new(), b"x y".to_vec()];
        let ev = encode(&Kind::Process {
            kind: ProcessKind::Start,
            ppid: 1,
            exe: b"/bin/prog",
            argv: &argv,
            dropped: 0,
        });
        let Some(wire::event::Kind::Process(p)) = ev.kind else {
            panic!()
        };
        assert_eq!(p.argv, vec!["prog", "", "x y"]);
        assert_eq!(p.exe, "/bin/prog");

        let long = vec![b'a'; 5000];
        let ev = encode(&Kind::Open {
            file: FileId { dev: 1, ino: 1 },
            path: &long,
            flags: -1,
        });
        let Some(wire::event::Kind::Open(o)) = ev.kind else {
            panic!()
        };
        assert_eq!(o.path.len(), MAX_PATH);
        assert_eq!(o.flags, -1);
    }

    #[test]
    fn fast_write_encoder_matches_the_generic_one() {
        let cases = [
            (FileId { dev: 0, ino: 5 }, [0u64, 4096, 77, 0, 0, 1, 0, 0]),
            (
                FileId {
                    dev: 2049,
                    ino: 1 << 40,
                },
                [1 << 50, 1, u64::MAX, 4, 5, 5, 2, 0x77],
            ),
            (FileId::default(), [0; 8]),
            (
                // The largest body the stack buffer must hold.
                FileId {
                    dev: u64::MAX,
                    ino: u64::MAX,
                },
                [
                    u64::MAX,
                    u64::MAX,
                    u64::MAX,
                    u32::MAX as u64,
                    u32::MAX as u64,
                    5,
                    127,
                    u64::MAX,
                ],
            ),
            (
                FileId {
                    dev: 1 << 7,
                    ino: 1 << 14,
                },
                [1 << 21, 1 << 28, 1 << 35, 127, 128, 1, 16, 1 << 40],
            ),
            (
                FileId {
                    dev: (1 << 56) - 1,
                    ino: 1 << 56,
                },
                [(1 << 63) + 1, 1 << 49, (1 << 62) | 3, 0, 7, 5, 1, 0],
            ),
        ];
        let stamps = [(99, 7), (0, 0), (u64::MAX, u32::MAX), (1 << 50, 123_456)];
        for ((file, w), (now, tid)) in cases.into_iter().flat_map(|c| stamps.map(|s| (c, s))) {
            let mut slow = [0u8; 256];
            let mut e = Enc::new(&mut slow);
            let call = match w[5] {
                1 => WriteCall::Write,
                5 => WriteCall::Fwrite,
                _ => WriteCall::Write,
            };
            let mut w2 = w;
            w2[5] = call as u64;
            e.message(3, |e| {
                encode_event(
                    e,
                    now,
                    tid,
                    &Kind::Write {
                        file,
                        offset: w[0],
                        len: w[1],
                        signature: w[2],
                        stream: w[3] as u32,
                        hint: w[4] as u32,
                        call,
                        age_class: w[6] as u32,
                        native_signature: w[7],
                    },
                )
            });
            let want = e.bytes();
            let mut fast = [0u8; 256];
            let n = encode_write_entry(&mut fast, now, tid, file, &w2).unwrap();
            assert_eq!(&fast[..n], want, "{file:?} {w:?} {now} {tid}");
            // A buffer with less than WRITE_ENTRY_ROOM left: exact fit
            // works, one byte less does not.
            let mut exact = vec![0u8; n];
            assert_eq!(encode_write_entry(&mut exact, now, tid, file, &w2), Some(n));
            assert_eq!(exact, want);
            assert!(encode_write_entry(&mut fast[..n - 1], now, tid, file, &w2).is_none());
        }
    }

    #[test]
    fn a_coalesced_write_says_how_many_calls() {
        let f = FileId { dev: 1, ino: 2 };
        let w = [0, 50 * 4096, 9, 1, 2, WriteCall::Write as u64, 0, 0];
        for calls in [0u64, 2, 50, u32::MAX as u64] {
            let mut buf = [0u8; 256];
            let n = WriteEncoder::new(7)
                .entry(&mut buf, 1 << 40, f, &w, calls)
                .unwrap();
            let b = wire::EventBatch::decode(&buf[..n]).unwrap();
            let Some(wire::event::Kind::Write(e)) = &b.events[0].kind else {
                panic!("not a write")
            };
            assert_eq!((e.len, e.calls as u64, e.signature), (50 * 4096, calls, 9));
        }
    }

    #[test]
    fn a_reused_write_encoder_tracks_files() {
        let files = [
            FileId { dev: 1, ino: 2 },
            FileId { dev: 1, ino: 2 },
            FileId {
                dev: 2049,
                ino: 1 << 33,
            },
            FileId::default(),
            FileId { dev: 1, ino: 2 },
        ];
        let mut enc = WriteEncoder::new(4242);
        for (i, f) in files.into_iter().enumerate() {
            let w = [
                i as u64 * 4096,
                4096,
                0xfeed_0000 + i as u64,
                0,
                3,
                1,
                i as u64,
                i as u64 * 7,
            ];
            let mut got = [0u8; 256];
            let n = enc.entry(&mut got, 1 << 44, f, &w, 0).unwrap();
            let mut want = [0u8; 256];
            let m = encode_write_entry(&mut want, 1 << 44, 4242, f, &w).unwrap();
            assert_eq!(&got[..n], &want[..m], "{f:?}");
        }
    }

    #[test]
    fn branch_free_varints_match_the_encoder() {
        let mut values = vec![0u64, 1, 127, 128, u64::MAX, (1 << 56) - 1, 1 << 56];
        for bits in 1..64 {
            values.extend([(1u64 << bits) - 1, 1u64 << bits, (1u64 << bits) | 0x55]);
        }
        for v in values {
            let mut want = [0u8; 10];
            let mut e = Enc::new(&mut want);
            e.varint(v);
            let n = e.bytes().len();
            let mut got = [0xeeu8; 32];
            // SAFETY: 32 writable bytes.
            let end = unsafe { put_varint(got.as_mut_ptr(), v) };
            // SAFETY: end was derived from got's pointer.
            let len = unsafe { end.offset_from(got.as_ptr()) } as usize;
            assert_eq!(&got[..len], &want[..n], "{v:#x}");
        }
    }

    #[test]
    fn varint_lengths() {
        let mut values = vec![0u64, 1, 127, 128, 16383, 16384, u64::MAX];
        for bits in 1..64 {
            values.extend([(1u64 << bits) - 1, 1u64 << bits]);
        }
        for v in values {
            let mut b = [0u8; 10];
            let mut e = Enc::new(&mut b);
            e.varint(v);
            assert_eq!(e.bytes().len(), varint_len(v), "{v}");
        }
    }

    #[test]
    fn overflow_is_reported_not_panicking() {
        let mut b = [0u8; 8];
        let mut e = Enc::new(&mut b);
        e.bytes_field(1, &[7u8; 20]);
        assert!(!e.ok());
    }
}
