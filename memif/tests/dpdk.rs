//! Interop with DPDK's memif PMD, through `dpdk-testpmd`, in both roles.
//!
//! Needs `dpdk-testpmd` (Debian: package `dpdk-dev`) and the memif PMD
//! (`librte-net-memif23`). Without them these tests print why and pass,
//! unless `CI=true`, where they fail instead.
//!
//! testpmd runs with `--no-huge --no-pci -m 1024` on lcores 0 and 1, with
//! `-a` (start forwarding at once); a newline on its stdin stops it, and it
//! prints its accumulated forward statistics, which the tests read.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{config, frame, len_of, pump};
use memif::{Memif, Role, SocketName};

/// Serialises the tests: each testpmd busy-polls a core of two.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Whether `dir` holds a file whose name starts with `prefix`.
fn has_file(dir: &std::path::Path, prefix: &str) -> bool {
    std::fs::read_dir(dir).is_ok_and(|d| {
        d.flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(prefix))
    })
}

fn missing_tool() -> Option<String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if !std::env::split_paths(&path).any(|d| d.join("dpdk-testpmd").is_file()) {
        return Some(
            "dpdk-testpmd not found (Debian: apt-get install dpdk-dev librte-net-memif23)".into(),
        );
    }
    // The PMD sits in the library directory and in DPDK's PMD directory
    // (e.g. /usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0), which testpmd loads.
    let libdirs = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/usr/local/lib",
    ];
    let found = libdirs.iter().any(|lib| {
        let dpdk = std::path::Path::new(lib).join("dpdk");
        has_file(std::path::Path::new(lib), "librte_net_memif.so")
            || std::fs::read_dir(&dpdk).is_ok_and(|d| {
                d.flatten()
                    .any(|pmds| has_file(&pmds.path(), "librte_net_memif.so"))
            })
    });
    if !found {
        return Some("DPDK's memif PMD (librte_net_memif.so) not found (Debian: apt-get install librte-net-memif23)".into());
    }
    None
}

/// False (after saying why) when testpmd is missing; a failure under CI.
fn have_testpmd() -> bool {
    match missing_tool() {
        None => true,
        Some(why) if std::env::var("CI").as_deref() == Ok("true") => panic!("CI=true and {why}"),
        Some(why) => {
            eprintln!("skipping: {why}");
            false
        }
    }
}

/// A running testpmd; killed on drop if still running.
struct TestPmd {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Arc<Mutex<String>>,
    cmdline: String,
    /// EAL's runtime directory for our --file-prefix, removed on drop.
    runtime_dir: std::path::PathBuf,
}

impl TestPmd {
    fn spawn(tag: &str, vdev: &str, fwd: &str) -> TestPmd {
        TestPmd::spawn_with(tag, vdev, fwd, &[])
    }

    fn spawn_with(tag: &str, vdev: &str, fwd: &str, eal_extra: &[&str]) -> TestPmd {
        let prefix = format!("memif-test-{}-{tag}", std::process::id());
        let mut args: Vec<&str> = eal_extra.to_vec();
        let vdev_arg = format!("--vdev={vdev}");
        let fwd_arg = format!("--forward-mode={fwd}");
        args.extend([
            "--no-huge",
            "--no-pci",
            "-m",
            "1024",
            "--file-prefix",
            &prefix,
            "--main-lcore",
            "0",
            "-l",
            "0,1",
            &vdev_arg,
            "--",
            "--total-num-mbufs=32768",
            // Without this, testpmd drains and drops whatever arrives in
            // the first second of forwarding, uncounted.
            "--no-flush-rx",
            &fwd_arg,
            "-a",
        ]);
        let cmdline = format!("dpdk-testpmd {}", args.join(" "));
        eprintln!("running: {cmdline}");
        let mut child = Command::new("dpdk-testpmd")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn dpdk-testpmd");
        let out = Arc::new(Mutex::new(String::new()));
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let out = out.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let mut o = out.lock().unwrap();
                    o.push_str(&line);
                    o.push('\n');
                }
            });
        }
        TestPmd {
            stdin: child.stdin.take(),
            child,
            out,
            cmdline,
            runtime_dir: std::path::Path::new("/var/run/dpdk").join(&prefix),
        }
    }

    fn output(&self) -> String {
        self.out.lock().unwrap().clone()
    }

    fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "testpmd exited early ({status}):\n{}\n{}",
                self.cmdline,
                self.output()
            );
        }
    }

    /// Presses enter, waits (bounded) for exit; returns the accumulated
    /// (RX-packets, TX-packets) and the output.
    fn stop(mut self) -> (u64, u64, String) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"\n");
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "testpmd did not exit:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // Let the reader threads catch the last lines.
        std::thread::sleep(Duration::from_millis(200));
        let out = self.output();
        let stats = out
            .split("Accumulated forward statistics for all ports")
            .nth(1)
            .unwrap_or_else(|| panic!("no statistics in testpmd output:\n{out}"));
        let num = |key: &str| -> u64 {
            let at = stats
                .find(key)
                .unwrap_or_else(|| panic!("no {key} in:\n{out}"))
                + key.len();
            stats[at..]
                .split_whitespace()
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        (num("RX-packets:"), num("TX-packets:"), out)
    }
}

