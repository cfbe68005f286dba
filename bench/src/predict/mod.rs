//! A small performance model of Ensō and the packetized baseline on the
//! paper's hardware, fed with counts measured here, and compared with the
//! paper's numbers.
//!
//! Three kinds of limit, each a packet rate; a prediction is the lowest:
//!
//! - **Ethernet**: `line_rate / ((s + 24) * 8)` for a frame of `s` bytes in
//!   memory ([`params::LINE_RATE_GBPS`], [`params::ETH_OVERHEAD_BYTES`]).
//! - **PCIe**: the link's TLP bandwidth over the link bytes a packet needs
//!   in its busier direction (`pcie_model`'s closed form with the
//!   parameters in [`params`]); for Ensō with the packets per notification
//!   (`k_rx`, `k_tx`) *measured* in a stepped, saturated echo here.
//! - **core**: one core's rate, `1e3 / ns` with the application's busy
//!   time per packet (or request) measured on the development machine in
//!   threaded runs whose cores share a last-level cache
//!   ([`params::SHARED_LLC_PROBE_NS`]), read from a results directory.
//!
//! No parameter is fitted to the paper's results; see [`params`] for what
//! each number is and where it comes from. [`Report::informed_by_paper`]
//! and [`Report::held_out`] say so in the output.

pub mod params;

use std::path::Path;

use pcie_model::{ethernet_max_rate_mpps, pcie_max_rate_mpps, BytesPerPacket, EnsoParams};
use serde::Serialize;

use crate::emu::Interface;
use crate::frames;
use crate::pcie::{self, PciePlan};

/// The paper's 64 B Ensō PCIe-limited rates against packets per
/// notification `k` (pcie-bench's model, as the paper gives them).
pub const PAPER_ENSO_RATE_VS_K: [(f64, f64); 7] = [
    (1.0, 45.6),
    (2.0, 71.1),
    (4.0, 98.7),
    (8.0, 122.5),
    (16.0, 137.3),
    (32.0, 146.1),
    (64.0, 151.0),
];

/// Counts measured in the stepped echo at one size.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SizeCounts {
    /// Wire size with FCS.
    pub wire_size: usize,
    /// Frame bytes in memory and on PCIe (`s`).
    pub frame_bytes: u32,
    /// Ensō: packets per RX notification at saturation.
    pub k_rx: f64,
    /// Ensō: packets per TX notification.
    pub k_tx: f64,
    /// Ensō link bytes per packet measured on the emulated NIC.
    pub enso_measured: BytesPerPacket,
    /// Packetized link bytes per packet measured on the emulated NIC (our
    /// driver: 16 B descriptors; context only, the paper ran DPDK's).
    pub packetized_measured: BytesPerPacket,
}

/// An application's cost per unit on each interface.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AppCost {
    /// `maglev`, `telemetry`, `kv`, `log_monitor`.
    pub app: String,
    /// Which row (patterns, batch) where an app has several.
    pub variant: String,
    /// `packets` or `requests`.
    pub unit: String,
    /// Ensō application busy time per unit, ns.
    pub enso_ns: f64,
    /// Packetized application busy time per unit, ns.
    pub packetized_ns: f64,
    /// Wire bits per unit (for Gb/s), from the run's rate and Gb/s.
    pub bits_per_unit: f64,
    /// The run's cross-core probe, ns.
    pub probe_rtt_ns: f64,
    /// Results file it came from.
    pub source: String,
}

/// Echo costs per packet at 64 B.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EchoCost {
    /// Ensō application busy time per packet, ns.
    pub enso_ns: f64,
    /// Packetized, ns.
    pub packetized_ns: f64,
    /// The run's probe, ns.
    pub probe_rtt_ns: f64,
    /// Results file it came from.
    pub source: String,
}

/// Everything measured that the model is fed with.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Inputs {
    /// Stepped counts per size (64 B first).
    pub sizes: Vec<SizeCounts>,
    /// Echo application costs.
    pub echo: Option<EchoCost>,
    /// Application costs.
    pub apps: Vec<AppCost>,
    /// Rows or files skipped, and why.
    pub skipped: Vec<String>,
}

