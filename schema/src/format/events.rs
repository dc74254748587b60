//! Event types of the execution trace `candle-graph/trace/6` (SCHEMA.md §1).
//!
//! Field and enum names follow SCHEMA.md exactly. On write, `Option` fields are omitted when
//! `None`; on read, `null` is accepted for every optional or defaulted field and unknown fields
//! are ignored. [`decode_line`] turns one JSONL line into a [`TraceEvent`].

use alloc::borrow::Cow;
use alloc::collections::BTreeMap;
use alloc::string::String;

use alloc::vec::Vec;
/// The string type of the records a trace has many of (spans, ops, tensors, memory events):
/// ids, names, dtypes and devices of up to 24 bytes (12 on 32-bit targets such as wasm32) are
/// stored inline, so reading a large trace does not allocate once per field.
pub use compact_str::CompactString;
use serde::{Deserialize, Deserializer, Serialize};

use crate::format::diagnostics::{classify_json_error, Category};

pub(crate) mod fast;
pub mod line;

use fast::Raw;

/// The `schema` value of a trace/6 `meta` line.
pub const TRACE_SCHEMA: &str = "candle-graph/trace/6";

/// Read `null` as the type's default (SCHEMA.md: readers accept `null` for optional fields).
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Whether the run was a training update or an inference invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// A training update.
    Train,
    /// An inference invocation.
    Infer,
}

/// How nested span durations were taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimingMode {
    /// Host wall clock only; device work may still be in flight at a span's edges.
    Host,
    /// Every span synchronized the device at its edges.
    DeviceSynchronized,
}

/// What a span stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpanKind {
    /// A function or free-form region.
    Function,
    /// A single tensor operation.
    Op,
    /// A model module (`Linear`, `Attention` ...).
    Module,
}

impl SpanKind {
    /// Every kind, in declaration order.
    pub const ALL: [SpanKind; 3] = [SpanKind::Function, SpanKind::Op, SpanKind::Module];

    /// The snake_case spelling, as in the file (the serde name).
    pub const fn as_str(self) -> &'static str {
        match self {
            SpanKind::Function => "function",
            SpanKind::Op => "op",
            SpanKind::Module => "module",
        }
    }
}

/// The part of a training update a span belongs to (the `step` key's values; a training
/// iteration is a *step* elsewhere, as in `capture_step`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pass {
    /// Forward pass.
    Forward,
    /// Backward pass.
    Backward,
    /// Optimizer update.
    Optimizer,
}

impl Pass {
    /// Every pass, in training order.
    pub const ALL: [Pass; 3] = [Pass::Forward, Pass::Backward, Pass::Optimizer];

    /// The snake_case spelling, as in the file (the serde name).
    pub const fn as_str(self) -> &'static str {
        match self {
            Pass::Forward => "forward",
            Pass::Backward => "backward",
            Pass::Optimizer => "optimizer",
        }
    }
}

/// What a tensor or an allocation holds.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum TensorCategory {
    /// Model weights.
    Parameter,
    /// Intermediate values of the forward pass.
    Activation,
    /// Gradients.
    Gradient,
    /// Optimizer state (moments ...).
    Optimizer,
    /// Anything else (the default).
    #[default]
    Other,
}

impl TensorCategory {
    /// All categories, in display order.
    pub const ALL: [TensorCategory; 5] = [
        TensorCategory::Parameter,
        TensorCategory::Activation,
        TensorCategory::Gradient,
        TensorCategory::Optimizer,
        TensorCategory::Other,
    ];

    /// The snake_case spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TensorCategory::Parameter => "parameter",
            TensorCategory::Activation => "activation",
            TensorCategory::Gradient => "gradient",
            TensorCategory::Optimizer => "optimizer",
            TensorCategory::Other => "other",
        }
    }

    /// Position in [`TensorCategory::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Whether a `memory` line allocates or frees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryAction {
    /// Bytes became live.
    Alloc,
    /// Bytes were released.
    Free,
}

