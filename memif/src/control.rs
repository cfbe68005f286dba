//! The handshake, both sides, strictly lockstep:
//!
//! 1. the server sends HELLO as soon as it accepts;
//! 2. the client sends INIT (version, id, mode, secret); the server ACKs;
//! 3. the client sends ADD_REGION per region, its memfd attached; ACK each;
//! 4. the client sends ADD_RING per ring, an eventfd attached; ACK each;
//! 5. the client sends CONNECT; the server checks and maps everything,
//!    resets head and tail and answers CONNECTED.
//!
//! Copy mode: the client makes one region (0) holding, in order, the
//! client-to-server rings, the server-to-client rings (each
//! `128 + 16 * 2^log2` bytes) and then every ring's buffers
//! (`buffer_size` bytes each, ring by ring, slot by slot).
//!
//! A server checks: message size and type, the order above, INIT's version,
//! id, mode and secret, region indices (consecutive from 0) and that each
//! region's file is as large as announced (and sealed, see
//! `Config::allow_unsealed_regions`), ring indices (below our ring count,
//! no duplicates, consecutive from 0 per direction), ring sizes (at most
//! 2^14), that each ring lies inside its region and is 8-byte aligned, and
//! each ring's cookie. Any failure answers DISCONNECT with the reason.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Instant;

use crate::config::{Config, MAX_LOG2_RING_SIZE};
use crate::datapath::{Bufs, Queue, Session};
use crate::msg::{
    fixed_str, str_of, AddRing, Hello, Init, Msg, MODE_ETHERNET, RING_FLAG_C2S, VERSION,
};
use crate::ring::{ring_bytes, Ring, COOKIE, RING_FLAG_MASK_INT};
use crate::shm::{check_eventfd, eventfd, Region, MAX_REGION_BYTES};
use crate::sock::SeqPacket;
use crate::{MemifError, Role};

/// Most regions a server accepts (indices 0..=254), as DPDK.
pub(crate) const MAX_REGIONS: usize = 255;

/// Why a handshake stopped.
pub(crate) enum HsError {
    /// The peer broke the protocol: say why in a DISCONNECT.
    Proto(String),
    /// A local resource failed (memfd, mmap, eventfd, send).
    Local(MemifError),
}

fn proto<T>(why: impl Into<String>) -> Result<T, HsError> {
    Err(HsError::Proto(why.into()))
}

/// One handshake in progress, with its control socket.
pub(crate) struct Handshake {
    pub sock: SeqPacket,
    pub started: Instant,
    pub peer_name: String,
    side: Side,
}

enum Side {
    Server(ServerHs),
    Client(ClientHs),
}

struct RingSpec {
    region: u16,
    offset: u32,
    log2: u8,
    eventfd: OwnedFd,
}

#[derive(Default)]
struct ServerHs {
    got_init: bool,
    regions: Vec<Region>,
    c2s: Vec<Option<RingSpec>>,
    s2c: Vec<Option<RingSpec>>,
}

/// The client's region and rings, made after HELLO.
struct Prepared {
    region: Region,
    log2: u8,
    /// (ring offset, eventfd, buffers) per ring.
    c2s: Vec<(u32, OwnedFd, Bufs)>,
    s2c: Vec<(u32, OwnedFd, Bufs)>,
}

#[derive(Default)]
struct ClientHs {
    prepared: Option<Prepared>,
    /// INIT, ADD_REGION, ADD_RING..., CONNECT, each with its fd.
    outbox: Vec<(Msg, Option<RawFd>)>,
    /// How many of outbox have been sent.
    sent: usize,
}

fn send(sock: &SeqPacket, msg: &Msg, fd: Option<RawFd>) -> Result<(), HsError> {
    sock.send(&msg.encode(), fd)
        .map_err(|e| HsError::Local(MemifError::io("sending a control message", e)))
}

impl Handshake {
    /// Server side of a new connection: sends HELLO.
    pub fn server(sock: SeqPacket, cfg: &Config) -> Result<Handshake, HsError> {
        let hello = Msg::Hello(Hello {
            name: fixed_str(&cfg.name),
            min_version: VERSION,
            max_version: VERSION,
            max_region: (MAX_REGIONS - 1) as u16,
            max_c2s_ring: cfg.rings - 1,
            max_s2c_ring: cfg.rings - 1,
            max_log2_ring_size: MAX_LOG2_RING_SIZE,
        });
        send(&sock, &hello, None)?;
        let n = usize::from(cfg.rings);
        let side = ServerHs {
            c2s: (0..n).map(|_| None).collect(),
            s2c: (0..n).map(|_| None).collect(),
            ..ServerHs::default()
        };
        Ok(Handshake {
            sock,
            started: Instant::now(),
            peer_name: String::new(),
            side: Side::Server(side),
        })
    }

