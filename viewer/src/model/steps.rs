//! The steps view: several files that are the per-step captures of one run (SCHEMA.md §4,
//! "Several steps"), shown through [`candle_trace_schema::analysis::steps::StepSet`] and the set's
//! findings. Every number is the schema's; this module only words them.
//!
//! Which files are one run's steps ([`is_one_runs_steps`]): at least two, every one with a meta,
//! all with the same `run_id` and `correlation_id`, and no two with the same `capture_step`.
//! Anything else (ranks of one step, unrelated runs) keeps the several-files view.
//!
//! The view shows one step at a time in detail (its chart, header and trace tabs): the first
//! captured unless another is asked for ([`StepsModel::position_of`], the URL's `step`). Every
//! step's document is kept; a step's [`TraceModel`] is built the first time it is shown
//! ([`StepsModel::model`]) and kept. The set's single-file findings read the first step in
//! capture order ([`trace_findings`]), so their links lead into that step's timeline and tables
//! ([`StepsModel::finding_step`]); the outlier-step finding's link leads to the outlier's row.

use std::sync::{Arc, Mutex, PoisonError};

use candle_trace_schema::analysis::findings::trace_findings;
use candle_trace_schema::analysis::steps::{
    Spread, SpreadRow, StepSet, MIN_STEPS_FOR_OUTLIERS, OUTLIER_MADS,
};
use candle_trace_schema::analysis::units::format_ns;
use candle_trace_schema::format::diagnostics::Severity;
use candle_trace_schema::format::document::TraceDocument;

use super::findings::{FindingTarget, FindingsPanel};
use super::gradients::GradientPanel;
use super::TraceModel;

/// Whether `docs` are the per-step captures of one run (see the module docs).
pub fn is_one_runs_steps(docs: &[&TraceDocument]) -> bool {
    if docs.len() < 2 {
        return false;
    }
    let metas: Option<Vec<_>> = docs.iter().map(|d| d.meta.as_ref()).collect();
    let Some(metas) = metas else {
        return false;
    };
    let first = &metas[0];
    let mut steps: Vec<u64> = metas.iter().map(|m| m.capture_step).collect();
    steps.sort_unstable();
    steps.dedup();
    steps.len() == metas.len()
        && metas
            .iter()
            .all(|m| m.run_id == first.run_id && m.correlation_id == first.correlation_id)
}

/// A step's name: its `capture_step`, or `(no meta)` (the CLI's and the findings' wording).
pub fn step_name(capture_step: Option<u64>) -> String {
    capture_step.map_or_else(|| String::from("(no meta)"), |s| s.to_string())
}

/// `+590 µs` / `−40 µs`.
pub fn signed_ns_text(ns: i64) -> String {
    let sign = if ns >= 0 { "+" } else { "−" };
    format!("{sign}{}", format_ns(ns.unsigned_abs()))
}

/// One step of the per-step table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepLine {
    /// The step's name (the row's `data-step`, the key `steps` links use).
    pub step: String,
    /// The file it came from.
    pub file: String,
    /// Its measured total (ns); `None` without a closed measured span.
    pub total_ns: Option<u64>,
    /// The same as text.
    pub total: String,
    /// Forward, backward, optimizer and other (ns); `None` without a measured span.
    pub phases_ns: Option<[u64; 4]>,
    /// The same four as text (`–` without a measured span, not 0).
    pub phases: [String; 4],
    /// Whether the step is an outlier.
    pub outlier: bool,
    /// Errors and warnings of its file (`none`, `1 error, 2 warnings`).
    pub diagnostics: String,
}

/// A phase, a module path or the total over the steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpreadLine {
    /// Phase name or module path (`total` for the totals).
    pub key: String,
    /// Its time in each step, in step order (`None`: the step has none).
    pub per_step_ns: Vec<Option<u64>>,
    /// The schema's spread.
    pub spread: Spread,
    /// `median`, `p90`, `MAD`, `min`, `max` as text.
    pub cells: [String; 5],
}

