//! Synthetic traffic: frame sizes, flows, and address and port ranges, turned
//! into deterministic IPv4/UDP frames.
//!
//! The frame for sequence number `n` is a pure function of the spec and `n`
//! ([`Traffic::build`]), so a receiver can rebuild it and compare every byte
//! ([`Traffic::verify`]). Without address or port ranges the frames are
//! exactly nic-emu's self-checking [`TestFrames`]; with ranges they keep the
//! same payload (magic, sequence number, flow, echo byte, pattern) under the
//! chosen addresses and ports, with the IPv4 checksum recomputed.
//!
//! # Sizes
//!
//! Sizes are Ethernet frame sizes with the FCS, as RFC 2544 states them
//! (64 to 1518, up to 1540 here); the frame built is 4 B shorter (see the
//! crate documentation). Accepted strings:
//!
//! | string              | meaning                                            |
//! |---------------------|----------------------------------------------------|
//! | `64`                | every frame 64 B                                   |
//! | `64,128,1518`       | equal shares of each                               |
//! | `64:7,594:4,1518:1` | weighted shares                                    |
//! | `imix`              | simple IMIX: 7:4:1 of 64, 594 and 1518 B frames (IP packets of 46, 576 and 1500 B), mean 361.8 B |
//! | `64-1518`           | uniform over the range, per frame                  |
//!
//! A mix repeats a fixed pattern (its weights, shuffled with the seed), so
//! every window of `sum(weights)` frames has the exact proportions.
//!
//! # Flows
//!
//! Frame `n` belongs to flow `n mod flows`. With ranges, flow `f` takes its
//! 5-tuple from `f` written in mixed radix over the range sizes, source port
//! fastest, then destination port, source address, destination address: the
//! first `product of range sizes` flows are all distinct. Without `flows`,
//! there is one flow per combination (at most [`MAX_FLOWS`]).

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use netview::ipv4::Ipv4Packet;
use netview::mix64;
use netview::udp::UdpPacket;
use nic_emu::testframe::{FrameKind, TestFrames, Verified, VerifyError};
use nic_emu::wire::{self, FiveTuple, MAX_FRAME};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

use crate::rate::{FrameProfile, FCS_LEN};

#[cfg(test)]
mod tests;

/// Smallest frame size (with FCS): the Ethernet minimum.
pub const MIN_SIZE: usize = 64;
/// Largest frame size (with FCS): the NIC's largest frame plus the FCS.
pub const MAX_SIZE: usize = MAX_FRAME + FCS_LEN;
/// Most flows a spec may have.
pub const MAX_FLOWS: u32 = 1 << 24;
/// Largest sum of weights in a size mix (the length of its pattern).
pub const MAX_MIX_WEIGHT: u32 = 1 << 20;

/// Implements `Display`-based serde for types with a string syntax.
macro_rules! serde_as_string {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

/// Why a size string was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// Nothing to parse.
    #[error("empty frame size")]
    Empty,
    /// Not a number.
    #[error("bad frame size '{0}'")]
    BadNumber(String),
    /// Below 64 or above 1540.
    #[error("frame size {0} is outside {MIN_SIZE}..={MAX_SIZE} (sizes include the 4 B FCS)")]
    OutOfRange(usize),
    /// A weight of zero.
    #[error("weight of size {0} is zero")]
    ZeroWeight(usize),
    /// `lo-hi` with `lo > hi`.
    #[error("size range {0}-{1} is reversed")]
    Reversed(usize, usize),
    /// Weights adding up to more than [`MAX_MIX_WEIGHT`].
    #[error("size mix weights add up to more than {MAX_MIX_WEIGHT}")]
    TooHeavy,
}

/// Frame sizes (with FCS) of synthetic traffic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SizeSpec {
    /// One size.
    Fixed(u16),
    /// Sizes with integer weights.
    Mix(Vec<(u16, u32)>),
    /// Uniform over `lo..=hi`.
    Range(u16, u16),
}

impl SizeSpec {
    /// The simple IMIX: 7:4:1 of 64, 594 and 1518 B frames.
    pub fn imix() -> Self {
        SizeSpec::Mix(vec![(64, 7), (594, 4), (1518, 1)])
    }