impl MemoryAction {
    /// The snake_case spelling, as in the file (the serde name).
    pub const fn as_str(self) -> &'static str {
        match self {
            MemoryAction::Alloc => "alloc",
            MemoryAction::Free => "free",
        }
    }
}

/// What a parameter's gradient looked like after backward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GradientState {
    /// A finite, non-zero gradient.
    Present,
    /// No gradient at all (frozen or disconnected parameter).
    Missing,
    /// A gradient that is exactly zero everywhere.
    Zero,
    /// A gradient with NaN or infinite entries.
    NonFinite,
}

impl GradientState {
    /// All states, in display order.
    pub const ALL: [GradientState; 4] = [
        GradientState::Present,
        GradientState::Missing,
        GradientState::Zero,
        GradientState::NonFinite,
    ];

    /// The snake_case spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            GradientState::Present => "present",
            GradientState::Missing => "missing",
            GradientState::Zero => "zero",
            GradientState::NonFinite => "non_finite",
        }
    }
}

/// The `meta` line: who captured what, how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// Must equal [`TRACE_SCHEMA`].
    pub schema: String,
    /// Stable id of this probe run.
    pub run_id: String,
    /// Caller-owned key shared with NVTX range labels and external artifacts.
    pub correlation_id: String,
    /// Analysed entry point, e.g. `train::loss`.
    pub entrypoint: String,
    /// Training or inference.
    pub phase: Phase,
    /// ISO-8601 capture time.
    pub timestamp: String,
    /// One-based optimizer update or inference invocation that was captured.
    pub capture_step: u64,
    /// Completed invocations before the captured one.
    pub warmup_steps: u64,
    /// Device requested by the caller: `cpu`, `cuda:0` ...
    pub device: String,
    /// The measured region is bounded by device synchronizations.
    #[serde(default, deserialize_with = "null_as_default")]
    pub measured_region_device_synchronized: bool,
    /// How nested span durations were taken.
    pub timing_mode: TimingMode,
    /// Provenance: batch size, git revision ...
    pub tags: BTreeMap<String, String>,
    /// candle version of the captured binary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candle_version: Option<String>,
}

/// A span opened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpanStart {
    /// Unique in the stream.
    pub id: CompactString,
    /// Enclosing span; absent for a root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<CompactString>,
    /// Display name.
    pub name: CompactString,
    /// Monotonic ns since the run started.
    pub start_ns: u64,
    /// Function, op or module.
    pub span_kind: SpanKind,
    /// True only for the caller-controlled region that is the run's performance total.
    #[serde(default, deserialize_with = "null_as_default")]
    pub measured: bool,
    /// The pass (forward, backward, optimizer) the span belongs to: the file's `step` key.
    #[serde(rename = "step", default, skip_serializing_if = "Option::is_none")]
    pub pass: Option<Pass>,
    /// The module it runs, named by the weights it loaded (`model.layers.0.self_attn.q_proj`;
    /// SCHEMA.md §4, "Module names").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<CompactString>,
}

/// A span closed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpanEnd {
    /// Id of the span being closed.
    pub id: CompactString,
    /// Wall duration of the span.
    #[serde(default, deserialize_with = "null_as_default")]
    pub duration_ns: u64,
}

/// A timed operation inside a span.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// Span the op ran in.
    pub span_id: CompactString,
    /// Operation name (`matmul`, `add` ...).
    pub op_name: CompactString,
    /// Input tensor ids.
    #[serde(default, deserialize_with = "null_as_default")]
    pub inputs: Vec<CompactString>,
    /// Output tensor id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<CompactString>,
    /// Output shape.
    #[serde(default, deserialize_with = "null_as_default")]
    pub shape: Vec<u64>,
    /// Output dtype (`f32`, `bf16` ...).
    pub dtype: CompactString,
    /// Device the op ran on.
    pub device: CompactString,
    /// How long the op took.
    pub duration_ns: u64,
    /// When the op started, ns since the run started.
    #[serde(default, deserialize_with = "null_as_default")]
    pub timestamp_ns: u64,
    /// Dense output bytes; see [`Op::output_bytes`] for the derived value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_bytes: Option<u64>,
    /// Bytes of all inputs.
    #[serde(default, deserialize_with = "null_as_default")]
    pub input_storage_bytes: u64,
}

