//! Hand-written writer for the hot kinds' lines (`span_start`, `span_end`, `op`, `tensor`,
//! `memory`): byte for byte what serde writes for the same [`TraceEvent`], the layout the fast
//! reader (`events::fast`) accepts, without building an event first.
//!
//! A line is appended to any [`LineBuf`] (`Vec<u8>`, `String`) and allocates nothing beyond the
//! buffer's growth. String fields are escaped as serde_json escapes them; an id may be written
//! as a prefix and a number ([`Text::Numbered`], e.g. `s17`) without formatting it first. The
//! property tests below check every line against serde's for arbitrary events, and that the
//! fast reader reads each back equal.
//!
//! ```
//! use candle_trace_schema::format::events::line::{self, SpanStartLine, Text};
//! use candle_trace_schema::SpanKind;
//!
//! let mut out = Vec::new();
//! line::span_start(
//!     &mut out,
//!     &SpanStartLine {
//!         parent_id: Some(Text::Numbered("s", 1)),
//!         module: Some("model.layers.0"),
//!         ..SpanStartLine::new(Text::Numbered("s", 2), "linear", 40, SpanKind::Module)
//!     },
//! );
//! assert_eq!(
//!     out,
//!     br#"{"kind":"span_start","id":"s2","parent_id":"s1","name":"linear","start_ns":40,"span_kind":"module","measured":false,"module":"model.layers.0"}"#
//! );
//! ```

use alloc::string::String;
use alloc::vec::Vec;

use super::{
    MemoryAction, MemoryEvent, Op, Pass, SpanEnd, SpanKind, SpanStart, TensorCategory, TensorEvent,
    TraceEvent,
};

/// Where lines are appended: a `Vec<u8>` or a `String` (everything written is UTF-8: ASCII
/// punctuation and digits, and the fields' own `str`s). Sealed: the writer relies on how the
/// two append.
pub trait LineBuf: sealed::Sealed {
    /// Append `s`.
    fn push_str(&mut self, s: &str);
    /// Append `s[start..end]`, where both ends are character boundaries.
    #[doc(hidden)]
    fn push_run(&mut self, s: &str, start: usize, end: usize);
    /// Append `digits`, which are ASCII.
    #[doc(hidden)]
    fn push_ascii(&mut self, digits: &[u8]);
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for alloc::vec::Vec<u8> {}
    impl Sealed for alloc::string::String {}
}

impl LineBuf for Vec<u8> {
    #[inline]
    fn push_str(&mut self, s: &str) {
        self.extend_from_slice(s.as_bytes());
    }

    #[inline]
    fn push_run(&mut self, s: &str, start: usize, end: usize) {
        self.extend_from_slice(s.as_bytes().get(start..end).unwrap_or_default());
    }

    #[inline]
    fn push_ascii(&mut self, digits: &[u8]) {
        self.extend_from_slice(digits);
    }
}

impl LineBuf for String {
    #[inline]
    fn push_str(&mut self, s: &str) {
        String::push_str(self, s);
    }

    #[inline]
    fn push_run(&mut self, s: &str, start: usize, end: usize) {
        String::push_str(self, s.get(start..end).unwrap_or_default());
    }

    #[inline]
    fn push_ascii(&mut self, digits: &[u8]) {
        String::push_str(self, core::str::from_utf8(digits).unwrap_or_default());
    }
}

/// A string field's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Text<'a> {
    /// The text as is.
    Str(&'a str),
    /// `prefix` followed by the decimal digits of the number (`Numbered("s", 17)` is `s17`).
    Numbered(&'a str, u64),
}

impl<'a> From<&'a str> for Text<'a> {
    fn from(s: &'a str) -> Self {
        Text::Str(s)
    }
}