    /// Client side of a new connection: waits for HELLO.
    pub fn client(sock: SeqPacket) -> Handshake {
        Handshake {
            sock,
            started: Instant::now(),
            peer_name: String::new(),
            side: Side::Client(ClientHs::default()),
        }
    }

    /// Handles one message (not DISCONNECT: the caller handles that).
    /// Returns the session once connected.
    pub fn on_msg(
        &mut self,
        cfg: &Config,
        msg: Msg,
        fd: Option<OwnedFd>,
    ) -> Result<Option<Session>, HsError> {
        match &mut self.side {
            Side::Server(s) => s.on_msg(&self.sock, cfg, &mut self.peer_name, msg, fd),
            Side::Client(c) => c.on_msg(&self.sock, cfg, &mut self.peer_name, msg),
        }
    }
}

impl ServerHs {
    fn on_msg(
        &mut self,
        sock: &SeqPacket,
        cfg: &Config,
        peer: &mut String,
        msg: Msg,
        fd: Option<OwnedFd>,
    ) -> Result<Option<Session>, HsError> {
        if !self.got_init && !matches!(msg, Msg::Init(_)) {
            return proto(format!("expected INIT, got {}", msg.kind()));
        }
        match msg {
            Msg::Init(i) => {
                self.init(cfg, &i)?;
                *peer = str_of(&i.name);
            }
            Msg::AddRegion { index, size } => {
                let Some(fd) = fd else {
                    return proto("ADD_REGION without a file descriptor");
                };
                if usize::from(index) != self.regions.len() || usize::from(index) >= MAX_REGIONS {
                    return proto(format!("invalid region index {index}"));
                }
                let mapped: u64 = self.regions.iter().map(Region::len).sum();
                // (A region above 4 GiB is refused by Region::map, saying so.)
                if size <= MAX_REGION_BYTES && mapped.saturating_add(size) > cfg.max_region_bytes {
                    return proto(format!(
                        "region {index}: {size} bytes would exceed the {} bytes of \
                         peer memory allowed",
                        cfg.max_region_bytes
                    ));
                }
                match Region::map(fd, size, cfg.allow_unsealed_regions) {
                    Ok(r) => self.regions.push(r),
                    Err(e) => return proto(format!("region {index}: {e}")),
                }
            }
            Msg::AddRing(r) => self.add_ring(&r, fd)?,
            Msg::Connect { .. } => {
                let session = self.connect(cfg)?;
                send(
                    sock,
                    &Msg::Connected {
                        if_name: fixed_str(&cfg.name),
                    },
                    None,
                )?;
                return Ok(Some(session));
            }
            other => return proto(format!("unexpected {} during the handshake", other.kind())),
        }
        send(sock, &Msg::Ack, None)?;
        Ok(None)
    }

    fn init(&mut self, cfg: &Config, i: &Init) -> Result<(), HsError> {
        if self.got_init {
            return proto("second INIT");
        }
        if i.version != VERSION {
            return proto("Incompatible memif version");
        }
        if i.id != cfg.id {
            return proto("ID not found");
        }
        if i.mode != MODE_ETHERNET {
            return proto("Only ethernet mode supported");
        }
        if let Some(secret) = &cfg.secret {
            if i.secret != fixed_str::<24>(secret) {
                return proto("Incorrect secret");
            }
        }
        self.got_init = true;
        Ok(())
    }

    fn add_ring(&mut self, r: &AddRing, fd: Option<OwnedFd>) -> Result<(), HsError> {
        let Some(eventfd) = fd else {
            return proto("ADD_RING without an eventfd");
        };
        check_eventfd(eventfd.as_raw_fd()).map_err(HsError::Proto)?;
        if r.log2_ring_size > MAX_LOG2_RING_SIZE {
            return proto(format!("ring size 2^{} too large", r.log2_ring_size));
        }
        let list = if r.flags & RING_FLAG_C2S != 0 {
            &mut self.c2s
        } else {
            &mut self.s2c
        };
        match list.get_mut(usize::from(r.index)) {
            Some(slot @ None) => {
                *slot = Some(RingSpec {
                    region: r.region,
                    offset: r.offset,
                    log2: r.log2_ring_size,
                    eventfd,
                });
                Ok(())
            }
            Some(Some(_)) => proto(format!("ring {} added twice", r.index)),
            None => proto(format!("Invalid ring index {}", r.index)),
        }
    }

