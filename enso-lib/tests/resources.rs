//! Resources on demand: pipes allocated past what a handle reserved at
//! attach, up to the device's pipe ids, and freed pipes that receive
//! nothing more and are allocated again.

#[path = "../examples/socket_echo.rs"]
#[allow(dead_code)]
mod socket_echo;

use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use enso::socket::{Socket, Sockets};
use enso::{AllocError, Device, DeviceOptions, FlowRule, RxPipe, TxPipe};
use enso_abi::layout::MAX_PIPES;
use enso_abi::wire::PROTO_UDP;
use nic_emu::{DeviceConfig, Nic, RunOptions, WireConfig};
use socket_echo::{parse_udp, udp_frame};

/// An emulated NIC in this process whose port 0 loops back, with pipes of
/// `pipe_size` bytes.
fn loopback(tag: &str, pipe_size: usize) -> Nic {
    let name = format!("res-{tag}-{}", std::process::id());
    let mut cfg = DeviceConfig::new(name, WireConfig::Loopback);
    cfg.pipe_size = pipe_size;
    Nic::start(cfg, RunOptions::default()).unwrap()
}

fn addr(s: &str) -> SocketAddrV4 {
    s.parse().unwrap()
}

fn udp_rule(to: SocketAddrV4) -> FlowRule {
    FlowRule {
        dst_ip: u32::from(*to.ip()),
        dst_port: to.port(),
        protocol: PROTO_UDP,
        ..Default::default()
    }
}

/// Sends `n` datagrams to `to` out of port 0 (which loops back).
fn send(dev: &mut Device, tx: TxPipe, to: SocketAddrV4, n: u8) {
    for i in 0..n {
        let f = udp_frame(addr("10.0.0.9:4000"), to, &[i; 50]);
        let buf = dev.tx_buf(tx, f.len()).unwrap();
        buf.copy_from_slice(&f);
        dev.send(tx, f.len(), 0).unwrap();
    }
}

/// Datagram payloads `pipe` receives within `wait`, stopping at `want`.
fn receive(dev: &mut Device, pipe: RxPipe, want: usize, wait: Duration) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let until = Instant::now() + wait;
    while got.len() < want && Instant::now() < until {
        let batch = dev.recv(pipe).unwrap();
        let n = batch.len();
        for f in batch.packets() {
            got.push(parse_udp(f).expect("a UDP frame").2.to_vec());
        }
        dev.free(pipe, n).unwrap();
    }
    got
}

#[test]
fn two_hundred_sockets_made_and_shut_one_after_another_all_succeed() {
    let nic = loopback("one-by-one", 64 << 10);
    let dev = Device::attach_nic(&nic, Sockets::options()).unwrap();
    let mut socks = Sockets::from_device(dev);
    let mut ids = std::collections::BTreeSet::new();
    for i in 0..200 {
        let s = socks.socket(i % 2 == 0).unwrap();
        assert_eq!(s, Socket(0), "socket {i}: the lowest free number");
        socks.bind(s, addr("10.0.0.1:7")).unwrap();
        socks.shutdown(s).unwrap();
        ids.insert(socks.device().info().pipe_count);
    }
    // Freed pipes were reused: the handle never asked for more ids.
    assert_eq!(ids.into_iter().collect::<Vec<_>>(), vec![64]);
    drop(socks);
    let s = nic.try_stop().unwrap();
    assert_eq!(s.flow_rules, 0);
}

#[test]
fn two_hundred_sockets_at_once_get_pipe_ids_past_those_reserved() {
    let nic = loopback("at-once", 64 << 10);
    let dev = Device::attach_nic(&nic, Sockets::options()).unwrap();
    let mut socks = Sockets::from_device(dev);
    let all: Vec<Socket> = (0..200).map(|_| socks.socket(false).unwrap()).collect();
    assert_eq!(all, (0..200).map(Socket).collect::<Vec<_>>());
    let info = socks.device().info().clone();
    // 64 reserved, doubled at the 65th and at the 129th.
    assert_eq!(info.pipe_count, 256);
    // The last one works: it receives what is sent to it.
    let last = all[199];
    let to = addr("10.0.0.1:99");
    socks.bind(last, to).unwrap();
    let f = udp_frame(addr("10.0.0.9:4000"), to, &[7; 50]);
    socks.send(last, &f).unwrap();
    let mut buf = vec![0u8; 4096];
    let until = Instant::now() + Duration::from_secs(2);
    let mut n = 0;
    while n == 0 && Instant::now() < until {
        n = socks.recv(last, &mut buf).unwrap();
    }
    assert_eq!(parse_udp(&buf[..n]).unwrap().2, &[7u8; 50][..]);
    for s in all {
        socks.shutdown(s).unwrap();
    }
    drop(socks);
    nic.try_stop().unwrap();
}

