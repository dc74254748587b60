//! Assembling a trace/6 document from a stream of lines: [`TraceReader`] → [`TraceDocument`].
//!
//! The reader never stops on a bad line. Errors and warnings are exactly those of SCHEMA.md
//! "Assembling a document"; where SCHEMA.md is silent this reader chooses:
//! - "first non-blank line" means the first non-blank line of the file, whatever it holds: if it
//!   is not a meta, a later meta is an error at its own line (and no "no meta" error is added);
//!   with no meta at all, the error is at line 1. The first meta seen is the document's meta;
//!   every further meta is an error and ignored. A wrong `schema` is an error; the meta is kept.
//! - A duplicate `span_start` id is an error; the first span with that id is kept.
//! - `span_end`s are matched after the whole stream is read (an end may precede its start when
//!   threads flush out of order); a second end for an id is an error and ignored.
//! - An unclosed span is a warning and counts with duration 0 in every number.
//! - "more than one measured span" is a warning at each measured span after the first; "no
//!   measured span" is a warning at the meta's line (line 1 without a meta).
//! - Reference warnings for `op`/`tensor`/`memory` are checked against all spans of the file.
//! - A last line without `\n` that is incomplete JSON is a truncation warning and dropped; a
//!   complete one is read normally.
//! - Diagnostics are sorted by line, errors before warnings on the same line.
//! - A UTF-8 byte-order mark at the very start of the file is skipped (as [`crate::format::detect`]
//!   does); one anywhere else is part of its line (a syntax error).
//! - `capture_sources` (capture's extension kind, see [`CaptureSources`]) is kept in
//!   [`TraceDocument::capture_sources`]; each of its `warnings` is a warning at its line
//!   (category `capture`, message `capture: <warning>`); a second such line is a `capture`
//!   warning and ignored.

use alloc::format;
use alloc::vec::Vec;

use crate::format::diagnostics::{
    sort_diagnostics, Category, Diagnostic, DiagnosticCounts, Severity,
};
use crate::format::events::{
    CaptureSources, CompactString, DeviceMemory, Edge, Gradient, Meta, TensorEvent,
};
use crate::format::jsonl::LineSplitter;
use crate::format::memory::MemoryProfile;
use crate::format::records::{Lined, MemoryFacts, Span};
use crate::format::spans::SpanTree;
use crate::format::table::{MemoryTable, OpTable};

mod finish;
mod growth;
mod lines;
mod span_index;

use lines::RefKind;
use span_index::SpanIndex;
pub use span_index::SpanIndexParts;

/// Everything read from one trace/6 file.
#[derive(Debug, Clone, Default)]
pub struct TraceDocument {
    /// The run's meta (the first one in the file), if any.
    pub meta: Option<Lined<Meta>>,
    /// Spans in file order of their `span_start`.
    pub spans: Vec<Span>,
    /// `op` records.
    pub ops: OpTable,
    /// `tensor` records.
    pub tensors: Vec<Lined<TensorEvent>>,
    /// `memory` records in file order.
    pub memory: MemoryTable,
    /// `device_memory` checkpoints.
    pub device_memory: Vec<Lined<DeviceMemory>>,
    /// `gradient` records.
    pub gradients: Vec<Lined<Gradient>>,
    /// `edge` records.
    pub edges: Vec<Lined<Edge>>,
    /// The `capture_sources` line (the first one, when there are several): which capture
    /// sources were on and how many events each produced. `None` for files written before it
    /// existed and for Chrome imports, which then say nothing about what was captured.
    pub capture_sources: Option<Lined<CaptureSources>>,
    /// Parent/child layout, depth and self time of `spans` (self time computed by
    /// [`analysis::spans::self_times`](crate::analysis::spans::self_times) at end of file).
    pub tree: SpanTree,
    /// Memory profile of `memory` (and capacities from `device_memory`), computed by
    /// [`analysis::memory`](crate::analysis::memory) at end of file.
    pub memory_profile: MemoryProfile,
    /// Everything wrong with the file, sorted by line.
    pub diagnostics: Vec<Diagnostic>,
    /// Number of lines with an unknown `kind` (skipped).
    pub skipped_unknown: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// What a Chrome Trace Event JSON file held beyond spans (tracks, instants, counters,
    /// skipped phases); `None` for a trace/6 file.
    pub chrome: Option<alloc::boxed::Box<crate::format::tracks::ChromeImport>>,
    span_index: SpanIndex,
}

impl TraceDocument {
    /// Add the ids of `spans[start..]` to the id → index map (the first span with an id
    /// wins): for code that appends to `spans` in batches and indexes as it goes.
    pub fn index_spans_from(&mut self, start: usize) {
        let new = self.spans.len().saturating_sub(start);
        self.span_index.reserve(&self.spans, new);
        for i in start..self.spans.len() {
            // The first span with an id keeps it.
            let _ = self
                .span_index
                .insert_first(&self.spans, &self.spans[i].id, i as u32);
        }
    }

