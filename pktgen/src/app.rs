//! The `pktgen` command: parses the command line, prepares the frames,
//! attaches to a device (or starts one in this process), runs traffic or the
//! zero-loss search, and writes the live lines, CSV, capture, RTT histogram,
//! summary and JSON report.
//!
//! Every failure ends as one line on standard error (`pktgen: ...`) and a
//! non-zero exit status: 2 for a command line that is refused (a missing
//! or corrupt pcap included, whatever part of it is wrong), 1 for anything
//! else, and 1 (as EnsōGen) when RTT is measured and fewer or more
//! frames came back than were sent; without RTT, loss is reported and the
//! status is 0, as EnsōGen's. A run whose device went away exits 1 after
//! reporting what it measured. A zero-loss search exits 1 when a size
//! found no rate without loss, and 130 when it was interrupted (after
//! reporting what it found).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use nic_emu::counters::PortCounters;
use nic_emu::Stats;

use crate::cli::{self, CliError, Config};
use crate::inprocess::{InProcessNic, InProcessOptions, GENERATOR_PORT};
use crate::pcap::{CaptureError, CaptureWriter};
use crate::rate::{Rate, RateError, RateLimit};
use crate::report::{ClockInfo, DeviceReport, PortReport, Report};
use crate::search::{search_with_progress, SearchError, SearchResult};
use crate::session::{
    Drain, FileCapture, RunError, RunOutcome, RunPlan, Session, SessionError, SessionOptions,
};
use crate::stats::{
    live_line, summary_line, CsvFormat, CsvWriter, LatencyHistogram, Recorder, Sample,
};
use crate::stream::{StreamError, TxStream};
use crate::zeroloss::{DeviceTrial, TrialError, MIN_OFFERED};

/// Rows of statistics an EnsōGen CSV (`--save`) holds at least: Ensō's
/// Python frontend refuses a file with fewer than three, and averages
/// without the first and last. A shorter run keeps receiving until that
/// many intervals have passed (EnsōGen's own wait for late frames lasts
/// longer); the run's final row follows them.
pub const ENSOGEN_MIN_ROWS: u64 = 3;

/// Directory of standalone devices when `--dir` is not given.
pub const DEFAULT_DIR: &str = "/dev/shm";

/// Why a run could not be done.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The frames could not be prepared (missing or bad pcap).
    #[error("{0}")]
    Stream(#[from] StreamError),
    /// Attaching to a standalone device failed.
    #[error("cannot attach to device '{name}' in {}: {source}{hint}", dir.display())]
    Attach {
        /// Its name.
        name: String,
        /// Its directory's parent.
        dir: PathBuf,
        /// Why.
        source: SessionError,
        /// What to do about it.
        hint: &'static str,
    },
    /// The in-process device did not start.
    #[error("in-process device: {0}")]
    InProcess(String),
    /// Setting up pipes on the in-process device failed.
    #[error("{0}")]
    Session(SessionError),
    /// The run failed.
    #[error("{0}")]
    Run(#[from] RunError),
    /// The rate cannot be set on the NIC's limiter.
    #[error("rate {rate}: {source}")]
    Rate {
        /// The rate asked for.
        rate: String,
        /// Why.
        source: RateError,
    },
    /// An output file could not be written.
    #[error("{}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The capture file could not be written.
    #[error("{0}")]
    Capture(#[from] CaptureError),
    /// A zero-loss trial failed.
    #[error("zero-loss search: {0}")]
    Search(String),
    /// The command line does not fit the frames read (exit status 2, as
    /// for any refused command line).
    #[error("{0}")]
    Config(#[from] cli::ConfigError),
}

/// Runs the command with `args` (the first is the program name).
pub fn main<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cfg = match cli::parse(args) {
        Ok(c) => c,
        Err(CliError::Usage(e)) if !e.use_stderr() => {
            // --help, --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("pktgen: {}", e.message());
            return ExitCode::from(2);
        }
    };
    match execute(&cfg) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pktgen: {e}");
            match e {
                // The command line asked for what its traffic cannot take,
                // or named a pcap that cannot be read or replayed (a bad
                // record as much as a bad file header): bad input.
                AppError::Config(_) | AppError::Rate { .. } | AppError::Stream(_) => {
                    ExitCode::from(2)
                }
                _ => ExitCode::FAILURE,
            }
        }
    }
}

