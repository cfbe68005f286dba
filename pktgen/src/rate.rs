//! Rates: parsing rate strings, and converting between packets per second,
//! Ethernet throughput and the NIC rate limiter's `num/den` pair.
//!
//! The NIC's rate limiter releases bursts of `num` flits every `den` cycles
//! of its 200 MHz clock, so it is a rate in *flits*, not frames or bits: a
//! 64 B frame (60 B in memory) is one flit and 744/1000 is 148.8 Mpps, 100 GbE
//! line rate; a 65 B frame is two flits and the same setting gives half the
//! frames. Converting between a flit rate and anything per frame therefore
//! needs the traffic's [`FrameProfile`].
//!
//! Accepted rate strings (case-insensitive, optional space before the unit):
//!
//! | string                       | meaning                                   |
//! |------------------------------|-------------------------------------------|
//! | `10Gbps`, `10G`, `10gb/s`    | 10 Gb/s Ethernet throughput (also `M`, `k`, bare `bps`) |
//! | `5Mpps`, `100kpps`, `1000pps`| frames per second (also `Gpps`)           |
//! | `line`                       | 100 Gb/s                                  |
//! | `744/1000`                   | the limiter pair: 744 flits per 1000 cycles |

use std::fmt;
use std::str::FromStr;

use nic_emu::wire;
use serde::{Deserialize, Serialize};

/// Bytes of FCS that a frame has on the wire but not in memory.
pub const FCS_LEN: usize = 4;
/// Preamble, start delimiter and minimum inter-frame gap (8 + 12 bytes).
pub const WIRE_GAP: usize = 20;
/// Wire bytes per frame beyond its length in memory: FCS, preamble, gap.
pub const ETH_OVERHEAD: usize = FCS_LEN + WIRE_GAP;
/// What `line` means: 100 GbE.
pub const LINE_RATE_GBPS: f64 = 100.0;
/// Clock of the NIC's rate limiter and timestamps.
pub const NIC_CLOCK_HZ: f64 = 200e6;
/// Largest denominator [`Rate::rate_limit`] chooses unless told otherwise.
pub const DEFAULT_MAX_DEN: u32 = 65_535;
/// Longest burst period [`Rate::limiter_setting`] sets: 10 ms of the
/// limiter's clock.
pub const LIMITER_MAX_PERIOD: u32 = 2_000_000;

/// Average frame length and flit count of some traffic: what converting a
/// rate needs to know about the frames.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct FrameProfile {
    /// Mean frame length in memory (no FCS), bytes.
    pub mean_len: f64,
    /// Mean flits per frame (the rate limiter's unit).
    pub mean_flits: f64,
}

impl FrameProfile {
    /// Every frame `len` bytes long (no FCS).
    pub fn fixed(len: usize) -> Self {
        Self {
            mean_len: len as f64,
            mean_flits: wire::flits(len) as f64,
        }
    }

    /// Frames of the given lengths, each with a weight; `None` if the
    /// weights add up to zero.
    pub fn weighted(lens: impl IntoIterator<Item = (usize, u64)>) -> Option<Self> {
        let (mut n, mut bytes, mut flits) = (0u128, 0u128, 0u128);
        for (len, w) in lens {
            n += u128::from(w);
            bytes += len as u128 * u128::from(w);
            flits += wire::flits(len) as u128 * u128::from(w);
        }
        (n > 0).then(|| Self {
            mean_len: bytes as f64 / n as f64,
            mean_flits: flits as f64 / n as f64,
        })
    }

    /// Frames of the given lengths, equally weighted.
    pub fn from_lens(lens: impl IntoIterator<Item = usize>) -> Option<Self> {
        Self::weighted(lens.into_iter().map(|l| (l, 1)))
    }

    /// Wire bits per frame: length plus [`ETH_OVERHEAD`].
    pub fn wire_bits(&self) -> f64 {
        (self.mean_len + ETH_OVERHEAD as f64) * 8.0
    }
}

