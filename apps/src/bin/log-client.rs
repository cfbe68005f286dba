//! `log-client`: sends a log as consecutive UDP payloads through an Ensō TX
//! pipe out of `--port` of a running `nic-emu` device (cable it to the
//! port `logmon` serves). The log is a file, or a seeded synthetic one;
//! lines are cut wherever a payload ends. A sink sends nothing back, so
//! the rate is set with the NIC's rate limiter (`--gbps`); without it the
//! client sends as fast as its TX pipe drains and the monitor's pipe or
//! ring may overflow (the NIC counts those drops).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use enso::DeviceOptions;
use enso_apps::cli::{self, CliResult, ConnectArgs};
use enso_apps::load::{LogSource, PipeClient};
use enso_apps::logmon::generate_log;

#[derive(Parser)]
#[command(
    name = "log-client",
    about = "Sends a log over UDP through an Ensō TX pipe"
)]
struct Args {
    #[command(flatten)]
    connect: ConnectArgs,
    /// Log file to send (default: a synthetic log).
    #[arg(long)]
    file: Option<PathBuf>,
    /// Bytes of synthetic log.
    #[arg(long, default_value_t = 16 << 20, conflicts_with = "file")]
    bytes: usize,
    /// Seed of the synthetic log.
    #[arg(long, default_value_t = 1, conflicts_with = "file")]
    seed: u64,
    /// UDP payload bytes per packet.
    #[arg(long, default_value_t = 1024)]
    payload: usize,
    /// Send the log this many times (0: until stopped).
    #[arg(long, default_value_t = 1)]
    passes: u64,
    /// Rate limit on the port, Gb/s of frames (the NIC's limiter, in
    /// steps of 0.0001024 Gb/s), cleared when the client exits; without it
    /// the port's setting is left as it is.
    #[arg(long, allow_negative_numbers = true)]
    gbps: Option<f64>,
}

/// Most bytes of synthetic log (it is generated in memory).
const MAX_BYTES: usize = 1 << 30;
/// Highest --gbps.
const MAX_GBPS: f64 = 400.0;
/// The limiter's setting is `num` flits of 64 B every `den` cycles of
/// 200 MHz: 64 B x 8 x 200e6 x num / den = 102.4 Gb/s x num / den.
const LIMITER_GBPS: f64 = 102.4;
/// The `den` used: rates are multiples of 102.4 Gb/s / LIMITER_DEN.
const LIMITER_DEN: u32 = 1_000_000;
/// Lowest --gbps: one flit every LIMITER_DEN cycles.
const MIN_GBPS: f64 = LIMITER_GBPS / LIMITER_DEN as f64;

/// The limiter setting `(num, den)` for `gbps`, which must be one the
/// limiter can express (and at most [`MAX_GBPS`]).
fn rate_limit(gbps: f64) -> CliResult<(u32, u32)> {
    // NaN fails the range test too; the lower end allows for the rounding
    // of MIN_GBPS itself (102.4 / 1e6 is not exact in binary).
    if !(MIN_GBPS * (1.0 - 1e-9)..=MAX_GBPS).contains(&gbps) {
        return Err(format!(
            "--gbps must be in {MIN_GBPS:.7}..={MAX_GBPS} (the limiter's steps are \
             1/{LIMITER_DEN} of {LIMITER_GBPS} Gb/s), not {gbps}"
        )
        .into());
    }
    let num = ((gbps / LIMITER_GBPS) * f64::from(LIMITER_DEN)).round() as u32;
    Ok((num.max(1), LIMITER_DEN))
}

impl Args {
    /// Checks the values clap cannot, before anything is read or attached.
    fn check(&self) -> CliResult<Option<(u32, u32)>> {
        self.connect.check()?;
        cli::in_range("--payload", self.payload, 1..=LogSource::MAX_PAYLOAD)?;
        if self.file.is_none() {
            cli::in_range("--bytes", self.bytes, 1..=MAX_BYTES)?;
        }
        self.gbps.map(rate_limit).transpose()
    }
}

fn main() -> std::process::ExitCode {
    cli::main_with("log-client", || run(cli::parse_or_exit("log-client")))
}

