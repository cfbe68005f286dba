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
use enso::app::DriverStats;
use enso_apps::cli::{self, CliResult, EnsoPipes, ServeArgs, Served};
use enso_apps::logmon::{builtin_for, LogMonitor, LogPatterns, LogScanner, ScanStats};
use enso_apps::nic::{EnsoStreamDriver, Interface};

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
    /// Print the patterns (name and regex, tab-separated; a JSON array
    /// with --json) and exit.
    #[arg(long)]
    list_patterns: bool,
}

fn main() -> std::process::ExitCode {
    cli::main_with("logmon", || run(cli::parse_or_exit("logmon")))
}

impl Args {
    /// Checks the values clap cannot, before the device is attached.
    fn check(&self) -> CliResult<()> {
        self.serve.check()?;
        if self.packets && self.serve.interface == Interface::Packetized {
            return Err(
                "--packets applies to Ensō (frames instead of a stream pipe); the packetized interface always reads packets"
                    .into(),
            );
        }
        if self.serve.pipes != 1 {
            return Err("the monitor reads one ordered log stream: use --pipes 1".into());
        }
        Ok(())
    }
}

fn run(a: Args) -> CliResult<()> {
    let selected = builtin_for(&a.services)?;
    let patterns = LogPatterns::new(&selected)?;
    if a.list_patterns {
        if a.serve.connect.json {
            let list: Vec<_> = selected
                .iter()
                .map(|p| serde_json::json!({ "name": p.name, "regex": p.regex }))
                .collect();
            println!("{}", serde_json::Value::Array(list));
        } else {
            for p in &selected {
                println!("{}\t{}", p.name, p.regex);
            }
        }
        return Ok(());
    }
    a.check()?;
    let s = &a.serve;
    s.connect.pin("logmon");
    let dev = s.connect.open(s.device_options(0))?;
    let stream = s.interface == Interface::Enso && !a.packets;
    let (served, scan, counts, driver): (Served, ScanStats, Vec<u64>, DriverStats) = if stream {
        let mut scanner = LogScanner::new(&patterns);
        let mut d = EnsoStreamDriver::new(dev);
        d.add_fallback_stream_pipe_on(s.connect.port)?;
        let extra = |sc: &LogScanner| {
            format!(
                ", {} lines, {} matched",
                sc.stats().lines,
                sc.stats().matched_lines
            )
        };
        let r = cli::serve("logmon", &s.connect, &mut d, &mut scanner, extra, |_| {})?;
        let driver = d.stats.clone();
        (r, *scanner.stats(), scanner.counts().to_vec(), driver)
    } else {
        let mut mon = LogMonitor::new(&patterns);
        let extra = |m: &LogMonitor| {
            let st = m.scanner().stats();
            format!(", {} lines, {} matched", st.lines, st.matched_lines)
        };
        // --pipes is 1 (checked): one ordered stream.
        let (r, driver, _) =
            cli::serve_packets("logmon", s, dev, EnsoPipes::Rx, &mut mon, extra, |_| {})?;
        (
            r,
            *mon.scanner().stats(),
            mon.scanner().counts().to_vec(),
            driver,
        )
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
            "driver": driver,
        });
        println!("{out}");
    } else {
        println!(
            "logmon ({}, {path}): {:.3} Gb/s over {:.1} s, {} lines, {} matched, {} overlong, {} frames dropped (not IPv4/UDP)",
            s.interface,
            served.gbps,
            served.seconds,
            scan.lines,
            scan.matched_lines,
            scan.overlong_lines,
            driver.dropped
        );
        for (n, c) in patterns.names().iter().zip(&counts) {
            if *c > 0 {
                println!("  {n:<32} {c}");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(args: &[&str]) -> Result<(), String> {
        let a = Args::try_parse_from(std::iter::once("logmon").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        a.check().map_err(|e| e.to_string())
    }

    #[test]
    fn packets_is_an_enso_choice_and_the_stream_is_one() {
        assert_eq!(check(&[]), Ok(()));
        assert_eq!(check(&["--packets"]), Ok(()));
        assert_eq!(check(&["--interface", "packetized"]), Ok(()));
        assert!(check(&["--interface", "packetized", "--packets"])
            .unwrap_err()
            .starts_with("--packets applies to Ensō"));
        assert_eq!(
            check(&["--pipes", "2"]),
            Err("the monitor reads one ordered log stream: use --pipes 1".into())
        );
    }
}
