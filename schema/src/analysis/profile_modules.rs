//! Module spans of an inference profile: the module tree of each forward call of each request,
//! keyed by the module-identity rule of [`crate::analysis::modules`], and aggregated by key or
//! name per request and across requests.
//!
//! capture's inference profiler writes each module span of a request's forward calls as a
//! `timed_span` event with `phase` = [`MODULE_PHASE`](crate::format::profile::MODULE_PHASE) and these `attributes`:
//! `span_id` (u64, unique within the request), `parent_span_id` (u64, absent at the top of a
//! forward call), `name`, `span_kind` (`module` | `function`), `forward` (`prefill` |
//! `decode`), `forward_index` (0 = prefill, n = the n-th decode step),
//! `start_nanos_since_request_start` and `duration_nanos`, and `module` (the module name of its
//! weights) when the capture named it.
//!
//! Rules where SCHEMA.md is silent:
//! - Events are grouped by `request_id` (absent: the empty id), then by `forward_index`; both
//!   in order of first appearance. A forward call's `forward` is that of its first event.
//! - A batched forward's module spans (SCHEMA.md §4) are its engine's: they are grouped under
//!   the engine's id (their `request_id`), by `iteration`, as forward calls of `forward`
//!   `iteration` timed by the iteration event's duration, so a forward that served several
//!   requests counts its spans once. The requests a forward served are its request, or for a
//!   batched forward those its iteration event lists (the engine itself where no iteration
//!   event of that number lists any); a row's `requests` counts each request once, whether
//!   its own forwards or an engine's had the spans.
//! - Within a forward call the spans are laid out by [`SpanTree`](crate::format::spans::SpanTree) (a `parent_span_id` naming no
//!   span of the call, or a cycle, makes the span a root; siblings are ordered by start time,
//!   then file order) and keyed by [`ModulePaths`] (names mode when a span of that call has a
//!   `module`), so every forward call of one model gives the same keys and its calls add up per
//!   key. Each call's module coverage is [`ForwardCall::coverage`] ([`crate::analysis::coverage`]).
//! - A duration is `duration_nanos`, else `duration_us × 1000`.
//! - A module event without an unsigned `span_id`, `forward_index` or
//!   `start_nanos_since_request_start`, without a string `name`, or with a `span_kind` other
//!   than `module`, `function` or `op` is not placed in any tree and counted in
//!   [`RequestModules::unreadable`]. (Its line still has the diagnostics of §2.)
//! - Rows count module spans only ([`is_module_span`]); by key, `calls` and `total_ns` count the
//!   outermost spans of each key ([`ModuleSpan::outermost`]), by name every span. They are sorted
//!   by total time, largest first, then by key.
//! - Module events are no phase of the request: [`ProfileDocument::requests`] leaves
//!   [`MODULE_PHASE`](crate::format::profile::MODULE_PHASE) out of a request's `phases`, and [`ProfileDocument::waterfalls`] draws no
//!   bar or marker for them.

use crate::analysis::sort;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use hashbrown::{HashMap, HashSet};
use serde::Serialize;
use serde_json::Value;

use crate::analysis::coverage::{union_ns, Coverage};
use crate::analysis::modules::{is_module_span, ModuleGrouping, ModulePaths};
use crate::analysis::spans::span_tree;
use crate::format::events::{CompactString, SpanKind};
use crate::format::profile::{
    attribute, engine_of, is_module_event, EventKind, ProfileDocument, ProfileRecord,
    ITERATION_PHASE,
};
use crate::format::records::Span;

/// One module span of a forward call, with its module key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModuleSpan {
    /// `attributes.span_id`.
    pub span_id: u64,
    /// `attributes.parent_span_id`.
    pub parent_span_id: Option<u64>,
    /// `attributes.name`.
    pub name: String,
    /// `attributes.span_kind`.
    pub span_kind: SpanKind,
    /// `attributes.module`: the module named by its weights, when the capture named it.
    pub module: Option<String>,
    /// ns since the request started.
    pub start_ns: u64,
    /// `duration_nanos` (or `duration_us × 1000`).
    pub duration_ns: u64,
    /// The module key ([`crate::analysis::modules`]) within the forward call.
    pub path: String,
    /// Its duration less its children's (saturating).
    pub self_ns: u64,
    /// A module span with no ancestor of the same key in the forward call: one call of its
    /// module.
    pub outermost: bool,
    /// Line of the event.
    pub line: u64,
}

