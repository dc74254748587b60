//! The span tree's layout: parents, children and depth, built without recursion. Self time,
//! the number a tree carries for each span, is computed by
//! [`analysis::spans::self_times`](crate::analysis::spans::self_times) when a reader finishes.
//!
//! Layout rules where SCHEMA.md is silent:
//! - A span whose `parent_id` names no span is an error and is laid out as a root (depth 0). It
//!   still has a `parent_id`, so the summary's literal `root_span_count` does not count it.
//! - A cycle in the parent chain is one error, reported at the `span_start` line of the cycle
//!   member that appears first in the file; that member is laid out as a root and the rest of
//!   the cycle hangs below it.
//! - Children are ordered by `start_ns`, then by file order.
//!
//! Everything is iterative, so a 100k-deep chain of spans needs no stack.

use alloc::format;
use alloc::vec;
use alloc::vec::Vec;

use crate::format::diagnostics::{Category, Diagnostic};
use crate::format::records::Span;

/// Parent/child structure of a document's spans, indexed like `TraceDocument::spans`.
///
/// To move a tree between threads as plain arrays (the viewer's worker hands it to the page),
/// take it apart with [`SpanTree::into_parts`] and put it back with [`SpanTree::from_parts`],
/// which checks that the parts fit together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpanTree {
    /// Layout parent of each span (`None` for roots, dangling parents and cycle breakers).
    pub parent: Vec<Option<u32>>,
    /// Depth of each span: a root is 0, its child 1 ...
    pub depth: Vec<u32>,
    /// Self time of each span in ns ([`analysis::spans::self_times`](crate::analysis::spans::self_times)).
    pub self_ns: Vec<u64>,
    /// Spans laid out as roots, ordered by start time.
    pub roots: Vec<u32>,
    /// Deepest depth (0 when there are no spans).
    pub max_depth: u32,
    child_start: Vec<u32>,
    child_list: Vec<u32>,
}

/// A [`SpanTree`]'s arrays (see [`SpanTree::into_parts`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpanTreeParts {
    /// [`SpanTree::parent`].
    pub parent: Vec<Option<u32>>,
    /// [`SpanTree::depth`].
    pub depth: Vec<u32>,
    /// [`SpanTree::self_ns`].
    pub self_ns: Vec<u64>,
    /// [`SpanTree::roots`].
    pub roots: Vec<u32>,
    /// [`SpanTree::max_depth`].
    pub max_depth: u32,
    /// Offsets into `child_list`, one per span plus one.
    pub child_start: Vec<u32>,
    /// Children of every span, row after row.
    pub child_list: Vec<u32>,
}

