//! `bench soak`: the NIC at saturation for a long run, with mixed frames,
//! applications on both interfaces and ports, attach/detach churn, and
//! every frame accounted for.

use std::path::PathBuf;
use std::time::Duration;

use bench::probe::{self, Probe};
use bench::progress::Progress;
use bench::results::Table;
use bench::soak::{self, SoakConfig, SoakReport};
use clap::Args;
use nic_emu::SizeSpec;
use serde::Serialize;

use super::echo::text_table;
use crate::{print_json, Common};

/// What `--json` prints.
const JSON_HELP: &str = "Print the result as one JSON object on stdout (frames, verified, \
    dropped by cause, unexplained_loss, corrupt, duplicates, attach_cycles, rates, the probe), \
    and nothing on stderr but errors";

#[derive(Args, Debug, Clone, Serialize)]
#[command(mut_arg("json", |a| a.help(JSON_HELP)))]
pub(crate) struct SoakArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// How long the generators send, in seconds.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    duration_s: u64,
    /// Frame sizes on the wire with FCS: a range (`64-1518`, uniform), a
    /// list (`64/512/1518`) or one size, each in 64..=1518.
    #[arg(long, default_value = "64-1518", value_name = "LO-HI|A/B/..")]
    sizes: String,
    /// Flows per generator (IPv4, IPv6 and non-IP frames of each); some of
    /// the IPv4 ones are bound to pipes and queues by flow rules, the rest
    /// go to fallback pipes and RSS queues.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(4..=65_536))]
    flows: u32,
    /// Each application thread replaces one of its applications this often
    /// (0: never).
    #[arg(long, default_value_t = 250, value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
    churn_ms: u64,
    /// Write a results directory under results/.
    #[arg(long)]
    save: bool,
    /// Write the results directory here instead (implies --save).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
}

/// Parses `--sizes` (wire sizes with FCS) into frame lengths in memory.
fn parse_sizes(text: &str) -> Result<SizeSpec, String> {
    let size = |s: &str| -> Result<usize, String> {
        let n: usize = s
            .trim()
            .parse()
            .map_err(|_| format!("--sizes {text}: {s:?} is not a number"))?;
        bench::frames::check_wire_size(n).map_err(|e| format!("--sizes {text}: {e}"))?;
        Ok(n - bench::frames::FCS_LEN)
    };
    if let Some((lo, hi)) = text.split_once('-') {
        let (lo, hi) = (size(lo)?, size(hi)?);
        if lo > hi {
            return Err(format!("--sizes {text}: the low end is above the high end"));
        }
        Ok(SizeSpec::Range(lo, hi))
    } else if text.contains('/') {
        Ok(SizeSpec::Mix(
            text.split('/').map(size).collect::<Result<_, _>>()?,
        ))
    } else {
        Ok(SizeSpec::Fixed(size(text)?))
    }
}

fn config(a: &SoakArgs) -> Result<SoakConfig, String> {
    let cfg = SoakConfig {
        duration: Duration::from_secs(a.duration_s),
        sizes: parse_sizes(&a.sizes)?,
        flows: a.flows,
        churn: (a.churn_ms > 0).then(|| Duration::from_millis(a.churn_ms)),
    };
    cfg.check()?;
    Ok(cfg)
}

pub(crate) fn check(a: &SoakArgs) -> Result<(), String> {
    a.common.check()?;
    config(a)?;
    super::check_out(&a.out)
}

/// What `--json` prints: the report, the configuration and the probe.
#[derive(Serialize)]
struct Printed<'a> {
    #[serde(flatten)]
    report: &'a SoakReport,
    sizes: &'a str,
    flows: u32,
    churn_ms: u64,
    cores: [Option<usize>; 2],
    two_cores: bool,
    probe_rtt_ns: f64,
    probe_rtt_ns_after: f64,
    probe_before: &'a Probe,
    probe_after: &'a Probe,
}

