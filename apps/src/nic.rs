//! The applications on the emulated NIC, on either interface, with one body
//! of processing logic.
//!
//! | application | logic | Ensō | packetized |
//! |---|---|---|---|
//! | echo, Maglev | `PacketHandler` (in place, [`Verdict::Forward`](crate::Verdict)) | `enso::EnsoDriver`, RX/TX pipes, zero-copy send | `enso::PacketizedDriver` |
//! | telemetry, log monitor (packets) | `PacketHandler` ([`Verdict::Consume`](crate::Verdict)) | `enso::EnsoDriver`, RX pipes | `enso::PacketizedDriver` |
//! | KV store | [`ReplyHandler`] (response may be larger) | [`EnsoReplyDriver`]: RX/TX pipes, in place when the response fits, else a TX pipe | [`PacketizedReplyDriver`] |
//! | log monitor (bytestream) | [`StreamHandler`] | [`EnsoStreamDriver`]: stream pipes | (packet path only) |
//!
//! [`AppDriver`] puts the drivers behind one trait so a serving loop is
//! written once.
//!
//! # Replies
//!
//! A request and its response cannot share bytes while the response is
//! built (it may be longer, and the request is read as it is written), so
//! on both interfaces a response is built into a small buffer owned by the
//! driver, which stays in cache, and copied once to where it is sent from:
//!
//! * Ensō: into the RX/TX pipe the request arrived in, over the lines of
//!   the requests already answered, when it fits there (the usual KV
//!   response: a small value, a SET or DELETE status); the pipe then sends
//!   a poll's responses where they lie (zero-copy, as echo and Maglev do)
//!   and the lines left over are handed back. The first response of a poll
//!   that does not fit, and all after it, go into the driver's TX pipe,
//!   so responses leave in request order.
//! * Packetized: into the request's own 2 KiB buffer (any response fits),
//!   which `tx_burst` sends on the queue it came from; no buffer is
//!   allocated per request.
//!
//! Either way the response bytes on the wire are the same.

use std::collections::HashMap;
use std::fmt;

use enso::app::{DriverError, DriverStats, EnsoDriver, PacketHandler, PacketizedDriver};
use enso::{AllocError, Device, Mbuf, QueueId, RxPipe, TxPipe};
use enso_abi::wire::{self, FrameError, FLIT};

use crate::kv::KvServer;
use crate::logmon::{LogMonitor, LogScanner};
use crate::net::host::{Host, HostAction, HostReply};
use crate::packet::MAX_FRAME_LEN;

mod stream;
pub use stream::{EnsoStreamDriver, STREAM_ASK_GAP_MAX_NS, STREAM_ASK_GAP_MIN_NS};

/// Which NIC interface an application runs on.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum Interface {
    /// Ensō pipes.
    Enso,
    /// Descriptor rings (the DPDK-like baseline).
    Packetized,
}

impl Interface {
    /// Both interfaces, Ensō first.
    pub const ALL: [Interface; 2] = [Interface::Enso, Interface::Packetized];

    /// The name used on command lines and in results.
    pub fn name(self) -> &'static str {
        match self {
            Interface::Enso => "enso",
            Interface::Packetized => "packetized",
        }
    }
}

impl fmt::Display for Interface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Logic that answers a request frame with a response frame, which may be
/// larger than the request.
pub trait ReplyHandler {
    /// Handles `request` and writes the response frame into `response`
    /// ([`MAX_FRAME_LEN`] bytes), returning its length; `None` sends
    /// nothing (the request is dropped and counted by the driver).
    fn reply(&mut self, request: &[u8], response: &mut [u8]) -> Option<usize>;

    /// Called for each request of a burst before any of them is handled, so
    /// the handler can start loading what it will need (a hint; the default
    /// does nothing). Both drivers call it the same way: for up to
    /// [`REPLY_BURST`] requests at a time.
    #[inline]
    fn prefetch(&mut self, _request: &[u8]) {}

    /// Called for each request of a burst after [`ReplyHandler::prefetch`]
    /// was called for all of them and before any is handled: a second
    /// hint, for what the first pass's loads lead to (the default does
    /// nothing).
    #[inline]
    fn prefetch_more(&mut self, _request: &[u8]) {}
}

/// Requests an [`EnsoReplyDriver`] prefetches and then answers at a time
/// (the packetized driver does the same per `rx_burst`).
pub const REPLY_BURST: usize = 32;