/// One prediction.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// What is predicted.
    pub metric: String,
    /// Unit of `predicted` and `paper`.
    pub unit: String,
    /// The model's value.
    pub predicted: f64,
    /// The paper's value, where it gives one.
    pub paper: Option<f64>,
    /// `predicted / paper - 1`.
    pub error: Option<f64>,
    /// Which limit set the value: `ethernet`, `pcie_up`, `pcie_down`,
    /// `core`, or `model` for a quantity that is not a rate.
    pub bound_by: String,
    /// Whether `|error| <= 0.15`.
    pub within_15pct: Option<bool>,
    /// How it was computed.
    pub note: String,
}

/// The whole prediction.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// The predictions.
    pub rows: Vec<Row>,
    /// Every parameter with its source.
    pub parameters: Vec<params::Param>,
    /// What was measured.
    pub inputs: Inputs,
    /// Paper numbers that informed a parameter (none of its results).
    pub informed_by_paper: Vec<String>,
    /// Paper numbers held out (compared with, never used).
    pub held_out: Vec<String>,
    /// Rows with a paper number more than 15% off.
    pub misses: Vec<String>,
}

/// Ethernet-bound rate (Mpps) for frames of `s` bytes in memory.
pub fn ethernet_mpps(s: u32) -> f64 {
    ethernet_max_rate_mpps(params::LINE_RATE_GBPS, s)
}

/// Wire Gb/s (EnsōGen's throughput: frame plus 24 B) at `mpps`.
pub fn wire_gbps(mpps: f64, s: u32) -> f64 {
    mpps * (f64::from(s) + params::ETH_OVERHEAD_BYTES) * 8.0 / 1e3
}

/// Ensō link bytes per packet with `k_rx`, `k_tx`.
pub fn enso_bytes(k_rx: f64, k_tx: f64, s: u32) -> BytesPerPacket {
    EnsoParams {
        k_rx,
        k_tx,
        notification_bytes: params::NOTIFICATION_BYTES,
    }
    .bytes_per_packet(&params::LINK, s)
}

/// The packetized baseline's link bytes per packet.
pub fn packetized_bytes(s: u32) -> BytesPerPacket {
    params::PACKETIZED.bytes_per_packet(&params::LINK, s)
}

/// PCIe-bound rate (Mpps) and the direction that binds.
pub fn pcie_mpps(b: BytesPerPacket) -> (f64, &'static str) {
    let rate = pcie_max_rate_mpps(&params::LINK, b.up, b.down);
    (
        rate,
        if b.up >= b.down {
            "pcie_up"
        } else {
            "pcie_down"
        },
    )
}

/// The lowest of the limits given, with its name.
pub fn lowest(limits: &[(f64, &str)]) -> (f64, String) {
    limits.iter().filter(|(v, _)| v.is_finite()).fold(
        (f64::INFINITY, String::new()),
        |acc, &(v, n)| {
            if v < acc.0 {
                (v, n.to_string())
            } else {
                acc
            }
        },
    )
}

/// DMA payload bytes per packet (TLP headers excluded: what a memory-side
/// counter sees), `(written to memory, read from memory)`, Ensō.
pub fn enso_payload(k_rx: f64, k_tx: f64, s: u32) -> (f64, f64) {
    let s64 = f64::from(s.div_ceil(64) * 64);
    let n = f64::from(params::NOTIFICATION_BYTES);
    let bell = f64::from(pcie_model::tlp::DOORBELL_PAYLOAD);
    let write = s64 + n / k_rx + n / k_tx;
    let read = n / k_tx + s64 + bell * (2.0 / k_rx + 1.0 / k_tx);
    (write, read)
}

/// The same for the packetized baseline.
pub fn packetized_payload(s: u32) -> (f64, f64) {
    let p = params::PACKETIZED;
    let s = f64::from(s);
    let bell = f64::from(pcie_model::tlp::DOORBELL_PAYLOAD);
    let write = s + f64::from(p.d_rx) + f64::from(p.d_tx) / f64::from(p.rs_threshold);
    let read = f64::from(p.d_rx)
        + f64::from(p.d_tx)
        + s
        + bell / f64::from(p.refill_threshold)
        + bell / f64::from(p.tx_burst);
    (write, read)
}

/// Core-bound rate in millions per second for `ns` per unit measured here.
pub fn core_rate(ns: f64) -> f64 {
    1e3 / (ns * params::HOST_NS_SCALE)
}

