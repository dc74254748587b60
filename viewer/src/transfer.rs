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
//! A trace's stream can also be written in two stages: [`encode_records`] writes the header,
//! the head and the record tables as soon as the last line is read (they are final then:
//! [`TraceRecords`]), and [`Staged::encode_rest`] the parts the end-of-file analysis completes,
//! so the page decodes the records while the worker analyses. The stages continue one stream:
//! the same bytes as [`encode`] writes, cut into chunks at other places (the first stage's last
//! chunk ends with it), and the decoder does not tell them apart.
//!
//! A chunk (little-endian; tables as in [`wire`]) is the table of the strings it uses first
//! (each distinct string crosses once, numbered in order of first use across the stream), then
//! its body. The bodies, end to end, are:
//! - `CTT6`, the document kind (`0` trace, `1` profile, `2` unsupported);
//! - the kind's head (a trace's in `head.rs`; an unsupported file's format);
//! - the kind's parts in a fixed order ([`TRACE`], [`PROFILE`], [`UNSUPPORTED`]; a trace's
//!   record tables before its spans). A part of records is its row count, then tables of at
//!   most [`BATCH`] rows; the span tree, the memory profile's head and a Chrome import are one
//!   run of tables each.
//!
//! Each part's table is declared once, in its own file beside the functions that write and
//! read a row of it ([`columns!`](columns::columns)): the column kinds say how each field is
//! laid out (`columns.rs`), and the column count and every column's place follow from the
//! declaration. Span and tensor ids cross in place (nearly every one is distinct, so interning
//! them would cost a hash-table lookup a row for nothing); other strings are indices into the
//! string table. The op and memory tables cross as they are stored: each table's pools (its
//! strings and shapes, by number, `pools.rs`) as parts before its rows, then the rows as the
//! numbers they hold, so the page stores both without hashing a string again (a name once, at
//! its first use, to index it).
//!
//! A chunk ends only between tables, so every table lies within one chunk.

pub use findings::{decode_findings, encode_findings};

use std::collections::TryReserveError;
use std::fmt;

use candle_trace_schema::format::detect::{AnyDocument, Format};
use candle_trace_schema::format::diagnostics::Diagnostic;
use candle_trace_schema::format::document::{TraceDocument, TraceRecords};
use candle_trace_schema::format::profile::{ProfileDocument, ProfileRecord};

mod chrome;
mod codes;
mod columns;
mod device_memory;
mod diagnostics;
mod edges;
mod findings;
mod gradients;
mod head;
mod memory;
mod memory_profile;
mod ops;
mod pools;
mod records;
mod span_index;
mod spans;
mod tensors;
mod tree;
mod wire;

use columns::{opt_code, opt_variant, Layout};
use wire::{In, Out, Result, StringPool, Strings, Strs, Table};

/// Rows per table of a part, decoded in one [`Decoder::step`]: small enough that one step is
/// a short task on the page (a few milliseconds for spans), large enough that stepping costs
/// nothing.
pub const BATCH: usize = 8192;

/// Body bytes after which the worker posts a chunk: a few blocks of spans, so the page starts
/// decoding early and holds little at a time, while a hundred-megabyte file still crosses in
/// about fifty messages.
pub const CHUNK_BYTES: usize = 1 << 20;

/// The first bytes of an encoded document (`6`: the chunked stream, ids in place, the op and
/// memory tables as stored, a trace's records before its spans, the span id index as built).
const MAGIC: &[u8; 4] = b"CTT6";

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

/// One part of a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    OpStrings,
    OpShapes,
    Ops,
    Tensors,
    MemoryStrings,
    MemoryShapes,
    Memory,
    DeviceMemory,
    Gradients,
    Edges,
    Spans,
    SpanIndex,
    Tree,
    MemoryProfile,
    Samples,
    Chrome,
    Records,
    Diagnostics,
}

