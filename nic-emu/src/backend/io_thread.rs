//! I/O threads for backends that need a system call per frame (a TAP
//! device, a capture file being written), joined to the engine by bounded
//! single-producer single-consumer queues of frames, so that the engine
//! never blocks and takes no lock or atomic read-modify-write per frame.
//!
//! A queue is a byte ring (`rtrb`, wait-free: each side publishes its
//! position with a Release store that the other side's Acquire load pairs
//! with, inside `rtrb`) holding frames back to back, each behind a 10-byte
//! header: its length (u16) and a timestamp (u64 ns), little-endian.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::BackendError;
use crate::wire::MAX_FRAME;

const HEADER: usize = 10;

/// The sending end of a frame queue.
#[derive(Debug)]
pub struct FrameQueue {
    p: rtrb::Producer<u8>,
}

/// The receiving end of a frame queue.
#[derive(Debug)]
pub struct FrameSource {
    c: rtrb::Consumer<u8>,
}

/// A queue holding at least `frames` frames of the largest size.
pub fn frame_queue(frames: usize) -> (FrameQueue, FrameSource) {
    let (p, c) = rtrb::RingBuffer::new(frames.max(1) * (MAX_FRAME + HEADER));
    (FrameQueue { p }, FrameSource { c })
}

impl FrameQueue {
    /// Appends `frame` stamped `at`; false if the queue is full (or the
    /// frame larger than any the port carries).
    pub fn push(&mut self, frame: &[u8], at: u64) -> bool {
        if frame.len() > MAX_FRAME {
            return false;
        }
        let Ok(mut chunk) = self.p.write_chunk(HEADER + frame.len()) else {
            return false;
        };
        let mut hdr = [0u8; HEADER];
        hdr[..2].copy_from_slice(&(frame.len() as u16).to_le_bytes());
        hdr[2..].copy_from_slice(&at.to_le_bytes());
        let (a, b) = chunk.as_mut_slices();
        let mut src = hdr.iter().chain(frame.iter());
        for d in a.iter_mut().chain(b.iter_mut()) {
            *d = *src.next().expect("chunk sized to the frame");
        }
        chunk.commit_all();
        true
    }

    /// Whether the other end has gone (its thread ended).
    pub fn is_abandoned(&self) -> bool {
        self.p.is_abandoned()
    }
}

impl FrameSource {
    /// The next frame, copied into `buf` (at least [`MAX_FRAME`] bytes):
    /// its length and timestamp.
    pub fn pop(&mut self, buf: &mut [u8]) -> Option<(usize, u64)> {
        let (len, at) = {
            let chunk = self.c.read_chunk(HEADER).ok()?;
            let (a, b) = chunk.as_slices();
            let mut hdr = [0u8; HEADER];
            for (d, s) in hdr.iter_mut().zip(a.iter().chain(b.iter())) {
                *d = *s;
            }
            // Not committed: read again with the frame below.
            (
                u16::from_le_bytes([hdr[0], hdr[1]]) as usize,
                u64::from_le_bytes(hdr[2..].try_into().expect("8 bytes")),
            )
        };
        let chunk = self.c.read_chunk(HEADER + len).ok()?;
        let (a, b) = chunk.as_slices();
        for (d, s) in buf[..len]
            .iter_mut()
            .zip(a.iter().chain(b.iter()).skip(HEADER))
        {
            *d = *s;
        }
        chunk.commit_all();
        Some((len, at))
    }

    /// Whether a frame is waiting.
    pub fn is_empty(&self) -> bool {
        self.c.is_empty()
    }
}

/// Counters an I/O thread keeps: written by it alone (a load and a store,
/// no read-modify-write), read by the engine for its stats.
#[derive(Debug, Default)]
pub struct IoCounters {
    frames: AtomicU64,
    bytes: AtomicU64,
    errors: AtomicU64,
    in_frames: AtomicU64,
    in_queue_full: AtomicU64,
}

fn bump(c: &AtomicU64, by: u64) {
    // One writer: a plain load and store suffice, and nothing else is
    // published through these (readers want a recent value, no more).
    c.store(c.load(Ordering::Relaxed) + by, Ordering::Relaxed);
}

