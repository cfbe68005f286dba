//! Replay rates of a pcap port: `max`, `original` (the file's own gaps),
//! `original*K` (K times faster), or a rate as pktgen spells them:
//! `5Mpps`, `100kpps`, `1000pps`, `10Gbps`, `2.5Gb/s`, `100Mbps`, `line`
//! (100 Gb/s). Bit rates count what a frame takes on the wire: its bytes,
//! the 4 B FCS and 20 B of preamble and gap.

use serde::{Deserialize, Serialize};

use super::BackendError;

/// Bytes on the wire per frame beyond its bytes in memory.
pub const WIRE_OVERHEAD: u64 = 24;

/// How fast a pcap port replays its frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplayRate {
    /// As fast as the NIC takes them.
    #[default]
    Max,
    /// The file's own gaps, divided by this speed-up.
    Original(f64),
    /// Frames per second.
    Pps(f64),
    /// Bits per second on the wire.
    Bps(f64),
}

impl ReplayRate {
    /// Parses a rate (see the module's documentation).
    pub fn parse(s: &str) -> Result<Self, BackendError> {
        let t = s.trim();
        let bad = |why: &str| BackendError::Options(format!("pcap rate '{s}': {why}"));
        match t {
            "max" => return Ok(Self::Max),
            "original" => return Ok(Self::Original(1.0)),
            "line" => return Ok(Self::Bps(100e9)),
            _ => {}
        }
        if let Some(k) = t.strip_prefix("original*") {
            let k: f64 = k.parse().map_err(|_| bad("the speed-up is not a number"))?;
            if !(k.is_finite() && k > 0.0 && k <= 1e9) {
                return Err(bad("the speed-up must be above 0 and at most 1e9"));
            }
            return Ok(Self::Original(k));
        }
        let split = t
            .find(|c: char| c.is_ascii_alphabetic())
            .ok_or_else(|| bad("no unit; write max, original, original*10, 5Mpps or 10Gbps"))?;
        let (num, unit) = t.split_at(split);
        let v: f64 = num
            .trim()
            .parse()
            .map_err(|_| bad("not a number before the unit"))?;
        let r = match unit.to_ascii_lowercase().as_str() {
            "gpps" => Self::Pps(v * 1e9),
            "mpps" => Self::Pps(v * 1e6),
            "kpps" => Self::Pps(v * 1e3),
            "pps" => Self::Pps(v),
            "gbps" | "gb/s" | "g" => Self::Bps(v * 1e9),
            "mbps" | "mb/s" | "m" => Self::Bps(v * 1e6),
            "kbps" | "kb/s" | "k" => Self::Bps(v * 1e3),
            "bps" | "b/s" => Self::Bps(v),
            _ => {
                return Err(bad(
                    "unknown unit; use Mpps, kpps, pps, Gbps, Mbps, kbps or bps",
                ))
            }
        };
        match r {
            Self::Pps(x) | Self::Bps(x) if !(x.is_finite() && x > 0.0 && x <= 1e15) => {
                Err(bad("must be above 0 and finite"))
            }
            r => Ok(r),
        }
    }
}

impl std::fmt::Display for ReplayRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Max => f.write_str("max"),
            Self::Original(k) if *k == 1.0 => f.write_str("original"),
            Self::Original(k) => write!(f, "original*{k}"),
            Self::Pps(p) => write!(f, "{}pps", p),
            Self::Bps(b) => write!(f, "{}bps", b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_parses_and_nonsense_is_one_line() {
        assert_eq!(ReplayRate::parse("max"), Ok(ReplayRate::Max));
        assert_eq!(ReplayRate::parse("original"), Ok(ReplayRate::Original(1.0)));
        assert_eq!(
            ReplayRate::parse("original*10"),
            Ok(ReplayRate::Original(10.0))
        );
        assert_eq!(ReplayRate::parse("5Mpps"), Ok(ReplayRate::Pps(5e6)));
        assert_eq!(ReplayRate::parse("100kpps"), Ok(ReplayRate::Pps(1e5)));
        assert_eq!(ReplayRate::parse("10Gbps"), Ok(ReplayRate::Bps(1e10)));
        assert_eq!(ReplayRate::parse("2.5 Gb/s"), Ok(ReplayRate::Bps(2.5e9)));
        assert_eq!(ReplayRate::parse("line"), Ok(ReplayRate::Bps(100e9)));
        for bad in [
            "",
            "5",
            "fast",
            "0Mpps",
            "-1Gbps",
            "original*0",
            "original*x",
            "NaNpps",
        ] {
            let e = ReplayRate::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with("pcap rate"), "{bad}: {e}");
            assert_eq!(e.lines().count(), 1);
        }
    }
}
