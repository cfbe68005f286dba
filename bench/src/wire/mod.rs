//! `bench wire`: packet rates through the emulated NIC's real-wire backends,
//! beside DPDK's own drivers on the same setup.
//!
//! Every trial has a *source* and a *sink* joined by one wire, and the rate
//! is what the sink receives:
//!
//! | setup      | source                      | sink                        |
//! |------------|-----------------------------|-----------------------------|
//! | `dpdk`     | testpmd `txonly`            | testpmd `rxonly`            |
//! | `emu-tx`   | the emulated NIC (an app sending) | testpmd `rxonly`      |
//! | `emu-rx`   | testpmd `txonly`            | the emulated NIC (an app receiving) |
//!
//! The wires: **memif** (DPDK's `net_memif` on both ends of `dpdk`; the
//! NIC's port is the memif server, testpmd the client) and **afpacket**
//! (a veth pair between two network namespaces made for the run; DPDK's
//! `net_af_packet` with `qdisc_bypass=1` on both ends of `dpdk`, the NIC's
//! `afpacket:` port in its place on the first end). So `emu-tx` against
//! `dpdk` compares the NIC's transmit path with DPDK's driver sending into
//! the same sink, and `emu-rx` its receive path against the same source.
//!
//! Cores: the side under test (the `dpdk` sink, or the NIC) gets core A,
//! the peer testpmd's polling thread core B. The NIC runs either threaded
//! (its engine and the application are two polling threads, which the
//! kernel places; with the peer that is three on two cores) or stepped (the
//! application steps the engine: one thread on core A, as a DPDK
//! application with its driver), see [`emu::NicMode`].
//!
//! A trial starts both ends, waits until frames arrive at the sink, then
//! measures for the trial's length: the emulated NIC's sink counts frames
//! itself; testpmd prints its port's receive rate once a second
//! (`--stats-period 1`) and the trial takes the median of the samples
//! printed inside the window.

pub mod emu;
pub mod testpmd;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rawsock::testnet::{Netns, Veth};
use serde::Serialize;

use crate::interleave::TrialResult;
use crate::placement::Placement;
use emu::{EmuRun, NicMode, Role};
use testpmd::{Fwd, TestPmd};

/// A backend `bench wire` measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// DPDK's shared-memory packet interface.
    Memif,
    /// AF_PACKET rings on a veth end.
    Afpacket,
}

impl Backend {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Memif => "memif",
            Backend::Afpacket => "afpacket",
        }
    }

    /// Parses a name.
    pub fn parse(s: &str) -> Result<Backend, String> {
        match s {
            "memif" => Ok(Backend::Memif),
            "afpacket" => Ok(Backend::Afpacket),
            _ => Err(format!("unknown backend {s:?} (memif, afpacket)")),
        }
    }

    /// The goal: the emulated NIC's rate over DPDK's on the same setup.
    pub fn goal(self) -> f64 {
        match self {
            Backend::Memif => 0.8,
            Backend::Afpacket => 1.0,
        }
    }
}

/// What a trial runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Setup {
    /// testpmd to testpmd.
    Dpdk,
    /// afpacket only: testpmd sends on the side under test and the peer
    /// end's kernel counts what arrives (no process there).
    DpdkTx,
    /// The emulated NIC sends, testpmd receives.
    EmuTx(NicMode),
    /// testpmd sends, the emulated NIC receives.
    EmuRx(NicMode),
}

impl Setup {
    /// The setup this one is compared with on `backend`: what sends or
    /// receives in its place on the same wire into the same sink.
    pub fn reference(self, backend: Backend) -> Option<Setup> {
        match (self, backend) {
            (Setup::Dpdk | Setup::DpdkTx, _) => None,
            (Setup::EmuTx(_), Backend::Afpacket) => Some(Setup::DpdkTx),
            _ => Some(Setup::Dpdk),
        }
    }

    /// The setups `bench wire` runs on `backend` for these NIC modes.
    pub fn all(backend: Backend, modes: &[NicMode]) -> Vec<Setup> {
        let mut v = vec![Setup::Dpdk];
        if backend == Backend::Afpacket {
            v.push(Setup::DpdkTx);
        }
        v.extend(modes.iter().map(|&m| Setup::EmuTx(m)));
        v.extend(modes.iter().map(|&m| Setup::EmuRx(m)));
        v
    }

    /// The variant's name in reports.
    pub fn name(self) -> String {
        match self {
            Setup::Dpdk => "dpdk".into(),
            Setup::DpdkTx => "dpdk-tx".into(),
            Setup::EmuTx(m) => format!("emu-tx-{}", m.name()),
            Setup::EmuRx(m) => format!("emu-rx-{}", m.name()),
        }
    }
}

