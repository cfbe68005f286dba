//! Text forms of port wiring, for command lines:
//!
//! - `null`, `loopback`, `cable:<port>[:delay=<ns>]`
//! - `pcap:rx=FILE[,tx=FILE][,loop=N|inf][,rate=R]`, `tap:NAME`,
//!   `afpacket:IFACE`, `memif:socket=PATH[,role=..,id=..,rings=..,
//!   ring-size=..,buffer-size=..]` (see [`crate::backend`])
//! - `generator[:key=value,...]` with keys `size` (`64`, `64-1518`,
//!   `64/128/1518`), `kinds` (`ipv4/ipv6/raw`), `flows`, `pps`, `count`,
//!   `inflight`, `burst`, `verify` (`full`/`seq`), `echo` (increment).

use crate::backend::BackendError;
use crate::config::ConfigError;
use crate::config::{
    check_burst, check_delay_ns, check_rate_pps, GeneratorConfig, SizeSpec, VerifyLevel,
    WireConfig, MAX_DELAY_NS,
};
use crate::testframe::FrameKind;

/// Why a text form was refused; each message is one line naming the
/// option and the value.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SpecError {
    /// Text that does not parse (an unknown word, a bad number, a
    /// repeated or empty option).
    #[error("{0}")]
    Invalid(String),
    /// Settings that parse but that the device refuses.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Wiring options of a backend (pcap, memif) that it refuses.
    #[error(transparent)]
    Backend(#[from] BackendError),
}

impl From<SpecError> for String {
    fn from(e: SpecError) -> Self {
        e.to_string()
    }
}

fn num<T: std::str::FromStr>(k: &str, v: &str) -> Result<T, SpecError> {
    v.parse().map_err(|_| {
        SpecError::Invalid(format!("generator option {k}: '{v}' is not a valid number"))
    })
}

/// Parses a frame-size spec: `64`, `64-1518` or `64/128/1518`.
pub fn parse_sizes(v: &str) -> Result<SizeSpec, SpecError> {
    let check = |n: usize| {
        if (60..=crate::wire::MAX_FRAME).contains(&n) {
            Ok(n)
        } else {
            Err(SpecError::Invalid(format!(
                "frame size {n} outside 60..={}",
                crate::wire::MAX_FRAME
            )))
        }
    };
    if let Some((a, b)) = v.split_once('-') {
        let (a, b) = (check(num("size", a)?)?, check(num("size", b)?)?);
        if a > b {
            return Err(SpecError::Invalid(format!(
                "size range {v}: low end above high end"
            )));
        }
        Ok(SizeSpec::Range(a, b))
    } else if v.contains('/') {
        let sizes = v
            .split('/')
            .map(|s| num("size", s).and_then(check))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SizeSpec::Mix(sizes))
    } else {
        Ok(SizeSpec::Fixed(check(num("size", v)?)?))
    }
}

/// Checks a Linux interface name given to `kind`: 1 to 15 bytes, no `/`,
/// white space or `:`, not `.` or `..`.
fn check_ifname(kind: &str, name: &str) -> Result<String, SpecError> {
    let ok = !name.is_empty()
        && name.len() <= 15
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'/' && b != b':');
    if ok {
        Ok(name.to_string())
    } else {
        Err(SpecError::Invalid(format!(
            "{kind}: bad interface name '{name}' (1 to 15 printable bytes, no '/' or ':')"
        )))
    }
}

