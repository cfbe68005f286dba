//! Target `memif`: a memif server (crate `memif`) against a hostile client
//! driven by the input, over a real control socket and shared memory.
//!
//! First, control messages as bytes: the input's first byte says how many
//! 128-byte messages follow to decode. Each decodes ([`Msg::decode`]) to a
//! message whose type is bytes 0-1, or is refused as an unknown type
//! (exactly the types outside ACK..DISCONNECT); a decoded message encodes
//! back to the same message, and its encoding is stable. A message of any
//! other length is refused for its size.
//!
//! Then a session: the client connects to a server and sends the messages
//! the input chooses (INIT, ADD_REGION with its memfd, sealed or not,
//! ADD_RING with an eventfd, CONNECT, DISCONNECT, raw bytes of any type or
//! length, with fields valid, off by a little or arbitrary), and once the
//! server has answered CONNECTED, moves the rings as the input says:
//! descriptors with any region, offset, length and flags, heads moved by
//! any amount, cookies and tails overwritten, while the server receives
//! and sends. Checked throughout:
//! * every message the server sends decodes, and it answers or refuses
//!   (DISCONNECT with a reason, or closing the socket) rather than wait;
//! * every frame the server receives is at most `max_frame` bytes, and it
//!   delivers no more frames than the client published descriptors for;
//! * no counter goes backwards, and a refused handshake or a torn-down
//!   connection is counted;
//! * after the session the server still works: a new connection is
//!   greeted with HELLO.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};

use memif::msg::{fixed_str, AddRing, DecodeError, Init, Msg, MSG_SIZE, RING_FLAG_C2S, VERSION};
use memif::{Config, Counters, Desc, Memif, Role, SocketName, COOKIE, DESC_FLAG_NEXT};

use crate::input::Input;

/// log2 of the descriptors of the client's rings.
const LOG2: u8 = 3;
const RING: usize = 128 + 16 * (1 << LOG2);
const C2S: usize = 0;
const S2C: usize = RING;
const BUFS: usize = 2 * RING;
const BUF_SIZE: usize = 2048;
const REGION: usize = BUFS + (2 << LOG2) * BUF_SIZE;
/// The server's longest frame.
const MAX_FRAME: u32 = 4096;
/// Messages and data-path operations decoded from the input, at most.
const MAX_MSGS: usize = 16;
const MAX_OPS: usize = 64;
/// Polls the server gets to answer a message.
const POLLS: usize = 4;

pub fn run(data: &[u8]) {
    summary(data);
}

/// What a run did: whether the handshake completed, and the server's
/// counters at the end of the session (before the second client).
#[derive(Debug)]
pub struct Summary {
    pub connected: bool,
    pub counters: Counters,
}

/// Runs the target on `data` (checking everything `run` checks) and says
/// what happened.
pub fn summary(data: &[u8]) -> Summary {
    let mut inp = Input::new(data);
    for _ in 0..inp.u8() % 4 {
        check_decode(inp.bytes(MSG_SIZE));
    }
    session(&mut inp)
}

/// The decoding invariants for one message's bytes.
fn check_decode(b: &[u8]) {
    match Msg::decode(b) {
        Ok(m) => {
            assert_eq!(b.len(), MSG_SIZE);
            let e = m.encode();
            assert_eq!(e[..2], b[..2], "type of {m:?}");
            assert_eq!(Msg::decode(&e).as_ref(), Ok(&m));
            assert_eq!(Msg::decode(&e).map(|m| m.encode()), Ok(e));
        }
        Err(DecodeError::BadSize(n)) => {
            assert_eq!(n, b.len());
            assert_ne!(n, MSG_SIZE);
        }
        Err(DecodeError::UnknownType(t)) => {
            assert_eq!(b.len(), MSG_SIZE);
            assert_eq!(t, u16::from_le_bytes([b[0], b[1]]));
            assert!(!(1..=8).contains(&t), "type {t} refused");
        }
    }
}

