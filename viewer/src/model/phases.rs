//! The training-phase panel: the measured region split into forward / backward / optimizer /
//! other (a bar and a table), and each module's forward time next to its backward time.
//! The rules (outermost stepped spans, module paths) are `candle_trace_schema::analysis::phases`'.

use candle_trace_schema::analysis::modules::names_mode;
use candle_trace_schema::analysis::phases::{module_pairs, phase_breakdown};
use candle_trace_schema::analysis::units::format_ns;
use candle_trace_schema::format::document::TraceDocument;

/// One phase.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseRow {
    /// `forward`, `backward`, `optimizer` or `other`.
    pub phase: &'static str,
    /// Exact ns (`data-value`).
    pub ns: u64,
    /// Human time.
    pub time: String,
    /// Share of the region in percent.
    pub share_pct: f64,
    /// `41.2 %`.
    pub share: String,
    /// Left edge of the bar segment, percent of the bar.
    pub left_pct: f64,
}

/// One module path.
#[derive(Debug, Clone, PartialEq)]
pub struct ModuleRow {
    /// Module path.
    pub path: String,
    /// Forward ns.
    pub forward_ns: u64,
    /// Backward ns.
    pub backward_ns: u64,
    /// Forward, human (with the span count when more than one).
    pub forward: String,
    /// Backward, human (`—` without backward spans).
    pub backward: String,
    /// backward / forward, `1.17×`, or `—` when either side is missing.
    pub ratio: String,
    /// Forward bar width, percent of the largest time in the table.
    pub forward_pct: f64,
    /// Backward bar width, percent of the largest time in the table.
    pub backward_pct: f64,
}

/// The panel; `None` rows mean no measured region.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PhasesPanel {
    /// Name of the measured span.
    pub region: String,
    /// Its duration.
    pub region_ns: u64,
    /// Forward, backward, optimizer, other.
    pub rows: Vec<PhaseRow>,
    /// ns by which the steps exceed the region (normally 0).
    pub overlap_ns: u64,
    /// Module pairs, largest first.
    pub modules: Vec<ModuleRow>,
    /// How a forward and a backward span make one row: by module name where the capture
    /// named modules, else by module path.
    pub pairing: &'static str,
}

/// [`PhasesPanel::pairing`] where spans carry module names (the modules tab's keys).
pub const PAIRED_BY_NAME: &str = "Module spans are paired by module name (the weights each loaded, as in the Modules tab), so a forward and a backward span of model.layers.0.mlp make one row; a span that loaded no weight takes the common prefix of what it holds.";

/// [`PhasesPanel::pairing`] without module names.
pub const PAIRED_BY_PATH: &str = "Module spans are paired by module path: the names of the module spans from the measured region down to the span, so forward/encoder/attn and backward/encoder/attn are both encoder/attn.";

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64 * 100.0
    }
}

fn times(ns: u64, count: u64) -> String {
    match count {
        0 => "—".to_string(),
        1 => format_ns(ns),
        n => format!("{} ({n}×)", format_ns(ns)),
    }
}

impl PhasesPanel {
    /// The panel of `doc`; default (empty) without a measured span.
    pub fn of(doc: &TraceDocument) -> Self {
        match phase_breakdown(doc) {
            Some(b) => Self::of_parts(doc, &b, module_pairs(doc)),
            None => PhasesPanel::default(),
        }
    }

