//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use memif::{Config, Memif, Role, SocketName};

/// Polls `eps` until `done` holds, or panics after `secs` seconds.
pub fn pump(
    eps: &mut [&mut Memif],
    secs: u64,
    what: &str,
    mut done: impl FnMut(&[&mut Memif]) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done(eps) {
        for ep in eps.iter_mut() {
            ep.poll_control().expect("poll_control");
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; last errors: {:?}",
            eps.iter()
                .map(|e| e.last_error().map(str::to_owned))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

pub fn connect(a: &mut Memif, b: &mut Memif) {
    pump(&mut [a, b], 10, "both ends connected", |e| {
        e.iter().all(|m| m.is_connected())
    });
}

pub fn config(socket: SocketName, role: Role, log2: u8) -> Config {
    let mut c = Config::new(socket, role);
    c.log2_ring_size = log2;
    c.name = format!("test-{role:?}");
    c
}

/// Frame `seq` of length `len`: the sequence number, then a pattern that
/// depends on both, so a misplaced or stale byte is caught.
pub fn frame(seq: u64, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    let tag = seq.to_le_bytes();
    for (i, b) in f.iter_mut().enumerate() {
        *b = if i < 8 {
            tag[i]
        } else {
            (seq as usize).wrapping_mul(31).wrapping_add(i) as u8
        };
    }
    f
}

/// Lengths 14..=max cycling, for frame `seq`.
pub fn len_of(seq: u64, max: usize) -> usize {
    14 + (seq as usize * 7919) % (max - 14 + 1)
}

/// Sends `n` frames from `tx` to `rx` on `queue` without loss (retrying
/// what did not fit), checking every received frame byte for byte.
/// Returns the number of frames received.
pub fn transfer(tx: &mut Memif, rx: &mut Memif, queue: u16, n: u64, max_len: usize) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut next_tx = 0u64;
    let mut next_rx = 0u64;
    let mut batch: Vec<Vec<u8>> = Vec::new();
    while next_rx < n {
        if next_tx < n {
            batch.clear();
            for s in next_tx..(next_tx + 32).min(n) {
                batch.push(frame(s, len_of(s, max_len)));
            }
            next_tx += tx.tx_burst(queue, batch.iter().map(Vec::as_slice)) as u64;
        }
        rx.rx_burst(queue, 64, |f| {
            let want = frame(next_rx, len_of(next_rx, max_len));
            assert_eq!(f.len(), want.len(), "length of frame {next_rx}");
            assert!(f == want.as_slice(), "bytes of frame {next_rx}");
            next_rx += 1;
        });
        assert!(tx.is_connected() && rx.is_connected(), "connection lost");
        assert!(
            Instant::now() < deadline,
            "transfer stalled at {next_rx}/{n}"
        );
    }
    next_rx
}