/// Why a rate string or limiter pair was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RateError {
    /// Nothing to parse.
    #[error("empty rate")]
    Empty,
    /// The number in front of the unit does not parse.
    #[error("bad number in rate '{0}'")]
    BadNumber(String),
    /// A number without a unit: bits or packets?
    #[error("rate '{0}' has no unit; write e.g. 10Gbps, 5Mpps or line")]
    MissingUnit(String),
    /// A unit this parser does not know.
    #[error("unknown unit '{unit}' in rate '{rate}'; use Gbps, Mbps, kbps, bps, Mpps, kpps, pps or line")]
    UnknownUnit {
        /// The whole string.
        rate: String,
        /// The unit part.
        unit: String,
    },
    /// Zero, negative, infinite or NaN.
    #[error("rate '{0}' must be a positive finite number")]
    NotPositive(String),
    /// `den` is zero.
    #[error("RATE_DEN must be at least 1")]
    ZeroDen,
    /// `num` is zero.
    #[error("RATE_NUM must be at least 1")]
    ZeroNum,
    /// More than one flit per cycle: faster than the NIC's datapath.
    #[error("rate {num}/{den} is above one flit per cycle, the most the NIC can send")]
    AboveOneFlitPerCycle {
        /// Flits.
        num: u32,
        /// Cycles.
        den: u32,
    },
    /// A rate in Gb/s or Mpps that would take more than one flit per cycle
    /// with the traffic's frames.
    #[error(
        "{flits_per_cycle:.3} flits per cycle with these frames; the NIC sends at most one: \
         {max_gbps:.3} Gb/s, {max_mpps:.3} Mpps"
    )]
    AboveNicMost {
        /// Flits per cycle the rate would take.
        flits_per_cycle: f64,
        /// The most the NIC sends of these frames, Gb/s of throughput.
        max_gbps: f64,
        /// The same in Mpps.
        max_mpps: f64,
    },
    /// Too slow to express with a denominator of at most `max_den`.
    #[error(
        "rate is below 1/{max_den} flits per cycle, the slowest the rate limiter can be set to"
    )]
    BelowLimiter {
        /// Largest denominator allowed.
        max_den: u32,
    },
}

/// The NIC rate limiter setting: `num` flits every `den` cycles of the
/// 200 MHz clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimit {
    /// Flits per burst.
    pub num: u32,
    /// Cycles per burst.
    pub den: u32,
}

impl RateLimit {
    /// Checks a pair as given on EnsōGen's command line.
    pub fn new(num: u32, den: u32) -> Result<Self, RateError> {
        if den == 0 {
            return Err(RateError::ZeroDen);
        }
        if num == 0 {
            return Err(RateError::ZeroNum);
        }
        if num > den {
            return Err(RateError::AboveOneFlitPerCycle { num, den });
        }
        Ok(Self { num, den })
    }

    /// Flits per second.
    pub fn flits_per_sec(&self) -> f64 {
        f64::from(self.num) / f64::from(self.den) * NIC_CLOCK_HZ
    }

    /// The same rate in the longest bursts whose period is at most
    /// `max_den` cycles: `num` and `den` multiplied by `max_den / den`.
    ///
    /// The emulated NIC's limiter banks up to one burst of credit, so a
    /// longer burst lets it make up for time its engine thread was not
    /// running (on a machine whose cores it shares) and keeps the long-run
    /// rate. 125/168 becomes 48750/65520 at `max_den` 65535 (bursts of at
    /// most 328 µs), 1488000/1999872 at [`LIMITER_MAX_PERIOD`] (10 ms).
    pub fn widened(&self, max_den: u32) -> Self {
        let k = (max_den / self.den).max(1);
        match (self.num.checked_mul(k), self.den.checked_mul(k)) {
            (Some(num), Some(den)) => Self { num, den },
            _ => *self,
        }
    }
}

