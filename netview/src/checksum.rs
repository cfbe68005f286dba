//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).

/// Adds `data` as big-endian 16-bit words to a running one's-complement sum
/// (odd trailing byte padded with zero); the result is at most 0xFFFF.
/// Fold it into a checksum with [`fold`].
pub fn sum(acc: u32, data: &[u8]) -> u32 {
    // Summing 32-bit words is the same modulo 0xFFFF (2^16 = 1 there), and
    // a 64-bit accumulator cannot overflow for any buffer that fits in
    // memory, so the carries are folded once at the end.
    let mut total = u64::from(acc);
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        total += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    let rest = words.remainder();
    let mut tail = [0u8; 4];
    tail[..rest.len()].copy_from_slice(rest);
    total += u64::from(u32::from_be_bytes(tail));
    while total > 0xFFFF {
        total = (total & 0xFFFF) + (total >> 16);
    }
    total as u32
}

/// Folds a running sum to 16 bits and complements it: the checksum field.
#[inline]
pub fn fold(mut acc: u32) -> u16 {
    while acc > 0xFFFF {
        acc = (acc & 0xFFFF) + (acc >> 16);
    }
    !(acc as u16)
}

/// The one's-complement change of replacing 32-bit field `old` by `new`
/// (RFC 1624: `~m + m'`), to be applied to any checksum covering the field.
#[inline]
pub fn delta32(old: u32, new: u32) -> u32 {
    u32::from(!(old >> 16) as u16) + u32::from(!old as u16) + (new >> 16) + (new & 0xFFFF)
}

/// Applies a [`delta32`] to checksum `check` (RFC 1624, eqn. 3:
/// HC' = ~(~HC + ~m + m')).
#[inline]
pub fn apply(check: u16, delta: u32) -> u16 {
    fold(u32::from(!check) + delta)
}

/// Updates checksum `check` after a 32-bit field changed from `old` to `new`.
#[inline]
pub fn adjust32(check: u16, old: u32, new: u32) -> u16 {
    apply(check, delta32(old, new))
}

/// The checksum of an IPv4 header (`header`: its bytes, options
/// included), computed as if its checksum field (bytes 10 and 11) were
/// zero, so a header can be checked or filled without clearing it first.
pub fn ipv4_header_checksum(header: &[u8]) -> u16 {
    let acc = sum(0, &header[..header.len().min(10)]);
    let acc = match header.get(12..) {
        Some(rest) => sum(acc, rest),
        None => acc,
    };
    fold(acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // The worked example of RFC 1071 section 3: words 0001 f203 f4f5 f6f7.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(0, &data)), !0xddf2);
    }

    #[test]
    fn word_sum_equals_a_plain_16_bit_sum() {
        let data: Vec<u8> = (0..1501u32).map(|i| (i * 7919 % 251) as u8).collect();
        for len in 0..data.len() {
            let d = &data[..len];
            let mut plain = 0u64;
            for (i, &b) in d.iter().enumerate() {
                plain += if i % 2 == 0 {
                    u64::from(b) << 8
                } else {
                    u64::from(b)
                };
            }
            while plain > 0xFFFF {
                plain = (plain & 0xFFFF) + (plain >> 16);
            }
            assert_eq!(fold(sum(0, d)), fold(plain as u32), "len {len}");
        }
    }

    #[test]
    fn ipv4_header_checksum_ignores_the_checksum_field() {
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(ipv4_header_checksum(&h), 0xb861);
        assert_eq!(ipv4_header_checksum(&h), fold(sum(0, &h)));
        h[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert_eq!(ipv4_header_checksum(&h), 0xb861);
        assert_eq!(fold(sum(0, &h)), 0);
        // Shorter than a header: the words there are, as before.
        assert_eq!(ipv4_header_checksum(&h[..11]), fold(sum(0, &h[..10])));
    }

    #[test]
    fn incremental_equals_recomputed() {
        let mut data = [
            0x45u8, 0, 0, 60, 1, 2, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        let check = fold(sum(0, &data));
        data[16..20].copy_from_slice(&[192, 168, 7, 9]);
        let recomputed = fold(sum(0, &data));
        let adjusted = adjust32(check, 0x0A00_0002, 0xC0A8_0709);
        assert_eq!(adjusted, recomputed);
    }
}
