//! Report sections 1 and 2: throughput against size, and the echo speedup, with the figure helpers.

#[allow(unused_imports)]
use super::*;

/// Where an echo run was measured.
pub(super) fn echo_placement(o: &echo::Outcome) -> String {
    o.placement_short()
}

/// Figure helpers: write an SVG into the report's directory.
pub(super) fn line_figure(
    dir: &ResultsDir,
    name: &str,
    chart: &LineChart,
) -> Result<String, String> {
    dir.line_chart(name, chart).map_err(|e| e.to_string())?;
    Ok(name.to_string())
}

pub(super) fn hbar_figure(
    dir: &ResultsDir,
    name: &str,
    chart: &HBarChart,
) -> Result<String, String> {
    dir.hbar_chart(name, chart).map_err(|e| e.to_string())?;
    Ok(name.to_string())
}

/// 1. Throughput against packet size.
pub(super) fn throughput(
    m: &Measured,
    p: Option<&predict::Report>,
    dir: &ResultsDir,
) -> Result<Claim, String> {
    let mut c = Claim {
        title: "Throughput against packet size".into(),
        claim: "one core echoing through Ensō reaches the 100 Gb/s line rate at every packet \
                size, 148.8 Mpps at 64 B; the packetized baseline (DPDK on an E810) reaches \
                59 Mpps at 64 B."
            .into(),
        ..Default::default()
    };
    let Some(o) = &m.echo else {
        c.missing = Some(m.missing("echo"));
        return Ok(c);
    };
    let place = echo_placement(o);
    let sums: Vec<&bench::echo::EchoSummary> = o
        .runs
        .iter()
        .flat_map(|r| r.summaries.iter())
        .filter(|s| s.interface != bench::echo::REFERENCE)
        .collect();
    for s in &sums {
        let metric = format!("echo_{}_{}B_1core", s.interface, s.pkt_size);
        c.rows.push(ClaimRow {
            metric: format!(
                "{} echo at {} B (limit here: {})",
                s.interface, s.pkt_size, s.bottleneck
            ),
            unit: "Mpps".into(),
            measured: Some(s.mpps),
            placement: place.clone(),
            predicted: predicted(p, &metric),
            paper: paper(p, &metric),
            paper_note: None,
        });
    }
    // Gb/s on the wire against size: measured solid, predicted dashed.
    let mut chart = LineChart::new(
        &format!(
            "Echo throughput (Gb/s on the wire, log axis) vs packet size (B)\nmeasured \
             here (solid; {place}) and predicted for the paper's hardware (dashed)"
        ),
        "packet size on the wire with FCS (B), log axis",
        "Gb/s (frame + 24 B per packet), log axis",
    )
    .log_x()
    .log_y()
    .flagged_label("most trials on shared cores");
    for (ci, iface) in ["enso", "packetized"].into_iter().enumerate() {
        let mine: Vec<&&bench::echo::EchoSummary> =
            sums.iter().filter(|s| s.interface == iface).collect();
        // A log axis has no room for a rate of zero (a run that moved nothing).
        let mine: Vec<&&bench::echo::EchoSummary> =
            mine.into_iter().filter(|s| s.gbps > 0.0).collect();
        let mut meas = Series::new(
            format!("{iface}, measured"),
            mine.iter().map(|s| (s.pkt_size as f64, s.gbps)).collect(),
        );
        meas.colour = Some(ci);
        meas.flagged = mine
            .iter()
            .enumerate()
            .filter(|(_, s)| s.contended_trials * 2 > s.trials)
            .map(|(i, _)| i)
            .collect();
        chart = chart.push(meas);
        let pts: Vec<(f64, f64)> = mine
            .iter()
            .filter_map(|s| {
                let mpps = predicted(p, &format!("echo_{iface}_{}B_1core", s.pkt_size))?;
                Some((
                    s.pkt_size as f64,
                    predict::wire_gbps(mpps, s.frame_bytes as u32),
                ))
            })
            .collect();
        if !pts.is_empty() {
            let mut pr = Series::new(format!("{iface}, predicted"), pts);
            pr.colour = Some(ci);
            pr.dashed = true;
            chart = chart.push(pr);
        }
    }
    let f = line_figure(dir, "throughput.svg", &chart)?;
    c.figures
        .push((f, "Echo throughput against packet size".into()));
    let at = |iface: &str, size: usize| {
        sums.iter()
            .find(|s| s.interface == iface && s.pkt_size == size)
            .copied()
    };
    let mut para = String::new();
    if let (Some(e64), Some(p64)) = (at("enso", 64), at("packetized", 64)) {
        let _ = write!(
            para,
            "At 64 B the emulated NIC echoed {} Mpps through Ensō and {} through the \
             packetized interface ({}), against {} and {} predicted for the paper's hardware \
             and the paper's 148.8 and 59. ",
            num(e64.mpps),
            num(p64.mpps),
            place,
            cell(predicted(p, "echo_enso_64B_1core")),
            cell(predicted(p, "echo_packetized_64B_1core")),
        );
        let nic_limited = sums.iter().filter(|s| s.bottleneck == "nic").count();
        let contended = sums
            .iter()
            .filter(|s| s.contended_trials * 2 > s.trials)
            .count();
        let _ = write!(
            para,
            "The measured rates are far below both because the emulated NIC is one CPU core \
             doing per frame what the FPGA does in parallel (its busy time per packet: {} ns \
             on Ensō and {} on the packetized interface at 64 B). ",
            num(e64.nic_ns_per_pkt),
            num(p64.nic_ns_per_pkt),
        );
        if nic_limited > 0 {
            let _ = write!(
                para,
                "It was the limit in {nic_limited} of {} rows, which then measure the emulator \
                 more than the interface. ",
                sums.len()
            );
        }
        if contended > 0 {
            let _ = write!(
                para,
                "In {contended} of {} rows most trials shared their cores with other work \
                 (ringed in the figure): those rates are below what this machine does when \
                 quiet. ",
                sums.len()
            );
        }
    }
    if let (Some(e), Some(big)) = (at("enso", 64), sums.iter().map(|s| s.pkt_size).max()) {
        if let Some(eb) = at("enso", big) {
            let rows: Vec<&predict::Row> = sums
                .iter()
                .filter(|s| s.interface == "enso")
                .filter_map(|s| pred_row(p, &format!("echo_enso_{}B_1core", s.pkt_size)))
                .collect();
            let eth = rows.iter().filter(|r| r.bound_by == "ethernet").count();
            let _ = write!(
                para,
                "Measured here, the rate in Gb/s {} as frames grow ({} Gb/s at 64 B, {} at \
                 {big} B): the engine's cost is mostly per frame, not per byte. The prediction \
                 for Ensō is Ethernet-bound at {eth} of {} sizes{}.",
                if eb.gbps > e.gbps {
                    "rises"
                } else {
                    "does not rise"
                },
                num(e.gbps),
                num(eb.gbps),
                rows.len(),
                if eth == rows.len() {
                    ", as the paper's line-rate claim is"
                } else {
                    " and just below the line rate, bound by PCIe, at the others"
                }
            );
        }
    }
    c.paragraph = para;
    Ok(c)
}

