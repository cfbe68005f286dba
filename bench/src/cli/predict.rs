//! `bench predict`: the performance model's predictions for the paper's
//! hardware, against the paper's numbers.

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use bench::predict::{self, params, Inputs, Report};
use bench::results::Table;

use super::echo::text_table;
use crate::print_json;

#[derive(Args, Debug, Clone, Serialize)]
pub(crate) struct PredictArgs {
    /// Print one JSON object on stdout (`rows`, `parameters` with their
    /// sources, `inputs`, `informed_by_paper`, `held_out`, `misses`) and
    /// nothing on stderr but errors.
    #[arg(long)]
    pub(crate) json: bool,
    /// Packet sizes on the wire with FCS for the echo rows.
    #[arg(
        long,
        default_value = "64,128,256,512,1024,1518",
        value_name = "A,B,..."
    )]
    pub(crate) sizes: String,
    /// Packets counted per interface and size in the stepped echo that
    /// measures packets per notification and PCIe bytes.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1000..=10_000_000))]
    pub(crate) packets: u64,
    /// A `bench echo` results directory for the echo costs (default: the
    /// checked-in one named in the model's parameters).
    #[arg(long, value_name = "DIR")]
    pub(crate) echo_from: Option<PathBuf>,
    /// A `bench apps` results directory for the applications' costs
    /// (default: the checked-in one named in the model's parameters).
    #[arg(long, value_name = "DIR")]
    pub(crate) apps_from: Option<PathBuf>,
}

pub(crate) fn check(args: &PredictArgs) -> Result<(), String> {
    let sizes = super::parse_sizes(&args.sizes)?;
    if !sizes.contains(&64) {
        return Err("--sizes must include 64: the paper's numbers are at 64 B".into());
    }
    for d in [&args.echo_from, &args.apps_from].into_iter().flatten() {
        if !d.is_dir() {
            return Err(format!("{}: not a directory", d.display()));
        }
    }
    Ok(())
}

pub(crate) fn run(args: &PredictArgs) -> Result<(), String> {
    let sizes = super::parse_sizes(&args.sizes)?;
    let base = predict::default_results_dir();
    let echo_dir = args
        .echo_from
        .clone()
        .unwrap_or_else(|| base.join(params::ECHO_COSTS));
    let apps_dir = args
        .apps_from
        .clone()
        .unwrap_or_else(|| base.join(params::APPS_COSTS));
    let mut skipped = Vec::new();
    let echo = predict::load_echo(&echo_dir, &mut skipped)?;
    let apps = predict::load_apps(&apps_dir, &mut skipped)?;
    if !args.json {
        eprintln!("stepped echo at {} sizes, both interfaces ...", sizes.len());
    }
    let counts = predict::measure_sizes(&sizes, args.packets)?;
    let report = predict::report(Inputs {
        sizes: counts,
        echo,
        apps,
        skipped,
    });
    if args.json {
        return print_json(&report);
    }
    print!("{}", human(&report));
    Ok(())
}

fn fmt(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The report as text: the rows, what missed, what informed the
/// parameters, the parameters.
pub(crate) fn human(r: &Report) -> String {
    let mut t = Table::new(["metric", "unit", "predicted", "paper", "error", "bound_by"]);
    for row in &r.rows {
        t.push([
            row.metric.clone(),
            row.unit.clone(),
            fmt(row.predicted),
            row.paper.map_or_else(|| "-".into(), fmt),
            row.error
                .map_or_else(|| "-".into(), |e| format!("{:+.1}%", e * 100.0)),
            row.bound_by.clone(),
        ]);
    }
    let mut s = text_table(&t);
    let with_paper = r.rows.iter().filter(|x| x.paper.is_some()).count();
    s.push_str(&format!(
        "\n{} of {with_paper} rows with a paper number are within 15%.\n",
        with_paper - r.misses.len()
    ));
    if !r.misses.is_empty() {
        s.push_str("Missed (more than 15% off):\n");
        for m in &r.misses {
            s.push_str(&format!("  {m}\n"));
        }
    }
    s.push_str("Paper numbers that informed parameters:\n");
    for m in &r.informed_by_paper {
        s.push_str(&format!("  {m}\n"));
    }
    s.push_str(&format!(
        "Held out: every paper number in the table ({with_paper}).\n"
    ));
    if !r.inputs.skipped.is_empty() {
        s.push_str("Cost rows skipped:\n");
        for m in &r.inputs.skipped {
            s.push_str(&format!("  {m}\n"));
        }
    }
    s.push_str("\nParameters:\n");
    let mut p = Table::new(["name", "value", "unit", "source"]);
    for x in &r.parameters {
        p.push([
            x.name.to_string(),
            fmt(x.value),
            x.unit.to_string(),
            x.source.to_string(),
        ]);
    }
    s.push_str(&text_table(&p));
    s
}
