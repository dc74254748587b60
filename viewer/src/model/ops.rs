//! The op table: op groups (by name, or by name + shape + dtype) as rows, sortable by any
//! column, with the spans each group ran in for the timeline's click-through.

use super::sort::sort_indices;
use core::cmp::Ordering;

use candle_trace_schema::analysis::ops::{op_groups, OpGrouping};
use candle_trace_schema::analysis::range::{op_groups_in_with, OpIndex, TimeRange};
use candle_trace_schema::analysis::units::format_output_bytes;
use candle_trace_schema::format::document::TraceDocument;

/// One row of the op table.
#[derive(Debug, Clone, PartialEq)]
pub struct OpRow {
    /// Op name.
    pub op_name: String,
    /// Output shape, e.g. `[8, 16]` (grouping by shape only).
    pub shape: Option<String>,
    /// Output dtype (grouping by shape only).
    pub dtype: Option<String>,
    /// Number of ops.
    pub count: u64,
    /// Sum of durations.
    pub total_ns: u64,
    /// Integer mean duration.
    pub mean_ns: u64,
    /// Longest duration.
    pub max_ns: u64,
    /// Sum of output bytes, of the ops whose record says them.
    pub output_bytes: u64,
    /// The output bytes as shown ([`format_output_bytes`]: `–` when no op's are known).
    pub output_text: String,
    /// Output bytes per ns of op time (`None` when an op's output bytes are unknown).
    pub bytes_per_ns: Option<f64>,
    /// Document indices of the spans the group's ops ran in (sorted, deduplicated).
    pub spans: Vec<u32>,
}

/// A sortable column of the op table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpColumn {
    /// Op name (then shape, dtype).
    Name,
    /// Count.
    Count,
    /// Total time.
    Total,
    /// Mean time.
    Mean,
    /// Longest op.
    Max,
    /// Output bytes.
    OutputBytes,
    /// Output bytes per ns.
    BytesPerNs,
}

