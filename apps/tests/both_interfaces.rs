//! Every application end to end over the emulated NIC, on both interfaces,
//! with the same results.
//!
//! One device, two ports cabled to each other. The application serves port
//! 0 (Ensō pipes or descriptor queues); a client on port 1 sends its
//! traffic through a TX pipe and receives what comes back in an RX pipe.
//! The engine is stepped, alternating with the application and the client,
//! so every run is deterministic. Each test checks that both interfaces
//! (and, for the log monitor, the Ensō bytestream path) give the same
//! results as the logic run without a NIC, and that the counters add up:
//! everything sent was received, handled and (where the application sends)
//! sent back, with no drop anywhere.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use enso::app::{EnsoDriver, PacketizedDriver};
use enso::{Device, DeviceOptions};
use enso_apps::kv::{KvClient, KvServer, ServerConfig, StoreConfig, WorkloadConfig};
use enso_apps::load::{frame_digest, KvLoadClient, KvLoadConfig, LogSource, PipeClient};
use enso_apps::logmon::{generate_log, LogMonitor, LogPatterns, LogScanner};
use enso_apps::maglev::{Backend, FlowWorkload, Maglev, MaglevConfig};
use enso_apps::nic::{
    add_fallback_rx_pipes, AppDriver, EnsoReplyDriver, EnsoStreamDriver, Interface,
    PacketizedReplyDriver, STREAM_ASK_GAP_MAX_NS,
};
use enso_apps::packet::{self, Endpoints, EthernetFrame, Ipv4Packet, MacAddr, MAX_FRAME_LEN};
use enso_apps::telemetry::{NitroConfig, Telemetry};
use enso_apps::zipf::Zipf;
use nic_emu::{DeviceConfig, Engine, Stats, WireConfig};
use rand::SeedableRng;

/// A device whose ports 0 and 1 are cabled together, with small pipes.
fn cabled(name: &str) -> (Engine, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = DeviceConfig::new(
        name,
        WireConfig::Cable {
            peer: 1,
            delay_ns: 0,
        },
    );
    cfg.ports.push(WireConfig::Cable {
        peer: 0,
        delay_ns: 0,
    });
    cfg.dir = dir.path().to_path_buf();
    cfg.pipe_size = 256 << 10;
    cfg.notif_ring_entries = 4096;
    (Engine::new(cfg).expect("device"), dir)
}

fn enso_opts(pipes: u32) -> DeviceOptions {
    DeviceOptions {
        pipes,
        tx_pipes: 1,
        tx_pipe_size: 256 << 10,
        ..Default::default()
    }
}

fn pkt_opts(queues: u32) -> DeviceOptions {
    DeviceOptions {
        pipes: 0,
        tx_pipes: 0,
        queues,
        rx_ring: 512,
        tx_ring: 512,
        pool_buffers: queues * 1024 + 256,
        ..Default::default()
    }
}

/// The client's handle on port 1.
fn client(e: &mut Engine, receive: bool) -> PipeClient {
    let dev = Device::attach_engine(e, enso_opts(1)).expect("attach client");
    PipeClient::new(dev, 1, receive).expect("client pipes")
}

/// Steps engine, application and client until `client` says it is done and
/// the engine has nothing left to do.
fn run<H, D: AppDriver<H>>(e: &mut Engine, d: &mut D, h: &mut H, mut client: impl FnMut() -> bool) {
    let mut done_at = None;
    for step in 0..2_000_000u64 {
        e.step();
        while d.poll(h).expect("application poll") > 0 {}
        let done = client();
        match (done, done_at) {
            (true, None) => done_at = Some(step),
            (false, _) => done_at = None,
            (true, Some(s)) if step - s > 64 && e.run_until_idle(100) == 0 => return,
            _ => {}
        }
    }
    panic!("the run did not finish");
}

fn assert_no_drops(s: &Stats) {
    assert_eq!(s.total_drops(), 0, "NIC drops: {:?}", s.drops());
    let a = s.app_sum(|c| {
        c.reject_bad_tx_frame
            + c.reject_bad_tx_notification
            + c.reject_bad_register_value
            + c.reject_bad_descriptor
    });
    assert_eq!(a, 0, "refused by the NIC");
}

