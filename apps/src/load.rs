//! Traffic for the applications from an Ensō device handle: frames written
//! into a TX pipe and sent out of a port cabled to the application's port,
//! and what comes back received in an RX pipe of the same port.
//!
//! * [`PipeClient`]: the plumbing (send frames built by a closure, receive
//!   frames into a closure), never blocking: it sends only what the TX pipe
//!   and the TX notification credits have room for, so it runs both on
//!   threads and interleaved with a stepped engine.
//! * [`KvLoadClient`]: the KV workload ([`KvClient`]: Zipf keys, GET/SET
//!   mix) as a closed loop of request frames, checking every response and
//!   measuring round-trip latency.
//! * [`LogSource`]: a log cut into UDP payloads, for the log monitor.

use std::convert::Infallible;
use std::net::Ipv4Addr;
use std::time::Duration;

use enso::app::DriverError;
use enso::{AllocError, Device, DeviceError, FreeError, RecvError, RxPipe, SendError, TxPipe};
use enso_abi::wire::FrameError;
use hdrhistogram::Histogram;

use crate::kv::{BatchReader, ClientStats, KvClient, WorkloadConfig, WorkloadError};
use crate::nic::{place_in_stream, MAX_STREAM_FRAME};
use crate::packet::{self, EmitError, Endpoints, MacAddr, UdpChecksum, UdpDatagram, MAX_FRAME_LEN};

