//! `candle-trace query`.

use candle_trace_schema::analysis::spans::{
    edges_by_duration, slowest_spans, span_path, spans_by_self_time,
};
use std::io::Write;
use std::path::Path;

use anyhow::bail;
use candle_trace_schema::analysis::coverage::{Coverage, TraceCoverage};
use candle_trace_schema::analysis::flops::efficiency;
use candle_trace_schema::analysis::gradients::{
    gradient_finding, gradient_groups, gradients_for_review, norm_histogram, GradientCounts,
};
use candle_trace_schema::analysis::histogram::Histogram;
use candle_trace_schema::analysis::module_tree::{profile_tree, trace_tree, ModuleTree};
use candle_trace_schema::analysis::modules::{
    module_rows, op_rows_by_path, ModuleGrouping, ModulePaths,
};
use candle_trace_schema::analysis::ops::{heaviest_ops, op_groups, OpGrouping};
use candle_trace_schema::analysis::phases::{module_pairs, phase_breakdown};
use candle_trace_schema::analysis::reconcile::reconcile;
use candle_trace_schema::analysis::units::{format_bytes, format_ns};
use candle_trace_schema::format::detect::AnyDocument;
use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::events::{Pass, SpanKind, TensorCategory};
use candle_trace_schema::format::profile::{attribute, ProfileDocument};
use serde_json::{json, Value};

use super::table::{Align, Table};
use super::{write_json, OpsBy, QueryKind, EXIT_OK};

/// Parsed `query` options.
pub(super) struct Options {
    pub kind: QueryKind,
    pub limit: usize,
    /// `--by` as given (each kind has its own default).
    pub by: Option<OpsBy>,
    pub json: bool,
}

pub(super) fn run(
    path: &Path,
    doc: &AnyDocument,
    opts: Options,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    let module_grouping = match (opts.kind, opts.by) {
        (QueryKind::Modules, None | Some(OpsBy::Path)) => ModuleGrouping::Path,
        (QueryKind::Modules, Some(OpsBy::Name)) => ModuleGrouping::Name,
        (QueryKind::Modules, Some(OpsBy::Shape)) => {
            bail!("`--kind modules` groups `--by path` or `--by name`, not `--by shape`")
        }
        _ => ModuleGrouping::Path,
    };
    if opts.kind != QueryKind::Ops && opts.kind != QueryKind::Modules && opts.by.is_some() {
        bail!(
            "`--by` applies to `--kind ops` and `--kind modules`, not `--kind {}`",
            kind_name(opts.kind)
        );
    }
    match (doc, opts.kind) {
        (AnyDocument::Profile(p), QueryKind::Requests) => requests(p, &opts, out)?,
        (AnyDocument::Profile(p), QueryKind::Iterations) => iterations(p, &opts, out)?,
        (AnyDocument::Profile(p), QueryKind::Resources) => resources(p, &opts, out)?,
        (AnyDocument::Profile(p), QueryKind::Latency) => latency(p, &opts, out)?,
        (AnyDocument::Profile(p), QueryKind::Modules) => match module_grouping {
            ModuleGrouping::Path => profile_module_tree(p, &opts, out)?,
            ModuleGrouping::Name => profile_modules(p, &opts, module_grouping, out)?,
        },
        (AnyDocument::Profile(_), kind) => bail!(
            "{}: `--kind {}` needs a trace/6 file; this is an inference profile (try `--kind requests`, `--kind latency`, `--kind modules`, `--kind iterations` or `--kind resources`)",
            path.display(),
            kind_name(kind)
        ),
        (
            AnyDocument::Trace(_),
            kind @ (QueryKind::Requests
            | QueryKind::Latency
            | QueryKind::Iterations
            | QueryKind::Resources),
        ) => bail!(
            "{}: `--kind {}` needs an inference profile; this is a trace/6 file",
            path.display(),
            kind_name(kind)
        ),
        (AnyDocument::Trace(t), kind) => {
            let (value, table, preamble) = match kind {
                QueryKind::Slowest => spans(t, &slowest_spans(t, opts.limit)),
                QueryKind::SelfTime => spans(t, &spans_by_self_time(t, opts.limit)),
                QueryKind::Heaviest => heaviest(t, opts.limit),
                QueryKind::Memory => memory(t, opts.limit),
                QueryKind::Gradients => gradients(t, opts.limit),
                QueryKind::Ops => match opts.by {
                    Some(OpsBy::Path) => ops_by_path(t, opts.limit),
                    by => ops(t, opts.limit, by.unwrap_or(OpsBy::Name)),
                },
                QueryKind::Modules => match module_grouping {
                    ModuleGrouping::Path => module_tree(t, opts.limit),
                    ModuleGrouping::Name => modules(t, opts.limit, module_grouping),
                },
                QueryKind::Edges => edges(t, opts.limit),
                QueryKind::Phases => phases(t, opts.limit),
                QueryKind::Flops => flops(t, opts.limit),
                QueryKind::Reconcile => reconciliation(t, opts.limit),
                QueryKind::Requests
                | QueryKind::Latency
                | QueryKind::Iterations
                | QueryKind::Resources => unreachable_requests()?,
            };
            if opts.json {
                write_json(out, &value)?;
            } else {
                if !preamble.is_empty() {
                    writeln!(out, "{preamble}")?;
                }
                if table.is_empty() {
                    writeln!(out, "(nothing to list)")?;
                } else {
                    write!(out, "{}", table.render())?;
                }
            }
        }
        (AnyDocument::Unsupported { .. }, _) => super::summary::unreachable_unsupported()?,
    }
    Ok(EXIT_OK)
}

