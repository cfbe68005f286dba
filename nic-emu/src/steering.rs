//! Flow steering: bind rules in a hashed flow table, then fallback pipes.
//!
//! Matching follows the real NIC: a TCP SYN matches on destination IP and
//! port (a listening socket); other TCP segments on the full 5-tuple; UDP on
//! destination IP and port; other protocols on destination IP alone.
//! Frames that match no rule go to a fallback pipe chosen by hash or round
//! robin, or are dropped and counted when there is none.
//!
//! Each port steers separately (a pipe receives from one port): rules are
//! keyed by port, and every port has its own fallback pipes. A device with
//! several ports thus behaves like several NICs.

use crate::wire::{hash_tuple, FiveTuple, SteerKey, PROTO_TCP, PROTO_UDP};

/// Entries in the flow table (as on the real NIC).
pub const FLOW_TABLE_SIZE: usize = 8192;

/// Slots a rule may lie from its hash's slot at most: a lookup, hit or
/// miss, reads at most this many, however full the table is (as a
/// hardware table reads a fixed number of ways), so no application's
/// rules make another's lookups slower. A bind whose window is full fails
/// with [`BindError::Full`].
pub const MAX_PROBE: usize = 32;

/// Why a rule could not be installed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    /// No free slot within the flow's probe window.
    #[error("flow table full (no free slot within the flow's probe window)")]
    Full,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Slot {
    key: FiveTuple,
    port: u16,
    /// Target pipe + 1; 0 marks an empty slot.
    target: u32,
}

/// A fixed-size open-addressing table (linear probing bounded to
/// [`MAX_PROBE`] slots, with tombstone-free backward-shift deletion, which
/// never moves a rule out of its window).
#[derive(Debug)]
pub struct FlowTable {
    slots: Box<[Slot]>,
    len: usize,
    /// Bumped by every change, so a decision remembered with the version it
    /// was made under ([`SteerMemo`]) is known to be still right.
    version: u64,
}

impl FlowTable {
    /// Changes with every change to the table.
    #[inline(always)]
    pub fn version(&self) -> u64 {
        self.version
    }
}

impl Default for FlowTable {
    fn default() -> Self {
        Self {
            slots: vec![Slot::default(); FLOW_TABLE_SIZE].into_boxed_slice(),
            len: 0,
            version: 1,
        }
    }
}

/// The lookup key of a rule given by an application.
pub fn rule_key(rule: &FiveTuple) -> FiveTuple {
    match rule.protocol {
        PROTO_UDP => FiveTuple {
            src_ip: 0,
            src_port: 0,
            ..*rule
        },
        PROTO_TCP if rule.src_ip == 0 && rule.src_port == 0 => *rule,
        PROTO_TCP => *rule,
        p => FiveTuple {
            dst_ip: rule.dst_ip,
            protocol: p,
            ..FiveTuple::default()
        },
    }
}

/// The lookup key of an arriving IPv4 frame.
#[inline]
fn frame_key(t: &FiveTuple, syn: bool) -> FiveTuple {
    match t.protocol {
        PROTO_UDP => FiveTuple {
            src_ip: 0,
            src_port: 0,
            ..*t
        },
        PROTO_TCP if syn => FiveTuple {
            src_ip: 0,
            src_port: 0,
            ..*t
        },
        PROTO_TCP => *t,
        p => FiveTuple {
            dst_ip: t.dst_ip,
            protocol: p,
            ..FiveTuple::default()
        },
    }
}

#[inline]
fn slot_hash(key: &FiveTuple, port: u16) -> usize {
    (hash_tuple(key) ^ (port as u32).wrapping_mul(0x9e37_79b9)) as usize
}

impl FlowTable {
    const MASK: usize = FLOW_TABLE_SIZE - 1;

    /// Rules installed.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none is installed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Installs or replaces the rule for `rule` (as given by an application).
    pub fn bind(&mut self, port: u16, rule: &FiveTuple, pipe: u32) -> Result<(), BindError> {
        self.version += 1;
        let key = rule_key(rule);
        let home = slot_hash(&key, port) & Self::MASK;
        // Rules of a window are contiguous from its first slot (binds
        // take the first free slot; removals shift back): the first free
        // slot ends the search for the rule.
        for d in 0..MAX_PROBE {
            let s = &mut self.slots[(home + d) & Self::MASK];
            if s.target == 0 {
                *s = Slot {
                    key,
                    port,
                    target: pipe + 1,
                };
                self.len += 1;
                return Ok(());
            }
            if s.key == key && s.port == port {
                s.target = pipe + 1;
                return Ok(());
            }
        }
        Err(BindError::Full)
    }

