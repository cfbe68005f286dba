//! Configuration notifications: flow binding and unbinding, fallback pipes,
//! timestamping and a port's rate limit, sent as TX notifications.

use super::limiter::TokenBucket;
use super::state::Core;
use crate::layout::{self, config};
use crate::wire::FiveTuple;
use enso_abi::timestamp::{Timestamping, TsFormat};

impl Core {
    pub(super) fn apply_config(
        &mut self,
        slot: usize,
        id: u32,
        a: [u64; 5],
        port: usize,
        now: u64,
    ) {
        // A steering target must be one of its own enabled pipes or queues;
        // its port.
        let target_port = |core: &Core, t: u64| -> Option<u16> {
            if t < layout::DESC_TARGET_BASE as u64 {
                let app = core.apps[slot].as_ref()?;
                let p = &core.pipes[t as usize];
                (app.owns_pipe(t as u32) && p.base != 0).then_some(p.port)
            } else {
                core.desc_target(slot, t)
            }
        };
        let t2 = target_port(self, a[2]);
        let t1 = target_port(self, a[1]);
        let app = self.apps[slot].as_mut().expect("caller checked");
        match id {
            config::FLOW_BIND | config::FLOW_UNBIND => {
                let t = flow_tuple(a[0], a[1]);
                let Some(pport) = t2 else {
                    app.counters.reject_bad_config += 1;
                    return;
                };
                if id == config::FLOW_BIND {
                    // A rule another application owns is not replaced.
                    let theirs = self
                        .flows
                        .get(pport, &t)
                        .is_some_and(|p| !app.owns_target(p));
                    if theirs || self.flows.bind(pport, &t, a[2] as u32).is_err() {
                        app.counters.reject_bad_config += 1;
                    }
                } else {
                    // Only remove a rule that points to one of its own pipes.
                    match self.flows.unbind(pport, &t) {
                        Some(p) if app.owns_target(p) => {}
                        Some(p) => {
                            let _ = self.flows.bind(pport, &t, p);
                            app.counters.reject_bad_config += 1;
                        }
                        None => app.counters.reject_bad_config += 1,
                    }
                }
            }
            config::FALLBACK => {
                let Some(tport) = t1 else {
                    app.counters.reject_bad_config += 1;
                    return;
                };
                let f = &mut self.fallback[tport as usize];
                match (a[0], a[2]) {
                    (config::FALLBACK_ADD, _) => f.add(a[1] as u32),
                    (config::FALLBACK_REMOVE, _) => f.remove(a[1] as u32),
                    (config::FALLBACK_POLICY, rr @ (0 | 1)) => f.set_round_robin(rr == 1),
                    _ => app.counters.reject_bad_config += 1,
                }
            }
            config::TIMESTAMP if port < self.ts_offset.len() && (a[0] == 0 || a[1] <= 60) => {
                let Some(format) = TsFormat::from_arg(a[2]) else {
                    app.counters.reject_bad_config += 1;
                    return;
                };
                self.ts_offset[port] = (a[0] != 0).then_some(Timestamping {
                    offset: a[1] as usize,
                    format,
                });
            }
            config::RATE_LIMIT if port < self.limiter.len() => {
                self.limiter[port] = match (a[0], a[1]) {
                    (0, _) | (_, 0) => None,
                    (num, den) if num <= u32::MAX as u64 && den <= u32::MAX as u64 => {
                        Some(TokenBucket::new(num, den, now))
                    }
                    _ => {
                        app.counters.reject_bad_config += 1;
                        return;
                    }
                };
            }
            _ => app.counters.reject_bad_config += 1,
        }
    }
}

/// The flow of a `FLOW_BIND` or `FLOW_UNBIND` notification from its first
/// two arguments: `dst_ip << 32 | src_ip` and `dst_port << 32 | src_port
/// << 16 | protocol` (see [`config::FLOW_BIND`]). Bits outside those
/// fields are ignored.
#[inline]
fn flow_tuple(a0: u64, a1: u64) -> FiveTuple {
    FiveTuple {
        dst_ip: (a0 >> 32) as u32,
        src_ip: a0 as u32,
        dst_port: (a1 >> 32) as u16,
        src_port: (a1 >> 16) as u16,
        protocol: a1 as u8,
    }
}

#[cfg(test)]
mod tests {
    use super::flow_tuple;
    use crate::wire::PROTO_UDP;

    #[test]
    fn a_flow_is_read_from_the_two_packed_arguments() {
        let (dst_ip, src_ip) = (0x0a00_0001u32, 0xc0a8_0102u32);
        let a0 = u64::from(dst_ip) << 32 | u64::from(src_ip);
        let a1 = 4791u64 << 32 | 53_000u64 << 16 | u64::from(PROTO_UDP);
        let t = flow_tuple(a0, a1);
        assert_eq!((t.dst_ip, t.src_ip), (dst_ip, src_ip));
        assert_eq!(
            (t.dst_port, t.src_port, t.protocol),
            (4791, 53_000, PROTO_UDP)
        );
    }

    #[test]
    fn bits_outside_the_fields_are_ignored() {
        // Above the destination port, and between the source port and the
        // protocol.
        let a1 = 0xffff_0000_0000_0000 | 80u64 << 32 | 1234u64 << 16 | 0xff00 | 6;
        let t = flow_tuple(u64::MAX, a1);
        assert_eq!((t.dst_ip, t.src_ip), (u32::MAX, u32::MAX));
        assert_eq!((t.dst_port, t.src_port, t.protocol), (80, 1234, 6));
    }
}