    /// CONNECT: check every ring against the regions and build the session.
    fn connect(&mut self, cfg: &Config) -> Result<Session, HsError> {
        let regions = std::mem::take(&mut self.regions);
        let rx = take_rings(&mut self.c2s, &regions, true)?;
        let tx = take_rings(&mut self.s2c, &regions, false)?;
        if rx.is_empty() && tx.is_empty() {
            return proto("no rings");
        }
        Ok(Session {
            role: Role::Server,
            regions,
            rx,
            tx,
            scratch: vec![0; cfg.max_frame as usize],
            max_frame: cfg.max_frame,
            fault: None,
        })
    }
}

/// Turns the rings of one direction into queues: indices must be 0..n.
fn take_rings(
    list: &mut [Option<RingSpec>],
    regions: &[Region],
    ours_to_receive: bool,
) -> Result<Vec<Queue>, HsError> {
    let n = list.iter().take_while(|r| r.is_some()).count();
    if list[n..].iter().any(Option::is_some) {
        return proto("ring indices are not consecutive from 0");
    }
    let mut queues = Vec::with_capacity(n);
    for spec in list[..n].iter_mut().filter_map(Option::take) {
        let Some(region) = regions.get(usize::from(spec.region)) else {
            return proto(format!("ring in missing region {}", spec.region));
        };
        let Some(base) = region.range(u64::from(spec.offset), ring_bytes(spec.log2)) else {
            return proto("ring does not fit in its region");
        };
        if spec.offset % 8 != 0 {
            return proto("ring offset not 8-byte aligned");
        }
        // SAFETY: base..base+ring_bytes(log2) lies inside the region (just
        // checked); the region is page-aligned and the offset a multiple of
        // 8, so base is 8-aligned; log2 <= 14 (checked in ADD_RING); the
        // region is moved into the same Session as the ring and lives as
        // long.
        let ring = unsafe { Ring::new(base, spec.log2) };
        if ring.cookie() != COOKIE {
            return proto("Wrong ring cookie");
        }
        // Relaxed: the client looks at the ring again only after CONNECTED,
        // which we send after these stores.
        ring.head().store(0, std::sync::atomic::Ordering::Relaxed);
        ring.tail().store(0, std::sync::atomic::Ordering::Relaxed);
        if ours_to_receive {
            // We poll: the client need not signal us.
            ring.flags()
                .store(RING_FLAG_MASK_INT, std::sync::atomic::Ordering::Relaxed);
        }
        queues.push(Queue::new(ring, spec.eventfd, None));
    }
    Ok(queues)
}

impl ClientHs {
    fn on_msg(
        &mut self,
        sock: &SeqPacket,
        cfg: &Config,
        peer: &mut String,
        msg: Msg,
    ) -> Result<Option<Session>, HsError> {
        let connect_sent = self.sent > 0 && self.sent == self.outbox.len();
        match msg {
            Msg::Hello(h) if self.prepared.is_none() => {
                if h.min_version > VERSION || h.max_version < VERSION {
                    return proto("Incompatible memif version");
                }
                *peer = str_of(&h.name);
                let c2s = u32::from(cfg.rings).min(u32::from(h.max_c2s_ring) + 1) as u16;
                let s2c = u32::from(cfg.rings).min(u32::from(h.max_s2c_ring) + 1) as u16;
                let log2 = cfg.log2_ring_size.min(h.max_log2_ring_size);
                self.prepare(cfg, c2s, s2c, log2).map_err(HsError::Local)?;
                self.send_next(sock)?;
                Ok(None)
            }
            Msg::Ack if self.sent > 0 && !connect_sent => {
                self.send_next(sock)?;
                Ok(None)
            }
            Msg::Connected { .. } if connect_sent => Ok(Some(self.session(cfg))),
            other => proto(format!("unexpected {} during the handshake", other.kind())),
        }
    }

    fn send_next(&mut self, sock: &SeqPacket) -> Result<(), HsError> {
        let (msg, fd) = &self.outbox[self.sent];
        send(sock, msg, *fd)?;
        self.sent += 1;
        Ok(())
    }

