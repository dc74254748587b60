//! Percentiles of `u64` samples (latencies in µs or ns) by the nearest-rank method.
//!
//! Method: sort the `n` values ascending; the p-th percentile is the value at 1-based rank
//! `ceil(p / 100 × n)`, and at least rank 1. The result is always one of the samples (no
//! interpolation), so a percentile of integer nanoseconds stays an integer number of nanoseconds.
//! The rank is computed in integers, `(p × n + 99) / 100`, so there is no floating-point rounding.
//!
//! `mean` is the integer mean `sum / n` (rounded down), summed in `u128` so that it cannot
//! overflow. There are no percentiles of zero samples: [`Percentiles::of`] returns `None`.
//!
//! ```
//! use candle_trace_schema::analysis::percentiles::Percentiles;
//!
//! let p = Percentiles::of(&[4, 1, 3, 2]).unwrap();
//! // ranks: p50 → ceil(2.0) = 2, p90 → ceil(3.6) = 4, p99 → ceil(3.96) = 4
//! assert_eq!((p.min, p.p50, p.p90, p.p99, p.max, p.mean), (1, 2, 4, 4, 4, 2));
//! ```

use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// Summary statistics of a set of `u64` samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Number of samples (always ≥ 1).
    pub count: u64,
    /// Smallest sample.
    pub min: u64,
    /// Median by nearest rank.
    pub p50: u64,
    /// 90th percentile by nearest rank.
    pub p90: u64,
    /// 99th percentile by nearest rank.
    pub p99: u64,
    /// Largest sample.
    pub max: u64,
    /// Integer mean (sum / count, rounded down).
    pub mean: u64,
}

impl Percentiles {
    /// Statistics of `values` in any order; `None` when `values` is empty.
    pub fn of(values: &[u64]) -> Option<Percentiles> {
        let mut sorted = Vec::from(values);
        sorted.sort_unstable();
        Percentiles::of_sorted(&sorted)
    }

    /// Statistics of values already sorted ascending; `None` when `sorted` is empty.
    pub fn of_sorted(sorted: &[u64]) -> Option<Percentiles> {
        let (&min, &max) = (sorted.first()?, sorted.last()?);
        let sum: u128 = sorted.iter().map(|&v| u128::from(v)).sum();
        // The mean of u64 values is at most u64::MAX, so the conversion cannot fail.
        let mean = u64::try_from(sum / sorted.len() as u128).unwrap_or(u64::MAX);
        Some(Percentiles {
            count: sorted.len() as u64,
            min,
            p50: nearest_rank(sorted, 50)?,
            p90: nearest_rank(sorted, 90)?,
            p99: nearest_rank(sorted, 99)?,
            max,
            mean,
        })
    }
}

/// The `percent`-th percentile (0..=100, larger values are clamped to 100) of values sorted
/// ascending, by nearest rank: the value at 1-based rank `max(1, ceil(percent / 100 × n))`.
/// `None` when `sorted` is empty.
pub fn nearest_rank(sorted: &[u64], percent: u32) -> Option<u64> {
    let n = sorted.len() as u128;
    let percent = u128::from(percent.min(100));
    let rank = ((percent * n).div_ceil(100)).max(1);
    // rank ≤ n because percent ≤ 100, so the index is in bounds whenever n ≥ 1.
    sorted.get(usize::try_from(rank - 1).ok()?).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn one_to_ten() {
        let values: Vec<u64> = (1..=10).collect();
        let p = Percentiles::of(&values).unwrap();
        // n = 10: p50 rank ceil(5.0) = 5 → 5; p90 rank ceil(9.0) = 9 → 9; p99 rank ceil(9.9) = 10.
        // mean = 55 / 10 = 5 (rounded down from 5.5).
        assert_eq!(
            p,
            Percentiles {
                count: 10,
                min: 1,
                p50: 5,
                p90: 9,
                p99: 10,
                max: 10,
                mean: 5
            }
        );
    }

    #[test]
    fn a_single_value_is_every_percentile() {
        let p = Percentiles::of(&[42]).unwrap();
        assert_eq!(
            (p.count, p.min, p.p50, p.p90, p.p99, p.max, p.mean),
            (1, 42, 42, 42, 42, 42, 42)
        );
    }

    #[test]
    fn unsorted_input_is_sorted_first() {
        // sorted: [10, 20, 30, 40, 50, 60, 70]; n = 7
        // p50 rank ceil(3.5) = 4 → 40; p90 rank ceil(6.3) = 7 → 70; p99 rank ceil(6.93) = 7 → 70
        // mean = 280 / 7 = 40
        let p = Percentiles::of(&[70, 10, 50, 30, 20, 60, 40]).unwrap();
        assert_eq!((p.min, p.p50, p.p90, p.p99, p.max), (10, 40, 70, 70, 70));
        assert_eq!(p.mean, 40);
        assert_eq!(p.count, 7);
    }

    #[test]
    fn empty_has_no_percentiles() {
        assert_eq!(Percentiles::of(&[]), None);
        assert_eq!(nearest_rank(&[], 50), None);
    }

    #[test]
    fn rank_edges() {
        let sorted = vec![
            1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
        ];
        // p0 → rank max(1, 0) = 1; p5 → ceil(1.0) = 1; p6 → ceil(1.2) = 2; p100 → 20.
        assert_eq!(nearest_rank(&sorted, 0), Some(1));
        assert_eq!(nearest_rank(&sorted, 5), Some(1));
        assert_eq!(nearest_rank(&sorted, 6), Some(2));
        assert_eq!(nearest_rank(&sorted, 100), Some(20));
        assert_eq!(nearest_rank(&sorted, 250), Some(20));
    }

    #[test]
    fn mean_does_not_overflow() {
        let p = Percentiles::of(&[u64::MAX, u64::MAX, u64::MAX - 2]).unwrap();
        // (3 × MAX − 2) / 3 = MAX − 1 (rounded down from MAX − 2/3)
        assert_eq!(p.mean, u64::MAX - 1);
    }
}
