//! An inference profile on the flame chart: every request and every engine on one wall-clock
//! axis (`schema::analysis::request_axis`). First a lane group per engine: its batched forwards
//! (`forward N · batch B`) with their module spans nested; then one lane group per request,
//! ordered by worker thread (then by open), with its queueing, the forwards that ran its prompt
//! and its decode tokens, its decode-stage intervals and its own forward calls' module spans;
//! and the memory snapshots' current bytes as the memory lane.
//!
//! Rules (the profile has no span tree; these are the chart's):
//! - Times are the axis's: each group sits at its earliest item's place on it.
//! - A request's items: `request` from its open to its close (else to its last item); `queued`
//!   from its open to its first forward; each forward that ran its prompt or decode tokens as
//!   `prefill` or `decode`, named after the token commits it holds (`decode → token 3`,
//!   `decode → tokens 4–6`: a commit belongs to the last forward that started before it);
//!   decode-stage intervals and module spans at the request's start plus their offsets.
//! - Within a group, things are taken by start (the longest first when two start together);
//!   each is drawn under the last one still running when it starts (lying inside it, or
//!   overlapping its end: never over it), or as a root when none is. Forwards, bars and
//!   function spans are `function` spans, decode stages `op` spans, module spans `module` spans.
//! - The memory lane is the snapshots' `current_bytes` over time, drawn with the earliest group.

use candle_trace_schema::analysis::findings::iteration_key;
use candle_trace_schema::analysis::profile_modules::ModuleSpan;
use candle_trace_schema::analysis::sort;
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
    /// What it stands for (what a tab's row links it to).
    role: SpanRole,
    /// A module span's weight path, when the capture named it.
    module: Option<String>,
    start_ns: i64,
    duration_ns: u64,
}

/// Whose lane group it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// A request's (its id).
    Request(String),
    /// An engine's batched forwards (its id).
    Engine(String),
}

/// What a span of the chart stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpanRole {
    /// A request's own span, from its open to its close.
    Request,
    /// A request waiting for its first forward.
    Queued,
    /// A forward: an engine's batched forward, or the one that ran a request's prompt or
    /// decode tokens; with the batched forward's key (`engine/iteration`) when it was one.
    Forward(Option<String>),
    /// A decode-stage interval of a request.
    Stage,
    /// A module span: its module key in its forward call and its name; with the batched
    /// forward's key when it ran in an engine's forward.
    Module {
        /// The module key (`analysis::profile_modules::ModuleSpan::path`).
        path: String,
        /// The span's name (its leaf name).
        name: String,
        /// The engine's forward it ran in (`engine/iteration`).
        forward: Option<String>,
        /// Its forward call within its group: a request's `forward_index`, an engine's
        /// `iteration`.
        call: u64,
        /// Whether the modules tab has a row for it: a `module` span, or one the capture
        /// named by its weights (`analysis::module_tree::profile_tree`'s rule).
        in_tree: bool,
    },
}

/// One request (or engine) as a lane group.
#[derive(Debug, Clone)]
pub struct RequestGroup {
    /// `request <id>`.
    pub label: String,
    /// Whose it is.
    pub owner: Owner,
    /// The request's spans as a trace.
    pub model: TraceModel,
    /// What each of its spans stands for, indexed like `model.doc.spans`.
    pub roles: Vec<SpanRole>,
    /// Where its own 0 sits on the axis.
    pub offset_ns: i64,
}

/// The chart of a profile.
#[derive(Debug, Clone, Default)]
pub struct ProfileChart {
    /// One group per request with something to draw, in order of first appearance.
    pub groups: Vec<RequestGroup>,
    /// Unix ns of the axis's time 0 (`None` when nothing is placed): the times every tab
    /// shows are after it.
    pub origin_unix_nanos: Option<i64>,
}

/// The trace of `items` (times relative to the earliest), nested by containment: a meta
/// (line 1) and, for each item, a span whose start and end stand on the lines they would in the
/// trace/6 text of it (2 and 3 for the first), so its diagnostics name the same lines; and what
/// each of its spans stands for.
fn request_document(request: &str, items: &[Item]) -> (TraceDocument, Vec<SpanRole>) {
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
            pass: None,
            module: item.module.as_deref().map(Into::into),
            duration_ns: Some(item.duration_ns),
            line,
            end_line: Some(line + 1),
        });
        open.push((i, end));
    }
    let roles = order.iter().map(|&i| items[i].role.clone()).collect();
    (
        TraceDocument::assemble(Lined::new(1, meta), spans, Vec::new()),
        roles,
    )
}