#[test]
fn pipes_are_granted_up_to_the_device_limit_then_one_clear_error() {
    // Small pipes: 8192 of them are 32 MiB.
    let nic = loopback("limit", 4096);
    let opts = DeviceOptions {
        pipes: 16,
        tx_pipes: 0,
        ..Default::default()
    };
    let mut dev = Device::attach_nic(&nic, opts).unwrap();
    assert_eq!(dev.info().pipe_base, 0, "the first application starts at 0");
    let mut n = 0u32;
    let err = loop {
        match dev.alloc_rx_pipe(false) {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(n, MAX_PIPES, "every pipe id of the device");
    match &err {
        AllocError::NoMorePipes(m) => assert!(m.contains("8192"), "{m}"),
        e => panic!("{e:?}"),
    }
    assert!(err.to_string().starts_with("no more RX pipes"), "{err}");
    // It says so again, and nothing changed.
    assert!(matches!(
        dev.alloc_rx_pipe(false),
        Err(AllocError::NoMorePipes(_))
    ));
    assert_eq!(dev.info().pipe_count, MAX_PIPES);
    drop(dev);
    nic.try_stop().unwrap();
}

#[test]
fn a_handle_grows_into_the_ids_up_to_the_next_application() {
    let nic = loopback("neighbours", 4096);
    let opts = || DeviceOptions {
        pipes: 16,
        tx_pipes: 0,
        ..Default::default()
    };
    let mut a = Device::attach_nic(&nic, opts()).unwrap();
    let mut b = Device::attach_nic(&nic, opts()).unwrap();
    let b_base = b.info().pipe_base;
    // The second starts halfway through the ids the first left free.
    assert_eq!(b_base, 16 + (MAX_PIPES - 16 - 16) / 2);
    let mut n = 0;
    let err = loop {
        match a.alloc_rx_pipe(false) {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(n, b_base, "up to the next application's first id");
    match err {
        AllocError::NoMorePipes(m) => assert!(m.contains("taken"), "{m}"),
        e => panic!("{e:?}"),
    }
    // The second grows too, into the ids after it.
    let more: Vec<RxPipe> = (0..100).map(|_| b.alloc_rx_pipe(false).unwrap()).collect();
    let last = b.pipe_id(more[99]).unwrap();
    assert_eq!(last, b_base + 99);
    drop((a, b));
    nic.try_stop().unwrap();
}

#[test]
fn a_freed_pipe_receives_nothing_more_and_its_id_is_reused() {
    let nic = loopback("freed", 64 << 10);
    let opts = DeviceOptions {
        pipes: 1,
        tx_pipes: 0,
        ..Default::default()
    };
    let mut dev = Device::attach_nic(&nic, opts).unwrap();
    let tx = dev.alloc_tx_pipe().unwrap();
    let (old_to, new_to) = (addr("10.0.0.1:7"), addr("10.0.0.1:8"));
    let a = dev.alloc_rx_pipe(false).unwrap();
    let a_id = dev.pipe_id(a).unwrap();
    dev.bind(a, udp_rule(old_to)).unwrap();
    send(&mut dev, tx, old_to, 5);
    let got = receive(&mut dev, a, 5, Duration::from_secs(2));
    assert_eq!(got.len(), 5);
    // Five more wait in the pipe as it is freed: dropped with it.
    send(&mut dev, tx, old_to, 5);
    std::thread::sleep(Duration::from_millis(20));
    let before = nic.stats().ports[0].counters.drop_no_match;
    dev.free_pipe(a).unwrap();
    assert!(dev.recv(a).is_err(), "the handle names no pipe");
    // Sent to the freed pipe's flow: dropped as for a disabled pipe.
    send(&mut dev, tx, old_to, 10);
    let until = Instant::now() + Duration::from_secs(2);
    let mut dropped = 0;
    while dropped < 10 && Instant::now() < until {
        dropped = nic.stats().ports[0].counters.drop_no_match - before;
    }
    assert_eq!(dropped, 10);
    // Its id is allocated again, and the new pipe gets none of the old
    // one's frames, only its own.
    let b = dev.alloc_rx_pipe(false).unwrap();
    assert_eq!(dev.pipe_id(b), Some(a_id));
    assert!(receive(&mut dev, b, 1, Duration::from_millis(100)).is_empty());
    send(&mut dev, tx, old_to, 3);
    dev.bind(b, udp_rule(new_to)).unwrap();
    send(&mut dev, tx, new_to, 4);
    let got = receive(&mut dev, b, 5, Duration::from_millis(500));
    assert_eq!(got, (0..4u8).map(|i| vec![i; 50]).collect::<Vec<_>>());
    let s = nic.stats();
    assert_eq!(s.ports[0].counters.drop_no_match - before, 13);
    drop(dev);
    nic.try_stop().unwrap();
}

#[test]
fn tx_pipes_are_allocated_on_demand_and_freed_ones_reused() {
    let nic = loopback("tx", 64 << 10);
    let opts = DeviceOptions {
        pipes: 1,
        tx_pipes: 1,
        tx_pipe_size: 64 << 10,
        ..Default::default()
    };
    let mut dev = Device::attach_nic(&nic, opts).unwrap();
    let rx = dev.alloc_rx_pipe(false).unwrap();
    let to = addr("10.0.0.1:7");
    dev.bind(rx, udp_rule(to)).unwrap();
    // Sixty-four TX pipes where one was reserved; each sends.
    let txs: Vec<TxPipe> = (0..64).map(|_| dev.alloc_tx_pipe().unwrap()).collect();
    for &tx in &txs {
        send(&mut dev, tx, to, 1);
    }
    assert_eq!(receive(&mut dev, rx, 64, Duration::from_secs(2)).len(), 64);
    // Freed, a TX pipe's handle is refused; the next allocation reuses
    // its slot, and sends from it arrive intact.
    dev.free_tx_pipe(txs[10]).unwrap();
    assert!(dev.tx_buf(txs[10], 64).is_err());
    assert!(dev.free_tx_pipe(txs[10]).is_err(), "freed twice");
    let again = dev.alloc_tx_pipe().unwrap();
    assert_eq!(again, txs[10]);
    send(&mut dev, again, to, 3);
    let got = receive(&mut dev, rx, 3, Duration::from_secs(2));
    assert_eq!(got, (0..3u8).map(|i| vec![i; 50]).collect::<Vec<_>>());
    drop(dev);
    nic.try_stop().unwrap();
}
