//! Our server and our client, in one process.

mod common;

use common::{config, connect, frame, pump, transfer};
use memif::{Memif, MemifError, Role, SocketName};

fn pair(socket: SocketName, log2: u8, f: impl Fn(&mut memif::Config)) -> (Memif, Memif) {
    let mut sc = config(socket.clone(), Role::Server, log2);
    f(&mut sc);
    let mut cc = config(socket, Role::Client, log2);
    f(&mut cc);
    let mut server = Memif::new(sc).unwrap();
    let mut client = Memif::new(cc).unwrap();
    connect(&mut server, &mut client);
    (server, client)
}

#[test]
fn frames_of_every_size_cross_both_ways_byte_exact_with_wraparound() {
    let dir = tempfile::tempdir().unwrap();
    // 16-slot rings: every ring wraps thousands of times, and 70 000 frames
    // take the u16 indices past 65535.
    let (mut server, mut client) = pair(SocketName::Path(dir.path().join("m.sock")), 4, |_| {});
    assert_eq!(server.queues(), (1, 1));
    assert_eq!(client.queues(), (1, 1));
    assert_eq!(server.peer_name(), Some("test-Client"));
    assert_eq!(client.peer_name(), Some("test-Server"));

    let n = 70_000;
    assert_eq!(transfer(&mut client, &mut server, 0, n, 2048), n);
    assert_eq!(transfer(&mut server, &mut client, 0, n, 2048), n);

    let (s, c) = (server.counters(), client.counters());
    assert_eq!(
        (c.tx_frames, s.rx_frames, s.tx_frames, c.rx_frames),
        (n, n, n, n)
    );
    assert_eq!(c.tx_bytes, s.rx_bytes);
    assert_eq!(s.tx_bytes, c.rx_bytes);
    for k in [s, c] {
        assert_eq!(
            (k.bad_descriptor, k.ring_errors, k.oversize, k.disconnects),
            (0, 0, 0, 0)
        );
        assert_eq!((k.rx_chained, k.tx_chained, k.connects), (0, 0, 1));
    }
}

#[test]
fn several_queues_over_an_abstract_socket() {
    let name = SocketName::Abstract(format!("memif-test-{}", std::process::id()));
    let (mut server, mut client) = pair(name, 6, |c| c.rings = 3);
    assert_eq!(server.queues(), (3, 3));
    for q in 0..3 {
        assert_eq!(transfer(&mut client, &mut server, q, 1000, 1500), 1000);
        assert_eq!(transfer(&mut server, &mut client, q, 1000, 1500), 1000);
    }
    // A queue that does not exist drops, and says why.
    assert_eq!(client.tx_burst(3, [&[0u8; 60][..]]), 0);
    assert_eq!(client.counters().link_down, 1);
}

#[test]
fn a_client_asking_for_more_rings_gets_what_the_server_allows() {
    let dir = tempfile::tempdir().unwrap();
    let sock = SocketName::Path(dir.path().join("m.sock"));
    let mut server = Memif::new(config(sock.clone(), Role::Server, 5)).unwrap();
    let mut cc = config(sock, Role::Client, 8);
    cc.rings = 4;
    let mut client = Memif::new(cc).unwrap();
    connect(&mut server, &mut client);
    assert_eq!(client.queues(), (1, 1));
    assert_eq!(transfer(&mut client, &mut server, 0, 600, 2048), 600);
}

#[test]
fn frames_longer_than_a_buffer_are_chained_and_reassembled() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, mut client) = pair(SocketName::Path(dir.path().join("m.sock")), 5, |c| {
        c.buffer_size = 256;
    });
    // Up to 2048 bytes in 256-byte buffers: up to 8 buffers per frame,
    // chains crossing the ring's end.
    assert_eq!(transfer(&mut client, &mut server, 0, 3000, 2048), 3000);
    assert_eq!(transfer(&mut server, &mut client, 0, 3000, 2048), 3000);
    let (s, c) = (server.counters(), client.counters());
    assert!(
        c.tx_chained > 2000 && c.tx_chained == s.rx_chained,
        "{c:?} {s:?}"
    );
    assert!(
        s.tx_chained > 2000 && s.tx_chained == c.rx_chained,
        "{c:?} {s:?}"
    );
}

