//! A device under test in this process: an emulated NIC whose port 0 is
//! cabled to port 1, and an echo server on port 1 that increments the echo
//! byte of test frames and sends every frame back. The generator then works
//! on port 0 with nothing else running on the machine.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use enso::{Device, DeviceOptions, DriverStats, EnsoDriver, Verdict};
use nic_emu::testframe::TestFrames;
use nic_emu::{DeviceConfig, Nic, RunOptions, WireConfig};

/// The port the generator uses.
pub const GENERATOR_PORT: u32 = 0;
/// The port the echo server serves.
pub const ECHO_PORT: u32 = 1;

static NEXT: AtomicU64 = AtomicU64::new(0);

/// How to build the in-process device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InProcessOptions {
    /// RX/TX pipes of the echo server; 0 runs no echo server (frames sent
    /// on port 0 then arrive at port 1 and are dropped, counted as
    /// `no_match`).
    pub echo_pipes: u32,
    /// Propagation delay of the cable, each way, ns.
    pub delay_ns: u64,
    /// Bytes per pipe (a power of two of at least 4096).
    pub pipe_size: usize,
    /// Rate limit of what the echo server sends back (`num` flits every
    /// `den` cycles of 200 MHz): a device under test of known capacity.
    pub echo_rate_limit: Option<(u32, u32)>,
}

impl Default for InProcessOptions {
    fn default() -> Self {
        Self {
            echo_pipes: 4,
            delay_ns: 0,
            pipe_size: 2 << 20,
            echo_rate_limit: None,
        }
    }
}

/// The running device and echo server; stopped when dropped.
#[derive(Debug)]
pub struct InProcessNic {
    nic: Option<Nic>,
    echo: Option<JoinHandle<Result<DriverStats, String>>>,
    stop: Arc<AtomicBool>,
}

/// Where device directories go: `/dev/shm` if there is one.
fn device_root() -> PathBuf {
    let shm = PathBuf::from("/dev/shm");
    if shm.is_dir() {
        shm
    } else {
        std::env::temp_dir()
    }
}

/// Increments the echo byte of test frames (as the echo application does)
/// and forwards every frame.
pub fn echo_frame(frame: &mut [u8]) -> Verdict {
    if let Some(v) = TestFrames::peek(frame) {
        if let Some(b) = frame.get_mut(v.kind.echo_offset()) {
            *b = b.wrapping_add(1);
        }
    }
    Verdict::Forward
}

impl InProcessNic {
    /// Starts the device and, unless `echo_pipes` is 0, the echo server,
    /// ready for traffic.
    pub fn start(o: &InProcessOptions) -> Result<Self, String> {
        let name = format!(
            "pktgen-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let cable = |peer| WireConfig::Cable {
            peer,
            delay_ns: o.delay_ns,
        };
        let mut cfg = DeviceConfig::new(name, cable(1));
        cfg.ports.push(cable(0));
        cfg.dir = device_root();
        cfg.pipe_size = o.pipe_size;
        let nic = Nic::start(cfg, RunOptions::default())?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut me = Self {
            nic: Some(nic),
            echo: None,
            stop: stop.clone(),
        };
        if o.echo_pipes > 0 {
            let driver = me.echo_driver(o).map_err(|e| format!("echo server: {e}"))?;
            let h = std::thread::Builder::new()
                .name("pktgen-echo".into())
                .spawn(move || echo_loop(driver, &stop))
                .map_err(|e| format!("echo server: {e}"))?;
            me.echo = Some(h);
        }
        Ok(me)
    }

    fn echo_driver(&self, o: &InProcessOptions) -> Result<EnsoDriver, Box<dyn std::error::Error>> {
        let dev = Device::attach_nic(
            self.nic(),
            DeviceOptions {
                pipes: o.echo_pipes,
                tx_pipes: 0,
                ..DeviceOptions::default()
            },
        )?;
        let mut d = EnsoDriver::new(dev);
        d.add_fallback_pipes_on(ECHO_PORT, o.echo_pipes)?;
        if let Some(l) = o.echo_rate_limit {
            d.dev.set_rate_limit(ECHO_PORT, Some(l))?;
        }
        // Ready once the NIC has applied the pipes and the limit.
        let start = Instant::now();
        loop {
            d.dev.reap_completions()?;
            if d.dev.tx_in_flight() == 0 {
                break;
            }
            if start.elapsed() > Duration::from_secs(5) {
                return Err("the device did not set up the echo server's pipes".into());
            }
            std::thread::yield_now();
        }
        Ok(d)
    }

    /// The device.
    pub fn nic(&self) -> &Nic {
        self.nic
            .as_ref()
            .unwrap_or_else(|| unreachable!("set until drop"))
    }

    /// Stops the echo server and the device; returns what the echo server
    /// counted, or why it failed.
    pub fn stop(mut self) -> Result<Option<DriverStats>, String> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<Option<DriverStats>, String> {
        self.stop.store(true, Ordering::Relaxed);
        let r = match self.echo.take() {
            Some(h) => h
                .join()
                .map_err(|_| "echo server failed unexpectedly".to_string())?
                .map(Some),
            None => Ok(None),
        };
        if let Some(n) = self.nic.take() {
            n.stop();
        }
        r
    }
}

impl Drop for InProcessNic {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

fn echo_loop(mut d: EnsoDriver, stop: &AtomicBool) -> Result<DriverStats, String> {
    let mut h = echo_frame;
    let mut idle = 0u32;
    let mut polls = 0u32;
    loop {
        let n = d.poll(&mut h).map_err(|e| format!("echo server: {e}"))?;
        polls = polls.wrapping_add(1);
        if polls.is_multiple_of(256) && stop.load(Ordering::Relaxed) {
            return Ok(d.stats.clone());
        }
        if n > 0 {
            idle = 0;
        } else {
            idle += 1;
            if idle.is_multiple_of(64) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nic_emu::testframe::FrameKind;

    #[test]
    fn echo_increments_test_frames_only() {
        let tf = TestFrames::new(1, 0);
        let mut f = [0u8; 128];
        let n = tf.build(FrameKind::Ipv4Udp, 7, 0, 100, &mut f);
        let before = f;
        assert_eq!(echo_frame(&mut f[..n]), Verdict::Forward);
        let e = FrameKind::Ipv4Udp.echo_offset();
        assert_eq!(f[e], before[e].wrapping_add(1));
        assert_eq!(f[..e], before[..e]);
        let mut other = [0xabu8; 64];
        echo_frame(&mut other);
        assert_eq!(other, [0xab; 64]);
    }
}