impl ReplyHandler for KvServer {
    #[inline]
    fn reply(&mut self, request: &[u8], response: &mut [u8]) -> Option<usize> {
        self.handle(request, response).ok()
    }

    #[inline]
    fn prefetch(&mut self, request: &[u8]) {
        KvServer::prefetch(self, request);
    }

    #[inline]
    fn prefetch_more(&mut self, request: &[u8]) {
        KvServer::prefetch_items(self, request);
    }
}

/// An application behind a [`Host`]: the host answers ARP, neighbour
/// solicitations and pings for the server's addresses and drops frames
/// for other hosts; the rest reaches the application. The same wrapper
/// serves both interfaces, as a [`PacketHandler`] (answers in place) and
/// as a [`ReplyHandler`] (answers into the response buffer). A host
/// without addresses passes every frame.
#[derive(Debug)]
pub struct Hosted<H> {
    /// The port's identity on its link.
    pub host: Host,
    /// The application.
    pub app: H,
}

impl<H> Hosted<H> {
    /// `app` behind `host`.
    pub fn new(host: Host, app: H) -> Self {
        Hosted { host, app }
    }
}

impl<H: PacketHandler> PacketHandler for Hosted<H> {
    #[inline]
    fn handle(&mut self, frame: &mut [u8]) -> crate::Verdict {
        match self.host.process(frame) {
            HostAction::Pass => self.app.handle(frame),
            HostAction::Reply => crate::Verdict::Forward,
            HostAction::Drop => crate::Verdict::Drop,
        }
    }
}

impl<H: ReplyHandler> ReplyHandler for Hosted<H> {
    #[inline]
    fn reply(&mut self, request: &[u8], response: &mut [u8]) -> Option<usize> {
        match self.host.respond(request, response) {
            HostReply::Pass => self.app.reply(request, response),
            HostReply::Reply(n) => Some(n),
            HostReply::Drop => None,
        }
    }

    #[inline]
    fn prefetch(&mut self, request: &[u8]) {
        self.app.prefetch(request);
    }

    #[inline]
    fn prefetch_more(&mut self, request: &[u8]) {
        self.app.prefetch_more(request);
    }
}

/// Logic that reads a contiguous bytestream (an Ensō stream pipe).
pub trait StreamHandler {
    /// Processes what it can of `bytes` and returns how many bytes it is
    /// done with (a prefix). The rest stays in the pipe and is presented
    /// again, followed by new data, on the next call.
    fn consume(&mut self, bytes: &[u8]) -> usize;
}

impl StreamHandler for LogScanner {
    #[inline]
    fn consume(&mut self, bytes: &[u8]) -> usize {
        self.scan(bytes)
    }
}

impl StreamHandler for LogMonitor {
    #[inline]
    fn consume(&mut self, bytes: &[u8]) -> usize {
        self.scan_stream(bytes)
    }
}

/// A driver that feeds handlers of type `H` from one interface.
pub trait AppDriver<H: ?Sized> {
    /// Handles what one pipe or queue has received (if anything) and sends
    /// what must be sent. Returns the frames (or, for streams, the bytes)
    /// handled.
    fn poll(&mut self, h: &mut H) -> Result<usize, DriverError>;
    /// What the driver counted.
    fn stats(&self) -> &DriverStats;
    /// The device handle.
    fn device(&self) -> &Device;
    /// The device handle, to wait on ([`Device::wait`]).
    fn device_mut(&mut self) -> &mut Device;
}

impl<H: PacketHandler> AppDriver<H> for EnsoDriver {
    #[inline]
    fn poll(&mut self, h: &mut H) -> Result<usize, DriverError> {
        EnsoDriver::poll(self, h)
    }
    fn stats(&self) -> &DriverStats {
        &self.stats
    }
    fn device(&self) -> &Device {
        &self.dev
    }
    fn device_mut(&mut self) -> &mut Device {
        &mut self.dev
    }
}

impl<H: PacketHandler> AppDriver<H> for PacketizedDriver {
    #[inline]
    fn poll(&mut self, h: &mut H) -> Result<usize, DriverError> {
        PacketizedDriver::poll(self, h)
    }
    fn stats(&self) -> &DriverStats {
        &self.stats
    }
    fn device(&self) -> &Device {
        &self.dev
    }
    fn device_mut(&mut self) -> &mut Device {
        &mut self.dev
    }
}