/// `[8, 16]`.
pub fn shape_text(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// Bytes per ns with three significant digits (`12.3`, `0.0421`), `—` when undefined.
pub fn rate_text(bytes_per_ns: Option<f64>) -> String {
    match bytes_per_ns {
        None => "—".to_string(),
        Some(b) if !b.is_finite() => "—".to_string(),
        Some(0.0) => "0".to_string(),
        Some(b) => {
            // Digits after the point so that three significant digits show.
            let magnitude = b.abs().log10().floor() as i32;
            let decimals = (2 - magnitude).clamp(0, 9) as usize;
            format!("{b:.decimals$}")
        }
    }
}

/// The rows for `doc` with this grouping, in the schema's order (total time, largest first).
pub fn op_rows(doc: &TraceDocument, op_spans: &[Option<u32>], grouping: OpGrouping) -> Vec<OpRow> {
    rows_of_groups(op_spans, op_groups(&doc.ops, grouping))
}

/// The rows for the ops of `doc` inside `range` (`schema::analysis::range::op_groups_in`, from
/// `index`: [`OpIndex::of`] `doc`'s ops), in the schema's order.
pub fn op_rows_in(
    doc: &TraceDocument,
    index: &OpIndex,
    op_spans: &[Option<u32>],
    grouping: OpGrouping,
    range: TimeRange,
) -> Vec<OpRow> {
    rows_of_groups(
        op_spans,
        op_groups_in_with(&doc.ops, index, grouping, range),
    )
}

/// Op groups as rows, each with the spans its ops ran in (`op_spans`: each op's span,
/// `links::op_span_indices`).
fn rows_of_groups(
    op_spans: &[Option<u32>],
    groups: Vec<candle_trace_schema::analysis::ops::OpGroup>,
) -> Vec<OpRow> {
    groups
        .into_iter()
        .map(|g| {
            let mut spans: Vec<u32> = g
                .op_indices
                .iter()
                .filter_map(|&i| op_spans.get(i).copied().flatten())
                .collect();
            spans.sort_unstable();
            spans.dedup();
            OpRow {
                bytes_per_ns: g.output_bytes_per_ns(),
                op_name: g.op_name,
                shape: g.shape.as_deref().map(shape_text),
                dtype: g.dtype,
                count: g.count,
                total_ns: g.total_ns,
                mean_ns: g.mean_ns,
                max_ns: g.max_ns,
                output_bytes: g.output_bytes,
                output_text: format_output_bytes(g.output_bytes, g.output_unknown, g.count),
                spans,
            }
        })
        .collect()
}

fn name_key(r: &OpRow) -> (&str, Option<&str>, Option<&str>) {
    (&r.op_name, r.shape.as_deref(), r.dtype.as_deref())
}

/// Sort rows by `column` (descending when `descending`); ties by name, shape and dtype
/// ascending, so the order is total and stable across sorts.
pub fn sort_op_rows(rows: &mut Vec<OpRow>, column: OpColumn, descending: bool) {
    let mut order: Vec<usize> = (0..rows.len()).collect();
    sort_indices(&mut order, &|a, b| {
        let (a, b) = (&rows[a], &rows[b]);
        let primary = match column {
            OpColumn::Name => name_key(a).cmp(&name_key(b)),
            OpColumn::Count => a.count.cmp(&b.count),
            OpColumn::Total => a.total_ns.cmp(&b.total_ns),
            OpColumn::Mean => a.mean_ns.cmp(&b.mean_ns),
            OpColumn::Max => a.max_ns.cmp(&b.max_ns),
            OpColumn::OutputBytes => a.output_bytes.cmp(&b.output_bytes),
            OpColumn::BytesPerNs => {
                let (x, y) = (
                    a.bytes_per_ns.unwrap_or(-1.0),
                    b.bytes_per_ns.unwrap_or(-1.0),
                );
                x.partial_cmp(&y).unwrap_or(Ordering::Equal)
            }
        };
        let primary = if descending {
            primary.reverse()
        } else {
            primary
        };
        primary.then_with(|| name_key(a).cmp(&name_key(b)))
    });
    let mut taken: Vec<Option<OpRow>> = core::mem::take(rows).into_iter().map(Some).collect();
    rows.extend(
        order
            .into_iter()
            .filter_map(|i| taken.get_mut(i).and_then(Option::take)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::links::op_span_indices;

    fn doc() -> TraceDocument {
        TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/train_step.trace6.jsonl"
        ))
    }

    #[test]
    fn rows_by_name_cover_every_op() {
        let d = doc();
        let rows = op_rows(&d, &op_span_indices(&d), OpGrouping::Name);
        let n: u64 = rows.iter().map(|r| r.count).sum();
        assert_eq!(n, 18);
        assert!(rows.iter().all(|r| r.shape.is_none() && r.dtype.is_none()));
        assert!(rows.windows(2).all(|w| w[0].total_ns >= w[1].total_ns));
        assert!(rows.iter().all(|r| !r.spans.is_empty()));
    }

    #[test]
    fn a_group_whose_ops_ran_in_no_span_stands_for_none() {
        // tests/fixtures/links/README.md: spans step 0, fc1 1, act 2 (document order); matmul
        // (300 ns) ran in fc1, add (200 ns) names the span `gone`, which is none, relu (100 ns)
        // ran in act.
        let d = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/links/unlinked_ops.trace6.jsonl"
        ));
        let rows = op_rows(&d, &op_span_indices(&d), OpGrouping::Name);
        let got: Vec<(&str, u64, &[u32])> = rows
            .iter()
            .map(|r| (r.op_name.as_str(), r.total_ns, r.spans.as_slice()))
            .collect();
        assert_eq!(
            got,
            [
                ("matmul", 300, &[1][..]),
                ("add", 200, &[][..]),
                ("relu", 100, &[2][..])
            ]
        );
    }

    #[test]
    fn an_output_no_record_says_shows_as_unknown() {
        // train_step's dequantize is dtype q4k (no size) without storage_bytes; its four
        // matmuls say 512 + 32 + 64 + 256 = 864 bytes.
        let d = doc();
        let rows = op_rows(&d, &op_span_indices(&d), OpGrouping::Name);
        let row = |name: &str| rows.iter().find(|r| r.op_name == name).unwrap();
        assert_eq!(row("dequantize").output_text, "–");
        assert_eq!(row("dequantize").bytes_per_ns, None);
        assert_eq!(row("matmul").output_text, "864 B");
        assert!(row("matmul").bytes_per_ns.is_some());
    }

    #[test]
    fn grouping_by_shape_splits_groups() {
        let d = doc();
        let by_name = op_rows(&d, &op_span_indices(&d), OpGrouping::Name);
        let by_shape = op_rows(&d, &op_span_indices(&d), OpGrouping::NameShapeDtype);
        assert!(by_shape.len() >= by_name.len());
        assert!(by_shape
            .iter()
            .all(|r| r.shape.is_some() && r.dtype.is_some()));
    }

    #[test]
    fn sorting_by_each_column() {
        let d = doc();
        let mut rows = op_rows(&d, &op_span_indices(&d), OpGrouping::Name);
        sort_op_rows(&mut rows, OpColumn::Name, false);
        assert!(rows.windows(2).all(|w| w[0].op_name <= w[1].op_name));
        sort_op_rows(&mut rows, OpColumn::Count, true);
        assert!(rows.windows(2).all(|w| w[0].count >= w[1].count));
        sort_op_rows(&mut rows, OpColumn::Max, false);
        assert!(rows.windows(2).all(|w| w[0].max_ns <= w[1].max_ns));
        sort_op_rows(&mut rows, OpColumn::OutputBytes, true);
        assert!(rows
            .windows(2)
            .all(|w| w[0].output_bytes >= w[1].output_bytes));
        sort_op_rows(&mut rows, OpColumn::BytesPerNs, true);
        let b: Vec<f64> = rows
            .iter()
            .map(|r| r.bytes_per_ns.unwrap_or(-1.0))
            .collect();
        assert!(b.windows(2).all(|w| w[0] >= w[1]));
        sort_op_rows(&mut rows, OpColumn::Mean, true);
        assert!(rows.windows(2).all(|w| w[0].mean_ns >= w[1].mean_ns));
        sort_op_rows(&mut rows, OpColumn::Total, true);
        assert!(rows.windows(2).all(|w| w[0].total_ns >= w[1].total_ns));
    }

    #[test]
    fn rates_have_three_significant_digits() {
        assert_eq!(rate_text(None), "—");
        assert_eq!(rate_text(Some(0.0)), "0");
        assert_eq!(rate_text(Some(123.456)), "123");
        assert_eq!(rate_text(Some(12.345)), "12.3");
        assert_eq!(rate_text(Some(0.0421)), "0.0421");
        assert_eq!(rate_text(Some(f64::INFINITY)), "—");
    }

    #[test]
    fn shapes_print_like_arrays() {
        assert_eq!(shape_text(&[]), "[]");
        assert_eq!(shape_text(&[8, 16]), "[8, 16]");
    }
}