/// One forward call of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ForwardCall {
    /// `prefill` or `decode` (as written; empty when absent), or `iteration` for an engine's
    /// batched forward.
    pub forward: String,
    /// 0 = prefill, n = the n-th decode step; a batched forward's `iteration`.
    pub forward_index: u64,
    /// Its spans in file order.
    pub spans: Vec<ModuleSpan>,
    /// Its duration against its outermost module spans ([`crate::analysis::coverage`]).
    pub coverage: Coverage,
    /// The requests it served: its request, or a batched forward's (see the module docs).
    pub requests: Vec<String>,
}

/// Module spans aggregated by key or name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProfileModuleRow {
    /// The module key or the span name.
    pub key: String,
    /// Calls: by key its outermost spans, by name every span of that name.
    pub calls: u64,
    /// Sum of their durations (inclusive).
    pub total_ns: u64,
    /// `total_ns / calls`, integer division.
    pub mean_ns: u64,
    /// Requests served by a forward call with at least one span in the group (each once).
    pub requests: u64,
}

/// One request's module spans.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequestModules {
    /// The request id (empty for events without one), or the engine's id.
    pub request_id: String,
    /// Whether these are an engine's batched forward calls ([`engine_of`]), not a request's.
    pub engine: bool,
    /// Forward calls in order of first appearance.
    pub forwards: Vec<ForwardCall>,
    /// Module events that could not be placed in a tree (see the module docs).
    pub unreadable: u64,
}

impl RequestModules {
    /// This request's module spans aggregated by key or name (for a request, `requests` is 1
    /// in each row; for an engine, the requests its forwards with spans in the row served).
    pub fn rows(&self, grouping: ModuleGrouping) -> Vec<ProfileModuleRow> {
        rows_of(core::slice::from_ref(self), grouping)
    }

    /// The coverage of all this request's forward calls together.
    pub fn coverage(&self) -> Coverage {
        Coverage::sum(self.forwards.iter().map(|f| &f.coverage))
    }

    /// Its module spans (`span_kind` module) in all its forward calls.
    pub fn module_span_count(&self) -> u64 {
        self.forwards
            .iter()
            .flat_map(|f| &f.spans)
            .filter(|s| s.span_kind == SpanKind::Module)
            .count() as u64
    }
}

/// What a profile's module spans are spread over: the owners (requests, and engines for
/// batched forwards), their forward calls and module spans, and the events not placed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ModuleSpanCounts {
    /// Requests with module events.
    pub requests: u64,
    /// Engines with module events (their batched forwards').
    pub engines: u64,
    /// Forward calls with module events.
    pub forward_calls: u64,
    /// Module spans (`span_kind` module) in them.
    pub module_spans: u64,
    /// Module events that could not be placed in a forward call's tree.
    pub unreadable: u64,
}

impl ModuleSpanCounts {
    /// The counts over `owners` ([`ProfileDocument::module_spans`]).
    pub fn of(owners: &[RequestModules]) -> Self {
        let engines = owners.iter().filter(|r| r.engine).count() as u64;
        ModuleSpanCounts {
            requests: owners.len() as u64 - engines,
            engines,
            forward_calls: owners.iter().map(|r| r.forwards.len() as u64).sum(),
            module_spans: owners.iter().map(RequestModules::module_span_count).sum(),
            unreadable: owners.iter().map(|r| r.unreadable).sum(),
        }
    }
}

/// A request's phase spans (see [`ProfileDocument::module_spans`]).
#[derive(Default)]
struct PhaseSpans {
    prefill_ns: Option<u64>,
    /// (start, file position, duration ns), sorted.
    decodes: Vec<(i64, usize, u64)>,
    /// An engine's batched forwards: iteration → (duration ns, the requests it lists).
    iterations: HashMap<u64, (u64, Vec<String>)>,
}

/// A module span: `span_kind = module`, or a module name.
fn is_module(s: &ModuleSpan) -> bool {
    s.span_kind == SpanKind::Module || s.module.as_deref().is_some_and(|m| !m.is_empty())
}

fn attr_u64(attributes: &crate::format::profile::JsonMap, name: &str) -> Option<u64> {
    attributes.get(name).and_then(Value::as_u64)
}

