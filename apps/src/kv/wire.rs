//! The KV wire format: a batch of messages in one UDP payload.
//!
//! All integers are little-endian.
//!
//! ```text
//! batch header (4 bytes)
//!   0  u16  magic      0x4B56
//!   2  u8   kind       0 = requests, 1 = responses
//!   3  u8   count      messages that follow, 1..=MAX_BATCH
//! message (20-byte header, then key, then value), `count` times
//!   0  u8   op         1 = GET, 2 = SET, 3 = DELETE
//!   1  u8   status     0 in requests; a Status code in responses
//!   2  u16  key_len    bytes of key that follow the header
//!   4  u16  value_len  bytes of value that follow the key
//!   6  u16  reserved   written as 0, ignored when read
//!   8  u64  key_hash   the client's hash of the key (crate::kv::key_hash)
//!  16  u32  opaque     chosen by the client, echoed in the response
//!  20  key, then value
//! ```
//!
//! Requests: GET and DELETE carry a key and no value; SET carries both.
//! Responses: one per request, in request order, with the request's op,
//! key hash and opaque, no key, and for a successful GET the value.

/// First two bytes of every batch.
pub const MAGIC: u16 = 0x4B56;
/// Length of the batch header.
pub const BATCH_HEADER_LEN: usize = 4;
/// Length of a message header.
pub const MESSAGE_HEADER_LEN: usize = 20;
/// Most messages in one batch: every response header must fit in one
/// frame whatever the requests were.
pub const MAX_BATCH: usize = 32;

/// The operation of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Op {
    /// Read a key's value.
    Get = 1,
    /// Store a value under a key.
    Set = 2,
    /// Remove a key.
    Delete = 3,
}

impl Op {
    /// The op with this wire code.
    pub fn from_u8(v: u8) -> Option<Op> {
        match v {
            1 => Some(Op::Get),
            2 => Some(Op::Set),
            3 => Some(Op::Delete),
            _ => None,
        }
    }
}

/// The result of a request, carried in its response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Status {
    /// Done; a GET response carries the value.
    Success = 0,
    /// GET or DELETE of a key that is not stored (never stored, deleted,
    /// or evicted).
    NotFound = 1,
    /// Unknown op code.
    BadOp = 2,
    /// Key length zero or too long, or a value on a GET/DELETE, or lengths
    /// that run past the end of the datagram.
    Malformed = 3,
    /// The key hash belongs to another core's partition.
    WrongPartition = 4,
    /// The item is too large for the store.
    TooLarge = 5,
    /// The value did not fit in the response frame; the GET may be retried
    /// in a smaller batch.
    NoRoom = 6,
}

impl Status {
    /// The status with this wire code.
    pub fn from_u8(v: u8) -> Option<Status> {
        Some(match v {
            0 => Status::Success,
            1 => Status::NotFound,
            2 => Status::BadOp,
            3 => Status::Malformed,
            4 => Status::WrongPartition,
            5 => Status::TooLarge,
            6 => Status::NoRoom,
            _ => return None,
        })
    }
}

/// Whether a batch holds requests or responses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum BatchKind {
    /// Client to server.
    Request = 0,
    /// Server to client.
    Response = 1,
}

/// One message, borrowed from (or to be written into) a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    /// Op code (raw, so unknown codes can be answered).
    pub op: u8,
    /// Status code (raw).
    pub status: u8,
    /// Hash of the key.
    pub key_hash: u64,
    /// Client's tag, echoed.
    pub opaque: u32,
    /// The key.
    pub key: &'a [u8],
    /// The value.
    pub value: &'a [u8],
}

impl Message<'_> {
    /// The op, if the code is known.
    pub fn op(&self) -> Option<Op> {
        Op::from_u8(self.op)
    }

    /// The status, if the code is known.
    pub fn status(&self) -> Option<Status> {
        Status::from_u8(self.status)
    }

    /// Bytes this message takes on the wire.
    pub fn wire_len(&self) -> usize {
        MESSAGE_HEADER_LEN + self.key.len() + self.value.len()
    }
}