fn file_error(path: &Path) -> impl FnOnce(io::Error) -> AppError + '_ {
    move |source| AppError::File {
        path: path.into(),
        source,
    }
}

/// Creates an output file: never through a symbolic link, truncating only
/// a regular file of ours ([`nic_emu::outfile::create`]).
fn create(path: &Path) -> Result<BufWriter<File>, AppError> {
    nic_emu::outfile::create(path)
        .map(BufWriter::new)
        .map_err(file_error(path))
}

/// The device under test and how to read its counters.
enum Dut {
    Standalone { devdir: PathBuf },
    InProcess(InProcessNic),
}

impl Dut {
    /// The device's counters now (a standalone device's snapshot is at most
    /// 200 ms old; with `fresh_after`, one written after that time is
    /// awaited for up to a second).
    fn stats(&self, fresh_after: Option<SystemTime>) -> Option<Stats> {
        match self {
            Dut::InProcess(n) => Some(n.nic().stats()),
            Dut::Standalone { devdir } => {
                if let Some(t) = fresh_after {
                    let file = devdir.join(nic_emu::device::STATS_FILE);
                    let start = std::time::Instant::now();
                    while start.elapsed() < Duration::from_secs(1) {
                        let written = std::fs::metadata(&file).and_then(|m| m.modified());
                        if written.is_ok_and(|w| w > t) {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
                nic_emu::device::read_stats(devdir).ok()
            }
        }
    }
}

fn attach(cfg: &Config) -> Result<(Session, Dut), AppError> {
    let opts = SessionOptions {
        queues: cfg.queues,
        port: cfg.port,
    };
    if cfg.in_process {
        let nic = InProcessNic::start(&InProcessOptions {
            echo_pipes: cfg.queues.min(64),
            ..InProcessOptions::default()
        })
        .map_err(AppError::InProcess)?;
        let s = Session::attach_nic(
            nic.nic(),
            SessionOptions {
                port: GENERATOR_PORT,
                ..opts
            },
        )
        .map_err(AppError::Session)?;
        return Ok((s, Dut::InProcess(nic)));
    }
    let dir = cfg
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_DIR));
    match Session::open(&dir, &cfg.device, opts) {
        Ok(s) => {
            let devdir = dir.join(format!("enso-{}", cfg.device));
            Ok((s, Dut::Standalone { devdir }))
        }
        Err(source) => {
            let hint = match &source {
                SessionError::Attach(enso::AttachError::Device(m)) if m.contains("cannot reach") => {
                    " (is it running? start one with `nic-emu run --name NAME`, or use --in-process)"
                }
                _ => "",
            };
            Err(AppError::Attach {
                name: cfg.device.clone(),
                dir,
                source,
                hint,
            })
        }
    }
}

/// Busy threads of this process, for the CPU-sharing note.
fn busy_threads(cfg: &Config) -> usize {
    let generator = if cfg.single_core { 1 } else { 2 };
    if cfg.in_process {
        generator + 2 // the NIC engine and the echo server
    } else {
        generator
    }
}

fn execute(cfg: &Config) -> Result<ExitCode, AppError> {
    // Ctrl-C (and SIGTERM) end the run and still print the results; a
    // second one exits at once.
    let stop = nic_emu::args::stop_on_interrupt();
    let stream = TxStream::from_source(&cfg.traffic)?;
    // The pcap's frames are known only now (synthetic sizes were checked
    // with the command line).
    if cfg.rtt {
        if let Err(e) = cli::check_stamp_fits(cfg.timestamp_offset, stream.min_len()) {
            // Suggest only an offset that the frames' headers also take.
            return Err(match e {
                cli::ConfigError::StampPastFrame { offset, len, most } => {
                    cli::ConfigError::StampPastFrame {
                        offset,
                        len,
                        most: most.and_then(|m| stream.largest_stamp_offset(m)),
                    }
                    .into()
                }
                e => e.into(),
            });
        }
        stream.check_stamp(cfg.timestamp_offset)?;
    }
    // The NIC's limiter setting for a run (a search sets its own per trial).
    let limit = match cfg.zero_loss {
        Some(_) => None,
        None => Some(
            cfg.rate
                .limiter_setting(&stream.profile())
                .map_err(|source| AppError::Rate {
                    rate: cfg.rate.to_string(),
                    source,
                })?,
        ),
    };
    if cfg.zero_loss.is_none() && cfg.rate == Rate::Line {
        let p = stream.profile();
        let wire = Rate::gbps(crate::rate::LINE_RATE_GBPS).pps(&p);
        if Rate::Line.pps(&p) < wire * (1.0 - 1e-9) {
            eprintln!(
                "pktgen: note: 100 Gb/s of these frames ({:.1} Mpps) needs more than one flit per \
                 cycle; sending at the NIC's most, {:.1} Mpps",
                wire / 1e6,
                Rate::Line.pps(&p) / 1e6
            );
        }
    }

    // Outputs first: a bad path fails before any traffic is sent.
    let mut csvs = Vec::new();
    for (path, format) in [
        (&cfg.save, CsvFormat::EnsoGen),
        (&cfg.save_detailed, CsvFormat::Detailed),
    ] {
        if let Some(p) = path {
            let w = CsvWriter::new(create(p)?, cfg.rtt, format).map_err(file_error(p))?;
            csvs.push((p, w));
        }
    }
    let mut capture: Option<FileCapture> = match &cfg.capture {
        Some(p) => Some(CaptureWriter::create(p)?),
        None => None,
    };
    let hist_out = match &cfg.rtt_hist {
        Some(p) => Some((p, create(p)?)),
        None => None,
    };
    let json_out = match &cfg.json {
        Some(p) if !cfg.json_to_stdout() => Some((p, create(p)?)),
        _ => None,
    };

    let (mut session, dut) = attach(cfg)?;
    let mut report = Report::new(cfg.clone(), ClockInfo::emulated_nic());
    report.frames = Some(stream.profile());
    report.limiter = limit;
    notes(cfg, &stream, &mut report);
    for n in &report.notes {
        eprintln!("pktgen: note: {n}");
    }
    let before = dut.stats(None);
    let mut code = ExitCode::SUCCESS;
    let mut outcome = None;

    if let Some(search_cfg) = &cfg.zero_loss {
        let mut trial = DeviceTrial::new(&mut session, cfg.traffic.clone());
        trial.single_core = cfg.single_core;
        trial.core = cfg.core;
        trial.stop = Some(&stop);
        let res = search_with_progress(search_cfg, &mut trial, |t| {
            let size = t
                .spec
                .size
                .map_or("traffic".to_string(), |s| format!("{s} B"));
            eprintln!(
                "zero-loss {size} at {:.3} Gb/s: sent {}, received {}{}",
                t.spec.rate_gbps,
                t.outcome.sent,
                t.outcome.received,
                match (t.lossless, t.outcome.underrun) {
                    (_, true) => ", rate not reached",
                    (true, false) => ", no loss",
                    (false, false) => ", loss",
                }
            );
        });
        let z = match res {
            Ok(r) => r,
            Err(SearchError::Config(e)) => return Err(AppError::Search(e.to_string())),
            // Ctrl-C: what finished is still reported and written.
            Err(SearchError::Trial {
                error: TrialError::Interrupted,
                mut partial,
            }) => {
                partial.interrupted = true;
                *partial
            }
            Err(SearchError::Trial { error, .. }) => {
                return Err(AppError::Search(error.to_string()))
            }
        };
        code = ExitCode::from(search_status(&z));
        report.interrupted = z.interrupted;
        report.zero_loss = Some(z);
    } else {
        let plan = RunPlan {
            limit,
            count: cfg.count,
            duration: cfg.duration,
            timestamp_offset: cfg.rtt.then_some(cfg.timestamp_offset),
            rtt_hist_window: cfg
                .rtt_hist
                .as_ref()
                .map(|_| (cfg.rtt_hist_offset, cfg.rtt_hist_len)),
            single_core: cfg.single_core,
            core: cfg.core,
            stats_delay: cfg.stats_delay,
            drain: Drain::RUN,
            stop: Some(&stop),
            min_samples: if cfg.save.is_some() {
                ENSOGEN_MIN_ROWS
            } else {
                0
            },
            ..RunPlan::new(&stream)
        };
        let mut rec = Recorder::new();
        let mut csv_err = None;
        let mut write_row = |s: &Sample| {
            eprintln!("{}", live_line(s));
            for (p, w) in csvs.iter_mut() {
                if let Err(e) = w.write(s) {
                    csv_err.get_or_insert((p.to_path_buf(), e));
                }
            }
        };
        let out = session.run(&plan, capture.as_mut(), &mut |c, at| {
            write_row(rec.record(*c, at))
        })?;
        // The last interval's rates end with the last frame sent and
        // received, not with the drain.
        if let Some(s) = rec.finish(out.counters, out.elapsed, out.span) {
            write_row(s);
        }
        if let Some((p, e)) = csv_err {
            return Err(file_error(&p)(e));
        }
        report.finish(&rec, out.rtt.as_ref());
        if let Some(n) = shortfall(&report.totals, out.interrupted, limit, &stream) {
            eprintln!("pktgen: note: {n}");
            report.notes.push(n);
        }
        if cfg.rtt && out.counters.rx_packets != out.counters.tx_packets {
            code = ExitCode::FAILURE;
        }
        report.interrupted = out.interrupted;
        report.device_gone = out.device_gone;
        outcome = Some(out);
    }

    // A device that is gone writes no more counters: its last snapshot
    // would not cover the run, so there is no device report.
    let after = if report.device_gone {
        None
    } else {
        dut.stats(Some(SystemTime::now()))
    };
    if let Some(after) = after {
        report.device = Some(device_report(
            session.device_name().to_string(),
            session.port(),
            session.rx_app_id(),
            before.as_ref(),
            &after,
        ));
    }
    let device_name = session.device_name().to_string();
    drop(session);
    if let Dut::InProcess(nic) = dut {
        if let Err(e) = nic.stop() {
            report.notes.push(e.clone());
            eprintln!("pktgen: note: {e}");
        }
    }

    for (p, w) in csvs {
        w.finish().map_err(file_error(p))?;
    }
    if let Some(w) = capture {
        w.finish()?;
    }
    if let (Some((p, w)), Some(h)) = (
        hist_out,
        outcome.as_ref().and_then(|o| o.rtt_cycles.as_ref()),
    ) {
        h.write(w).map_err(file_error(p))?;
        if h.outside_entries() > 0 {
            let win = h.window_ns();
            let n = format!(
                "{} RTT histogram entries (5 ns steps) lie outside its array of {}..{} ns \
                 (--rtt-hist-offset, --rtt-hist-len); they follow it in {}",
                h.outside_entries(),
                win.start,
                win.end,
                p.display()
            );
            eprintln!("pktgen: note: {n}");
            report.notes.push(n);
        }
    }

    // The summary goes to standard output unless the JSON report does.
    let mut summary: Box<dyn Write> = if cfg.json_to_stdout() {
        Box::new(io::stderr())
    } else {
        Box::new(io::stdout())
    };
    // A closed pipe (`pktgen ... | head`) is the reader's choice; any other
    // failure to print the results is an error, not a silent success.
    if let Err(e) =
        write_summary(&mut summary, &report, outcome.as_ref()).and_then(|()| summary.flush())
    {
        if e.kind() == io::ErrorKind::BrokenPipe {
            return Ok(ExitCode::from(141));
        }
        eprintln!("pktgen: cannot print the summary: {e}");
        return Ok(ExitCode::FAILURE);
    }
    drop(summary);
    if report.device_gone {
        eprintln!(
            "pktgen: device '{device_name}' went away during the run (it was stopped or its process exited); \
             the results are those until then"
        );
        code = ExitCode::FAILURE;
    }
    if cfg.json_to_stdout() {
        println!("{}", report.to_json());
    } else if let Some((p, mut w)) = json_out {
        writeln!(w, "{}", report.to_json())
            .and_then(|()| w.flush())
            .map_err(file_error(p))?;
    }
    Ok(code)
}

fn notes(cfg: &Config, stream: &TxStream, report: &mut Report) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let busy = busy_threads(cfg);
    if busy > cores {
        report.notes.push(format!(
            "{busy} busy threads ({}) share {cores} cores: rates are bound by CPU sharing, not by the interface",
            if cfg.in_process {
                "NIC engine, echo server, generator"
            } else {
                "generator"
            }
        ));
    }
    if cfg.rtt && stream.non_ipv4() > 0 {
        report.notes.push(format!(
            "{} of {} frames are not IPv4: the timestamp at offset {} overwrites their headers",
            stream.non_ipv4(),
            stream.set_len(),
            cfg.timestamp_offset
        ));
    }
    if stream.padded() > 0 {
        report.notes.push(format!(
            "{} of {} frames of the pcap were cut short when captured (a snap length); \
             they are sent padded with zeros to their original length",
            stream.padded(),
            stream.set_len()
        ));
    }
    let (trimmed, trimmed_bytes) = stream.trimmed();
    if trimmed > 0 {
        report.notes.push(format!(
            "{trimmed} of {} frames of the pcap hold bytes after the length their headers \
             state ({trimmed_bytes} B in all: Ethernet padding or trailers); they are sent \
             without them, as the NIC sends frames",
            stream.set_len()
        ));
    }
    if stream.malformed_ipv4() > 0 {
        report.notes.push(format!(
            "{} of {} frames of the pcap are malformed IPv4 (version not 4, header length \
             below 20 B or past the total length); they are sent as they are",
            stream.malformed_ipv4(),
            stream.set_len()
        ));
    }
    if let Some(a) = &cfg.pcie_addr {
        report.notes.push(format!(
            "--pcie-addr {a} chooses a real NIC; an emulated one is chosen by name: {}",
            if cfg.in_process {
                "this run started its own (--in-process)".to_string()
            } else {
                format!("'{}' (--device)", cfg.device)
            }
        ));
    }
    if stream.flows_left_out() > 0 {
        report.notes.push(format!(
            "{} flows are not sent: one pass of synthetic traffic holds at most {} frames",
            stream.flows_left_out(),
            stream.set_len()
        ));
    }
}

