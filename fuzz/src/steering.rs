//! Target `steering`: the flow table and fallback pipes of
//! `nic_emu::steering`, driven by arbitrary sequences of operations and
//! checked against a plain model (a map of rules and a list of fallback
//! pipes, with the matching rules of the real NIC: a TCP SYN matches on
//! destination IP and port, other TCP segments on the 5-tuple, UDP on
//! destination IP and port, other protocols on destination IP).
//!
//! Invariants:
//! * after every operation the table holds as many rules as the model,
//!   `get` of the touched rule agrees with it, and binding fails (`Full`)
//!   exactly when a new rule would take the table's last free slot;
//! * a frame of a bound flow goes to its pipe (`lookup`, `steer`,
//!   `steer_classified`, `steer_memo` all agree); an unbound one goes to a
//!   fallback pipe of its port when there is one (the one the hash
//!   selects, or the next in turn with round robin), else nowhere;
//! * a remembered decision (`SteerMemo`) never outlives a change;
//! * at the end every rule of the model is found, and removing all of
//!   them (by `unbind` or `retain`) empties the table.

use std::collections::HashMap;

use enso_abi::wire::{self, FiveTuple, SteerKey, PROTO_TCP, PROTO_UDP};
use nic_emu::steering::{self, BindError, Fallback, FlowTable, SteerMemo, FLOW_TABLE_SIZE};

use crate::input::Input;

const PORTS: u16 = 3;

/// The reference model of one port's fallback pipes.
#[derive(Default)]
struct FallbackModel {
    pipes: Vec<u32>,
    round_robin: bool,
    next: usize,
}

impl FallbackModel {
    fn choose(&mut self, hash: u32) -> Option<u32> {
        let n = self.pipes.len();
        if n <= 1 {
            return self.pipes.first().copied();
        }
        let i = if self.round_robin {
            let i = self.next % n;
            self.next = i + 1;
            i
        } else {
            hash as usize % n
        };
        Some(self.pipes[i])
    }
}

/// A tuple drawn from a small space, so that operations collide.
fn tuple(inp: &mut Input<'_>) -> FiveTuple {
    let b = inp.u8();
    let protocol = match b % 5 {
        0 | 1 => PROTO_UDP,
        2 | 3 => PROTO_TCP,
        _ => inp.u8(),
    };
    let wide = b & 0x80 != 0;
    let small = |inp: &mut Input<'_>| {
        if wide {
            inp.u32()
        } else {
            u32::from(inp.u8() % 4)
        }
    };
    let src_ip = small(inp);
    let dst_ip = small(inp);
    let src_port = small(inp) as u16;
    let dst_port = small(inp) as u16;
    FiveTuple {
        src_ip,
        dst_ip,
        src_port,
        dst_port,
        protocol,
    }
}

/// The key a rule is stored under in the model (the spec, not the code).
fn model_rule_key(r: &FiveTuple) -> FiveTuple {
    match r.protocol {
        PROTO_UDP => FiveTuple {
            src_ip: 0,
            src_port: 0,
            ..*r
        },
        PROTO_TCP => *r,
        p => FiveTuple {
            dst_ip: r.dst_ip,
            protocol: p,
            ..FiveTuple::default()
        },
    }
}

/// The key an arriving frame is looked up under in the model.
fn model_frame_key(t: &FiveTuple, syn: bool) -> FiveTuple {
    match t.protocol {
        PROTO_TCP if syn => FiveTuple {
            src_ip: 0,
            src_port: 0,
            ..*t
        },
        _ => model_rule_key(t),
    }
}

/// An IPv4 frame of tuple `t` (TCP with the SYN flag as asked).
fn ipv4_frame(t: &FiveTuple, syn: bool) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[12..14].copy_from_slice(&wire::ETHERTYPE_IPV4.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&50u16.to_be_bytes());
    f[23] = t.protocol;
    f[26..30].copy_from_slice(&t.src_ip.to_be_bytes());
    f[30..34].copy_from_slice(&t.dst_ip.to_be_bytes());
    f[34..36].copy_from_slice(&t.src_port.to_be_bytes());
    f[36..38].copy_from_slice(&t.dst_port.to_be_bytes());
    f[47] = if syn { 0x02 } else { 0x10 };
    f
}

struct State {
    table: FlowTable,
    rules: HashMap<(u16, FiveTuple), u32>,
    fallback: Vec<Fallback>,
    model: Vec<FallbackModel>,
    /// Remembered decisions, one per frame header (as the generator keeps
    /// one per template frame).
    memo: HashMap<(u16, FiveTuple, bool), SteerMemo>,
}

impl State {
    fn bind(&mut self, port: u16, rule: &FiveTuple, pipe: u32) {
        let key = (port, model_rule_key(rule));
        let present = self.rules.contains_key(&key);
        let r = self.table.bind(port, rule, pipe);
        // A rule the table holds is always replaced. A new one finds its
        // probe window (MAX_PROBE slots from its hash's) full, or not;
        // which depends on where the others landed, so the model accepts
        // either, and checks that a refused bind left nothing.
        match r {
            Ok(()) => {
                self.rules.insert(key, pipe);
            }
            Err(BindError::Full) => {
                assert!(!present, "rebinding a held rule refused");
            }
        }
        assert!(self.table.len() <= FLOW_TABLE_SIZE);
        assert_eq!(self.table.len(), self.rules.len());
        assert_eq!(self.table.get(port, rule), self.rules.get(&key).copied());
    }

    fn unbind(&mut self, port: u16, rule: &FiveTuple) {
        let key = (port, model_rule_key(rule));
        assert_eq!(self.table.unbind(port, rule), self.rules.remove(&key));
        assert_eq!(self.table.get(port, rule), None);
    }

