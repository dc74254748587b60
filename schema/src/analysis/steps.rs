//! Several captured steps of one run, side by side: [`StepSet::of`] → per-step totals, the
//! spread of every phase and module path over the steps, outlier steps and shape churn.
//!
//! Each step is one trace/6 file (SCHEMA.md §4, "Several steps"); the set is any list of read
//! documents. Choices (SCHEMA.md has no multi-step section):
//! - **Order.** Steps are ordered by their meta's `capture_step`, then by input order (a
//!   document without meta sorts last).
//! - **Per-step numbers** reuse the single-file analyses: `total_ns` is the summary's
//!   ([`TraceSummary`](crate::analysis::summary::TraceSummary)), the phases are
//!   [`phase_breakdown`]'s forward, backward, optimizer and
//!   other, and a module path's time is [`module_rows`]' inclusive
//!   `total_ns` by path. A step without a measured span has no phases and no total (counted
//!   as absent, not 0: out of the totals' spread and never an outlier).
//! - **Spread** ([`Spread`]): `median` and `p90` are nearest-rank percentiles
//!   ([`crate::analysis::percentiles::nearest_rank`], so the median of an even count is the lower middle
//!   value and every statistic is one of the samples); `mad` (median absolute deviation) is the
//!   nearest-rank median of `|x − median|`.
//! - **Outlier steps.** With at least [`MIN_STEPS_FOR_OUTLIERS`] steps, a step is an outlier
//!   when `|total − median| > 3 × MAD` of the totals (with a MAD of 0, any step whose total
//!   differs from the median). A slow outlier is explained by the phase and the (at most three)
//!   module paths whose time exceeds their own median by the most. With fewer steps the set
//!   says so ([`StepSet::outliers_reason`]) instead of guessing.
//! - **Shape churn.** The shapes seen at a module path in a step are the shapes of the inputs
//!   of the ops whose span has that module path (an input id resolved through the file's
//!   `tensor` records and op outputs; unresolved ids are skipped) and of the `tensor` records in
//!   those spans. A path churns when two steps that both saw shapes there saw different sets.

use crate::analysis::sort;
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use crate::analysis::modules::{module_rows, ModuleGrouping, ModulePaths};
use crate::analysis::percentiles::nearest_rank;
use crate::analysis::phases::phase_breakdown;
use crate::format::document::TraceDocument;

/// How many steps outlier detection needs: with fewer, the median and MAD say too little.
pub const MIN_STEPS_FOR_OUTLIERS: usize = 3;

/// How many MADs away from the median a step must be to be an outlier.
pub const OUTLIER_MADS: u64 = 3;

/// The four phases of a step, in display order.
pub const PHASES: [&str; 4] = ["forward", "backward", "optimizer", "other"];

/// Median, 90th percentile and median absolute deviation of some samples (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spread {
    /// Number of samples (≥ 1).
    pub count: u64,
    /// Smallest sample.
    pub min: u64,
    /// Nearest-rank median.
    pub median: u64,
    /// Nearest-rank 90th percentile.
    pub p90: u64,
    /// Largest sample.
    pub max: u64,
    /// Nearest-rank median of `|x − median|`.
    pub mad: u64,
}

impl Spread {
    /// The spread of `values` in any order; `None` when empty.
    pub fn of(values: &[u64]) -> Option<Spread> {
        let mut sorted = Vec::from(values);
        sorted.sort_unstable();
        let median = nearest_rank(&sorted, 50)?;
        let mut deviations: Vec<u64> = sorted.iter().map(|&v| v.abs_diff(median)).collect();
        deviations.sort_unstable();
        Some(Spread {
            count: sorted.len() as u64,
            min: *sorted.first()?,
            median,
            p90: nearest_rank(&sorted, 90)?,
            max: *sorted.last()?,
            mad: nearest_rank(&deviations, 50)?,
        })
    }

    /// Whether `value` lies more than `k` MADs from the median (with a MAD of 0: differs).
    pub fn is_beyond(&self, value: u64, k: u64) -> bool {
        value.abs_diff(self.median) > self.mad.saturating_mul(k)
    }
}

