//! Gradient health: counts per state and the parameters worth a look.

use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

use crate::document::Lined;
use crate::events::{Gradient, GradientState};

/// Number of parameters in each gradient state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GradientCounts {
    /// Finite, non-zero gradients.
    pub present: u64,
    /// Parameters without a gradient.
    pub missing: u64,
    /// All-zero gradients.
    pub zero: u64,
    /// Gradients with NaN or infinity.
    pub non_finite: u64,
}

impl GradientCounts {
    /// Count the states of `gradients`.
    pub fn of(gradients: &[Lined<Gradient>]) -> Self {
        let mut c = GradientCounts::default();
        for g in gradients {
            match g.state {
                GradientState::Present => c.present += 1,
                GradientState::Missing => c.missing += 1,
                GradientState::Zero => c.zero += 1,
                GradientState::NonFinite => c.non_finite += 1,
            }
        }
        c
    }

    /// The count for one state.
    pub fn get(&self, state: GradientState) -> u64 {
        match state {
            GradientState::Present => self.present,
            GradientState::Missing => self.missing,
            GradientState::Zero => self.zero,
            GradientState::NonFinite => self.non_finite,
        }
    }

    /// Parameters whose gradient is missing, zero or non-finite.
    pub fn problems(&self) -> u64 {
        self.missing + self.zero + self.non_finite
    }
}

/// Indices of gradients sorted for review: problems first (non-finite, missing, zero), then
/// present ones by norm, largest first; ties by `root`/`key`.
pub fn gradients_for_review(gradients: &[Lined<Gradient>]) -> Vec<usize> {
    fn rank(s: GradientState) -> u8 {
        match s {
            GradientState::NonFinite => 0,
            GradientState::Missing => 1,
            GradientState::Zero => 2,
            GradientState::Present => 3,
        }
    }
    let mut order: Vec<usize> = (0..gradients.len()).collect();
    order.sort_by(|&a, &b| {
        let (ga, gb) = (&gradients[a], &gradients[b]);
        rank(ga.state)
            .cmp(&rank(gb.state))
            .then_with(|| {
                let (na, nb) = (ga.norm.unwrap_or(0.0), gb.norm.unwrap_or(0.0));
                nb.total_cmp(&na)
            })
            .then_with(|| (&ga.root, &ga.key).cmp(&(&gb.root, &gb.key)))
    });
    order
}

/// One decade of the norm histogram: norms in `[10^exponent, 10^(exponent+1))`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NormBin {
    /// Lower bound as a power of ten.
    pub exponent: i32,
    /// Norms in the decade.
    pub count: u64,
}

/// Gradient norms on a log scale.
///
/// Every finite norm > 0 falls in its [`decade`] (`floor(log10(norm))`, exactly); bins run contiguously from
/// the smallest to the largest decade seen (empty decades included). Norms of exactly 0 are
/// counted in `zero`; NaN, infinite and negative norms in `not_finite`; records without a norm
/// in `without_norm`. The state is not consulted: the histogram shows the norms as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NormHistogram {
    /// Decades, ascending.
    pub bins: Vec<NormBin>,
    /// Norms equal to 0.
    pub zero: u64,
    /// NaN, infinite or negative norms.
    pub not_finite: u64,
    /// Records without a norm.
    pub without_norm: u64,
}

/// The decade of a finite `x > 0`: the `e` with `p(e) ≤ x < p(e + 1)`, where `p(e)` is the
/// f64 nearest to 10^e (the value of the literal `1e{e}`). Exact at powers of ten, unlike a
/// floating-point `log10`.
pub fn decade(x: f64) -> i32 {
    fn p(e: i32) -> f64 {
        // "1e{e}" is a valid float literal for every i32, so parsing cannot fail.
        alloc::format!("1e{e}").parse().unwrap_or(f64::NAN)
    }
    // Binary exponent × log10(2) is within one of the answer for normal numbers; the loops fix
    // it (and walk the few extra steps subnormals need).
    let bexp = ((x.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let mut e = (f64::from(bexp) * core::f64::consts::LOG10_2) as i32;
    while e > -330 && p(e) > x {
        e -= 1;
    }
    while e < 310 && p(e + 1) <= x {
        e += 1;
    }
    e
}

/// The norm histogram of `gradients`.
pub fn norm_histogram(gradients: &[Lined<Gradient>]) -> NormHistogram {
    let mut h = NormHistogram::default();
    let mut decades: Vec<i32> = Vec::new();
    for g in gradients {
        match g.norm {
            None => h.without_norm += 1,
            Some(0.0) => h.zero += 1,
            Some(n) if !n.is_finite() || n < 0.0 => h.not_finite += 1,
            Some(n) => decades.push(decade(n)),
        }
    }
    if let (Some(&lo), Some(&hi)) = (decades.iter().min(), decades.iter().max()) {
        h.bins = (lo..=hi)
            .map(|exponent| NormBin {
                exponent,
                count: decades.iter().filter(|&&d| d == exponent).count() as u64,
            })
            .collect();
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::GradientState;
    use alloc::string::String;

    fn g(norm: Option<f64>) -> Lined<Gradient> {
        Lined::new(
            1,
            Gradient {
                event_id: String::new(),
                root: String::from("r"),
                key: String::from("k"),
                state: GradientState::Present,
                norm,
            },
        )
    }

    #[test]
    fn decades_are_exact_at_powers_of_ten() {
        assert_eq!(decade(1.0), 0);
        assert_eq!(decade(0.999_999), -1);
        assert_eq!(decade(1000.0), 3);
        assert_eq!(decade(999.999), 2);
        assert_eq!(decade(0.001), -3);
        assert_eq!(decade(1e-300), -300);
        assert_eq!(decade(5e-324), -324);
        assert_eq!(decade(f64::MAX), 308);
    }

    #[test]
    fn histogram_bins_are_contiguous() {
        let h = norm_histogram(&[
            g(Some(0.5)),
            g(Some(0.06)),
            g(Some(20.0)),
            g(Some(0.0)),
            g(Some(f64::NAN)),
            g(None),
            g(Some(0.7)),
        ]);
        let bins: alloc::vec::Vec<(i32, u64)> =
            h.bins.iter().map(|b| (b.exponent, b.count)).collect();
        assert_eq!(bins, alloc::vec![(-2, 1), (-1, 2), (0, 0), (1, 1)]);
        assert_eq!((h.zero, h.not_finite, h.without_norm), (1, 1, 1));
    }
}