/// The `(Trace, Requests | Latency | Iterations | Resources)` pairs are answered above.
fn unreachable_requests() -> anyhow::Result<(Value, Table, String)> {
    bail!("`--kind requests`, `latency`, `iterations` and `resources` need an inference profile")
}

fn kind_name(kind: QueryKind) -> &'static str {
    match kind {
        QueryKind::Slowest => "slowest",
        QueryKind::SelfTime => "self",
        QueryKind::Heaviest => "heaviest",
        QueryKind::Memory => "memory",
        QueryKind::Gradients => "gradients",
        QueryKind::Ops => "ops",
        QueryKind::Edges => "edges",
        QueryKind::Requests => "requests",
        QueryKind::Phases => "phases",
        QueryKind::Flops => "flops",
        QueryKind::Reconcile => "reconcile",
        QueryKind::Latency => "latency",
        QueryKind::Modules => "modules",
        QueryKind::Iterations => "iterations",
        QueryKind::Resources => "resources",
    }
}

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

fn shape_text(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(", "))
}

fn spans(doc: &TraceDocument, order: &[usize]) -> (Value, Table, String) {
    // A trace whose capture named modules by their weights shows each span's module beside
    // its path (a `linear` span is `model.layers.1.self_attn.q_proj`).
    let named = doc.spans.iter().any(|s| s.module.is_some());
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
        if named {
            cells.push(s.module.as_deref().unwrap_or("–").to_string());
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
            "id": s.id, "name": s.name, "path": path, "module": s.module,
            "span_kind": span_kind_name(s.span_kind),
            "step": s.pass.map(|st| pass_name(Some(st))), "start_ns": s.start_ns,
            "duration_ns": s.duration_ns, "self_ns": self_ns, "depth": doc.tree.depth[i], "line": s.line,
        }));
    }
    (json!({ "spans": rows }), table, String::new())
}

fn heaviest(doc: &TraceDocument, limit: usize) -> (Value, Table, String) {
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
            format_bytes(op.output_bytes()),
            format_bytes(op.input_storage_bytes),
            format_ns(op.duration_ns),
            span.into(),
            op.line.to_string(),
        ]);
        rows.push(json!({
            "op_name": op.op_name, "shape": op.shape, "dtype": op.dtype, "device": op.device,
            "output_bytes": op.output_bytes(), "input_storage_bytes": op.input_storage_bytes,
            "duration_ns": op.duration_ns, "span_id": op.span_id, "line": op.line,
        }));
    }
    (json!({ "ops": rows }), table, String::new())
}

fn memory(doc: &TraceDocument, limit: usize) -> (Value, Table, String) {
    let p = &doc.memory_profile;
    let mut preamble = match (&p.peak_device, p.peak_timestamp_ns) {
        (Some(d), Some(ts)) => format!(
            "peak {} ({} B) on {d} at {}\n",
            format_bytes(p.peak_bytes),
            p.peak_bytes,
            format_ns(ts)
        ),
        _ => String::from("no memory events\n"),
    };
    let by_category: serde_json::Map<String, Value> = TensorCategory::ALL
        .iter()
        .filter(|c| p.peak_by_category[c.index()] > 0)
        .map(|c| (c.as_str().to_string(), json!(p.peak_by_category[c.index()])))
        .collect();
    if !by_category.is_empty() {
        let parts: Vec<String> = TensorCategory::ALL
            .iter()
            .filter(|c| p.peak_by_category[c.index()] > 0)
            .map(|c| {
                format!(
                    "{} {}",
                    c.as_str(),
                    format_bytes(p.peak_by_category[c.index()])
                )
            })
            .collect();
        preamble.push_str(&format!(
            "live at the peak by category: {}\n",
            parts.join(", ")
        ));
    }
    let mut devices = Table::new(&[
        ("device", Align::Left),
        ("peak", Align::Right),
        ("at", Align::Right),
        ("final live", Align::Right),
        ("capacity", Align::Right),
        ("allocs", Align::Right),
        ("frees", Align::Right),
    ]);
    for d in &p.devices {
        devices.row(vec![
            d.device.clone(),
            format_bytes(d.peak_bytes),
            d.peak_timestamp_ns.map_or(String::new(), format_ns),
            format_bytes(d.final_live_bytes),
            d.capacity_bytes
                .map_or(String::from("unknown"), format_bytes),
            d.alloc_count.to_string(),
            d.free_count.to_string(),
        ]);
    }
    preamble.push('\n');
    preamble.push_str(&devices.render());
    preamble.push_str("\nlive allocations at the peak, largest first:");
    let mut table = Table::new(&[
        ("tensor", Align::Left),
        ("bytes", Align::Right),
        ("category", Align::Left),
        ("op", Align::Left),
        ("span", Align::Left),
        ("line", Align::Right),
    ]);
    let mut live = Vec::new();
    for a in p.live_at_peak.iter().take(limit) {
        let span = doc
            .span(&a.span_id)
            .map_or(a.span_id.as_str(), |s| s.name.as_str());
        table.row(vec![
            a.tensor_id.clone(),
            format_bytes(a.bytes),
            a.category.as_str().into(),
            a.op_name.clone().unwrap_or_default(),
            span.into(),
            a.line.to_string(),
        ]);
        live.push(json!({
            "tensor_id": a.tensor_id, "bytes": a.bytes, "category": a.category.as_str(),
            "op_name": a.op_name, "span_id": a.span_id, "timestamp_ns": a.timestamp_ns, "line": a.line,
        }));
    }
    let device_json: Vec<Value> = p
        .devices
        .iter()
        .map(|d| {
            json!({
                "device": d.device, "peak_bytes": d.peak_bytes, "peak_timestamp_ns": d.peak_timestamp_ns,
                "final_live_bytes": d.final_live_bytes, "capacity_bytes": d.capacity_bytes,
                "alloc_count": d.alloc_count, "free_count": d.free_count,
            })
        })
        .collect();
    let value = json!({
        "peak_bytes": p.peak_bytes, "peak_timestamp_ns": p.peak_timestamp_ns, "peak_device": p.peak_device,
        "peak_by_category": by_category, "live_at_peak": live, "live_at_peak_total": p.live_at_peak.len(),
        "devices": device_json,
    });
    (value, table, preamble)
}

