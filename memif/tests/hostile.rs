//! A hostile client written here from raw sockets and its own memfd: it
//! breaks the protocol in every way we know, and the server must count,
//! disconnect and carry on (it serves a good client at the end).

mod common;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use common::{config, connect, transfer};
use memif::msg::{fixed_str, str_of, AddRing, Init, Msg, RING_FLAG_C2S, VERSION};
use memif::{Desc, Memif, Role, SocketName, COOKIE, DESC_FLAG_NEXT};

// ---- a raw control socket ----

struct Fake {
    fd: OwnedFd,
}

impl Fake {
    fn connect(path: &std::path::Path) -> Fake {
        // SAFETY: test code: plain socket syscalls on our own fds and a
        // zeroed sockaddr_un filled within its bounds.
        unsafe {
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK, 0);
            assert!(fd >= 0);
            let fd = OwnedFd::from_raw_fd(fd);
            let mut a: libc::sockaddr_un = std::mem::zeroed();
            a.sun_family = libc::AF_UNIX as _;
            for (i, b) in path.as_os_str().as_encoded_bytes().iter().enumerate() {
                a.sun_path[i] = *b as _;
            }
            let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
            assert_eq!(
                libc::connect(fd.as_raw_fd(), (&a as *const libc::sockaddr_un).cast(), len),
                0
            );
            Fake { fd }
        }
    }

    fn send_raw(&self, bytes: &[u8], fd: Option<RawFd>) {
        let mut iov = libc::iovec {
            iov_base: bytes.as_ptr() as *mut _,
            iov_len: bytes.len(),
        };
        let mut ctl = [0u64; 4];
        // SAFETY: test code: msghdr/cmsg built within the local buffers.
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
            assert_eq!(
                libc::sendmsg(self.fd.as_raw_fd(), &mh, libc::MSG_NOSIGNAL),
                bytes.len() as isize
            );
        }
    }

    fn send(&self, m: &Msg, fd: Option<RawFd>) {
        self.send_raw(&m.encode(), fd);
    }

    /// The next message from the server, polling it meanwhile; None if the
    /// server closed the socket.
    fn recv(&self, server: &mut Memif) -> Option<Msg> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut buf = [0u8; 256];
        loop {
            server.poll_control().unwrap();
            // SAFETY: reads into a local buffer of the given size.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n == 0 {
                return None;
            }
            if n > 0 {
                return Some(Msg::decode(&buf[..n as usize]).expect("server sends valid messages"));
            }
            assert!(Instant::now() < deadline, "no answer from the server");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Expects a DISCONNECT and returns its reason.
    fn refused(&self, server: &mut Memif) -> String {
        match self.recv(server) {
            Some(Msg::Disconnect { reason, .. }) => str_of(&reason),
            other => panic!("expected DISCONNECT, got {other:?}"),
        }
    }
}

// ---- its shared memory ----

struct Shm {
    ptr: *mut u8,
    len: usize,
    fd: OwnedFd,
}

