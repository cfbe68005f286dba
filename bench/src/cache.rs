//! Experiment: cache behaviour of the application side, per interface.
//!
//! Two sources, in order of preference:
//!
//! - **perf**: hardware counters of the application thread
//!   ([`crate::perf`]) around a threaded run (engine on one core, echo on the
//!   other). Needs a PMU; most VMs have none.
//! - **cachegrind**: the deterministic stepped echo ([`crate::stepped`]: one
//!   engine step, then the application's pass; the NIC at most one small
//!   batch ahead) runs single-threaded under
//!   `valgrind --tool=cachegrind --cache-sim=yes`, twice with different
//!   packet counts. The difference between the two runs is the cost of the
//!   extra packets alone (setup, warm-up and exit cancel out exactly, since
//!   the runs are deterministic), and it is attributed by function:
//!   application side = `enso::` (the library), `enso_apps::` (the echo
//!   logic) and the worker's application pass; engine side = `nic_emu::`,
//!   `pcie_model::` and the worker's engine pass; anything else (libc's
//!   memcpy, std) is reported as "other" (in this datapath almost all of it
//!   is the engine copying frames).
//!
//! What the simulator shows and what it cannot: the engine and the
//! application map the shared memory at different virtual addresses, and
//! cachegrind tracks lines by virtual address, so a frame the engine has
//! just written is *not* in the application's view of the cache: the
//! application misses on a line unless it touched that line itself
//! recently. That is what a DMA write does to pipe data (a 2 MiB ring) and
//! to packet buffers (recycled only after the whole RX ring has cycled).
//! What it cannot show is a line the application touched recently and the
//! NIC has rewritten since — a descriptor in a small ring, a notification
//! slot: it still hits in the simulation where a real DMA write would have
//! invalidated it. Both sides also share one simulated hierarchy, so the
//! engine's own footprint competes with the application's for capacity.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::emu::Interface;
use crate::frames;
use crate::stepped::{Stepped, SteppedConfig};

/// Target from the paper: Ensō's application D1 misses per packet at most
/// this share of the packetized interface's.
pub const D1_RATIO_TARGET: f64 = 0.25;
/// Target: Ensō's application instructions per packet at most this share.
pub const INSTRUCTIONS_RATIO_TARGET: f64 = 0.6;

/// The worker's settings (also its command line).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerConfig {
    /// Interface.
    pub interface: Interface,
    /// Wire size with FCS.
    pub wire_size: usize,
    /// Frames echoed in total (after setup).
    pub packets: u64,
    /// Generator frames per engine step.
    pub burst: usize,
    /// Generator in-flight window.
    pub window: u64,
    /// Pipes or queues.
    pub pipes: u32,
    /// Drive the engine through the engine thread's loop
    /// ([`SteppedConfig::engine_loop`]).
    #[serde(default)]
    pub engine_loop: bool,
}

/// What the worker prints (one JSON line).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerOutput {
    /// Frames that came back to the generator.
    pub packets: u64,
    /// RX notifications the NIC wrote.
    pub rx_notifications: u64,
    /// NIC drops.
    pub drops: u64,
}

/// The stepped datapath the worker runs.
pub fn worker_stepped(cfg: &WorkerConfig) -> SteppedConfig {
    let mut s = SteppedConfig::new(cfg.interface, cfg.wire_size);
    s.burst = cfg.burst;
    s.window = cfg.window;
    s.pipes = cfg.pipes;
    s.steps_per_poll = 1;
    s.engine_loop = cfg.engine_loop;
    s.notif_ring_entries = WORKER_NOTIF_RING;
    s
}

/// Notification ring entries in the worker: small enough that the rings
/// wrap during the warm-up, so the measured difference holds no first
/// touch of a notification slot (the real NIC's 16384 entries would need
/// about a million packets). Per packet, a slot is a slot.
pub const WORKER_NOTIF_RING: u32 = 512;

