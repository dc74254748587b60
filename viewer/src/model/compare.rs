//! The comparison view: a baseline and a candidate trace shaped for display. Every number is
//! [`candle_trace_schema::analysis::compare`]'s; this module only words it (refusal text, signed units),
//! orders the path table, and classifies each candidate span by its path's delta for the
//! timeline coloured by change.

use super::sort::sort_indices;
use candle_trace_schema::analysis::spans::span_path;
use std::collections::HashMap;
use std::sync::Arc;

use candle_trace_schema::analysis::compare::{
    compare, MetaMismatch, PathDelta, Presence, TraceComparison,
};
use candle_trace_schema::analysis::units::{format_bytes, format_ns};
use candle_trace_schema::format::document::TraceDocument;

use super::summary::trace_label;
use super::TraceModel;
use crate::timeline::layout::align_at;
use crate::timeline::palette::Theme;

/// A path whose time moved by less than this percentage of its baseline is drawn unchanged.
pub const UNCHANGED_PERCENT: f64 = 1.0;

/// How a candidate span's path changed against the baseline (the timeline's colour).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Change {
    /// The path takes less time than in the baseline (by at least [`UNCHANGED_PERCENT`]).
    Faster,
    /// The path takes more time.
    Slower,
    /// Within [`UNCHANGED_PERCENT`] of the baseline (or exactly equal).
    Unchanged,
    /// The path is only in the candidate.
    New,
    /// The path is only in the baseline (its spans are drawn in the baseline's lanes).
    Vanished,
}

impl Change {
    /// The legend's order.
    pub const ALL: [Change; 5] = [
        Change::Faster,
        Change::Slower,
        Change::Unchanged,
        Change::New,
        Change::Vanished,
    ];

    /// `faster`, `slower`, `unchanged`, `new` or `vanished`.
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Faster => "faster",
            Change::Slower => "slower",
            Change::Unchanged => "unchanged",
            Change::New => "new",
            Change::Vanished => "vanished",
        }
    }

    /// The legend's words: short, so the chart's toolbar stays one line (the tables tag paths
    /// `new` and `vanished` too); [`Change::meaning`] says them in full.
    pub fn label(self) -> &'static str {
        match self {
            Change::Faster => "faster",
            Change::Slower => "slower",
            Change::Unchanged => "±1%",
            Change::New => "new",
            Change::Vanished => "vanished",
        }
    }

    /// What a legend entry means, in full (its tooltip).
    pub fn meaning(self) -> &'static str {
        match self {
            Change::Faster => "faster in the candidate by 1% or more",
            Change::Slower => "slower in the candidate by 1% or more",
            Change::Unchanged => "within 1% of the baseline",
            Change::New => "new in the candidate: paths the baseline lacks",
            Change::Vanished => "only in the baseline: paths the candidate lacks",
        }
    }

    /// A small integer for level-of-detail keys.
    pub fn key(self) -> u32 {
        self as u32
    }
}

/// How one path changed.
pub fn change_of(p: &PathDelta) -> Change {
    match p.presence {
        Presence::New => Change::New,
        Presence::Vanished => Change::Vanished,
        Presence::Both => match p.percent {
            Some(pc) if pc.abs() < UNCHANGED_PERCENT => Change::Unchanged,
            _ if p.delta_ns < 0 => Change::Faster,
            _ if p.delta_ns > 0 => Change::Slower,
            _ => Change::Unchanged,
        },
    }
}

/// The fill of a span block coloured by change. Blue/orange rather than green/red so that
/// red-green colour-blind readers tell faster from slower; new is purple, vanished a dark
/// teal (hatched nowhere: its own hue), unchanged grey.
pub fn change_fill(change: Change, theme: Theme) -> &'static str {
    match (theme, change) {
        (Theme::Light, Change::Faster) => "#2f6fc0",
        (Theme::Light, Change::Slower) => "#d9600f",
        (Theme::Light, Change::Unchanged) => "#b4b9c0",
        (Theme::Light, Change::New) => "#8e44ad",
        (Theme::Light, Change::Vanished) => "#0f766e",
        (Theme::Dark, Change::Faster) => "#4f8ad8",
        (Theme::Dark, Change::Slower) => "#e07a2c",
        (Theme::Dark, Change::Unchanged) => "#5a6069",
        (Theme::Dark, Change::New) => "#a45cc4",
        (Theme::Dark, Change::Vanished) => "#2bb3a3",
    }
}

