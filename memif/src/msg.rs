//! Control-channel messages: encoding and decoding of the 128-byte memif
//! messages.
//!
//! Every message is exactly [`MSG_SIZE`] bytes, packed, little-endian. The
//! message type is a `u16` in bytes 0-1; the body starts at byte 2:
//!
//! | type | value | body (offset: field) |
//! |---|---|---|
//! | NONE | 0 | - |
//! | ACK | 1 | - |
//! | HELLO | 2 | 2: name\[32\], 34: min_version u16, 36: max_version u16, 38: max_region u16, 40: max_c2s_ring u16, 42: max_s2c_ring u16, 44: max_log2_ring_size u8 |
//! | INIT | 3 | 2: version u16, 4: id u32, 8: mode u8 (0 = ethernet), 9: secret\[24\], 33: name\[32\] |
//! | ADD_REGION | 4 | 2: index u16, 4: size u64 (+ the region's fd, SCM_RIGHTS) |
//! | ADD_RING | 5 | 2: flags u16 (1 = client-to-server), 4: index u16, 6: region u16, 8: offset u32, 12: log2_ring_size u8, 13: private_hdr_size u16 (+ an eventfd, SCM_RIGHTS) |
//! | CONNECT | 6 | 2: if_name\[32\] |
//! | CONNECTED | 7 | 2: if_name\[32\] |
//! | DISCONNECT | 8 | 2: code u32, 6: reason\[96\] |
//!
//! HELLO's `max_region`, `max_c2s_ring` and `max_s2c_ring` are the highest
//! index the server accepts, not a count. Strings are NUL-padded; a
//! sender writes at most `len - 1` bytes so that C peers find a NUL.

/// Size of every control message on the wire.
pub const MSG_SIZE: usize = 128;
/// memif protocol version 2.0.
pub const VERSION: u16 = 0x0200;
/// Interface mode "ethernet", the only one supported.
pub const MODE_ETHERNET: u8 = 0;
/// ADD_RING flag: the ring carries client-to-server frames (called "S2M",
/// slave-to-master, in older sources).
pub const RING_FLAG_C2S: u16 = 1;

const T_ACK: u16 = 1;
const T_HELLO: u16 = 2;
const T_INIT: u16 = 3;
const T_ADD_REGION: u16 = 4;
const T_ADD_RING: u16 = 5;
const T_CONNECT: u16 = 6;
const T_CONNECTED: u16 = 7;
const T_DISCONNECT: u16 = 8;

/// HELLO, sent by the server when it accepts a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub name: [u8; 32],
    pub min_version: u16,
    pub max_version: u16,
    pub max_region: u16,
    pub max_c2s_ring: u16,
    pub max_s2c_ring: u16,
    pub max_log2_ring_size: u8,
}

/// INIT, the client's first message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Init {
    pub version: u16,
    pub id: u32,
    pub mode: u8,
    pub secret: [u8; 24],
    pub name: [u8; 32],
}

/// ADD_RING body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddRing {
    pub flags: u16,
    pub index: u16,
    pub region: u16,
    pub offset: u32,
    pub log2_ring_size: u8,
    pub private_hdr_size: u16,
}

/// One control message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    Ack,
    Hello(Hello),
    Init(Init),
    AddRegion { index: u16, size: u64 },
    AddRing(AddRing),
    Connect { if_name: [u8; 32] },
    Connected { if_name: [u8; 32] },
    Disconnect { code: u32, reason: [u8; 96] },
}

/// Why a received message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("control message of {0} bytes, expected 128")]
    BadSize(usize),
    #[error("unknown control message type {0}")]
    UnknownType(u16),
}

/// Copies `s` into a NUL-padded fixed field, keeping at most `N - 1` bytes.
pub fn fixed_str<const N: usize>(s: &str) -> [u8; N] {
    let mut out = [0u8; N];
    let n = s.len().min(N - 1);
    out[..n].copy_from_slice(&s.as_bytes()[..n]);
    out
}