    /// Steers a frame of `t` on `port` every way there is and checks them.
    fn frame(&mut self, port: u16, t: &FiveTuple, syn: bool) {
        let f = ipv4_frame(t, syn);
        let c = wire::classify_full(&f).expect("a well-formed IPv4 frame");
        let SteerKey::Ipv4 {
            tuple: got,
            syn: got_syn,
        } = c.key
        else {
            panic!("IPv4 frame steered as {:?}", c.key);
        };
        // Ports are read for TCP and UDP only.
        let l4 = t.protocol == PROTO_TCP || t.protocol == PROTO_UDP;
        let t = &if l4 {
            *t
        } else {
            FiveTuple {
                src_port: 0,
                dst_port: 0,
                ..*t
            }
        };
        assert_eq!((got, got_syn), (*t, syn && t.protocol == PROTO_TCP));
        let bound = self
            .rules
            .get(&(port, model_frame_key(t, got_syn)))
            .copied();
        assert_eq!(self.table.lookup(port, t, got_syn), bound, "lookup");
        let p = usize::from(port);
        // The model of the fallback choice advances only when a frame falls
        // back; each of the three calls below is one frame.
        for call in 0..3 {
            let want = match bound {
                Some(pipe) => Some(pipe),
                None => self.model[p].choose(c.hash),
            };
            let got = match call {
                0 => steering::steer_classified(&self.table, &mut self.fallback[p], port, &c),
                1 => steering::steer(&self.table, &mut self.fallback[p], port, &c.key),
                _ => steering::steer_memo(
                    &self.table,
                    &mut self.fallback[p],
                    port,
                    &c,
                    self.memo.entry((port, *t, syn)).or_default(),
                ),
            };
            assert_eq!(
                got, want,
                "steering call {call}, frame of {t:?} on port {port}"
            );
        }
    }
}

pub fn run(data: &[u8]) {
    let mut inp = Input::new(data);
    let mut s = State {
        table: FlowTable::default(),
        rules: HashMap::new(),
        fallback: (0..PORTS).map(|_| Fallback::default()).collect(),
        model: (0..PORTS).map(|_| FallbackModel::default()).collect(),
        memo: HashMap::new(),
    };
    let mut ops = 0;
    let mut bulk_left = FLOW_TABLE_SIZE + 64;
    while !inp.is_empty() && ops < 2000 {
        ops += 1;
        let op = inp.u8();
        let port = u16::from(inp.u8()) % PORTS;
        let p = usize::from(port);
        match op % 10 {
            0 | 1 => {
                let rule = tuple(&mut inp);
                let pipe = u32::from(inp.u8() % 16);
                s.bind(port, &rule, pipe);
            }
            2 => {
                let rule = tuple(&mut inp);
                s.unbind(port, &rule);
            }
            3 | 4 => {
                let t = tuple(&mut inp);
                let syn = inp.bool();
                s.frame(port, &t, syn);
            }
            5 => {
                let pipe = u32::from(inp.u8() % 16);
                s.fallback[p].add(pipe);
                if !s.model[p].pipes.contains(&pipe) {
                    s.model[p].pipes.push(pipe);
                }
            }
            6 => {
                let pipe = u32::from(inp.u8() % 16);
                s.fallback[p].remove(pipe);
                s.model[p].pipes.retain(|&x| x != pipe);
            }
            7 => {
                let rr = inp.bool();
                s.fallback[p].set_round_robin(rr);
                s.model[p].round_robin = rr;
            }
            8 => {
                // Many rules at once, to fill the table and make long
                // probe runs for removal to shift back.
                // At most one table's worth in all per input: a fill is
                // thousands of binds with long probe runs, and several in
                // one input took the instrumented harness past the 2 s
                // that counts as a hang.
                let n = (usize::from(inp.u16()) % (FLOW_TABLE_SIZE + 64)).min(bulk_left);
                bulk_left -= n;
                let seed = inp.u32();
                for i in 0..n as u32 {
                    let rule = FiveTuple {
                        src_ip: 0,
                        dst_ip: seed ^ (i >> 4),
                        src_port: 0,
                        dst_port: (i & 15) as u16,
                        protocol: PROTO_UDP,
                    };
                    s.bind(port, &rule, i % 16);
                }
            }
            _ => {
                // Remove every rule to some pipes (as a detach does).
                let (m, r) = (u32::from(inp.u8() % 4) + 1, u32::from(inp.u8()));
                s.table.retain(|pipe| pipe % m == r % m);
                s.rules.retain(|_, pipe| *pipe % m != r % m);
                let keep = |pipe: u32| pipe % m != r % m;
                s.fallback[p].retain(keep);
                s.model[p].pipes.retain(|&x| keep(x));
            }
        }
        assert_eq!(s.table.len(), s.rules.len(), "rules after op {op}");
        assert_eq!(s.table.is_empty(), s.rules.is_empty());
        assert!(s.table.len() < FLOW_TABLE_SIZE);
        assert_eq!(s.fallback[p].len(), s.model[p].pipes.len());
    }
    for (&(port, key), &pipe) in &s.rules {
        assert_eq!(
            s.table.get(port, &key),
            Some(pipe),
            "rule {key:?} on port {port}"
        );
    }
    let rules: Vec<_> = s.rules.keys().copied().collect();
    for (i, (port, key)) in rules.iter().enumerate() {
        if i % 2 == 0 {
            assert!(s.table.unbind(*port, key).is_some(), "rule {key:?} lost");
        }
    }
    s.table.retain(|_| true);
    assert!(s.table.is_empty(), "{} rules left", s.table.len());
}