/// A name no other run (in this process or another) uses.
fn socket_name() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "@enso-fuzz-memif-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn session(inp: &mut Input<'_>) -> Summary {
    let name = socket_name();
    let mut cfg = Config::new(SocketName::parse(&name), Role::Server);
    cfg.log2_ring_size = LOG2;
    cfg.max_frame = MAX_FRAME;
    cfg.name = "fuzz-server".into();
    let mut server = Memif::new(cfg).expect("server");
    let mut seen = server.counters().clone();
    let mut c = Client::connect(&name);
    let mut ended = !matches!(c.answer(&mut server, &mut seen), Answer::Msg(Msg::Hello(_)));
    let mut connected = false;
    let mut msgs = 0;
    while !ended && !connected && !inp.is_empty() && msgs < MAX_MSGS {
        msgs += 1;
        let (bytes, fd) = c.message(inp);
        c.send(&bytes, fd);
        match c.answer(&mut server, &mut seen) {
            Answer::Msg(Msg::Ack) | Answer::Nothing => {}
            Answer::Msg(Msg::Connected { .. }) => connected = true,
            Answer::Msg(Msg::Disconnect { .. }) | Answer::Closed => ended = true,
            Answer::Msg(m) => panic!("server answered {} to a client", m.kind()),
        }
    }
    if connected {
        assert!(server.is_connected());
        assert_eq!(server.counters().connects, 1);
        data_path(inp, &mut c, &mut server, &mut seen);
    }
    if ended && !connected {
        assert!(
            server.counters().handshake_errors >= 1,
            "a refusal is counted"
        );
    }
    drop(c);
    let summary = Summary {
        connected,
        counters: server.counters().clone(),
    };
    // The server carries on: a new client is greeted.
    let c = Client::connect(&name);
    match c.answer(&mut server, &mut seen) {
        Answer::Msg(Msg::Hello(_)) => {}
        // Still busy with the first connection (it may not have seen the
        // close yet): it refuses the second, which is counted.
        Answer::Msg(Msg::Disconnect { .. }) | Answer::Closed => {}
        other => panic!("a new client got {other:?}"),
    }
    summary
}

/// What the server did about a message.
#[derive(Debug)]
enum Answer {
    Msg(Msg),
    Nothing,
    Closed,
}

/// The hostile client: a raw control socket and its own region.
struct Client {
    sock: OwnedFd,
    shm: Shm,
    /// Descriptors it sent (eventfds, region files), kept open.
    efds: Vec<OwnedFd>,
    /// Descriptors published on the C2S ring (head moves), in all.
    published: u64,
    c2s_head: u16,
    s2c_head: u16,
}

