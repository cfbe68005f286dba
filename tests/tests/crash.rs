//! Crash and churn, each party a process of its own: an application killed
//! (SIGKILL) mid-stream while another keeps receiving, on both interfaces;
//! a thousand attach/kill cycles; a NIC stopped (SIGSTOP) for seconds under
//! load and resumed.
//!
//! The NIC is `enso-test-nic` (the device `nic-emu run` runs, driven by
//! commands on stdin so that its counters can be read at any moment), the
//! applications `enso-crash-app`. An application's shared memory is a pair
//! of memfds the NIC holds open (`/proc/<nic>/fd`); its device directory
//! holds only the device's own files. What "reclaimed" means is shown by
//! the NIC's counters (applications, flow rules, fallback pipes, detached
//! totals), its open files and the directory listing, and by a new
//! application getting the very same pipes, notification buffer and
//! queues, binding the same flow and receiving it.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use enso_tests::procs::{self, Proc};
use nic_emu::Stats;
use serde_json::Value;

/// The tests here run one at a time: each keeps several processes polling,
/// and the machine may have two cores.
static SERIAL: Mutex<()> = Mutex::new(());

const LONG: Duration = Duration::from_secs(20);

/// A standalone device in a process of its own, in a fresh directory.
struct TestNic {
    p: Proc,
    name: String,
    /// Where its device directory is made (removed last).
    parent: tempfile::TempDir,
}

impl TestNic {
    fn start(name: &str, ports: &[&str], pipe_size: usize) -> Self {
        let parent = tempfile::tempdir().expect("tempdir");
        let mut c = Command::new(env!("CARGO_BIN_EXE_enso-test-nic"));
        c.arg("--dir")
            .arg(parent.path())
            .args(["--name", name])
            .args(["--pipe-size", &pipe_size.to_string()]);
        for p in ports {
            c.args(["--port", p]);
        }
        let p = Proc::spawn("enso-test-nic", c);
        p.expect_line("ready", LONG);
        Self {
            p,
            name: name.to_string(),
            parent,
        }
    }

    fn pid(&self) -> u32 {
        self.p.pid()
    }

    fn devdir(&self) -> PathBuf {
        self.parent.path().join(format!("enso-{}", self.name))
    }

    fn stats(&mut self) -> Stats {
        self.p.send("stats");
        let l = self
            .p
            .next_line(LONG)
            .unwrap_or_else(|| panic!("no stats; NIC stderr: {}", self.p.stderr()));
        serde_json::from_str(&l).unwrap_or_else(|e| panic!("stats {l:?}: {e}"))
    }

    fn command(&mut self, c: &str) {
        self.p.send(c);
        assert_eq!(self.p.next_line(LONG).as_deref(), Some("ok"), "{c}");
    }