    /// The id → index map's state ([`SpanIndexParts`]), to hand the document to another
    /// process without hashing every id again there ([`TraceDocument::take_span_index`]).
    pub fn span_index_parts(&self) -> SpanIndexParts<'_> {
        self.span_index.parts()
    }

    /// Take the id → index map another process built over these same spans
    /// ([`TraceDocument::span_index_parts`]), if `parts` is one (see the checks of
    /// `SpanIndex::from_parts`); otherwise index every span here. Whether the parts were taken.
    pub fn take_span_index(&mut self, parts: SpanIndexParts<'_>) -> bool {
        match SpanIndex::from_parts(&self.spans, parts) {
            Some(index) => {
                self.span_index = index;
                true
            }
            None => {
                self.span_index = SpanIndex::default();
                self.index_spans_from(0);
                false
            }
        }
    }

    /// Index of the span with this id.
    pub fn span_index(&self, id: &str) -> Option<usize> {
        self.span_index.get(&self.spans, id).map(|i| i as usize)
    }

    /// The span with this id.
    pub fn span(&self, id: &str) -> Option<&Span> {
        self.span_index(id).map(|i| &self.spans[i])
    }

    /// Error and warning counts.
    pub fn diagnostic_counts(&self) -> DiagnosticCounts {
        DiagnosticCounts::of(&self.diagnostics)
    }

    /// True when some diagnostic is an error: the trace is untrusted.
    pub fn is_untrusted(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error)
    }
}

impl TraceDocument {
    /// [`TraceDocument::assemble`] but for the span tree's self time, which
    /// [`analysis::finish`](crate::analysis::finish) computes.
    pub(crate) fn assemble_layout(
        meta: Lined<Meta>,
        spans: Vec<Span>,
        mut diagnostics: Vec<Diagnostic>,
    ) -> Self {
        let mut doc = TraceDocument {
            spans,
            ..TraceDocument::default()
        };
        doc.index_spans_from(0);
        let measured: Vec<&Span> = doc.spans.iter().filter(|s| s.measured).collect();
        if measured.is_empty() {
            diagnostics.push(Diagnostic::warning(
                meta.line,
                Category::Measured,
                "no measured span: total_ns is 0",
            ));
        }
        if let Some((first, rest)) = measured.split_first() {
            for s in rest {
                diagnostics.push(Diagnostic::warning(
                    s.line,
                    Category::Measured,
                    format!("more than one measured span (the first starts at line {}); total_ns adds them all", first.line),
                ));
            }
        }
        let (tree, tree_diags) = {
            let resolve = doc.span_index.resolver(&doc.spans);
            SpanTree::layout(&doc.spans, |_, id| resolve(id))
        };
        doc.tree = tree;
        diagnostics.extend(tree_diags);
        doc.meta = Some(meta);
        sort_diagnostics(&mut diagnostics);
        doc.diagnostics = diagnostics;
        doc
    }
}

/// What a [`TraceReader`] keeps of the records it reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Keep {
    /// Every record: the [`TraceDocument`].
    #[default]
    Everything,
    /// What the summary and the cross-record checks need (see [`crate::format::digest`]):
    /// `op`, `tensor`, `gradient` and `edge` records are counted and dropped once their span
    /// reference is checked, and `memory` records are kept as `MemoryFacts` (the fields the
    /// memory profile's numbers read) beside the document, which holds none.
    Summary,
}

/// Records a [`Keep::Summary`] reader counted instead of keeping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Dropped {
    pub(crate) ops: u64,
    pub(crate) tensors: u64,
    pub(crate) gradients: u64,
    pub(crate) edges: u64,
}

/// Streaming trace/6 reader: push chunks of any size, then [`finish`](TraceReader::finish)
/// (or [`end_input`](TraceReader::end_input), then [`TraceRead::finish`], to have the record
/// tables before the end-of-file work).
///
/// Cross-record checks run as early as they can: a `span_end` or a record's `span_id` that
/// names a span already read is settled on its line; only those naming a span not (yet) read
/// wait for `finish`, which settles them in file order, so the diagnostics are those of
/// checking everything at the end.
#[derive(Debug, Default)]
pub struct TraceReader {
    splitter: LineSplitter,
    doc: TraceDocument,
    keep: Keep,
    dropped: Dropped,
    first_line: Option<u64>,
    first_measured_line: Option<u64>,
    /// `span_end`s not settled on their line: (id, duration, line), in file order.
    pending_ends: Vec<(CompactString, u64, u64)>,
    /// Ids of `pending_ends`: a later end of one of them waits too, so that the first end in
    /// file order is the one that closes the span.
    pending_end_ids: hashbrown::HashSet<CompactString>,
    /// Records whose `span_id` named no span read so far: (kind, id, line), in file order.
    pending_refs: Vec<(RefKind, CompactString, u64)>,
    /// Index of the span the last checked record named (consecutive records usually name the
    /// same span, which then needs no hash lookup).
    last_ref: Option<u32>,
    /// Indices of spans started and not yet seen ending, innermost last (at most
    /// [`OPEN_DEPTH`]): a `span_end` nearly always closes the innermost open span, and a record
    /// nearly always names it, which this finds without hashing the id or touching the index.
    /// Only a cache: an entry may be stale (its span closed out of order), and ids are unique
    /// among spans, so a match is the span the index would return.
    open: Vec<u32>,
    /// Each span's parent when it was the innermost open span at the span's start (nearly
    /// always), found then with one comparison; `None` for the span tree to look up.
    parents: Vec<Option<u32>>,
    /// The `memory` records of a [`Keep::Summary`] reader (a [`Keep::Everything`] reader keeps
    /// them in the document).
    memory_facts: Vec<MemoryFacts>,
    /// The file's size in bytes, when the caller knows it (0: unknown).
    size_hint: u64,
    /// Bytes of the lines handled so far, newlines included.
    consumed: u64,
}