    /// Checks sizes and weights.
    pub fn validate(&self) -> Result<(), SizeError> {
        let check = |s: u16| {
            let s = usize::from(s);
            if (MIN_SIZE..=MAX_SIZE).contains(&s) {
                Ok(())
            } else {
                Err(SizeError::OutOfRange(s))
            }
        };
        match self {
            SizeSpec::Fixed(s) => check(*s),
            SizeSpec::Mix(v) => {
                if v.is_empty() {
                    return Err(SizeError::Empty);
                }
                let mut total = 0u64;
                for &(s, w) in v {
                    check(s)?;
                    if w == 0 {
                        return Err(SizeError::ZeroWeight(s.into()));
                    }
                    total += u64::from(w);
                }
                if total > u64::from(MAX_MIX_WEIGHT) {
                    return Err(SizeError::TooHeavy);
                }
                Ok(())
            }
            SizeSpec::Range(lo, hi) => {
                check(*lo)?;
                check(*hi)?;
                if lo > hi {
                    return Err(SizeError::Reversed((*lo).into(), (*hi).into()));
                }
                Ok(())
            }
        }
    }

    /// The smallest size (with FCS) the spec can send.
    pub fn smallest(&self) -> u16 {
        match self {
            SizeSpec::Fixed(s) => *s,
            SizeSpec::Mix(v) => v.iter().map(|&(s, _)| s).min().unwrap_or(MIN_SIZE as u16),
            SizeSpec::Range(lo, _) => *lo,
        }
    }

    /// Mean frame length and flits (no FCS), for converting rates.
    pub fn profile(&self) -> FrameProfile {
        let len = |s: u16| usize::from(s) - FCS_LEN;
        let p = match self {
            SizeSpec::Fixed(s) => Some(FrameProfile::fixed(len(*s))),
            SizeSpec::Mix(v) => FrameProfile::weighted(v.iter().map(|&(s, w)| (len(s), w.into()))),
            SizeSpec::Range(lo, hi) => FrameProfile::from_lens((*lo..=*hi).map(len)),
        };
        p.unwrap_or(FrameProfile::fixed(MIN_SIZE - FCS_LEN))
    }
}

fn parse_size(s: &str) -> Result<u16, SizeError> {
    let t = s.trim();
    let v: usize = t.parse().map_err(|_| SizeError::BadNumber(t.into()))?;
    if !(MIN_SIZE..=MAX_SIZE).contains(&v) {
        return Err(SizeError::OutOfRange(v));
    }
    Ok(v as u16)
}

impl FromStr for SizeSpec {
    type Err = SizeError;
    fn from_str(s: &str) -> Result<Self, SizeError> {
        let t = s.trim();
        if t.is_empty() {
            return Err(SizeError::Empty);
        }
        if t.eq_ignore_ascii_case("imix") {
            return Ok(SizeSpec::imix());
        }
        let spec = if let Some((lo, hi)) = t.split_once('-') {
            SizeSpec::Range(parse_size(lo)?, parse_size(hi)?)
        } else if !t.contains(',') && !t.contains(':') {
            SizeSpec::Fixed(parse_size(t)?)
        } else {
            let mut v = Vec::new();
            for item in t.split(',') {
                let (size, weight) = match item.split_once(':') {
                    Some((s, w)) => {
                        let w: u32 = w
                            .trim()
                            .parse()
                            .map_err(|_| SizeError::BadNumber(item.trim().into()))?;
                        (parse_size(s)?, w)
                    }
                    None => (parse_size(item)?, 1),
                };
                v.push((size, weight));
            }
            SizeSpec::Mix(v)
        };
        spec.validate()?;
        Ok(spec)
    }
}

impl fmt::Display for SizeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeSpec::Fixed(s) => write!(f, "{s}"),
            SizeSpec::Range(lo, hi) => write!(f, "{lo}-{hi}"),
            SizeSpec::Mix(v) => {
                for (i, (s, w)) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{s}:{w}")?;
                }
                Ok(())
            }
        }
    }
}

serde_as_string!(SizeSpec);