fn gradients(doc: &TraceDocument, limit: usize) -> (Value, Table, String) {
    let counts = GradientCounts::of(&doc.gradients);
    let mut preamble = format!(
        "{} parameter(s): {} present, {} missing, {} zero, {} non-finite\n",
        doc.gradients.len(),
        counts.present,
        counts.missing,
        counts.zero,
        counts.non_finite
    );
    let groups = gradient_groups(&doc.gradients);
    let finding = gradient_finding(&groups);
    if let Some(f) = &finding {
        preamble.push_str(&format!("finding: {f}\n"));
    }
    if !groups.is_empty() {
        let mut by_module = Table::new(&[
            ("module", Align::Left),
            ("params", Align::Right),
            ("present", Align::Right),
            ("missing", Align::Right),
            ("zero", Align::Right),
            ("non-finite", Align::Right),
            ("flow", Align::Left),
        ]);
        let several_roots = groups.iter().any(|g| g.root != groups[0].root);
        for g in groups.iter().take(limit) {
            let module = if g.module.is_empty() {
                "(top level)"
            } else {
                g.module.as_str()
            };
            by_module.row(vec![
                if several_roots {
                    format!("{}:{module}", g.root)
                } else {
                    module.to_string()
                },
                g.params.to_string(),
                g.counts.present.to_string(),
                g.counts.missing.to_string(),
                g.counts.zero.to_string(),
                g.counts.non_finite.to_string(),
                g.flow.as_str().into(),
            ]);
        }
        preamble.push_str("\nby module (file order):\n");
        preamble.push_str(&by_module.render());
        preamble.push_str("\nparameters, problems first:");
    }
    let mut table = Table::new(&[
        ("root", Align::Left),
        ("parameter", Align::Left),
        ("state", Align::Left),
        ("norm", Align::Right),
        ("line", Align::Right),
    ]);
    let mut rows = Vec::new();
    for i in gradients_for_review(&doc.gradients).into_iter().take(limit) {
        let g = &doc.gradients[i];
        table.row(vec![
            g.root.clone(),
            g.key.clone(),
            g.state.as_str().into(),
            g.norm.map_or(String::new(), |n| format!("{n:.4e}")),
            g.line.to_string(),
        ]);
        rows.push(json!({ "root": g.root, "key": g.key, "state": g.state.as_str(), "norm": g.norm, "line": g.line }));
    }
    let groups_json: Vec<Value> = groups
        .iter()
        .take(limit)
        .map(|g| {
            json!({
                "root": g.root, "module": g.module, "params": g.params, "present": g.counts.present,
                "missing": g.counts.missing, "zero": g.counts.zero, "non_finite": g.counts.non_finite,
                "flow": g.flow.as_str(),
            })
        })
        .collect();
    (
        json!({
            "counts": counts, "gradients": rows, "norm_histogram": norm_histogram(&doc.gradients),
            "groups": groups_json, "finding": finding,
        }),
        table,
        preamble,
    )
}

fn share_text(share: Option<f64>) -> String {
    share.map_or(String::from("–"), |s| format!("{:.1}%", s * 100.0))
}

