//! Shared helpers for the integration tests: devices in temporary
//! directories, and a stepped echo loop (engine step, then application poll)
//! that makes runs deterministic.

use enso::{Device, DeviceOptions, RxTxPipe};
use nic_emu::testframe::TestFrames;
use nic_emu::{DeviceConfig, Engine, GeneratorConfig, WireConfig};

/// A device config with one generator port, small pipes, in a fresh
/// temporary directory (returned so it outlives the device).
pub fn generator_device(name: &str, g: GeneratorConfig) -> (DeviceConfig, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = DeviceConfig::new(name, WireConfig::Generator(g));
    cfg.dir = dir.path().to_path_buf();
    cfg.pipe_size = 64 << 10;
    cfg.notif_ring_entries = 4096;
    (cfg, dir)
}

/// Increments the echo byte of every test frame in the batch and sends the
/// batch back in place. Returns the frames echoed.
pub fn echo_pipe(dev: &mut Device, pipe: RxTxPipe) -> usize {
    let (n, bytes) = {
        let mut b = dev.recv(pipe).expect("recv");
        let mut n = 0;
        for pkt in b.packets_mut() {
            if let Some(v) = TestFrames::peek(pkt) {
                let e = v.kind.echo_offset();
                pkt[e] = pkt[e].wrapping_add(1);
            }
            n += 1;
        }
        (n, b.len())
    };
    if bytes > 0 {
        dev.send_and_free(pipe, bytes).expect("send");
    }
    n
}

/// Serves every pipe that has data once. Returns the frames echoed.
pub fn echo_ready(dev: &mut Device) -> usize {
    let mut n = 0;
    while let Some(p) = dev.next_pipe_with_data().expect("poll") {
        let p = dev.as_rxtx(p).expect("rx/tx pipe");
        n += echo_pipe(dev, p);
    }
    n
}

/// Runs engine and echo alternately until the generator has sent everything
/// and nothing is in flight, or `max_steps` pass. Returns the steps taken.
pub fn run_stepped_echo(engine: &mut Engine, dev: &mut Device, max_steps: usize) -> usize {
    for i in 0..max_steps {
        engine.step();
        echo_ready(dev);
        dev.reap_completions().expect("reap");
        if i % 64 == 0 && engine.generators_finished() {
            let s = engine.stats();
            let g = s.generator(0).expect("generator port");
            if g.in_flight() <= s.total_drops() && dev.tx_in_flight() == 0 {
                // Let the last completions and head writes settle.
                engine.run_until_idle(1000);
                return i;
            }
        }
    }
    max_steps
}

/// Options for tests: `pipes` pipes, small TX pipe.
pub fn opts(pipes: u32) -> DeviceOptions {
    DeviceOptions {
        pipes,
        tx_pipes: 1,
        tx_pipe_size: 64 << 10,
        ..Default::default()
    }
}

/// Options for packetized tests: `queues` queue pairs with `ring`-entry
/// rings and a pool that fills them all twice over.
pub fn pkt_opts(queues: u32, ring: u32) -> DeviceOptions {
    DeviceOptions {
        pipes: 0,
        tx_pipes: 0,
        queues,
        rx_ring: ring,
        tx_ring: ring,
        pool_buffers: queues * ring * 2 + 256,
        ..Default::default()
    }
}

/// Increments the echo byte of test frames (other frames unchanged).
pub fn echo_handler(f: &mut [u8]) -> enso::Verdict {
    if let Some(v) = TestFrames::peek(f) {
        let e = v.kind.echo_offset();
        f[e] = f[e].wrapping_add(1);
    }
    enso::Verdict::Forward
}
