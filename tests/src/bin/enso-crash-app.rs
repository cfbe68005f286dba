//! An application for the multi-process crash and churn tests, on either
//! interface: attaches to a standalone device, takes two pipes (Ensō) or
//! two queues (packetized), binds the UDP flow of one generator flow to the
//! first and, with `--fallback`, makes the second a fallback pipe (an RSS
//! queue), then receives until its standard input ends (or it is killed).
//!
//! Every frame of the bound flow is checked byte for byte against the test
//! frame the generator sent, and its sequence number against the last one:
//! the generator sends flow `f` the frames `f, f + flows, f + 2 flows, ...`,
//! so each number skipped is a frame lost (a gap). With `--echo` every
//! frame is sent back unchanged.
//!
//! Standard output: `ready {json}` once set up (what the device gave it),
//! `count N` (frames of the bound flow received) every 20 ms, and `done
//! {json}` (see [`Done`]) when standard input ends. Any device error is
//! one `enso-crash-app: ...` line on stderr and exit status 1.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use enso::{Device, DeviceOptions};
use nic_emu::testframe::{FrameKind, TestFrames};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Interface {
    Enso,
    Packetized,
}

#[derive(Parser)]
#[command(
    name = "enso-crash-app",
    about = "Receives (and checks) one generator flow until stdin ends"
)]
struct Args {
    /// Directory holding the device directory.
    #[arg(long)]
    dir: PathBuf,
    /// Device to attach to.
    #[arg(long)]
    name: String,
    #[arg(long, value_enum)]
    interface: Interface,
    /// The generator flow whose UDP flow is bound to the first pipe/queue.
    #[arg(long)]
    flow: u32,
    /// The generator's number of flows.
    #[arg(long)]
    flows: u32,
    /// Also take a fallback pipe (an RSS queue on the packetized interface).
    #[arg(long)]
    fallback: bool,
    /// Send every frame back unchanged.
    #[arg(long)]
    echo: bool,
    /// Also send frames of the bound flow out of this port, one 64 B frame
    /// a send, whenever the TX pipe has room for one (Ensō only).
    #[arg(long)]
    send_port: Option<u32>,
}

/// What the device gave the application.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Ready {
    pub app_id: u32,
    pub pipe_base: u32,
    pub pipe_count: u32,
    pub nbuf_id: u32,
    pub desc_queue_base: u32,
    pub desc_queue_count: u32,
}

/// What the application received.
#[derive(serde::Serialize, serde::Deserialize, Debug, Default)]
pub struct Done {
    /// Frames of the bound flow received, each checked byte for byte.
    pub received: u64,
    /// Frames of the bound flow missing between those received, counting
    /// from the flow's first frame.
    pub gaps: u64,
    /// Frames received on the bound pipe or queue that were not the next
    /// frames of the bound flow (another flow, altered bytes, out of
    /// order), and the first of them described.
    pub bad: u64,
    pub first_bad: Option<String>,
    /// Frames received on the fallback pipe or queue.
    pub fallback: u64,
    /// Frames sent back.
    pub echoed: u64,
    /// Frames sent out of `--send-port`.
    pub sent: u64,
}

/// Checks frames of one flow.
struct Checker {
    frames: TestFrames,
    flow: u32,
    flows: u64,
    /// The sequence number expected next.
    next: u64,
    scratch: Vec<u8>,
    done: Done,
}

impl Checker {
    fn check(&mut self, frame: &[u8]) {
        let why = match self.frames.verify(frame, 0, None, &mut self.scratch) {
            Err(e) => Some(e.to_string()),
            Ok(v) if v.flow != self.flow => {
                Some(format!("flow {} on flow {}'s pipe", v.flow, self.flow))
            }
            Ok(v) if v.seq < self.next || !(v.seq - self.next).is_multiple_of(self.flows) => {
                Some(format!(
                    "sequence number {} where {} or a later one of the flow was due",
                    v.seq, self.next
                ))
            }
            Ok(v) => {
                self.done.gaps += (v.seq - self.next) / self.flows;
                self.next = v.seq + self.flows;
                self.done.received += 1;
                None
            }
        };
        if let Some(w) = why {
            self.done.bad += 1;
            self.done.first_bad.get_or_insert(w);
        }
    }
}

fn main() -> ExitCode {
    match run(&nic_emu::args::parse_or_exit("enso-crash-app")) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("enso-crash-app: {e}");
            ExitCode::FAILURE
        }
    }
}

fn say(line: &str) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|e| format!("stdout: {e}"))
}

