//! `bench pcie`: PCIe bytes per packet, data vs metadata, measured and
//! modelled, and the packet rate real hardware would reach.

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use bench::emu::Interface;
use bench::pcie::{self, PciePlan, PcieResult};
use bench::plot::{BarChart, LineChart};
use bench::progress::Progress;
use bench::results::{ResultsDir, Table};

use super::echo::{text_table, Which};
use crate::print_json;

#[derive(Args, Debug, Clone, Serialize)]
pub(crate) struct PcieArgs {
    /// Print the results as one JSON array on stdout, one object per
    /// interface and size, and nothing on stderr but errors.
    #[arg(long)]
    pub(crate) json: bool,
    /// Interface(s) to measure.
    #[arg(long, value_enum, default_value_t = Which::Both)]
    pub(crate) interface: Which,
    /// Packet sizes on the wire with FCS.
    #[arg(
        long,
        default_value = "64,128,256,512,1024,1518",
        value_name = "A,B,..."
    )]
    pub(crate) sizes: String,
    /// Packets counted per interface and size (after a warm-up).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1000..=100_000_000))]
    pub(crate) packets: u64,
    /// Engine steps per application pass: how far the NIC gets ahead of the
    /// application (2 x 32 frames by default: saturation).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) steps_per_poll: u32,
    /// Generator frames per engine step.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub(crate) burst: u64,
    /// Pipes (Ensō) or queues (packetized).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub(crate) pipes: u32,
    /// Write a results directory under results/.
    #[arg(long)]
    pub(crate) save: bool,
    /// Write the results directory here instead (implies --save).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
}

pub(crate) fn plan(args: &PcieArgs) -> PciePlan {
    let mut plan = PciePlan {
        packets: args.packets,
        warmup_packets: (args.packets / 5).max(5000),
        ..Default::default()
    };
    plan.stepped.steps_per_poll = args.steps_per_poll;
    plan.stepped.burst = args.burst as usize;
    plan.stepped.pipes = args.pipes;
    plan
}

pub(crate) fn measure_all(
    args: &PcieArgs,
    progress: &mut Progress,
) -> Result<Vec<PcieResult>, String> {
    let sizes = super::parse_sizes(&args.sizes)?;
    let plan = plan(args);
    let mut out = Vec::new();
    for &size in &sizes {
        for i in args.interface.interfaces() {
            out.push(pcie::measure(&plan, i, size).map_err(|e| format!("{i} {size} B: {e}"))?);
            progress.step(1, &format!("{i} {size} B"));
        }
    }
    Ok(out)
}

pub(crate) fn table(results: &[PcieResult]) -> Table {
    let mut t = Table::new([
        "size",
        "interface",
        "up B/pkt",
        "(model)",
        "down B/pkt",
        "(model)",
        "data B/pkt",
        "metadata B/pkt",
        "metadata",
        "(model)",
        "k_rx",
        "k_tx",
        "Gen3x16+100G Mpps",
        "(model)",
    ]);
    let k = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |v| format!("{v:.1}"));
    for r in results {
        t.push([
            r.pkt_size.to_string(),
            r.interface.clone(),
            format!("{:.1}", r.up_bytes_per_pkt),
            format!("{:.1}", r.model_up_bytes_per_pkt),
            format!("{:.1}", r.down_bytes_per_pkt),
            format!("{:.1}", r.model_down_bytes_per_pkt),
            format!("{:.1}", r.data_bytes_per_pkt),
            format!("{:.1}", r.metadata_bytes_per_pkt),
            format!("{:.1}%", r.metadata_fraction * 100.0),
            format!("{:.1}%", r.model_metadata_fraction * 100.0),
            k(r.k_rx),
            k(r.k_tx),
            format!("{:.1}", r.max_mpps_measured),
            format!("{:.1}", r.max_mpps_model),
        ]);
    }
    t
}