impl TraceReader {
    /// A reader at the start of a file.
    pub fn new() -> Self {
        Self::default()
    }

    /// A reader at the start of a file of `total_bytes` bytes. The size only guides how the
    /// record lists grow (see `make_room`); a wrong one costs time, never correctness.
    pub fn with_size_hint(total_bytes: u64) -> Self {
        TraceReader {
            size_hint: total_bytes,
            ..Self::default()
        }
    }

    /// A reader that keeps only what `keep` says (see [`crate::format::digest`]).
    pub(crate) fn keeping(keep: Keep, total_bytes: u64) -> Self {
        TraceReader {
            keep,
            size_hint: total_bytes,
            ..Self::default()
        }
    }

    /// Bytes pushed so far.
    pub fn bytes_read(&self) -> u64 {
        self.splitter.bytes_seen()
    }

    /// Lines completed so far, blank ones included (for progress reporting).
    pub fn lines_read(&self) -> u64 {
        self.splitter.lines_seen()
    }

    /// Feed the next chunk of the file.
    pub fn push(&mut self, chunk: &[u8]) {
        let mut splitter = core::mem::take(&mut self.splitter);
        splitter.push(chunk, |line| self.line(line));
        self.splitter = splitter;
    }
}

/// A trace/6 file read to its last line ([`TraceReader::end_input`]): its record tables are
/// final ([`records`](TraceRead::records)), its cross-record checks, span tree and numbers are
/// still to come ([`finish`](TraceRead::finish)). A caller can hand the records on (the
/// viewer's worker sends them to the page) while the rest is worked out.
#[derive(Debug)]
pub struct TraceRead {
    pub(super) reader: TraceReader,
}

impl TraceRead {
    /// What the document will hold unchanged: the head and the record tables.
    pub fn records(&self) -> TraceRecords<'_> {
        self.reader.doc.records()
    }
}

/// The parts of a trace/6 document that are final once its last line is read
/// ([`TraceRead::records`]; [`TraceDocument::records`] of a finished one): the head (meta,
/// `capture_sources`, the counts of lines skipped and bytes read) and the record tables.
/// Everything else waits for the end of file: the spans (a `span_end` may come before its
/// `span_start`), the tree, the memory profile and the diagnostics.
#[derive(Debug, Clone, Copy)]
pub struct TraceRecords<'a> {
    /// [`TraceDocument::meta`].
    pub meta: Option<&'a Lined<Meta>>,
    /// [`TraceDocument::capture_sources`].
    pub capture_sources: Option<&'a Lined<CaptureSources>>,
    /// [`TraceDocument::skipped_unknown`].
    pub skipped_unknown: u64,
    /// [`TraceDocument::bytes_read`].
    pub bytes_read: u64,
    /// [`TraceDocument::ops`].
    pub ops: &'a OpTable,
    /// [`TraceDocument::tensors`].
    pub tensors: &'a [Lined<TensorEvent>],
    /// [`TraceDocument::memory`].
    pub memory: &'a MemoryTable,
    /// [`TraceDocument::device_memory`].
    pub device_memory: &'a [Lined<DeviceMemory>],
    /// [`TraceDocument::gradients`].
    pub gradients: &'a [Lined<Gradient>],
    /// [`TraceDocument::edges`].
    pub edges: &'a [Lined<Edge>],
}

impl TraceDocument {
    /// The head and the record tables, as [`TraceRead::records`] gave them before the end of
    /// file.
    pub fn records(&self) -> TraceRecords<'_> {
        TraceRecords {
            meta: self.meta.as_ref(),
            capture_sources: self.capture_sources.as_ref(),
            skipped_unknown: self.skipped_unknown,
            bytes_read: self.bytes_read,
            ops: &self.ops,
            tensors: &self.tensors,
            memory: &self.memory,
            device_memory: &self.device_memory,
            gradients: &self.gradients,
            edges: &self.edges,
        }
    }
}

/// What a [`TraceReader`] read by the end of its file, before
/// [`analysis::finish`](crate::analysis::finish) computes the numbers a document carries (self
/// time, the memory profile) and sorts the diagnostics.
#[derive(Debug)]
pub(crate) struct ReadOut {
    /// The document: every check done, the span tree laid out; diagnostics not yet sorted.
    pub(crate) doc: TraceDocument,
    /// What a [`Keep::Summary`] reader counted instead of keeping.
    pub(crate) dropped: Dropped,
    /// The `memory` records of a [`Keep::Summary`] reader; `None` when the document keeps them.
    pub(crate) memory_facts: Option<Vec<MemoryFacts>>,
}

