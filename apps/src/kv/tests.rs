//! Server and client tests over whole frames.

use super::client::{key_bytes, value_belongs_to};
use super::wire::{encode_batch, MAX_BATCH};
use super::*;
use crate::packet::{emit_udp_frame, Endpoints};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn server(log_bytes: usize, buckets: usize) -> KvServer {
    KvServer::new(&ServerConfig {
        store: StoreConfig { log_bytes, buckets },
        partition: 0,
        partitions: 1,
        udp_checksum: true,
    })
    .unwrap()
}

fn endpoints() -> Endpoints {
    WorkloadConfig::default().endpoints
}

/// Builds a request frame holding `messages`.
fn request_frame(messages: &[Message<'_>]) -> Vec<u8> {
    let mut payload = [0u8; MAX_FRAME_LEN];
    let n = encode_batch(&mut payload, BatchKind::Request, messages).unwrap();
    frame_with_payload(&payload[..n])
}

fn frame_with_payload(payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; MAX_FRAME_LEN];
    let len = emit_udp_frame(&mut buf, &endpoints(), payload).unwrap();
    buf.truncate(len);
    buf
}

fn get(key: &[u8], opaque: u32) -> Message<'_> {
    Message {
        op: Op::Get as u8,
        status: 0,
        key_hash: key_hash(key),
        opaque,
        key,
        value: &[],
    }
}

fn set<'a>(key: &'a [u8], value: &'a [u8], opaque: u32) -> Message<'a> {
    Message {
        op: Op::Set as u8,
        value,
        ..get(key, opaque)
    }
}

/// One decoded response: (op, status, opaque, value).
type Answer = (u8, Status, u32, Vec<u8>);

/// Sends `frame` and decodes the response messages.
fn exchange(s: &mut KvServer, frame: &[u8]) -> Result<Vec<Answer>, DropReason> {
    let mut out = [0u8; MAX_FRAME_LEN];
    let len = s.handle(frame, &mut out)?;
    let d = UdpDatagram::parse(&out[..len]).expect("responses are valid frames");
    let ip = crate::packet::Ipv4Packet::new_checked(&out[14..len]).unwrap();
    assert!(ip.verify_checksum());
    let udp = crate::packet::UdpPacket::new_checked(ip.payload()).unwrap();
    assert!(udp.verify_checksum(ip.src_addr(), ip.dst_addr()));
    assert_eq!(
        d.endpoints,
        endpoints().reversed(),
        "response goes back to the sender"
    );
    let r = BatchReader::new(d.payload).unwrap();
    assert_eq!(r.kind(), BatchKind::Response);
    Ok(r.map(|m| {
        let m = m.unwrap();
        assert!(m.key.is_empty());
        (m.op, m.status().unwrap(), m.opaque, m.value.to_vec())
    })
    .collect())
}

#[test]
fn get_set_delete_over_the_wire() {
    let mut s = server(1 << 16, 64);
    let r = exchange(
        &mut s,
        &request_frame(&[get(b"k1", 1), set(b"k1", b"v1", 2), get(b"k1", 3)]),
    )
    .unwrap();
    assert_eq!(
        r,
        vec![
            (1, Status::NotFound, 1, vec![]),
            (2, Status::Success, 2, vec![]),
            (1, Status::Success, 3, b"v1".to_vec()),
        ]
    );
    let del = Message {
        op: Op::Delete as u8,
        ..get(b"k1", 4)
    };
    let r = exchange(&mut s, &request_frame(&[del, del, get(b"k1", 5)])).unwrap();
    let statuses: Vec<Status> = r.iter().map(|x| x.1).collect();
    assert_eq!(
        statuses,
        [Status::Success, Status::NotFound, Status::NotFound]
    );
    let st = s.stats();
    assert_eq!((st.frames, st.responses, st.requests), (2, 2, 6));
    assert_eq!(
        (st.gets, st.get_hits, st.sets, st.deletes, st.delete_hits),
        (3, 1, 1, 2, 1)
    );
    assert_eq!(st.errors, 0);
}