impl Op {
    /// `storage_bytes`, or product(shape) × size(dtype) when absent.
    pub fn output_bytes(&self) -> u64 {
        self.storage_bytes
            .unwrap_or_else(|| derived_storage_bytes(&self.shape, &self.dtype))
    }

    /// [`Op::output_bytes`] where the record says it: `None` without `storage_bytes` and a
    /// dtype of known size to derive it from (a leaf layer's row, which carries no tensor).
    pub fn known_output_bytes(&self) -> Option<u64> {
        known_output_bytes(self.storage_bytes, &self.shape, &self.dtype)
    }
}

/// `storage_bytes`, or product(shape) × size(dtype) when absent and the dtype's size is known;
/// `None` when neither says it.
pub fn known_output_bytes(storage_bytes: Option<u64>, shape: &[u64], dtype: &str) -> Option<u64> {
    storage_bytes.or_else(|| dtype_size(dtype).map(|_| derived_storage_bytes(shape, dtype)))
}

/// A tensor observed in a span.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorEvent {
    /// Span the tensor was observed in.
    pub span_id: CompactString,
    /// Tensor id.
    pub tensor_id: CompactString,
    /// Shape.
    #[serde(default, deserialize_with = "null_as_default")]
    pub shape: Vec<u64>,
    /// Dtype.
    pub dtype: CompactString,
    /// Device.
    pub device: CompactString,
    /// Whether the tensor tracks gradients.
    #[serde(default, deserialize_with = "null_as_default")]
    pub requires_grad: bool,
    /// Dense bytes; see [`TensorEvent::bytes`] for the derived value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_bytes: Option<u64>,
    /// What the tensor holds.
    #[serde(default, deserialize_with = "null_as_default")]
    pub category: TensorCategory,
}

impl TensorEvent {
    /// `storage_bytes`, or product(shape) × size(dtype) when absent.
    pub fn bytes(&self) -> u64 {
        self.storage_bytes
            .unwrap_or_else(|| derived_storage_bytes(&self.shape, &self.dtype))
    }
}

/// An allocation or a free.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryEvent {
    /// When it happened, ns since the run started.
    pub timestamp_ns: u64,
    /// Tensor the bytes belong to.
    pub tensor_id: CompactString,
    /// Span it happened in.
    pub span_id: CompactString,
    /// Op that caused it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op_name: Option<CompactString>,
    /// Device holding the bytes.
    pub device: CompactString,
    /// Number of bytes.
    pub bytes: u64,
    /// Alloc or free.
    pub action: MemoryAction,
    /// Tensor shape.
    #[serde(default, deserialize_with = "null_as_default")]
    pub shape: Vec<u64>,
    /// Tensor dtype.
    pub dtype: CompactString,
    /// What the bytes hold.
    #[serde(default, deserialize_with = "null_as_default")]
    pub category: TensorCategory,
}

/// A device-level memory checkpoint (cudaMemGetInfo-style).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceMemory {
    /// When it was taken, ns since the run started.
    pub timestamp_ns: u64,
    /// Device.
    pub device: String,
    /// Bytes in use on the device.
    pub used_bytes: u64,
    /// Bytes free on the device.
    pub free_bytes: u64,
    /// Bytes reserved by the framework's caching allocator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_bytes: Option<u64>,
}

/// One parameter's gradient fact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gradient {
    /// Event id.
    pub event_id: String,
    /// VarMap / VarBuilder name the parameter lives under.
    pub root: String,
    /// Parameter name under `root`.
    pub key: String,
    /// Present, missing, zero or non-finite.
    pub state: GradientState,
    /// L2 norm of the gradient.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub norm: Option<f64>,
    /// The parameter's bytes (elements × element size; SCHEMA.md §4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_bytes: Option<u64>,
}