    /// The panel of a breakdown `b` of `doc` and its module pairs (the whole run's, or a
    /// range's: `schema::analysis::range`).
    pub fn of_parts(
        doc: &TraceDocument,
        b: &candle_trace_schema::analysis::phases::PhaseBreakdown,
        pairs: Vec<candle_trace_schema::analysis::phases::ModulePair>,
    ) -> Self {
        // Shares are of the region, or of the steps' sum when they exceed it.
        // Saturating: spans of a hostile file can sum past u64 (in wasm, without overflow
        // checks, the sum would wrap and the shares explode).
        let whole = b.region_ns.max(
            b.forward_ns
                .saturating_add(b.backward_ns)
                .saturating_add(b.optimizer_ns),
        );
        let mut left = 0.0;
        let rows = [
            ("forward", b.forward_ns),
            ("backward", b.backward_ns),
            ("optimizer", b.optimizer_ns),
            ("other", b.other_ns),
        ]
        .into_iter()
        .map(|(phase, ns)| {
            let pct = share(ns, whole);
            let row = PhaseRow {
                phase,
                ns,
                time: format_ns(ns),
                share_pct: pct,
                share: format!("{pct:.1} %"),
                left_pct: left,
            };
            left += pct;
            row
        })
        .collect();
        let widest = pairs
            .iter()
            .map(|p| p.forward_ns.max(p.backward_ns))
            .max()
            .unwrap_or(0);
        let modules = pairs
            .into_iter()
            .map(|p| ModuleRow {
                forward: times(p.forward_ns, p.forward_count),
                backward: times(p.backward_ns, p.backward_count),
                ratio: if p.forward_count > 0 && p.backward_count > 0 && p.forward_ns > 0 {
                    format!("{:.2}×", p.backward_ns as f64 / p.forward_ns as f64)
                } else {
                    "—".to_string()
                },
                forward_pct: share(p.forward_ns, widest),
                backward_pct: share(p.backward_ns, widest),
                forward_ns: p.forward_ns,
                backward_ns: p.backward_ns,
                path: p.path,
            })
            .collect();
        PhasesPanel {
            region: doc.spans[b.region_span].name.to_string(),
            region_ns: b.region_ns,
            rows,
            overlap_ns: b.overlap_ns,
            modules,
            pairing: if names_mode(&doc.spans) {
                PAIRED_BY_NAME
            } else {
                PAIRED_BY_PATH
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panels_fixture() {
        let doc = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/valid_panels.trace6.jsonl"
        ));
        let p = PhasesPanel::of(&doc);
        assert_eq!((p.region.as_str(), p.region_ns), ("train_step", 100_000));
        let ns: Vec<(&str, u64, &str)> = p
            .rows
            .iter()
            .map(|r| (r.phase, r.ns, r.share.as_str()))
            .collect();
        assert_eq!(
            ns,
            vec![
                ("forward", 40_000, "40.0 %"),
                ("backward", 45_000, "45.0 %"),
                ("optimizer", 8_000, "8.0 %"),
                ("other", 7_000, "7.0 %"),
            ]
        );
        assert_eq!(p.rows[2].left_pct, 85.0);
        let enc = &p.modules[0];
        assert_eq!(
            (enc.path.as_str(), enc.ratio.as_str()),
            ("encoder", "1.17×")
        );
        assert_eq!(enc.backward_pct, 100.0);
        let head = p.modules.iter().find(|m| m.path == "head").unwrap();
        assert_eq!((head.backward.as_str(), head.ratio.as_str()), ("—", "—"));
        assert_eq!(p.pairing, PAIRED_BY_PATH);
    }

    #[test]
    fn module_names_pair_by_name() {
        // A Mistral step whose spans carry their weights' names: the rows are those names.
        let doc = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/modules/mistral_names.trace6.jsonl"
        ));
        let p = PhasesPanel::of(&doc);
        assert_eq!(p.pairing, PAIRED_BY_NAME);
        assert!(p
            .modules
            .iter()
            .any(|m| m.path == "model.layers.1.self_attn.q_proj"));
    }

    #[test]
    fn steps_summing_past_u64_saturate() {
        // Forward and backward 2^63 ns each: their sum is 2^64, one past u64.
        let doc = TraceDocument::from_bytes(concat!(
            r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#,
            "\n",
            r#"{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
            "\n",
            r#"{"kind":"span_start","id":"f","parent_id":"s","name":"fwd","start_ns":0,"span_kind":"function","step":"forward"}"#,
            "\n",
            r#"{"kind":"span_end","id":"f","duration_ns":9223372036854775808}"#,
            "\n",
            r#"{"kind":"span_start","id":"b","parent_id":"s","name":"bwd","start_ns":0,"span_kind":"function","step":"backward"}"#,
            "\n",
            r#"{"kind":"span_end","id":"b","duration_ns":9223372036854775808}"#,
            "\n",
            r#"{"kind":"span_end","id":"s","duration_ns":1000}"#,
            "\n",
        ).as_bytes());
        let p = PhasesPanel::of(&doc);
        let shares: Vec<(&str, &str)> =
            p.rows.iter().map(|r| (r.phase, r.share.as_str())).collect();
        // Each is 2^63 of a whole of u64::MAX (2^64 - 1): 50 %.
        assert_eq!(
            &shares[..2],
            &[("forward", "50.0 %"), ("backward", "50.0 %")]
        );
    }

    #[test]
    fn golden_step_has_no_modules_in_backward() {
        let doc = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/train_step.trace6.jsonl"
        ));
        let p = PhasesPanel::of(&doc);
        assert_eq!(p.region_ns, 950_000);
        assert!(p.modules.iter().all(|m| m.backward_ns == 0));
        let broken = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/broken_no_measured.trace6.jsonl"
        ));
        assert_eq!(PhasesPanel::of(&broken), PhasesPanel::default());
    }
}