/// Why an address or port range was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    /// Not an IPv4 address.
    #[error("bad IPv4 address '{0}'")]
    BadAddress(String),
    /// A prefix length above 32.
    #[error("bad prefix length in '{0}'")]
    BadPrefix(String),
    /// `10.0.0.5/24`: host bits set.
    #[error("'{given}' has host bits set; did you mean {network}?")]
    HostBits {
        /// What was given.
        given: String,
        /// The network it is in.
        network: String,
    },
    /// Not a port number.
    #[error("bad port '{0}'")]
    BadPort(String),
    /// `b-a` with `b > a`.
    #[error("range '{0}' is reversed")]
    Reversed(String),
}

/// A range of IPv4 addresses: `10.0.0.1`, `10.0.0.0/16` or
/// `10.0.0.1-10.0.0.200` (every address in it, inclusive).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv4Range {
    first: u32,
    /// Addresses in the range, 1 to 2^32.
    count: u64,
}

impl Ipv4Range {
    /// One address.
    pub fn single(a: Ipv4Addr) -> Self {
        Self {
            first: a.into(),
            count: 1,
        }
    }

    /// First address.
    pub fn first(&self) -> Ipv4Addr {
        self.first.into()
    }

    /// Addresses in the range.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Address `i mod count` of the range.
    pub fn nth(&self, i: u64) -> Ipv4Addr {
        Ipv4Addr::from(self.first.wrapping_add((i % self.count) as u32))
    }

    fn nth_u32(&self, i: u64) -> u32 {
        self.first.wrapping_add((i % self.count) as u32)
    }
}

fn parse_addr(s: &str) -> Result<u32, RangeError> {
    s.trim()
        .parse::<Ipv4Addr>()
        .map(u32::from)
        .map_err(|_| RangeError::BadAddress(s.trim().into()))
}

impl FromStr for Ipv4Range {
    type Err = RangeError;
    fn from_str(s: &str) -> Result<Self, RangeError> {
        let t = s.trim();
        if let Some((a, len)) = t.split_once('/') {
            let first = parse_addr(a)?;
            let len: u32 = len
                .trim()
                .parse()
                .ok()
                .filter(|l| *l <= 32)
                .ok_or_else(|| RangeError::BadPrefix(t.into()))?;
            let count = 1u64 << (32 - len);
            let mask = !((count - 1) as u32);
            if first & mask != first {
                return Err(RangeError::HostBits {
                    given: t.into(),
                    network: format!("{}/{len}", Ipv4Addr::from(first & mask)),
                });
            }
            return Ok(Self { first, count });
        }
        if let Some((a, b)) = t.split_once('-') {
            let (first, last) = (parse_addr(a)?, parse_addr(b)?);
            if first > last {
                return Err(RangeError::Reversed(t.into()));
            }
            return Ok(Self {
                first,
                count: u64::from(last - first) + 1,
            });
        }
        Ok(Self {
            first: parse_addr(t)?,
            count: 1,
        })
    }
}

impl fmt::Display for Ipv4Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let first = Ipv4Addr::from(self.first);
        if self.count == 1 {
            return write!(f, "{first}");
        }
        if self.count.is_power_of_two() && u64::from(self.first) % self.count == 0 {
            return write!(f, "{first}/{}", 32 - self.count.trailing_zeros());
        }
        let last = Ipv4Addr::from(self.first + (self.count - 1) as u32);
        write!(f, "{first}-{last}")
    }
}

serde_as_string!(Ipv4Range);

/// A range of ports: `53` or `1000-2000` (inclusive).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PortRange {
    first: u16,
    /// Ports in the range, 1 to 65536.
    count: u32,
}

impl PortRange {
    /// One port.
    pub fn single(p: u16) -> Self {
        Self { first: p, count: 1 }
    }

    /// First port.
    pub fn first(&self) -> u16 {
        self.first
    }

    /// Ports in the range.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Port `i mod count` of the range.
    pub fn nth(&self, i: u64) -> u16 {
        self.first.wrapping_add((i % u64::from(self.count)) as u16)
    }
}

fn parse_port(s: &str) -> Result<u16, RangeError> {
    s.trim()
        .parse()
        .map_err(|_| RangeError::BadPort(s.trim().into()))
}