/// Packets the shorter of the two runs echoes: enough to pass twice
/// through every pipe (2 MiB) and notification ring (at one notification
/// per window at most) or, for the packetized interface, every buffer of
/// the pool, so no first touch of a line is left in the difference.
pub fn warm_packets(interface: Interface, wire_size: usize, pipes: u32) -> u64 {
    let s = worker_stepped(&WorkerConfig {
        interface,
        wire_size,
        packets: 0,
        burst: 32,
        window: 64,
        pipes,
        engine_loop: false,
    });
    let per_pipe = match interface {
        Interface::Enso => {
            let slot = frames::slot_len(frames::frame_len_for_wire_size(wire_size));
            let pipe = (s.pipe_size / slot) as u64;
            let ring = u64::from(WORKER_NOTIF_RING) * s.window / u64::from(pipes.max(1));
            pipe.max(ring)
        }
        Interface::Packetized => u64::from(s.rx_ring + s.tx_ring),
    };
    2 * per_pipe * u64::from(pipes.max(1)) + 1000
}

/// Runs the worker's datapath in this process.
pub fn run_worker(cfg: &WorkerConfig) -> Result<WorkerOutput, String> {
    frames::check_wire_size(cfg.wire_size)?;
    let mut s = Stepped::new(worker_stepped(cfg))?;
    let packets = s.run_packets(cfg.packets)?;
    let st = s.stats();
    Ok(WorkerOutput {
        packets,
        rx_notifications: st.pipe_sum(|c| c.notifications),
        drops: st.total_drops(),
    })
}

/// Which side of the datapath a function belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CodeSide {
    /// The application: the library, the echo logic, the worker's
    /// application pass.
    App,
    /// The NIC engine.
    Engine,
    /// Everything else (libc, std, the runtime).
    Other,
}

/// The side a (demangled) function name belongs to.
pub fn classify(function: &str) -> CodeSide {
    let n = function.trim_start_matches('<');
    let any = |prefixes: &[&str]| prefixes.iter().any(|p| n.starts_with(p));
    if any(&[
        "enso::",
        "enso_apps::",
        "bench::stepped::Stepped::app_phase",
        "bench::emu::Driver",
    ]) {
        CodeSide::App
    } else if any(&[
        "nic_emu::",
        "pcie_model::",
        "bench::stepped::Stepped::engine_phase",
    ]) {
        CodeSide::Engine
    } else {
        CodeSide::Other
    }
}

/// Cachegrind's counts for one function.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FnCost {
    /// Source file.
    pub file: String,
    /// Function name.
    pub function: String,
    /// One count per event, in the profile's event order.
    pub counts: Vec<u64>,
}

/// A parsed `cachegrind.out` file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    /// `desc:` lines (the simulated caches).
    pub desc: Vec<String>,
    /// Event names (`Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw`).
    pub events: Vec<String>,
    /// Per function (file and name), summed over lines.
    pub functions: Vec<FnCost>,
}