// ---------------------------------------------------------------- Maglev

fn backends() -> Vec<Backend> {
    (0..10)
        .map(|i| Backend::new(format!("be-{i}"), Ipv4Addr::new(192, 168, 7, 10 + i)))
        .collect()
}

const MAGLEV_FLOWS: u32 = 300;
const MAGLEV_FRAMES: u64 = 1200;

#[derive(Debug, PartialEq)]
struct MaglevRun {
    /// Source (address, port) of each flow -> the backend address it went to.
    choice: BTreeMap<(Ipv4Addr, u16), Ipv4Addr>,
    /// Digests of every frame that came back, sorted.
    frames: Vec<u64>,
}

fn maglev_run(iface: Interface) -> MaglevRun {
    let (mut e, _dir) = cabled(&format!("maglev-{iface}"));
    let cfg = MaglevConfig {
        table_size: 65_537,
        connection_capacity: 1 << 12,
    };
    let mut lb = Maglev::new(backends(), &cfg).unwrap();
    let mut c = client(&mut e, true);
    let mut wl = FlowWorkload::new(MAGLEV_FLOWS, false, 7);
    let mut choice = BTreeMap::new();
    let mut frames = Vec::new();
    let mut inconsistent = 0;
    let mut client_step = |c: &mut PipeClient| {
        let want = MAGLEV_FRAMES - c.sent_frames;
        let room = 64u64.saturating_sub(c.sent_frames - c.received_frames);
        c.send_with(want.min(room).min(16) as usize, |b| {
            wl.next_frame(b).map(Some)
        })
        .unwrap();
        c.recv_with(|f| {
            let eth = EthernetFrame::new_checked(f).unwrap();
            let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
            assert!(ip.verify_checksum(), "rewritten IPv4 header checksum");
            assert_eq!(eth.dst_addr(), MacAddr::from_ipv4(ip.dst_addr()));
            let t = packet::FiveTuple::parse(f).unwrap();
            let prev = choice.insert((t.src_ip, t.src_port), ip.dst_addr());
            if prev.is_some_and(|p| p != ip.dst_addr()) {
                inconsistent += 1;
            }
            frames.push(frame_digest(f));
        })
        .unwrap();
        c.sent_frames == MAGLEV_FRAMES && c.received_frames == MAGLEV_FRAMES
    };
    let stats = match iface {
        Interface::Enso => {
            let mut d = EnsoDriver::new(Device::attach_engine(&mut e, enso_opts(2)).unwrap());
            d.add_fallback_pipes_on(0, 2).unwrap();
            run(&mut e, &mut d, &mut lb, || client_step(&mut c));
            d.stats.clone()
        }
        Interface::Packetized => {
            let mut d =
                PacketizedDriver::new(Device::attach_engine(&mut e, pkt_opts(2)).unwrap(), 32);
            d.add_rss_queues_on(0, 2).unwrap();
            run(&mut e, &mut d, &mut lb, || client_step(&mut c));
            d.stats.clone()
        }
    };
    let s = e.stats();
    assert_no_drops(&s);
    assert_eq!(inconsistent, 0, "a flow changed backend");
    assert_eq!(
        (stats.frames, stats.forwarded, stats.dropped),
        (MAGLEV_FRAMES, MAGLEV_FRAMES, 0)
    );
    assert_eq!(lb.stats().forwarded, MAGLEV_FRAMES);
    assert_eq!(
        lb.stats().connection_misses,
        u64::from(MAGLEV_FLOWS),
        "each flow looked up once, then cached"
    );
    assert_eq!(s.ports[0].counters.rx_frames, MAGLEV_FRAMES);
    assert_eq!(s.ports[0].counters.tx_frames, MAGLEV_FRAMES);
    assert_eq!(s.ports[1].counters.rx_frames, MAGLEV_FRAMES);
    frames.sort_unstable();
    MaglevRun { choice, frames }
}