    /// Makes region 0 with the rings and buffers, the eventfds, and the
    /// messages that announce them.
    fn prepare(&mut self, cfg: &Config, c2s: u16, s2c: u16, log2: u8) -> Result<(), MemifError> {
        let n_rings = u64::from(c2s) + u64::from(s2c);
        let rb = ring_bytes(log2);
        let rings_end = n_rings * rb;
        let per_ring = (1u64 << log2) * u64::from(cfg.buffer_size);
        let total = rings_end + n_rings * per_ring;
        let region =
            Region::create(total as usize).map_err(|e| MemifError::io("creating the region", e))?;
        let mut make = |r: u64| -> Result<(u32, OwnedFd, Bufs), MemifError> {
            let offset = r * rb;
            let base = region
                .range(offset, rb)
                .expect("ring inside the region we sized");
            // SAFETY: base..base+rb lies in our region (sized above), which
            // is page-aligned with rb a multiple of 16; the ring is dropped
            // with the region in the same session.
            let ring = unsafe { Ring::new(base, log2) };
            ring.reset(0);
            let bufs = Bufs {
                first: (rings_end + r * per_ring) as u32,
                size: cfg.buffer_size,
            };
            let efd = eventfd().map_err(|e| MemifError::io("eventfd", e))?;
            Ok((offset as u32, efd, bufs))
        };
        let c2s_rings = (0..u64::from(c2s))
            .map(&mut make)
            .collect::<Result<Vec<_>, _>>()?;
        let s2c_rings = (0..u64::from(s2c))
            .map(|i| make(u64::from(c2s) + i))
            .collect::<Result<Vec<_>, _>>()?;

        let mut outbox = vec![
            (
                Msg::Init(Init {
                    version: VERSION,
                    id: cfg.id,
                    mode: MODE_ETHERNET,
                    secret: cfg.secret.as_deref().map(fixed_str).unwrap_or([0; 24]),
                    name: fixed_str(&cfg.name),
                }),
                None,
            ),
            (
                Msg::AddRegion {
                    index: 0,
                    size: total,
                },
                Some(region.fd()),
            ),
        ];
        for (flags, list) in [(RING_FLAG_C2S, &c2s_rings), (0, &s2c_rings)] {
            for (index, (offset, efd, _)) in list.iter().enumerate() {
                outbox.push((
                    Msg::AddRing(AddRing {
                        flags,
                        index: index as u16,
                        region: 0,
                        offset: *offset,
                        log2_ring_size: log2,
                        private_hdr_size: 0,
                    }),
                    Some(efd.as_raw_fd()),
                ));
            }
        }
        outbox.push((
            Msg::Connect {
                if_name: fixed_str(&cfg.name),
            },
            None,
        ));
        self.outbox = outbox;
        self.prepared = Some(Prepared {
            region,
            log2,
            c2s: c2s_rings,
            s2c: s2c_rings,
        });
        Ok(())
    }

    /// CONNECTED: rings back to zero, our rx rings masked (we poll). The
    /// server touches the rings only after we advance an index with a
    /// release store (tx, or the rx refill in `Session::start`), which
    /// publishes these relaxed stores too.
    fn session(&mut self, cfg: &Config) -> Session {
        let p = self
            .prepared
            .take()
            .expect("CONNECT is only sent once prepared");
        let ring_at = |offset: u32| {
            let base = p
                .region
                .range(u64::from(offset), ring_bytes(p.log2))
                .expect("ring inside the region we made");
            // SAFETY: as in prepare(): inside our region, aligned, and the
            // region moves into the same Session.
            unsafe { Ring::new(base, p.log2) }
        };
        let tx = p
            .c2s
            .into_iter()
            .map(|(off, efd, bufs)| {
                let ring = ring_at(off);
                ring.head().store(0, std::sync::atomic::Ordering::Relaxed);
                ring.tail().store(0, std::sync::atomic::Ordering::Relaxed);
                Queue::new(ring, efd, Some(bufs))
            })
            .collect();
        let rx = p
            .s2c
            .into_iter()
            .map(|(off, efd, bufs)| {
                let ring = ring_at(off);
                ring.head().store(0, std::sync::atomic::Ordering::Relaxed);
                ring.tail().store(0, std::sync::atomic::Ordering::Relaxed);
                ring.flags()
                    .store(RING_FLAG_MASK_INT, std::sync::atomic::Ordering::Relaxed);
                Queue::new(ring, efd, Some(bufs))
            })
            .collect();
        Session {
            role: Role::Client,
            regions: vec![p.region],
            rx,
            tx,
            scratch: vec![0; cfg.max_frame as usize],
            max_frame: cfg.max_frame,
            fault: None,
        }
    }
}
