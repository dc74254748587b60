//! The modules panel of an inference profile: the module spans of every request's forward
//! calls by module path or by leaf name, heaviest first — the rows of
//! `ProfileDocument::module_rows`, the same numbers as
//! `candle-trace query PROFILE --kind modules` — and each request's forward calls and module
//! spans.

use candle_trace_schema::analysis::modules::ModuleGrouping;
use candle_trace_schema::analysis::profile_modules::{
    ModuleSpanCounts, ProfileModuleRow, RequestModules,
};
use candle_trace_schema::analysis::units::format_ns;
use candle_trace_schema::format::profile::ProfileDocument;

/// What the panel says when the profile has no module spans, and how to get them.
pub const NO_PROFILE_MODULE_SPANS: &str = "no module spans: serve with `InferenceProfiler::builder(..).install()` before building the model and run forward calls through `RequestHandle::prefill_step` / `decode_step` at detail latency or above";

/// One row of the profile's modules table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileModuleTableRow {
    /// The module path (`layers[1]/self_attn`) or the leaf name (`self_attn`).
    pub key: String,
    /// Module spans in the row, across every request's forward calls.
    pub calls: u64,
    /// Sum of their durations (exact).
    pub total_ns: u64,
    /// `total_ns / calls` (exact, integer division).
    pub mean_ns: u64,
    /// Requests with at least one span in the row.
    pub requests: u64,
    /// Total, human.
    pub total: String,
    /// Mean, human.
    pub mean: String,
}

impl ProfileModuleTableRow {
    fn of(r: &ProfileModuleRow) -> Self {
        ProfileModuleTableRow {
            key: r.key.clone(),
            calls: r.calls,
            total_ns: r.total_ns,
            mean_ns: r.mean_ns,
            requests: r.requests,
            total: format_ns(r.total_ns),
            mean: format_ns(r.mean_ns),
        }
    }
}

/// One request's forward calls and module spans (or an engine's batched forwards').
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestModuleCounts {
    /// The request id, or the engine's id.
    pub request_id: String,
    /// Whether these are an engine's batched forward calls, not a request's.
    pub engine: bool,
    /// Forward calls (prefill and decode steps) with module events.
    pub forward_calls: u64,
    /// Module spans (`span_kind` module) in them: the calls of the request's rows.
    pub module_spans: u64,
    /// Module events that could not be placed in a forward call's tree.
    pub unreadable: u64,
}

impl RequestModuleCounts {
    fn of(r: &RequestModules) -> Self {
        RequestModuleCounts {
            request_id: r.request_id.clone(),
            engine: r.engine,
            forward_calls: r.forwards.len() as u64,
            module_spans: r.module_span_count(),
            unreadable: r.unreadable,
        }
    }
}

/// The panel: both groupings and the per-request counts, built once.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProfileModulesPanel {
    /// One row per module path, by total time, largest first, then by path.
    pub by_path: Vec<ProfileModuleTableRow>,
    /// One row per leaf name, in the same order.
    pub by_name: Vec<ProfileModuleTableRow>,
    /// Requests with module events, in order of first appearance.
    pub requests: Vec<RequestModuleCounts>,
    /// Their owners, forward calls, module spans and unplaced events in all.
    pub totals: ModuleSpanCounts,
    /// The schema's module tree of every forward call (time only).
    pub tree: std::sync::Arc<candle_trace_schema::analysis::module_tree::ModuleTree>,
    /// `modules cover 90% of forward (…)` over every request's forward calls.
    pub coverage: Option<String>,
}

impl ProfileModulesPanel {
    /// The panel of `doc`.
    pub fn of(doc: &ProfileDocument) -> Self {
        let requests = doc.module_spans();
        if requests.is_empty() {
            return ProfileModulesPanel::default();
        }
        let rows = |g| {
            doc.module_rows(g)
                .iter()
                .map(ProfileModuleTableRow::of)
                .collect()
        };
        let per_request: Vec<_> = requests.iter().map(|r| r.coverage()).collect();
        let coverage = candle_trace_schema::analysis::coverage::Coverage::sum(&per_request);
        ProfileModulesPanel {
            by_path: rows(ModuleGrouping::Path),
            by_name: rows(ModuleGrouping::Name),
            tree: std::sync::Arc::new(candle_trace_schema::analysis::module_tree::profile_tree(
                &requests,
            )),
            coverage: coverage.sentence(),
            requests: requests.iter().map(RequestModuleCounts::of).collect(),
            totals: ModuleSpanCounts::of(&requests),
        }
    }

    /// The rows of one grouping.
    pub fn rows(&self, grouping: ModuleGrouping) -> &[ProfileModuleTableRow] {
        match grouping {
            ModuleGrouping::Path => &self.by_path,
            ModuleGrouping::Name => &self.by_name,
        }
    }