/// Parses one port's wiring.
pub fn parse_wire(s: &str) -> Result<WireConfig, SpecError> {
    let (kind, rest) = s.split_once(':').unwrap_or((s, ""));
    match kind {
        "null" if rest.is_empty() => Ok(WireConfig::Null),
        "loopback" if rest.is_empty() => Ok(WireConfig::Loopback),
        "cable" => {
            let (peer, opt) = rest.split_once(':').unwrap_or((rest, ""));
            let peer = peer
                .parse()
                .map_err(|_| SpecError::Invalid(format!("cable needs a port number, got '{peer}'")))?;
            let delay_ns = match opt.split_once('=') {
                None if opt.is_empty() => 0,
                Some(("delay", v)) => {
                    let ns = v.parse().map_err(|_| {
                        SpecError::Invalid(format!(
                            "cable delay must be a whole number of ns in 0..={MAX_DELAY_NS} \
                             (at most 1 s), not '{v}'"
                        ))
                    })?;
                    check_delay_ns("cable delay", ns)?
                }
                _ => return Err(SpecError::Invalid(format!("unknown cable option '{opt}' (delay=NS)"))),
            };
            Ok(WireConfig::Cable { peer, delay_ns })
        }
        "generator" | "gen" => {
            let mut g = GeneratorConfig::default();
            let mut seen: Vec<&str> = Vec::new();
            // `generator` and `generator:` alone take every default.
            for kv in rest.split(',').filter(|_| !rest.is_empty()) {
                if kv.is_empty() {
                    return Err(SpecError::Invalid(format!(
                        "generator options '{rest}': an empty option (two commas, or one at an end)"
                    )));
                }
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| SpecError::Invalid(format!("generator option '{kv}' is not key=value")))?;
                // A later value would silently replace the earlier one.
                if seen.contains(&k) {
                    return Err(SpecError::Invalid(format!("generator option {k} is given twice; give it once")));
                }
                seen.push(k);
                match k {
                    "size" => g.sizes = parse_sizes(v)?,
                    "kinds" => {
                        g.kinds = v
                            .split('/')
                            .map(|x| match x {
                                "ipv4" => Ok(FrameKind::Ipv4Udp),
                                "ipv6" => Ok(FrameKind::Ipv6Udp),
                                "raw" => Ok(FrameKind::Raw),
                                o => Err(SpecError::Invalid(format!("unknown frame kind '{o}' (ipv4, ipv6, raw)"))),
                            })
                            .collect::<Result<_, _>>()?
                    }
                    "flows" => g.flows = num(k, v)?,
                    "pps" => g.rate_pps = Some(check_rate_pps(num(k, v)?)?),
                    "count" => g.count = Some(num(k, v)?),
                    "inflight" => g.max_in_flight = Some(num(k, v)?),
                    "burst" => g.burst = check_burst(num(k, v)?)?,
                    "echo" => g.echo_increment = num(k, v)?,
                    "verify" => {
                        g.verify = match v {
                            "full" => VerifyLevel::Full,
                            "seq" | "sequence" => VerifyLevel::Sequence,
                            o => return Err(SpecError::Invalid(format!("unknown verify level '{o}' (full, seq)"))),
                        }
                    }
                    o => return Err(SpecError::Invalid(format!("unknown generator option '{o}'"))),
                }
            }
            // Zero flows, count or in-flight window are refused here, not
            // turned into something else.
            g.validate()?;
            Ok(WireConfig::Generator(g))
        }
        "pcap" => Ok(WireConfig::Pcap(crate::backend::pcap::PcapWire::parse(rest)?)),
        "tap" => {
            let name = check_ifname("tap", rest)?;
            Ok(WireConfig::Tap(crate::backend::tap::TapWire { name }))
        }
        "afpacket" => {
            let iface = check_ifname("afpacket", rest)?;
            Ok(WireConfig::AfPacket(crate::backend::afpacket::AfPacketWire { iface }))
        }
        "memif" => Ok(WireConfig::Memif(crate::backend::memif::MemifWire::parse(rest)?)),
        _ => Err(SpecError::Invalid(format!(
            "unknown port wiring '{s}' (null, loopback, cable:N, generator[:opts], pcap:rx=FILE[,tx=FILE], tap:NAME, afpacket:IFACE, memif:socket=PATH)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_wires_and_rejects_nonsense() {
        assert_eq!(parse_wire("loopback"), Ok(WireConfig::Loopback));
        assert_eq!(
            parse_wire("cable:1"),
            Ok(WireConfig::Cable {
                peer: 1,
                delay_ns: 0
            })
        );
        assert_eq!(
            parse_wire("cable:0:delay=500"),
            Ok(WireConfig::Cable {
                peer: 0,
                delay_ns: 500
            })
        );
        let WireConfig::Generator(g) =
            parse_wire("generator:size=64-1518,flows=8,pps=1e6,kinds=ipv4/raw").unwrap()
        else {
            panic!()
        };
        assert_eq!(g.sizes, SizeSpec::Range(64, 1518));
        assert_eq!(g.flows, 8);
        assert_eq!(g.rate_pps, Some(1e6));
        assert_eq!(g.kinds, vec![FrameKind::Ipv4Udp, FrameKind::Raw]);
        for bad in [
            "wire",
            "cable:x",
            "generator:size=10",
            "generator:size",
            "generator:foo=1",
            "generator:size=200-100",
            "null:3",
            "generator:pps=inf",
            "generator:pps=NaN",
            "generator:pps=-1000",
            "generator:pps=0",
            "generator:pps=1e400",
        ] {
            assert!(parse_wire(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn zero_and_unbounded_generator_options_are_refused() {
        for (bad, says) in [
            ("generator:flows=0", "flows 0"),
            ("generator:burst=0", "burst 0"),
            ("generator:burst=4097", "burst 4097"),
            ("generator:burst=100000000000", "burst 100000000000"),
            ("generator:burst=18446744073709551615", "1..=4096"),
            ("generator:count=0", "count 0"),
            ("generator:inflight=0", "in-flight window 0"),
        ] {
            let e = parse_wire(bad).expect_err(bad).to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let WireConfig::Generator(g) =
            parse_wire("generator:flows=1,burst=4096,count=1,inflight=1").unwrap()
        else {
            panic!()
        };
        assert_eq!((g.flows, g.burst), (1, 4096));
        assert_eq!((g.count, g.max_in_flight), (Some(1), Some(1)));
    }

    #[test]
    fn generator_options_are_given_once_and_none_is_empty() {
        for (bad, says) in [
            (
                "generator:size=64,size=128",
                "generator option size is given twice; give it once",
            ),
            (
                "generator:pps=1000,flows=2,pps=5",
                "generator option pps is given twice; give it once",
            ),
            (
                "generator:size=64,,flows=2",
                "generator options 'size=64,,flows=2': an empty option (two commas, or one at an end)",
            ),
            (
                "generator:size=64,",
                "generator options 'size=64,': an empty option (two commas, or one at an end)",
            ),
            (
                "generator:,",
                "generator options ',': an empty option (two commas, or one at an end)",
            ),
        ] {
            assert_eq!(parse_wire(bad).unwrap_err().to_string(), says, "{bad}");
        }
        for ok in ["generator", "gen:", "generator:size=64,flows=2"] {
            assert!(parse_wire(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn cable_delays_are_cable_options_and_bounded() {
        for v in ["-1", "1e9", "x", "18446744073709551616", ""] {
            assert_eq!(
                parse_wire(&format!("cable:1:delay={v}"))
                    .unwrap_err()
                    .to_string(),
                format!(
                    "cable delay must be a whole number of ns in 0..=1000000000 (at most 1 s), \
                     not '{v}'"
                )
            );
        }
        assert_eq!(
            parse_wire("cable:1:delay=1000000001")
                .unwrap_err()
                .to_string(),
            "cable delay must be in 0..=1000000000 ns (at most 1 s), not 1000000001"
        );
        assert_eq!(
            parse_wire("cable:1:delay=1000000000"),
            Ok(WireConfig::Cable {
                peer: 1,
                delay_ns: 1_000_000_000
            })
        );
    }
}