/// The change of every span of `doc` (the candidate), indexed like its spans.
pub fn span_changes(doc: &TraceDocument, comparison: &TraceComparison) -> Vec<Change> {
    let by_path: HashMap<&str, Change> = comparison
        .paths
        .iter()
        .map(|p| (p.path.as_str(), change_of(p)))
        .collect();
    (0..doc.spans.len())
        .map(|i| {
            by_path
                .get(span_path(doc, i).as_str())
                .copied()
                .unwrap_or(Change::New)
        })
        .collect()
}

/// The sentence shown instead of the deltas when the meta differ: every differing field with
/// both values.
pub fn refusal_text(mismatches: &[MetaMismatch]) -> String {
    let fields: Vec<String> = mismatches.iter().map(ToString::to_string).collect();
    format!(
        "These runs are not comparable: {}. Compare them anyway only if you know the difference does not matter.",
        fields.join("; ")
    )
}

/// A signed duration: `+1.50 µs`, `−35.0 µs`, `0 ns`.
pub fn signed_ns(delta_ns: i64) -> String {
    signed(delta_ns, format_ns)
}

/// A signed size: `+512 B`, `−1.00 KiB`.
pub fn signed_bytes(delta_bytes: i64) -> String {
    signed(delta_bytes, format_bytes)
}

/// A signed count: `+3`, `−1`, `0`.
pub fn signed_count(delta: i64) -> String {
    signed(delta, |n| n.to_string())
}

fn signed(v: i64, unit: impl Fn(u64) -> String) -> String {
    match v {
        0 => unit(0),
        v if v > 0 => format!("+{}", unit(v.unsigned_abs())),
        v => format!("\u{2212}{}", unit(v.unsigned_abs())),
    }
}

/// A percentage with one decimal and a sign (`+12.5%`, `−58.3%`); `new` or `vanished` for a
/// row in one run only, and `–` for a row in both whose baseline is zero (no percentage of
/// it), as the CLI's `compare` writes them.
pub fn percent_text(percent: Option<f64>, presence: Presence) -> String {
    match (presence, percent) {
        (Presence::New, _) => "new".to_string(),
        (Presence::Vanished, _) => "vanished".to_string(),
        (Presence::Both, None) => "\u{2013}".to_string(),
        (Presence::Both, Some(p)) if p.abs() < 0.05 => "0.0%".to_string(),
        (Presence::Both, Some(p)) if p > 0.0 => format!("+{p:.1}%"),
        (Presence::Both, Some(p)) => format!("\u{2212}{:.1}%", -p),
    }
}

/// What the path table can be sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathSort {
    /// The comparison's own order: |delta| largest first (descending) — the default.
    AbsDelta,
    /// Signed delta.
    Delta,
    /// Percentage (rows without a baseline, `new`, count as larger than any percentage).
    Percent,
    /// Baseline time.
    Base,
    /// Candidate time.
    Cand,
    /// The path itself, alphabetically.
    Path,
}

impl PathSort {
    /// The column's `data-sort` name.
    pub fn as_str(self) -> &'static str {
        match self {
            PathSort::AbsDelta => "abs_delta",
            PathSort::Delta => "delta",
            PathSort::Percent => "percent",
            PathSort::Base => "base",
            PathSort::Cand => "cand",
            PathSort::Path => "path",
        }
    }
}