/// One step's numbers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRow {
    /// Index of the document in the input list.
    pub input: usize,
    /// The meta's `capture_step`, when there is a meta.
    pub capture_step: Option<u64>,
    /// The summary's `total_ns`; `None` without a closed measured span (a step that measured
    /// nothing: left out of the totals' spread and of the outliers, as its phases are).
    pub total_ns: Option<u64>,
    /// Forward, backward, optimizer and other ns ([`PHASES`] order); `None` without a measured span.
    pub phases_ns: Option<[u64; 4]>,
}

/// A phase or module path over the steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadRow {
    /// Phase name or module path.
    pub key: String,
    /// Its time in each step, in step order; `None` where the step has no such phase or path.
    pub per_step_ns: Vec<Option<u64>>,
    /// The spread over the steps that have it.
    pub spread: Spread,
}

/// What made an outlier step slow (or fast).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outlier {
    /// Position in [`StepSet::steps`].
    pub step: usize,
    /// That step's `capture_step`.
    pub capture_step: Option<u64>,
    /// Its total.
    pub total_ns: u64,
    /// `total − median` (signed ns).
    pub excess_ns: i64,
    /// The phase with the largest time above its own median, with that excess in ns
    /// (`None` for a fast step or when no phase is above its median).
    pub phase: Option<(String, u64)>,
    /// Up to three module paths with the largest time above their own median, largest first.
    pub module_paths: Vec<(String, u64)>,
}

/// A module path whose shapes differ between steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShapeChurn {
    /// The module path.
    pub path: String,
    /// Each distinct set of shapes seen there, with the steps (positions) that saw it, in order
    /// of first appearance.
    pub variants: Vec<(Vec<Vec<u64>>, Vec<usize>)>,
}

/// Several steps analysed together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepSet {
    /// Steps in order (see the module docs).
    pub steps: Vec<StepRow>,
    /// Distinct `run_id`s of the steps (one when they are one run).
    pub run_ids: Vec<String>,
    /// Spread of the step totals; `None` without steps.
    pub total: Option<Spread>,
    /// One row per phase that some step has, in [`PHASES`] order.
    pub phases: Vec<SpreadRow>,
    /// One row per module path, by median descending, then path.
    pub modules: Vec<SpreadRow>,
    /// Outlier steps by |excess| descending (empty when there are too few steps).
    pub outliers: Vec<Outlier>,
    /// Why there is no outlier detection, when there is none.
    pub outliers_reason: Option<String>,
    /// Module paths with shape churn, by path.
    pub shape_churn: Vec<ShapeChurn>,
}

/// A set of shapes (each a list of dimensions), ordered.
type ShapeSet = BTreeSet<Vec<u64>>;

fn spread_row(key: String, per_step_ns: Vec<Option<u64>>) -> Option<SpreadRow> {
    let present: Vec<u64> = per_step_ns.iter().flatten().copied().collect();
    let spread = Spread::of(&present)?;
    Some(SpreadRow {
        key,
        per_step_ns,
        spread,
    })
}

/// Per module path, the set of shapes seen there (see the module docs).
fn shapes_by_path(doc: &TraceDocument, paths: &ModulePaths) -> BTreeMap<String, ShapeSet> {
    let mut shape_of: BTreeMap<&str, &[u64]> = BTreeMap::new();
    for t in &doc.tensors {
        shape_of.insert(t.tensor_id.as_str(), &t.shape);
    }
    for o in &doc.ops {
        if let Some(out) = o.output {
            shape_of.entry(out).or_insert(o.shape);
        }
    }
    // By key id, so that a key's text is copied once, not once a record.
    let mut by_id: BTreeMap<u32, ShapeSet> = BTreeMap::new();
    let mut add = |span_id: &str, shape: &[u64]| {
        if let Some(i) = doc.span_index(span_id) {
            let id = paths.path_id(i);
            if id != 0 {
                by_id.entry(id).or_default().insert(Vec::from(shape));
            }
        }
    };
    for o in &doc.ops {
        for input in o.inputs {
            if let Some(shape) = shape_of.get(input) {
                add(o.span_id, shape);
            }
        }
    }
    for t in &doc.tensors {
        add(&t.span_id, &t.shape);
    }
    // Inserted one by one: `collect` into a map sorts its input with a sort of its own.
    let mut by_path = BTreeMap::new();
    for (id, set) in by_id {
        if let Some(text) = paths.texts().get(id as usize).filter(|t| !t.is_empty()) {
            by_path.insert(text.clone(), set);
        }
    }
    by_path
}

