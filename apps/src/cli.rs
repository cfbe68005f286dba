//! What the application binaries share: the flags that attach to a running
//! `nic-emu` device, opening it for either interface, and the serving loop
//! with progress lines and busy-time accounting.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use enso::app::DriverError;
use enso::{Device, DeviceOptions};

use crate::nic::{AppDriver, Interface};

use cli_common::{args, cores};

pub use args::{parse_or_exit, stop_on_interrupt, SecondsError, MAX_SECONDS};
pub use cores::{core_list, pin_current, usable_cores, CPU_SET_SIZE};

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
    // Negative values reach `check`, which says what is wrong with them.
    #[arg(long, allow_negative_numbers = true)]
    pub duration_s: Option<f64>,
    /// Seconds between progress lines on stderr (0: none).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub progress_s: f64,
    /// Print the final counters as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Without traffic: `park` sleeps after 500 us until the NIC has
    /// something for this server (`Device::wait`); `spin` keeps polling
    /// (a core busy even when idle, a few microseconds less latency for
    /// the first frame after a pause).
    #[arg(long, value_enum, default_value_t = Idle::Park)]
    pub idle: Idle,
}

/// What a server does without traffic.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Idle {
    /// Keep polling.
    Spin,
    /// Sleep until the NIC wakes it.
    Park,
}

/// How long a serving loop polls without finding work before it parks
/// (`--idle park`): the library's threshold.
pub use enso::PARK_AFTER;

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
    /// Frames per `rx_burst` (packetized only; 1..=65536) [default: 32].
    #[arg(long)]
    pub burst: Option<usize>,
    /// Descriptor ring entries (packetized only; a power of two in
    /// 64..=65536) [default: 1024].
    #[arg(long)]
    pub ring: Option<u32>,
}

/// The addresses a server answers for on its port's link (echo, KV and
/// Maglev's virtual address).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct HostArgs {
    /// An IPv4 or IPv6 address of this server (repeatable, or
    /// comma-separated). The server then answers ARP requests, neighbour
    /// solicitations and pings for it with the port's MAC, and drops (and
    /// counts) frames addressed to other hosts. Without it, every frame
    /// reaches the application.
    #[arg(long = "ip", value_name = "ADDR", value_delimiter = ',')]
    pub ip: Vec<std::net::IpAddr>,
}

impl HostArgs {
    /// The host of port `port` of the device `dev` is attached to: its MAC
    /// is the one the NIC and its peers agree on
    /// (`enso_abi::devname::port_mac`).
    pub fn host(&self, dev: &Device, port: u32) -> crate::net::host::Host {
        crate::net::host::Host::new(port_mac(dev, port), &self.ip)
    }
}

/// The MAC of port `port` of the device `dev` is attached to.
pub fn port_mac(dev: &Device, port: u32) -> crate::net::ethernet::MacAddr {
    crate::net::ethernet::MacAddr(enso_abi::devname::port_mac(
        &dev.info().device,
        port as usize,
    ))
}

/// What the host did, for a summary line (nothing for a server without
/// `--ip`).
pub fn host_text(h: &crate::net::host::HostStats) -> String {
    if h.answered() + h.dropped() == 0 {
        return String::new();
    }
    format!(
        "; host: {} ARP, {} ND, {} ICMP, {} ICMPv6 answered, {} not for us, {} ignored, {} malformed",
        h.arp_replies,
        h.nd_replies,
        h.icmp_echo_replies,
        h.icmpv6_echo_replies,
        h.not_for_us,
        h.ignored,
        h.malformed
    )
}

/// Default of [`ServeArgs::burst`].
pub const DEFAULT_BURST: usize = 32;
/// Default of [`ServeArgs::ring`].
pub const DEFAULT_RING: u32 = 1024;

/// A command-line error: one line, exit status 1.
pub type CliResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Checks the value `v` of the seconds flag `flag`: at most
/// [`MAX_SECONDS`], and above zero (or zero too, if `zero_ok`). NaN and
/// infinities are refused.
pub fn seconds(flag: &str, v: f64, zero_ok: bool) -> CliResult<Duration> {
    Ok(args::seconds(flag, v, zero_ok)?)
}

/// Checks the value `v` of the flag `flag`: within `range`.
pub fn in_range<T>(flag: &str, v: T, range: std::ops::RangeInclusive<T>) -> CliResult<T>
where
    T: PartialOrd + std::fmt::Display + Copy,
{
    // NaN is in no range.
    if !range.contains(&v) {
        return Err(format!(
            "{flag} must be in {}..={}, not {v}",
            range.start(),
            range.end()
        )
        .into());
    }
    Ok(v)
}