impl Drop for TestPmd {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.runtime_dir);
    }
}

fn wait_connected(ep: &mut Memif, pmd: &mut TestPmd) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ep.is_connected() {
        ep.poll_control().unwrap();
        pmd.assert_running();
        // (A testpmd server answers "ID not found" until its port has
        // started; our client just retries. A client that fails is final.)
        if ep.config().role == Role::Server {
            assert_eq!(
                ep.counters().handshake_errors,
                0,
                "handshake with testpmd failed: {:?}",
                ep.last_error()
            );
        }
        assert!(
            Instant::now() < deadline,
            "no connection with testpmd ({:?}):\n{}",
            ep.last_error(),
            pmd.output()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sends `n` frames (60..=1514 bytes) to testpmd forwarding in io mode
/// and checks each comes back byte for byte, in order. At most `window`
/// frames are in flight, so testpmd never has to drop.
fn echo(ep: &mut Memif, pmd: &mut TestPmd, n: u64, window: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut next_tx, mut next_rx) = (0u64, 0u64);
    let mut batch = Vec::new();
    let mut polls = 0u32;
    while next_rx < n {
        let room = (next_rx + window).min(n).saturating_sub(next_tx);
        if room > 0 {
            batch.clear();
            for s in next_tx..next_tx + room.min(32) {
                batch.push(frame(s, len_of(s, 1514).max(60)));
            }
            next_tx += ep.tx_burst(0, batch.iter().map(Vec::as_slice)) as u64;
        }
        ep.rx_burst(0, 64, |f| {
            let want = frame(next_rx, len_of(next_rx, 1514).max(60));
            assert!(
                f == want.as_slice(),
                "frame {next_rx} came back different ({} bytes)",
                f.len()
            );
            next_rx += 1;
        });
        polls += 1;
        if polls % 4096 == 0 {
            ep.poll_control().unwrap();
            pmd.assert_running();
        }
        assert!(
            ep.is_connected(),
            "lost the connection: {:?}\n{}",
            ep.last_error(),
            pmd.output()
        );
        assert!(
            Instant::now() < deadline,
            "echo stalled at {next_rx}/{n} (sent {next_tx}), {:?}:\n{}",
            ep.counters(),
            pmd.output()
        );
    }
}

#[test]
fn our_server_echoes_through_a_testpmd_client_on_a_filesystem_socket() {
    if !have_testpmd() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memif.sock");
    let mut server = Memif::new(config(SocketName::Path(path.clone()), Role::Server, 10)).unwrap();
    let vdev = format!(
        "net_memif0,role=client,id=0,socket={},socket-abstract=no",
        path.display()
    );
    let mut pmd = TestPmd::spawn("fs", &vdev, "io");
    wait_connected(&mut server, &mut pmd);

    let n = 20_000;
    echo(&mut server, &mut pmd, n, 256);
    let (rx, tx, out) = pmd.stop();
    eprintln!("testpmd RX-packets {rx} TX-packets {tx}");
    assert_eq!((rx, tx), (n, n), "testpmd output:\n{out}");
    let c = server.counters();
    assert_eq!((c.tx_frames, c.rx_frames), (n, n));
    assert_eq!(c.tx_bytes, c.rx_bytes);
    assert_eq!((c.bad_descriptor, c.ring_errors, c.oversize), (0, 0, 0));

    // testpmd said DISCONNECT or closed the socket on exit.
    pump(&mut [&mut server], 10, "disconnect", |e| {
        !e[0].is_connected()
    });
    assert_eq!(server.counters().disconnects, 1);
    assert!(path.exists(), "our socket file stays while we run");
    drop(server);
    assert!(!path.exists(), "and goes when we stop");
}

#[test]
fn our_client_echoes_through_a_testpmd_server_on_an_abstract_socket() {
    if !have_testpmd() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let name = format!("memif-test-{}-abs", std::process::id());
    let vdev = format!("net_memif0,role=server,id=0,socket={name},socket-abstract=yes");
    let mut pmd = TestPmd::spawn("abs", &vdev, "io");
    let mut client = Memif::new(config(
        SocketName::parse(&format!("@{name}")),
        Role::Client,
        10,
    ))
    .unwrap();
    wait_connected(&mut client, &mut pmd);
    assert!(
        client.peer_name().is_some_and(|n| n.contains("DPDK")),
        "{:?}",
        client.peer_name()
    );

    let n = 20_000;
    echo(&mut client, &mut pmd, n, 256);
    let (rx, tx, out) = pmd.stop();
    eprintln!("testpmd RX-packets {rx} TX-packets {tx}");
    assert_eq!((rx, tx), (n, n), "testpmd output:\n{out}");
    let c = client.counters();
    assert_eq!((c.tx_frames, c.rx_frames), (n, n));
    assert_eq!((c.bad_descriptor, c.ring_errors, c.oversize), (0, 0, 0));
    pump(&mut [&mut client], 10, "disconnect", |e| {
        !e[0].is_connected()
    });
    assert_eq!(client.counters().disconnects, 1);
}

#[test]
fn every_frame_a_testpmd_txonly_client_sends_is_counted_by_our_server() {
    if !have_testpmd() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memif.sock");
    let mut server = Memif::new(config(SocketName::Path(path.clone()), Role::Server, 10)).unwrap();
    let vdev = format!(
        "net_memif0,role=client,id=0,socket={},socket-abstract=no",
        path.display()
    );
    let mut pmd = TestPmd::spawn("txonly", &vdev, "txonly");
    wait_connected(&mut server, &mut pmd);

    // Receive for a second, let testpmd stop, then drain what is left
    // (the ring stays mapped on our side until poll_control tears down).
    let mut sizes_ok = true;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(1) {
        server.rx_burst(0, 64, |f| sizes_ok &= f.len() == 64);
    }
    let (_, tx, out) = pmd.stop();
    for _ in 0..1000 {
        server.rx_burst(0, 1024, |f| sizes_ok &= f.len() == 64);
    }
    let c = server.counters().clone();
    eprintln!("testpmd TX-packets {tx}, our rx_frames {}", c.rx_frames);
    assert!(sizes_ok, "txonly frames are 64 bytes");
    assert!(tx > 1000, "testpmd sent little:\n{out}");
    assert_eq!(c.rx_frames, tx, "testpmd output:\n{out}");
    assert_eq!((c.bad_descriptor, c.ring_errors), (0, 0));
}

#[test]
fn our_server_echoes_through_a_zero_copy_testpmd_client() {
    if !have_testpmd() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memif.sock");
    let mut cfg = config(SocketName::Path(path.clone()), Role::Server, 10);
    // A zero-copy client registers its DPDK memory (here a memfd that is
    // not sealed) as region 1 and points descriptors into it.
    cfg.allow_unsealed_regions = true;
    let mut server = Memif::new(cfg).unwrap();
    let vdev = format!(
        "net_memif0,role=client,id=0,socket={},socket-abstract=no,zero-copy=yes",
        path.display()
    );
    let mut pmd = TestPmd::spawn_with("zc", &vdev, "io", &["--single-file-segments"]);
    wait_connected(&mut server, &mut pmd);
    let n = 20_000;
    echo(&mut server, &mut pmd, n, 256);
    let (rx, tx, out) = pmd.stop();
    eprintln!("testpmd RX-packets {rx} TX-packets {tx}");
    assert_eq!((rx, tx), (n, n), "testpmd output:\n{out}");
}
