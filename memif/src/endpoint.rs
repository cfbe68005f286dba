//! The endpoint: connection state machine around the handshake and the
//! data path.
//!
//! States: idle (server: listening; client: waiting for the next connect
//! attempt) -> handshake -> connected -> idle again when the peer says
//! DISCONNECT, closes the socket, breaks the protocol on a ring, or the
//! handshake stalls. A client then reconnects after [`RECONNECT_DELAY`].
//! A server accepts one connection at a time and turns further ones away
//! with DISCONNECT.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::control::{Handshake, HsError};
use crate::counters::Counters;
use crate::datapath::Session;
use crate::msg::{str_of, Msg, MSG_SIZE};
use crate::shm::drain;
use crate::sock::{Listener, Recv, SeqPacket};
use crate::{Config, MemifError, Role};

/// A handshake not finished within this time is abandoned.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// A client waits this long between connection attempts.
pub const RECONNECT_DELAY: Duration = Duration::from_millis(100);
/// At most this many control messages are handled per `poll_control`.
const MSGS_PER_POLL: usize = 64;
/// After the peer leaves, frames it had already published are still
/// received for at most this long (its memory stays mapped on our side).
pub const DRAIN_TIMEOUT: Duration = Duration::from_millis(100);

enum State {
    Idle,
    Handshake(Box<Handshake>),
    Connected(Box<Connected>),
    /// The peer left; what it published before is still received, until
    /// the rings are empty or [`DRAIN_TIMEOUT`] passes.
    Draining(Box<Connected>, Instant),
}

struct Connected {
    sock: SeqPacket,
    session: Session,
    peer: String,
}

/// A memif endpoint (see the crate documentation).
pub struct Memif {
    cfg: Config,
    listener: Option<Listener>,
    state: State,
    counters: Counters,
    retry_at: Instant,
    last_error: Option<String>,
}

impl Memif {
    /// Checks the configuration; a server binds and listens now (an
    /// existing socket file is replaced only if it is a stale socket; its
    /// file is removed on drop). A client connects in `poll_control`.
    pub fn new(cfg: Config) -> Result<Memif, MemifError> {
        cfg.validate()?;
        let listener = match cfg.role {
            Role::Server => Some(Listener::bind(&cfg.socket)?),
            Role::Client => None,
        };
        Ok(Memif {
            cfg,
            listener,
            state: State::Idle,
            counters: Counters::default(),
            retry_at: Instant::now(),
            last_error: None,
        })
    }

    /// Moves the connection along without blocking: accepts or connects,
    /// advances the handshake, notices DISCONNECT or a vanished peer and a
    /// fault found by the data path (then tears the connection down; a
    /// client reconnects later). Call it every so often, not per frame.
    ///
    /// Protocol trouble is counted (see [`Counters`]) and described by
    /// [`Memif::last_error`]; an `Err` is only returned for a local failure
    /// (accept, memfd, mmap, eventfd, send), after which the endpoint is
    /// still usable and tries again on the next call.
    pub fn poll_control(&mut self) -> Result<(), MemifError> {
        if let State::Draining(c, since) = &self.state {
            // (A server that accepts a new client stops draining then.)
            if c.session.rx_empty() || since.elapsed() > DRAIN_TIMEOUT {
                self.state = State::Idle;
            }
        }
        match self.cfg.role {
            Role::Server => self.accept_pending()?,
            Role::Client => self.try_connect(),
        }
        match &self.state {
            State::Idle | State::Draining(..) => Ok(()),
            State::Handshake(_) => self.poll_handshake(),
            State::Connected(_) => {
                self.poll_connected();
                Ok(())
            }
        }
    }

    /// True once the handshake has completed and until the connection ends
    /// (or the data path found the peer misbehaving).
    pub fn is_connected(&self) -> bool {
        matches!(&self.state, State::Connected(c) if c.session.fault.is_none())
    }

    /// Receives up to `max` frames the peer sent on `queue`, calling `f`
    /// with each. Returns how many were delivered. A one-buffer frame is
    /// passed in place (in shared memory, valid only during the call); a
    /// chained one is reassembled first. No system call; nothing happens
    /// when not connected or when `queue` does not exist. After the peer
    /// left, what it had published is still received (for at most
    /// [`DRAIN_TIMEOUT`]).
    pub fn rx_burst(&mut self, queue: u16, max: usize, f: impl FnMut(&[u8])) -> usize {
        match &mut self.state {
            State::Connected(c) | State::Draining(c, _) => {
                c.session.rx_burst(&mut self.counters, queue, max, f)
            }
            _ => 0,
        }
    }