impl SpanTree {
    /// Lay the tree out; `resolve(i, parent_id)` resolves span `i`'s `parent_id` to an index
    /// (`None` when no span has that id). Returns the diagnostics for dangling parents and
    /// cycles. `self_ns` is left empty for
    /// [`analysis::spans::span_tree`](crate::analysis::spans::span_tree) to fill.
    pub(crate) fn layout(
        spans: &[Span],
        resolve: impl Fn(usize, &str) -> Option<usize>,
    ) -> (Self, Vec<Diagnostic>) {
        let n = spans.len();
        let mut diagnostics = Vec::new();
        let mut parent: Vec<Option<u32>> = Vec::with_capacity(n);
        for (i, span) in spans.iter().enumerate() {
            let p = match &span.parent_id {
                None => None,
                Some(pid) => match resolve(i, pid) {
                    Some(i) => Some(i as u32),
                    None => {
                        diagnostics.push(Diagnostic::error(
                            span.line,
                            Category::Reference,
                            format!(
                                "span `{}` names parent `{}`, which is no span",
                                span.id, pid
                            ),
                        ));
                        None
                    }
                },
            };
            parent.push(p);
        }
        break_cycles(spans, &mut parent, &mut diagnostics);

        // Children in compressed rows: child_list[child_start[i]..child_start[i + 1]].
        let mut child_start = vec![0u32; n + 1];
        for p in parent.iter().flatten() {
            child_start[*p as usize + 1] += 1;
        }
        for i in 0..n {
            child_start[i + 1] += child_start[i];
        }
        let mut fill = child_start.clone();
        let mut child_list = vec![0u32; child_start[n] as usize];
        let mut roots = Vec::new();
        for (i, p) in parent.iter().enumerate() {
            match p {
                Some(p) => {
                    let slot = &mut fill[*p as usize];
                    child_list[*slot as usize] = i as u32;
                    *slot += 1;
                }
                None => roots.push(i as u32),
            }
        }
        for i in 0..n {
            by_start(
                spans,
                &mut child_list[child_start[i] as usize..child_start[i + 1] as usize],
            );
        }
        by_start(spans, &mut roots);

        // Depth: breadth-first from the roots (every span reaches a root once cycles are broken).
        let mut depth = vec![0u32; n];
        let mut queue: Vec<u32> = roots.clone();
        let mut head = 0;
        let mut max_depth = 0;
        while head < queue.len() {
            let i = queue[head] as usize;
            head += 1;
            let d = depth[i];
            max_depth = max_depth.max(d);
            for &c in &child_list[child_start[i] as usize..child_start[i + 1] as usize] {
                depth[c as usize] = d + 1;
                queue.push(c);
            }
        }

        (
            SpanTree {
                parent,
                depth,
                self_ns: Vec::new(),
                roots,
                max_depth,
                child_start,
                child_list,
            },
            diagnostics,
        )
    }

    /// The tree's arrays, for moving it as plain data.
    pub fn into_parts(self) -> SpanTreeParts {
        SpanTreeParts {
            parent: self.parent,
            depth: self.depth,
            self_ns: self.self_ns,
            roots: self.roots,
            max_depth: self.max_depth,
            child_start: self.child_start,
            child_list: self.child_list,
        }
    }

    /// The children in compressed rows: span `i`'s children are
    /// `child_list[child_start[i]..child_start[i + 1]]`.
    pub fn child_rows(&self) -> (&[u32], &[u32]) {
        (&self.child_start, &self.child_list)
    }

    /// A tree from [`SpanTree::into_parts`]'s arrays, or why they do not fit together
    /// (lengths, offsets, indices out of range); a cheap linear check, so a tree rebuilt from
    /// bytes can never index out of bounds.
    pub fn from_parts(p: SpanTreeParts) -> Result<Self, &'static str> {
        let n = p.parent.len();
        if p.depth.len() != n || p.self_ns.len() != n {
            return Err("parent, depth and self time differ in length");
        }
        if p.child_start.len() != n + 1
            || p.child_start.first() != Some(&0)
            || p.child_start.last().map(|&l| l as usize) != Some(p.child_list.len())
            || p.child_start.windows(2).any(|w| w[0] > w[1])
        {
            return Err("child offsets do not fit the child list");
        }
        let in_range = |i: &u32| (*i as usize) < n;
        if !p.child_list.iter().all(in_range)
            || !p.roots.iter().all(in_range)
            || !p.parent.iter().flatten().all(in_range)
        {
            return Err("a span index is out of range");
        }
        Ok(SpanTree {
            parent: p.parent,
            depth: p.depth,
            self_ns: p.self_ns,
            roots: p.roots,
            max_depth: p.max_depth,
            child_start: p.child_start,
            child_list: p.child_list,
        })
    }

    /// Direct children of span `i`, ordered by start time.
    pub fn children(&self, i: usize) -> &[u32] {
        match (self.child_start.get(i), self.child_start.get(i + 1)) {
            (Some(&a), Some(&b)) => &self.child_list[a as usize..b as usize],
            _ => &[],
        }
    }

    /// Spans in depth-first pre-order (parents before children, siblings by start time),
    /// computed with an explicit stack.
    pub fn preorder(&self) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.parent.len());
        let mut stack: Vec<u32> = self.roots.iter().rev().copied().collect();
        while let Some(i) = stack.pop() {
            out.push(i);
            stack.extend(self.children(i as usize).iter().rev());
        }
        out
    }
}

