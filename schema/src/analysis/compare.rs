//! Comparing a candidate trace with a baseline: [`compare`] → [`TraceComparison`].
//!
//! Choices (SCHEMA.md has no comparison section):
//! - Two runs are comparable when their meta agree on `entrypoint`, `phase`, `device` and
//!   `timing_mode` ([`meta_mismatches`]); a missing meta counts as the value `(no meta)`. The
//!   comparison itself is always computed; refusing is the caller's decision.
//! - Spans match by **name path**: the names from the layout root down to the span, joined with
//!   `/` ([`crate::analysis::spans::span_path`]). Spans with the same path are aggregated: their count and
//!   the sum of their durations (an unclosed span counts 0, as everywhere).
//! - Modules match by module key ([`crate::analysis::modules`]: the module name, or the
//!   nesting path without names), with [`module_rows`]' calls and total time per key.
//! - Ops match by (`op_name`, `shape`, `dtype`), aggregated by count and summed `duration_ns`.
//! - A path, module or op group in only one file is `new` (candidate only) or `vanished` (baseline only);
//!   its delta is computed against 0.
//! - Deltas are `candidate − baseline` (signed ns); `percent` is `delta / baseline × 100`, absent
//!   when the baseline is 0. Rows are sorted by |delta| (largest first), then by key.
//! - Memory: the overall peak (`peak_bytes`) and the live bytes per category at each file's own
//!   peak.
//! - Gradients: per parameter (`root`, `key`; the last record wins when a file repeats one), every
//!   parameter whose state differs, including ones present in only one file.
//! - The eight summary numbers, in SCHEMA.md's order.

use crate::analysis::sort;
use crate::analysis::spans::span_path;
use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use serde::Serialize;

use crate::analysis::modules::{module_rows, ModuleGrouping, ModulePaths};
use crate::analysis::ops::{op_groups, OpGrouping};
use crate::format::document::TraceDocument;
use crate::format::events::{GradientState, TensorCategory};

/// A meta field that differs between the two runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MetaMismatch {
    /// `entrypoint`, `phase`, `device` or `timing_mode`.
    pub field: &'static str,
    /// The baseline's value.
    pub base: String,
    /// The candidate's value.
    pub cand: String,
}

impl core::fmt::Display for MetaMismatch {
    /// `device differs (baseline `cpu`, candidate `cuda:0`)`: the CLI's and the viewer's wording.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{} differs (baseline `{}`, candidate `{}`)",
            self.field, self.base, self.cand
        )
    }
}

/// Whether a row exists in both files or only one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Presence {
    /// In both.
    Both,
    /// Only in the candidate.
    New,
    /// Only in the baseline.
    Vanished,
}

impl Presence {
    /// `both`, `new` or `vanished`.
    pub fn as_str(self) -> &'static str {
        match self {
            Presence::Both => "both",
            Presence::New => "new",
            Presence::Vanished => "vanished",
        }
    }
}

/// `cand − base` as a signed number (saturating at the i64 range).
pub fn signed_delta(base: u64, cand: u64) -> i64 {
    let d = i128::from(cand) - i128::from(base);
    d.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// `delta / base × 100`, `None` when `base` is 0.
pub fn percent(base: u64, cand: u64) -> Option<f64> {
    (base > 0).then(|| (cand as f64 - base as f64) / base as f64 * 100.0)
}

/// One of the eight summary numbers in both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryDelta {
    /// The TraceSummary field name.
    pub field: &'static str,
    /// Baseline value.
    pub base: u64,
    /// Candidate value.
    pub cand: u64,
    /// `cand − base`.
    pub delta: i64,
    /// `delta / base × 100`, absent when base is 0.
    pub percent: Option<f64>,
}

