//! Configuration notifications: flow binding and unbinding, fallback pipes,
//! timestamping and a port's rate limit, sent as TX notifications.

use super::limiter::TokenBucket;
use super::state::Core;
use crate::layout::{self, config};
use crate::wire::FiveTuple;
use config::status;
use enso_abi::timestamp::{Timestamping, TsFormat};

impl Core {
    /// Applies a configuration notification of application `slot`;
    /// returns the NIC's answer ([`config::status`]), which is written into
    /// the notification as it completes. Anything but `APPLIED` is also
    /// counted in the application's `reject_bad_config`.
    pub(super) fn apply_config(
        &mut self,
        slot: usize,
        id: u32,
        a: [u64; 5],
        port: usize,
        now: u64,
    ) -> u64 {
        let s = self.config_status(slot, id, a, port, now);
        if s != status::APPLIED {
            let app = self.apps[slot].as_mut().expect("caller checked");
            app.counters.reject_bad_config += 1;
        }
        s
    }

    fn config_status(&mut self, slot: usize, id: u32, a: [u64; 5], port: usize, now: u64) -> u64 {
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
                    return status::BAD_ARGUMENT;
                };
                let held = self.flows.get(pport, &t);
                if held.is_some_and(|p| !app.owns_target(p)) {
                    // Another application's rule is neither replaced nor
                    // removed.
                    return status::NOT_OWNER;
                }
                if id == config::FLOW_UNBIND {
                    if held.is_none() {
                        return status::NOT_BOUND;
                    }
                    self.flows.unbind(pport, &t);
                    app.rules -= 1;
                    return status::APPLIED;
                }
                if held.is_none() && app.rules >= MAX_RULES_PER_APP {
                    return status::QUOTA;
                }
                match self.flows.bind(pport, &t, a[2] as u32) {
                    Ok(()) => {
                        if held.is_none() {
                            app.rules += 1;
                        }
                        status::APPLIED
                    }
                    Err(_) => status::TABLE_FULL,
                }
            }
            config::FALLBACK => {
                let Some(tport) = t1 else {
                    return status::BAD_ARGUMENT;
                };
                let f = &mut self.fallback[tport as usize];
                match (a[0], a[2]) {
                    (config::FALLBACK_ADD, _) => f.add(a[1] as u32),
                    (config::FALLBACK_REMOVE, _) => f.remove(a[1] as u32),
                    (config::FALLBACK_POLICY, rr @ (0 | 1)) => f.set_round_robin(rr == 1),
                    _ => return status::BAD_ARGUMENT,
                }
                status::APPLIED
            }
            // Timestamping and rate limits are the application's own: they
            // apply to what it sends on the port and to what the port
            // writes into its pipes and queues, and end when it detaches.
            config::TIMESTAMP if port < self.nports && (a[0] == 0 || a[1] <= 60) => {
                let Some(format) = TsFormat::from_arg(a[2]) else {
                    return status::BAD_ARGUMENT;
                };
                let i = slot * self.nports + port;
                self.ts_offset[i] = (a[0] != 0).then_some(Timestamping {
                    offset: a[1] as usize,
                    format,
                });
                status::APPLIED
            }
            config::RATE_LIMIT if port < self.nports => {
                let i = slot * self.nports + port;
                self.limiter[i] = match (a[0], a[1]) {
                    (0, _) | (_, 0) => None,
                    (num, den) if num <= u32::MAX as u64 && den <= u32::MAX as u64 => {
                        Some(TokenBucket::new(num, den, now))
                    }
                    _ => return status::BAD_ARGUMENT,
                };
                status::APPLIED
            }
            _ => status::BAD_ARGUMENT,
        }
    }
}

/// Flow rules one application may hold at once: a quarter of the flow
/// table, so that no application can fill it for the others.
pub const MAX_RULES_PER_APP: u32 = (crate::steering::FLOW_TABLE_SIZE / 4) as u32;

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