impl Client {
    fn connect(name: &str) -> Client {
        let path = name.strip_prefix('@').expect("abstract name").as_bytes();
        // SAFETY: plain socket calls on a new fd this value owns, and a
        // zeroed sockaddr_un filled within its bounds (the name is short).
        let sock = unsafe {
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK, 0);
            assert!(fd >= 0, "socket");
            let fd = OwnedFd::from_raw_fd(fd);
            let mut a: libc::sockaddr_un = std::mem::zeroed();
            a.sun_family = libc::AF_UNIX as _;
            for (i, b) in path.iter().enumerate() {
                a.sun_path[i + 1] = *b as _;
            }
            let len = std::mem::size_of::<libc::sa_family_t>() + 1 + path.len();
            let r = libc::connect(
                fd.as_raw_fd(),
                (&a as *const libc::sockaddr_un).cast(),
                len as libc::socklen_t,
            );
            assert_eq!(r, 0, "connect: {}", std::io::Error::last_os_error());
            fd
        };
        Client {
            sock,
            shm: Shm::new(REGION),
            efds: Vec::new(),
            published: 0,
            c2s_head: 0,
            s2c_head: 0,
        }
    }

    fn send(&self, bytes: &[u8], fd: Option<RawFd>) {
        let mut iov = libc::iovec {
            iov_base: bytes.as_ptr() as *mut _,
            iov_len: bytes.len(),
        };
        let mut ctl = [0u64; 4];
        // SAFETY: the msghdr and its one cmsg are built inside the local
        // buffers; sendmsg only reads them.
        unsafe {
            let mut mh: libc::msghdr = std::mem::zeroed();
            mh.msg_iov = &mut iov;
            mh.msg_iovlen = 1;
            if let Some(fd) = fd {
                mh.msg_control = ctl.as_mut_ptr().cast();
                mh.msg_controllen = libc::CMSG_SPACE(4) as _;
                let c = libc::CMSG_FIRSTHDR(&mh);
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_RIGHTS;
                (*c).cmsg_len = libc::CMSG_LEN(4) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), fd);
            }
            // The server may have closed the socket already: then the
            // send fails, and the next answer says so.
            libc::sendmsg(self.sock.as_raw_fd(), &mh, libc::MSG_NOSIGNAL);
        }
    }

    /// Polls the server a few times and takes its answer, if any.
    fn answer(&self, server: &mut Memif, seen: &mut Counters) -> Answer {
        let mut buf = [0u8; 256];
        for _ in 0..POLLS {
            server.poll_control().expect("local failure in the server");
            check_counters(server, seen);
            // SAFETY: reads into a local buffer of its size.
            let n = unsafe {
                libc::recv(
                    self.sock.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n == 0 {
                return Answer::Closed;
            }
            if n > 0 {
                let m = Msg::decode(&buf[..n as usize]).expect("the server sends valid messages");
                if let Msg::Disconnect { reason, .. } = &m {
                    assert_ne!(reason[0], 0, "a DISCONNECT says why");
                }
                return Answer::Msg(m);
            }
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EAGAIN) {
                return Answer::Closed; // reset by the server
            }
        }
        Answer::Nothing
    }

    /// The next message the input chooses, with the descriptor it carries.
    fn message(&mut self, inp: &mut Input<'_>) -> (Vec<u8>, Option<RawFd>) {
        let op = inp.u8();
        let tweak = op & 0x80 != 0;
        let msg = match op % 8 {
            0 => Msg::Init(Init {
                version: if tweak { inp.u16() } else { VERSION },
                id: if tweak { inp.u32() } else { 0 },
                mode: if tweak { inp.u8() } else { 0 },
                secret: [0; 24],
                name: fixed_str("fuzz"),
            }),
            1 => {
                let size = if tweak { inp.u64() } else { REGION as u64 };
                let index = if tweak { inp.u16() } else { 0 };
                let fd = match inp.u8() % 4 {
                    0 => None,
                    // Another, smaller file than the one the rings are in.
                    1 => Some(Shm::new(REGION / 2).fd.try_clone().expect("dup")),
                    _ => Some(self.shm.fd.try_clone().expect("dup")),
                };
                let bytes = Msg::AddRegion { index, size }.encode().to_vec();
                let raw = fd.as_ref().map(|f| f.as_raw_fd());
                if let Some(f) = fd {
                    self.efds.push(f); // kept open until the run ends
                }
                return (bytes, raw);
            }
            2 => {
                let c2s = inp.bool();
                let r = AddRing {
                    flags: if c2s { RING_FLAG_C2S } else { 0 },
                    index: if tweak { inp.u16() } else { 0 },
                    region: if tweak { inp.u16() } else { 0 },
                    offset: match (tweak, c2s) {
                        (true, _) => inp.u32(),
                        (false, true) => C2S as u32,
                        (false, false) => S2C as u32,
                    },
                    log2_ring_size: if tweak { inp.u8() } else { LOG2 },
                    private_hdr_size: if tweak { inp.u16() } else { 0 },
                };
                let ring = r.offset as usize;
                if ring + 4 <= REGION && ring.is_multiple_of(4) {
                    let cookie = if inp.bool() { inp.u32() } else { COOKIE };
                    self.shm.atomic32(ring).store(cookie, Ordering::Relaxed);
                }
                // SAFETY: eventfd makes a new descriptor (checked) that
                // nothing else owns.
                let efd = unsafe {
                    let fd = libc::eventfd(0, libc::EFD_NONBLOCK);
                    assert!(fd >= 0, "eventfd");
                    OwnedFd::from_raw_fd(fd)
                };
                let raw = efd.as_raw_fd();
                self.efds.push(efd);
                return (Msg::AddRing(r).encode().to_vec(), Some(raw));
            }
            3 => Msg::Connect {
                if_name: fixed_str("fuzz0"),
            },
            4 => Msg::disconnect("fuzz"),
            5 => {
                // Raw bytes: any type, any length.
                let n = if tweak {
                    usize::from(inp.u8())
                } else {
                    MSG_SIZE
                };
                let mut b = inp.bytes(n).to_vec();
                b.resize(n, 0);
                return (b, None);
            }
            6 => Msg::Ack,
            _ => Msg::Hello(memif::msg::Hello {
                name: fixed_str("fuzz"),
                min_version: VERSION,
                max_version: VERSION,
                max_region: 0,
                max_c2s_ring: 0,
                max_s2c_ring: 0,
                max_log2_ring_size: LOG2,
            }),
        };
        (msg.encode().to_vec(), None)
    }
}