impl StepSet {
    /// Analyse `docs`, one per step.
    pub fn of(docs: &[&TraceDocument]) -> StepSet {
        let mut order: Vec<usize> = (0..docs.len()).collect();
        sort::by_key(&mut order, |&i| {
            (
                docs[i].meta.as_ref().map_or(u64::MAX, |m| m.capture_step),
                i,
            )
        });
        let docs: Vec<(usize, &TraceDocument)> = order.iter().map(|&i| (i, docs[i])).collect();

        let mut run_ids: Vec<String> = Vec::new();
        let mut steps = Vec::with_capacity(docs.len());
        let mut module_ns: BTreeMap<String, Vec<Option<u64>>> = BTreeMap::new();
        let mut shapes: BTreeMap<String, Vec<(usize, ShapeSet)>> = BTreeMap::new();
        let n = docs.len();
        for (pos, &(input, doc)) in docs.iter().enumerate() {
            if let Some(m) = &doc.meta {
                if !run_ids.contains(&m.run_id) {
                    run_ids.push(m.run_id.clone());
                }
            }
            let phases_ns = phase_breakdown(doc)
                .map(|b| [b.forward_ns, b.backward_ns, b.optimizer_ns, b.other_ns]);
            steps.push(StepRow {
                input,
                capture_step: doc.meta.as_ref().map(|m| m.capture_step),
                total_ns: doc
                    .spans
                    .iter()
                    .any(|s| s.measured && s.duration_ns.is_some())
                    .then(|| doc.summary().total_ns),
                phases_ns,
            });
            let paths = ModulePaths::new(doc);
            for row in module_rows(doc, &paths, ModuleGrouping::Path) {
                module_ns
                    .entry(row.key)
                    .or_insert_with(|| alloc::vec![None; n])[pos] = Some(row.total_ns);
            }
            for (path, set) in shapes_by_path(doc, &paths) {
                shapes.entry(path).or_default().push((pos, set));
            }
        }

        let totals: Vec<u64> = steps.iter().filter_map(|s| s.total_ns).collect();
        let total = Spread::of(&totals);
        let phases: Vec<SpreadRow> = PHASES
            .iter()
            .enumerate()
            .filter_map(|(k, name)| {
                let per_step = steps.iter().map(|s| s.phases_ns.map(|p| p[k])).collect();
                spread_row(String::from(*name), per_step)
            })
            .collect();
        let mut modules: Vec<SpreadRow> = module_ns
            .into_iter()
            .filter_map(|(key, per_step)| spread_row(key, per_step))
            .collect();
        sort::by(&mut modules, |a, b| {
            b.spread
                .median
                .cmp(&a.spread.median)
                .then_with(|| a.key.cmp(&b.key))
        });

        let (outliers, outliers_reason) = match total {
            Some(t) if steps.len() >= MIN_STEPS_FOR_OUTLIERS => {
                (outliers(&steps, &t, &phases, &modules), None)
            }
            _ => (
                Vec::new(),
                Some(alloc::format!(
                    "{} step(s): outlier steps need at least {MIN_STEPS_FOR_OUTLIERS}",
                    steps.len()
                )),
            ),
        };

        let shape_churn = shapes
            .into_iter()
            .filter_map(|(path, seen)| {
                let mut variants: Vec<(Vec<Vec<u64>>, Vec<usize>)> = Vec::new();
                for (pos, set) in seen {
                    let set: Vec<Vec<u64>> = set.into_iter().collect();
                    match variants.iter_mut().find(|(s, _)| *s == set) {
                        Some((_, at)) => at.push(pos),
                        None => variants.push((set, alloc::vec![pos])),
                    }
                }
                (variants.len() > 1).then_some(ShapeChurn { path, variants })
            })
            .collect();

        StepSet {
            steps,
            run_ids,
            total,
            phases,
            modules,
            outliers,
            outliers_reason,
            shape_churn,
        }
    }
}