/// Parses the text of a `cachegrind.out.<pid>` file.
pub fn parse_profile(text: &str) -> Result<Profile, String> {
    let mut p = Profile::default();
    let mut index: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut file = String::new();
    let mut current: Option<usize> = None;
    for (no, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.is_empty() {
            continue;
        }
        if let Some(d) = line.strip_prefix("desc:") {
            p.desc.push(d.trim().to_string());
        } else if let Some(e) = line.strip_prefix("events:") {
            p.events = e.split_whitespace().map(String::from).collect();
        } else if let Some(f) = line.strip_prefix("fl=") {
            file = f.to_string();
            current = None;
        } else if line.starts_with("fi=") || line.starts_with("fe=") {
            // Inlined code from another file: still the current function.
        } else if let Some(f) = line.strip_prefix("fn=") {
            let key = (file.clone(), f.to_string());
            let n = p.events.len();
            let next = p.functions.len();
            let i = *index.entry(key).or_insert(next);
            if i == next {
                p.functions.push(FnCost {
                    file: file.clone(),
                    function: f.to_string(),
                    counts: vec![0; n],
                });
            }
            current = Some(i);
        } else if line.as_bytes()[0].is_ascii_digit() {
            let i = current.ok_or_else(|| format!("line {}: counts before fn=", no + 1))?;
            let mut it = line.split_whitespace();
            it.next(); // the source line number
            let f = &mut p.functions[i];
            for (k, v) in it.enumerate() {
                let v: u64 = v
                    .parse()
                    .map_err(|_| format!("line {}: bad count {v:?}", no + 1))?;
                if let Some(c) = f.counts.get_mut(k) {
                    *c += v;
                }
            }
        }
        // cmd:, summary:, positions: and anything newer are not needed.
    }
    if p.events.is_empty() {
        return Err("no events: line (not a cachegrind output file?)".into());
    }
    Ok(p)
}

/// Counts of interest, summed over some functions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Costs {
    /// Instructions executed.
    pub instructions: f64,
    /// Data reads and writes.
    pub data_refs: f64,
    /// L1 data misses (reads and writes).
    pub d1_misses: f64,
    /// Last-level misses, data (reads and writes).
    pub ll_data_misses: f64,
    /// L1 instruction misses.
    pub i1_misses: f64,
    /// Last-level misses, instructions.
    pub ll_instr_misses: f64,
}

impl Costs {
    fn add_counts(&mut self, events: &[String], counts: &[u64]) {
        for (e, &v) in events.iter().zip(counts) {
            let v = v as f64;
            match e.as_str() {
                "Ir" => self.instructions += v,
                "Dr" | "Dw" => self.data_refs += v,
                "D1mr" | "D1mw" => self.d1_misses += v,
                "DLmr" | "DLmw" => self.ll_data_misses += v,
                "I1mr" => self.i1_misses += v,
                "ILmr" => self.ll_instr_misses += v,
                _ => {}
            }
        }
    }

    fn minus(&self, o: &Costs) -> Costs {
        Costs {
            instructions: self.instructions - o.instructions,
            data_refs: self.data_refs - o.data_refs,
            d1_misses: self.d1_misses - o.d1_misses,
            ll_data_misses: self.ll_data_misses - o.ll_data_misses,
            i1_misses: self.i1_misses - o.i1_misses,
            ll_instr_misses: self.ll_instr_misses - o.ll_instr_misses,
        }
    }

    fn per(&self, n: f64) -> Costs {
        Costs {
            instructions: self.instructions / n,
            data_refs: self.data_refs / n,
            d1_misses: self.d1_misses / n,
            ll_data_misses: self.ll_data_misses / n,
            i1_misses: self.i1_misses / n,
            ll_instr_misses: self.ll_instr_misses / n,
        }
    }

    /// LL misses, data and instructions.
    pub fn ll_misses(&self) -> f64 {
        self.ll_data_misses + self.ll_instr_misses
    }
}

impl Profile {
    /// Costs per side.
    pub fn by_side(&self) -> BTreeMap<CodeSide, Costs> {
        let mut m: BTreeMap<CodeSide, Costs> = BTreeMap::new();
        for f in &self.functions {
            m.entry(classify(&f.function))
                .or_default()
                .add_counts(&self.events, &f.counts);
        }
        m
    }

    /// Costs per function name (files merged).
    pub fn by_function(&self) -> BTreeMap<String, Costs> {
        let mut m: BTreeMap<String, Costs> = BTreeMap::new();
        for f in &self.functions {
            m.entry(f.function.clone())
                .or_default()
                .add_counts(&self.events, &f.counts);
        }
        m
    }
}

