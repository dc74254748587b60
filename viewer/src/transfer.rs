//! Moving a read document from the parsing worker to the page.
//!
//! The worker reads and analyses the file; the page needs the finished [`AnyDocument`]. Web
//! Workers share no memory with the page, so the document crosses as bytes: [`encode`] writes
//! it in a hand-written columnar layout as a stream of chunks of about [`CHUNK_BYTES`], each
//! posted as soon as it is written, and the page's [`Decoder`] rebuilds it a block of rows per
//! [`Decoder::step`], yielding to the browser between steps. So the page decodes one chunk
//! while the worker writes the next, holds one chunk at a time in its memory (never the whole
//! encoding), and no single task on the page grows with the file. No serde and no per-field
//! visitors: a row is read straight from its columns.
//!
//! A chunk (little-endian; tables and columns as in [`wire`]) is the table of the strings it
//! uses first (each distinct string crosses once, numbered in order of first use across the
//! stream), then its body. The bodies, end to end, are:
//! - `CTT3`, the document kind (`0` trace, `1` profile, `2` unsupported);
//! - the kind's head (scalars, the meta, `capture_sources`, an unsupported file's format);
//! - the kind's parts in a fixed order ([`TRACE`], [`PROFILE`], [`UNSUPPORTED`]). A part of
//!   records is its row count, then tables of at most [`BATCH`] rows; the span tree, the
//!   memory profile's head and a Chrome import are one run of tables each. A table has
//!   fixed-width columns (struct of arrays): a string field a `u32` index into the strings
//!   ([`wire::NONE`] for an absent one), except span and tensor ids (the span's own, its
//!   parent's, an op's span, inputs and output, a tensor or memory record's tensor and span),
//!   which cross in place as a column of ends beside a column of bytes: nearly every one is
//!   distinct, so interning them cost a hash-table lookup a row for nothing (at 1 GB, 2.6 of the
//!   encoder's 4.3 s). Optional values have a presence bitmap beside them, lists (shapes,
//!   inputs) a column of ends beside their values.
//!
//! A chunk ends only between tables, so every table lies within one chunk.
//!
//! An inference profile's events (at most a few thousand lines, with free-form JSON
//! attributes) cross as their JSON line, read back by the schema's own profile reader.

use std::collections::TryReserveError;
use std::fmt;

use candle_trace_schema::format::chrome::ChromeImport;
use candle_trace_schema::format::detect::{AnyDocument, Format};
use candle_trace_schema::format::diagnostics::{Category, Diagnostic, Severity};
use candle_trace_schema::format::document::{Lined, Span, TraceDocument};
use candle_trace_schema::format::events::{
    CaptureSource, CaptureSources, CompactString, DeviceMemory, Edge, Gradient, GradientState,
    MemoryAction, Meta, Phase, SpanKind, Step, TensorCategory, TensorEvent, TimingMode,
};
use candle_trace_schema::format::memory::{
    DeviceMemoryProfile, LiveAllocation, MemoryProfile, MemorySample,
};
use candle_trace_schema::format::profile::{ProfileDocument, ProfileRecord};
use candle_trace_schema::format::spans::{SpanTree, SpanTreeParts};
use candle_trace_schema::format::table::{Inputs, MemoryRow, MemoryTable, OpRow, OpTable};
use candle_trace_schema::format::tracks::{
    ChromeForm, CounterSample, Instant, SkippedPhase, Track, TrackId,
};

mod wire;

use wire::{Col, Cols, In, Out, Result, StringPool, Strings, Strs, Table, NONE};

/// Rows per table of a part, decoded in one [`Decoder::step`]: small enough that one step is
/// a short task on the page (a few milliseconds for spans), large enough that stepping costs
/// nothing.
pub const BATCH: usize = 8192;

/// Body bytes after which the worker posts a chunk: a few blocks of spans, so the page starts
/// decoding early and holds little at a time, while a hundred-megabyte file still crosses in
/// about fifty messages.
pub const CHUNK_BYTES: usize = 1 << 20;

/// The first bytes of an encoded document (`3`: the chunked stream, ids in place).
const MAGIC: &[u8; 4] = b"CTT3";

/// Why bytes could not be decoded (a bug or a truncated transfer, never the user's file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferError(String);

impl fmt::Display for TransferError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the document could not be moved from the worker: {}",
            self.0
        )
    }
}

impl std::error::Error for TransferError {}

fn broken(what: impl Into<String>) -> TransferError {
    TransferError(what.into())
}

/// One part of a document, in the order written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Spans,
    Ops,
    Tensors,
    Memory,
    DeviceMemory,
    Gradients,
    Edges,
    Tree,
    MemoryProfile,
    Samples,
    Chrome,
    Records,
    Diagnostics,
}

/// The parts of a trace, in order.
const TRACE: &[Part] = &[
    Part::Spans,
    Part::Ops,
    Part::Tensors,
    Part::Memory,
    Part::DeviceMemory,
    Part::Gradients,
    Part::Edges,
    Part::Tree,
    Part::MemoryProfile,
    Part::Samples,
    Part::Chrome,
    Part::Diagnostics,
];

/// The parts of an inference profile.
const PROFILE: &[Part] = &[Part::Records, Part::Diagnostics];

/// The parts of an unsupported file.
const UNSUPPORTED: &[Part] = &[Part::Diagnostics];

// ---------------------------------------------------------------------------------------------
// Small enums as bytes.

const CATEGORIES: [Category; 15] = [
    Category::Syntax,
    Category::Truncated,
    Category::UnknownKind,
    Category::MissingField,
    Category::WrongType,
    Category::InvalidValue,
    Category::Meta,
    Category::Duplicate,
    Category::Reference,
    Category::Cycle,
    Category::Unclosed,
    Category::Measured,
    Category::Memory,
    Category::Format,
    Category::Capture,
];
const SEVERITIES: [Severity; 2] = [Severity::Warning, Severity::Error];
const ACTIONS: [MemoryAction; 2] = [MemoryAction::Alloc, MemoryAction::Free];
const PHASES: [Phase; 2] = [Phase::Train, Phase::Infer];
const TIMING_MODES: [TimingMode; 2] = [TimingMode::Host, TimingMode::DeviceSynchronized];
const FORMS: [ChromeForm; 2] = [ChromeForm::Array, ChromeForm::Object];
const FORMATS: [Format; 3] = [Format::Trace, Format::Profile, Format::Chrome];

/// The byte of `v`: its place in `all` (every list above names each variant once).
fn code<T: PartialEq>(all: &[T], v: &T) -> u8 {
    all.iter().position(|x| x == v).unwrap_or(0) as u8
}

/// The variant of byte `v`.
fn variant<T: Copy>(all: &[T], v: u8, what: &str) -> Result<T> {
    all.get(usize::from(v))
        .copied()
        .ok_or_else(|| broken(format!("{v} is no {what}")))
}

/// An optional variant: `0` for `None`, else its place + 1.
fn opt_code<T: PartialEq>(all: &[T], v: Option<&T>) -> u8 {
    v.map_or(0, |v| code(all, v) + 1)
}

