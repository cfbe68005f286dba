//! `pcap:rx=FILE[,tx=FILE][,loop=N|inf][,rate=R]`: a port whose wire is a
//! pair of capture files, as DPDK's `net_pcap` has them.
//!
//! * **RX** replays `rx`'s frames into the port. The file (pcap, with
//!   micro- or nanosecond stamps, or pcapng) is read whole when the port
//!   is opened: the engine never touches a file. Replay starts once the
//!   port has somewhere to put frames (a fallback pipe or queue, or a flow
//!   rule), so a short file is never dropped for want of a listener, and
//!   runs `loop` times (default once; `inf` forever) at `rate`
//!   ([`ReplayRate`]). A file that cannot be used is one error at start
//!   naming the file, the record and the reason: not a capture, a link
//!   type other than Ethernet, a truncated record, a frame shorter than 14
//!   or longer than the port's largest (1536 B). A record captured shorter
//!   than the frame was (snapped) is sent as captured, and counted.
//!   pcapng timestamps count in the interface's `if_tsresol` (microseconds
//!   without it), so `rate=original` keeps a pcapng file's pace.
//! * **Frames** the port replays take the NIC's RX path as any wire's do:
//!   802.1Q and QinQ tagged frames and frames shorter than 60 B are
//!   delivered as they are; bytes after the length a frame's headers state
//!   (Ethernet padding) are not written into the pipe; a frame whose
//!   headers state more bytes than it has, or an IPv4 total length below
//!   its header, is dropped and counted (`malformed`): so is a snapped
//!   IPv4 or IPv6 record, which DPDK's `net_pcap` and tcpreplay also send
//!   as captured (pktgen pads it back to its length). A frame longer than
//!   1536 B (jumbo) refuses the whole file at start, naming its record,
//!   rather than being dropped on every pass: the file is known whole
//!   before anything is replayed. pktgen reads the same files, and refuses
//!   the same non-captures, link types, truncations and frame sizes.
//! * **TX** writes every frame the port sends to `tx`, a nanosecond pcap
//!   stamped with the engine's clock, through an I/O thread
//!   ([`super::io_thread`]); it is flushed when the device stops. Frames the
//!   writer cannot keep up with are counted (`tx_queue_full`).

use std::path::{Path, PathBuf};

use pcap_file::pcapng::Block;
use pcap_file::DataLink;
use serde::{Deserialize, Serialize};

use super::io_thread::{FrameQueue, IoCounters, IoThread};
use super::rate::{ReplayRate, WIRE_OVERHEAD};
use super::{file_err, Backend, BackendError};
use crate::wire::{MAX_FRAME, MIN_FRAME};

/// Largest capture file a pcap port reads (its frames are kept in memory).
pub const MAX_FILE_BYTES: u64 = 1 << 30;
/// Frames a pcap port's TX writer holds when it falls behind.
const TX_QUEUE_FRAMES: usize = 4096;

/// A port wired to capture files.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PcapWire {
    /// Frames to replay into the port.
    pub rx: Option<PathBuf>,
    /// Where the frames the port sends are written.
    pub tx: Option<PathBuf>,
    /// Times to replay `rx` (None: forever).
    pub loops: Option<u64>,
    /// How fast.
    pub rate: ReplayRate,
}

impl PcapWire {
    /// Parses the options after `pcap:`.
    pub fn parse(opts: &str) -> Result<Self, BackendError> {
        let mut w = PcapWire {
            loops: Some(1),
            ..Default::default()
        };
        let mut seen = Vec::new();
        for kv in opts.split(',').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| {
                BackendError::Options(format!("pcap option '{kv}' is not key=value"))
            })?;
            if seen.contains(&k) {
                return Err(BackendError::Options(format!(
                    "pcap option {k} given twice"
                )));
            }
            seen.push(k);
            match k {
                "rx" => w.rx = Some(PathBuf::from(v)),
                "tx" => w.tx = Some(PathBuf::from(v)),
                "loop" if v == "inf" => w.loops = None,
                "loop" => {
                    let n: u64 = v.parse().map_err(|_| {
                        BackendError::Options(format!(
                            "pcap loop '{v}': a whole number above 0, or inf"
                        ))
                    })?;
                    if n == 0 {
                        return Err(BackendError::Options(
                            "pcap loop 0: a whole number above 0, or inf".into(),
                        ));
                    }
                    w.loops = Some(n);
                }
                "rate" => w.rate = ReplayRate::parse(v)?,
                _ => {
                    return Err(BackendError::Options(format!(
                        "unknown pcap option '{k}' (rx, tx, loop, rate)"
                    )))
                }
            }
        }
        if w.rx.is_none() && w.tx.is_none() {
            return Err(BackendError::Options(
                "pcap needs rx=FILE, tx=FILE or both".into(),
            ));
        }
        Ok(w)
    }
}

