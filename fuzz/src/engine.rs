//! Target `engine`: the emulated NIC's inputs from an application, through
//! a stepped engine.
//!
//! An application attaches without the library and the input drives it:
//! posted register writes (to its own registers or anywhere in the
//! window, with values raw or shaped like offsets), published or not,
//! producers from nowhere, TX notifications (data and configuration),
//! bytes and test frames written anywhere in its DMA region, descriptors,
//! reading its RX notifications and handing pipe bytes back, time passing,
//! detaching and attaching again. The device has a generator port (a
//! bounded count of test frames of every kind) and a loopback port, so
//! frames arrive both from the generator and from what the application
//! sends. The engine runs a bounded number of steps in all.
//!
//! After every step ([`check`]):
//! * every frame that arrived at a port is delivered to exactly one pipe
//!   or descriptor queue or counted under exactly one drop cause
//!   (`rx_frames` of the ports = pipe and queue `rx_frames` + drops), so no
//!   frame is lost uncounted or delivered twice;
//! * every frame sent on a port was sent by an application (pipe TX or
//!   descriptor TX), and the generator checked each frame sent to it once
//!   (returned, corrupt, duplicate or foreign);
//! * the loopback gave back no more than was sent into it;
//! * the generator's frames all arrived at its port;
//! * no counter went backwards; flow rules stay below the table's size.
//!
//! After the last step the applications detach, and the same holds with
//! their counters kept in the device's totals, and no flow rule or
//! fallback pipe of theirs is left.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use enso_abi::layout::{self, config, reg, signal, MmioQueue, TxNotification, PAGE};
use memmap2::MmapRaw;
use nic_emu::counters::Stats;
use nic_emu::testframe::{FrameKind, TestFrames};
use nic_emu::{
    AttachInfo, AttachRequest, Clock, DeviceConfig, Engine, GeneratorConfig, NotificationMode,
    PipeWriteMode, SizeSpec, WireConfig,
};

use crate::input::Input;

/// Bytes of the application's DMA region: small, so that offsets the
/// input makes up often land inside it.
const REGION: usize = 16 * PAGE;
const PIPES: u32 = 4;
const QUEUES: u32 = 2;
const PIPE_SIZE: usize = PAGE;
const RING_ENTRIES: u32 = 64;
/// Where the friendly setup puts things (pages of the region).
const RX_RING_PAGE: usize = 1;
const TX_RING_PAGE: usize = 2;
const PIPE_PAGE: usize = 3;
/// Frames the generator sends in all.
const GENERATOR_FRAMES: u64 = 96;
/// Engine steps in all, at most.
const MAX_STEPS: usize = 400;
/// Operations decoded from the input, at most.
const MAX_OPS: usize = 600;

/// An application with raw access to its shared memory.
struct RawApp {
    info: AttachInfo,
    region: MmapRaw,
    mmio: MmapRaw,
    prod: u32,
    /// The friendly TX ring's next slot and the RX ring's next slot.
    tx_tail: u32,
    rx_head: u32,
}

impl RawApp {
    fn attach(e: &mut Engine) -> Self {
        let info = e
            .attach(&AttachRequest {
                pipes: PIPES,
                dma_bytes: REGION,
                desc_queues: QUEUES,
            })
            .expect("attach");
        let open = |p: &std::path::Path, len| {
            enso_abi::shm::map(&enso_abi::shm::open_file(p).expect("open"), len).expect("map")
        };
        let region = open(&info.dma_path, info.dma_len);
        let mmio = open(&info.mmio_path, layout::MMIO_FILE_LEN);
        Self {
            info,
            region,
            mmio,
            prod: 0,
            tx_tail: 0,
            rx_head: 0,
        }
    }

    fn queue(&self) -> &MmioQueue {
        // SAFETY: the mapping holds a whole MmioQueue (MMIO_FILE_LEN bytes,
        // page aligned) for as long as `self`; all its fields are atomics.
        unsafe { &*(self.mmio.as_ptr() as *const MmioQueue) }
    }

    /// Stores a posted write, unpublished; false if the queue is full.
    fn post(&mut self, addr: u32, value: u32) -> bool {
        let q = self.queue();
        // SYNC POINT B (Acquire): pairs with the NIC's Release store of
        // `consumer` once it copied the entries out.
        let cons = q.consumer.0.load(Ordering::Acquire);
        if self.prod.wrapping_sub(cons) as usize >= layout::MMIO_QUEUE_LEN - 1 {
            return false;
        }
        let e = &q.entries[self.prod as usize % layout::MMIO_QUEUE_LEN];
        e.word
            .store(u64::from(addr) << 32 | u64::from(value), Ordering::Relaxed);
        self.prod = self.prod.wrapping_add(1);
        true
    }