fn run(a: &Args) -> Result<(), String> {
    let enso = a.interface == Interface::Enso;
    let opts = if enso {
        DeviceOptions {
            pipes: 2,
            tx_pipes: u32::from(a.send_port.is_some()),
            tx_pipe_size: 64 << 10,
            ..Default::default()
        }
    } else {
        DeviceOptions {
            pipes: 0,
            tx_pipes: 0,
            queues: 2,
            rx_ring: 1024,
            tx_ring: 1024,
            pool_buffers: 2 * 1024 * 2 + 256,
            ..Default::default()
        }
    };
    let mut dev = Device::open_in(&a.dir, &a.name, opts).map_err(|e| e.to_string())?;
    let mut rule = TestFrames::flow_tuple(a.flow);
    rule.src_ip = 0;
    rule.src_port = 0;
    let mut ck = Checker {
        frames: TestFrames::new(a.flows, 0),
        flow: a.flow,
        flows: u64::from(a.flows.max(1)),
        next: u64::from(a.flow),
        scratch: vec![0; nic_emu::wire::MAX_FRAME],
        done: Done::default(),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    std::thread::spawn(move || {
        let _ = std::io::stdin().lock().read_to_end(&mut Vec::new());
        stop2.store(true, Ordering::Relaxed);
    });
    let info = dev.info().clone();
    let ready = Ready {
        app_id: info.app_id,
        pipe_base: info.pipe_base,
        pipe_count: info.pipe_count,
        nbuf_id: info.nbuf_id,
        desc_queue_base: info.desc_queue_base,
        desc_queue_count: info.desc_queue_count,
    };
    let ready = serde_json::to_string(&ready).map_err(|e| e.to_string())?;
    if enso {
        let bound = dev.alloc_rxtx_pipe(false).map_err(|e| e.to_string())?;
        dev.bind(bound, rule).map_err(|e| e.to_string())?;
        if a.fallback {
            dev.alloc_rxtx_pipe(true).map_err(|e| e.to_string())?;
        }
        let send = match a.send_port {
            Some(port) => Some((dev.alloc_tx_pipe().map_err(|e| e.to_string())?, port)),
            None => None,
        };
        say(&format!("ready {ready}"))?;
        serve_enso(&mut dev, bound, a.echo, send, &mut ck, &stop)?;
    } else {
        let bound = dev.alloc_queue(0, false).map_err(|e| e.to_string())?;
        dev.bind_queue(bound, rule).map_err(|e| e.to_string())?;
        let fb = if a.fallback {
            Some(dev.alloc_queue(0, true).map_err(|e| e.to_string())?)
        } else {
            None
        };
        say(&format!("ready {ready}"))?;
        serve_packetized(&mut dev, bound, fb, a.echo, &mut ck, &stop)?;
    }
    let done = serde_json::to_string(&ck.done).map_err(|e| e.to_string())?;
    say(&format!("done {done}"))
}

/// Says how many frames were received every 20 ms, checks now and then
/// that the device is still there, and sleeps a little between polls that
/// find nothing for a while (the tests share few cores).
struct Pace {
    last: Instant,
    polls: u64,
    idle: u32,
}

impl Pace {
    fn new() -> Self {
        Self {
            last: Instant::now(),
            polls: 0,
            idle: 0,
        }
    }

    fn tick(&mut self, dev: &Device, received: u64, got: bool) -> Result<(), String> {
        self.idle = if got { 0 } else { self.idle.saturating_add(1) };
        if self.idle > 1000 {
            std::thread::sleep(Duration::from_micros(50));
        }
        self.polls += 1;
        if self.polls.is_multiple_of(256) && self.last.elapsed() >= Duration::from_millis(20) {
            self.last = Instant::now();
            dev.check_alive().map_err(|e| e.to_string())?;
            say(&format!("count {received}"))?;
        }
        Ok(())
    }
}

fn serve_enso(
    dev: &mut Device,
    bound: enso::RxTxPipe,
    echo: bool,
    send: Option<(enso::TxPipe, u32)>,
    ck: &mut Checker,
    stop: &AtomicBool,
) -> Result<(), String> {
    let mut pace = Pace::new();
    while !stop.load(Ordering::Relaxed) {
        let mut got = false;
        if let Some((tx, port)) = send {
            for _ in 0..32 {
                if dev.tx_space(tx).map_err(|e| e.to_string())? < 64 {
                    break;
                }
                let b = dev.tx_buf(tx, 64).map_err(|e| e.to_string())?;
                let (seq, flow) = (ck.done.sent, ck.flow);
                let n = ck.frames.build(FrameKind::Ipv4Udp, seq, flow, 64, b);
                dev.send(tx, n, port).map_err(|e| e.to_string())?;
                ck.done.sent += 1;
            }
        }
        while let Some(p) = dev.next_rxtx_pipe_with_data().map_err(|e| e.to_string())? {
            let bytes = {
                let b = dev.recv(p).map_err(|e| e.to_string())?;
                for f in b.packets() {
                    if p == bound {
                        ck.check(f);
                    } else {
                        ck.done.fallback += 1;
                    }
                    if echo {
                        ck.done.echoed += 1;
                    }
                }
                b.len()
            };
            if bytes == 0 {
                continue;
            }
            got = true;
            if echo {
                dev.send_and_free(p, bytes).map_err(|e| e.to_string())?;
            } else {
                dev.free(p, bytes).map_err(|e| e.to_string())?;
            }
        }
        if echo {
            dev.reap_completions().map_err(|e| e.to_string())?;
        }
        pace.tick(dev, ck.done.received, got)?;
    }
    Ok(())
}

fn serve_packetized(
    dev: &mut Device,
    bound: enso::QueueId,
    fallback: Option<enso::QueueId>,
    echo: bool,
    ck: &mut Checker,
    stop: &AtomicBool,
) -> Result<(), String> {
    let mut pace = Pace::new();
    let mut v = Vec::with_capacity(64);
    while !stop.load(Ordering::Relaxed) {
        let mut got = false;
        for q in std::iter::once(bound).chain(fallback) {
            v.clear();
            got |= dev.rx_burst(q, &mut v, 32).map_err(|e| e.to_string())? > 0;
            for m in &v {
                if q == bound {
                    ck.check(dev.mbuf_data(m));
                } else {
                    ck.done.fallback += 1;
                }
            }
            if echo {
                ck.done.echoed += dev.tx_burst(q, &mut v).map_err(|e| e.to_string())? as u64;
            }
            // Whatever was not sent goes back to the pool.
            dev.free_mbufs(v.drain(..));
        }
        pace.tick(dev, ck.done.received, got)?;
    }
    Ok(())
}