fn opt_variant<T: Copy>(all: &[T], v: u8, what: &str) -> Result<Option<T>> {
    match v.checked_sub(1) {
        None => Ok(None),
        Some(v) => variant(all, v, what).map(Some),
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding (in the worker).

/// Encode a document as a stream of chunks (see the module docs for the layout), handing each
/// to `emit` as soon as it is complete, so the page can decode one while the next is written.
pub fn encode(doc: &AnyDocument, emit: impl FnMut(Vec<u8>)) {
    encode_in(doc, CHUNK_BYTES, emit)
}

/// [`encode`], cutting a chunk once its body has `chunk_bytes` bytes (tests cut small ones).
pub fn encode_in(doc: &AnyDocument, chunk_bytes: usize, mut emit: impl FnMut(Vec<u8>)) {
    encode_to(doc, chunk_bytes, &mut emit);
}

/// [`encode_in`] through one type of `emit`, so that the encoder is compiled once however
/// many callers it has (a copy of it per caller's closure cost the wasm about 8 KB each).
fn encode_to(doc: &AnyDocument, chunk_bytes: usize, emit: &mut dyn FnMut(Vec<u8>)) {
    // A profile's records cross as their JSON lines, which the string table borrows.
    let lines: Vec<String> = match doc {
        AnyDocument::Profile(p) => p.records.iter().map(|r| r.event.to_json_line()).collect(),
        _ => Vec::new(),
    };
    let records: Vec<(&ProfileRecord, &str)> = match doc {
        AnyDocument::Profile(p) => p
            .records
            .iter()
            .zip(lines.iter().map(String::as_str))
            .collect(),
        _ => Vec::new(),
    };
    let mut e = Enc {
        out: Out::default(),
        s: Strings::default(),
        sent_strings: 0,
        chunk_bytes,
        emit,
    };
    e.out.buf.extend_from_slice(MAGIC);
    match doc {
        AnyDocument::Trace(t) => {
            e.out.u8(0);
            e.trace(t);
        }
        AnyDocument::Profile(p) => {
            e.out.u8(1);
            e.blocks(&records, 4, |s, c, (r, json)| {
                c.u64(0, r.line);
                c.u32(1, s.id(json));
                c.list_u32(2, r.violations.iter().map(|v| s.id(v)));
            });
            e.diagnostics(&p.diagnostics);
        }
        AnyDocument::Unsupported {
            format,
            diagnostics,
        } => {
            e.out.u8(2);
            e.out.u8(opt_code(&FORMATS, format.as_ref()));
            e.diagnostics(diagnostics);
        }
    }
    // The rest, unless the last block ended a chunk already (the first chunk always has a
    // body: the header).
    if !e.out.buf.is_empty() {
        e.cut();
    }
}

/// Encode a document into one list of chunks (tests and tools).
pub fn encode_all(doc: &AnyDocument) -> Vec<Vec<u8>> {
    let mut chunks = Vec::new();
    encode(doc, |c| chunks.push(c));
    chunks
}

/// The bytes and the string table being written, and where the chunks go.
struct Enc<'d, E> {
    /// The body of the chunk being written.
    out: Out,
    s: Strings<'d>,
    /// Strings already sent in earlier chunks.
    sent_strings: usize,
    /// Body bytes after which a chunk is cut (at the end of a block or part).
    chunk_bytes: usize,
    emit: E,
}

impl<'d, E: FnMut(Vec<u8>)> Enc<'d, E> {
    /// The chunk so far: the strings first used in it, then its body.
    fn cut(&mut self) {
        let mut chunk = Out::default();
        chunk.table(self.s.table_from(self.sent_strings));
        self.sent_strings = self.s.len();
        chunk.buf.extend_from_slice(&self.out.buf);
        self.out.buf.clear();
        (self.emit)(chunk.buf);
    }

    /// Cut a chunk if the body is long enough.
    fn maybe_cut(&mut self) {
        if self.out.buf.len() >= self.chunk_bytes {
            self.cut();
        }
    }

    /// A part of fixed-width rows: the row count, then tables of at most [`BATCH`] rows
    /// (`k` columns, filled by `row`), a chunk possibly cut after each.
    fn blocks<T>(
        &mut self,
        rows: &'d [T],
        k: usize,
        row: impl FnMut(&mut Strings<'d>, &mut Cols, &'d T),
    ) {
        self.blocks_of(rows.iter(), k, row);
    }

    /// [`Encoder::blocks`] of rows read one at a time (a table's).
    fn blocks_of<R>(
        &mut self,
        mut rows: impl ExactSizeIterator<Item = R>,
        k: usize,
        mut row: impl FnMut(&mut Strings<'d>, &mut Cols, R),
    ) {
        let mut left = rows.len();
        self.out.u64(left as u64);
        while left > 0 {
            let n = left.min(BATCH);
            let mut c = Cols::new(k, n);
            for x in rows.by_ref().take(n) {
                row(&mut self.s, &mut c, x);
            }
            left -= n;
            self.out.table(c);
            self.maybe_cut();
        }
    }

    fn str(&mut self, v: &'d str) {
        let id = self.s.id(v);
        self.out.u32(id);
    }

    fn opt_str(&mut self, v: Option<&'d str>) {
        let id = self.s.opt(v);
        self.out.u32(id);
    }

    fn trace(&mut self, t: &'d TraceDocument) {
        self.out.u64(t.skipped_unknown);
        self.out.u64(t.bytes_read);
        self.out.bool(t.meta.is_some());
        if let Some(m) = &t.meta {
            self.meta(m);
        }
        self.out.bool(t.capture_sources.is_some());
        if let Some(c) = &t.capture_sources {
            self.capture_sources(c);
        }
        self.spans(&t.spans);
        self.ops(&t.ops);
        self.tensors(&t.tensors);
        self.memory(&t.memory);
        self.device_memory(&t.device_memory);
        self.gradients(&t.gradients);
        self.edges(&t.edges);
        self.tree(&t.tree);
        self.memory_profile(&t.memory_profile);
        self.out.bool(t.chrome.is_some());
        if let Some(c) = &t.chrome {
            self.chrome(c);
        }
        self.maybe_cut();
        self.diagnostics(&t.diagnostics);
    }

    fn meta(&mut self, m: &'d Lined<Meta>) {
        self.out.u64(m.line);
        let m = &m.event;
        for v in [
            &m.schema,
            &m.run_id,
            &m.correlation_id,
            &m.entrypoint,
            &m.timestamp,
            &m.device,
        ] {
            self.str(v);
        }
        self.out.u8(code(&PHASES, &m.phase));
        self.out.u64(m.capture_step);
        self.out.u64(m.warmup_steps);
        self.out.bool(m.measured_region_device_synchronized);
        self.out.u8(code(&TIMING_MODES, &m.timing_mode));
        self.out.u64(m.tags.len() as u64);
        for (k, v) in &m.tags {
            self.str(k);
            self.str(v);
        }
        self.opt_str(m.candle_version.as_deref());
    }

    fn capture_sources(&mut self, c: &'d Lined<CaptureSources>) {
        self.out.u64(c.line);
        self.out.u64(c.sources.len() as u64);
        for s in &c.sources {
            self.str(&s.source);
            self.out.bool(s.on);
            self.out.u64(s.events);
            self.out.opt_u64(s.threshold_bytes);
        }
        self.out.u64(c.events_dropped);
        self.out.u64(c.warnings.len() as u64);
        for w in &c.warnings {
            self.str(w);
        }
    }

    fn spans(&mut self, spans: &'d [Span]) {
        self.blocks(spans, 16, |s, c, x| {
            c.str(0, &x.id);
            c.opt_str(2, x.parent_id.as_deref());
            c.u32(5, s.id(&x.name));
            c.u64(6, x.start_ns);
            c.u8(7, code(&SpanKind::ALL, &x.span_kind));
            c.bit(8, x.measured);
            c.u8(9, opt_code(&Step::ALL, x.step.as_ref()));
            c.opt_u64(10, x.duration_ns);
            c.u64(12, x.line);
            c.opt_u64(13, x.end_line);
            c.u32(15, s.opt(x.module.as_deref()));
        });
    }

    fn ops(&mut self, ops: &'d OpTable) {
        self.blocks_of(ops.iter(), 19, |s, c, x| {
            c.u64(0, x.line);
            c.str(1, x.span_id);
            c.u32(3, s.id(x.op_name));
            c.list_str(4, x.inputs.iter());
            c.opt_str(7, x.output);
            c.list_u64(10, x.shape);
            c.u32(12, s.id(x.dtype));
            c.u32(13, s.id(x.device));
            c.u64(14, x.duration_ns);
            c.u64(15, x.timestamp_ns);
            c.opt_u64(16, x.storage_bytes);
            c.u64(18, x.input_storage_bytes);
        });
    }

    fn tensors(&mut self, tensors: &'d [Lined<TensorEvent>]) {
        self.blocks(tensors, 13, |s, c, x| {
            c.u64(0, x.line);
            let x = &x.event;
            c.str(1, &x.span_id);
            c.str(3, &x.tensor_id);
            c.list_u64(5, &x.shape);
            c.u32(7, s.id(&x.dtype));
            c.u32(8, s.id(&x.device));
            c.bit(9, x.requires_grad);
            c.opt_u64(10, x.storage_bytes);
            c.u8(12, code(&TensorCategory::ALL, &x.category));
        });
    }

    fn memory(&mut self, memory: &'d MemoryTable) {
        self.blocks_of(memory.iter(), 14, |s, c, x| {
            c.u64(0, x.line);
            c.u64(1, x.timestamp_ns);
            c.str(2, x.tensor_id);
            c.str(4, x.span_id);
            c.u32(6, s.opt(x.op_name));
            c.u32(7, s.id(x.device));
            c.u64(8, x.bytes);
            c.u8(9, code(&ACTIONS, &x.action));
            c.list_u64(10, x.shape);
            c.u32(12, s.id(x.dtype));
            c.u8(13, code(&TensorCategory::ALL, &x.category));
        });
    }

    fn device_memory(&mut self, device_memory: &'d [Lined<DeviceMemory>]) {
        self.blocks(device_memory, 7, |s, c, x| {
            c.u64(0, x.line);
            let x = &x.event;
            c.u64(1, x.timestamp_ns);
            c.u32(2, s.id(&x.device));
            c.u64(3, x.used_bytes);
            c.u64(4, x.free_bytes);
            c.opt_u64(5, x.reserved_bytes);
        });
    }

    fn gradients(&mut self, gradients: &'d [Lined<Gradient>]) {
        self.blocks(gradients, 9, |s, c, x| {
            c.u64(0, x.line);
            let x = &x.event;
            c.u32(1, s.id(&x.event_id));
            c.u32(2, s.id(&x.root));
            c.u32(3, s.id(&x.key));
            c.u8(4, code(&GradientState::ALL, &x.state));
            c.bit(5, x.norm.is_some());
            c.f64(6, x.norm.unwrap_or(0.0));
            c.opt_u64(7, x.storage_bytes);
        });
    }

    fn edges(&mut self, edges: &'d [Lined<Edge>]) {
        self.blocks(edges, 4, |s, c, x| {
            c.u64(0, x.line);
            c.u32(1, s.id(&x.event.from_span));
            c.u32(2, s.id(&x.event.to_span));
            c.u64(3, x.event.duration_ns);
        });
    }

    fn tree(&mut self, t: &SpanTree) {
        self.out.u32(t.max_depth);
        let mut c = Cols::new(3, t.parent.len());
        for ((p, d), s) in t.parent.iter().zip(&t.depth).zip(&t.self_ns) {
            c.u32(0, p.unwrap_or(NONE));
            c.u32(1, *d);
            c.u64(2, *s);
        }
        self.out.table(c);
        let (child_start, child_list) = t.child_rows();
        for list in [&t.roots[..], child_start, child_list] {
            let mut c = Cols::new(1, list.len());
            for v in list {
                c.u32(0, *v);
            }
            self.out.table(c);
        }
        self.maybe_cut();
    }

    fn memory_profile(&mut self, m: &'d MemoryProfile) {
        self.out.u64(m.peak_bytes);
        self.out.opt_u64(m.peak_timestamp_ns);
        self.opt_str(m.peak_device.as_deref());
        for v in m.peak_by_category {
            self.out.u64(v);
        }
        self.out.u64(m.alloc_count);
        self.out.u64(m.free_count);
        let s = &mut self.s;
        let mut c = Cols::new(8, m.live_at_peak.len());
        for x in &m.live_at_peak {
            c.u64(0, x.memory_index as u64);
            c.u32(1, s.id(&x.tensor_id));
            c.u64(2, x.bytes);
            c.u8(3, code(&TensorCategory::ALL, &x.category));
            c.u32(4, s.id(&x.span_id));
            c.u32(5, s.opt(x.op_name.as_deref()));
            c.u64(6, x.timestamp_ns);
            c.u64(7, x.line);
        }
        self.out.table(c);
        let mut c = Cols::new(9, m.devices.len());
        for x in &m.devices {
            c.u32(0, s.id(&x.device));
            c.u64(1, x.peak_bytes);
            c.opt_u64(2, x.peak_timestamp_ns);
            c.u64(4, x.final_live_bytes);
            c.opt_u64(5, x.capacity_bytes);
            c.u64(7, x.alloc_count);
            c.u64(8, x.free_count);
        }
        self.out.table(c);
        self.maybe_cut();
        self.blocks(&m.samples, 8, |_, c, x| {
            c.u64(0, x.timestamp_ns);
            c.u32(1, x.device);
            c.u64(2, x.live_bytes);
            for (k, v) in x.by_category.iter().enumerate() {
                c.u64(3 + k, *v);
            }
        });
    }

    fn chrome(&mut self, x: &'d ChromeImport) {
        self.out.u8(code(&FORMS, &x.form));
        self.out.u64(x.element_count);
        self.out.bool(x.closed);
        self.out.i64(x.origin_ns);
        self.out.bool(x.synthetic_root);
        let s = &mut self.s;
        let mut c = Cols::new(8, x.tracks.len());
        for t in &x.tracks {
            for (k, id) in [(0, &t.pid), (3, &t.tid)] {
                match id {
                    TrackId::Int(i) => {
                        c.u8(k, 0);
                        c.i64(k + 1, *i);
                        c.u32(k + 2, NONE);
                    }
                    TrackId::Str(v) => {
                        c.u8(k, 1);
                        c.i64(k + 1, 0);
                        c.u32(k + 2, s.id(v));
                    }
                }
            }
            c.u32(6, s.opt(t.process_name.as_deref()));
            c.u32(7, s.opt(t.thread_name.as_deref()));
        }
        self.out.table(c);
        let mut c = Cols::new(1, x.span_tracks.len());
        for t in &x.span_tracks {
            c.u32(0, t.unwrap_or(NONE));
        }
        self.out.table(c);
        let mut c = Cols::new(5, x.instants.len());
        for i in &x.instants {
            c.u64(0, i.line);
            c.u32(1, s.id(&i.event.name));
            c.u32(2, i.event.track);
            c.u64(3, i.event.timestamp_ns);
            c.u32(4, s.id(&i.event.scope));
        }
        self.out.table(c);
        let mut c = Cols::new(6, x.counters.len());
        for i in &x.counters {
            c.u64(0, i.line);
            c.u32(1, s.id(&i.event.name));
            c.u32(2, s.id(&i.event.series));
            c.u32(3, i.event.track);
            c.u64(4, i.event.timestamp_ns);
            c.f64(5, i.event.value);
        }
        self.out.table(c);
        let mut c = Cols::new(3, x.skipped.len());
        for p in &x.skipped {
            c.u32(0, s.id(&p.ph));
            c.u64(1, p.count);
            c.u64(2, p.first_line);
        }
        self.out.table(c);
    }

    fn diagnostics(&mut self, diagnostics: &'d [Diagnostic]) {
        self.blocks(diagnostics, 4, |s, c, d| {
            c.u64(0, d.line);
            c.u8(1, code(&SEVERITIES, &d.severity));
            c.u8(2, code(&CATEGORIES, &d.category));
            c.u32(3, s.id(&d.message));
        });
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding (on the page).

/// The document being rebuilt.
enum Partial {
    Empty,
    Trace(Box<TraceDocument>),
    Profile(ProfileDocument),
    Unsupported {
        format: Option<Format>,
        diagnostics: Vec<Diagnostic>,
    },
}

/// What [`Decoder::step`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stepped {
    /// Decoded some; call again.
    More,
    /// The current chunk is decoded: [`Decoder::push`] the next.
    NeedChunk,
    /// The document is complete: [`Decoder::finish`].
    Done,
}

/// Rebuilds a document from [`encode`]'s chunks, a bounded step at a time. It holds one
/// chunk (its buffer reused for the next) and the strings received so far, never the whole
/// encoding.
pub struct Decoder {
    /// The current chunk: `buffer[..len]` (the buffer only grows, so a chunk costs no
    /// clearing of it).
    buffer: Vec<u8>,
    len: usize,
    /// The next byte to read in it.
    at: usize,
    /// Bytes of the chunks before it.
    before: usize,
    strings: StringPool,
    doc: Partial,
    /// The head is read.
    started: bool,
    plan: &'static [Part],
    next: usize,
    /// The part being decoded in blocks: its rows in all and those decoded.
    open: Option<(usize, usize)>,
    done: bool,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    /// A decoder waiting for its first chunk.
    pub fn new() -> Self {
        Decoder {
            buffer: Vec::new(),
            len: 0,
            at: 0,
            before: 0,
            strings: StringPool::default(),
            doc: Partial::Empty,
            started: false,
            plan: &[],
            next: 0,
            open: None,
            done: false,
        }
    }

    /// The next chunk, `len` bytes, which `fill` copies into the decoder's buffer (on the page,
    /// straight from the JS array). The chunk before must be decoded to its end.
    pub fn push_with(&mut self, len: usize, fill: impl FnOnce(&mut [u8])) -> Result<()> {
        if self.done {
            return Err(broken("a chunk after the end of the document"));
        }
        if self.at != self.len {
            return Err(broken("a chunk before the one before was decoded"));
        }
        self.before += self.len;
        if self.buffer.len() < len {
            self.buffer.resize(len, 0);
        }
        self.len = len;
        let chunk = &mut self.buffer[..len];
        fill(chunk);
        let mut r = In::new(chunk, 0);
        let t = r.table(2)?;
        self.strings.append(&t, chunk)?;
        self.at = r.at;
        Ok(())
    }

    /// [`Decoder::push_with`] a copy of `chunk`.
    pub fn push(&mut self, chunk: &[u8]) -> Result<()> {
        self.push_with(chunk.len(), |to| to.copy_from_slice(chunk))
    }

    /// Bytes decoded so far.
    pub fn position(&self) -> usize {
        self.before + self.at
    }

    /// Decode the next step (at most one block of [`BATCH`] rows, or one small part).
    pub fn step(&mut self) -> Result<Stepped> {
        if self.done {
            return Ok(Stepped::Done);
        }
        let b = self.buffer.get(..self.len).unwrap_or_default();
        if self.at >= b.len() {
            return Ok(Stepped::NeedChunk);
        }
        if !self.started {
            let mut r = In::new(b, self.at);
            (self.doc, self.plan) = head(&mut r, self.strings.strs())?;
            self.at = r.at;
            self.started = true;
            return Ok(Stepped::More);
        }
        let s = self.strings.strs();
        let Some(&part) = self.plan.get(self.next) else {
            return Err(broken(format!(
                "{} bytes after the last part",
                b.len() - self.at
            )));
        };
        let mut r = In::new(b, self.at);
        if let Some(k) = part.columns() {
            match self.open {
                None => {
                    let total = r.len()?;
                    reserve(&mut self.doc, part, total)?;
                    self.open = Some((total, 0));
                }
                Some((total, done)) => {
                    let t = r.table(k)?;
                    if t.n == 0 || t.n > BATCH || t.n > total - done {
                        return Err(broken(format!("a block of {} rows", t.n)));
                    }
                    block(&mut self.doc, part, &t, b, s)?;
                    self.open = Some((total, done + t.n));
                }
            }
            if let Some((total, done)) = self.open {
                if done == total {
                    self.open = None;
                    self.next += 1;
                }
            }
        } else {
            let Partial::Trace(d) = &mut self.doc else {
                return Err(other_kind());
            };
            match part {
                Part::Tree => tree(d, &mut r, b)?,
                Part::MemoryProfile => memory_profile(&mut d.memory_profile, &mut r, b, s)?,
                _ => {
                    if r.bool()? {
                        d.chrome = Some(Box::new(chrome(&mut r, b, s)?));
                    }
                }
            }
            self.next += 1;
        }
        self.at = r.at;
        if self.next == self.plan.len() {
            if self.at != b.len() {
                return Err(broken(format!(
                    "{} bytes after the last part",
                    b.len() - self.at
                )));
            }
            self.done = true;
            return Ok(Stepped::Done);
        }
        Ok(Stepped::More)
    }

    /// The rebuilt document, once [`step`](Self::step) has returned [`Stepped::Done`].
    pub fn finish(self) -> Result<AnyDocument> {
        if !self.done {
            return Err(broken("the document ended early"));
        }
        Ok(match self.doc {
            Partial::Trace(d) => AnyDocument::Trace(d),
            Partial::Profile(p) => AnyDocument::Profile(p),
            Partial::Unsupported {
                format,
                diagnostics,
            } => AnyDocument::Unsupported {
                format,
                diagnostics,
            },
            Partial::Empty => return Err(broken("no document")),
        })
    }
}

/// Decode all of `chunks` at once (tests and small documents).
pub fn decode<C: AsRef<[u8]>>(chunks: &[C]) -> Result<AnyDocument> {
    let mut d = Decoder::new();
    for c in chunks {
        d.push(c.as_ref())?;
        while d.step()? == Stepped::More {}
    }
    d.finish()
}

fn other_kind() -> TransferError {
    broken("a part of another kind of document")
}

impl Part {
    /// The columns of a part written in blocks of rows, `None` for the others.
    fn columns(self) -> Option<usize> {
        Some(match self {
            Part::Spans => 16,
            Part::Memory => 14,
            Part::Ops => 19,
            Part::Tensors => 13,
            Part::DeviceMemory => 7,
            Part::Gradients => 9,
            Part::Edges | Part::Records | Part::Diagnostics => 4,
            Part::Samples => 8,
            Part::Tree | Part::MemoryProfile | Part::Chrome => return None,
        })
    }
}

/// The header and the kind's head: the document to fill and its parts.
fn head(r: &mut In<'_>, s: Strs<'_>) -> Result<(Partial, &'static [Part])> {
    let magic = [r.u8()?, r.u8()?, r.u8()?, r.u8()?];
    if &magic != MAGIC {
        return Err(broken("not an encoded document"));
    }
    Ok(match r.u8()? {
        0 => (Partial::Trace(Box::new(trace_head(r, s)?)), TRACE),
        1 => (Partial::Profile(ProfileDocument::default()), PROFILE),
        2 => (
            Partial::Unsupported {
                format: opt_variant(&FORMATS, r.u8()?, "format")?,
                diagnostics: Vec::new(),
            },
            UNSUPPORTED,
        ),
        k => return Err(broken(format!("{k} is no document kind"))),
    })
}

/// Room for a part's `total` rows, once, before its first block. The count is not yet
/// checked against any rows, so room that cannot be had is an error here, not an abort.
fn reserve(doc: &mut Partial, part: Part, total: usize) -> Result<()> {
    fn room<T>(v: &mut Vec<T>, total: usize) -> Result<()> {
        had(v.try_reserve_exact(total), total)
    }
    fn had(reserved: std::result::Result<(), TryReserveError>, total: usize) -> Result<()> {
        reserved.map_err(|_| broken(format!("no room for {total} rows")))
    }
    if total > u32::MAX as usize {
        return Err(broken(format!("{total} rows")));
    }
    match (part, doc) {
        (Part::Records, Partial::Profile(p)) => room(&mut p.records, total),
        (Part::Diagnostics, Partial::Profile(p)) => room(&mut p.diagnostics, total),
        (Part::Diagnostics, Partial::Unsupported { diagnostics, .. }) => room(diagnostics, total),
        (part, Partial::Trace(d)) => match part {
            Part::Spans => {
                room(&mut d.spans, total)?;
                // The id index's room too (the spans' room was had: this is smaller).
                d.reserve_spans(total);
                Ok(())
            }
            Part::Ops => had(d.ops.try_reserve_exact(total), total),
            Part::Tensors => room(&mut d.tensors, total),
            Part::Memory => had(d.memory.try_reserve_exact(total), total),
            Part::DeviceMemory => room(&mut d.device_memory, total),
            Part::Gradients => room(&mut d.gradients, total),
            Part::Edges => room(&mut d.edges, total),
            Part::Samples => room(&mut d.memory_profile.samples, total),
            Part::Diagnostics => room(&mut d.diagnostics, total),
            _ => Err(other_kind()),
        },
        _ => Err(other_kind()),
    }
}

/// One block of a part's rows, appended to the document.
fn block(doc: &mut Partial, part: Part, t: &Table, b: &[u8], s: Strs<'_>) -> Result<()> {
    match (part, doc) {
        (Part::Records, Partial::Profile(p)) => records(p, t, b, s),
        (Part::Diagnostics, Partial::Profile(p)) => diagnostics(&mut p.diagnostics, t, b, s),
        (Part::Diagnostics, Partial::Unsupported { diagnostics: d, .. }) => diagnostics(d, t, b, s),
        (part, Partial::Trace(d)) => match part {
            Part::Spans => spans(d, t, b, s),
            Part::Ops => ops(&mut d.ops, t, b, s),
            Part::Tensors => tensors(&mut d.tensors, t, b, s),
            Part::Memory => memory(&mut d.memory, t, b, s),
            Part::DeviceMemory => device_memory(&mut d.device_memory, t, b, s),
            Part::Gradients => gradients(&mut d.gradients, t, b, s),
            Part::Edges => edges(&mut d.edges, t, b, s),
            Part::Samples => samples(&mut d.memory_profile.samples, t, b),
            Part::Diagnostics => diagnostics(&mut d.diagnostics, t, b, s),
            _ => Err(other_kind()),
        },
        _ => Err(other_kind()),
    }
}

fn cs(s: &str) -> CompactString {
    CompactString::new(s)
}

fn trace_head(r: &mut In<'_>, s: Strs<'_>) -> Result<TraceDocument> {
    let mut d = TraceDocument::default();
    d.skipped_unknown = r.u64()?;
    d.bytes_read = r.u64()?;
    if r.bool()? {
        d.meta = Some(meta(r, s)?);
    }
    if r.bool()? {
        d.capture_sources = Some(capture_sources(r, s)?);
    }
    Ok(d)
}

fn string(r: &mut In<'_>, s: Strs<'_>) -> Result<String> {
    Ok(String::from(s.get(r.u32()?)?))
}

fn opt_string(r: &mut In<'_>, s: Strs<'_>) -> Result<Option<String>> {
    Ok(s.opt(r.u32()?)?.map(String::from))
}

fn meta(r: &mut In<'_>, s: Strs<'_>) -> Result<Lined<Meta>> {
    let line = r.u64()?;
    let schema = string(r, s)?;
    let run_id = string(r, s)?;
    let correlation_id = string(r, s)?;
    let entrypoint = string(r, s)?;
    let timestamp = string(r, s)?;
    let device = string(r, s)?;
    let phase = variant(&PHASES, r.u8()?, "phase")?;
    let capture_step = r.u64()?;
    let warmup_steps = r.u64()?;
    let measured_region_device_synchronized = r.bool()?;
    let timing_mode = variant(&TIMING_MODES, r.u8()?, "timing mode")?;
    let mut tags = std::collections::BTreeMap::new();
    for _ in 0..r.len()? {
        let k = string(r, s)?;
        tags.insert(k, string(r, s)?);
    }
    let candle_version = opt_string(r, s)?;
    Ok(Lined::new(
        line,
        Meta {
            schema,
            run_id,
            correlation_id,
            entrypoint,
            phase,
            timestamp,
            capture_step,
            warmup_steps,
            device,
            measured_region_device_synchronized,
            timing_mode,
            tags,
            candle_version,
        },
    ))
}

fn capture_sources(r: &mut In<'_>, s: Strs<'_>) -> Result<Lined<CaptureSources>> {
    let line = r.u64()?;
    let mut c = CaptureSources::default();
    for _ in 0..r.len()? {
        c.sources.push(CaptureSource {
            source: string(r, s)?,
            on: r.bool()?,
            events: r.u64()?,
            threshold_bytes: r.opt_u64()?,
        });
    }
    c.events_dropped = r.u64()?;
    for _ in 0..r.len()? {
        c.warnings.push(string(r, s)?);
    }
    Ok(Lined::new(line, c))
}

fn spans(d: &mut TraceDocument, t: &Table, b: &[u8], s: Strs<'_>) -> Result<()> {
    let id = t.strs(b, 0)?;
    let parent = t.opt_strs(b, 2)?;
    let name = t.col(b, 5, 4)?;
    let start = t.col(b, 6, 8)?;
    let kind = t.col(b, 7, 1)?;
    let measured = t.bits(b, 8)?;
    let step = t.col(b, 9, 1)?;
    let (has_duration, duration) = (t.bits(b, 10)?, t.col(b, 11, 8)?);
    let line = t.col(b, 12, 8)?;
    let (has_end, end_line) = (t.bits(b, 13)?, t.col(b, 14, 8)?);
    let module = t.col(b, 15, 4)?;
    let first = d.spans.len();
    for i in 0..t.n {
        d.spans.push(Span {
            id: cs(id.get(i as u32)?),
            parent_id: parent.get(i)?.map(cs),
            name: cs(s.get(name.u32(i)?)?),
            start_ns: start.u64(i)?,
            span_kind: variant(&SpanKind::ALL, kind.u8(i)?, "span kind")?,
            measured: measured.get(i)?,
            step: opt_variant(&Step::ALL, step.u8(i)?, "step")?,
            module: s.opt(module.u32(i)?)?.map(cs),
            duration_ns: has_duration.opt_u64(&duration, i)?,
            line: line.u64(i)?,
            end_line: has_end.opt_u64(&end_line, i)?,
        });
    }
    // Indexed as they arrive, so no single step indexes every span.
    d.index_spans_from(first);
    Ok(())
}

fn ops(v: &mut OpTable, t: &Table, b: &[u8], s: Strs<'_>) -> Result<()> {
    let line = t.col(b, 0, 8)?;
    let span_id = t.strs(b, 1)?;
    let op_name = t.col(b, 3, 4)?;
    let (inputs, input_ids) = t.str_lists(b, 4)?;
    let output = t.opt_strs(b, 7)?;
    let shape = t.list(b, 10, 8)?;
    let dtype = t.col(b, 12, 4)?;
    let device = t.col(b, 13, 4)?;
    let duration = t.col(b, 14, 8)?;
    let timestamp = t.col(b, 15, 8)?;
    let (has_storage, storage) = (t.bits(b, 16)?, t.col(b, 17, 8)?);
    let input_storage = t.col(b, 18, 8)?;
    // A row's inputs, checked before the row is stored.
    let mut row_inputs: Vec<&str> = Vec::new();
    for i in 0..t.n {
        row_inputs.clear();
        for k in inputs.range(i)? {
            row_inputs.push(input_ids.get(k as u32)?);
        }
        let row = OpRow {
            line: line.u64(i)?,
            span_id: span_id.get(i as u32)?,
            op_name: s.get(op_name.u32(i)?)?,
            inputs: Inputs::NONE,
            output: output.get(i)?,
            shape: &[],
            dtype: s.get(dtype.u32(i)?)?,
            device: s.get(device.u32(i)?)?,
            duration_ns: duration.u64(i)?,
            timestamp_ns: timestamp.u64(i)?,
            storage_bytes: has_storage.opt_u64(&storage, i)?,
            input_storage_bytes: input_storage.u64(i)?,
        };
        v.push_with_lists(row, row_inputs.iter().copied(), shape.u64_iter(i)?);
    }
    Ok(())
}

fn category(c: &Col<'_>, i: usize) -> Result<TensorCategory> {
    variant(&TensorCategory::ALL, c.u8(i)?, "tensor category")
}

fn tensors(v: &mut Vec<Lined<TensorEvent>>, t: &Table, b: &[u8], s: Strs<'_>) -> Result<()> {
    let line = t.col(b, 0, 8)?;
    let span_id = t.strs(b, 1)?;
    let tensor_id = t.strs(b, 3)?;
    let shape = t.list(b, 5, 8)?;
    let dtype = t.col(b, 7, 4)?;
    let device = t.col(b, 8, 4)?;
    let requires_grad = t.bits(b, 9)?;
    let (has_storage, storage) = (t.bits(b, 10)?, t.col(b, 11, 8)?);
    let cat = t.col(b, 12, 1)?;
    for i in 0..t.n {
        let event = TensorEvent {
            span_id: cs(span_id.get(i as u32)?),
            tensor_id: cs(tensor_id.get(i as u32)?),
            shape: shape.u64s(i)?,
            dtype: cs(s.get(dtype.u32(i)?)?),
            device: cs(s.get(device.u32(i)?)?),
            requires_grad: requires_grad.get(i)?,
            storage_bytes: has_storage.opt_u64(&storage, i)?,
            category: category(&cat, i)?,
        };
        v.push(Lined::new(line.u64(i)?, event));
    }
    Ok(())
}

fn memory(v: &mut MemoryTable, t: &Table, b: &[u8], s: Strs<'_>) -> Result<()> {
    let line = t.col(b, 0, 8)?;
    let timestamp = t.col(b, 1, 8)?;
    let tensor_id = t.strs(b, 2)?;
    let span_id = t.strs(b, 4)?;
    let op_name = t.col(b, 6, 4)?;
    let device = t.col(b, 7, 4)?;
    let bytes = t.col(b, 8, 8)?;
    let action = t.col(b, 9, 1)?;
    let shape = t.list(b, 10, 8)?;
    let dtype = t.col(b, 12, 4)?;
    let cat = t.col(b, 13, 1)?;
    for i in 0..t.n {
        let row = MemoryRow {
            line: line.u64(i)?,
            timestamp_ns: timestamp.u64(i)?,
            tensor_id: tensor_id.get(i as u32)?,
            span_id: span_id.get(i as u32)?,
            op_name: s.opt(op_name.u32(i)?)?,
            device: s.get(device.u32(i)?)?,
            bytes: bytes.u64(i)?,
            action: variant(&ACTIONS, action.u8(i)?, "memory action")?,
            shape: &[],
            dtype: s.get(dtype.u32(i)?)?,
            category: category(&cat, i)?,
        };
        v.push_with_dims(row, shape.u64_iter(i)?);
    }
    Ok(())
}

fn device_memory(v: &mut Vec<Lined<DeviceMemory>>, t: &Table, b: &[u8], s: Strs<'_>) -> Result<()> {
    let line = t.col(b, 0, 8)?;
    let timestamp = t.col(b, 1, 8)?;
    let device = t.col(b, 2, 4)?;
    let used = t.col(b, 3, 8)?;
    let free = t.col(b, 4, 8)?;
    let (has_reserved, reserved) = (t.bits(b, 5)?, t.col(b, 6, 8)?);
    for i in 0..t.n {
        let event = DeviceMemory {
            timestamp_ns: timestamp.u64(i)?,
            device: String::from(s.get(device.u32(i)?)?),
            used_bytes: used.u64(i)?,
            free_bytes: free.u64(i)?,
            reserved_bytes: has_reserved.opt_u64(&reserved, i)?,
        };
        v.push(Lined::new(line.u64(i)?, event));
    }
    Ok(())
}

fn gradients(v: &mut Vec<Lined<Gradient>>, t: &Table, b: &[u8], s: Strs<'_>) -> Result<()> {
    let line = t.col(b, 0, 8)?;
    let event_id = t.col(b, 1, 4)?;
    let root = t.col(b, 2, 4)?;
    let key = t.col(b, 3, 4)?;
    let state = t.col(b, 4, 1)?;
    let (has_norm, norm) = (t.bits(b, 5)?, t.col(b, 6, 8)?);
    let (has_bytes, bytes) = (t.bits(b, 7)?, t.col(b, 8, 8)?);
    for i in 0..t.n {
        let event = Gradient {
            event_id: String::from(s.get(event_id.u32(i)?)?),
            root: String::from(s.get(root.u32(i)?)?),
            key: String::from(s.get(key.u32(i)?)?),
            state: variant(&GradientState::ALL, state.u8(i)?, "gradient state")?,
            norm: if has_norm.get(i)? {
                Some(norm.f64(i)?)
            } else {
                None
            },
            storage_bytes: has_bytes.opt_u64(&bytes, i)?,
        };
        v.push(Lined::new(line.u64(i)?, event));
    }
    Ok(())
}

fn edges(v: &mut Vec<Lined<Edge>>, t: &Table, b: &[u8], s: Strs<'_>) -> Result<()> {
    let line = t.col(b, 0, 8)?;
    let from = t.col(b, 1, 4)?;
    let to = t.col(b, 2, 4)?;
    let duration = t.col(b, 3, 8)?;
    for i in 0..t.n {
        let event = Edge {
            from_span: String::from(s.get(from.u32(i)?)?),
            to_span: String::from(s.get(to.u32(i)?)?),
            duration_ns: duration.u64(i)?,
        };
        v.push(Lined::new(line.u64(i)?, event));
    }
    Ok(())
}

/// The span tree: its arrays are plain numbers, read in one step each.
fn tree(d: &mut TraceDocument, r: &mut In<'_>, b: &[u8]) -> Result<()> {
    let max_depth = r.u32()?;
    let nodes = r.table(3)?;
    let u32s = |t: Table| t.col(b, 0, 4).map(|c| c.all_u32().collect::<Vec<u32>>());
    let roots = u32s(r.table(1)?)?;
    let child_start = u32s(r.table(1)?)?;
    let child_list = u32s(r.table(1)?)?;
    let parts = SpanTreeParts {
        parent: nodes
            .col(b, 0, 4)?
            .all_u32()
            .map(|p| (p != NONE).then_some(p))
            .collect(),
        depth: nodes.col(b, 1, 4)?.all_u32().collect(),
        self_ns: nodes.col(b, 2, 8)?.all_u64().collect(),
        roots,
        max_depth,
        child_start,
        child_list,
    };
    // A document without spans has an empty tree (no offsets at all).
    if !(d.spans.is_empty() && parts.child_start.is_empty()) {
        d.tree = SpanTree::from_parts(parts).map_err(|e| broken(format!("span tree: {e}")))?;
    }
    Ok(())
}

fn memory_profile(m: &mut MemoryProfile, r: &mut In<'_>, b: &[u8], s: Strs<'_>) -> Result<()> {
    m.peak_bytes = r.u64()?;
    m.peak_timestamp_ns = r.opt_u64()?;
    m.peak_device = opt_string(r, s)?;
    for v in &mut m.peak_by_category {
        *v = r.u64()?;
    }
    m.alloc_count = r.u64()?;
    m.free_count = r.u64()?;
    let t = r.table(8)?;
    let (index, tensor_id, bytes, cat) = (
        t.col(b, 0, 8)?,
        t.col(b, 1, 4)?,
        t.col(b, 2, 8)?,
        t.col(b, 3, 1)?,
    );
    let (span_id, op_name, timestamp, line) = (
        t.col(b, 4, 4)?,
        t.col(b, 5, 4)?,
        t.col(b, 6, 8)?,
        t.col(b, 7, 8)?,
    );
    m.live_at_peak = (0..t.n)
        .map(|i| {
            Ok(LiveAllocation {
                memory_index: usize::try_from(index.u64(i)?)
                    .map_err(|_| broken("a memory index does not fit"))?,
                tensor_id: String::from(s.get(tensor_id.u32(i)?)?),
                bytes: bytes.u64(i)?,
                category: category(&cat, i)?,
                span_id: String::from(s.get(span_id.u32(i)?)?),
                op_name: s.opt(op_name.u32(i)?)?.map(String::from),
                timestamp_ns: timestamp.u64(i)?,
                line: line.u64(i)?,
            })
        })
        .collect::<Result<_>>()?;
    let t = r.table(9)?;
    let (device, peak, has_peak_at, peak_at, live) = (
        t.col(b, 0, 4)?,
        t.col(b, 1, 8)?,
        t.bits(b, 2)?,
        t.col(b, 3, 8)?,
        t.col(b, 4, 8)?,
    );
    let (has_capacity, capacity, allocs, frees) = (
        t.bits(b, 5)?,
        t.col(b, 6, 8)?,
        t.col(b, 7, 8)?,
        t.col(b, 8, 8)?,
    );
    m.devices = (0..t.n)
        .map(|i| {
            Ok(DeviceMemoryProfile {
                device: String::from(s.get(device.u32(i)?)?),
                peak_bytes: peak.u64(i)?,
                peak_timestamp_ns: has_peak_at.opt_u64(&peak_at, i)?,
                final_live_bytes: live.u64(i)?,
                capacity_bytes: has_capacity.opt_u64(&capacity, i)?,
                alloc_count: allocs.u64(i)?,
                free_count: frees.u64(i)?,
            })
        })
        .collect::<Result<_>>()?;
    Ok(())
}

fn samples(v: &mut Vec<MemorySample>, t: &Table, b: &[u8]) -> Result<()> {
    let timestamp = t.col(b, 0, 8)?;
    let device = t.col(b, 1, 4)?;
    let live = t.col(b, 2, 8)?;
    let by: Vec<Col<'_>> = (3..8).map(|c| t.col(b, c, 8)).collect::<Result<_>>()?;
    for i in 0..t.n {
        let mut by_category = [0; 5];
        for (slot, col) in by_category.iter_mut().zip(&by) {
            *slot = col.u64(i)?;
        }
        v.push(MemorySample {
            timestamp_ns: timestamp.u64(i)?,
            device: device.u32(i)?,
            live_bytes: live.u64(i)?,
            by_category,
        });
    }
    Ok(())
}

fn track_id(
    kind: &Col<'_>,
    int: &Col<'_>,
    text: &Col<'_>,
    s: Strs<'_>,
    i: usize,
) -> Result<TrackId> {
    Ok(match kind.u8(i)? {
        0 => TrackId::Int(int.i64(i)?),
        1 => TrackId::Str(String::from(s.get(text.u32(i)?)?)),
        k => return Err(broken(format!("{k} is no track id kind"))),
    })
}

fn chrome(r: &mut In<'_>, b: &[u8], s: Strs<'_>) -> Result<ChromeImport> {
    let form = variant(&FORMS, r.u8()?, "Chrome form")?;
    let element_count = r.u64()?;
    let closed = r.bool()?;
    let origin_ns = r.i64()?;
    let synthetic_root = r.bool()?;
    let t = r.table(8)?;
    let c: Vec<Col<'_>> = [
        (0, 1),
        (1, 8),
        (2, 4),
        (3, 1),
        (4, 8),
        (5, 4),
        (6, 4),
        (7, 4),
    ]
    .into_iter()
    .map(|(k, w)| t.col(b, k, w))
    .collect::<Result<_>>()?;
    let [pk, pi, ps, tk, ti, ts, pn, tn] = c.as_slice() else {
        return Err(broken("track columns"));
    };
    let tracks = (0..t.n)
        .map(|i| {
            Ok(Track {
                pid: track_id(pk, pi, ps, s, i)?,
                tid: track_id(tk, ti, ts, s, i)?,
                process_name: s.opt(pn.u32(i)?)?.map(String::from),
                thread_name: s.opt(tn.u32(i)?)?.map(String::from),
            })
        })
        .collect::<Result<_>>()?;
    let t = r.table(1)?;
    let span_tracks = t
        .col(b, 0, 4)?
        .all_u32()
        .map(|v| (v != NONE).then_some(v))
        .collect();
    let t = r.table(5)?;
    let (line, name, track, timestamp, scope) = (
        t.col(b, 0, 8)?,
        t.col(b, 1, 4)?,
        t.col(b, 2, 4)?,
        t.col(b, 3, 8)?,
        t.col(b, 4, 4)?,
    );
    let instants = (0..t.n)
        .map(|i| {
            let event = Instant {
                name: String::from(s.get(name.u32(i)?)?),
                track: track.u32(i)?,
                timestamp_ns: timestamp.u64(i)?,
                scope: String::from(s.get(scope.u32(i)?)?),
            };
            Ok(Lined::new(line.u64(i)?, event))
        })
        .collect::<Result<_>>()?;
    let t = r.table(6)?;
    let (line, name, series, track, timestamp, value) = (
        t.col(b, 0, 8)?,
        t.col(b, 1, 4)?,
        t.col(b, 2, 4)?,
        t.col(b, 3, 4)?,
        t.col(b, 4, 8)?,
        t.col(b, 5, 8)?,
    );
    let counters = (0..t.n)
        .map(|i| {
            let event = CounterSample {
                name: String::from(s.get(name.u32(i)?)?),
                series: String::from(s.get(series.u32(i)?)?),
                track: track.u32(i)?,
                timestamp_ns: timestamp.u64(i)?,
                value: value.f64(i)?,
            };
            Ok(Lined::new(line.u64(i)?, event))
        })
        .collect::<Result<_>>()?;
    let t = r.table(3)?;
    let (ph, count, first_line) = (t.col(b, 0, 4)?, t.col(b, 1, 8)?, t.col(b, 2, 8)?);
    let skipped = (0..t.n)
        .map(|i| {
            Ok(SkippedPhase {
                ph: String::from(s.get(ph.u32(i)?)?),
                count: count.u64(i)?,
                first_line: first_line.u64(i)?,
            })
        })
        .collect::<Result<_>>()?;
    Ok(ChromeImport {
        form,
        element_count,
        closed,
        tracks,
        span_tracks,
        instants,
        counters,
        skipped,
        origin_ns,
        synthetic_root,
    })
}

fn records(p: &mut ProfileDocument, t: &Table, b: &[u8], s: Strs<'_>) -> Result<()> {
    let line = t.col(b, 0, 8)?;
    let json = t.col(b, 1, 4)?;
    let violations = t.list(b, 2, 4)?;
    for i in 0..t.n {
        let text = s.get(json.u32(i)?)?;
        let event = candle_trace_schema::format::profile::decode_line(text.as_bytes())
            .map_err(|e| broken(format!("profile record {i}: {e:?}")))?;
        p.records.push(ProfileRecord {
            line: line.u64(i)?,
            event,
            violations: violations
                .u32s(i)?
                .into_iter()
                .map(|id| s.get(id).map(String::from))
                .collect::<Result<_>>()?,
        });
    }
    Ok(())
}

fn diagnostics(v: &mut Vec<Diagnostic>, t: &Table, b: &[u8], s: Strs<'_>) -> Result<()> {
    let line = t.col(b, 0, 8)?;
    let severity = t.col(b, 1, 1)?;
    let cat = t.col(b, 2, 1)?;
    let message = t.col(b, 3, 4)?;
    for i in 0..t.n {
        v.push(Diagnostic {
            line: line.u64(i)?,
            severity: variant(&SEVERITIES, severity.u8(i)?, "severity")?,
            category: variant(&CATEGORIES, cat.u8(i)?, "category")?,
            message: String::from(s.get(message.u32(i)?)?),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_trace_schema::format::detect::AnyReader;
    #[cfg(not(target_arch = "wasm32"))]
    use proptest::prelude::*;

    fn read(bytes: &[u8]) -> AnyDocument {
        let mut r = AnyReader::new();
        r.push(bytes);
        r.finish()
    }

    /// `doc` in chunks cut after `chunk_bytes` bytes of body.
    fn chunks_of(doc: &AnyDocument, chunk_bytes: usize) -> Vec<Vec<u8>> {
        let mut chunks = Vec::new();
        encode_in(doc, chunk_bytes, |c| chunks.push(c));
        chunks
    }

    /// Where a chunk's body starts (after its strings).
    fn body_of(chunk: &[u8]) -> usize {
        let mut r = In::new(chunk, 0);
        r.table(2).unwrap();
        r.at
    }

    fn fixtures() -> Vec<(String, Vec<u8>)> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures");
        let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl" || x == "json"))
            .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
            .collect();
        out.sort();
        out
    }

    /// Everything a document holds, compared field by field (`TraceDocument` has no
    /// `PartialEq`: its id index is private and rebuilt).
    fn assert_same(name: &str, a: &AnyDocument, b: &AnyDocument) {
        match (a, b) {
            (AnyDocument::Trace(a), AnyDocument::Trace(b)) => {
                assert_eq!(a.meta, b.meta, "{name}");
                assert_eq!(a.spans, b.spans, "{name}");
                assert_eq!(a.ops, b.ops, "{name}");
                assert_eq!(a.tensors, b.tensors, "{name}");
                assert_eq!(a.memory, b.memory, "{name}");
                assert_eq!(a.device_memory, b.device_memory, "{name}");
                assert_eq!(a.gradients, b.gradients, "{name}");
                assert_eq!(a.edges, b.edges, "{name}");
                assert_eq!(a.tree, b.tree, "{name}");
                assert_eq!(a.memory_profile, b.memory_profile, "{name}");
                assert_eq!(a.diagnostics, b.diagnostics, "{name}");
                assert_eq!(a.skipped_unknown, b.skipped_unknown, "{name}");
                assert_eq!(a.bytes_read, b.bytes_read, "{name}");
                assert_eq!(a.chrome, b.chrome, "{name}");
                assert_eq!(a.capture_sources, b.capture_sources, "{name}");
                assert_eq!(a.summary(), b.summary(), "{name}");
                for (i, s) in a.spans.iter().enumerate() {
                    assert_eq!(b.span_index(&s.id), a.span_index(&s.id), "{name} span {i}");
                }
            }
            (AnyDocument::Profile(a), AnyDocument::Profile(b)) => assert_eq!(a, b, "{name}"),
            (
                AnyDocument::Unsupported {
                    format: fa,
                    diagnostics: da,
                },
                AnyDocument::Unsupported {
                    format: fb,
                    diagnostics: db,
                },
            ) => {
                assert_eq!(fa, fb, "{name}");
                assert_eq!(da, db, "{name}");
            }
            _ => panic!("{name}: document kinds differ"),
        }
    }

    #[test]
    fn every_fixture_crosses_unchanged() {
        let files = fixtures();
        assert!(files.len() > 20);
        let mut kinds = [0; 3];
        for (name, bytes) in &files {
            let doc = read(bytes);
            kinds[match &doc {
                AnyDocument::Trace(t) if t.chrome.is_some() => 1,
                AnyDocument::Trace(_) => 0,
                _ => 2,
            }] += 1;
            let back = decode(&encode_all(&doc)).unwrap();
            assert_same(name, &doc, &back);
            // The same in the smallest chunks the encoder cuts: one per block or part.
            let small = chunks_of(&doc, 1);
            assert_same(name, &doc, &decode(&small).unwrap());
        }
        // trace/6 files, Chrome imports and profiles are all among them.
        assert!(kinds.iter().all(|&k| k > 0), "{kinds:?}");
    }

    #[test]
    fn the_byte_codes_of_small_enums_match_their_lists() {
        for (i, c) in CATEGORIES.iter().enumerate() {
            assert_eq!(code(&CATEGORIES, c), i as u8);
            assert_eq!(variant(&CATEGORIES, i as u8, "c").unwrap(), *c);
        }
        // Every category is listed: each `as_str` once.
        let mut names: Vec<&str> = CATEGORIES.iter().map(|c| c.as_str()).collect();
        names.dedup();
        assert_eq!(names.len(), 15);
        assert!(variant(&CATEGORIES, 15, "category").is_err());
        assert_eq!(opt_code(&Step::ALL, None), 0);
        assert_eq!(opt_code(&Step::ALL, Some(&Step::Optimizer)), 3);
        assert_eq!(
            opt_variant(&Step::ALL, 3, "s").unwrap(),
            Some(Step::Optimizer)
        );
        assert!(opt_variant(&Step::ALL, 4, "step").is_err());
    }

    #[test]
    fn capture_sources_cross_too() {
        let file = concat!(
            r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#,
            "\n",
            r#"{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
            "\n",
            r#"{"kind":"span_end","id":"s","duration_ns":5}"#,
            "\n",
            r#"{"kind":"capture_sources","sources":[{"source":"allocator","on":true,"events":4,"threshold_bytes":1024},{"source":"gradients","on":false}],"events_dropped":2,"warnings":["no spans"]}"#,
            "\n",
        );
        let doc = read(file.as_bytes());
        let back = decode(&encode_all(&doc)).unwrap();
        assert_same("capture_sources", &doc, &back);
        let AnyDocument::Trace(t) = back else {
            panic!("a trace")
        };
        let sources = t.capture_sources.unwrap();
        assert_eq!(sources.line, 4);
        assert_eq!(sources.events_dropped, 2);
        assert_eq!(sources.sources[0].threshold_bytes, Some(1024));
        assert_eq!(sources.warnings, ["no spans"]);
    }

    #[test]
    fn unsupported_and_empty_files_cross_too() {
        for bytes in [
            &b""[..],
            b"hello\n",
            b"[{\"ph\":\"X\",\"name\":\"a\",\"ts\":0,\"dur\":1}]",
        ] {
            let doc = read(bytes);
            let back = decode(&encode_all(&doc)).unwrap();
            assert_same("unsupported", &doc, &back);
        }
    }

    #[test]
    fn each_distinct_string_is_written_once() {
        // 50 closed spans under one measured root, all named "matmul_xyz": no diagnostic
        // repeats the name, so its bytes appear once, in the string table.
        let mut file = many_spans(0).replace("\"step\"", "\"matmul_xyz\"");
        for i in 0..50 {
            file.push_str(&format!(
                "{{\"kind\":\"span_start\",\"id\":\"s{i}\",\"parent_id\":\"root\",\"name\":\"matmul_xyz\",\"start_ns\":{i},\"span_kind\":\"op\"}}\n{{\"kind\":\"span_end\",\"id\":\"s{i}\",\"duration_ns\":0}}\n"
            ));
        }
        let doc = read(file.as_bytes());
        let AnyDocument::Trace(t) = &doc else {
            panic!("a trace")
        };
        assert!(t.diagnostics.is_empty(), "{:?}", t.diagnostics);
        // In one chunk and in many (the name is used in each of them).
        for chunks in [encode_all(&doc), chunks_of(&doc, 1)] {
            let bytes = chunks.concat();
            let hits = bytes.windows(10).filter(|w| w == b"matmul_xyz").count();
            assert_eq!(hits, 1);
            let AnyDocument::Trace(back) = decode(&chunks).unwrap() else {
                panic!("a trace")
            };
            assert_eq!(
                back.spans.iter().filter(|s| s.name == "matmul_xyz").count(),
                51
            );
        }
    }

    fn many_spans(n: usize) -> String {
        let mut file = String::from(concat!(
            r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","#,
            r#""entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00Z","#,
            r#""capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#,
            "\n",
            r#"{"kind":"span_start","id":"root","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
            "\n"
        ));
        for i in 0..n {
            file.push_str(&format!(
                "{{\"kind\":\"span_start\",\"id\":\"s{i}\",\"parent_id\":\"root\",\"name\":\"op\",\"start_ns\":{i},\"span_kind\":\"op\"}}\n{{\"kind\":\"span_end\",\"id\":\"s{i}\",\"duration_ns\":1}}\n"
            ));
        }
        file.push_str(&format!(
            "{{\"kind\":\"span_end\",\"id\":\"root\",\"duration_ns\":{}}}\n",
            n + 1
        ));
        file
    }

    #[test]
    fn large_documents_are_decoded_in_bounded_steps() {
        let n = 3 * BATCH + 5;
        let doc = read(many_spans(n).as_bytes());
        // Cut after every block or part: the n + 1 spans in 4 blocks, then the tree, the memory
        // profile's head and the Chrome flag (the empty parts between them in the same
        // chunks), then the last chunk with the empty diagnostics.
        let chunks = chunks_of(&doc, 1);
        assert_eq!(chunks.len(), 4 + 3 + 1);
        // The default size keeps the spans (about 0.4 MB a block) to a few chunks.
        assert!(encode_all(&doc).len() < chunks.len());
        let mut d = Decoder::new();
        let mut more = 0;
        let mut last = 0;
        let mut pushed = 0;
        for c in &chunks {
            d.push(c).unwrap();
            pushed += c.len();
            loop {
                match d.step().unwrap() {
                    Stepped::More => {
                        more += 1;
                        assert!(d.position() > last, "step {more} made progress");
                        last = d.position();
                    }
                    Stepped::NeedChunk => break,
                    Stepped::Done => break,
                }
            }
            assert_eq!(d.position(), pushed, "each chunk is decoded to its end");
        }
        // By hand: the head; for the spans their count and 4 blocks; one step each for ops,
        // tensors, memory, device memory, gradients, edges (all empty), the tree, the memory
        // profile, samples and Chrome; the diagnostics' step ends it (`Done`, not counted).
        assert_eq!(more, 1 + 5 + 10);
        assert_eq!(d.step().unwrap(), Stepped::Done);
        assert!(d.push(&chunks[0]).is_err(), "a chunk after the end");
        let back = d.finish().unwrap();
        assert_same("large", &doc, &back);
    }

    #[test]
    fn a_chunk_before_the_last_is_decoded_is_refused() {
        let doc = read(many_spans(2 * BATCH).as_bytes());
        let chunks = chunks_of(&doc, 1);
        let mut d = Decoder::new();
        d.push(&chunks[0]).unwrap();
        assert_eq!(d.step().unwrap(), Stepped::More);
        assert!(d.push(&chunks[1]).is_err());
    }

    #[test]
    fn truncated_or_foreign_bytes_are_errors_not_panics() {
        let doc = read(include_bytes!(
            "../../tests/fixtures/train_step.trace6.jsonl"
        ));
        let chunks = chunks_of(&doc, 1);
        assert!(chunks.len() > 2, "{}", chunks.len());
        // Every prefix of the stream: whole chunks, then part of the next.
        for (i, chunk) in chunks.iter().enumerate() {
            for cut in 0..chunk.len() {
                let mut prefix = chunks[..i].to_vec();
                prefix.push(chunk[..cut].to_vec());
                assert!(decode(&prefix).is_err(), "chunk {i} cut at {cut}");
            }
        }
        assert!(
            decode(&chunks[..chunks.len() - 1]).is_err(),
            "the last chunk missing"
        );
        assert!(decode::<Vec<u8>>(&[]).is_err(), "no chunk");
        assert!(decode(&[b"\x05\x00\x00\x00hello".to_vec()]).is_err());
        let mut longer = chunks.clone();
        longer.last_mut().unwrap().push(0);
        assert!(decode(&longer).is_err(), "a byte after the last part");
        let mut d = Decoder::new();
        d.push(&chunks[0]).unwrap();
        d.step().unwrap();
        assert!(d.finish().is_err(), "finish before the end");
    }

    #[test]
    fn every_flipped_byte_decodes_or_fails_without_a_panic() {
        let doc = read(include_bytes!(
            "../../tests/fixtures/train_step.trace6.jsonl"
        ));
        let chunks = chunks_of(&doc, 1);
        let total: usize = chunks.iter().map(Vec::len).sum();
        let mut errors = 0;
        for (c, chunk) in chunks.iter().enumerate() {
            for i in 0..chunk.len() {
                let mut flipped = chunks.clone();
                flipped[c][i] ^= 0xff;
                errors += usize::from(decode(&flipped).is_err());
            }
        }
        // Most flips break a length, an index, a code or the UTF-8 of a string.
        assert!(errors > total / 4, "{errors} of {total}");
    }

    #[test]
    fn a_string_out_of_range_is_an_error() {
        // No meta and no capture_sources: the body's header (5 bytes), skipped_unknown and
        // bytes_read (16), two absent flags (2), the spans' count (8), then their table's row
        // count (8) and column count (4). Each column is its length (8) and its bytes: the id's
        // end (4) at byte 51, its byte "a" at 63, the parent's bitmap (1) at 72, end (4) at 81
        // and no bytes, then the name's index into the string table (4) at byte 101.
        let file = "{\"kind\":\"span_start\",\"id\":\"a\",\"name\":\"n\",\"start_ns\":0,\"span_kind\":\"op\"}\n";
        let chunks = encode_all(&read(file.as_bytes()));
        assert_eq!(chunks.len(), 1);
        let body = body_of(&chunks[0]);
        let (id, name) = (body + 51, body + 101);
        assert_eq!(
            &chunks[0][id - 8..id + 4],
            &[4, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]
        );
        assert_eq!(&chunks[0][id + 12..id + 13], b"a");
        assert_eq!(&chunks[0][name - 8..name], &4u64.to_le_bytes());
        let with = |at: usize, v: u32| {
            let mut c = chunks.clone();
            c[0][at..at + 4].copy_from_slice(&v.to_le_bytes());
            decode(&c)
        };
        let e = with(id, 7).unwrap_err();
        assert!(e.to_string().contains("string 0 lies outside"), "{e}");
        let e = with(name, 7).unwrap_err();
        assert!(
            e.to_string().contains("string 7 is not in the table"),
            "{e}"
        );
        assert!(with(name, NONE).is_err(), "an absent name");
        assert!(with(name, 0).is_ok(), "the name's own index");
    }

    /// A trace/6 file with every record kind and every optional field both present and
    /// absent, from proptest's values.
    #[cfg(not(target_arch = "wasm32"))]
    fn generated(
        spans: &[(u64, Option<u64>, bool, u8)],
        ops: &[(Vec<u64>, Option<u64>, u8)],
        memory: &[(u64, bool, Option<u8>)],
        norms: &[Option<f64>],
    ) -> String {
        let mut f = String::from(concat!(
            r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","#,
            r#""entrypoint":"e","phase":"infer","timestamp":"t","capture_step":3,"warmup_steps":1,"#,
            r#""device":"cuda:0","timing_mode":"device_synchronized","tags":{"a":"b","ü":"ß"},"candle_version":"0.9"}"#,
            "\n"
        ));
        for (i, (start, duration, measured, step)) in spans.iter().enumerate() {
            let parent = if i == 0 {
                String::new()
            } else {
                format!(",\"parent_id\":\"s{}\"", i / 2)
            };
            let step =
                ["", ",\"step\":\"forward\"", ",\"step\":\"backward\""][usize::from(*step % 3)];
            f.push_str(&format!(
                "{{\"kind\":\"span_start\",\"id\":\"s{i}\"{parent},\"name\":\"n{}\",\"start_ns\":{start},\"span_kind\":\"{}\",\"measured\":{measured}{step}}}\n",
                i % 3,
                ["function", "op", "module"][i % 3]
            ));
            if let Some(d) = duration {
                f.push_str(&format!(
                    "{{\"kind\":\"span_end\",\"id\":\"s{i}\",\"duration_ns\":{d}}}\n"
                ));
            }
        }
        for (i, (shape, storage, inputs)) in ops.iter().enumerate() {
            let storage = storage.map_or(String::new(), |s| format!(",\"storage_bytes\":{s}"));
            // Ids with characters of two and three bytes: they cross in place, cut by byte offsets.
            let inputs: Vec<String> = (0..*inputs % 4).map(|k| format!("\"tü{k}\"")).collect();
            let output = if i % 2 == 0 {
                ",\"output\":\"o€\""
            } else {
                ""
            };
            f.push_str(&format!(
                "{{\"kind\":\"op\",\"span_id\":\"s0\",\"op_name\":\"mm\",\"inputs\":[{}]{output},\"shape\":{shape:?},\"dtype\":\"f32\",\"device\":\"cpu\",\"duration_ns\":{i},\"timestamp_ns\":7{storage},\"input_storage_bytes\":3}}\n",
                inputs.join(",")
            ));
            f.push_str(&format!(
                "{{\"kind\":\"tensor\",\"span_id\":\"s0\",\"tensor_id\":\"t{i}\",\"shape\":{shape:?},\"dtype\":\"bf16\",\"device\":\"cpu\",\"requires_grad\":{}{storage},\"category\":\"parameter\"}}\n",
                i % 2 == 0
            ));
        }
        for (i, (bytes, free, op)) in memory.iter().enumerate() {
            let op = op.map_or(String::new(), |o| format!(",\"op_name\":\"op{o}\""));
            let action = if *free { "free" } else { "alloc" };
            f.push_str(&format!(
                "{{\"kind\":\"memory\",\"timestamp_ns\":{i},\"tensor_id\":\"mé{}\",\"span_id\":\"s0\"{op},\"device\":\"cpu\",\"bytes\":{bytes},\"action\":\"{action}\",\"shape\":[2],\"dtype\":\"f32\",\"category\":\"activation\"}}\n",
                i % 3
            ));
            let reserved = if *free {
                ",\"reserved_bytes\":9".to_string()
            } else {
                String::new()
            };
            f.push_str(&format!(
                "{{\"kind\":\"device_memory\",\"timestamp_ns\":{i},\"device\":\"cpu\",\"used_bytes\":{bytes},\"free_bytes\":100{reserved}}}\n"
            ));
        }
        for (i, norm) in norms.iter().enumerate() {
            let (state, norm) = match norm {
                Some(n) => ("present", format!(",\"norm\":{n:?}")),
                None => ("missing", String::new()),
            };
            f.push_str(&format!(
                "{{\"kind\":\"gradient\",\"event_id\":\"g{i}\",\"root\":\"loss\",\"key\":\"w{i}\",\"state\":\"{state}\"{norm}}}\n{{\"kind\":\"edge\",\"from_span\":\"s0\",\"to_span\":\"s{i}\",\"duration_ns\":{i}}}\n"
            ));
        }
        f.push_str("{\"kind\":\"mystery\"}\n");
        f
    }

    #[cfg(not(target_arch = "wasm32"))]
    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn generated_traces_cross_unchanged(
            spans in prop::collection::vec((0u64..1 << 40, prop::option::of(0u64..1 << 40), any::<bool>(), any::<u8>()), 0..40),
            ops in prop::collection::vec((prop::collection::vec(0u64..4096, 0..4), prop::option::of(any::<u64>()), any::<u8>()), 0..20),
            memory in prop::collection::vec((0u64..1 << 30, any::<bool>(), prop::option::of(0u8..3)), 0..20),
            norms in prop::collection::vec(prop::option::of(0.0f64..1e6), 0..10),
        ) {
            let file = generated(&spans, &ops, &memory, &norms);
            let doc = read(file.as_bytes());
            let AnyDocument::Trace(t) = &doc else { panic!("a trace") };
            prop_assert_eq!(t.spans.len(), spans.len());
            prop_assert_eq!(t.ops.len(), ops.len());
            prop_assert_eq!(t.memory.len(), memory.len());
            prop_assert_eq!(t.gradients.len(), norms.len());
            let back = decode(&encode_all(&doc)).unwrap();
            assert_same("generated", &doc, &back);
            assert_same("generated, small chunks", &doc, &decode(&chunks_of(&doc, 1)).unwrap());
        }

        #[test]
        fn hostile_bytes_never_panic(
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            cut in any::<prop::sample::Index>(),
        ) {
            let doc = read(include_bytes!("../../tests/fixtures/findings_train.trace6.jsonl"));
            let mut chunks = chunks_of(&doc, 256);
            for (at, v) in edits {
                let c = at.index(chunks.len());
                let i = at.index(chunks[c].len());
                chunks[c][i] = v;
            }
            // Either result is fine; a panic fails the test.
            let _ = decode(&chunks);
            let c = cut.index(chunks.len());
            let end = cut.index(chunks[c].len() + 1);
            chunks[c].truncate(end);
            let _ = decode(&chunks[..=c]);
        }
    }
}
