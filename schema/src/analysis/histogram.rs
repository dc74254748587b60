//! Integer histograms with equal-width bins, for latency distributions (TTFT, ITL).
//!
//! For `n` values from `min` to `max`: `bins = clamp(ceil(sqrt(n)), 1, 20)`,
//! `width = max(1, ceil((max − min + 1) / bins))`, and value `v` goes to bin
//! `(v − min) / width`. Bins run from the first to the last non-empty one, so there are
//! `(max − min) / width + 1` of them (at most `bins`). All integer arithmetic.

use alloc::vec;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

/// Equal-width bins over `[min, min + width · counts.len())`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Histogram {
    /// Lower bound of the first bin (the smallest value).
    pub min: u64,
    /// Width of every bin.
    pub width: u64,
    /// Values per bin.
    pub counts: Vec<u64>,
}

impl Histogram {
    /// Histogram of `values` (any order); `None` when empty.
    pub fn of(values: &[u64]) -> Option<Histogram> {
        let (&min, &max) = (values.iter().min()?, values.iter().max()?);
        let n = values.len() as u64;
        let mut bins = 1u64;
        while bins < 20 && bins * bins < n {
            bins += 1;
        }
        let span = u128::from(max - min) + 1;
        let width = u64::try_from(span.div_ceil(u128::from(bins)))
            .unwrap_or(u64::MAX)
            .max(1);
        let mut counts = vec![0u64; ((max - min) / width + 1) as usize];
        for &v in values {
            counts[((v - min) / width) as usize] += 1;
        }
        Some(Histogram { min, width, counts })
    }

    /// Lower bound of bin `i`.
    pub fn bin_start(&self, i: usize) -> u64 {
        self.min.saturating_add(self.width.saturating_mul(i as u64))
    }

    /// Upper bound (exclusive) of the last bin.
    pub fn end(&self) -> u64 {
        self.bin_start(self.counts.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins() {
        assert_eq!(Histogram::of(&[]), None);
        assert_eq!(
            Histogram::of(&[7]),
            Some(Histogram {
                min: 7,
                width: 1,
                counts: vec![1]
            })
        );
        // n = 5 → 3 bins; span 10 → width 4: [0,4) [4,8) [8,12)
        let h = Histogram::of(&[9, 0, 4, 3, 8]).unwrap();
        assert_eq!(
            h,
            Histogram {
                min: 0,
                width: 4,
                counts: vec![2, 1, 2]
            }
        );
        assert_eq!(h.end(), 12);
        let big = Histogram::of(&[0, u64::MAX]).unwrap();
        assert_eq!(big.counts, vec![1, 1]);
        let many: Vec<u64> = (0..1000).collect();
        assert_eq!(Histogram::of(&many).unwrap().counts.len(), 20);
    }
}