    /// Publishes the posted writes: the Release partner of the NIC's
    /// Acquire load of `producer` (SYNC POINT A).
    fn publish(&self) {
        self.queue().producer.0.store(self.prod, Ordering::Release);
    }

    fn pipe_reg(&self, i: u32, r: u32) -> u32 {
        layout::reg_addr(self.info.pipe_base + i, r)
    }

    fn nbuf_reg(&self, r: u32) -> u32 {
        layout::reg_addr(layout::NBUF_QUEUE_BASE + self.info.nbuf_id, r)
    }

    fn desc_reg(&self, i: u32, r: u32) -> u32 {
        layout::reg_addr(layout::DESC_QUEUE_BASE + self.info.desc_queue_base + i, r)
    }

    /// The 64 B slot at `off` (rounded down to 64, wrapped into the region).
    fn slot(&self, off: usize) -> &TxNotification {
        let off = off % self.info.dma_len / 64 * 64;
        // SAFETY: `off + 64 <= dma_len` and 64 B aligned (the mapping is
        // page aligned); every field is an atomic, so sharing the bytes
        // with the engine (which runs only inside `step`, on this thread)
        // is sound.
        unsafe { &*(self.region.as_ptr().add(off) as *const TxNotification) }
    }

    /// Copies `bytes` into the region at `off`, cut at its end.
    fn write(&self, off: usize, bytes: &[u8]) {
        let off = off % self.info.dma_len;
        let n = bytes.len().min(self.info.dma_len - off);
        // SAFETY: `off + n <= dma_len`; the engine touches the region only
        // inside `step`, on this thread, so nothing reads or writes these
        // bytes meanwhile.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.region.as_mut_ptr().add(off), n)
        };
    }

    /// The two words at `off` (16 B aligned) as a descriptor's.
    fn desc(&self, off: usize) -> &[AtomicU64; 2] {
        let off = off % self.info.dma_len / 16 * 16;
        // SAFETY: in bounds and 16 B aligned (checked above); atomics, as
        // in `slot`.
        unsafe { &*(self.region.as_ptr().add(off) as *const [AtomicU64; 2]) }
    }

    /// Fills the friendly TX ring's next slot and posts the tail write.
    fn tx(&mut self, sig: u32, id: u32, addr: u64, len: u32, port: u32, args: [u64; 5]) {
        let n = self.slot(TX_RING_PAGE * PAGE + self.tx_tail as usize * 64);
        n.config_id.store(id, Ordering::Relaxed);
        n.address.store(addr, Ordering::Relaxed);
        n.length.store(len, Ordering::Relaxed);
        n.port.store(port, Ordering::Relaxed);
        for (a, v) in n.args.iter().zip(args) {
            a.store(v, Ordering::Relaxed);
        }
        n.signal.store(sig, Ordering::Relaxed);
        self.tx_tail = (self.tx_tail + 1) % RING_ENTRIES;
        let tail = self.nbuf_reg(reg::TX_TAIL);
        self.post(tail, self.tx_tail);
        self.publish();
    }

    /// What the library does: rings, pipes, a fallback pipe per port.
    fn friendly_setup(&mut self, stream: bool) {
        let w = [
            (self.nbuf_reg(reg::RX_MEM_LOW), (RX_RING_PAGE * PAGE) as u32),
            (self.nbuf_reg(reg::RX_MEM_HIGH), 0),
            (self.nbuf_reg(reg::TX_MEM_LOW), (TX_RING_PAGE * PAGE) as u32),
            (self.nbuf_reg(reg::TX_MEM_HIGH), 0),
        ];
        for (a, v) in w {
            self.post(a, v);
        }
        for i in 0..PIPES {
            let mut low = ((PIPE_PAGE + i as usize) * PAGE) as u32 | (i % 2);
            if stream && i == 2 {
                low |= layout::PIPE_STREAM;
            }
            self.post(self.pipe_reg(i, reg::RX_MEM_LOW), low);
            self.post(self.pipe_reg(i, reg::RX_MEM_HIGH), 0);
        }
        self.publish();
        for i in 0..2 {
            let pipe = u64::from(self.info.pipe_base + i);
            let args = [config::FALLBACK_ADD, pipe, 0, 0, 0];
            self.tx(signal::CONFIG, config::FALLBACK, 0, 0, i, args);
        }
    }

    /// Reads the friendly RX ring and hands the notified bytes back.
    fn consume(&mut self, all: bool) {
        for _ in 0..RING_ENTRIES {
            let n = self.slot(RX_RING_PAGE * PAGE + self.rx_head as usize * 64);
            // SYNC POINT C (Acquire): pairs with the NIC's Release store of
            // `signal` after it wrote the notification's fields.
            if n.signal.load(Ordering::Acquire) != signal::DATA {
                break;
            }
            // An RX notification's `pipe_id` and `tail` sit where a TX
            // notification's `config_id` and the low half of `address` do.
            let pipe = n.config_id.load(Ordering::Relaxed);
            let tail = n.address.load(Ordering::Relaxed) as u32;
            n.signal.store(signal::EMPTY, Ordering::Relaxed);
            let own = self.info.pipe_base..self.info.pipe_base + PIPES;
            if own.contains(&pipe) && all {
                self.post(layout::reg_addr(pipe, reg::RX_HEAD), tail);
            }
            self.rx_head = (self.rx_head + 1) % RING_ENTRIES;
        }
        self.post(self.nbuf_reg(reg::RX_HEAD), self.rx_head);
        self.publish();
    }
}

