//! `query --kind heaviest | ops | flops`: ops, heaviest first, grouped, and their efficiency.

use candle_trace_schema::analysis::flops::efficiency;
use candle_trace_schema::analysis::modules::{op_rows_by_path, ModulePaths};
use candle_trace_schema::analysis::ops::{heaviest_ops, op_groups, OpGrouping};
use candle_trace_schema::analysis::units::{format_bytes, format_ns, format_output_bytes};
use candle_trace_schema::format::document::TraceDocument;
use serde_json::{json, Value};

use crate::table::{Align, Table};
use crate::OpsBy;

fn shape_text(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(", "))
}

pub(super) fn heaviest(doc: &TraceDocument, limit: usize) -> (Value, Table, String) {
    let mut table = Table::new(&[
        ("op", Align::Left),
        ("shape", Align::Left),
        ("dtype", Align::Left),
        ("device", Align::Left),
        ("output", Align::Right),
        ("inputs", Align::Right),
        ("duration", Align::Right),
        ("span", Align::Left),
        ("line", Align::Right),
    ]);
    let mut rows = Vec::new();
    for i in heaviest_ops(&doc.ops, limit) {
        let op = doc.ops.row(i);
        // The module a capture named the span by, else the span's name.
        let span = doc
            .span(op.span_id)
            .map_or("?", |s| s.module.as_deref().unwrap_or(&s.name));
        table.row(vec![
            op.op_name.to_string(),
            shape_text(op.shape),
            op.dtype.to_string(),
            op.device.to_string(),
            op.known_output_bytes()
                .map_or_else(|| String::from("–"), format_bytes),
            format_bytes(op.input_storage_bytes),
            format_ns(op.duration_ns),
            span.into(),
            op.line.to_string(),
        ]);
        rows.push(json!({
            "op_name": op.op_name, "shape": op.shape, "dtype": op.dtype, "device": op.device,
            "output_bytes": op.output_bytes(), "output_known": op.known_output_bytes().is_some(),
            "input_storage_bytes": op.input_storage_bytes,
            "duration_ns": op.duration_ns, "span_id": op.span_id, "line": op.line,
        }));
    }
    (json!({ "ops": rows }), table, String::new())
}

pub(super) fn ops_by_path(doc: &TraceDocument, limit: usize) -> (Value, Table, String) {
    let paths = ModulePaths::new(doc);
    let mut table = Table::new(&[
        ("module path", Align::Left),
        ("count", Align::Right),
        ("total", Align::Right),
        ("mean", Align::Right),
        ("max", Align::Right),
        ("output", Align::Right),
    ]);
    let mut rows = Vec::new();
    for r in op_rows_by_path(doc, &paths).into_iter().take(limit) {
        table.row(vec![
            if r.path.is_empty() {
                String::from("(no module)")
            } else {
                r.path.clone()
            },
            r.count.to_string(),
            format_ns(r.total_ns),
            format_ns(r.mean_ns),
            format_ns(r.max_ns),
            format_output_bytes(r.output_bytes, r.output_unknown, r.count),
        ]);
        rows.push(json!({
            "path": r.path, "count": r.count, "total_ns": r.total_ns, "mean_ns": r.mean_ns,
            "max_ns": r.max_ns, "output_bytes": r.output_bytes, "output_unknown": r.output_unknown,
        }));
    }
    (json!({ "groups": rows }), table, String::new())
}

pub(super) fn ops(doc: &TraceDocument, limit: usize, by: OpsBy) -> (Value, Table, String) {
    let grouping = match by {
        OpsBy::Shape => OpGrouping::NameShapeDtype,
        OpsBy::Name | OpsBy::Path => OpGrouping::Name,
    };
    let mut headers = vec![("op", Align::Left)];
    if by == OpsBy::Shape {
        headers.extend([("shape", Align::Left), ("dtype", Align::Left)]);
    }
    headers.extend([
        ("count", Align::Right),
        ("total", Align::Right),
        ("mean", Align::Right),
        ("max", Align::Right),
        ("output", Align::Right),
        ("B/ns", Align::Right),
    ]);
    let mut table = Table::new(&headers);
    let mut rows = Vec::new();
    for g in op_groups(&doc.ops, grouping).into_iter().take(limit) {
        let mut cells = vec![g.op_name.clone()];
        if let (Some(shape), Some(dtype)) = (&g.shape, &g.dtype) {
            cells.extend([shape_text(shape), dtype.clone()]);
        }
        cells.extend([
            g.count.to_string(),
            format_ns(g.total_ns),
            format_ns(g.mean_ns),
            format_ns(g.max_ns),
            format_output_bytes(g.output_bytes, g.output_unknown, g.count),
            g.output_bytes_per_ns()
                .map_or_else(|| String::from("–"), |r| format!("{r:.3}")),
        ]);
        table.row(cells);
        rows.push(json!({
            "op_name": g.op_name, "shape": g.shape, "dtype": g.dtype, "count": g.count,
            "total_ns": g.total_ns, "mean_ns": g.mean_ns, "max_ns": g.max_ns, "min_ns": g.min_ns,
            "output_bytes": g.output_bytes, "output_unknown": g.output_unknown,
            "input_bytes": g.input_bytes,
        }));
    }
    (json!({ "groups": rows }), table, String::new())
}

pub(super) fn flops(doc: &TraceDocument, limit: usize) -> (Value, Table, String) {
    let mut e = efficiency(doc);
    let preamble = format!(
        "{} of {} ops have a FLOP estimate: {} FLOP in {}{}\n",
        e.estimated_count,
        e.count,
        e.flops,
        format_ns(e.estimated_ns),
        e.flops_per_s
            .map_or(String::new(), |r| format!(" ({r} FLOP/s)"))
    );
    let mut table = Table::new(&[
        ("op", Align::Left),
        ("count", Align::Right),
        ("time", Align::Right),
        ("FLOP", Align::Right),
        ("FLOP/s", Align::Right),
        ("bytes/ns", Align::Right),
        ("dtypes", Align::Left),
    ]);
    e.rows.truncate(limit);
    for r in &e.rows {
        let dtypes: Vec<String> = r.dtypes.iter().map(|(d, n)| format!("{d}×{n}")).collect();
        table.row(vec![
            r.op_name.clone(),
            r.count.to_string(),
            format_ns(r.total_ns),
            if r.estimated_count > 0 {
                r.flops.to_string()
            } else {
                String::from("–")
            },
            r.flops_per_s.map_or(String::from("–"), |v| v.to_string()),
            r.bytes_per_ns
                .map_or(String::from("–"), |v| format!("{v:.3}")),
            if dtypes.is_empty() {
                String::from("–")
            } else {
                dtypes.join(", ")
            },
        ]);
    }
    (json!(e), table, preamble)
}