    /// Sends frames on `queue`, in order, and returns how many were put on
    /// the ring. The whole iterator is consumed: frames longer than
    /// `max_frame` are dropped (`oversize`); once one frame does not fit,
    /// it and all after it are dropped (`ring_full`); when not connected,
    /// all are dropped (`link_down`). So the frames sent are the first ones
    /// offered, less any oversize ones. Frames longer than a buffer are
    /// split over chained buffers.
    pub fn tx_burst<'a>(
        &mut self,
        queue: u16,
        frames: impl IntoIterator<Item = &'a [u8]>,
    ) -> usize {
        match &mut self.state {
            State::Connected(c) => c.session.tx_burst(&mut self.counters, queue, frames),
            _ => {
                self.counters.link_down += frames.into_iter().count() as u64;
                0
            }
        }
    }

    /// How many buffers `tx_burst` could fill on `queue` right now: free
    /// descriptors of our ring (client), or buffers the peer posted that
    /// we have not filled (server); 0 when not connected. A frame longer
    /// than a buffer needs several. No system call.
    pub fn tx_room(&self, queue: u16) -> usize {
        match &self.state {
            State::Connected(c) => c.session.tx_room(queue),
            _ => 0,
        }
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// (rx, tx) queues of the current connection (or of the one being
    /// drained); (0, 0) when there is none.
    pub fn queues(&self) -> (u16, u16) {
        match &self.state {
            State::Connected(c) | State::Draining(c, _) => c.session.queues(),
            _ => (0, 0),
        }
    }

    /// The peer's name from its HELLO / INIT, while connected.
    pub fn peer_name(&self) -> Option<&str> {
        match &self.state {
            State::Connected(c) => Some(&c.peer),
            _ => None,
        }
    }

    /// Why the last connection or handshake ended (ours or the peer's
    /// DISCONNECT reason, or what went wrong).
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    fn accept_pending(&mut self) -> Result<(), MemifError> {
        let Some(listener) = &self.listener else {
            return Ok(());
        };
        for _ in 0..8 {
            let Some(sock) = listener.accept().map_err(|e| MemifError::io("accept", e))? else {
                return Ok(());
            };
            if let State::Draining(..) = self.state {
                self.state = State::Idle;
            }
            if let Err(why) = self.permitted(&sock) {
                let _ = sock.send(&Msg::disconnect("Permission denied").encode(), None);
                self.counters.handshake_errors += 1;
                self.last_error = Some(why);
                continue;
            }
            if !matches!(self.state, State::Idle) {
                let _ = sock.send(&Msg::disconnect("Already connected").encode(), None);
                self.counters.handshake_errors += 1;
                continue;
            }
            match Handshake::server(sock, &self.cfg) {
                Ok(hs) => self.state = State::Handshake(Box::new(hs)),
                Err(e) => return self.fail(e, false),
            }
        }
        Ok(())
    }

    /// Whether the client at the other end of `sock` may use this server:
    /// it runs as our effective user or one `Config::peer_uids` lists.
    fn permitted(&self, sock: &SeqPacket) -> Result<(), String> {
        let uid = sock
            .peer_uid()
            .map_err(|e| format!("cannot tell who connected (SO_PEERCRED): {e}"))?;
        // SAFETY: geteuid has no preconditions.
        let ours = unsafe { libc::geteuid() };
        if uid == ours || self.cfg.peer_uids.contains(&uid) {
            Ok(())
        } else {
            Err(format!(
                "refused a client running as uid {uid} (allowed: {ours}{})",
                self.cfg
                    .peer_uids
                    .iter()
                    .map(|u| format!(", {u}"))
                    .collect::<String>()
            ))
        }
    }

    fn try_connect(&mut self) {
        if !matches!(self.state, State::Idle) || Instant::now() < self.retry_at {
            return;
        }
        match SeqPacket::connect(&self.cfg.socket) {
            Ok(sock) => self.state = State::Handshake(Box::new(Handshake::client(sock))),
            Err(e) => {
                // No server yet (ENOENT / ECONNREFUSED / a full backlog):
                // try again later.
                self.last_error = Some(e.to_string());
                self.retry_at = Instant::now() + RECONNECT_DELAY;
            }
        }
    }

    fn poll_handshake(&mut self) -> Result<(), MemifError> {
        let mut buf = [0u8; MSG_SIZE + 1];
        for _ in 0..MSGS_PER_POLL {
            let State::Handshake(hs) = &mut self.state else {
                return Ok(());
            };
            let (len, fd) = match hs.sock.recv(&mut buf) {
                Ok(Recv::WouldBlock) => break,
                Ok(Recv::Eof) => {
                    return self.end(
                        "peer closed the control socket during the handshake".into(),
                        false,
                    )
                }
                Ok(Recv::Msg {
                    truncated: true, ..
                }) => return self.proto("control message too long".into()),
                Ok(Recv::Msg { len, fd, .. }) => (len, fd),
                Err(e) => return self.end(format!("control socket: {e}"), false),
            };
            let msg = match Msg::decode(&buf[..len]) {
                Ok(m) => m,
                Err(e) => return self.proto(e.to_string()),
            };
            if let Msg::Disconnect { reason, .. } = &msg {
                return self.end(format!("peer disconnected: {}", str_of(reason)), false);
            }
            match hs.on_msg(&self.cfg, msg, fd) {
                Ok(None) => {}
                Ok(Some(mut session)) => {
                    let State::Handshake(hs) = std::mem::replace(&mut self.state, State::Idle)
                    else {
                        unreachable!("matched above")
                    };
                    session.start();
                    self.counters.connects += 1;
                    self.state = State::Connected(Box::new(Connected {
                        sock: hs.sock,
                        session,
                        peer: hs.peer_name,
                    }));
                    return Ok(());
                }
                Err(e) => return self.fail(e, true),
            }
        }
        if let State::Handshake(hs) = &self.state {
            if hs.started.elapsed() > HANDSHAKE_TIMEOUT {
                return self.proto("handshake timed out".into());
            }
        }
        Ok(())
    }

    fn poll_connected(&mut self) {
        let State::Connected(c) = &mut self.state else {
            return;
        };
        if let Some(why) = c.session.fault {
            self.disconnect(why.to_string(), true);
            return;
        }
        // While connected the only message allowed is DISCONNECT, so one
        // receive per poll is enough: anything that arrives ends it.
        let mut buf = [0u8; MSG_SIZE + 1];
        let why = match c.sock.recv(&mut buf) {
            Ok(Recv::WouldBlock) => None,
            Ok(Recv::Eof) => Some(("peer closed the control socket".to_string(), false)),
            Err(e) => Some((format!("control socket: {e}"), false)),
            Ok(Recv::Msg { len, truncated, .. }) => match Msg::decode(&buf[..len]) {
                Ok(Msg::Disconnect { reason, .. }) if !truncated => {
                    Some((format!("peer disconnected: {}", str_of(&reason)), false))
                }
                Ok(m) => Some((format!("unexpected {} while connected", m.kind()), true)),
                Err(e) => Some((e.to_string(), true)),
            },
        };
        if let Some((why, tell)) = why {
            if !tell {
                // The peer left in good order: receive what it had
                // already published before letting go of its memory.
                self.counters.disconnects += 1;
                self.last_error = Some(why);
                self.retry_at = Instant::now() + RECONNECT_DELAY;
                let State::Connected(c) = std::mem::replace(&mut self.state, State::Idle) else {
                    unreachable!("matched above")
                };
                self.state = State::Draining(c, Instant::now());
                return;
            }
            return self.disconnect(why, tell);
        }
        // We poll, so the peer should not signal us; empty the counters in
        // case it does anyway.
        if let State::Connected(c) = &self.state {
            for q in &c.session.rx {
                drain(q.eventfd.as_raw_fd());
            }
        }
    }

    /// A handshake failure: tell the peer why when it broke the protocol.
    fn fail(&mut self, e: HsError, tell: bool) -> Result<(), MemifError> {
        match e {
            HsError::Proto(why) if tell => self.proto(why),
            HsError::Proto(why) => self.end(why, false),
            HsError::Local(e) => {
                let _ = self.end(e.to_string(), false);
                Err(e)
            }
        }
    }

    fn proto(&mut self, why: String) -> Result<(), MemifError> {
        self.end(why, true)
    }

    /// Ends a handshake.
    fn end(&mut self, why: String, tell: bool) -> Result<(), MemifError> {
        if let State::Handshake(hs) = &self.state {
            if tell {
                let _ = hs.sock.send(&Msg::disconnect(&why).encode(), None);
            }
        }
        self.counters.handshake_errors += 1;
        self.idle(why);
        Ok(())
    }

    /// Ends an established connection.
    fn disconnect(&mut self, why: String, tell: bool) {
        if let State::Connected(c) = &self.state {
            if tell {
                let _ = c.sock.send(&Msg::disconnect(&why).encode(), None);
            }
        }
        self.counters.disconnects += 1;
        self.idle(why);
    }

    /// Drops the connection (socket, mappings, eventfds).
    fn idle(&mut self, why: String) {
        self.state = State::Idle;
        self.last_error = Some(why);
        self.retry_at = Instant::now() + RECONNECT_DELAY;
    }
}

impl Drop for Memif {
    fn drop(&mut self) {
        let sock = match &self.state {
            State::Handshake(hs) => &hs.sock,
            State::Connected(c) => &c.sock,
            State::Idle | State::Draining(..) => return,
        };
        let _ = sock.send(&Msg::disconnect("Device closed").encode(), None);
    }
}