#[test]
fn per_message_errors_are_answered() {
    let mut s = KvServer::new(&ServerConfig {
        store: StoreConfig {
            log_bytes: 1024,
            buckets: 4,
        },
        partition: 1,
        partitions: 2,
        ..ServerConfig::default()
    })
    .unwrap();
    // Find keys owned by partition 1 and by partition 0.
    let mine = (0u64..)
        .map(key_bytes)
        .find(|k| partition_of(key_hash(k), 2) == 1)
        .unwrap();
    let other = (0u64..)
        .map(key_bytes)
        .find(|k| partition_of(key_hash(k), 2) == 0)
        .unwrap();
    let long_key = [7u8; 300];
    let big_value = [1u8; 1100];
    let mut bad_op = get(&mine, 1);
    bad_op.op = 9;
    let mut bad_hash = get(&mine, 2);
    bad_hash.key_hash ^= 1;
    let mut get_with_value = get(&mine, 3);
    get_with_value.value = b"x";
    let r = exchange(
        &mut s,
        &request_frame(&[
            bad_op,
            bad_hash,
            get_with_value,
            get(&[], 4),
            get(&long_key, 5),
            get(&other, 6),
            set(&mine, &big_value[..600], 7),
            get(&mine, 8),
        ]),
    )
    .unwrap();
    let statuses: Vec<Status> = r.iter().map(|x| x.1).collect();
    assert_eq!(
        statuses,
        [
            Status::BadOp,
            Status::Malformed,
            Status::Malformed,
            Status::Malformed,
            Status::Malformed,
            Status::WrongPartition,
            Status::Success,
            Status::Success,
        ]
    );
    assert_eq!(r[0].0, 9, "op echoed");
    assert_eq!(r[7].3.len(), 600);
    // An item larger than the 1024-byte log.
    let r = exchange(&mut s, &request_frame(&[set(&mine, &big_value, 9)])).unwrap();
    assert_eq!(r[0].1, Status::TooLarge);
    let st = s.stats();
    assert_eq!(st.errors, 7);
    // By cause.
    assert_eq!(
        (
            st.error_bad_op,
            st.error_malformed,
            st.error_wrong_partition,
            st.error_too_large,
            st.error_no_room
        ),
        (1, 4, 1, 1, 0)
    );
}

#[test]
fn values_that_do_not_fit_the_response_get_no_room() {
    let mut s = server(1 << 16, 64);
    let v = [0xABu8; 600];
    for k in [b"a", b"b", b"c"] {
        exchange(&mut s, &request_frame(&[set(k, &v, 0)])).unwrap();
    }
    let r = exchange(
        &mut s,
        &request_frame(&[get(b"a", 1), get(b"b", 2), get(b"c", 3), get(b"zz", 4)]),
    )
    .unwrap();
    let got: Vec<(Status, usize)> = r.iter().map(|x| (x.1, x.3.len())).collect();
    // 42 + 4 + 2 * 620 leaves no room for a third 600-byte value plus the
    // header reserved for the fourth response.
    assert_eq!(
        got,
        [
            (Status::Success, 600),
            (Status::Success, 600),
            (Status::NoRoom, 0),
            (Status::NotFound, 0)
        ]
    );
}

#[test]
fn batch_level_problems_are_counted_drops() {
    let mut s = server(1 << 16, 64);
    let good = request_frame(&[get(b"k", 1)]);
    let mut out = [0u8; MAX_FRAME_LEN];

    // Not UDP: truncated, and a TCP frame.
    assert!(matches!(
        s.handle(&good[..20], &mut out),
        Err(DropReason::NotUdp(_))
    ));
    let mut tcp = good.clone();
    tcp[23] = 6;
    assert!(matches!(
        s.handle(&tcp, &mut out),
        Err(DropReason::NotUdp(_))
    ));
    // Batch header problems.
    let cases: [(&[u8], BatchError); 5] = [
        (&[0x56, 0x4B, 0], BatchError::Truncated),
        (&[0x00, 0x4B, 0, 1], BatchError::BadMagic(0x4B00)),
        (&[0x56, 0x4B, 2, 1], BatchError::BadKind(2)),
        (&[0x56, 0x4B, 0, 0], BatchError::Empty),
        (
            &[0x56, 0x4B, 0, MAX_BATCH as u8 + 1],
            BatchError::TooMany(33),
        ),
    ];
    for (payload, err) in cases {
        assert_eq!(
            s.handle(&frame_with_payload(payload), &mut out),
            Err(DropReason::BadBatch(err))
        );
    }
    // A response batch sent to the server.
    let mut payload = [0u8; 64];
    let n = encode_batch(&mut payload, BatchKind::Response, &[get(b"k", 1)]).unwrap();
    assert_eq!(
        s.handle(&frame_with_payload(&payload[..n]), &mut out),
        Err(DropReason::NotRequests)
    );
    // The first message header is cut short.
    assert_eq!(
        s.handle(&frame_with_payload(&[0x56, 0x4B, 0, 1, 1, 0, 1]), &mut out),
        Err(DropReason::NothingToAnswer)
    );
    // An output buffer that cannot hold even the response headers.
    assert_eq!(
        s.handle(&good, &mut out[..60]),
        Err(DropReason::OutputTooSmall)
    );

    let st = *s.stats();
    assert_eq!(st.drop_not_udp, 2);
    assert_eq!(st.drop_bad_batch, 5);
    assert_eq!(st.drop_not_requests, 1);
    assert_eq!(st.drop_nothing_to_answer, 1);
    assert_eq!(st.drop_output_too_small, 1);
    assert_eq!(st.frames, st.drops());
    assert_eq!(st.responses, 0);
}

