//! `memif:socket=PATH[,role=server|client][,id=N][,rings=N][,ring-size=N][,buffer-size=N][,secret=S][,uid=N/N...]`:
//! a port whose peer is a DPDK (`net_memif`) or VPP application, through
//! the shared-memory packet interface, protocol 2.0, copy mode. `PATH` is a
//! filesystem socket, or `@name` for an abstract one (DPDK's default).
//!
//! Who may connect: a server serves only clients running as the NIC's own
//! user or one `uid=` lists (the kernel's record of the connecting
//! process), and with `secret=` only clients that send that secret (as
//! DPDK's and VPP's `secret=`); a client sends its `secret=`. A filesystem
//! socket is also guarded by its file permissions; an abstract one by
//! nothing else, which the port warns about when it opens.
//!
//! The rings are polled by the engine without system calls; the control
//! channel (accepting or connecting, the handshake, a peer that leaves) is
//! looked after every millisecond. Frames for a newly connected peer
//! wait until it has posted receive buffers once (a DPDK client does so
//! only when it first polls), at most 1 s and 64 frames; after that a
//! frame that finds no buffer is dropped and counted (`ring_full`).
//! Every descriptor, region, offset and length the peer gives is checked
//! against what it registered: a hostile or buggy peer gets counted drops
//! and a disconnect, never an out-of-bounds access (see the `memif`
//! crate).

use serde::{Deserialize, Serialize};

use super::staging::Staging;
use super::{Backend, BackendError, MAINTAIN_EVERY_NS};
use crate::wire::MAX_FRAME;

/// A port wired to a memif peer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemifWire {
    /// Socket path, or `@name` for an abstract socket.
    pub socket: String,
    /// Whether this side listens (the default) or connects.
    pub server: bool,
    /// Interface id the two sides agree on.
    pub id: u32,
    /// Rings in each direction.
    pub rings: u16,
    /// Descriptors per ring (power of two).
    pub ring_size: u32,
    /// Bytes per buffer.
    pub buffer_size: u32,
    /// Shared secret sent (client) or required (server) in INIT.
    #[serde(default)]
    pub secret: Option<String>,
    /// User ids served besides the NIC's own (server).
    #[serde(default)]
    pub uids: Vec<u32>,
}

impl MemifWire {
    /// Parses the options after `memif:`.
    pub fn parse(opts: &str) -> Result<Self, BackendError> {
        let mut w = MemifWire {
            socket: String::new(),
            server: true,
            id: 0,
            rings: 1,
            ring_size: 1024,
            buffer_size: 2048,
            secret: None,
            uids: Vec::new(),
        };
        let mut seen = Vec::new();
        let num = |k: &str, v: &str| -> Result<u64, BackendError> {
            v.parse().map_err(|_| {
                BackendError::Options(format!("memif option {k}: '{v}' is not a whole number"))
            })
        };
        for kv in opts.split(',').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| {
                BackendError::Options(format!("memif option '{kv}' is not key=value"))
            })?;
            if seen.contains(&k) {
                return Err(BackendError::Options(format!(
                    "memif option {k} given twice"
                )));
            }
            seen.push(k);
            match k {
                "socket" => w.socket = v.to_string(),
                "role" => {
                    w.server = match v {
                        "server" | "master" => true,
                        "client" | "slave" => false,
                        _ => return Err(BackendError::Options(format!("memif role '{v}': server or client"))),
                    }
                }
                "id" => {
                    w.id = u32::try_from(num(k, v)?)
                        .map_err(|_| BackendError::Options(format!("memif id {v}: at most {}", u32::MAX)))?
                }
                "rings" => {
                    w.rings = match num(k, v)? {
                        n @ 1..=255 => n as u16,
                        _ => return Err(BackendError::Options(format!("memif rings {v}: 1 to 255"))),
                    }
                }
                "ring-size" => {
                    w.ring_size = match num(k, v)? {
                        n if n.is_power_of_two() && (16..=32768).contains(&n) => n as u32,
                        _ => {
                            return Err(BackendError::Options(format!("memif ring-size {v}: a power of two, 16 to 32768")))
                        }
                    }
                }
                "buffer-size" => {
                    w.buffer_size = match num(k, v)? {
                        n if (128..=65536).contains(&n) => n as u32,
                        _ => return Err(BackendError::Options(format!("memif buffer-size {v}: 128 to 65536"))),
                    }
                }
                "secret" => {
                    if v.is_empty() || v.len() > 23 {
                        return Err(BackendError::Options("memif secret: 1 to 23 bytes".into()));
                    }
                    w.secret = Some(v.to_string());
                }
                "uid" => {
                    for u in v.split('/') {
                        w.uids.push(u32::try_from(num(k, u)?).map_err(|_| {
                            BackendError::Options(format!("memif uid {u}: at most {}", u32::MAX))
                        })?);
                    }
                }
                _ => {
                    return Err(BackendError::Options(format!(
                    "unknown memif option '{k}' (socket, role, id, rings, ring-size, buffer-size, secret, uid)"
                )))
                }
            }
        }
        if w.socket.is_empty() {
            return Err(BackendError::Options(
                "memif needs socket=PATH (or socket=@name for an abstract socket)".into(),
            ));
        }
        Ok(w)
    }
}

