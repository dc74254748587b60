//! The span table (top spans by self or total time) and the details of one span: its fields,
//! self time, children, the ops that ran in it and the memory allocated in it.

use candle_trace_schema::analysis::modules::ModulePaths;
use candle_trace_schema::analysis::spans::{slowest_spans, span_path, spans_by_self_time};
use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::events::{MemoryAction, Pass, SpanKind};

use super::ops::shape_text;

/// How the span table is ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanOrder {
    /// By self time, largest first.
    SelfTime,
    /// By duration, longest first.
    Total,
}

/// One row of the span table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanRow {
    /// Index into the document's spans.
    pub index: u32,
    /// Name.
    pub name: String,
    /// Names from the root, joined with `/`.
    pub path: String,
    /// The module it ran in, where the trace's capture named modules
    /// ([`ModulePaths::module_of`]).
    pub module: Option<String>,
    /// Kind.
    pub kind: SpanKind,
    /// Pass (forward, backward, optimizer).
    pub pass: Option<Pass>,
    /// Duration (0 while unclosed).
    pub duration_ns: u64,
    /// Self time.
    pub self_ns: u64,
}

/// The top `limit` spans in this order (ties by file order); `paths` (the document's) name
/// the module each ran in.
pub fn span_rows(
    doc: &TraceDocument,
    paths: &ModulePaths,
    order: SpanOrder,
    limit: usize,
) -> Vec<SpanRow> {
    let indices = match order {
        SpanOrder::SelfTime => spans_by_self_time(doc, limit),
        SpanOrder::Total => slowest_spans(doc, limit),
    };
    indices
        .into_iter()
        .map(|i| {
            let s = &doc.spans[i];
            SpanRow {
                index: i as u32,
                name: s.name.to_string(),
                path: span_path(doc, i),
                module: paths.module_of(i).map(str::to_string),
                kind: s.span_kind,
                pass: s.pass,
                duration_ns: s.duration_or_zero(),
                self_ns: doc.tree.self_ns.get(i).copied().unwrap_or(0),
            }
        })
        .collect()
}

/// Per-span indexes of the records that name a span (built once per document), each as
/// one list of record indices grouped by span and the offset where each span's group starts
/// (two flat arrays, not a list per span: a trace of a million spans needs no million
/// allocations).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpanIndex {
    ops: Grouped,
    allocs: Grouped,
}

/// Record indices grouped by span: span `i`'s are `items[starts[i]..starts[i + 1]]`, in
/// record order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Grouped {
    starts: Vec<u32>,
    items: Vec<u32>,
}

impl Grouped {
    /// Group the records `(record index, span index)` under `spans` spans (two passes: count,
    /// then place, so each array is allocated once at its final size).
    fn of(spans: usize, records: impl Iterator<Item = (u32, usize)> + Clone) -> Self {
        let mut starts = vec![0u32; spans + 1];
        for (_, s) in records.clone() {
            starts[s + 1] += 1;
        }
        for i in 0..spans {
            starts[i + 1] += starts[i];
        }
        let mut next = starts.clone();
        let mut items = vec![0u32; starts[spans] as usize];
        for (r, s) in records {
            items[next[s] as usize] = r;
            next[s] += 1;
        }
        Grouped { starts, items }
    }

    fn of_span(&self, i: usize) -> &[u32] {
        match (
            self.starts.get(i),
            i.checked_add(1).and_then(|j| self.starts.get(j)),
        ) {
            (Some(&a), Some(&b)) => self.items.get(a as usize..b as usize).unwrap_or_default(),
            _ => &[],
        }
    }
}

/// `(record index, span index)` of the records with a span (`u32::MAX`: none).
fn indexed(spans: &[u32]) -> impl Iterator<Item = (u32, usize)> + Clone + '_ {
    spans
        .iter()
        .enumerate()
        .filter(|(_, &s)| s != u32::MAX)
        .map(|(r, &s)| (r as u32, s as usize))
}