impl Shm {
    fn new(len: usize, seal: bool) -> Shm {
        // SAFETY: test code: memfd + mmap of our own file.
        unsafe {
            let fd = libc::memfd_create(c"hostile".as_ptr(), libc::MFD_ALLOW_SEALING);
            assert!(fd >= 0);
            let fd = OwnedFd::from_raw_fd(fd);
            assert_eq!(libc::ftruncate(fd.as_raw_fd(), len as _), 0);
            if seal {
                assert_eq!(
                    libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK),
                    0
                );
            }
            let p = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            Shm {
                ptr: p.cast(),
                len,
                fd,
            }
        }
    }
    fn put32(&self, off: usize, v: u32) {
        assert!(off + 4 <= self.len);
        // SAFETY: in bounds of our mapping (checked).
        unsafe { std::ptr::write_unaligned(self.ptr.add(off).cast(), v) }
    }
    fn idx(&self, off: usize) -> &AtomicU16 {
        assert!(off + 2 <= self.len && off.is_multiple_of(2));
        // SAFETY: in bounds and aligned; the mapping outlives the borrow.
        unsafe { AtomicU16::from_ptr(self.ptr.add(off).cast()) }
    }
    fn desc(&self, ring: usize, slot: usize, d: Desc) {
        let off = ring + 128 + 16 * slot;
        assert!(off + 16 <= self.len);
        // SAFETY: in bounds of our mapping (checked).
        unsafe { std::ptr::write_unaligned(self.ptr.add(off).cast(), d) }
    }
    fn bytes(&self, off: usize, len: usize) -> &[u8] {
        assert!(off + len <= self.len);
        // SAFETY: in bounds of our mapping (checked).
        unsafe { std::slice::from_raw_parts(self.ptr.add(off), len) }
    }
    fn fill(&self, off: usize, data: &[u8]) {
        assert!(off + data.len() <= self.len);
        // SAFETY: in bounds of our mapping (checked).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(off), data.len()) }
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly our mapping.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

fn eventfd() -> OwnedFd {
    // SAFETY: new fd, owned here.
    unsafe { OwnedFd::from_raw_fd(libc::eventfd(0, libc::EFD_NONBLOCK)) }
}

const LOG2: u8 = 4;
const RING: usize = 128 + 16 * (1 << LOG2);
const C2S: usize = 0;
const S2C: usize = RING;
const BUFS: usize = 2 * RING;
const REGION: usize = BUFS + 32 * 2048;

/// What the fake client announces; each test breaks one thing.
struct Plan {
    region_claim: u64,
    seal: bool,
    cookie: u32,
    ring_log2: u8,
    c2s_offset: u32,
    c2s_index: u16,
    ring_region: u16,
    send_region_fd: bool,
    /// A second region, as a zero-copy client would register.
    extra_region: Option<usize>,
    /// Sent as region 0's file instead of the memfd.
    region_fd: Option<RawFd>,
    /// Sent as the client-to-server ring's eventfd instead of one.
    c2s_eventfd: Option<RawFd>,
}

impl Default for Plan {
    fn default() -> Plan {
        Plan {
            region_claim: REGION as u64,
            seal: true,
            cookie: COOKIE,
            ring_log2: LOG2,
            c2s_offset: C2S as u32,
            c2s_index: 0,
            ring_region: 0,
            send_region_fd: true,
            extra_region: None,
            region_fd: None,
            c2s_eventfd: None,
        }
    }
}

struct Client {
    sock: Fake,
    shm: Shm,
    extra: Option<Shm>,
    _efds: Vec<OwnedFd>,
}

/// Runs the handshake as planned: Ok when CONNECTED, Err(reason) when the
/// server sent DISCONNECT.
fn handshake(server: &mut Memif, path: &std::path::Path, plan: &Plan) -> Result<Client, String> {
    let sock = Fake::connect(path);
    assert!(matches!(sock.recv(server), Some(Msg::Hello(_))));
    let shm = Shm::new(REGION, plan.seal);
    for ring in [C2S, S2C] {
        shm.put32(ring, plan.cookie);
    }
    let extra = plan.extra_region.map(|len| Shm::new(len, true));
    let efds = vec![eventfd(), eventfd()];
    let mut steps: Vec<(Msg, Option<RawFd>)> = vec![(
        Msg::Init(Init {
            version: VERSION,
            id: 0,
            mode: 0,
            secret: [0; 24],
            name: fixed_str("hostile"),
        }),
        None,
    )];
    steps.push((
        Msg::AddRegion {
            index: 0,
            size: plan.region_claim,
        },
        plan.send_region_fd
            .then(|| plan.region_fd.unwrap_or(shm.fd.as_raw_fd())),
    ));
    if let Some(x) = &extra {
        steps.push((
            Msg::AddRegion {
                index: 1,
                size: x.len as u64,
            },
            Some(x.fd.as_raw_fd()),
        ));
    }
    for (flags, index, offset, efd) in [
        (
            RING_FLAG_C2S,
            plan.c2s_index,
            plan.c2s_offset,
            plan.c2s_eventfd.unwrap_or(efds[0].as_raw_fd()),
        ),
        (0, 0, S2C as u32, efds[1].as_raw_fd()),
    ] {
        steps.push((
            Msg::AddRing(AddRing {
                flags,
                index,
                region: plan.ring_region,
                offset,
                log2_ring_size: plan.ring_log2,
                private_hdr_size: 0,
            }),
            Some(efd),
        ));
    }
    steps.push((
        Msg::Connect {
            if_name: fixed_str("h0"),
        },
        None,
    ));
    for (msg, fd) in steps {
        let last = matches!(msg, Msg::Connect { .. });
        sock.send(&msg, fd);
        match sock.recv(server) {
            Some(Msg::Ack) if !last => {}
            Some(Msg::Connected { .. }) if last => {}
            Some(Msg::Disconnect { reason, .. }) => return Err(str_of(&reason)),
            other => panic!("unexpected answer {other:?} to {}", msg.kind()),
        }
    }
    Ok(Client {
        sock,
        shm,
        extra,
        _efds: efds,
    })
}

fn server(dir: &tempfile::TempDir) -> (Memif, std::path::PathBuf) {
    let path = dir.path().join("h.sock");
    let s = Memif::new(config(SocketName::Path(path.clone()), Role::Server, 6)).unwrap();
    (s, path)
}

/// After the server found something wrong on a ring: it stops at once,
/// and the next poll sends DISCONNECT.
fn expect_teardown(server: &mut Memif, c: &Client, disconnects: u64) {
    assert!(!server.is_connected());
    let reason = c.sock.refused(server);
    assert!(!reason.is_empty());
    assert_eq!(server.counters().disconnects, disconnects);
}

#[test]
fn malformed_and_out_of_order_messages_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, path) = server(&dir);
    let mut errors = 0;
    let mut refuse = |server: &mut Memif, bytes: &[u8], fd: Option<RawFd>, want: &str| {
        let f = Fake::connect(&path);
        assert!(matches!(f.recv(server), Some(Msg::Hello(_))));
        f.send_raw(bytes, fd);
        let reason = f.refused(server);
        assert!(reason.contains(want), "{reason:?} should say {want:?}");
        errors += 1;
        assert_eq!(server.counters().handshake_errors, errors);
        assert!(!server.is_connected());
    };
    refuse(&mut server, &[3, 0, 0, 2], None, "4 bytes");
    refuse(&mut server, &[0u8; 200], None, "too long");
    let mut unknown = [0u8; 128];
    unknown[0] = 42;
    refuse(
        &mut server,
        &unknown,
        None,
        "unknown control message type 42",
    );
    refuse(&mut server, &[0u8; 128], None, "type 0");
    refuse(&mut server, &Msg::Ack.encode(), None, "expected INIT");
    refuse(
        &mut server,
        &Msg::AddRegion {
            index: 0,
            size: 4096,
        }
        .encode(),
        Some(eventfd().as_raw_fd()),
        "expected INIT",
    );
    let bad_version = Msg::Init(Init {
        version: 0x0100,
        id: 0,
        mode: 0,
        secret: [0; 24],
        name: [0; 32],
    });
    refuse(&mut server, &bad_version.encode(), None, "version");
    let ip_mode = Msg::Init(Init {
        version: VERSION,
        id: 0,
        mode: 1,
        secret: [0; 24],
        name: [0; 32],
    });
    refuse(&mut server, &ip_mode.encode(), None, "ethernet");
    assert_eq!(server.counters().connects, 0);
}