/// How long frames wait for a newly connected peer to post its first
/// receive buffers before they are dropped (ring_full), in ns of the
/// engine's clock.
pub const FIRST_POST_WAIT_NS: u64 = 1_000_000_000;

/// A port wired to a memif peer.
pub struct MemifPort {
    desc: String,
    m: memif::Memif,
    staged: Staging,
    /// Each received frame is copied here once, out of the peer's memory,
    /// before the NIC looks at it: a peer rewriting its buffer meanwhile
    /// cannot make what is classified differ from what is stored.
    rx_copy: Box<[u8]>,
    /// The connection (memif's `connects` count) whose peer has posted
    /// receive buffers at least once.
    peer_posted: u64,
    /// When the frames staged started waiting for the first buffers.
    held_since: u64,
    last_maintain: u64,
    control_errors: u64,
    /// The queue the next receive starts at (round robin over the rings).
    next_queue: u16,
}

impl std::fmt::Debug for MemifPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemifPort")
            .field("wire", &self.desc)
            .finish()
    }
}

impl MemifPort {
    /// Binds the socket (server) or prepares to connect (client).
    pub fn open(w: &MemifWire, device: &str, port: usize) -> Result<Self, BackendError> {
        let role = if w.server {
            memif::Role::Server
        } else {
            memif::Role::Client
        };
        let mut cfg = memif::Config::new(memif::SocketName::parse(&w.socket), role);
        cfg.id = w.id;
        cfg.rings = w.rings;
        cfg.log2_ring_size = w.ring_size.trailing_zeros() as u8;
        cfg.buffer_size = w.buffer_size;
        cfg.max_frame = MAX_FRAME as u32;
        cfg.name = format!("enso-{device}-{port}");
        cfg.name.truncate(31);
        cfg.secret = w.secret.clone();
        cfg.peer_uids = w.uids.clone();
        if w.server && w.socket.starts_with('@') {
            eprintln!(
                "warning: memif:socket={} is an abstract socket, which has no file \
                 permissions: any process in this network namespace can reach it \
                 (only the NIC's user{} is served{}); a filesystem path is safer",
                w.socket,
                if w.uids.is_empty() {
                    ""
                } else {
                    " and the listed uids"
                },
                if w.secret.is_some() {
                    ", with the secret"
                } else {
                    ""
                }
            );
        }
        let m = memif::Memif::new(cfg)
            .map_err(|e| BackendError::Open(format!("memif:socket={}: {e}", w.socket)))?;
        Ok(Self {
            desc: format!(
                "memif:socket={},role={}",
                w.socket,
                if w.server { "server" } else { "client" }
            ),
            m,
            staged: Staging::default(),
            rx_copy: vec![0u8; MAX_FRAME].into_boxed_slice(),
            peer_posted: 0,
            held_since: 0,
            last_maintain: 0,
            control_errors: 0,
            next_queue: 0,
        })
    }

    /// Whether to keep the staged frames a while: the peer connected but
    /// has not posted a receive buffer yet. A DPDK client posts its
    /// buffers only when it first polls, and testpmd --tx-first sends its
    /// first burst before that; an echo quicker than that first poll
    /// found no buffer, and with the whole ping-pong population dropped
    /// nothing ever came back. Once the peer has posted, frames that find
    /// no buffer are dropped (ring_full) at once, as before.
    fn wait_for_first_post(&mut self, now: u64) -> bool {
        let connection = self.m.counters().connects;
        if self.peer_posted == connection || !self.m.is_connected() {
            return false;
        }
        if self.m.tx_room(0) > 0 {
            self.peer_posted = connection;
            return false;
        }
        now.saturating_sub(self.held_since) < FIRST_POST_WAIT_NS
    }

