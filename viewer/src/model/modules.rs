//! The modules panel: module spans by module path or by leaf name, heaviest first — the rows
//! of `schema::analysis::modules::module_rows`, the same numbers as `candle-trace query --kind modules`.

use std::sync::Arc;

use candle_trace_schema::analysis::coverage::TraceCoverage;
use candle_trace_schema::analysis::module_tree::{trace_tree, ModuleTree};
use candle_trace_schema::analysis::modules::{
    is_module_span, module_rows, ModuleGrouping, ModulePaths, ModuleRow,
};
use candle_trace_schema::analysis::range::{module_rows_in, TimeRange};
use candle_trace_schema::analysis::units::format_ns;

use super::module_tree::share_text;
use candle_trace_schema::format::document::TraceDocument;

/// Rows shown before "Show all" (the modules table and the module-pairs table).
pub const SHOWN_ROWS: usize = 50;

/// What the panel says when the trace has no module spans, and how to capture them.
pub const NO_MODULE_SPANS: &str = "no module spans: install candle-trace before building the model (`Recorder::builder(..).install()`; candle-transformers creates its spans when the model is built), and build plain candle-nn layers, which open no span, with `candle_trace_capture::nn::{linear, conv2d, embedding, …}`";

/// What the tab says when the backward has no module spans below it.
pub const BACKWARD_UNSPLIT: &str =
    "backward is one span with no per-module split (candle's backward opens no spans)";

/// One row of the modules table.
#[derive(Debug, Clone, PartialEq)]
pub struct ModuleTableRow {
    /// The module path (`block[1]/attn/linear[3]`) or the leaf name (`linear`).
    pub key: String,
    /// Module spans in the row.
    pub calls: u64,
    /// Sum of their durations (exact).
    pub total_ns: u64,
    /// Sum of their self times (exact).
    pub self_ns: u64,
    /// `total_ns / calls` (exact).
    pub mean_ns: u64,
    /// Total, human.
    pub total: String,
    /// Self time, human.
    pub self_time: String,
    /// Mean, human.
    pub mean: String,
    /// Share of the measured total (`12.5%`), `–` when the measured total is 0.
    pub share: String,
    /// Share in percent for the bar, 0 without a measured total.
    pub share_pct: f64,
    /// The share as a ratio, `None` without a measured total.
    pub share_ratio: Option<f64>,
}

impl ModuleTableRow {
    /// The row of the schema's `r`.
    pub fn of(r: &ModuleRow) -> Self {
        ModuleTableRow {
            key: r.key.clone(),
            calls: r.calls,
            total_ns: r.total_ns,
            self_ns: r.self_ns,
            mean_ns: r.mean_ns,
            total: format_ns(r.total_ns),
            self_time: format_ns(r.self_ns),
            mean: format_ns(r.mean_ns),
            share: share_text(r.share),
            share_pct: r.share.map_or(0.0, |s| (s * 100.0).clamp(0.0, 100.0)),
            share_ratio: r.share,
        }
    }
}

/// The panel: both groupings, built once, and the links between its rows and the spans.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModulesPanel {
    /// One row per module path, by total time, largest first, then by path.
    pub by_path: Vec<ModuleTableRow>,
    /// One row per leaf name, in the same order.
    pub by_name: Vec<ModuleTableRow>,
    /// Which spans each row stands for, and each span's row.
    pub links: super::module_tree::ModuleLinks,
    /// The schema's module tree of the whole run (time, memory, parameters, gradients).
    pub tree: Arc<ModuleTree>,
    /// `modules cover 87% of forward (…)` over every forward span, when there is one.
    pub coverage: Option<String>,
    /// Said when the backward is one span with no per-module split.
    pub backward_note: Option<&'static str>,
    /// The document's module paths (the rows of a range are grouped by them).
    paths: Arc<ModulePaths>,
}

impl ModulesPanel {
    /// The panel of `doc`.
    pub fn of(doc: &TraceDocument) -> Self {
        Self::with_paths(doc, Arc::new(ModulePaths::new(doc)))
    }

    /// The panel of `doc` keyed by `paths` (the document's, built once for every view that
    /// names modules).
    pub fn with_paths(doc: &TraceDocument, paths: Arc<ModulePaths>) -> Self {
        if !doc.spans.iter().any(is_module_span) {
            return ModulesPanel::default();
        }
        let coverage = TraceCoverage::of(doc);
        let rows = |g| {
            module_rows(doc, &paths, g)
                .iter()
                .map(ModuleTableRow::of)
                .collect()
        };
        ModulesPanel {
            by_path: rows(ModuleGrouping::Path),
            by_name: rows(ModuleGrouping::Name),
            links: super::module_tree::ModuleLinks::of(doc, &paths),
            tree: Arc::new(trace_tree(doc, &paths)),
            coverage: coverage.overall.sentence(),
            backward_note: coverage.backward_unsplit.then_some(BACKWARD_UNSPLIT),
            paths,
        }
    }

    /// The rows of one grouping for the part of `doc` (this panel's document) inside `range`
    /// (`schema::analysis::range::module_rows_in`).
    pub fn rows_in(
        &self,
        doc: &TraceDocument,
        grouping: ModuleGrouping,
        range: TimeRange,
    ) -> Vec<ModuleTableRow> {
        if self.is_empty() {
            return Vec::new();
        }
        module_rows_in(doc, &self.paths, grouping, range)
            .iter()
            .map(ModuleTableRow::of)
            .collect()
    }