/// A module event as a (forward, index, span) triple; `None` when it cannot be placed. A
/// batched forward's span (an engine's: [`engine_of`]) is placed by its `iteration`, as forward
/// `iteration`, its start since the iteration's.
fn read_span(record: &ProfileRecord) -> Option<(String, u64, ModuleSpan)> {
    let e = &record.event;
    let a = &e.attributes;
    let batched = engine_of(record).is_some();
    let span_kind = match a.get(attribute::SPAN_KIND)?.as_str()? {
        "module" => SpanKind::Module,
        "function" => SpanKind::Function,
        "op" => SpanKind::Op,
        _ => return None,
    };
    let duration_ns = attr_u64(a, attribute::DURATION_NANOS)
        .or_else(|| e.duration_us.map(|us| us.saturating_mul(1000)))
        .unwrap_or(0);
    let (forward, index, start) = if batched {
        (
            String::from(ITERATION_PHASE),
            attr_u64(a, attribute::ITERATION)?,
            attr_u64(a, attribute::START_NANOS_SINCE_ITERATION_START)?,
        )
    } else {
        (
            a.get(attribute::FORWARD)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            attr_u64(a, attribute::FORWARD_INDEX)?,
            attr_u64(a, attribute::START_NANOS_SINCE_REQUEST_START)?,
        )
    };
    Some((
        forward,
        index,
        ModuleSpan {
            span_id: attr_u64(a, attribute::SPAN_ID)?,
            parent_span_id: attr_u64(a, attribute::PARENT_SPAN_ID),
            name: a.get(attribute::NAME)?.as_str()?.to_string(),
            span_kind,
            module: a
                .get(attribute::MODULE)
                .and_then(Value::as_str)
                .map(str::to_string),
            start_ns: start,
            duration_ns,
            path: String::new(),
            self_ns: 0,
            outermost: false,
            line: record.line,
        },
    ))
}

/// Fill in the keys, self times and outermost flags of one forward call's spans; returns the
/// time covered by its outermost module spans.
fn name_paths(spans: &mut [ModuleSpan]) -> u64 {
    let as_spans: Vec<Span> = spans
        .iter()
        .map(|s| Span {
            id: CompactString::from(s.span_id.to_string()),
            parent_id: s.parent_span_id.map(|p| CompactString::from(p.to_string())),
            name: CompactString::from(s.name.as_str()),
            start_ns: s.start_ns,
            span_kind: s.span_kind,
            measured: false,
            pass: None,
            module: s.module.as_deref().map(CompactString::from),
            duration_ns: Some(s.duration_ns),
            line: s.line,
            end_line: None,
        })
        .collect();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (i, s) in as_spans.iter().enumerate() {
        index.entry(s.id.as_str()).or_insert(i);
    }
    let (tree, _) = span_tree(&as_spans, |_, id| index.get(id).copied());
    let paths = ModulePaths::of_tree(&as_spans, &tree);
    for (i, s) in spans.iter_mut().enumerate() {
        s.path = paths.path(i).to_string();
        s.self_ns = tree.self_ns.get(i).copied().unwrap_or(0);
        s.outermost = paths.outermost(i);
    }
    // The outermost module spans: below the roots, down to the first module span.
    let mut intervals: Vec<(u64, u64)> = Vec::new();
    let mut stack: Vec<u32> = tree.roots.clone();
    while let Some(i) = stack.pop() {
        let i = i as usize;
        match as_spans.get(i) {
            Some(s) if is_module_span(s) => intervals.push((s.start_ns, s.end_ns())),
            Some(_) => stack.extend(tree.children(i)),
            None => {}
        }
    }
    union_ns(&mut intervals)
}