/// Timing between two spans.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Edge {
    /// Source span id.
    pub from_span: String,
    /// Target span id.
    pub to_span: String,
    /// Time between them.
    pub duration_ns: u64,
}

/// The names of the capture sources a [`CaptureSources`] line reports on: defined once here,
/// written by `capture` and read by every tool.
pub mod source {
    /// Spans from `tracing` (capture's `TraceLayer`).
    pub const TRACING: &str = "tracing";
    /// Timed ops of candle layers.
    pub const LAYER_OPS: &str = "layer_ops";
    /// The counting allocator's `memory` records.
    pub const ALLOCATOR: &str = "allocator";
    /// The tensor graph (`tensor` records and op inputs/outputs).
    pub const GRAPH: &str = "graph";
    /// `device_memory` checkpoints.
    pub const DEVICE_MEMORY: &str = "device_memory";
    /// `gradient` records.
    pub const GRADIENTS: &str = "gradients";
    /// Module names on spans (`span_start.module`): its events are the spans written with one.
    pub const MODULE_NAMES: &str = "module_names";
    /// Every name above, in display order.
    pub const ALL: [&str; 7] = [
        TRACING,
        LAYER_OPS,
        ALLOCATOR,
        GRAPH,
        DEVICE_MEMORY,
        GRADIENTS,
        MODULE_NAMES,
    ];
}

/// One capture source and what it produced (an entry of [`CaptureSources::sources`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureSource {
    /// One of the [`source`] names (others are kept as written).
    pub source: String,
    /// Whether the source was switched on for the captured step.
    pub on: bool,
    /// Events the source produced.
    #[serde(default, deserialize_with = "null_as_default")]
    pub events: u64,
    /// Smallest allocation the allocator source records, when it has such a threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold_bytes: Option<u64>,
}

/// The `capture_sources` line (written once, at the end of a trace, by `capture`): which
/// sources were on, how many events each produced, and what the capture itself noticed.
///
/// This kind is this reader's extension of trace/6; readers that do not know it skip it with
/// an unknown-kind warning, as SCHEMA.md allows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureSources {
    /// One entry per source, in the writer's order.
    #[serde(default, deserialize_with = "null_as_default")]
    pub sources: Vec<CaptureSource>,
    /// Events the writer dropped (full rings).
    #[serde(default, deserialize_with = "null_as_default")]
    pub events_dropped: u64,
    /// What the capture noticed (each becomes a warning diagnostic at this line).
    #[serde(default, deserialize_with = "null_as_default")]
    pub warnings: Vec<String>,
}

impl CaptureSources {
    /// The entry for `name` (the first, when written twice).
    pub fn get(&self, name: &str) -> Option<&CaptureSource> {
        self.sources.iter().find(|s| s.source == name)
    }

    /// True when source `name` is listed and on.
    pub fn is_on(&self, name: &str) -> bool {
        self.get(name).is_some_and(|s| s.on)
    }
}

/// One line of a trace/6 file.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TraceEvent {
    /// Run metadata.
    Meta(Meta),
    /// A span opened.
    SpanStart(SpanStart),
    /// A span closed.
    SpanEnd(SpanEnd),
    /// A timed operation.
    Op(Op),
    /// A tensor snapshot.
    Tensor(TensorEvent),
    /// An allocation or free.
    Memory(MemoryEvent),
    /// A device memory checkpoint.
    DeviceMemory(DeviceMemory),
    /// A gradient fact.
    Gradient(Gradient),
    /// Timing between spans.
    Edge(Edge),
    /// Which capture sources were on (capture's extension kind).
    CaptureSources(CaptureSources),
}

