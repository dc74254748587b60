//! The gradient panel: counts per state and the parameters worth a look first.

use super::sort::sort_indices;
use candle_trace_schema::analysis::gradients::{
    gradient_finding, gradient_groups, gradients_for_review, norm_histogram, GradientCounts,
    GradientFlow,
};
use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::events::GradientState;

/// One module's gradients (parameters grouped by key without its last `.`-segment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GradientGroupRow {
    /// The module (`(top level)` for keys without a `.`), prefixed by `root:` when the file
    /// has several roots.
    pub module: String,
    /// Parameters in the module.
    pub params: u64,
    /// Present gradients.
    pub present: u64,
    /// Missing gradients.
    pub missing: u64,
    /// All-zero gradients.
    pub zero: u64,
    /// Non-finite gradients.
    pub non_finite: u64,
    /// `all_missing`, `partly_missing` or `none_missing`.
    pub flow: &'static str,
    /// True when some parameter of the module has no gradient.
    pub problem: bool,
}

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
    /// Per module, in file order (all of them).
    pub groups: Vec<GradientGroupRow>,
    /// One sentence about where gradients arrived (`schema::analysis::gradients::gradient_finding`).
    pub finding: Option<String>,
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
            groups: group_rows(doc),
            finding: gradient_finding(&gradient_groups(&doc.gradients)),
        }
    }
}

fn group_rows(doc: &TraceDocument) -> Vec<GradientGroupRow> {
    let groups = gradient_groups(&doc.gradients);
    let several_roots = groups.iter().any(|g| g.root != groups[0].root);
    groups
        .iter()
        .map(|g| {
            let module = if g.module.is_empty() {
                "(top level)"
            } else {
                g.module.as_str()
            };
            GradientGroupRow {
                module: if several_roots {
                    format!("{}:{module}", g.root)
                } else {
                    module.to_string()
                },
                params: g.params,
                present: g.counts.present,
                missing: g.counts.missing,
                zero: g.counts.zero,
                non_finite: g.counts.non_finite,
                flow: g.flow.as_str(),
                problem: g.flow != GradientFlow::NoneMissing,
            }
        })
        .collect()
}

/// Columns the gradient table sorts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GradientSort {
    /// Problems first (non-finite, missing, zero), then by norm, largest first.
    Review,
    /// `root/key`.
    Parameter,
    /// State, problems first.
    State,
    /// Norm; rows without a norm last in either direction.
    Norm,
}

/// One row of the sortable table.
#[derive(Debug, Clone, PartialEq)]
pub struct GradientTableRow {
    /// `root/key`.
    pub parameter: String,
    /// State spelling.
    pub state: &'static str,
    /// Review rank of the state (0 non-finite, 1 missing, 2 zero, 3 present).
    pub state_rank: u8,
    /// The norm.
    pub norm: Option<f64>,
    /// Human norm.
    pub norm_text: String,
    /// Missing, zero or non-finite.
    pub problem: bool,
}

/// One decade bar of the norm histogram.
#[derive(Debug, Clone, PartialEq)]
pub struct NormBar {
    /// Lower bound exponent.
    pub exponent: i32,
    /// Norms in the decade.
    pub count: u64,
    /// `1e-3`.
    pub label: String,
    /// Bar height in percent of the tallest bar.
    pub height_pct: f64,
}

/// Every gradient in a sortable, filterable table, and the norm histogram.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GradientTable {
    /// Rows in review order.
    pub rows: Vec<GradientTableRow>,
    /// Decades, ascending.
    pub bars: Vec<NormBar>,
    /// Norms equal to 0.
    pub zero_norms: u64,
    /// NaN / infinite / negative norms.
    pub not_finite_norms: u64,
    /// Records without a norm.
    pub without_norm: u64,
}

impl GradientTable {
    /// The table of `doc` (every record).
    pub fn of(doc: &TraceDocument) -> Self {
        let rank = |s: GradientState| match s {
            GradientState::NonFinite => 0,
            GradientState::Missing => 1,
            GradientState::Zero => 2,
            GradientState::Present => 3,
        };
        let rows = gradients_for_review(&doc.gradients)
            .into_iter()
            .map(|i| {
                let g = &doc.gradients[i];
                GradientTableRow {
                    parameter: format!("{}/{}", g.root, g.key),
                    state: g.state.as_str(),
                    state_rank: rank(g.state),
                    norm: g.norm,
                    norm_text: g.norm.map_or_else(|| "—".to_string(), norm_text),
                    problem: g.state != GradientState::Present,
                }
            })
            .collect();
        let h = norm_histogram(&doc.gradients);
        let tallest = h.bins.iter().map(|b| b.count).max().unwrap_or(0).max(1);
        GradientTable {
            rows,
            bars: h
                .bins
                .iter()
                .map(|b| NormBar {
                    exponent: b.exponent,
                    count: b.count,
                    label: format!("1e{}", b.exponent),
                    height_pct: b.count as f64 / tallest as f64 * 100.0,
                })
                .collect(),
            zero_norms: h.zero,
            not_finite_norms: h.not_finite,
            without_norm: h.without_norm,
        }
    }