fn modules(doc: &TraceDocument, limit: usize, grouping: ModuleGrouping) -> (Value, Table, String) {
    let paths = ModulePaths::new(doc);
    let rows = module_rows(doc, &paths, grouping);
    let key = match grouping {
        ModuleGrouping::Path => "path",
        ModuleGrouping::Name => "name",
    };
    let mut table = Table::new(&[
        (key, Align::Left),
        ("calls", Align::Right),
        ("total", Align::Right),
        ("self", Align::Right),
        ("mean", Align::Right),
        ("share", Align::Right),
    ]);
    let mut json_rows = Vec::new();
    for r in rows.iter().take(limit) {
        table.row(vec![
            r.key.clone(),
            r.calls.to_string(),
            format_ns(r.total_ns),
            format_ns(r.self_ns),
            format_ns(r.mean_ns),
            share_text(r.share),
        ]);
        json_rows.push(json!({
            key: r.key, "calls": r.calls, "total_ns": r.total_ns, "self_ns": r.self_ns,
            "mean_ns": r.mean_ns, "share": r.share,
        }));
    }
    let preamble = format!(
        "{} module span(s) in {} group(s) by {key}; share = total / measured total\n",
        rows.iter().map(|r| r.calls).sum::<u64>(),
        rows.len()
    );
    (json!({ "by": key, "modules": json_rows }), table, preamble)
}

/// A module tree as a table: indented labels, whether each time is measured or the sum of the
/// children, calls, times, bytes and gradients; at most `limit` rows. With `time_only`
/// (profiles) the memory and gradient columns are left out.
fn tree_table(tree: &ModuleTree, limit: usize, time_only: bool) -> Table {
    let mut headers = vec![
        ("module", Align::Left),
        ("time", Align::Left),
        ("calls", Align::Right),
        ("total", Align::Right),
        ("self", Align::Right),
    ];
    if !time_only {
        headers.extend([
            ("share", Align::Right),
            ("alloc", Align::Right),
            ("graph", Align::Right),
            ("params", Align::Right),
            ("gradients", Align::Left),
            ("norm", Align::Right),
        ]);
    }
    let mut table = Table::new(&headers);
    let bytes = |v: u64, note: &Option<String>| {
        if note.is_some() {
            String::from("–")
        } else {
            format_bytes(v)
        }
    };
    for n in tree.nodes.iter().take(limit) {
        let mut cells = vec![
            format!("{}{}", "  ".repeat(n.depth as usize), n.label),
            String::from(match (n.measured, n.children) {
                (true, _) => "measured",
                (false, 0) => "no span",
                (false, _) => "Σ children",
            }),
            if n.measured {
                n.calls.to_string()
            } else {
                String::from("–")
            },
            format_ns(n.total_ns),
            if n.measured {
                format_ns(n.self_ns)
            } else {
                String::from("–")
            },
        ];
        if !time_only {
            let g = &n.gradients;
            let states: Vec<String> = [
                (g.present, "present"),
                (g.missing, "missing"),
                (g.zero, "zero"),
                (g.non_finite, "non-finite"),
            ]
            .iter()
            .filter(|(k, _)| *k > 0)
            .map(|(k, name)| format!("{k} {name}"))
            .collect();
            cells.extend([
                share_text(n.share),
                bytes(n.alloc_bytes, &tree.alloc_note),
                bytes(n.graph_bytes, &tree.graph_note),
                n.param_bytes.map_or(String::from("–"), format_bytes),
                states.join(", "),
                n.grad_norm.map_or(String::new(), |v| format!("{v:.4e}")),
            ]);
        }
        table.row(cells);
    }
    table
}

/// How much of a tree its table shows, when not all of it.
fn shown_line(tree: &ModuleTree, limit: usize) -> Option<String> {
    (tree.nodes.len() > limit).then(|| {
        format!(
            "showing the first {limit} of {} node(s) in tree order (`--limit {}` shows all)\n",
            tree.nodes.len(),
            tree.nodes.len()
        )
    })
}

/// What a tree table does not show: the rows left out, the notes on empty columns.
fn tree_notes(tree: &ModuleTree, limit: usize, time_only: bool) -> String {
    let mut text = shown_line(tree, limit).unwrap_or_default();
    if !time_only {
        for (column, note) in [
            ("alloc", &tree.alloc_note),
            ("graph", &tree.graph_note),
            ("params, gradients", &tree.gradients_note),
        ] {
            if let Some(note) = note {
                text.push_str(&format!("{column}: {note}\n"));
            }
        }
    }
    text
}

fn coverage_json(c: &Coverage) -> Value {
    json!({
        "forward_ns": c.forward_ns, "covered_ns": c.covered_ns,
        "unattributed_ns": c.unattributed_ns, "percent": c.percent,
    })
}