/// Why a traffic source stopped.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The device refused an operation.
    #[error(transparent)]
    Driver(#[from] DriverError),
    /// A frame could not be built.
    #[error("building a frame: {0}")]
    Emit(#[from] EmitError),
    /// A built frame cannot be delimited in a TX pipe.
    #[error("frame cannot be sent: {0}")]
    Frame(#[from] FrameError),
    /// A pipe could not be allocated.
    #[error(transparent)]
    Alloc(#[from] AllocError),
    /// The KV workload parameters are unusable.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// A KV window above [`MAX_WINDOW_FRAMES`].
    #[error("a window of {0} request frames is above the maximum of {MAX_WINDOW_FRAMES}")]
    Window(usize),
}

/// Most request frames a [`KvLoadClient`] keeps in flight: half of what a
/// 2 MiB RX pipe holds in one-flit responses, so the responses to a full
/// window fit in the client's pipe; its tables of requests in flight stay
/// below 40 MiB even with the largest batches.
pub const MAX_WINDOW_FRAMES: usize = 1 << 14;

macro_rules! via_driver_error {
    ($($t:ty),*) => {$(
        impl From<$t> for LoadError {
            fn from(e: $t) -> Self {
                LoadError::Driver(e.into())
            }
        }
    )*};
}
via_driver_error!(RecvError, SendError, FreeError, DeviceError);

impl From<Infallible> for LoadError {
    fn from(e: Infallible) -> Self {
        match e {}
    }
}

/// Sends frames through a TX pipe out of one port and receives what
/// arrives on that port in an RX pipe.
#[derive(Debug)]
pub struct PipeClient {
    /// The device handle (needs one TX pipe and, to receive, one pipe).
    pub dev: Device,
    tx: TxPipe,
    rx: Option<RxPipe>,
    port: u32,
    credits: u32,
    /// Frames sent.
    pub sent_frames: u64,
    /// Bytes sent (frame lengths).
    pub sent_bytes: u64,
    /// Frames received.
    pub received_frames: u64,
}

impl PipeClient {
    /// A client on `port`; with `receive`, an RX pipe takes the port's
    /// fallback traffic (what the application sends back).
    pub fn new(mut dev: Device, port: u32, receive: bool) -> Result<Self, AllocError> {
        let tx = dev.alloc_tx_pipe()?;
        let rx = if receive {
            Some(dev.alloc_rx_pipe_on(port, true)?)
        } else {
            None
        };
        let credits = dev
            .options()
            .tx_credits
            .min(dev.info().notif_ring_entries.saturating_sub(1));
        Ok(Self {
            dev,
            tx,
            rx,
            port,
            credits,
            sent_frames: 0,
            sent_bytes: 0,
            received_frames: 0,
        })
    }

    /// The port it sends on.
    pub fn port(&self) -> u32 {
        self.port
    }

    /// Sends up to `max` frames, each written by `fill` at the start of the
    /// slice it is given ([`MAX_FRAME_LEN`] bytes; it returns the frame's
    /// length, or `None` when it has nothing more), in one TX notification.
    /// Sends only what the TX pipe has room for now; returns the frames
    /// sent.
    pub fn send_with<E>(
        &mut self,
        max: usize,
        mut fill: impl FnMut(&mut [u8]) -> Result<Option<usize>, E>,
    ) -> Result<usize, LoadError>
    where
        LoadError: From<E>,
    {
        // A send takes up to two TX notifications (split at the pipe end).
        if max == 0 || self.dev.tx_in_flight() + 2 > self.credits {
            self.dev.reap_completions()?;
            return Ok(0);
        }
        let room = self
            .dev
            .tx_space(self.tx)?
            .min(max.saturating_mul(MAX_STREAM_FRAME));
        if room < MAX_STREAM_FRAME {
            return Ok(0);
        }
        let buf = self.dev.tx_buf(self.tx, room)?;
        let (mut at, mut k, mut bytes) = (0usize, 0usize, 0u64);
        while k < max && at + MAX_STREAM_FRAME <= buf.len() {
            let slot = &mut buf[at..at + MAX_STREAM_FRAME];
            let Some(n) = fill(&mut slot[..MAX_FRAME_LEN])? else {
                break;
            };
            at += place_in_stream(slot, n)?;
            bytes += n as u64;
            k += 1;
        }
        if at > 0 {
            self.dev.send(self.tx, at, self.port)?;
        }
        self.sent_frames += k as u64;
        self.sent_bytes += bytes;
        Ok(k)
    }

    /// Receives what has arrived, calling `f` with each frame, and frees
    /// it. Returns the frames received.
    pub fn recv_with(&mut self, mut f: impl FnMut(&[u8])) -> Result<usize, LoadError> {
        let Some(rx) = self.rx else {
            self.dev.poll()?;
            return Ok(0);
        };
        let (n, len, err) = {
            let b = self.dev.recv(rx)?;
            let len = b.len();
            let mut it = b.packets();
            let mut n = 0;
            for frame in it.by_ref() {
                f(frame);
                n += 1;
            }
            (n, len, it.error())
        };
        if let Some(e) = err {
            return Err(DriverError::Corrupt(e).into());
        }
        if len > 0 {
            self.dev.free(rx, len)?;
        }
        self.received_frames += n as u64;
        Ok(n)
    }
}

/// Round-trip latency percentiles (ns).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct LatencyStats {
    /// Samples.
    pub count: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Largest.
    pub max_ns: u64,
}

impl LatencyStats {
    /// The summary of a histogram.
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        Self {
            count: h.len(),
            mean_ns: h.mean(),
            p50_ns: h.value_at_quantile(0.5),
            p90_ns: h.value_at_quantile(0.9),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            max_ns: h.max(),
        }
    }
}

/// Settings of a [`KvLoadClient`].
#[derive(Clone, Debug)]
pub struct KvLoadConfig {
    /// The request mix (keys, GET share, skew, batch size, addresses).
    pub workload: WorkloadConfig,
    /// Request frames in flight at most (a closed loop).
    pub window_frames: usize,
    /// Request frames sent per poll at most.
    pub burst: usize,
    /// SET every key once before the workload (so GETs hit).
    pub preload: bool,
    /// Frames still unanswered this long after the last response are
    /// counted lost and leave the window (`None`: never).
    pub loss_timeout: Option<Duration>,
    /// Keep a digest of every response frame, in arrival order.
    pub record_responses: bool,
    /// Stop after this many request frames, preload included (`None`:
    /// never).
    pub frames: Option<u64>,
}

impl Default for KvLoadConfig {
    fn default() -> Self {
        Self {
            workload: WorkloadConfig::default(),
            window_frames: 256,
            burst: 32,
            preload: true,
            loss_timeout: Some(Duration::from_millis(200)),
            record_responses: false,
            frames: None,
        }
    }
}

/// What a [`KvLoadClient`] has seen.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct KvLoadReport {
    /// Request frames sent (preload included).
    pub frames_sent: u64,
    /// Response frames received.
    pub frames_received: u64,
    /// Request frames given up on (see [`KvLoadConfig::loss_timeout`]).
    pub frames_lost: u64,
    /// Frames received that are not response batches.
    pub bad_frames: u64,
    /// Requests sent.
    pub requests: u64,
    /// Responses matched to their request.
    pub responses: u64,
    /// GETs answered with the key's value.
    pub hits: u64,
    /// GETs answered "not found".
    pub misses: u64,
    /// Error statuses, unknown or mismatched responses, wrong values.
    pub problems: u64,
    /// Round trips of request frames (send to response), since the last
    /// [`KvLoadClient::reset_latency`].
    pub latency: LatencyStats,
}

/// The KV workload over a TX pipe: request frames in a closed loop of
/// `window_frames`, every response checked ([`KvClient::check_response`])
/// and timed (by the opaque tag of its first message).
#[derive(Debug)]
pub struct KvLoadClient {
    /// The pipes.
    pub pipe: PipeClient,
    client: KvClient,
    cfg: KvLoadConfig,
    preloading: bool,
    /// Send time of in-flight frames by their first opaque tag.
    sent_at: Box<[(u32, u64)]>,
    latency: Histogram<u64>,
    lost: u64,
    bad: u64,
    last_progress_ns: u64,
    digests: Vec<u64>,
}