    /// The rows of one grouping.
    pub fn rows(&self, grouping: ModuleGrouping) -> &[ModuleTableRow] {
        match grouping {
            ModuleGrouping::Path => &self.by_path,
            ModuleGrouping::Name => &self.by_name,
        }
    }

    /// The document's module paths (empty when it has no module spans).
    pub fn paths(&self) -> &ModulePaths {
        &self.paths
    }

    /// True when the trace has no module spans.
    pub fn is_empty(&self) -> bool {
        self.by_path.is_empty()
    }
}

/// The sentence above a "Show all" button: `The 50 module paths with the most time, of 60. `
/// while the heaviest `shown` of `total` are listed, `All 60 module paths. ` once all are.
pub fn rows_shown_text(noun: &str, shown: usize, total: usize, all: bool) -> String {
    if all {
        format!("All {total} {noun}. ")
    } else {
        format!("The {shown} {noun} with the most time, of {total}. ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step (measured, 1000 ns) holding two blocks, each with an `attn` holding one
    /// `linear`, and one more `linear` directly in the step:
    ///
    /// ```text
    /// step 0..1000 (function, measured)
    ///   block 0..400     attn 50..350     linear 100..300
    ///   block 400..700   attn 450..650    linear 500..550
    ///   linear 800..900
    /// ```
    fn doc() -> TraceDocument {
        let meta = r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00Z","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#;
        let mut lines = vec![
            meta.to_string(),
            r#"{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}"#.to_string(),
        ];
        let mut span = |id: &str, parent: &str, name: &str, start: u64, dur: u64| {
            lines.push(format!(
                r#"{{"kind":"span_start","id":"{id}","parent_id":"{parent}","name":"{name}","start_ns":{start},"span_kind":"module","measured":false}}"#
            ));
            lines.push(format!(
                r#"{{"kind":"span_end","id":"{id}","duration_ns":{dur}}}"#
            ));
        };
        span("b0", "s", "block", 0, 400);
        span("a0", "b0", "attn", 50, 300);
        span("l0", "a0", "linear", 100, 200);
        span("b1", "s", "block", 400, 300);
        span("a1", "b1", "attn", 450, 200);
        span("l1", "a1", "linear", 500, 50);
        span("l2", "s", "linear", 800, 100);
        lines.push(r#"{"kind":"span_end","id":"s","duration_ns":1000}"#.to_string());
        TraceDocument::from_bytes(lines.join("\n").as_bytes())
    }

    fn numbers(rows: &[ModuleTableRow]) -> Vec<(&str, u64, u64, u64, u64)> {
        rows.iter()
            .map(|r| (r.key.as_str(), r.calls, r.total_ns, r.self_ns, r.mean_ns))
            .collect()
    }

    #[test]
    fn rows_by_path_are_heaviest_first_with_self_time() {
        let p = ModulesPanel::of(&doc());
        // block[0]: 400 - attn 300 = 100 self; block[0]/attn: 300 - 200 = 100; its linear 200.
        // block[1]: 300 - 200 = 100; block[1]/attn: 200 - 50 = 150; its linear 50.
        // linear directly in the step: 100 (path `linear`).
        assert_eq!(
            numbers(&p.by_path),
            vec![
                ("block[0]", 1, 400, 100, 400),
                ("block[0]/attn", 1, 300, 100, 300),
                ("block[1]", 1, 300, 100, 300),
                ("block[0]/attn/linear", 1, 200, 200, 200),
                ("block[1]/attn", 1, 200, 150, 200),
                ("linear", 1, 100, 100, 100),
                ("block[1]/attn/linear", 1, 50, 50, 50),
            ]
        );
        let first = &p.by_path[0];
        assert_eq!(first.share, "40.0%");
        assert_eq!(first.share_pct, 40.0);
        assert_eq!(first.total, "400 ns");
    }

    #[test]
    fn rows_by_name_add_every_place() {
        let p = ModulesPanel::of(&doc());
        // block: 400 + 300 = 700, self 100 + 100; attn: 300 + 200 = 500, self 100 + 150;
        // linear: 200 + 50 + 100 = 350 in 3 calls, mean 116 (integer division).
        assert_eq!(
            numbers(p.rows(ModuleGrouping::Name)),
            vec![
                ("block", 2, 700, 200, 350),
                ("attn", 2, 500, 250, 250),
                ("linear", 3, 350, 350, 116),
            ]
        );
        assert_eq!(p.by_name[2].share, "35.0%");
    }

    #[test]
    fn no_module_spans_is_empty() {
        let doc = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/valid_out_of_order.trace6.jsonl"
        ));
        let has_modules = doc
            .spans
            .iter()
            .any(|s| s.span_kind == candle_trace_schema::format::events::SpanKind::Module);
        assert_eq!(ModulesPanel::of(&doc).is_empty(), !has_modules);
        assert!(ModulesPanel::of(&TraceDocument::from_bytes(b"")).is_empty());
    }

    #[test]
    fn share_and_shown_texts() {
        assert_eq!(share_text(None), "–");
        assert_eq!(share_text(Some(0.125)), "12.5%");
        assert_eq!(
            rows_shown_text("module paths", 50, 60, false),
            "The 50 module paths with the most time, of 60. "
        );
        assert_eq!(
            rows_shown_text("module paths", 50, 60, true),
            "All 60 module paths. "
        );
    }
}