/// Whether the modules tab has a row for module span `s` (`profile_tree`'s rule).
fn in_tree(s: &ModuleSpan) -> bool {
    (s.span_kind == SpanKind::Module || s.module.as_deref().is_some_and(|m| !m.is_empty()))
        && !s.path.is_empty()
}

impl ProfileChart {
    /// The chart of `doc`.
    pub fn of(doc: &ProfileDocument) -> Self {
        let axis = doc.request_axis();
        let Some(origin) = axis.origin_unix_nanos else {
            return ProfileChart::default();
        };
        let modules = doc.module_spans();
        let waterfalls = doc.waterfalls();
        let at = |ns: u64| i64::try_from(ns).unwrap_or(i64::MAX);
        let mut placed: Vec<(String, Owner, Vec<Item>)> = Vec::new();
        for engine in &axis.engines {
            let mut items: Vec<Item> = engine
                .forwards
                .iter()
                .map(|f| Item {
                    name: format!("forward {} · batch {}", f.iteration, f.batch_size),
                    kind: SpanKind::Function,
                    role: SpanRole::Forward(Some(iteration_key(&engine.engine, f.iteration))),
                    module: None,
                    start_ns: at(f.at.start_ns),
                    duration_ns: f.at.end_ns - f.at.start_ns,
                })
                .collect();
            if let Some(m) = modules.iter().find(|m| m.request_id == engine.engine) {
                for call in &m.forwards {
                    let Some(slot) = engine
                        .forwards
                        .iter()
                        .find(|f| f.iteration == call.forward_index)
                    else {
                        continue;
                    };
                    let forward = iteration_key(&engine.engine, call.forward_index);
                    items.extend(call.spans.iter().map(|s| Item {
                        name: s.name.clone(),
                        kind: s.span_kind,
                        role: SpanRole::Module {
                            path: s.path.clone(),
                            name: s.name.clone(),
                            forward: Some(forward.clone()),
                            call: call.forward_index,
                            in_tree: in_tree(s),
                        },
                        module: s.module.clone(),
                        start_ns: at(slot.at.start_ns.saturating_add(s.start_ns)),
                        duration_ns: s.duration_ns,
                    }));
                }
            }
            placed.push((
                format!("engine {}", engine.engine),
                Owner::Engine(engine.engine.clone()),
                items,
            ));
        }
        for group in &axis.groups {
            for lane in &group.requests {
                let mut items = Vec::new();
                let mut segments: Vec<(&str, u64, u64)> = lane
                    .prefill
                    .iter()
                    .map(|i| ("prefill", i.start_ns, i.end_ns))
                    .chain(lane.decode.iter().map(|i| ("decode", i.start_ns, i.end_ns)))
                    .collect();
                sort::by_key(&mut segments, |s| (s.1, s.2));
                // The commits each segment holds (1-based token numbers).
                let mut held: Vec<Vec<usize>> = vec![Vec::new(); segments.len()];
                for (k, &c) in lane.commits_ns.iter().enumerate() {
                    if let Some(i) = segments.iter().rposition(|s| s.1 < c) {
                        held[i].push(k + 1);
                    }
                }
                for (s, tokens) in segments.iter().zip(&held) {
                    let name = match tokens.as_slice() {
                        [] => String::from(s.0),
                        [k] => format!("{} → token {k}", s.0),
                        [k, .., last] => format!("{} → tokens {k}–{last}", s.0),
                    };
                    // The batched forward that ran it, where one did.
                    let batched = lane.forwards.iter().find_map(|r| {
                        let e = axis.engines.get(r.engine)?;
                        let f = e.forwards.get(r.forward)?;
                        (f.at.start_ns == s.1 && f.at.end_ns == s.2)
                            .then(|| iteration_key(&e.engine, f.iteration))
                    });
                    items.push(Item {
                        name,
                        kind: SpanKind::Function,
                        role: SpanRole::Forward(batched),
                        module: None,
                        start_ns: at(s.1),
                        duration_ns: s.2 - s.1,
                    });
                }
                if let Some(q) = lane.queue {
                    items.push(Item {
                        name: String::from("queued"),
                        kind: SpanKind::Function,
                        role: SpanRole::Queued,
                        module: None,
                        start_ns: at(q.start_ns),
                        duration_ns: q.end_ns - q.start_ns,
                    });
                }
                if let Some(w) = waterfalls.iter().find(|w| w.request_id == lane.request_id) {
                    items.extend(w.stages.iter().map(|st| Item {
                        name: st.stage.clone(),
                        kind: SpanKind::Op,
                        role: SpanRole::Stage,
                        module: None,
                        start_ns: at(lane.open_ns.saturating_add(st.start_ns)),
                        duration_ns: st.end_ns.saturating_sub(st.start_ns),
                    }));
                }
                if let Some(m) = modules.iter().find(|m| m.request_id == lane.request_id) {
                    for call in &m.forwards {
                        items.extend(call.spans.iter().map(|s| Item {
                            name: s.name.clone(),
                            kind: s.span_kind,
                            role: SpanRole::Module {
                                path: s.path.clone(),
                                name: s.name.clone(),
                                forward: None,
                                call: call.forward_index,
                                in_tree: in_tree(s),
                            },
                            module: s.module.clone(),
                            start_ns: at(lane.open_ns.saturating_add(s.start_ns)),
                            duration_ns: s.duration_ns,
                        }));
                    }
                }
                let end = lane.close_ns.unwrap_or_else(|| {
                    items
                        .iter()
                        .map(|i| u64::try_from(i.start_ns).unwrap_or(0) + i.duration_ns)
                        .chain(lane.commits_ns.iter().copied())
                        .max()
                        .unwrap_or(lane.open_ns)
                });
                items.push(Item {
                    name: String::from("request"),
                    kind: SpanKind::Function,
                    role: SpanRole::Request,
                    module: None,
                    start_ns: at(lane.open_ns),
                    duration_ns: end.saturating_sub(lane.open_ns),
                });
                let label = match &group.thread {
                    Some(thread) => format!("request {} · {thread}", lane.request_id),
                    None => format!("request {}", lane.request_id),
                };
                placed.push((label, Owner::Request(lane.request_id.clone()), items));
            }
        }
        let groups: Vec<RequestGroup> = placed
            .into_iter()
            .filter(|(_, _, items)| !items.is_empty())
            .map(|(label, owner, items)| {
                let offset_ns = items.iter().map(|i| i.start_ns).min().unwrap_or(0);
                let (doc, roles) = request_document(&label, &items);
                RequestGroup {
                    label,
                    owner,
                    model: TraceModel::without_findings(doc),
                    roles,
                    offset_ns,
                }
            })
            .collect();
        let mut chart = ProfileChart {
            groups,
            origin_unix_nanos: Some(origin),
        };
        chart.add_snapshots(doc, origin);
        chart
    }

