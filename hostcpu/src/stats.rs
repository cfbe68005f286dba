//! Order statistics over small samples (trials, rounds, probe batches).
//!
//! Medians rather than means throughout: a trial that lands on a bad
//! placement or is preempted is an outlier, and a median ignores it.

/// Median of `values` (mean of the two middle ones for an even count);
/// `None` when empty. NaNs are ignored.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = sorted(values);
    let n = v.len();
    if n == 0 {
        return None;
    }
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        let hi = v.swap_remove(n / 2);
        (v[n / 2 - 1] + hi) / 2.0
    })
}

/// The `q`-quantile (0.0..=1.0) with linear interpolation between closest
/// ranks; `None` when empty. NaNs are ignored.
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    let v = sorted(values);
    if v.is_empty() {
        return None;
    }
    let pos = q.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    Some(v[lo] + (v[hi] - v[lo]) * frac)
}

/// Smallest and largest value; `None` when empty. NaNs are ignored.
pub fn min_max(values: &[f64]) -> Option<(f64, f64)> {
    let v = sorted(values);
    Some((*v.first()?, *v.last()?))
}

fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    v.sort_by(f64::total_cmp);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_quantiles() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[f64::NAN, 1.0, 2.0]), Some(1.5));
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.0), Some(1.0));
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.25), Some(2.0));
        assert_eq!(quantile(&[1.0, 2.0], 0.5), Some(1.5));
        assert_eq!(min_max(&[2.0, -1.0, 7.0]), Some((-1.0, 7.0)));
    }
}