#[test]
fn overrunning_lengths_are_answered_then_parsing_stops() {
    let mut s = server(1 << 16, 64);
    let mut payload = [0u8; 256];
    let n = encode_batch(
        &mut payload,
        BatchKind::Request,
        &[get(b"a", 1), get(b"b", 2), get(b"c", 3)],
    )
    .unwrap();
    // Second message: key length 200, beyond the datagram.
    let second = 4 + 20 + 1;
    payload[second + 2] = 200;
    let r = exchange(&mut s, &frame_with_payload(&payload[..n])).unwrap();
    let got: Vec<(Status, u32)> = r.iter().map(|x| (x.1, x.2)).collect();
    assert_eq!(got, [(Status::NotFound, 1), (Status::Malformed, 2)]);
    assert_eq!(s.stats().unframed_messages, 1);
}

#[test]
fn prefetching_changes_no_answer() {
    // Two servers see the same workload; one is asked to prefetch every
    // frame's buckets first (twice, and also frames it never handles).
    let mut plain = server(1 << 16, 64);
    let mut hinted = server(1 << 16, 64);
    let mut client = KvClient::new(WorkloadConfig {
        keys: 500,
        get_ratio: 0.7,
        batch: 5,
        ..Default::default()
    })
    .unwrap();
    let mut req = [0u8; MAX_FRAME_LEN];
    let (mut a, mut b) = ([0u8; MAX_FRAME_LEN], [0u8; MAX_FRAME_LEN]);
    for _ in 0..3000 {
        let n = client.next_frame(&mut req).unwrap();
        hinted.prefetch(&req[..n]);
        hinted.prefetch(&req[..n / 2]);
        hinted.prefetch_items(&req[..n]);
        hinted.prefetch_items(&req[..n / 2]);
        let ra = plain.handle(&req[..n], &mut a);
        hinted.prefetch(&req[..n]);
        let rb = hinted.handle(&req[..n], &mut b);
        assert_eq!(ra, rb);
        let len = ra.unwrap();
        assert_eq!(a[..len], b[..len]);
    }
    assert_eq!(plain.stats(), hinted.stats());
    assert_eq!(plain.store().stats(), hinted.store().stats());
}