    /// The snapshots' current bytes as the memory lane of the earliest group (`origin`: the
    /// axis's time 0, Unix ns).
    fn add_snapshots(&mut self, doc: &ProfileDocument, origin: i64) {
        let Some((g, first)) = self
            .groups
            .iter()
            .enumerate()
            .min_by_key(|(_, g)| g.offset_ns)
            .map(|(i, g)| (i, g.offset_ns))
        else {
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
        sort::by(&mut snaps, Ord::cmp);
        let base = i128::from(origin) + i128::from(first);
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
                // Opened at 0 (its earliest event), its prefill at 1 µs.
                ("queued", 0, 1_000, 1),
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

    #[test]
    fn a_requests_span_lasts_what_its_row_says() {
        // `make_fixtures.py`: req-1 opens at 0 and its `request` span lasts 3015 µs; req-2
        // opens at 5 ms, 1775 µs; req-3 at 9 ms, 2110 µs. The chart draws each from its open
        // for that long: the Requests table's duration.
        let doc = read_profile(include_bytes!(
            "../../../tests/fixtures/infer_run.profile.jsonl"
        ));
        let chart = ProfileChart::of(&doc);
        let drawn: Vec<(&str, i64, u64)> = chart
            .groups
            .iter()
            .map(|g| {
                let request = g.roles.iter().position(|r| *r == SpanRole::Request);
                let span = &g.model.doc.spans[request.unwrap()];
                (
                    g.label.as_str(),
                    g.offset_ns + span.start_ns as i64,
                    span.duration_or_zero(),
                )
            })
            .collect();
        assert_eq!(
            drawn,
            [
                ("request req-1", 0, 3_015_000),
                ("request req-2", 5_000_000, 1_775_000),
                ("request req-3", 9_000_000, 2_110_000),
            ]
        );
        let rows = super::super::profile::request_rows(
            doc.requests(),
            &super::super::profile_modules::ProfileModulesPanel::of(&doc),
        );
        let durations: Vec<Option<u64>> = rows.iter().map(|r| r.duration_us).collect();
        assert_eq!(durations, [Some(3015), Some(1775), Some(2110)]);
    }

    #[test]
    fn module_spans_keep_their_weight_paths() {
        // `tests/fixtures/modules/make.py` `names_profile()`: request q's prefill and decode
        // forwards, each `forward` over linears named by their weights.
        let doc = read_profile(include_bytes!(
            "../../../tests/fixtures/modules/names.profile.jsonl"
        ));
        let chart = ProfileChart::of(&doc);
        let m = &chart.groups[0].model;
        let labelled = |m: &TraceModel| -> Vec<String> {
            (0..m.doc.spans.len())
                .filter(|&i| m.doc.spans[i].name == "linear")
                .map(|i| m.span_label(i).to_string())
                .collect()
        };
        // The chart labels them by their weights from the first frame.
        assert_eq!(
            labelled(m),
            [
                "model.layers.0.q_proj",
                "model.layers.1.q_proj",
                "lm_head",
                "model.layers.0.q_proj",
                "model.layers.0.q_proj",
                "model.layers.1.q_proj",
                "lm_head",
                "model.layers.0.q_proj",
            ]
        );
        assert!(m.module_paths().names());
        assert_eq!(labelled(m)[2], "lm_head");
    }

    #[test]
    fn engines_and_requests_of_a_batched_profile_on_one_axis() {
        // `tests/fixtures/serving/make.py`: a opens at 0, b at 0.2 ms, c at 0.4 ms, d at 1.5 ms;
        // engine-0's forwards at 1–3, 3–4, 4–5, 5.5–7, 7–8 ms; forward 1's module spans.
        let doc = read_profile(include_bytes!(
            "../../../tests/fixtures/serving/batched.profile.jsonl"
        ));
        let chart = ProfileChart::of(&doc);
        let labels: Vec<(&str, i64)> = chart
            .groups
            .iter()
            .map(|g| (g.label.as_str(), g.offset_ns))
            .collect();
        // Requests by thread: a, b, c ran on the engine's thread; d (rejected) only opened.
        assert_eq!(
            labels,
            vec![
                ("engine engine-0", 1_000_000),
                ("request a · engine", 0),
                ("request b · engine", 200_000),
                ("request c · engine", 400_000),
                ("request d · main", 1_500_000),
            ]
        );
        let spans = |g: usize| -> Vec<(String, u64, u64, u32)> {
            let m = &chart.groups[g].model;
            m.doc
                .spans
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    (
                        s.name.to_string(),
                        s.start_ns,
                        s.duration_or_zero(),
                        m.doc.tree.depth[i],
                    )
                })
                .collect()
        };
        let engine = spans(0);
        assert_eq!(
            engine[0],
            ("forward 0 · batch 2".to_string(), 0, 2_000_000, 0)
        );
        // Forward 1 (2 ms after the first) holds its module spans: block 10 µs in, linear 20 µs.
        assert_eq!(
            engine[1],
            ("forward 1 · batch 2".to_string(), 2_000_000, 1_000_000, 0)
        );
        assert_eq!(engine[2], ("block".to_string(), 2_010_000, 800_000, 1));
        assert_eq!(engine[3], ("linear".to_string(), 2_020_000, 300_000, 2));
        assert_eq!(engine.len(), 7);
        // a: queued 0–1 ms, its prompt in forward 0 (token 1 at 3 ms), then two decodes.
        let ms = 1_000_000;
        assert_eq!(
            spans(1),
            vec![
                ("request".to_string(), 0, 5_200_000, 0),
                ("queued".to_string(), 0, ms, 1),
                ("prefill → token 1".to_string(), ms, 2 * ms, 1),
                ("decode → token 2".to_string(), 3 * ms, ms, 1),
                ("decode → token 3".to_string(), 4 * ms, ms, 1),
            ]
        );
        // c queued from 0.4 to 5.5 ms (5.1 ms), relative to its own group.
        assert_eq!(spans(3)[1], ("queued".to_string(), 0, 5_100_000, 1));
        // d: only its request.
        assert_eq!(spans(4), vec![("request".to_string(), 0, 200_000, 0)]);
    }
}