/// A 32-bit register value: raw, small, or shaped like a region offset.
fn value(inp: &mut Input<'_>) -> u32 {
    match inp.u8() % 5 {
        0 => inp.u32(),
        1 => u32::from(inp.u8()),
        2 => (u32::from(inp.u8()) % 20) * PAGE as u32,
        3 => {
            ((u32::from(inp.u8()) % 20) * PAGE as u32)
                | (u32::from(inp.u8()) << 4)
                | u32::from(inp.u8() % 4)
        }
        _ => {
            (u32::from(inp.u8() % 20) * PAGE as u32) | layout::PIPE_STREAM | u32::from(inp.u8() % 3)
        }
    }
}

/// A 64-bit region offset: raw, or somewhere in or just past the region.
fn offset(inp: &mut Input<'_>) -> u64 {
    match inp.u8() % 4 {
        0 => inp.u64(),
        1 => u64::from(inp.u8() % 18) * PAGE as u64 + u64::from(inp.u8()) * 64,
        2 => u64::from(inp.u16()),
        _ => (REGION as u64).wrapping_sub(u64::from(inp.u16())),
    }
}

fn length(inp: &mut Input<'_>) -> u32 {
    match inp.u8() % 3 {
        0 => inp.u32(),
        1 => u32::from(inp.u16()) % (2 * PAGE as u32),
        _ => u32::from(inp.u8()) * 64,
    }
}

/// The sums the invariants compare.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Totals {
    port_rx: u64,
    delivered: u64,
    arrival_drops: u64,
    port_tx: u64,
    app_tx: u64,
    generator_sent: u64,
    generator_checked: u64,
}

fn totals(s: &Stats) -> Totals {
    let port_rx = s.ports.iter().map(|p| p.counters.rx_frames).sum();
    let delivered = s.pipe_sum(|c| c.rx_frames) + s.queue_sum(|c| c.rx_frames);
    let arrival_drops = s
        .ports
        .iter()
        .map(|p| p.counters.drop_no_match + p.counters.drop_malformed + p.counters.drop_oversize)
        .sum::<u64>()
        + s.pipe_sum(|c| c.drop_pipe_full + c.drop_notif_ring_full + c.drop_not_udp)
        + s.queue_sum(|c| c.drop_no_descriptor + c.drop_bad_descriptor);
    let port_tx = s.ports.iter().map(|p| p.counters.tx_frames).sum();
    let app_tx = s.app_sum(|c| c.tx_frames) + s.queue_sum(|c| c.tx_frames);
    let g = s.generator(0).expect("port 0 is a generator");
    Totals {
        port_rx,
        delivered,
        arrival_drops,
        port_tx,
        app_tx,
        generator_sent: g.sent,
        generator_checked: g.returned + g.corrupt + g.duplicate + g.foreign,
    }
}