#[test]
fn random_bytes_never_panic_and_every_frame_is_accounted_for() {
    let mut s = server(1 << 14, 16);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(99);
    let mut out = [0u8; MAX_FRAME_LEN];
    let template = request_frame(&[set(b"key", b"value", 1), get(b"key", 2), get(b"other", 3)]);
    let mut answered = 0u64;
    for round in 0..60_000 {
        let frame: Vec<u8> = match round % 3 {
            // Entirely random frames.
            0 => (0..rng.gen_range(0..200)).map(|_| rng.gen()).collect(),
            // Valid UDP frames with random payloads, often with a good header.
            1 => {
                let mut p: Vec<u8> = (0..rng.gen_range(0..300)).map(|_| rng.gen()).collect();
                if p.len() >= 4 && rng.gen_bool(0.7) {
                    p[..3].copy_from_slice(&[0x56, 0x4B, 0]);
                    p[3] = rng.gen_range(0..=MAX_BATCH as u8 + 2);
                }
                frame_with_payload(&p)
            }
            // A valid request with a few bytes changed, possibly truncated.
            _ => {
                let mut f = template.clone();
                for _ in 0..rng.gen_range(1..4) {
                    let i = rng.gen_range(42..f.len());
                    f[i] = rng.gen();
                }
                f.truncate(rng.gen_range(40..=f.len()));
                f
            }
        };
        let out_len = rng.gen_range(0..=MAX_FRAME_LEN);
        // The prefetch hint reads the same hostile bytes first.
        s.prefetch(&frame);
        s.prefetch_items(&frame);
        if let Ok(len) = s.handle(&frame, &mut out[..out_len]) {
            answered += 1;
            assert!(len <= out_len);
            let d = UdpDatagram::parse(&out[..len]).unwrap();
            let r = BatchReader::new(d.payload).unwrap();
            assert!(r.announced() >= 1);
            assert!(r.into_iter().all(|m| m.is_ok()));
        }
    }
    let st = s.stats();
    assert_eq!(st.frames, 60_000);
    assert_eq!(st.frames, st.responses + st.drops());
    assert_eq!(st.responses, answered);
    assert!(answered > 1000, "the loop must reach the request path");
}

fn run_workload(get_ratio: f64, partitions: u16) {
    let cfg = WorkloadConfig {
        keys: 10_000,
        get_ratio,
        batch: 8,
        partitions,
        seed: 5,
        ..WorkloadConfig::default()
    };
    let mut client = KvClient::new(cfg).unwrap();
    let mut servers: Vec<KvServer> = (0..partitions)
        .map(|p| {
            KvServer::new(&ServerConfig {
                store: StoreConfig {
                    log_bytes: 8 << 20,
                    buckets: 4096,
                },
                partition: p,
                partitions,
                ..ServerConfig::default()
            })
            .unwrap()
        })
        .collect();
    let mut req = [0u8; MAX_FRAME_LEN];
    let mut resp = [0u8; MAX_FRAME_LEN];
    let mut deliver = |client: &mut KvClient, req: &[u8]| {
        // Steer by destination port, as the NIC's flow table would.
        let d = UdpDatagram::parse(req).unwrap();
        let p = d.endpoints.dst_port - cfg.endpoints.dst_port;
        let n = servers[usize::from(p)].handle(req, &mut resp).unwrap();
        let summary = client.check_response(&resp[..n]).unwrap();
        assert_eq!(summary.problems, 0);
    };
    while let Some(len) = client.next_preload_frame(&mut req).unwrap() {
        deliver(&mut client, &req[..len]);
    }
    for _ in 0..20_000 {
        let len = client.next_frame(&mut req).unwrap();
        deliver(&mut client, &req[..len]);
    }
    let st = *client.stats();
    assert_eq!(st.requests, 10_000 + 20_000 * 8);
    assert_eq!(st.responses, st.requests);
    assert_eq!(client.in_flight(), 0);
    assert_eq!(st.sets_acked, st.sets);
    // The store is large enough to lose nothing: every GET hits.
    assert_eq!(st.misses, 0);
    assert_eq!(st.hits, st.gets);
    let share = st.gets as f64 / 160_000.0;
    assert!((share - get_ratio).abs() < 0.01, "GET share {share}");
    assert_eq!(
        (
            st.error_statuses,
            st.unknown,
            st.mismatched,
            st.wrong_values,
            st.abandoned
        ),
        (0, 0, 0, 0, 0)
    );
}

#[test]
fn client_and_server_agree_95_percent_get() {
    run_workload(0.95, 1);
}

#[test]
fn client_and_server_agree_50_percent_get_over_two_partitions() {
    run_workload(0.5, 2);
}