impl TraceEvent {
    /// The `kind` discriminator of this event.
    pub fn kind(&self) -> &'static str {
        match self {
            TraceEvent::Meta(_) => "meta",
            TraceEvent::SpanStart(_) => "span_start",
            TraceEvent::SpanEnd(_) => "span_end",
            TraceEvent::Op(_) => "op",
            TraceEvent::Tensor(_) => "tensor",
            TraceEvent::Memory(_) => "memory",
            TraceEvent::DeviceMemory(_) => "device_memory",
            TraceEvent::Gradient(_) => "gradient",
            TraceEvent::Edge(_) => "edge",
            TraceEvent::CaptureSources(_) => "capture_sources",
        }
    }

    /// One JSONL line (without the `\n`).
    pub fn to_json_line(&self) -> String {
        // Serializing these plain structs into a String cannot fail: every map key is a
        // string and no type has a fallible Serialize impl.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Size in bytes of one element of `dtype` (case-insensitive), `None` when unknown.
pub fn dtype_size(dtype: &str) -> Option<u64> {
    let size = match dtype.len() {
        2..=4 => {
            let mut lower = [0u8; 4];
            for (d, s) in lower.iter_mut().zip(dtype.bytes()) {
                *d = s.to_ascii_lowercase();
            }
            match &lower[..dtype.len()] {
                b"u8" | b"i8" | b"bool" | b"f8" => 1,
                b"u16" | b"i16" | b"f16" | b"bf16" => 2,
                b"u32" | b"i32" | b"f32" => 4,
                b"u64" | b"i64" | b"f64" => 8,
                _ => return None,
            }
        }
        _ => return None,
    };
    Some(size)
}

/// product(shape) × size(dtype); 0 when the dtype is unknown or the shape is empty (SCHEMA.md).
/// Saturates instead of overflowing.
pub fn derived_storage_bytes(shape: &[u64], dtype: &str) -> u64 {
    match dtype_size(dtype) {
        Some(size) if !shape.is_empty() => shape.iter().fold(size, |acc, &d| acc.saturating_mul(d)),
        _ => 0,
    }
}

/// Why one line could not become an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineError {
    /// The line has a `kind` this reader does not know (a warning: a newer writer may add kinds).
    UnknownKind(String),
    /// The line is broken: category and message for the diagnostic.
    Invalid(Category, String),
}

#[derive(Deserialize)]
struct KindOnly<'a> {
    #[serde(borrow)]
    kind: Option<Cow<'a, str>>,
}

/// Decode one trace/6 line.
///
/// Fast path: lines our writer produces start with `{"kind":"…",`, so the kind is read from that
/// prefix and the line is deserialized once, straight into the kind's struct. Any other layout
/// (whitespace, `kind` later in the object) is parsed once to find `kind`, then again typed.
pub fn decode_line(bytes: &[u8]) -> Result<TraceEvent, LineError> {
    match decode_line_borrowed(bytes, None, Raw::to_event)? {
        Decoded::Raw(event) | Decoded::Event(event) => Ok(event),
    }
}

/// A line as [`decode_line_borrowed`] gives it. The reader's `R` is `()` (its handler keeps
/// the record), so `Event` is much the larger variant; it is returned once, straight to the
/// caller's match, where a box would cost an allocation per line.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Decoded<R> {
    /// What the caller's handler made of a writer-shaped line of a hot kind.
    Raw(R),
    /// Any other line, through serde.
    Event(TraceEvent),
}