impl IoCounters {
    /// Frames the thread wrote out.
    pub fn frames(&self) -> u64 {
        self.frames.load(Ordering::Relaxed)
    }
    /// Bytes the thread wrote out.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
    /// Frames it could not write (a failed write, a file error).
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }
    /// Frames it read in and queued for the engine.
    pub fn in_frames(&self) -> u64 {
        self.in_frames.load(Ordering::Relaxed)
    }
    /// Frames it read in but the engine's queue was full for.
    pub fn in_queue_full(&self) -> u64 {
        self.in_queue_full.load(Ordering::Relaxed)
    }
}

/// An I/O thread; [`IoThread::join`] stops it once its queue is drained.
#[derive(Debug)]
pub struct IoThread {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl IoThread {
    fn spawn(
        name: String,
        f: impl FnOnce(Arc<AtomicBool>) + Send + 'static,
    ) -> Result<Self, BackendError> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::Builder::new()
            .name(name)
            .spawn(move || f(s))
            .map_err(|e| BackendError::Open(format!("cannot start an I/O thread: {e}")))?;
        Ok(Self {
            stop,
            handle: Some(handle),
        })
    }

    /// Asks the thread to finish what is queued and stop, and waits.
    pub fn join(mut self) {
        self.stop_and_wait();
    }