impl FromStr for PortRange {
    type Err = RangeError;
    fn from_str(s: &str) -> Result<Self, RangeError> {
        let t = s.trim();
        match t.split_once('-') {
            Some((a, b)) => {
                let (first, last) = (parse_port(a)?, parse_port(b)?);
                if first > last {
                    return Err(RangeError::Reversed(t.into()));
                }
                Ok(Self {
                    first,
                    count: u32::from(last - first) + 1,
                })
            }
            None => Ok(Self::single(parse_port(t)?)),
        }
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.count == 1 {
            write!(f, "{}", self.first)
        } else {
            write!(
                f,
                "{}-{}",
                self.first,
                u32::from(self.first) + self.count - 1
            )
        }
    }
}

serde_as_string!(PortRange);

/// What synthetic traffic to send.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrafficSpec {
    /// Frame sizes, with FCS.
    pub sizes: SizeSpec,
    /// Number of flows; `None`: one per combination of the ranges (1 without
    /// ranges).
    pub flows: Option<u32>,
    /// Source addresses.
    pub src_ip: Option<Ipv4Range>,
    /// Destination addresses.
    pub dst_ip: Option<Ipv4Range>,
    /// Source ports.
    pub src_port: Option<PortRange>,
    /// Destination ports.
    pub dst_port: Option<PortRange>,
    /// Seeds the order of a size mix and the sizes drawn from a range.
    pub seed: u64,
    /// Distinguishes generators (it is in the source MAC address).
    pub stream: u8,
}

impl Default for TrafficSpec {
    fn default() -> Self {
        Self {
            sizes: SizeSpec::Fixed(64),
            flows: None,
            src_ip: None,
            dst_ip: None,
            src_port: None,
            dst_port: None,
            seed: 0,
            stream: 0,
        }
    }
}

impl TrafficSpec {
    /// Whether any address or port range is given.
    pub fn has_ranges(&self) -> bool {
        self.src_ip.is_some()
            || self.dst_ip.is_some()
            || self.src_port.is_some()
            || self.dst_port.is_some()
    }
}

/// Why a traffic spec was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TrafficError {
    /// Bad sizes.
    #[error(transparent)]
    Size(#[from] SizeError),
    /// Zero flows, or more than [`MAX_FLOWS`].
    #[error("number of flows must be in 1..={MAX_FLOWS}, not {0}")]
    Flows(u32),
}

/// Builds and checks the frames of a [`TrafficSpec`].
#[derive(Clone, Debug)]
pub struct Traffic {
    spec: TrafficSpec,
    flows: u32,
    /// Frame sizes in the order a mix repeats them (one entry if fixed,
    /// empty for a range).
    pattern: Vec<u16>,
    frames: TestFrames,
    /// The ranges, with defaults filled in (only with ranges).
    ranges: Option<Ranges>,
}

#[derive(Clone, Copy, Debug)]
struct Ranges {
    src_ip: Ipv4Range,
    dst_ip: Ipv4Range,
    src_port: PortRange,
    dst_port: PortRange,
}

impl Traffic {
    /// Checks `spec` and prepares to build its frames.
    pub fn new(spec: TrafficSpec) -> Result<Self, TrafficError> {
        spec.sizes.validate()?;
        let ranges = spec.has_ranges().then(|| {
            let d = TestFrames::flow_tuple(0);
            Ranges {
                src_ip: spec.src_ip.unwrap_or(Ipv4Range::single(d.src_ip.into())),
                dst_ip: spec.dst_ip.unwrap_or(Ipv4Range::single(d.dst_ip.into())),
                src_port: spec.src_port.unwrap_or(PortRange::single(d.src_port)),
                dst_port: spec.dst_port.unwrap_or(PortRange::single(d.dst_port)),
            }
        });
        let flows = match (spec.flows, ranges) {
            (Some(n), _) if n == 0 || n > MAX_FLOWS => return Err(TrafficError::Flows(n)),
            (Some(n), _) => n,
            (None, None) => 1,
            (None, Some(r)) => {
                let combos = u128::from(r.src_ip.count)
                    * u128::from(r.dst_ip.count)
                    * u128::from(r.src_port.count)
                    * u128::from(r.dst_port.count);
                combos.min(u128::from(MAX_FLOWS)) as u32
            }
        };
        let pattern = match &spec.sizes {
            SizeSpec::Fixed(s) => vec![*s],
            SizeSpec::Range(..) => Vec::new(),
            SizeSpec::Mix(v) => {
                let mut p: Vec<u16> = v.iter().flat_map(|&(s, w)| vec![s; w as usize]).collect();
                p.shuffle(&mut Xoshiro256PlusPlus::seed_from_u64(spec.seed));
                p
            }
        };
        Ok(Self {
            frames: TestFrames::new(flows, spec.stream),
            spec,
            flows,
            pattern,
            ranges,
        })
    }