/// Checks the invariants of a snapshot, and against the one before.
fn check(s: &Stats, prev: &Totals, when: &str) -> Totals {
    let t = totals(s);
    let ctx = || format!("{when}: {t:?}\ndrops {:?}", s.drops());
    assert_eq!(
        t.port_rx,
        t.delivered + t.arrival_drops,
        "frames in != delivered + dropped, {}",
        ctx()
    );
    assert_eq!(
        t.port_tx,
        t.app_tx,
        "frames sent on ports != sent by software, {}",
        ctx()
    );
    assert_eq!(
        t.generator_sent,
        s.ports[0].counters.rx_frames,
        "generator frames lost before the port, {}",
        ctx()
    );
    assert!(t.generator_sent <= GENERATOR_FRAMES, "{}", ctx());
    assert_eq!(
        t.generator_checked,
        s.ports[0].counters.tx_frames,
        "frames sent to the generator != frames it checked, {}",
        ctx()
    );
    let lo = &s.ports[1].counters;
    assert!(
        lo.rx_frames + lo.drop_wire_fifo_full <= lo.tx_frames,
        "the loopback returned more than it was sent, {}",
        ctx()
    );
    let pairs = [
        (prev.port_rx, t.port_rx),
        (prev.delivered, t.delivered),
        (prev.arrival_drops, t.arrival_drops),
        (prev.port_tx, t.port_tx),
        (prev.generator_checked, t.generator_checked),
    ];
    assert!(
        pairs.iter().all(|(a, b)| a <= b),
        "a counter went backwards: {prev:?} -> {}",
        ctx()
    );
    assert!(s.flow_rules < nic_emu::steering::FLOW_TABLE_SIZE);
    t
}

static DEVICES: AtomicU32 = AtomicU32::new(0);

/// Where devices are made: a directory of this user's (device
/// directories need a parent others cannot write to, or a sticky one).
fn device_parent() -> std::path::PathBuf {
    std::env::var_os("ENSO_FUZZ_DIR")
        .map(Into::into)
        .unwrap_or_else(std::env::temp_dir)
}

pub fn run(data: &[u8]) {
    summary(data);
}

/// [`run`], returning the device's counters after the last detach (for
/// tests that check what an input reaches).
pub fn summary(data: &[u8]) -> Stats {
    let mut inp = Input::new(data);
    let flags = inp.u8();
    let generator = GeneratorConfig {
        count: Some(GENERATOR_FRAMES),
        flows: 4,
        burst: 1 + usize::from(inp.u8() % 16),
        sizes: SizeSpec::Range(60, 600),
        kinds: vec![FrameKind::Ipv4Udp, FrameKind::Ipv6Udp, FrameKind::Raw],
        ..Default::default()
    };
    let name = format!(
        "fuzz-{}-{}",
        std::process::id(),
        DEVICES.fetch_add(1, Ordering::Relaxed)
    );
    let mut cfg = DeviceConfig::new(name, WireConfig::Generator(generator));
    cfg.ports.push(WireConfig::Loopback);
    cfg.dir = device_parent();
    cfg.pipe_size = PIPE_SIZE;
    cfg.notif_ring_entries = RING_ENTRIES;
    cfg.notification_mode = match flags >> 1 & 3 {
        0 => NotificationMode::PerPacket,
        _ => NotificationMode::Reactive,
    };
    if flags & 8 != 0 {
        cfg.tuning.register_poll_flits = 0;
    }
    // Deterministic: no cache maintenance, no time-based choice of it.
    cfg.tuning.evict_ahead_lines = 0;
    cfg.tuning.evict_ahead_adaptive = false;
    cfg.tuning.evict_tx_lines = false;
    cfg.tuning.pipe_writes = Some(PipeWriteMode::Plain);
    let dir = cfg.device_dir();
    let mut e = Engine::new(cfg).expect("engine");
    let clock = Arc::new(AtomicU64::new(1_000_000));
    e.set_clock(Clock::Manual(clock.clone()));
    let stats = drive(&mut e, &clock, flags, &mut inp);
    drop(e);
    nic_emu::devdir::remove(&dir);
    stats
}

