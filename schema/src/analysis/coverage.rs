//! Module coverage: how much of the forward time ran inside module spans, and how much is
//! unattributed (attention scores, softmax, residual adds … that no layer's span encloses).
//!
//! Rules (SCHEMA.md §4, "Module names"):
//! - A trace's **forwards** are its spans with `step = forward` that have no layout ancestor
//!   with a `step` (so a forward recomputed inside backward is backward's, as in
//!   [`crate::analysis::phases`]).
//! - A forward's **covered** time is the length of the union of the intervals of its
//!   outermost module descendants (module spans, [`is_module_span`], with no module span
//!   between them and the forward), each clipped to the forward's own interval; the
//!   **unattributed** time is the rest of the forward's duration.
//! - An inference profile's forward calls are measured the same way
//!   ([`crate::analysis::profile_modules::ForwardCall::coverage`]): the union of the call's
//!   outermost module spans against the call's duration, which is its `prefill` span (the
//!   request's first) or its decode step's `decode` span (the n-th of the request by start) —
//!   else, without such a span, the extent of the call's spans. The covered time is capped at
//!   that duration (phase spans are written in whole µs).
//! - **Overall** adds the forwards' (calls') durations and covered times.
//! - The share is printed as a whole percent rounded **down** ([`Coverage::percent`]), so a
//!   forward that is not entirely covered never reads 100%.
//! - **Backward**: candle's backward opens no spans, so a trace whose backward spans hold no
//!   module span has no per-module split of the backward ([`TraceCoverage::backward_unsplit`]).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use crate::analysis::modules::is_module_span;
use crate::analysis::units::format_ns;
use crate::format::digest::TraceDigest;
use crate::format::document::TraceDocument;
use crate::format::events::Pass;
use crate::format::records::Span;
use crate::format::spans::SpanTree;

/// Forward time against the part of it inside module spans.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    /// The forward time measured against.
    pub forward_ns: u64,
    /// The part of it inside module spans (at most `forward_ns`).
    pub covered_ns: u64,
    /// `forward_ns − covered_ns`.
    pub unattributed_ns: u64,
    /// `covered_ns × 100 / forward_ns` rounded down; `None` when `forward_ns` is 0.
    pub percent: Option<u64>,
}

impl Coverage {
    /// `covered_ns` of `forward_ns` (capped at it).
    pub fn new(forward_ns: u64, covered_ns: u64) -> Self {
        let covered_ns = covered_ns.min(forward_ns);
        Coverage {
            forward_ns,
            covered_ns,
            unattributed_ns: forward_ns - covered_ns,
            percent: (forward_ns > 0).then(|| {
                let p = u128::from(covered_ns) * 100 / u128::from(forward_ns);
                u64::try_from(p).unwrap_or(100)
            }),
        }
    }

    /// The sums of `parts`' forward and covered times.
    pub fn sum<'a>(parts: impl IntoIterator<Item = &'a Coverage>) -> Self {
        let (mut forward, mut covered) = (0u64, 0u64);
        for p in parts {
            forward = forward.saturating_add(p.forward_ns);
            covered = covered.saturating_add(p.covered_ns);
        }
        Coverage::new(forward, covered)
    }

    /// `modules cover 53% of forward (1.20 ms of 2.26 ms; 1.06 ms unattributed)`, or `None`
    /// without forward time.
    pub fn sentence(&self) -> Option<String> {
        let percent = self.percent?;
        Some(format!(
            "modules cover {percent}% of forward ({} of {}; {} unattributed)",
            format_ns(self.covered_ns),
            format_ns(self.forward_ns),
            format_ns(self.unattributed_ns)
        ))
    }
}

/// The length of the union of `intervals` (`(start, end)`, end exclusive; sorted in place).
pub(crate) fn union_ns(intervals: &mut [(u64, u64)]) -> u64 {
    intervals.sort_unstable();
    let mut total = 0u64;
    let mut current: Option<(u64, u64)> = None;
    for &(start, end) in intervals.iter() {
        match &mut current {
            Some((_, e)) if start <= *e => *e = (*e).max(end),
            _ => {
                if let Some((s, e)) = current {
                    total = total.saturating_add(e - s);
                }
                current = Some((start, end.max(start)));
            }
        }
    }
    if let Some((s, e)) = current {
        total = total.saturating_add(e - s);
    }
    total
}

/// One forward span's coverage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpanCoverage {
    /// The forward span's index in the document's spans.
    pub span: usize,
    /// Its duration against its module spans.
    pub coverage: Coverage,
}

