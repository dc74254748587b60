//! A profile's tabs and its chart, linked both ways: which spans of
//! [`ProfileChart`](super::profile_chart) a tab's row stands for (a request → its `request`
//! span; a batched forward → the engine's forward and the requests' prefill / decode bars it
//! ran; a module row → its module spans; a memory snapshot → the spans of its owner running
//! when it was taken), which rows a selected span marks, and a range's share of each.
//!
//! Rules:
//! - Times are the chart's axis (ns after the profile's time 0, `analysis::request_axis`).
//! - A span counts in a range with its part inside ([`TimeRange::inside`]); a snapshot when
//!   its time is inside.
//! - A module row by path stands for the module spans of that key, or, for a key no span
//!   has (a tree's group node), for the spans under it; by name for the spans of that name.

use candle_trace_schema::analysis::modules::ModuleGrouping;
use candle_trace_schema::analysis::range::TimeRange;
use candle_trace_schema::analysis::sort;
use candle_trace_schema::analysis::units::format_ns;
use candle_trace_schema::format::events::SpanKind;
use hashbrown::HashSet;

use super::profile_chart::{Owner, ProfileChart, SpanRole};

/// A span of the chart: its lane group and its index in the group's document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChartSpan {
    /// Index into [`ProfileChart::groups`].
    pub group: usize,
    /// Index into that group's spans.
    pub span: u32,
}

/// Whether `key` is `prefix` or lies under it (`prefix/…`, `prefix.…`).
fn under(key: &str, prefix: &str) -> bool {
    key.strip_prefix(prefix)
        .is_some_and(|rest| rest.starts_with('/') || rest.starts_with('.'))
}

impl ProfileChart {
    /// What span `s` stands for.
    pub fn role(&self, s: ChartSpan) -> Option<&SpanRole> {
        self.groups.get(s.group)?.roles.get(s.span as usize)
    }

    /// Whose lane group span `s` is in.
    pub fn owner(&self, s: ChartSpan) -> Option<&Owner> {
        self.groups.get(s.group).map(|g| &g.owner)
    }

    /// Span `s`'s `(start, end)` on the axis.
    pub fn axis_extent(&self, s: ChartSpan) -> Option<(u64, u64)> {
        let g = self.groups.get(s.group)?;
        let span = g.model.doc.spans.get(s.span as usize)?;
        let start = u64::try_from(g.offset_ns).unwrap_or(0) + span.start_ns;
        Some((start, start.saturating_add(span.duration_or_zero())))
    }

    /// Span `s`'s time inside `range` (`None`: it does not count in it).
    pub fn inside(&self, s: ChartSpan, range: TimeRange) -> Option<u64> {
        let (start, end) = self.axis_extent(s)?;
        range.inside(start, end - start)
    }