#[test]
fn workload_is_skewed_and_seeded() {
    let cfg = WorkloadConfig {
        keys: 1000,
        batch: 1,
        ..WorkloadConfig::default()
    };
    let keys_of = |seed: u64| {
        let mut c = KvClient::new(WorkloadConfig { seed, ..cfg }).unwrap();
        let mut buf = [0u8; 256];
        (0..20_000)
            .map(|_| {
                let len = c.next_frame(&mut buf).unwrap();
                let d = UdpDatagram::parse(&buf[..len]).unwrap();
                let m = BatchReader::new(d.payload)
                    .unwrap()
                    .next()
                    .unwrap()
                    .unwrap();
                assert_eq!(m.key.len(), 8);
                if m.op() == Some(Op::Set) {
                    assert!(value_belongs_to(
                        u64::from_le_bytes(m.key.try_into().unwrap()),
                        m.value
                    ));
                }
                u64::from_le_bytes(m.key.try_into().unwrap())
            })
            .collect::<Vec<u64>>()
    };
    let a = keys_of(1);
    assert_eq!(a, keys_of(1));
    assert_ne!(a, keys_of(2));
    // Zipf 0.99 over 1000 keys: key 0 takes about 1/zeta = 13% of requests.
    let hot = a.iter().filter(|&&k| k == 0).count() as f64 / a.len() as f64;
    assert!((0.11..0.15).contains(&hot), "{hot}");
}

#[test]
fn client_flags_bad_responses() {
    let mut c = KvClient::new(WorkloadConfig {
        keys: 100,
        batch: 1,
        get_ratio: 1.0,
        ..WorkloadConfig::default()
    })
    .unwrap();
    let mut buf = [0u8; 256];
    let len = c.next_frame(&mut buf).unwrap();
    let d = UdpDatagram::parse(&buf[..len]).unwrap();
    let m = BatchReader::new(d.payload)
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let respond = |status: Status, value: &[u8], opaque: u32| {
        let mut payload = [0u8; 128];
        let n = encode_batch(
            &mut payload,
            BatchKind::Response,
            &[Message {
                status: status as u8,
                key: &[],
                value,
                opaque,
                ..m
            }],
        )
        .unwrap();
        let mut f = vec![0u8; 256];
        let l = emit_udp_frame(&mut f, &endpoints().reversed(), &payload[..n]).unwrap();
        f.truncate(l);
        f
    };
    // Wrong value for this key.
    let s = c
        .check_response(&respond(Status::Success, &[0u8; 8], m.opaque))
        .unwrap();
    assert_eq!(s.problems, 1);
    assert_eq!(c.stats().wrong_values, 1);
    // The request is answered now: a second response is unknown.
    let s = c
        .check_response(&respond(Status::NotFound, &[], m.opaque))
        .unwrap();
    assert_eq!(s.problems, 1);
    assert_eq!(c.stats().unknown, 1);
    assert!(matches!(
        c.check_response(&buf[..len]),
        Err(ResponseError::NotResponses)
    ));
    assert!(matches!(
        c.check_response(&buf[..30]),
        Err(ResponseError::NotUdp(_))
    ));
}

#[test]
fn workload_config_is_validated() {
    let ok = WorkloadConfig::default();
    assert!(matches!(
        KvClient::new(WorkloadConfig {
            get_ratio: 1.5,
            ..ok
        }),
        Err(WorkloadError::BadGetRatio(_))
    ));
    assert!(matches!(
        KvClient::new(WorkloadConfig { batch: 0, ..ok }),
        Err(WorkloadError::BadBatch(0))
    ));
    assert!(matches!(
        KvClient::new(WorkloadConfig { batch: 33, ..ok }),
        Err(WorkloadError::BadBatch(33))
    ));
    assert!(matches!(
        KvClient::new(WorkloadConfig { keys: 0, ..ok }),
        Err(WorkloadError::Zipf(_))
    ));
    assert!(matches!(
        KvClient::new(WorkloadConfig {
            partitions: 0,
            ..ok
        }),
        Err(WorkloadError::NoPartitions)
    ));
    assert!(matches!(
        KvClient::new(WorkloadConfig { window: 0, ..ok }),
        Err(WorkloadError::NoWindow)
    ));
    // Partition p is served on the base port + p: all must be ports.
    let at = |port: u16, partitions: u16| {
        let mut c = WorkloadConfig { partitions, ..ok };
        c.endpoints.dst_port = port;
        KvClient::new(c).map(|_| ())
    };
    assert!(at(65535, 1).is_ok());
    assert!(at(65534, 2).is_ok());
    assert_eq!(
        at(65535, 2).unwrap_err().to_string(),
        "2 partitions from UDP port 65535 need ports up to 65536, past 65535"
    );
    assert!(matches!(
        at(9000, 65535),
        Err(WorkloadError::PortsPastEnd { last: 74534, .. })
    ));
}
