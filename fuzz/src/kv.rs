//! Target `kv`: the KV wire format (`enso_apps::kv::wire`) and the server
//! that parses it, on arbitrary bytes.
//!
//! The input is a request batch (a UDP payload). Invariants:
//! * `BatchReader` yields at most the announced messages, stops at the
//!   first framing error, and every message lies inside the payload, in
//!   order, back to back after the batch header;
//! * re-encoding the messages it read with `encode_batch` gives the bytes
//!   they were read from (but the reserved field, written as 0);
//! * `KvServer::handle` of the payload in an IPv4/UDP frame, sent twice
//!   (the second finds what the first stored), and of the input as a raw
//!   frame, either answers with a response batch of one message per
//!   request it could frame, addressed back to the sender, or drops the
//!   frame; every frame is counted once, as a response or a drop.

use std::net::Ipv4Addr;

use enso_apps::kv::wire::{
    encode_batch, BatchKind, BatchReader, Message, MessageError, BATCH_HEADER_LEN,
    MESSAGE_HEADER_LEN,
};
use enso_apps::kv::{KvServer, ServerConfig, StoreConfig};
use enso_apps::packet::{
    finish_udp_frame, Endpoints, MacAddr, UdpChecksum, UdpDatagram, MAX_FRAME_LEN,
    UDP_PAYLOAD_OFFSET,
};

pub fn run(data: &[u8]) {
    check_reader(data);
    let mut server = KvServer::new(&ServerConfig {
        store: StoreConfig {
            log_bytes: 16 << 10,
            buckets: 16,
        },
        udp_checksum: data.first().is_some_and(|b| b & 1 != 0),
        ..Default::default()
    })
    .expect("a valid store configuration");
    let ep = Endpoints {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        src_ip: Ipv4Addr::new(10, 0, 0, 1),
        dst_ip: Ipv4Addr::new(10, 0, 0, 2),
        src_port: 4000,
        dst_port: 5000,
    };
    let mut frame = vec![0u8; UDP_PAYLOAD_OFFSET + data.len()];
    frame[UDP_PAYLOAD_OFFSET..].copy_from_slice(data);
    let framed = finish_udp_frame(&mut frame, &ep, data.len(), UdpChecksum::Compute).is_ok();
    let mut response = vec![0u8; MAX_FRAME_LEN];
    let mut handled = 0u64;
    if framed {
        for _ in 0..2 {
            handle(&mut server, &frame, &mut response, Some(&ep), data);
            handled += 1;
        }
    }
    handle(&mut server, data, &mut response, None, data);
    handled += 1;
    let st = server.stats();
    assert_eq!(st.frames, handled);
    assert_eq!(st.responses + st.drops(), st.frames, "{st:?}");
}

fn check_reader(data: &[u8]) {
    let Ok(reader) = BatchReader::new(data) else {
        return;
    };
    let announced = reader.announced();
    let kind = reader.kind();
    let mut at = BATCH_HEADER_LEN;
    let mut msgs: Vec<Message<'_>> = Vec::new();
    let mut n = 0;
    for m in reader {
        n += 1;
        assert!(
            n <= announced,
            "more than the {announced} messages announced"
        );
        let m = match m {
            Ok(m) => m,
            Err(MessageError::TruncatedHeader) => {
                assert!(data.len() - at < MESSAGE_HEADER_LEN);
                continue;
            }
            Err(MessageError::Overrun { .. }) => {
                assert!(data.len() - at >= MESSAGE_HEADER_LEN);
                continue;
            }
        };
        assert!(msgs.len() + 1 == n, "a message after a framing error");
        let key_at = at + MESSAGE_HEADER_LEN;
        assert_eq!(m.key, &data[key_at..key_at + m.key.len()]);
        let value_at = key_at + m.key.len();
        assert_eq!(m.value, &data[value_at..value_at + m.value.len()]);
        at += m.wire_len();
        assert!(at <= data.len());
        msgs.push(m);
    }
    if msgs.is_empty() {
        return;
    }
    let mut buf = vec![0u8; at];
    let len = encode_batch(&mut buf, kind, &msgs).expect("the messages fit where they were");
    assert_eq!(len, at);
    let mut want = data[..at].to_vec();
    want[3] = msgs.len() as u8;
    let mut off = BATCH_HEADER_LEN;
    for m in &msgs {
        want[off + 6..off + 8].fill(0);
        off += m.wire_len();
    }
    assert_eq!(buf, want, "re-encoded batch differs");
}

fn handle(
    server: &mut KvServer,
    request: &[u8],
    response: &mut [u8],
    ep: Option<&Endpoints>,
    payload: &[u8],
) {
    let before = *server.stats();
    server.prefetch(request);
    match server.handle(request, response) {
        Ok(len) => {
            assert!(len <= response.len() && len <= MAX_FRAME_LEN);
            let d = UdpDatagram::parse(&response[..len]).expect("a response is IPv4/UDP");
            if let Some(ep) = ep {
                assert_eq!(
                    d.endpoints,
                    ep.reversed(),
                    "not addressed back to the sender"
                );
            }
            let r = BatchReader::new(d.payload).expect("a response batch");
            assert_eq!(r.kind(), BatchKind::Response);
            let answers = r.clone().filter(Result::is_ok).count();
            assert_eq!(answers, r.announced(), "unreadable response");
            let requests = BatchReader::new(payload).map(|r| r.announced()).ok();
            if ep.is_some() {
                let asked = requests.expect("answered a batch that does not parse");
                assert!(answers <= asked, "{answers} answers to {asked} requests");
            }
            let st = server.stats();
            assert_eq!(st.responses, before.responses + 1);
            assert_eq!(st.requests - before.requests, answers as u64, "{st:?}");
        }
        Err(_) => {
            let st = server.stats();
            assert_eq!(st.drops(), before.drops() + 1, "a drop not counted once");
        }
    }
}