/// The parts of a trace, in order: first its records ([`Part::is_record`]), final once the
/// last line is read, which the worker sends while it analyses ([`encode_records`]); then
/// those the end-of-file work completes ([`Staged::encode_rest`]).
const TRACE: &[Part] = &[
    Part::OpStrings,
    Part::OpShapes,
    Part::Ops,
    Part::Tensors,
    Part::MemoryStrings,
    Part::MemoryShapes,
    Part::Memory,
    Part::DeviceMemory,
    Part::Gradients,
    Part::Edges,
    Part::Spans,
    Part::SpanIndex,
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

impl Part {
    /// Whether the part is a table of a trace's [`TraceRecords`]: final once the last line is
    /// read, written before the parts the end-of-file work completes.
    fn is_record(self) -> bool {
        matches!(
            self,
            Part::OpStrings
                | Part::OpShapes
                | Part::Ops
                | Part::Tensors
                | Part::MemoryStrings
                | Part::MemoryShapes
                | Part::Memory
                | Part::DeviceMemory
                | Part::Gradients
                | Part::Edges
        )
    }

    /// Whether the part is rows in blocks (a count, then tables of at most [`BATCH`] rows)
    /// rather than one run of tables read in one step.
    fn in_blocks(self) -> bool {
        !matches!(
            self,
            Part::SpanIndex | Part::Tree | Part::MemoryProfile | Part::Chrome
        )
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
/// many callers it has (a copy per caller's closure would grow the wasm).
fn encode_to(doc: &AnyDocument, chunk_bytes: usize, emit: &mut dyn FnMut(Vec<u8>)) {
    // A profile's records cross as their JSON lines, which the string table borrows.
    let lines: Vec<String> = match doc {
        AnyDocument::Profile(p) => p.records.iter().map(|r| r.event.to_json_line()).collect(),
        _ => Vec::new(),
    };
    let profile_records: Vec<(&ProfileRecord, &str)> = match doc {
        AnyDocument::Profile(p) => p
            .records
            .iter()
            .zip(lines.iter().map(String::as_str))
            .collect(),
        _ => Vec::new(),
    };
    let mut e = Enc::new(Strings::default(), chunk_bytes, emit);
    match doc {
        AnyDocument::Trace(t) => {
            e.records(t.records());
            e.analysed(t);
        }
        AnyDocument::Profile(p) => {
            e.out.buf.extend_from_slice(MAGIC);
            e.out.u8(1);
            e.blocks(profile_records.iter(), records::write);
            e.blocks(p.diagnostics.iter(), diagnostics::write);
        }
        AnyDocument::Unsupported {
            format,
            diagnostics,
        } => {
            e.out.buf.extend_from_slice(MAGIC);
            e.out.u8(2);
            e.out.u8(opt_code(format.as_ref()));
            e.blocks(diagnostics.iter(), diagnostics::write);
        }
    }
    e.end();
}

/// Encode a document into one list of chunks (tests and tools).
pub fn encode_all(doc: &AnyDocument) -> Vec<Vec<u8>> {
    let mut chunks = Vec::new();
    encode(doc, |c| chunks.push(c));
    chunks
}

/// The first stage of a trace's encoding in two: the header, the head and the record tables,
/// which are final once the last line is read ([`AnyRead::records`](candle_trace_schema::format::detect::AnyRead::records)),
/// every chunk handed to `emit`, the last one cut at their end. The worker sends them before
/// it analyses, so the page decodes them meanwhile; [`Staged::encode_rest`] then writes the
/// rest of the same stream. The chunks of both stages, end to end, are those [`encode`]
/// writes of the finished document, but for where they are cut.
pub fn encode_records(records: TraceRecords<'_>, emit: impl FnMut(Vec<u8>)) -> Staged {
    encode_records_in(records, CHUNK_BYTES, emit)
}

/// [`encode_records`], cutting a chunk once its body has `chunk_bytes` bytes.
pub fn encode_records_in(
    records: TraceRecords<'_>,
    chunk_bytes: usize,
    mut emit: impl FnMut(Vec<u8>),
) -> Staged {
    let emit: &mut dyn FnMut(Vec<u8>) = &mut emit;
    let mut e = Enc::new(Strings::default(), chunk_bytes, emit);
    e.records(records);
    e.end();
    Staged {
        strings: e.s.to_owned_list(),
        chunk_bytes,
    }
}

/// Where [`encode_records`] left a trace's stream: the strings sent so far (their numbers go
/// on), for [`Staged::encode_rest`].
pub struct Staged {
    /// Every string sent, in the order of their numbers (copies: the records they came from
    /// may move when the document is finished).
    strings: Vec<Box<str>>,
    chunk_bytes: usize,
}

impl Staged {
    /// The second stage: the rest of the finished document `t` (whose records are those the
    /// first stage wrote), every chunk handed to `emit`.
    pub fn encode_rest(self, t: &TraceDocument, mut emit: impl FnMut(Vec<u8>)) {
        let emit: &mut dyn FnMut(Vec<u8>) = &mut emit;
        let mut e = Enc::new(Strings::resumed(&self.strings), self.chunk_bytes, emit);
        e.analysed(t);
        e.end();
    }
}

/// The bytes and the string table being written, and where the chunks go.
struct Enc<'d, 'e> {
    /// The body of the chunk being written.
    out: Out,
    s: Strings<'d>,
    /// Strings already sent in earlier chunks.
    sent_strings: usize,
    /// Body bytes after which a chunk is cut (at the end of a block or part).
    chunk_bytes: usize,
    emit: &'e mut dyn FnMut(Vec<u8>),
}

impl<'d, 'e> Enc<'d, 'e> {
    /// An encoder whose strings `s` were sent already.
    fn new(s: Strings<'d>, chunk_bytes: usize, emit: &'e mut dyn FnMut(Vec<u8>)) -> Self {
        Enc {
            out: Out::default(),
            sent_strings: s.len(),
            s,
            chunk_bytes,
            emit,
        }
    }

    /// The chunk so far: the strings first used in it, then its body.
    fn cut(&mut self) {
        let mut chunk = Out::default();
        self.s.write_table_from(self.sent_strings, &mut chunk);
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

    /// The rest, unless the last block ended a chunk already (every stage writes something:
    /// the header, or a trace's spans count).
    fn end(&mut self) {
        if !self.out.buf.is_empty() {
            self.cut();
        }
    }

    /// A part of rows in blocks: the row count, then tables of at most [`BATCH`] rows of the
    /// layout `L`, each filled by `row`, a chunk possibly cut after each. A function of its own
    /// for each part (see [`Decoder::step`]).
    #[inline(never)]
    fn blocks<L: Layout, R>(
        &mut self,
        mut rows: impl ExactSizeIterator<Item = R>,
        mut row: impl FnMut(&mut L, &mut Strings<'d>, R),
    ) {
        let mut left = rows.len();
        self.out.u64(left as u64);
        while left > 0 {
            let n = left.min(BATCH);
            let mut c = L::new(n);
            for x in rows.by_ref().take(n) {
                row(&mut c, &mut self.s, x);
            }
            left -= n;
            c.finish(n, &mut self.out);
            self.maybe_cut();
        }
    }

    /// A trace's header, head and record parts ([`Part::is_record`]), in [`TRACE`]'s order.
    fn records(&mut self, r: TraceRecords<'d>) {
        self.out.buf.extend_from_slice(MAGIC);
        self.out.u8(0);
        head::write(&mut self.out, &mut self.s, &r);
        for &part in TRACE.iter().filter(|p| p.is_record()) {
            match part {
                Part::OpStrings => self.blocks(r.ops.pools().strings(), pools::write_string),
                Part::OpShapes => self.blocks(r.ops.pools().shapes(), pools::write_shape),
                Part::Ops => {
                    let ops = r.ops.cells().iter().enumerate();
                    self.blocks(ops.map(|(i, c)| (c, r.ops.inputs_of(i))), ops::write)
                }
                Part::Tensors => self.blocks(r.tensors.iter(), tensors::write),
                Part::MemoryStrings => self.blocks(r.memory.pools().strings(), pools::write_string),
                Part::MemoryShapes => self.blocks(r.memory.pools().shapes(), pools::write_shape),
                Part::Memory => self.blocks(r.memory.cells().iter(), memory::write),
                Part::DeviceMemory => self.blocks(r.device_memory.iter(), device_memory::write),
                Part::Gradients => self.blocks(r.gradients.iter(), gradients::write),
                Part::Edges => self.blocks(r.edges.iter(), edges::write),
                // Not records: written by `analysed`.
                Part::Spans
                | Part::SpanIndex
                | Part::Tree
                | Part::MemoryProfile
                | Part::Samples
                | Part::Chrome
                | Part::Records
                | Part::Diagnostics => {}
            }
        }
    }

    /// The rest of a trace's parts, after its records, in [`TRACE`]'s order.
    fn analysed(&mut self, t: &'d TraceDocument) {
        for &part in TRACE.iter().filter(|p| !p.is_record()) {
            match part {
                Part::Spans => self.blocks(t.spans.iter(), spans::write),
                Part::SpanIndex => {
                    span_index::write(&mut self.out, t);
                    self.maybe_cut();
                }
                Part::Tree => {
                    tree::write(&mut self.out, &t.tree);
                    self.maybe_cut();
                }
                Part::MemoryProfile => {
                    memory_profile::write_head(&mut self.out, &mut self.s, &t.memory_profile);
                    self.maybe_cut();
                }
                Part::Samples => self.blocks(
                    t.memory_profile.samples.iter(),
                    memory_profile::write_sample,
                ),
                Part::Chrome => {
                    self.out.bool(t.chrome.is_some());
                    if let Some(c) = &t.chrome {
                        chrome::write(&mut self.out, &mut self.s, c);
                    }
                    self.maybe_cut();
                }
                Part::Diagnostics => self.blocks(t.diagnostics.iter(), diagnostics::write),
                // Records: written by `records`; a profile's records are no trace's part.
                Part::OpStrings
                | Part::OpShapes
                | Part::Ops
                | Part::Tensors
                | Part::MemoryStrings
                | Part::MemoryShapes
                | Part::Memory
                | Part::DeviceMemory
                | Part::Gradients
                | Part::Edges
                | Part::Records => {}
            }
        }
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
            // A new buffer rather than a grown one: nothing of the old to copy, and zeroed
            // memory straight from the allocator.
            self.buffer = vec![0; len];
        }
        self.len = len;
        let chunk = &mut self.buffer[..len];
        fill(chunk);
        let mut r = In::new(chunk, 0);
        let t = r.table()?;
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
    ///
    /// Each part is read (and written, [`Enc::blocks`]) by a function of its own, never inlined
    /// here: V8 runs a wasm function in its baseline tier until it has run enough, then
    /// compiles the whole function with its optimizing tier on a background thread, so one
    /// function holding every part's reader (47 KB of wasm when they were inlined) was
    /// compiled whole for the few parts a document has, and ran in the baseline tier until
    /// then. (`web/index.html` also tells wasm-opt not to inline large functions into their
    /// one caller, `-ocimfs`, which would undo this.)
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
            (self.doc, self.plan) = doc_head(&mut r, self.strings.strs())?;
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
        if part.in_blocks() {
            match self.open {
                None => {
                    let total = r.len()?;
                    reserve(&mut self.doc, part, total)?;
                    self.open = Some((total, 0));
                }
                Some((total, done)) => {
                    let t = r.table()?;
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
                Part::SpanIndex => span_index::read(d, &mut r, b, s)?,
                Part::Tree => tree::read(d, &mut r, b, s)?,
                Part::MemoryProfile => {
                    memory_profile::read_head(&mut d.memory_profile, &mut r, b, s)?
                }
                _ => {
                    if r.bool()? {
                        d.chrome = Some(Box::new(chrome::read(&mut r, b, s)?));
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

/// The header and the kind's head: the document to fill and its parts.
fn doc_head(r: &mut In<'_>, s: Strs<'_>) -> Result<(Partial, &'static [Part])> {
    let magic = [r.u8()?, r.u8()?, r.u8()?, r.u8()?];
    if &magic != MAGIC {
        return Err(broken("not an encoded document"));
    }
    Ok(match r.u8()? {
        0 => (Partial::Trace(Box::new(head::read(r, s)?)), TRACE),
        1 => (Partial::Profile(ProfileDocument::default()), PROFILE),
        2 => (
            Partial::Unsupported {
                format: opt_variant(r.u8()?)?,
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
                // The id index crosses whole after them.
                room(&mut d.spans, total)
            }
            // A pool grows as its blocks come: its count says nothing of its values' bytes.
            Part::OpStrings | Part::OpShapes | Part::MemoryStrings | Part::MemoryShapes => Ok(()),
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
        (Part::Records, Partial::Profile(p)) => records::read(p, t, b, s),
        (Part::Diagnostics, Partial::Profile(p)) => diagnostics::read(&mut p.diagnostics, t, b, s),
        (Part::Diagnostics, Partial::Unsupported { diagnostics: d, .. }) => {
            diagnostics::read(d, t, b, s)
        }
        (part, Partial::Trace(d)) => match part {
            Part::Spans => spans::read(d, t, b, s),
            Part::OpStrings => pools::read_strings(d.ops.pools_mut(), t, b, s),
            Part::OpShapes => pools::read_shapes(d.ops.pools_mut(), t, b, s),
            Part::Ops => ops::read(&mut d.ops, t, b, s),
            Part::MemoryStrings => pools::read_strings(d.memory.pools_mut(), t, b, s),
            Part::MemoryShapes => pools::read_shapes(d.memory.pools_mut(), t, b, s),
            Part::Tensors => tensors::read(&mut d.tensors, t, b, s),
            Part::Memory => memory::read(&mut d.memory, t, b, s),
            Part::DeviceMemory => device_memory::read(&mut d.device_memory, t, b, s),
            Part::Gradients => gradients::read(&mut d.gradients, t, b, s),
            Part::Edges => edges::read(&mut d.edges, t, b, s),
            Part::Samples => memory_profile::read_samples(&mut d.memory_profile.samples, t, b, s),
            Part::Diagnostics => diagnostics::read(&mut d.diagnostics, t, b, s),
            _ => Err(other_kind()),
        },
        _ => Err(other_kind()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_trace_schema::format::detect::AnyReader;
    use candle_trace_schema::format::table::{MemoryTable, OpTable, Pools};
    use candle_trace_schema::format::tracks::TrackId;
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
        r.table().unwrap();
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
    /// `PartialEq`: its id index is private; the same lookups are compared).
    fn assert_same(name: &str, a: &AnyDocument, b: &AnyDocument) {
        match (a, b) {
            (AnyDocument::Trace(a), AnyDocument::Trace(b)) => {
                assert_eq!(a.meta, b.meta, "{name}");
                assert_eq!(a.spans, b.spans, "{name}");
                assert_eq!(a.ops, b.ops, "{name}");
                // The tables as stored: the same pools and the same numbers in every row.
                assert_same_pools(name, a.ops.pools(), b.ops.pools());
                assert_eq!(a.ops.cells(), b.ops.cells(), "{name}");
                assert_same_pools(name, a.memory.pools(), b.memory.pools());
                assert_eq!(a.memory.cells(), b.memory.cells(), "{name}");
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

    fn assert_same_pools(name: &str, a: &Pools, b: &Pools) {
        assert!(a.strings().eq(b.strings()), "{name}: strings");
        assert!(a.shapes().eq(b.shapes()), "{name}: shapes");
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
            // The span id index crossed as built, not rebuilt on the way.
            if let (AnyDocument::Trace(a), AnyDocument::Trace(b)) = (&doc, &back) {
                assert_eq!(a.span_index_parts(), b.span_index_parts(), "{name}");
            }
            // The same in the smallest chunks the encoder cuts: one per block or part.
            let small = chunks_of(&doc, 1);
            assert_same(name, &doc, &decode(&small).unwrap());
        }
        // trace/6 files, Chrome imports and profiles are all among them.
        assert!(kinds.iter().all(|&k| k > 0), "{kinds:?}");
    }

    type Chunks = Vec<Vec<u8>>;

    /// `bytes` read and encoded in two stages as the worker does, cut after `chunk_bytes`
    /// bytes of body: the records' chunks (written before the end-of-file work), the rest's,
    /// and the document; `None` for a file that is no trace/6 file.
    fn staged(bytes: &[u8], chunk_bytes: usize) -> Option<(Chunks, Chunks, AnyDocument)> {
        let mut r = AnyReader::new();
        r.push(bytes);
        let read = r.end_input();
        let mut early = Vec::new();
        let staged = encode_records_in(read.records()?, chunk_bytes, |c| early.push(c));
        let doc = read.finish();
        let AnyDocument::Trace(t) = &doc else {
            panic!("a trace/6 file's records, then no trace")
        };
        let mut rest = Vec::new();
        staged.encode_rest(t, |c| rest.push(c));
        Some((early, rest, doc))
    }

    /// Every string of a stream of chunks in the order of their numbers, and the bodies end to
    /// end: what a stream says, whichever way it is cut.
    fn stream(chunks: &[Vec<u8>]) -> (Vec<String>, Vec<u8>) {
        let mut pool = StringPool::default();
        let (mut strings, mut body) = (Vec::new(), Vec::new());
        for c in chunks {
            let mut r = In::new(c, 0);
            let t = r.table().unwrap();
            pool.append(&t, c).unwrap();
            for _ in 0..t.n {
                strings.push(pool.strs().get(strings.len() as u32).unwrap().to_string());
            }
            body.extend_from_slice(&c[r.at..]);
        }
        (strings, body)
    }

    #[test]
    fn a_trace_encoded_in_stages_crosses_unchanged_and_as_the_one_stage_stream() {
        let mut traces = 0;
        for (name, bytes) in fixtures() {
            for chunk_bytes in [1, 300, CHUNK_BYTES] {
                let Some((early, rest, doc)) = staged(&bytes, chunk_bytes) else {
                    continue;
                };
                assert_same(&name, &read(&bytes), &doc);
                let all: Vec<Vec<u8>> = early.iter().chain(&rest).cloned().collect();
                assert_same(&name, &doc, &decode(&all).unwrap());
                // The same strings, numbered alike, and the same bytes as one stage writes.
                assert_eq!(
                    stream(&all),
                    stream(&chunks_of(&doc, chunk_bytes)),
                    "{name}"
                );
                // The records' chunks decode on their own, to their end, before the rest exists.
                let mut d = Decoder::new();
                for c in &early {
                    d.push(c).unwrap();
                    loop {
                        match d.step().unwrap() {
                            Stepped::More => {}
                            Stepped::NeedChunk => break,
                            Stepped::Done => panic!("{name}: done after the records"),
                        }
                    }
                }
                assert_eq!(d.position(), early.iter().map(Vec::len).sum::<usize>());
                for c in &rest {
                    d.push(c).unwrap();
                    while d.step().unwrap() == Stepped::More {}
                }
                assert_same(&name, &doc, &d.finish().unwrap());
            }
            traces += 1;
        }
        assert!(traces > 10, "{traces}");
    }

    #[test]
    fn a_string_of_both_stages_crosses_once() {
        // "cuda:7" is the device of a tensor and a checkpoint (records) and of the memory
        // profile (the analysis); "lonely" only a span's name, sent in the second stage.
        let file = format!(
            "{}{}\n{}\n{}\n{}\n",
            many_spans(0),
            r#"{"kind":"tensor","span_id":"root","tensor_id":"t","shape":[2],"dtype":"f32","device":"cuda:7","requires_grad":false,"category":"activation"}"#,
            r#"{"kind":"device_memory","timestamp_ns":1,"device":"cuda:7","used_bytes":8,"free_bytes":100}"#,
            r#"{"kind":"span_start","id":"x","parent_id":"root","name":"lonely","start_ns":0,"span_kind":"op"}"#,
            r#"{"kind":"span_end","id":"x","duration_ns":1}"#,
        );
        let (early, rest, doc) = staged(file.as_bytes(), 1).unwrap();
        let AnyDocument::Trace(t) = &doc else {
            panic!("a trace")
        };
        assert_eq!(t.memory_profile.devices.len(), 1);
        let count = |chunks: &[Vec<u8>], what: &[u8]| {
            chunks
                .concat()
                .windows(what.len())
                .filter(|w| *w == what)
                .count()
        };
        assert_eq!(count(&early, b"cuda:7"), 1);
        assert_eq!(count(&rest, b"cuda:7"), 0);
        assert_eq!(count(&early, b"lonely"), 0);
        assert_eq!(count(&rest, b"lonely"), 1);
        let all: Vec<Vec<u8>> = early.into_iter().chain(rest).collect();
        assert_same("both stages", &doc, &decode(&all).unwrap());
    }

    /// A trace/6 file where every record sets every optional field it has.
    const EVERY_OPTIONAL: &str = concat!(
        r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":1,"warmup_steps":0,"device":"cuda:0","timing_mode":"host","tags":{"k":"v"},"candle_version":"0.9"}"#,
        "\n",
        r#"{"kind":"span_start","id":"root","name":"step","start_ns":0,"span_kind":"function","measured":true,"step":"forward","module":"model"}"#,
        "\n",
        r#"{"kind":"span_start","id":"s1","parent_id":"root","name":"linear","start_ns":1,"span_kind":"module","measured":false,"step":"backward","module":"model.layers.0"}"#,
        "\n",
        r#"{"kind":"op","span_id":"s1","op_name":"matmul","inputs":["t0","t1"],"output":"t2","shape":[2,3],"dtype":"f32","device":"cuda:0","duration_ns":4,"timestamp_ns":2,"storage_bytes":24,"input_storage_bytes":48}"#,
        "\n",
        r#"{"kind":"tensor","span_id":"s1","tensor_id":"t2","shape":[2,3],"dtype":"f32","device":"cuda:0","requires_grad":true,"storage_bytes":24,"category":"activation"}"#,
        "\n",
        r#"{"kind":"memory","timestamp_ns":2,"tensor_id":"t2","span_id":"s1","op_name":"matmul","device":"cuda:0","bytes":24,"action":"alloc","shape":[2,3],"dtype":"f32","category":"activation"}"#,
        "\n",
        r#"{"kind":"device_memory","timestamp_ns":3,"device":"cuda:0","used_bytes":100,"free_bytes":900,"reserved_bytes":128}"#,
        "\n",
        r#"{"kind":"gradient","event_id":"g","root":"loss","key":"w","state":"present","norm":0.5,"storage_bytes":24}"#,
        "\n",
        r#"{"kind":"edge","from_span":"root","to_span":"s1","duration_ns":1}"#,
        "\n",
        r#"{"kind":"span_end","id":"s1","duration_ns":5}"#,
        "\n",
        r#"{"kind":"span_end","id":"root","duration_ns":9}"#,
        "\n",
        r#"{"kind":"capture_sources","sources":[{"source":"allocator","on":true,"events":1,"threshold_bytes":1}],"events_dropped":0,"warnings":["w"]}"#,
        "\n",
        r#"{"kind":"mystery"}"#,
        "\n",
    );

    /// A Chrome file with string track ids, named processes and threads, an instant, a
    /// counter and a skipped phase.
    const EVERY_OPTIONAL_CHROME: &str = r#"{"traceEvents":[
{"ph":"M","name":"process_name","pid":"gpu","tid":"s7","args":{"name":"GPU"}},
{"ph":"M","name":"thread_name","pid":"gpu","tid":"s7","args":{"name":"Stream 7"}},
{"ph":"X","name":"kernel","pid":"gpu","tid":"s7","ts":1,"dur":5},
{"ph":"i","name":"mark","pid":"gpu","tid":"s7","ts":2,"s":"t"},
{"ph":"C","name":"mem","pid":"gpu","tid":"s7","ts":3,"args":{"bytes":7}},
{"ph":"s","name":"flow","pid":"gpu","tid":"s7","ts":4,"id":1}
]}"#;

    #[test]
    fn every_part_agrees_on_a_document_with_every_optional_field_set() {
        let doc = read(EVERY_OPTIONAL.as_bytes());
        let AnyDocument::Trace(t) = &doc else {
            panic!("a trace")
        };
        // Every optional field of every part is set, so each column's present branch crosses.
        let meta = &t.meta.as_ref().unwrap().event;
        assert!(meta.candle_version.is_some());
        let sources = &t.capture_sources.as_ref().unwrap().sources;
        assert!(sources.iter().all(|s| s.threshold_bytes.is_some()));
        assert_eq!(t.spans.len(), 2);
        assert!(t.spans.iter().all(|s| s.pass.is_some()
            && s.module.is_some()
            && s.duration_ns.is_some()
            && s.end_line.is_some()));
        assert!(t.spans[1].parent_id.is_some());
        assert!(t
            .ops
            .iter()
            .all(|o| o.output.is_some() && o.storage_bytes.is_some() && o.inputs.len() == 2));
        assert!(t.tensors.iter().all(|x| x.event.storage_bytes.is_some()));
        assert!(t.memory.iter().all(|m| m.op_name.is_some()));
        assert!(t
            .device_memory
            .iter()
            .all(|d| d.event.reserved_bytes.is_some()));
        assert!(t
            .gradients
            .iter()
            .all(|g| g.event.norm.is_some() && g.event.storage_bytes.is_some()));
        assert_eq!(t.edges.len(), 1);
        let m = &t.memory_profile;
        assert!(m.peak_timestamp_ns.is_some() && m.peak_device.is_some());
        assert!(m.live_at_peak.iter().all(|l| l.op_name.is_some()));
        assert!(m
            .devices
            .iter()
            .all(|d| d.peak_timestamp_ns.is_some() && d.capacity_bytes.is_some()));
        assert!(!m.samples.is_empty());
        assert!(t.skipped_unknown > 0 && !t.diagnostics.is_empty());
        assert_same("every optional", &doc, &decode(&encode_all(&doc)).unwrap());
        assert_same(
            "every optional, small chunks",
            &doc,
            &decode(&chunks_of(&doc, 1)).unwrap(),
        );

        let doc = read(EVERY_OPTIONAL_CHROME.as_bytes());
        let AnyDocument::Trace(t) = &doc else {
            panic!("a trace")
        };
        let chrome = t.chrome.as_ref().unwrap();
        // The stream's track has string ids and both names; the counter's (per process) a
        // number for its thread: both kinds of id cross.
        assert!(chrome
            .tracks
            .iter()
            .any(|t| matches!(t.tid, TrackId::Str(_))
                && matches!(t.pid, TrackId::Str(_))
                && t.process_name.is_some()
                && t.thread_name.is_some()));
        assert!(chrome
            .tracks
            .iter()
            .any(|t| matches!(t.tid, TrackId::Int(_))));
        assert!(chrome.span_tracks.iter().any(Option::is_some));
        assert!(!chrome.instants.is_empty() && !chrome.counters.is_empty());
        assert!(!chrome.skipped.is_empty());
        assert_same(
            "every optional, Chrome",
            &doc,
            &decode(&encode_all(&doc)).unwrap(),
        );

        let doc = read(include_bytes!(
            "../../tests/fixtures/broken_rules.profile.jsonl"
        ));
        let AnyDocument::Profile(p) = &doc else {
            panic!("a profile")
        };
        assert!(p.records.iter().any(|r| !r.violations.is_empty()));
        assert!(!p.diagnostics.is_empty());
        assert_same(
            "every optional, profile",
            &doc,
            &decode(&encode_all(&doc)).unwrap(),
        );
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
        // Cut after every block or part: the n + 1 spans in 4 blocks, then their id index, the
        // tree, the memory profile's head and the Chrome flag (the empty parts between them in
        // the same chunks), then the last chunk with the empty diagnostics.
        let chunks = chunks_of(&doc, 1);
        assert_eq!(chunks.len(), 4 + 4 + 1);
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
        // By hand: the head; for the spans their count and 4 blocks; one step each for the
        // op table's strings and shapes, ops, tensors, the memory table's strings and shapes,
        // memory, device memory, gradients, edges (all empty), the span index, the tree, the
        // memory profile, samples and Chrome; the diagnostics' step ends it (`Done`, not
        // counted).
        assert_eq!(more, 1 + 5 + 15);
        assert_eq!(d.step().unwrap(), Stepped::Done);
        assert!(d.push(&chunks[0]).is_err(), "a chunk after the end");
        let back = d.finish().unwrap();
        assert_same("large", &doc, &back);
    }

    #[test]
    fn tables_whose_pools_span_several_blocks_and_chunks_cross_unchanged() {
        // More ops and memory records than a block, each with ids of its own, so each table's
        // strings cross in several blocks, each in a chunk of its own, and rows refer to
        // strings and shapes sent chunks before; names and shapes repeat across blocks.
        let mut file = many_spans(0);
        let n = BATCH + 10;
        for i in 0..n {
            let (name, dim) = (["add", "matmul", "cuda:0"][i % 3], i % 5);
            file.push_str(&format!(
                "{{\"kind\":\"op\",\"span_id\":\"root\",\"op_name\":\"{name}\",\"inputs\":[\"in{i}\",\"x\"],\"output\":\"out{i}\",\"shape\":[{dim},2],\"dtype\":\"f32\",\"device\":\"cuda:0\",\"duration_ns\":{i},\"timestamp_ns\":{i}}}\n\
                 {{\"kind\":\"memory\",\"timestamp_ns\":{i},\"tensor_id\":\"out{i}\",\"span_id\":\"root\",\"op_name\":\"{name}\",\"device\":\"cuda:0\",\"bytes\":8,\"action\":\"alloc\",\"shape\":[{dim}],\"dtype\":\"f32\",\"category\":\"activation\"}}\n"
            ));
        }
        let doc = read(file.as_bytes());
        let AnyDocument::Trace(t) = &doc else {
            panic!("a trace")
        };
        assert_eq!((t.ops.len(), t.memory.len()), (n, n));
        assert!(t.ops.pools().strings().len() > 2 * BATCH);
        assert!(t.memory.pools().strings().len() > BATCH);
        assert_eq!(t.ops.pools().shapes().len(), 5);
        let chunks = chunks_of(&doc, 1);
        assert_same("pools in blocks", &doc, &decode(&chunks).unwrap());
        assert_same(
            "pools, one chunk",
            &doc,
            &decode(&encode_all(&doc)).unwrap(),
        );
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
        // bytes_read (16), two absent flags (2), the ten record parts' counts, all 0 (80), the
        // spans' count (8), then their table's row count (8) and column count (4). Each column
        // is its length (8) and its bytes: the id's end (4) at byte 131, its byte "a" at 143,
        // the parent's bitmap (1) at 152, end (4) at 161 and no bytes, then the name's index
        // into the string table (4) at byte 181.
        let file = "{\"kind\":\"span_start\",\"id\":\"a\",\"name\":\"n\",\"start_ns\":0,\"span_kind\":\"op\"}\n";
        let chunks = encode_all(&read(file.as_bytes()));
        assert_eq!(chunks.len(), 1);
        let body = body_of(&chunks[0]);
        let (id, name) = (body + 131, body + 181);
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
        assert!(with(name, wire::NONE).is_err(), "an absent name");
        assert!(with(name, 0).is_ok(), "the name's own index");
    }

    #[test]
    fn a_row_number_outside_its_pools_is_an_error() {
        let AnyDocument::Trace(t) = read(EVERY_OPTIONAL.as_bytes()) else {
            panic!("a trace")
        };
        // The op's and the memory record's table, read into tables without pools, then with.
        let no_strings = StringPool::default();
        let mut ops = ops::Ops::<columns::Write>::new(1);
        ops::write(
            &mut ops,
            &mut Strings::default(),
            (&t.ops.cells()[0], t.ops.inputs_of(0)),
        );
        let mut out = Out::default();
        ops.finish(1, &mut out);
        let table = In::new(&out.buf, 0).table().unwrap();
        let mut back = OpTable::new();
        let e = ops::read(&mut back, &table, &out.buf, no_strings.strs()).unwrap_err();
        assert!(e.to_string().contains("op 0 of its block: shape"), "{e}");
        for s in t.ops.pools().strings() {
            back.pools_mut().push_string(s);
        }
        for dims in t.ops.pools().shapes() {
            back.pools_mut().push_shape(dims).unwrap();
        }
        ops::read(&mut back, &table, &out.buf, no_strings.strs()).unwrap();
        assert_eq!(back, t.ops);

        let mut memory = memory::Memory::<columns::Write>::new(1);
        memory::write(&mut memory, &mut Strings::default(), &t.memory.cells()[0]);
        let mut out = Out::default();
        memory.finish(1, &mut out);
        let table = In::new(&out.buf, 0).table().unwrap();
        let mut back = MemoryTable::new();
        back.pools_mut().push_shape(&[2, 3]).unwrap();
        let e = memory::read(&mut back, &table, &out.buf, no_strings.strs()).unwrap_err();
        assert!(
            e.to_string()
                .contains("memory record 0 of its block: string"),
            "{e}"
        );
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
            let module = if i % 2 == 0 {
                format!(",\"module\":\"m.{}\"", i % 5)
            } else {
                String::new()
            };
            f.push_str(&format!(
                "{{\"kind\":\"span_start\",\"id\":\"s{i}\"{parent},\"name\":\"n{}\",\"start_ns\":{start},\"span_kind\":\"{}\",\"measured\":{measured}{step}{module}}}\n",
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
            let bytes = if i % 3 == 0 {
                format!(",\"storage_bytes\":{}", i * 8)
            } else {
                String::new()
            };
            f.push_str(&format!(
                "{{\"kind\":\"gradient\",\"event_id\":\"g{i}\",\"root\":\"loss\",\"key\":\"w{i}\",\"state\":\"{state}\"{norm}{bytes}}}\n{{\"kind\":\"edge\",\"from_span\":\"s0\",\"to_span\":\"s{i}\",\"duration_ns\":{i}}}\n"
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
            let (early, rest, _) = staged(file.as_bytes(), 1).unwrap();
            let all: Vec<Vec<u8>> = early.into_iter().chain(rest).collect();
            assert_same("generated, in stages", &doc, &decode(&all).unwrap());
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