#[test]
fn maglev_picks_the_same_backends_on_both_interfaces() {
    let enso = maglev_run(Interface::Enso);
    let pkt = maglev_run(Interface::Packetized);
    assert_eq!(enso.choice.len(), MAGLEV_FLOWS as usize);
    assert_eq!(enso, pkt);
    // Both are what the logic picks without a NIC.
    let mut lb = Maglev::new(backends(), &MaglevConfig::default()).unwrap();
    let wl = FlowWorkload::new(MAGLEV_FLOWS, false, 7);
    for i in 0..MAGLEV_FLOWS {
        let t = wl.flow(i);
        let b = &backends()[lb.pick(&t) as usize];
        assert_eq!(enso.choice[&(t.src_ip, t.src_port)], b.ip);
    }
    let used: std::collections::BTreeSet<_> = enso.choice.values().collect();
    assert!(used.len() >= 8, "flows spread over the backends: {used:?}");
}

// ------------------------------------------------------------- Telemetry

const TELEMETRY_FRAMES: usize = 30_000;

fn telemetry_trace() -> Vec<Vec<u8>> {
    let z = Zipf::new(2000, 1.1).unwrap();
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
    let mut buf = [0u8; MAX_FRAME_LEN];
    (0..TELEMETRY_FRAMES)
        .map(|i| {
            let f = z.sample(&mut rng) as u32;
            let ep = Endpoints {
                src_mac: MacAddr([2, 0, 0, 0, 5, 1]),
                dst_mac: MacAddr([2, 0, 0, 0, 5, 2]),
                src_ip: Ipv4Addr::from(0x0a10_0000 + f),
                dst_ip: Ipv4Addr::from(0xc0a8_0000 + f % 7),
                src_port: 1000 + (i % 50) as u16,
                dst_port: 53,
            };
            let n = packet::emit_udp_frame(&mut buf, &ep, &[0u8; 18][..(i % 19)]).unwrap();
            buf[..n].to_vec()
        })
        .collect()
}

fn telemetry_config() -> NitroConfig {
    NitroConfig {
        width: 4096,
        seed: 11,
        ..NitroConfig::count_min()
    }
}

fn telemetry_run(iface: Interface, trace: &[Vec<u8>]) -> Telemetry {
    let (mut e, _dir) = cabled(&format!("telemetry-{iface}"));
    let mut t = Telemetry::new(&telemetry_config(), std::time::Duration::from_secs(1)).unwrap();
    let mut c = client(&mut e, false);
    let mut next = 0;
    let mut client_step = |c: &mut PipeClient| {
        c.send_with(16, |b| {
            let Some(f) = trace.get(next) else {
                return Ok::<_, std::convert::Infallible>(None);
            };
            b[..f.len()].copy_from_slice(f);
            next += 1;
            Ok(Some(f.len()))
        })
        .unwrap();
        next == trace.len()
    };
    // One pipe or queue, so frames reach the sketch in the order sent and
    // the sampling (seeded) makes the same choices.
    let stats = match iface {
        Interface::Enso => {
            let mut d = EnsoDriver::new(Device::attach_engine(&mut e, enso_opts(1)).unwrap());
            add_fallback_rx_pipes(&mut d, 0, 1).unwrap();
            run(&mut e, &mut d, &mut t, || client_step(&mut c));
            d.stats.clone()
        }
        Interface::Packetized => {
            let mut d =
                PacketizedDriver::new(Device::attach_engine(&mut e, pkt_opts(1)).unwrap(), 32);
            d.add_rss_queues_on(0, 1).unwrap();
            run(&mut e, &mut d, &mut t, || client_step(&mut c));
            d.stats.clone()
        }
    };
    let s = e.stats();
    assert_no_drops(&s);
    let n = trace.len() as u64;
    assert_eq!((stats.frames, stats.consumed, stats.dropped), (n, n, 0));
    assert_eq!(s.ports[0].counters.rx_frames, n);
    assert_eq!(s.ports[0].counters.tx_frames, 0, "a sink sends nothing");
    assert_eq!(t.sketch().packets(), n);
    t
}

