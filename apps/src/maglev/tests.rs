use super::*;
use crate::packet::{EthernetFrame, Ipv4Packet, TcpPacket};
use std::collections::HashSet;

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("backend-{i}")).collect()
}

fn backends(n: usize) -> Vec<Backend> {
    (0..n)
        .map(|i| {
            Backend::new(
                format!("backend-{i}"),
                Ipv4Addr::from(0xC0A8_0000 + i as u32 + 1),
            )
        })
        .collect()
}

#[test]
fn primes() {
    assert!(is_prime(65_537) && is_prime(13) && is_prime(2));
    assert!(!is_prime(65_536) && !is_prime(1) && !is_prime(0) && !is_prime(65_535));
    assert_eq!(
        MaglevTable::build(&names(3), 100).unwrap_err(),
        TableError::SizeNotPrime(100)
    );
    assert_eq!(
        MaglevTable::build::<&str>(&[], 13).unwrap_err(),
        TableError::NoBackends
    );
}

#[test]
fn sizes_are_bounded_before_anything_is_allocated() {
    // The largest prime below 2^32 was accepted and filled 16 GiB of
    // slots. Sizes are bounded before the (trial division) primality
    // test, so a huge size is refused at once.
    for size in [4_294_967_291, usize::MAX, MAX_TABLE_SIZE + 1] {
        let e = MaglevTable::build(&names(3), size).unwrap_err();
        assert_eq!(e, TableError::SizeTooLarge(size));
        assert!(e.to_string().contains("1 GiB"), "{e}");
    }
    for capacity in [MAX_CONNECTION_CAPACITY + 1, usize::MAX] {
        // usize::MAX made `div_ceil(..).next_power_of_two()` overflow.
        let e = ConnectionTable::new(capacity).unwrap_err();
        assert_eq!(e, TableError::TooManyConnections(capacity));
        assert!(
            e.to_string().contains(&MAX_CONNECTION_CAPACITY.to_string()),
            "{e}"
        );
        let cfg = MaglevConfig {
            connection_capacity: capacity,
            ..Default::default()
        };
        assert_eq!(
            Maglev::new(backends(2), &cfg).unwrap_err(),
            TableError::TooManyConnections(capacity)
        );
    }
    // Sensible sizes still work, rounded up as documented.
    assert_eq!(ConnectionTable::new(0).unwrap().capacity(), WAYS);
    assert_eq!(
        ConnectionTable::new(DEFAULT_CONNECTION_CAPACITY + 1)
            .unwrap()
            .capacity(),
        2 * DEFAULT_CONNECTION_CAPACITY
    );
    let lb = Maglev::new(backends(2), &MaglevConfig::default()).unwrap();
    assert_eq!(lb.connections().capacity(), DEFAULT_CONNECTION_CAPACITY);
}

#[test]
fn every_backend_owns_floor_or_ceil_of_m_over_n() {
    for (n, m) in [
        (1, 13),
        (3, 13),
        (13, 13),
        (20, 13),
        (7, 251),
        (1000, DEFAULT_TABLE_SIZE),
    ] {
        let table = MaglevTable::build(&names(n), m).unwrap();
        assert_eq!(table.size(), m);
        let counts = table.slots_per_backend();
        assert_eq!(counts.iter().sum::<usize>(), m);
        let (lo, hi) = (m / n, m.div_ceil(n));
        for (i, &c) in counts.iter().enumerate() {
            assert!(c == lo || c == hi, "n={n} m={m}: backend {i} owns {c}");
        }
    }
}

#[test]
fn slot_is_the_folded_hash_mod_m() {
    for m in [2usize, 13, 65_537, 1_000_003] {
        let t = MaglevTable::build(&names(1), m).unwrap();
        for h in [0u64, 1, 65_536, 65_537, u64::MAX, 0x1234_5678_9abc_def0] {
            let folded = (h ^ (h >> 32)) as u32 as u64;
            assert_eq!(t.slot_of(h) as u64, folded % m as u64, "m={m} h={h:#x}");
        }
        for i in 0..10_000u64 {
            let h = mix64(i);
            assert_eq!(
                t.slot_of(h) as u64,
                u64::from((h ^ (h >> 32)) as u32) % m as u64
            );
        }
    }
}

#[test]
fn table_is_deterministic_and_depends_only_on_names() {
    let a = MaglevTable::build(&names(50), 251).unwrap();
    let b = MaglevTable::build(&names(50), 251).unwrap();
    assert_eq!(a.slots(), b.slots());
}