/// The batch header is unusable; nothing in the datagram can be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum BatchError {
    /// Shorter than the batch header.
    #[error("datagram shorter than the batch header")]
    Truncated,
    /// Wrong magic number.
    #[error("bad magic {0:#06x}")]
    BadMagic(u16),
    /// Unknown batch kind.
    #[error("unknown batch kind {0}")]
    BadKind(u8),
    /// A batch of zero messages.
    #[error("empty batch")]
    Empty,
    /// More than [`MAX_BATCH`] messages.
    #[error("batch of {0} messages exceeds the limit")]
    TooMany(u8),
}

/// A message could not be framed; the rest of the batch is unreadable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum MessageError {
    /// The datagram ends inside a message header.
    #[error("datagram ends inside a message header")]
    TruncatedHeader,
    /// The header's key and value lengths run past the datagram; the
    /// header's fields (op, hash, opaque) are given so it can be answered.
    #[error("message lengths run past the datagram")]
    Overrun {
        /// Op code of the unreadable message.
        op: u8,
        /// Its key hash.
        key_hash: u64,
        /// Its opaque tag.
        opaque: u32,
    },
}

/// Reads the messages of a batch in order. Iteration ends after `count`
/// messages or at the first framing error.
#[derive(Clone, Debug)]
pub struct BatchReader<'a> {
    rest: &'a [u8],
    kind: BatchKind,
    count: u8,
    remaining: u8,
}

impl<'a> BatchReader<'a> {
    /// Validates the batch header of `payload`.
    pub fn new(payload: &'a [u8]) -> Result<Self, BatchError> {
        if payload.len() < BATCH_HEADER_LEN {
            return Err(BatchError::Truncated);
        }
        let magic = u16::from_le_bytes([payload[0], payload[1]]);
        if magic != MAGIC {
            return Err(BatchError::BadMagic(magic));
        }
        let kind = match payload[2] {
            0 => BatchKind::Request,
            1 => BatchKind::Response,
            k => return Err(BatchError::BadKind(k)),
        };
        let count = payload[3];
        if count == 0 {
            return Err(BatchError::Empty);
        }
        if usize::from(count) > MAX_BATCH {
            return Err(BatchError::TooMany(count));
        }
        Ok(BatchReader {
            rest: &payload[BATCH_HEADER_LEN..],
            kind,
            count,
            remaining: count,
        })
    }

    /// Requests or responses.
    pub fn kind(&self) -> BatchKind {
        self.kind
    }

    /// The message count the header announced (not `Iterator::count`,
    /// which would consume the reader).
    pub fn announced(&self) -> usize {
        usize::from(self.count)
    }
}

impl<'a> Iterator for BatchReader<'a> {
    type Item = Result<Message<'a>, MessageError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let Some((head, body)) = self.rest.split_first_chunk::<MESSAGE_HEADER_LEN>() else {
            self.remaining = 0;
            return Some(Err(MessageError::TruncatedHeader));
        };
        // Fixed offsets in a fixed-size header: no bounds checks.
        let key_len = usize::from(u16::from_le_bytes([head[2], head[3]]));
        let value_len = usize::from(u16::from_le_bytes([head[4], head[5]]));
        let key_hash = u64::from_le_bytes(*head[8..].first_chunk::<8>().expect("8 bytes"));
        let opaque = u32::from_le_bytes(*head[16..].first_chunk::<4>().expect("4 bytes"));
        let Some(kv) = body.get(..key_len + value_len) else {
            self.remaining = 0;
            return Some(Err(MessageError::Overrun {
                op: head[0],
                key_hash,
                opaque,
            }));
        };
        let (key, value) = kv.split_at(key_len);
        self.rest = &body[kv.len()..];
        Some(Ok(Message {
            op: head[0],
            status: head[1],
            key_hash,
            opaque,
            key,
            value,
        }))
    }
}

/// The key hash of the message whose header starts `b` (at least
/// [`MESSAGE_HEADER_LEN`] bytes), and the message's length with its key and
/// value (which `b` may not hold).
#[inline]
pub fn header_fields(b: &[u8]) -> (u64, usize) {
    let key_len = usize::from(u16::from_le_bytes([b[2], b[3]]));
    let value_len = usize::from(u16::from_le_bytes([b[4], b[5]]));
    let mut hash = [0u8; 8];
    hash.copy_from_slice(&b[8..16]);
    (
        u64::from_le_bytes(hash),
        MESSAGE_HEADER_LEN + key_len + value_len,
    )
}