    fn send_staged(&mut self) {
        let m = &mut self.m;
        // memif counts what it could not put on the ring (ring_full,
        // link_down, oversize) itself.
        let _ = self.staged.drain(|it| {
            let mut n = 0;
            let counted = it.inspect(|_| n += 1);
            m.tx_burst(0, counted);
            n
        });
    }
}

impl Backend for MemifPort {
    fn describe(&self) -> String {
        self.desc.clone()
    }

    fn receive(&mut self, _now: u64, budget: usize, deliver: &mut dyn FnMut(&[u8])) -> usize {
        // Also while a peer that left is drained: what it published before
        // it went still arrives.
        let (rx_queues, _) = self.m.queues();
        if rx_queues == 0 {
            return 0;
        }
        let mut n = 0;
        for i in 0..rx_queues {
            if n >= budget {
                break;
            }
            let q = (self.next_queue + i) % rx_queues.max(1);
            let copy = &mut self.rx_copy;
            n += self.m.rx_burst(q, budget - n, |f| {
                // memif delivers at most max_frame = MAX_FRAME bytes.
                let len = f.len().min(copy.len());
                copy[..len].copy_from_slice(&f[..len]);
                deliver(&copy[..len]);
            });
        }
        self.next_queue = self.next_queue.wrapping_add(1) % rx_queues.max(1);
        n
    }

    fn transmit(&mut self, frame: &[u8], now: u64) {
        if self.staged.is_empty() {
            self.held_since = now;
        }
        if !self.staged.push(frame) {
            self.send_staged();
            let _ = self.staged.push(frame);
        }
    }

    fn flush(&mut self, now: u64) {
        if !self.staged.is_empty() && !self.wait_for_first_post(now) {
            self.send_staged();
        }
    }

    fn maintain(&mut self, now: u64) {
        if now.saturating_sub(self.last_maintain) >= MAINTAIN_EVERY_NS {
            self.last_maintain = now;
            if self.m.poll_control().is_err() {
                self.control_errors += 1;
            }
        }
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        let c = self.m.counters();
        vec![
            ("connected", self.m.is_connected() as u64),
            ("rx_frames", c.rx_frames),
            ("tx_frames", c.tx_frames),
            ("rx_chained", c.rx_chained),
            ("tx_chained", c.tx_chained),
            ("connects", c.connects),
            ("disconnects", c.disconnects),
            // Events, not frames: kept out of the drops, which count frames.
            ("handshake_errors", c.handshake_errors),
            ("ring_errors", c.ring_errors),
            ("control_errors", self.control_errors),
        ]
    }

    fn drops(&self) -> Vec<(&'static str, u64)> {
        let c = self.m.counters();
        vec![
            ("bad_descriptor", c.bad_descriptor),
            ("ring_full", c.ring_full),
            ("oversize", c.oversize),
            ("link_down", c.link_down),
        ]
    }