fn rows_of(requests: &[RequestModules], grouping: ModuleGrouping) -> Vec<ProfileModuleRow> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut rows: Vec<ProfileModuleRow> = Vec::new();
    // Per row, the requests counted in it (each once).
    let mut served: Vec<HashSet<&str>> = Vec::new();
    for request in requests {
        for (call, s) in request
            .forwards
            .iter()
            .flat_map(|f| f.spans.iter().map(move |s| (f, s)))
        {
            let key = match grouping {
                ModuleGrouping::Path if s.outermost => s.path.as_str(),
                ModuleGrouping::Name if is_module(s) => s.name.as_str(),
                _ => continue,
            };
            let i = *index.entry(key).or_insert_with(|| {
                rows.push(ProfileModuleRow {
                    key: key.to_string(),
                    calls: 0,
                    total_ns: 0,
                    mean_ns: 0,
                    requests: 0,
                });
                served.push(HashSet::new());
                rows.len() - 1
            });
            let row = &mut rows[i];
            row.calls += 1;
            row.total_ns = row.total_ns.saturating_add(s.duration_ns);
            served[i].extend(call.requests.iter().map(String::as_str));
        }
    }
    for (row, served) in rows.iter_mut().zip(&served) {
        row.mean_ns = row.total_ns / row.calls.max(1);
        row.requests = served.len() as u64;
    }
    sort::by(&mut rows, |a, b| {
        b.total_ns.cmp(&a.total_ns).then_with(|| a.key.cmp(&b.key))
    });
    rows
}

impl ProfileDocument {
    /// The module spans of every request that has any, in order of first appearance.
    pub fn module_spans(&self) -> Vec<RequestModules> {
        let mut out: Vec<RequestModules> = Vec::new();
        let mut by_request: HashMap<&str, usize> = HashMap::new();
        // (request, forward_index) → index in that request's `forwards`.
        let mut by_forward: HashMap<(usize, u64), usize> = HashMap::new();
        for record in self.records.iter().filter(|r| is_module_event(r)) {
            if record.event.event_kind() != Some(EventKind::TimedSpan) {
                continue;
            }
            let id = record.event.request_id.as_deref().unwrap_or("");
            let r = *by_request.entry(id).or_insert_with(|| {
                out.push(RequestModules {
                    request_id: id.to_string(),
                    engine: engine_of(record).is_some(),
                    forwards: Vec::new(),
                    unreadable: 0,
                });
                out.len() - 1
            });
            let request = &mut out[r];
            let Some((forward, forward_index, span)) = read_span(record) else {
                request.unreadable += 1;
                continue;
            };
            let f = *by_forward.entry((r, forward_index)).or_insert_with(|| {
                request.forwards.push(ForwardCall {
                    forward,
                    forward_index,
                    spans: Vec::new(),
                    coverage: Coverage::default(),
                    requests: Vec::new(),
                });
                request.forwards.len() - 1
            });
            request.forwards[f].spans.push(span);
        }
        let durations = self.forward_durations();
        for request in &mut out {
            let phases = durations.get(request.request_id.as_str());
            for call in &mut request.forwards {
                let covered = name_paths(&mut call.spans);
                let iteration = phases
                    .filter(|_| call.forward == ITERATION_PHASE)
                    .and_then(|p| p.iterations.get(&call.forward_index));
                call.requests = match iteration {
                    Some((_, listed)) if !listed.is_empty() => listed.clone(),
                    _ => alloc::vec![request.request_id.clone()],
                };
                let phase_ns = phases.and_then(|p| {
                    if call.forward == ITERATION_PHASE {
                        iteration.map(|(ns, _)| *ns)
                    } else if call.forward_index == 0 {
                        p.prefill_ns
                    } else {
                        let n = usize::try_from(call.forward_index - 1).ok()?;
                        p.decodes.get(n).map(|d| d.2)
                    }
                });
                let extent = || {
                    let start = call.spans.iter().map(|s| s.start_ns).min().unwrap_or(0);
                    let end = call
                        .spans
                        .iter()
                        .map(|s| s.start_ns.saturating_add(s.duration_ns));
                    end.max().unwrap_or(0).saturating_sub(start)
                };
                call.coverage = Coverage::new(phase_ns.unwrap_or_else(extent), covered);
            }
        }
        out
    }

    /// Per request, the duration of its first `prefill` span and its `decode` spans by start
    /// (`timed_span`s with a `duration_us`), which time its forward calls.
    fn forward_durations(&self) -> HashMap<&str, PhaseSpans> {
        let mut out: HashMap<&str, PhaseSpans> = HashMap::new();
        for (i, r) in self.records.iter().enumerate() {
            let e = &r.event;
            let Some(us) = e.duration_us else { continue };
            if e.event_kind() != Some(EventKind::TimedSpan) {
                continue;
            }
            let p = out
                .entry(e.request_id.as_deref().unwrap_or(""))
                .or_default();
            let ns = us.saturating_mul(1000);
            match e.phase.as_deref() {
                Some(ITERATION_PHASE) => {
                    if let Some(it) = crate::analysis::iterations::read_iteration(r) {
                        let listed = it.requests.into_iter().map(|q| q.request_id).collect();
                        p.iterations
                            .entry(it.iteration)
                            .or_insert((it.duration_ns, listed));
                    }
                }
                Some("prefill") if p.prefill_ns.is_none() => p.prefill_ns = Some(ns),
                Some("decode") => p.decodes.push((e.ts_unix_nanos.unwrap_or(0), i, ns)),
                _ => {}
            }
        }
        for p in out.values_mut() {
            sort::by(&mut p.decodes, Ord::cmp);
        }
        out
    }