fn row(
    metric: &str,
    unit: &str,
    predicted: f64,
    paper: Option<f64>,
    bound: &str,
    note: &str,
) -> Row {
    let error = paper.map(|p| predicted / p - 1.0);
    Row {
        metric: metric.to_string(),
        unit: unit.to_string(),
        predicted,
        paper,
        error,
        bound_by: bound.to_string(),
        within_15pct: error.map(|e| e.abs() <= 0.15),
        note: note.to_string(),
    }
}

/// The predictions from `inputs`.
pub fn predict(inputs: &Inputs) -> Vec<Row> {
    let mut rows = Vec::new();
    let echo = inputs.echo.as_ref();
    let at64 = inputs.sizes.iter().find(|c| c.wire_size == 64);

    // Echo at every size, both interfaces.
    for c in &inputs.sizes {
        let s = c.frame_bytes;
        let eth = ethernet_mpps(s);
        let (pe, be) = pcie_mpps(enso_bytes(c.k_rx, c.k_tx, s));
        let (pp, bp) = pcie_mpps(packetized_bytes(s));
        // Echo touches one line per packet whatever its size: the 64 B
        // cost stands for every size.
        let ce = echo.map_or(f64::INFINITY, |e| core_rate(e.enso_ns));
        let cp = echo.map_or(f64::INFINITY, |e| core_rate(e.packetized_ns));
        let (ve, ne) = lowest(&[(eth, "ethernet"), (pe, be), (ce, "core")]);
        let (vp, np) = lowest(&[(eth, "ethernet"), (pp, bp), (cp, "core")]);
        let big = c.wire_size == 64;
        rows.push(row(
            &format!("echo_enso_{}B_1core", c.wire_size),
            "Mpps",
            ve,
            big.then_some(148.8),
            &ne,
            &format!(
                "k_rx {:.1}, k_tx {:.1} measured; PCIe {pe:.1}",
                c.k_rx, c.k_tx
            ),
        ));
        rows.push(row(
            &format!("echo_packetized_{}B_1core", c.wire_size),
            "Mpps",
            vp,
            big.then_some(59.0),
            &np,
            &format!("DPDK defaults; PCIe {pp:.1}"),
        ));
    }

    if let Some(c) = at64 {
        let s = c.frame_bytes;
        let pb = packetized_bytes(s);
        let (pp, bp) = pcie_mpps(pb);
        rows.push(row(
            "pcie_max_packetized_64B",
            "Mpps",
            pp,
            Some(88.0),
            bp,
            &format!(
                "{:.1} B up / {:.1} B down per packet (DPDK defaults); emulated driver measured {:.1} / {:.1}",
                pb.up, pb.down, c.packetized_measured.up, c.packetized_measured.down
            ),
        ));
        let eb = enso_bytes(c.k_rx, c.k_tx, s);
        let (pe, be) = pcie_mpps(eb);
        rows.push(row(
            "pcie_max_enso_64B",
            "Mpps",
            pe,
            None,
            be,
            &format!(
                "{:.1} B up / {:.1} B down at the measured k; emulated NIC measured {:.1} / {:.1}",
                eb.up, eb.down, c.enso_measured.up, c.enso_measured.down
            ),
        ));

        // Notification ceilings at 64 B, as offered load in Gb/s.
        let eth = ethernet_mpps(s);
        let (pr, br) = pcie_mpps(eb);
        let (vr, nr) = lowest(&[(eth, "ethernet"), (pr, br)]);
        rows.push(row(
            "reactive_ceiling_64B",
            "Gb/s",
            wire_gbps(vr, s),
            Some(100.0),
            &nr,
            &format!("reactive notifications, k_rx {:.1} at saturation", c.k_rx),
        ));
        let (pk, bk) = pcie_mpps(enso_bytes(params::PER_PACKET_K_RX, c.k_tx, s));
        let (vk, nk) = lowest(&[(eth, "ethernet"), (pk, bk)]);
        rows.push(row(
            "per_packet_ceiling_64B",
            "Gb/s",
            wire_gbps(vk, s),
            Some(50.0),
            &nk,
            &format!(
                "one RX notification per packet, TX k {:.1}: {vk:.1} Mpps",
                c.k_tx
            ),
        ));

        // Core-bound echo rates.
        if let Some(e) = echo {
            rows.push(row(
                "core_enso_echo_64B",
                "Mpps",
                core_rate(e.enso_ns),
                None,
                "core",
                &format!("{:.1} ns per packet measured ({})", e.enso_ns, e.source),
            ));
            rows.push(row(
                "core_packetized_echo_64B",
                "Mpps",
                core_rate(e.packetized_ns),
                None,
                "core",
                &format!(
                    "{:.1} ns per packet measured ({})",
                    e.packetized_ns, e.source
                ),
            ));
        }

        // Metadata on PCIe (memory-side bytes over goodput).
        let g = params::GOODPUT_BYTES_64;
        let (pw, pr) = packetized_payload(s);
        rows.push(row(
            "pcie_read_over_goodput_packetized_64B",
            "x",
            pr / g,
            Some(1.64),
            "model",
            &format!("{pr:.2} B read from memory per {g} B of goodput"),
        ));
        rows.push(row(
            "pcie_write_over_goodput_packetized_64B",
            "x",
            pw / g,
            Some(1.45),
            "model",
            &format!("{pw:.2} B written per {g} B"),
        ));
        rows.push(row(
            "pcie_metadata_share_packetized_64B",
            "fraction",
            1.0 - g / pr,
            Some(0.39),
            "model",
            "share of the read bandwidth that is not goodput",
        ));
        let (ew, er) = enso_payload(c.k_rx, c.k_tx, s);
        rows.push(row(
            "pcie_write_over_goodput_enso_64B",
            "x",
            ew / g,
            Some(1.06),
            "model",
            &format!("{ew:.2} B written per {g} B at the measured k"),
        ));
        rows.push(row(
            "pcie_read_over_goodput_enso_64B",
            "x",
            er / g,
            Some(1.03),
            "model",
            &format!("{er:.2} B read per {g} B at the measured k"),
        ));
    }

    // The closed form against the paper's k sweep (a check of arithmetic,
    // not independent evidence: the paper's values come from the same
    // model).
    let s64 = pcie_model::host_frame_bytes(64);
    for (k, paper) in PAPER_ENSO_RATE_VS_K {
        let (v, b) = pcie_mpps(enso_bytes(k, k, s64));
        rows.push(row(
            &format!("pcie_enso_64B_k{k}"),
            "Mpps",
            v,
            Some(paper),
            b,
            "PCIe only, k packets per RX and TX notification (model check)",
        ));
    }

    // Applications, one core each.
    let s = at64.map_or(s64, |c| c.frame_bytes);
    let enso_pcie = at64.map_or(f64::INFINITY, |c| {
        pcie_mpps(enso_bytes(c.k_rx, c.k_tx, s)).0
    });
    let pkt_pcie = pcie_mpps(packetized_bytes(s)).0;
    for (app, variant, e_paper, p_paper, unit) in [
        ("maglev", "", 138.0, 23.0, "Mpps"),
        ("telemetry", "", 121.0, 33.9, "Mpps"),
        ("kv", "", 7.6, 5.8, "Mops"),
    ] {
        let Some(a) = inputs.apps.iter().find(|a| a.app == app) else {
            continue;
        };
        let _ = variant;
        for (side, ns, paper, pcie_rate) in [
            ("enso", a.enso_ns, e_paper, enso_pcie),
            ("packetized", a.packetized_ns, p_paper, pkt_pcie),
        ] {
            let core = core_rate(ns);
            let (v, b) = if app == "kv" {
                (core, "core".to_string())
            } else {
                lowest(&[
                    (ethernet_mpps(s), "ethernet"),
                    (pcie_rate, "pcie"),
                    (core, "core"),
                ])
            };
            rows.push(row(
                &format!("{app}_{side}_1core"),
                unit,
                v,
                Some(paper),
                &b,
                &format!(
                    "{ns:.1} ns per {} measured ({})",
                    a.unit.trim_end_matches('s'),
                    a.source
                ),
            ));
        }
    }
    let logs: Vec<&AppCost> = inputs
        .apps
        .iter()
        .filter(|a| a.app == "log_monitor")
        .collect();
    if !logs.is_empty() {
        for (side, paper) in [("enso", 100.0), ("packetized", 53.2)] {
            let best = logs
                .iter()
                .map(|a| {
                    let ns = if side == "enso" {
                        a.enso_ns
                    } else {
                        a.packetized_ns
                    };
                    (a.bits_per_unit / (ns * params::HOST_NS_SCALE), *a)
                })
                .fold(
                    (0.0, None),
                    |acc: (f64, Option<&AppCost>), (g, a)| {
                        if g > acc.0 {
                            (g, Some(a))
                        } else {
                            acc
                        }
                    },
                );
            let (v, b) = lowest(&[(params::LINE_RATE_GBPS, "ethernet"), (best.0, "core")]);
            rows.push(row(
                &format!("log_monitor_{side}_1core_max"),
                "Gb/s",
                v,
                Some(paper),
                &b,
                &format!(
                    "fastest of {} pattern sets and logs ({})",
                    logs.len(),
                    best.1.map_or("", |a| a.variant.as_str())
                ),
            ));
        }
    }
    rows
}