/// A note when the NIC sent clearly less than the rate asked for, by the
/// same rate the summary prints (over the send time of the totals).
fn shortfall(
    totals: &Sample,
    interrupted: bool,
    limit: Option<RateLimit>,
    stream: &TxStream,
) -> Option<String> {
    let want = Rate::Flits(limit?).pps(&stream.profile());
    let secs = totals.send_ns.unwrap_or(totals.interval).as_secs_f64();
    if interrupted || secs < 0.1 {
        return None;
    }
    let got = totals.tx.pkt_rate_kpps * 1e3;
    (got < MIN_OFFERED * want).then(|| {
        format!(
            "sent {:.3} Mpps, {:.1}% of the {:.3} Mpps asked for: the generator or the emulated NIC could not keep up",
            got / 1e6,
            got / want * 100.0,
            want / 1e6
        )
    })
}

fn write_summary(
    w: &mut dyn Write,
    report: &Report,
    outcome: Option<&RunOutcome>,
) -> io::Result<()> {
    if let Some(z) = &report.zero_loss {
        return write_search(w, z);
    }
    let t = &report.totals;
    let secs = |d: Option<Duration>| d.unwrap_or(t.interval).as_secs_f64();
    writeln!(
        w,
        "TX {} frames, {} bytes in {:.3} s of sending: {:.3} Gb/s, {:.3} Mpps",
        t.tx.packets,
        t.tx.bytes,
        secs(t.send_ns),
        t.tx.tput_mbps / 1e3,
        t.tx.pkt_rate_kpps / 1e3
    )?;
    writeln!(
        w,
        "RX {} frames, {} bytes in {:.3} s to the last received: {:.3} Gb/s, {:.3} Mpps",
        t.rx.packets,
        t.rx.bytes,
        secs(t.receive_ns),
        t.rx.tput_mbps / 1e3,
        t.rx.pkt_rate_kpps / 1e3
    )?;
    writeln!(w, "{}", summary_line(&report.loss, report.latency.as_ref()))?;
    if let Some(d) = &report.device {
        if d.total_drops > 0 {
            let causes: Vec<String> = d
                .drops
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            let mine: u64 = d.generator_drops.values().sum();
            writeln!(
                w,
                "NIC drops during the run: {} ({}); {mine} of them in the generator's RX pipes",
                d.total_drops,
                causes.join(", ")
            )?;
        }
    }
    if outcome.is_some_and(|o| o.interrupted) {
        writeln!(w, "interrupted")?;
    }
    Ok(())
}