fn run(a: Args) -> CliResult<()> {
    let limit = a.check()?;
    let text = match &a.file {
        Some(p) => read_log(p, MAX_BYTES as u64).map_err(|e| format!("{}: {e}", p.display()))?,
        None => generate_log(a.seed, a.bytes),
    };
    if text.is_empty() {
        return Err(match &a.file {
            Some(p) => format!("{}: the log is empty", p.display()),
            None => "the log is empty".to_string(),
        }
        .into());
    }
    a.connect.pin("log-client");
    let dev = a.connect.open(DeviceOptions {
        pipes: 0,
        tx_pipes: 1,
        ..Default::default()
    })?;
    let port = a.connect.port;
    // Said as attaching would, before a rate limit is refused as a bad
    // value for a port that does not exist.
    if port as usize >= dev.info().ports {
        return Err(format!("no port {port}").into());
    }
    // From here on Ctrl-C ends the run rather than the process: a limit
    // set below must be cleared, and what was sent reported.
    let stop = cli::stop_on_interrupt();
    // Only with --gbps: without it the port's setting (another tool's, an
    // operator's) is left alone. The limit is set and cleared through an
    // attachment of its own: a setting reaches the NIC through the TX
    // notification ring, behind whatever was queued there before it, and
    // behind a backlog sent at a low rate a clear would arrive only after
    // this client had detached (so never, and the port would stay
    // limited for whatever runs next).
    let mut ctl = match limit {
        Some(l) => {
            let mut d = a.connect.open(DeviceOptions {
                pipes: 0,
                tx_pipes: 0,
                ..Default::default()
            })?;
            apply_limit(&mut d, port, Some(l))
                .map_err(|e| format!("setting the rate limit of port {port}: {e}"))?;
            Some(d)
        }
        None => None,
    };
    let mut c = PipeClient::new(dev, port, false)?;
    // The limit belongs to the port, not to this client: leave it
    // unlimited for whatever runs next, even after a failed send. Cleared
    // before the last sends are waited for, which then go at line rate.
    let mut cleared = None;
    let sent = send(&a, &mut c, text, &stop, || {
        cleared = Some(clear_limit(&mut ctl, port));
    });
    let cleared = cleared.unwrap_or_else(|| clear_limit(&mut ctl, port));
    sent?;
    cleared
}

/// Longest wait for the NIC to apply a rate limit setting, beyond the
/// emulated interconnect's latency there and back.
const LIMIT_TIMEOUT: Duration = Duration::from_secs(2);

/// Sets `limit` on `port` through `ctl` (an attachment that sends nothing
/// else) and waits until the NIC has applied it.
fn apply_limit(ctl: &mut enso::Device, port: u32, limit: Option<(u32, u32)>) -> CliResult<()> {
    ctl.set_rate_limit(port, limit)?;
    let timeout = LIMIT_TIMEOUT + 2 * Duration::from_nanos(ctl.info().interconnect_latency_ns);
    let t = Instant::now();
    while ctl.tx_in_flight() > 0 {
        ctl.reap_completions()?;
        ctl.check_alive()?;
        if t.elapsed() > timeout {
            return Err(format!(
                "the NIC did not take the setting within {:.1} s",
                timeout.as_secs_f64()
            )
            .into());
        }
        std::hint::spin_loop();
    }
    Ok(())
}

/// Clears the rate limit of `port` through `ctl`, if a limit was set.
fn clear_limit(ctl: &mut Option<enso::Device>, port: u32) -> CliResult<()> {
    match ctl {
        Some(d) => apply_limit(d, port, None)
            .map_err(|e| format!("clearing the rate limit of port {port}: {e}").into()),
        None => Ok(()),
    }
}

/// Reads the log file `p`, of at most `max` bytes. Only a regular file:
/// a device or FIFO (`/dev/zero`, `/dev/stdin`) may never end, and the log
/// is held in memory whole.
fn read_log(p: &std::path::Path, max: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let f = std::fs::File::open(p).map_err(|e| e.to_string())?;
    let meta = f.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file (--file takes a log file)".into());
    }
    let too_long = |n: String| format!("{n} bytes; a log may have at most {max} bytes");
    if meta.len() > max {
        return Err(too_long(meta.len().to_string()));
    }
    // The file may grow while it is read: read one byte past the bound.
    let mut text = Vec::with_capacity(meta.len() as usize);
    f.take(max + 1)
        .read_to_end(&mut text)
        .map_err(|e| e.to_string())?;
    if text.len() as u64 > max {
        return Err(too_long(format!("more than {max}")));
    }
    Ok(text)
}

