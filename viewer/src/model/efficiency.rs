//! The op-efficiency panel: estimated FLOPs, FLOP/s and bytes moved per ns per op name, with
//! the dtype mix. The formulas are `candle_trace_schema::analysis::flops`'; this only formats them.

use candle_trace_schema::analysis::flops::{
    self, efficiency_in_with, Efficiency, FlopFormula, OpEstimates,
};
use candle_trace_schema::analysis::range::TimeRange;
use candle_trace_schema::analysis::units::format_ns;
use candle_trace_schema::format::document::TraceDocument;

/// `v` with an SI prefix and three significant digits: `9.11 G` + unit.
pub fn si(v: f64, unit: &str) -> String {
    const PREFIXES: [&str; 7] = ["", "k", "M", "G", "T", "P", "E"];
    let mut v = v;
    let mut p = 0;
    while v.abs() >= 999.5 && p + 1 < PREFIXES.len() {
        v /= 1000.0;
        p += 1;
    }
    let digits = if (p == 0 && v == v.trunc()) || v.abs() >= 99.95 {
        0
    } else if v.abs() >= 9.995 {
        1
    } else {
        2
    };
    format!("{v:.digits$} {}{unit}", PREFIXES[p])
}

/// One op name.
#[derive(Debug, Clone, PartialEq)]
pub struct EfficiencyRow {
    /// Op name.
    pub op_name: String,
    /// Ops.
    pub count: u64,
    /// Total time (the time inside, in a range).
    pub total_ns: u64,
    /// Total time, human.
    pub time: String,
    /// Exact FLOPs (0 without an estimate).
    pub flops: u64,
    /// FLOPs, human, or `—`.
    pub flops_text: String,
    /// Exact FLOP/s.
    pub flops_per_s: Option<u64>,
    /// FLOP/s, human, or `—`.
    pub flops_per_s_text: String,
    /// Bytes moved per ns.
    pub bytes_per_ns: Option<f64>,
    /// `1.152`, or `—`.
    pub bytes_per_ns_text: String,
    /// `f32×3, bf16×1`.
    pub dtypes: String,
    /// Formula name, or `no formula` / `shapes unknown`.
    pub formula: &'static str,
    /// `2 of 3` when only some ops of the name have an estimate.
    pub coverage: String,
}

/// The panel.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EfficiencyPanel {
    /// Sum of the estimates.
    pub flops: u64,
    /// Over every estimated op.
    pub flops_per_s: Option<u64>,
    /// Ops with an estimate.
    pub estimated_count: u64,
    /// All ops.
    pub count: u64,
    /// `8 of 10 ops (81.7 % of op time)`.
    pub coverage: String,
    /// Rows, by FLOPs.
    pub rows: Vec<EfficiencyRow>,
}

fn formula_name(f: Option<FlopFormula>, op: &str) -> &'static str {
    match f {
        Some(FlopFormula::Matmul) => "2·b·M·N·K",
        Some(FlopFormula::Conv) => "2·out·Cin/g·k",
        Some(FlopFormula::Elementwise) => "1 per output element",
        Some(FlopFormula::Reduction) => "1 per input element",
        Some(FlopFormula::Softmax) => "5 per element",
        None if flops::needs_input_shapes(op) => "shapes unknown",
        None => "no formula",
    }
}

impl EfficiencyPanel {
    /// The panel of `doc` (`estimates` its ops'); default without ops.
    pub fn of(doc: &TraceDocument, estimates: &OpEstimates) -> Self {
        Self::in_range(doc, estimates, TimeRange::ALL)
    }

    /// The panel of the ops of `doc` inside `range` (`schema::analysis::flops::efficiency_in`:
    /// an op crossing an edge with its part inside); default when no op ran inside it.
    pub fn in_range(doc: &TraceDocument, estimates: &OpEstimates, range: TimeRange) -> Self {
        Self::of_table(&efficiency_in_with(doc, estimates, range))
    }

    /// The panel of the schema's table; default without ops.
    fn of_table(e: &Efficiency) -> Self {
        if e.count == 0 {
            return EfficiencyPanel::default();
        }
        let rows = e
            .rows
            .iter()
            .map(|r| EfficiencyRow {
                op_name: r.op_name.clone(),
                count: r.count,
                total_ns: r.total_ns,
                time: format_ns(r.total_ns),
                flops: r.flops,
                flops_text: if r.estimated_count > 0 {
                    si(r.flops as f64, "FLOP")
                } else {
                    "—".into()
                },
                flops_per_s: r.flops_per_s,
                flops_per_s_text: r
                    .flops_per_s
                    .map_or_else(|| "—".into(), |v| si(v as f64, "FLOP/s")),
                bytes_per_ns: r.bytes_per_ns,
                bytes_per_ns_text: r
                    .bytes_per_ns
                    .map_or_else(|| "—".into(), |v| format!("{v:.3}")),
                dtypes: dtype_mix(&r.dtypes),
                formula: formula_name(r.formula, &r.op_name),
                coverage: if r.estimated_count == r.count || r.estimated_count == 0 {
                    String::new()
                } else {
                    format!("{} of {}", r.estimated_count, r.count)
                },
            })
            .collect();
        let time_share = if e.total_ns > 0 {
            e.estimated_ns as f64 / e.total_ns as f64 * 100.0
        } else {
            0.0
        };
        EfficiencyPanel {
            flops: e.flops,
            flops_per_s: e.flops_per_s,
            estimated_count: e.estimated_count,
            count: e.count,
            coverage: format!(
                "{} of {} ops ({time_share:.1} % of op time)",
                e.estimated_count, e.count
            ),
            rows,
        }
    }
}