/// Paper numbers that set a parameter.
pub fn informed_by_paper() -> Vec<String> {
    vec![
        "testbed: PCIe 3.0 x16, 100 GbE, Core i9-9960X at 3.1 GHz (not a result)".into(),
        "none of the paper's results (echo, notifications, Table 1, PCIe shares) set a parameter"
            .into(),
    ]
}

/// Builds the report: rows, parameters, held-out list, misses.
pub fn report(inputs: Inputs) -> Report {
    let rows = predict(&inputs);
    let held_out = rows
        .iter()
        .filter_map(|r| r.paper.map(|p| format!("{} = {p} {}", r.metric, r.unit)))
        .collect();
    let misses = rows
        .iter()
        .filter(|r| r.within_15pct == Some(false))
        .map(|r| {
            format!(
                "{}: predicted {:.3}, paper {:.3} ({:+.0}%)",
                r.metric,
                r.predicted,
                r.paper.unwrap_or(f64::NAN),
                r.error.unwrap_or(f64::NAN) * 100.0
            )
        })
        .collect();
    Report {
        rows,
        parameters: params::all(),
        inputs,
        informed_by_paper: informed_by_paper(),
        held_out,
        misses,
    }
}

/// Runs the stepped echo at each size (both interfaces) for the counts.
pub fn measure_sizes(sizes: &[usize], packets: u64) -> Result<Vec<SizeCounts>, String> {
    let plan = PciePlan {
        packets,
        warmup_packets: (packets / 4).max(5000),
        ..Default::default()
    };
    let mut out = Vec::new();
    for &size in sizes {
        let e = pcie::measure(&plan, Interface::Enso, size)
            .map_err(|e| format!("enso {size} B: {e}"))?;
        let p = pcie::measure(&plan, Interface::Packetized, size)
            .map_err(|e| format!("packetized {size} B: {e}"))?;
        out.push(SizeCounts {
            wire_size: size,
            frame_bytes: frames::frame_len_for_wire_size(size) as u32,
            k_rx: e.k_rx.unwrap_or(1.0),
            k_tx: e.k_tx.unwrap_or(1.0),
            enso_measured: BytesPerPacket {
                up: e.up_bytes_per_pkt,
                down: e.down_bytes_per_pkt,
            },
            packetized_measured: BytesPerPacket {
                up: p.up_bytes_per_pkt,
                down: p.down_bytes_per_pkt,
            },
        });
    }
    Ok(out)
}

