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
use alloc::string::String;
use alloc::vec::Vec;

use core::cell::Cell;
use core::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

use crate::format::diagnostics::{
    sort_diagnostics, Category, Diagnostic, DiagnosticCounts, Severity,
};
use crate::format::events::{
    decode_line_borrowed, CaptureSources, CompactString, Decoded, DeviceMemory, Edge, Gradient,
    LineError, Meta, Raw, SpanStart, TensorEvent, TraceEvent, TRACE_SCHEMA,
};
use crate::format::jsonl::{Line, LineSplitter};
use crate::format::memory::{Curve, MemoryProfile};
use crate::format::spans::SpanTree;
use crate::format::table::{MemoryTable, OpTable, Room};

use crate::format::records::MemoryFacts;
// Named through here only by `analysis::modules`; the public path is `format::records` (and the
// crate root).
pub(crate) use crate::format::records::{Lined, Span};

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
    /// Parent/child layout, depth and self time of `spans`.
    pub tree: SpanTree,
    /// Memory profile of `memory` (and capacities from `device_memory`).
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

/// Span id → index into `spans`: a hash table of indices only (4 bytes a span rather than a
/// copy of the id beside it), whose lookups compare the id of the span an index points at.
#[derive(Clone, Default)]
struct SpanIndex {
    table: HashTable<u32>,
    hasher: DefaultHashBuilder,
}

impl core::fmt::Debug for SpanIndex {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SpanIndex")
            .field("len", &self.table.len())
            .finish()
    }
}

impl SpanIndex {
    fn hash(&self, id: &str) -> u64 {
        self.hasher.hash_one(id)
    }

    /// The index of the span with this id in `spans` (the spans this index was built over).
    fn get(&self, spans: &[Span], id: &str) -> Option<u32> {
        self.table
            .find(self.hash(id), |&i| spans[i as usize].id == id)
            .copied()
    }

    /// Index `id` as span `index` (the next span of `spans`, or one of them), unless some
    /// span already has this id: then the index of that one.
    fn insert_first(&mut self, spans: &[Span], id: &str, index: u32) -> Result<(), u32> {
        let hash = self.hash(id);
        let hasher = &self.hasher;
        match self.table.entry(
            hash,
            |&i| spans[i as usize].id == id,
            |&i| hasher.hash_one(spans[i as usize].id.as_str()),
        ) {
            hashbrown::hash_table::Entry::Occupied(first) => Err(*first.get()),
            hashbrown::hash_table::Entry::Vacant(slot) => {
                slot.insert(index);
                Ok(())
            }
        }
    }

    fn reserve(&mut self, spans: &[Span], additional: usize) {
        let hasher = &self.hasher;
        self.table.reserve(additional, |&i| {
            hasher.hash_one(spans[i as usize].id.as_str())
        });
    }

    /// [`SpanIndex::get`] for a run of lookups that often repeat an id (consecutive spans
    /// usually share a parent): the last span found is compared before the id is hashed.
    fn resolver<'s>(&'s self, spans: &'s [Span]) -> impl Fn(&str) -> Option<usize> + 's {
        let last = Cell::new(usize::MAX);
        move |id| {
            let hit = last.get();
            if spans.get(hit).is_some_and(|s| s.id == id) {
                return Some(hit);
            }
            let i = self.get(spans, id)? as usize;
            last.set(i);
            Some(i)
        }
    }

    fn len(&self) -> usize {
        self.table.len()
    }

    fn capacity(&self) -> usize {
        self.table.capacity()
    }
}

