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

use std::time::{Duration, Instant};

use common::{config, frame, len_of, pump};
use memif::testpmd::{missing_tool, TestPmd, ONE_AT_A_TIME};
use memif::{Memif, Role, SocketName};

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
        if polls.is_multiple_of(4096) {
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

/// Our server on a filesystem socket in a new directory (kept alive by the
/// returned guard) and a testpmd client forwarding in `fwd` mode,
/// connected.
fn server_with_testpmd_client(tag: &str, fwd: &str) -> (tempfile::TempDir, Memif, TestPmd) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memif.sock");
    let mut server = Memif::new(config(SocketName::Path(path.clone()), Role::Server, 10)).unwrap();
    let vdev = format!(
        "net_memif0,role=client,id=0,socket={},socket-abstract=no",
        path.display()
    );
    let mut pmd = TestPmd::spawn(tag, &vdev, fwd);
    wait_connected(&mut server, &mut pmd);
    (dir, server, pmd)
}

#[test]
fn our_server_echoes_through_a_testpmd_client_on_a_filesystem_socket() {
    if let Some(why) = missing_tool() {
        test_skips::missing(why);
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (dir, mut server, mut pmd) = server_with_testpmd_client("fs", "io");
    let path = dir.path().join("memif.sock");

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
    if let Some(why) = missing_tool() {
        test_skips::missing(why);
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
    if let Some(why) = missing_tool() {
        test_skips::missing(why);
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (_dir, mut server, pmd) = server_with_testpmd_client("txonly", "txonly");

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
    if let Some(why) = missing_tool() {
        test_skips::missing(why);
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