    /// Every span whose (owner, role) `keep` accepts, by group then index.
    fn spans_where(&self, keep: impl Fn(&Owner, &SpanRole) -> bool) -> Vec<ChartSpan> {
        self.groups
            .iter()
            .enumerate()
            .flat_map(|(g, x)| {
                x.roles
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| keep(&x.owner, r))
                    .map(move |(i, _)| ChartSpan {
                        group: g,
                        span: i as u32,
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The `request` span of request `id`.
    pub fn request_spans(&self, id: &str) -> Vec<ChartSpan> {
        self.spans_where(|o, r| *r == SpanRole::Request && *o == Owner::Request(id.into()))
    }

    /// The request whose lane group span `s` is in.
    pub fn request_of(&self, s: ChartSpan) -> Option<&str> {
        match self.owner(s)? {
            Owner::Request(id) => Some(id),
            Owner::Engine(_) => None,
        }
    }

    /// The batched forward `key` (`engine/iteration`): the engine's span first, then the
    /// bars of the requests it ran.
    pub fn forward_spans(&self, key: &str) -> Vec<ChartSpan> {
        let mut spans =
            self.spans_where(|_, r| matches!(r, SpanRole::Forward(Some(k)) if k == key));
        // Engines' groups come first: their span leads.
        sort::by_key(&mut spans, |s| {
            (!matches!(self.owner(*s), Some(Owner::Engine(_))), *s)
        });
        spans
    }

    /// The batched forward span `s` is, ran in, or stands for (a request's bar).
    pub fn forward_of(&self, s: ChartSpan) -> Option<&str> {
        match self.role(s)? {
            SpanRole::Forward(Some(k))
            | SpanRole::Module {
                forward: Some(k), ..
            } => Some(k),
            _ => None,
        }
    }

    /// The module spans of the row `key` of `grouping` (module docs).
    pub fn module_spans(&self, key: &str, grouping: ModuleGrouping) -> Vec<ChartSpan> {
        let of = |keep: &dyn Fn(&str, &str) -> bool| {
            self.spans_where(|_, r| match r {
                SpanRole::Module {
                    path,
                    name,
                    in_tree: true,
                    ..
                } => keep(path, name),
                _ => false,
            })
        };
        match grouping {
            ModuleGrouping::Name => of(&|_, name| name == key),
            ModuleGrouping::Path => {
                let exact = of(&|path, _| path == key);
                if exact.is_empty() {
                    of(&|path, _| under(path, key))
                } else {
                    exact
                }
            }
        }
    }

    /// Span `s`'s module row key in `grouping`, when it is a module span.
    pub fn module_of(&self, s: ChartSpan, grouping: ModuleGrouping) -> Option<&str> {
        match self.role(s)? {
            SpanRole::Module {
                path,
                name,
                in_tree: true,
                ..
            } => Some(match grouping {
                ModuleGrouping::Path => path,
                ModuleGrouping::Name => name,
            }),
            _ => None,
        }
    }

    /// The spans of `owner`'s lane group (a request's or an engine's id) running at `at_ns`,
    /// the innermost first: what a memory snapshot taken then was taken in.
    pub fn spans_at(&self, owner: &str, at_ns: u64) -> Vec<ChartSpan> {
        let mut spans: Vec<(u32, ChartSpan)> = self
            .groups
            .iter()
            .enumerate()
            .filter(|(_, g)| match &g.owner {
                Owner::Request(id) | Owner::Engine(id) => id == owner,
            })
            .flat_map(|(g, x)| {
                (0..x.roles.len()).map(move |i| ChartSpan {
                    group: g,
                    span: i as u32,
                })
            })
            .filter(|&s| {
                self.axis_extent(s)
                    .is_some_and(|(a, b)| a <= at_ns && at_ns <= b)
            })
            .map(|s| {
                let depth = self.groups[s.group]
                    .model
                    .doc
                    .tree
                    .depth
                    .get(s.span as usize)
                    .copied()
                    .unwrap_or(0);
                (depth, s)
            })
            .collect();
        sort::by(&mut spans, |a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        spans.into_iter().map(|(_, s)| s).collect()
    }

    /// Whether a snapshot of `owner` at `at_ns` was taken while span `s` ran (in its group).
    pub fn holds_snapshot(&self, s: ChartSpan, owner: &str, at_ns: u64) -> bool {
        let mine = match self.owner(s) {
            Some(Owner::Request(id) | Owner::Engine(id)) => id == owner,
            None => false,
        };
        mine && self
            .axis_extent(s)
            .is_some_and(|(a, b)| a <= at_ns && at_ns <= b)
    }

    /// The module spans (`span_kind` module, as the totals count them) inside `range`, with
    /// their time inside it.
    fn module_spans_in(&self, range: TimeRange) -> Vec<(ChartSpan, &SpanRole, u64)> {
        let mut out = Vec::new();
        for (g, x) in self.groups.iter().enumerate() {
            for (i, r) in x.roles.iter().enumerate() {
                let module =
                    x.model.doc.spans.get(i).map(|s| s.span_kind) == Some(SpanKind::Module);
                if !matches!(r, SpanRole::Module { .. }) || !module {
                    continue;
                }
                let s = ChartSpan {
                    group: g,
                    span: i as u32,
                };
                if let Some(t) = self.inside(s, range) {
                    out.push((s, r, t));
                }
            }
        }
        out
    }

    /// The forward calls and module spans inside `range`, and the module spans' time inside
    /// it: `(forward calls, module spans, ns)`. A forward call counts when one of its module
    /// spans does.
    pub fn module_counts_in(&self, range: TimeRange) -> (u64, u64, u64) {
        let spans = self.module_spans_in(range);
        let calls: HashSet<(usize, u64)> = spans
            .iter()
            .filter_map(|(s, r, _)| match r {
                SpanRole::Module { call, .. } => Some((s.group, *call)),
                _ => None,
            })
            .collect();
        let ns = spans.iter().fold(0u64, |a, (_, _, t)| a.saturating_add(*t));
        (calls.len() as u64, spans.len() as u64, ns)
    }

    /// The module spans inside `range` by module key (or by name): `(key, spans, time inside)`,
    /// the most time first, then by key.
    pub fn module_rows_in(
        &self,
        range: TimeRange,
        grouping: ModuleGrouping,
    ) -> Vec<(String, u64, u64)> {
        let mut rows: Vec<(String, u64, u64)> = Vec::new();
        for (_, r, t) in self.module_spans_in(range) {
            let SpanRole::Module { path, name, .. } = r else {
                continue;
            };
            let key = match grouping {
                ModuleGrouping::Path => path,
                ModuleGrouping::Name => name,
            };
            match rows.iter_mut().find(|row| row.0 == *key) {
                Some(row) => {
                    row.1 += 1;
                    row.2 = row.2.saturating_add(t);
                }
                None => rows.push((key.clone(), 1, t)),
            }
        }
        sort::by(&mut rows, |a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
        rows
    }

    /// The time of request `id`'s span inside `range` (`None`: it did not run in it).
    pub fn request_inside(&self, id: &str, range: TimeRange) -> Option<u64> {
        self.request_spans(id)
            .first()
            .and_then(|s| self.inside(*s, range))
    }
}

/// `n of total nouns ran in the range` (the line over a tab's rows while a range is
/// selected).
pub fn in_range_text(n: usize, total: usize, noun: &str) -> String {
    format!("{n} of {total} {noun} ran in the range.")
}

/// The Modules tab's line while a range is selected: `In the range: 2 forward calls, 10
/// module spans, 30.0 µs of module time inside it`.
pub fn module_range_text(calls: u64, spans: u64, ns: u64) -> String {
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    format!(
        "In the range: {}, {}, {} of module time inside it",
        plural(calls, "forward call", "forward calls"),
        plural(spans, "module span", "module spans"),
        format_ns(ns)
    )
}

impl ProfileChart {
    /// The rows of `ids` (requests, in the table's order) whose request ran in `range`, each
    /// with its time inside it.
    pub fn requests_in<'a>(
        &self,
        ids: impl Iterator<Item = &'a str>,
        range: TimeRange,
    ) -> Vec<(usize, u64)> {
        ids.enumerate()
            .filter_map(|(i, id)| self.request_inside(id, range).map(|t| (i, t)))
            .collect()
    }

    /// What the details panel says of span `s`: only what a profile's span has (no step, no
    /// ids or lines of the chart's own making): its name, lane, what it stands for, the module
    /// its capture named, its start on the chart's time, duration and self time.
    pub fn span_fields(&self, s: ChartSpan) -> Vec<(&'static str, String)> {
        let Some(g) = self.groups.get(s.group) else {
            return Vec::new();
        };
        let Some(span) = g.model.doc.spans.get(s.span as usize) else {
            return Vec::new();
        };
        let owner = match &g.owner {
            Owner::Request(id) => format!("request {id}"),
            Owner::Engine(id) => format!("engine {id}"),
        };
        let what = match self.role(s) {
            Some(SpanRole::Request) => format!("{owner}, from its open to its close"),
            Some(SpanRole::Queued) => format!("{owner} waiting for its first forward"),
            Some(SpanRole::Forward(Some(k))) => format!("batched forward {k}"),
            Some(SpanRole::Forward(None)) => format!("a forward of {owner}"),
            Some(SpanRole::Stage) => format!("a decode stage of {owner}"),
            Some(SpanRole::Module { path, call, .. }) => {
                format!("module span {path} of forward call {call}")
            }
            None => owner.clone(),
        };
        let (start, end) = self.axis_extent(s).unwrap_or((0, 0));
        let self_ns = g.model.doc.tree.self_ns.get(s.span as usize).copied();
        let mut fields = vec![
            ("name", span.name.to_string()),
            ("lane", g.label.clone()),
            ("stands for", what),
        ];
        if let Some(m) = span.module.as_deref().filter(|m| !m.is_empty()) {
            fields.push(("module", m.to_string()));
        }
        fields.push(("start (chart time)", format_ns(start)));
        fields.push(("duration", format_ns(end - start)));
        if let Some(t) = self_ns {
            fields.push(("self time", format_ns(t)));
        }
        fields
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_trace_schema::format::profile::read_profile;

    fn batched() -> ProfileChart {
        ProfileChart::of(&read_profile(include_bytes!(
            "../../../tests/fixtures/serving/batched.profile.jsonl"
        )))
    }

    fn names(c: &ProfileChart, spans: &[ChartSpan]) -> Vec<(String, String)> {
        spans
            .iter()
            .map(|s| {
                let g = &c.groups[s.group];
                (
                    g.label.clone(),
                    g.model.doc.spans[s.span as usize].name.to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn a_request_row_stands_for_its_request_span_and_back() {
        let c = batched();
        let spans = c.request_spans("b");
        assert_eq!(
            names(&c, &spans),
            [("request b · engine".to_string(), "request".to_string())]
        );
        // Any span of b's group marks b's row; an engine's marks none.
        let queued = ChartSpan {
            group: spans[0].group,
            span: 1,
        };
        assert_eq!(c.request_of(queued), Some("b"));
        assert_eq!(c.request_of(ChartSpan { group: 0, span: 0 }), None);
        assert!(c.request_spans("nobody").is_empty());
    }

    #[test]
    fn a_forward_row_stands_for_the_engines_span_and_the_bars_it_ran() {
        // `serving/make.py`: forward 0 (1–3 ms) ran a's and b's prompts.
        let c = batched();
        let spans = c.forward_spans("engine-0/0");
        assert_eq!(
            names(&c, &spans),
            [
                (
                    "engine engine-0".to_string(),
                    "forward 0 · batch 2".to_string()
                ),
                (
                    "request a · engine".to_string(),
                    "prefill → token 1".to_string()
                ),
                (
                    "request b · engine".to_string(),
                    "prefill → token 1".to_string()
                ),
            ]
        );
        for s in &spans {
            assert_eq!(c.forward_of(*s), Some("engine-0/0"));
            assert_eq!(c.axis_extent(*s), Some((1_000_000, 3_000_000)));
        }
        // Forward 1's module spans mark forward 1.
        let block = c.module_spans("block", ModuleGrouping::Name);
        assert_eq!(block.len(), 1);
        assert_eq!(c.forward_of(block[0]), Some("engine-0/1"));
        assert_eq!(c.module_of(block[0], ModuleGrouping::Name), Some("block"));
        // block: 10 µs after forward 1's start (3 ms), 0.8 ms long.
        assert_eq!(c.axis_extent(block[0]), Some((3_010_000, 3_810_000)));
    }

    #[test]
    fn a_profile_spans_details_hold_only_what_it_has() {
        let c = batched();
        let block = c.module_spans("block", ModuleGrouping::Name)[0];
        let fields = c.span_fields(block);
        let keys: Vec<&str> = fields.iter().map(|f| f.0).collect();
        assert_eq!(
            keys,
            [
                "name",
                "lane",
                "stands for",
                "start (chart time)",
                "duration",
                "self time"
            ]
        );
        // block: 3.01 ms on the chart, 0.8 ms long, its linear (0.3 ms) under it.
        assert_eq!(fields[3].1, "3.01 ms");
        assert_eq!(fields[4].1, "800 µs");
        assert_eq!(fields[5].1, "500 µs");
        let b = c.request_spans("b")[0];
        assert_eq!(
            c.span_fields(b)[2].1,
            "request b, from its open to its close"
        );
        // In 0.1–0.3 ms only a ran (b opens at 0.2 ms: 0.1 ms of it).
        let ids = ["a", "b", "c", "d"];
        assert_eq!(
            c.requests_in(ids.into_iter(), TimeRange::new(100_000, 300_000)),
            [(0, 200_000), (1, 100_000)]
        );
        assert_eq!(
            in_range_text(2, 4, "requests"),
            "2 of 4 requests ran in the range."
        );
    }

    #[test]
    fn a_snapshot_lies_in_the_innermost_span_running_then() {
        let c = batched();
        // a at 3.5 ms: its request span (0–5.2 ms) holds its decode → token 2 (3–4 ms).
        let at = c.spans_at("a", 3_500_000);
        assert_eq!(
            names(&c, &at),
            [
                (
                    "request a · engine".to_string(),
                    "decode → token 2".to_string()
                ),
                ("request a · engine".to_string(), "request".to_string()),
            ]
        );
        assert!(c.holds_snapshot(at[0], "a", 3_500_000));
        assert!(!c.holds_snapshot(at[0], "b", 3_500_000));
        assert!(!c.holds_snapshot(at[0], "a", 4_500_000));
    }

    #[test]
    fn module_spans_in_a_range_of_two_requests() {
        // `modules/module_spans.profile.jsonl`: r1 opens at 0 with forward calls at 0 and
        // 20 µs, r2 opens 13 ns later with one at 0; each call is `forward` (a function)
        // over block(linear), block(linear), lm_head: 5 module spans. 0–15 µs holds r1's
        // first call and r2's: 2 calls, 10 module spans, all of their time (2 × (4 + 3 +
        // 4 + 3 + 1) µs).
        let c = ProfileChart::of(&read_profile(include_bytes!(
            "../../../tests/fixtures/modules/module_spans.profile.jsonl"
        )));
        let r = TimeRange::new(0, 15_000);
        assert_eq!(c.module_counts_in(r), (2, 10, 30_000));
        assert_eq!(
            module_range_text(2, 10, 30_000),
            "In the range: 2 forward calls, 10 module spans, 30.0 µs of module time inside it"
        );
        assert_eq!(
            module_range_text(1, 1, 0),
            "In the range: 1 forward call, 1 module span, 0 ns of module time inside it"
        );
        assert_eq!(
            c.module_counts_in(TimeRange::new(0, 100_000)),
            (3, 15, 45_000)
        );
        // From 22 to 26 µs: r1's second call only; its first block (20.1–24.1 µs) 2.1 µs
        // inside, its linear (20.2–23.2) 1.2 µs, the second block (24.1–28.1) 1.9 µs, its
        // linear (24.2–27.2) 1.8 µs.
        let by_name = c.module_rows_in(TimeRange::new(22_000, 26_000), ModuleGrouping::Name);
        assert_eq!(
            by_name,
            [
                ("block".to_string(), 2, 4_000),
                ("linear".to_string(), 2, 3_000),
            ]
        );
        assert_eq!(
            c.module_counts_in(TimeRange::new(22_000, 26_000)),
            (1, 4, 7_000)
        );
        // The `forward` function span is no module row.
        assert!(c.module_spans("forward", ModuleGrouping::Name).is_empty());
        assert_eq!(c.module_spans("lm_head", ModuleGrouping::Name).len(), 3);
        // r1's request span (0–50 µs): 15 µs of it inside 0–15 µs.
        assert_eq!(c.request_inside("r1", r), Some(15_000));
        assert_eq!(c.request_inside("r1", TimeRange::new(60_000, 70_000)), None);
    }

    #[test]
    fn a_ranges_module_counts_take_the_part_inside() {
        let c = batched();
        // Forward 1's block (3.01–3.81 ms) and linear (3.02–3.32 ms), from 3.1 to 3.2 ms:
        // one forward call, two spans, 0.1 ms of each.
        assert_eq!(
            c.module_counts_in(TimeRange::new(3_100_000, 3_200_000)),
            (1, 2, 200_000)
        );
        assert_eq!(c.module_counts_in(TimeRange::new(0, 900_000)), (0, 0, 0));
        // `under`: a key's children, not a longer sibling.
        assert!(under("layers[0]/mlp", "layers[0]"));
        assert!(!under("layers[01]", "layers[0]"));
    }
}