/// The order of `paths` (indices) by `key`, descending or not; ties by path.
pub fn path_order(paths: &[PathDelta], key: PathSort, descending: bool) -> Vec<usize> {
    use std::cmp::Ordering;
    let mut order: Vec<usize> = (0..paths.len()).collect();
    let cmp = |a: &PathDelta, b: &PathDelta| -> Ordering {
        match key {
            PathSort::AbsDelta => a.delta_ns.unsigned_abs().cmp(&b.delta_ns.unsigned_abs()),
            PathSort::Delta => a.delta_ns.cmp(&b.delta_ns),
            PathSort::Percent => {
                let v = |p: &PathDelta| p.percent.unwrap_or(f64::INFINITY);
                v(a).total_cmp(&v(b))
            }
            PathSort::Base => a.base_ns.cmp(&b.base_ns),
            PathSort::Cand => a.cand_ns.cmp(&b.cand_ns),
            PathSort::Path => a.path.cmp(&b.path),
        }
    };
    sort_indices(&mut order, &|i, j| {
        let (a, b) = (&paths[i], &paths[j]);
        let o = cmp(a, b);
        let o = if descending { o.reverse() } else { o };
        o.then_with(|| a.path.cmp(&b.path))
    });
    order
}

/// A row of the compare view's Summary tab ([`CompareModel::summary_rows`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRow {
    /// The summary field (`total_ns` …).
    pub field: &'static str,
    /// Its human label.
    pub label: &'static str,
    /// The baseline's value, as its card words it.
    pub base: String,
    /// The candidate's value, as its card words it.
    pub cand: String,
    /// The change (`−20.0 µs`), `—` where a side did not capture the number.
    pub change: String,
    /// The change in percent, `—` likewise.
    pub percent: String,
    /// Whether both sides captured the number's source.
    pub captured: bool,
}

/// Everything the comparison view shows.
#[derive(Debug, Clone)]
pub struct CompareModel {
    /// The baseline file's name.
    pub base_name: String,
    /// The candidate file's name.
    pub cand_name: String,
    /// `schema::analysis::compare`'s result.
    pub comparison: TraceComparison,
    /// The refusal sentence when the meta differ.
    pub refusal: Option<String>,
    /// The baseline's view models (the chart's first lane group).
    pub baseline: Arc<TraceModel>,
    /// The candidate's view models (the chart's second lane group).
    pub candidate: Arc<TraceModel>,
    /// The change of each baseline span (by its path).
    pub base_changes: Vec<Change>,
    /// The change of each candidate span.
    pub changes: Vec<Change>,
    /// Spans per change, in [`Change::ALL`] order (the legend's counts): the candidate's,
    /// and for `Vanished` the baseline's (a vanished path has no candidate span).
    pub change_counts: [u64; 5],
}

impl CompareModel {
    /// Compare `cand` against `base`.
    pub fn new(
        base_name: String,
        base: TraceDocument,
        cand_name: String,
        cand: TraceDocument,
    ) -> Self {
        let comparison = compare(&base, &cand);
        let base_changes = span_changes(&base, &comparison);
        let refusal = (!comparison.is_comparable()).then(|| refusal_text(&comparison.mismatches));
        let changes = span_changes(&cand, &comparison);
        let mut change_counts = [0u64; 5];
        // Candidate spans by change, and the baseline's spans of the paths that vanished.
        let vanished = base_changes.iter().filter(|c| **c == Change::Vanished);
        for c in changes.iter().chain(vanished) {
            if let Some(pos) = Change::ALL.iter().position(|x| x == c) {
                change_counts[pos] += 1;
            }
        }
        CompareModel {
            base_name,
            cand_name,
            comparison,
            refusal,
            baseline: Arc::new(TraceModel::without_findings(base)),
            candidate: Arc::new(TraceModel::without_findings(cand)),
            base_changes,
            changes,
            change_counts,
        }
    }

    /// The header's strip: each summary number that differs between the sides, as
    /// (field, label, `100 µs → 80.0 µs (−20.0%)`), each side worded as its own card (`not
    /// captured` where its source was off).
    pub fn changed_numbers(&self) -> Vec<(&'static str, &'static str, String)> {
        let shown = |m: &TraceModel, field: &str| {
            m.cards
                .iter()
                .find(|c| c.field == field)
                .map(|c| c.display.clone())
                .unwrap_or_default()
        };
        self.comparison
            .summary
            .iter()
            .filter(|s| s.base != s.cand)
            .map(|s| {
                let percent = s
                    .percent
                    .map(|_| format!(" ({})", percent_text(s.percent, Presence::Both)))
                    .unwrap_or_default();
                (
                    s.field,
                    trace_label(s.field),
                    format!(
                        "{} \u{2192} {}{percent}",
                        shown(&self.baseline, s.field),
                        shown(&self.candidate, s.field)
                    ),
                )
            })
            .collect()
    }

