//! What the application binaries share: the flags that attach to a running
//! `nic-emu` device, opening it for either interface, and the serving loop
//! with progress lines and busy-time accounting.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use enso::app::DriverError;
use enso::{Device, DeviceOptions};

use crate::nic::{AppDriver, Interface};

/// How to reach the device and how long to run.
#[derive(clap::Args, Clone, Debug)]
pub struct ConnectArgs {
    /// Device to attach to (a running `nic-emu run --name NAME`).
    #[arg(long, default_value = "enso0")]
    pub device: String,
    /// Directory holding the device directory.
    #[arg(long, default_value = "/dev/shm")]
    pub dir: PathBuf,
    /// Port to receive from and send on.
    #[arg(long, default_value_t = 0)]
    pub port: u32,
    /// Core to pin this process's thread to.
    #[arg(long)]
    pub core: Option<usize>,
    /// Stop after this many seconds (default: run until killed).
    #[arg(long)]
    pub duration_s: Option<f64>,
    /// Seconds between progress lines on stderr (0: none).
    #[arg(long, default_value_t = 1.0)]
    pub progress_s: f64,
    /// Print the final counters as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// [`ConnectArgs`] plus the interface and how many pipes or queues to
/// serve.
#[derive(clap::Args, Clone, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub connect: ConnectArgs,
    /// NIC interface: Ensō pipes or descriptor queues.
    #[arg(long, value_enum, default_value_t = Interface::Enso)]
    pub interface: Interface,
    /// Pipes (Ensō) or queues (packetized) to serve; traffic is spread
    /// over them by flow hash.
    #[arg(long, visible_alias = "queues", default_value_t = 1)]
    pub pipes: u32,
    /// Frames per `rx_burst` (packetized).
    #[arg(long, default_value_t = 32)]
    pub burst: usize,
    /// Descriptor ring entries (packetized; a power of two).
    #[arg(long, default_value_t = 1024)]
    pub ring: u32,
}

/// A command-line error: one line, exit status 1.
pub type CliResult<T> = Result<T, Box<dyn std::error::Error>>;

impl ConnectArgs {
    /// Checks the values clap cannot.
    pub fn check(&self) -> CliResult<()> {
        if let Some(d) = self.duration_s {
            if !(d.is_finite() && d > 0.0) {
                return Err(
                    format!("--duration-s must be a positive number of seconds, not {d}").into(),
                );
            }
        }
        if !(self.progress_s.is_finite() && self.progress_s >= 0.0) {
            return Err(format!("--progress-s must be 0 or more, not {}", self.progress_s).into());
        }
        Ok(())
    }

    /// Pins the calling thread to `--core`, if given.
    pub fn pin(&self, who: &str) {
        if let Some(c) = self.core {
            if !core_affinity::set_for_current(core_affinity::CoreId { id: c }) {
                eprintln!("{who}: could not pin to core {c}; running unpinned");
            }
        }
    }

    /// Attaches to the device with `opts`.
    pub fn open(&self, opts: DeviceOptions) -> CliResult<Device> {
        Device::open_in(&self.dir, &self.device, opts).map_err(|e| {
            format!(
                "cannot attach to device '{}' in {}: {e} (is `nic-emu run --name {}` running?)",
                self.device,
                self.dir.display(),
                self.device
            )
            .into()
        })
    }
}

impl ServeArgs {
    /// Checks the values clap cannot.
    pub fn check(&self) -> CliResult<()> {
        self.connect.check()?;
        if self.pipes == 0 {
            return Err("--pipes must be at least 1".into());
        }
        if self.burst == 0 {
            return Err("--burst must be at least 1".into());
        }
        if self.interface == Interface::Packetized
            && (!self.ring.is_power_of_two() || !(64..=65536).contains(&self.ring))
        {
            return Err(format!(
                "--ring must be a power of two in 64..=65536, not {}",
                self.ring
            )
            .into());
        }
        Ok(())
    }

    /// Device options for the interface: `pipes` pipes (and `tx_pipes` TX
    /// pipes) on Ensō, `pipes` queue pairs with their buffer pool on the
    /// packetized interface.
    pub fn device_options(&self, tx_pipes: u32) -> DeviceOptions {
        match self.interface {
            Interface::Enso => DeviceOptions {
                pipes: self.pipes,
                tx_pipes,
                ..Default::default()
            },
            Interface::Packetized => DeviceOptions {
                pipes: 0,
                tx_pipes: 0,
                queues: self.pipes,
                rx_ring: self.ring,
                tx_ring: self.ring,
                pool_buffers: self.pipes * self.ring * 2 + 1024,
                ..Default::default()
            },
        }
    }
}

/// What a serving loop did.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Served {
    /// Seconds it ran.
    pub seconds: f64,
    /// Frames the driver handled.
    pub frames: u64,
    /// Frames per second (millions).
    pub mpps: f64,
    /// Bytes the driver handled (frames; payload bytes for stream pipes).
    pub bytes: u64,
    /// Those bytes in Gb/s.
    pub gbps: f64,
    /// Time spent in polls that found work, per frame (ns).
    pub busy_ns_per_frame: f64,
}

/// Polls `d` with `h` until `--duration-s` has passed (or forever), with a
/// progress line every `--progress-s` on stderr (`extra` adds to it) and
/// `tick` called about every 10 ms (e.g. for periodic reports).
pub fn serve<D: AppDriver<H>, H>(
    who: &str,
    a: &ConnectArgs,
    d: &mut D,
    h: &mut H,
    mut extra: impl FnMut(&H) -> String,
    mut tick: impl FnMut(&mut H),
) -> Result<Served, DriverError> {
    let start = Instant::now();
    let stop = a.duration_s.map(Duration::from_secs_f64);
    let every = (a.progress_s > 0.0).then(|| Duration::from_secs_f64(a.progress_s));
    let (mut last, mut last_frames, mut last_bytes) = (Instant::now(), 0u64, 0u64);
    let mut last_tick = Instant::now();
    let mut busy = Duration::ZERO;
    loop {
        let t = Instant::now();
        let mut n = 0;
        for _ in 0..64 {
            n += d.poll(h)?;
        }
        let now = Instant::now();
        if n > 0 {
            busy += now - t;
        }
        if now - last_tick >= Duration::from_millis(10) {
            tick(h);
            last_tick = now;
            if stop.is_some_and(|s| now - start >= s) {
                break;
            }
            if every.is_some_and(|e| now - last >= e) {
                let (frames, bytes) = (d.stats().frames, d.stats().bytes);
                let dt = (now - last).as_secs_f64();
                eprintln!(
                    "{who}: {:.3} Mpps, {:.3} Gb/s, {} frames, {} dropped{}",
                    (frames - last_frames) as f64 / dt / 1e6,
                    (bytes - last_bytes) as f64 * 8.0 / dt / 1e9,
                    frames,
                    d.stats().dropped,
                    extra(h)
                );
                (last, last_frames, last_bytes) = (now, frames, bytes);
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let (frames, bytes) = (d.stats().frames, d.stats().bytes);
    Ok(Served {
        seconds,
        frames,
        mpps: frames as f64 / seconds / 1e6,
        bytes,
        gbps: bytes as f64 * 8.0 / seconds / 1e9,
        busy_ns_per_frame: busy.as_nanos() as f64 / frames.max(1) as f64,
    })
}

/// Runs `f` and turns an error into one line on stderr and exit status 1.
pub fn main_with(who: &str, f: impl FnOnce() -> CliResult<()>) -> std::process::ExitCode {
    match f() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{who}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