/// What the runs of one backend share: the namespaces and veth pair
/// (afpacket), the directory of memif sockets, the cores.
#[derive(Debug)]
pub struct WireEnv {
    backend: Backend,
    placement: Placement,
    cores: (usize, usize),
    // Dropped in this order: the pair, then the namespaces.
    veth: Option<Veth>,
    ns_dut: Option<Netns>,
    ns_peer: Option<Netns>,
    dir: tempfile::TempDir,
}

static TRIALS: AtomicU64 = AtomicU64::new(0);

impl WireEnv {
    /// Makes what `backend` needs: for afpacket two namespaces and a veth
    /// pair of its own (root only), for memif a private socket directory.
    pub fn new(backend: Backend, placement: &Placement) -> Result<WireEnv, String> {
        if let Some(why) = testpmd::missing() {
            return Err(why);
        }
        let cores = match (placement.core_a, placement.core_b) {
            (Some(a), Some(b)) => (a, b),
            _ => return Err("bench wire needs two cores it can pin to".into()),
        };
        let dir = tempfile::Builder::new()
            .prefix("bench-wire-")
            .tempdir()
            .map_err(|e| format!("cannot make a temporary directory: {e}"))?;
        let (mut veth, mut ns_dut, mut ns_peer) = (None, None, None);
        if backend == Backend::Afpacket {
            let netns = |what: &str| {
                Netns::new().map_err(|e| {
                    format!(
                        "afpacket: cannot make a network namespace for the {what} ({e}); \
                         it needs root (or run --backends memif)"
                    )
                })
            };
            let a = netns("side under test")?;
            let b = netns("peer")?;
            veth = Some(
                Veth::new(&a, &b).map_err(|e| format!("afpacket: cannot make a veth pair: {e}"))?,
            );
            ns_dut = Some(a);
            ns_peer = Some(b);
        }
        Ok(WireEnv {
            backend,
            placement: placement.clone(),
            cores,
            veth,
            ns_dut,
            ns_peer,
            dir,
        })
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// testpmd's `--vdev` for the side under test (`dut`) or the peer.
    fn vdev(&self, dut: bool, socket: &std::path::Path, server: bool) -> String {
        match self.backend {
            Backend::Memif => format!(
                "net_memif0,role={},id=0,socket={},socket-abstract=no",
                if server { "server" } else { "client" },
                socket.display()
            ),
            Backend::Afpacket => {
                let v = self.veth.as_ref().expect("afpacket has a veth pair");
                format!(
                    "net_af_packet0,iface={},qpairs=1,qdisc_bypass=1",
                    if dut { v.a() } else { v.b() }
                )
            }
        }
    }

    fn netns(&self, dut: bool) -> Option<&str> {
        let ns = if dut { &self.ns_dut } else { &self.ns_peer };
        ns.as_ref().map(|n| n.name())
    }

    /// Frames the peer end of the veth pair has received, by the kernel's
    /// count (`ip -s -j link`).
    fn peer_kernel_rx(&self) -> Result<u64, String> {
        Ok(self.peer_kernel_counts()?.0)
    }

    /// The peer end's received and dropped frames, by the kernel's count.
    fn peer_kernel_counts(&self) -> Result<(u64, u64), String> {
        let (ns, v) = match (&self.ns_peer, &self.veth) {
            (Some(ns), Some(v)) => (ns, v),
            _ => return Err("no veth pair".into()),
        };
        let out = ns
            .ip(&["-s", "-j", "link", "show", v.b()])
            .map_err(|e| format!("ip -s link show {}: {e}", v.b()))?;
        let j: serde_json::Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("ip -s -j link show {}: {e}", v.b()))?;
        let rx = &j[0]["stats64"]["rx"];
        let (p, d) = match (rx["packets"].as_u64(), rx["dropped"].as_u64()) {
            (Some(p), Some(d)) => (p, d),
            _ => {
                return Err(format!(
                    "ip -s -j link show {}: no rx packets in {j}",
                    v.b()
                ))
            }
        };
        // veth counts a frame its peer's backlog refused as a transmit
        // drop of the sending end.
        let ns_a = self.ns_dut.as_ref().ok_or("no namespace")?;
        let out = ns_a
            .ip(&["-s", "-j", "link", "show", v.a()])
            .map_err(|e| format!("ip -s link show {}: {e}", v.a()))?;
        let j: serde_json::Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("ip -s -j link show {}: {e}", v.a()))?;
        let td = j[0]["stats64"]["tx"]["dropped"].as_u64().unwrap_or(0);
        Ok((p, d + td))
    }

    /// The rate at which the peer end's kernel counter grows over `window`
    /// (from now), the window's ends, and the frames
    /// the kernel dropped there meanwhile (its receive backlog was full).
    fn peer_kernel_rate(&self, window: Duration) -> Result<(f64, Instant, Instant, u64), String> {
        let ((c0, d0), t0) = (self.peer_kernel_counts()?, Instant::now());
        std::thread::sleep(window);
        let ((c1, d1), t1) = (self.peer_kernel_counts()?, Instant::now());
        Ok((
            c1.saturating_sub(c0) as f64 / (t1 - t0).as_secs_f64(),
            t0,
            t1,
            d1.saturating_sub(d0),
        ))
    }

    /// The emulated NIC's port on the side under test.
    fn emu_wire(&self, socket: &std::path::Path) -> Result<nic_emu::WireConfig, String> {
        let spec = match self.backend {
            Backend::Memif => format!("memif:socket={},role=server", socket.display()),
            Backend::Afpacket => format!(
                "afpacket:{}",
                self.veth.as_ref().expect("afpacket has a veth pair").a()
            ),
        };
        nic_emu::spec::parse_wire(&spec).map_err(|e| e.to_string())
    }

    /// The emulated NIC on the side under test, started as `role`.
    fn start_emu(
        &self,
        socket: &std::path::Path,
        mode: NicMode,
        role: Role,
    ) -> Result<EmuRun, String> {
        EmuRun::start(
            self.emu_wire(socket)?,
            mode,
            role,
            &self.placement,
            self.ns_dut.as_ref(),
        )
    }

    /// One trial of `setup` with packets of `wire_size` bytes (with FCS),
    /// measuring for `window`.
    pub fn trial(
        &self,
        setup: Setup,
        wire_size: usize,
        window: Duration,
    ) -> Result<TrialResult, String> {
        let len = crate::frames::frame_len_for_wire_size(wire_size);
        let (a, b) = self.cores;
        // The peer's testpmd polls on core B; the side under test's on A.
        let peer_cores = (a, b);
        let dut_cores = (b, a);
        let n = TRIALS.fetch_add(1, Ordering::Relaxed);
        let socket = self.dir.path().join(format!("memif-{n}.sock"));
        let mut extra = BTreeMap::new();
        let packets = match setup {
            Setup::Dpdk => {
                // memif: the source is the server, so it exists first.
                let mut src = TestPmd::spawn(
                    &format!("src{n}"),
                    self.netns(false),
                    peer_cores,
                    &self.vdev(false, &socket, true),
                    Fwd::TxOnly(len),
                )?;
                // A memif client that finds no socket does not retry, and
                // DPDK 23.11's client crashes if it connects to a server
                // whose port has not started: wait for the server to
                // forward.
                if !src.wait_until_forwarding(Duration::from_secs(20))? {
                    return Err(format!(
                        "dpdk: the source did not start forwarding in 20 s\n{}",
                        src.output()
                    ));
                }
                let mut sink = TestPmd::spawn(
                    &format!("sink{n}"),
                    self.netns(true),
                    dut_cores,
                    &self.vdev(true, &socket, false),
                    Fwd::RxOnly,
                )?;
                if !sink.wait_for_traffic(true, Duration::from_secs(20))? {
                    src.check_running()?;
                    return Err(format!(
                        "dpdk: no frames reached the sink in 20 s\n{}",
                        sink.output()
                    ));
                }
                std::thread::sleep(SETTLE);
                let (t0, t1) = hold(window);
                let rx = median(sink.rates_between(t0, t1).iter().map(|r| r.0).collect());
                let tx = median(src.rates_between(t0, t1).iter().map(|r| r.1).collect());
                extra.insert("offered_mpps".into(), tx / 1e6);
                // Each end is stopped while its peer still runs: DPDK
                // 23.11's memif driver may crash when its peer goes away
                // while it polls. The source stops last and may do so;
                // its rate was read already.
                sink.stop()?;
                if let Ok(s) = src.stop() {
                    extra.insert("source_tx_dropped".into(), s.tx_dropped as f64);
                }
                (rx * window.as_secs_f64()) as u64
            }
            Setup::DpdkTx => {
                let mut src = TestPmd::spawn(
                    &format!("src{n}"),
                    self.netns(true),
                    dut_cores,
                    &self.vdev(true, &socket, true),
                    Fwd::TxOnly(len),
                )?;
                if !src.wait_for_traffic(false, Duration::from_secs(20))? {
                    return Err(format!(
                        "dpdk-tx: testpmd sent nothing in 20 s\n{}",
                        src.output()
                    ));
                }
                std::thread::sleep(SETTLE);
                let (rate, t0, t1, dropped) = self.peer_kernel_rate(window)?;
                extra.insert("kernel_dropped".into(), dropped as f64);
                let tx = median(src.rates_between(t0, t1).iter().map(|r| r.1).collect());
                extra.insert("offered_mpps".into(), tx / 1e6);
                let s = src.stop()?;
                extra.insert("source_tx_dropped".into(), s.tx_dropped as f64);
                (rate * window.as_secs_f64()) as u64
            }
            Setup::EmuTx(mode) if self.backend == Backend::Afpacket => {
                let mut emu = self.start_emu(&socket, mode, Role::Source(len))?;
                let until = Instant::now() + Duration::from_secs(20);
                let first = self.peer_kernel_rx()?;
                while self.peer_kernel_rx()? == first {
                    if Instant::now() > until {
                        let out = emu.finish();
                        return Err(format!(
                            "emu-tx: nothing reached the veth's other end in 20 s (NIC: {out:?})"
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                std::thread::sleep(SETTLE);
                let c0 = emu.count();
                let (rate, t0, t1, dropped) = self.peer_kernel_rate(window)?;
                extra.insert("kernel_dropped".into(), dropped as f64);
                let c1 = emu.count();
                extra.insert(
                    "offered_mpps".into(),
                    (c1 - c0) as f64 / (t1 - t0).as_secs_f64() / 1e6,
                );
                let out = emu.finish()?;
                drop_extras(&mut extra, &out);
                (rate * window.as_secs_f64()) as u64
            }
            Setup::EmuTx(mode) => {
                let mut emu = self.start_emu(&socket, mode, Role::Source(len))?;
                let mut sink = TestPmd::spawn(
                    &format!("sink{n}"),
                    self.netns(false),
                    peer_cores,
                    &self.vdev(false, &socket, false),
                    Fwd::RxOnly,
                )?;
                if !sink.wait_for_traffic(true, Duration::from_secs(20))? {
                    let out = emu.finish();
                    return Err(format!(
                        "emu-tx: no frames reached testpmd in 20 s (NIC: {out:?})\n{}",
                        sink.output()
                    ));
                }
                std::thread::sleep(SETTLE);
                let c0 = emu.count();
                let (t0, t1) = hold(window);
                let c1 = emu.count();
                let rx = median(sink.rates_between(t0, t1).iter().map(|r| r.0).collect());
                extra.insert(
                    "offered_mpps".into(),
                    (c1 - c0) as f64 / (t1 - t0).as_secs_f64() / 1e6,
                );
                sink.stop()?;
                let out = emu.finish()?;
                drop_extras(&mut extra, &out);
                (rx * window.as_secs_f64()) as u64
            }
            Setup::EmuRx(mode) => {
                let mut emu = self.start_emu(&socket, mode, Role::Sink)?;
                let mut src = TestPmd::spawn(
                    &format!("src{n}"),
                    self.netns(false),
                    peer_cores,
                    &self.vdev(false, &socket, false),
                    Fwd::TxOnly(len),
                )?;
                let until = Instant::now() + Duration::from_secs(20);
                while emu.count() == 0 {
                    src.check_running()?;
                    if Instant::now() > until {
                        let out = emu.finish();
                        return Err(format!(
                            "emu-rx: no frames reached the NIC's application in 20 s \
                             (NIC: {out:?})\n{}",
                            src.output()
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                // Past the first burst, as the testpmd sinks are.
                std::thread::sleep(SETTLE);
                let c0 = emu.count();
                let t0 = Instant::now();
                std::thread::sleep(window);
                let c1 = emu.count();
                let t1 = Instant::now();
                let tx = median(src.rates_between(t0, t1).iter().map(|r| r.1).collect());
                extra.insert("offered_mpps".into(), tx / 1e6);
                let s = src.stop()?;
                let out = emu.finish()?;
                drop_extras(&mut extra, &out);
                extra.insert("source_tx_dropped".into(), s.tx_dropped as f64);
                ((c1 - c0) as f64 * window.as_secs_f64() / (t1 - t0).as_secs_f64()) as u64
            }
        };
        let _ = std::fs::remove_file(&socket);
        Ok(TrialResult {
            packets,
            bytes: packets * len as u64,
            elapsed: window,
            extra,
            ..Default::default()
        })
    }
}

/// How long a trial runs between frames first arriving and its window:
/// testpmd's rate samples then all fall after its first, partial one.
const SETTLE: Duration = Duration::from_millis(1000);

/// Sleeps through the measured window, from now; returns its ends.
fn hold(window: Duration) -> (Instant, Instant) {
    let t0 = Instant::now();
    std::thread::sleep(window);
    (t0, Instant::now())
}

/// The NIC's drops of a trial, as trial extras.
fn drop_extras(extra: &mut BTreeMap<String, f64>, out: &emu::Outcome) {
    extra.insert(
        "wire_drops".into(),
        out.wire_drops.values().sum::<u64>() as f64,
    );
    extra.insert("nic_drops".into(), out.nic_drops as f64);
}

/// The median ([`crate::stats::median`]), or 0 for none.
pub fn median(v: Vec<f64>) -> f64 {
    crate::stats::median(&v).unwrap_or(0.0)
}