#[cfg(test)]
mod tests {
    use super::lines::OPEN_DEPTH;
    use super::*;
    use crate::analysis::spans::span_path;
    use crate::format::events::TensorCategory;
    use crate::test_lines::{end, four_spans, read, start, META};
    use alloc::string::{String, ToString};
    use alloc::vec;

    fn mem(
        ts: u64,
        tensor: &str,
        device: &str,
        bytes: u64,
        action: &str,
        category: &str,
    ) -> String {
        format!(
            r#"{{"kind":"memory","timestamp_ns":{ts},"tensor_id":"{tensor}","span_id":"root","device":"{device}","bytes":{bytes},"action":"{action}","dtype":"f32","category":"{category}"}}"#
        )
    }

    fn lines_of(doc: &TraceDocument) -> Vec<(u64, Severity, Category)> {
        doc.diagnostics
            .iter()
            .map(|d| (d.line, d.severity, d.category))
            .collect()
    }

    /// A document takes the id index another built over the same spans, and indexes its
    /// spans itself when handed one of other spans.
    #[test]
    fn the_span_index_is_taken_when_it_fits_and_rebuilt_when_not() {
        let doc = four_spans();
        let mut other = TraceDocument {
            spans: doc.spans.clone(),
            ..TraceDocument::default()
        };
        assert!(other.take_span_index(doc.span_index_parts()));
        assert_eq!(other.span_index_parts(), doc.span_index_parts());
        // Another document's index (its spans' ids are others): refused, then rebuilt here.
        let stranger = read(&[META.to_string(), start("x", None, 0, true), end("x", 5)]);
        assert!(!other.take_span_index(stranger.span_index_parts()));
        for (i, s) in doc.spans.iter().enumerate() {
            assert_eq!(other.span_index(&s.id), Some(i));
        }
        assert_eq!(other.span_index("x"), None);
    }

    /// Ends found through the reader's cache of open spans and through the index agree:
    /// nesting deeper than the cache, spans of two threads ending out of order, an end repeated
    /// after its span left the cache, records naming outer spans.
    #[test]
    fn every_end_closes_its_own_span_however_spans_nest() {
        let deep = OPEN_DEPTH as u64 + 40;
        let mut lines = vec![META.to_string(), start("root", None, 0, true)];
        for i in 0..deep {
            let parent = if i == 0 {
                "root".into()
            } else {
                format!("d{}", i - 1)
            };
            lines.push(start(&format!("d{i}"), Some(&parent), i, false));
        }
        for i in (0..deep).rev() {
            lines.push(end(&format!("d{i}"), 1000 + i));
        }
        // Two threads: a, b started in turn, a ends first (b is innermost then).
        lines.push(start("a", Some("root"), 1, false));
        lines.push(start("b", Some("root"), 2, false));
        lines.push(start("a1", Some("a"), 3, false));
        lines.push(end("a", 50));
        lines.push(mem(4, "t", "cpu", 8, "alloc", "activation").replace("\"root\"", "\"b\""));
        lines.push(end("a1", 51));
        lines.push(end("b", 52));
        lines.push(end("d3", 9)); // closed twice
        lines.push(end("root", 10_000));
        let doc = read(&lines);
        for i in 0..deep {
            let span = doc.span(&format!("d{i}")).unwrap();
            assert_eq!(span.duration_ns, Some(1000 + i), "d{i}");
        }
        let duration = |id: &str| doc.span(id).unwrap().duration_ns;
        assert_eq!(
            [
                duration("a"),
                duration("b"),
                duration("a1"),
                duration("root")
            ],
            [Some(50), Some(52), Some(51), Some(10_000)]
        );
        // Parents, whether they were the innermost open span at the child's start (the d
        // chain, `a`) or not (`a1`, started while `b` was innermost): the tree's parent is the
        // span with the parent id either way.
        let index = |id: &str| doc.span_index(id).map(|i| i as u32);
        let parent = |id: &str| doc.tree.parent[doc.span_index(id).unwrap()];
        for i in 1..deep {
            assert_eq!(
                parent(&format!("d{i}")),
                index(&format!("d{}", i - 1)),
                "d{i}"
            );
        }
        assert_eq!(parent("d0"), index("root"));
        assert_eq!(parent("a1"), index("a"));
        assert_eq!(parent("b"), index("root"));
        let closed_twice = 2 + 2 * deep as usize + 7 + 1;
        assert_eq!(
            lines_of(&doc),
            vec![(closed_twice as u64, Severity::Error, Category::Duplicate)],
            "{:?}",
            doc.diagnostics
        );
    }