#[test]
fn bad_regions_and_rings_are_refused_at_the_handshake() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, path) = server(&dir);
    let cases: Vec<(Plan, &str)> = vec![
        (
            Plan {
                send_region_fd: false,
                ..Plan::default()
            },
            "without a file descriptor",
        ),
        (
            Plan {
                region_claim: REGION as u64 * 2,
                ..Plan::default()
            },
            "smaller than",
        ),
        (
            Plan {
                seal: false,
                ..Plan::default()
            },
            "not sealed",
        ),
        (
            Plan {
                ring_log2: 20,
                ..Plan::default()
            },
            "too large",
        ),
        (
            Plan {
                c2s_index: 1,
                ..Plan::default()
            },
            "Invalid ring index",
        ),
        (
            Plan {
                cookie: 0xdead_beef,
                ..Plan::default()
            },
            "cookie",
        ),
        (
            Plan {
                c2s_offset: (REGION - 64) as u32,
                ..Plan::default()
            },
            "does not fit",
        ),
        (
            Plan {
                c2s_offset: u32::MAX - 3,
                ..Plan::default()
            },
            "does not fit",
        ),
        (
            Plan {
                c2s_offset: 4,
                ..Plan::default()
            },
            "aligned",
        ),
        (
            Plan {
                ring_region: 5,
                ..Plan::default()
            },
            "missing region",
        ),
        (
            // Rings of 2^13 descriptors run past the end of the region.
            Plan {
                ring_log2: 13,
                ..Plan::default()
            },
            "does not fit",
        ),
    ];
    for (i, (plan, want)) in cases.iter().enumerate() {
        let reason = match handshake(&mut server, &path, plan) {
            Err(r) => r,
            Ok(_) => panic!("case {i} ({want}) was accepted"),
        };
        assert!(
            reason.contains(want),
            "case {i}: {reason:?} should say {want:?}"
        );
        assert_eq!(server.counters().handshake_errors, i as u64 + 1);
    }
    // The default plan is fine.
    assert!(handshake(&mut server, &path, &Plan::default()).is_ok());
    assert!(server.is_connected());
}