/// `--kind modules` on a trace: the module tree (SCHEMA.md §4, "Module names").
fn module_tree(doc: &TraceDocument, limit: usize) -> (Value, Table, String) {
    let paths = ModulePaths::new(doc);
    let tree = trace_tree(doc, &paths);
    let coverage = TraceCoverage::of(doc);
    let mut preamble = format!(
        "{} module(s) in a tree of {} node(s), keyed by {}; Σ children: a group no span \
         measured, whose times add up its children's\n",
        tree.nodes.iter().filter(|n| n.measured).count(),
        tree.nodes.len(),
        if tree.names {
            "module names (from the weights)"
        } else {
            "nesting path (no module names in the trace)"
        }
    );
    if let Some(line) = coverage.overall.sentence() {
        preamble.push_str(&line);
        preamble.push('\n');
    }
    if coverage.backward_unsplit {
        preamble.push_str(
            "backward is one span with no per-module split (candle's backward opens no spans)\n",
        );
    }
    if tree.outside_alloc_bytes > 0 || tree.outside_graph_bytes > 0 {
        preamble.push_str(&format!(
            "outside every module: {} allocated, {} of graph tensors\n",
            format_bytes(tree.outside_alloc_bytes),
            format_bytes(tree.outside_graph_bytes)
        ));
    }
    let table = tree_table(&tree, limit, false);
    let notes = tree_notes(&tree, limit, false);
    if !notes.is_empty() {
        preamble.push_str(&notes);
    }
    let forwards: Vec<Value> = coverage
        .forwards
        .iter()
        .map(|f| {
            let mut v = coverage_json(&f.coverage);
            v["span_id"] = json!(doc.spans[f.span].id);
            v
        })
        .collect();
    let value = json!({
        "by": "tree",
        "names": tree.names,
        "coverage": {
            "overall": coverage_json(&coverage.overall),
            "forwards": forwards,
            "backward_unsplit": coverage.backward_unsplit,
        },
        "outside_alloc_bytes": tree.outside_alloc_bytes,
        "outside_graph_bytes": tree.outside_graph_bytes,
        "alloc_note": tree.alloc_note,
        "graph_note": tree.graph_note,
        "gradients_note": tree.gradients_note,
        "node_count": tree.nodes.len(),
        "modules": tree.nodes.iter().take(limit).collect::<Vec<_>>(),
    });
    (value, table, preamble)
}

/// `--kind modules` on an inference profile: the module tree of every request's forward calls
/// and of each request, with each forward call's coverage.
fn profile_module_tree(
    doc: &ProfileDocument,
    opts: &Options,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let requests = doc.module_spans();
    let all = profile_tree(&requests);
    let overall = Coverage::sum(
        requests
            .iter()
            .flat_map(|r| &r.forwards)
            .map(|f| &f.coverage),
    );
    if opts.json {
        let per_request: Vec<Value> = requests
            .iter()
            .map(|r| {
                let tree = profile_tree(core::slice::from_ref(r));
                let calls: Vec<Value> = r
                    .forwards
                    .iter()
                    .map(|f| {
                        json!({
                            "forward": f.forward, "forward_index": f.forward_index,
                            "coverage": coverage_json(&f.coverage),
                        })
                    })
                    .collect();
                json!({
                    "request_id": r.request_id,
                    "forward_calls": calls,
                    "unreadable": r.unreadable,
                    "coverage": coverage_json(&r.coverage()),
                    "modules": tree.nodes.iter().take(opts.limit).collect::<Vec<_>>(),
                })
            })
            .collect();
        return write_json(
            out,
            &json!({
                "by": "tree",
                "names": all.names,
                "coverage": coverage_json(&overall),
                "modules": all.nodes.iter().take(opts.limit).collect::<Vec<_>>(),
                "requests": per_request,
            }),
        );
    }
    if requests.is_empty() {
        writeln!(
            out,
            "(no module spans: the profile has no `module` phase events)"
        )?;
        return Ok(());
    }
    let forwards: usize = requests.iter().map(|r| r.forwards.len()).sum();
    let unreadable: u64 = requests.iter().map(|r| r.unreadable).sum();
    writeln!(
        out,
        "{} request(s), {forwards} forward call(s){}; keyed by {}; Σ children: a group no span \
         measured, whose times add up its children's",
        requests.len(),
        if unreadable > 0 {
            format!(", {unreadable} unreadable module event(s)")
        } else {
            String::new()
        },
        if all.names {
            "module names (from the weights)"
        } else {
            "nesting path (no module names in the profile)"
        }
    )?;
    if let Some(line) = overall.sentence() {
        writeln!(out, "{line}")?;
    }
    writeln!(out, "\nall requests:")?;
    write!(out, "{}", tree_table(&all, opts.limit, true).render())?;
    write!(out, "{}", tree_notes(&all, opts.limit, true))?;
    for r in requests.iter().take(opts.limit) {
        writeln!(out)?;
        writeln!(
            out,
            "request {} ({} forward call(s)){}",
            if r.request_id.is_empty() {
                "(no id)"
            } else {
                r.request_id.as_str()
            },
            r.forwards.len(),
            r.coverage()
                .sentence()
                .map_or(String::new(), |s| format!(": {s}"))
        )?;
        for f in &r.forwards {
            if let Some(s) = f.coverage.sentence() {
                writeln!(out, "  {} {}: {s}", f.forward, f.forward_index)?;
            }
        }
        let tree = profile_tree(core::slice::from_ref(r));
        write!(out, "{}", tree_table(&tree, opts.limit, true).render())?;
        write!(out, "{}", tree_notes(&tree, opts.limit, true))?;
    }
    Ok(())
}