/// Copies `src` into `dst` (of the same length). Keys and values are
/// usually a few bytes (the standard workload's are 8), where a call into
/// the library's memcpy costs more than the copy: up to 16 bytes are moved
/// as two overlapping words.
#[inline(always)]
pub(crate) fn copy_short(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    assert_eq!(dst.len(), n, "copy_short needs equal lengths");
    if (8..=16).contains(&n) {
        let lo: [u8; 8] = src[..8].try_into().expect("8 bytes");
        let hi: [u8; 8] = src[n - 8..].try_into().expect("8 bytes");
        dst[..8].copy_from_slice(&lo);
        dst[n - 8..].copy_from_slice(&hi);
    } else if n < 8 {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = *s;
        }
    } else {
        dst.copy_from_slice(src);
    }
}

/// `a == b`, with keys of 8 to 16 bytes compared as two overlapping words
/// instead of through a call to memcmp.
#[inline(always)]
pub(crate) fn eq_short(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if (8..=16).contains(&n) {
        let w =
            |s: &[u8], at: usize| u64::from_ne_bytes(s[at..at + 8].try_into().expect("8 bytes"));
        (w(a, 0) ^ w(b, 0)) | (w(a, n - 8) ^ w(b, n - 8)) == 0
    } else {
        a == b
    }
}

/// The buffer has no room for what was to be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("no room in the buffer")]
pub struct NoRoom;

/// Writes a batch into a caller's buffer; the header's count is kept up to
/// date after every message, so the buffer always holds a valid batch.
#[derive(Debug)]
pub struct BatchWriter<'a> {
    buf: &'a mut [u8],
    len: usize,
    count: u8,
}

impl<'a> BatchWriter<'a> {
    /// Starts a batch of `kind` at the start of `buf`.
    pub fn new(buf: &'a mut [u8], kind: BatchKind) -> Result<Self, NoRoom> {
        if buf.len() < BATCH_HEADER_LEN {
            return Err(NoRoom);
        }
        buf[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        buf[2] = kind as u8;
        buf[3] = 0;
        Ok(BatchWriter {
            buf,
            len: BATCH_HEADER_LEN,
            count: 0,
        })
    }

    /// Appends a message. Fails if the buffer is full, the batch already
    /// holds [`MAX_BATCH`] messages, or a length exceeds 16 bits.
    pub fn push(&mut self, m: &Message<'_>) -> Result<(), NoRoom> {
        let need = m.wire_len();
        if usize::from(self.count) == MAX_BATCH
            || need > self.remaining()
            || m.key.len() > usize::from(u16::MAX)
            || m.value.len() > usize::from(u16::MAX)
        {
            return Err(NoRoom);
        }
        let out = &mut self.buf[self.len..self.len + need];
        // The header is built in registers and stored at once, and short
        // keys and values are copied without a call to memcpy: field by
        // field with library copies this cost the server ~110 instructions
        // a response (see the `kv_rate` example).
        let mut h = [0u8; MESSAGE_HEADER_LEN];
        h[0] = m.op;
        h[1] = m.status;
        h[2..4].copy_from_slice(&(m.key.len() as u16).to_le_bytes());
        h[4..6].copy_from_slice(&(m.value.len() as u16).to_le_bytes());
        h[8..16].copy_from_slice(&m.key_hash.to_le_bytes());
        h[16..20].copy_from_slice(&m.opaque.to_le_bytes());
        let (head, body) = out.split_at_mut(MESSAGE_HEADER_LEN);
        head.copy_from_slice(&h);
        let (k, v) = body.split_at_mut(m.key.len());
        copy_short(k, m.key);
        copy_short(v, m.value);
        self.len += need;
        self.count += 1;
        self.buf[3] = self.count;
        Ok(())
    }

    /// Appends a keyless message, as every response is: [`BatchWriter::push`]
    /// of `Message { op, status, key_hash, opaque, key: &[], value }`,
    /// writing the same bytes. The server answers every request through
    /// this; its header goes out as three stores instead of being built
    /// from a [`Message`] (which cost the server ~90 instructions a
    /// response, see the `kv_rate` example).
    #[inline(always)]
    pub fn push_reply(
        &mut self,
        op: u8,
        status: u8,
        key_hash: u64,
        opaque: u32,
        value: &[u8],
    ) -> Result<(), NoRoom> {
        let need = MESSAGE_HEADER_LEN + value.len();
        if usize::from(self.count) == MAX_BATCH
            || need > self.remaining()
            || value.len() > usize::from(u16::MAX)
        {
            return Err(NoRoom);
        }
        let out = &mut self.buf[self.len..self.len + need];
        let (head, body) = out.split_at_mut(MESSAGE_HEADER_LEN);
        // Bytes 0..8: op, status, key_len 0, value_len, reserved 0.
        let w0 = u64::from(op) | u64::from(status) << 8 | (value.len() as u64) << 32;
        head[..8].copy_from_slice(&w0.to_le_bytes());
        head[8..16].copy_from_slice(&key_hash.to_le_bytes());
        head[16..20].copy_from_slice(&opaque.to_le_bytes());
        copy_short(body, value);
        self.len += need;
        self.count += 1;
        self.buf[3] = self.count;
        Ok(())
    }

    /// Bytes still free in the buffer.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.len
    }