    /// The Summary tab's rows: each of the eight numbers on both sides, worded as that side's
    /// card (`not captured` where its source was off, not `0`), with the change and its
    /// percentage, `—` where a side did not capture the number.
    pub fn summary_rows(&self) -> Vec<SummaryRow> {
        let card = |m: &TraceModel, field: &str| {
            m.cards
                .iter()
                .find(|c| c.field == field)
                .map(|c| (c.display.clone(), c.not_captured.is_some()))
                .unwrap_or_default()
        };
        self.comparison
            .summary
            .iter()
            .map(|s| {
                let (base, base_off) = card(&self.baseline, s.field);
                let (cand, cand_off) = card(&self.candidate, s.field);
                let captured = !base_off && !cand_off;
                let (change, percent) = if !captured {
                    ("\u{2014}".to_string(), "\u{2014}".to_string())
                } else {
                    let change = match s.field {
                        "total_ns" => signed_ns(s.delta),
                        "peak_bytes" => signed_bytes(s.delta),
                        _ => signed_count(s.delta),
                    };
                    let percent = if s.base == 0 && s.cand == 0 {
                        "0.0%".to_string()
                    } else {
                        percent_text(s.percent, Presence::Both)
                    };
                    (change, percent)
                };
                SummaryRow {
                    field: s.field,
                    label: trace_label(s.field),
                    base,
                    cand,
                    change,
                    percent,
                    captured,
                }
            })
            .collect()
    }

    /// The change of candidate span `i` (unchanged for an index out of range).
    pub fn change(&self, i: u32) -> Change {
        self.changes
            .get(i as usize)
            .copied()
            .unwrap_or(Change::Unchanged)
    }

    /// The change of span `i` of a side: 0 the baseline, 1 the candidate.
    pub fn side_change(&self, side: usize, i: u32) -> Change {
        let changes = if side == 0 {
            &self.base_changes
        } else {
            &self.changes
        };
        changes
            .get(i as usize)
            .copied()
            .unwrap_or(Change::Unchanged)
    }

    /// Each side's chart offset (ns): both sides' measured regions start together, or with a
    /// `path` both sides have, both sides' first spans of that path.
    pub fn offsets(&self, path: Option<&str>) -> Vec<i64> {
        let by_path = path.map(|p| self.spans_of_path(p));
        let sides = [&self.baseline.doc, &self.candidate.doc];
        let anchors: Vec<Option<u64>> = match by_path {
            Some([Some(b), Some(c)]) => [(sides[0], b), (sides[1], c)]
                .iter()
                .map(|(doc, i)| doc.spans.get(*i as usize).map(|s| s.start_ns))
                .collect(),
            _ => sides.iter().map(|doc| measured_start(doc)).collect(),
        };
        align_at(&anchors)
    }

    /// Each side's first span of `path` (baseline, candidate).
    pub fn spans_of_path(&self, path: &str) -> [Option<u32>; 2] {
        [
            first_span_with_path(&self.baseline.doc, path),
            first_span_with_path(&self.candidate.doc, path),
        ]
    }
}

/// Start of the document's measured region: its earliest measured span (`None` without one).
pub fn measured_start(doc: &TraceDocument) -> Option<u64> {
    doc.spans
        .iter()
        .filter(|s| s.measured)
        .map(|s| s.start_ns)
        .min()
}