/// Checks `--pipes` (alias `--queues`) against the ids the device has:
/// [`enso_abi::layout::MAX_PIPES`] pipes on Ensō,
/// [`enso_abi::layout::MAX_DESC_QUEUES`] descriptor queues on the packetized
/// interface. (A device may refuse fewer, if their memory is above its
/// limit; it then says so.)
pub fn check_pipes(interface: Interface, pipes: u32) -> CliResult<()> {
    let (max, what) = match interface {
        Interface::Enso => (enso_abi::layout::MAX_PIPES, "pipe ids"),
        Interface::Packetized => (enso_abi::layout::MAX_DESC_QUEUES, "descriptor queues"),
    };
    if !(1..=max).contains(&pipes) {
        return Err(format!(
            "--pipes must be in 1..={max} on the {interface} interface (the device's {what}), not {pipes}"
        )
        .into());
    }
    Ok(())
}

/// Checks the core `core` given with `flag`: one of `usable` (from
/// [`usable_cores`]), or, if that list is empty, below [`CPU_SET_SIZE`].
/// Pinning to any other core fails (or, at [`CPU_SET_SIZE`] and above,
/// panics).
pub fn check_core(flag: &str, core: usize, usable: &[usize]) -> CliResult<()> {
    if !cores::can_pin(core, usable) {
        let have = cores::pinnable_list(usable);
        return Err(
            format!("{flag} {core} is not a core this process can run on (cores: {have})").into(),
        );
    }
    Ok(())
}

impl ConnectArgs {
    /// Checks the values clap cannot.
    pub fn check(&self) -> CliResult<()> {
        if let Some(d) = self.duration_s {
            seconds("--duration-s", d, false)?;
        }
        seconds("--progress-s", self.progress_s, true)?;
        if let Some(c) = self.core {
            check_core("--core", c, &usable_cores())?;
        }
        Ok(())
    }

    /// Pins the calling thread to `--core`, if given.
    pub fn pin(&self, who: &str) {
        if let Some(c) = self.core {
            if !pin_current(c) {
                eprintln!("{who}: could not pin to core {c}; running unpinned");
            }
        }
    }

    /// Attaches to the device with `opts`.
    pub fn open(&self, opts: DeviceOptions) -> CliResult<Device> {
        Device::open_in(&self.dir, &self.device, opts).map_err(|e| {
            // Ask whether it runs only if it cannot be reached: a running
            // device that refused says why itself.
            let sock = self
                .dir
                .join(format!("enso-{}", self.device))
                .join(enso_abi::control::CONTROL_SOCKET);
            let hint = if std::os::unix::net::UnixStream::connect(sock).is_err() {
                format!(" (is `nic-emu run --name {}` running?)", self.device)
            } else {
                String::new()
            };
            format!(
                "cannot attach to device '{}' in {}: {e}{hint}",
                self.device,
                self.dir.display(),
            )
            .into()
        })
    }
}

impl ServeArgs {
    /// Checks the values clap cannot.
    pub fn check(&self) -> CliResult<()> {
        self.connect.check()?;
        check_pipes(self.interface, self.pipes)?;
        // Both belong to descriptor rings: given with Ensō pipes they would
        // have no effect.
        if self.interface == Interface::Enso {
            for (flag, given) in [
                ("--burst", self.burst.is_some()),
                ("--ring", self.ring.is_some()),
            ] {
                if given {
                    return Err(format!(
                        "{flag} applies to --interface packetized (descriptor rings), not to Ensō pipes"
                    )
                    .into());
                }
            }
        }
        // A burst is a buffer of that many frame handles: bounded by the
        // largest ring, which it could never fill beyond anyway.
        let burst = self.burst();
        if !(1..=65536).contains(&burst) {
            return Err(format!("--burst must be in 1..=65536, not {burst}").into());
        }
        let ring = self.ring();
        if !ring.is_power_of_two() || !(64..=65536).contains(&ring) {
            return Err(format!("--ring must be a power of two in 64..=65536, not {ring}").into());
        }
        Ok(())
    }

    /// Frames per `rx_burst` on the packetized interface.
    pub fn burst(&self) -> usize {
        self.burst.unwrap_or(DEFAULT_BURST)
    }