/// The paper: with N = 1000 and M = 65537, removing 10 backends changes
/// about 3.3% of the entries, of which 1.0% are forced (the slots the
/// removed backends owned must move).
#[test]
fn removing_ten_of_a_thousand_backends_disrupts_about_three_percent() {
    let all = names(1000);
    let before = MaglevTable::build(&all, DEFAULT_TABLE_SIZE).unwrap();
    // Remove every 100th backend.
    let removed: HashSet<usize> = (0..1000).step_by(100).collect();
    let kept: Vec<&String> = all
        .iter()
        .enumerate()
        .filter(|(i, _)| !removed.contains(i))
        .map(|(_, n)| n)
        .collect();
    let after = MaglevTable::build(&kept, DEFAULT_TABLE_SIZE).unwrap();

    let m = DEFAULT_TABLE_SIZE;
    let (mut changed, mut forced) = (0usize, 0usize);
    for s in 0..m {
        let old = &all[before.slots()[s] as usize];
        let new = kept[after.slots()[s] as usize];
        if removed.contains(&(before.slots()[s] as usize)) {
            forced += 1;
            assert_ne!(old, new);
        }
        if old != new {
            changed += 1;
        }
    }
    let owned_by_removed: usize = removed.iter().map(|&i| before.slots_per_backend()[i]).sum();
    assert_eq!(forced, owned_by_removed);
    let changed_share = changed as f64 / m as f64;
    let forced_share = forced as f64 / m as f64;
    eprintln!("changed {changed_share:.4}, forced {forced_share:.4}");
    assert!(
        (0.009..0.011).contains(&forced_share),
        "forced {forced_share}"
    );
    assert!(
        (0.015..0.05).contains(&changed_share),
        "changed {changed_share}"
    );
}

#[test]
fn parse_backend_lists() {
    let text = "# name ip [mac]\nweb-1 10.0.0.1\n\n web-2   10.0.0.2  02:aa:bb:cc:dd:ee # spare\n";
    let b = parse_backends(text).unwrap();
    assert_eq!(b.len(), 2);
    assert_eq!(b[0], Backend::new("web-1", Ipv4Addr::new(10, 0, 0, 1)));
    assert_eq!(b[0].mac, MacAddr([2, 0, 10, 0, 0, 1]));
    assert_eq!(b[1].mac, MacAddr([2, 0xaa, 0xbb, 0xcc, 0xdd, 0xee]));
    for (bad, says) in [
        ("web-1", "no address"),
        ("web-1 10.0.0", "not an IPv4 address"),
        ("b 300.1.1.1", "not an IPv4 address"),
        ("web-1 10.0.0.1 zz", "not a MAC address"),
        ("a 1.2.3.4 02:00:00:00:00:00 x", "more than three fields"),
    ] {
        let e = parse_backends(bad).unwrap_err();
        assert!(
            matches!(e, BackendsError::BadLine { line: 1, why, .. } if why == says),
            "{bad}: {e}"
        );
        assert!(
            e.to_string().starts_with(&format!("line 1: {says} (")),
            "{e}"
        );
    }
    assert!(matches!(
        parse_backends("a 1.1.1.1\na 2.2.2.2"),
        Err(BackendsError::DuplicateName { line: 2, .. })
    ));
    let dir = std::env::temp_dir().join(format!("maglev-backends-{}", std::process::id()));
    std::fs::write(&dir, text).unwrap();
    assert_eq!(load_backends(&dir).unwrap(), b);
    std::fs::remove_file(&dir).unwrap();
    assert!(matches!(load_backends(&dir), Err(BackendsError::Io(_))));
}

#[test]
fn connection_table_is_bounded_and_evicts_within_a_set() {
    let mut t = ConnectionTable::new(5).unwrap();
    assert_eq!(t.capacity(), 8);
    let w = FlowWorkload::new(1000, true, 1);
    let mut evictions = 0;
    for i in 0..1000 {
        let f = w.flow(i);
        let h = Maglev::flow_hash(&f);
        if t.insert(&f, h, i) == InsertOutcome::Evicted {
            evictions += 1;
        }
        assert_eq!(t.get(&f, h), Some(i), "just inserted");
    }
    assert_eq!(t.len(), 8);
    assert_eq!(evictions, 992);
    let f = w.flow(999);
    assert_eq!(
        t.insert(&f, Maglev::flow_hash(&f), 7),
        InsertOutcome::Updated
    );
    t.remap(|b| (b != 7).then_some(b));
    assert_eq!(t.get(&f, Maglev::flow_hash(&f)), None);
    assert_eq!(t.len(), 7);
    t.clear();
    assert!(t.is_empty());
}