/// Sends the log as `a` asks (until `stop` is set, if sooner), calls
/// `ended` once the last frame is queued, waits for the sends to complete
/// and prints what was sent.
fn send(
    a: &Args,
    c: &mut PipeClient,
    text: Vec<u8>,
    stop: &AtomicBool,
    ended: impl FnOnce(),
) -> CliResult<()> {
    let len = text.len() as u64;
    let mut src = LogSource::new(text, a.payload, a.passes != 1);
    let until = a.connect.duration_s.map(Duration::from_secs_f64);
    let every = (a.connect.progress_s > 0.0).then(|| Duration::from_secs_f64(a.connect.progress_s));
    let start = Instant::now();
    let (mut last, mut last_bytes) = (Instant::now(), 0u64);
    let mut last_check = Instant::now();
    let mut interrupted = false;
    loop {
        // A send takes up to 64 frames: with a log of fewer, a check between
        // sends would let one send carry several passes past --passes.
        let sent = c.send_with(64, |b| {
            if a.passes > 1 && src.passes >= a.passes {
                return Ok(None);
            }
            src.next_frame(b)
        })?;
        let all_sent = src.finished() || (a.passes > 1 && src.passes >= a.passes);
        if sent == 0 && all_sent && c.dev.tx_in_flight() == 0 {
            break;
        }
        let now = Instant::now();
        // A device that is gone completes nothing: sends would find the
        // TX pipe full forever (or until --duration-s, then end as if all
        // was well).
        if now - last_check >= cli::ALIVE_CHECK {
            c.dev.check_alive()?;
            last_check = now;
            if stop.load(Ordering::Relaxed) {
                interrupted = true;
                break;
            }
        }
        if until.is_some_and(|s| now - start >= s) {
            break;
        }
        if every.is_some_and(|e| now - last >= e) {
            eprintln!(
                "log-client: {:.3} Gb/s of log, {} packets, {} passes",
                (src.bytes - last_bytes) as f64 * 8.0 / (now - last).as_secs_f64() / 1e9,
                c.sent_frames,
                src.passes
            );
            (last, last_bytes) = (now, src.bytes);
        }
    }
    ended();
    // Let the last sends complete before detaching.
    let t = Instant::now();
    while c.dev.tx_in_flight() > 0 && t.elapsed() < Duration::from_secs(2) {
        c.dev.reap_completions()?;
        c.dev.check_alive()?;
    }
    let secs = start.elapsed().as_secs_f64();
    if a.connect.json {
        let out = serde_json::json!({
            "app": "log-client",
            "seconds": secs,
            "packets": c.sent_frames,
            "log_bytes": src.bytes,
            "passes": src.passes,
            "log_gbps": src.bytes as f64 * 8.0 / secs / 1e9,
            "interrupted": interrupted,
        });
        println!("{out}");
    } else {
        println!(
            "log-client: {} packets, {} bytes of log ({} passes of {len} B) in {:.2} s, {:.3} Gb/s{}",
            c.sent_frames,
            src.bytes,
            src.passes,
            secs,
            src.bytes as f64 * 8.0 / secs / 1e9,
            if interrupted { " (interrupted)" } else { "" }
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(args: &[&str]) -> Result<Option<(u32, u32)>, String> {
        let a = Args::try_parse_from(std::iter::once("log-client").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        a.check().map_err(|e| e.to_string())
    }

    #[test]
    fn bytes_payload_and_rate_are_bounded() {
        assert_eq!(check(&[]), Ok(None));
        assert_eq!(check(&["--bytes", "1", "--payload", "1"]), Ok(None));
        let max = LogSource::MAX_PAYLOAD.to_string();
        assert_eq!(
            check(&["--bytes", "1073741824", "--payload", &max]),
            Ok(None)
        );
        for b in ["0", "1073741825", "100000000000", "18446744073709551615"] {
            assert_eq!(
                check(&["--bytes", b]),
                Err(format!("--bytes must be in 1..=1073741824, not {b}"))
            );
        }
        let above = (LogSource::MAX_PAYLOAD + 1).to_string();
        for p in ["0", &above, "18446744073709551615"] {
            assert_eq!(
                check(&["--payload", p]),
                Err(format!("--payload must be in 1..={max}, not {p}"))
            );
        }
        // --bytes and --seed describe the synthetic log.
        for flag in ["--bytes", "--seed"] {
            let e = check(&["--file", "/dev/null", flag, "5"]).unwrap_err();
            assert!(e.contains("cannot be used with"), "{e}");
        }
    }

    #[test]
    fn only_regular_files_of_bounded_size_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        std::fs::write(&log, b"line one\nline two\n").unwrap();
        assert_eq!(read_log(&log, 100).unwrap(), b"line one\nline two\n");
        assert_eq!(
            read_log(&log, 10).unwrap_err(),
            "18 bytes; a log may have at most 10 bytes"
        );
        for p in ["/dev/zero", "/dev/null"] {
            assert_eq!(
                read_log(std::path::Path::new(p), 100).unwrap_err(),
                "not a regular file (--file takes a log file)"
            );
        }
        assert_eq!(
            read_log(dir.path(), 100).unwrap_err(),
            "not a regular file (--file takes a log file)"
        );
        assert!(read_log(&dir.path().join("none"), 100).is_err());
    }

    #[test]
    fn rates_the_limiter_cannot_express_are_refused() {
        assert_eq!(
            check(&["--gbps", "102.4"]),
            Ok(Some((1_000_000, 1_000_000)))
        );
        assert_eq!(check(&["--gbps", "10"]), Ok(Some((97_656, 1_000_000))));
        assert_eq!(check(&["--gbps", "0.0001024"]), Ok(Some((1, 1_000_000))));
        assert_eq!(check(&["--gbps", "0.001"]), Ok(Some((10, 1_000_000))));
        assert_eq!(check(&["--gbps", "400"]), Ok(Some((3_906_250, 1_000_000))));
        for g in ["0.000001", "0.0001", "0", "-5", "400.5", "NaN", "inf"] {
            let e = check(&["--gbps", g]).unwrap_err();
            assert!(
                e.starts_with("--gbps must be in 0.0001024..=400 (the limiter's steps are 1/1000000 of 102.4 Gb/s), not "),
                "{g}: {e}"
            );
        }
    }
}