#[test]
fn telemetry_counts_the_same_on_both_interfaces() {
    let trace = telemetry_trace();
    let enso = telemetry_run(Interface::Enso, &trace);
    let pkt = telemetry_run(Interface::Packetized, &trace);
    let mut alone = Telemetry::new(&telemetry_config(), std::time::Duration::from_secs(1)).unwrap();
    for f in &trace {
        alone.process(f);
    }
    assert!(alone.sketch().samples() > 1000);
    for t in [&enso, &pkt] {
        assert_eq!(t.sketch().counters(), alone.sketch().counters());
        assert_eq!(t.sketch().samples(), alone.sketch().samples());
        assert_eq!(t.sketch().report(), alone.sketch().report());
    }
    assert!(!enso.sketch().report().heavy_hitters.is_empty());
}

// --------------------------------------------------------------- KV store

const KV_FRAMES: u64 = 3000;

fn kv_server() -> KvServer {
    KvServer::new(&ServerConfig {
        store: StoreConfig {
            log_bytes: 1 << 20,
            buckets: 1 << 12,
        },
        ..Default::default()
    })
    .unwrap()
}

fn kv_workload(get_ratio: f64) -> WorkloadConfig {
    WorkloadConfig {
        keys: 2048,
        get_ratio,
        batch: 4,
        seed: 5,
        ..Default::default()
    }
}

fn kv_run(iface: Interface, get_ratio: f64) -> (Vec<u64>, KvServer) {
    let (mut e, _dir) = cabled(&format!("kv-{iface}"));
    let mut server = kv_server();
    let cfg = KvLoadConfig {
        workload: kv_workload(get_ratio),
        window_frames: 24,
        burst: 8,
        preload: true,
        loss_timeout: None,
        record_responses: true,
        frames: Some(KV_FRAMES),
    };
    let dev = Device::attach_engine(&mut e, enso_opts(1)).unwrap();
    let mut c = KvLoadClient::new(dev, 1, cfg).unwrap();
    let mut client_step = || {
        c.poll().unwrap();
        c.finished()
    };
    let stats = match iface {
        Interface::Enso => {
            let mut d =
                EnsoReplyDriver::new(Device::attach_engine(&mut e, enso_opts(1)).unwrap()).unwrap();
            d.add_fallback_pipes_on(0, 1).unwrap();
            run(&mut e, &mut d, &mut server, &mut client_step);
            d.stats.clone()
        }
        Interface::Packetized => {
            let mut d =
                PacketizedReplyDriver::new(Device::attach_engine(&mut e, pkt_opts(1)).unwrap(), 32);
            d.add_rss_queues_on(0, 1).unwrap();
            run(&mut e, &mut d, &mut server, &mut client_step);
            d.stats.clone()
        }
    };
    let s = e.stats();
    assert_no_drops(&s);
    let r = c.report();
    assert_eq!(
        (
            r.frames_sent,
            r.frames_received,
            r.frames_lost,
            r.bad_frames
        ),
        (KV_FRAMES, KV_FRAMES, 0, 0),
        "{r:?}"
    );
    assert_eq!(r.responses, r.requests);
    assert_eq!(r.problems, 0, "{r:?}");
    assert!(r.hits > 0 && r.latency.count == KV_FRAMES, "{r:?}");
    assert_eq!(
        (stats.frames, stats.forwarded, stats.dropped),
        (KV_FRAMES, KV_FRAMES, 0)
    );
    assert_eq!(server.stats().drops(), 0);
    assert_eq!(s.ports[0].counters.tx_frames, KV_FRAMES);
    (c.response_digests().to_vec(), server)
}

/// The responses of the server run without a NIC on the same requests.
fn kv_alone(get_ratio: f64) -> Vec<u64> {
    let mut wl = kv_workload(get_ratio);
    wl.window = 1 << 16;
    let mut client = KvClient::new(wl).unwrap();
    let mut server = kv_server();
    let (mut req, mut resp) = ([0u8; MAX_FRAME_LEN], [0u8; MAX_FRAME_LEN]);
    let mut out = Vec::new();
    let mut preload = true;
    while (out.len() as u64) < KV_FRAMES {
        let n = match preload {
            true => match client.next_preload_frame(&mut req).unwrap() {
                Some(n) => n,
                None => {
                    preload = false;
                    continue;
                }
            },
            false => client.next_frame(&mut req).unwrap(),
        };
        let m = server.handle(&req[..n], &mut resp).unwrap();
        out.push(frame_digest(&resp[..m]));
    }
    out
}