#[test]
fn descriptors_outside_the_regions_end_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, path) = server(&dir);
    let bad = [
        // beyond the region
        Desc {
            flags: 0,
            region: 0,
            length: 100,
            offset: REGION as u32,
            metadata: 0,
        },
        // straddling its end
        Desc {
            flags: 0,
            region: 0,
            length: 100,
            offset: REGION as u32 - 50,
            metadata: 0,
        },
        // offset + length overflows u32
        Desc {
            flags: 0,
            region: 0,
            length: 100,
            offset: u32::MAX - 10,
            metadata: 0,
        },
        // a region that was never added
        Desc {
            flags: 0,
            region: 3,
            length: 100,
            offset: 0,
            metadata: 0,
        },
        // the second buffer of a chain is bad
        Desc {
            flags: DESC_FLAG_NEXT,
            region: 0,
            length: 100,
            offset: BUFS as u32,
            metadata: 0,
        },
    ];
    for (i, d) in bad.iter().enumerate() {
        let c = handshake(&mut server, &path, &Plan::default()).unwrap();
        c.shm.desc(C2S, 0, *d);
        c.shm.desc(
            C2S,
            1,
            Desc {
                flags: 0,
                region: 0,
                length: 4000,
                offset: (REGION - 10) as u32,
                metadata: 0,
            },
        );
        c.shm.idx(C2S + 6).store(2, Ordering::Release);
        assert_eq!(
            server.rx_burst(0, 32, |_| panic!("no frame may be delivered")),
            0
        );
        assert_eq!(server.counters().bad_descriptor, i as u64 + 1);
        expect_teardown(&mut server, &c, i as u64 + 1);
    }
}

#[test]
fn impossible_ring_indices_end_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, path) = server(&dir);

    // The client's head jumps more than the ring size ahead.
    let c = handshake(&mut server, &path, &Plan::default()).unwrap();
    c.shm.idx(C2S + 6).store(17, Ordering::Release);
    assert_eq!(server.rx_burst(0, 32, |_| panic!()), 0);
    assert_eq!(server.counters().ring_errors, 1);
    expect_teardown(&mut server, &c, 1);

    // It posts more buffers than the ring holds.
    let c = handshake(&mut server, &path, &Plan::default()).unwrap();
    c.shm.idx(S2C + 6).store(40, Ordering::Release);
    assert_eq!(server.tx_burst(0, [&[1u8; 60][..]]), 0);
    assert_eq!(server.counters().ring_errors, 2);
    assert_eq!(server.counters().link_down, 1);
    expect_teardown(&mut server, &c, 2);

    // A chain that fills the whole ring can never end.
    let c = handshake(&mut server, &path, &Plan::default()).unwrap();
    for slot in 0..16 {
        c.shm.desc(
            C2S,
            slot,
            Desc {
                flags: DESC_FLAG_NEXT,
                region: 0,
                length: 64,
                offset: (BUFS + slot * 2048) as u32,
                metadata: 0,
            },
        );
    }
    c.shm.idx(C2S + 6).store(16, Ordering::Release);
    assert_eq!(server.rx_burst(0, 32, |_| panic!()), 0);
    assert_eq!(server.counters().ring_errors, 3);
    expect_teardown(&mut server, &c, 3);
}

#[test]
fn posted_buffers_outside_the_regions_end_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, path) = server(&dir);
    let posts = [
        (0u16, REGION as u32 - 100, 2048u32),
        (0, 0, 0), // no room at all
        (9, BUFS as u32, 2048),
        (0, u32::MAX, 2048),
    ];
    for (i, (region, offset, length)) in posts.into_iter().enumerate() {
        let c = handshake(&mut server, &path, &Plan::default()).unwrap();
        c.shm.desc(
            S2C,
            0,
            Desc {
                flags: 0,
                region,
                length,
                offset,
                metadata: 0,
            },
        );
        c.shm.idx(S2C + 6).store(1, Ordering::Release);
        assert_eq!(server.tx_burst(0, [&[7u8; 60][..]]), 0);
        assert_eq!(server.counters().bad_descriptor, i as u64 + 1);
        expect_teardown(&mut server, &c, i as u64 + 1);
    }
}