    /// True when the profile has no module spans (no rows).
    pub fn is_empty(&self) -> bool {
        self.by_path.is_empty()
    }

    /// True when the profile has module events at all (readable or not).
    pub fn has_module_events(&self) -> bool {
        !self.requests.is_empty()
    }

    /// `request_id`'s (forward calls, module spans): `(0, 0)` for a request without module
    /// events, `None` when the profile has none at all (nothing was captured to count).
    pub fn counts(&self, request_id: &str) -> Option<(u64, u64)> {
        if !self.has_module_events() {
            return None;
        }
        Some(
            self.requests
                .iter()
                .find(|r| r.request_id == request_id)
                .map_or((0, 0), |r| (r.forward_calls, r.module_spans)),
        )
    }

    /// The line above the table: `3 requests, 4 forward calls, 16 module spans` (`1 request,
    /// 2 engines, …` where engines' batched forwards have module spans, as
    /// `query --kind modules` says) and, when some module events could not be placed,
    /// `; 1 module event could not be placed`.
    pub fn totals_text(&self) -> String {
        let t = &self.totals;
        let plural =
            |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let mut owners = Vec::new();
        if t.requests > 0 {
            owners.push(plural(t.requests, "request", "requests"));
        }
        if t.engines > 0 {
            owners.push(plural(t.engines, "engine", "engines"));
        }
        let mut text = format!(
            "{}, {}, {}",
            owners.join(", "),
            plural(t.forward_calls, "forward call", "forward calls"),
            plural(t.module_spans, "module span", "module spans"),
        );
        if t.unreadable > 0 {
            text += &format!(
                "; {} could not be placed",
                plural(t.unreadable, "module event", "module events")
            );
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_trace_schema::format::profile::read_profile;

    /// A module event as capture's profiler writes it.
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

    /// One forward call: `model` (function) → `embed`, `block` → `attn`, `block` → `attn`,
    /// with the given durations `[model, embed, block0, attn0, block1, attn1]`.
    fn forward(request: &str, index: u64, base: u64, d: [u64; 6]) -> String {
        let mut f = module(request, index, 1, None, "model", "function", base, d[0]);
        f += &module(
            request,
            index,
            2,
            Some(1),
            "embed",
            "module",
            base + 10,
            d[1],
        );
        f += &module(
            request,
            index,
            3,
            Some(1),
            "block",
            "module",
            base + 200,
            d[2],
        );
        f += &module(
            request,
            index,
            4,
            Some(3),
            "attn",
            "module",
            base + 210,
            d[3],
        );
        f += &module(
            request,
            index,
            5,
            Some(1),
            "block",
            "module",
            base + 700,
            d[4],
        );
        f += &module(
            request,
            index,
            6,
            Some(5),
            "attn",
            "module",
            base + 710,
            d[5],
        );
        f
    }

    /// Request a: prefill and one decode step, and one module event without a `span_id`;
    /// request b: prefill with an `lm_head` too; request c: no module spans.
    fn profile() -> ProfileDocument {
        let mut file = request_line("a");
        file += &forward("a", 0, 0, [1000, 100, 500, 300, 250, 200]);
        file += &forward("a", 1, 2000, [400, 20, 150, 90, 80, 50]);
        file += &module("a", 1, 9, Some(1), "x", "module", 2000, 5).replace(r#""span_id":9,"#, "");
        file += &request_line("b");
        file += &forward("b", 0, 0, [900, 60, 400, 200, 200, 120]);
        file += &module("b", 0, 7, Some(1), "lm_head", "module", 850, 40);
        file += &request_line("c");
        read_profile(file.as_bytes())
    }

    fn numbers(rows: &[ProfileModuleTableRow]) -> Vec<(&str, u64, u64, u64, u64)> {
        rows.iter()
            .map(|r| (r.key.as_str(), r.calls, r.total_ns, r.mean_ns, r.requests))
            .collect()
    }

    /// An engine's batched forward: its module spans are the engine's, counted as one owner
    /// beside the requests, as `query --kind modules` counts them.
    #[test]
    fn an_engines_batched_forwards_are_counted_as_an_engine() {
        let engine = |id: u64, parent: Option<u64>, name: &str, start: u64, nanos: u64| {
            module("e0", 0, id, parent, name, "module", start, nanos).replace(
                r#""forward":"prefill","forward_index":0,"start_nanos_since_request_start""#,
                r#""engine":"e0","iteration":0,"start_nanos_since_iteration_start""#,
            )
        };
        let mut file = request_line("a");
        file += &forward("a", 0, 0, [1000, 100, 500, 300, 250, 200]);
        file += &engine(1, None, "block", 0, 800);
        file += &engine(2, Some(1), "attn", 10, 300);
        let p = ProfileModulesPanel::of(&read_profile(file.as_bytes()));
        let owners: Vec<(&str, bool, u64, u64)> = p
            .requests
            .iter()
            .map(|r| {
                (
                    r.request_id.as_str(),
                    r.engine,
                    r.forward_calls,
                    r.module_spans,
                )
            })
            .collect();
        // a: one prefill of 5 module spans; e0: one batched forward of 2.
        assert_eq!(owners, vec![("a", false, 1, 5), ("e0", true, 1, 2)]);
        assert_eq!(
            p.totals_text(),
            "1 request, 1 engine, 2 forward calls, 7 module spans"
        );
    }

    #[test]
    fn rows_by_path_across_requests_by_hand() {
        let p = ProfileModulesPanel::of(&profile());
        // block[0]: 500 + 150 + 400 = 1050 in 3 calls (mean 350), in a and b;
        // block[0]/attn: 300 + 90 + 200 = 590 (mean 590 / 3 = 196);
        // block[1]: 250 + 80 + 200 = 530 (mean 176); block[1]/attn: 200 + 50 + 120 = 370
        // (mean 123); embed: 100 + 20 + 60 = 180 (mean 60); lm_head: 40, only in b.
        // The function span `model` adds no path segment and is no row.
        assert_eq!(
            numbers(p.rows(ModuleGrouping::Path)),
            vec![
                ("block[0]", 3, 1050, 350, 2),
                ("block[0]/attn", 3, 590, 196, 2),
                ("block[1]", 3, 530, 176, 2),
                ("block[1]/attn", 3, 370, 123, 2),
                ("embed", 3, 180, 60, 2),
                ("lm_head", 1, 40, 40, 1),
            ]
        );
        assert_eq!(p.by_path[0].total, "1.05 µs");
        assert_eq!(p.by_path[0].mean, "350 ns");
    }

    #[test]
    fn rows_by_name_add_every_place() {
        let p = ProfileModulesPanel::of(&profile());
        // block: 1050 + 530 = 1580 in 6 calls (mean 263); attn: 590 + 370 = 960 (mean 160).
        assert_eq!(
            numbers(p.rows(ModuleGrouping::Name)),
            vec![
                ("block", 6, 1580, 263, 2),
                ("attn", 6, 960, 160, 2),
                ("embed", 3, 180, 60, 2),
                ("lm_head", 1, 40, 40, 1),
            ]
        );
    }

    #[test]
    fn per_request_forward_calls_and_module_spans() {
        let doc = profile();
        let p = ProfileModulesPanel::of(&doc);
        // a: 2 forward calls of 5 module spans each (the function span is not counted), and
        // the event without a span_id unplaced; b: 1 call, 5 + lm_head = 6; c: none.
        assert_eq!(
            p.requests,
            vec![
                RequestModuleCounts {
                    request_id: "a".into(),
                    engine: false,
                    forward_calls: 2,
                    module_spans: 10,
                    unreadable: 1
                },
                RequestModuleCounts {
                    request_id: "b".into(),
                    engine: false,
                    forward_calls: 1,
                    module_spans: 6,
                    unreadable: 0
                },
            ]
        );
        assert_eq!(p.counts("a"), Some((2, 10)));
        assert_eq!(p.counts("b"), Some((1, 6)));
        assert_eq!(p.counts("c"), Some((0, 0)));
        // The module spans of all requests are the calls of all rows, either way.
        let calls = |g| p.rows(g).iter().map(|r| r.calls).sum::<u64>();
        assert_eq!(calls(ModuleGrouping::Path), 16);
        assert_eq!(calls(ModuleGrouping::Name), 16);
        assert_eq!(
            p.totals_text(),
            "2 requests, 3 forward calls, 16 module spans; 1 module event could not be placed"
        );
        // The request table's rows carry the same counts, c's as 0 (module spans were captured
        // in this profile, none for c).
        let rows = crate::model::profile::request_rows(doc.requests(), &p);
        let counts: Vec<(&str, Option<u64>, Option<u64>)> = rows
            .iter()
            .map(|r| (r.request_id.as_str(), r.forward_calls, r.module_spans))
            .collect();
        assert_eq!(
            counts,
            vec![
                ("a", Some(2), Some(10)),
                ("b", Some(1), Some(6)),
                ("c", Some(0), Some(0))
            ]
        );
    }

    #[test]
    fn a_profile_without_module_spans_is_empty() {
        let doc = read_profile(include_bytes!(
            "../../../tests/fixtures/infer_run.profile.jsonl"
        ));
        let p = ProfileModulesPanel::of(&doc);
        assert!(p.is_empty());
        assert!(!p.has_module_events());
        assert_eq!(p.counts("req-1"), None);
        assert!(ProfileModulesPanel::of(&read_profile(b"")).is_empty());
        assert!(NO_PROFILE_MODULE_SPANS.contains("InferenceProfiler::builder(..).install()"));
    }
}
