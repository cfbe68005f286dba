//! A small socket program ported to Ensō's socket-like API: a UDP echo
//! server, first as it is written with `std::net::UdpSocket`, then the same
//! loop with [`enso::socket::Sockets`] (the calls Ensō's library names
//! `socket`, `bind`, `recv_zc`, `send`, `get_completions`).
//!
//! The two differ where Ensō does: a socket receives whole frames, not
//! payloads, so the echo answers each by swapping its addresses and ports
//! (the checksums stay valid: both sums are symmetric in source and
//! destination), and it answers in place, zero copy, freeing the bytes when
//! the NIC has sent them.
//!
//! ```sh
//! # the std version, on the loopback interface
//! cargo run --release -p enso --example socket_echo -- --std --datagrams 1000
//! # the Ensō version against an emulated NIC in this process whose port is
//! # a loopback: a client socket sends datagrams, the server echoes them
//! cargo run --release -p enso --example socket_echo -- --in-process --datagrams 1000
//! ```

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use enso::socket::{Socket, SocketError, Sockets};
use enso::Device;
use nic_emu::{DeviceConfig, Nic, RunOptions, WireConfig};

/// A UDP echo server, with std sockets or Ensō's.
#[derive(Parser, Debug)]
#[command(name = "socket_echo")]
pub struct Args {
    /// The std version on 127.0.0.1.
    #[arg(long, conflicts_with = "in_process")]
    pub std: bool,
    /// The Ensō version against an emulated NIC in this process.
    #[arg(long, required_unless_present = "std")]
    pub in_process: bool,
    /// Datagrams the client sends (each with its own payload).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub datagrams: u64,
    /// Stop after this many seconds at most.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub duration_s: u64,
}

/// What the client saw.
#[derive(Debug, Default, serde::Serialize)]
pub struct Summary {
    /// Datagrams sent.
    pub sent: u64,
    /// Answers whose payload and addresses were those of a datagram sent.
    pub echoed: u64,
    /// Answers that were not.
    pub wrong: u64,
}

fn payload(i: u64) -> Vec<u8> {
    format!("datagram {i} of the echo test").into_bytes()
}

// ---------------------------------------------------------------------------
// Before: the echo server with std sockets.