    /// Messages written so far.
    pub fn count(&self) -> usize {
        usize::from(self.count)
    }

    /// Bytes written so far (the batch's length).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if no message was written.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// Encodes `messages` as one batch into `buf`; returns its length.
pub fn encode_batch(
    buf: &mut [u8],
    kind: BatchKind,
    messages: &[Message<'_>],
) -> Result<usize, NoRoom> {
    let mut w = BatchWriter::new(buf, kind)?;
    for m in messages {
        w.push(m)?;
    }
    Ok(w.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg<'a>(op: Op, key: &'a [u8], value: &'a [u8], opaque: u32) -> Message<'a> {
        Message {
            op: op as u8,
            status: 0,
            key_hash: 0x0102_0304_0506_0708 ^ u64::from(opaque),
            opaque,
            key,
            value,
        }
    }

    #[test]
    fn exact_byte_layout() {
        let mut buf = [0u8; 64];
        let m = msg(Op::Set, b"k1", b"vvv", 0xAABBCCDD);
        let len = encode_batch(&mut buf, BatchKind::Request, &[m]).unwrap();
        assert_eq!(len, 4 + 20 + 2 + 3);
        assert_eq!(&buf[..4], &[0x56, 0x4B, 0, 1]);
        assert_eq!(&buf[4..8], &[2, 0, 2, 0]);
        assert_eq!(&buf[8..12], &[3, 0, 0, 0]);
        assert_eq!(
            &buf[12..20],
            &(0x0102_0304_0506_0708u64 ^ 0xAABBCCDD).to_le_bytes()
        );
        assert_eq!(&buf[20..24], &[0xDD, 0xCC, 0xBB, 0xAA]);
        assert_eq!(&buf[24..29], b"k1vvv");
    }

    #[test]
    fn push_reply_writes_what_push_writes() {
        let values: [&[u8]; 5] = [b"", b"v", b"value-22", b"sixteen-bytes-ok", &[7u8; 300]];
        for (i, value) in values.into_iter().enumerate() {
            let (mut a, mut b) = ([0xEEu8; 512], [0x11u8; 512]);
            let mut wa = BatchWriter::new(&mut a, BatchKind::Response).unwrap();
            let mut wb = BatchWriter::new(&mut b, BatchKind::Response).unwrap();
            let status = i as u8 % 7;
            let (hash, opaque) = (0xF0E1_D2C3_B4A5_9687 ^ i as u64, 0x0102_0304 + i as u32);
            wa.push(&Message {
                op: 1 + i as u8 % 3,
                status,
                key_hash: hash,
                opaque,
                key: &[],
                value,
            })
            .unwrap();
            wb.push_reply(1 + i as u8 % 3, status, hash, opaque, value)
                .unwrap();
            assert_eq!((wa.len(), wa.count()), (wb.len(), wb.count()));
            let n = wa.len();
            assert_eq!(&a[..n], &b[..n], "value of {} bytes", value.len());
        }
        // The same limits as push.
        let mut small = [0u8; 30];
        let mut w = BatchWriter::new(&mut small, BatchKind::Response).unwrap();
        assert_eq!(w.push_reply(1, 0, 0, 0, b"1234567"), Err(NoRoom));
        w.push_reply(1, 0, 0, 0, b"123456").unwrap();
        assert_eq!(w.remaining(), 0);
    }

    #[test]
    fn round_trip() {
        let msgs = [
            msg(Op::Get, b"key-one!", b"", 1),
            msg(Op::Set, b"key-two!", b"value-22", 2),
            msg(Op::Delete, b"k", b"", 3),
        ];
        let mut buf = [0u8; 256];
        let len = encode_batch(&mut buf, BatchKind::Response, &msgs).unwrap();
        let r = BatchReader::new(&buf[..len]).unwrap();
        assert_eq!(r.kind(), BatchKind::Response);
        assert_eq!(r.announced(), 3);
        let back: Vec<Message<'_>> = r.map(Result::unwrap).collect();
        assert_eq!(back, msgs);
        assert_eq!(back[1].op(), Some(Op::Set));
        assert_eq!(back[1].status(), Some(Status::Success));
    }

    #[test]
    fn short_copies_and_compares_agree_with_the_library() {
        let src: Vec<u8> = (1..=40).collect();
        for n in 0..=40 {
            let mut dst = vec![0u8; n];
            copy_short(&mut dst, &src[..n]);
            assert_eq!(dst, &src[..n], "copy of {n} bytes");
            for flip in 0..n {
                let mut other = src[..n].to_vec();
                other[flip] ^= 0x80;
                assert!(
                    !eq_short(&src[..n], &other),
                    "{n} bytes, byte {flip} differs"
                );
            }
            assert!(eq_short(&src[..n], &src[..n]), "{n} equal bytes");
            if n > 0 {
                assert!(
                    !eq_short(&src[..n], &src[..n - 1]),
                    "lengths {n}, {}",
                    n - 1
                );
            }
        }
    }

    #[test]
    fn writer_limits() {
        let mut buf = [0u8; 30];
        let mut w = BatchWriter::new(&mut buf, BatchKind::Request).unwrap();
        assert_eq!(w.push(&msg(Op::Get, b"abcdefg", b"", 1)), Err(NoRoom));
        w.push(&msg(Op::Get, b"abcdef", b"", 1)).unwrap();
        assert_eq!(w.remaining(), 0);
        assert!(BatchWriter::new(&mut [0u8; 3], BatchKind::Request).is_err());
        let mut big = [0u8; 4096];
        let mut w = BatchWriter::new(&mut big, BatchKind::Request).unwrap();
        for i in 0..MAX_BATCH as u32 {
            w.push(&msg(Op::Get, b"k", b"", i)).unwrap();
        }
        assert_eq!(w.push(&msg(Op::Get, b"k", b"", 99)), Err(NoRoom));
    }

    #[test]
    fn bad_headers() {
        assert_eq!(
            BatchReader::new(&[0x56, 0x4B, 0]).unwrap_err(),
            BatchError::Truncated
        );
        assert_eq!(
            BatchReader::new(&[0, 0, 0, 1]).unwrap_err(),
            BatchError::BadMagic(0)
        );
        assert_eq!(
            BatchReader::new(&[0x56, 0x4B, 7, 1]).unwrap_err(),
            BatchError::BadKind(7)
        );
        assert_eq!(
            BatchReader::new(&[0x56, 0x4B, 0, 0]).unwrap_err(),
            BatchError::Empty
        );
        assert_eq!(
            BatchReader::new(&[0x56, 0x4B, 0, 33]).unwrap_err(),
            BatchError::TooMany(33)
        );
    }

    #[test]
    fn framing_errors_stop_the_reader() {
        let mut buf = [0u8; 128];
        let len = encode_batch(
            &mut buf,
            BatchKind::Request,
            &[msg(Op::Set, b"kk", b"vv", 5)],
        )
        .unwrap();
        buf[3] = 3; // claims three messages
        let got: Vec<_> = BatchReader::new(&buf[..len]).unwrap().collect();
        assert_eq!(got.len(), 2);
        assert!(got[0].is_ok());
        assert_eq!(got[1], Err(MessageError::TruncatedHeader));
        // A value length beyond the datagram.
        buf[3] = 1;
        buf[8] = 200;
        let got: Vec<_> = BatchReader::new(&buf[..len]).unwrap().collect();
        assert!(matches!(
            got[..],
            [Err(MessageError::Overrun {
                op: 2,
                opaque: 5,
                ..
            })]
        ));
    }
}
