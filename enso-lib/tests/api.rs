//! The API's guarantees that make mistakes hard: what a dropped batch
//! does, RX/TX pipes in notification order, and the crate-level error.

use enso::{
    AllocError, AttachError, ConfigError, Device, DeviceError, DeviceOptions, DriverError, Error,
    FlowRule, FreeError, RecvError, SendError,
};
use nic_emu::testframe::TestFrames;
use nic_emu::{DeviceConfig, Engine, GeneratorConfig, WireConfig};

/// A stepped engine whose port 0 is a generator, with pipes of `pipe_size`.
fn engine(name: &str, g: GeneratorConfig, pipe_size: usize) -> (Engine, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = DeviceConfig::new(name, WireConfig::Generator(g));
    cfg.dir = dir.path().to_path_buf();
    cfg.pipe_size = pipe_size;
    cfg.notif_ring_entries = 256;
    (Engine::new(cfg).expect("engine"), dir)
}

fn opts(pipes: u32) -> DeviceOptions {
    DeviceOptions {
        pipes,
        tx_pipes: 0,
        ..Default::default()
    }
}

#[test]
fn a_dropped_batch_stays_consumed_until_freed_and_the_pipe_fills() {
    // 400 frames of one flit into a pipe of 256 flits, one kept free.
    let g = GeneratorConfig {
        count: Some(400),
        ..Default::default()
    };
    let (mut e, _dir) = engine("api-drop", g, 16 << 10);
    let mut dev = Device::attach_engine(&mut e, opts(1)).expect("attach");
    let pipe = dev.alloc_rx_pipe(true).expect("pipe");
    e.run_until_idle(10_000);
    // Receive and drop every batch; ask for the latest tail each time
    // (notifications are reactive: nothing else would bring one).
    let mut received = 0;
    for _ in 0..8 {
        dev.prefetch(pipe).expect("prefetch");
        e.run_until_idle(100);
        received += dev.recv(pipe).expect("recv").len();
    }
    assert_eq!(received, 255 * 64, "the pipe filled and stayed full");
    let s = e.stats();
    assert_eq!(s.pipe_sum(|c| c.drop_pipe_full), 400 - 255);
    assert_eq!(s.pipe_sum(|c| c.rx_frames), 255);
    // Nothing was freed, and the next recv does not hand the bytes out again.
    assert_eq!(dev.stats().head_writes, 0);
    assert!(dev.recv(pipe).expect("recv").is_empty());
    // They are still there to free: no more than them.
    assert_eq!(
        dev.free(pipe, 256 * 64),
        Err(FreeError::MoreThanReceived {
            asked: 256 * 64,
            available: 255 * 64
        })
    );
    // `unconsume` hands the last frame out again ...
    dev.unconsume(pipe, 64).expect("unconsume");
    assert_eq!(dev.recv(pipe).expect("recv").packet_count(), 1);
    // ... and `free_all` gives all of them back to the NIC in one head write.
    dev.free_all(pipe).expect("free_all");
    assert_eq!(dev.stats().head_writes, 1);
    dev.free_all(pipe).expect("free_all again");
    assert_eq!(dev.stats().head_writes, 1, "nothing left to free");
    assert_eq!(
        dev.free(pipe, 64),
        Err(FreeError::MoreThanReceived {
            asked: 64,
            available: 0
        })
    );
}