/// Allocates `n` RX-only pipes on `port` that receive its fallback traffic,
/// for sinks run by `enso::EnsoDriver` (which serves any pipe of its
/// device; RX-only pipes are freed whole after each batch).
pub fn add_fallback_rx_pipes(
    d: &mut EnsoDriver,
    port: u32,
    n: u32,
) -> Result<Vec<RxPipe>, AllocError> {
    (0..n).map(|_| d.dev.alloc_rx_pipe_on(port, true)).collect()
}

/// Bytes of responses an [`EnsoReplyDriver`] writes into its TX pipe per
/// poll at most.
pub const STAGING_BYTES: usize = 64 << 10;
/// Requests an [`EnsoReplyDriver`] answers per poll at most, so that one
/// busy pipe neither holds its requests' lines nor its TX notifications for
/// long.
pub const MAX_POLL_FRAMES: usize = 128;
/// Room one response may take in a TX stream: the largest frame behind a
/// marker flit.
pub(crate) const MAX_STREAM_FRAME: usize = MAX_FRAME_LEN + FLIT;

/// Lays out the frame of `n` bytes at the start of `slot` as a TX stream
/// expects it (behind a marker flit if its headers state no length; `slot`
/// must hold [`MAX_STREAM_FRAME`] bytes) and returns the bytes it takes, a
/// multiple of 64.
pub(crate) fn place_in_stream(slot: &mut [u8], n: usize) -> Result<usize, FrameError> {
    let (marker, len, bytes) = stream_place(&slot[..n])?;
    if marker {
        slot.copy_within(0..len, FLIT);
        let m: &mut [u8; FLIT] = (&mut slot[..FLIT]).try_into().expect("a flit");
        wire::write_marker(m, len);
    }
    Ok(bytes)
}

/// How `frame` goes into a TX stream: whether behind a marker flit, the
/// length the NIC will send (what its headers state) and the bytes it
/// takes there (a multiple of 64). The usual response, untagged IPv4 whose
/// total length is the frame's, is decided from two header fields without
/// parsing it again; anything else is placed by its headers.
#[inline]
fn stream_place(frame: &[u8]) -> Result<(bool, usize, usize), FrameError> {
    let n = frame.len();
    if n >= 34 && frame[12] == 0x08 && frame[13] == 0x00 {
        let stated = 14 + usize::from(u16::from_be_bytes([frame[16], frame[17]]));
        if stated == n && n <= wire::MAX_FRAME {
            return Ok((false, n, n.next_multiple_of(FLIT)));
        }
    }
    let p = wire::place(frame)?;
    Ok((p.marker, p.len, p.flits * FLIT))
}

/// Writes `frame` at the start of `dest` as a TX stream holds it (behind a
/// marker flit if `marker`).
#[inline]
fn put_in_stream(dest: &mut [u8], frame: &[u8], marker: bool) {
    if marker {
        let m: &mut [u8; FLIT] = (&mut dest[..FLIT]).try_into().expect("a flit");
        wire::write_marker(m, frame.len());
        dest[FLIT..FLIT + frame.len()].copy_from_slice(frame);
    } else {
        dest[..frame.len()].copy_from_slice(frame);
    }
}

/// Runs a [`ReplyHandler`] over Ensō pipes, out of the port a request came
/// from.
///
/// In an RX/TX pipe (what [`EnsoReplyDriver::add_fallback_pipes_on`]
/// allocates) a response that fits in the lines its requests took is
/// written there, over requests already answered, and the pipe sends the
/// responses of a poll where they lie (one zero-copy send). The first
/// response of a poll that does not fit (a large value) and all after it go
/// into the driver's TX pipe instead, so responses leave in request order.
/// Requests in RX-only pipes are always answered through the TX pipe.
#[derive(Debug)]
pub struct EnsoReplyDriver {
    /// The device handle.
    pub dev: Device,
    /// `forwarded` counts responses sent, `dropped` requests not answered.
    pub stats: DriverStats,
    /// Responses sent in place from an RX/TX pipe.
    pub sent_in_place: u64,
    /// Responses sent through the TX pipe.
    pub sent_via_tx: u64,
    tx: TxPipe,
    ports: HashMap<RxPipe, u32>,
    /// The last pipe looked up in `ports` and its port (polls mostly find
    /// the same pipe again; a hash lookup per poll cost measurable time).
    last_port: Option<(RxPipe, u32)>,
    /// Bytes of responses written into the TX pipe per poll at most.
    per_poll: usize,
    credits: u32,
    /// Where each response is built before it is copied to where it is
    /// sent from (a request and its response may share lines).
    scratch: Box<[u8]>,
}