/// Exit status of a search: 130 when interrupted (what finished is still
/// reported), 1 when a size found no rate without loss, else 0.
fn search_status(z: &SearchResult) -> u8 {
    if z.interrupted {
        130
    } else if z.sizes.iter().any(|s| s.rate_gbps.is_none()) {
        1
    } else {
        0
    }
}

fn write_search(w: &mut dyn Write, z: &SearchResult) -> io::Result<()> {
    for s in &z.sizes {
        let size = s.size.map_or("traffic".to_string(), |s| format!("{s} B"));
        let n = s.trials.len();
        let trials = format!("{n} trial{}", if n == 1 { "" } else { "s" });
        if !s.finished {
            let best = s
                .rate_gbps
                .map_or(String::new(), |r| format!(", best so far {r:.3} Gb/s"));
            writeln!(w, "zero-loss {size}: interrupted after {trials}{best}")?;
            continue;
        }
        match s.rate_gbps {
            Some(rate) => {
                let mpps = s
                    .rate_mpps
                    .map_or(String::new(), |m| format!(" ({m:.3} Mpps)"));
                writeln!(
                    w,
                    "zero-loss {size}: {rate:.3} Gb/s{mpps}, {trials}{}",
                    if s.converged { "" } else { ", not converged" }
                )?;
            }
            None => writeln!(
                w,
                "zero-loss {size}: no lossless rate found (lowest tried {:.3} Gb/s), {trials}",
                s.lowest_tried_gbps().unwrap_or(0.0)
            )?,
        }
    }
    if z.interrupted {
        writeln!(w, "interrupted")?;
    }
    Ok(())
}

