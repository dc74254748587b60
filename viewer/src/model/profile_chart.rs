//! An inference profile on the flame chart: one lane group per request, each at its place on
//! one time axis, with the request's timed spans (`request`, `prefill`, `decode` …), its
//! decode-stage intervals and its forward calls' module spans nested by time; and the memory
//! snapshots' current bytes as the memory lane.
//!
//! Rules (the profile has no span tree; these are the chart's):
//! - Times are the waterfall's (`schema::analysis::waterfall`): a request's bars relative to
//!   its origin, its decode stages and module spans relative to its start, taken as the same
//!   origin. A request sits at `origin + its earliest time − the earliest of all requests`
//!   (a request without an origin at 0).
//! - Within a request, things are taken by start (the longest first when two start together);
//!   each is drawn under the last one still running when it starts (lying inside it, or
//!   overlapping its end: never over it), or as a root when none is. Bars and
//!   forward calls' function spans are `function` spans, decode stages `op` spans, module
//!   spans `module` spans, named as in the profile (a bar by its phase).
//! - The memory lane is the snapshots' `current_bytes` over time, drawn with the earliest
//!   request's group.

use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::events::{Meta, Phase, SpanKind, TimingMode, TRACE_SCHEMA};
use candle_trace_schema::format::profile::ProfileDocument;
use candle_trace_schema::format::records::{Lined, Span};

use super::sort::sort_indices;
use super::TraceModel;
use crate::timeline::memory_curve::DeviceCurve;

/// One thing drawn for a request.
#[derive(Debug, Clone, PartialEq)]
struct Item {
    name: String,
    kind: SpanKind,
    start_ns: i64,
    duration_ns: u64,
}

/// One request as a lane group.
#[derive(Debug, Clone)]
pub struct RequestGroup {
    /// `request <id>`.
    pub label: String,
    /// The request's spans as a trace.
    pub model: TraceModel,
    /// Where its own 0 sits on the axis.
    pub offset_ns: i64,
}

/// The chart of a profile.
#[derive(Debug, Clone, Default)]
pub struct ProfileChart {
    /// One group per request with something to draw, in order of first appearance.
    pub groups: Vec<RequestGroup>,
}

/// The trace of `items` (times relative to the earliest), nested by containment: a meta
/// (line 1) and, for each item, a span whose start and end stand on the lines they would in the
/// trace/6 text of it (2 and 3 for the first), so its diagnostics name the same lines.
fn request_document(request: &str, items: &[Item]) -> TraceDocument {
    let earliest = items.iter().map(|i| i.start_ns).min().unwrap_or(0);
    // By start, the longest first when two start together.
    let mut order: Vec<usize> = (0..items.len()).collect();
    sort_indices(&mut order, &|a, b| {
        let (a, b) = (&items[a], &items[b]);
        a.start_ns
            .cmp(&b.start_ns)
            .then(b.duration_ns.cmp(&a.duration_ns))
    });
    let meta = Meta {
        schema: TRACE_SCHEMA.into(),
        run_id: request.into(),
        correlation_id: request.into(),
        entrypoint: request.into(),
        phase: Phase::Infer,
        timestamp: "1970-01-01T00:00:00Z".into(),
        capture_step: 0,
        warmup_steps: 0,
        device: String::new(),
        measured_region_device_synchronized: false,
        timing_mode: TimingMode::Host,
        tags: Default::default(),
        candle_version: None,
    };
    let mut spans = Vec::with_capacity(items.len());
    // Open items: (index, end).
    let mut open: Vec<(usize, i128)> = Vec::new();
    for (i, item) in order.iter().map(|&i| &items[i]).enumerate() {
        let start = i128::from(item.start_ns);
        let end = start + i128::from(item.duration_ns);
        // The open items that ended before this one starts are done.
        while open
            .last()
            .is_some_and(|&(_, e)| e <= start && item.duration_ns > 0 || e < start)
        {
            open.pop();
        }
        let line = 2 + 2 * i as u64;
        spans.push(Span {
            id: format!("s{i}").into(),
            parent_id: open.last().map(|&(p, _)| format!("s{p}").into()),
            name: item.name.as_str().into(),
            start_ns: u64::try_from(item.start_ns - earliest).unwrap_or(0),
            span_kind: item.kind,
            measured: false,
            step: None,
            module: None,
            duration_ns: Some(item.duration_ns),
            line,
            end_line: Some(line + 1),
        });
        open.push((i, end));
    }
    TraceDocument::assemble(Lined::new(1, meta), spans, Vec::new())
}

