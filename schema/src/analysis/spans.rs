//! Self time, spans ranked by duration or self time, edges ranked by duration, and a span's name
//! path.
//!
//! Self time = duration − sum of the direct children's durations in the layout tree, saturating
//! at 0; an unclosed span has duration 0.
//!
//! Every ranking is largest first with ties in file order (a total order), and a limited ranking
//! is exactly the head of the full one.

use crate::analysis::sort;
use alloc::string::String;
use alloc::vec::Vec;

use crate::format::diagnostics::Diagnostic;
use crate::format::document::TraceDocument;
use crate::format::events::Edge;
use crate::format::records::{Lined, Span};
use crate::format::spans::SpanTree;

/// The span tree of `spans` with every span's self time; `resolve(i, parent_id)` resolves span
/// `i`'s `parent_id` to an index (`None` when no span has that id). Returns the diagnostics for
/// dangling parents and cycles.
pub fn span_tree(
    spans: &[Span],
    resolve: impl Fn(usize, &str) -> Option<usize>,
) -> (SpanTree, Vec<Diagnostic>) {
    let (mut tree, diagnostics) = SpanTree::layout(spans, resolve);
    tree.self_ns = self_times(spans, &tree);
    (tree, diagnostics)
}

/// Self time of each span of `spans` laid out as `tree` (see the [module](self)).
pub fn self_times(spans: &[Span], tree: &SpanTree) -> Vec<u64> {
    (0..spans.len())
        .map(|i| {
            let children: u64 = tree
                .children(i)
                .iter()
                .map(|&c| spans[c as usize].duration_or_zero())
                .fold(0u64, u64::saturating_add);
            spans[i].duration_or_zero().saturating_sub(children)
        })
        .collect()
}

/// An `edge` with its endpoints resolved to span indices.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResolvedEdge<'a> {
    /// The edge record.
    pub edge: &'a Lined<Edge>,
    /// Index of `from_span` in `TraceDocument::spans`.
    pub from: Option<usize>,
    /// Index of `to_span` in `TraceDocument::spans`.
    pub to: Option<usize>,
}

/// Span indices sorted by duration, longest first (ties by file order), at most `limit`.
pub fn slowest_spans(doc: &TraceDocument, limit: usize) -> Vec<usize> {
    top_spans(doc.spans.len(), limit, &|i| doc.spans[i].duration_or_zero())
}

/// Span indices sorted by self time, largest first (ties by file order), at most `limit`.
pub fn spans_by_self_time(doc: &TraceDocument, limit: usize) -> Vec<usize> {
    top_spans(doc.spans.len(), limit, &|i| doc.tree.self_ns[i])
}

/// The first `limit` of `0..n` by `key`, largest first, ties by index (`key` behind `&dyn`: the
/// selection and the sort are compiled once for every caller).
fn top_spans(n: usize, limit: usize, key: &dyn Fn(usize) -> u64) -> Vec<usize> {
    // Largest key first, ties by file order: a total order, so selecting the first `limit`
    // and sorting only those gives exactly the head of a full sort, in O(n) rather than
    // O(n log n) (a large trace's tables ask for a few dozen).
    let by_key = |a: &usize, b: &usize| key(*b).cmp(&key(*a)).then(a.cmp(b));
    if limit == 0 {
        return Vec::new();
    }
    let mut order: Vec<usize> = (0..n).collect();
    if limit < order.len() {
        order.select_nth_unstable_by(limit - 1, by_key);
        order.truncate(limit);
    }
    sort::by(&mut order, by_key);
    order
}

/// Edges sorted by duration, longest first (ties by file order), each with the two spans it
/// joins resolved to indices (`None` when an id names no span).
pub fn edges_by_duration(doc: &TraceDocument) -> Vec<ResolvedEdge<'_>> {
    let mut rows: Vec<ResolvedEdge<'_>> = doc
        .edges
        .iter()
        .map(|e| ResolvedEdge {
            edge: e,
            from: doc.span_index(&e.from_span),
            to: doc.span_index(&e.to_span),
        })
        .collect();
    rows.sort_by(|a, b| {
        b.edge
            .duration_ns
            .cmp(&a.edge.duration_ns)
            .then(a.edge.line.cmp(&b.edge.line))
    });
    rows
}

/// Names along the layout path from the root to span `i`, joined with `/`.
pub fn span_path(doc: &TraceDocument, i: usize) -> String {
    let mut names = Vec::new();
    let mut cur = Some(i);
    while let Some(c) = cur {
        names.push(doc.spans[c].name.as_str());
        cur = doc
            .tree
            .parent
            .get(c)
            .copied()
            .flatten()
            .map(|p| p as usize);
    }
    names.reverse();
    names.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_lines::{end, four_spans, read, start, META};
    use alloc::format;
    use alloc::string::ToString;
    use alloc::vec;

    #[test]
    fn top_spans_are_the_head_of_a_full_sort() {
        let mut lines = vec![META.to_string(), start("root", None, 0, true)];
        // Durations with many ties: 7 distinct values over 40 spans.
        for i in 0..40u64 {
            let id = format!("c{i}");
            lines.push(start(&id, Some("root"), i, false));
            lines.push(end(&id, (i * 37) % 7));
        }
        lines.push(end("root", 1000));
        let doc = read(&lines);
        let mut full: Vec<usize> = (0..doc.spans.len()).collect();
        full.sort_by(|&a, &b| {
            let d = |i: usize| doc.spans[i].duration_or_zero();
            d(b).cmp(&d(a)).then(a.cmp(&b))
        });
        for limit in [0, 1, 2, 5, 13, 40, 41, 100] {
            let want: Vec<usize> = full.iter().copied().take(limit).collect();
            assert_eq!(slowest_spans(&doc, limit), want, "limit {limit}");
        }
    }

    #[test]
    fn self_time_ranking_and_paths_by_hand() {
        // Self times: root 100 − 40 − 30 = 30, a 40 − 10 = 30, b 10, c 30 (`four_spans`).
        let doc = four_spans();
        assert_eq!(doc.tree.self_ns, [30, 30, 10, 30]);
        // Three spans tie at 30: file order root (0), a (1), c (3); then b (2).
        assert_eq!(spans_by_self_time(&doc, 10), vec![0, 1, 3, 2]);
        assert_eq!(spans_by_self_time(&doc, 2), vec![0, 1]);
        // By duration: root 100, a 40, c 30, b 10.
        assert_eq!(slowest_spans(&doc, 10), vec![0, 1, 3, 2]);
        assert_eq!(span_path(&doc, 2), "nroot/na/nb");
        assert_eq!(span_path(&doc, 3), "nroot/nc");
        assert_eq!(span_path(&doc, 0), "nroot");
    }

    #[test]
    fn edges_resolve_and_sort_by_duration() {
        let edge = |from: &str, to: &str, d: u64| {
            format!(r#"{{"kind":"edge","from_span":"{from}","to_span":"{to}","duration_ns":{d}}}"#)
        };
        let doc = read(&[
            META.to_string(),
            start("a", None, 0, true),
            start("b", Some("a"), 5, false),
            edge("a", "b", 3),
            edge("b", "zz", 9),
            end("b", 1),
            end("a", 10),
        ]);
        let rows = edges_by_duration(&doc);
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (rows[0].edge.duration_ns, rows[0].from, rows[0].to),
            (9, Some(1), None)
        );
        assert_eq!(
            (rows[1].edge.duration_ns, rows[1].from, rows[1].to),
            (3, Some(0), Some(1))
        );
    }
}
