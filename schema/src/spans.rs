//! The span tree: parents, children, depth and self time, built without recursion.
//!
//! Layout rules where SCHEMA.md is silent:
//! - A span whose `parent_id` names no span is an error and is laid out as a root (depth 0). It
//!   still has a `parent_id`, so the summary's literal `root_span_count` does not count it.
//! - A cycle in the parent chain is one error, reported at the `span_start` line of the cycle
//!   member that appears first in the file; that member is laid out as a root and the rest of
//!   the cycle hangs below it.
//! - Children are ordered by `start_ns`, then by file order.
//! - Self time = duration − sum of the direct children's durations, saturating at 0; an
//!   unclosed span has duration 0.
//!
//! Everything is iterative, so a 100k-deep chain of spans needs no stack.

use alloc::format;
use alloc::vec;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use crate::diagnostics::{Category, Diagnostic};
use crate::document::Span;

/// Parent/child structure of a document's spans, indexed like `TraceDocument::spans`.
///
/// It (de)serializes so that a tree built by [`SpanTree::build`] can move between threads as
/// bytes (the viewer's worker hands it to the page); a deserialized tree is trusted, not
/// re-validated, so only deserialize what this crate serialized.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpanTree {
    /// Layout parent of each span (`None` for roots, dangling parents and cycle breakers).
    pub parent: Vec<Option<u32>>,
    /// Depth of each span: a root is 0, its child 1 ...
    pub depth: Vec<u32>,
    /// Self time of each span in ns.
    pub self_ns: Vec<u64>,
    /// Spans laid out as roots, ordered by start time.
    pub roots: Vec<u32>,
    /// Deepest depth (0 when there are no spans).
    pub max_depth: u32,
    child_start: Vec<u32>,
    child_list: Vec<u32>,
}

impl SpanTree {
    /// Build the tree; `parent_of(i)` resolves span `i`'s `parent_id` to an index (`None` when
    /// it has none). Returns the diagnostics for dangling parents and cycles.
    pub fn build(
        spans: &[Span],
        resolve: impl Fn(&str) -> Option<usize>,
    ) -> (Self, Vec<Diagnostic>) {
        let n = spans.len();
        let mut diagnostics = Vec::new();
        let mut parent: Vec<Option<u32>> = Vec::with_capacity(n);
        for span in spans {
            let p = match &span.parent_id {
                None => None,
                Some(pid) => match resolve(pid) {
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
        let by_start = |a: &u32, b: &u32| {
            let (sa, sb) = (&spans[*a as usize], &spans[*b as usize]);
            sa.start_ns.cmp(&sb.start_ns).then(a.cmp(b))
        };
        for i in 0..n {
            child_list[child_start[i] as usize..child_start[i + 1] as usize].sort_by(by_start);
        }
        roots.sort_by(by_start);

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

        let self_ns = (0..n)
            .map(|i| {
                let children: u64 = child_list
                    [child_start[i] as usize..child_start[i + 1] as usize]
                    .iter()
                    .map(|&c| spans[c as usize].duration_or_zero())
                    .fold(0u64, u64::saturating_add);
                spans[i].duration_or_zero().saturating_sub(children)
            })
            .collect();

        (
            SpanTree {
                parent,
                depth,
                self_ns,
                roots,
                max_depth,
                child_start,
                child_list,
            },
            diagnostics,
        )
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