/// A transmit rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    /// Ethernet throughput in bits per second (frame bytes + 24 B per frame).
    Bps(f64),
    /// Frames per second.
    Pps(f64),
    /// The NIC limiter's pair: a rate in flits.
    Flits(RateLimit),
    /// 100 GbE line rate ([`LINE_RATE_GBPS`]), or the most the NIC can
    /// send (one flit per cycle) where that is less: with frames of 65 to
    /// ~100 B, whose second flit is mostly empty, 100 Gb/s needs more than
    /// one flit per cycle. The default rate.
    Line,
}

impl Rate {
    /// 100 Gb/s, or the NIC's most where that is less ([`Rate::Line`]).
    pub fn line() -> Self {
        Rate::Line
    }

    /// A rate in Gb/s of throughput.
    pub fn gbps(gbps: f64) -> Self {
        Rate::Bps(gbps * 1e9)
    }

    /// Parses a rate string (see the module documentation).
    pub fn parse(s: &str) -> Result<Self, RateError> {
        let t = s.trim();
        if t.is_empty() {
            return Err(RateError::Empty);
        }
        let lower = t.to_ascii_lowercase();
        if lower == "line" {
            return Ok(Rate::line());
        }
        if let Some((n, d)) = lower.split_once('/') {
            // "744/1000", but not "10gb/s".
            if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) {
                let num = n
                    .trim()
                    .parse::<u32>()
                    .map_err(|_| RateError::BadNumber(t.into()))?;
                let den = d
                    .trim()
                    .parse::<u32>()
                    .map_err(|_| RateError::BadNumber(t.into()))?;
                return Ok(Rate::Flits(RateLimit::new(num, den)?));
            }
        }
        let split = lower
            .find(|c: char| c.is_ascii_alphabetic() && c != 'e' || c.is_whitespace())
            .unwrap_or(lower.len());
        let (num, unit) = lower.split_at(split);
        let unit = unit.trim();
        if num.is_empty() {
            return Err(RateError::BadNumber(t.into()));
        }
        let value: f64 = num.parse().map_err(|_| RateError::BadNumber(t.into()))?;
        if !value.is_finite() || value <= 0.0 {
            return Err(RateError::NotPositive(t.into()));
        }
        let rate = match unit {
            "" => return Err(RateError::MissingUnit(t.into())),
            "tbps" | "tb/s" | "tbit/s" | "t" => Rate::Bps(value * 1e12),
            "gbps" | "gb/s" | "gbit/s" | "g" => Rate::Bps(value * 1e9),
            "mbps" | "mb/s" | "mbit/s" | "m" => Rate::Bps(value * 1e6),
            "kbps" | "kb/s" | "kbit/s" | "k" => Rate::Bps(value * 1e3),
            "bps" | "b/s" | "bit/s" => Rate::Bps(value),
            "gpps" => Rate::Pps(value * 1e9),
            "mpps" => Rate::Pps(value * 1e6),
            "kpps" => Rate::Pps(value * 1e3),
            "pps" => Rate::Pps(value),
            _ => {
                return Err(RateError::UnknownUnit {
                    rate: t.into(),
                    unit: unit.into(),
                })
            }
        };
        Ok(rate)
    }

    /// Frames per second for traffic with profile `p`.
    pub fn pps(&self, p: &FrameProfile) -> f64 {
        match *self {
            Rate::Bps(bps) => bps / p.wire_bits(),
            Rate::Pps(pps) => pps,
            Rate::Flits(l) => l.flits_per_sec() / p.mean_flits.max(1.0),
            Rate::Line => {
                (LINE_RATE_GBPS * 1e9 / p.wire_bits()).min(NIC_CLOCK_HZ / p.mean_flits.max(1.0))
            }
        }
    }

    /// Ethernet throughput in Gb/s (24 B per frame on top of goodput).
    pub fn throughput_gbps(&self, p: &FrameProfile) -> f64 {
        match *self {
            Rate::Bps(bps) => bps / 1e9,
            _ => self.pps(p) * p.wire_bits() / 1e9,
        }
    }

    /// Goodput in Gb/s: frame bytes as in memory, no FCS or gaps.
    pub fn goodput_gbps(&self, p: &FrameProfile) -> f64 {
        self.pps(p) * p.mean_len * 8.0 / 1e9
    }

    /// The rate limiter setting closest to this rate whose denominator is at
    /// most `max_den`.
    pub fn rate_limit(&self, p: &FrameProfile, max_den: u32) -> Result<RateLimit, RateError> {
        if let Rate::Flits(l) = *self {
            return Ok(l);
        }
        let per_cycle = self.pps(p) * p.mean_flits.max(1.0) / NIC_CLOCK_HZ;
        // `Line` is at most one flit per cycle by definition.
        if per_cycle > 1.0 + 1e-9 && *self != Rate::Line {
            let most = Rate::Flits(RateLimit { num: 1, den: 1 });
            return Err(RateError::AboveNicMost {
                flits_per_cycle: per_cycle,
                max_gbps: most.throughput_gbps(p),
                max_mpps: most.pps(p) / 1e6,
            });
        }
        let (num, den) = best_rational(per_cycle.min(1.0), u64::from(max_den.max(1)));
        if num == 0 {
            return Err(RateError::BelowLimiter { max_den });
        }
        // Both fit: num <= den <= max_den.
        RateLimit::new(num as u32, den as u32)
    }
}