    /// Row indices to show: only problems when `only_problems`, sorted by `sort` (`descending`
    /// reverses it; ties keep review order).
    pub fn view(&self, sort: GradientSort, descending: bool, only_problems: bool) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.rows.len())
            .filter(|&i| !only_problems || self.rows[i].problem)
            .collect();
        let rows = &self.rows;
        // The key's order, turned round when descending; a stable sort then keeps ties in
        // review order either way (reversing a sorted list turned ties round too).
        let dir = |o: core::cmp::Ordering| if descending { o.reverse() } else { o };
        match sort {
            GradientSort::Review if descending => order.reverse(),
            GradientSort::Review => {}
            GradientSort::Parameter => sort_indices(&mut order, &|a, b| {
                dir(rows[a].parameter.cmp(&rows[b].parameter))
            }),
            GradientSort::State => sort_indices(&mut order, &|a, b| {
                dir(rows[a].state_rank.cmp(&rows[b].state_rank))
            }),
            // Rows without a norm last, whichever way.
            GradientSort::Norm => {
                sort_indices(&mut order, &|a, b| match (rows[a].norm, rows[b].norm) {
                    (Some(x), Some(y)) => dir(x.total_cmp(&y)),
                    (Some(_), None) => core::cmp::Ordering::Less,
                    (None, Some(_)) => core::cmp::Ordering::Greater,
                    (None, None) => core::cmp::Ordering::Equal,
                })
            }
        }
        order
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
        // Modules in file order: fc1 (2 present), fc2 (2), head (scale present, bias zero),
        // embed (1 missing), aux (1 non-finite).
        let groups: Vec<(&str, u64, u64, u64, &str)> = g
            .groups
            .iter()
            .map(|r| (r.module.as_str(), r.params, r.present, r.missing, r.flow))
            .collect();
        assert_eq!(
            groups,
            [
                ("fc1", 2, 2, 0, "none_missing"),
                ("fc2", 2, 2, 0, "none_missing"),
                ("head", 2, 1, 0, "none_missing"),
                ("embed", 1, 0, 1, "all_missing"),
                ("aux", 1, 0, 0, "none_missing"),
            ]
        );
        assert!(g.groups[3].problem && !g.groups[2].problem);
        // The fixture's `encoder.norm` arrives zero and `head.scale` non-finite.
        assert_eq!(
            g.finding.as_deref(),
            Some(
                "1 of 8 parameters has no gradient and 2 a gradient that cannot train \
                 (1 zero, 1 non-finite); only fc1, fc2, head and aux receive gradients; \
                 no gradient reaches 1 module: embed"
            )
        );
    }

    #[test]
    fn table_sorts_filters_and_bins() {
        let doc = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/valid_panels.trace6.jsonl"
        ));
        let t = GradientTable::of(&doc);
        assert_eq!(t.rows.len(), 9);
        let names = |v: Vec<usize>| -> Vec<String> {
            v.into_iter().map(|i| t.rows[i].parameter.clone()).collect()
        };
        assert_eq!(
            names(t.view(GradientSort::Review, false, true)),
            vec!["model/head.scale", "model/embed", "model/encoder.norm"]
        );
        let by_norm = names(t.view(GradientSort::Norm, true, false));
        assert_eq!(by_norm[0], "model/head.b");
        assert_eq!(by_norm[6], "model/encoder.norm");
        // rows without a norm stay last when descending
        assert!(by_norm[7..]
            .iter()
            .all(|n| n == "model/embed" || n == "model/head.scale"));
        let asc = names(t.view(GradientSort::Norm, false, false));
        assert_eq!(asc[0], "model/encoder.norm");
        assert_eq!(asc[1], "model/encoder.attn.q");
        assert_eq!(
            names(t.view(GradientSort::Parameter, false, false))[0],
            "model/embed"
        );
        // Ties keep review order (row index order) either way.
        for descending in [false, true] {
            let v = t.view(GradientSort::State, descending, false);
            assert!(v
                .windows(2)
                .all(|w| t.rows[w[0]].state_rank != t.rows[w[1]].state_rank || w[0] < w[1]));
            let ranks: Vec<_> = v.iter().map(|&i| t.rows[i].state_rank).collect();
            assert!(ranks.windows(2).all(|w| if descending {
                w[0] >= w[1]
            } else {
                w[0] <= w[1]
            }));
        }
        let bins: Vec<(i32, u64)> = t.bars.iter().map(|b| (b.exponent, b.count)).collect();
        assert_eq!(
            bins,
            vec![
                (-5, 1),
                (-4, 0),
                (-3, 0),
                (-2, 1),
                (-1, 2),
                (0, 1),
                (1, 0),
                (2, 0),
                (3, 1)
            ]
        );
        assert_eq!(t.bars[4].height_pct, 100.0);
        assert_eq!(
            (t.zero_norms, t.not_finite_norms, t.without_norm),
            (1, 0, 2)
        );
    }
}