impl ProfileChart {
    /// The chart of `doc`.
    pub fn of(doc: &ProfileDocument) -> Self {
        let modules = doc.module_spans();
        let mut placed: Vec<(String, Vec<Item>, Option<i64>)> = doc
            .waterfalls()
            .into_iter()
            .map(|w| {
                let mut items: Vec<Item> = w
                    .bars
                    .iter()
                    .map(|b| Item {
                        name: b.phase.clone(),
                        kind: SpanKind::Function,
                        start_ns: b.start_ns,
                        duration_ns: b.duration_ns,
                    })
                    .collect();
                items.extend(w.stages.iter().map(|s| Item {
                    name: s.stage.clone(),
                    kind: SpanKind::Op,
                    start_ns: i64::try_from(s.start_ns).unwrap_or(i64::MAX),
                    duration_ns: s.end_ns.saturating_sub(s.start_ns),
                }));
                if let Some(m) = modules.iter().find(|m| m.request_id == w.request_id) {
                    for f in &m.forwards {
                        items.extend(f.spans.iter().map(|s| Item {
                            name: s.name.clone(),
                            kind: s.span_kind,
                            start_ns: i64::try_from(s.start_ns).unwrap_or(i64::MAX),
                            duration_ns: s.duration_ns,
                        }));
                    }
                }
                (w.request_id, items, w.origin_unix_nanos)
            })
            .filter(|(_, items, _)| !items.is_empty())
            .collect();
        // Each request's earliest time on the wall clock.
        let wall = |items: &[Item], origin: Option<i64>| -> Option<i128> {
            let earliest = items.iter().map(|i| i.start_ns).min()?;
            origin.map(|o| i128::from(o) + i128::from(earliest))
        };
        let first = placed
            .iter()
            .filter_map(|(_, items, origin)| wall(items, *origin))
            .min();
        let groups = placed
            .iter_mut()
            .map(|(id, items, origin)| {
                let offset_ns = match (wall(items, *origin), first) {
                    (Some(w), Some(f)) => i64::try_from(w - f).unwrap_or(i64::MAX),
                    _ => 0,
                };
                RequestGroup {
                    label: format!("request {id}"),
                    model: TraceModel::without_findings(request_document(id, items)),
                    offset_ns,
                }
            })
            .collect::<Vec<_>>();
        let mut chart = ProfileChart { groups };
        chart.add_snapshots(doc, first);
        chart
    }