/// Frames read from a capture, back to back in one buffer.
#[derive(Debug, Default)]
pub struct Capture {
    bytes: Vec<u8>,
    /// (offset, length, timestamp in ns) of each frame.
    frames: Vec<(usize, usize, u64)>,
    /// Records captured shorter than the frame on the wire.
    pub snapped: u64,
}

impl Capture {
    /// Number of frames.
    pub fn len(&self) -> usize {
        self.frames.len()
    }
    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
    /// Frame `i` and its timestamp (ns).
    pub fn frame(&self, i: usize) -> (&[u8], u64) {
        let (o, l, t) = self.frames[i];
        (&self.bytes[o..o + l], t)
    }

    fn push(
        &mut self,
        file: &Path,
        record: usize,
        data: &[u8],
        orig: u64,
        ts: u64,
    ) -> Result<(), BackendError> {
        if data.len() < MIN_FRAME || data.len() > MAX_FRAME {
            return Err(file_err(
                file,
                &format!(
                    "record {record}: a frame of {} bytes; the port takes {MIN_FRAME} to {MAX_FRAME}",
                    data.len()
                ),
            ));
        }
        if (data.len() as u64) < orig {
            self.snapped += 1;
        }
        self.frames.push((self.bytes.len(), data.len(), ts));
        self.bytes.extend_from_slice(data);
        Ok(())
    }

    /// Reads a pcap or pcapng file whole; every refusal names the file,
    /// the record (counting from 1) and why.
    pub fn read(file: &Path) -> Result<Self, BackendError> {
        let err = |what: &dyn std::fmt::Display| file_err(file, what);
        let meta = std::fs::metadata(file).map_err(|e| err(&e))?;
        if !meta.is_file() {
            return Err(err(&"not a regular file"));
        }
        if meta.len() > MAX_FILE_BYTES {
            return Err(err(&format!(
                "{} bytes; a pcap port reads files of at most {MAX_FILE_BYTES}",
                meta.len()
            )));
        }
        let data = std::fs::read(file).map_err(|e| err(&e))?;
        if data.len() < 4 {
            return Err(err(&"not a capture file (shorter than any header)"));
        }
        let magic = u32::from_le_bytes(data[..4].try_into().expect("4 bytes"));
        match magic {
            0xa1b2_c3d4 | 0xd4c3_b2a1 | 0xa1b2_3c4d | 0x4d3c_b2a1 => Self::read_pcap(file, &data),
            0x0a0d_0d0a => Self::read_pcapng(file, &data),
            // The magic as its bytes stand in the file, as pktgen says it.
            _ => Err(err(&format!(
                "not a capture file (magic {:#010x}; pcap and pcapng are read)",
                magic.swap_bytes()
            ))),
        }
    }

    fn read_pcap(file: &Path, data: &[u8]) -> Result<Self, BackendError> {
        let err = |what: &dyn std::fmt::Display| file_err(file, what);
        let (mut rest, parser) = pcap_file::pcap::PcapParser::new(data)
            .map_err(|e| err(&format!("bad pcap header: {}", reason(&e))))?;
        if parser.header().datalink != DataLink::ETHERNET {
            let link = parser.header().datalink;
            return Err(err(&format!(
                "link type {} ({link:?}); a pcap port takes Ethernet frames only (link type 1)",
                u32::from(link)
            )));
        }
        let mut cap = Capture::default();
        let mut record = 0;
        while !rest.is_empty() {
            record += 1;
            let (next, raw) = parser
                .next_raw_packet(rest)
                .map_err(|e| err(&format!("record {record}: {}", reason(&e))))?;
            let ts = raw.ts_sec as u64 * 1_000_000_000
                + match parser.header().ts_resolution {
                    pcap_file::TsResolution::MicroSecond => raw.ts_frac as u64 * 1000,
                    pcap_file::TsResolution::NanoSecond => raw.ts_frac as u64,
                };
            if raw.incl_len as usize != raw.data.len() {
                return Err(err(&format!("record {record}: truncated")));
            }
            cap.push(file, record, &raw.data, raw.orig_len as u64, ts)?;
            rest = next;
        }
        Ok(cap)
    }