/// 2. Echo speedup.
pub(super) fn echo_speedup(
    m: &Measured,
    p: Option<&predict::Report>,
    dir: &ResultsDir,
) -> Result<Claim, String> {
    let mut c = Claim {
        title: "Echo speedup (Ensō / packetized)".into(),
        claim: "at 64 B an Ensō echo server moves 148.8 Mpps against 59 for DPDK on the E810, \
                2.5x."
            .into(),
        ..Default::default()
    };
    let Some(o) = &m.echo else {
        c.missing = Some(m.missing("echo"));
        return Ok(c);
    };
    let place = echo_placement(o);
    let enso: Vec<&bench::echo::EchoSummary> = o
        .runs
        .iter()
        .flat_map(|r| r.summaries.iter())
        .filter(|s| s.interface == "enso")
        .collect();
    let mut chart = HBarChart::new(
        &format!(
            "Echo speedup: Ensō / packetized packet rate (x), per packet size\n\
             measured: median of per-round ratios, {place}"
        ),
        "speedup (x); whiskers: slowest and fastest round",
    );
    chart.suffix = "x".into();
    chart.reference = Some((1.0, "1x: no speedup".into()));
    chart.legend = vec![
        (0, "measured here".into()),
        (2, "predicted, paper's hardware".into()),
        (1, "paper".into()),
    ];
    chart.flagged_label = Some("most trials on shared cores".into());
    for s in &enso {
        let size = s.pkt_size;
        let pe = predicted(p, &format!("echo_enso_{size}B_1core"));
        let pp = predicted(p, &format!("echo_packetized_{size}B_1core"));
        let paper_speedup = ratio(
            paper(p, &format!("echo_enso_{size}B_1core")),
            paper(p, &format!("echo_packetized_{size}B_1core")),
        );
        c.rows.push(ClaimRow {
            metric: format!("speedup at {size} B (packet rate)"),
            unit: "x".into(),
            measured: s.speedup,
            placement: place.clone(),
            predicted: ratio(pe, pp),
            paper: paper_speedup,
            paper_note: None,
        });
        c.rows.push(ClaimRow {
            metric: format!("speedup at {size} B (application capacity, 1e3 / app ns)"),
            unit: "x".into(),
            measured: s.app_capacity_speedup,
            placement: place.clone(),
            predicted: ratio(
                predicted(p, "core_enso_echo_64B"),
                predicted(p, "core_packetized_echo_64B"),
            )
            .filter(|_| size == 64),
            paper: None,
            paper_note: None,
        });
        let flagged = s.contended_trials * 2 > s.trials;
        chart = chart.bar(HBar {
            label: format!("{size} B measured"),
            value: s.speedup.unwrap_or(f64::NAN),
            range: s.speedup_range.map(|[a, b]| (a, b)),
            colour: 0,
            flagged,
        });
        if let Some(x) = ratio(pe, pp) {
            chart = chart.bar(HBar {
                label: format!("{size} B predicted"),
                value: x,
                range: None,
                colour: 2,
                flagged: false,
            });
        }
        if let Some(x) = paper_speedup {
            chart = chart.bar(HBar {
                label: format!("{size} B paper"),
                value: x,
                range: None,
                colour: 1,
                flagged: false,
            });
        }
    }
    let f = hbar_figure(dir, "echo_speedup.svg", &chart)?;
    c.figures.push((f, "Echo speedup per packet size".into()));
    if let Some(s) = enso.iter().find(|s| s.pkt_size == 64) {
        let pe = predicted(p, "echo_enso_64B_1core");
        let pp = predicted(p, "echo_packetized_64B_1core");
        let meas = s.speedup.unwrap_or(f64::NAN);
        let pred = ratio(pe, pp).unwrap_or(f64::NAN);
        let cmp = if meas < pred * 0.85 {
            "below"
        } else if meas > pred * 1.15 {
            "above"
        } else {
            "close to"
        };
        c.paragraph = format!(
            "Measured at 64 B: {}x ({place}), {cmp} the {}x predicted for the paper's hardware \
             (the paper: {}x). The measured ratio compares two loads on the same emulated \
             engine, which spends {} ns per packet on Ensō and {} on the packetized \
             interface, so it is the engine's ratio as much as the interface's; the \
             application-capacity ratio ({}x) compares the application's own cost per \
             packet, the part of the speedup a hardware NIC would leave to the host. The \
             prediction is bound by {} for Ensō and by {} for the packetized interface \
             (`core`: one core's rate from the application's time per packet measured with \
             the cores sharing a last-level cache). The host's placement of the two vCPUs moves the \
             measured ratio too: with them apart a descriptor ring costs more cross-core \
             misses than a pipe, and earlier runs gave about 2x close and 4-5x apart.",
            num(meas),
            num(pred),
            cell(ratio(
                paper(p, "echo_enso_64B_1core"),
                paper(p, "echo_packetized_64B_1core")
            )),
            num(s.nic_ns_per_pkt),
            enso.first()
                .and_then(|_| {
                    o.runs
                        .iter()
                        .flat_map(|r| r.summaries.iter())
                        .find(|x| x.interface == "packetized" && x.pkt_size == 64)
                })
                .map_or_else(|| "-".into(), |x| num(x.nic_ns_per_pkt)),
            cell(s.app_capacity_speedup),
            pred_row(p, "echo_enso_64B_1core").map_or("-", |r| r.bound_by.as_str()),
            pred_row(p, "echo_packetized_64B_1core").map_or("-", |r| r.bound_by.as_str()),
        );
    }
    Ok(c)
}