    /// A size hint only changes how the record lists grow: right, far too small, far too large
    /// or absent, the document read is the same, with every record and diagnostic in place.
    #[test]
    fn size_hint_never_changes_what_is_read() {
        // ~3 MiB, so the projection (which waits for 1 MiB and 1/64 of the file) does run,
        // with memory records clustered at the start as parameter loads are.
        let mut lines = vec![META.to_string(), start("root", None, 0, true)];
        for i in 0..2000 {
            lines.push(mem(i, &format!("p{i}"), "cpu", 4, "alloc", "parameter"));
        }
        for i in 0..12_000u64 {
            let id = format!("c{i}");
            lines.push(start(&id, Some("root"), i * 10, false));
            lines.push(format!(
                r#"{{"kind":"op","span_id":"{id}","op_name":"matmul","inputs":["a","b"],"output":"o{i}","shape":[2,2],"dtype":"f32","device":"cpu","duration_ns":3,"timestamp_ns":{ts},"input_storage_bytes":32}}"#,
                ts = i * 10 + 1
            ));
            lines.push(end(&id, 5));
        }
        lines.push(end("root", 200_000));
        lines.push(end("nowhere", 1));
        let mut text = lines.join("\n");
        text.push('\n');
        let bytes = text.as_bytes();
        assert!(bytes.len() > 3 << 20);
        let read = |hint: u64| {
            let mut r = TraceReader::with_size_hint(hint);
            for chunk in bytes.chunks(64 << 10) {
                r.push(chunk);
            }
            r.finish()
        };
        let plain = TraceDocument::from_bytes(bytes);
        assert_eq!(plain.ops.len(), 12_000);
        assert_eq!(plain.spans.len(), 12_001);
        assert_eq!(plain.memory.len(), 2000);
        assert_eq!(lines_of(&plain).len(), 1, "{:?}", plain.diagnostics);
        let n = bytes.len() as u64;
        for hint in [n, n / 10, n * 10, 1] {
            let doc = read(hint);
            assert_eq!(doc.spans, plain.spans, "hint {hint}");
            assert_eq!(doc.ops, plain.ops, "hint {hint}");
            assert_eq!(doc.memory, plain.memory, "hint {hint}");
            assert_eq!(lines_of(&doc), lines_of(&plain), "hint {hint}");
            assert_eq!(doc.summary(), plain.summary(), "hint {hint}");
            assert_eq!(doc.span_index("c11999"), Some(12_000));
        }
        // An exact hint reserves once the projection starts: no list ends up with much more
        // room than the 1/16 margin over what it holds.
        let exact = read(n);
        assert!(exact.ops.capacity() <= exact.ops.len() + exact.ops.len() / 8 + 16);
    }

    /// The tree the reader lays out: depth, roots and preorder (self times and paths are
    /// `analysis::spans`' tests).
    #[test]
    fn tree_and_depth_by_hand() {
        let doc = four_spans();
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        let s = doc.summary();
        assert_eq!(s.total_ns, 100);
        assert_eq!((s.span_count, s.root_span_count, s.max_depth), (4, 1, 2));
        let pre: Vec<&str> = doc
            .tree
            .preorder()
            .iter()
            .map(|&i| doc.spans[i as usize].id.as_str())
            .collect();
        assert_eq!(pre, ["root", "a", "b", "c"]);
    }

    #[test]
    fn hundred_thousand_deep_nesting_needs_no_stack() {
        const N: u64 = 100_000;
        let mut text = String::from(META);
        text.push('\n');
        text.push_str(&start("0", None, 0, true));
        text.push('\n');
        for i in 1..N {
            text.push_str(&start(&i.to_string(), Some(&(i - 1).to_string()), i, false));
            text.push('\n');
        }
        for i in (0..N).rev() {
            // Span i lasts 10 × (N − i) ns, so every span has 10 ns of self time.
            text.push_str(&end(&i.to_string(), 10 * (N - i)));
            text.push('\n');
        }
        let doc = TraceDocument::from_bytes(text.as_bytes());
        assert!(doc.diagnostics.is_empty());
        let s = doc.summary();
        assert_eq!(s.max_depth, N - 1);
        assert_eq!(s.total_ns, 10 * N);
        assert!(doc.tree.self_ns.iter().all(|&x| x == 10));
        assert_eq!(doc.tree.preorder().len() as u64, N);
        assert_eq!(
            span_path(&doc, N as usize - 1).matches('/').count() as u64,
            N - 1
        );
    }

    #[test]
    fn cycles_and_dangling_parents_are_errors_and_laid_out_as_roots() {
        let doc = read(&[
            META.to_string(),                    // 1
            start("m", None, 0, true),           // 2
            start("a", Some("b"), 1, false),     // 3
            start("b", Some("a"), 2, false),     // 4
            start("c", Some("a"), 3, false),     // 5
            start("d", Some("ghost"), 4, false), // 6
            end("m", 50),
            end("a", 20),
            end("b", 5),
            end("c", 4),
            end("d", 1),
        ]);
        assert_eq!(
            lines_of(&doc),
            vec![
                (3, Severity::Error, Category::Cycle),
                (6, Severity::Error, Category::Reference)
            ]
        );
        let depth = |id: &str| doc.tree.depth[doc.span_index(id).unwrap()];
        assert_eq!(
            (depth("a"), depth("b"), depth("c"), depth("d")),
            (0, 1, 1, 0)
        );
        let s = doc.summary();
        // Only `m` has no parent_id; `a` and `d` are laid out as roots but keep their parent_id.
        assert_eq!(s.root_span_count, 1);
        assert_eq!(s.max_depth, 1);
        assert_eq!(doc.tree.self_ns[doc.span_index("a").unwrap()], 20 - 5 - 4);
    }