/// A function's cost per packet, for the "where does it go" list.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionCost {
    /// Demangled name.
    pub function: String,
    /// Its side.
    pub side: CodeSide,
    /// Instructions per packet.
    pub instructions_per_pkt: f64,
    /// L1 data misses per packet.
    pub d1_misses_per_pkt: f64,
}

/// One interface's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheResult {
    /// `enso` or `packetized`.
    pub interface: String,
    /// `cachegrind` or `perf`.
    pub source: String,
    /// Wire size with FCS.
    pub pkt_size: usize,
    /// Packets the figures are divided by.
    pub packets: u64,
    /// Application instructions per packet.
    pub app_instructions_per_pkt: f64,
    /// Application data references (loads and stores) per packet; with
    /// perf: L1d loads.
    pub app_data_refs_per_pkt: Option<f64>,
    /// Application L1 data misses per packet (perf: load misses only).
    pub app_d1_misses_per_pkt: f64,
    /// Application last-level misses per packet (perf: LLC load misses).
    pub app_ll_misses_per_pkt: Option<f64>,
    /// D1 misses / data references.
    pub app_d1_miss_rate: Option<f64>,
    /// The engine's instructions per packet (cachegrind only).
    pub engine_instructions_per_pkt: Option<f64>,
    /// The engine's L1 data misses per packet.
    pub engine_d1_misses_per_pkt: Option<f64>,
    /// The engine's last-level misses per packet.
    pub engine_ll_misses_per_pkt: Option<f64>,
    /// Code of neither side (libc memcpy, std), per packet: instructions.
    pub other_instructions_per_pkt: Option<f64>,
    /// Other code's L1 data misses per packet.
    pub other_d1_misses_per_pkt: Option<f64>,
    /// RX notifications per packet in the run (Ensō).
    pub notifications_per_pkt: Option<f64>,
    /// The application functions that cost most, per packet.
    pub app_top_functions: Vec<FunctionCost>,
    /// The simulated caches (cachegrind) or the counters used (perf).
    pub caches: Vec<String>,
}

/// Ensō / packetized ratios of the application side.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ratios {
    /// Instructions per packet.
    pub app_instructions: f64,
    /// L1 data misses per packet.
    pub app_d1_misses: f64,
    /// Last-level misses per packet.
    pub app_ll_misses: Option<f64>,
    /// D1 misses per packet beyond one per packet on the frame itself: the
    /// echo touches only a frame's first line (headers and echo byte), which
    /// the NIC has just written, so both interfaces miss it once per
    /// packet; the rest is the interface's own (rings, buffers,
    /// bookkeeping). `None` if either has less than one miss per packet.
    pub app_d1_misses_beyond_frame: Option<f64>,
}

/// Lines of each frame the echo touches (its first: headers, echo byte).
pub const FRAME_LINES_PER_PKT: f64 = 1.0;

/// The ratios, if both interfaces were measured.
pub fn ratios(results: &[CacheResult]) -> Option<Ratios> {
    let e = results.iter().find(|r| r.interface == "enso")?;
    let p = results.iter().find(|r| r.interface == "packetized")?;
    let ll = match (e.app_ll_misses_per_pkt, p.app_ll_misses_per_pkt) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let beyond = |x: f64| x - FRAME_LINES_PER_PKT;
    let beyond_frame = (e.app_d1_misses_per_pkt >= FRAME_LINES_PER_PKT
        && p.app_d1_misses_per_pkt > FRAME_LINES_PER_PKT)
        .then(|| beyond(e.app_d1_misses_per_pkt) / beyond(p.app_d1_misses_per_pkt));
    Some(Ratios {
        app_instructions: e.app_instructions_per_pkt / p.app_instructions_per_pkt,
        app_d1_misses: e.app_d1_misses_per_pkt / p.app_d1_misses_per_pkt,
        app_ll_misses: ll,
        app_d1_misses_beyond_frame: beyond_frame,
    })
}

