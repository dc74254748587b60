//! The op-efficiency panel: estimated FLOPs, FLOP/s and bytes moved per ns per op name, with
//! the dtype mix. The formulas are `candle_trace_schema::analysis::flops`'; this only formats them.

use candle_trace_schema::analysis::flops::{self, efficiency, FlopFormula};
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
    /// The panel of `doc`; default without ops.
    pub fn of(doc: &TraceDocument) -> Self {
        let e = efficiency(doc);
        if e.count == 0 {
            return EfficiencyPanel::default();
        }
        let rows = e
            .rows
            .iter()
            .map(|r| EfficiencyRow {
                op_name: r.op_name.clone(),
                count: r.count,
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
                dtypes: r
                    .dtypes
                    .iter()
                    .map(|(d, n)| format!("{d}×{n}"))
                    .collect::<Vec<_>>()
                    .join(", "),
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
    fn panels_fixture() {
        let doc = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/valid_panels.trace6.jsonl"
        ));
        let p = EfficiencyPanel::of(&doc);
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
}
