//! Quick look at the datapath rate: NIC engine on one core with its built-in
//! generator, an application on the other, `rx` (receive and free) or `echo`.
//! For measurements use `cargo run --release -p bench -- echo`.
//!
//! `cargo run --release -p enso --example rate -- [rx|echo] [size] [secs]`

use std::time::{Duration, Instant};

use enso::{Device, DeviceOptions};
use nic_emu::{DeviceConfig, GeneratorConfig, Nic, RunOptions, SizeSpec, VerifyLevel, WireConfig};

fn main() {
    let mut a = std::env::args().skip(1);
    let mode = a.next().unwrap_or_else(|| "rx".into());
    let size: usize = a.next().map(|s| s.parse().expect("size")).unwrap_or(64);
    let secs: f64 = a.next().map(|s| s.parse().expect("secs")).unwrap_or(2.0);
    let g = GeneratorConfig {
        sizes: SizeSpec::Fixed(size),
        verify: VerifyLevel::Sequence,
        paused: true,
        ..Default::default()
    };
    let mut cfg = DeviceConfig::new(
        format!("rate-{}", std::process::id()),
        WireConfig::Generator(g),
    );
    cfg.notif_ring_entries = 4096;
    let nic = Nic::start(
        cfg,
        RunOptions {
            core: Some(0),
            idle_sleep_after: None,
            ..Default::default()
        },
    )
    .expect("nic");
    let mut dev = Device::attach_nic(
        &nic,
        DeviceOptions {
            pipes: 1,
            ..Default::default()
        },
    )
    .expect("attach");
    let p = dev.alloc_rxtx_pipe(true).expect("pipe");
    core_pin(1);
    nic.with_engine(|e| e.set_generators_paused(false));
    let start = Instant::now();
    let mut pkts = 0u64;
    let mut sum = 0u64;
    while start.elapsed() < Duration::from_secs_f64(secs) {
        for _ in 0..1000 {
            let n = {
                let mut b = dev.recv(p).expect("recv");
                for pkt in b.packets_mut() {
                    sum = sum.wrapping_add(pkt[50] as u64);
                    pkt[58] = pkt[58].wrapping_add(1);
                    pkts += 1;
                }
                b.len()
            };
            if n > 0 {
                if mode == "echo" {
                    dev.send_and_free(p, n).expect("send");
                } else {
                    dev.free(p, n).expect("free");
                }
            }
        }
    }
    let el = start.elapsed().as_secs_f64();
    drop(dev);
    let s = nic.stop();
    let g = s.generator(0).unwrap();
    println!(
        "{mode} {size}B: app {:.2} Mpps; generator sent {:.2} Mpps, returned {:.2} Mpps; drops {:?}; engine busy {:.0}%; notifications/pkt {:.4} (sum {sum})",
        pkts as f64 / el / 1e6,
        g.sent as f64 / el / 1e6,
        g.returned as f64 / el / 1e6,
        s.drops(),
        100.0 * s.engine.busy_ns as f64 / (el * 1e9),
        s.pipe_sum(|c| c.notifications) as f64 / pkts.max(1) as f64
    );
}

fn core_pin(core: usize) {
    // SAFETY: zeroed cpu_set_t is an empty set; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}