/// Answers every datagram with its own bytes, until `stop` is set.
pub fn serve_std(sock: &UdpSocket, stop: &AtomicBool) -> std::io::Result<u64> {
    let mut buf = [0u8; 2048];
    let mut n = 0;
    sock.set_read_timeout(Some(Duration::from_millis(50)))?;
    while !stop.load(Ordering::Relaxed) {
        match sock.recv_from(&mut buf) {
            Ok((len, from)) => {
                sock.send_to(&buf[..len], from)?;
                n += 1;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn run_std(a: &Args) -> Result<Summary, String> {
    let server = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr = server.local_addr().map_err(|e| e.to_string())?;
    let client = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    client
        .set_read_timeout(Some(Duration::from_millis(200)))
        .map_err(|e| e.to_string())?;
    let stop = Instant::now() + Duration::from_secs(a.duration_s);
    let mut s = Summary::default();
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let h = scope.spawn(|| serve_std(&server, &done));
        let mut buf = [0u8; 2048];
        for i in 0..a.datagrams {
            if Instant::now() >= stop {
                break;
            }
            let p = payload(i);
            client.send_to(&p, addr).map_err(|e| e.to_string())?;
            s.sent += 1;
            match client.recv_from(&mut buf) {
                Ok((len, from)) if from == addr && buf[..len] == p[..] => s.echoed += 1,
                Ok(_) => s.wrong += 1,
                Err(_) => {}
            }
        }
        done.store(true, Ordering::Relaxed);
        h.join()
            .map_err(|_| "the server thread panicked".to_string())?
            .map_err(|e| e.to_string())?;
        Ok::<(), String>(())
    })?;
    Ok(s)
}

// ---------------------------------------------------------------------------
// After: the same server with Ensō's sockets.

/// Answers every datagram that reaches socket `s` by sending its frame
/// back with addresses and ports swapped, in place. Returns how many it
/// answered in this pass.
pub fn serve_enso(socks: &mut Sockets, s: Socket) -> Result<u64, SocketError> {
    let (n, bytes) = {
        let mut frames = socks.recv_zc(s)?;
        let mut n = 0;
        for f in frames.packets_mut() {
            swap_endpoints(f);
            n += 1;
        }
        (n, frames.len())
    };
    if bytes > 0 {
        socks.send_zc(s, bytes)?;
    }
    // Sent frames are freed as the NIC completes them.
    socks.get_completions()?;
    Ok(n)
}

/// Swaps the Ethernet, IPv4 and UDP source and destination of a frame.
pub fn swap_endpoints(f: &mut [u8]) {
    if f.len() < 42 || f[12..14] != [0x08, 0x00] {
        return;
    }
    for (a, b) in [(0, 6), (26, 30)] {
        let n = if a == 0 { 6 } else { 4 };
        for k in 0..n {
            f.swap(a + k, b + k);
        }
    }
    let ihl = usize::from(f[14] & 0x0f) * 4;
    let l4 = 14 + ihl;
    if f.len() >= l4 + 4 {
        for k in 0..2 {
            f.swap(l4 + k, l4 + 2 + k);
        }
    }
}

/// An Ethernet/IPv4/UDP frame from `src` to `dst` carrying `data`, with a
/// valid IPv4 header checksum and no UDP checksum.
pub fn udp_frame(src: SocketAddrV4, dst: SocketAddrV4, data: &[u8]) -> Vec<u8> {
    let len = (42 + data.len()).max(60);
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (28 + data.len()) as u16;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&src.ip().octets());
    f[30..34].copy_from_slice(&dst.ip().octets());
    let sum = enso_abi::wire::ipv4_checksum(&f[14..34]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    f[34..36].copy_from_slice(&src.port().to_be_bytes());
    f[36..38].copy_from_slice(&dst.port().to_be_bytes());
    f[38..40].copy_from_slice(&(8 + data.len() as u16).to_be_bytes());
    f[42..42 + data.len()].copy_from_slice(data);
    f
}

/// The (source, destination, payload) of an IPv4/UDP frame.
pub fn parse_udp(f: &[u8]) -> Option<(SocketAddrV4, SocketAddrV4, &[u8])> {
    if f.len() < 42 || f[12..14] != [0x08, 0x00] || f[23] != 17 {
        return None;
    }
    let ip = |o: usize| Ipv4Addr::new(f[o], f[o + 1], f[o + 2], f[o + 3]);
    let port = |o: usize| u16::from_be_bytes([f[o], f[o + 1]]);
    let udp_len = usize::from(port(38));
    let data = f.get(42..34 + udp_len)?;
    Some((
        SocketAddrV4::new(ip(26), port(34)),
        SocketAddrV4::new(ip(30), port(36)),
        data,
    ))
}

fn run_in_process(a: &Args) -> Result<Summary, String> {
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("sock-echo-{}-{n}", std::process::id());
    // Port 0 is a loopback: what it sends comes back to it.
    let nic = Nic::start(
        DeviceConfig::new(name, WireConfig::Loopback),
        RunOptions::default(),
    )?;
    let dev = Device::attach_nic(&nic, Sockets::options()).map_err(|e| e.to_string())?;
    let mut socks = Sockets::from_device(dev);
    let server_addr = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7);
    let client_addr = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 5000);
    let err = |e: SocketError| e.to_string();
    let server = socks.socket(false).map_err(err)?;
    socks.bind(server, server_addr).map_err(err)?;
    let client = socks.socket(false).map_err(err)?;
    socks.bind(client, client_addr).map_err(err)?;

    let stop = Instant::now() + Duration::from_secs(a.duration_s);
    let mut s = Summary::default();
    let mut buf = vec![0u8; 64 * 1024];
    while s.echoed + s.wrong < a.datagrams && Instant::now() < stop {
        // The client: up to 32 datagrams in flight.
        if s.sent < a.datagrams && s.sent - (s.echoed + s.wrong) < 32 {
            let f = udp_frame(client_addr, server_addr, &payload(s.sent));
            socks.send(client, &f).map_err(err)?;
            s.sent += 1;
        }
        // The server.
        serve_enso(&mut socks, server).map_err(err)?;
        // The client's answers, copied out.
        let got = socks.recv(client, &mut buf).map_err(err)?;
        let mut at = 0;
        while at < got {
            let Some((from, to, data)) = parse_udp(&buf[at..got]) else {
                s.wrong += 1;
                break;
            };
            let len = 34 + usize::from(u16::from_be_bytes([buf[at + 38], buf[at + 39]]));
            let want = payload(s.echoed + s.wrong);
            if from == server_addr && to == client_addr && data == want {
                s.echoed += 1;
            } else {
                s.wrong += 1;
            }
            at += len.max(60).next_multiple_of(64);
        }
    }
    drop(socks);
    nic.try_stop()?;
    Ok(s)
}

/// Runs the chosen version.
pub fn run(a: &Args) -> Result<Summary, String> {
    if a.std {
        run_std(a)
    } else {
        run_in_process(a)
    }
}

#[allow(dead_code)]
fn main() {
    let a = Args::parse();
    match run(&a) {
        Ok(s) => println!("{}", serde_json::to_string(&s).expect("json")),
        Err(e) => {
            eprintln!("socket_echo: {e}");
            std::process::exit(1);
        }
    }
}