pub(crate) fn run(a: &SoakArgs) -> Result<(), String> {
    let cfg = config(a)?;
    let placement = a.common.placement()?;
    let before = probe::measure(&placement, probe::DEFAULT_DURATION);
    let mut progress = Progress::new("soak", a.duration_s, a.common.json);
    progress.note(&format!(
        "soak: {} s, sizes {} B, {} flows per port, churn {}",
        a.duration_s,
        a.sizes,
        a.flows,
        churn_text(a.churn_ms)
    ));
    let run = soak::run(&cfg, &placement, |t| {
        let s = &t.sample;
        let at = (t.elapsed_s.round() as u64).min(a.duration_s);
        progress.step(
            at.saturating_sub(progress.done()),
            &format!(
                "{:.2} M frames, {:.2} M verified, {:.2} M dropped by the NIC, {} applications, \
                 {} replaced",
                s.frames as f64 / 1e6,
                s.verified as f64 / 1e6,
                s.nic_dropped as f64 / 1e6,
                s.applications,
                s.attach_cycles
            ),
        );
    });
    progress.finish();
    let run = run?;
    let after = probe::measure(&placement, probe::DEFAULT_DURATION);
    let r = &run.report;
    let printed = Printed {
        report: r,
        sizes: &a.sizes,
        flows: a.flows,
        churn_ms: a.churn_ms,
        cores: placement.cores(),
        two_cores: before.two_cores,
        probe_rtt_ns: before.rtt_ns,
        probe_rtt_ns_after: after.rtt_ns,
        probe_before: &before,
        probe_after: &after,
    };
    if a.common.json {
        print_json(&printed)?;
    } else {
        println!("{before}");
        print!("{}", human(a, r));
        println!("{after} (after)");
    }
    if let Some(dir) = super::results_dir("soak", a.save, &a.out)? {
        let e = |e: bench::results::ResultsError| e.to_string();
        dir.write_config(a).map_err(e)?;
        #[derive(Serialize)]
        struct Full<'a> {
            #[serde(flatten)]
            printed: &'a Printed<'a>,
            stats: &'a nic_emu::Stats,
        }
        dir.write_json(
            "soak.json",
            &Full {
                printed: &printed,
                stats: &run.stats,
            },
        )
        .map_err(e)?;
        dir.write_csv("timeline.csv", &run.timeline).map_err(e)?;
        dir.write_summary(&summary_md(a, r, &before, &after))
            .map_err(e)?;
        if !a.common.json {
            eprintln!("results: {}", dir.path().display());
        }
    }
    if r.passed {
        Ok(())
    } else {
        Err(format!(
            "the soak failed: unexplained_loss {}, corrupt {}, duplicates {}, foreign {}, \
             verified {}{}",
            r.unexplained_loss,
            r.corrupt,
            r.duplicates,
            r.foreign,
            r.verified,
            if r.notes.is_empty() {
                String::new()
            } else {
                format!(" ({})", r.notes.join("; "))
            }
        ))
    }
}

fn churn_text(ms: u64) -> String {
    if ms == 0 {
        "none".into()
    } else {
        format!("one application per thread every {ms} ms")
    }
}

/// The accounting as a table: what became of every frame.
fn accounting_table(r: &SoakReport) -> Table {
    let mut t = Table::new(["", "frames", "share"]);
    let share = |n: u64| format!("{:.4}", n as f64 / r.frames.max(1) as f64);
    t.push(["sent".to_string(), r.frames.to_string(), share(r.frames)]);
    t.push([
        "verified".to_string(),
        r.verified.to_string(),
        share(r.verified),
    ]);
    t.push([
        "dropped (counted)".to_string(),
        r.dropped_total.to_string(),
        share(r.dropped_total),
    ]);
    for (cause, &n) in &r.dropped {
        if n > 0 {
            t.push([format!("  {cause}"), n.to_string(), share(n)]);
        }
    }
    t.push([
        "corrupt".to_string(),
        r.corrupt.to_string(),
        share(r.corrupt),
    ]);
    t.push([
        "duplicates".to_string(),
        r.duplicates.to_string(),
        share(r.duplicates),
    ]);
    t.push([
        "unexplained_loss".to_string(),
        r.unexplained_loss.to_string(),
        format!("{:.4}", r.unexplained_loss as f64 / r.frames.max(1) as f64),
    ]);
    t
}