impl SpanIndex {
    /// Index `doc`'s ops and allocations by span.
    pub fn of(doc: &TraceDocument) -> Self {
        let n = doc.spans.len();
        // A record's span, looked up once: the id lookup is the costly part. Consecutive
        // records nearly always name the same span, so the last one found is compared first
        // (span ids are unique: a match is the span the lookup would find).
        let mut last = usize::MAX;
        let mut span_of = |id: &str| -> u32 {
            if doc.spans.get(last).is_some_and(|s| s.id == id) {
                return last as u32;
            }
            match doc.span_index(id) {
                Some(i) => {
                    last = i;
                    i as u32
                }
                None => u32::MAX,
            }
        };
        let op_spans: Vec<u32> = doc.ops.iter().map(|op| span_of(op.span_id)).collect();
        let alloc_spans: Vec<u32> = doc
            .memory
            .iter()
            .map(|m| match m.action {
                MemoryAction::Alloc => span_of(m.span_id),
                MemoryAction::Free => u32::MAX,
            })
            .collect();
        SpanIndex {
            ops: Grouped::of(n, indexed(&op_spans)),
            allocs: Grouped::of(n, indexed(&alloc_spans)),
        }
    }

    /// Indices into `doc.ops` of the ops in span `i` (empty for no such span).
    pub fn ops_of(&self, i: usize) -> &[u32] {
        self.ops.of_span(i)
    }

    /// Indices into `doc.memory` of the allocations (action `alloc`) in span `i`.
    pub fn allocs_of(&self, i: usize) -> &[u32] {
        self.allocs.of_span(i)
    }

    /// Ops indexed under some span.
    pub fn op_count(&self) -> usize {
        self.ops.items.len()
    }

    /// Allocations indexed under some span.
    pub fn alloc_count(&self) -> usize {
        self.allocs.items.len()
    }
}

/// An op inside a span, for the details panel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpInSpan {
    /// Op name.
    pub op_name: String,
    /// Output shape.
    pub shape: String,
    /// Output dtype.
    pub dtype: String,
    /// Duration.
    pub duration_ns: u64,
    /// Output bytes, `None` where the record does not say them (a leaf layer's row).
    pub output_bytes: Option<u64>,
}

/// Everything the details panel shows about one span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanDetails {
    /// Index into the document's spans.
    pub index: u32,
    /// (field, value) pairs: every `span_start`/`span_end` field plus derived ones.
    pub fields: Vec<(&'static str, String)>,
    /// Self time.
    pub self_ns: u64,
    /// Children: (index, label: the module a capture named it by, else its name, duration).
    pub children: Vec<(u32, String, u64)>,
    /// Ops that ran in the span.
    pub ops: Vec<OpInSpan>,
    /// Number of allocations made in the span.
    pub alloc_count: u64,
    /// Bytes allocated in the span.
    pub alloc_bytes: u64,
    /// Allocations in the span and all its descendants.
    pub alloc_count_inclusive: u64,
    /// Bytes allocated in the span and all its descendants.
    pub alloc_bytes_inclusive: u64,
}