/// The connected phase: the input moves the client's side of the rings
/// and makes the server receive and send.
fn data_path(inp: &mut Input<'_>, c: &mut Client, server: &mut Memif, seen: &mut Counters) {
    let mask = (1u16 << LOG2) - 1;
    let mut delivered = 0u64;
    let mut ops = 0;
    while !inp.is_empty() && ops < MAX_OPS {
        ops += 1;
        let op = inp.u8();
        match op % 8 {
            // A descriptor in the C2S ring: a buffer of the region, or
            // anything.
            0 => {
                let slot = usize::from(inp.u8()) & usize::from(mask);
                let d = if op & 0x80 != 0 {
                    Desc {
                        flags: inp.u16(),
                        region: inp.u16(),
                        length: inp.u32(),
                        offset: inp.u32(),
                        metadata: 0,
                    }
                } else {
                    let len = u32::from(inp.u16()) % (2 * BUF_SIZE as u32);
                    Desc {
                        flags: if inp.bool() { DESC_FLAG_NEXT } else { 0 },
                        region: 0,
                        length: len,
                        offset: (BUFS + slot * BUF_SIZE) as u32,
                        metadata: 0,
                    }
                };
                c.shm.desc(C2S, slot, d);
            }
            // Publish C2S descriptors: a few, or any head at all.
            1 => {
                let by = if op & 0x80 != 0 {
                    inp.u16()
                } else {
                    u16::from(inp.u8() % 4)
                };
                c.c2s_head = c.c2s_head.wrapping_add(by);
                c.published += u64::from(by);
                c.shm.idx(C2S + 6).store(c.c2s_head, Ordering::Release);
            }
            2 => {
                let max = usize::from(inp.u8() % 16);
                let n = server.rx_burst(0, max, |f| {
                    assert!(f.len() <= MAX_FRAME as usize, "{} byte frame", f.len());
                });
                assert!(n <= max);
                delivered += n as u64;
                assert!(delivered <= c.published, "more frames than published");
            }
            // Post S2C buffers: descriptors of the region's buffers (or
            // anything), then the head.
            3 => {
                let n = inp.u8() % 4;
                for _ in 0..n {
                    let slot = usize::from(c.s2c_head & mask);
                    let d = Desc {
                        flags: 0,
                        region: if op & 0x80 != 0 { inp.u16() } else { 0 },
                        length: if op & 0x80 != 0 {
                            inp.u32()
                        } else {
                            BUF_SIZE as u32
                        },
                        offset: (BUFS + (8 + slot) * BUF_SIZE) as u32,
                        metadata: 0,
                    };
                    c.shm.desc(S2C, slot, d);
                    c.s2c_head = c.s2c_head.wrapping_add(1);
                }
                c.shm.idx(S2C + 6).store(c.s2c_head, Ordering::Release);
            }
            4 => {
                let frames: Vec<Vec<u8>> = (0..inp.u8() % 4)
                    .map(|i| vec![i; 14 + usize::from(inp.u16()) % (MAX_FRAME as usize + 64)])
                    .collect();
                let n = server.tx_burst(0, frames.iter().map(|f| &f[..]));
                assert!(n <= frames.len());
            }
            // Overwrite a ring header word (cookie, flags/head, tail).
            5 => {
                let ring = if inp.bool() { C2S } else { S2C };
                let at = [0, 4, 64][usize::from(inp.u8() % 3)];
                let v = inp.u32();
                if ring == C2S && at == 4 {
                    // The C2S head (bytes 6-7) moves too.
                    let head = (v >> 16) as u16;
                    c.published += u64::from(head.wrapping_sub(c.c2s_head));
                    c.c2s_head = head;
                }
                c.shm.atomic32(ring + at).store(v, Ordering::Release);
            }
            6 => match c.answer(server, seen) {
                Answer::Msg(Msg::Disconnect { .. }) | Answer::Closed => break,
                Answer::Nothing => {}
                Answer::Msg(m) => panic!("server sent {} while connected", m.kind()),
            },
            _ => {
                let (bytes, fd) = c.message(inp);
                c.send(&bytes, fd);
            }
        }
        check_counters(server, seen);
        if !server.is_connected() {
            // A fault tears the connection down at the next poll, with a
            // DISCONNECT or a close, and it is counted.
            let _ = c.answer(server, seen);
            assert!(!server.is_connected());
            assert_eq!(server.counters().disconnects, 1);
            break;
        }
    }
}

