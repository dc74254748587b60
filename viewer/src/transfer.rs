//! Moving a read document from the parsing worker to the page.
//!
//! The worker reads and analyses the file; the page needs the finished [`AnyDocument`]. Web
//! Workers share no memory with the page, so the document crosses as bytes: [`encode`] writes
//! it as a sequence of frames (MessagePack, each frame a bounded batch of records), and the
//! page's [`Decoder`] turns one frame back into records per [`Decoder::step`], yielding to the
//! browser between steps, so no single task on the page grows with the file.
//!
//! Layout: frames back to back, each a little-endian `u32` length and that many bytes of a
//! MessagePack-encoded [`Frame`]. The records a trace has many of (ops, tensors, memory
//! events) go as arrays of their fields in a fixed order ([`OpRows`], [`TensorRows`],
//! [`MemoryRows`]), absent optionals as nil; the few other event records write structs as
//! maps, so the trace types' JSON-shaped serde attributes (omitted optional fields) work
//! unchanged; frames of plain types (spans, the tree, the memory profile) write them as
//! arrays. The first frame says which kind of document follows; [`Frame::End`] closes it.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Serialize};

use candle_trace_schema::format::chrome::ChromeImport;
use candle_trace_schema::format::detect::{AnyDocument, Format};
use candle_trace_schema::format::diagnostics::Diagnostic;
use candle_trace_schema::format::document::{Lined, Span, TraceDocument};
use candle_trace_schema::format::events::{
    CaptureSources, CompactString, DeviceMemory, Edge, Gradient, MemoryAction, MemoryEvent, Meta,
    Op, TensorCategory, TensorEvent,
};
use candle_trace_schema::format::memory::MemoryProfile;
use candle_trace_schema::format::profile::{ProfileDocument, ProfileRecord};
use candle_trace_schema::format::spans::{SpanTree, SpanTreeParts};

/// Records per frame: small enough that decoding one frame is a short task on the page
/// (a few milliseconds for spans), large enough that framing costs nothing.
pub const BATCH: usize = 8192;

/// Defines a batch of `Lined<$event>` records that crosses as MessagePack arrays of
/// `(line, fields...)` in the order listed, so decoding matches no keys (about twice as fast
/// as maps) and an absent optional is a nil rather than a missing key.
macro_rules! rows {
    ($(#[$doc:meta])* $name:ident, $event:ident { $($field:ident: $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name<'a>(pub Cow<'a, [Lined<$event>]>);

        impl Serialize for $name<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq(self.0.iter().map(|r| (r.line, $(&r.event.$field),*)))
            }
        }

        impl<'de> Deserialize<'de> for $name<'_> {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let rows = Vec::<(u64, $($ty),*)>::deserialize(d)?;
                Ok($name(Cow::Owned(
                    rows.into_iter()
                        .map(|(line, $($field),*)| Lined { line, event: $event { $($field),* } })
                        .collect(),
                )))
            }
        }
    };
}

rows!(
    /// A batch of ops, as arrays.
    OpRows,
    Op {
        span_id: CompactString,
        op_name: CompactString,
        inputs: Vec<CompactString>,
        output: Option<CompactString>,
        shape: Vec<u64>,
        dtype: CompactString,
        device: CompactString,
        duration_ns: u64,
        timestamp_ns: u64,
        storage_bytes: Option<u64>,
        input_storage_bytes: u64,
    }
);

rows!(
    /// A batch of tensors, as arrays.
    TensorRows,
    TensorEvent {
        span_id: CompactString,
        tensor_id: CompactString,
        shape: Vec<u64>,
        dtype: CompactString,
        device: CompactString,
        requires_grad: bool,
        storage_bytes: Option<u64>,
        category: TensorCategory,
    }
);

rows!(
    /// A batch of memory events, as arrays.
    MemoryRows,
    MemoryEvent {
        timestamp_ns: u64,
        tensor_id: CompactString,
        span_id: CompactString,
        op_name: Option<CompactString>,
        device: CompactString,
        bytes: u64,
        action: MemoryAction,
        shape: Vec<u64>,
        dtype: CompactString,
        category: TensorCategory,
    }
);