    /// The spec.
    pub fn spec(&self) -> &TrafficSpec {
        &self.spec
    }

    /// Number of flows.
    pub fn flows(&self) -> u32 {
        self.flows
    }

    /// Mean frame length and flits, for converting rates.
    pub fn profile(&self) -> FrameProfile {
        self.spec.sizes.profile()
    }

    /// Frame size (with FCS) of frame `seq`.
    pub fn size(&self, seq: u64) -> usize {
        match self.spec.sizes {
            SizeSpec::Range(lo, hi) => {
                let span = u64::from(hi - lo) + 1;
                usize::from(lo) + (mix64(self.spec.seed ^ mix64(seq)) % span) as usize
            }
            _ => usize::from(self.pattern[(seq % self.pattern.len() as u64) as usize]),
        }
    }

    /// Length in memory (no FCS) of frame `seq`.
    pub fn frame_len(&self, seq: u64) -> usize {
        self.size(seq) - FCS_LEN
    }

    /// Flow of frame `seq`.
    pub fn flow(&self, seq: u64) -> u32 {
        (seq % u64::from(self.flows)) as u32
    }

    /// 5-tuple of flow `flow`.
    pub fn tuple(&self, flow: u32) -> FiveTuple {
        let Some(r) = self.ranges else {
            return TestFrames::flow_tuple(flow);
        };
        let mut k = u64::from(flow);
        let src_port = r.src_port.nth(k);
        k /= u64::from(r.src_port.count);
        let dst_port = r.dst_port.nth(k);
        k /= u64::from(r.dst_port.count);
        let src_ip = r.src_ip.nth_u32(k);
        k /= r.src_ip.count;
        let dst_ip = r.dst_ip.nth_u32(k);
        FiveTuple {
            src_ip,
            dst_ip,
            src_port,
            dst_port,
            protocol: wire::PROTO_UDP,
        }
    }

    /// Writes frame `seq` into `out` (at least [`MAX_FRAME`] bytes) and
    /// returns its length.
    pub fn build(&self, seq: u64, out: &mut [u8]) -> usize {
        let flow = self.flow(seq);
        let n = self
            .frames
            .build(FrameKind::Ipv4Udp, seq, flow, self.frame_len(seq), out);
        if self.ranges.is_some() {
            let t = self.tuple(flow);
            let mut ip = Ipv4Packet::new_unchecked(&mut out[14..34]);
            ip.set_src_addr(t.src_ip.into());
            ip.set_dst_addr(t.dst_ip.into());
            ip.fill_checksum();
            let mut udp = UdpPacket::new_unchecked(&mut out[34..42]);
            udp.set_src_port(t.src_port);
            udp.set_dst_port(t.dst_port);
        }
        n
    }

    /// Checks that `frame` is exactly frame `seq` of this traffic (its
    /// sequence number read from the payload), with the echo byte
    /// incremented by `echo_inc`; bytes in `skip` (a timestamp the NIC
    /// rewrote) are not compared. `scratch` must hold [`MAX_FRAME`] bytes.
    pub fn verify(
        &self,
        frame: &[u8],
        echo_inc: u8,
        skip: Option<std::ops::Range<usize>>,
        scratch: &mut [u8],
    ) -> Result<Verified, VerifyError> {
        let v = TestFrames::peek(frame).ok_or(VerifyError::Foreign)?;
        if v.kind != FrameKind::Ipv4Udp {
            return Err(VerifyError::Foreign);
        }
        if v.flow != self.flow(v.seq) {
            return Err(VerifyError::BadFlow(v.flow));
        }
        let n = self.build(v.seq, scratch);
        TestFrames::compare(frame, &mut scratch[..n], v.kind, echo_inc, skip)?;
        Ok(v)
    }
}