impl SpreadLine {
    fn of(key: String, per_step_ns: Vec<Option<u64>>, spread: Spread) -> Self {
        let cells = [
            spread.median,
            spread.p90,
            spread.mad,
            spread.min,
            spread.max,
        ]
        .map(format_ns);
        SpreadLine {
            key,
            per_step_ns,
            spread,
            cells,
        }
    }

    fn of_row(r: &SpreadRow) -> Self {
        Self::of(r.key.clone(), r.per_step_ns.clone(), r.spread)
    }

    /// The per-step values as `2: 1.00 ms, 3: –, …` (the row's tooltip).
    pub fn per_step_text(&self, steps: &[StepLine]) -> String {
        self.per_step_ns
            .iter()
            .zip(steps)
            .map(|(v, s)| {
                format!(
                    "step {}: {}",
                    s.step,
                    v.map_or_else(|| "–".into(), format_ns)
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// An outlier step and what made it slow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutlierLine {
    /// The step's name.
    pub step: String,
    /// Its total as text.
    pub total: String,
    /// `total − median` (ns).
    pub excess_ns: i64,
    /// The phase furthest above its median, then the module paths (`backward +560 µs`).
    pub reasons: Vec<String>,
    /// The sentence (`step 6: 1.60 ms, +590 µs from the median`).
    pub text: String,
}

/// A module path whose shapes change between steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChurnLine {
    /// The module path.
    pub path: String,
    /// Each set of shapes (`[2, 8] [4]`) with the steps that saw it (`2, 3`).
    pub variants: Vec<(String, String)>,
}

/// A step's document until it is first shown, then its view models.
#[derive(Debug)]
enum StepSlot {
    /// The document as read.
    Doc(Box<TraceDocument>),
    /// Its view models (the document inside).
    Model(Arc<TraceModel>),
    /// Building its view models failed half-way (a panic): nothing to show.
    Gone,
}

/// Everything the steps view shows.
#[derive(Debug)]
pub struct StepsModel {
    /// The run's id.
    pub run_id: String,
    /// One line per step, in capture order.
    pub steps: Vec<StepLine>,
    /// The totals' spread.
    pub total: Option<SpreadLine>,
    /// Phases present in some step, in forward, backward, optimizer, other order.
    pub phases: Vec<SpreadLine>,
    /// Module paths by median, largest first.
    pub modules: Vec<SpreadLine>,
    /// Outlier steps, furthest first.
    pub outliers: Vec<OutlierLine>,
    /// Why outliers were not looked for, when they were not.
    pub outliers_reason: Option<String>,
    /// Module paths with shape churn.
    pub churn: Vec<ChurnLine>,
    /// The set's findings (the outlier-step rule included).
    pub findings: FindingsPanel,
    /// For each of the findings' rows, the step (position in `steps`) its link leads into.
    finding_steps: Vec<usize>,
    /// Each step's document or view models, in capture order (the order of `steps`).
    slots: Vec<Mutex<StepSlot>>,
}

/// What the outlier section says about the rule.
pub fn outlier_rule_text() -> String {
    format!(
        "A step is an outlier when its total is more than {OUTLIER_MADS} × MAD from the median (with a MAD of 0: any step that differs); it needs at least {MIN_STEPS_FOR_OUTLIERS} steps."
    )
}

fn diagnostics_text(doc: &TraceDocument) -> String {
    let errors = doc
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    let warnings = doc.diagnostics.len() - errors;
    let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    match (errors, warnings) {
        (0, 0) => "none".into(),
        (e, 0) => plural(e, "error"),
        (0, w) => plural(w, "warning"),
        (e, w) => format!("{}, {}", plural(e, "error"), plural(w, "warning")),
    }
}

impl StepsModel {
    /// The steps view of `docs` (name, document) when they are one run's steps; otherwise the
    /// documents back, untouched.
    pub fn of_run(
        docs: Vec<(String, TraceDocument)>,
    ) -> Result<StepsModel, Vec<(String, TraceDocument)>> {
        let refs: Vec<&TraceDocument> = docs.iter().map(|(_, d)| d).collect();
        if !is_one_runs_steps(&refs) {
            return Err(docs);
        }
        let set = StepSet::of(&refs);
        let findings = trace_findings(&refs);
        let outlier_steps: Vec<usize> = set.outliers.iter().map(|o| o.step).collect();
        let steps: Vec<StepLine> = set
            .steps
            .iter()
            .enumerate()
            .map(|(pos, s)| StepLine {
                step: step_name(s.capture_step),
                file: docs
                    .get(s.input)
                    .map_or_else(String::new, |(n, _)| n.clone()),
                total_ns: s.total_ns,
                total: s.total_ns.map_or_else(|| "–".into(), format_ns),
                phases_ns: s.phases_ns,
                phases: [0, 1, 2, 3]
                    .map(|k| s.phases_ns.map_or_else(|| "–".into(), |p| format_ns(p[k]))),
                outlier: outlier_steps.contains(&pos),
                diagnostics: docs
                    .get(s.input)
                    .map_or_else(String::new, |(_, d)| diagnostics_text(d)),
            })
            .collect();
        let name_of = |pos: usize| steps.get(pos).map_or_else(String::new, |s| s.step.clone());
        let outliers = set
            .outliers
            .iter()
            .map(|o| {
                let mut reasons = Vec::new();
                if let Some((phase, ns)) = &o.phase {
                    reasons.push(format!("{phase} +{}", format_ns(*ns)));
                }
                for (path, ns) in &o.module_paths {
                    reasons.push(format!("{path} +{}", format_ns(*ns)));
                }
                let step = step_name(o.capture_step);
                OutlierLine {
                    text: format!(
                        "step {step}: {}, {} from the median",
                        format_ns(o.total_ns),
                        signed_ns_text(o.excess_ns)
                    ),
                    step,
                    total: format_ns(o.total_ns),
                    excess_ns: o.excess_ns,
                    reasons,
                }
            })
            .collect();
        let churn = set
            .shape_churn
            .iter()
            .map(|c| ChurnLine {
                path: c.path.clone(),
                variants: c
                    .variants
                    .iter()
                    .map(|(shapes, at)| {
                        let shapes: Vec<String> = shapes.iter().map(|s| format!("{s:?}")).collect();
                        let at: Vec<String> = at.iter().map(|&p| name_of(p)).collect();
                        (shapes.join(" "), at.join(", "))
                    })
                    .collect(),
            })
            .collect();
        let total = set.total.map(|t| {
            SpreadLine::of(
                "total".into(),
                set.steps.iter().map(|s| s.total_ns).collect(),
                t,
            )
        });
        let run_id = refs
            .first()
            .and_then(|d| d.meta.as_ref())
            .map_or_else(String::new, |m| m.run_id.clone());
        let phases = set.phases.iter().map(SpreadLine::of_row).collect();
        let modules = set.modules.iter().map(SpreadLine::of_row).collect();
        let outliers_reason = set.outliers_reason.clone();
        let order: Vec<usize> = set.steps.iter().map(|s| s.input).collect();
        // The documents in capture order; every one is kept.
        let mut docs: Vec<Option<TraceDocument>> = docs.into_iter().map(|(_, d)| Some(d)).collect();
        let docs: Vec<TraceDocument> = order
            .iter()
            .filter_map(|&i| docs.get_mut(i).and_then(Option::take))
            .collect();
        // The findings' links name the first step's spans and rows (see the module docs).
        let findings = match docs.first() {
            Some(first) => {
                FindingsPanel::of_trace(&findings, first, &GradientPanel::of(first, 50).groups)
            }
            None => FindingsPanel::default(),
        };
        let finding_steps = findings
            .rows
            .iter()
            .map(|r| match &r.target {
                Some(FindingTarget::Row {
                    testid,
                    attr: Some((_, step)),
                }) if testid == "step-row" => {
                    steps.iter().position(|s| s.step == *step).unwrap_or(0)
                }
                _ => 0,
            })
            .collect();
        let slots = docs
            .into_iter()
            .map(|d| Mutex::new(StepSlot::Doc(Box::new(d))))
            .collect();
        Ok(StepsModel {
            run_id,
            steps,
            total,
            phases,
            modules,
            outliers,
            outliers_reason,
            churn,
            findings,
            finding_steps,
            slots,
        })
    }

    /// The position (in `steps`) of the step named `step` (the URL's `step`); the first step
    /// for none or a name that is not one of the set's.
    pub fn position_of(&self, step: Option<&str>) -> usize {
        step.and_then(|name| self.steps.iter().position(|s| s.step == name))
            .unwrap_or(0)
    }

    /// The view models of the step at `pos`, built the first time they are asked for and kept;
    /// `None` past the last step.
    pub fn model(&self, pos: usize) -> Option<Arc<TraceModel>> {
        let mut slot = self
            .slots
            .get(pos)?
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match std::mem::replace(&mut *slot, StepSlot::Gone) {
            StepSlot::Model(m) => {
                *slot = StepSlot::Model(m.clone());
                Some(m)
            }
            StepSlot::Doc(doc) => {
                // The set's findings panel is the page's: the step's own stays empty.
                let m = Arc::new(TraceModel::without_findings(*doc));
                *slot = StepSlot::Model(m.clone());
                Some(m)
            }
            StepSlot::Gone => None,
        }
    }

    /// Whether the step at `pos` has its view models built (it has been shown).
    pub fn is_built(&self, pos: usize) -> bool {
        self.slots.get(pos).is_some_and(|s| {
            matches!(
                *s.lock().unwrap_or_else(PoisonError::into_inner),
                StepSlot::Model(_)
            )
        })
    }

    /// The step (position in `steps`) whose spans and rows the link of finding row `i` names:
    /// an outlier step's row for the outlier rule, the first step for the rules that read one
    /// step; `None` past the last finding.
    pub fn finding_step(&self, i: usize) -> Option<usize> {
        self.finding_steps.get(i).copied()
    }

    /// Which step the finding row `i` read, for the findings panel (`None` past the last one).
    pub fn finding_reads(&self, i: usize) -> Option<String> {
        let pos = self.finding_step(i)?;
        let step = self.steps.get(pos)?;
        let first = self.steps.first()?;
        Some(if self.is_step_row(i) {
            format!(
                "Read from all {} steps; its link shows step {} ({}).",
                self.steps.len(),
                step.step,
                step.file
            )
        } else {
            format!(
                "Read from step {} ({}), the first captured; its link shows that step.",
                first.step, first.file
            )
        })
    }

    /// Whether finding row `i` links a row of the steps table.
    fn is_step_row(&self, i: usize) -> bool {
        self.findings.rows.get(i).is_some_and(|r| {
            matches!(&r.target, Some(FindingTarget::Row { testid, .. }) if testid == "step-row")
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// One step by hand: a measured `step` span of `total` ns holding forward `f` (with module
    /// `enc` of `enc` ns and a tensor of `shape` in it) and backward `b`.
    fn step_doc(
        run: &str,
        cs: u64,
        total: u64,
        f: u64,
        b: u64,
        enc: u64,
        shape: &str,
    ) -> TraceDocument {
        let text = format!(
            concat!(
                r#"{{"kind":"meta","schema":"candle-graph/trace/6","run_id":"{run}","correlation_id":"{run}","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00Z","capture_step":{cs},"warmup_steps":1,"device":"cpu","timing_mode":"host","tags":{{}}}}"#,
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
                r#"{{"kind":"span_start","id":"b","parent_id":"s","name":"backward","start_ns":{f},"span_kind":"function","step":"backward"}}"#,
                "\n",
                r#"{{"kind":"span_end","id":"b","duration_ns":{b}}}"#,
                "\n",
                r#"{{"kind":"span_end","id":"s","duration_ns":{total}}}"#,
                "\n",
            ),
            run = run,
            cs = cs,
            total = total,
            f = f,
            b = b,
            enc = enc,
            shape = shape,
        );
        let doc = TraceDocument::from_bytes(text.as_bytes());
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        doc
    }

    fn named(docs: Vec<TraceDocument>) -> Vec<(String, TraceDocument)> {
        docs.into_iter()
            .map(|d| {
                (
                    format!(
                        "step-{}.trace6.jsonl",
                        d.meta.as_ref().unwrap().capture_step
                    ),
                    d,
                )
            })
            .collect()
    }

    #[test]
    fn which_files_are_one_runs_steps() {
        let a = step_doc("r", 2, 100, 40, 50, 30, "2");
        let b = step_doc("r", 3, 100, 40, 50, 30, "2");
        let same_step = step_doc("r", 2, 100, 40, 50, 30, "2");
        let other_run = step_doc("q", 4, 100, 40, 50, 30, "2");
        let no_meta = TraceDocument::from_bytes(
            concat!(
                r#"{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}"#, "\n",
                r#"{"kind":"span_end","id":"s","duration_ns":5}"#, "\n",
            )
            .as_bytes(),
        );
        assert!(is_one_runs_steps(&[&a, &b]));
        assert!(is_one_runs_steps(&[&b, &a]));
        // One file is no set; two captures of the same step are ranks, not steps.
        assert!(!is_one_runs_steps(&[&a]));
        assert!(!is_one_runs_steps(&[&a, &same_step]));
        assert!(!is_one_runs_steps(&[&a, &b, &other_run]));
        assert!(!is_one_runs_steps(&[&a, &no_meta]));
        // Not a set: the documents come back in their order.
        let back = StepsModel::of_run(named(vec![
            step_doc("r", 2, 1, 1, 0, 0, "1"),
            step_doc("q", 3, 1, 1, 0, 0, "1"),
        ]))
        .unwrap_err();
        assert_eq!(back.len(), 2);
        assert_eq!(back[1].0, "step-3.trace6.jsonl");
    }

    #[test]
    fn five_steps_one_slow_in_backward() {
        // Opened out of order; capture step 6 is slow in backward, step 4 saw other shapes.
        let m = StepsModel::of_run(named(vec![
            step_doc("r", 4, 1010, 400, 500, 300, "3,8"),
            step_doc("r", 2, 1000, 400, 490, 300, "2,8"),
            step_doc("r", 3, 1020, 410, 500, 310, "2,8"),
            step_doc("r", 6, 1600, 420, 1060, 320, "2,8"),
            step_doc("r", 5, 990, 390, 490, 290, "2,8"),
        ]))
        .unwrap();
        assert_eq!(m.run_id, "r");
        let order: Vec<&str> = m.steps.iter().map(|s| s.step.as_str()).collect();
        assert_eq!(order, ["2", "3", "4", "5", "6"]);
        assert_eq!(m.steps[0].file, "step-2.trace6.jsonl");
        // Step 2: forward 400, backward 490, no optimizer, other 1000 − 400 − 490 = 110.
        assert_eq!(m.steps[0].phases_ns, Some([400, 490, 0, 110]));
        assert_eq!(
            m.steps[0].phases,
            ["400 ns", "490 ns", "0 ns", "110 ns"].map(String::from)
        );
        assert_eq!(m.steps[0].diagnostics, "none");
        assert_eq!(
            (m.steps[0].total.as_str(), m.steps[4].total.as_str()),
            ("1.00 µs", "1.60 µs")
        );
        // Totals sorted [990, 1000, 1010, 1020, 1600]: median 1010, p90 (rank ⌈4.5⌉ = 5) 1600;
        // |x − 1010| sorted [0, 10, 10, 20, 590] → MAD 10; min 990, max 1600.
        let t = m.total.clone().unwrap();
        assert_eq!(
            t.cells,
            ["1.01 µs", "1.60 µs", "10 ns", "990 ns", "1.60 µs"].map(String::from)
        );
        assert_eq!(t.per_step_ns, [1000, 1020, 1010, 990, 1600].map(Some));
        // Only step 6 lies beyond 3 × 10 = 30 ns from 1010 ns.
        let flagged: Vec<bool> = m.steps.iter().map(|s| s.outlier).collect();
        assert_eq!(flagged, [false, false, false, false, true]);
        // Its backward 1060 is 560 above the backward median 500 (sorted [490, 490, 500, 500,
        // 1060]); `enc` 320 is 20 above its median 300 ([300, 300, 310, 290, 320] sorted
        // [290, 300, 300, 310, 320]).
        assert_eq!(
            m.outliers,
            [OutlierLine {
                step: "6".into(),
                total: "1.60 µs".into(),
                excess_ns: 590,
                reasons: vec!["backward +560 ns".into(), "enc +20 ns".into()],
                text: "step 6: 1.60 µs, +590 ns from the median".into(),
            }]
        );
        assert_eq!(m.outliers_reason, None);
        // Phases: forward, backward, optimizer (0 in every step), other.
        let keys: Vec<&str> = m.phases.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["forward", "backward", "optimizer", "other"]);
        let back = &m.phases[1];
        assert_eq!((back.spread.median, back.spread.mad), (500, 10));
        assert_eq!(
            back.per_step_text(&m.steps),
            "step 2: 490 ns, step 3: 500 ns, step 4: 500 ns, step 5: 490 ns, step 6: 1.06 µs"
        );
        assert_eq!(m.modules.len(), 1);
        assert_eq!(m.modules[0].key, "enc");
        assert_eq!(m.modules[0].spread.median, 300);
        // Shape churn at `enc`: [2, 8] in steps 2, 3, 5, 6 and [3, 8] in step 4.
        assert_eq!(
            m.churn,
            [ChurnLine {
                path: "enc".into(),
                variants: vec![
                    ("[2, 8]".into(), "2, 3, 5, 6".into()),
                    ("[3, 8]".into(), "4".into()),
                ],
            }]
        );
        // The set's findings include the outlier step, linked to its row, whose link shows
        // step 6 (position 4); the others read the first step (2, position 0).
        let at = m
            .findings
            .rows
            .iter()
            .position(|r| r.rule == "outlier_step")
            .unwrap();
        let outlier = &m.findings.rows[at];
        assert_eq!(outlier.stake_value, 590);
        assert_eq!(
            outlier.target,
            Some(FindingTarget::Row {
                testid: "step-row".into(),
                attr: Some(("data-step", "6".into())),
            })
        );
        assert_eq!(m.finding_step(at), Some(4));
        assert_eq!(
            m.finding_reads(at).unwrap(),
            "Read from all 5 steps; its link shows step 6 (step-6.trace6.jsonl)."
        );
        // Nothing else: no phase (backward 490 of 1000 ns) nor module (enc 300 ns) over half of
        // step 2, no memory, and gradients are a note.
        assert_eq!(m.findings.rows.len(), 1);
        assert_eq!(m.finding_step(m.findings.rows.len()), None);
    }

    #[test]
    fn findings_of_one_step_say_so_and_lead_into_it() {
        // Step 2 (opened second) spends 700 of 1000 ns in forward, 600 of them in `enc`.
        let m = StepsModel::of_run(named(vec![
            step_doc("r", 3, 1000, 400, 490, 300, "2"),
            step_doc("r", 2, 1000, 700, 200, 600, "2"),
        ]))
        .unwrap();
        let rules: Vec<&str> = m.findings.rows.iter().map(|r| r.rule.as_str()).collect();
        assert!(rules.contains(&"dominant_phase"), "{rules:?}");
        assert!(rules.contains(&"dominant_module"), "{rules:?}");
        for (i, r) in m.findings.rows.iter().enumerate() {
            assert_eq!(m.finding_step(i), Some(0), "{}", r.rule);
            assert_eq!(
                m.finding_reads(i).unwrap(),
                "Read from step 2 (step-2.trace6.jsonl), the first captured; its link shows that step."
            );
        }
        // The module row the link names is step 2's `enc`.
        let module = m
            .findings
            .rows
            .iter()
            .find(|r| r.rule == "dominant_module")
            .unwrap();
        assert_eq!(module.title, "enc takes 60% of the step");
    }

    #[test]
    fn a_step_is_built_when_first_shown_and_kept() {
        let m = StepsModel::of_run(named(vec![
            step_doc("r", 6, 1600, 420, 1060, 320, "2,8"),
            step_doc("r", 2, 1000, 400, 490, 300, "2,8"),
            step_doc("r", 4, 1010, 400, 500, 300, "2,8"),
        ]))
        .unwrap();
        // Nothing is built before a step is shown.
        assert_eq!(
            (0..3).map(|p| m.is_built(p)).collect::<Vec<_>>(),
            [false; 3]
        );
        // Capture order: 2, 4, 6; position 2 is step 6, its document whole (4 spans).
        let six = m.model(2).unwrap();
        assert_eq!(six.doc.meta.as_ref().unwrap().capture_step, 6);
        assert_eq!(six.doc.spans.len(), 4);
        assert_eq!(six.doc.summary().total_ns, 1600);
        assert_eq!(
            (0..3).map(|p| m.is_built(p)).collect::<Vec<_>>(),
            [false, false, true]
        );
        // Asked again: the same models, not a second build.
        assert!(Arc::ptr_eq(&six, &m.model(2).unwrap()));
        let two = m.model(0).unwrap();
        assert_eq!(two.doc.meta.as_ref().unwrap().capture_step, 2);
        assert_eq!(two.doc.summary().total_ns, 1000);
        assert_eq!(
            (0..3).map(|p| m.is_built(p)).collect::<Vec<_>>(),
            [true, false, true]
        );
        assert!(m.model(3).is_none());
        assert!(!m.is_built(3));
    }

    #[test]
    fn the_urls_step_falls_back_to_the_first() {
        let m = StepsModel::of_run(named(vec![
            step_doc("r", 5, 1000, 400, 490, 300, "2"),
            step_doc("r", 3, 1000, 400, 490, 300, "2"),
        ]))
        .unwrap();
        assert_eq!(m.position_of(Some("5")), 1);
        assert_eq!(m.position_of(Some("3")), 0);
        // Unknown, empty or absent: the first captured (step 3).
        for step in [Some("4"), Some(""), Some("x"), None] {
            assert_eq!(m.position_of(step), 0, "{step:?}");
        }
    }

    #[test]
    fn two_steps_say_why_there_are_no_outliers() {
        let m = StepsModel::of_run(named(vec![
            step_doc("r", 1, 100, 40, 50, 30, "2"),
            step_doc("r", 2, 900, 40, 50, 30, "2"),
        ]))
        .unwrap();
        assert!(m.outliers.is_empty());
        assert_eq!(
            m.outliers_reason.as_deref(),
            Some("2 step(s): outlier steps need at least 3")
        );
        // The findings panel keeps the rule's note instead of dropping it.
        assert!(m
            .findings
            .notes
            .contains(&"outlier_step: 2 step(s): outlier steps need at least 3".to_string()));
        assert_eq!(signed_ns_text(-40_000), "−40.0 µs");
        assert_eq!(step_name(None), "(no meta)");
    }
}