    /// The pipe the rule for `rule` points to, if there is one.
    pub fn get(&self, port: u16, rule: &FiveTuple) -> Option<u32> {
        self.lookup_key(port, &rule_key(rule))
    }

    /// Removes the rule for `rule`; returns the pipe it pointed to.
    pub fn unbind(&mut self, port: u16, rule: &FiveTuple) -> Option<u32> {
        self.version += 1;
        let key = rule_key(rule);
        let home = slot_hash(&key, port) & Self::MASK;
        for d in 0..MAX_PROBE {
            let i = (home + d) & Self::MASK;
            let s = self.slots[i];
            if s.target == 0 {
                return None;
            }
            if s.key == key && s.port == port {
                self.remove_at(i);
                return Some(s.target - 1);
            }
        }
        None
    }

    /// Empties slot `hole` and shifts back the rules after it that may
    /// move closer to their hash's slot: O([`MAX_PROBE`]), since a rule
    /// further than that from the hole lies outside any window that
    /// contains it.
    fn remove_at(&mut self, mut hole: usize) {
        self.slots[hole] = Slot::default();
        self.len -= 1;
        let mut j = hole;
        loop {
            j = (j + 1) & Self::MASK;
            if (j.wrapping_sub(hole) & Self::MASK) >= MAX_PROBE {
                return;
            }
            let s = self.slots[j];
            if s.target == 0 {
                return;
            }
            let home = slot_hash(&s.key, s.port) & Self::MASK;
            // Move `s` into the hole if its home is not in (hole, j].
            let dist_home = j.wrapping_sub(home) & Self::MASK;
            let dist_hole = j.wrapping_sub(hole) & Self::MASK;
            if dist_home >= dist_hole {
                self.slots[hole] = s;
                self.slots[j] = Slot::default();
                hole = j;
            }
        }
    }

    /// Removes every rule pointing to a pipe for which `gone` is true;
    /// returns how many it removed.
    pub fn retain(&mut self, gone: impl Fn(u32) -> bool) -> u32 {
        self.version += 1;
        let mut removed = 0;
        let mut i = 0;
        while i < FLOW_TABLE_SIZE {
            let s = self.slots[i];
            if s.target != 0 && gone(s.target - 1) {
                self.remove_at(i);
                removed += 1;
                // Backward shift may have moved another entry into `i`.
                continue;
            }
            i += 1;
        }
        removed
    }

    #[inline]
    fn lookup_key(&self, port: u16, key: &FiveTuple) -> Option<u32> {
        let home = slot_hash(key, port) & Self::MASK;
        for d in 0..MAX_PROBE {
            let s = &self.slots[(home + d) & Self::MASK];
            if s.target == 0 {
                return None;
            }
            if s.key == *key && s.port == port {
                return Some(s.target - 1);
            }
        }
        None
    }

    /// The pipe bound to an arriving frame's flow, if any.
    #[inline]
    pub fn lookup(&self, port: u16, t: &FiveTuple, syn: bool) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        self.lookup_key(port, &frame_key(t, syn))
    }
}

/// Fallback pipes and how one is chosen.
#[derive(Debug)]
pub struct Fallback {
    pipes: Vec<u32>,
    round_robin: bool,
    next: usize,
    /// Bumped by every change (see [`FlowTable`]'s).
    version: u64,
}

impl Default for Fallback {
    fn default() -> Self {
        Self {
            pipes: Vec::new(),
            round_robin: false,
            next: 0,
            version: 1,
        }
    }
}