    /// The snapshots' current bytes as the memory lane of the earliest group.
    fn add_snapshots(&mut self, doc: &ProfileDocument, first: Option<i128>) {
        let Some(g) = self.groups.iter().position(|g| g.offset_ns == 0) else {
            return;
        };
        let mut snaps: Vec<(i64, u64)> = doc
            .memory_snapshots()
            .into_iter()
            .filter_map(|s| Some((s.ts_unix_nanos?, s.current_bytes?)))
            .collect();
        if snaps.is_empty() {
            return;
        }
        snaps.sort_unstable();
        let base = first.unwrap_or_else(|| i128::from(snaps[0].0));
        let mut curve = DeviceCurve {
            device: "memory snapshots (current)".to_string(),
            timestamp_ns: Vec::with_capacity(snaps.len()),
            live_bytes: Vec::with_capacity(snaps.len()),
            peak_bytes: 0,
        };
        for (t, b) in snaps {
            curve
                .timestamp_ns
                .push(u64::try_from(i128::from(t) - base).unwrap_or(0));
            curve.live_bytes.push(b);
            curve.peak_bytes = curve.peak_bytes.max(b);
        }
        self.groups[g].model.memory_curves = vec![curve];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_trace_schema::format::profile::read_profile;

    /// Two requests 1 ms apart: a (request 0..10 µs holding prefill 1..4 µs and decode
    /// 4..9 µs) and b (request 0..5 µs), a memory snapshot at each request's start.
    fn profile() -> ProfileDocument {
        let base = 1_767_225_600_000_000_000i64;
        let ev = |id: &str, request: &str, phase: &str, ts: i64, us: u64| {
            serde_json::json!({
                "schema_version": 1, "event_kind": "timed_span", "ts_unix_nanos": ts,
                "timestamp": "2026-01-01T00:00:00Z", "event_id": id, "request_id": request,
                "correlation_id": "c", "entrypoint": "serve", "backend": "cpu",
                "runtime_preset_hash": "sha256:ab", "phase": phase, "status": "ok",
                "duration_us": us, "shape": {"batch": 1}
            })
            .to_string()
        };
        let snap = |id: &str, request: &str, ts: i64, bytes: u64| {
            serde_json::json!({
                "schema_version": 1, "event_kind": "memory", "ts_unix_nanos": ts,
                "timestamp": "2026-01-01T00:00:00Z", "event_id": id, "request_id": request,
                "correlation_id": "c", "entrypoint": "serve", "backend": "cpu",
                "runtime_preset_hash": "sha256:ab", "phase": "request", "status": "ok",
                "shape": {"batch": 1},
                "memory": {"scope": "host", "before_bytes": 0, "after_bytes": bytes,
                    "current_bytes": bytes, "high_water_bytes": bytes}
            })
            .to_string()
        };
        let lines = [
            ev("a1", "a", "request", base, 10),
            ev("a2", "a", "prefill", base + 1_000, 3),
            ev("a3", "a", "decode", base + 4_000, 5),
            snap("a4", "a", base, 100),
            ev("b1", "b", "request", base + 1_000_000, 5),
            snap("b2", "b", base + 1_000_000, 300),
        ];
        read_profile(lines.join("\n").as_bytes())
    }

    #[test]
    fn requests_become_groups_on_one_axis_with_their_phases_nested() {
        let doc = profile();
        assert!(
            doc.diagnostics
                .iter()
                .all(|d| d.severity != candle_trace_schema::Severity::Error),
            "{:?}",
            doc.diagnostics
        );
        let chart = ProfileChart::of(&doc);
        let labels: Vec<(&str, i64)> = chart
            .groups
            .iter()
            .map(|g| (g.label.as_str(), g.offset_ns))
            .collect();
        assert_eq!(labels, vec![("request a", 0), ("request b", 1_000_000)]);
        let a = &chart.groups[0].model;
        let spans: Vec<(&str, u64, u64, u32)> = a
            .doc
            .spans
            .iter()
            .enumerate()
            .map(|(i, s)| {
                (
                    s.name.as_str(),
                    s.start_ns,
                    s.duration_or_zero(),
                    a.doc.tree.depth[i],
                )
            })
            .collect();
        assert_eq!(
            spans,
            vec![
                ("request", 0, 10_000, 0),
                ("prefill", 1_000, 3_000, 1),
                ("decode", 4_000, 5_000, 1),
            ]
        );
        // Read without errors (a request marks no measured region: that warning only).
        assert!(
            a.doc
                .diagnostics
                .iter()
                .all(|d| d.severity != candle_trace_schema::Severity::Error),
            "{:?}",
            a.doc.diagnostics
        );
        // The snapshots, on the earliest request's time: 100 B at 0, 300 B at 1 ms.
        let curve = &a.memory_curves[0];
        assert_eq!(curve.timestamp_ns, vec![0, 1_000_000]);
        assert_eq!(curve.live_bytes, vec![100, 300]);
        assert!(chart.groups[1].model.memory_curves.is_empty());
    }
}