#[test]
fn next_rxtx_pipe_with_data_passes_over_rx_pipes_and_keeps_them_ready() {
    let g = GeneratorConfig {
        count: Some(20),
        flows: 2,
        paused: true,
        ..Default::default()
    };
    let (mut e, _dir) = engine("api-rxtx", g, 64 << 10);
    let mut dev = Device::attach_engine(&mut e, opts(2)).expect("attach");
    // Flow 0 to an RX pipe (UDP matches destination address and port),
    // the other flow to a fallback RX/TX pipe.
    let rx = dev.alloc_rx_pipe(false).expect("rx pipe");
    let t = TestFrames::flow_tuple(0);
    let rule = FlowRule {
        dst_ip: t.dst_ip,
        dst_port: t.dst_port,
        protocol: t.protocol,
        ..Default::default()
    };
    dev.bind(rx, rule).expect("bind");
    let rxtx = dev.alloc_rxtx_pipe(true).expect("rx/tx pipe");
    e.run_until_idle(100); // the binding takes effect
    e.set_generators_paused(false);
    e.run_until_idle(1000);
    assert_eq!(e.stats().total_drops(), 0);

    assert_eq!(dev.next_rxtx_pipe_with_data(), Ok(Some(rxtx)));
    assert!(dev.recv(rxtx).expect("recv").packet_count() >= 1);
    // The RX pipe has data too but is no RX/TX pipe.
    assert_eq!(dev.next_rxtx_pipe_with_data(), Ok(None));
    // It stayed ready: the general call returns it.
    assert_eq!(dev.next_pipe_with_data(), Ok(Some(rx)));
    assert_eq!(dev.as_rxtx(rx), None);
    let frames = dev.recv(rx).expect("recv").packets().count();
    assert!((1..=10).contains(&frames), "{frames} frames of flow 0");
    dev.free_all(rx).expect("free");
    dev.free_all(rxtx).expect("free");
}

/// Every call's error goes through `?` into `enso::Error`.
fn two_pipes(dev: &mut Device) -> Result<(), Error> {
    let a = dev.alloc_rx_pipe(false)?;
    dev.bind(a, FlowRule::default())?;
    dev.free_all(a)?;
    dev.alloc_rx_pipe(false)?;
    Ok(())
}

#[test]
fn every_error_converts_into_enso_error() {
    let (mut e, _dir) = engine("api-error", GeneratorConfig::default(), 64 << 10);
    let mut dev = Device::attach_engine(&mut e, opts(1)).expect("attach");
    let err = two_pipes(&mut dev).expect_err("only one pipe was reserved");
    assert!(
        matches!(err, Error::Alloc(AllocError::NoPipes(1))),
        "{err:?}"
    );
    assert_eq!(err.to_string(), AllocError::NoPipes(1).to_string());
    assert_eq!(err.device(), None);
    let boxed: Box<dyn std::error::Error> = Box::new(err);
    assert!(boxed.to_string().contains("no free RX pipe"));

    let gone = DeviceError::Gone;
    let all: [Error; 9] = [
        AttachError::Stalled(gone).into(),
        AllocError::Device(gone).into(),
        RecvError::Device(gone).into(),
        FreeError::Device(gone).into(),
        SendError::Device(gone).into(),
        ConfigError::Device(gone).into(),
        gone.into(),
        DriverError::Device(gone).into(),
        DriverError::Send(SendError::Device(gone)).into(),
    ];
    for e in &all {
        assert_eq!(e.device(), Some(gone), "{e:?}");
        assert_eq!(e.to_string(), gone.to_string());
    }
    assert_eq!(Error::from(ConfigError::BadValue).device(), None);
}

#[test]
fn each_port_has_its_own_mac_and_none_is_given_past_the_ports() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = DeviceConfig::new("macs", WireConfig::Null);
    cfg.ports = vec![WireConfig::Null, WireConfig::Loopback];
    cfg.dir = dir.path().to_path_buf();
    cfg.pipe_size = 1 << 16;
    cfg.notif_ring_entries = 256;
    let mut e = Engine::new(cfg).unwrap();
    let dev = Device::attach_engine(&mut e, opts(1)).unwrap();
    let (a, b) = (dev.port_mac(0).unwrap(), dev.port_mac(1).unwrap());
    assert_ne!(a, b);
    assert_eq!(a[0] & 0b11, 0b10, "locally administered unicast");
    assert_eq!(a, enso_abi::devname::port_mac("macs", 0));
    assert_eq!(dev.port_mac(2), None);
}