pub(crate) fn reference_table(results: &[PcieResult]) -> Table {
    let mut t = Table::new([
        "size",
        "100GbE Mpps",
        "E810 fit Mpps",
        "(metadata)",
        "DPDK default Mpps",
        "(metadata)",
        "Ensō k=32 Mpps",
        "(metadata)",
    ]);
    let mut seen = Vec::new();
    for r in results {
        if seen.contains(&r.pkt_size) {
            continue;
        }
        seen.push(r.pkt_size);
        t.push([
            r.pkt_size.to_string(),
            format!("{:.1}", r.line_rate_mpps),
            format!("{:.1}", r.max_mpps_e810_fit),
            format!("{:.1}%", r.metadata_fraction_e810_fit * 100.0),
            format!("{:.1}", r.max_mpps_dpdk_default),
            format!("{:.1}%", r.metadata_fraction_dpdk_default * 100.0),
            format!("{:.1}", r.max_mpps_enso_k32),
            format!("{:.1}%", r.metadata_fraction_enso_k32 * 100.0),
        ]);
    }
    t
}

const METHOD: &str = "Deterministic stepped echo on the emulated NIC (engine step(s), then the \
application handles everything it finds; no timing involved). Every DMA transfer and register \
write is counted as PCIe Gen3 x16 TLPs (MPS 256, MRRS 512, RCB 64). Sizes are wire sizes \
with FCS; the frame on PCIe is 4 B shorter (the model's s). Data = data TLPs with their \
headers, including read requests for TX data; metadata = notifications, descriptors and \
register writes. The model is pcie-model's closed form, given the measured packets per \
notification (Ensō) or our driver's parameters (packetized: 16 B descriptors, write-back and \
fetch batching of the device, thresholds 32). Rates are min(PCIe Gen3 x16, 100 GbE).";

pub(crate) fn print(results: &[PcieResult]) {
    println!("{METHOD}");
    print!("{}", text_table(&table(results)));
    println!("paper's reference configurations on PCIe Gen3 x16 + 100 GbE (model):");
    print!("{}", text_table(&reference_table(results)));
    for (line, _) in pcie::targets(results) {
        println!("target: {line}");
    }
    let drops: u64 = results.iter().map(|r| r.drops).sum();
    println!("drops: {drops}; contended: not applicable (single-threaded, deterministic)");
}

/// Checks every value before anything runs.
pub(crate) fn check(args: &PcieArgs) -> Result<(), String> {
    super::parse_sizes(&args.sizes).map(|_| ())
}

/// The run's progress: one step per size and interface (on stderr; none
/// with `--json`).
pub(crate) fn progress(args: &PcieArgs) -> Result<Progress, String> {
    let sizes = super::parse_sizes(&args.sizes)?;
    let n = sizes.len() * args.interface.interfaces().len();
    Ok(Progress::new("pcie", n as u64, args.json))
}

pub(crate) fn run(args: &PcieArgs) -> Result<(), String> {
    let mut progress = progress(args)?;
    let results = measure_all(args, &mut progress)?;
    progress.finish();
    if args.json {
        print_json(&results)?;
    } else {
        print(&results);
    }
    if let Some(dir) = super::results_dir("pcie", args.save, &args.out)? {
        save(&dir, args, &results).map_err(|e| e.to_string())?;
        if !args.json {
            eprintln!("results: {}", dir.path().display());
        }
    }
    Ok(())
}

/// CSV row (no nested values).
#[derive(Serialize)]
struct Row<'a> {
    interface: &'a str,
    pkt_size: usize,
    frame_bytes: u32,
    packets: u64,
    up_bytes_per_pkt: f64,
    down_bytes_per_pkt: f64,
    data_bytes_per_pkt: f64,
    metadata_bytes_per_pkt: f64,
    metadata_fraction: f64,
    k_rx: Option<f64>,
    k_tx: Option<f64>,
    model_up_bytes_per_pkt: f64,
    model_down_bytes_per_pkt: f64,
    model_metadata_fraction: f64,
    max_mpps_measured: f64,
    max_mpps_model: f64,
    line_rate_mpps: f64,
    max_mpps_e810_fit: f64,
    max_mpps_dpdk_default: f64,
    max_mpps_enso_k32: f64,
}

