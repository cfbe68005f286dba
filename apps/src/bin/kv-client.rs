//! `kv-client`: the KV workload (8 B keys and values, Zipf key popularity,
//! a GET/SET mix) sent through an Ensō TX pipe from `--port` of a running
//! `nic-emu` device, in a closed loop of `--window` request frames. Every
//! response is checked; prints the rate and round-trip latency
//! percentiles. The port must be cabled to the server's, e.g.
//! `nic-emu run --name dev0 --port cable:1 --port cable:0`, `kv --device
//! dev0 --port 0`, `kv-client --device dev0 --port 1`. Ctrl-C (or
//! SIGTERM) ends the run and still reports it.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::Parser;
use enso::DeviceOptions;
use enso_apps::cli::{self, CliResult, ConnectArgs};
use enso_apps::kv::WorkloadConfig;
use enso_apps::load::{KvLoadClient, KvLoadConfig, MAX_WINDOW_FRAMES};

#[derive(Parser)]
#[command(name = "kv-client", about = "KV workload generator over Ensō pipes")]
struct Args {
    #[command(flatten)]
    connect: ConnectArgs,
    /// Distinct keys.
    #[arg(long, default_value_t = 1 << 20)]
    keys: u64,
    /// Share of GETs (the paper: 0.95 or 0.5).
    // Negative values reach the workload's check, which says what is wrong.
    #[arg(long, default_value_t = 0.95, allow_negative_numbers = true)]
    get_ratio: f64,
    /// Zipf exponent of key popularity.
    #[arg(long, default_value_t = 0.99, allow_negative_numbers = true)]
    zipf: f64,
    /// Requests per request frame.
    #[arg(long, default_value_t = 4)]
    batch: usize,
    /// Server partitions (request frames go to base port + partition).
    #[arg(long, default_value_t = 1)]
    partitions: u16,
    /// UDP port of partition 0.
    #[arg(long, default_value_t = 9000)]
    server_port: u16,
    /// Request frames in flight at most.
    #[arg(long, default_value_t = 256)]
    window: usize,
    /// Skip setting every key before the workload.
    #[arg(long)]
    no_preload: bool,
    /// Stop after this many request frames (preload included).
    #[arg(long)]
    count: Option<u64>,
    /// Milliseconds without a response after which in-flight frames count
    /// as lost.
    #[arg(long, default_value_t = 200)]
    loss_timeout_ms: u64,
    /// Seed of the request sequence.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn main() -> std::process::ExitCode {
    cli::main_with("kv-client", || run(cli::parse_or_exit("kv-client")))
}

/// Longest --loss-timeout-ms: as long as any seconds flag (cli::MAX_SECONDS).
const MAX_LOSS_TIMEOUT_MS: u64 = cli::MAX_SECONDS as u64 * 1000;

impl Args {
    /// Checks the values clap cannot, before anything is attached.
    fn check(&self) -> CliResult<()> {
        self.connect.check()?;
        cli::in_range("--window", self.window, 1..=MAX_WINDOW_FRAMES)?;
        if self.count == Some(0) {
            return Err("--count must be at least 1 (0 request frames sends nothing)".into());
        }
        cli::in_range(
            "--loss-timeout-ms",
            self.loss_timeout_ms,
            1..=MAX_LOSS_TIMEOUT_MS,
        )?;
        cli::in_range("--partitions", self.partitions, 1..=u16::MAX)?;
        let last = u32::from(self.server_port) + u32::from(self.partitions) - 1;
        if last > u32::from(u16::MAX) {
            return Err(format!(
                "--partitions {} from --server-port {} need UDP ports up to {last}, past 65535",
                self.partitions, self.server_port
            )
            .into());
        }
        Ok(())
    }
}