impl EnsoReplyDriver {
    /// A driver over `dev`; allocates its TX pipe (the device must allow
    /// one, `DeviceOptions::tx_pipes`).
    pub fn new(mut dev: Device) -> Result<Self, AllocError> {
        let tx = dev.alloc_tx_pipe()?;
        let per_poll = STAGING_BYTES
            .min(dev.options().tx_pipe_size)
            .max(MAX_STREAM_FRAME);
        let credits = dev
            .options()
            .tx_credits
            .min(dev.info().notif_ring_entries.saturating_sub(1));
        Ok(Self {
            dev,
            stats: DriverStats::default(),
            sent_in_place: 0,
            sent_via_tx: 0,
            tx,
            ports: HashMap::new(),
            last_port: None,
            per_poll,
            credits,
            scratch: vec![0u8; MAX_FRAME_LEN].into_boxed_slice(),
        })
    }

    /// Allocates `n` RX/TX pipes that receive fallback traffic of `port`;
    /// responses go back out of it.
    pub fn add_fallback_pipes_on(&mut self, port: u32, n: u32) -> Result<Vec<RxPipe>, AllocError> {
        let v = (0..n)
            .map(|_| self.dev.alloc_rxtx_pipe_on(port, true).map(|p| p.rx()))
            .collect::<Result<Vec<_>, _>>()?;
        for p in &v {
            self.ports.insert(*p, port);
        }
        self.last_port = None;
        Ok(v)
    }

    /// Serves requests already in `pipe` (allocated elsewhere, e.g. bound
    /// to a flow) with responses out of `port`.
    pub fn add_pipe(&mut self, pipe: RxPipe, port: u32) {
        self.ports.insert(pipe, port);
        self.last_port = None;
    }

    /// The TX pipe responses leave through when they are not sent in place.
    pub fn tx_pipe(&self) -> TxPipe {
        self.tx
    }