impl Fallback {
    /// Changes with every change to the fallback pipes or their policy.
    #[inline(always)]
    pub fn version(&self) -> u64 {
        self.version
    }
    /// Adds `pipe`.
    pub fn add(&mut self, pipe: u32) {
        self.version += 1;
        if !self.pipes.contains(&pipe) {
            self.pipes.push(pipe);
        }
    }
    /// Removes `pipe`.
    pub fn remove(&mut self, pipe: u32) {
        self.version += 1;
        self.pipes.retain(|&p| p != pipe);
    }
    /// Keeps only the pipes for which `keep` holds.
    pub fn retain(&mut self, keep: impl Fn(u32) -> bool) {
        self.version += 1;
        self.pipes.retain(|&p| keep(p));
    }
    /// Spreads frames round robin (`true`) or by flow hash (`false`).
    pub fn set_round_robin(&mut self, rr: bool) {
        self.version += 1;
        self.round_robin = rr;
    }
    /// Pipes it holds.
    pub fn len(&self) -> usize {
        self.pipes.len()
    }
    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.pipes.is_empty()
    }

    /// The pipe for a frame whose flow hash is `hash`; `None` if there is none.
    #[inline]
    pub fn choose(&mut self, hash: u32) -> Option<u32> {
        let n = self.pipes.len();
        if n <= 1 {
            return self.pipes.first().copied();
        }
        let i = if self.round_robin {
            let i = self.next % n;
            self.next = i + 1;
            i
        } else if n.is_power_of_two() {
            hash as usize & (n - 1)
        } else {
            hash as usize % n
        };
        Some(self.pipes[i])
    }
}

/// The target of a classified frame (its flow hash already computed), or
/// `None` if it is to be dropped.
#[inline]
pub fn steer_classified(
    table: &FlowTable,
    fallback: &mut Fallback,
    port: u16,
    c: &crate::wire::Classified,
) -> Option<u32> {
    if let SteerKey::Ipv4 { tuple, syn } = &c.key {
        if let Some(t) = table.lookup(port, tuple, *syn) {
            return Some(t);
        }
    }
    fallback.choose(c.hash)
}

/// A steering decision remembered for frames with identical headers (the
/// generator's templates): valid while neither the flow table nor the
/// port's fallback pipes have changed since. The NIC's decision is the same
/// either way; remembering it only saves the emulator the lookup.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SteerMemo {
    flows: u64,
    fallback: u64,
    target: u32,
}

impl SteerMemo {
    /// The remembered target if it was decided under these versions of the
    /// flow table and the port's fallback (see [`FlowTable::version`]).
    #[inline(always)]
    pub fn target_at(&self, flows_version: u64, fallback_version: u64) -> Option<u32> {
        (self.flows == flows_version && self.fallback == fallback_version).then_some(self.target)
    }

    /// The remembered target, current or not (0 if none was remembered).
    #[inline(always)]
    pub fn remembered(&self) -> u32 {
        self.target
    }
}

/// [`steer_classified`] for frames whose headers equal those `memo` was
/// filled for (by this function, on the same port). A round-robin fallback
/// choice is never remembered: it changes with every frame.
#[inline(always)]
pub fn steer_memo(
    table: &FlowTable,
    fallback: &mut Fallback,
    port: u16,
    c: &crate::wire::Classified,
    memo: &mut SteerMemo,
) -> Option<u32> {
    if let Some(t) = memo.target_at(table.version, fallback.version) {
        return Some(t);
    }
    steer_and_remember(table, fallback, port, c, memo)
}

/// [`steer_memo`] when `memo` is out of date (or was never filled).
#[inline(never)]
fn steer_and_remember(
    table: &FlowTable,
    fallback: &mut Fallback,
    port: u16,
    c: &crate::wire::Classified,
    memo: &mut SteerMemo,
) -> Option<u32> {
    let matched = match &c.key {
        SteerKey::Ipv4 { tuple, syn } => table.lookup(port, tuple, *syn),
        SteerKey::Other { .. } => None,
    };
    let (target, fixed) = match matched {
        Some(t) => (t, true),
        None => (
            fallback.choose(c.hash)?,
            !fallback.round_robin || fallback.pipes.len() == 1,
        ),
    };
    if fixed {
        *memo = SteerMemo {
            flows: table.version,
            fallback: fallback.version,
            target,
        };
    }
    Some(target)
}