fn ops_by_path(doc: &TraceDocument, limit: usize) -> (Value, Table, String) {
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
            format_bytes(r.output_bytes),
        ]);
        rows.push(json!({
            "path": r.path, "count": r.count, "total_ns": r.total_ns, "mean_ns": r.mean_ns,
            "max_ns": r.max_ns, "output_bytes": r.output_bytes,
        }));
    }
    (json!({ "groups": rows }), table, String::new())
}

fn profile_modules(
    doc: &ProfileDocument,
    opts: &Options,
    grouping: ModuleGrouping,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let requests = doc.module_spans();
    let key = match grouping {
        ModuleGrouping::Path => "path",
        ModuleGrouping::Name => "name",
    };
    let row_json = |r: &candle_trace_schema::analysis::profile_modules::ProfileModuleRow| json!({ key: r.key, "calls": r.calls, "total_ns": r.total_ns, "mean_ns": r.mean_ns, "requests": r.requests });
    let all = doc.module_rows(grouping);
    if opts.json {
        let per_request: Vec<Value> = requests
            .iter()
            .map(|r| {
                json!({
                    "request_id": r.request_id,
                    "forward_calls": r.forwards.len(),
                    "unreadable": r.unreadable,
                    "modules": r.rows(grouping).iter().take(opts.limit).map(row_json).collect::<Vec<_>>(),
                })
            })
            .collect();
        return write_json(
            out,
            &json!({
                "by": key,
                "modules": all.iter().take(opts.limit).map(row_json).collect::<Vec<_>>(),
                "requests": per_request,
            }),
        );
    }
    if requests.is_empty() {
        writeln!(
            out,
            "(no module spans: the profile has no `module` phase events)"
        )?;
        return Ok(());
    }
    let forwards: usize = requests.iter().map(|r| r.forwards.len()).sum();
    let unreadable: u64 = requests.iter().map(|r| r.unreadable).sum();
    writeln!(
        out,
        "{} request(s), {forwards} forward call(s){}; all requests by {key}:",
        requests.len(),
        if unreadable > 0 {
            format!(", {unreadable} unreadable module event(s)")
        } else {
            String::new()
        }
    )?;
    let table = |rows: &[candle_trace_schema::analysis::profile_modules::ProfileModuleRow]| {
        let mut t = Table::new(&[
            (key, Align::Left),
            ("calls", Align::Right),
            ("total", Align::Right),
            ("mean", Align::Right),
            ("requests", Align::Right),
        ]);
        for r in rows.iter().take(opts.limit) {
            t.row(vec![
                r.key.clone(),
                r.calls.to_string(),
                format_ns(r.total_ns),
                format_ns(r.mean_ns),
                r.requests.to_string(),
            ]);
        }
        t.render()
    };
    write!(out, "{}", table(&all))?;
    for r in requests.iter().take(opts.limit) {
        writeln!(out)?;
        writeln!(
            out,
            "request {} ({} forward call(s)):",
            if r.request_id.is_empty() {
                "(no id)"
            } else {
                r.request_id.as_str()
            },
            r.forwards.len()
        )?;
        write!(out, "{}", table(&r.rows(grouping)))?;
    }
    Ok(())
}

fn ops(doc: &TraceDocument, limit: usize, by: OpsBy) -> (Value, Table, String) {
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
            format_bytes(g.output_bytes),
            g.output_bytes_per_ns()
                .map_or(String::new(), |r| format!("{r:.3}")),
        ]);
        table.row(cells);
        rows.push(json!({
            "op_name": g.op_name, "shape": g.shape, "dtype": g.dtype, "count": g.count,
            "total_ns": g.total_ns, "mean_ns": g.mean_ns, "max_ns": g.max_ns, "min_ns": g.min_ns,
            "output_bytes": g.output_bytes, "input_bytes": g.input_bytes,
        }));
    }
    (json!({ "groups": rows }), table, String::new())
}