#[test]
fn oversize_frames_are_dropped_and_counted_on_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let sock = SocketName::Path(dir.path().join("m.sock"));
    let mut sc = config(sock.clone(), Role::Server, 5);
    sc.max_frame = 1500;
    let mut cc = config(sock, Role::Client, 5);
    cc.buffer_size = 512;
    let mut server = Memif::new(sc).unwrap();
    let mut client = Memif::new(cc).unwrap();
    connect(&mut server, &mut client);

    // The client sends 1400, 2000 (chained, longer than the server's
    // max_frame), 9217 (longer than its own) and 64 bytes.
    let frames = [frame(0, 1400), frame(1, 2000), frame(2, 9217), frame(3, 64)];
    assert_eq!(client.tx_burst(0, frames.iter().map(Vec::as_slice)), 3);
    assert_eq!(client.counters().oversize, 1);
    let mut got = Vec::new();
    server.rx_burst(0, 8, |f| got.push(f.to_vec()));
    assert_eq!(got, vec![frames[0].clone(), frames[3].clone()]);
    assert_eq!(server.counters().oversize, 1);
    assert!(server.is_connected() && client.is_connected());
    // The server's own oversize frames never reach the ring.
    assert_eq!(server.tx_burst(0, [&frame(9, 1501)[..]]), 0);
    assert_eq!(server.counters().oversize, 2);
}

#[test]
fn a_full_ring_takes_a_prefix_and_counts_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, mut client) = pair(SocketName::Path(dir.path().join("m.sock")), 3, |_| {});
    let frames: Vec<Vec<u8>> = (0..20).map(|s| frame(s, 100)).collect();
    // 8 slots.
    assert_eq!(client.tx_burst(0, frames.iter().map(Vec::as_slice)), 8);
    assert_eq!(client.counters().ring_full, 12);
    assert_eq!(server.tx_burst(0, frames.iter().map(Vec::as_slice)), 8);
    assert_eq!(server.counters().ring_full, 12);
    let mut n = 0;
    server.rx_burst(0, 100, |f| {
        assert_eq!(f, frames[n].as_slice());
        n += 1;
    });
    assert_eq!(n, 8);
    assert_eq!(client.tx_burst(0, frames[8..].iter().map(Vec::as_slice)), 8);
}

#[test]
fn the_server_takes_a_new_client_after_the_old_one_leaves() {
    let dir = tempfile::tempdir().unwrap();
    let sock = SocketName::Path(dir.path().join("m.sock"));
    let mut server = Memif::new(config(sock.clone(), Role::Server, 6)).unwrap();
    for round in 1..=3 {
        let mut client = Memif::new(config(sock.clone(), Role::Client, 6)).unwrap();
        connect(&mut server, &mut client);
        assert_eq!(transfer(&mut client, &mut server, 0, 500, 2048), 500);
        assert_eq!(transfer(&mut server, &mut client, 0, 500, 2048), 500);
        drop(client);
        pump(&mut [&mut server], 5, "server notices", |e| {
            !e[0].is_connected()
        });
        assert_eq!(server.counters().disconnects, round);
        assert_eq!(server.counters().connects, round);
        assert_eq!(server.tx_burst(0, [&[0u8; 60][..]]), 0);
    }
    assert_eq!(server.counters().link_down, 3);
    assert_eq!(server.counters().handshake_errors, 0);
}

#[test]
fn the_client_reconnects_when_the_server_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let sock = SocketName::Path(dir.path().join("m.sock"));
    // The client starts first and retries until a server appears.
    let mut client = Memif::new(config(sock.clone(), Role::Client, 6)).unwrap();
    for _ in 0..3 {
        client.poll_control().unwrap();
    }
    assert!(!client.is_connected());
    for round in 1..=2 {
        let mut server = Memif::new(config(sock.clone(), Role::Server, 6)).unwrap();
        connect(&mut server, &mut client);
        assert_eq!(transfer(&mut server, &mut client, 0, 300, 2048), 300);
        drop(server);
        assert!(
            !dir.path().join("m.sock").exists(),
            "server removes its socket file"
        );
        pump(&mut [&mut client], 5, "client notices", |e| {
            !e[0].is_connected()
        });
        assert_eq!(client.counters().disconnects, round);
        assert!(
            client.last_error().unwrap().contains("Device closed"),
            "{:?}",
            client.last_error()
        );
    }
}