    fn read_pcapng(file: &Path, data: &[u8]) -> Result<Self, BackendError> {
        let err = |what: &dyn std::fmt::Display| file_err(file, what);
        let (mut rest, mut parser) = pcap_file::pcapng::PcapNgParser::new(data)
            .map_err(|e| err(&format!("bad pcapng section header: {}", reason(&e))))?;
        let mut cap = Capture::default();
        let mut record = 0;
        while !rest.is_empty() {
            let (next, block) = parser
                .next_block(rest)
                .map_err(|e| err(&format!("block after record {record}: {}", reason(&e))))?;
            rest = next;
            let (iface, data, orig, ts) = match block {
                Block::EnhancedPacket(p) => (
                    p.interface_id as usize,
                    p.data,
                    p.original_len as u64,
                    pcapng_ns(
                        p.timestamp,
                        parser.interfaces().get(p.interface_id as usize),
                    ),
                ),
                Block::SimplePacket(p) => (0, p.data, p.original_len as u64, 0),
                Block::InterfaceDescription(d) => {
                    if d.linktype != DataLink::ETHERNET {
                        return Err(err(&format!(
                            "interface {} has link type {} ({:?}); a pcap port takes Ethernet frames only (link type 1)",
                            parser.interfaces().len() - 1,
                            u32::from(d.linktype),
                            d.linktype
                        )));
                    }
                    continue;
                }
                _ => continue,
            };
            record += 1;
            if iface >= parser.interfaces().len() {
                return Err(err(&format!(
                    "record {record}: names interface {iface}, which the file does not describe"
                )));
            }
            cap.push(file, record, &data, orig, ts)?;
        }
        Ok(cap)
    }
}

/// The time of a pcapng packet in ns since the epoch: pcap-file hands over
/// the block's timestamp as a count of nanoseconds, but it counts units of
/// the interface's `if_tsresol` option (10^-v s, or 2^-v s with the top bit
/// set; microseconds without the option, as scapy, dumpcap and tcpdump
/// write), from its `if_tsoffset` seconds.
pub fn pcapng_ns(
    raw: std::time::Duration,
    iface: Option<&pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock<'_>>,
) -> u64 {
    use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption as Opt;
    let units = raw.as_nanos();
    let (mut resol, mut offset_s) = (6u8, 0u64);
    for o in iface.map_or(&[][..], |i| &i.options[..]) {
        match *o {
            Opt::IfTsResol(v) => resol = v,
            Opt::IfTsOffset(s) => offset_s = s,
            _ => {}
        }
    }
    let ns = if resol & 0x80 != 0 {
        // 2^-e s: at most 127, so the shift stays within u128.
        (units.saturating_mul(1_000_000_000)) >> (resol & 0x7f)
    } else if resol <= 9 {
        units.saturating_mul(10u128.pow(u32::from(9 - resol)))
    } else {
        10u128
            .checked_pow(u32::from(resol - 9))
            .map_or(0, |d| units / d)
    };
    let ns = ns.saturating_add(u128::from(offset_s) * 1_000_000_000);
    u64::try_from(ns).unwrap_or(u64::MAX)
}

fn reason(e: &pcap_file::PcapError) -> String {
    match e {
        pcap_file::PcapError::IncompleteBuffer => "truncated".into(),
        e => e.to_string(),
    }
}

/// The replay's position and schedule.
#[derive(Debug)]
struct Replay {
    cap: Capture,
    loops: Option<u64>,
    rate: ReplayRate,
    /// When replay started (ns), once the port has a listener.
    start: Option<u64>,
    next: usize,
    loop_no: u64,
    /// Frames sent in all.
    sent: u64,
    /// ns a pass over the file lasts at the original pace.
    span_ns: u64,
    /// When the next frame is due at a bit rate (ns since start, as f64).
    due_bits_ns: f64,
}