/// A `span_start` line's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanStartLine<'a> {
    /// Unique in the stream.
    pub id: Text<'a>,
    /// Enclosing span; absent for a root.
    pub parent_id: Option<Text<'a>>,
    /// Display name.
    pub name: &'a str,
    /// Monotonic ns since the run started.
    pub start_ns: u64,
    /// Function, op or module.
    pub span_kind: SpanKind,
    /// The run's measured region.
    pub measured: bool,
    /// The pass the span belongs to (the `step` key).
    pub pass: Option<Pass>,
    /// The module it runs, named by the weights it loaded.
    pub module: Option<&'a str>,
}

impl<'a> SpanStartLine<'a> {
    /// A root span, not measured, without step or module.
    pub fn new(id: Text<'a>, name: &'a str, start_ns: u64, span_kind: SpanKind) -> Self {
        SpanStartLine {
            id,
            parent_id: None,
            name,
            start_ns,
            span_kind,
            measured: false,
            pass: None,
            module: None,
        }
    }

    /// The fields of `s`.
    pub fn of(s: &'a SpanStart) -> Self {
        SpanStartLine {
            id: Text::Str(&s.id),
            parent_id: s.parent_id.as_deref().map(Text::Str),
            name: &s.name,
            start_ns: s.start_ns,
            span_kind: s.span_kind,
            measured: s.measured,
            pass: s.pass,
            module: s.module.as_deref(),
        }
    }
}

/// An `op` line's fields (`S`: the inputs' string type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpLine<'a, S: AsRef<str> = &'a str> {
    /// Span the op ran in.
    pub span_id: Text<'a>,
    /// Operation name.
    pub op_name: &'a str,
    /// Input tensor ids.
    pub inputs: &'a [S],
    /// Output tensor id.
    pub output: Option<Text<'a>>,
    /// Output shape.
    pub shape: &'a [u64],
    /// Output dtype.
    pub dtype: &'a str,
    /// Device the op ran on.
    pub device: &'a str,
    /// How long the op took.
    pub duration_ns: u64,
    /// When the op started, ns since the run started.
    pub timestamp_ns: u64,
    /// Dense output bytes.
    pub storage_bytes: Option<u64>,
    /// Bytes of all inputs.
    pub input_storage_bytes: u64,
}

impl<'a> OpLine<'a, compact_str::CompactString> {
    /// The fields of `o`.
    pub fn of(o: &'a Op) -> Self {
        OpLine {
            span_id: Text::Str(&o.span_id),
            op_name: &o.op_name,
            inputs: &o.inputs,
            output: o.output.as_deref().map(Text::Str),
            shape: &o.shape,
            dtype: &o.dtype,
            device: &o.device,
            duration_ns: o.duration_ns,
            timestamp_ns: o.timestamp_ns,
            storage_bytes: o.storage_bytes,
            input_storage_bytes: o.input_storage_bytes,
        }
    }
}

/// A `tensor` line's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorLine<'a> {
    /// Span the tensor was observed in.
    pub span_id: Text<'a>,
    /// Tensor id.
    pub tensor_id: Text<'a>,
    /// Shape.
    pub shape: &'a [u64],
    /// Dtype.
    pub dtype: &'a str,
    /// Device.
    pub device: &'a str,
    /// Whether the tensor tracks gradients.
    pub requires_grad: bool,
    /// Dense bytes.
    pub storage_bytes: Option<u64>,
    /// What the tensor holds.
    pub category: TensorCategory,
}

impl<'a> TensorLine<'a> {
    /// The fields of `t`.
    pub fn of(t: &'a TensorEvent) -> Self {
        TensorLine {
            span_id: Text::Str(&t.span_id),
            tensor_id: Text::Str(&t.tensor_id),
            shape: &t.shape,
            dtype: &t.dtype,
            device: &t.device,
            requires_grad: t.requires_grad,
            storage_bytes: t.storage_bytes,
            category: t.category,
        }
    }
}