    /// Answers the requests of one pipe with data, if any: at most
    /// [`MAX_POLL_FRAMES`], and only as many as the TX pipe has room for
    /// should their responses need it (without waiting); the rest stays for
    /// the next poll. Returns the requests handled.
    pub fn poll<H: ReplyHandler + ?Sized>(&mut self, h: &mut H) -> Result<usize, DriverError> {
        let Some(p) = self.dev.next_pipe_with_data()? else {
            self.dev.reap_completions()?;
            return Ok(0);
        };
        // Answer only as many requests as the TX pipe and the TX credits
        // take now: never wait on the NIC with requests in hand. A poll
        // takes at most three notifications (in-place send, skip, TX send)
        // and a send may take two (at the end of a pipe).
        if self.dev.tx_in_flight() + 5 > self.credits {
            self.dev.reap_completions()?;
            return Ok(0);
        }
        let room = self.dev.tx_space(self.tx)?.min(self.per_poll);
        if room < MAX_STREAM_FRAME {
            return Ok(0);
        }
        let port = match self.last_port {
            Some((q, port)) if q == p => port,
            _ => {
                let port = self.ports.get(&p).copied().unwrap_or(0);
                self.last_port = Some((p, port));
                port
            }
        };
        let rxtx = self.dev.as_rxtx(p);
        let scratch = &mut self.scratch[..];
        let stats = &mut self.stats;
        // Requests handled; where the last one's lines end; where the
        // responses written in place end; bytes written into the TX span.
        let (mut frames, mut used, mut here, mut out) = (0usize, 0usize, 0usize, 0usize);
        let mut in_place = rxtx.is_some();
        let (total, placed_here, placed_tx, err) = {
            let (mut batch, span) = self.dev.recv_with_tx_span(p, self.tx, room)?;
            let room = span.len();
            let data = batch.bytes_mut();
            let total = data.len();
            // Where the next request's flits start.
            let mut at = 0usize;
            let mut err = None;
            let (mut placed_here, mut placed_tx) = (0u64, 0u64);
            // (start, length) of the requests of a burst.
            let mut window = [(0usize, 0usize); REPLY_BURST];
            loop {
                // As many requests as the TX span could take the responses
                // of, at most a burst: prefetched first, then answered.
                let fit = ((room - out) / MAX_STREAM_FRAME)
                    .min(REPLY_BURST)
                    .min(MAX_POLL_FRAMES - frames);
                let mut k = 0;
                while k < fit && at < total {
                    let d = match wire::delimit(&data[at..]) {
                        Ok(d) if d.start + d.len <= total - at => d,
                        Ok(_) => {
                            err = Some(FrameError::Truncated);
                            break;
                        }
                        Err(e) => {
                            err = Some(e);
                            break;
                        }
                    };
                    let s = at + d.start;
                    h.prefetch(&data[s..s + d.len]);
                    window[k] = (s, d.len);
                    at += (d.flits * FLIT).min(total - at);
                    k += 1;
                }
                for &(s, len) in &window[..k] {
                    h.prefetch_more(&data[s..s + len]);
                }
                for &(s, len) in &window[..k] {
                    frames += 1;
                    stats.bytes += len as u64;
                    // Where this request's flits end (padding included).
                    used = (s + len).next_multiple_of(FLIT).min(total);
                    let placed = match h.reply(&data[s..s + len], scratch) {
                        Some(n) if (1..=MAX_FRAME_LEN).contains(&n) => {
                            stream_place(&scratch[..n]).ok()
                        }
                        _ => None,
                    };
                    let Some((marker, n, bytes)) = placed else {
                        stats.dropped += 1;
                        continue;
                    };
                    stats.forwarded += 1;
                    if in_place && here + bytes <= used {
                        // Over this request and those answered before it,
                        // all read already.
                        put_in_stream(&mut data[here..here + bytes], &scratch[..n], marker);
                        here += bytes;
                        placed_here += 1;
                    } else {
                        in_place = false;
                        put_in_stream(&mut span[out..out + bytes], &scratch[..n], marker);
                        out += bytes;
                        placed_tx += 1;
                    }
                }
                if k < fit || k == 0 {
                    break;
                }
            }
            (total, placed_here, placed_tx, err)
        };
        if let Some(e) = err {
            if frames == 0 {
                return Err(DriverError::Corrupt(e));
            }
        }
        if used < total {
            // Not answered this time: handed out again by the next poll
            // (which reports bytes that are not frames).
            self.dev.unconsume(p, total - used)?;
        }
        match rxtx {
            Some(pipe) => {
                if here > 0 {
                    self.dev.send_and_free_on(pipe, here, port)?;
                }
                if used > here {
                    // Requests answered through the TX pipe or not at all.
                    self.dev.discard(pipe, used - here)?;
                }
            }
            None if used > 0 => self.dev.free(p, used)?,
            None => {}
        }
        if out > 0 {
            self.dev.send(self.tx, out, port)?;
        }
        self.sent_in_place += placed_here;
        self.sent_via_tx += placed_tx;
        self.stats.frames += frames as u64;
        self.stats.batches += 1;
        Ok(frames)
    }
}

impl<H: ReplyHandler + ?Sized> AppDriver<H> for EnsoReplyDriver {
    #[inline]
    fn poll(&mut self, h: &mut H) -> Result<usize, DriverError> {
        EnsoReplyDriver::poll(self, h)
    }
    fn stats(&self) -> &DriverStats {
        &self.stats
    }
    fn device(&self) -> &Device {
        &self.dev
    }
    fn device_mut(&mut self) -> &mut Device {
        &mut self.dev
    }
}

/// Runs a [`ReplyHandler`] over descriptor queues: `rx_burst`, build each
/// response, copy it into the request's buffer, `tx_burst` them on the same
/// queue.
#[derive(Debug)]
pub struct PacketizedReplyDriver {
    /// The device handle.
    pub dev: Device,
    /// `forwarded` counts responses sent, `dropped` requests not answered
    /// (and responses that found the TX ring full).
    pub stats: DriverStats,
    queues: Vec<QueueId>,
    next: usize,
    burst: usize,
    rx: Vec<Mbuf>,
    tx: Vec<Mbuf>,
    scratch: Box<[u8]>,
}