fn roles_table(r: &SoakReport) -> Table {
    let mut t = Table::new([
        "application",
        "attached",
        "handled",
        "unread_on_detach",
        "dropped",
    ]);
    for x in &r.roles {
        t.push([
            x.role.name().to_string(),
            x.attached.to_string(),
            x.handled.to_string(),
            x.unread_on_detach.to_string(),
            x.app_dropped.to_string(),
        ]);
    }
    t
}

fn verdict(r: &SoakReport) -> String {
    if r.passed {
        "PASS: every frame verified back or counted under a drop cause".into()
    } else {
        format!("FAIL: {}", r.notes.join("; "))
    }
}

fn human(a: &SoakArgs, r: &SoakReport) -> String {
    let mut s = format!(
        "soak {:.1} s, sizes {} B (IPv4/UDP, IPv6/UDP, non-IP), {} flows on each of {} \
         generator ports, {} applications on 2 threads, churn {}\n\n",
        r.elapsed_s,
        a.sizes,
        a.flows,
        r.ports.len(),
        r.applications,
        churn_text(a.churn_ms)
    );
    s.push_str(&text_table(&accounting_table(r)));
    s.push('\n');
    s.push_str(&text_table(&roles_table(r)));
    s.push_str(&format!(
        "\n{:.3} Mpps offered, {:.3} Mpps verified ({:.2} Gb/s on the wire); {} applications \
         replaced ({} graceful, {} abrupt detaches); drain {:.0} ms\n{}\n",
        r.offered_mpps,
        r.verified_mpps,
        r.verified_gbps,
        r.attach_cycles,
        r.graceful_detaches,
        r.abrupt_detaches,
        r.drain_ms,
        verdict(r)
    ));
    s
}

fn summary_md(a: &SoakArgs, r: &SoakReport, before: &Probe, after: &Probe) -> String {
    format!(
        "# Soak\n\n{:.0} s, sizes {} B (IPv4/UDP, IPv6/UDP, non-IP), {} flows on each of {} \
         generator ports, {} applications on 2 threads (Ensō fallback pipes, Ensō \
         flow-bound pipes, packetized RSS queues, on both ports), churn {}.\n\n\
         **{}**\n\n{}\n{}\n{:.3} Mpps offered, {:.3} Mpps verified ({:.2} Gb/s on the \
         wire); {} applications replaced ({} graceful, {} abrupt detaches); drain {:.0} ms.\n\n\
         Probe round trip {:.0} ns before, {:.0} ns after.\n",
        r.elapsed_s,
        a.sizes,
        a.flows,
        r.ports.len(),
        r.applications,
        churn_text(a.churn_ms),
        verdict(r),
        accounting_table(r).markdown(),
        roles_table(r).markdown(),
        r.offered_mpps,
        r.verified_mpps,
        r.verified_gbps,
        r.attach_cycles,
        r.graceful_detaches,
        r.abrupt_detaches,
        r.drain_ms,
        before.rtt_ns,
        after.rtt_ns,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_wire_sizes_made_frame_lengths() {
        assert_eq!(parse_sizes("64-1518"), Ok(SizeSpec::Range(60, 1514)));
        assert_eq!(parse_sizes("64/128"), Ok(SizeSpec::Mix(vec![60, 124])));
        assert_eq!(parse_sizes("1518"), Ok(SizeSpec::Fixed(1514)));
        assert!(parse_sizes("60-1518").is_err());
        assert!(parse_sizes("64-9000").is_err());
        assert!(parse_sizes("1518-64").is_err());
        assert!(parse_sizes("64//128").is_err());
        assert!(parse_sizes("x").is_err());
    }
}