impl TraceDocument {
    /// Read a whole in-memory file.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        let mut reader = TraceReader::new();
        reader.push(bytes);
        reader.finish()
    }

    /// Make room for `n` more spans (and their ids) before appending them in batches.
    pub fn reserve_spans(&mut self, n: usize) {
        self.spans.reserve(n);
        self.span_index.reserve(&self.spans, n);
    }

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

    /// Span indices sorted by duration, longest first (ties by file order), at most `limit`.
    pub fn slowest_spans(&self, limit: usize) -> Vec<usize> {
        self.top_spans(limit, |i| self.spans[i].duration_or_zero())
    }

    /// Span indices sorted by self time, largest first (ties by file order), at most `limit`.
    pub fn spans_by_self_time(&self, limit: usize) -> Vec<usize> {
        self.top_spans(limit, |i| self.tree.self_ns[i])
    }

    fn top_spans(&self, limit: usize, key: impl Fn(usize) -> u64) -> Vec<usize> {
        // Largest key first, ties by file order: a total order, so selecting the first `limit`
        // and sorting only those gives exactly the head of a full sort, in O(n) rather than
        // O(n log n) (a 1M-span trace's tables ask for 50).
        let by_key = |a: &usize, b: &usize| key(*b).cmp(&key(*a)).then(a.cmp(b));
        let mut order: Vec<usize> = (0..self.spans.len()).collect();
        if limit == 0 {
            return Vec::new();
        }
        if limit < order.len() {
            order.select_nth_unstable_by(limit - 1, by_key);
            order.truncate(limit);
        }
        order.sort_by(by_key);
        order
    }

    /// Edges sorted by duration, longest first (ties by file order), each with the two spans it
    /// joins resolved to indices (`None` when an id names no span).
    pub fn edges_by_duration(&self) -> Vec<ResolvedEdge<'_>> {
        let mut rows: Vec<ResolvedEdge<'_>> = self
            .edges
            .iter()
            .map(|e| ResolvedEdge {
                edge: e,
                from: self.span_index(&e.from_span),
                to: self.span_index(&e.to_span),
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
    pub fn span_path(&self, i: usize) -> String {
        let mut names = Vec::new();
        let mut cur = Some(i);
        while let Some(c) = cur {
            names.push(self.spans[c].name.as_str());
            cur = self
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
}

impl TraceDocument {
    /// A document from already-decoded parts (the Chrome importer, the viewer's per-request
    /// charts of a profile): span index, tree (with its diagnostics), the measured-span
    /// warnings of SCHEMA.md, sorted diagnostics. Span ids must be unique.
    pub fn assemble(meta: Lined<Meta>, spans: Vec<Span>, mut diagnostics: Vec<Diagnostic>) -> Self {
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
            SpanTree::build(&doc.spans, |_, id| resolve(id))
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

/// Which kind of record names a span that may not exist (for the reference warning).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RefKind {
    Op,
    Tensor,
    Memory,
}

impl RefKind {
    fn name(self) -> &'static str {
        match self {
            RefKind::Op => "op",
            RefKind::Tensor => "tensor",
            RefKind::Memory => "memory",
        }
    }
}

/// Streaming trace/6 reader: push chunks of any size, then [`finish`](TraceReader::finish).
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

/// The deepest nesting [`TraceReader`]'s cache of open spans follows; deeper spans are found by
/// hashing their ids.
const OPEN_DEPTH: usize = 256;

/// Make room for one more record in `v`, which holds records of one kind. When the file's
/// size is known and enough of it has been read to judge the mix of kinds, a full `v` grows to
/// what the whole file will need at the rate seen so far (plus 1/16), instead of doubling: a
/// large trace's records are then moved once or not at all, rather than about once per doubling.
/// Before that point, or without a size, `v` doubles as usual.
fn make_room(v: &mut impl Room, consumed: u64, total: u64) {
    if v.len() < v.capacity() {
        return;
    }
    if let Some(extra) = projected_extra(v.len(), consumed, total) {
        v.reserve_exact(extra);
    }
}

/// The same for the span id map.
fn make_room_map(m: &mut SpanIndex, spans: &[Span], consumed: u64, total: u64) {
    if m.len() < m.capacity() {
        return;
    }
    if let Some(extra) = projected_extra(m.len(), consumed, total) {
        m.reserve(spans, extra);
    }
}

/// How many more records of a kind to make room for, `len` of them having been seen in the
/// first `consumed` bytes of a `total`-byte file; `None` to let the collection double. The
/// projection waits for 1/64 of the file (and at least 1 MiB), so a kind that clusters at the
/// start (parameter allocations, say) cannot reserve far too much; it is also capped at one
/// record per 16 bytes of file, below the size of any valid line.
fn projected_extra(len: usize, consumed: u64, total: u64) -> Option<usize> {
    if total <= consumed || consumed < (total / 64).max(1 << 20) {
        return None;
    }
    let projected = (len as u128 + 1) * u128::from(total) / u128::from(consumed);
    let projected = (projected + projected / 16).min(u128::from(total / 16));
    let want = usize::try_from(projected).ok()?;
    Some(want.saturating_sub(len).max(len / 8 + 16))
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

    fn line(&mut self, line: Line<'_>) {
        let Some(bytes) = crate::format::jsonl::without_bom(&line) else {
            return;
        };
        let first = *self.first_line.get_or_insert(line.number);
        let number = line.number;
        self.consumed += line.bytes.len() as u64 + 1;
        let (consumed, total) = (self.consumed, self.size_hint);
        // The splitter's text is the line's bytes unless a byte-order mark was cut off.
        let text = line.text.filter(|t| t.len() == bytes.len());
        let event = match decode_line_borrowed(bytes, text, |raw| {
            self.raw_record(raw, number, consumed, total);
        }) {
            Ok(Decoded::Raw(())) => return,
            Ok(Decoded::Event(event)) => event,
            Err(LineError::UnknownKind(kind)) => {
                self.doc.skipped_unknown += 1;
                self.warn(
                    number,
                    Category::UnknownKind,
                    format!("unknown kind `{kind}`; line skipped"),
                );
                return;
            }
            Err(LineError::Invalid(Category::Truncated, message)) if !line.terminated => {
                self.warn(
                    number,
                    Category::Truncated,
                    format!("truncated last line (the writer stopped mid-record): {message}"),
                );
                return;
            }
            Err(LineError::Invalid(category, message)) => {
                let category = if category == Category::Truncated {
                    Category::Syntax
                } else {
                    category
                };
                self.error(number, category, message);
                return;
            }
        };
        let doc = &mut self.doc;
        match event {
            TraceEvent::Meta(meta) => {
                if let Some(existing) = &doc.meta {
                    let msg = format!(
                        "more than one meta (the first is at line {}); this one is ignored",
                        existing.line
                    );
                    self.error(number, Category::Meta, msg);
                    return;
                }
                if number != first {
                    self.error(
                        number,
                        Category::Meta,
                        format!(
                            "meta must be the first non-blank line (line {first} comes before it)"
                        ),
                    );
                }
                if meta.schema != TRACE_SCHEMA {
                    self.error(
                        number,
                        Category::Meta,
                        format!("schema `{}` is not `{TRACE_SCHEMA}`", meta.schema),
                    );
                }
                self.doc.meta = Some(Lined {
                    line: number,
                    event: meta,
                });
            }
            TraceEvent::SpanStart(s) => self.span_start(s, number, consumed, total),
            TraceEvent::SpanEnd(e) => self.span_end(&e.id, e.duration_ns, number),
            TraceEvent::Op(event) => {
                if self.op(&event.span_id, number, consumed, total) {
                    self.doc.ops.push_event(number, &event);
                }
            }
            TraceEvent::Tensor(event) => {
                self.tensor(&event.span_id.clone(), number, consumed, total, || event)
            }
            TraceEvent::Memory(event) => {
                self.check_ref(RefKind::Memory, &event.span_id, number);
                match self.keep {
                    Keep::Everything => {
                        make_room(&mut self.doc.memory, consumed, total);
                        self.doc.memory.push_event(number, &event);
                    }
                    Keep::Summary => self.keep_memory_facts(consumed, total, || MemoryFacts {
                        line: number,
                        timestamp_ns: event.timestamp_ns,
                        bytes: event.bytes,
                        tensor_id: event.tensor_id,
                        device: event.device,
                        action: event.action,
                        category: event.category,
                    }),
                }
            }
            TraceEvent::DeviceMemory(event) => doc.device_memory.push(Lined::new(number, event)),
            TraceEvent::Gradient(event) => match self.keep {
                Keep::Everything => doc.gradients.push(Lined::new(number, event)),
                Keep::Summary => self.dropped.gradients += 1,
            },
            TraceEvent::Edge(event) => match self.keep {
                Keep::Everything => doc.edges.push(Lined::new(number, event)),
                Keep::Summary => self.dropped.edges += 1,
            },
            TraceEvent::CaptureSources(event) => {
                if let Some(first) = &doc.capture_sources {
                    let msg = format!(
                        "more than one capture_sources line (the first is at line {}); this one is ignored",
                        first.line
                    );
                    self.warn(number, Category::Capture, msg);
                    return;
                }
                for w in &event.warnings {
                    doc.diagnostics.push(Diagnostic::warning(
                        number,
                        Category::Capture,
                        format!("capture: {w}"),
                    ));
                }
                doc.capture_sources = Some(Lined::new(number, event));
            }
        }
    }

    /// A writer-shaped line of a hot kind: the same checks as for its serde-decoded event,
    /// building only the record that is kept.
    #[inline]
    fn raw_record(&mut self, raw: Raw<'_>, number: u64, consumed: u64, total: u64) {
        match raw {
            Raw::SpanStart(s) => self.span_start(s.to_event(), number, consumed, total),
            Raw::SpanEnd { id, duration_ns } => self.span_end(id, duration_ns, number),
            Raw::Op(o) => {
                if self.op(o.span_id, number, consumed, total) {
                    self.doc.ops.push_raw(number, o);
                }
            }
            Raw::Tensor(t) => self.tensor(t.span_id, number, consumed, total, || t.to_event()),
            Raw::Memory(m) => {
                self.check_ref(RefKind::Memory, m.span_id, number);
                match self.keep {
                    Keep::Everything => {
                        make_room(&mut self.doc.memory, consumed, total);
                        self.doc.memory.push_raw(number, m);
                    }
                    Keep::Summary => self.keep_memory_facts(consumed, total, || MemoryFacts {
                        line: number,
                        timestamp_ns: m.timestamp_ns,
                        bytes: m.bytes,
                        tensor_id: m.tensor_id.into(),
                        device: m.device.into(),
                        action: m.action,
                        category: m.category,
                    }),
                }
            }
        }
    }

    fn span_start(&mut self, s: SpanStart, number: u64, consumed: u64, total: u64) {
        let doc = &mut self.doc;
        make_room_map(&mut doc.span_index, &doc.spans, consumed, total);
        make_room(&mut doc.spans, consumed, total);
        let index = doc.spans.len() as u32;
        // One hash of the id: the duplicate check and the insertion share the entry.
        if let Err(first) = doc.span_index.insert_first(&doc.spans, &s.id, index) {
            let msg = format!(
                "duplicate span id `{}` (first started at line {}); this span_start is dropped",
                s.id, doc.spans[first as usize].line
            );
            self.error(number, Category::Duplicate, msg);
            return;
        }
        if s.measured {
            match self.first_measured_line {
                None => self.first_measured_line = Some(number),
                Some(first_measured) => self.warn(
                    number,
                    Category::Measured,
                    format!("more than one measured span (the first starts at line {first_measured}); total_ns adds them all"),
                ),
            }
        }
        let doc = &self.doc;
        let parent = match (&s.parent_id, self.open.last()) {
            (Some(pid), Some(&top)) if doc.spans[top as usize].id == *pid => Some(top),
            _ => None,
        };
        self.parents.push(parent);
        if self.open.len() < OPEN_DEPTH {
            self.open.push(index);
        }
        self.doc.spans.push(Span {
            id: s.id,
            parent_id: s.parent_id,
            name: s.name,
            start_ns: s.start_ns,
            span_kind: s.span_kind,
            measured: s.measured,
            step: s.step,
            module: s.module,
            duration_ns: None,
            line: number,
            end_line: None,
        });
    }

    fn span_end(&mut self, id: &str, duration_ns: u64, number: u64) {
        let doc = &mut self.doc;
        let found = match self.open.last() {
            Some(&i) if doc.spans[i as usize].id == id => {
                self.open.pop();
                Some(i)
            }
            _ => {
                let found = doc.span_index.get(&doc.spans, id);
                // A span that ends while spans it encloses are open: those are not innermost
                // any more (they end out of order, or never).
                if let Some(at) = found.and_then(|i| self.open.iter().rposition(|&o| o == i)) {
                    self.open.truncate(at);
                }
                found
            }
        };
        let settled = match found {
            Some(i) if !self.pending_end_ids.contains(id) => {
                close_span(&mut doc.spans[i as usize], id, duration_ns, number)
            }
            _ => {
                let id = CompactString::from(id);
                self.pending_end_ids.insert(id.clone());
                self.pending_ends.push((id, duration_ns, number));
                None
            }
        };
        if let Some(d) = settled {
            doc.diagnostics.push(d);
        }
    }

    /// The reference check of an `op` record and, when it is kept whole, room for it: whether
    /// to push it.
    fn op(&mut self, span_id: &str, number: u64, consumed: u64, total: u64) -> bool {
        self.check_ref(RefKind::Op, span_id, number);
        match self.keep {
            Keep::Everything => {
                make_room(&mut self.doc.ops, consumed, total);
                true
            }
            Keep::Summary => {
                self.dropped.ops += 1;
                false
            }
        }
    }

    fn tensor(
        &mut self,
        span_id: &str,
        number: u64,
        consumed: u64,
        total: u64,
        build: impl FnOnce() -> TensorEvent,
    ) {
        self.check_ref(RefKind::Tensor, span_id, number);
        match self.keep {
            Keep::Everything => {
                let tensors = &mut self.doc.tensors;
                make_room(tensors, consumed, total);
                tensors.push(Lined::new(number, build()));
            }
            Keep::Summary => self.dropped.tensors += 1,
        }
    }

    /// What a summary read keeps of a `memory` record: what the memory profile's numbers and
    /// warnings read (time, tensor, device, bytes, action and category; the rest only
    /// describes what was live).
    fn keep_memory_facts(
        &mut self,
        consumed: u64,
        total: u64,
        build: impl FnOnce() -> MemoryFacts,
    ) {
        make_room(&mut self.memory_facts, consumed, total);
        self.memory_facts.push(build());
    }

    /// The reference check of an `op`, `tensor` or `memory` record: settled now when its span
    /// has been read, otherwise left for `finish`.
    #[inline]
    fn check_ref(&mut self, kind: RefKind, span_id: &str, line: u64) {
        let doc = &self.doc;
        for last in [self.last_ref, self.open.last().copied()]
            .into_iter()
            .flatten()
        {
            if doc.spans[last as usize].id == span_id {
                return;
            }
        }
        match doc.span_index.get(&doc.spans, span_id) {
            Some(i) => self.last_ref = Some(i),
            None => self
                .pending_refs
                .push((kind, CompactString::from(span_id), line)),
        }
    }

    fn error(&mut self, line: u64, category: Category, message: String) {
        self.doc
            .diagnostics
            .push(Diagnostic::error(line, category, message));
    }

    fn warn(&mut self, line: u64, category: Category, message: String) {
        self.doc
            .diagnostics
            .push(Diagnostic::warning(line, category, message));
    }

    /// End of file: cross-record checks, span tree, memory profile.
    pub fn finish(self) -> TraceDocument {
        self.finish_keeping().0
    }

    /// [`finish`](TraceReader::finish), and what a [`Keep::Summary`] reader counted instead of
    /// keeping.
    pub(crate) fn finish_keeping(mut self) -> (TraceDocument, Dropped) {
        let splitter = core::mem::take(&mut self.splitter);
        let bytes_read = splitter.bytes_seen();
        splitter.finish(|line| self.line(line));
        let TraceReader {
            mut doc,
            keep,
            dropped,
            pending_ends,
            pending_refs,
            memory_facts,
            parents,
            ..
        } = self;
        doc.bytes_read = bytes_read;
        let diags = &mut doc.diagnostics;

        let meta_line = match &doc.meta {
            Some(m) => m.line,
            None => {
                diags.push(Diagnostic::error(
                    1,
                    Category::Meta,
                    format!("no meta line: a trace starts with {{\"kind\":\"meta\",\"schema\":\"{TRACE_SCHEMA}\",...}}"),
                ));
                1
            }
        };

        for (id, duration_ns, line) in pending_ends {
            match doc.span_index.get(&doc.spans, &id) {
                None => diags.push(Diagnostic::error(
                    line,
                    Category::Reference,
                    format!("span_end for unknown span id `{id}`"),
                )),
                Some(i) => {
                    if let Some(d) = close_span(&mut doc.spans[i as usize], &id, duration_ns, line)
                    {
                        diags.push(d);
                    }
                }
            }
        }
        let mut any_measured = false;
        for span in &doc.spans {
            any_measured |= span.measured;
            if span.end_line.is_none() {
                diags.push(Diagnostic::warning(
                    span.line,
                    Category::Unclosed,
                    format!(
                        "span `{}` ({}) is never closed; its duration counts as 0",
                        span.id, span.name
                    ),
                ));
            }
        }
        if !any_measured {
            diags.push(Diagnostic::warning(
                meta_line,
                Category::Measured,
                "no measured span: total_ns is 0",
            ));
        }

        let (index, spans) = (&doc.span_index, &doc.spans);
        let (tree, tree_diags) = {
            let resolve = index.resolver(spans);
            SpanTree::build(spans, |i, id| match parents.get(i) {
                Some(&Some(p)) => Some(p as usize),
                _ => resolve(id),
            })
        };
        doc.tree = tree;
        diags.extend(tree_diags);

        for (kind, span_id, line) in pending_refs {
            if index.get(spans, &span_id).is_none() {
                diags.push(Diagnostic::warning(
                    line,
                    Category::Reference,
                    format!("{} names span `{span_id}`, which is no span", kind.name()),
                ));
            }
        }

        let (profile, memory_diags) = match keep {
            Keep::Everything => MemoryProfile::build(&doc.memory, &doc.device_memory),
            Keep::Summary => {
                MemoryProfile::build_from(&memory_facts[..], &doc.device_memory, Curve::Dropped)
            }
        };
        doc.memory_profile = profile;
        doc.diagnostics.extend(memory_diags);
        sort_diagnostics(&mut doc.diagnostics);
        (doc, dropped)
    }
}

/// Close `span` with the `span_end` read at `line`, or the error for a second end.
fn close_span(span: &mut Span, id: &str, duration_ns: u64, line: u64) -> Option<Diagnostic> {
    match span.end_line {
        Some(first_end) => Some(Diagnostic::error(
            line,
            Category::Duplicate,
            format!("span `{id}` is closed twice (first span_end at line {first_end}); this one is ignored"),
        )),
        None => {
            span.duration_ns = Some(duration_ns);
            span.end_line = Some(line);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::events::TensorCategory;
    use alloc::string::ToString;
    use alloc::vec;

    const META: &str = r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":2,"warmup_steps":1,"device":"cpu","timing_mode":"host","tags":{}}"#;

    fn start(id: &str, parent: Option<&str>, start_ns: u64, measured: bool) -> String {
        let parent = parent
            .map(|p| format!(r#""parent_id":"{p}","#))
            .unwrap_or_default();
        format!(
            r#"{{"kind":"span_start","id":"{id}",{parent}"name":"n{id}","start_ns":{start_ns},"span_kind":"function","measured":{measured}}}"#
        )
    }

    fn end(id: &str, duration_ns: u64) -> String {
        format!(r#"{{"kind":"span_end","id":"{id}","duration_ns":{duration_ns}}}"#)
    }

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

    fn read(lines: &[String]) -> TraceDocument {
        let mut text = lines.join("\n");
        text.push('\n');
        TraceDocument::from_bytes(text.as_bytes())
    }

    fn lines_of(doc: &TraceDocument) -> Vec<(u64, Severity, Category)> {
        doc.diagnostics
            .iter()
            .map(|d| (d.line, d.severity, d.category))
            .collect()
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

    /// The top spans are the head of a full sort by (key descending, file order), whatever
    /// the limit, with ties and a limit past the end.
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
            assert_eq!(doc.slowest_spans(limit), want, "limit {limit}");
        }
    }

    #[test]
    fn self_time_and_depth_by_hand() {
        // root [0,100) measured; a [10,50) under root; b [20,30) under a; c [60,90) under root.
        let doc = read(&[
            META.to_string(),
            start("root", None, 0, true),
            start("a", Some("root"), 10, false),
            start("b", Some("a"), 20, false),
            end("b", 10),
            end("a", 40),
            start("c", Some("root"), 60, false),
            end("c", 30),
            end("root", 100),
        ]);
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        let self_of = |id: &str| doc.tree.self_ns[doc.span_index(id).unwrap()];
        assert_eq!(self_of("root"), 100 - 40 - 30);
        assert_eq!(self_of("a"), 40 - 10);
        assert_eq!(self_of("b"), 10);
        assert_eq!(self_of("c"), 30);
        let s = doc.summary();
        assert_eq!(s.total_ns, 100);
        assert_eq!((s.span_count, s.root_span_count, s.max_depth), (4, 1, 2));
        assert_eq!(doc.span_path(doc.span_index("b").unwrap()), "nroot/na/nb");
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
            doc.span_path(N as usize - 1).matches('/').count() as u64,
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
        let rows = doc.edges_by_duration();
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