    /// Polls the counters until `pred` holds; panics (with them) after
    /// `limit`.
    fn wait_for(&mut self, what: &str, limit: Duration, pred: impl Fn(&Stats) -> bool) -> Stats {
        let until = Instant::now() + limit;
        loop {
            let s = self.stats();
            if pred(&s) {
                return s;
            }
            assert!(
                Instant::now() < until,
                "{what}: not within {limit:?}: apps {:?}, rules {}, fallback {}, drops {:?}",
                s.apps.iter().map(|a| a.app_id).collect::<Vec<_>>(),
                s.flow_rules,
                s.fallback_pipes,
                s.drops()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Stops it the orderly way; its directory must be gone.
    fn quit(mut self) {
        self.p.send("quit");
        let st = self.p.wait(LONG);
        assert!(st.success(), "NIC: {st}: {}", self.p.stderr());
        assert!(!self.devdir().exists(), "the device directory outlived it");
    }
}

/// Starts an application on `nic`: `flow` bound, optionally a fallback
/// pipe or RSS queue, optionally echoing.
fn app(nic: &TestNic, interface: &str, flow: u32, flows: u32, fallback: bool, echo: bool) -> Proc {
    app_with(nic, interface, flow, flows, fallback, echo, &[])
}

/// [`app`] with more arguments.
fn app_with(
    nic: &TestNic,
    interface: &str,
    flow: u32,
    flows: u32,
    fallback: bool,
    echo: bool,
    extra: &[&str],
) -> Proc {
    let mut c = Command::new(env!("CARGO_BIN_EXE_enso-crash-app"));
    c.args(extra);
    c.arg("--dir")
        .arg(nic.parent.path())
        .args(["--name", &nic.name, "--interface", interface])
        .args(["--flow", &flow.to_string(), "--flows", &flows.to_string()]);
    if fallback {
        c.arg("--fallback");
    }
    if echo {
        c.arg("--echo");
    }
    Proc::spawn(&format!("{interface} app (flow {flow})"), c)
}

/// Waits for an application's `ready` line: what the device gave it.
fn ready(a: &Proc) -> Value {
    serde_json::from_str(&a.expect_line("ready ", LONG)).expect("ready json")
}

fn field(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("no {k} in {v}"))
}

/// Waits until application `a` says it received at least `n` frames of its
/// flow; returns what it said.
fn wait_count(a: &Proc, n: u64, limit: Duration) -> u64 {
    let until = Instant::now() + limit;
    let mut last = 0;
    loop {
        if let Some(c) = a.last_count() {
            last = c;
        }
        if last >= n {
            return last;
        }
        assert!(
            Instant::now() < until,
            "{}: {last} frames, not {n}, within {limit:?}; stderr: {}",
            a.name,
            a.stderr()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Ends an application the orderly way (its stdin closed) and returns its
/// `done` report.
fn finish(mut a: Proc) -> Value {
    a.close_stdin();
    let done = a.expect_line("done ", LONG);
    let st = a.wait(LONG);
    assert!(st.success(), "{}: {st}: {}", a.name, a.stderr());
    serde_json::from_str(&done).expect("done json")
}

/// Of the NIC's open files, those an attachment makes (sockets, memfds),
/// and the rest with the stats snapshot being rewritten left out.
fn nic_files(pid: u32) -> Vec<String> {
    procs::open_files(pid)
        .into_iter()
        .filter(|f| !f.ends_with("stats.json.tmp"))
        .collect()
}

/// The memfds of application `app_id` among the NIC's open files.
fn app_memfds(pid: u32, name: &str, app_id: u64) -> Vec<String> {
    let tag = format!("memfd:enso-{name}-app-{app_id}.");
    nic_files(pid)
        .into_iter()
        .filter(|f| f.contains(&tag))
        .collect()
}

/// Frames the pipes or queues of application `app_id` took in, and those
/// they dropped.
fn app_rx(s: &Stats, app_id: u64) -> (u64, u64) {
    let a = s
        .apps
        .iter()
        .find(|a| u64::from(a.app_id) == app_id)
        .unwrap_or_else(|| panic!("application {app_id} not attached"));
    let p = a.pipes.iter().map(|p| &p.counters);
    let q = a.queues.iter().map(|q| &q.counters);
    (
        p.clone().map(|c| c.rx_frames).sum::<u64>() + q.clone().map(|c| c.rx_frames).sum::<u64>(),
        p.map(|c| c.drop_pipe_full + c.drop_notif_ring_full)
            .sum::<u64>()
            + q.map(|c| c.drop_no_descriptor + c.drop_bad_descriptor)
                .sum::<u64>(),
    )
}

/// Frames of flow `flow` among the first `sent` frames of a generator of
/// `flows` flows (it sends frame `seq` to flow `seq % flows`).
fn sent_to_flow(sent: u64, flow: u32, flows: u32) -> u64 {
    let (f, n) = (u64::from(flow), u64::from(flows));
    if sent > f {
        (sent - f).div_ceil(n)
    } else {
        0
    }
}

/// The files a running device keeps in its directory, and no other.
fn assert_only_device_files(dir: &std::path::Path) {
    let names = procs::listing(dir);
    for n in ["control.sock", "device.pid"] {
        assert!(names.iter().any(|x| x == n), "{n} missing: {names:?}");
    }
    for n in &names {
        assert!(
            nic_emu::devdir::DEVICE_FILES.contains(&n.as_str()),
            "{n} in the device directory: {names:?}"
        );
    }
}

const FLOWS: u32 = 4;
/// Four flows of 64..600 B frames at a rate two cores keep up with.
const GENERATOR: &str = "generator:size=64-600,flows=4,pps=20000,echo=0";

fn killed_mid_stream(interface: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = format!("kill-{}", &interface[..3]);
    let mut nic = TestNic::start(&tag, &[GENERATOR], 1 << 20);
    let pid = nic.pid();
    // The survivor: flow 0 only, checked frame by frame.
    let survivor = app(&nic, interface, 0, FLOWS, false, false);
    let s_info = ready(&survivor);
    nic.wait_for("survivor's rule", LONG, |s| s.flow_rules == 1);
    let files_survivor = nic_files(pid);
    // The victim: flow 1 bound, a fallback pipe (flows 2 and 3), echoing.
    let mut victim = app(&nic, interface, 1, FLOWS, true, true);
    let v_info = ready(&victim);
    let v_id = field(&v_info, "app_id");
    nic.wait_for("victim's rule and fallback", LONG, |s| {
        s.flow_rules == 2 && s.fallback_pipes == 1
    });
    assert_eq!(app_memfds(pid, &tag, v_id).len(), 2, "{:?}", nic_files(pid));
    nic.command("go");
    // Mid-stream: both receive, the victim's sends go out.
    wait_count(&survivor, 300, LONG);
    wait_count(&victim, 300, LONG);
    nic.wait_for("the victim's echoes", LONG, |s| {
        s.apps.iter().any(|a| {
            let queued: u64 = a.queues.iter().map(|q| q.counters.tx_frames).sum();
            u64::from(a.app_id) == v_id && a.counters.tx_frames + queued > 300
        })
    });
    let at_kill = survivor.last_count().unwrap_or(0);
    victim.signal(libc::SIGKILL);
    let st = victim.wait(LONG);
    assert_eq!(st.code(), None, "killed, not exited: {st}");
    // The NIC detaches it: its resources go, the survivor's stay.
    let s = nic.wait_for("the victim's detach", LONG, |s| s.apps.len() == 1);
    assert_eq!(u64::from(s.apps[0].app_id), field(&s_info, "app_id"));
    assert_eq!(
        (s.flow_rules, s.fallback_pipes),
        (1, 0),
        "rules of the dead"
    );
    // Its counters are kept in the detached totals.
    if interface == "enso" {
        assert!(s.detached_pipes.rx_frames >= 300, "{:?}", s.detached_pipes);
        assert!(s.detached_apps.tx_frames > 300, "{:?}", s.detached_apps);
    } else {
        assert!(
            s.detached_queues.rx_frames >= 300,
            "{:?}",
            s.detached_queues
        );
        assert!(s.detached_queues.tx_frames > 300, "{:?}", s.detached_queues);
    }
    assert!(
        app_memfds(pid, &tag, v_id).is_empty(),
        "{:?}",
        nic_files(pid)
    );
    // Its connection closes as its control thread ends, just after.
    let until = Instant::now() + LONG;
    while nic_files(pid) != files_survivor && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(nic_files(pid), files_survivor, "the NIC's open files");
    assert_only_device_files(&nic.devdir());
    // Its flows now match nothing: counted as such, never delivered.
    let no_match = s.ports[0].counters.drop_no_match;
    nic.wait_for("frames of the dead one's flows dropped", LONG, |s| {
        s.ports[0].counters.drop_no_match >= no_match + 300
    });
    // A new application takes its place: the same pipes, notification
    // buffer and queues, the same rule, and the flow's frames.
    let replacement = app(&nic, interface, 1, FLOWS, true, true);
    let r_info = ready(&replacement);
    for k in [
        "pipe_base",
        "pipe_count",
        "nbuf_id",
        "desc_queue_base",
        "desc_queue_count",
    ] {
        assert_eq!(field(&r_info, k), field(&v_info, k), "{k}");
    }
    assert!(field(&r_info, "app_id") > v_id);
    nic.wait_for("replacement's rule and fallback", LONG, |s| {
        s.flow_rules == 2 && s.fallback_pipes == 1
    });
    wait_count(&replacement, 300, LONG);
    // The survivor received on throughout.
    wait_count(&survivor, at_kill + 1000, LONG);
    // Traffic stops; the survivor takes in what its pipe or queue holds.
    nic.command("pause");
    let s_id = field(&s_info, "app_id");
    let until = Instant::now() + LONG;
    let (rx_frames, rx_drops, sent) = loop {
        let s = nic.stats();
        let rx = app_rx(&s, s_id);
        if survivor.last_count() == Some(rx.0) || Instant::now() > until {
            break (rx.0, rx.1, s.generator(0).expect("generator").sent);
        }
        std::thread::sleep(Duration::from_millis(30));
    };
    let r = finish(replacement);
    assert_eq!(field(&r, "bad"), 0, "replacement: {r}");
    assert!(
        field(&r, "received") >= 300 && field(&r, "fallback") > 0,
        "{r}"
    );
    let d = finish(survivor);
    // Every frame byte for byte, in order; every frame of its flow the
    // generator sent either received or counted by the NIC as dropped at
    // the survivor's pipe or queue (frames missing between those received
    // among them).
    assert_eq!(field(&d, "bad"), 0, "survivor: {d}");
    assert_eq!(field(&d, "received"), rx_frames, "survivor: {d}");
    assert_eq!(rx_frames + rx_drops, sent_to_flow(sent, 0, FLOWS), "{d}");
    assert!(field(&d, "gaps") <= rx_drops, "survivor: {d}");
    assert!(rx_frames > at_kill + 1000, "{d}");
    nic.quit();
}

#[test]
fn an_enso_application_killed_mid_stream_is_reclaimed_and_replaced() {
    killed_mid_stream("enso");
}

#[test]
fn a_packetized_application_killed_mid_stream_is_reclaimed_and_replaced() {
    killed_mid_stream("packetized");
}

/// Asks the NIC's control socket something it refuses, and waits for the
/// answer: every connection made before has been accepted by then.
fn probe(nic: &TestNic) {
    use std::io::{BufRead, Write};
    let mut s =
        std::os::unix::net::UnixStream::connect(nic.devdir().join(nic_emu::device::CONTROL_SOCKET))
            .expect("control socket");
    s.set_read_timeout(Some(LONG)).expect("timeout");
    s.write_all(b"probe\n").expect("probe");
    let mut line = String::new();
    std::io::BufReader::new(&s)
        .read_line(&mut line)
        .expect("answer");
    assert!(line.contains("bad request"), "{line}");
}

/// What the NIC process holds: open files, resident memory (kB), threads,
/// and its device directory's listing.
fn footprint(nic: &TestNic) -> (Vec<String>, u64, u64, Vec<String>) {
    let pid = nic.pid();
    (
        nic_files(pid),
        procs::status_field(pid, "VmRSS"),
        procs::status_field(pid, "Threads"),
        procs::listing(&nic.devdir())
            .into_iter()
            .filter(|f| f != "stats.json.tmp")
            .collect(),
    )
}

#[test]
fn a_thousand_attach_kill_cycles_leave_the_nic_as_it_was() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut nic = TestNic::start(
        "churn",
        &["generator:size=64-600,flows=4,pps=10000,echo=0"],
        64 << 10,
    );
    nic.command("go");
    // Its first counters snapshot, written every 200 ms, is part of what
    // the directory holds from then on.
    let until = Instant::now() + LONG;
    while !nic.devdir().join(nic_emu::device::STATS_FILE).exists() {
        assert!(Instant::now() < until, "no stats snapshot");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut rng = enso_tests::Rng(0x5eed_c0de_1234_5678);
    // Before any application: the NIC's open files and threads (its
    // control thread of each connection ends just after the detach).
    let (files0, _, threads0, _) = footprint(&nic);
    let settle = |nic: &TestNic| {
        let until = Instant::now() + LONG;
        loop {
            let f = footprint(nic);
            if (&f.0, f.2) == (&files0, threads0) || Instant::now() > until {
                return f;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    // What each interface's applications got the first time: every later
    // one must get the same (all the dead one's resources were free again).
    let mut first: [Option<Value>; 2] = [None, None];
    let mut cycle = |nic: &mut TestNic, i: usize, rng: &mut enso_tests::Rng| {
        let k = i % 2;
        let interface = ["enso", "packetized"][k];
        let mut a = app(nic, interface, 1, FLOWS, true, true);
        let r = rng.next_u64();
        let anytime = i % 8 == 7;
        if anytime {
            // Killed at any moment: before it connects, with its request
            // waiting to be accepted or being served, or attached.
            std::thread::sleep(Duration::from_micros(r % 20_000));
        } else {
            let info = ready(&a);
            let got: Vec<u64> = ["pipe_base", "nbuf_id", "desc_queue_base", "pipe_count"]
                .iter()
                .map(|f| field(&info, f))
                .collect();
            let want = first[k].get_or_insert_with(|| info.clone());
            let want: Vec<u64> = ["pipe_base", "nbuf_id", "desc_queue_base", "pipe_count"]
                .iter()
                .map(|f| field(want, f))
                .collect();
            assert_eq!(got, want, "cycle {i}: {info}");
            // Mid-stream, for a moment.
            std::thread::sleep(Duration::from_micros(r % 3000));
        }
        a.signal(libc::SIGKILL);
        a.wait(LONG);
        if anytime {
            // A request it left queued is accepted before the probe's and
            // served (attached, then detached) by a thread of its own: once
            // the probe is answered and the NIC's threads and files are
            // back to what they were, nothing of it is left to come.
            probe(nic);
            settle(nic);
        }
        nic.wait_for("detach", LONG, |s| s.apps.is_empty());
    };
    // A few cycles first: the allocator's arenas and the thread stacks it
    // caches for the control threads reach their working size.
    for i in 0..16 {
        cycle(&mut nic, i, &mut rng);
    }
    let (_, rss0, _, dir0) = settle(&nic);
    let start = Instant::now();
    for i in 0..1000 {
        cycle(&mut nic, i, &mut rng);
    }
    let took = start.elapsed();
    let s = nic.wait_for("all detached", LONG, |s| s.apps.is_empty());
    let (files1, rss1, threads1, dir1) = settle(&nic);
    eprintln!(
        "1000 cycles in {took:?}: VmRSS {rss0} -> {rss1} kB, {threads1} threads, {} open files",
        files1.len()
    );
    assert_eq!(files1, files0, "the NIC's open files");
    assert_eq!(threads1, threads0, "the NIC's threads");
    assert_eq!(dir1, dir0, "the device directory");
    assert_eq!((s.flow_rules, s.fallback_pipes), (0, 0));
    // Resident memory: the same within 1 MiB either way, that is within
    // 1 KiB a cycle. Nothing is kept per application; what moves is the
    // allocator's free lists and cached thread stacks, and pages of the
    // NIC's own structures touched for the first time.
    assert!(
        rss1 + 1024 >= rss0 && rss1 <= rss0 + 1024,
        "VmRSS {rss0} kB before, {rss1} kB after"
    );
    // The applications did attach, stream and die: their counters are in
    // the detached totals.
    assert!(s.detached_apps.mmio_writes > 1000, "{:?}", s.detached_apps);
    assert!(
        s.detached_pipes.rx_frames + s.detached_queues.rx_frames > 0,
        "nothing received"
    );
    nic.quit();
}

#[test]
fn a_nic_stopped_for_seconds_under_load_resumes_and_its_applications_carry_on() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut nic = TestNic::start(
        "stopped",
        &["generator:size=64-600,flows=3,pps=20000,echo=0", "null"],
        1 << 20,
    );
    // Flow 0 to an Ensō echo server, flow 1 to a packetized one; flow 2 to
    // an Ensō application that also sends 64 B frames out of port 1 (a
    // null wire, which counts them) as fast as its TX pipe takes them.
    let apps = [
        app(&nic, "enso", 0, 3, false, true),
        app(&nic, "packetized", 1, 3, false, true),
        app_with(&nic, "enso", 2, 3, false, false, &["--send-port", "1"]),
    ];
    let ids: Vec<u64> = apps.iter().map(|a| field(&ready(a), "app_id")).collect();
    nic.wait_for("the rules", LONG, |s| s.flow_rules == 3);
    nic.command("go");
    for a in &apps {
        wait_count(a, 500, LONG);
    }
    let sent_before = nic.stats().ports[1].counters.tx_discarded;
    assert!(sent_before > 0, "the sender sent nothing");
    nic.p.signal(libc::SIGSTOP);
    let until = Instant::now() + LONG;
    while procs::state(nic.pid()) != 'T' {
        assert!(Instant::now() < until, "the NIC did not stop");
        std::thread::sleep(Duration::from_millis(1));
    }
    let before: Vec<u64> = apps.iter().map(|a| wait_count(a, 0, LONG)).collect();
    std::thread::sleep(Duration::from_millis(2500));
    let mut apps = apps;
    for a in &mut apps {
        assert!(a.exited().is_none(), "{} died: {}", a.name, a.stderr());
    }
    nic.p.signal(libc::SIGCONT);
    for (a, b) in apps.iter().zip(&before) {
        wait_count(a, b + 2000, LONG);
    }
    nic.wait_for("the sender's frames", LONG, |s| {
        s.ports[1].counters.tx_discarded > sent_before + 5000
    });
    nic.command("pause");
    // Each takes in and sends back what it holds.
    let until = Instant::now() + LONG;
    let (rx, sent) = loop {
        let s = nic.stats();
        let rx: Vec<(u64, u64)> = ids.iter().map(|&id| app_rx(&s, id)).collect();
        let counts: Vec<Option<u64>> = apps.iter().map(|a| a.last_count()).collect();
        if rx.iter().zip(&counts).all(|(r, c)| Some(r.0) == *c) || Instant::now() > until {
            break (rx, s.generator(0).expect("generator").sent);
        }
        std::thread::sleep(Duration::from_millis(30));
    };
    // Each frame of each flow intact and in order, and each either
    // received or counted as dropped at its pipe or queue (the generator
    // catches up after the stop faster than the applications take frames).
    let mut done = Vec::new();
    for (flow, (a, (rx_frames, drops))) in apps.into_iter().zip(rx).enumerate() {
        let name = a.name.clone();
        let d = finish(a);
        assert_eq!(field(&d, "bad"), 0, "{name}: {d}");
        assert_eq!(field(&d, "received"), rx_frames, "{name}: {d}");
        let want = sent_to_flow(sent, flow as u32, 3);
        assert_eq!(rx_frames + drops, want, "{name}: {d}");
        assert!(field(&d, "gaps") <= drops, "{name}: {d}");
        done.push(d);
    }
    for d in &done[..2] {
        assert_eq!(field(d, "echoed"), field(d, "received"), "{d}");
    }
    // Every frame the generator sent came back intact, was dropped on
    // arrival and counted, or is one of flow 2's, which are not sent back.
    let kept = field(&done[2], "received");
    let s = nic.wait_for("every echo back", LONG, |s| {
        let g = s.generator(0).expect("generator");
        s.apps.is_empty() && g.in_flight() == kept
    });
    let g = s.generator(0).expect("generator");
    assert_eq!((g.corrupt, g.duplicate, g.foreign), (0, 0, 0), "{g:?}");
    assert_eq!(g.sent, g.returned + g.dropped_on_arrival + kept, "{g:?}");
    assert_eq!(g.dropped_on_arrival, s.total_drops(), "{:?}", s.drops());
    assert!(g.returned > 4000, "{g:?}");
    // Every frame the sender sent went out, none was held back.
    assert_eq!(
        s.ports[1].counters.tx_discarded,
        field(&done[2], "sent"),
        "{:?}",
        s.ports[1]
    );
    assert_eq!(s.detached_apps.tx_notifications_discarded, 0);
    nic.quit();
}

#[test]
fn an_application_waiting_on_a_stopped_nic_notices_its_death_at_once() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut nic = TestNic::start(
        "waitdeath",
        &["generator:size=64,flows=1,pps=20000,echo=0", "null"],
        1 << 20,
    );
    let mut sender = app_with(&nic, "enso", 0, 1, false, false, &["--send-port", "1"]);
    ready(&sender);
    nic.wait_for("the rule", LONG, |s| s.flow_rules == 1);
    nic.command("go");
    wait_count(&sender, 100, LONG);
    nic.wait_for("the sender's frames", LONG, |s| {
        s.ports[1].counters.tx_discarded > 1000
    });
    // Stopped, the NIC completes nothing: the sender fills its TX pipe and
    // its credits and waits. Then the NIC dies.
    nic.p.signal(libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(500));
    assert!(sender.exited().is_none(), "{}", sender.stderr());
    let killed = Instant::now();
    nic.p.kill();
    let st = sender.wait(LONG);
    let took = killed.elapsed();
    let err = sender.stderr();
    assert_eq!(st.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("enso-crash-app: ") && err.contains("device gone"),
        "{err}"
    );
    // Its wait looks every 10 ms; the stall timeout (10 s) is not waited out.
    assert!(took < Duration::from_secs(3), "{took:?}");
}