#[test]
fn descriptors_into_any_registered_region_are_served() {
    // As a zero-copy client does: frames and posted buffers in region 1.
    let dir = tempfile::tempdir().unwrap();
    let (mut server, path) = server(&dir);
    let plan = Plan {
        extra_region: Some(1 << 16),
        ..Plan::default()
    };
    let c = handshake(&mut server, &path, &plan).unwrap();
    let x = c.extra.as_ref().unwrap();
    x.fill(1000, b"frame in region one");
    c.shm.fill(BUFS, b"frame in region zero");
    let d = |region, offset, length, flags| Desc {
        flags,
        region,
        length,
        offset,
        metadata: 0,
    };
    c.shm.desc(C2S, 0, d(1, 1000, 19, 0));
    c.shm.desc(C2S, 1, d(0, BUFS as u32, 20, 0));
    // A chain across both regions.
    c.shm.desc(C2S, 2, d(1, 1000, 6, DESC_FLAG_NEXT));
    c.shm.desc(C2S, 3, d(0, BUFS as u32 + 6, 14, 0));
    c.shm.idx(C2S + 6).store(4, Ordering::Release);
    let mut got = Vec::new();
    assert_eq!(server.rx_burst(0, 32, |f| got.push(f.to_vec())), 3);
    assert_eq!(
        got,
        [
            &b"frame in region one"[..],
            b"frame in region zero",
            b"frame in region zero"
        ]
    );
    assert_eq!(
        c.shm.idx(C2S + 64).load(Ordering::Acquire),
        4,
        "tail published"
    );

    // The server writes into buffers posted in region 1.
    c.shm.desc(S2C, 0, d(1, 30000, 2048, 0));
    c.shm.idx(S2C + 6).store(1, Ordering::Release);
    assert_eq!(server.tx_burst(0, [&b"hello region one"[..]]), 1);
    assert_eq!(c.shm.idx(S2C + 64).load(Ordering::Acquire), 1);
    assert_eq!(x.bytes(30000, 16), b"hello region one");
    assert!(server.is_connected());
    assert_eq!(server.counters().bad_descriptor, 0);
}

#[test]
fn a_silent_client_times_out_and_the_server_serves_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, path) = server(&dir);
    let silent = Fake::connect(&path);
    assert!(matches!(silent.recv(&mut server), Some(Msg::Hello(_))));
    let reason = silent.refused(&mut server);
    assert!(reason.contains("timed out"), "{reason}");
    assert_eq!(server.counters().handshake_errors, 1);

    // A hostile client that vanished mid-handshake leaves nothing behind.
    let f = Fake::connect(&path);
    assert!(matches!(f.recv(&mut server), Some(Msg::Hello(_))));
    drop(f);

    let mut good = Memif::new(config(SocketName::Path(path), Role::Client, 6)).unwrap();
    connect(&mut server, &mut good);
    assert_eq!(transfer(&mut good, &mut server, 0, 500, 2048), 500);
    assert_eq!(transfer(&mut server, &mut good, 0, 500, 2048), 500);
}

/// A peer's descriptors are checked for what they are before anything
/// reads, writes, maps or even stats them: a region must be a
/// shared-memory file (a FUSE or network file could make any access wait
/// forever), an eventfd must be an eventfd (a pipe nobody writes, or such
/// a file, could block the engine).
#[test]
fn descriptors_of_the_wrong_kind_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.sock");
    let mut cfg = config(SocketName::Path(path.clone()), Role::Server, 6);
    // As for a zero-copy client: even then a region must be memory.
    cfg.allow_unsealed_regions = true;
    let mut server = Memif::new(cfg).unwrap();
    // A file on a disk filesystem (the crate's directory, not tmpfs).
    let disk = tempfile::tempfile_in(env!("CARGO_MANIFEST_DIR")).unwrap();
    disk.set_len(REGION as u64).unwrap();
    let mut pipe = [0; 2];
    // SAFETY: test code: a new pipe, its ends owned below.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    // SAFETY: both ends were just created and are owned only here.
    let (r, _w) = unsafe { (OwnedFd::from_raw_fd(pipe[0]), OwnedFd::from_raw_fd(pipe[1])) };
    let cases = [
        (
            Plan {
                region_fd: Some(disk.as_raw_fd()),
                ..Plan::default()
            },
            "not a memfd",
        ),
        (
            Plan {
                region_fd: Some(r.as_raw_fd()),
                ..Plan::default()
            },
            "not a memfd",
        ),
        (
            Plan {
                c2s_eventfd: Some(r.as_raw_fd()),
                ..Plan::default()
            },
            "not an eventfd",
        ),
        (
            Plan {
                c2s_eventfd: Some(disk.as_raw_fd()),
                ..Plan::default()
            },
            "not an eventfd",
        ),
    ];
    for (i, (plan, want)) in cases.iter().enumerate() {
        let reason = match handshake(&mut server, &path, plan) {
            Err(r) => r,
            Ok(_) => panic!("case {i} ({want}) was accepted"),
        };
        assert!(reason.contains(want), "case {i}: {reason:?}");
    }
    assert!(handshake(&mut server, &path, &Plan::default()).is_ok());
}

