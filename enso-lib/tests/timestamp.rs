//! Timestamping in both formats, through an emulated NIC in this process
//! whose port 0 loops back: a frame sent with timestamping on comes back
//! carrying its round-trip time, in the format the port was set to.

use std::time::{Duration, Instant};

use enso::{rtt_ns, Device, DeviceOptions, TsFormat, NS_PER_CYCLE};
use nic_emu::testframe::{FrameKind, TestFrames};
use nic_emu::{DeviceConfig, Nic, RunOptions, WireConfig};

/// Sends `n` frames with timestamping at `offset` in `format` and returns
/// the 4 bytes at `offset` of each frame that came back.
fn round_trips(tag: &str, offset: u8, format: TsFormat, n: usize) -> Vec<[u8; 4]> {
    let name = format!("ts-{tag}-{}", std::process::id());
    let nic = Nic::start(
        DeviceConfig::new(name, WireConfig::Loopback),
        RunOptions::default(),
    )
    .unwrap();
    let opts = DeviceOptions {
        pipes: 1,
        tx_pipes: 1,
        ..Default::default()
    };
    let mut dev = Device::attach_nic(&nic, opts).unwrap();
    let rx = dev.alloc_rx_pipe(true).unwrap();
    let tx = dev.alloc_tx_pipe().unwrap();
    dev.set_timestamping_as(0, Some(offset), format).unwrap();
    let mut f = [0u8; 128];
    let len = TestFrames::new(1, 3).build(FrameKind::Ipv4Udp, 0, 0, 128, &mut f);
    let mut got = Vec::new();
    let until = Instant::now() + Duration::from_secs(5);
    for _ in 0..n {
        dev.tx_buf(tx, len).unwrap().copy_from_slice(&f[..len]);
        dev.send(tx, len, 0).unwrap();
        // One at a time, so each round trip is short.
        let want = got.len() + 1;
        while got.len() < want {
            assert!(Instant::now() < until, "frames did not come back");
            let _ = dev.reap_completions();
            let batch = dev.recv(rx).unwrap();
            let bytes = batch.len();
            for p in batch.packets() {
                got.push(p[offset as usize..offset as usize + 4].try_into().unwrap());
            }
            dev.free(rx, bytes).unwrap();
        }
    }
    drop(dev);
    nic.try_stop().unwrap();
    got
}

#[test]
fn the_enso_format_is_big_endian_cycles_as_get_pkt_rtt_reads_them() {
    let got = round_trips("enso", 50, TsFormat::Enso, 50);
    assert_eq!(got.len(), 50);
    for b in got {
        // Ensō's get_pkt_rtt: a big-endian 32-bit load, in 5 ns cycles.
        let cycles = u64::from(u32::from_be_bytes(b));
        let ns = cycles * NS_PER_CYCLE;
        // A loopback round trip in this process: above nothing, well
        // under a second (little-endian nanoseconds read this way would be
        // billions of cycles: seconds).
        assert!(ns < 1_000_000_000, "{b:?}: {ns} ns");
        let mut frame = [0u8; 64];
        frame[50..54].copy_from_slice(&b);
        assert_eq!(rtt_ns(&frame, 50, TsFormat::Enso), Some(ns));
    }
}

#[test]
fn the_native_format_is_little_endian_nanoseconds() {
    let got = round_trips("native", 50, TsFormat::Native, 50);
    assert_eq!(got.len(), 50);
    let mut nonzero = 0;
    for b in got {
        let ns = u64::from(u32::from_le_bytes(b));
        assert!(ns < 1_000_000_000, "{b:?}: {ns} ns");
        nonzero += (ns > 0) as u32;
        let mut frame = [0u8; 64];
        frame[50..54].copy_from_slice(&b);
        assert_eq!(rtt_ns(&frame, 50, TsFormat::Native), Some(ns));
    }
    // Nanosecond resolution: a round trip through another thread is never
    // 0 ns every time.
    assert!(nonzero > 0);
}

#[test]
fn rtt_ns_refuses_frames_too_short_for_the_stamp() {
    assert_eq!(rtt_ns(&[0u8; 53], 50, TsFormat::Enso), None);
    assert_eq!(rtt_ns(&[0u8; 10], usize::MAX - 1, TsFormat::Native), None);
    assert_eq!(rtt_ns(&[0, 0, 0, 7], 0, TsFormat::Enso), Some(35));
    assert_eq!(rtt_ns(&[7, 0, 0, 0], 0, TsFormat::Native), Some(7));
}