    fn stop_and_wait(&mut self) {
        // SYNC POINT: Release, paired with the thread's Acquire load of
        // `stop`: what the engine queued before is seen by the thread.
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for IoThread {
    fn drop(&mut self) {
        self.stop_and_wait();
    }
}

/// Starts a thread writing the frames pushed into the returned queue to a
/// new nanosecond pcap file at `path` (truncated if it exists), flushing
/// when the queue runs dry and when stopped.
pub fn pcap_writer(
    path: &Path,
    frames: usize,
) -> Result<(FrameQueue, IoThread, Arc<IoCounters>), BackendError> {
    use std::io::Write;
    let err = |e: &dyn std::fmt::Display| super::file_err(path, e);
    let file = crate::outfile::create(path).map_err(|e| err(&e))?;
    // Written here rather than with pcap-file's writer, which cannot flush
    // without giving the file up: the file is a 24-byte header (nanosecond
    // magic, version 2.4, Ethernet), then per frame a 16-byte record
    // header (seconds, nanoseconds, captured and original length), all
    // little-endian.
    let mut w = std::io::BufWriter::new(file);
    let mut header = Vec::with_capacity(24);
    header.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    header.extend_from_slice(&2u16.to_le_bytes());
    header.extend_from_slice(&4u16.to_le_bytes());
    header.extend_from_slice(&0i32.to_le_bytes());
    header.extend_from_slice(&0u32.to_le_bytes());
    header.extend_from_slice(&(MAX_FRAME as u32).to_le_bytes());
    header.extend_from_slice(&1u32.to_le_bytes());
    w.write_all(&header)
        .and_then(|_| w.flush())
        .map_err(|e| err(&e))?;
    let (q, mut src) = frame_queue(frames);
    let counters = Arc::new(IoCounters::default());
    let c = counters.clone();
    let name = format!(
        "pcap-tx-{}",
        path.file_name().unwrap_or_default().to_string_lossy()
    );
    let t = IoThread::spawn(name, move |stop| {
        let mut buf = vec![0u8; MAX_FRAME];
        loop {
            // SYNC POINT: Acquire, paired with `stop_and_wait`'s Release.
            let stopping = stop.load(Ordering::Acquire);
            let mut any = false;
            while let Some((len, at)) = src.pop(&mut buf) {
                any = true;
                let mut rec = [0u8; 16];
                rec[..4].copy_from_slice(&((at / 1_000_000_000) as u32).to_le_bytes());
                rec[4..8].copy_from_slice(&((at % 1_000_000_000) as u32).to_le_bytes());
                rec[8..12].copy_from_slice(&(len as u32).to_le_bytes());
                rec[12..].copy_from_slice(&(len as u32).to_le_bytes());
                match w.write_all(&rec).and_then(|_| w.write_all(&buf[..len])) {
                    Ok(()) => {
                        bump(&c.frames, 1);
                        bump(&c.bytes, len as u64);
                    }
                    Err(_) => bump(&c.errors, 1),
                }
            }
            if !any {
                if w.flush().is_err() {
                    bump(&c.errors, 1);
                }
                if stopping {
                    break;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        let _ = w.flush();
    })?;
    Ok((q, t, counters))
}

/// Starts a thread moving frames between a TAP device and the engine:
/// frames pushed into the first queue are written to the device, frames
/// read from it come out of the second.
pub fn tap_thread(
    mut tap: rawsock::Tap,
    frames: usize,
) -> Result<(FrameQueue, FrameSource, IoThread, Arc<IoCounters>), BackendError> {
    let (to_tap, mut from_engine) = frame_queue(frames);
    let (mut to_engine, from_tap) = frame_queue(frames);
    let counters = Arc::new(IoCounters::default());
    let c = counters.clone();
    let name = format!("tap-{}", tap.name());
    let t = IoThread::spawn(name, move |stop| {
        let mut out = vec![0u8; MAX_FRAME];
        // Longer than any frame the port carries, so that a longer one is
        // seen as such rather than cut.
        let mut inb = vec![0u8; MAX_FRAME + 64];
        // SYNC POINT: Acquire, paired with `stop_and_wait`'s Release.
        while !stop.load(Ordering::Acquire) {
            let mut busy = false;
            while let Some((len, _)) = from_engine.pop(&mut out) {
                busy = true;
                match tap.send(&out[..len]) {
                    Ok(true) => {
                        bump(&c.frames, 1);
                        bump(&c.bytes, len as u64);
                    }
                    Ok(false) | Err(_) => bump(&c.errors, 1),
                }
            }
            for _ in 0..64 {
                match tap.recv(&mut inb) {
                    Ok(Some(n)) => {
                        busy = true;
                        if n > MAX_FRAME || !to_engine.push(&inb[..n], 0) {
                            bump(&c.in_queue_full, 1);
                        } else {
                            bump(&c.in_frames, 1);
                        }
                    }
                    Ok(None) => break,
                    Err(_) => {
                        bump(&c.errors, 1);
                        break;
                    }
                }
            }
            if !busy {
                // Nothing either way: wait for the device (1 ms at most,
                // so frames from the engine wait no longer than that).
                let _ = tap.wait_readable(1);
            }
        }
    })?;
    Ok((to_tap, from_tap, t, counters))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_come_out_in_order_across_the_wrap_and_a_full_queue_refuses() {
        let (mut q, mut s) = frame_queue(3);
        let mut buf = vec![0u8; MAX_FRAME];
        for round in 0..50u64 {
            let frames: Vec<Vec<u8>> = (0..3)
                .map(|i| vec![(round * 3 + i) as u8; 14 + ((round * 7 + i * 131) as usize % 1500)])
                .collect();
            for (i, f) in frames.iter().enumerate() {
                assert!(q.push(f, round * 10 + i as u64));
            }
            for (i, f) in frames.iter().enumerate() {
                let (n, at) = s.pop(&mut buf).expect("a frame");
                assert_eq!(&buf[..n], &f[..]);
                assert_eq!(at, round * 10 + i as u64);
            }
            assert!(s.pop(&mut buf).is_none());
        }
        // Room for three of the largest frames, not a fourth.
        for i in 0..3 {
            assert!(q.push(&[i; MAX_FRAME], 0));
        }
        assert!(!q.push(&[9; 60], 0), "a full queue took a frame");
        assert!(!q.push(&[0u8; MAX_FRAME + 1], 0));
    }

    #[test]
    fn the_pcap_writer_writes_every_frame_with_its_stamp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.pcap");
        let (mut q, t, c) = pcap_writer(&path, 16).unwrap();
        let mut sent = 0;
        for i in 0..1000u64 {
            while !q.push(&[i as u8; 64], 1_000_000_000 + i) {
                std::thread::yield_now();
            }
            sent += 1;
        }
        t.join();
        assert_eq!(c.frames(), sent);
        let data = std::fs::read(&path).unwrap();
        let mut r = pcap_file::pcap::PcapReader::new(&data[..]).unwrap();
        assert_eq!(
            r.header().ts_resolution,
            pcap_file::TsResolution::NanoSecond
        );
        let mut n = 0u64;
        while let Some(p) = r.next_packet() {
            let p = p.unwrap();
            assert_eq!(p.timestamp, Duration::from_nanos(1_000_000_000 + n));
            assert_eq!(&p.data[..], &[n as u8; 64][..]);
            n += 1;
        }
        assert_eq!(n, 1000);
    }
}