impl Replay {
    /// The schedule of `cap` (read from `file`); at the original pace, one
    /// whose pass does not fit in u64 ns is refused (a capture with bogus
    /// stamps, say 0 and then 2^63 ns), rather than wrapping.
    fn new(
        file: &Path,
        cap: Capture,
        loops: Option<u64>,
        rate: ReplayRate,
    ) -> Result<Self, BackendError> {
        let n = cap.len();
        let (first, last) = (cap.frame(0).1, cap.frame(n - 1).1);
        let span = last.saturating_sub(first);
        // A pass lasts from the first frame to one mean gap after the last.
        let gap = if n > 1 { span / (n as u64 - 1) } else { 1_000 };
        let span_ns = span.checked_add(gap.max(1));
        if span_ns.is_none() && matches!(rate, ReplayRate::Original(_)) {
            return Err(file_err(
                file,
                &format!(
                    "records 1 to {n} are stamped {first} to {last} ns: a pass at rate=original \
                     would last more than 2^64 ns (use rate=max, a packet rate or a bit rate)"
                ),
            ));
        }
        Ok(Self {
            cap,
            loops,
            rate,
            start: None,
            next: 0,
            loop_no: 0,
            sent: 0,
            // Not read at other rates.
            span_ns: span_ns.unwrap_or(u64::MAX),
            due_bits_ns: 0.0,
        })
    }

    fn finished(&self) -> bool {
        self.loops.is_some_and(|l| self.loop_no >= l)
    }

    /// When frame `next` of pass `loop_no` is due (ns of the clock); None
    /// if after the clock's end (u64 ns): never, rather than wrapped to a
    /// time already past.
    fn due(&self, start: u64) -> Option<u64> {
        let after = |ns: f64| {
            // 2^64: the first float no u64 holds (a cast would saturate).
            const END: f64 = 18_446_744_073_709_551_616.0;
            (ns < END)
                .then_some(ns as u64)
                .and_then(|d| start.checked_add(d))
        };
        match self.rate {
            ReplayRate::Max => Some(0),
            ReplayRate::Original(k) => {
                let t0 = self.cap.frame(0).1;
                let at = self.loop_no as f64 * self.span_ns as f64
                    + self.cap.frame(self.next).1.saturating_sub(t0) as f64;
                after(at / k)
            }
            ReplayRate::Pps(pps) => after(self.sent as f64 * 1e9 / pps),
            ReplayRate::Bps(_) => after(self.due_bits_ns),
        }
    }

    fn advance(&mut self, len: usize) {
        if let ReplayRate::Bps(bps) = self.rate {
            self.due_bits_ns += (len as u64 + WIRE_OVERHEAD) as f64 * 8.0 * 1e9 / bps;
        }
        self.sent += 1;
        self.next += 1;
        if self.next == self.cap.len() {
            self.next = 0;
            self.loop_no += 1;
        }
    }
}

/// A port wired to capture files.
#[derive(Debug)]
pub struct PcapPort {
    wire: PcapWire,
    replay: Option<Replay>,
    tx: Option<(FrameQueue, IoThread)>,
    tx_counters: Option<std::sync::Arc<IoCounters>>,
    tx_queue_full: u64,
    /// Frames sent on a port with no `tx` file.
    tx_discarded: u64,
}

impl PcapPort {
    /// Reads `rx` and opens `tx` (created, or truncated if it exists).
    pub fn open(w: &PcapWire) -> Result<Self, BackendError> {
        let replay = match &w.rx {
            Some(f) => {
                let cap = Capture::read(f)?;
                if cap.is_empty() {
                    return Err(file_err(f, &"holds no frames"));
                }
                Some(Replay::new(f, cap, w.loops, w.rate)?)
            }
            None => None,
        };
        let (tx, tx_counters) = match &w.tx {
            Some(path) => {
                let (q, t, c) = super::io_thread::pcap_writer(path, TX_QUEUE_FRAMES)?;
                (Some((q, t)), Some(c))
            }
            None => (None, None),
        };
        Ok(Self {
            wire: w.clone(),
            replay,
            tx,
            tx_counters,
            tx_queue_full: 0,
            tx_discarded: 0,
        })
    }