fn read_json(path: &Path) -> Result<serde_json::Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn in_llc_range(probe: f64) -> bool {
    let (lo, hi) = params::SHARED_LLC_PROBE_NS;
    (lo..=hi).contains(&probe)
}

/// Reads echo costs at 64 B from `dir/echo.json` (a `bench echo` results
/// directory). `skipped` gets a line if the run's placement is outside
/// [`params::SHARED_LLC_PROBE_NS`].
pub fn load_echo(dir: &Path, skipped: &mut Vec<String>) -> Result<Option<EchoCost>, String> {
    let v = read_json(&dir.join("echo.json"))?;
    let runs = v.as_array().cloned().unwrap_or_else(|| vec![v.clone()]);
    let source = dir
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let mut enso = None;
    let mut pkt = None;
    let mut probe = f64::NAN;
    for run in &runs {
        let summaries = run
            .get("summaries")
            .and_then(|s| s.as_array())
            .cloned()
            .unwrap_or_default();
        for s in summaries {
            if s.get("pkt_size").and_then(|x| x.as_u64()) != Some(64) {
                continue;
            }
            let ns = s.get("app_ns_per_pkt").and_then(|x| x.as_f64());
            probe = s
                .get("probe_rtt_ns")
                .and_then(|x| x.as_f64())
                .unwrap_or(probe);
            match s.get("interface").and_then(|x| x.as_str()) {
                Some("enso") => enso = ns,
                Some("packetized") => pkt = ns,
                _ => {}
            }
        }
    }
    match (enso, pkt) {
        (Some(e), Some(p)) => {
            if !in_llc_range(probe) {
                skipped.push(format!(
                    "{source}: echo probe {probe:.0} ns outside the shared-LLC range"
                ));
                return Ok(None);
            }
            Ok(Some(EchoCost {
                enso_ns: e,
                packetized_ns: p,
                probe_rtt_ns: probe,
                source,
            }))
        }
        _ => Err(format!(
            "{}: no 64 B echo rows for both interfaces",
            dir.display()
        )),
    }
}