    /// Module spans of all requests aggregated by key or name.
    pub fn module_rows(&self, grouping: ModuleGrouping) -> Vec<ProfileModuleRow> {
        rows_of(&self.module_spans(), grouping)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::profile::read_profile;
    use alloc::format;
    use alloc::vec::Vec;

    /// A valid module event (the §2 header fields as capture writes them).
    #[allow(clippy::too_many_arguments)] // one argument per attribute reads best in the calls
    fn module(
        request: &str,
        forward_index: u64,
        id: u64,
        parent: Option<u64>,
        name: &str,
        kind: &str,
        start: u64,
        nanos: u64,
    ) -> String {
        let forward = if forward_index == 0 {
            "prefill"
        } else {
            "decode"
        };
        let parent = parent.map_or(String::new(), |p| format!(r#""parent_span_id":{p},"#));
        format!(
            concat!(
                r#"{{"schema_version":1,"event_kind":"timed_span","ts_unix_nanos":1767225600000000000,"#,
                r#""timestamp":"2026-01-01T00:00:00Z","event_id":"{request}-{forward_index}-{id}","request_id":"{request}","#,
                r#""correlation_id":"c","entrypoint":"serve","backend":"cpu","runtime_preset_hash":"sha256:ab","#,
                r#""phase":"module","status":"ok","duration_us":{us},"shape":{{"batch":1}},"#,
                r#""attributes":{{"span_id":{id},{parent}"name":"{name}","span_kind":"{kind}","forward":"{forward}","#,
                r#""forward_index":{forward_index},"start_nanos_since_request_start":{start},"duration_nanos":{nanos}}}}}"#,
                "\n"
            ),
            request = request,
            forward_index = forward_index,
            id = id,
            parent = parent,
            name = name,
            kind = kind,
            forward = forward,
            start = start,
            nanos = nanos,
            us = nanos / 1000,
        )
    }

    /// One forward call of a tiny model: `forward` (function) → `layer`, `layer`, each with
    /// `linear`; then `lm_head`. Durations scaled by `k`.
    fn forward_call(request: &str, index: u64, base: u64, k: u64) -> String {
        let mut f = String::new();
        f += &module(
            request,
            index,
            1,
            None,
            "forward",
            "function",
            base,
            100 * k,
        );
        f += &module(
            request,
            index,
            2,
            Some(1),
            "layer",
            "module",
            base + 1,
            40 * k,
        );
        f += &module(
            request,
            index,
            3,
            Some(2),
            "linear",
            "module",
            base + 2,
            30 * k,
        );
        f += &module(
            request,
            index,
            4,
            Some(1),
            "layer",
            "module",
            base + 50,
            40 * k,
        );
        f += &module(
            request,
            index,
            5,
            Some(4),
            "linear",
            "module",
            base + 51,
            30 * k,
        );
        f += &module(
            request,
            index,
            6,
            Some(1),
            "lm_head",
            "module",
            base + 95,
            5 * k,
        );
        f
    }

    fn request_line(request: &str) -> String {
        format!(
            concat!(
                r#"{{"schema_version":1,"event_kind":"timed_span","ts_unix_nanos":1767225600000000000,"#,
                r#""timestamp":"2026-01-01T00:00:00Z","event_id":"{r}-req","request_id":"{r}","#,
                r#""correlation_id":"c","entrypoint":"serve","backend":"cpu","runtime_preset_hash":"sha256:ab","#,
                r#""phase":"request","status":"ok","duration_us":9,"shape":{{"batch":1}}}}"#,
                "\n"
            ),
            r = request
        )
    }

    #[test]
    fn module_trees_per_forward_call_by_hand() {
        // Request a: prefill (k = 2) and one decode step (k = 1); request b: prefill (k = 1).
        // Span ids repeat across forward calls and requests: they are unique per call.
        let mut file = request_line("a");
        file += &forward_call("a", 0, 0, 2);
        file += &forward_call("a", 1, 1000, 1);
        file += &forward_call("b", 0, 0, 1);
        file += &request_line("b");
        let doc = read_profile(file.as_bytes());
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        let requests = doc.module_spans();
        assert_eq!(requests.len(), 2);
        let a = &requests[0];
        assert_eq!(a.request_id, "a");
        let calls: Vec<(&str, u64, usize)> = a
            .forwards
            .iter()
            .map(|f| (f.forward.as_str(), f.forward_index, f.spans.len()))
            .collect();
        assert_eq!(calls, [("prefill", 0, 6), ("decode", 1, 6)]);
        let paths: Vec<&str> = a.forwards[1]
            .spans
            .iter()
            .map(|s| s.path.as_str())
            .collect();
        assert_eq!(
            paths,
            [
                "",
                "layer[0]",
                "layer[0]/linear",
                "layer[1]",
                "layer[1]/linear",
                "lm_head"
            ]
        );
        // Request a by path: layer[0] 2 calls, 40·2 + 40·1 = 120 ns, mean 60; lm_head
        // 5·2 + 5 = 15. Sorted by total: layer[0] and layer[1] (120 each, by key), then the
        // linears (60 + 30 = 90 each), then lm_head.
        let by_path = a.rows(ModuleGrouping::Path);
        let rows: Vec<(&str, u64, u64, u64, u64)> = by_path
            .iter()
            .map(|r| (r.key.as_str(), r.calls, r.total_ns, r.mean_ns, r.requests))
            .collect();
        assert_eq!(
            rows,
            [
                ("layer[0]", 2, 120, 60, 1),
                ("layer[1]", 2, 120, 60, 1),
                ("layer[0]/linear", 2, 90, 45, 1),
                ("layer[1]/linear", 2, 90, 45, 1),
                ("lm_head", 2, 15, 7, 1),
            ]
        );
        // Across requests by name: `linear` = a (2 + 1) × 2 × 30 + b 2 × 30 = 180 + 60 = 240 in
        // 6 calls, mean 40, 2 requests; `layer` the same: 4 × 2 × ... = (80+80+40+40) + (40+40)
        // = 320 in 6 calls, mean 53; lm_head 10 + 5 + 5 = 20 in 3 calls, mean 6. The function
        // span `forward` is no row.
        let by_name = doc.module_rows(ModuleGrouping::Name);
        let rows: Vec<(&str, u64, u64, u64, u64)> = by_name
            .iter()
            .map(|r| (r.key.as_str(), r.calls, r.total_ns, r.mean_ns, r.requests))
            .collect();
        assert_eq!(
            rows,
            [
                ("layer", 6, 320, 53, 2),
                ("linear", 6, 240, 40, 2),
                ("lm_head", 3, 20, 6, 2),
            ]
        );
    }

    #[test]
    fn module_events_stay_out_of_phases_and_waterfalls() {
        let mut file = request_line("a");
        file += &forward_call("a", 0, 0, 1);
        // An unreadable module event: no span_id.
        file += &module("a", 0, 9, None, "x", "module", 0, 1).replace(r#""span_id":9,"#, "");
        let doc = read_profile(file.as_bytes());
        let requests = doc.requests();
        assert_eq!(requests[0].phases, ["request"]);
        assert_eq!(requests[0].event_count, 8);
        assert_eq!(requests[0].duration_us, Some(9));
        let w = &doc.waterfalls()[0];
        let phases: Vec<&str> = w.bars.iter().map(|b| b.phase.as_str()).collect();
        assert_eq!(phases, ["request"]);
        assert!(w.markers.is_empty());
        let m = doc.module_spans();
        assert_eq!(m[0].unreadable, 1);
        assert_eq!(m[0].forwards[0].spans.len(), 6);
        let empty: Vec<RequestModules> = read_profile(request_line("z").as_bytes()).module_spans();
        assert!(empty.is_empty());
    }

    /// A batched forward's module span, as capture's engine writes it.
    fn batched(
        engine: &str,
        iteration: u64,
        id: u64,
        parent: Option<u64>,
        name: &str,
        start: u64,
        nanos: u64,
    ) -> String {
        module(engine, 0, id, parent, name, "module", start, nanos)
            .replace(
                r#""forward":"prefill","forward_index":0,"start_nanos_since_request_start""#,
                &format!(r#""engine":"{engine}","iteration":{iteration},"start_nanos_since_iteration_start""#),
            )
            .replace(&format!(r#""event_id":"{engine}-0-"#), &format!(r#""event_id":"{engine}-{iteration}-"#))
    }

    /// Engine e's iteration 4: 1 ms, serving a, b and c.
    fn served_abc() -> String {
        crate::analysis::iterations::tests::iteration_line(
            "e",
            4,
            1_767_225_600_000_000_000,
            1_000_000,
            &[("a", 0, 1, 1), ("b", 0, 1, 1), ("c", 0, 1, 1)],
        )
    }

    #[test]
    fn module_spans_of_a_batched_forward_are_counted_once() {
        // One forward served a, b and c (the iteration event lists them, 1 ms); its spans
        // (`block` 800 µs > `linear` 300 µs) were written once, for the engine.
        let text = [
            served_abc(),
            batched("e", 4, 0, None, "block", 100, 800_000),
            batched("e", 4, 1, Some(0), "linear", 200, 300_000),
        ]
        .concat();
        let doc = read_profile(text.as_bytes());
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        let spans = doc.module_spans();
        assert_eq!(spans.len(), 1);
        assert_eq!((spans[0].request_id.as_str(), spans[0].engine), ("e", true));
        let call = &spans[0].forwards[0];
        assert_eq!(
            (call.forward.as_str(), call.forward_index, call.spans.len()),
            ("iteration", 4, 2)
        );
        assert_eq!(call.spans[1].path, "block/linear");
        // Timed by the iteration: 800 µs of its 1 ms are inside `block`.
        assert_eq!(
            (call.coverage.forward_ns, call.coverage.covered_ns),
            (1_000_000, 800_000)
        );
        assert_eq!(call.requests, ["a", "b", "c"]);
        let rows = doc.module_rows(ModuleGrouping::Name);
        let linear = rows.iter().find(|r| r.key == "linear").unwrap();
        // One call, serving a, b and c.
        assert_eq!(
            (linear.calls, linear.total_ns, linear.requests),
            (1, 300_000, 3)
        );
        assert_eq!(spans[0].rows(ModuleGrouping::Name)[0].requests, 3);
        // Not a request, and no request shows them.
        assert!(doc.requests().iter().all(|r| r.request_id != "e"));
    }

    #[test]
    fn a_row_counts_each_request_served_once() {
        // Iteration 4 of engine e served a, b and c; a's own prefill ran `linear` too; the
        // engine's iteration 5 has no iteration event, so it counts as the engine.
        let text = [
            served_abc(),
            batched("e", 4, 0, None, "linear", 100, 300_000),
            batched("e", 5, 0, None, "linear", 100, 200_000),
            module("a", 0, 0, None, "linear", "module", 0, 100_000),
        ]
        .concat();
        let doc = read_profile(text.as_bytes());
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        let spans = doc.module_spans();
        let engine = spans.iter().find(|r| r.engine).unwrap();
        assert_eq!(engine.forwards[1].requests, ["e"]);
        // By name: 3 calls, 300 + 200 + 100 µs; requests {a, b, c} ∪ {e} ∪ {a} = 4.
        let rows = doc.module_rows(ModuleGrouping::Name);
        assert_eq!(
            (
                rows[0].key.as_str(),
                rows[0].calls,
                rows[0].total_ns,
                rows[0].requests
            ),
            ("linear", 3, 600_000, 4)
        );
        // The engine's own rows: {a, b, c} ∪ {e}; a's own: itself.
        assert_eq!(engine.rows(ModuleGrouping::Name)[0].requests, 4);
        // e: iterations 4 and 5, one module span each; a: one prefill of one.
        assert_eq!(
            ModuleSpanCounts::of(&spans),
            ModuleSpanCounts {
                requests: 1,
                engines: 1,
                forward_calls: 3,
                module_spans: 3,
                unreadable: 0,
            }
        );
        let a = spans.iter().find(|r| r.request_id == "a").unwrap();
        assert_eq!(a.forwards[0].requests, ["a"]);
        assert_eq!(a.rows(ModuleGrouping::Name)[0].requests, 1);
    }
}
