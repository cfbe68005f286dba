//! Helpers shared by the integration tests: frame builders and a plain
//! (unmapped) packet socket used as an independent peer.

#![allow(dead_code)]

use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use netview::checksum;

/// Local experimental EtherType, marking frames the tests made.
pub const TEST_ETHERTYPE: u16 = 0x88b5;

pub const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
pub const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];

/// A `len`-byte test frame: addresses, the test EtherType, `seq` and a
/// pattern derived from it.
pub fn test_frame(len: usize, seq: u32) -> Vec<u8> {
    assert!(len >= 18);
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&MAC_A);
    f.extend_from_slice(&MAC_B);
    f.extend_from_slice(&TEST_ETHERTYPE.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    while f.len() < len {
        f.push((f.len() as u32).wrapping_mul(31).wrapping_add(seq) as u8);
    }
    f
}

/// `frame` with an 802.1Q/802.1ad tag (`tpid`, `tci`) inserted after the
/// addresses.
pub fn tagged(frame: &[u8], tpid: u16, tci: u16) -> Vec<u8> {
    let mut f = frame[..12].to_vec();
    f.extend_from_slice(&tpid.to_be_bytes());
    f.extend_from_slice(&tci.to_be_bytes());
    f.extend_from_slice(&frame[12..]);
    f
}

/// Whether a frame (possibly VLAN tagged) carries the test EtherType.
pub fn is_test_frame(f: &[u8]) -> bool {
    let mut at = 12;
    while f.len() >= at + 2 {
        let ty = u16::from_be_bytes([f[at], f[at + 1]]);
        match ty {
            0x8100 | 0x88a8 => at += 4,
            _ => return ty == TEST_ETHERTYPE,
        }
    }
    false
}

/// Internet checksum of `data` (0 over a header whose checksum is right).
pub fn ip_checksum(data: &[u8]) -> u16 {
    checksum::fold(checksum::sum(0, data))
}

/// An Ethernet/IPv4/UDP frame with a valid IP header checksum and UDP
/// checksum 0 (allowed for IPv4: none computed).
pub fn udp_frame(
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let total = (20 + 8 + payload.len()) as u16;
    let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 17, 0, 0];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    let sum = ip_checksum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

/// An ARP frame: `op` 1 request, 2 reply.
pub fn arp_frame(
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    op: u16,
    sender_ip: [u8; 4],
    target_mac: [u8; 6],
    target_ip: [u8; 4],
) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&0x0806u16.to_be_bytes());
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4]);
    f.extend_from_slice(&op.to_be_bytes());
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&sender_ip);
    f.extend_from_slice(&target_mac);
    f.extend_from_slice(&target_ip);
    while f.len() < 60 {
        f.push(0);
    }
    f
}

/// The interface's MAC as `ip -n NS link show` prints it.
pub fn mac_of(ns: &rawsock::testnet::Netns, dev: &str) -> [u8; 6] {
    let out = ns.ip(&["-br", "link", "show", "dev", dev]).unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let field = text
        .split_whitespace()
        .find(|w| w.len() == 17 && w.matches(':').count() == 5)
        .unwrap_or_else(|| panic!("no MAC in {text:?}"));
    let mut mac = [0u8; 6];
    for (m, part) in mac.iter_mut().zip(field.split(':')) {
        *m = u8::from_str_radix(part, 16).unwrap();
    }
    mac
}

/// A plain `AF_PACKET` socket (one system call per frame, no ring) bound to
/// one interface: the independent peer of the ring code under test. It sees
/// VLAN-tagged frames without their tag, so tests only receive untagged
/// frames with it.
pub struct Plain {
    fd: OwnedFd,
}

impl Plain {
    /// Opens it on `iface` in the calling thread's namespace (call inside
    /// `Netns::enter`).
    pub fn open(iface: &str) -> io::Result<Plain> {
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain system call.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(proto)) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fresh descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let name = std::ffi::CString::new(iface).unwrap();
        // SAFETY: valid C string.
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if index == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: all-zero sockaddr_ll is valid.
        let mut addr: libc::sockaddr_ll = unsafe { mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = proto;
        addr.sll_ifindex = index as i32;
        // SAFETY: valid address and its size.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let size: libc::c_int = 16 << 20;
        // SAFETY: valid option value and size. Best effort.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&size as *const libc::c_int).cast(),
                4,
            );
        }
        Ok(Plain { fd })
    }

    /// Sends one frame.
    pub fn send(&self, frame: &[u8]) {
        // SAFETY: valid buffer.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        assert_eq!(
            n,
            frame.len() as isize,
            "send: {}",
            io::Error::last_os_error()
        );
    }

    /// Receives incoming test frames (skipping others and our own outgoing
    /// ones) until `count` arrived or `timeout` passed.
    pub fn recv_test_frames(&self, count: usize, timeout: Duration) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + timeout;
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        while got.len() < count {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let rc = unsafe { libc::poll(&mut pfd, 1, left.as_millis().max(1) as i32) };
            if rc <= 0 {
                continue;
            }
            // SAFETY: all-zero sockaddr_ll is valid.
            let mut from: libc::sockaddr_ll = unsafe { mem::zeroed() };
            let mut len = mem::size_of::<libc::sockaddr_ll>() as u32;
            // SAFETY: valid buffer, address and length.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                    (&mut from as *mut libc::sockaddr_ll).cast(),
                    &mut len,
                )
            };
            if n <= 0 || from.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            let frame = &buf[..n as usize];
            if is_test_frame(frame) {
                got.push(frame.to_vec());
            }
        }
        got
    }
}

/// Receives test frames from `port` until `count` arrived or `timeout`
/// passed, waiting in `wait_rx` between bursts.
pub fn rx_test_frames(
    port: &mut rawsock::AfPacket,
    count: usize,
    timeout: Duration,
) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + timeout;
    let mut got = Vec::new();
    while got.len() < count && Instant::now() < deadline {
        port.wait_rx(10).unwrap();
        port.rx_burst(64, |f| {
            if is_test_frame(f) {
                got.push(f.to_vec());
            }
        });
    }
    got
}