/// The details of span `index`, `None` when there is no such span.
pub fn span_details(doc: &TraceDocument, index: &SpanIndex, i: usize) -> Option<SpanDetails> {
    let s = doc.spans.get(i)?;
    let self_ns = doc.tree.self_ns.get(i).copied().unwrap_or(0);
    let mut fields = vec![
        ("name", s.name.to_string()),
        (
            "module",
            s.module
                .as_deref()
                .unwrap_or("— (not named by a capture)")
                .to_string(),
        ),
        ("id", s.id.to_string()),
        (
            "parent_id",
            s.parent_id.as_deref().unwrap_or("—").to_string(),
        ),
        ("path", span_path(doc, i)),
        (
            "span_kind",
            super::super::timeline::palette::kind_name(s.span_kind).into(),
        ),
        (
            "step",
            super::super::timeline::palette::pass_name(s.pass).into(),
        ),
        ("measured", s.measured.to_string()),
        ("start_ns", s.start_ns.to_string()),
        (
            "duration_ns",
            s.duration_ns
                .map_or_else(|| "never closed".into(), |d| d.to_string()),
        ),
        ("self_ns", self_ns.to_string()),
        (
            "depth",
            doc.tree.depth.get(i).copied().unwrap_or(0).to_string(),
        ),
        ("line", s.line.to_string()),
    ];
    if let Some(l) = s.end_line {
        fields.push(("end line", l.to_string()));
    }
    let children = doc
        .tree
        .children(i)
        .iter()
        .map(|&c| {
            // The tree and the index are built from `doc`: their indices are in range.
            let c_span = &doc.spans[c as usize];
            let label = c_span.module.as_deref().unwrap_or(&c_span.name);
            (c, label.to_string(), c_span.duration_or_zero())
        })
        .collect();
    let ops = index
        .ops_of(i)
        .iter()
        .map(|&o| {
            let op = doc.ops.row(o as usize);
            OpInSpan {
                op_name: op.op_name.to_string(),
                shape: shape_text(op.shape),
                dtype: op.dtype.to_string(),
                duration_ns: op.duration_ns,
                output_bytes: op.known_output_bytes(),
            }
        })
        .collect();
    let allocs = index.allocs_of(i);
    let bytes_of = |list: &[u32]| {
        list.iter()
            .map(|&m| doc.memory.row(m as usize).bytes)
            .fold(0, u64::saturating_add)
    };
    // The subtree, walked with an explicit stack (traces can be deep).
    let (mut count_inclusive, mut bytes_inclusive) = (0u64, 0u64);
    let mut stack = vec![i as u32];
    while let Some(s) = stack.pop() {
        let list = index.allocs_of(s as usize);
        count_inclusive += list.len() as u64;
        bytes_inclusive = bytes_inclusive.saturating_add(bytes_of(list));
        stack.extend_from_slice(doc.tree.children(s as usize));
    }
    Some(SpanDetails {
        index: i as u32,
        fields,
        self_ns,
        children,
        ops,
        alloc_count: allocs.len() as u64,
        alloc_bytes: bytes_of(allocs),
        alloc_count_inclusive: count_inclusive,
        alloc_bytes_inclusive: bytes_inclusive,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> TraceDocument {
        TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/train_step.trace6.jsonl"
        ))
    }

    #[test]
    fn top_spans_are_ordered() {
        let d = doc();
        let paths = ModulePaths::new(&d);
        let by_self = span_rows(&d, &paths, SpanOrder::SelfTime, 5);
        assert_eq!(by_self.len(), 5);
        assert!(by_self.windows(2).all(|w| w[0].self_ns >= w[1].self_ns));
        let by_total = span_rows(&d, &paths, SpanOrder::Total, 100);
        assert_eq!(by_total.len(), 25);
        assert_eq!(by_total[0].name, "train_step");
        assert_eq!(by_total[0].duration_ns, 950_000);
        assert!(by_total[1].path.starts_with("train_step/"));
        // No capture named its modules: no row names one.
        assert!(by_total.iter().all(|r| r.module.is_none()));
    }

    #[test]
    fn top_spans_name_the_module_they_ran_in() {
        // A Mistral step whose `linear` spans carry their weights' names; a `matmul` op span
        // (s13) inside layer 1's q_proj (s12).
        let d = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/modules/mistral_names.trace6.jsonl"
        ));
        let rows = span_rows(&d, &ModulePaths::new(&d), SpanOrder::Total, 100);
        let module = |id: &str| {
            let i = d.span_index(id).unwrap() as u32;
            rows.iter().find(|r| r.index == i).unwrap().module.clone()
        };
        let q = Some("model.layers.1.self_attn.q_proj".to_string());
        assert_eq!(module("s12"), q);
        assert_eq!(module("s13"), q);
        assert_eq!(
            module("s10"),
            Some("model.layers.0.mlp.down_proj".to_string())
        );
        assert_eq!(module("s1"), None);
        assert_eq!(module("s23"), None);
    }

    #[test]
    fn details_of_the_root() {
        let d = doc();
        let idx = SpanIndex::of(&d);
        let root = d.span_index("step").unwrap();
        let det = span_details(&d, &idx, root).unwrap();
        assert_eq!(det.fields[0], ("name", "train_step".to_string()));
        assert_eq!(
            det.fields[1],
            ("module", "— (not named by a capture)".to_string())
        );
        assert!(!det.children.is_empty());
        let child_sum: u64 = det.children.iter().map(|c| c.2).sum();
        assert_eq!(det.self_ns, 950_000u64.saturating_sub(child_sum));
        assert!(span_details(&d, &idx, 10_000).is_none());
        // The root's subtree holds every allocation.
        assert_eq!(det.alloc_count_inclusive, 25);
        let all: u64 = d
            .memory
            .iter()
            .filter(|m| m.action == MemoryAction::Alloc)
            .map(|m| m.bytes)
            .sum();
        assert_eq!(det.alloc_bytes_inclusive, all);
        assert!(det.alloc_count <= det.alloc_count_inclusive);
        // Every op and allocation is indexed under some span of this clean fixture.
        assert_eq!(idx.op_count(), 18);
        assert_eq!(idx.alloc_count(), 25);
    }

    #[test]
    fn the_index_lists_each_spans_records_in_order() {
        // Every fixture against a list per span built the plain way.
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures");
        let mut checked = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|x| x != "jsonl") {
                continue;
            }
            let d = TraceDocument::from_bytes(&std::fs::read(&path).unwrap());
            let idx = SpanIndex::of(&d);
            let mut ops = vec![Vec::new(); d.spans.len()];
            let mut allocs = vec![Vec::new(); d.spans.len()];
            for (r, op) in d.ops.iter().enumerate() {
                if let Some(s) = d.spans.iter().position(|s| s.id == op.span_id) {
                    ops[s].push(r as u32);
                }
            }
            for (r, m) in d.memory.iter().enumerate() {
                if m.action == MemoryAction::Alloc {
                    if let Some(s) = d.spans.iter().position(|s| s.id == m.span_id) {
                        allocs[s].push(r as u32);
                    }
                }
            }
            for i in 0..d.spans.len() {
                assert_eq!(idx.ops_of(i), ops[i], "{} span {i}", path.display());
                assert_eq!(idx.allocs_of(i), allocs[i], "{} span {i}", path.display());
            }
            assert_eq!(idx.op_count(), ops.iter().map(Vec::len).sum::<usize>());
            assert_eq!(
                idx.alloc_count(),
                allocs.iter().map(Vec::len).sum::<usize>()
            );
            assert!(idx.ops_of(d.spans.len()).is_empty());
            assert!(idx.allocs_of(usize::MAX).is_empty());
            checked += usize::from(idx.op_count() > 0);
        }
        assert!(checked >= 3, "fixtures with ops: {checked}");
        assert!(SpanIndex::default().ops_of(0).is_empty());
    }

    #[test]
    fn details_list_ops_with_shapes() {
        let d = doc();
        let idx = SpanIndex::of(&d);
        let i = (0..d.spans.len())
            .find(|&i| !idx.ops_of(i).is_empty())
            .unwrap();
        let det = span_details(&d, &idx, i).unwrap();
        assert!(!det.ops.is_empty());
        assert!(det.ops[0].shape.starts_with('['));
    }
}