    #[test]
    fn self_parent_is_a_cycle() {
        let doc = read(&[
            META.to_string(),
            start("a", Some("a"), 0, true),
            end("a", 1),
        ]);
        assert_eq!(lines_of(&doc), vec![(2, Severity::Error, Category::Cycle)]);
    }

    #[test]
    fn span_end_rules() {
        let doc = read(&[
            META.to_string(),             // 1
            end("late", 7),               // 2: end before its start is fine
            start("late", None, 0, true), // 3
            start("x", None, 0, false),   // 4: never closed
            start("x", None, 5, false),   // 5: duplicate id
            end("late", 9),               // 6: closed twice
            end("nobody", 1),             // 7: unknown id
        ]);
        assert_eq!(
            lines_of(&doc),
            vec![
                (4, Severity::Warning, Category::Unclosed),
                (5, Severity::Error, Category::Duplicate),
                (6, Severity::Error, Category::Duplicate),
                (7, Severity::Error, Category::Reference),
            ]
        );
        assert_eq!(doc.span("late").unwrap().duration_ns, Some(7));
        assert_eq!(doc.summary().total_ns, 7);
        assert_eq!(doc.summary().span_count, 2);
    }

    #[test]
    fn the_first_span_end_in_file_order_closes_a_span() {
        // `x`'s first end comes before its start (settled at the end of the file), its second
        // after it: the first still wins. `y`'s ends both follow its start (settled on their
        // lines). Both second ends are errors naming the first end's line.
        let doc = read(&[
            META.to_string(),           // 1
            end("x", 7),                // 2
            start("x", None, 0, true),  // 3
            end("x", 9),                // 4
            start("y", None, 1, false), // 5
            end("y", 2),                // 6
            end("y", 3),                // 7
            end("x", 11),               // 8
        ]);
        let dup = |line: u64| {
            doc.diagnostics
                .iter()
                .find(|d| d.line == line)
                .map(|d| (d.category, d.message.clone()))
        };
        assert_eq!(doc.diagnostics.len(), 3, "{:?}", doc.diagnostics);
        assert_eq!(
            dup(4),
            Some((
                Category::Duplicate,
                "span `x` is closed twice (first span_end at line 2); this one is ignored".into()
            ))
        );
        assert_eq!(
            dup(7),
            Some((
                Category::Duplicate,
                "span `y` is closed twice (first span_end at line 6); this one is ignored".into()
            ))
        );
        assert_eq!(
            dup(8),
            Some((
                Category::Duplicate,
                "span `x` is closed twice (first span_end at line 2); this one is ignored".into()
            ))
        );
        assert_eq!(doc.span("x").unwrap().duration_ns, Some(7));
        assert_eq!(doc.span("x").unwrap().end_line, Some(2));
        assert_eq!(doc.span("y").unwrap().duration_ns, Some(2));
    }

    #[test]
    fn a_record_may_name_a_span_that_starts_later() {
        let op = |span: &str| {
            format!(
                r#"{{"kind":"op","span_id":"{span}","op_name":"add","inputs":[],"shape":[],"dtype":"f32","device":"cpu","duration_ns":1,"timestamp_ns":0,"input_storage_bytes":0}}"#
            )
        };
        let doc = read(&[
            META.to_string(),             // 1
            op("late"),                   // 2: its span starts at line 4
            op("ghost"),                  // 3: no such span
            start("late", None, 0, true), // 4
            op("late"),                   // 5
            op("ghost"),                  // 6
            end("late", 5),               // 7
        ]);
        assert_eq!(
            lines_of(&doc),
            vec![
                (3, Severity::Warning, Category::Reference),
                (6, Severity::Warning, Category::Reference)
            ]
        );
        assert_eq!(
            doc.diagnostics[0].message,
            "op names span `ghost`, which is no span"
        );
    }

    #[test]
    fn meta_rules() {
        let other = META.replace("trace/6", "trace/5");
        let doc = read(&[
            start("s", None, 0, true),
            other.clone(),
            META.to_string(),
            end("s", 1),
        ]);
        assert_eq!(
            lines_of(&doc),
            vec![
                (2, Severity::Error, Category::Meta),
                (2, Severity::Error, Category::Meta),
                (3, Severity::Error, Category::Meta)
            ]
        );
        assert_eq!(doc.meta.as_ref().unwrap().line, 2);
        let doc = read(&[start("s", None, 0, true), end("s", 1)]);
        assert_eq!(lines_of(&doc), vec![(1, Severity::Error, Category::Meta)]);
        let doc = read(&[META.to_string()]);
        assert_eq!(
            lines_of(&doc),
            vec![(1, Severity::Warning, Category::Measured)]
        );
        let doc = read(&[
            META.to_string(),
            start("a", None, 0, true),
            start("b", None, 0, true),
            end("a", 2),
            end("b", 3),
        ]);
        assert_eq!(
            lines_of(&doc),
            vec![(3, Severity::Warning, Category::Measured)]
        );
        assert_eq!(doc.summary().total_ns, 5);
    }

