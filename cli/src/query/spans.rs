//! `query --kind slowest | self | edges | phases`: spans, their edges, and the phases they sum to.

use candle_trace_schema::analysis::modules::{names_mode, ModulePaths};
use candle_trace_schema::analysis::phases::{module_pairs, phase_breakdown};
use candle_trace_schema::analysis::spans::{edges_by_duration, span_path};
use candle_trace_schema::analysis::units::format_ns;
use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::events::{Pass, SpanKind};
use serde_json::{json, Value};

use crate::table::{Align, Table};

fn span_kind_name(kind: SpanKind) -> &'static str {
    match kind {
        SpanKind::Function => "function",
        SpanKind::Op => "op",
        SpanKind::Module => "module",
    }
}

fn pass_name(step: Option<Pass>) -> &'static str {
    step.map_or("", Pass::as_str)
}

pub(super) fn spans(doc: &TraceDocument, order: &[usize]) -> (Value, Table, String) {
    // A trace whose capture named modules by their weights shows the module each span ran
    // in beside its path, keyed as the modules query keys it: a `linear` span is
    // `model.layers.1.self_attn.q_proj`, a `block` that owns no weight the common prefix of
    // what it holds (`model.layers.1`), an op span inside a module that module's.
    let paths = names_mode(&doc.spans).then(|| ModulePaths::new(doc));
    let named = paths.is_some();
    let module_of = |i: usize| paths.as_ref().and_then(|p| p.module_of(i));
    let mut columns = vec![("span", Align::Left)];
    if named {
        columns.push(("module", Align::Left));
    }
    columns.extend([
        ("kind", Align::Left),
        ("step", Align::Left),
        ("duration", Align::Right),
        ("self", Align::Right),
        ("start", Align::Right),
        ("line", Align::Right),
    ]);
    let mut table = Table::new(&columns);
    let mut rows = Vec::new();
    for &i in order {
        let s = &doc.spans[i];
        let self_ns = doc.tree.self_ns[i];
        let path = span_path(doc, i);
        let mut cells = vec![path.clone()];
        let module = module_of(i);
        if named {
            cells.push(module.unwrap_or("–").to_string());
        }
        cells.extend([
            span_kind_name(s.span_kind).into(),
            pass_name(s.pass).into(),
            format_ns(s.duration_or_zero()),
            format_ns(self_ns),
            format_ns(s.start_ns),
            s.line.to_string(),
        ]);
        table.row(cells);
        rows.push(json!({
            "id": s.id, "name": s.name, "path": path, "module": module,
            "span_kind": span_kind_name(s.span_kind),
            "step": s.pass.map(|st| pass_name(Some(st))), "start_ns": s.start_ns,
            "duration_ns": s.duration_ns, "self_ns": self_ns, "depth": doc.tree.depth[i], "line": s.line,
        }));
    }
    (json!({ "spans": rows }), table, String::new())
}

pub(super) fn edges(doc: &TraceDocument, limit: usize) -> (Value, Table, String) {
    let mut table = Table::new(&[
        ("from", Align::Left),
        ("to", Align::Left),
        ("duration", Align::Right),
        ("line", Align::Right),
    ]);
    let mut rows = Vec::new();
    let name = |i: Option<usize>, id: &str| {
        i.map_or_else(|| format!("{id} (no such span)"), |i| span_path(doc, i))
    };
    for r in edges_by_duration(doc).into_iter().take(limit) {
        let (from, to) = (name(r.from, &r.edge.from_span), name(r.to, &r.edge.to_span));
        table.row(vec![
            from.clone(),
            to.clone(),
            format_ns(r.edge.duration_ns),
            r.edge.line.to_string(),
        ]);
        rows.push(json!({
            "from_span": r.edge.from_span, "to_span": r.edge.to_span, "from_path": from, "to_path": to,
            "duration_ns": r.edge.duration_ns, "line": r.edge.line,
        }));
    }
    (json!({ "edges": rows }), table, String::new())
}

pub(super) fn phases(doc: &TraceDocument, limit: usize) -> (Value, Table, String) {
    let breakdown = phase_breakdown(doc);
    let pairs = module_pairs(doc);
    let preamble = match &breakdown {
        Some(b) => format!(
            "measured `{}` {}: forward {}, backward {}, optimizer {}, other {}\n",
            doc.spans[b.region_span].name,
            format_ns(b.region_ns),
            format_ns(b.forward_ns),
            format_ns(b.backward_ns),
            format_ns(b.optimizer_ns),
            format_ns(b.other_ns)
        ),
        None => String::from("no measured span\n"),
    };
    let mut table = Table::new(&[
        ("module", Align::Left),
        ("forward", Align::Right),
        ("backward", Align::Right),
        ("fwd n", Align::Right),
        ("bwd n", Align::Right),
    ]);
    for p in pairs.iter().take(limit) {
        table.row(vec![
            p.path.clone(),
            format_ns(p.forward_ns),
            format_ns(p.backward_ns),
            p.forward_count.to_string(),
            p.backward_count.to_string(),
        ]);
    }
    let value = json!({
        "phases": breakdown.map(|b| json!({
            "region": doc.spans[b.region_span].id,
            "region_ns": b.region_ns,
            "forward_ns": b.forward_ns,
            "backward_ns": b.backward_ns,
            "optimizer_ns": b.optimizer_ns,
            "other_ns": b.other_ns,
            "overlap_ns": b.overlap_ns,
        })),
        "module_pairs": pairs.iter().take(limit).collect::<Vec<_>>(),
    });
    (value, table, preamble)
}