#[test]
fn cached_flows_keep_their_backend_when_the_set_changes() {
    let cfg = MaglevConfig {
        table_size: 65_537,
        connection_capacity: 4096,
    };
    let mut lb = Maglev::new(backends(100), &cfg).unwrap();
    let w = FlowWorkload::new(1000, false, 7);
    let first: Vec<String> = (0..1000)
        .map(|i| {
            let b = lb.pick(&w.flow(i)) as usize;
            lb.pool().backends()[b].name.clone()
        })
        .collect();
    // Remove 10 backends; flows of the 90 others must stay where they are
    // even where the new table would send them elsewhere.
    let kept: Vec<Backend> = backends(100)
        .into_iter()
        .filter(|b| !b.name.ends_with('3'))
        .collect();
    let kept_names: HashSet<&str> = kept.iter().map(|b| b.name.as_str()).collect();
    let new_pool = Arc::new(BackendPool::new(kept.clone(), 65_537).unwrap());
    let table_would_move = (0..1000)
        .filter(|&i| {
            let b = new_pool.table().lookup(Maglev::flow_hash(&w.flow(i)));
            kept_names.contains(first[i as usize].as_str())
                && new_pool.backends()[b as usize].name != first[i as usize]
        })
        .count();
    assert!(table_would_move > 0, "the test must exercise a moved flow");
    lb.set_pool(new_pool);
    for i in 0..1000 {
        let b = lb.pick(&w.flow(i)) as usize;
        let name = &lb.pool().backends()[b].name;
        if kept_names.contains(first[i as usize].as_str()) {
            assert_eq!(name, &first[i as usize], "flow {i} moved");
        } else {
            assert!(kept_names.contains(name.as_str()));
        }
    }
}

#[test]
fn process_rewrites_toward_the_backend() {
    let mut lb = Maglev::new(backends(10), &MaglevConfig::default()).unwrap();
    let mut w = FlowWorkload::cached(3);
    let mut buf = [0u8; 128];
    for _ in 0..64 {
        let i = w.peek_flow();
        let len = w.next_frame(&mut buf).unwrap();
        assert_eq!(lb.process(&mut buf[..len]), Verdict::Forward);
        let b = lb.pick(&w.flow(i)) as usize;
        let b = &lb.pool().backends()[b];
        let eth = EthernetFrame::new_checked(&buf[..len]).unwrap();
        assert_eq!(eth.dst_addr(), b.mac);
        let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
        assert_eq!(ip.dst_addr(), b.ip);
        assert!(ip.verify_checksum());
        assert!(TcpPacket::new_checked(ip.payload())
            .unwrap()
            .verify_checksum(ip.src_addr(), b.ip));
    }
    let s = lb.stats();
    assert_eq!(s.forwarded, 64);
    // 16 flows: 16 misses, then hits (including the test's own picks).
    assert_eq!(s.connection_misses, 16);
    assert_eq!(s.connection_hits, 64 + 64 - 16);
    let mut junk = [0u8; 30];
    assert_eq!(lb.process(&mut junk), Verdict::Drop);
    assert_eq!(lb.stats().dropped, 1);
}

#[test]
fn workloads_have_the_paper_flow_counts() {
    let mut buf = [0u8; 64];
    let mut cached = FlowWorkload::cached(1);
    let mut seen = HashSet::new();
    for _ in 0..64 {
        let len = cached.next_frame(&mut buf).unwrap();
        assert_eq!(len, 60);
        let t = FiveTuple::parse(&buf[..len]).unwrap();
        seen.insert(t);
    }
    assert_eq!(seen.len(), 16);

    let mut flood = FlowWorkload::syn_flood(2);
    assert_eq!(flood.flow_count(), 1 << 20);
    // One full cycle visits every flow exactly once (checked through the
    // flow index), and frames are SYNs.
    let mut visited = vec![false; 1 << 20];
    for n in 0..(1u32 << 20) {
        let i = flood.peek_flow();
        assert!(!visited[i as usize]);
        visited[i as usize] = true;
        let len = flood.next_frame(&mut buf).unwrap();
        if n < 1000 {
            assert_eq!(FiveTuple::parse(&buf[..len]).unwrap(), flood.flow(i));
            let tcp = TcpPacket::new_checked(&buf[34..len]).unwrap();
            assert_eq!(tcp.flags(), tcp_flags::SYN);
        }
    }
}

#[test]
fn syn_flood_overflows_the_connection_table() {
    let cfg = MaglevConfig {
        table_size: 65_537,
        connection_capacity: 1 << 12,
    };
    let mut lb = Maglev::new(backends(1000), &cfg).unwrap();
    let mut w = FlowWorkload::syn_flood(9);
    let mut buf = [0u8; 64];
    for _ in 0..100_000 {
        let len = w.next_frame(&mut buf).unwrap();
        assert_eq!(lb.process(&mut buf[..len]), Verdict::Forward);
    }
    let s = lb.stats();
    assert_eq!(s.connection_hits, 0);
    assert_eq!(s.connection_misses, 100_000);
    assert_eq!(lb.connections().len(), 1 << 12);
    assert_eq!(s.connection_evictions, 100_000 - (1 << 12));
}