/// The digest [`KvLoadClient::response_digests`] keeps of a frame.
pub fn frame_digest(frame: &[u8]) -> u64 {
    crate::hash::hash_bytes(frame, 0x6b76)
}

/// The opaque tag of the first message of a request or response frame.
fn first_opaque(frame: &[u8]) -> Option<u32> {
    let d = UdpDatagram::parse(frame).ok()?;
    Some(BatchReader::new(d.payload).ok()?.next()?.ok()?.opaque)
}

impl KvLoadClient {
    /// A client sending on `port` of `dev` (which needs a TX pipe and a
    /// pipe).
    pub fn new(dev: Device, port: u32, mut cfg: KvLoadConfig) -> Result<Self, LoadError> {
        // Both bounded before the tables sized by their product are made.
        if cfg.window_frames > MAX_WINDOW_FRAMES {
            return Err(LoadError::Window(cfg.window_frames));
        }
        if !(1..=crate::kv::wire::MAX_BATCH).contains(&cfg.workload.batch) {
            return Err(WorkloadError::BadBatch(cfg.workload.batch).into());
        }
        cfg.window_frames = cfg.window_frames.max(1);
        cfg.burst = cfg.burst.max(1);
        let live = cfg.window_frames * cfg.workload.batch.max(1);
        cfg.workload.window = cfg.workload.window.max((2 * live).next_power_of_two());
        let client = KvClient::new(cfg.workload)?;
        let pipe = PipeClient::new(dev, port, true)?;
        let slots = (2 * live).next_power_of_two();
        Ok(Self {
            pipe,
            client,
            preloading: cfg.preload,
            sent_at: vec![(u32::MAX, 0); slots].into_boxed_slice(),
            latency: Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
                .expect("valid histogram bounds"),
            lost: 0,
            bad: 0,
            last_progress_ns: enso_abi::monotonic_ns(),
            digests: Vec::new(),
            cfg,
        })
    }

    /// The workload generator and checker.
    pub fn client(&self) -> &KvClient {
        &self.client
    }

    /// Whether the preload phase is still sending.
    pub fn preloading(&self) -> bool {
        self.preloading
    }

    /// Request frames sent and neither answered nor given up on.
    pub fn in_flight(&self) -> u64 {
        self.pipe.sent_frames - self.pipe.received_frames.min(self.pipe.sent_frames) - self.lost
    }

    /// Whether every request frame of [`KvLoadConfig::frames`] was sent
    /// and answered (or given up on).
    pub fn finished(&self) -> bool {
        self.cfg
            .frames
            .is_some_and(|n| self.pipe.sent_frames >= n && self.in_flight() == 0)
    }

    /// Digests of the response frames received so far, in order (with
    /// [`KvLoadConfig::record_responses`]).
    pub fn response_digests(&self) -> &[u64] {
        &self.digests
    }

    /// Forgets the latency samples so far (e.g. after a warm-up).
    pub fn reset_latency(&mut self) {
        self.latency.reset();
    }

    /// Receives and checks responses, then sends requests while the window
    /// has room. Returns the frames received and sent.
    pub fn poll(&mut self) -> Result<usize, LoadError> {
        let now = enso_abi::monotonic_ns();
        let mask = self.sent_at.len() - 1;
        let Self {
            pipe,
            client,
            sent_at,
            latency,
            bad,
            digests,
            cfg,
            ..
        } = self;
        let got = pipe.recv_with(|f| {
            let ok = client.check_response(f).is_ok();
            *bad += u64::from(!ok);
            if let Some(op) = first_opaque(f) {
                let s = &mut sent_at[op as usize & mask];
                if s.0 == op {
                    s.0 = u32::MAX;
                    // Only a valid response measures a round trip (a frame
                    // that only carries the opaque, such as the request
                    // itself looped back, does not).
                    if ok {
                        let _ = latency.record(now.saturating_sub(s.1).max(1));
                    }
                }
            }
            if cfg.record_responses {
                digests.push(frame_digest(f));
            }
        })?;
        if got > 0 {
            self.last_progress_ns = now;
        }
        let mut in_flight = self.in_flight();
        if in_flight > 0 {
            if let Some(t) = self.cfg.loss_timeout {
                if now.saturating_sub(self.last_progress_ns) > t.as_nanos() as u64 {
                    self.lost += in_flight;
                    in_flight = 0;
                    self.last_progress_ns = now;
                }
            }
        } else {
            self.last_progress_ns = now;
        }
        let mut room = (self.cfg.window_frames as u64).saturating_sub(in_flight);
        if let Some(cap) = self.cfg.frames {
            room = room.min(cap.saturating_sub(self.pipe.sent_frames));
        }
        let room = room as usize;
        let Self {
            pipe,
            client,
            sent_at,
            preloading,
            ..
        } = self;
        let sent = pipe.send_with(room.min(self.cfg.burst), |buf| {
            let n = match *preloading {
                true => match client.next_preload_frame(buf)? {
                    Some(n) => n,
                    None => {
                        *preloading = false;
                        client.next_frame(buf)?
                    }
                },
                false => client.next_frame(buf)?,
            };
            if let Some(op) = first_opaque(&buf[..n]) {
                sent_at[op as usize & mask] = (op, now);
            }
            Ok::<_, EmitError>(Some(n))
        })?;
        Ok(got + sent)
    }

