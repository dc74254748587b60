//! The gradient panel: counts per state and the parameters worth a look first.

use candle_trace_schema::document::TraceDocument;
use candle_trace_schema::events::GradientState;
use candle_trace_schema::gradients::{gradients_for_review, GradientCounts};

/// One parameter's gradient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GradientRow {
    /// `root/key`.
    pub parameter: String,
    /// `present`, `missing`, `zero` or `non_finite`.
    pub state: &'static str,
    /// L2 norm, when recorded.
    pub norm: String,
    /// True for missing, zero and non-finite gradients.
    pub problem: bool,
}

/// A norm as `0.8125` in the everyday range, `1.250e-7` outside it.
pub fn norm_text(n: f64) -> String {
    if n == 0.0 || (1e-3..1e5).contains(&n.abs()) {
        format!("{n:.4}")
    } else {
        format!("{n:.3e}")
    }
}

/// The panel.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GradientPanel {
    /// (state, count) for the four states.
    pub counts: Vec<(&'static str, u64)>,
    /// Parameters in review order (problems first), at most the limit.
    pub rows: Vec<GradientRow>,
    /// All gradient records.
    pub total: usize,
}

impl GradientPanel {
    /// The panel of `doc` with at most `limit` rows; empty without gradient records.
    pub fn of(doc: &TraceDocument, limit: usize) -> Self {
        if doc.gradients.is_empty() {
            return GradientPanel::default();
        }
        let c = GradientCounts::of(&doc.gradients);
        GradientPanel {
            counts: GradientState::ALL
                .iter()
                .map(|&s| (s.as_str(), c.get(s)))
                .collect(),
            rows: gradients_for_review(&doc.gradients)
                .into_iter()
                .take(limit)
                .map(|i| {
                    let g = &doc.gradients[i];
                    GradientRow {
                        parameter: format!("{}/{}", g.root, g.key),
                        state: g.state.as_str(),
                        norm: g.norm.map_or_else(|| "—".to_string(), norm_text),
                        problem: g.state != GradientState::Present,
                    }
                })
                .collect(),
            total: doc.gradients.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn norms_read_well() {
        assert_eq!(norm_text(0.8125), "0.8125");
        assert_eq!(norm_text(0.0), "0.0000");
        assert_eq!(norm_text(1.25e-7), "1.250e-7");
        assert_eq!(norm_text(f64::NAN), "NaN");
    }

    #[test]
    fn golden_gradients() {
        let doc = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/train_step.trace6.jsonl"
        ));
        let g = GradientPanel::of(&doc, 100);
        // present 5, missing 1, zero 1, non_finite 1 (fixtures README).
        let count = |s: &str| g.counts.iter().find(|c| c.0 == s).map(|c| c.1);
        assert_eq!(count("present"), Some(5));
        assert_eq!(count("missing"), Some(1));
        assert_eq!(count("zero"), Some(1));
        assert_eq!(count("non_finite"), Some(1));
        assert_eq!(g.total, 8);
        assert_eq!(g.rows[0].state, "non_finite");
        assert!(g.rows[..3].iter().all(|r| r.problem));
        assert!(!g.rows[3].problem);
    }
}