impl Rate {
    /// What the generator sets the NIC's limiter to for this rate: a
    /// limiter pair as given; otherwise the closest pair with a period of at
    /// most [`DEFAULT_MAX_DEN`] cycles, [widened](RateLimit::widened) to
    /// bursts of up to [`LIMITER_MAX_PERIOD`] cycles.
    ///
    /// On a machine where the NIC's thread shares a core, a limiter that
    /// banks 10 ms of credit keeps within a few percent of the rate where
    /// one that banks 328 µs loses 15% and more. Outside such gaps the
    /// emulated NIC sends smoothly; after one it catches up at its own
    /// speed.
    pub fn limiter_setting(&self, p: &FrameProfile) -> Result<RateLimit, RateError> {
        match *self {
            Rate::Flits(l) => Ok(l),
            _ => Ok(self
                .rate_limit(p, DEFAULT_MAX_DEN)?
                .widened(LIMITER_MAX_PERIOD)),
        }
    }
}

impl FromStr for Rate {
    type Err = RateError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Rate::parse(s)
    }
}

impl fmt::Display for Rate {
    /// Prints a string that [`Rate::parse`] reads back as the same rate.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Rate::Bps(bps) => write!(f, "{}Gbps", Number(bps / 1e9)),
            Rate::Pps(pps) => write!(f, "{}Mpps", Number(pps / 1e6)),
            Rate::Flits(l) => write!(f, "{}/{}", l.num, l.den),
            Rate::Line => write!(f, "line"),
        }
    }
}

/// A number as [`Rate::parse`] reads it back: plain decimals in the usual
/// range, exponent form for very small or large values (a plain `1e-300`
/// would print three hundred digits).
struct Number(f64);

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        if v != 0.0 && !(1e-6..1e12).contains(&v.abs()) {
            write!(f, "{v:e}")
        } else {
            write!(f, "{v}")
        }
    }
}

impl Serialize for Rate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Rate::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// Frames per second to throughput in Gb/s for frames of profile `p`.
pub fn pps_to_gbps(pps: f64, p: &FrameProfile) -> f64 {
    pps * p.wire_bits() / 1e9
}

/// Throughput in Gb/s to frames per second for frames of profile `p`.
pub fn gbps_to_pps(gbps: f64, p: &FrameProfile) -> f64 {
    gbps * 1e9 / p.wire_bits()
}