#[test]
fn kv_answers_the_same_on_both_interfaces() {
    for get_ratio in [0.95, 0.5] {
        let (enso, es) = kv_run(Interface::Enso, get_ratio);
        let (pkt, ps) = kv_run(Interface::Packetized, get_ratio);
        assert_eq!(enso.len() as u64, KV_FRAMES);
        assert!(enso == pkt, "responses differ between interfaces");
        assert!(
            enso == kv_alone(get_ratio),
            "responses differ from the logic alone"
        );
        assert_eq!(es.stats(), ps.stats());
        assert!(es.stats().get_hits > 0 && es.stats().sets > 2048);
    }
}

// ------------------------------------------------------------ Log monitor

const LOG_BYTES: usize = 300_000;

fn log_counts(s: &LogScanner) -> (Vec<u64>, u64, u64) {
    (
        s.counts().to_vec(),
        s.stats().lines,
        s.stats().matched_lines,
    )
}

/// How the monitor receives the log.
#[derive(Clone, Copy, Debug)]
enum LogPath {
    Packets(Interface),
    EnsoStream,
}

fn logmon_run(path: LogPath, text: &[u8]) -> (Vec<u64>, u64, u64) {
    // Device names take letters, digits, '.', '_' and '-' only.
    let name: String = format!("logmon-{path:?}")
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let (mut e, _dir) = cabled(&name);
    let patterns = LogPatterns::builtin();
    let mut c = client(&mut e, false);
    // 700 B payloads: lines are cut across packets.
    let mut src = LogSource::new(text.to_vec(), 700, false);
    let frames = text.len().div_ceil(700) as u64;
    let mut client_step = |c: &mut PipeClient| {
        c.send_with(8, |b| src.next_frame(b)).unwrap();
        src.finished()
    };
    let (counts, stats) = match path {
        LogPath::Packets(Interface::Enso) => {
            let mut m = LogMonitor::new(&patterns);
            let mut d = EnsoDriver::new(Device::attach_engine(&mut e, enso_opts(1)).unwrap());
            add_fallback_rx_pipes(&mut d, 0, 1).unwrap();
            run(&mut e, &mut d, &mut m, || client_step(&mut c));
            assert_eq!(m.stats().frames, frames);
            (log_counts(m.scanner()), d.stats.clone())
        }
        LogPath::Packets(Interface::Packetized) => {
            let mut m = LogMonitor::new(&patterns);
            let mut d =
                PacketizedDriver::new(Device::attach_engine(&mut e, pkt_opts(1)).unwrap(), 32);
            d.add_rss_queues_on(0, 1).unwrap();
            run(&mut e, &mut d, &mut m, || client_step(&mut c));
            assert_eq!(m.stats().frames, frames);
            (log_counts(m.scanner()), d.stats.clone())
        }
        LogPath::EnsoStream => {
            let mut scanner = LogScanner::new(&patterns);
            let mut d = EnsoStreamDriver::new(Device::attach_engine(&mut e, enso_opts(1)).unwrap());
            d.add_fallback_stream_pipe_on(0).unwrap();
            run(&mut e, &mut d, &mut scanner, || client_step(&mut c));
            // The driver asks for bytes behind an unfinished line at a
            // paced rate (wall-clock waits of at most STREAM_ASK_GAP_MAX_NS),
            // so the last ones may still wait for an ask.
            let deadline = Instant::now() + Duration::from_secs(2);
            while d.pending() > 0 && Instant::now() < deadline {
                e.step();
                while d.poll(&mut scanner).expect("application poll") > 0 {}
            }
            // The log ends with a newline: nothing is left in the pipe.
            assert_eq!(d.pending(), 0);
            assert_eq!(d.stats.bytes, text.len() as u64);
            (log_counts(&scanner), d.stats.clone())
        }
    };
    let s = e.stats();
    assert_no_drops(&s);
    assert_eq!(s.ports[0].counters.rx_frames, frames);
    assert_eq!(
        s.pipe_sum(|p| p.rx_frames) + s.queue_sum(|q| q.rx_frames),
        frames
    );
    if !matches!(path, LogPath::EnsoStream) {
        assert_eq!(
            (stats.frames, stats.consumed, stats.dropped),
            (frames, frames, 0)
        );
    }
    counts
}