/// Reads a NUL-padded field as text (up to the first NUL, lossy UTF-8).
pub fn str_of(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
fn get16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn get32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn get64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
fn arr<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    b[at..at + N].try_into().expect("field within message")
}

impl Msg {
    /// A DISCONNECT carrying `reason` (truncated to 95 bytes).
    pub fn disconnect(reason: &str) -> Msg {
        Msg::Disconnect {
            code: 0,
            reason: fixed_str(reason),
        }
    }

    /// The message type's name, for error texts.
    pub fn kind(&self) -> &'static str {
        match self {
            Msg::Ack => "ACK",
            Msg::Hello(_) => "HELLO",
            Msg::Init(_) => "INIT",
            Msg::AddRegion { .. } => "ADD_REGION",
            Msg::AddRing(_) => "ADD_RING",
            Msg::Connect { .. } => "CONNECT",
            Msg::Connected { .. } => "CONNECTED",
            Msg::Disconnect { .. } => "DISCONNECT",
        }
    }

    /// The 128 bytes that go on the wire.
    pub fn encode(&self) -> [u8; MSG_SIZE] {
        let mut b = [0u8; MSG_SIZE];
        match self {
            Msg::Ack => put16(&mut b, 0, T_ACK),
            Msg::Hello(h) => {
                put16(&mut b, 0, T_HELLO);
                b[2..34].copy_from_slice(&h.name);
                put16(&mut b, 34, h.min_version);
                put16(&mut b, 36, h.max_version);
                put16(&mut b, 38, h.max_region);
                put16(&mut b, 40, h.max_c2s_ring);
                put16(&mut b, 42, h.max_s2c_ring);
                b[44] = h.max_log2_ring_size;
            }
            Msg::Init(i) => {
                put16(&mut b, 0, T_INIT);
                put16(&mut b, 2, i.version);
                put32(&mut b, 4, i.id);
                b[8] = i.mode;
                b[9..33].copy_from_slice(&i.secret);
                b[33..65].copy_from_slice(&i.name);
            }
            Msg::AddRegion { index, size } => {
                put16(&mut b, 0, T_ADD_REGION);
                put16(&mut b, 2, *index);
                put64(&mut b, 4, *size);
            }
            Msg::AddRing(r) => {
                put16(&mut b, 0, T_ADD_RING);
                put16(&mut b, 2, r.flags);
                put16(&mut b, 4, r.index);
                put16(&mut b, 6, r.region);
                put32(&mut b, 8, r.offset);
                b[12] = r.log2_ring_size;
                put16(&mut b, 13, r.private_hdr_size);
            }
            Msg::Connect { if_name } => {
                put16(&mut b, 0, T_CONNECT);
                b[2..34].copy_from_slice(if_name);
            }
            Msg::Connected { if_name } => {
                put16(&mut b, 0, T_CONNECTED);
                b[2..34].copy_from_slice(if_name);
            }
            Msg::Disconnect { code, reason } => {
                put16(&mut b, 0, T_DISCONNECT);
                put32(&mut b, 2, *code);
                b[6..102].copy_from_slice(reason);
            }
        }
        b
    }

    /// Parses one received message. Anything but exactly 128 bytes, and any
    /// type other than ACK..DISCONNECT (NONE included), is refused.
    pub fn decode(b: &[u8]) -> Result<Msg, DecodeError> {
        if b.len() != MSG_SIZE {
            return Err(DecodeError::BadSize(b.len()));
        }
        let msg = match get16(b, 0) {
            T_ACK => Msg::Ack,
            T_HELLO => Msg::Hello(Hello {
                name: arr(b, 2),
                min_version: get16(b, 34),
                max_version: get16(b, 36),
                max_region: get16(b, 38),
                max_c2s_ring: get16(b, 40),
                max_s2c_ring: get16(b, 42),
                max_log2_ring_size: b[44],
            }),
            T_INIT => Msg::Init(Init {
                version: get16(b, 2),
                id: get32(b, 4),
                mode: b[8],
                secret: arr(b, 9),
                name: arr(b, 33),
            }),
            T_ADD_REGION => Msg::AddRegion {
                index: get16(b, 2),
                size: get64(b, 4),
            },
            T_ADD_RING => Msg::AddRing(AddRing {
                flags: get16(b, 2),
                index: get16(b, 4),
                region: get16(b, 6),
                offset: get32(b, 8),
                log2_ring_size: b[12],
                private_hdr_size: get16(b, 13),
            }),
            T_CONNECT => Msg::Connect { if_name: arr(b, 2) },
            T_CONNECTED => Msg::Connected { if_name: arr(b, 2) },
            T_DISCONNECT => Msg::Disconnect {
                code: get32(b, 2),
                reason: arr(b, 6),
            },
            t => return Err(DecodeError::UnknownType(t)),
        };
        Ok(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_round_trips() {
        let msgs = [
            Msg::Ack,
            Msg::Hello(Hello {
                name: fixed_str("server"),
                min_version: VERSION,
                max_version: VERSION,
                max_region: 254,
                max_c2s_ring: 3,
                max_s2c_ring: 7,
                max_log2_ring_size: 14,
            }),
            Msg::Init(Init {
                version: VERSION,
                id: 0xdead_beef,
                mode: MODE_ETHERNET,
                secret: fixed_str("s3cret"),
                name: fixed_str("client"),
            }),
            Msg::AddRegion {
                index: 2,
                size: 0x1_2345_6789,
            },
            Msg::AddRing(AddRing {
                flags: RING_FLAG_C2S,
                index: 1,
                region: 0,
                offset: 16512,
                log2_ring_size: 10,
                private_hdr_size: 0,
            }),
            Msg::Connect {
                if_name: fixed_str("if0"),
            },
            Msg::Connected {
                if_name: fixed_str("if1"),
            },
            Msg::disconnect("bye"),
        ];
        for m in msgs {
            assert_eq!(Msg::decode(&m.encode()).unwrap(), m);
        }
    }

    #[test]
    fn field_offsets_match_the_wire_format() {
        let b = Msg::AddRing(AddRing {
            flags: 1,
            index: 0x0203,
            region: 0x0405,
            offset: 0x0a0b_0c0d,
            log2_ring_size: 9,
            private_hdr_size: 0x1112,
        })
        .encode();
        assert_eq!(
            &b[..15],
            &[5, 0, 1, 0, 3, 2, 5, 4, 0xd, 0xc, 0xb, 0xa, 9, 0x12, 0x11]
        );
        let b = Msg::Init(Init {
            version: VERSION,
            id: 7,
            mode: 0,
            secret: fixed_str("ab"),
            name: fixed_str("n"),
        })
        .encode();
        assert_eq!(&b[..11], &[3, 0, 0, 2, 7, 0, 0, 0, 0, b'a', b'b']);
        assert_eq!(b[33], b'n');
        let b = Msg::disconnect("x").encode();
        assert_eq!((b[0], b[6]), (8, b'x'));
    }

    #[test]
    fn short_long_and_unknown_messages_are_refused() {
        assert_eq!(Msg::decode(&[1, 0]), Err(DecodeError::BadSize(2)));
        assert_eq!(Msg::decode(&[0; 129]), Err(DecodeError::BadSize(129)));
        assert_eq!(Msg::decode(&[0; 128]), Err(DecodeError::UnknownType(0)));
        let mut b = [0u8; 128];
        b[0] = 9;
        assert_eq!(Msg::decode(&b), Err(DecodeError::UnknownType(9)));
    }

    #[test]
    fn strings_are_truncated_and_nul_terminated() {
        let f: [u8; 4] = fixed_str("abcdef");
        assert_eq!(&f, b"abc\0");
        assert_eq!(str_of(&f), "abc");
        assert_eq!(str_of(b"xy"), "xy");
    }
}