/// Sorts span indices by start time, ties by index. Outside [`SpanTree::layout`], which is
/// generic over its resolver, so that the sort is compiled once.
fn by_start(spans: &[Span], list: &mut [u32]) {
    list.sort_by(|a, b| {
        let (sa, sb) = (&spans[*a as usize], &spans[*b as usize]);
        sa.start_ns.cmp(&sb.start_ns).then(a.cmp(b))
    });
}

/// Find every cycle in the parent links, report it once, and cut it at its first-in-file member.
fn break_cycles(spans: &[Span], parent: &mut [Option<u32>], diagnostics: &mut Vec<Diagnostic>) {
    const NEW: u8 = 0;
    const ON_PATH: u8 = 1;
    const DONE: u8 = 2;
    let n = spans.len();
    let mut state = vec![NEW; n];
    let mut pos_in_path = vec![0u32; n];
    let mut path: Vec<u32> = Vec::new();
    for start in 0..n {
        if state[start] != NEW {
            continue;
        }
        path.clear();
        let mut cur = start;
        loop {
            match state[cur] {
                DONE => break,
                ON_PATH => {
                    let cycle = &path[pos_in_path[cur] as usize..];
                    let breaker = cycle
                        .iter()
                        .copied()
                        .min_by_key(|&i| spans[i as usize].line)
                        .unwrap_or(cur as u32) as usize;
                    let mut ids: Vec<&str> = cycle
                        .iter()
                        .map(|&i| spans[i as usize].id.as_str())
                        .collect();
                    ids.push(spans[cur].id.as_str());
                    diagnostics.push(Diagnostic::error(
                        spans[breaker].line,
                        Category::Cycle,
                        format!("parent chain loops: {}", ids.join(" → ")),
                    ));
                    parent[breaker] = None;
                    break;
                }
                _ => {
                    state[cur] = ON_PATH;
                    pos_in_path[cur] = path.len() as u32;
                    path.push(cur as u32);
                    match parent[cur] {
                        Some(p) => cur = p as usize,
                        None => break,
                    }
                }
            }
        }
        for &i in &path {
            state[i as usize] = DONE;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::document::TraceDocument;

    const FILE: &str = concat!(
        r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00Z","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#,
        "\n",
        r#"{"kind":"span_start","id":"a","name":"a","start_ns":0,"span_kind":"function","measured":true}"#,
        "\n",
        r#"{"kind":"span_start","id":"b","parent_id":"a","name":"b","start_ns":1,"span_kind":"op"}"#,
        "\n",
        r#"{"kind":"span_end","id":"b","duration_ns":2}"#,
        "\n",
        r#"{"kind":"span_end","id":"a","duration_ns":5}"#,
        "\n",
    );

    #[test]
    fn parts_round_trip_and_misfits_are_refused() {
        let tree = TraceDocument::from_bytes(FILE.as_bytes()).tree;
        assert_eq!(tree.children(0), &[1]);
        let back = SpanTree::from_parts(tree.clone().into_parts()).unwrap();
        assert_eq!(back, tree);
        let broken: [fn(&mut SpanTreeParts); 6] = [
            |p| p.depth.pop().map(drop).unwrap_or(()),
            |p| p.child_start[1] = 9,
            |p| p.child_start.pop().map(drop).unwrap_or(()),
            |p| p.child_list[0] = 7,
            |p| p.roots.push(2),
            |p| p.parent[1] = Some(5),
        ];
        for (i, f) in broken.iter().enumerate() {
            let mut parts = tree.clone().into_parts();
            f(&mut parts);
            assert!(SpanTree::from_parts(parts).is_err(), "misfit {i}");
        }
    }
}