fn edges(doc: &TraceDocument, limit: usize) -> (Value, Table, String) {
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

fn requests(doc: &ProfileDocument, opts: &Options, out: &mut dyn Write) -> anyhow::Result<()> {
    let requests = doc.requests();
    if opts.json {
        let rows: Vec<&_> = requests.iter().take(opts.limit).collect();
        return write_json(out, &json!({ "requests": rows }));
    }
    let mut table = Table::new(&[
        ("request", Align::Left),
        ("status", Align::Left),
        ("model", Align::Left),
        ("duration", Align::Right),
        ("TTFT", Align::Right),
        ("tokens", Align::Right),
        ("mean ITL", Align::Right),
        ("events", Align::Right),
        ("invalid", Align::Right),
    ]);
    let us = |v: Option<u64>| v.map_or(String::from("–"), |v| format_ns(v.saturating_mul(1_000)));
    for r in requests.iter().take(opts.limit) {
        table.row(vec![
            r.request_id.clone(),
            r.status.as_str().to_string(),
            r.model.clone().unwrap_or_default(),
            us(r.duration_us),
            us(r.ttft_us),
            r.output_tokens.map_or(String::from("–"), |t| t.to_string()),
            us(r.itl_us_avg),
            r.event_count.to_string(),
            r.invalid_event_count.to_string(),
        ]);
    }
    write!(out, "{}", table.render())?;
    Ok(())
}

fn iterations(doc: &ProfileDocument, opts: &Options, out: &mut dyn Write) -> anyhow::Result<()> {
    let all = doc.iterations();
    if opts.json {
        let rows: Vec<&_> = all.iterations.iter().take(opts.limit).collect();
        return write_json(
            out,
            &json!({
                "iterations": rows,
                "count": all.iterations.len(),
                "batch_size": all.batch_size,
                "duration_ns": all.duration_ns,
                "unreadable": all.unreadable,
            }),
        );
    }
    if all.iterations.is_empty() {
        writeln!(
            out,
            "no batched forwards (an engine's `iteration` events: capture's `Engine::forward`)"
        )?;
        return Ok(());
    }
    match (&all.batch_size, &all.duration_ns) {
        (Some(b), Some(d)) => writeln!(
            out,
            "{} forward(s): batch size p50 {}, p90 {}; forward time p50 {}, p90 {}",
            all.iterations.len(),
            b.p50,
            b.p90,
            format_ns(d.p50),
            format_ns(d.p90)
        )?,
        _ => writeln!(out, "{} forward(s)", all.iterations.len())?,
    }
    let origin = all.iterations[0].start_unix_nanos;
    let mut table = Table::new(&[
        ("engine", Align::Left),
        ("iteration", Align::Right),
        ("start", Align::Right),
        ("duration", Align::Right),
        ("batch", Align::Right),
        ("prefill", Align::Right),
        ("decode", Align::Right),
        ("committed", Align::Right),
        ("tokens/s", Align::Right),
        ("status", Align::Left),
    ]);
    for it in all.iterations.iter().take(opts.limit) {
        let start = u64::try_from(it.start_unix_nanos.saturating_sub(origin)).unwrap_or(0);
        table.row(vec![
            it.engine.clone(),
            it.iteration.to_string(),
            format!("+{}", format_ns(start)),
            format_ns(it.duration_ns),
            it.batch_size.to_string(),
            it.prefill_tokens.to_string(),
            it.decode_tokens.to_string(),
            it.committed_tokens.to_string(),
            it.tokens_per_s.map_or(String::from("–"), |t| t.to_string()),
            it.status.clone(),
        ]);
    }
    write!(out, "{}", table.render())?;
    if all.iterations.len() > opts.limit {
        writeln!(
            out,
            "… {} more (--limit)",
            all.iterations.len() - opts.limit
        )?;
    }
    if all.unreadable > 0 {
        writeln!(
            out,
            "{} iteration event(s) could not be placed",
            all.unreadable
        )?;
    }
    Ok(())
}

fn resources(doc: &ProfileDocument, opts: &Options, out: &mut dyn Write) -> anyhow::Result<()> {
    let all = doc.resources();
    if opts.json {
        return write_json(
            out,
            &json!({ "resources": all.kinds, "unreadable": all.unreadable }),
        );
    }
    if all.kinds.is_empty() {
        writeln!(out, "no resource events")?;
        return Ok(());
    }
    for usage in &all.kinds {
        let capacity = usage
            .capacity
            .map_or(String::from("capacity not stated"), |c| {
                format!("capacity {c}")
            });
        let peak = usage
            .peak
            .as_ref()
            .map_or(String::from("no level stated"), |p| {
                format!("peak {}", p.level)
            });
        writeln!(
            out,
            "{}: {capacity}, {peak}; {} deferral(s), {} rejection(s), {} underflow(s), {} never released",
            usage.resource_kind,
            usage.deferrals,
            usage.rejections,
            usage.underflows.len(),
            usage.leaks.len()
        )?;
        let origin = usage.occupancy.iter().filter_map(|p| p.at_unix_nanos).min();
        if !usage.occupancy.is_empty() {
            writeln!(out, "\noccupancy")?;
            let mut table = Table::new(&[
                ("at", Align::Right),
                ("level", Align::Right),
                ("capacity", Align::Right),
                ("action", Align::Left),
                ("request", Align::Left),
                ("line", Align::Right),
            ]);
            for p in usage.occupancy.iter().take(opts.limit) {
                let at = match (p.at_unix_nanos, origin) {
                    (Some(t), Some(o)) => {
                        format!("+{}", format_ns(u64::try_from(t - o).unwrap_or(0)))
                    }
                    _ => String::from("–"),
                };
                table.row(vec![
                    at,
                    p.level.to_string(),
                    p.capacity.map_or(String::from("–"), |c| c.to_string()),
                    p.action.as_str().to_string(),
                    p.holder.clone(),
                    p.line.to_string(),
                ]);
            }
            write!(out, "{}", table.render())?;
            if usage.occupancy.len() > opts.limit {
                writeln!(
                    out,
                    "… {} more (--limit)",
                    usage.occupancy.len() - opts.limit
                )?;
            }
        }
        if !usage.holders.is_empty() {
            writeln!(out, "\nper request")?;
            let mut table = Table::new(&[
                ("request", Align::Left),
                ("reserved", Align::Right),
                ("committed", Align::Right),
                ("released", Align::Right),
                ("rolled back", Align::Right),
                ("held at end", Align::Right),
                ("deferred", Align::Right),
                ("rejected", Align::Right),
            ]);
            for h in usage.holders.iter().take(opts.limit) {
                table.row(vec![
                    h.holder.clone(),
                    h.reserved.to_string(),
                    h.committed.to_string(),
                    h.released.to_string(),
                    h.rolled_back.to_string(),
                    h.held.to_string(),
                    h.deferrals.to_string(),
                    h.rejections.to_string(),
                ]);
            }
            write!(out, "{}", table.render())?;
        }
        if !usage.reasons.is_empty() {
            writeln!(out, "\nreasons")?;
            for r in &usage.reasons {
                writeln!(out, "  {} × {}: {}", r.count, r.action, r.reason)?;
            }
        }
        for u in &usage.underflows {
            writeln!(
                out,
                "UNDERFLOW line {}: {} went {} below 0 ({})",
                u.line, u.holder, u.amount, u.kind
            )?;
        }
        for l in &usage.leaks {
            writeln!(out, "NEVER RELEASED: {} still holds {}", l.holder, l.held)?;
        }
        writeln!(out)?;
    }
    if all.unreadable > 0 {
        writeln!(
            out,
            "{} resource event(s) without a kind or a known action",
            all.unreadable
        )?;
    }
    Ok(())
}

fn phases(doc: &TraceDocument, limit: usize) -> (Value, Table, String) {
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

fn flops(doc: &TraceDocument, limit: usize) -> (Value, Table, String) {
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
            dtypes.join(", "),
        ]);
    }
    (json!(e), table, preamble)
}