/// A row's dtype mix as `bf16×1, f32×1`; `—` when no op of the row names a dtype.
fn dtype_mix(dtypes: &[(String, u64)]) -> String {
    if dtypes.is_empty() {
        return "—".into();
    }
    dtypes
        .iter()
        .map(|(d, n)| format!("{d}×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn si_prefixes() {
        assert_eq!(si(163_072.0, "FLOP"), "163 kFLOP");
        assert_eq!(si(9_110_167_597.0, "FLOP/s"), "9.11 GFLOP/s");
        assert_eq!(si(512.0, "FLOP"), "512 FLOP");
        assert_eq!(si(12_345.0, "FLOP"), "12.3 kFLOP");
        assert_eq!(si(999_600.0, "B"), "1.00 MB");
    }

    #[test]
    fn a_row_whose_ops_name_no_dtype_shows_a_dash() {
        assert_eq!(dtype_mix(&[]), "—");
        let mix = [(String::from("bf16"), 2), (String::from("f32"), 1)];
        assert_eq!(dtype_mix(&mix), "bf16×2, f32×1");
    }

    #[test]
    fn panels_fixture() {
        let doc = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/valid_panels.trace6.jsonl"
        ));
        let p = EfficiencyPanel::of(&doc, &OpEstimates::of(&doc));
        assert_eq!((p.flops, p.flops_per_s), (163_072, Some(9_110_167_597)));
        assert_eq!(p.coverage, "8 of 10 ops (81.7 % of op time)");
        let mm = &p.rows[0];
        assert_eq!(mm.op_name, "matmul");
        assert_eq!(mm.dtypes, "bf16×1, f32×1");
        assert_eq!(mm.flops_per_s_text, "10.2 GFLOP/s");
        assert_eq!(mm.bytes_per_ns_text, "1.152");
        let conv2d = p.rows.iter().find(|r| r.op_name == "conv2d").unwrap();
        assert_eq!(
            (conv2d.formula, conv2d.flops_text.as_str()),
            ("shapes unknown", "—")
        );
        let adam = p.rows.iter().find(|r| r.op_name == "adamw_update").unwrap();
        assert_eq!(adam.formula, "no formula");
    }

    #[test]
    fn a_range_counts_the_part_of_each_op_inside_it() {
        // matmul 100..500 (400 ns), output [2,2] f32 (16 B) reading 48 B = 12 f32 = 1·(2+2)·K:
        // K = 3, 2·2·2·3 = 24 FLOPs, 64 B moved. add 500..550 (50 ns), output [2,5] f32: 10
        // FLOPs, 40 B moved. relu 600..700 lies outside the range.
        let text = concat!(
            r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00Z","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#,
            "\n",
            r#"{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
            "\n",
            r#"{"kind":"op","span_id":"s","op_name":"matmul","shape":[2,2],"dtype":"f32","device":"cpu","input_storage_bytes":48,"duration_ns":400,"timestamp_ns":100}"#,
            "\n",
            r#"{"kind":"op","span_id":"s","op_name":"add","shape":[2,5],"dtype":"f32","device":"cpu","duration_ns":50,"timestamp_ns":500}"#,
            "\n",
            r#"{"kind":"op","span_id":"s","op_name":"relu","shape":[8],"dtype":"f32","device":"cpu","duration_ns":100,"timestamp_ns":600}"#,
            "\n",
            r#"{"kind":"span_end","id":"s","duration_ns":1000}"#,
            "\n",
        );
        let doc = TraceDocument::from_bytes(text.as_bytes());
        // Range 400..520: matmul 400..500, 100 of its 400 ns → a quarter: 6 FLOPs, 16 B, so
        // 6e9 / 100 = 60 M FLOP/s (24e9 / 400 whole) and 0.16 B/ns (64 / 400); add 500..520,
        // 20 of 50 ns → two fifths: 4 FLOPs, 16 B, 200 M FLOP/s (10e9 / 50), 0.8 B/ns (40 / 50).
        let p = EfficiencyPanel::in_range(&doc, &OpEstimates::of(&doc), TimeRange::new(400, 520));
        let rows: Vec<_> = p
            .rows
            .iter()
            .map(|r| {
                (
                    r.op_name.as_str(),
                    r.count,
                    r.time.as_str(),
                    r.flops,
                    r.flops_per_s,
                    r.flops_per_s_text.as_str(),
                    r.bytes_per_ns_text.as_str(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                (
                    "matmul",
                    1,
                    "100 ns",
                    6,
                    Some(60_000_000),
                    "60.0 MFLOP/s",
                    "0.160"
                ),
                (
                    "add",
                    1,
                    "20 ns",
                    4,
                    Some(200_000_000),
                    "200 MFLOP/s",
                    "0.800"
                ),
            ]
        );
        // 10 FLOPs in 120 ns: 83 333 333 FLOP/s.
        assert_eq!((p.flops, p.flops_per_s), (10, Some(83_333_333)));
        assert_eq!(p.coverage, "2 of 2 ops (100.0 % of op time)");
        // Between the ops: nothing inside, the panel of no ops.
        assert_eq!(
            EfficiencyPanel::in_range(&doc, &OpEstimates::of(&doc), TimeRange::new(560, 590)),
            EfficiencyPanel::default()
        );
        // A range over every op is the whole run: 24 + 10 + 8 FLOPs.
        let whole = EfficiencyPanel::of(&doc, &OpEstimates::of(&doc));
        assert_eq!(
            EfficiencyPanel::in_range(&doc, &OpEstimates::of(&doc), TimeRange::new(0, 1000)),
            whole
        );
        assert_eq!(whole.flops, 42);
    }
}