/// The pipe a frame goes to, or `None` if it is to be dropped.
#[inline]
pub fn steer(table: &FlowTable, fallback: &mut Fallback, port: u16, key: &SteerKey) -> Option<u32> {
    match key {
        SteerKey::Ipv4 { tuple, syn } => table
            .lookup(port, tuple, *syn)
            .or_else(|| fallback.choose(hash_tuple(tuple))),
        SteerKey::Other { hash } => fallback.choose(*hash),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp(dst_port: u16, src_port: u16) -> FiveTuple {
        FiveTuple {
            src_ip: 0x0a000001,
            dst_ip: 0x0a010001,
            src_port,
            dst_port,
            protocol: PROTO_UDP,
        }
    }

    #[test]
    fn udp_matches_on_destination_only() {
        let mut t = FlowTable::default();
        t.bind(0, &udp(80, 0), 7).unwrap();
        assert_eq!(t.lookup(0, &udp(80, 1234), false), Some(7));
        assert_eq!(t.lookup(0, &udp(81, 1234), false), None);
    }

    #[test]
    fn tcp_syn_vs_established() {
        let mut t = FlowTable::default();
        let listen = FiveTuple {
            src_ip: 0,
            src_port: 0,
            dst_ip: 1,
            dst_port: 443,
            protocol: PROTO_TCP,
        };
        let conn = FiveTuple {
            src_ip: 9,
            src_port: 5555,
            ..listen
        };
        t.bind(0, &listen, 1).unwrap();
        t.bind(0, &conn, 2).unwrap();
        assert_eq!(t.lookup(0, &conn, true), Some(1));
        assert_eq!(t.lookup(0, &conn, false), Some(2));
        let other = FiveTuple {
            src_port: 5556,
            ..conn
        };
        assert_eq!(t.lookup(0, &other, false), None);
    }

    #[test]
    fn other_protocols_match_destination_ip() {
        let mut t = FlowTable::default();
        let icmp = FiveTuple {
            dst_ip: 5,
            protocol: 1,
            ..Default::default()
        };
        t.bind(0, &icmp, 3).unwrap();
        let pkt = FiveTuple { src_ip: 77, ..icmp };
        assert_eq!(t.lookup(0, &pkt, false), Some(3));
    }

    #[test]
    fn fills_until_a_window_is_full_and_removal_keeps_others_reachable() {
        let mut t = FlowTable::default();
        // Bind distinct flows until one finds its window full.
        let mut n = 0u32;
        while t.bind(0, &udp(n as u16, 0), n).is_ok() {
            n += 1;
        }
        // Windows of 32 fill long after half the table, and never beyond it.
        assert!(
            (FLOW_TABLE_SIZE as u32 / 2..FLOW_TABLE_SIZE as u32).contains(&n),
            "{n} rules"
        );
        assert_eq!(t.len(), n as usize);
        // A full window refuses new flows but still takes a rebind.
        assert_eq!(t.bind(0, &udp(n as u16, 0), 1), Err(BindError::Full));
        assert_eq!(t.bind(0, &udp(0, 0), 7), Ok(()));
        assert_eq!(t.bind(0, &udp(0, 0), 0), Ok(()));
        for p in (0..n).step_by(3) {
            assert_eq!(t.unbind(0, &udp(p as u16, 0)), Some(p));
        }
        for p in 0..n {
            let want = if p % 3 == 0 { None } else { Some(p) };
            assert_eq!(t.lookup(0, &udp(p as u16, 1), false), want, "port {p}");
        }
        let removed = t.retain(|pipe| pipe % 2 == 0);
        assert_eq!(
            removed,
            (0..n).filter(|p| p % 3 != 0 && p % 2 == 0).count() as u32
        );
        for p in 0..n {
            let want = if p % 3 == 0 || p % 2 == 0 {
                None
            } else {
                Some(p)
            };
            assert_eq!(t.lookup(0, &udp(p as u16, 1), false), want, "port {p}");
        }
        // What was removed can be bound again.
        for p in (0..n).step_by(3) {
            assert_eq!(t.bind(0, &udp(p as u16, 0), p), Ok(()), "port {p}");
        }
    }

    #[test]
    fn rules_are_per_port() {
        let mut t = FlowTable::default();
        t.bind(0, &udp(80, 0), 1).unwrap();
        t.bind(1, &udp(80, 0), 2).unwrap();
        assert_eq!(t.lookup(0, &udp(80, 9), false), Some(1));
        assert_eq!(t.lookup(1, &udp(80, 9), false), Some(2));
        assert_eq!(t.lookup(2, &udp(80, 9), false), None);
        assert_eq!(t.unbind(1, &udp(80, 0)), Some(2));
        assert_eq!(t.lookup(0, &udp(80, 9), false), Some(1));
    }

    #[test]
    fn fallback_hash_and_round_robin() {
        let mut f = Fallback::default();
        assert_eq!(f.choose(1), None);
        f.add(10);
        f.add(11);
        f.add(12);
        assert_eq!(f.choose(4), Some(11));
        f.set_round_robin(true);
        let picks: Vec<_> = (0..6).map(|_| f.choose(0).unwrap()).collect();
        assert_eq!(picks, [10, 11, 12, 10, 11, 12]);
        f.remove(11);
        assert_eq!(f.len(), 2);
    }
}