/// A trace's module coverage (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceCoverage {
    /// Each forward span, in start order.
    pub forwards: Vec<SpanCoverage>,
    /// All of them together.
    pub overall: Coverage,
    /// The trace has a backward span (`step = backward`) and no module span below any: the
    /// backward is one span with no per-module split.
    pub backward_unsplit: bool,
}

impl TraceCoverage {
    /// The coverage of a document.
    pub fn of(doc: &TraceDocument) -> Self {
        Self::of_tree(&doc.spans, &doc.tree)
    }

    /// The coverage of a trace read for its summary: equal to [`TraceCoverage::of`] the
    /// file's [`TraceDocument`].
    pub fn of_digest(digest: &TraceDigest) -> Self {
        Self::of_tree(digest.spans(), digest.tree())
    }

    /// The coverage of `spans` laid out by `tree`.
    pub fn of_tree(spans: &[Span], tree: &SpanTree) -> Self {
        let mut forwards = Vec::new();
        let mut backward_spans = 0u64;
        let mut backward_modules = 0u64;
        // The outermost stepped spans, in pre-order (start order among siblings).
        let mut stack: Vec<u32> = tree.roots.iter().rev().copied().collect();
        while let Some(i) = stack.pop() {
            let i = i as usize;
            let Some(span) = spans.get(i) else { continue };
            match span.pass {
                None => stack.extend(tree.children(i).iter().rev()),
                Some(Pass::Forward) => forwards.push(SpanCoverage {
                    span: i,
                    coverage: Coverage::new(span.duration_or_zero(), covered_below(spans, tree, i)),
                }),
                Some(Pass::Backward) => {
                    backward_spans += 1;
                    backward_modules += modules_below(spans, tree, i);
                }
                Some(Pass::Optimizer) => {}
            }
        }
        let overall = Coverage::sum(forwards.iter().map(|f| &f.coverage));
        TraceCoverage {
            forwards,
            overall,
            backward_unsplit: backward_spans > 0 && backward_modules == 0,
        }
    }
}

/// The union of the outermost module spans below span `i`, clipped to `i`'s interval.
fn covered_below(spans: &[Span], tree: &SpanTree, i: usize) -> u64 {
    let (lo, hi) = spans.get(i).map_or((0, 0), |s| (s.start_ns, s.end_ns()));
    let mut intervals: Vec<(u64, u64)> = Vec::new();
    let mut stack: Vec<u32> = tree.children(i).to_vec();
    while let Some(c) = stack.pop() {
        let c = c as usize;
        let Some(span) = spans.get(c) else { continue };
        if is_module_span(span) {
            let (s, e) = (span.start_ns.max(lo), span.end_ns().min(hi));
            if s < e {
                intervals.push((s, e));
            }
        } else {
            stack.extend(tree.children(c));
        }
    }
    union_ns(&mut intervals)
}