/// The earliest-starting span whose name path is `path` (ties: the first in the file).
pub fn first_span_with_path(doc: &TraceDocument, path: &str) -> Option<u32> {
    // A path's last component is its span's name: only those spans need their path built.
    let leaf = path.rsplit('/').next().unwrap_or(path);
    (0..doc.spans.len())
        .filter(|&i| doc.spans[i].name == leaf && span_path(doc, i) == path)
        .min_by_key(|&i| (doc.spans[i].start_ns, i))
        .map(|i| i as u32)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::timeline::palette::contrast;

    fn fixture(name: &str) -> TraceDocument {
        let path = format!(
            "{}/../tests/fixtures/compare/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        TraceDocument::from_bytes(&std::fs::read(path).unwrap())
    }

    fn delta(path: &str, base_ns: u64, cand_ns: u64, presence: Presence) -> PathDelta {
        PathDelta {
            path: path.into(),
            base_count: u64::from(base_ns > 0),
            cand_count: u64::from(cand_ns > 0),
            base_ns,
            cand_ns,
            delta_ns: candle_trace_schema::analysis::compare::signed_delta(base_ns, cand_ns),
            percent: candle_trace_schema::analysis::compare::percent(base_ns, cand_ns),
            presence,
        }
    }

    #[test]
    fn change_classes_follow_the_delta() {
        assert_eq!(
            change_of(&delta("a", 100, 50, Presence::Both)),
            Change::Faster
        );
        assert_eq!(
            change_of(&delta("a", 100, 150, Presence::Both)),
            Change::Slower
        );
        // Under 1% either way is unchanged; exactly 1% is not.
        assert_eq!(
            change_of(&delta("a", 1000, 1009, Presence::Both)),
            Change::Unchanged
        );
        assert_eq!(
            change_of(&delta("a", 1000, 991, Presence::Both)),
            Change::Unchanged
        );
        assert_eq!(
            change_of(&delta("a", 1000, 1010, Presence::Both)),
            Change::Slower
        );
        assert_eq!(
            change_of(&delta("a", 0, 0, Presence::Both)),
            Change::Unchanged
        );
        // A zero-length baseline: no percentage, the sign decides.
        assert_eq!(change_of(&delta("a", 0, 5, Presence::Both)), Change::Slower);
        assert_eq!(change_of(&delta("n", 0, 5, Presence::New)), Change::New);
        assert_eq!(
            change_of(&delta("v", 5, 0, Presence::Vanished)),
            Change::Vanished
        );
    }

    #[test]
    fn colours_are_distinct_and_visible_in_both_themes() {
        for theme in [Theme::Light, Theme::Dark] {
            let fills: Vec<&str> = Change::ALL.iter().map(|c| change_fill(*c, theme)).collect();
            for (i, a) in fills.iter().enumerate() {
                for b in &fills[i + 1..] {
                    assert_ne!(a, b);
                }
            }
            let bg = if theme == Theme::Light {
                "#ffffff"
            } else {
                "#0f141a"
            };
            // Faster, slower, new and vanished stand out from the page (3:1, WCAG for
            // graphics).
            for c in [
                Change::Faster,
                Change::Slower,
                Change::New,
                Change::Vanished,
            ] {
                assert!(
                    contrast(change_fill(c, theme), bg) >= 3.0,
                    "{c:?} {theme:?}"
                );
            }
        }
    }

    #[test]
    fn fixture_pair_spans_are_coloured_by_their_paths_delta() {
        let (base, cand) = (fixture("base.trace6.jsonl"), fixture("cand.trace6.jsonl"));
        let m = CompareModel::new("b".into(), base, "c".into(), cand);
        assert!(m.refusal.is_none());
        let doc = &m.candidate.doc;
        assert_eq!(m.changes.len(), doc.spans.len());
        for (i, change) in m.changes.iter().enumerate() {
            let path = span_path(doc, i);
            let p = m.comparison.paths.iter().find(|p| p.path == path).unwrap();
            assert_eq!(*change, change_of(p), "{path}");
            assert_ne!(p.presence, Presence::Vanished);
        }
        assert_eq!(
            m.change_counts[..4].iter().sum::<u64>(),
            doc.spans.len() as u64
        );
        // The pair has a new path (only in the candidate) and faster ones.
        assert!(m.change_counts[3] > 0, "{:?}", m.change_counts);
        assert!(m.change_counts[0] > 0, "{:?}", m.change_counts);
        // base.trace6.jsonl's one optimizer span vanished from the candidate.
        assert_eq!(m.change_counts[4], 1, "{:?}", m.change_counts);
    }

    #[test]
    fn the_header_names_the_numbers_that_changed() {
        let (base, cand) = (fixture("base.trace6.jsonl"), fixture("cand.trace6.jsonl"));
        let m = CompareModel::new("b".into(), base, "c".into(), cand);
        let shown = m.changed_numbers();
        // base: step 100 µs, 6 spans; cand: step 80 µs, 7 spans (fused_gelu new, sgd for
        // optimizer); 3 ops on both sides.
        let total = shown.iter().find(|(f, _, _)| *f == "total_ns").unwrap();
        assert_eq!(total.1, "measured total");
        assert_eq!(total.2, "100 µs \u{2192} 80.0 µs (\u{2212}20.0%)");
        let spans = shown.iter().find(|(f, _, _)| *f == "span_count").unwrap();
        assert_eq!(spans.2, "6 \u{2192} 7 (+16.7%)");
        assert!(shown.iter().all(|(f, _, _)| *f != "op_count"));
    }

    #[test]
    fn the_summary_says_not_captured_where_a_side_had_its_allocator_off() {
        let base_text = std::fs::read_to_string(format!(
            "{}/../tests/fixtures/compare/base.trace6.jsonl",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        // The candidate: the baseline with its four memory lines gone and the allocator off.
        let mut cand_text: String = base_text
            .lines()
            .filter(|l| !l.contains(r#""kind":"memory""#))
            .map(|l| format!("{l}\n"))
            .collect();
        cand_text.push_str(r#"{"kind":"capture_sources","sources":[{"source":"tracing","on":true,"events":6},{"source":"allocator","on":false}],"events_dropped":0,"warnings":[]}"#);
        cand_text.push('\n');
        let m = CompareModel::new(
            "b".into(),
            TraceDocument::from_bytes(base_text.as_bytes()),
            "c".into(),
            TraceDocument::from_bytes(cand_text.as_bytes()),
        );
        let rows = m.summary_rows();
        let row = |f: &str| rows.iter().find(|r| r.field == f).unwrap();
        // The baseline's peak: 512 + 1024 + 512 B live at 50 µs = 2 KiB; its 3 allocs.
        let peak = row("peak_bytes");
        assert_eq!(peak.base, "2.00 KiB");
        assert!(peak.cand.starts_with("not captured"), "{}", peak.cand);
        assert_eq!(
            (peak.change.as_str(), peak.percent.as_str(), peak.captured),
            ("\u{2014}", "\u{2014}", false)
        );
        let allocs = row("alloc_count");
        assert_eq!(
            (allocs.base.as_str(), allocs.cand.as_str()),
            ("3", "not captured")
        );
        // A number both sides captured keeps its change: the same 6 spans on both sides.
        let spans = row("span_count");
        assert_eq!(
            (
                spans.base.as_str(),
                spans.cand.as_str(),
                spans.change.as_str(),
                spans.percent.as_str()
            ),
            ("6", "6", "0", "0.0%")
        );
        assert!(spans.captured);
        assert_eq!(rows.len(), 8);
    }

    #[test]
    fn both_sides_are_coloured_and_aligned() {
        let (base, cand) = (fixture("base.trace6.jsonl"), fixture("cand.trace6.jsonl"));
        let m = CompareModel::new("b".into(), base, "c".into(), cand);
        let side = |doc: &TraceDocument, id: &str| doc.span_index(id).unwrap() as u32;
        let (b, c) = (&m.baseline.doc, &m.candidate.doc);
        // base.trace6.jsonl: step 100 µs → 80 µs in the candidate: faster on both sides.
        assert_eq!(m.side_change(0, side(b, "step")), Change::Faster);
        assert_eq!(m.side_change(1, side(c, "step")), Change::Faster);
        // The baseline's optimizer span vanished; the candidate's sgd is new.
        assert_eq!(m.side_change(0, side(b, "opt")), Change::Vanished);
        assert_eq!(m.side_change(1, side(c, "sgd")), Change::New);
        // Both measured regions start at 0: no offset. backward starts at 42 µs in the
        // baseline and 32 µs in the candidate: aligning on it moves the candidate 10 µs.
        assert_eq!(m.offsets(None), vec![0, 0]);
        assert_eq!(m.offsets(Some("step/backward")), vec![0, 10_000]);
        // A path on one side only aligns the measured regions.
        assert_eq!(m.offsets(Some("step/sgd")), vec![0, 0]);
        assert_eq!(
            m.spans_of_path("step/forward/linear"),
            [Some(side(b, "l1")), Some(side(c, "l1"))]
        );
        assert_eq!(
            m.spans_of_path("step/optimizer"),
            [Some(side(b, "opt")), None]
        );
        assert_eq!(measured_start(b), Some(0));
    }

    #[test]
    fn differing_meta_is_refused_naming_field_and_values() {
        let base = fixture("base.trace6.jsonl");
        let other = fixture("other_device.trace6.jsonl");
        let m = CompareModel::new("b".into(), base, "o".into(), other);
        let text = m.refusal.unwrap();
        let mm = &m.comparison.mismatches[0];
        assert_eq!(mm.field, "device");
        assert!(
            text.contains(&format!(
                "device differs (baseline `{}`, candidate `{}`)",
                mm.base, mm.cand
            )),
            "{text}"
        );
        // The deltas are computed all the same ("compare anyway" only shows them).
        assert_eq!(m.comparison.summary.len(), 8);
    }

    #[test]
    fn signed_units() {
        assert_eq!(signed_ns(-35_000), "\u{2212}35.0 µs");
        assert_eq!(signed_ns(1500), "+1.50 µs");
        assert_eq!(signed_ns(0), "0 ns");
        assert_eq!(signed_bytes(-1024), "\u{2212}1.00 KiB");
        assert_eq!(signed_bytes(512), "+512 B");
        assert_eq!(signed_count(3), "+3");
        assert_eq!(signed_count(-1), "\u{2212}1");
        assert_eq!(percent_text(None, Presence::New), "new");
        assert_eq!(percent_text(Some(-100.0), Presence::Vanished), "vanished");
        // In both runs from a zero baseline: no percentage, and not `new`.
        assert_eq!(percent_text(None, Presence::Both), "\u{2013}");
        assert_eq!(
            percent_text(Some(-35.0 / 60.0 * 100.0), Presence::Both),
            "\u{2212}58.3%"
        );
        assert_eq!(percent_text(Some(12.54), Presence::Both), "+12.5%");
        assert_eq!(percent_text(Some(0.01), Presence::Both), "0.0%");
    }

    #[test]
    fn path_table_sorts_by_each_column() {
        let rows = vec![
            delta("step", 100, 70, Presence::Both),
            delta("step/mm", 60, 25, Presence::Both),
            delta("step/fused", 0, 8, Presence::New),
            delta("step/gone", 5, 0, Presence::Vanished),
            delta("step/slow", 10, 20, Presence::Both),
        ];
        let names = |o: Vec<usize>| {
            o.into_iter()
                .map(|i| rows[i].path.as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(path_order(&rows, PathSort::AbsDelta, true)),
            ["step/mm", "step", "step/slow", "step/fused", "step/gone"]
        );
        assert_eq!(
            names(path_order(&rows, PathSort::Delta, false)),
            ["step/mm", "step", "step/gone", "step/fused", "step/slow"]
        );
        // New rows (no percentage) sort above every percentage when descending.
        assert_eq!(
            names(path_order(&rows, PathSort::Percent, true)),
            ["step/fused", "step/slow", "step", "step/mm", "step/gone"]
        );
        assert_eq!(
            names(path_order(&rows, PathSort::Path, false)),
            ["step", "step/fused", "step/gone", "step/mm", "step/slow"]
        );
        assert_eq!(names(path_order(&rows, PathSort::Base, true))[0], "step");
        assert_eq!(names(path_order(&rows, PathSort::Cand, true))[0], "step");
    }
}