/// Descriptor offsets are 32-bit, so a region above 4 GiB serves only to
/// make us map more of the peer's memory; and all regions together are
/// capped (`Config::max_region_bytes`).
#[test]
fn oversized_regions_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.sock");
    let mut cfg = config(SocketName::Path(path.clone()), Role::Server, 6);
    cfg.max_region_bytes = 4 * REGION as u64;
    let mut server = Memif::new(cfg).unwrap();
    // A sparse, sealed 5 GiB memfd (no memory is used).
    let big = Shm::new(4096, false);
    assert_eq!(
        // SAFETY: test code: grows our own memfd, then seals it.
        unsafe { libc::ftruncate(big.fd.as_raw_fd(), 5 << 30) },
        0
    );
    // SAFETY: as above.
    let sealed = unsafe { libc::fcntl(big.fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK) };
    assert_eq!(sealed, 0);
    let huge = Plan {
        region_fd: Some(big.fd.as_raw_fd()),
        region_claim: 5 << 30,
        ..Plan::default()
    };
    let reason = handshake(&mut server, &path, &huge)
        .err()
        .expect("5 GiB region");
    assert!(reason.contains("4 GiB"), "{reason:?}");
    let many = Plan {
        extra_region: Some(4 * REGION),
        ..Plan::default()
    };
    let reason = handshake(&mut server, &path, &many)
        .err()
        .expect("over the total");
    assert!(reason.contains("allowed"), "{reason:?}");
    assert!(handshake(&mut server, &path, &Plan::default()).is_ok());
}

/// Connects to the abstract socket `name` from a child process running
/// as `uid` and reports the server's first answer: Some(true) for HELLO,
/// Some(false) for DISCONNECT or a closed socket, None when the test
/// cannot run (not root: the skip is recorded, and fails under CI=true).
fn first_answer_as(uid: u32, name: &str, server: &mut Memif) -> Option<bool> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        test_skips::missing("not root: cannot run a client as another user");
        return None;
    }
    // Everything the child needs is made before fork: after it, the child
    // only makes system calls.
    // SAFETY: sockaddr_un is plain old data; all-zero is valid.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as _;
    for (i, b) in name.bytes().enumerate() {
        a.sun_path[i + 1] = b as _;
    }
    let alen = (std::mem::size_of::<libc::sa_family_t>() + 1 + name.len()) as libc::socklen_t;
    // SAFETY: fork; the child below only calls async-signal-safe
    // functions (setresgid, setresuid, socket, connect, recv, usleep,
    // _exit) on its own stack and the prepared address.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        // SAFETY: as above: the child process only.
        unsafe {
            if libc::setresgid(uid, uid, uid) != 0 || libc::setresuid(uid, uid, uid) != 0 {
                libc::_exit(3);
            }
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0);
            if fd < 0 || libc::connect(fd, (&a as *const libc::sockaddr_un).cast(), alen) != 0 {
                libc::_exit(4);
            }
            let mut buf = [0u8; 256];
            for _ in 0..5000 {
                let n = libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT);
                if n == 0 {
                    libc::_exit(1);
                }
                if n >= 2 {
                    libc::_exit(match u16::from_le_bytes([buf[0], buf[1]]) {
                        2 => 0,
                        8 => 1,
                        _ => 5,
                    });
                }
                libc::usleep(1000);
            }
            libc::_exit(6);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut status = 0;
    loop {
        server.poll_control().unwrap();
        // SAFETY: waits for our own child without blocking.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            break;
        }
        assert!(Instant::now() < deadline, "the child did not finish");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(libc::WIFEXITED(status), "child status {status}");
    match libc::WEXITSTATUS(status) {
        0 => Some(true),
        1 => Some(false),
        e => panic!("the child failed ({e}: 3 setuid, 4 connect, 5 other message, 6 no answer)"),
    }
}