/// The time of one span name path (or one module key) in both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathDelta {
    /// Root → span names joined with `/` (in [`TraceComparison::modules`]: the module key).
    pub path: String,
    /// Spans with this path (calls of the module) in the baseline.
    pub base_count: u64,
    /// Spans with this path (calls of the module) in the candidate.
    pub cand_count: u64,
    /// Summed duration in the baseline.
    pub base_ns: u64,
    /// Summed duration in the candidate.
    pub cand_ns: u64,
    /// `cand_ns − base_ns`.
    pub delta_ns: i64,
    /// `delta_ns / base_ns × 100`, absent when base_ns is 0.
    pub percent: Option<f64>,
    /// In both, new or vanished.
    pub presence: Presence,
}

/// The time of one (op name, shape, dtype) group in both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpDelta {
    /// Op name.
    pub op_name: String,
    /// Output shape.
    pub shape: Vec<u64>,
    /// Output dtype.
    pub dtype: String,
    /// Ops in the baseline group.
    pub base_count: u64,
    /// Ops in the candidate group.
    pub cand_count: u64,
    /// Summed duration in the baseline.
    pub base_ns: u64,
    /// Summed duration in the candidate.
    pub cand_ns: u64,
    /// `cand_ns − base_ns`.
    pub delta_ns: i64,
    /// `delta_ns / base_ns × 100`, absent when base_ns is 0.
    pub percent: Option<f64>,
    /// In both, new or vanished.
    pub presence: Presence,
}

/// Live bytes of one category at each run's peak.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CategoryDelta {
    /// Tensor category.
    pub category: &'static str,
    /// Baseline bytes at its peak.
    pub base_bytes: u64,
    /// Candidate bytes at its peak.
    pub cand_bytes: u64,
    /// `cand − base`.
    pub delta_bytes: i64,
}

/// Memory peak of both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryDelta {
    /// Baseline `peak_bytes`.
    pub base_peak_bytes: u64,
    /// Candidate `peak_bytes`.
    pub cand_peak_bytes: u64,
    /// `cand − base`.
    pub delta_bytes: i64,
    /// `delta / base × 100`, absent when the baseline peak is 0.
    pub percent: Option<f64>,
    /// Device of the baseline peak.
    pub base_peak_device: Option<String>,
    /// Device of the candidate peak.
    pub cand_peak_device: Option<String>,
    /// Per category, in [`TensorCategory::ALL`] order.
    pub by_category: Vec<CategoryDelta>,
}

/// A parameter whose gradient state differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GradientChange {
    /// VarMap / VarBuilder root.
    pub root: String,
    /// Parameter key.
    pub key: String,
    /// Baseline state, `None` when the baseline has no record for it.
    pub base: Option<GradientState>,
    /// Candidate state, `None` when the candidate has no record for it.
    pub cand: Option<GradientState>,
}

/// Everything [`compare`] computes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceComparison {
    /// Meta fields that differ (empty when the runs are comparable).
    pub mismatches: Vec<MetaMismatch>,
    /// The eight summary numbers.
    pub summary: Vec<SummaryDelta>,
    /// Span name paths, by |delta| descending.
    pub paths: Vec<PathDelta>,
    /// Modules by key, by |delta| descending.
    pub modules: Vec<PathDelta>,
    /// Op groups by (name, shape, dtype), by |delta| descending.
    pub ops: Vec<OpDelta>,
    /// Memory peaks.
    pub memory: MemoryDelta,
    /// Gradient state changes, by (root, key).
    pub gradients: Vec<GradientChange>,
}

impl TraceComparison {
    /// True when entrypoint, phase, device and timing mode agree.
    pub fn is_comparable(&self) -> bool {
        self.mismatches.is_empty()
    }
}

/// The meta fields that must agree for a comparison to mean something, where they differ.
pub fn meta_mismatches(base: &TraceDocument, cand: &TraceDocument) -> Vec<MetaMismatch> {
    fn fields(doc: &TraceDocument) -> [String; 4] {
        match &doc.meta {
            Some(m) => [
                m.entrypoint.clone(),
                snake_case(&m.phase),
                m.device.clone(),
                snake_case(&m.timing_mode),
            ],
            None => core::array::from_fn(|_| String::from("(no meta)")),
        }
    }
    let (b, c) = (fields(base), fields(cand));
    ["entrypoint", "phase", "device", "timing_mode"]
        .into_iter()
        .zip(b.into_iter().zip(c))
        .filter(|(_, (b, c))| b != c)
        .map(|(field, (base, cand))| MetaMismatch { field, base, cand })
        .collect()
}

