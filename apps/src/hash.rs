//! Fast, seeded, non-cryptographic hashing shared by the applications.
//!
//! Every application needs to turn a few bytes into well-mixed 64-bit values:
//! Maglev hashes backend names (twice, with different seeds) and 5-tuples, the
//! KV store hashes keys, and the sketches hash flow keys once per row. None of
//! them face an adversary who can see the seed, so a multiply-rotate mixer
//! with a strong finaliser is enough, and it costs a few cycles per 8 bytes.
//!
//! The values are stable across runs, platforms and builds (no per-process
//! random state), so tables and traces are reproducible from a seed.

/// Odd 64-bit constants with well-spread bits (from the fractional part of
/// the golden ratio and two large primes).
const K0: u64 = 0x9E37_79B9_7F4A_7C15;
const K1: u64 = 0xC2B2_AE3D_27D4_EB4F;
const K2: u64 = 0x1656_67B1_9E37_79F9;

/// A bijective 64-bit finaliser (SplitMix64's), from `netview`: every input
/// bit affects every output bit.
///
/// Useful on its own to scramble integers (flow indices, key ids) and as the
/// last step of [`hash_bytes`].
pub use netview::mix64;

/// Hashes `data` with `seed`. Different seeds give independent-looking hash
/// functions over the same input.
#[inline]
pub fn hash_bytes(data: &[u8], seed: u64) -> u64 {
    if let Ok(word) = <[u8; 8]>::try_from(data) {
        // The KV workload's keys: one word, no loop or tail.
        return hash_u64(u64::from_le_bytes(word), seed);
    }
    hash_chunks(data, seed)
}

/// [`hash_bytes`] word by word, for any length.
#[inline]
fn hash_chunks(data: &[u8], seed: u64) -> u64 {
    let mut h = seed ^ (data.len() as u64).wrapping_mul(K0);
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        h = step(h, u64::from_le_bytes(word));
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let mut word = [0u8; 8];
        word[..tail.len()].copy_from_slice(tail);
        h = step(h, u64::from_le_bytes(word));
    }
    mix64(h)
}

/// Hashes one 64-bit word with `seed`; the same as hashing its eight
/// little-endian bytes with [`hash_bytes`], but without touching memory.
#[inline]
pub fn hash_u64(word: u64, seed: u64) -> u64 {
    mix64(step(seed ^ 8u64.wrapping_mul(K0), word))
}

#[inline]
fn step(h: u64, word: u64) -> u64 {
    let w = word.wrapping_mul(K1).rotate_left(31).wrapping_mul(K2);
    (h ^ w).rotate_left(27).wrapping_mul(K0).wrapping_add(K1)
}

/// Maps a 64-bit hash uniformly onto `0..n` without a division
/// (multiply-high range reduction).
#[inline]
pub fn reduce(hash: u64, n: usize) -> usize {
    ((u128::from(hash) * n as u128) >> 64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_hash_matches_byte_hash() {
        for x in [0u64, 1, 42, u64::MAX, 0x0102_0304_0506_0708] {
            for seed in [0u64, 7, u64::MAX] {
                assert_eq!(hash_u64(x, seed), hash_bytes(&x.to_le_bytes(), seed));
            }
        }
    }

    #[test]
    fn one_word_shortcut_matches_the_loop() {
        for x in [0u64, 1, 42, u64::MAX, 0x0102_0304_0506_0708] {
            for seed in [0u64, 7, u64::MAX] {
                let bytes = x.to_le_bytes();
                assert_eq!(hash_bytes(&bytes, seed), hash_chunks(&bytes, seed));
                assert_eq!(hash_u64(x, seed), hash_chunks(&bytes, seed));
            }
        }
    }

    #[test]
    fn seeds_and_lengths_change_the_hash() {
        assert_ne!(hash_bytes(b"backend-1", 1), hash_bytes(b"backend-1", 2));
        assert_ne!(hash_bytes(b"", 0), hash_bytes(&[0], 0));
        assert_ne!(hash_bytes(&[0; 8], 0), hash_bytes(&[0; 9], 0));
    }

    #[test]
    fn low_bits_are_balanced() {
        // Consecutive integers must spread evenly over a power-of-two table.
        let mut bins = [0u32; 16];
        for i in 0..160_000u64 {
            bins[(hash_u64(i, 3) & 15) as usize] += 1;
        }
        for b in bins {
            assert!((9_000..11_000).contains(&b), "{bins:?}");
        }
    }

    #[test]
    fn reduce_stays_in_range() {
        for h in [0, 1, u64::MAX / 2, u64::MAX] {
            assert!(reduce(h, 65_537) < 65_537);
        }
        assert_eq!(reduce(u64::MAX, 10), 9);
    }
}