/// Reads application costs from `dir/apps.json` (a `bench apps` results
/// directory): Maglev with 16 flows, telemetry, KV at
/// [`params::KV_BATCH`], every log-monitor row; rows measured outside
/// [`params::SHARED_LLC_PROBE_NS`] are skipped (and listed).
pub fn load_apps(dir: &Path, skipped: &mut Vec<String>) -> Result<Vec<AppCost>, String> {
    let v = read_json(&dir.join("apps.json"))?;
    let rows = v
        .as_array()
        .ok_or_else(|| format!("{}: not an array", dir.display()))?;
    let source = dir
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let mut out = Vec::new();
    for r in rows {
        let app = r
            .get("app")
            .and_then(|x| x.as_str())
            .unwrap_or("")
            .to_string();
        let f = |side: &str, key: &str| {
            r.get(side)
                .and_then(|s| s.get(key))
                .and_then(|x| x.as_f64())
        };
        let variant = match app.as_str() {
            "maglev" => match r.get("flows").and_then(|x| x.as_u64()) {
                None | Some(16) => "16 flows".to_string(),
                Some(n) => format!("{n} flows"),
            },
            "kv" => format!(
                "{} requests per frame",
                r.get("kv_batch").and_then(|x| x.as_u64()).unwrap_or(0)
            ),
            "log_monitor" => format!(
                "{} patterns, {}% events",
                r.get("patterns").and_then(|x| x.as_str()).unwrap_or("?"),
                r.get("log_event_share")
                    .and_then(|x| x.as_f64())
                    .unwrap_or(f64::NAN)
                    * 100.0
            ),
            _ => String::new(),
        };
        if (app == "maglev" && variant != "16 flows")
            || (app == "kv" && variant != format!("{} requests per frame", params::KV_BATCH))
        {
            continue;
        }
        let (Some(e), Some(p), Some(rate), Some(gbps)) = (
            f("enso", "app_ns_per_unit"),
            f("packetized", "app_ns_per_unit"),
            f("enso", "rate_m"),
            f("enso", "gbps"),
        ) else {
            skipped.push(format!("{source}: {app} {variant}: missing fields"));
            continue;
        };
        let probe = r
            .get("probe_rtt_ns")
            .and_then(|x| x.as_f64())
            .unwrap_or(f64::NAN);
        if !in_llc_range(probe) {
            skipped.push(format!(
                "{source}: {app} {variant}: probe {probe:.0} ns outside the shared-LLC range"
            ));
            continue;
        }
        out.push(AppCost {
            app,
            variant,
            unit: r
                .get("unit")
                .and_then(|x| x.as_str())
                .unwrap_or("packets")
                .to_string(),
            enso_ns: e,
            packetized_ns: p,
            bits_per_unit: gbps * 1e3 / rate,
            probe_rtt_ns: probe,
            source: source.clone(),
        });
    }
    Ok(out)
}

/// The checked-in results this crate's default costs come from.
pub fn default_results_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/results")
}

#[cfg(test)]
mod tests;