fn drive(e: &mut Engine, clock: &AtomicU64, flags: u8, inp: &mut Input<'_>) -> Stats {
    let mut app = RawApp::attach(e);
    let friendly = flags & 1 == 0;
    if friendly {
        app.friendly_setup(flags & 0x10 != 0);
    }
    let frames = TestFrames::new(4, 7);
    let mut prev = Totals::default();
    let mut steps = 0;
    let mut attaches = 1;
    let mut ops = 0;
    while !inp.is_empty() && ops < MAX_OPS && steps < MAX_STEPS {
        ops += 1;
        match inp.u8() % 13 {
            0 => {
                // A register write anywhere in the window.
                let (a, v) = (inp.u32(), inp.u32());
                app.post(a, v);
            }
            1 | 2 => {
                // A write to one of its own registers (or just past them).
                let which = inp.u8();
                let r = u32::from(inp.u8() % 8) * 4;
                let i = u32::from(which >> 2) % (PIPES + 1);
                let a = match which % 3 {
                    0 => app.pipe_reg(i, r),
                    1 => app.nbuf_reg(r),
                    _ => app.desc_reg(i % (QUEUES + 1), r),
                };
                let v = value(inp);
                app.post(a, v);
            }
            3 => app.publish(),
            4 => {
                // A producer from nowhere.
                let p = inp.u32();
                app.prod = if inp.bool() {
                    p
                } else {
                    app.prod.wrapping_add(p % 8192)
                };
                app.publish();
            }
            5 | 6 => {
                // A TX notification in the friendly ring: data or config.
                let sig = u32::from(inp.u8() % 4);
                let id = u32::from(inp.u8() % 7);
                let addr = offset(inp);
                let len = length(inp);
                let port = u32::from(inp.u8() % 3);
                let mut args = [0u64; 5];
                for a in &mut args {
                    *a = match inp.u8() % 3 {
                        0 => inp.u64(),
                        1 => u64::from(inp.u8() % 4),
                        _ => u64::from(app.info.pipe_base + u32::from(inp.u8() % 6)),
                    };
                }
                if (id == config::FLOW_BIND || id == config::FLOW_UNBIND) && inp.bool() {
                    // A rule for one of the generator's flows.
                    let t = TestFrames::flow_tuple(u32::from(inp.u8() % 4));
                    args[0] = u64::from(t.dst_ip) << 32 | u64::from(t.src_ip);
                    args[1] = u64::from(t.dst_port) << 32
                        | u64::from(t.src_port) << 16
                        | u64::from(t.protocol);
                }
                app.tx(sig, id, addr, len, port, args);
            }
            7 => {
                // Raw bytes anywhere in the region (notifications, rings,
                // frames to send, descriptors).
                let off = offset(inp) as usize;
                let n = usize::from(inp.u8());
                let b = inp.bytes(n);
                app.write(off, b);
            }
            8 => {
                // A test frame somewhere in the region, to be sent.
                let kind = [FrameKind::Ipv4Udp, FrameKind::Ipv6Udp, FrameKind::Raw]
                    [usize::from(inp.u8() % 3)];
                let len = 60 + usize::from(inp.u16() % 1500);
                let mut buf = [0u8; 1536];
                let n = frames.build(
                    kind,
                    u64::from(inp.u8()),
                    u32::from(inp.u8() % 4),
                    len,
                    &mut buf,
                );
                let off = offset(inp) as usize;
                app.write(off, &buf[..n]);
            }
            9 => {
                let off = offset(inp) as usize;
                let d = app.desc(off);
                d[0].store(offset(inp), Ordering::Relaxed);
                d[1].store(inp.u64(), Ordering::Relaxed);
            }
            10 => {
                let all = inp.bool();
                app.consume(all);
            }
            11 => {
                clock.fetch_add(u64::from(inp.u32() % 1_000_000), Ordering::Relaxed);
            }
            _ => {
                let b = inp.u8();
                if b.is_multiple_of(16) && attaches < 3 {
                    // Detach and attach again.
                    assert!(e.detach(app.info.app_id));
                    prev = check(&e.stats(), &prev, "after a detach");
                    app = RawApp::attach(e);
                    attaches += 1;
                    if friendly {
                        app.friendly_setup(false);
                    }
                    continue;
                }
                for _ in 0..1 + b % 8 {
                    e.step();
                    steps += 1;
                    prev = check(&e.stats(), &prev, "after a step");
                }
            }
        }
    }
    // Let the engine finish what it was given, then detach.
    for _ in 0..32 {
        app.consume(true);
        e.step();
        prev = check(&e.stats(), &prev, "after a final step");
    }
    assert!(e.detach(app.info.app_id));
    let s = e.stats();
    check(&s, &prev, "after the last detach");
    assert_eq!(
        (s.flow_rules, s.fallback_pipes),
        (0, 0),
        "steering of a detached application left"
    );
    s
}