    /// What the client has seen.
    pub fn report(&self) -> KvLoadReport {
        let s: &ClientStats = self.client.stats();
        KvLoadReport {
            frames_sent: self.pipe.sent_frames,
            frames_received: self.pipe.received_frames,
            frames_lost: self.lost,
            bad_frames: self.bad,
            requests: s.requests,
            responses: s.responses,
            hits: s.hits,
            misses: s.misses,
            problems: s.error_statuses + s.unknown + s.mismatched + s.wrong_values,
            latency: LatencyStats::of(&self.latency),
        }
    }
}

/// A log cut into consecutive UDP payloads of one flow (lines split across
/// packets wherever the cut falls), for the log monitor.
#[derive(Clone, Debug)]
pub struct LogSource {
    text: std::sync::Arc<[u8]>,
    payload: usize,
    at: usize,
    repeat: bool,
    endpoints: Endpoints,
    /// Payload bytes sent.
    pub bytes: u64,
    /// Times the whole log was sent.
    pub passes: u64,
}

impl LogSource {
    /// The default addresses: 10.0.3.1:514 to 10.0.4.1:514 (syslog).
    pub const ENDPOINTS: Endpoints = Endpoints {
        src_mac: MacAddr([0x02, 0, 0, 0, 0x03, 0x01]),
        dst_mac: MacAddr([0x02, 0, 0, 0, 0x04, 0x01]),
        src_ip: Ipv4Addr::new(10, 0, 3, 1),
        dst_ip: Ipv4Addr::new(10, 0, 4, 1),
        src_port: 514,
        dst_port: 514,
    };

    /// Most payload bytes one frame carries.
    pub const MAX_PAYLOAD: usize = MAX_FRAME_LEN - packet::UDP_PAYLOAD_OFFSET;

    /// Sends `text` in payloads of `payload` bytes (clamped to
    /// 1..=[`Self::MAX_PAYLOAD`]), once or, with `repeat`, over and over.
    pub fn new(text: impl Into<std::sync::Arc<[u8]>>, payload: usize, repeat: bool) -> Self {
        Self {
            text: text.into(),
            payload: payload.clamp(1, Self::MAX_PAYLOAD),
            at: 0,
            repeat,
            endpoints: Self::ENDPOINTS,
            bytes: 0,
            passes: 0,
        }
    }

    /// Payload bytes per packet (the last piece of a pass may be shorter).
    pub fn payload_len(&self) -> usize {
        self.payload
    }

    /// The log.
    pub fn text(&self) -> &[u8] {
        &self.text
    }

    /// Whether everything was sent (never, with `repeat`).
    pub fn finished(&self) -> bool {
        self.text.is_empty() || (!self.repeat && self.at >= self.text.len())
    }

    /// Writes the frame carrying the next piece of the log into `buf`;
    /// `None` once the log has been sent (without `repeat`).
    pub fn next_frame(&mut self, buf: &mut [u8]) -> Result<Option<usize>, EmitError> {
        if self.finished() {
            return Ok(None);
        }
        if self.at >= self.text.len() {
            self.at = 0;
        }
        let end = (self.at + self.payload).min(self.text.len());
        let piece = &self.text[self.at..end];
        let at = packet::UDP_PAYLOAD_OFFSET;
        let Some(dst) = buf.get_mut(at..at + piece.len()) else {
            return Err(EmitError::BufferTooSmall {
                needed: at + piece.len(),
                available: buf.len(),
            });
        };
        dst.copy_from_slice(piece);
        // No UDP checksum: the paper offloads checksums to the NIC on both
        // interfaces (the KV client and server leave it out too).
        let n = packet::finish_udp_frame(buf, &self.endpoints, piece.len(), UdpChecksum::Omit)?;
        self.bytes += (end - self.at) as u64;
        self.at = end;
        if end == self.text.len() {
            self.passes += 1;
        }
        Ok(Some(n))
    }
}