/// The paper's targets judged on the ratios, in words.
pub fn targets(r: &Ratios) -> Vec<(String, bool)> {
    let d1 = r.app_d1_misses <= D1_RATIO_TARGET;
    let ir = r.app_instructions <= INSTRUCTIONS_RATIO_TARGET;
    let beyond = r.app_d1_misses_beyond_frame.map_or_else(String::new, |b| {
        format!(
            "; beyond the one miss per packet on the frame the NIC wrote, which both take: {b:.3}"
        )
    });
    vec![
        (
            format!(
                "Ensō/packetized application D1 misses per packet {:.3} (target <= {D1_RATIO_TARGET}): {}{beyond}",
                r.app_d1_misses,
                if d1 { "met" } else { "NOT met" }
            ),
            d1,
        ),
        (
            format!(
                "Ensō/packetized application instructions per packet {:.3} (target <= {INSTRUCTIONS_RATIO_TARGET}): {}",
                r.app_instructions,
                if ir { "met" } else { "NOT met" }
            ),
            ir,
        ),
    ]
}

/// Whether `valgrind` can be run; the error says how to get it.
pub fn valgrind_version() -> Result<String, String> {
    let out = Command::new("valgrind")
        .arg("--version")
        .output()
        .map_err(|_| {
            "valgrind is not installed (no hardware counters here either): \
             install it with `apt-get install valgrind`"
                .to_string()
        })?;
    if !out.status.success() {
        return Err(
            "`valgrind --version` failed: install it with `apt-get install valgrind`".into(),
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// One cache level as sysfs describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheGeometry {
    /// Bytes.
    pub size: u64,
    /// Ways.
    pub ways: u64,
    /// Line size, bytes.
    pub line: u64,
}

impl CacheGeometry {
    /// Cachegrind's `size,assoc,line_size`, if it can simulate it (a power
    /// of two number of sets).
    pub fn valgrind_spec(&self) -> Option<String> {
        let sets = self.size.checked_div(self.ways * self.line)?;
        (sets.is_power_of_two() && sets * self.ways * self.line == self.size)
            .then(|| format!("{},{},{}", self.size, self.ways, self.line))
    }
}

/// Parses sysfs's cache size ("32K", "1024K", "32M").
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>().ok().map(|n| n * mult)
}

/// The caches of CPU 0 from sysfs: (L1 data, L1 instruction, last level).
pub fn host_caches() -> (
    Option<CacheGeometry>,
    Option<CacheGeometry>,
    Option<CacheGeometry>,
) {
    let base = Path::new("/sys/devices/system/cpu/cpu0/cache");
    let mut d1 = None;
    let mut i1 = None;
    let mut ll: Option<(u64, CacheGeometry)> = None;
    for k in 0..8 {
        let dir = base.join(format!("index{k}"));
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size"))
        else {
            continue;
        };
        let (Some(level), Some(size)) = (level.trim().parse::<u64>().ok(), parse_size(&size))
        else {
            continue;
        };
        let num = |f: &str| read(f).and_then(|v| v.trim().parse::<u64>().ok());
        let g = CacheGeometry {
            size,
            ways: num("ways_of_associativity").unwrap_or(0),
            line: num("coherency_line_size").unwrap_or(64),
        };
        match (level, kind.trim()) {
            (1, "Data") => d1 = Some(g),
            (1, "Instruction") => i1 = Some(g),
            (l, "Unified") if ll.is_none_or(|(best, _)| l > best) => ll = Some((l, g)),
            _ => {}
        }
    }
    (d1, i1, ll.map(|x| x.1))
}

/// Cachegrind options that simulate this machine's L1 and last-level
/// caches (valgrind's own detection can be wrong in VMs), and a
/// description of what is simulated.
pub fn cache_options() -> (Vec<String>, Vec<String>) {
    let (d1, i1, ll) = host_caches();
    let mut opts = Vec::new();
    let mut desc = Vec::new();
    for (flag, name, g) in [("--D1", "D1", d1), ("--I1", "I1", i1), ("--LL", "LL", ll)] {
        if let Some(spec) = g.and_then(|g| g.valgrind_spec()) {
            opts.push(format!("{flag}={spec}"));
            desc.push(format!("{name} (from sysfs): {spec} (bytes,ways,line)"));
        } else {
            desc.push(format!("{name}: valgrind's default"));
        }
    }
    (opts, desc)
}

/// Runs `exe cache-worker <cfg>` under cachegrind, writing the profile to
/// `out_file`; returns the worker's output and the parsed profile.
pub fn run_under_cachegrind(
    exe: &Path,
    cfg: &WorkerConfig,
    cache_opts: &[String],
    out_file: &Path,
) -> Result<(WorkerOutput, Profile), String> {
    let mut opts = vec!["--cache-sim=yes".to_string()];
    opts.extend_from_slice(cache_opts);
    cachegrind_worker(exe, &worker_args(cfg), &opts, out_file, "the worker")
}

/// Runs `exe args` under `valgrind --tool=cachegrind` with `opts`, the
/// profile in `out_file`; returns the last JSON line the worker printed,
/// parsed, and the profile. `who` names the worker in errors.
pub(crate) fn cachegrind_worker<T: serde::de::DeserializeOwned>(
    exe: &Path,
    args: &[String],
    opts: &[String],
    out_file: &Path,
    who: &str,
) -> Result<(T, Profile), String> {
    let out = Command::new("valgrind")
        .arg("--tool=cachegrind")
        .args(opts)
        .arg(format!("--cachegrind-out-file={}", out_file.display()))
        .arg(exe)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run valgrind: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(8).collect();
        return Err(format!(
            "{who} failed under cachegrind ({}): {}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .ok_or("the worker printed no result")?;
    let w: T = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let text =
        std::fs::read_to_string(out_file).map_err(|e| format!("{}: {e}", out_file.display()))?;
    Ok((w, parse_profile(&text)?))
}

/// The hidden subcommand's arguments for `cfg`.
pub fn worker_args(cfg: &WorkerConfig) -> Vec<String> {
    let mut v = vec![
        "cache-worker".into(),
        "--interface".into(),
        cfg.interface.name().into(),
        "--size".into(),
        cfg.wire_size.to_string(),
        "--packets".into(),
        cfg.packets.to_string(),
        "--burst".into(),
        cfg.burst.to_string(),
        "--window".into(),
        cfg.window.to_string(),
        "--pipes".into(),
        cfg.pipes.to_string(),
    ];
    if cfg.engine_loop {
        v.push("--engine-loop".into());
    }
    v
}

/// Runs the worker of `cfg` under cachegrind twice, the shorter run
/// cycling twice through the pipe (or the buffer pool) first and the
/// longer echoing `cfg.packets` more, and returns the per-packet
/// difference. Profiles go to `tmp`; `done(n)` is called after each run
/// with its packet count.
pub fn measure_difference(
    exe: &Path,
    cfg: &WorkerConfig,
    cache_opts: &[String],
    tmp: &Path,
    done: &mut dyn FnMut(u64),
) -> Result<CacheResult, String> {
    let i = cfg.interface;
    let mut runs = Vec::new();
    // The shorter run already cycles twice through the pipe (or the
    // buffer pool), so the difference holds no first-touch misses.
    let warm = warm_packets(i, cfg.wire_size, cfg.pipes);
    for n in [warm, warm + cfg.packets] {
        let run = WorkerConfig {
            packets: n,
            ..cfg.clone()
        };
        let tag = if cfg.engine_loop { ".loop" } else { "" };
        let file = tmp.join(format!("cachegrind.{}{tag}.{n}.out", i.name()));
        runs.push(run_under_cachegrind(exe, &run, cache_opts, &file)?);
        done(n);
    }
    for (w, _) in &runs {
        if w.drops > 0 {
            return Err(format!("{i}: the NIC dropped {} frames", w.drops));
        }
    }
    difference(i, cfg.wire_size, &runs[0], &runs[1])
}

/// The per-packet result from two runs of the same configuration with
/// `small` and `large` packet counts.
pub fn difference(
    interface: Interface,
    wire_size: usize,
    small: &(WorkerOutput, Profile),
    large: &(WorkerOutput, Profile),
) -> Result<CacheResult, String> {
    let n = large.0.packets as f64 - small.0.packets as f64;
    if n <= 0.0 {
        return Err("the two runs echoed the same number of packets".into());
    }
    let (a, b) = (small.1.by_side(), large.1.by_side());
    let side = |s: CodeSide| {
        b.get(&s)
            .copied()
            .unwrap_or_default()
            .minus(&a.get(&s).copied().unwrap_or_default())
            .per(n)
    };
    let (app, engine, other) = (
        side(CodeSide::App),
        side(CodeSide::Engine),
        side(CodeSide::Other),
    );
    let (fa, fb) = (small.1.by_function(), large.1.by_function());
    let mut top: Vec<FunctionCost> = fb
        .iter()
        .filter(|(name, _)| classify(name) == CodeSide::App)
        .map(|(name, c)| {
            let d = c.minus(&fa.get(name).copied().unwrap_or_default()).per(n);
            FunctionCost {
                function: name.clone(),
                side: CodeSide::App,
                instructions_per_pkt: d.instructions,
                d1_misses_per_pkt: d.d1_misses,
            }
        })
        .filter(|f| f.instructions_per_pkt > 0.05)
        .collect();
    top.sort_by(|x, y| y.instructions_per_pkt.total_cmp(&x.instructions_per_pkt));
    top.truncate(8);
    let notif = (large.0.rx_notifications as f64 - small.0.rx_notifications as f64) / n;
    Ok(CacheResult {
        interface: interface.name().to_string(),
        source: "cachegrind".into(),
        pkt_size: wire_size,
        packets: n as u64,
        app_instructions_per_pkt: app.instructions,
        app_data_refs_per_pkt: Some(app.data_refs),
        app_d1_misses_per_pkt: app.d1_misses,
        app_ll_misses_per_pkt: Some(app.ll_misses()),
        app_d1_miss_rate: (app.data_refs > 0.0).then(|| app.d1_misses / app.data_refs),
        engine_instructions_per_pkt: Some(engine.instructions),
        engine_d1_misses_per_pkt: Some(engine.d1_misses),
        engine_ll_misses_per_pkt: Some(engine.ll_misses()),
        other_instructions_per_pkt: Some(other.instructions),
        other_d1_misses_per_pkt: Some(other.d1_misses),
        notifications_per_pkt: (interface == Interface::Enso).then_some(notif),
        app_top_functions: top,
        caches: large.1.desc.clone(),
    })
}

/// The perf path: both interfaces' echo rigs at `wire_size`, interleaved,
/// with the application thread's hardware counters on; per-packet sums
/// over the measured trials, and where the host had put the two cores.
pub fn perf_run(
    interfaces: &[Interface],
    wire_size: usize,
    trial: std::time::Duration,
    total: std::time::Duration,
    placement: &crate::placement::Placement,
    progress: &mut crate::progress::Progress,
) -> Result<(Vec<CacheResult>, RunContext), String> {
    use crate::emu::{Rig, RigConfig};
    use crate::interleave::{Interleave, Order, Variant};
    use crate::refring::Mode;
    let mut rigs = Vec::new();
    for &i in interfaces {
        let mut cfg = RigConfig::new(i, Mode::Echo, wire_size);
        cfg.perf_counters = true;
        rigs.push(Rig::start(i.name(), cfg, placement)?);
    }
    let report = {
        let mut v: Vec<&mut dyn Variant> = rigs.iter_mut().map(|r| r as &mut dyn Variant).collect();
        Interleave::new(trial)
            .total(total)
            .warmup(1)
            .order(Order::Rotate)
            .run_with(placement, &mut v, progress)
    };
    for r in &rigs {
        if let Some(e) = r.error() {
            return Err(format!("{}: {e}", r.config().interface));
        }
    }
    let context = RunContext::of(&report);
    let mut out = Vec::new();
    for &i in interfaces {
        let mut packets = 0u64;
        let mut sums: BTreeMap<&str, f64> = BTreeMap::new();
        for t in report.measured().filter_map(|r| r.trial(i.name())) {
            packets += t.packets;
            for k in [
                "perf_instructions",
                "perf_l1d_loads",
                "perf_l1d_misses",
                "perf_llc_loads",
                "perf_llc_misses",
            ] {
                if let Some(v) = t.extra.get(k) {
                    *sums.entry(k).or_insert(0.0) += v;
                }
            }
        }
        if packets == 0 || !sums.contains_key("perf_l1d_misses") {
            return Err("the application thread could not count L1d misses".into());
        }
        let n = packets as f64;
        let per = |k: &str| sums.get(k).map(|v| v / n);
        let loads = per("perf_l1d_loads");
        let misses = per("perf_l1d_misses").unwrap_or(f64::NAN);
        out.push(CacheResult {
            interface: i.name().to_string(),
            source: "perf".into(),
            pkt_size: wire_size,
            packets,
            app_instructions_per_pkt: per("perf_instructions").unwrap_or(f64::NAN),
            app_data_refs_per_pkt: loads,
            app_d1_misses_per_pkt: misses,
            app_ll_misses_per_pkt: per("perf_llc_misses"),
            app_d1_miss_rate: loads.map(|l| misses / l),
            engine_instructions_per_pkt: None,
            engine_d1_misses_per_pkt: None,
            engine_ll_misses_per_pkt: None,
            other_instructions_per_pkt: None,
            other_d1_misses_per_pkt: None,
            notifications_per_pkt: None,
            app_top_functions: Vec::new(),
            caches: vec!["hardware counters of the application thread (user space): \
                 instructions, L1d loads and load misses, LLC loads and load misses"
                .to_string()],
        });
    }
    Ok((out, context))
}

/// Where a threaded run's two cores were and whether they were its own:
/// what its ratios need beside them, as every threaded experiment gives.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunContext {
    /// Median cross-core round trip of the probes before each round, ns.
    pub probe_rtt_ns: Option<f64>,
    /// Smallest and largest of those probes, ns.
    pub probe_rtt_range_ns: Option<[f64; 2]>,
    /// Measured trials that shared their cores with other work.
    pub contended_trials: usize,
    /// Measured trials.
    pub trials: usize,
}

impl RunContext {
    /// The probes and contention of an interleaved run.
    pub fn of(report: &crate::interleave::InterleaveReport) -> Self {
        RunContext {
            probe_rtt_ns: report.probe_median_ns,
            probe_rtt_range_ns: report.probe_range_ns.map(|(a, b)| [a, b]),
            contended_trials: report.variants.iter().map(|v| v.contended_trials).sum(),
            trials: report.variants.iter().map(|v| v.trials).sum(),
        }
    }

    /// One line for a reader: the probe and the contention.
    pub fn describe(&self) -> String {
        let probe = match (self.probe_rtt_ns, self.probe_rtt_range_ns) {
            (Some(m), Some([lo, hi])) => {
                format!("cross-core round trip median {m:.0} ns ({lo:.0}..{hi:.0})")
            }
            (Some(m), None) => format!("cross-core round trip median {m:.0} ns"),
            _ => "no cross-core probe".to_string(),
        };
        format!(
            "probe: {probe}; contended: {} of {} trials shared their cores with other work",
            self.contended_trials, self.trials
        )
    }
}

#[cfg(test)]
mod tests;