/// One frame of an encoded document.
#[derive(Debug, Serialize, Deserialize)]
pub enum Frame<'a> {
    /// An execution trace follows: its scalars and meta.
    TraceStart {
        /// Number of spans that follow (the page reserves room for them at once, rather than
        /// growing, and rehashing, step by step).
        span_count: u64,
        /// `TraceDocument::meta`.
        meta: Option<Cow<'a, Lined<Meta>>>,
        /// `TraceDocument::skipped_unknown`.
        skipped_unknown: u64,
        /// `TraceDocument::bytes_read`.
        bytes_read: u64,
    },
    /// A batch of spans, in order.
    Spans(Cow<'a, [Span]>),
    /// A batch of ops.
    Ops(OpRows<'a>),
    /// A batch of tensors.
    Tensors(TensorRows<'a>),
    /// A batch of memory events.
    Memory(MemoryRows<'a>),
    /// A batch of device checkpoints.
    DeviceMemory(Cow<'a, [Lined<DeviceMemory>]>),
    /// A batch of gradients.
    Gradients(Cow<'a, [Lined<Gradient>]>),
    /// A batch of edges.
    Edges(Cow<'a, [Lined<Edge>]>),
    /// The span tree's scalars; its arrays follow in batches.
    TreeStart {
        /// `SpanTree::roots`.
        roots: Cow<'a, [u32]>,
        /// `SpanTree::max_depth`.
        max_depth: u32,
    },
    /// A batch of `SpanTree::parent`.
    TreeParent(Cow<'a, [Option<u32>]>),
    /// A batch of `SpanTree::depth`.
    TreeDepth(Cow<'a, [u32]>),
    /// A batch of `SpanTree::self_ns`.
    TreeSelf(Cow<'a, [u64]>),
    /// A batch of the tree's child offsets.
    TreeChildStart(Cow<'a, [u32]>),
    /// A batch of the tree's child list.
    TreeChildList(Cow<'a, [u32]>),
    /// The memory profile.
    MemoryProfile(Cow<'a, MemoryProfile>),
    /// What an imported Chrome JSON file held beyond spans.
    Chrome(Cow<'a, ChromeImport>),
    /// `TraceDocument::capture_sources` (sent only when the file has that line).
    CaptureSources(Cow<'a, Lined<CaptureSources>>),
    /// An inference profile follows.
    ProfileStart,
    /// A batch of profile records.
    ProfileRecords(Cow<'a, [ProfileRecord]>),
    /// A file that could not be read, and its recognised format.
    Unsupported {
        /// The recognised format.
        format: Option<Format>,
    },
    /// A batch of diagnostics (any kind of document).
    Diagnostics(Cow<'a, [Diagnostic]>),
    /// The document is complete.
    End,
}

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

/// Whether a frame's structs must be written as maps: the event types omit absent optional
/// fields (their JSON shape), which only a map can express. The others are written as arrays,
/// which decode about twice as fast (no key matching); the decoder reads either.
fn needs_field_names(frame: &Frame<'_>) -> bool {
    !matches!(
        frame,
        Frame::Spans(_)
            | Frame::Ops(_)
            | Frame::Tensors(_)
            | Frame::Memory(_)
            | Frame::TreeStart { .. }
            | Frame::TreeParent(_)
            | Frame::TreeDepth(_)
            | Frame::TreeSelf(_)
            | Frame::TreeChildStart(_)
            | Frame::TreeChildList(_)
            | Frame::MemoryProfile(_)
            | Frame::Chrome(_)
            | Frame::ProfileStart
            | Frame::Unsupported { .. }
            | Frame::End
    )
}

fn push_frame(out: &mut Vec<u8>, frame: &Frame<'_>) {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    // Writing to a Vec cannot fail, and every type here serializes (plain data, string keys).
    let written = if needs_field_names(frame) {
        rmp_serde::encode::write_named(out, frame)
    } else {
        rmp_serde::encode::write(out, frame)
    };
    if written.is_err() {
        out.truncate(at);
        return;
    }
    let len = (out.len() - at - 4) as u32;
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
}

/// Numbers per frame of the tree's arrays (plain integers decode far faster than records).
const TREE_BATCH: usize = 8 * BATCH;

fn push_batches<'a, T: Clone>(
    out: &mut Vec<u8>,
    items: &'a [T],
    frame: impl Fn(Cow<'a, [T]>) -> Frame<'a>,
) where
    [T]: ToOwned<Owned = Vec<T>>,
{
    push_batches_of(out, items, BATCH, frame)
}

fn push_batches_of<'a, T: Clone>(
    out: &mut Vec<u8>,
    items: &'a [T],
    batch: usize,
    frame: impl Fn(Cow<'a, [T]>) -> Frame<'a>,
) where
    [T]: ToOwned<Owned = Vec<T>>,
{
    for chunk in items.chunks(batch) {
        push_frame(out, &frame(Cow::Borrowed(chunk)));
    }
}

/// Encode a document as frames.
pub fn encode(doc: &AnyDocument) -> Vec<u8> {
    let mut out = Vec::new();
    let diagnostics = match doc {
        AnyDocument::Trace(t) => {
            push_frame(
                &mut out,
                &Frame::TraceStart {
                    span_count: t.spans.len() as u64,
                    meta: t.meta.as_ref().map(Cow::Borrowed),
                    skipped_unknown: t.skipped_unknown,
                    bytes_read: t.bytes_read,
                },
            );
            push_batches(&mut out, &t.spans, Frame::Spans);
            push_batches(&mut out, &t.ops, |b| Frame::Ops(OpRows(b)));
            push_batches(&mut out, &t.tensors, |b| Frame::Tensors(TensorRows(b)));
            push_batches(&mut out, &t.memory, |b| Frame::Memory(MemoryRows(b)));
            push_batches(&mut out, &t.device_memory, Frame::DeviceMemory);
            push_batches(&mut out, &t.gradients, Frame::Gradients);
            push_batches(&mut out, &t.edges, Frame::Edges);
            let tree = &t.tree;
            push_frame(
                &mut out,
                &Frame::TreeStart {
                    roots: Cow::Borrowed(&tree.roots),
                    max_depth: tree.max_depth,
                },
            );
            let (child_start, child_list) = tree.child_rows();
            push_batches_of(&mut out, &tree.parent, TREE_BATCH, Frame::TreeParent);
            push_batches_of(&mut out, &tree.depth, TREE_BATCH, Frame::TreeDepth);
            push_batches_of(&mut out, &tree.self_ns, TREE_BATCH, Frame::TreeSelf);
            push_batches_of(&mut out, child_start, TREE_BATCH, Frame::TreeChildStart);
            push_batches_of(&mut out, child_list, TREE_BATCH, Frame::TreeChildList);
            push_frame(
                &mut out,
                &Frame::MemoryProfile(Cow::Borrowed(&t.memory_profile)),
            );
            if let Some(chrome) = &t.chrome {
                push_frame(&mut out, &Frame::Chrome(Cow::Borrowed(&**chrome)));
            }
            if let Some(sources) = &t.capture_sources {
                push_frame(&mut out, &Frame::CaptureSources(Cow::Borrowed(sources)));
            }
            &t.diagnostics
        }
        AnyDocument::Profile(p) => {
            push_frame(&mut out, &Frame::ProfileStart);
            push_batches(&mut out, &p.records, Frame::ProfileRecords);
            &p.diagnostics
        }
        AnyDocument::Unsupported {
            format,
            diagnostics,
        } => {
            push_frame(&mut out, &Frame::Unsupported { format: *format });
            diagnostics
        }
    };
    push_batches(&mut out, diagnostics, Frame::Diagnostics);
    push_frame(&mut out, &Frame::End);
    out
}

/// The document being rebuilt.
enum Partial {
    Empty,
    Trace(Box<TraceDocument>, Box<SpanTreeParts>),
    Profile(ProfileDocument),
    Unsupported {
        format: Option<Format>,
        diagnostics: Vec<Diagnostic>,
    },
}

/// Rebuilds a document from frames handed over one at a time (the page copies each frame out
/// of the worker's buffer as it goes).
pub struct Assembler {
    doc: Partial,
    done: bool,
}

impl Default for Assembler {
    fn default() -> Self {
        Self::new()
    }
}

impl Assembler {
    /// Nothing assembled yet.
    pub fn new() -> Self {
        Assembler {
            doc: Partial::Empty,
            done: false,
        }
    }

    /// Add one frame's bytes (without the length prefix); `Ok(true)` once the document is
    /// complete.
    pub fn apply_frame(&mut self, body: &[u8]) -> Result<bool, TransferError> {
        if self.done {
            return Err(TransferError("a frame after the end".into()));
        }
        let frame: Frame<'static> =
            rmp_serde::from_slice(body).map_err(|e| TransferError(format!("bad frame: {e}")))?;
        self.apply(frame)?;
        Ok(self.done)
    }

    fn apply(&mut self, frame: Frame<'static>) -> Result<(), TransferError> {
        let unexpected = |what: &str| TransferError(format!("unexpected {what} frame"));
        match (frame, &mut self.doc) {
            (
                Frame::TraceStart {
                    span_count,
                    meta,
                    skipped_unknown,
                    bytes_read,
                },
                Partial::Empty,
            ) => {
                let mut doc = TraceDocument::default();
                doc.meta = meta.map(Cow::into_owned);
                doc.skipped_unknown = skipped_unknown;
                doc.bytes_read = bytes_read;
                // A bound, not a promise: a broken count costs only a smaller reservation.
                doc.reserve_spans(usize::try_from(span_count).unwrap_or(0).min(1 << 26));
                self.doc = Partial::Trace(Box::new(doc), Box::default());
            }
            (Frame::ProfileStart, Partial::Empty) => {
                self.doc = Partial::Profile(ProfileDocument::default());
            }
            (Frame::Unsupported { format }, Partial::Empty) => {
                self.doc = Partial::Unsupported {
                    format,
                    diagnostics: Vec::new(),
                };
            }
            (Frame::Spans(b), Partial::Trace(d, _)) => {
                // Indexed as they arrive, so no single step indexes every span.
                let start = d.spans.len();
                d.spans.extend(b.into_owned());
                d.index_spans_from(start);
            }
            (Frame::Ops(b), Partial::Trace(d, _)) => d.ops.extend(b.0.into_owned()),
            (Frame::Tensors(b), Partial::Trace(d, _)) => d.tensors.extend(b.0.into_owned()),
            (Frame::Memory(b), Partial::Trace(d, _)) => d.memory.extend(b.0.into_owned()),
            (Frame::DeviceMemory(b), Partial::Trace(d, _)) => {
                d.device_memory.extend(b.into_owned())
            }
            (Frame::Gradients(b), Partial::Trace(d, _)) => d.gradients.extend(b.into_owned()),
            (Frame::Edges(b), Partial::Trace(d, _)) => d.edges.extend(b.into_owned()),
            (Frame::TreeStart { roots, max_depth }, Partial::Trace(_, t)) => {
                t.roots = roots.into_owned();
                t.max_depth = max_depth;
            }
            (Frame::TreeParent(b), Partial::Trace(_, t)) => t.parent.extend(b.iter().copied()),
            (Frame::TreeDepth(b), Partial::Trace(_, t)) => t.depth.extend(b.iter().copied()),
            (Frame::TreeSelf(b), Partial::Trace(_, t)) => t.self_ns.extend(b.iter().copied()),
            (Frame::TreeChildStart(b), Partial::Trace(_, t)) => {
                t.child_start.extend(b.iter().copied())
            }
            (Frame::TreeChildList(b), Partial::Trace(_, t)) => {
                t.child_list.extend(b.iter().copied())
            }
            (Frame::MemoryProfile(m), Partial::Trace(d, _)) => d.memory_profile = m.into_owned(),
            (Frame::Chrome(c), Partial::Trace(d, _)) => d.chrome = Some(Box::new(c.into_owned())),
            (Frame::CaptureSources(c), Partial::Trace(d, _)) => {
                d.capture_sources = Some(c.into_owned())
            }
            (Frame::ProfileRecords(b), Partial::Profile(p)) => p.records.extend(b.into_owned()),
            (Frame::Diagnostics(b), Partial::Trace(d, _)) => d.diagnostics.extend(b.into_owned()),
            (Frame::Diagnostics(b), Partial::Profile(p)) => p.diagnostics.extend(b.into_owned()),
            (Frame::Diagnostics(b), Partial::Unsupported { diagnostics, .. }) => {
                diagnostics.extend(b.into_owned())
            }
            (Frame::End, Partial::Empty) => return Err(unexpected("end")),
            (Frame::End, _) => self.done = true,
            (Frame::TraceStart { .. }, _) => return Err(unexpected("second start")),
            (Frame::ProfileStart, _) => return Err(unexpected("second start")),
            (Frame::Unsupported { .. }, _) => return Err(unexpected("second start")),
            (_, Partial::Empty) => return Err(unexpected("record before the start")),
            (_, _) => return Err(unexpected("record of another document kind")),
        }
        Ok(())
    }

    /// The rebuilt document, once [`apply_frame`](Self::apply_frame) has returned `Ok(true)`.
    pub fn finish(self) -> Result<AnyDocument, TransferError> {
        if !self.done {
            return Err(TransferError("the document ended early".into()));
        }
        Ok(match self.doc {
            Partial::Trace(mut d, tree) => {
                // A document without spans has an empty tree (no offsets at all).
                if !(d.spans.is_empty() && tree.child_start.is_empty()) {
                    d.tree = SpanTree::from_parts(*tree)
                        .map_err(|e| TransferError(format!("span tree: {e}")))?;
                }
                AnyDocument::Trace(d)
            }
            Partial::Profile(p) => AnyDocument::Profile(p),
            Partial::Unsupported {
                format,
                diagnostics,
            } => AnyDocument::Unsupported {
                format,
                diagnostics,
            },
            Partial::Empty => return Err(TransferError("no document".into())),
        })
    }
}

/// Rebuilds a document from [`encode`]'s bytes, a frame at a time.
pub struct Decoder<B> {
    bytes: B,
    at: usize,
    assembler: Assembler,
}

impl<B: AsRef<[u8]>> Decoder<B> {
    /// A decoder over encoded bytes.
    pub fn new(bytes: B) -> Self {
        Decoder {
            bytes,
            at: 0,
            assembler: Assembler::new(),
        }
    }

    /// Bytes decoded so far.
    pub fn position(&self) -> usize {
        self.at
    }

    /// Decode the next frame; `Ok(true)` once the document is complete.
    pub fn step(&mut self) -> Result<bool, TransferError> {
        if self.assembler.done {
            return Ok(true);
        }
        let bytes = self.bytes.as_ref();
        let head = bytes
            .get(self.at..self.at + 4)
            .ok_or_else(|| TransferError(format!("truncated at byte {}", self.at)))?;
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let body = bytes
            .get(self.at + 4..self.at + 4 + len)
            .ok_or_else(|| TransferError(format!("frame at byte {} is truncated", self.at)))?;
        let done = self
            .assembler
            .apply_frame(body)
            .map_err(|e| TransferError(format!("at byte {}: {}", self.at, e.0)))?;
        self.at += 4 + len;
        Ok(done)
    }

    /// The rebuilt document, once [`step`](Self::step) has returned `Ok(true)`.
    pub fn finish(self) -> Result<AnyDocument, TransferError> {
        self.assembler.finish()
    }
}

/// Decode all of `bytes` at once (tests and small documents).
pub fn decode(bytes: &[u8]) -> Result<AnyDocument, TransferError> {
    let mut d = Decoder::new(bytes);
    while !d.step()? {}
    d.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_trace_schema::format::detect::AnyReader;

    fn read(bytes: &[u8]) -> AnyDocument {
        let mut r = AnyReader::new();
        r.push(bytes);
        r.finish()
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
        for (name, bytes) in &files {
            let doc = read(bytes);
            let back = decode(&encode(&doc)).unwrap();
            assert_same(name, &doc, &back);
        }
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
        let back = decode(&encode(&doc)).unwrap();
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
            let back = decode(&encode(&doc)).unwrap();
            assert_same("unsupported", &doc, &back);
        }
    }

    #[test]
    fn large_documents_are_split_into_bounded_frames() {
        let mut file = String::from(concat!(
            r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","#,
            r#""entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00Z","#,
            r#""capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#,
            "\n",
            r#"{"kind":"span_start","id":"root","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
            "\n"
        ));
        let n = 3 * BATCH + 5;
        for i in 0..n {
            file.push_str(&format!(
                "{{\"kind\":\"span_start\",\"id\":\"s{i}\",\"parent_id\":\"root\",\"name\":\"op\",\"start_ns\":{i},\"span_kind\":\"op\"}}\n{{\"kind\":\"span_end\",\"id\":\"s{i}\",\"duration_ns\":1}}\n"
            ));
        }
        file.push_str(&format!(
            "{{\"kind\":\"span_end\",\"id\":\"root\",\"duration_ns\":{}}}\n",
            n + 1
        ));
        let doc = read(file.as_bytes());
        let bytes = encode(&doc);
        let mut d = Decoder::new(&bytes[..]);
        let mut steps = 0;
        while !d.step().unwrap() {
            steps += 1;
        }
        // start, 4 span batches (n + 1 spans), the tree's start and five arrays (each under
        // one tree batch), memory profile, (no diagnostics), end.
        assert_eq!(steps + 1, 1 + 4 + 6 + 1 + 1);
        assert_eq!(d.position(), bytes.len());
        let back = d.finish().unwrap();
        assert_same("large", &doc, &back);
    }

    #[test]
    fn truncated_or_foreign_bytes_are_errors_not_panics() {
        let doc = read(include_bytes!(
            "../../tests/fixtures/train_step.trace6.jsonl"
        ));
        let bytes = encode(&doc);
        for cut in [0, 3, 4, 10, bytes.len() / 2, bytes.len() - 1] {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        assert!(decode(b"\x05\x00\x00\x00hello").is_err());
        let mut d = Decoder::new(&bytes[..]);
        d.step().unwrap();
        assert!(d.finish().is_err(), "finish before the end frame");
    }
}