/// The fraction `n/d` closest to `x` (0 <= x <= 1) with `d <= max_den`,
/// from the continued fraction of `x` and its semiconvergents.
fn best_rational(x: f64, max_den: u64) -> (u64, u64) {
    let (mut p0, mut q0, mut p1, mut q1) = (0u64, 1u64, 1u64, 0u64);
    let mut v = x;
    for _ in 0..64 {
        let a = v.floor();
        if a > 1e18 {
            break;
        }
        let a = a as u64;
        let (p2, q2) = (a * p1 + p0, a * q1 + q0);
        if q2 > max_den {
            // The best fraction is p1/q1 or the largest semiconvergent.
            let k = (max_den - q0) / q1;
            let (ps, qs) = (p0 + k * p1, q0 + k * q1);
            let err = |p: u64, q: u64| (p as f64 / q as f64 - x).abs();
            return if err(ps, qs) < err(p1, q1) {
                (ps, qs)
            } else {
                (p1, q1)
            };
        }
        (p0, q0, p1, q1) = (p1, q1, p2, q2);
        let frac = v - a as f64;
        if frac < 1e-12 || (p1 as f64 / q1 as f64 - x).abs() < 1e-15 {
            break;
        }
        v = 1.0 / frac;
    }
    if q1 == 0 {
        (0, 1)
    } else {
        (p1, q1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
    }

    #[test]
    fn parses_bit_rates_in_every_spelling() {
        for (s, bps) in [
            ("10Gbps", 10e9),
            ("10G", 10e9),
            ("2.5gbps", 2.5e9),
            ("2.5 Gb/s", 2.5e9),
            ("400Mbps", 400e6),
            ("400m", 400e6),
            ("12kbps", 12e3),
            ("800bps", 800.0),
            ("1e1G", 10e9),
        ] {
            match Rate::parse(s) {
                Ok(Rate::Bps(v)) => assert!(close(v, bps), "{s}: {v}"),
                other => panic!("{s}: {other:?}"),
            }
        }
    }

    #[test]
    fn parses_packet_rates_and_limiter_pairs() {
        for (s, pps) in [
            ("5Mpps", 5e6),
            ("100kpps", 100e3),
            ("1000pps", 1000.0),
            ("0.5 MPPS", 0.5e6),
        ] {
            match Rate::parse(s) {
                Ok(Rate::Pps(v)) => assert!(close(v, pps), "{s}: {v}"),
                other => panic!("{s}: {other:?}"),
            }
        }
        assert_eq!(
            Rate::parse("744/1000"),
            Ok(Rate::Flits(RateLimit {
                num: 744,
                den: 1000
            }))
        );
    }

    #[test]
    fn bad_strings_say_what_is_wrong() {
        assert_eq!(Rate::parse(""), Err(RateError::Empty));
        assert_eq!(Rate::parse("  "), Err(RateError::Empty));
        assert!(matches!(Rate::parse("10"), Err(RateError::MissingUnit(_))));
        assert!(matches!(Rate::parse("fast"), Err(RateError::BadNumber(_))));
        assert!(matches!(
            Rate::parse("1.2.3G"),
            Err(RateError::BadNumber(_))
        ));
        assert!(matches!(
            Rate::parse("10GBq"),
            Err(RateError::UnknownUnit { .. })
        ));
        assert!(matches!(Rate::parse("0G"), Err(RateError::NotPositive(_))));
        assert!(matches!(Rate::parse("-1G"), Err(RateError::NotPositive(_))));
        assert!(matches!(
            Rate::parse("1e999G"),
            Err(RateError::NotPositive(_))
        ));
        assert!(matches!(
            Rate::parse("NaNpps"),
            Err(RateError::BadNumber(_))
        ));
        assert_eq!(Rate::parse("1/0"), Err(RateError::ZeroDen));
        assert_eq!(Rate::parse("0/10"), Err(RateError::ZeroNum));
        assert!(matches!(
            Rate::parse("11/10"),
            Err(RateError::AboveOneFlitPerCycle { num: 11, den: 10 })
        ));
        assert!(matches!(Rate::parse("1/x"), Err(RateError::BadNumber(_))));
        let msg = Rate::parse("10").unwrap_err().to_string();
        assert!(msg.contains("no unit") && !msg.contains('\n'), "{msg}");
    }

    #[test]
    fn line_is_100g_or_the_nics_most() {
        for s in ["line", "LINE", " line "] {
            assert_eq!(Rate::parse(s), Ok(Rate::Line), "{s}");
        }
        assert_eq!(Rate::Line.to_string().parse::<Rate>(), Ok(Rate::Line));
        // 60 B frames: 100 GbE, 148.8 Mpps, under one flit per cycle.
        let p = FrameProfile::fixed(60);
        assert!(close(Rate::Line.pps(&p), Rate::gbps(100.0).pps(&p)));
        // 65 B frames are two flits: 100 GbE would be 140.4 Mpps, 1.40
        // flits per cycle. `line` sends at one flit per cycle instead,
        // where 100Gbps asked for explicitly is refused.
        let p = FrameProfile::fixed(65);
        assert!(close(Rate::Line.pps(&p), 100e6));
        assert_eq!(
            Rate::Line.limiter_setting(&p).map(|l| l.num == l.den),
            Ok(true)
        );
        assert!(matches!(
            Rate::gbps(100.0).limiter_setting(&p),
            Err(RateError::AboveNicMost { .. })
        ));
        // Runts are no different: 30 B frames are one flit each.
        let p = FrameProfile::fixed(30);
        assert!(Rate::Line.limiter_setting(&p).is_ok());
    }

    #[test]
    fn line_rate_at_64_bytes_is_744_over_1000() {
        // A 64 B frame is 60 B in memory: one flit.
        let p = FrameProfile::fixed(60);
        let line = Rate::line();
        assert!((line.pps(&p) / 1e6 - 148.8095).abs() < 1e-3);
        let paper = Rate::parse("744/1000").unwrap();
        assert!(close(paper.pps(&p), 148.8e6));
        assert!((paper.throughput_gbps(&p) - 99.9936).abs() < 1e-6);
        // Goodput leaves out the 24 B per frame.
        assert!(close(paper.goodput_gbps(&p), 148.8e6 * 60.0 * 8.0 / 1e9));
        // Line rate is 125/168 flits per cycle exactly; 744/1000 is that
        // rounded to a denominator of 1000.
        let l = line.rate_limit(&p, DEFAULT_MAX_DEN).unwrap();
        assert_eq!((l.num, l.den), (125, 168));
        let f = f64::from(l.num) / f64::from(l.den);
        assert!((f * 1000.0).round() == 744.0);
    }

    #[test]
    fn limiter_pairs_count_flits_not_frames() {
        // 65 B frames need two flits: the same pair gives half the frames.
        let one = FrameProfile::fixed(64);
        let two = FrameProfile::fixed(65);
        let r = Rate::Flits(RateLimit::new(1, 2).unwrap());
        assert!(close(r.pps(&one), 100e6));
        assert!(close(r.pps(&two), 50e6));
        // And the pair for a pps rate accounts for it.
        let l = Rate::Pps(50e6).rate_limit(&two, 1000).unwrap();
        assert_eq!((l.num, l.den), (1, 2));
        // A mix: half 1-flit, half 24-flit frames average 12.5 flits.
        let mix = FrameProfile::from_lens([60, 1536]).unwrap();
        assert!(close(mix.mean_flits, 12.5));
        assert!(close(mix.mean_len, 798.0));
    }

    #[test]
    fn widened_pairs_keep_the_rate() {
        let l = RateLimit::new(125, 168).unwrap();
        let w = l.widened(DEFAULT_MAX_DEN);
        assert_eq!((w.num, w.den), (125 * 390, 168 * 390));
        assert_eq!(w.flits_per_sec(), l.flits_per_sec());
        // Already at the bound, or above it: unchanged.
        let l = RateLimit::new(40_000, 65_000).unwrap();
        assert_eq!(l.widened(DEFAULT_MAX_DEN), l);
        let l = RateLimit::new(1, 100_000).unwrap();
        assert_eq!(l.widened(DEFAULT_MAX_DEN), l);
        // What a run at line rate sets.
        let p = FrameProfile::fixed(60);
        let w = Rate::line().limiter_setting(&p).unwrap();
        assert_eq!((w.num, w.den), (1_488_000, 1_999_872));
        assert!((w.flits_per_sec() / Rate::line().pps(&p) - 1.0).abs() < 1e-12);
        // A pair given is a pair kept.
        let given = Rate::parse("744/1000").unwrap();
        let l = given.limiter_setting(&p).unwrap();
        assert_eq!((l.num, l.den), (744, 1000));
    }

    #[test]
    fn pps_and_gbps_convert_both_ways() {
        for len in [60usize, 124, 508, 1514] {
            let p = FrameProfile::fixed(len);
            for gbps in [0.1, 1.0, 40.0, 100.0] {
                let pps = gbps_to_pps(gbps, &p);
                assert!(close(pps_to_gbps(pps, &p), gbps));
                assert!(close(Rate::gbps(gbps).pps(&p), pps));
                assert!(close(Rate::Pps(pps).throughput_gbps(&p), gbps));
            }
        }
        // 1518 B frames (1514 in memory) at 100 Gb/s: 8.127 Mpps.
        let p = FrameProfile::fixed(1514);
        assert!((Rate::line().pps(&p) / 1e6 - 8.1274).abs() < 1e-3);
    }

    #[test]
    fn limiter_pair_is_the_closest_fraction() {
        let p = FrameProfile::fixed(60);
        for gbps in [0.5, 1.0, 10.0, 33.3, 99.9] {
            let want = Rate::gbps(gbps).pps(&p) / NIC_CLOCK_HZ;
            let l = Rate::gbps(gbps).rate_limit(&p, DEFAULT_MAX_DEN).unwrap();
            let got = f64::from(l.num) / f64::from(l.den);
            assert!(l.den <= DEFAULT_MAX_DEN);
            // Brute force: no fraction with a smaller denominator bound is closer.
            let mut best = f64::MAX;
            for den in 1..=2000u32 {
                let num = (want * f64::from(den)).round();
                best = best.min((num / f64::from(den) - want).abs());
            }
            assert!((got - want).abs() <= best + 1e-15, "{gbps}: {l:?}");
        }
        assert!(matches!(
            Rate::gbps(200.0).rate_limit(&p, 1000),
            Err(RateError::AboveNicMost { .. })
        ));
        // Said in the units asked in, with the most the NIC sends: at 64 B
        // (one flit) that is 200 Mpps, 134.4 Gb/s.
        assert_eq!(
            Rate::gbps(200.0)
                .limiter_setting(&FrameProfile::fixed(60))
                .unwrap_err()
                .to_string(),
            "1.488 flits per cycle with these frames; the NIC sends at most one: \
             134.400 Gb/s, 200.000 Mpps"
        );
        assert_eq!(
            Rate::Pps(10.0).rate_limit(&p, 1000),
            Err(RateError::BelowLimiter { max_den: 1000 })
        );
    }

    #[test]
    fn display_parses_back() {
        for s in ["10Gbps", "2.5Mpps", "744/1000", "line", "123kpps", "7.25M"] {
            let r = Rate::parse(s).unwrap();
            assert_eq!(Rate::parse(&r.to_string()), Ok(r), "{s}");
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(serde_json::from_str::<Rate>(&json).unwrap(), r);
        }
    }

    /// Extreme values print in exponent form, short, and still parse back.
    #[test]
    fn extreme_rates_print_short() {
        for s in ["1e-300Gbps", "3e-9Mpps", "5e20Gbps"] {
            let r = Rate::parse(s).unwrap();
            let shown = r.to_string();
            assert!(shown.len() < 16, "{s} printed as {shown}");
            assert_eq!(Rate::parse(&shown), Ok(r), "{s}");
        }
    }
}