/// The JSON spelling of a unit enum (`train`, `device_synchronized` ...).
fn snake_case<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

fn by_abs_delta<T>(rows: &mut [T], delta: impl Fn(&T) -> i64, key: impl Fn(&T) -> String) {
    sort::by(rows, |a, b| {
        delta(b)
            .unsigned_abs()
            .cmp(&delta(a).unsigned_abs())
            .then_with(|| key(a).cmp(&key(b)))
    });
}

fn presence(base_count: u64, cand_count: u64) -> Presence {
    match (base_count > 0, cand_count > 0) {
        (true, true) => Presence::Both,
        (false, _) => Presence::New,
        (true, false) => Presence::Vanished,
    }
}

/// Rows of (count, ns) per side, sorted by |delta|.
fn path_deltas(sums: BTreeMap<String, [(u64, u64); 2]>) -> Vec<PathDelta> {
    let mut rows: Vec<PathDelta> = sums
        .into_iter()
        .map(|(path, [(bc, bn), (cc, cn)])| PathDelta {
            path,
            base_count: bc,
            cand_count: cc,
            base_ns: bn,
            cand_ns: cn,
            delta_ns: signed_delta(bn, cn),
            percent: percent(bn, cn),
            presence: presence(bc, cc),
        })
        .collect();
    by_abs_delta(&mut rows, |p| p.delta_ns, |p| p.path.clone());
    rows
}