/// A keyboard move from the selected span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanMove {
    /// To the parent.
    Parent,
    /// To the first child.
    FirstChild,
    /// To the previous sibling (or previous root).
    PrevSibling,
    /// To the next sibling (or next root).
    NextSibling,
}

/// The span reached from `i` by `m`, `None` when there is none. Siblings are ordered by start
/// time (the span tree's order).
pub fn navigate(doc: &TraceDocument, i: u32, m: SpanMove) -> Option<u32> {
    let tree = &doc.tree;
    let parent = tree.parent.get(i as usize).copied().flatten();
    let siblings: &[u32] = match parent {
        Some(p) => tree.children(p as usize),
        None => &tree.roots,
    };
    let pos = siblings.iter().position(|&s| s == i);
    match m {
        SpanMove::Parent => parent,
        SpanMove::FirstChild => tree.children(i as usize).first().copied(),
        SpanMove::PrevSibling => pos
            .and_then(|p| p.checked_sub(1))
            .and_then(|p| siblings.get(p).copied()),
        SpanMove::NextSibling => pos.and_then(|p| siblings.get(p + 1).copied()),
    }
}

#[cfg(test)]
mod nav_tests {
    use super::*;

    #[test]
    fn moves_through_the_tree() {
        let d = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/train_step.trace6.jsonl"
        ));
        let idx = |id: &str| d.span_index(id).unwrap() as u32;
        let root = idx("step");
        assert_eq!(navigate(&d, root, SpanMove::Parent), None);
        assert_eq!(navigate(&d, root, SpanMove::PrevSibling), None);
        assert_eq!(navigate(&d, root, SpanMove::NextSibling), None);
        let first = navigate(&d, root, SpanMove::FirstChild).unwrap();
        assert_eq!(d.spans[first as usize].name, "forward");
        let second = navigate(&d, first, SpanMove::NextSibling).unwrap();
        assert_eq!(d.spans[second as usize].name, "backward");
        assert_eq!(navigate(&d, second, SpanMove::PrevSibling), Some(first));
        assert_eq!(navigate(&d, second, SpanMove::Parent), Some(root));
    }
}