/// No counter goes backwards.
fn check_counters(server: &Memif, seen: &mut Counters) {
    let now = server.counters().clone();
    let pairs = [
        (now.rx_frames, seen.rx_frames),
        (now.rx_bytes, seen.rx_bytes),
        (now.tx_frames, seen.tx_frames),
        (now.tx_bytes, seen.tx_bytes),
        (now.bad_descriptor, seen.bad_descriptor),
        (now.ring_errors, seen.ring_errors),
        (now.ring_full, seen.ring_full),
        (now.oversize, seen.oversize),
        (now.link_down, seen.link_down),
        (now.connects, seen.connects),
        (now.disconnects, seen.disconnects),
        (now.handshake_errors, seen.handshake_errors),
    ];
    for (i, (a, b)) in pairs.into_iter().enumerate() {
        assert!(a >= b, "counter {i} went from {b} to {a}");
    }
    assert!(now.rx_bytes <= now.rx_frames * u64::from(MAX_FRAME));
    *seen = now;
}

/// The client's region: a sealed memfd, mapped.
struct Shm {
    ptr: *mut u8,
    len: usize,
    fd: OwnedFd,
}

impl Shm {
    fn new(len: usize) -> Shm {
        // SAFETY: a new memfd this value owns, sized, sealed against
        // shrinking (as the server asks) and mapped whole.
        unsafe {
            let fd = libc::memfd_create(c"enso-fuzz-memif".as_ptr(), libc::MFD_ALLOW_SEALING);
            assert!(fd >= 0, "memfd_create");
            let fd = OwnedFd::from_raw_fd(fd);
            assert_eq!(libc::ftruncate(fd.as_raw_fd(), len as _), 0);
            assert_eq!(
                libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK),
                0
            );
            let p = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            );
            assert_ne!(p, libc::MAP_FAILED, "mmap");
            Shm {
                ptr: p.cast(),
                len,
                fd,
            }
        }
    }

    fn idx(&self, off: usize) -> &AtomicU16 {
        assert!(off + 2 <= self.len && off.is_multiple_of(2));
        // SAFETY: in bounds and aligned (checked); the mapping outlives the
        // borrow; the server accesses it atomically too.
        unsafe { AtomicU16::from_ptr(self.ptr.add(off).cast()) }
    }

    fn atomic32(&self, off: usize) -> &AtomicU32 {
        assert!(off + 4 <= self.len && off.is_multiple_of(4));
        // SAFETY: as in `idx`.
        unsafe { AtomicU32::from_ptr(self.ptr.add(off).cast()) }
    }

    fn desc(&self, ring: usize, slot: usize, d: Desc) {
        let off = ring + 128 + 16 * slot;
        assert!(off + 16 <= self.len);
        // SAFETY: in bounds of the mapping (checked); the server reads
        // descriptors with volatile copies, published by the head's
        // Release store.
        unsafe { std::ptr::write_volatile(self.ptr.add(off).cast(), d) }
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly this value's mapping.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}
