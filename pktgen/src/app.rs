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

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use nic_emu::Stats;

use crate::cli::{self, CliError, Config};
use crate::inprocess::{InProcessNic, InProcessOptions, GENERATOR_PORT};
use crate::pcap::{CaptureError, CaptureWriter};
use crate::rate::{Rate, RateError};
use crate::report::{ClockInfo, PipeReport, Report};
use crate::search::{search_with_progress, SearchError};
use crate::session::{
    Drain, FileCapture, RunError, RunPlan, Session, SessionError, SessionOptions,
};
use crate::stats::{live_line, CsvFormat, CsvWriter, LatencyHistogram, Recorder, Sample};
use crate::stream::{StreamError, TxStream};
use crate::zeroloss::{DeviceTrial, TrialError};

mod summary;
#[cfg(test)]
mod tests;

pub use self::summary::{device_report, nic_limit};

use summary::{search_status, short_rate, shortfall, write_summary};

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
        generator + crate::threads::other_busy_threads(true)
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
    report.pipes = Some(PipeReport {
        rx: session.rx_pipes(),
        rx_pipe_bytes: session.rx_pipe_size(),
        tx_pipe_bytes: session.tx_pipe_size(),
        tx_in_place: false,
    });
    eprintln!("pktgen: threads: {}", cfg.threads.why);
    notes(cfg, &stream, &mut report);
    for n in &report.notes {
        eprintln!("pktgen: note: {n}");
    }
    let before = dut.stats(None);
    let mut code = ExitCode::SUCCESS;
    let mut outcome = None;
    let mut short = None;

    if let Some(search_cfg) = &cfg.zero_loss {
        let mut trial = DeviceTrial::new(&mut session, cfg.traffic.clone());
        trial.single_core = cfg.single_core;
        trial.core = cfg.core;
        trial.idle = cfg.idle;
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
            idle: cfg.idle,
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
        short = short_rate(&report.totals, out.interrupted, limit, &stream);
        if let Some(n) = shortfall(&report.totals, out.interrupted, limit, &stream) {
            eprintln!("pktgen: note: {n}");
            report.notes.push(n);
        }
        if cfg.rtt && out.counters.rx_packets != out.counters.tx_packets {
            code = ExitCode::FAILURE;
        }
        report.interrupted = out.interrupted;
        if let Some(p) = report.pipes.as_mut() {
            p.tx_in_place = out.in_place;
        }
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
    if report.zero_loss.is_none() {
        report.nic_limit = nic_limit(report.device.as_ref(), short);
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

/// Reads back an RTT histogram written with `--rtt-hist` (for tests and
/// experiments).
pub fn read_rtt_hist(path: &Path) -> Result<LatencyHistogram, AppError> {
    let f = File::open(path).map_err(file_error(path))?;
    LatencyHistogram::read_rtt_hist(io::BufReader::new(f)).map_err(|e| AppError::File {
        path: path.into(),
        source: io::Error::new(io::ErrorKind::InvalidData, e.to_string()),
    })
}
