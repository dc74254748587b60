//! `query --kind modules`: the module tree of a trace or a profile, or modules grouped by name.

use std::io::Write;

use candle_trace_schema::analysis::coverage::{Coverage, TraceCoverage};
use candle_trace_schema::analysis::module_tree::{profile_tree, trace_tree, ModuleTree};
use candle_trace_schema::analysis::modules::{module_rows, ModuleGrouping, ModulePaths};
use candle_trace_schema::analysis::profile_modules::{
    ModuleSpanCounts, ProfileModuleRow, RequestModules,
};
use candle_trace_schema::analysis::units::{format_bytes, format_ns};
use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::profile::ProfileDocument;
use serde_json::{json, Value};

use super::Options;
use crate::table::{Align, Table};
use crate::write_json;

fn share_text(share: Option<f64>) -> String {
    share.map_or(String::from("–"), |s| format!("{:.1}%", s * 100.0))
}

pub(super) fn modules(
    doc: &TraceDocument,
    limit: usize,
    grouping: ModuleGrouping,
) -> (Value, Table, String) {
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
        // A module no span ran, known only from its weights: its time was not measured.
        let no_span = !n.measured && n.children == 0;
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
            if no_span {
                String::from("–")
            } else {
                format_ns(n.total_ns)
            },
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
                if no_span {
                    String::from("–")
                } else {
                    share_text(n.share)
                },
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
pub(super) fn module_tree(doc: &TraceDocument, limit: usize) -> (Value, Table, String) {
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

/// Said for a profile without module spans.
const NO_MODULE_SPANS: &str = "(no module spans: the profile has no `module` phase events)";

/// `3 request(s), 27 forward call(s)` (`2 engine(s)` for the batched forwards' owners, and the
/// unreadable module events, if any); `None` for a profile without module spans.
fn requests_counts(requests: &[RequestModules]) -> Option<String> {
    if requests.is_empty() {
        return None;
    }
    let c = ModuleSpanCounts::of(requests);
    let mut owners = Vec::new();
    if c.requests > 0 {
        owners.push(format!("{} request(s)", c.requests));
    }
    if c.engines > 0 {
        owners.push(format!("{} engine(s)", c.engines));
    }
    let mut text = format!("{}, {} forward call(s)", owners.join(", "), c.forward_calls);
    if c.unreadable > 0 {
        text.push_str(&format!(", {} unreadable module event(s)", c.unreadable));
    }
    Some(text)
}

/// `request r1`, `engine engine-0` or `request (no id)`: whose forward calls these are.
fn owner_label(r: &RequestModules) -> String {
    let id = if r.request_id.is_empty() {
        "(no id)"
    } else {
        r.request_id.as_str()
    };
    format!("{} {id}", if r.engine { "engine" } else { "request" })
}

/// `--kind modules` on an inference profile: the module tree of every request's forward calls
/// and of each request, with each forward call's coverage.
pub(super) fn profile_module_tree(
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
                    "engine": r.engine,
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
    let Some(counts) = requests_counts(&requests) else {
        writeln!(out, "{NO_MODULE_SPANS}")?;
        return Ok(());
    };
    writeln!(
        out,
        "{counts}; keyed by {}; Σ children: a group no span measured, whose times add up its \
         children's",
        if all.names {
            "module names (from the weights)"
        } else {
            "nesting path (no module names in the profile)"
        }
    )?;
    if let Some(line) = overall.sentence() {
        writeln!(out, "{line}")?;
    }
    writeln!(out, "\nall forward calls:")?;
    write!(out, "{}", tree_table(&all, opts.limit, true).render())?;
    write!(out, "{}", tree_notes(&all, opts.limit, true))?;
    for r in requests.iter().take(opts.limit) {
        writeln!(out)?;
        writeln!(
            out,
            "{} ({} forward call(s)){}",
            owner_label(r),
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

pub(super) fn profile_modules(
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
    let row_json = |r: &ProfileModuleRow| json!({ key: r.key, "calls": r.calls, "total_ns": r.total_ns, "mean_ns": r.mean_ns, "requests": r.requests });
    let all = doc.module_rows(grouping);
    if opts.json {
        let per_request: Vec<Value> = requests
            .iter()
            .map(|r| {
                json!({
                    "request_id": r.request_id,
                    "engine": r.engine,
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
    let Some(counts) = requests_counts(&requests) else {
        writeln!(out, "{NO_MODULE_SPANS}")?;
        return Ok(());
    };
    writeln!(out, "{counts}; all forward calls by {key}:")?;
    let table = |rows: &[ProfileModuleRow]| {
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
            "{} ({} forward call(s)):",
            owner_label(r),
            r.forwards.len()
        )?;
        write!(out, "{}", table(&r.rows(grouping)))?;
    }
    Ok(())
}