/// [`decode_line`], handing writer-shaped lines of the hot kinds to `on_raw` unbuilt (their
/// strings still in the line), so that the reader builds only what it keeps. `text` is `bytes`
/// as text when the caller has already checked that they are UTF-8
/// ([`crate::format::jsonl::Line::text`]).
#[inline]
pub(crate) fn decode_line_borrowed<'a, R>(
    bytes: &'a [u8],
    text: Option<&'a str>,
    on_raw: impl FnOnce(Raw<'a>) -> R,
) -> Result<Decoded<R>, LineError> {
    const PREFIX: &[u8] = b"{\"kind\":\"";
    if let Some(rest) = bytes.strip_prefix(PREFIX) {
        // A kind is a few bytes: a plain loop finds its end sooner than `memchr` starts.
        if let Some(end) = rest.iter().position(|&b| b == b'"') {
            // The kind as text: sliced from the checked line when there is one (both ends
            // sit next to ASCII quotes), else checked on its own.
            let kind = match text {
                Some(text) => text.get(PREFIX.len()..PREFIX.len() + end),
                None => core::str::from_utf8(&rest[..end]).ok(),
            };
            if let Some(kind) = kind {
                // No hot kind's name has a `\\`, so the fast path can be tried first.
                if let Some(made) = fast::decode(kind, bytes, text, on_raw) {
                    return Ok(Decoded::Raw(made));
                }
                // A kind is plain ASCII; anything with an escape goes the slow way.
                if !kind.contains('\\') {
                    return decode_kind(kind, bytes).map(Decoded::Event);
                }
            }
        }
    }
    let kind = match serde_json::from_slice::<KindOnly<'_>>(bytes) {
        Ok(KindOnly { kind: Some(kind) }) => kind,
        Ok(KindOnly { kind: None }) => {
            return Err(LineError::Invalid(
                Category::MissingField,
                String::from("missing field `kind`"),
            ))
        }
        Err(e) => {
            let (category, message) = classify_json_error(&e);
            // A JSON value that is not an object (an array, a number) is a syntax problem here;
            // an object whose `kind` is not a string stays a wrong type.
            let is_object = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
            let category = if category == Category::WrongType && !is_object {
                Category::Syntax
            } else {
                category
            };
            return Err(LineError::Invalid(category, message));
        }
    };
    decode_kind(&kind, bytes).map(Decoded::Event)
}