/// The excess of step `pos` over a row's median, when it is above it.
fn excess(row: &SpreadRow, pos: usize) -> Option<u64> {
    let v = row.per_step_ns.get(pos).copied().flatten()?;
    (v > row.spread.median).then(|| v - row.spread.median)
}

fn outliers(
    steps: &[StepRow],
    total: &Spread,
    phases: &[SpreadRow],
    modules: &[SpreadRow],
) -> Vec<Outlier> {
    let mut out: Vec<Outlier> = steps
        .iter()
        .enumerate()
        .filter_map(|(pos, s)| Some((pos, s, s.total_ns?)))
        .filter(|&(_, _, total_ns)| total.is_beyond(total_ns, OUTLIER_MADS))
        .map(|(pos, s, total_ns)| {
            let slow = total_ns > total.median;
            let phase = if slow {
                phases
                    .iter()
                    .filter_map(|r| excess(r, pos).map(|e| (r.key.clone(), e)))
                    .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
            } else {
                None
            };
            let mut module_paths: Vec<(String, u64)> = if slow {
                modules
                    .iter()
                    .filter_map(|r| excess(r, pos).map(|e| (r.key.clone(), e)))
                    .collect()
            } else {
                Vec::new()
            };
            sort::by(&mut module_paths, |a, b| {
                b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0))
            });
            module_paths.truncate(3);
            Outlier {
                step: pos,
                capture_step: s.capture_step,
                total_ns,
                excess_ns: crate::analysis::compare::signed_delta(total.median, total_ns),
                phase,
                module_paths,
            }
        })
        .collect();
    sort::by(&mut out, |a, b| {
        b.excess_ns
            .unsigned_abs()
            .cmp(&a.excess_ns.unsigned_abs())
            .then(a.step.cmp(&b.step))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::vec;

    #[test]
    fn spread_by_hand() {
        // sorted [10, 12, 13, 15, 40]; n = 5: median rank ceil(2.5) = 3 → 13;
        // p90 rank ceil(4.5) = 5 → 40.
        // |x − 13| = [3, 1, 0, 2, 27] → sorted [0, 1, 2, 3, 27], median rank 3 → 2.
        let s = Spread::of(&[40, 12, 10, 15, 13]).unwrap();
        assert_eq!(
            s,
            Spread {
                count: 5,
                min: 10,
                median: 13,
                p90: 40,
                max: 40,
                mad: 2
            }
        );
        // 40 is 27 from the median > 3 × 2 = 6; 15 is 2 from it, within 6.
        assert!(s.is_beyond(40, 3));
        assert!(!s.is_beyond(15, 3));
        assert!(!s.is_beyond(7, 3));
        assert!(s.is_beyond(6, 3));
    }

    #[test]
    fn spread_of_an_even_count_takes_the_lower_middle() {
        // sorted [1, 2, 3, 4]: median rank ceil(2.0) = 2 → 2; deviations [1, 0, 1, 2] →
        // sorted [0, 1, 1, 2], rank 2 → 1; p90 rank ceil(3.6) = 4 → 4.
        let s = Spread::of(&[4, 3, 2, 1]).unwrap();
        assert_eq!((s.median, s.mad, s.p90), (2, 1, 4));
        assert_eq!(Spread::of(&[]), None);
        // One sample: MAD 0, and only a different value is beyond.
        let one = Spread::of(&[5]).unwrap();
        assert_eq!((one.median, one.mad), (5, 0));
        assert!(!one.is_beyond(5, 3));
        assert!(one.is_beyond(6, 3));
    }

    /// A one-step trace: a measured `step` span of `total` ns with forward `f` and backward `b`
    /// function spans, a module `enc` (forward) of `enc` ns, and a `tensor` of `shape` in it.
    fn step_doc(
        capture_step: u64,
        total: u64,
        f: u64,
        b: u64,
        enc: u64,
        shape: &[u64],
    ) -> TraceDocument {
        let shape: Vec<String> = shape.iter().map(|d| format!("{d}")).collect();
        let text = format!(
            concat!(
                r#"{{"kind":"meta","schema":"candle-graph/trace/6","run_id":"run","correlation_id":"c","#,
                r#""entrypoint":"e","phase":"train","timestamp":"t","capture_step":{cs},"warmup_steps":1,"#,
                r#""device":"cpu","timing_mode":"host","tags":{{}}}}"#,
                "\n",
                r#"{{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}}"#,
                "\n",
                r#"{{"kind":"span_start","id":"f","parent_id":"s","name":"forward","start_ns":0,"span_kind":"function","step":"forward"}}"#,
                "\n",
                r#"{{"kind":"span_start","id":"e","parent_id":"f","name":"enc","start_ns":0,"span_kind":"module","step":"forward"}}"#,
                "\n",
                r#"{{"kind":"tensor","span_id":"e","tensor_id":"t1","shape":[{shape}],"dtype":"f32","device":"cpu"}}"#,
                "\n",
                r#"{{"kind":"span_end","id":"e","duration_ns":{enc}}}"#,
                "\n",
                r#"{{"kind":"span_end","id":"f","duration_ns":{f}}}"#,
                "\n",
                r#"{{"kind":"span_start","id":"b","parent_id":"s","name":"backward","start_ns":0,"span_kind":"function","step":"backward"}}"#,
                "\n",
                r#"{{"kind":"span_end","id":"b","duration_ns":{b}}}"#,
                "\n",
                r#"{{"kind":"span_end","id":"s","duration_ns":{total}}}"#,
                "\n",
            ),
            cs = capture_step,
            shape = shape.join(","),
            enc = enc,
            f = f,
            b = b,
            total = total,
        );
        let doc = TraceDocument::from_bytes(text.as_bytes());
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        doc
    }

    #[test]
    fn five_steps_one_slow_in_backward() {
        // Given out of order (capture steps 4, 2, 3, 6, 5); step 6 is slow.
        let docs = [
            step_doc(4, 1010, 400, 500, 300, &[2, 8]),
            step_doc(2, 1000, 400, 490, 300, &[2, 8]),
            step_doc(3, 1020, 410, 500, 310, &[2, 8]),
            step_doc(6, 1600, 420, 1060, 320, &[2, 8]),
            step_doc(5, 990, 390, 490, 290, &[2, 8]),
        ];
        let refs: Vec<&TraceDocument> = docs.iter().collect();
        let set = StepSet::of(&refs);
        let order: Vec<Option<u64>> = set.steps.iter().map(|s| s.capture_step).collect();
        assert_eq!(order, vec![Some(2), Some(3), Some(4), Some(5), Some(6)]);
        assert_eq!(set.run_ids, vec![String::from("run")]);
        // totals sorted [990, 1000, 1010, 1020, 1600]: median 1010, p90 (rank 5) 1600;
        // deviations [20, 10, 0, 10, 590] → sorted [0, 10, 10, 20, 590], MAD 10.
        let t = set.total.unwrap();
        assert_eq!((t.median, t.p90, t.mad), (1010, 1600, 10));
        // backward per step (order 2..6): [490, 500, 500, 490, 1060]; sorted
        // [490, 490, 500, 500, 1060] → median 500; deviations [10, 0, 0, 10, 560] → MAD 10.
        let back = set.phases.iter().find(|r| r.key == "backward").unwrap();
        assert_eq!((back.spread.median, back.spread.mad), (500, 10));
        // other = total − forward − backward: step 2: 1000 − 400 − 490 = 110, step 6: 1600 −
        // 420 − 1060 = 120.
        let other = set.phases.iter().find(|r| r.key == "other").unwrap();
        assert_eq!(other.per_step_ns[0], Some(110));
        assert_eq!(other.per_step_ns[4], Some(120));
        // Only step 6: |1600 − 1010| = 590 > 30. Its backward is 1060 − 500 = 560 above the
        // median (forward: 420 − 400 = 20; other: 120 − 110 = 10, other per step
        // [110, 110, 110, 110, 120] median 110). `enc`: medians of [300, 310, 300, 290, 320]
        // = 300, so 20 above.
        assert_eq!(set.outliers.len(), 1);
        let o = &set.outliers[0];
        assert_eq!((o.step, o.capture_step, o.excess_ns), (4, Some(6), 590));
        assert_eq!(o.phase, Some((String::from("backward"), 560)));
        assert_eq!(o.module_paths, vec![(String::from("enc"), 20)]);
        assert!(set.shape_churn.is_empty());
        assert_eq!(set.outliers_reason, None);
    }

    #[test]
    fn a_step_that_measured_nothing_is_no_total_and_no_outlier() {
        // Steps 1, 2, 4, 5 measured 1000, 1010, 1000, 990; step 3's `step` span is not
        // measured: its summary total is 0, which once made it the worst outlier.
        let unmeasured = {
            let text = concat!(
                r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"run","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":3,"warmup_steps":1,"device":"cpu","timing_mode":"host","tags":{}}"#,
                "\n",
                r#"{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":false}"#,
                "\n",
                r#"{"kind":"span_end","id":"s","duration_ns":1000}"#,
                "\n",
            );
            TraceDocument::from_bytes(text.as_bytes())
        };
        let docs = [
            step_doc(1, 1000, 400, 500, 300, &[2, 8]),
            step_doc(2, 1010, 400, 500, 300, &[2, 8]),
            unmeasured,
            step_doc(4, 1000, 400, 500, 300, &[2, 8]),
            step_doc(5, 990, 400, 490, 300, &[2, 8]),
        ];
        let refs: Vec<&TraceDocument> = docs.iter().collect();
        let set = StepSet::of(&refs);
        assert_eq!(set.steps[2].total_ns, None);
        assert_eq!(set.steps[0].total_ns, Some(1000));
        // The four totals sorted [990, 1000, 1000, 1010]: median (rank 2) 1000; deviations
        // [0, 10, 0, 10] → sorted [0, 0, 10, 10], MAD (rank 2) 0. Beyond 3 × 0: steps 2 and
        // 5 (positions 1 and 4, 10 off each), not step 3.
        let t = set.total.unwrap();
        assert_eq!((t.median, t.mad), (1000, 0));
        let outliers: Vec<usize> = set.outliers.iter().map(|o| o.step).collect();
        assert_eq!(outliers, vec![1, 4]);
    }

    #[test]
    fn shape_churn_lists_each_variant_with_its_steps() {
        let docs = [
            step_doc(1, 100, 40, 50, 30, &[2, 8]),
            step_doc(2, 100, 40, 50, 30, &[3, 8]),
            step_doc(3, 100, 40, 50, 30, &[2, 8]),
        ];
        let refs: Vec<&TraceDocument> = docs.iter().collect();
        let set = StepSet::of(&refs);
        assert_eq!(
            set.shape_churn,
            vec![ShapeChurn {
                path: String::from("enc"),
                variants: vec![(vec![vec![2, 8]], vec![0, 2]), (vec![vec![3, 8]], vec![1])],
            }]
        );
        // Equal totals: MAD 0 and no step differs, so no outlier.
        assert!(set.outliers.is_empty());
    }

    #[test]
    fn two_steps_are_too_few_for_outliers() {
        let docs = [
            step_doc(1, 100, 40, 50, 30, &[2]),
            step_doc(2, 900, 40, 50, 30, &[2]),
        ];
        let refs: Vec<&TraceDocument> = docs.iter().collect();
        let set = StepSet::of(&refs);
        assert!(set.outliers.is_empty());
        assert_eq!(
            set.outliers_reason.as_deref(),
            Some("2 step(s): outlier steps need at least 3")
        );
        // The spread is still there: sorted [100, 900], median rank 1 → 100, MAD: [0, 800] → 0.
        let t = set.total.unwrap();
        assert_eq!((t.median, t.mad, t.p90), (100, 0, 900));
    }
}