fn run(a: Args) -> CliResult<()> {
    a.check()?;
    let mut workload = WorkloadConfig {
        keys: a.keys,
        get_ratio: a.get_ratio,
        zipf_theta: a.zipf,
        batch: a.batch,
        partitions: a.partitions,
        seed: a.seed,
        ..Default::default()
    };
    workload.endpoints.dst_port = a.server_port;
    // Checked before attaching: a bad --zipf or --get-ratio is the answer,
    // not a device that is not running.
    enso_apps::kv::KvClient::new(workload)?;
    a.connect.pin("kv-client");
    let dev = a.connect.open(DeviceOptions {
        pipes: 1,
        tx_pipes: 1,
        ..Default::default()
    })?;
    let mut c = KvLoadClient::new(
        dev,
        a.connect.port,
        KvLoadConfig {
            workload,
            window_frames: a.window,
            preload: !a.no_preload,
            loss_timeout: Some(Duration::from_millis(a.loss_timeout_ms)),
            frames: a.count,
            ..Default::default()
        },
    )?;
    // Ctrl-C ends the run, which is then reported as any other.
    let interrupt = cli::stop_on_interrupt();
    let mut interrupted = false;
    let stop = a.connect.duration_s.map(Duration::from_secs_f64);
    let every = (a.connect.progress_s > 0.0).then(|| Duration::from_secs_f64(a.connect.progress_s));
    let start = Instant::now();
    // The rate and latency count from the end of the preload.
    let mut measured_from = (start, 0u64);
    let mut preloading = c.preloading();
    let (mut last, mut last_resp) = (Instant::now(), 0u64);
    let mut last_check = start;
    loop {
        for _ in 0..64 {
            c.poll()?;
        }
        if preloading && !c.preloading() {
            preloading = false;
            c.reset_latency();
            measured_from = (Instant::now(), c.report().responses);
        }
        if c.finished() {
            break;
        }
        let now = Instant::now();
        // A device that is gone answers nothing: the client would wait for
        // its window forever (or until --duration-s, then end as if the
        // server were merely slow).
        if now - last_check >= cli::ALIVE_CHECK {
            c.pipe.dev.check_alive()?;
            last_check = now;
            if interrupt.load(Ordering::Relaxed) {
                interrupted = true;
                break;
            }
        }
        if stop.is_some_and(|s| now - start >= s) {
            break;
        }
        if every.is_some_and(|e| now - last >= e) {
            let r = c.report();
            eprintln!(
                "kv-client: {:.3} Mops, {} responses, p50 {} ns, p99 {} ns, {} lost frames, {} problems{}",
                (r.responses - last_resp) as f64 / (now - last).as_secs_f64() / 1e6,
                r.responses,
                r.latency.p50_ns,
                r.latency.p99_ns,
                r.frames_lost,
                r.problems,
                if preloading { " (preloading)" } else { "" }
            );
            (last, last_resp) = (now, r.responses);
        }
    }
    let r = c.report();
    if preloading {
        // Nothing of the workload ran: a rate and latencies here would be
        // the preload's, printed as if they were the workload's.
        if interrupted {
            return Err(format!(
                "interrupted during the preload (a SET of each of the {} keys; {} responses \
                 so far): no workload ran",
                a.keys, r.responses
            )
            .into());
        }
        return Err(format!(
            "the preload (a SET of each of the {} keys) did not finish before the run ended \
             ({} responses so far): give a longer --duration-s or larger --count, fewer --keys, \
             or --no-preload",
            a.keys, r.responses
        )
        .into());
    }
    let secs = measured_from.0.elapsed().as_secs_f64().max(1e-9);
    let mops = (r.responses - measured_from.1) as f64 / secs / 1e6;
    if a.connect.json {
        let out = serde_json::json!({
            "app": "kv-client",
            "seconds": secs,
            "mops": mops,
            "report": r,
            "client": c.client().stats(),
            "interrupted": interrupted,
        });
        println!("{out}");
    } else {
        println!(
            "kv-client: {:.3} Mops over {:.1} s after preload; latency p50 {} ns, p90 {} ns, p99 {} ns, p99.9 {} ns; {} requests, {} responses, {} hits, {} misses, {} lost frames, {} invalid frames, {} problems{}",
            mops,
            secs,
            r.latency.p50_ns,
            r.latency.p90_ns,
            r.latency.p99_ns,
            r.latency.p999_ns,
            r.requests,
            r.responses,
            r.hits,
            r.misses,
            r.frames_lost,
            r.bad_frames,
            r.problems,
            if interrupted { " (interrupted)" } else { "" }
        );
    }
    if r.problems > 0 {
        return Err(format!("{} responses were wrong", r.problems).into());
    }
    if r.bad_frames > 0 {
        return Err(format!(
            "{} of {} frames received were not valid responses (is a KV server answering on this port?)",
            r.bad_frames, r.frames_received
        )
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(args: &[&str]) -> Result<(), String> {
        let a = Args::try_parse_from(std::iter::once("kv-client").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        a.check().map_err(|e| e.to_string())
    }

    #[test]
    fn window_count_and_loss_timeout_are_bounded() {
        assert_eq!(check(&[]), Ok(()));
        assert_eq!(
            check(&[
                "--window",
                "16384",
                "--count",
                "1",
                "--loss-timeout-ms",
                "1"
            ]),
            Ok(())
        );
        for w in ["0", "16385", "100000000000", "18446744073709551615"] {
            assert_eq!(
                check(&["--window", w]),
                Err(format!("--window must be in 1..=16384, not {w}"))
            );
        }
        assert_eq!(
            check(&["--server-port", "65534", "--partitions", "2"]),
            Ok(())
        );
        assert_eq!(
            check(&["--server-port", "65535", "--partitions", "2"]),
            Err(
                "--partitions 2 from --server-port 65535 need UDP ports up to 65536, past 65535"
                    .into()
            )
        );
        assert_eq!(
            check(&["--partitions", "0"]),
            Err("--partitions must be in 1..=65535, not 0".into())
        );
        assert!(check(&["--count", "0"])
            .unwrap_err()
            .starts_with("--count must be at least 1"));
        for t in ["0", "18446744073709551615"] {
            assert_eq!(
                check(&["--loss-timeout-ms", t]),
                Err(format!(
                    "--loss-timeout-ms must be in 1..=1000000000000, not {t}"
                ))
            );
        }
    }
}