    /// Descriptor ring entries on the packetized interface.
    pub fn ring(&self) -> u32 {
        self.ring.unwrap_or(DEFAULT_RING)
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
                rx_ring: self.ring(),
                tx_ring: self.ring(),
                pool_buffers: self.pipes * self.ring() * 2 + 1024,
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
    /// Time spent in polls that found work, per frame (ns); NaN (null in
    /// JSON) when no frames were handled (stream pipes count bytes only).
    pub busy_ns_per_frame: f64,
    /// Whether Ctrl-C (SIGINT) or SIGTERM ended the loop.
    pub interrupted: bool,
}

impl Served {
    /// The busy time per frame for a summary line: `12.3 ns/frame busy`,
    /// or `no frames` when none were handled.
    pub fn busy_text(&self) -> String {
        if self.busy_ns_per_frame.is_finite() {
            format!("{:.1} ns/frame busy", self.busy_ns_per_frame)
        } else {
            "no frames".to_string()
        }
    }
}

/// Set once SIGINT or SIGTERM arrives: the serving loop then ends and the
/// server prints its report (a second signal exits at once, status 130).
/// The handlers are installed by the first call.
fn interrupt_flag() -> &'static std::sync::atomic::AtomicBool {
    static FLAG: std::sync::OnceLock<std::sync::Arc<std::sync::atomic::AtomicBool>> =
        std::sync::OnceLock::new();
    FLAG.get_or_init(stop_on_interrupt)
}

/// How often the serving loop and the clients check that their device is
/// still there ([`enso::Device::check_alive`]): one non-blocking read of
/// the control connection, so a dead device is noticed within ~10 ms.
pub const ALIVE_CHECK: Duration = Duration::from_millis(10);

/// Polls `d` with `h` until `--duration-s` has passed (or forever), with a
/// progress line every `--progress-s` on stderr (`extra` adds to it) and
/// `tick` called about every 10 ms (e.g. for periodic reports). Fails with
/// [`enso::DeviceError::Gone`] once the device has gone (checked about
/// every 10 ms): a device that is gone delivers nothing, and serving on
/// would wait forever or end as if all was well.
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
    let interrupt = interrupt_flag();
    let mut interrupted = false;
    let mut idle_since: Option<Instant> = None;
    loop {
        let t = Instant::now();
        let mut n = 0;
        for _ in 0..64 {
            n += d.poll(h)?;
        }
        let now = Instant::now();
        if n > 0 {
            busy += now - t;
            idle_since = None;
        } else if a.idle == Idle::Park {
            let since = *idle_since.get_or_insert(now);
            if now - since >= PARK_AFTER {
                // Bounded so that the alive check, progress lines and the
                // end of the run still come on time.
                d.device_mut().wait(ALIVE_CHECK)?;
            }
        }
        if now - last_tick >= ALIVE_CHECK {
            d.device().check_alive()?;
            tick(h);
            last_tick = now;
            if stop.is_some_and(|s| now - start >= s) {
                break;
            }
            if interrupt.load(std::sync::atomic::Ordering::Relaxed) {
                eprintln!("{who}: interrupted");
                interrupted = true;
                break;
            }
            if every.is_some_and(|e| now - last >= e) {
                let (frames, bytes) = (d.stats().frames, d.stats().bytes);
                let dt = (now - last).as_secs_f64();
                eprintln!(
                    "{}{}",
                    progress_line(
                        who,
                        (frames, last_frames),
                        (bytes, last_bytes),
                        dt,
                        d.stats().dropped
                    ),
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
        // No frames (a stream pipe, or nothing arrived): no per-frame time
        // (null in JSON), rather than the whole busy time.
        busy_ns_per_frame: if frames > 0 {
            busy.as_nanos() as f64 / frames as f64
        } else {
            f64::NAN
        },
        interrupted,
    })
}

/// A progress line over the last `dt` seconds, given (now, then) frame and
/// byte counts: packet rate, Gb/s, frames and drops, or for a stream pipe
/// (bytes, no frames) Gb/s and bytes.
fn progress_line(
    who: &str,
    frames: (u64, u64),
    bytes: (u64, u64),
    dt: f64,
    dropped: u64,
) -> String {
    let gbps = (bytes.0 - bytes.1) as f64 * 8.0 / dt / 1e9;
    if frames.0 == 0 && bytes.0 > 0 {
        format!("{who}: {gbps:.3} Gb/s, {} bytes", bytes.0)
    } else {
        format!(
            "{who}: {:.3} Mpps, {gbps:.3} Gb/s, {} frames, {dropped} dropped",
            (frames.0 - frames.1) as f64 / dt / 1e6,
            frames.0
        )
    }
}

/// The Ensō pipes a packet server receives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnsoPipes {
    /// RX/TX pipes: frames are sent back in place (echo, Maglev).
    RxTx,
    /// RX pipes only: the server is a sink (telemetry, the log monitor).
    Rx,
}