    fn finish(&mut self) {
        if !self.staged.is_empty() {
            self.send_staged();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs both sides' control until our port and `peer` are connected
    /// (10 s at most); returns the port's clock then.
    fn connect(port: &mut MemifPort, peer: &mut memif::Memif) -> u64 {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut now = 0;
        while !(peer.is_connected() && port.m.is_connected()) {
            assert!(std::time::Instant::now() < deadline, "no connection");
            now += MAINTAIN_EVERY_NS;
            port.maintain(now);
            peer.poll_control().unwrap();
        }
        now
    }

    #[test]
    fn secret_and_uids_are_parsed() {
        let w = MemifWire::parse("socket=@m,secret=s3cret,uid=1000/1001").unwrap();
        assert_eq!(w.secret.as_deref(), Some("s3cret"));
        assert_eq!(w.uids, vec![1000, 1001]);
        assert!(MemifWire::parse("socket=@m,secret=").is_err());
        assert!(MemifWire::parse(&format!("socket=@m,secret={}", "x".repeat(24))).is_err());
        assert!(MemifWire::parse("socket=@m,uid=12/x").is_err());
    }

    /// A server port with a secret serves only clients that send it.
    #[test]
    fn a_server_port_with_a_secret_refuses_clients_without_it() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("m.sock");
        let w = MemifWire::parse(&format!("socket={},secret=abc", sock.display())).unwrap();
        let mut port = MemifPort::open(&w, "t", 0).unwrap();
        let mut now = 0;
        for (secret, ok) in [(None, false), (Some("abd"), false), (Some("abc"), true)] {
            let mut cfg =
                memif::Config::new(memif::SocketName::Path(sock.clone()), memif::Role::Client);
            cfg.secret = secret.map(str::to_string);
            let mut peer = memif::Memif::new(cfg).unwrap();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while !(peer.is_connected() || peer.counters().handshake_errors > 0) {
                assert!(std::time::Instant::now() < deadline, "no answer");
                now += MAINTAIN_EVERY_NS;
                port.maintain(now);
                peer.poll_control().unwrap();
            }
            assert_eq!(peer.is_connected(), ok, "secret {secret:?}");
            if !ok {
                assert!(
                    peer.last_error()
                        .is_some_and(|e| e.contains("Incorrect secret")),
                    "{:?}",
                    peer.last_error()
                );
            }
        }
    }

    /// Frames sent before a newly connected peer has posted any receive
    /// buffer wait for it (at most FIRST_POST_WAIT_NS) instead of being
    /// dropped; once it has posted, a full ring drops at once as before.
    #[test]
    fn frames_wait_for_the_peers_first_buffers_only() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("m.sock");
        let w = MemifWire::parse(&format!("socket={}", sock.display())).unwrap();
        let mut port = MemifPort::open(&w, "t", 0).unwrap();
        let mut cfg = memif::Config::new(memif::SocketName::Path(sock), memif::Role::Client);
        cfg.log2_ring_size = 4;
        let mut peer = memif::Memif::new(cfg).unwrap();
        let now = connect(&mut port, &mut peer);
        let ring_full =
            |p: &MemifPort| p.drops().iter().find(|(k, _)| *k == "ring_full").unwrap().1;
        let frames: Vec<Vec<u8>> = (0..20u8).map(|i| vec![i; 60]).collect();
        let send = |port: &mut MemifPort, fs: &[Vec<u8>], now: u64| {
            for f in fs {
                port.transmit(f, now);
            }
            port.flush(now);
        };
        // Our client posted its 16 buffers when it connected: 16 fit and
        // the 4 that do not are dropped at once.
        send(&mut port, &frames, now);
        assert_eq!(ring_full(&port), 4);
        // As if on a new connection whose peer has posted nothing yet (the
        // ring is full, no room): frames wait instead.
        port.peer_posted = 0;
        send(&mut port, &frames[..4], now + 1);
        assert_eq!(ring_full(&port), 4, "dropped before the first post");
        let mut got = Vec::new();
        assert_eq!(peer.rx_burst(0, 64, |f| got.push(f[0])), 16);
        // The peer posted: the 4 go at the next flush.
        port.flush(now + 2);
        assert_eq!(peer.rx_burst(0, 64, |f| got.push(f[0])), 4);
        let want: Vec<u8> = (0..16).chain(0..4).collect();
        assert_eq!(got, want);
        // A peer that never posts: after FIRST_POST_WAIT_NS they go (and
        // are dropped, counted).
        send(&mut port, &frames[..16], now + 3);
        port.peer_posted = 0;
        send(&mut port, &frames[..2], now + 4);
        port.flush(now + 4 + FIRST_POST_WAIT_NS / 2);
        assert_eq!(ring_full(&port), 4);
        port.flush(now + 4 + FIRST_POST_WAIT_NS);
        assert_eq!(ring_full(&port), 6);
    }

    /// The NIC sees a private copy of each frame, never the peer's buffer,
    /// which the peer could rewrite between classification and storage.
    #[test]
    fn frames_reach_the_nic_from_the_ports_own_memory() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("m.sock");
        let w = MemifWire::parse(&format!("socket={},ring-size=16", sock.display())).unwrap();
        let mut port = MemifPort::open(&w, "t", 0).unwrap();
        let mut peer = memif::Memif::new(memif::Config::new(
            memif::SocketName::Path(sock),
            memif::Role::Client,
        ))
        .unwrap();
        let now = connect(&mut port, &mut peer);
        let frames: Vec<Vec<u8>> = (0..4u8).map(|i| vec![i; 60 + usize::from(i)]).collect();
        assert_eq!(peer.tx_burst(0, frames.iter().map(Vec::as_slice)), 4);
        let own = port.rx_copy.as_ptr_range();
        let mut got = Vec::new();
        port.receive(now, 64, &mut |f: &[u8]| {
            assert!(own.contains(&f.as_ptr()), "frame handed over in place");
            got.push(f.to_vec());
        });
        assert_eq!(got, frames);
    }
}