/// What changed in the device's counters between two snapshots; the
/// generator's RX pipes belong to application `rx_app`.
pub fn device_report(
    name: String,
    port: u32,
    rx_app: u32,
    before: Option<&Stats>,
    after: &Stats,
) -> DeviceReport {
    let zero = Stats::default();
    let before = before.unwrap_or(&zero);
    let app_drops = |s: &Stats| {
        let pipes = s
            .apps
            .iter()
            .filter(|a| a.app_id == rx_app)
            .flat_map(|a| &a.pipes);
        pipes.fold((0u64, 0u64), |(f, n), p| {
            (
                f + p.counters.drop_pipe_full,
                n + p.counters.drop_notif_ring_full,
            )
        })
    };
    let (a, b) = (app_drops(after), app_drops(before));
    let generator_drops = BTreeMap::from([
        ("pipe_full".to_string(), a.0.saturating_sub(b.0)),
        ("notif_ring_full".to_string(), a.1.saturating_sub(b.1)),
    ]);
    let old = before.drops();
    let drops: BTreeMap<String, u64> = after
        .drops()
        .into_iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                v.saturating_sub(old.get(k).copied().unwrap_or(0)),
            )
        })
        .collect();
    let ports = after
        .ports
        .iter()
        .map(|p| {
            let b = before
                .ports
                .iter()
                .find(|q| q.port == p.port)
                .map(|q| q.counters.clone())
                .unwrap_or_default();
            PortReport {
                port: p.port,
                wire: p.wire.clone(),
                counters: port_delta(&p.counters, &b),
            }
        })
        .collect();
    DeviceReport {
        name,
        port,
        total_drops: drops.values().sum(),
        drops,
        generator_drops,
        ports,
    }
}