impl PacketizedReplyDriver {
    /// A driver with bursts of `burst` requests (DPDK's default: 32).
    pub fn new(dev: Device, burst: usize) -> Self {
        let burst = burst.max(1);
        Self {
            dev,
            stats: DriverStats::default(),
            queues: Vec::new(),
            next: 0,
            burst,
            rx: Vec::with_capacity(burst),
            tx: Vec::with_capacity(burst),
            scratch: vec![0u8; MAX_FRAME_LEN].into_boxed_slice(),
        }
    }

    /// Allocates `n` queue pairs on `port` that receive by RSS (fallback).
    pub fn add_rss_queues_on(&mut self, port: u32, n: u32) -> Result<Vec<QueueId>, AllocError> {
        let v = (0..n)
            .map(|_| self.dev.alloc_queue(port, true))
            .collect::<Result<Vec<_>, _>>()?;
        self.queues.extend(&v);
        Ok(v)
    }

    /// Polls the next queue once: one burst received, answered and sent.
    /// Returns the requests handled.
    pub fn poll<H: ReplyHandler + ?Sized>(&mut self, h: &mut H) -> Result<usize, DriverError> {
        if self.queues.is_empty() {
            return Ok(0);
        }
        let q = self.queues[self.next];
        self.next = (self.next + 1) % self.queues.len();
        let n = self.dev.rx_burst(q, &mut self.rx, self.burst)?;
        for m in &self.rx {
            h.prefetch(self.dev.mbuf_data(m));
        }
        for m in &self.rx {
            h.prefetch_more(self.dev.mbuf_data(m));
        }
        for mut m in self.rx.drain(..) {
            self.stats.bytes += m.len() as u64;
            match h.reply(self.dev.mbuf_data(&m), &mut self.scratch) {
                Some(len) if (1..=MAX_FRAME_LEN).contains(&len) => {
                    m.set_len(len);
                    self.dev
                        .mbuf_data_mut(&mut m)
                        .copy_from_slice(&self.scratch[..len]);
                    self.stats.forwarded += 1;
                    self.tx.push(m);
                }
                _ => {
                    self.stats.dropped += 1;
                    self.dev.free_mbufs([m]);
                }
            }
        }
        if !self.tx.is_empty() {
            self.dev.tx_burst(q, &mut self.tx)?;
            if !self.tx.is_empty() {
                // The TX ring is full: drop what did not fit, as DPDK
                // applications do.
                let k = self.tx.len() as u64;
                self.stats.dropped += k;
                self.stats.forwarded -= k;
                self.dev.free_mbufs(self.tx.drain(..));
            }
        } else {
            self.dev.tx_reclaim_all();
        }
        self.stats.frames += n as u64;
        if n > 0 {
            self.stats.batches += 1;
        }
        Ok(n)
    }
}

impl<H: ReplyHandler + ?Sized> AppDriver<H> for PacketizedReplyDriver {
    #[inline]
    fn poll(&mut self, h: &mut H) -> Result<usize, DriverError> {
        PacketizedReplyDriver::poll(self, h)
    }
    fn stats(&self) -> &DriverStats {
        &self.stats
    }
    fn device(&self) -> &Device {
        &self.dev
    }
    fn device_mut(&mut self) -> &mut Device {
        &mut self.dev
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use enso_abi::testframe::{FrameKind, TestFrames};

    #[test]
    fn frames_are_laid_out_as_a_tx_stream_expects() {
        let tf = TestFrames::new(1, 0);
        for (kind, len) in [
            (FrameKind::Ipv4Udp, 60),
            (FrameKind::Ipv4Udp, 1500),
            (FrameKind::Ipv6Udp, 200),
            (FrameKind::Raw, 100),
            (FrameKind::Raw, MAX_FRAME_LEN),
        ] {
            let mut f = [0u8; MAX_FRAME_LEN];
            let n = tf.build(kind, 3, 0, len, &mut f);
            let mut slot = [0u8; MAX_STREAM_FRAME];
            slot[..n].copy_from_slice(&f[..n]);
            let used = place_in_stream(&mut slot, n).unwrap();
            assert_eq!(used % FLIT, 0);
            assert_eq!(used, enso::batch::stream_len(&f[..n]).unwrap());
            // What the NIC reads back is the frame.
            let d = wire::delimit(&slot[..used]).unwrap();
            assert_eq!(&slot[d.start..d.start + d.len], &f[..n], "{kind:?} {len}");
        }
        let mut junk = [0u8; MAX_STREAM_FRAME];
        assert!(place_in_stream(&mut junk, 5).is_err());
    }
}