/// How many module spans lie below span `i`.
fn modules_below(spans: &[Span], tree: &SpanTree, i: usize) -> u64 {
    let mut n = 0;
    let mut stack: Vec<u32> = tree.children(i).to_vec();
    while let Some(c) = stack.pop() {
        let c = c as usize;
        n += u64::from(spans.get(c).is_some_and(is_module_span));
        stack.extend(tree.children(c));
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn union_and_rounding() {
        // [0, 10) ∪ [5, 12) ∪ [20, 25) ∪ [25, 26) ∪ [30, 30): 12 + 5 + 1 + 0 = 18.
        let mut v = alloc::vec![(20, 25), (0, 10), (30, 30), (5, 12), (25, 26)];
        assert_eq!(union_ns(&mut v), 18);
        assert_eq!(union_ns(&mut []), 0);
        // 999 of 1000 is 99%, not 100%; covered beyond the forward is capped.
        assert_eq!(Coverage::new(1000, 999).percent, Some(99));
        let c = Coverage::new(1000, 1500);
        assert_eq!(
            (c.covered_ns, c.unattributed_ns, c.percent),
            (1000, 0, Some(100))
        );
        assert_eq!(Coverage::new(0, 0).percent, None);
        assert_eq!(Coverage::new(0, 0).sentence(), None);
        assert_eq!(
            Coverage::new(2_260_000, 1_200_000).sentence().unwrap(),
            "modules cover 53% of forward (1.20 ms of 2.26 ms; 1.06 ms unattributed)"
        );
    }

    fn doc(lines: &[String]) -> TraceDocument {
        let mut text = String::from(concat!(
            r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","#,
            r#""entrypoint":"e","phase":"train","timestamp":"t","capture_step":1,"warmup_steps":0,"#,
            r#""device":"cpu","timing_mode":"host","tags":{}}"#,
            "\n"
        ));
        for l in lines {
            text.push_str(l);
            text.push('\n');
        }
        TraceDocument::from_bytes(text.as_bytes())
    }

    /// A closed span: (id, parent, name, kind, step, module, start, duration).
    #[allow(clippy::too_many_arguments)] // one argument per field reads best in the calls
    fn span(
        id: &str,
        parent: Option<&str>,
        name: &str,
        kind: &str,
        step: Option<&str>,
        module: Option<&str>,
        start: u64,
        duration: u64,
    ) -> [String; 2] {
        let mut s = format!(
            r#"{{"kind":"span_start","id":"{id}","name":"{name}","start_ns":{start},"span_kind":"{kind}""#
        );
        match parent {
            Some(p) => s.push_str(&format!(r#","parent_id":"{p}""#)),
            None => s.push_str(r#","measured":true"#),
        }
        if let Some(st) = step {
            s.push_str(&format!(r#","step":"{st}""#));
        }
        if let Some(m) = module {
            s.push_str(&format!(r#","module":"{m}""#));
        }
        s.push('}');
        [
            s,
            format!(r#"{{"kind":"span_end","id":"{id}","duration_ns":{duration}}}"#),
        ]
    }

    #[test]
    fn forwards_by_hand() {
        let f = Some("forward");
        let lines: Vec<String> = [
            span("step", None, "step", "function", None, None, 0, 1000),
            // Forward 1: [100, 500), 400 ns.
            span("f1", Some("step"), "forward", "function", f, None, 100, 400),
            // A named linear [120, 220) holding an op span: 100.
            span(
                "q",
                Some("f1"),
                "linear",
                "function",
                f,
                Some("m.q"),
                120,
                100,
            ),
            span("mm", Some("q"), "matmul", "op", f, None, 130, 50),
            // An unnamed module [200, 260) overlapping q (threads): the union adds 40.
            span("r", Some("f1"), "rot", "module", f, None, 200, 60),
            // A function span holding a module [300, 350): 50.
            span("g", Some("f1"), "helper", "function", f, None, 290, 100),
            span(
                "n",
                Some("g"),
                "rms-norm",
                "module",
                f,
                Some("m.norm"),
                300,
                50,
            ),
            // A module running past the forward's end [480, 600): clipped to 20.
            span(
                "late",
                Some("f1"),
                "linear",
                "module",
                f,
                Some("m.o"),
                480,
                120,
            ),
            // Forward 2: [600, 700), no module: 0 of 100.
            span("f2", Some("step"), "forward", "function", f, None, 600, 100),
            // A backward holding no module span.
            span(
                "b",
                Some("step"),
                "backward",
                "function",
                Some("backward"),
                None,
                700,
                200,
            ),
            // A forward recomputed inside backward is no forward of its own.
            span("rf", Some("b"), "forward", "function", f, None, 710, 10),
        ]
        .concat();
        let d = doc(&lines);
        assert!(d.diagnostics.is_empty(), "{:?}", d.diagnostics);
        let c = TraceCoverage::of(&d);
        let got: Vec<(String, u64, u64, u64)> = c
            .forwards
            .iter()
            .map(|f| {
                let cov = f.coverage;
                (
                    d.spans[f.span].id.to_string(),
                    cov.forward_ns,
                    cov.covered_ns,
                    cov.unattributed_ns,
                )
            })
            .collect();
        // f1: [120, 260) = 140, + [300, 350) = 50, + [480, 500) = 20 → 210 of 400.
        assert_eq!(
            got,
            [("f1".into(), 400, 210, 190), ("f2".into(), 100, 0, 100)]
        );
        // Overall 210 of 500: 42%.
        assert_eq!(c.overall, Coverage::new(500, 210));
        assert_eq!(c.overall.percent, Some(42));
        assert!(c.backward_unsplit);

        // A module span inside backward: the backward is split.
        let mut more = lines.clone();
        more.extend(span(
            "bm",
            Some("b"),
            "linear",
            "module",
            Some("backward"),
            None,
            750,
            5,
        ));
        assert!(!TraceCoverage::of(&doc(&more)).backward_unsplit);
        // No backward span at all: nothing to say about it.
        let c = TraceCoverage::of(&doc(&lines[..18]));
        assert!(!c.backward_unsplit);
        assert_eq!(c.forwards.len(), 2);
    }
}