#[test]
fn log_monitor_matches_the_same_lines_on_every_path() {
    let text = generate_log(9, LOG_BYTES);
    assert_eq!(text.last(), Some(&b'\n'));
    let mut alone = LogScanner::new(&LogPatterns::builtin());
    assert_eq!(alone.scan(&text), text.len());
    let want = log_counts(&alone);
    assert!(want.2 > 100, "the log has matching lines: {want:?}");
    for path in [
        LogPath::Packets(Interface::Enso),
        LogPath::Packets(Interface::Packetized),
        LogPath::EnsoStream,
    ] {
        assert_eq!(logmon_run(path, &text), want, "{path:?}");
    }
}

/// A line cut in two: while only its first half is in the stream pipe, the
/// driver asks the NIC for the latest tail at a paced rate, not on every
/// poll, and still sees the second half once it arrives.
#[test]
fn stream_driver_paces_its_asks_for_the_tail() {
    let (mut e, _dir) = cabled("stream-asks");
    let mut c = client(&mut e, false);
    let mut scanner = LogScanner::new(&LogPatterns::builtin());
    let mut d = EnsoStreamDriver::new(Device::attach_engine(&mut e, enso_opts(1)).unwrap());
    d.add_fallback_stream_pipe_on(0).unwrap();
    let line =
        b"Nov 21 10:00:00 host sshd[7]: Failed password for root from 10.0.0.9 port 22 ssh2\n";
    let mut src = LogSource::new(&line[..], 40, false);
    let poll = |e: &mut Engine, d: &mut EnsoStreamDriver, s: &mut LogScanner| {
        e.step();
        while d.poll(s).expect("application poll") > 0 {}
    };
    // The first 40 bytes: no newline yet.
    assert_eq!(c.send_with(1, |b| src.next_frame(b)).unwrap(), 1);
    for _ in 0..100 {
        poll(&mut e, &mut d, &mut scanner);
    }
    assert_eq!(d.pending(), 40, "the unfinished line waits in the pipe");
    let asks_before = d.tail_prefetches;
    let start = Instant::now();
    let polls = 20_000u64;
    for _ in 0..polls {
        poll(&mut e, &mut d, &mut scanner);
    }
    let elapsed = start.elapsed().as_nanos() as u64;
    let asks = d.tail_prefetches - asks_before;
    // Waits of 1, 2, 4, 8, 16 µs, then 32 µs each.
    let bound = 8 + elapsed / STREAM_ASK_GAP_MAX_NS;
    assert!(asks >= 1, "it asked for the tail");
    // Bounded by time, not by polls: on a loaded machine a poll can take
    // longer than the longest wait, and then asking on every poll is right.
    assert!(
        asks <= bound,
        "{asks} asks in {polls} polls over {elapsed} ns (at most {bound})"
    );
    assert_eq!(scanner.stats().lines, 0);
    // The rest of the line arrives; a later ask brings it.
    while !src.finished() {
        c.send_with(8, |b| src.next_frame(b)).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while scanner.stats().lines == 0 && Instant::now() < deadline {
        poll(&mut e, &mut d, &mut scanner);
    }
    assert_eq!(scanner.stats().lines, 1);
    assert_eq!(scanner.stats().matched_lines, 1);
    assert_eq!(d.pending(), 0);
    assert_eq!(d.stats.bytes, line.len() as u64);
}

// ------------------------------------------------- Replies larger than requests

/// Answers request `i` (a UDP payload holding `i`) with a response of 700 +
/// (i % 500) payload bytes, and drops every fifth request.
struct Amplifier;

impl enso_apps::nic::ReplyHandler for Amplifier {
    fn reply(&mut self, request: &[u8], response: &mut [u8]) -> Option<usize> {
        let d = packet::UdpDatagram::parse(request).ok()?;
        let i = u64::from_le_bytes(d.payload.get(..8)?.try_into().ok()?);
        if i % 5 == 4 {
            return None;
        }
        let mut payload = [0u8; 1300];
        let n = 700 + (i % 500) as usize;
        payload[..8].copy_from_slice(&i.to_le_bytes());
        payload[8..n].fill(i as u8);
        packet::emit_udp_frame(response, &d.endpoints.reversed(), &payload[..n]).ok()
    }
}

fn amplifier_run(iface: Interface) -> Vec<u64> {
    const N: u64 = 2000;
    let (mut e, _dir) = cabled(&format!("amplifier-{iface}"));
    let mut c = client(&mut e, true);
    let ep = Endpoints {
        src_mac: MacAddr([2, 0, 0, 0, 6, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 6, 2]),
        src_ip: Ipv4Addr::new(10, 0, 6, 1),
        dst_ip: Ipv4Addr::new(10, 0, 6, 2),
        src_port: 7000,
        dst_port: 7001,
    };
    let mut next = 0u64;
    let mut got = Vec::new();
    let mut client_step = |c: &mut PipeClient| {
        let room = (N - next).min(32);
        c.send_with(room as usize, |b| {
            let n = packet::emit_udp_frame(b, &ep, &next.to_le_bytes());
            next += 1;
            n.map(Some)
        })
        .unwrap();
        c.recv_with(|f| {
            let d = packet::UdpDatagram::parse(f).unwrap();
            let i = u64::from_le_bytes(d.payload[..8].try_into().unwrap());
            assert_eq!(d.payload.len(), 700 + (i % 500) as usize);
            assert!(d.payload[8..].iter().all(|&b| b == i as u8));
            got.push(i);
        })
        .unwrap();
        next == N && got.len() as u64 == N - N / 5
    };
    let stats = match iface {
        Interface::Enso => {
            // The smallest TX pipe: two responses per poll at most, so
            // batches are answered over several polls.
            let o = DeviceOptions {
                tx_pipe_size: 4096,
                ..enso_opts(1)
            };
            let mut d = EnsoReplyDriver::new(Device::attach_engine(&mut e, o).unwrap()).unwrap();
            d.add_fallback_pipes_on(0, 1).unwrap();
            run(&mut e, &mut d, &mut Amplifier, || client_step(&mut c));
            d.stats.clone()
        }
        Interface::Packetized => {
            let mut d =
                PacketizedReplyDriver::new(Device::attach_engine(&mut e, pkt_opts(1)).unwrap(), 32);
            d.add_rss_queues_on(0, 1).unwrap();
            run(&mut e, &mut d, &mut Amplifier, || client_step(&mut c));
            d.dev.tx_reclaim_all();
            let (free, total) = d.dev.pool_usage();
            assert_eq!(free + d.dev.buffers_in_rings(), total, "no buffer leaked");
            d.stats.clone()
        }
    };
    assert_no_drops(&e.stats());
    assert_eq!(
        (stats.frames, stats.forwarded, stats.dropped),
        (2000, 1600, 400)
    );
    got
}

#[test]
fn responses_larger_than_requests_on_both_interfaces() {
    let enso = amplifier_run(Interface::Enso);
    assert_eq!(enso, (0..2000).filter(|i| i % 5 != 4).collect::<Vec<u64>>());
    assert_eq!(enso, amplifier_run(Interface::Packetized));
}

// ------------------------------------------- KV responses, byte for byte

/// Request frame `i` of a fixed mix: SETs and GETs of values from 8 bytes
/// (answered in place on Ensō) to 1200 bytes (answered through the TX
/// pipe), DELETEs, batches of 1 to 4 messages, and every 13th frame not a
/// request batch (dropped).
fn kv_mixed_request(i: u64, ep: &Endpoints, buf: &mut [u8]) -> usize {
    use enso_apps::kv::{key_hash, wire, BatchKind, Message, Op};
    if i % 13 == 12 {
        return packet::emit_udp_frame(buf, ep, b"not a batch").unwrap();
    }
    let keys: Vec<[u8; 8]> = (0..4).map(|j| ((i * 7 + j) % 23).to_le_bytes()).collect();
    let value = vec![
        i as u8;
        if i.is_multiple_of(5) {
            1200
        } else {
            8 + (i % 3) as usize * 40
        }
    ];
    let count = 1 + (i % 4) as usize;
    let msgs: Vec<Message<'_>> = keys[..count]
        .iter()
        .enumerate()
        .map(|(j, k)| {
            let op = match (i + j as u64) % 5 {
                0 | 1 => Op::Set,
                4 => Op::Delete,
                _ => Op::Get,
            };
            Message {
                op: op as u8,
                status: 0,
                key_hash: key_hash(k),
                opaque: (i * 4 + j as u64) as u32,
                key: k,
                value: if op == Op::Set && j == 0 {
                    &value
                } else if op == Op::Set {
                    &value[..8]
                } else {
                    &[]
                },
            }
        })
        .collect();
    let mut payload = [0u8; 1400];
    let n = wire::encode_batch(&mut payload, BatchKind::Request, &msgs).unwrap();
    packet::emit_udp_frame(buf, ep, &payload[..n]).unwrap()
}

/// The response frames, as received, of the same requests through one
/// interface's reply driver.
fn kv_mixed_run(iface: Interface) -> Vec<Vec<u8>> {
    const N: u64 = 600;
    let (mut e, _dir) = cabled(&format!("kv-bytes-{iface}"));
    let mut c = client(&mut e, true);
    let ep = Endpoints {
        src_mac: MacAddr([2, 0, 0, 0, 7, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 7, 2]),
        src_ip: Ipv4Addr::new(10, 0, 7, 1),
        dst_ip: Ipv4Addr::new(10, 0, 7, 2),
        src_port: 7100,
        dst_port: 7101,
    };
    let mut server = KvServer::new(&ServerConfig::default()).unwrap();
    let (mut next, mut got) = (0u64, Vec::new());
    let mut client_step = |c: &mut PipeClient| {
        // Several requests in flight, so a poll answers several.
        let room = (N - next).min(24) as usize;
        c.send_with(room, |b| {
            let n = kv_mixed_request(next, &ep, b);
            next += 1;
            Ok::<_, enso_apps::load::LoadError>(Some(n))
        })
        .unwrap();
        c.recv_with(|f| got.push(f.to_vec())).unwrap();
        next == N && got.len() as u64 == N - N / 13
    };
    let sent_in_place = match iface {
        Interface::Enso => {
            let mut d =
                EnsoReplyDriver::new(Device::attach_engine(&mut e, enso_opts(1)).unwrap()).unwrap();
            d.add_fallback_pipes_on(0, 1).unwrap();
            run(&mut e, &mut d, &mut server, || client_step(&mut c));
            assert_eq!(d.stats.forwarded, d.sent_in_place + d.sent_via_tx);
            // Both ways were taken.
            let (here, via) = (d.sent_in_place, d.sent_via_tx);
            assert!(
                here > N / 2 && via >= 10,
                "{here} in place, {via} via the TX pipe"
            );
            d.sent_in_place
        }
        Interface::Packetized => {
            let mut d =
                PacketizedReplyDriver::new(Device::attach_engine(&mut e, pkt_opts(1)).unwrap(), 32);
            d.add_rss_queues_on(0, 1).unwrap();
            run(&mut e, &mut d, &mut server, || client_step(&mut c));
            0
        }
    };
    assert_no_drops(&e.stats());
    let _ = sent_in_place;
    assert_eq!(server.stats().drops(), N / 13);
    got
}

#[test]
fn kv_responses_are_the_same_bytes_on_both_interfaces() {
    let enso = kv_mixed_run(Interface::Enso);
    let pkt = kv_mixed_run(Interface::Packetized);
    assert_eq!(enso.len(), pkt.len());
    for (i, (a, b)) in enso.iter().zip(&pkt).enumerate() {
        assert_eq!(a, b, "response {i}");
    }
    // Small and large responses both came back.
    assert!(enso.iter().any(|f| f.len() < 128) && enso.iter().any(|f| f.len() > 1200));
}
