//! `logmon`: the log monitor, attached to a running `nic-emu` device. It
//! reads one log stream arriving as UDP payloads on `--port` and counts, per
//! fail2ban-style pattern, the lines that match.
//!
//! On Ensō it reads a *stream pipe* by default: the NIC appends the UDP
//! payloads back to back, so the text is scanned where it lies, a line cut
//! across packets included, with no copy; `--packets` reads frames instead,
//! as on the packetized interface, where a line cut across packets is
//! copied together. The scanning logic is the same on every path.

use clap::Parser;
use enso::{EnsoDriver, PacketizedDriver};
use enso_apps::cli::{self, CliResult, ServeArgs, Served};
use enso_apps::logmon::{builtin_for, LogMonitor, LogPatterns, LogScanner, ScanStats};
use enso_apps::nic::{add_fallback_rx_pipes, EnsoStreamDriver, Interface};

#[derive(Parser)]
#[command(
    name = "logmon",
    about = "Log monitor (regex line matching) on the emulated NIC"
)]
struct Args {
    #[command(flatten)]
    serve: ServeArgs,
    /// On Ensō, read frames from an RX pipe instead of a stream pipe.
    #[arg(long)]
    packets: bool,
    /// Match only the patterns of these services (sshd, nginx, postfix,
    /// apache; default: all).
    #[arg(long, value_delimiter = ',')]
    services: Vec<String>,
    /// Print the patterns and exit.
    #[arg(long)]
    list_patterns: bool,
}

fn main() -> std::process::ExitCode {
    cli::main_with("logmon", || run(nic_emu::args::parse_or_exit("logmon")))
}

fn run(a: Args) -> CliResult<()> {
    let selected = builtin_for(&a.services)?;
    let patterns = LogPatterns::new(&selected)?;
    if a.list_patterns {
        for p in &selected {
            println!("{}\t{}", p.name, p.regex);
        }
        return Ok(());
    }
    a.serve.check()?;
    if a.serve.pipes != 1 {
        return Err("the monitor reads one ordered log stream: use --pipes 1".into());
    }
    let s = &a.serve;
    s.connect.pin("logmon");
    let dev = s.connect.open(s.device_options(0))?;
    let port = s.connect.port;
    let stream = s.interface == Interface::Enso && !a.packets;
    let (served, scan, counts): (Served, ScanStats, Vec<u64>) = if stream {
        let mut scanner = LogScanner::new(&patterns);
        let mut d = EnsoStreamDriver::new(dev);
        d.add_fallback_stream_pipe_on(port)?;
        let extra = |sc: &LogScanner| {
            format!(
                ", {} lines, {} matched",
                sc.stats().lines,
                sc.stats().matched_lines
            )
        };
        let r = cli::serve("logmon", &s.connect, &mut d, &mut scanner, extra, |_| {})?;
        (r, *scanner.stats(), scanner.counts().to_vec())
    } else {
        let mut mon = LogMonitor::new(&patterns);
        let extra = |m: &LogMonitor| {
            let st = m.scanner().stats();
            format!(", {} lines, {} matched", st.lines, st.matched_lines)
        };
        let r = match s.interface {
            Interface::Enso => {
                let mut d = EnsoDriver::new(dev);
                add_fallback_rx_pipes(&mut d, port, 1)?;
                cli::serve("logmon", &s.connect, &mut d, &mut mon, extra, |_| {})?
            }
            Interface::Packetized => {
                let mut d = PacketizedDriver::new(dev, s.burst);
                d.add_rss_queues_on(port, 1)?;
                cli::serve("logmon", &s.connect, &mut d, &mut mon, extra, |_| {})?
            }
        };
        (r, *mon.scanner().stats(), mon.scanner().counts().to_vec())
    };
    let path = if stream { "stream pipe" } else { "packets" };
    if s.connect.json {
        let per: serde_json::Map<String, serde_json::Value> = patterns
            .names()
            .iter()
            .zip(&counts)
            .map(|(n, c)| (n.clone(), (*c).into()))
            .collect();
        let out = serde_json::json!({
            "app": "logmon",
            "interface": s.interface,
            "path": path,
            "served": served,
            "lines": scan,
            "matches": per,
        });
        println!("{out}");
    } else {
        println!(
            "logmon ({}, {path}): {:.3} Gb/s over {:.1} s, {} lines, {} matched, {} overlong",
            s.interface,
            served.gbps,
            served.seconds,
            scan.lines,
            scan.matched_lines,
            scan.overlong_lines
        );
        for (n, c) in patterns.names().iter().zip(&counts) {
            if *c > 0 {
                println!("  {n:<32} {c}");
            }
        }
    }
    Ok(())
}