#[test]
fn recv_max_hands_out_whole_frames_within_both_bounds() {
    use nic_emu::testframe::FrameKind;
    use nic_emu::SizeSpec;
    // 12 frames of 100 bytes: IPv4 ones take 2 flits, opaque ones 3 (a
    // marker flit first).
    let g = GeneratorConfig {
        count: Some(12),
        sizes: SizeSpec::Fixed(100),
        kinds: vec![FrameKind::Ipv4Udp, FrameKind::Raw],
        ..Default::default()
    };
    let (mut e, _dir) = engine("api-recv-max", g, 64 << 10);
    let mut dev = Device::attach_engine(&mut e, opts(1)).expect("attach");
    let pipe = dev.alloc_rx_pipe(true).expect("pipe");
    e.run_until_idle(10_000);
    dev.prefetch(pipe).expect("prefetch");
    e.run_until_idle(100);
    let (mut frames, mut bytes, mut markers, mut batches) = (0, 0, 0, 0);
    for _ in 0..40 {
        let b = dev.recv_max(pipe, 5 * 64, 2).expect("recv_max");
        if b.is_empty() {
            break;
        }
        batches += 1;
        let spans: Vec<_> = b.frames().collect();
        assert!(b.len() <= 5 * 64, "{} bytes", b.len());
        assert!((1..=2).contains(&spans.len()), "{} frames", spans.len());
        assert_eq!(spans.last().map(|s| s.end), Some(b.len()), "whole frames");
        let mut slot = 0;
        for (s, p) in spans.iter().zip(b.packets()) {
            assert_eq!(s.len, 100);
            assert_eq!(&b.bytes()[s.offset..s.offset + s.len], p);
            assert_eq!(s.offset % 64, 0);
            // Behind a marker flit the frame starts one flit into its slot.
            if s.offset > slot {
                assert_eq!((s.offset - slot, s.end - slot), (64, 192));
                markers += 1;
            } else {
                assert_eq!(s.end - slot, 128);
            }
            slot = s.end;
        }
        frames += spans.len();
        bytes += b.len();
    }
    assert_eq!(frames, 12);
    assert!(
        (1..12).contains(&markers),
        "both kinds came: {markers} opaque"
    );
    assert_eq!(bytes, (12 - markers) * 128 + markers * 192);
    assert!(batches >= 6, "at most 2 frames a batch: {batches}");
    // A bound below the next frame gives an empty batch and keeps it.
    dev.unconsume(pipe, bytes).expect("unconsume");
    assert!(dev.recv_max(pipe, 127, 10).expect("recv_max").is_empty());
    assert!(dev.recv_max(pipe, 1000, 0).expect("recv_max").is_empty());
    let b = dev
        .recv_max(pipe, usize::MAX, usize::MAX)
        .expect("recv_max");
    assert_eq!((b.len(), b.frames().count()), (bytes, 12));
    dev.free_all(pipe).expect("free_all");
}

#[test]
fn recv_and_tx_takes_only_this_devices_tx_pipes_and_copies_any_frame() {
    let (mut e, _dir) = engine("api-split", GeneratorConfig::default(), 64 << 10);
    let o = DeviceOptions {
        pipes: 1,
        tx_pipes: 1,
        ..Default::default()
    };
    let mut a = Device::attach_engine(&mut e, o.clone()).expect("attach a");
    let mut b = Device::attach_engine(&mut e, o).expect("attach b");
    let rx = a.alloc_rx_pipe(false).expect("rx pipe");
    let theirs = b.alloc_tx_pipe().expect("b's tx pipe");
    assert_eq!(
        a.recv_and_tx(rx, theirs).map(|_| ()),
        Err(RecvError::ForeignPipe)
    );
    let mine = a.alloc_tx_pipe().expect("a's tx pipe");
    let (batch, mut out) = a.recv_and_tx(rx, mine).expect("recv_and_tx");
    assert_eq!(batch.len(), 0, "nothing was received");
    // A frame whose headers state no length goes behind a marker flit: two
    // flits of the TX pipe for 60 bytes.
    let before = out.tx_space().expect("space");
    let raw = [0x5au8; 60];
    out.send_copy(&raw, 0).expect("send a raw frame");
    assert_eq!(before - out.tx_space().expect("space"), 128);
    assert!(matches!(
        out.send_copy(&raw[..10], 0),
        Err(SendError::Frame(_))
    ));
    assert!(matches!(out.send_copy(&raw, 9), Err(SendError::NoPort(9))));
    drop(batch);
    assert_eq!(a.tx_in_flight(), 1);
}