    #[test]
    fn bad_lines_are_reported_and_the_rest_kept() {
        let text = format!(
            "{META}\n\n{{oops\n{}\r\n{{\"kind\":\"kernel\"}}\n{}\n{{\"kind\":\"span_start\",\"id\":",
            start("s", None, 0, true),
            end("s", 3)
        );
        let doc = TraceDocument::from_bytes(text.as_bytes());
        assert_eq!(
            lines_of(&doc),
            vec![
                (3, Severity::Error, Category::Syntax),
                (5, Severity::Warning, Category::UnknownKind),
                (7, Severity::Warning, Category::Truncated),
            ]
        );
        assert_eq!(doc.summary().total_ns, 3);
        assert_eq!(doc.skipped_unknown, 1);
    }

    #[test]
    fn a_byte_order_mark_is_skipped_only_at_the_start() {
        let text = format!(
            "\u{feff}{META}\n{}\n{}\n",
            start("s", None, 0, true),
            end("s", 3)
        );
        assert!(TraceDocument::from_bytes(text.as_bytes())
            .diagnostics
            .is_empty());
        let text = format!(
            "\u{feff}\n{META}\n{}\n{}\n",
            start("s", None, 0, true),
            end("s", 3)
        );
        assert!(TraceDocument::from_bytes(text.as_bytes())
            .diagnostics
            .is_empty());
        let text = format!(
            "{META}\n{}\n\u{feff}{}\n",
            start("s", None, 0, true),
            end("s", 3)
        );
        let doc = TraceDocument::from_bytes(text.as_bytes());
        assert_eq!(
            lines_of(&doc),
            vec![
                (2, Severity::Warning, Category::Unclosed),
                (3, Severity::Error, Category::Syntax)
            ]
        );
    }

    #[test]
    fn a_non_string_kind_is_a_wrong_type_and_a_repeated_key_a_duplicate() {
        let doc = read(&[
            META.to_string(),
            start("s", None, 0, true),
            r#"{"kind":7}"#.to_string(),
            r#"{"kind":"span_end","id":"s","id":"t","duration_ns":1}"#.to_string(),
            end("s", 1),
        ]);
        assert_eq!(
            lines_of(&doc),
            vec![
                (3, Severity::Error, Category::WrongType),
                (4, Severity::Error, Category::Duplicate)
            ]
        );
    }

    #[test]
    fn chunking_never_changes_the_result() {
        let lines = [
            META.to_string(),
            start("root", None, 0, true),
            mem(5, "t1", "cpu", 100, "alloc", "activation"),
            end("root", 10),
        ];
        let mut text = lines.join("\n");
        text.push('\n');
        let whole = TraceDocument::from_bytes(text.as_bytes());
        for size in 1..17 {
            let mut r = TraceReader::new();
            for chunk in text.as_bytes().chunks(size) {
                r.push(chunk);
            }
            let doc = r.finish();
            assert_eq!(doc.summary(), whole.summary());
            assert_eq!(doc.diagnostics, whole.diagnostics);
            assert_eq!(doc.memory_profile, whole.memory_profile);
        }
    }

    #[test]
    fn memory_profile_by_hand() {
        // cpu: +100 (t1 param) @1, +50 (t2 act) @2 → 150, free t2 @3 → 100, +300 (t3 grad) @4 → 400
        // (peak), free t1 @5 → 300. cuda:0: +1000 @2 → 1000 (device peak), free t9 @6 (never
        // allocated: warning, subtracts its own 10 → 990). Overall peak: cuda:0 1000 at ts 2.
        // A second alloc of t3 on cpu @7 (+20, warning) → 320; free t3 @8 releases the 20 → 300.
        let doc = read(&[
            META.to_string(),                                    // 1
            start("root", None, 0, true),                        // 2
            mem(1, "t1", "cpu", 100, "alloc", "parameter"),      // 3
            mem(2, "t2", "cpu", 50, "alloc", "activation"),      // 4
            mem(3, "t2", "cpu", 50, "free", "activation"),       // 5
            mem(4, "t3", "cpu", 300, "alloc", "gradient"),       // 6
            mem(5, "t1", "cpu", 100, "free", "parameter"),       // 7
            mem(2, "big", "cuda:0", 1000, "alloc", "optimizer"), // 8
            mem(6, "t9", "cuda:0", 10, "free", "other"),         // 9
            mem(7, "t3", "cpu", 20, "alloc", "gradient"),        // 10
            mem(8, "t3", "cpu", 20, "free", "gradient"),         // 11
            end("root", 10),
        ]);
        assert_eq!(
            lines_of(&doc),
            vec![
                (9, Severity::Warning, Category::Memory),
                (10, Severity::Warning, Category::Memory)
            ]
        );
        let p = &doc.memory_profile;
        assert_eq!(p.peak_bytes, 1000);
        assert_eq!(p.peak_device.as_deref(), Some("cuda:0"));
        assert_eq!(p.peak_timestamp_ns, Some(2));
        assert_eq!(p.peak_by_category[TensorCategory::Optimizer.index()], 1000);
        assert_eq!(p.live_at_peak.len(), 1);
        assert_eq!(p.live_at_peak[0].tensor_id, "big");
        let cpu = p.device("cpu").unwrap();
        assert_eq!(
            (cpu.peak_bytes, cpu.peak_timestamp_ns, cpu.final_live_bytes),
            (400, Some(4), 300)
        );
        let cuda = p.device("cuda:0").unwrap();
        assert_eq!((cuda.peak_bytes, cuda.final_live_bytes), (1000, 990));
        assert_eq!((p.alloc_count, p.free_count), (5, 4));
        assert_eq!(p.samples.len(), 9);
    }