/// Any process in the network namespace can reach an abstract socket;
/// the server serves only its own user and those the operator lists.
#[test]
fn clients_of_other_users_are_refused_unless_listed() {
    let name = format!("memif-hostile-uid-{}", std::process::id());
    let sock = SocketName::parse(&format!("@{name}"));
    let mut server = Memif::new(config(sock.clone(), Role::Server, 6)).unwrap();
    let Some(hello) = first_answer_as(65534, &name, &mut server) else {
        return;
    };
    assert!(!hello, "a client of another user got HELLO");
    assert_eq!(server.counters().handshake_errors, 1);
    assert!(
        server.last_error().is_some_and(|e| e.contains("uid 65534")),
        "{:?}",
        server.last_error()
    );
    drop(server);
    let mut cfg = config(sock, Role::Server, 6);
    cfg.peer_uids = vec![65534];
    let mut server = Memif::new(cfg).unwrap();
    assert_eq!(first_answer_as(65534, &name, &mut server), Some(true));
    // (The child leaving mid-handshake is counted; a refusal is not.)
    assert!(!server.last_error().is_some_and(|e| e.contains("uid")));
}

// ---- a hostile server, against our client ----

/// A listening socket that accepts one connection at a time.
struct FakeServer {
    fd: OwnedFd,
}