/// A `memory` line's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryLine<'a> {
    /// When it happened, ns since the run started.
    pub timestamp_ns: u64,
    /// Tensor the bytes belong to.
    pub tensor_id: Text<'a>,
    /// Span it happened in.
    pub span_id: Text<'a>,
    /// Op that caused it.
    pub op_name: Option<&'a str>,
    /// Device holding the bytes.
    pub device: &'a str,
    /// Number of bytes.
    pub bytes: u64,
    /// Alloc or free.
    pub action: MemoryAction,
    /// Tensor shape.
    pub shape: &'a [u64],
    /// Tensor dtype.
    pub dtype: &'a str,
    /// What the bytes hold.
    pub category: TensorCategory,
}

impl<'a> MemoryLine<'a> {
    /// The fields of `m`.
    pub fn of(m: &'a MemoryEvent) -> Self {
        MemoryLine {
            timestamp_ns: m.timestamp_ns,
            tensor_id: Text::Str(&m.tensor_id),
            span_id: Text::Str(&m.span_id),
            op_name: m.op_name.as_deref(),
            device: &m.device,
            bytes: m.bytes,
            action: m.action,
            shape: &m.shape,
            dtype: &m.dtype,
            category: m.category,
        }
    }
}

/// Append a `span_start` line (no newline).
pub fn span_start(out: &mut impl LineBuf, l: &SpanStartLine<'_>) {
    out.push_str(r#"{"kind":"span_start","id":"#);
    text(out, l.id);
    if let Some(parent) = l.parent_id {
        out.push_str(r#","parent_id":"#);
        text(out, parent);
    }
    out.push_str(r#","name":"#);
    string(out, l.name);
    out.push_str(r#","start_ns":"#);
    number(out, l.start_ns);
    out.push_str(r#","span_kind":""#);
    out.push_str(l.span_kind.as_str());
    out.push_str(if l.measured {
        r#"","measured":true"#
    } else {
        r#"","measured":false"#
    });
    if let Some(pass) = l.pass {
        out.push_str(r#","step":""#);
        out.push_str(pass.as_str());
        out.push_str("\"");
    }
    if let Some(module) = l.module {
        out.push_str(r#","module":"#);
        string(out, module);
    }
    out.push_str("}");
}

/// Append a `span_end` line (no newline).
pub fn span_end(out: &mut impl LineBuf, id: Text<'_>, duration_ns: u64) {
    out.push_str(r#"{"kind":"span_end","id":"#);
    text(out, id);
    out.push_str(r#","duration_ns":"#);
    number(out, duration_ns);
    out.push_str("}");
}

/// Append an `op` line (no newline).
pub fn op<S: AsRef<str>>(out: &mut impl LineBuf, l: &OpLine<'_, S>) {
    out.push_str(r#"{"kind":"op","span_id":"#);
    text(out, l.span_id);
    out.push_str(r#","op_name":"#);
    string(out, l.op_name);
    out.push_str(r#","inputs":["#);
    for (i, input) in l.inputs.iter().enumerate() {
        if i > 0 {
            out.push_str(",");
        }
        string(out, input.as_ref());
    }
    out.push_str("]");
    if let Some(output) = l.output {
        out.push_str(r#","output":"#);
        text(out, output);
    }
    out.push_str(r#","shape":"#);
    numbers(out, l.shape);
    out.push_str(r#","dtype":"#);
    string(out, l.dtype);
    out.push_str(r#","device":"#);
    string(out, l.device);
    out.push_str(r#","duration_ns":"#);
    number(out, l.duration_ns);
    out.push_str(r#","timestamp_ns":"#);
    number(out, l.timestamp_ns);
    if let Some(bytes) = l.storage_bytes {
        out.push_str(r#","storage_bytes":"#);
        number(out, bytes);
    }
    out.push_str(r#","input_storage_bytes":"#);
    number(out, l.input_storage_bytes);
    out.push_str("}");
}

/// Append a `tensor` line (no newline).
pub fn tensor(out: &mut impl LineBuf, l: &TensorLine<'_>) {
    out.push_str(r#"{"kind":"tensor","span_id":"#);
    text(out, l.span_id);
    out.push_str(r#","tensor_id":"#);
    text(out, l.tensor_id);
    out.push_str(r#","shape":"#);
    numbers(out, l.shape);
    out.push_str(r#","dtype":"#);
    string(out, l.dtype);
    out.push_str(r#","device":"#);
    string(out, l.device);
    out.push_str(if l.requires_grad {
        r#","requires_grad":true"#
    } else {
        r#","requires_grad":false"#
    });
    if let Some(bytes) = l.storage_bytes {
        out.push_str(r#","storage_bytes":"#);
        number(out, bytes);
    }
    out.push_str(r#","category":""#);
    out.push_str(l.category.as_str());
    out.push_str("\"}");
}

/// Append a `memory` line (no newline).
pub fn memory(out: &mut impl LineBuf, l: &MemoryLine<'_>) {
    out.push_str(r#"{"kind":"memory","timestamp_ns":"#);
    number(out, l.timestamp_ns);
    out.push_str(r#","tensor_id":"#);
    text(out, l.tensor_id);
    out.push_str(r#","span_id":"#);
    text(out, l.span_id);
    if let Some(op_name) = l.op_name {
        out.push_str(r#","op_name":"#);
        string(out, op_name);
    }
    out.push_str(r#","device":"#);
    string(out, l.device);
    out.push_str(r#","bytes":"#);
    number(out, l.bytes);
    out.push_str(r#","action":""#);
    out.push_str(l.action.as_str());
    out.push_str(r#"","shape":"#);
    numbers(out, l.shape);
    out.push_str(r#","dtype":"#);
    string(out, l.dtype);
    out.push_str(r#","category":""#);
    out.push_str(l.category.as_str());
    out.push_str("\"}");
}

/// Append `event`'s line (no newline) when it is of a hot kind, as the functions above write
/// it; `false` (nothing written) for the other kinds, which serde writes.
pub fn event(out: &mut impl LineBuf, event: &TraceEvent) -> bool {
    match event {
        TraceEvent::SpanStart(s) => span_start(out, &SpanStartLine::of(s)),
        TraceEvent::SpanEnd(SpanEnd { id, duration_ns }) => {
            span_end(out, Text::Str(id), *duration_ns)
        }
        TraceEvent::Op(o) => op(out, &OpLine::of(o)),
        TraceEvent::Tensor(t) => tensor(out, &TensorLine::of(t)),
        TraceEvent::Memory(m) => memory(out, &MemoryLine::of(m)),
        _ => return false,
    }
    true
}

/// A JSON string of `t`.
#[inline]
fn text(out: &mut impl LineBuf, t: Text<'_>) {
    match t {
        Text::Str(s) => string(out, s),
        Text::Numbered(prefix, n) => {
            out.push_str("\"");
            escaped(out, prefix);
            number(out, n);
            out.push_str("\"");
        }
    }
}

/// A JSON string: `s` in quotes, escaped as serde_json escapes it.
#[inline]
fn string(out: &mut impl LineBuf, s: &str) {
    out.push_str("\"");
    escaped(out, s);
    out.push_str("\"");
}

/// The bytes serde_json escapes in a string: `"`, `\\` and the control characters below
/// U+0020.
const ESCAPE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = true;
        b += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

/// `s` escaped as serde_json escapes a string's contents: `"` and `\` with a backslash, the
/// control characters below U+0020 as `\b \t \n \f \r` or `\u00XX` (lowercase hex); nothing
/// else, so the text between escapes is appended in runs.
#[inline]
fn escaped(out: &mut impl LineBuf, s: &str) {
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if !ESCAPE[usize::from(b)] {
            continue;
        }
        // Every escaped byte is ASCII: `i` and `i + 1` are character boundaries.
        if start < i {
            out.push_run(s, start, i);
        }
        start = i + 1;
        let hex;
        let piece: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x0c => b"\\f",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                hex = [
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 0xf)],
                ];
                &hex
            }
        };
        out.push_ascii(piece);
    }
    if start < bytes.len() {
        out.push_run(s, start, bytes.len());
    }
}

/// The decimal digits of `n`.
#[inline]
fn number(out: &mut impl LineBuf, n: u64) {
    // Two digits at a time from a table of "00".."99", right to left.
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    let mut n = n;
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        at -= 2;
        buf[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        let pair = n as usize * 2;
        at -= 2;
        buf[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        buf[at] = b'0' + n as u8;
    }
    out.push_ascii(buf.get(at..).unwrap_or_default());
}

/// A JSON array of numbers.
#[inline]
fn numbers(out: &mut impl LineBuf, values: &[u64]) {
    out.push_str("[");
    for (i, &v) in values.iter().enumerate() {
        if i > 0 {
            out.push_str(",");
        }
        number(out, v);
    }
    out.push_str("]");
}

#[cfg(test)]
mod tests {
    use alloc::format;
    use alloc::string::ToString;
    use alloc::vec;

    use proptest::prelude::*;

    use super::*;
    use crate::format::events::{decode_kind, CompactString};

    /// Strings with what serde escapes (quotes, backslashes, every control character), DEL,
    /// and characters of two, three and four bytes.
    fn text_strategy() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                4 => prop::char::range('a', 'z'),
                1 => prop::char::range('\u{0}', '\u{1f}'),
                1 => prop::sample::select(vec!['"', '\\', '/', '\u{7f}', 'é', '€', '𝄞', ' ']),
            ],
            0..12,
        )
        .prop_map(|chars| chars.into_iter().collect())
    }

    fn compact() -> impl Strategy<Value = CompactString> {
        text_strategy().prop_map(CompactString::from)
    }

    fn numbers() -> impl Strategy<Value = u64> {
        prop_oneof![
            Just(0u64),
            Just(9),
            Just(10),
            Just(99),
            Just(100),
            Just(u64::MAX),
            any::<u64>()
        ]
    }

    fn span_kind() -> impl Strategy<Value = SpanKind> {
        prop::sample::select(SpanKind::ALL.to_vec())
    }

    fn category() -> impl Strategy<Value = TensorCategory> {
        prop::sample::select(TensorCategory::ALL.to_vec())
    }

    fn span_start_event() -> impl Strategy<Value = SpanStart> {
        (
            (compact(), prop::option::of(compact()), compact(), numbers()),
            (
                span_kind(),
                any::<bool>(),
                prop::option::of(prop::sample::select(Pass::ALL.to_vec())),
                prop::option::of(compact()),
            ),
        )
            .prop_map(
                |((id, parent_id, name, start_ns), (span_kind, measured, pass, module))| {
                    SpanStart {
                        id,
                        parent_id,
                        name,
                        start_ns,
                        span_kind,
                        measured,
                        pass,
                        module,
                    }
                },
            )
    }

    fn op_event() -> impl Strategy<Value = Op> {
        (
            (
                compact(),
                compact(),
                prop::collection::vec(compact(), 0..4),
                prop::option::of(compact()),
            ),
            (prop::collection::vec(numbers(), 0..4), compact(), compact()),
            (numbers(), numbers(), prop::option::of(numbers()), numbers()),
        )
            .prop_map(
                |(
                    (span_id, op_name, inputs, output),
                    (shape, dtype, device),
                    (duration_ns, timestamp_ns, storage_bytes, input_storage_bytes),
                )| Op {
                    span_id,
                    op_name,
                    inputs,
                    output,
                    shape,
                    dtype,
                    device,
                    duration_ns,
                    timestamp_ns,
                    storage_bytes,
                    input_storage_bytes,
                },
            )
    }

    fn tensor_event() -> impl Strategy<Value = TensorEvent> {
        (
            (compact(), compact(), prop::collection::vec(numbers(), 0..4)),
            (compact(), compact(), any::<bool>()),
            (prop::option::of(numbers()), category()),
        )
            .prop_map(
                |(
                    (span_id, tensor_id, shape),
                    (dtype, device, requires_grad),
                    (storage_bytes, category),
                )| TensorEvent {
                    span_id,
                    tensor_id,
                    shape,
                    dtype,
                    device,
                    requires_grad,
                    storage_bytes,
                    category,
                },
            )
    }

    fn memory_event() -> impl Strategy<Value = MemoryEvent> {
        (
            (numbers(), compact(), compact(), prop::option::of(compact())),
            (
                compact(),
                numbers(),
                prop::sample::select(vec![MemoryAction::Alloc, MemoryAction::Free]),
            ),
            (
                prop::collection::vec(numbers(), 0..4),
                compact(),
                category(),
            ),
        )
            .prop_map(
                |(
                    (timestamp_ns, tensor_id, span_id, op_name),
                    (device, bytes, action),
                    (shape, dtype, category),
                )| MemoryEvent {
                    timestamp_ns,
                    tensor_id,
                    span_id,
                    op_name,
                    device,
                    bytes,
                    action,
                    shape,
                    dtype,
                    category,
                },
            )
    }

    fn hot_event() -> impl Strategy<Value = TraceEvent> {
        prop_oneof![
            span_start_event().prop_map(TraceEvent::SpanStart),
            (compact(), numbers())
                .prop_map(|(id, duration_ns)| TraceEvent::SpanEnd(SpanEnd { id, duration_ns })),
            op_event().prop_map(TraceEvent::Op),
            tensor_event().prop_map(TraceEvent::Tensor),
            memory_event().prop_map(TraceEvent::Memory),
        ]
    }

    fn kind_of(event: &TraceEvent) -> &'static str {
        match event {
            TraceEvent::SpanStart(_) => "span_start",
            TraceEvent::SpanEnd(_) => "span_end",
            TraceEvent::Op(_) => "op",
            TraceEvent::Tensor(_) => "tensor",
            _ => "memory",
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn every_hot_line_is_byte_identical_to_serde(event in hot_event()) {
            let serde = event.to_json_line();
            let mut bytes = Vec::new();
            prop_assert!(super::event(&mut bytes, &event));
            prop_assert_eq!(core::str::from_utf8(&bytes).unwrap(), serde.as_str());
            // A String takes the same text.
            let mut text = String::new();
            super::event(&mut text, &event);
            prop_assert_eq!(&text, &serde);
            // And the reader reads it back equal (fast path or serde).
            prop_assert_eq!(decode_kind(kind_of(&event), text.as_bytes()), Ok(event));
        }

        #[test]
        fn numbered_text_is_the_prefix_and_the_digits(prefix in text_strategy(), n in numbers()) {
            let mut numbered = Vec::new();
            span_end(&mut numbered, Text::Numbered(&prefix, n), n);
            let mut plain = Vec::new();
            span_end(&mut plain, Text::Str(&format!("{prefix}{n}")), n);
            prop_assert_eq!(numbered, plain);
        }

        #[test]
        fn appending_keeps_what_was_there(event in hot_event()) {
            let mut out = b"before\n".to_vec();
            super::event(&mut out, &event);
            prop_assert_eq!(out, format!("before\n{}", event.to_json_line()).into_bytes());
        }
    }

    #[test]
    fn digits_at_every_length() {
        let mut n = 1u64;
        loop {
            for v in [n - 1, n, n.saturating_add(1)] {
                let mut out = String::new();
                number(&mut out, v);
                assert_eq!(out, v.to_string());
            }
            match n.checked_mul(10) {
                Some(next) => n = next,
                None => break,
            }
        }
        let mut out = String::new();
        number(&mut out, u64::MAX);
        assert_eq!(out, "18446744073709551615");
    }

    #[test]
    fn other_kinds_are_left_to_serde() {
        let edge = TraceEvent::Edge(crate::format::events::Edge {
            from_span: "a".into(),
            to_span: "b".into(),
            duration_ns: 1,
        });
        let mut out = Vec::new();
        assert!(!event(&mut out, &edge));
        assert!(out.is_empty());
    }
}