pub(crate) fn decode_kind(kind: &str, bytes: &[u8]) -> Result<TraceEvent, LineError> {
    // A function of its own per kind: inlined, the ten serde decoders made one body of about
    // 32 KB of wasm, which a browser engine that finds it warm spends about half a second
    // optimizing (BENCHMARKS.md, one-offs); apart, it optimizes only the kinds that recur.
    #[inline(never)]
    fn typed<'a, T: Deserialize<'a>>(
        bytes: &'a [u8],
        wrap: fn(T) -> TraceEvent,
    ) -> Result<TraceEvent, LineError> {
        serde_json::from_slice::<T>(bytes).map(wrap).map_err(|e| {
            let (category, message) = classify_json_error(&e);
            LineError::Invalid(category, message)
        })
    }
    match kind {
        "meta" => typed(bytes, TraceEvent::Meta),
        "span_start" => typed(bytes, TraceEvent::SpanStart),
        "span_end" => typed(bytes, TraceEvent::SpanEnd),
        "op" => typed(bytes, TraceEvent::Op),
        "tensor" => typed(bytes, TraceEvent::Tensor),
        "memory" => typed(bytes, TraceEvent::Memory),
        "device_memory" => typed(bytes, TraceEvent::DeviceMemory),
        "gradient" => typed(bytes, TraceEvent::Gradient),
        "edge" => typed(bytes, TraceEvent::Edge),
        "capture_sources" => typed(bytes, TraceEvent::CaptureSources),
        other => {
            // Still require a well-formed line before calling it merely unknown.
            if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
                let (category, message) = classify_json_error(&e);
                return Err(LineError::Invalid(category, message));
            }
            Err(LineError::UnknownKind(String::from(other)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_serde_names() {
        // One definition of the strings every layer writes and shows: checked against serde.
        for kind in SpanKind::ALL {
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, alloc::format!("\"{}\"", kind.as_str()));
        }
        for step in Pass::ALL {
            let json = serde_json::to_string(&step).unwrap();
            assert_eq!(json, alloc::format!("\"{}\"", step.as_str()));
        }
        for category in TensorCategory::ALL {
            let json = serde_json::to_string(&category).unwrap();
            assert_eq!(json, alloc::format!("\"{}\"", category.as_str()));
        }
    }
    use alloc::string::ToString;
    use alloc::vec;

    #[test]
    fn dtype_sizes_are_case_insensitive() {
        assert_eq!(dtype_size("F32"), Some(4));
        assert_eq!(dtype_size("bf16"), Some(2));
        assert_eq!(dtype_size("BOOL"), Some(1));
        assert_eq!(dtype_size("i64"), Some(8));
        assert_eq!(dtype_size("f4"), None);
        assert_eq!(dtype_size("float32"), None);
        assert_eq!(dtype_size(""), None);
    }

    #[test]
    fn derived_bytes_follow_the_schema() {
        assert_eq!(derived_storage_bytes(&[2, 3], "f32"), 24);
        assert_eq!(derived_storage_bytes(&[], "f32"), 0);
        assert_eq!(derived_storage_bytes(&[4], "q4k"), 0);
        assert_eq!(derived_storage_bytes(&[u64::MAX, 2], "f64"), u64::MAX);
        assert_eq!(derived_storage_bytes(&[5, 0], "f32"), 0);
    }

    #[test]
    fn fast_and_slow_paths_agree() {
        let fast = br#"{"kind":"span_end","id":"s1","duration_ns":5}"#;
        let slow = br#"{ "duration_ns":5, "id":"s1", "kind":"span_end" }"#;
        let a = decode_line(fast).unwrap();
        assert_eq!(a, decode_line(slow).unwrap());
        assert_eq!(
            a,
            TraceEvent::SpanEnd(SpanEnd {
                id: "s1".into(),
                duration_ns: 5
            })
        );
    }

    #[test]
    fn null_optional_fields_read_as_absent() {
        let line = br#"{"kind":"span_start","id":"a","parent_id":null,"name":"n","start_ns":1,"span_kind":"op","measured":null,"step":null}"#;
        match decode_line(line).unwrap() {
            TraceEvent::SpanStart(s) => {
                assert_eq!(s.parent_id, None);
                assert!(!s.measured);
                assert_eq!(s.pass, None);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_fields_are_ignored_and_unknown_kinds_reported() {
        let line =
            br#"{"kind":"edge","from_span":"a","to_span":"b","duration_ns":3,"future":[1,2]}"#;
        assert!(matches!(decode_line(line), Ok(TraceEvent::Edge(_))));
        assert_eq!(
            decode_line(br#"{"kind":"kernel","x":1}"#),
            Err(LineError::UnknownKind("kernel".into()))
        );
    }

    #[test]
    fn broken_lines_are_classified() {
        let cases: [(&[u8], Category); 6] = [
            (br#"{"kind":"span_end"}"#, Category::MissingField),
            (br#"{"kind":"span_end","id":7}"#, Category::WrongType),
            (
                br#"{"kind":"span_start","id":"a","name":"n","start_ns":1,"span_kind":"kernel"}"#,
                Category::InvalidValue,
            ),
            (br#"{"kind":"op","span_id":"#, Category::Truncated),
            (br#"[1,2,3]"#, Category::Syntax),
            (br#"{"id":"x"}"#, Category::MissingField),
        ];
        for (line, want) in cases {
            match decode_line(line) {
                Err(LineError::Invalid(c, m)) => {
                    assert_eq!(c, want, "{}: {m}", String::from_utf8_lossy(line))
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn write_omits_absent_optionals() {
        let e = TraceEvent::Op(Op {
            span_id: "s".into(),
            op_name: "matmul".into(),
            inputs: vec!["t1".into()],
            output: None,
            shape: vec![2, 2],
            dtype: "f32".into(),
            device: "cpu".into(),
            duration_ns: 10,
            timestamp_ns: 0,
            storage_bytes: None,
            input_storage_bytes: 0,
        });
        let line = e.to_json_line();
        assert!(line.starts_with(r#"{"kind":"op","#), "{line}");
        assert!(!line.contains("null"));
        assert!(!line.contains("output"));
        assert_eq!(decode_line(line.as_bytes()).unwrap(), e);
        assert_eq!("op".to_string(), e.kind());
    }
}
