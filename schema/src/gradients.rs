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
