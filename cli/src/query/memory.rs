//! `query --kind memory | gradients | reconcile`: memory, gradients, and the device's memory
//! against the allocator's.

use candle_trace_schema::analysis::gradients::{
    gradient_finding, gradient_groups, gradients_for_review, norm_histogram, GradientCounts,
};
use candle_trace_schema::analysis::modules::{names_mode, ModulePaths};
use candle_trace_schema::analysis::reconcile::reconcile;
use candle_trace_schema::analysis::units::{format_bytes, format_ns};
use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::events::TensorCategory;
use serde_json::{json, Value};

use crate::table::{Align, Table};

pub(super) fn memory(doc: &TraceDocument, limit: usize) -> (Value, Table, String) {
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
    // A trace whose capture named modules by their weights also says which module each
    // allocation was made in (`model.layers.0.mlp.up_proj`, not the span's name `linear`).
    let paths = names_mode(&doc.spans).then(|| ModulePaths::new(doc));
    let named = paths.is_some();
    let mut columns = vec![
        ("tensor", Align::Left),
        ("bytes", Align::Right),
        ("category", Align::Left),
        ("op", Align::Left),
        ("span", Align::Left),
    ];
    if named {
        columns.push(("module", Align::Left));
    }
    columns.push(("line", Align::Right));
    let mut table = Table::new(&columns);
    let mut live = Vec::new();
    for a in p.live_at_peak.iter().take(limit) {
        let index = doc.span_index(&a.span_id);
        let span = index.map_or(a.span_id.as_str(), |i| doc.spans[i].name.as_str());
        let module = index.and_then(|i| paths.as_ref()?.module_of(i));
        let mut cells = vec![
            a.tensor_id.clone(),
            format_bytes(a.bytes),
            a.category.as_str().into(),
            a.op_name.clone().unwrap_or_default(),
            span.into(),
        ];
        if named {
            cells.push(module.unwrap_or("–").into());
        }
        cells.push(a.line.to_string());
        table.row(cells);
        live.push(json!({
            "tensor_id": a.tensor_id, "bytes": a.bytes, "category": a.category.as_str(),
            "op_name": a.op_name, "span_id": a.span_id, "module": module,
            "timestamp_ns": a.timestamp_ns, "line": a.line,
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

pub(super) fn gradients(doc: &TraceDocument, limit: usize) -> (Value, Table, String) {
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

pub(super) fn reconciliation(doc: &TraceDocument, limit: usize) -> (Value, Table, String) {
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