    #[test]
    fn live_set_at_the_peak_and_capacity() {
        let cp = |ts: u64, used: u64, free: u64| {
            format!(
                r#"{{"kind":"device_memory","timestamp_ns":{ts},"device":"cpu","used_bytes":{used},"free_bytes":{free}}}"#
            )
        };
        let doc = read(&[
            META.to_string(),
            start("root", None, 0, true),
            mem(1, "w", "cpu", 64, "alloc", "parameter"),
            mem(2, "x", "cpu", 256, "alloc", "activation"),
            mem(2, "g", "cpu", 64, "alloc", "gradient"),
            mem(3, "x", "cpu", 256, "free", "activation"),
            cp(1, 100, 900),
            cp(2, 600, 500),
            end("root", 10),
        ]);
        let p = &doc.memory_profile;
        assert_eq!(p.peak_bytes, 384);
        assert_eq!(p.peak_timestamp_ns, Some(2));
        let live: Vec<(&str, u64)> = p
            .live_at_peak
            .iter()
            .map(|a| (a.tensor_id.as_str(), a.bytes))
            .collect();
        assert_eq!(live, [("x", 256), ("g", 64), ("w", 64)]);
        assert_eq!(p.peak_by_category, [64, 256, 64, 0, 0]);
        assert_eq!(p.device("cpu").unwrap().capacity_bytes, Some(1100));
    }

    #[test]
    fn capture_sources_are_kept_and_their_warnings_reported() {
        let sources = r#"{"kind":"capture_sources","sources":[{"source":"tracing","on":true,"events":30},{"source":"allocator","on":true,"events":412,"threshold_bytes":1024},{"source":"gradients","on":false}],"events_dropped":0,"warnings":["the captured step saw no tracing spans: install the layer before building the model","second"]}"#;
        let doc = read(&[
            META.to_string(),
            start("root", None, 0, true),
            end("root", 10),
            sources.to_string(),
            r#"{"kind":"capture_sources","sources":[]}"#.to_string(),
        ]);
        let cs = doc.capture_sources.as_ref().unwrap();
        assert_eq!(cs.line, 4);
        assert_eq!(cs.sources.len(), 3);
        assert_eq!(cs.get("allocator").unwrap().threshold_bytes, Some(1024));
        assert_eq!(
            cs.get("gradients").unwrap().events,
            0,
            "events default to 0"
        );
        assert!(cs.is_on("tracing"));
        assert!(!cs.is_on("gradients"));
        assert!(!cs.is_on("graph"), "an absent source is not on");
        // Two warnings at line 4 (one per capture warning), one for the second line at 5.
        assert_eq!(
            lines_of(&doc),
            [
                (4, Severity::Warning, Category::Capture),
                (4, Severity::Warning, Category::Capture),
                (5, Severity::Warning, Category::Capture),
            ]
        );
        assert_eq!(
            doc.diagnostics[0].message,
            "capture: the captured step saw no tracing spans: install the layer before building the model"
        );
        assert_eq!(doc.skipped_unknown, 0);
    }

    #[test]
    fn capture_sources_without_warnings_add_no_diagnostic() {
        let doc = read(&[
            META.to_string(),
            start("root", None, 0, true),
            end("root", 10),
            r#"{"kind":"capture_sources","sources":null,"events_dropped":3,"warnings":[]}"#
                .to_string(),
        ]);
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        let cs = doc.capture_sources.as_ref().unwrap();
        assert!(cs.sources.is_empty());
        assert_eq!(cs.events_dropped, 3);
        // A broken one is an ordinary decode error and keeps nothing.
        let doc = read(&[
            META.to_string(),
            start("root", None, 0, true),
            end("root", 10),
            r#"{"kind":"capture_sources","sources":[{"on":true}]}"#.to_string(),
        ]);
        assert!(doc.capture_sources.is_none());
        assert_eq!(
            lines_of(&doc),
            [(4, Severity::Error, Category::MissingField)]
        );
    }
}