pub(crate) fn save(
    dir: &ResultsDir,
    args: &PcieArgs,
    results: &[PcieResult],
) -> Result<(), bench::results::ResultsError> {
    dir.write_config(&(args, plan(args)))?;
    dir.write_json("pcie.json", results)?;
    let rows: Vec<Row<'_>> = results
        .iter()
        .map(|r| Row {
            interface: &r.interface,
            pkt_size: r.pkt_size,
            frame_bytes: r.frame_bytes,
            packets: r.packets,
            up_bytes_per_pkt: r.up_bytes_per_pkt,
            down_bytes_per_pkt: r.down_bytes_per_pkt,
            data_bytes_per_pkt: r.data_bytes_per_pkt,
            metadata_bytes_per_pkt: r.metadata_bytes_per_pkt,
            metadata_fraction: r.metadata_fraction,
            k_rx: r.k_rx,
            k_tx: r.k_tx,
            model_up_bytes_per_pkt: r.model_up_bytes_per_pkt,
            model_down_bytes_per_pkt: r.model_down_bytes_per_pkt,
            model_metadata_fraction: r.model_metadata_fraction,
            max_mpps_measured: r.max_mpps_measured,
            max_mpps_model: r.max_mpps_model,
            line_rate_mpps: r.line_rate_mpps,
            max_mpps_e810_fit: r.max_mpps_e810_fit,
            max_mpps_dpdk_default: r.max_mpps_dpdk_default,
            max_mpps_enso_k32: r.max_mpps_enso_k32,
        })
        .collect();
    dir.write_csv("pcie.csv", &rows)?;
    let mut md = format!("# PCIe bytes per packet\n\n{METHOD}\n\n");
    md.push_str(&table(results).markdown());
    md.push_str("\nThe paper's reference configurations (model only):\n\n");
    md.push_str(&reference_table(results).markdown());
    md.push('\n');
    for (line, _) in pcie::targets(results) {
        md.push_str(&format!("- Target: {line}.\n"));
    }
    dir.write_summary(&md)?;

    let cats: Vec<String> = results
        .iter()
        .map(|r| format!("{} {}", short(&r.interface), r.pkt_size))
        .collect();
    let chart = BarChart::new(
        "PCIe link bytes per packet (B), data and metadata, both directions\n\
         Gen3 x16 TLPs counted on a stepped single-threaded run (no cross-core placement)",
        "bytes per packet",
        cats,
    )
    .series(
        "data",
        results.iter().map(|r| r.data_bytes_per_pkt).collect(),
    )
    .series(
        "metadata",
        results.iter().map(|r| r.metadata_bytes_per_pkt).collect(),
    )
    .stacked();
    dir.bar_chart("bytes.svg", &chart)?;
    let mut rate = LineChart::new(
        "Max packet rate (Mpps) on PCIe Gen3 x16 + 100 GbE vs packet size (B)\n\
         from the link bytes of a stepped single-threaded run (no cross-core placement)",
        "packet size on the wire (B), log axis",
        "Mpps",
    )
    .log_x();
    for i in Interface::BOTH {
        let pts: Vec<(f64, f64)> = results
            .iter()
            .filter(|r| r.interface == i.name())
            .map(|r| (r.pkt_size as f64, r.max_mpps_measured))
            .collect();
        if !pts.is_empty() {
            rate = rate.series(&format!("{i} (measured bytes)"), pts);
        }
    }
    let mut seen = Vec::new();
    let mut line = Vec::new();
    for r in results {
        if !seen.contains(&r.pkt_size) {
            seen.push(r.pkt_size);
            line.push((r.pkt_size as f64, r.line_rate_mpps));
        }
    }
    rate = rate.series("100 GbE line rate", line);
    dir.line_chart("rate.svg", &rate)?;
    Ok(())
}

fn short(interface: &str) -> &str {
    match interface {
        "packetized" => "pkt",
        other => other,
    }
}
