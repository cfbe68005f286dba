//! A 64-bit mixer: scrambles integers (sequence numbers, flow indices, key
//! ids) into well-spread values, the same on every run and platform.

/// A bijective 64-bit finaliser (SplitMix64's): every input bit affects
/// every output bit.
#[inline]
pub fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}