/// `a - b` for every counter (saturating), whatever counters a port has.
fn port_delta(a: &PortCounters, b: &PortCounters) -> PortCounters {
    let (Ok(serde_json::Value::Object(mut av)), Ok(serde_json::Value::Object(bv))) =
        (serde_json::to_value(a), serde_json::to_value(b))
    else {
        return a.clone();
    };
    for (k, v) in av.iter_mut() {
        if let (Some(x), Some(y)) = (v.as_u64(), bv.get(k).and_then(serde_json::Value::as_u64)) {
            *v = x.saturating_sub(y).into();
        }
    }
    serde_json::from_value(serde_json::Value::Object(av)).unwrap_or_else(|_| a.clone())
}

/// Reads back an RTT histogram written with `--rtt-hist` (for tests and
/// experiments).
pub fn read_rtt_hist(path: &Path) -> Result<LatencyHistogram, AppError> {
    let f = File::open(path).map_err(file_error(path))?;
    LatencyHistogram::read_rtt_hist(io::BufReader::new(f)).map_err(|e| AppError::File {
        path: path.into(),
        source: io::Error::new(io::ErrorKind::InvalidData, e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::{SearchConfig, SizeResult};
    use crate::stats::{Counters, TrafficSpan};

    #[test]
    fn summary_and_shortfall_note_use_the_send_time() {
        let cfg = cli::parse(["pktgen", "--size", "64", "--rate", "10Mpps"]).unwrap();
        let stream = TxStream::from_source(&cfg.traffic).unwrap();
        let limit = cfg.rate.limiter_setting(&stream.profile()).unwrap();
        let ms = Duration::from_millis;
        let mut rec = Recorder::new();
        let c = Counters {
            tx_packets: 1_000_000,
            tx_bytes: 60_000_000,
            rx_packets: 1_000_000,
            rx_bytes: 60_000_000,
            ..Counters::default()
        };
        // 1 M frames sent in 0.5 s, back by 0.6 s, the run over at 0.7 s.
        let span = TrafficSpan {
            first_sent: Some(ms(0)),
            last_sent: Some(ms(500)),
            last_received: Some(ms(600)),
        };
        rec.finish(c, ms(700), span);
        let mut report = Report::new(cfg, ClockInfo::emulated_nic());
        report.finish(&rec, None);
        let note = shortfall(&report.totals, false, Some(limit), &stream).unwrap();
        assert!(
            note.starts_with("sent 2.000 Mpps, 20.0% of the 10.000 Mpps"),
            "{note}"
        );
        let mut out = Vec::new();
        write_summary(&mut out, &report, None).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(
                "TX 1000000 frames, 60000000 bytes in 0.500 s of sending: 1.344 Gb/s, 2.000 Mpps"
            ),
            "{text}"
        );
        assert!(
            text.contains("RX 1000000 frames, 60000000 bytes in 0.600 s to the last received: 1.120 Gb/s, 1.667 Mpps"),
            "{text}"
        );
        assert!(shortfall(&report.totals, true, Some(limit), &stream).is_none());
    }

    fn size(size: usize, rate: Option<f64>, tried: &[f64], finished: bool) -> SizeResult {
        use crate::search::{TrialOutcome, TrialRecord, TrialSpec};
        SizeResult {
            size: Some(size),
            rate_gbps: rate,
            rate_mpps: rate.map(|r| r * 1.488),
            converged: rate.is_some() && finished,
            finished,
            trials: tried
                .iter()
                .map(|&r| TrialRecord {
                    spec: TrialSpec {
                        size: Some(size),
                        rate_gbps: r,
                        duration: Duration::from_secs(1),
                    },
                    outcome: TrialOutcome::default(),
                    lossless: Some(r) == rate,
                    passed: Some(r) == rate,
                })
                .collect(),
        }
    }

    #[test]
    fn search_summary_says_when_no_rate_was_found_or_it_was_cut_short() {
        let text = |z: &SearchResult| {
            let mut out = Vec::new();
            write_search(&mut out, z).unwrap();
            String::from_utf8(out).unwrap()
        };
        let mut z = SearchResult {
            config: SearchConfig::default(),
            sizes: vec![size(64, Some(1.0), &[2.0, 1.0], true)],
            interrupted: false,
        };
        assert_eq!(
            text(&z),
            "zero-loss 64 B: 1.000 Gb/s (1.488 Mpps), 2 trials\n"
        );
        assert_eq!(search_status(&z), 0);
        // No trial passed: no rate, the lowest tried, status 1.
        z.sizes.push(size(128, None, &[1.0, 0.5, 0.25], true));
        assert!(text(&z).ends_with(
            "zero-loss 128 B: no lossless rate found (lowest tried 0.250 Gb/s), 3 trials\n"
        ));
        assert_eq!(search_status(&z), 1);
        // Interrupted during a size: what it found so far; status 130.
        z.sizes.push(size(256, Some(0.5), &[1.0, 0.5], false));
        z.sizes.push(size(512, None, &[], false));
        z.interrupted = true;
        let t = text(&z);
        assert!(
            t.ends_with(
                "zero-loss 256 B: interrupted after 2 trials, best so far 0.500 Gb/s\n\
                 zero-loss 512 B: interrupted after 0 trials\ninterrupted\n"
            ),
            "{t}"
        );
        assert_eq!(search_status(&z), 130);
    }
}