/// Compare `cand` against `base` (see the module docs).
pub fn compare(base: &TraceDocument, cand: &TraceDocument) -> TraceComparison {
    let (sb, sc) = (base.summary(), cand.summary());
    let pairs: [(&'static str, u64, u64); 8] = [
        ("op_count", sb.op_count, sc.op_count),
        ("total_ns", sb.total_ns, sc.total_ns),
        ("span_count", sb.span_count, sc.span_count),
        ("root_span_count", sb.root_span_count, sc.root_span_count),
        ("max_depth", sb.max_depth, sc.max_depth),
        ("alloc_count", sb.alloc_count, sc.alloc_count),
        ("free_count", sb.free_count, sc.free_count),
        ("peak_bytes", sb.peak_bytes, sc.peak_bytes),
    ];
    let summary = pairs
        .into_iter()
        .map(|(field, b, c)| SummaryDelta {
            field,
            base: b,
            cand: c,
            delta: signed_delta(b, c),
            percent: percent(b, c),
        })
        .collect();

    // Span paths: (count, ns) per side.
    let mut paths: BTreeMap<String, [(u64, u64); 2]> = BTreeMap::new();
    for (side, doc) in [base, cand].into_iter().enumerate() {
        for (i, s) in doc.spans.iter().enumerate() {
            let e = &mut paths.entry(span_path(doc, i)).or_default()[side];
            e.0 += 1;
            e.1 = e.1.saturating_add(s.duration_or_zero());
        }
    }
    let paths = path_deltas(paths);

    // Modules: (calls, total) per side.
    let mut modules: BTreeMap<String, [(u64, u64); 2]> = BTreeMap::new();
    for (side, doc) in [base, cand].into_iter().enumerate() {
        let keys = ModulePaths::new(doc);
        for row in module_rows(doc, &keys, ModuleGrouping::Path) {
            modules.entry(row.key).or_default()[side] = (row.calls, row.total_ns);
        }
    }
    let modules = path_deltas(modules);

    // Ops by (name, shape, dtype).
    type OpKey = (String, Vec<u64>, String);
    let mut ops: BTreeMap<OpKey, [(u64, u64); 2]> = BTreeMap::new();
    for (side, doc) in [base, cand].into_iter().enumerate() {
        for g in op_groups(&doc.ops, OpGrouping::NameShapeDtype) {
            let key = (
                g.op_name,
                g.shape.unwrap_or_default(),
                g.dtype.unwrap_or_default(),
            );
            let e = &mut ops.entry(key).or_default()[side];
            e.0 += g.count;
            e.1 = e.1.saturating_add(g.total_ns);
        }
    }
    let mut ops: Vec<OpDelta> = ops
        .into_iter()
        .map(|((op_name, shape, dtype), [(bc, bn), (cc, cn)])| OpDelta {
            op_name,
            shape,
            dtype,
            base_count: bc,
            cand_count: cc,
            base_ns: bn,
            cand_ns: cn,
            delta_ns: signed_delta(bn, cn),
            percent: percent(bn, cn),
            presence: presence(bc, cc),
        })
        .collect();
    by_abs_delta(
        &mut ops,
        |o| o.delta_ns,
        |o| alloc::format!("{}{:?}{}", o.op_name, o.shape, o.dtype),
    );

    let (mb, mc) = (&base.memory_profile, &cand.memory_profile);
    let memory = MemoryDelta {
        base_peak_bytes: mb.peak_bytes,
        cand_peak_bytes: mc.peak_bytes,
        delta_bytes: signed_delta(mb.peak_bytes, mc.peak_bytes),
        percent: percent(mb.peak_bytes, mc.peak_bytes),
        base_peak_device: mb.peak_device.clone(),
        cand_peak_device: mc.peak_device.clone(),
        by_category: TensorCategory::ALL
            .iter()
            .map(|c| {
                let (b, x) = (
                    mb.peak_by_category[c.index()],
                    mc.peak_by_category[c.index()],
                );
                CategoryDelta {
                    category: c.as_str(),
                    base_bytes: b,
                    cand_bytes: x,
                    delta_bytes: signed_delta(b, x),
                }
            })
            .collect(),
    };

    let mut grads: BTreeMap<(String, String), [Option<GradientState>; 2]> = BTreeMap::new();
    for (side, doc) in [base, cand].into_iter().enumerate() {
        for g in &doc.gradients {
            grads
                .entry((g.root.to_string(), g.key.to_string()))
                .or_default()[side] = Some(g.state);
        }
    }
    let gradients = grads
        .into_iter()
        .filter(|(_, [b, c])| b != c)
        .map(|((root, key), [b, c])| GradientChange {
            root,
            key,
            base: b,
            cand: c,
        })
        .collect();

    TraceComparison {
        mismatches: meta_mismatches(base, cand),
        summary,
        paths,
        modules,
        ops,
        memory,
        gradients,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::vec;

    fn meta(device: &str) -> String {
        format!(
            r#"{{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":2,"warmup_steps":1,"device":"{device}","timing_mode":"host","tags":{{}}}}"#
        )
    }

    fn doc(device: &str, body: &[&str]) -> TraceDocument {
        let mut text = meta(device);
        for l in body {
            text.push('\n');
            text.push_str(l);
        }
        text.push('\n');
        TraceDocument::from_bytes(text.as_bytes())
    }

    #[test]
    fn paths_ops_and_gradients_by_hand() {
        let base = doc(
            "cpu",
            &[
                r#"{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
                r#"{"kind":"span_start","id":"a","parent_id":"s","name":"mm","start_ns":1,"span_kind":"op"}"#,
                r#"{"kind":"span_end","id":"a","duration_ns":40}"#,
                r#"{"kind":"span_start","id":"b","parent_id":"s","name":"mm","start_ns":50,"span_kind":"op"}"#,
                r#"{"kind":"span_end","id":"b","duration_ns":20}"#,
                r#"{"kind":"span_start","id":"old","parent_id":"s","name":"gone","start_ns":80,"span_kind":"op"}"#,
                r#"{"kind":"span_end","id":"old","duration_ns":5}"#,
                r#"{"kind":"span_end","id":"s","duration_ns":100}"#,
                r#"{"kind":"op","span_id":"a","op_name":"matmul","shape":[2,2],"dtype":"f32","device":"cpu","duration_ns":30}"#,
                r#"{"kind":"gradient","event_id":"g1","root":"m","key":"w","state":"present"}"#,
                r#"{"kind":"gradient","event_id":"g2","root":"m","key":"b","state":"zero"}"#,
            ],
        );
        let cand = doc(
            "cpu",
            &[
                r#"{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
                r#"{"kind":"span_start","id":"a","parent_id":"s","name":"mm","start_ns":1,"span_kind":"op"}"#,
                r#"{"kind":"span_end","id":"a","duration_ns":25}"#,
                r#"{"kind":"span_start","id":"n","parent_id":"s","name":"fused","start_ns":30,"span_kind":"op"}"#,
                r#"{"kind":"span_end","id":"n","duration_ns":8}"#,
                r#"{"kind":"span_end","id":"s","duration_ns":70}"#,
                r#"{"kind":"op","span_id":"a","op_name":"matmul","shape":[2,2],"dtype":"f32","device":"cpu","duration_ns":12}"#,
                r#"{"kind":"op","span_id":"a","op_name":"matmul","shape":[2,2],"dtype":"bf16","device":"cpu","duration_ns":3}"#,
                r#"{"kind":"gradient","event_id":"g1","root":"m","key":"w","state":"non_finite"}"#,
                r#"{"kind":"gradient","event_id":"g2","root":"m","key":"b","state":"zero"}"#,
            ],
        );
        let c = compare(&base, &cand);
        assert!(c.is_comparable());
        let rows: Vec<(&str, u64, u64, u64, u64, i64, Presence)> = c
            .paths
            .iter()
            .map(|p| {
                (
                    p.path.as_str(),
                    p.base_count,
                    p.cand_count,
                    p.base_ns,
                    p.cand_ns,
                    p.delta_ns,
                    p.presence,
                )
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                ("step/mm", 2, 1, 60, 25, -35, Presence::Both),
                ("step", 1, 1, 100, 70, -30, Presence::Both),
                ("step/fused", 0, 1, 0, 8, 8, Presence::New),
                ("step/gone", 1, 0, 5, 0, -5, Presence::Vanished),
            ]
        );
        assert_eq!(c.paths[0].percent, Some(-35.0 / 60.0 * 100.0));
        assert_eq!(c.paths[2].percent, None);
        let ops: Vec<(&str, &str, i64, Presence)> = c
            .ops
            .iter()
            .map(|o| (o.op_name.as_str(), o.dtype.as_str(), o.delta_ns, o.presence))
            .collect();
        assert_eq!(
            ops,
            vec![
                ("matmul", "f32", -18, Presence::Both),
                ("matmul", "bf16", 3, Presence::New)
            ]
        );
        assert_eq!(
            c.gradients,
            vec![GradientChange {
                root: "m".into(),
                key: "w".into(),
                base: Some(GradientState::Present),
                cand: Some(GradientState::NonFinite)
            }]
        );
        let total = c.summary.iter().find(|s| s.field == "total_ns").unwrap();
        assert_eq!((total.base, total.cand, total.delta), (100, 70, -30));
        assert_eq!(total.percent, Some(-30.0));
        let ops = c.summary.iter().find(|s| s.field == "op_count").unwrap();
        assert_eq!((ops.base, ops.cand, ops.delta), (1, 2, 1));
    }

    #[test]
    fn meta_mismatches_name_field_and_values() {
        let m = meta_mismatches(&doc("cpu", &[]), &doc("cuda:0", &[]));
        assert_eq!(
            m,
            vec![MetaMismatch {
                field: "device",
                base: "cpu".into(),
                cand: "cuda:0".into()
            }]
        );
        let no_meta = TraceDocument::from_bytes(b"");
        let m = meta_mismatches(&doc("cpu", &[]), &no_meta);
        assert_eq!(m.len(), 4);
        assert_eq!(m[1].base, "train");
        assert_eq!(m[1].cand, "(no meta)");
    }
}