impl FakeServer {
    fn bind(path: &std::path::Path) -> FakeServer {
        // SAFETY: test code: socket syscalls on our own fds and a zeroed
        // sockaddr_un filled within its bounds.
        unsafe {
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK, 0);
            assert!(fd >= 0);
            let fd = OwnedFd::from_raw_fd(fd);
            let mut a: libc::sockaddr_un = std::mem::zeroed();
            a.sun_family = libc::AF_UNIX as _;
            for (i, b) in path.as_os_str().as_encoded_bytes().iter().enumerate() {
                a.sun_path[i] = *b as _;
            }
            let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
            assert_eq!(
                libc::bind(fd.as_raw_fd(), (&a as *const libc::sockaddr_un).cast(), len),
                0
            );
            assert_eq!(libc::listen(fd.as_raw_fd(), 4), 0);
            FakeServer { fd }
        }
    }

    /// Waits for our client to connect, polling it meanwhile.
    fn accept(&self, client: &mut Memif) -> Fake {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            client.poll_control().unwrap();
            // SAFETY: plain syscall; a returned fd is new and ours.
            let r = unsafe {
                libc::accept4(
                    self.fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_NONBLOCK,
                )
            };
            if r >= 0 {
                // SAFETY: r was just returned by accept4 and is ours.
                let fd = unsafe { OwnedFd::from_raw_fd(r) };
                return Fake { fd };
            }
            assert!(Instant::now() < deadline, "the client did not connect");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Fake {
    /// The next message from our client and the fd that came with it,
    /// polling the client meanwhile; None if it closed the socket.
    fn recv_fd(&self, client: &mut Memif) -> Option<(Msg, Option<OwnedFd>)> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut buf = [0u8; 256];
        let mut ctl = [0u64; 8];
        loop {
            client.poll_control().unwrap();
            let mut iov = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            // SAFETY: test code: recvmsg into local buffers; an SCM_RIGHTS
            // payload is a new fd owned here.
            unsafe {
                let mut mh: libc::msghdr = std::mem::zeroed();
                mh.msg_iov = &mut iov;
                mh.msg_iovlen = 1;
                mh.msg_control = ctl.as_mut_ptr().cast();
                mh.msg_controllen = std::mem::size_of_val(&ctl) as _;
                let n = libc::recvmsg(self.fd.as_raw_fd(), &mut mh, libc::MSG_DONTWAIT);
                if n == 0 {
                    return None;
                }
                if n > 0 {
                    let c = libc::CMSG_FIRSTHDR(&mh);
                    let fd = (!c.is_null() && (*c).cmsg_type == libc::SCM_RIGHTS).then(|| {
                        OwnedFd::from_raw_fd(std::ptr::read_unaligned(
                            libc::CMSG_DATA(c).cast::<RawFd>(),
                        ))
                    });
                    let msg = Msg::decode(&buf[..n as usize]).expect("client sends valid messages");
                    return Some((msg, fd));
                }
            }
            assert!(Instant::now() < deadline, "no message from the client");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

fn hello(max_log2: u8) -> Msg {
    Msg::Hello(memif::msg::Hello {
        name: fixed_str("hostile-server"),
        min_version: VERSION,
        max_version: VERSION,
        max_region: 254,
        max_c2s_ring: 0,
        max_s2c_ring: 0,
        max_log2_ring_size: max_log2,
    })
}

/// Polls the client until `done` or panics after 10 s.
fn until(client: &mut Memif, what: &str, done: impl Fn(&Memif) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done(client) {
        client.poll_control().unwrap();
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Runs a correct handshake from the server side, mapping the client's
/// region; returns the socket, the region and the S2C ring's offset.
fn serve(fake: &Fake, client: &mut Memif) -> (Shm, usize) {
    fake.send(&hello(4), None);
    let mut region = None;
    let mut s2c = None;
    loop {
        let (msg, fd) = fake.recv_fd(client).expect("client stays");
        match msg {
            Msg::AddRegion { size, .. } => {
                let fd = fd.expect("region fd");
                let len = size as usize;
                // SAFETY: test code: maps the client's memfd.
                let p = unsafe {
                    libc::mmap(
                        std::ptr::null_mut(),
                        len,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_SHARED,
                        fd.as_raw_fd(),
                        0,
                    )
                };
                assert_ne!(p, libc::MAP_FAILED);
                region = Some(Shm {
                    ptr: p.cast(),
                    len,
                    fd,
                });
            }
            Msg::AddRing(r) if r.flags & RING_FLAG_C2S == 0 => s2c = Some(r.offset as usize),
            Msg::Connect { .. } => {
                fake.send(
                    &Msg::Connected {
                        if_name: fixed_str("h"),
                    },
                    None,
                );
                break;
            }
            _ => {}
        }
        fake.send(&Msg::Ack, None);
    }
    until(client, "connected", Memif::is_connected);
    (region.expect("a region"), s2c.expect("an S2C ring"))
}

/// A server that breaks the protocol in the handshake or on the rings:
/// our client counts it, drops the connection with one clear reason, and
/// carries on; nothing crashes or hangs.
#[test]
fn a_hostile_server_is_counted_and_survived() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evil.sock");
    let evil = FakeServer::bind(&path);
    let mut client = Memif::new(config(SocketName::Path(path.clone()), Role::Client, 4)).unwrap();
    let mut errors = 0;
    let mut refused = |client: &mut Memif, fake: Fake, want: &str| {
        errors += 1;
        until(client, want, |c| c.counters().handshake_errors == errors);
        assert!(
            client.last_error().is_some_and(|e| e.contains(want)),
            "{:?} should say {want:?}",
            client.last_error()
        );
        drop(fake);
    };

    // A short message instead of HELLO.
    let f = evil.accept(&mut client);
    f.send_raw(&[2, 0, 0], None);
    refused(&mut client, f, "");
    // An incompatible version.
    let f = evil.accept(&mut client);
    let mut h = hello(4).encode();
    h[34..38].copy_from_slice(&[0, 9, 0, 9]);
    f.send_raw(&h, None);
    refused(&mut client, f, "version");
    // CONNECTED before anything was set up, with a pipe attached.
    let f = evil.accept(&mut client);
    f.send(&hello(4), None);
    assert!(matches!(f.recv_fd(&mut client), Some((Msg::Init(_), None))));
    let mut pipe = [0; 2];
    // SAFETY: test code: a new pipe, its ends owned below.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    // SAFETY: both ends were just created and are owned only here.
    let (r, _w) = unsafe { (OwnedFd::from_raw_fd(pipe[0]), OwnedFd::from_raw_fd(pipe[1])) };
    f.send(
        &Msg::Connected {
            if_name: fixed_str("x"),
        },
        Some(r.as_raw_fd()),
    );
    refused(&mut client, f, "unexpected");
    // A full handshake, then a descriptor into a region that does not
    // exist.
    let f = evil.accept(&mut client);
    let (shm, s2c) = serve(&f, &mut client);
    assert_eq!(client.queues(), (1, 1));
    shm.desc(
        s2c,
        0,
        Desc {
            flags: 0,
            region: 7,
            length: 60,
            offset: 0,
            metadata: 0,
        },
    );
    shm.idx(s2c + 64).store(1, Ordering::Release);
    assert_eq!(client.rx_burst(0, 32, |_| panic!("delivered")), 0);
    assert_eq!(client.counters().bad_descriptor, 1);
    until(&mut client, "teardown", |c| !c.is_connected());
    assert!(matches!(
        f.recv_fd(&mut client),
        Some((Msg::Disconnect { .. }, _))
    ));
    drop((f, shm));
    // A tail moved far beyond what the client posted.
    let f = evil.accept(&mut client);
    let (shm, s2c) = serve(&f, &mut client);
    shm.idx(s2c + 64).store(5000, Ordering::Release);
    assert_eq!(client.rx_burst(0, 32, |_| panic!("delivered")), 0);
    assert_eq!(client.counters().ring_errors, 1);
    until(&mut client, "teardown", |c| !c.is_connected());
    drop((f, shm));
    // The client still works with a well-behaved server afterwards.
    let f = evil.accept(&mut client);
    let (_shm, _s2c) = serve(&f, &mut client);
    assert!(client.is_connected());
    assert_eq!(client.counters().connects, 3);
}