#[test]
fn a_second_client_is_turned_away_while_one_is_connected() {
    let dir = tempfile::tempdir().unwrap();
    let sock = SocketName::Path(dir.path().join("m.sock"));
    let (mut server, mut first) = {
        let mut s = Memif::new(config(sock.clone(), Role::Server, 6)).unwrap();
        let mut c = Memif::new(config(sock.clone(), Role::Client, 6)).unwrap();
        connect(&mut s, &mut c);
        (s, c)
    };
    let mut second = Memif::new(config(sock, Role::Client, 6)).unwrap();
    pump(
        &mut [&mut server, &mut first, &mut second],
        5,
        "refusal",
        |e| {
            e[2].last_error()
                .is_some_and(|m| m.contains("Already connected"))
        },
    );
    assert!(server.is_connected() && first.is_connected() && !second.is_connected());
    assert!(server.counters().handshake_errors >= 1);
    assert_eq!(transfer(&mut first, &mut server, 0, 100, 2048), 100);
}

#[test]
fn wrong_id_or_secret_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sock = SocketName::Path(dir.path().join("m.sock"));
    let mut sc = config(sock.clone(), Role::Server, 6);
    sc.id = 7;
    sc.secret = Some("open sesame".into());
    let mut server = Memif::new(sc).unwrap();

    let mut cc = config(sock.clone(), Role::Client, 6);
    cc.id = 8;
    cc.secret = Some("open sesame".into());
    let mut client = Memif::new(cc).unwrap();
    pump(&mut [&mut server, &mut client], 5, "id refusal", |e| {
        e[1].last_error()
            .is_some_and(|m| m.contains("ID not found"))
    });
    drop(client);

    let mut cc = config(sock.clone(), Role::Client, 6);
    cc.id = 7;
    cc.secret = Some("open says me".into());
    let mut client = Memif::new(cc).unwrap();
    pump(&mut [&mut server, &mut client], 5, "secret refusal", |e| {
        e[1].last_error()
            .is_some_and(|m| m.contains("Incorrect secret"))
    });
    drop(client);
    assert!(server.counters().handshake_errors >= 2);

    let mut cc = config(sock, Role::Client, 6);
    cc.id = 7;
    cc.secret = Some("open sesame".into());
    let mut client = Memif::new(cc).unwrap();
    connect(&mut server, &mut client);
}

#[test]
fn a_server_refuses_to_replace_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("precious");
    std::fs::write(&path, b"data").unwrap();
    let r = Memif::new(config(SocketName::Path(path.clone()), Role::Server, 6));
    assert!(matches!(r, Err(MemifError::NotASocket(_))));
    assert_eq!(std::fs::read(&path).unwrap(), b"data");
}

#[test]
fn frames_published_before_the_peer_leaves_are_still_received() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, mut client) = pair(SocketName::Path(dir.path().join("m.sock")), 6, |_| {});
    let frames: Vec<Vec<u8>> = (0..40).map(|s| frame(s, 60 + s as usize)).collect();
    assert_eq!(client.tx_burst(0, frames.iter().map(Vec::as_slice)), 40);
    assert_eq!(server.tx_burst(0, frames.iter().map(Vec::as_slice)), 40);
    // The client leaves (DISCONNECT, then its socket closes) with all 40
    // still on the ring; the server notices before it reads them.
    drop(client);
    common::pump(&mut [&mut server], 5, "the server notices", |e| {
        !e[0].is_connected()
    });
    assert_eq!(server.counters().disconnects, 1);
    let mut n = 0;
    server.rx_burst(0, 16, |f| {
        assert_eq!(f, frames[n].as_slice());
        n += 1;
    });
    server.poll_control().unwrap();
    server.rx_burst(0, 100, |f| {
        assert_eq!(f, frames[n].as_slice());
        n += 1;
    });
    assert_eq!(n, 40, "every frame published before the peer left");
    // Nothing is sent meanwhile: the link is down.
    assert_eq!(server.tx_burst(0, [&frames[0][..]]), 0);
    assert_eq!(server.counters().link_down, 1);
    // Drained: the connection is gone, and the next client is served.
    server.poll_control().unwrap();
    assert_eq!(server.queues(), (0, 0));
    let sock = SocketName::Path(dir.path().join("m.sock"));
    let mut again = Memif::new(config(sock, Role::Client, 6)).unwrap();
    common::connect(&mut server, &mut again);
}