    /// Starts the replay at `now` (the port has somewhere to put frames).
    pub fn start(&mut self, now: u64) {
        if let Some(r) = &mut self.replay {
            r.start.get_or_insert(now);
        }
    }
}

impl Backend for PcapPort {
    fn describe(&self) -> String {
        let mut s = String::from("pcap:");
        if let Some(rx) = &self.wire.rx {
            s += &format!("rx={}", rx.display());
        }
        if let Some(tx) = &self.wire.tx {
            if self.wire.rx.is_some() {
                s.push(',');
            }
            s += &format!("tx={}", tx.display());
        }
        s
    }

    fn receive(&mut self, now: u64, budget: usize, deliver: &mut dyn FnMut(&[u8])) -> usize {
        let Some(r) = &mut self.replay else { return 0 };
        let Some(start) = r.start else { return 0 };
        let mut n = 0;
        while n < budget && !r.finished() {
            if r.due(start).is_none_or(|d| d > now) {
                break;
            }
            let (f, _) = r.cap.frame(r.next);
            deliver(f);
            let len = f.len();
            r.advance(len);
            n += 1;
        }
        n
    }

    fn transmit(&mut self, frame: &[u8], now: u64) {
        match &mut self.tx {
            Some((q, _)) => {
                if !q.push(frame, now) {
                    self.tx_queue_full += 1;
                }
            }
            None => self.tx_discarded += 1,
        }
    }

    fn receivers_ready(&mut self, now: u64) {
        self.start(now);
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        let mut v = Vec::new();
        if let Some(r) = &self.replay {
            v.push(("replayed_frames", r.sent));
            v.push(("replay_passes", r.loop_no));
            v.push(("snapped_records", r.cap.snapped));
        }
        if let Some(c) = &self.tx_counters {
            v.push(("written_frames", c.frames()));
        }
        v
    }

    fn drops(&self) -> Vec<(&'static str, u64)> {
        let mut v = vec![("tx_queue_full", self.tx_queue_full)];
        if let Some(c) = &self.tx_counters {
            v.push(("tx_write_errors", c.errors()));
        } else {
            v.push(("tx_no_file", self.tx_discarded));
        }
        v
    }

    fn finished(&self) -> bool {
        self.replay.as_ref().is_some_and(Replay::finished)
    }

    fn finish(&mut self) {
        if let Some((q, t)) = self.tx.take() {
            drop(q);
            t.join();
        }
    }
}

impl Drop for PcapPort {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A little-endian pcapng: a section header, one interface of link
    /// type `link` with `options` (raw option bytes), and an enhanced
    /// packet block per `(timestamp units, frame)`.
    fn pcapng(link: u16, options: &[u8], frames: &[(u64, &[u8])]) -> Vec<u8> {
        let mut b = Vec::new();
        let block = |b: &mut Vec<u8>, kind: u32, body: &[u8]| {
            let len = 12 + body.len().next_multiple_of(4);
            b.extend_from_slice(&kind.to_le_bytes());
            b.extend_from_slice(&(len as u32).to_le_bytes());
            b.extend_from_slice(body);
            b.resize(b.len() + body.len().next_multiple_of(4) - body.len(), 0);
            b.extend_from_slice(&(len as u32).to_le_bytes());
        };
        let mut shb = 0x1a2b_3c4du32.to_le_bytes().to_vec();
        shb.extend_from_slice(&[1, 0, 0, 0]);
        shb.extend_from_slice(&(-1i64).to_le_bytes());
        block(&mut b, 0x0a0d_0d0a, &shb);
        let mut idb = link.to_le_bytes().to_vec();
        idb.extend_from_slice(&[0, 0]);
        idb.extend_from_slice(&65535u32.to_le_bytes());
        idb.extend_from_slice(options);
        block(&mut b, 1, &idb);
        for (ts, f) in frames {
            let mut epb = 0u32.to_le_bytes().to_vec();
            epb.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
            epb.extend_from_slice(&(*ts as u32).to_le_bytes());
            epb.extend_from_slice(&(f.len() as u32).to_le_bytes());
            epb.extend_from_slice(&(f.len() as u32).to_le_bytes());
            epb.extend_from_slice(f);
            block(&mut b, 6, &epb);
        }
        b
    }

