//! What a timestamping port writes into frames, in either of two formats.
//!
//! With timestamping on, a port writes each frame's send time into it at a
//! byte offset (0..=60), and when a stamped frame comes back it writes the
//! round-trip time over the stamp. Two formats:
//!
//! - [`TsFormat::Native`] (the default): the low 32 bits of the send time in
//!   nanoseconds, little-endian; the RTT in nanoseconds, little-endian.
//! - [`TsFormat::Enso`]: the real Ensō NIC's: a 32-bit count of its 200 MHz
//!   clock (5 ns a cycle), big-endian; the RTT in cycles, big-endian. Code
//!   written for Ensō's `get_pkt_rtt` (a big-endian load, then cycles) reads
//!   frames stamped this way unchanged.
//!
//! Both wrap at 32 bits (4.3 s in ns, 21.5 s in cycles); an RTT is the
//! wrapping difference, so it is right for any round trip shorter than that.

/// Nanoseconds per cycle of the real NIC's timestamp clock (200 MHz).
pub const NS_PER_CYCLE: u64 = 5;

/// The encoding of timestamps and round-trip times in frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TsFormat {
    /// Nanoseconds, little-endian.
    #[default]
    Native,
    /// Cycles of 5 ns, big-endian, as the real Ensō NIC writes them.
    Enso,
}

impl TsFormat {
    /// The value of the configuration argument that selects it.
    pub fn to_arg(self) -> u64 {
        match self {
            TsFormat::Native => 0,
            TsFormat::Enso => 1,
        }
    }

    /// The format a configuration argument selects, if any.
    pub fn from_arg(a: u64) -> Option<TsFormat> {
        match a {
            0 => Some(TsFormat::Native),
            1 => Some(TsFormat::Enso),
            _ => None,
        }
    }

    /// The bytes a frame leaving at `now_ns` carries.
    #[inline]
    pub fn stamp(self, now_ns: u64) -> [u8; 4] {
        match self {
            TsFormat::Native => (now_ns as u32).to_le_bytes(),
            TsFormat::Enso => ((now_ns / NS_PER_CYCLE) as u32).to_be_bytes(),
        }
    }

    /// The bytes written over `stamp` when its frame comes back at
    /// `now_ns`: the round trip, in the format's unit and byte order.
    #[inline]
    pub fn round_trip(self, stamp: [u8; 4], now_ns: u64) -> [u8; 4] {
        match self {
            TsFormat::Native => (now_ns as u32)
                .wrapping_sub(u32::from_le_bytes(stamp))
                .to_le_bytes(),
            TsFormat::Enso => ((now_ns / NS_PER_CYCLE) as u32)
                .wrapping_sub(u32::from_be_bytes(stamp))
                .to_be_bytes(),
        }
    }

    /// The round trip in nanoseconds that [`TsFormat::round_trip`] wrote.
    #[inline]
    pub fn rtt_ns(self, bytes: [u8; 4]) -> u64 {
        match self {
            TsFormat::Native => u64::from(u32::from_le_bytes(bytes)),
            TsFormat::Enso => u64::from(u32::from_be_bytes(bytes)) * NS_PER_CYCLE,
        }
    }
}

/// A port's timestamping: where in the frame, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Timestamping {
    /// Byte offset of the 4-byte stamp (0..=60).
    pub offset: usize,
    /// Its encoding.
    pub format: TsFormat,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_is_little_endian_nanoseconds() {
        let f = TsFormat::Native;
        assert_eq!(f.stamp(0x1_0102_0304), [4, 3, 2, 1]);
        let back = f.round_trip(f.stamp(1_000), 1_750);
        assert_eq!(back, 750u32.to_le_bytes());
        assert_eq!(f.rtt_ns(back), 750);
    }

    #[test]
    fn enso_is_big_endian_cycles_of_five_nanoseconds() {
        let f = TsFormat::Enso;
        // 1 000 000 ns is 200 000 cycles = 0x00030d40.
        assert_eq!(f.stamp(1_000_000), [0x00, 0x03, 0x0d, 0x40]);
        let back = f.round_trip(f.stamp(1_000_000), 1_000_750);
        // 150 cycles, as Ensō's get_pkt_rtt reads it: a big-endian load.
        assert_eq!(u32::from_be_bytes(back), 150);
        assert_eq!(f.rtt_ns(back), 750);
    }

    #[test]
    fn round_trips_survive_the_counter_wrapping() {
        for f in [TsFormat::Native, TsFormat::Enso] {
            let sent = u64::from(u32::MAX) * 5 - 40; // just before both wrap
            let back = f.round_trip(f.stamp(sent), sent + 100);
            assert_eq!(f.rtt_ns(back), 100, "{f:?}");
        }
    }

    #[test]
    fn the_configuration_argument_names_each_format_and_nothing_else() {
        for f in [TsFormat::Native, TsFormat::Enso] {
            assert_eq!(TsFormat::from_arg(f.to_arg()), Some(f));
        }
        assert_eq!(TsFormat::from_arg(2), None);
    }
}