/// [`serve`] for a packet handler on the interface `s` names: `s.pipes`
/// fallback pipes (`pipes` says which kind) or RSS queues on
/// `--port`, attached through `dev`. Returns what the loop did, the
/// driver's counters and the library's.
pub fn serve_packets<H: enso::app::PacketHandler>(
    who: &str,
    s: &ServeArgs,
    dev: Device,
    pipes: EnsoPipes,
    h: &mut H,
    extra: impl FnMut(&H) -> String,
    tick: impl FnMut(&mut H),
) -> CliResult<(Served, enso::app::DriverStats, enso::DeviceStats)> {
    let port = s.connect.port;
    match s.interface {
        Interface::Enso => {
            let mut d = enso::EnsoDriver::new(dev);
            match pipes {
                EnsoPipes::RxTx => {
                    d.add_fallback_pipes_on(port, s.pipes)?;
                }
                EnsoPipes::Rx => {
                    crate::nic::add_fallback_rx_pipes(&mut d, port, s.pipes)?;
                }
            }
            let r = serve(who, &s.connect, &mut d, h, extra, tick)?;
            Ok((r, d.stats.clone(), d.dev.stats().clone()))
        }
        Interface::Packetized => {
            let mut d = enso::PacketizedDriver::new(dev, s.burst());
            d.add_rss_queues_on(port, s.pipes)?;
            let r = serve(who, &s.connect, &mut d, h, extra, tick)?;
            Ok((r, d.stats.clone(), d.dev.stats().clone()))
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn connect(duration_s: Option<f64>, progress_s: f64) -> ConnectArgs {
        ConnectArgs {
            device: "enso0".into(),
            dir: "/dev/shm".into(),
            port: 0,
            core: None,
            duration_s,
            progress_s,
            json: false,
            idle: Idle::Park,
        }
    }

    fn serve_check(args: &[&str]) -> Result<(), String> {
        #[derive(clap::Parser)]
        struct A {
            #[command(flatten)]
            serve: ServeArgs,
        }
        let a =
            <A as clap::Parser>::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
                .map_err(|e| e.to_string())?;
        a.serve.check().map_err(|e| e.to_string())
    }

    #[test]
    fn summaries_say_no_frames_rather_than_a_time_per_frame_of_none() {
        let mut s = Served {
            busy_ns_per_frame: 12.34,
            ..Default::default()
        };
        assert_eq!(s.busy_text(), "12.3 ns/frame busy");
        s.busy_ns_per_frame = f64::NAN;
        assert_eq!(s.busy_text(), "no frames");
    }

    #[test]
    fn progress_lines_of_streams_count_bytes_not_frames() {
        assert_eq!(
            progress_line("logmon", (0, 0), (2_000_000, 1_000_000), 0.5, 0),
            "logmon: 0.016 Gb/s, 2000000 bytes"
        );
        assert_eq!(
            progress_line(
                "echo",
                (3_000_000, 1_000_000),
                (192_000_000, 64_000_000),
                1.0,
                7
            ),
            "echo: 2.000 Mpps, 1.024 Gb/s, 3000000 frames, 7 dropped"
        );
        assert_eq!(
            progress_line("echo", (0, 0), (0, 0), 1.0, 0),
            "echo: 0.000 Mpps, 0.000 Gb/s, 0 frames, 0 dropped"
        );
    }

    #[test]
    fn ring_and_burst_belong_to_the_packetized_interface() {
        assert_eq!(serve_check(&[]), Ok(()));
        let p = ["--interface", "packetized"];
        assert_eq!(serve_check(&p), Ok(()));
        assert_eq!(
            serve_check(&[&p[..], &["--burst", "1", "--ring", "65536"]].concat()),
            Ok(())
        );
        for (flag, v) in [("--burst", "16"), ("--ring", "128")] {
            assert_eq!(
                serve_check(&[flag, v]),
                Err(format!(
                    "{flag} applies to --interface packetized (descriptor rings), not to Ensō pipes"
                ))
            );
        }
        for b in ["0", "65537"] {
            assert_eq!(
                serve_check(&[&p[..], &["--burst", b]].concat()),
                Err(format!("--burst must be in 1..=65536, not {b}"))
            );
        }
        for r in ["32", "100", "131072"] {
            assert_eq!(
                serve_check(&[&p[..], &["--ring", r]].concat()),
                Err(format!(
                    "--ring must be a power of two in 64..=65536, not {r}"
                ))
            );
        }
    }

    #[test]
    fn seconds_flags_refuse_what_a_duration_cannot_hold() {
        assert_eq!(
            seconds("--x", 1.5, false).unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(seconds("--x", 0.0, true).unwrap(), Duration::ZERO);
        assert_eq!(
            seconds("--x", MAX_SECONDS, false).unwrap(),
            Duration::from_secs(MAX_SECONDS as u64)
        );
        for v in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e300] {
            let e = seconds("--x", v, false).unwrap_err().to_string();
            assert!(e.starts_with("--x must be above 0"), "{v}: {e}");
        }
        for v in [-0.5, f64::NAN, f64::INFINITY, MAX_SECONDS * 2.0] {
            let e = seconds("--x", v, true).unwrap_err().to_string();
            assert!(e.starts_with("--x must be 0 or more"), "{v}: {e}");
        }
    }

    #[test]
    fn ranges_name_the_flag_and_the_bounds() {
        assert_eq!(in_range("--n", 1usize, 1..=4).unwrap(), 1);
        assert_eq!(in_range("--n", 4usize, 1..=4).unwrap(), 4);
        let e = in_range("--n", 0usize, 1..=4).unwrap_err().to_string();
        assert_eq!(e, "--n must be in 1..=4, not 0");
        let e = in_range("--n", usize::MAX, 1..=4).unwrap_err().to_string();
        assert_eq!(e, format!("--n must be in 1..=4, not {}", usize::MAX));
        assert!(in_range("--r", 0.5, 0.0..=1.0).is_ok());
        for v in [-0.1, 1.5, f64::NAN, f64::INFINITY] {
            let e = in_range("--r", v, 0.0..=1.0).unwrap_err().to_string();
            assert!(e.starts_with("--r must be in 0..=1, not "), "{e}");
        }
    }

    #[test]
    fn cores_that_cannot_be_pinned_to_are_refused() {
        assert_eq!(core_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(core_list(&[5]), "5");
        assert_eq!(core_list(&[]), "");
        let usable = [0, 1];
        assert!(check_core("--core", 0, &usable).is_ok());
        assert!(check_core("--core", 1, &usable).is_ok());
        for c in [2, 1023, 1024, 99_999, usize::MAX] {
            let e = check_core("--core", c, &usable).unwrap_err().to_string();
            assert_eq!(
                e,
                format!("--core {c} is not a core this process can run on (cores: 0-1)")
            );
        }
        // A mask that cannot be read: only what libc's CPU set holds.
        assert!(check_core("--x", 1023, &[]).is_ok());
        let e = check_core("--x", 1024, &[]).unwrap_err().to_string();
        assert!(e.ends_with("(cores: 0-1023)"), "{e}");
        // The cores of this process pass, and pinning to one works.
        let mine = usable_cores();
        if let Some(&c) = mine.first() {
            assert!(check_core("--core", c, &mine).is_ok());
        }
        assert!(!pin_current(CPU_SET_SIZE));
        assert!(!pin_current(usize::MAX));
    }

    #[test]
    fn pipes_are_bounded_by_the_ids_the_device_has() {
        for (iface, max, what) in [
            (Interface::Enso, 8192, "pipe ids"),
            (Interface::Packetized, 1024, "descriptor queues"),
        ] {
            assert!(check_pipes(iface, 1).is_ok());
            assert!(check_pipes(iface, max).is_ok());
            for bad in [0, max + 1, 100_000, u32::MAX] {
                assert_eq!(
                    check_pipes(iface, bad).unwrap_err().to_string(),
                    format!(
                        "--pipes must be in 1..={max} on the {iface} interface \
                         (the device's {what}), not {bad}"
                    )
                );
            }
        }
    }

    #[test]
    fn connect_args_check_the_core() {
        let mut a = connect(None, 1.0);
        a.core = Some(99_999);
        let e = a.check().unwrap_err().to_string();
        assert!(e.starts_with("--core 99999 is not a core"), "{e}");
        if let Some(&c) = usable_cores().first() {
            a.core = Some(c);
            assert!(a.check().is_ok());
        }
    }

    #[test]
    fn connect_args_check_both_seconds_flags() {
        assert!(connect(None, 1.0).check().is_ok());
        assert!(connect(Some(2.0), 0.0).check().is_ok());
        for d in [-1.0, f64::NAN, f64::INFINITY, 1e20] {
            let e = connect(Some(d), 1.0).check().unwrap_err().to_string();
            assert!(e.contains("--duration-s"), "{e}");
        }
        for p in [-1.0, f64::NAN, 1e20] {
            let e = connect(None, p).check().unwrap_err().to_string();
            assert!(e.contains("--progress-s"), "{e}");
        }
    }
}
