//! Zipf-distributed ranks, exactly, in constant expected time per draw.
//!
//! Rank `k` (0-based) of `n` is drawn with probability proportional to
//! `1 / (k + 1)^s`, for any exponent `s > 0` (MICA's workloads use 0.99,
//! the telemetry tests use heavier skews). The sampler is rejection-inversion
//! (Hörmann and Derflinger, "Rejection-inversion to generate variates from
//! monotone discrete distributions", 1996): invert the integral of the
//! continuous density `x^-s` and accept or reject the rounded result, which
//! is exact and takes about one iteration. Setup is `O(1)`; nothing is
//! tabulated, so `n` may be in the billions.

use rand::Rng;

/// A Zipf distribution over ranks `0..n`; rank 0 is the most popular.
#[derive(Clone, Debug)]
pub struct Zipf {
    n: u64,
    s: f64,
    /// `H(1.5) - 1`: the upper end of the inverted range.
    h_x1: f64,
    /// `H(n + 0.5)`: the lower end.
    h_n: f64,
    /// Acceptance shortcut: ranks this close above `x` are always accepted.
    squeeze: f64,
}

/// Parameters outside the supported range.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum ZipfError {
    /// At least one rank is needed.
    #[error("a Zipf distribution needs at least one item")]
    Empty,
    /// The exponent must be positive and finite.
    #[error("Zipf exponent {0} is not a positive finite number")]
    BadExponent(f64),
}

impl Zipf {
    /// A Zipf distribution with exponent `s` over `n` ranks.
    pub fn new(n: u64, s: f64) -> Result<Self, ZipfError> {
        if n == 0 {
            return Err(ZipfError::Empty);
        }
        if !(s > 0.0 && s.is_finite()) {
            return Err(ZipfError::BadExponent(s));
        }
        let mut z = Zipf {
            n,
            s,
            h_x1: 0.0,
            h_n: 0.0,
            squeeze: 0.0,
        };
        z.h_x1 = z.big_h(1.5) - 1.0;
        z.h_n = z.big_h(n as f64 + 0.5);
        z.squeeze = 2.0 - z.big_h_inv(z.big_h(2.5) - z.h(2.0));
        Ok(z)
    }

    /// Number of ranks.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Always false: a distribution has at least one rank.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The exponent.
    pub fn exponent(&self) -> f64 {
        self.s
    }

    /// The probability of `rank` (computes the normalising sum: `O(n)`).
    pub fn probability(&self, rank: u64) -> f64 {
        let norm: f64 = (1..=self.n).map(|i| self.h(i as f64)).sum();
        self.h((rank + 1) as f64) / norm
    }

    /// Draws a rank.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        loop {
            let u = self.h_n + rng.gen::<f64>() * (self.h_x1 - self.h_n);
            let x = self.big_h_inv(u);
            let k = ((x + 0.5) as u64).clamp(1, self.n);
            let kf = k as f64;
            if kf - x <= self.squeeze || u >= self.big_h(kf + 0.5) - self.h(kf) {
                return k - 1;
            }
        }
    }

    /// The unnormalised density `x^-s`.
    #[inline]
    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }

    /// An antiderivative of `h`: `(x^(1-s) - 1) / (1 - s)`, or `ln x` when
    /// `s = 1`, computed without cancellation near `s = 1`.
    #[inline]
    fn big_h(&self, x: f64) -> f64 {
        let ln_x = x.ln();
        expm1_over_x((1.0 - self.s) * ln_x) * ln_x
    }

    /// The inverse of [`Zipf::big_h`].
    #[inline]
    fn big_h_inv(&self, y: f64) -> f64 {
        let t = (1.0 - self.s) * y;
        // Outside the domain only through rounding at the extremes.
        let t = t.max(-1.0 + f64::EPSILON);
        (ln1p_over_x(t) * y).exp()
    }
}

/// `ln(1 + x) / x`, continuous at 0.
fn ln1p_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(e^x - 1) / x`, continuous at 0.
fn expm1_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn rejects_bad_parameters() {
        assert_eq!(Zipf::new(0, 0.5).unwrap_err(), ZipfError::Empty);
        assert_eq!(Zipf::new(10, 0.0).unwrap_err(), ZipfError::BadExponent(0.0));
        assert!(Zipf::new(10, f64::NAN).is_err());
        assert!(Zipf::new(10, f64::INFINITY).is_err());
        let one = Zipf::new(1, 0.99).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        assert!((0..1000).all(|_| one.sample(&mut rng) == 0));
    }

    /// Frequencies of the head ranks match the exact law within 5 standard
    /// deviations of the binomial sampling noise, for skews below, at and
    /// above 1.
    #[test]
    fn frequencies_follow_the_exact_law() {
        for (n, s) in [
            (10_000u64, 0.99),
            (1000, 1.0),
            (50, 0.5),
            (100_000, 1.5),
            (3, 2.0),
        ] {
            let z = Zipf::new(n, s).unwrap();
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(42);
            let draws = 400_000u64;
            let mut counts = vec![0u64; n as usize];
            for _ in 0..draws {
                counts[z.sample(&mut rng) as usize] += 1;
            }
            for rank in [0u64, 1, 2, 5, 10, 40].into_iter().filter(|&r| r < n) {
                let p = z.probability(rank);
                let expected = p * draws as f64;
                let sigma = (draws as f64 * p * (1.0 - p)).sqrt();
                let got = counts[rank as usize] as f64;
                assert!(
                    (got - expected).abs() <= 5.0 * sigma + 1.0,
                    "n={n} s={s} rank {rank}: {got} vs {expected:.0}"
                );
            }
        }
    }
}