fn reconciliation(doc: &TraceDocument, limit: usize) -> (Value, Table, String) {
    let r = reconcile(doc);
    let preamble = match r.max_unexplained.map(|i| &r.points[i]) {
        Some(p) => format!(
            "largest unexplained: {} ({} B) on {} at {}\n",
            format_bytes(p.unexplained_bytes),
            p.unexplained_bytes,
            p.device,
            format_ns(p.timestamp_ns)
        ),
        None => String::from("no device_memory checkpoints\n"),
    };
    let mut table = Table::new(&[
        ("time", Align::Right),
        ("device", Align::Left),
        ("used", Align::Right),
        ("live (allocator)", Align::Right),
        ("unexplained", Align::Right),
        ("line", Align::Right),
    ]);
    for p in r.points.iter().take(limit) {
        table.row(vec![
            format_ns(p.timestamp_ns),
            p.device.clone(),
            format_bytes(p.used_bytes),
            format_bytes(p.live_bytes),
            format_bytes(p.unexplained_bytes),
            p.line.to_string(),
        ]);
    }
    (json!(r), table, preamble)
}

fn latency(doc: &ProfileDocument, opts: &Options, out: &mut dyn Write) -> anyhow::Result<()> {
    let requests = doc.requests();
    let ttft: Vec<u64> = requests.iter().filter_map(|r| r.ttft_us).collect();
    let itl: Vec<u64> = requests
        .iter()
        .flat_map(|r| r.itl_nanos.iter().copied())
        .collect();
    let stats = doc.latency();
    let settings = doc.settings();
    if opts.json {
        return write_json(
            out,
            &json!({
                (attribute::TTFT_US): stats.ttft_us,
                (attribute::ITL_NANOS): stats.itl_nanos,
                "ttft_histogram": Histogram::of(&ttft),
                "itl_histogram": Histogram::of(&itl),
                "detail_level": settings.detail_level,
                "sample_rate": settings.sample_rate,
                "failures": doc.failures().len(),
                "diagnostic_only": doc.diagnostic_only().len(),
            }),
        );
    }
    writeln!(
        out,
        "detail level {}, sample rate {}",
        settings.detail_level.as_deref().unwrap_or("not stated"),
        settings
            .sample_rate
            .map_or(String::from("not stated"), |r| r.to_string())
    )?;
    let mut table = Table::new(&[
        ("metric", Align::Left),
        ("count", Align::Right),
        ("p50", Align::Right),
        ("p90", Align::Right),
        ("p99", Align::Right),
        ("max", Align::Right),
    ]);
    for (name, p, scale) in [
        ("TTFT", stats.ttft_us, 1_000u64),
        ("ITL", stats.itl_nanos, 1),
    ] {
        if let Some(p) = p {
            let f = |v: u64| format_ns(v.saturating_mul(scale));
            table.row(vec![
                name.into(),
                p.count.to_string(),
                f(p.p50),
                f(p.p90),
                f(p.p99),
                f(p.max),
            ]);
        }
    }
    if table.is_empty() {
        writeln!(out, "(no token timing)")?;
    } else {
        write!(out, "{}", table.render())?;
    }
    Ok(())
}