    #[test]
    fn pcapng_timestamps_count_in_the_interfaces_resolution() {
        let f = [0u8; 60];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.pcapng");
        // No if_tsresol: microseconds, as scapy, dumpcap and tcpdump write;
        // then nanoseconds (9), and 2^-10 s (0x8a); an end-of-options
        // option closes each list.
        let cases: [(&[u8], u64, u64); 3] = [
            (&[], 1_700_000_000_000_010, 1_700_000_000_000_010_000),
            (&[9, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0], 1_500, 1_500),
            (
                &[9, 0, 1, 0, 0x8a, 0, 0, 0, 0, 0, 0, 0],
                3 * 1024,
                3_000_000_000,
            ),
        ];
        for (options, units, ns) in cases {
            std::fs::write(&path, pcapng(1, options, &[(units, &f), (units * 2, &f)])).unwrap();
            let cap = Capture::read(&path).unwrap();
            assert_eq!(
                (cap.frame(0).1, cap.frame(1).1),
                (ns, 2 * ns),
                "{options:?}"
            );
        }
        // An interface that is not Ethernet is named with its number.
        std::fs::write(&path, pcapng(101, &[], &[(0, &f)])).unwrap();
        let e = Capture::read(&path).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{}: interface 0 has link type 101 (RAW); a pcap port takes Ethernet \
                 frames only (link type 1)",
                path.display()
            )
        );
    }

    /// Frames `receive` delivers at each of `times` (ns).
    fn delivered_at(port: &mut PcapPort, times: &[u64]) -> Vec<usize> {
        times
            .iter()
            .map(|&now| port.receive(now, 1 << 20, &mut |_| {}))
            .collect()
    }

    #[test]
    fn timestamps_too_far_apart_for_the_schedule_are_one_error_or_replayed_sanely() {
        let f = [0u8; 60];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("far.pcapng");
        // Nanosecond stamps (if_tsresol 9): 0, then 2^63 ns and beyond.
        let ns = [9, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0];
        let far = 1u64 << 63;
        let wire = |rate: &str| {
            PcapWire::parse(&format!("rx={},loop=2,rate={rate}", path.display())).unwrap()
        };
        // Two frames 2^63 ns apart: a pass (the span and one mean gap
        // after it) is 2^64 ns, which no schedule in ns holds.
        std::fs::write(&path, pcapng(1, &ns, &[(0, &f), (far, &f)])).unwrap();
        let e = PcapPort::open(&wire("original"))
            .expect_err("an unrepresentable schedule")
            .to_string();
        assert!(e.starts_with(&format!("{}: ", path.display())), "{e}");
        assert!(e.contains("rate=original"), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
        // The same file at a rate that does not read the stamps replays.
        let mut port = PcapPort::open(&wire("max")).unwrap();
        port.start(5);
        assert_eq!(delivered_at(&mut port, &[5, 6]), [4, 0]);
        assert!(port.finished());
        // Stamps that leave a representable pass whose frames fall due far
        // off (and, sped down, past the clock's end): the first frame of
        // each pass on time, the rest never early, no overflow.
        std::fs::write(&path, pcapng(1, &ns, &[(0, &f), (far / 2, &f), (far, &f)])).unwrap();
        for rate in ["original", "original*0.000001"] {
            let mut port = PcapPort::open(&wire(rate)).unwrap();
            port.start(u64::MAX - 10);
            assert_eq!(
                delivered_at(&mut port, &[u64::MAX - 10, u64::MAX - 1, u64::MAX]),
                [1, 0, 0],
                "{rate}"
            );
            assert!(!port.finished(), "{rate}");
        }
        // Packet and bit rates near the clock's end do not wrap either.
        for rate in ["1pps", "1kbps"] {
            let mut port = PcapPort::open(&wire(rate)).unwrap();
            port.start(u64::MAX - 10);
            assert_eq!(
                delivered_at(&mut port, &[u64::MAX - 10, u64::MAX]),
                [1, 0],
                "{rate}"
            );
        }
    }
}
