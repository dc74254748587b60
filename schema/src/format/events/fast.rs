//! Hand-written decoder for lines exactly as [`TraceEvent::to_json_line`] writes them.
//!
//! The hot kinds (`span_start`, `span_end`, `op`, `tensor`, `memory`) make up nearly every line
//! of a real trace. Our writers (serde, and [`line`](super::line) byte for byte the same) emit
//! their fields in declaration order, without whitespace, with absent optionals omitted. This decoder accepts exactly that layout, and only strings without
//! escapes and plain unsigned integers; anything else (another key order, an unknown field, an
//! escape, a float, a `null`) returns `None` and the caller falls back to serde, which decodes
//! every valid layout and reports every error. So the fast path can never accept a line serde
//! would reject, nor read it differently: the property tests in `tests/roundtrip.rs` check the
//! second half against serde's output.
//!
//! A line decodes into a [`Raw`] record that borrows its strings and lists from the line: the
//! reader builds from it only what it keeps (a summary keeps no `op` or `tensor` record and only
//! part of a `memory` record), straight into the record type it stores.

use alloc::vec::Vec;

use super::{
    CompactString, MemoryAction, MemoryEvent, Op, Pass, SpanEnd, SpanKind, SpanStart,
    TensorCategory, TensorEvent, TraceEvent,
};

/// The strings of a JSON array whose elements are strings without escapes, as written (the
/// text between the brackets, e.g. `"t1","t2"`; empty for `[]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StrList<'a>(&'a str);

impl<'a> StrList<'a> {
    /// The elements in order. They hold no `"` (no escapes): each is the text between the
    /// quotes of `"…"`, and elements are separated by `,`.
    pub(crate) fn iter(self) -> impl Iterator<Item = &'a str> {
        let mut rest = self.0;
        core::iter::from_fn(move || {
            let (element, tail) = rest.strip_prefix('"').and_then(|r| r.split_once('"'))?;
            rest = tail.strip_prefix(',').unwrap_or(tail);
            Some(element)
        })
    }

    fn to_vec(self) -> Vec<CompactString> {
        let mut out = Vec::with_capacity(self.0.bytes().filter(|&b| b == b',').count() + 1);
        out.extend(self.iter().map(CompactString::from));
        out
    }
}

/// A JSON array of canonical unsigned integers that fit `u64`, as written (the text between the
/// brackets, e.g. `8,16`; empty for `[]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct U64List<'a>(&'a str);

impl<'a> U64List<'a> {
    /// The list as written, without its brackets.
    pub(crate) fn text(self) -> &'a str {
        self.0
    }

    /// The elements in order.
    pub(crate) fn iter(self) -> impl Iterator<Item = u64> + 'a {
        // Every element was checked to be canonical digits that fit u64 (so the wrapping
        // operations never wrap).
        let text = self.0.as_bytes();
        text.split(|&b| b == b',')
            .filter(move |_| !text.is_empty())
            .map(|digits| {
                digits.iter().fold(0u64, |v, &b| {
                    v.wrapping_mul(10)
                        .wrapping_add(u64::from(b.wrapping_sub(b'0')))
                })
            })
    }

    fn to_vec(self) -> Vec<u64> {
        let text = self.0.as_bytes();
        if text.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(1 + text.iter().filter(|&&b| b == b',').count());
        out.extend(self.iter());
        out
    }
}

/// A `span_start` line, its strings borrowed from the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawSpanStart<'a> {
    pub(crate) id: &'a str,
    pub(crate) parent_id: Option<&'a str>,
    pub(crate) name: &'a str,
    pub(crate) start_ns: u64,
    pub(crate) span_kind: SpanKind,
    pub(crate) measured: bool,
    pub(crate) pass: Option<Pass>,
    pub(crate) module: Option<&'a str>,
}

impl RawSpanStart<'_> {
    pub(crate) fn to_event(self) -> SpanStart {
        SpanStart {
            id: self.id.into(),
            parent_id: self.parent_id.map(CompactString::from),
            name: self.name.into(),
            start_ns: self.start_ns,
            span_kind: self.span_kind,
            measured: self.measured,
            pass: self.pass,
            module: self.module.map(CompactString::from),
        }
    }
}

/// An `op` line, its strings and lists borrowed from the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawOp<'a> {
    pub(crate) span_id: &'a str,
    pub(crate) op_name: &'a str,
    pub(crate) inputs: StrList<'a>,
    pub(crate) output: Option<&'a str>,
    pub(crate) shape: U64List<'a>,
    pub(crate) dtype: &'a str,
    pub(crate) device: &'a str,
    pub(crate) duration_ns: u64,
    pub(crate) timestamp_ns: u64,
    pub(crate) storage_bytes: Option<u64>,
    pub(crate) input_storage_bytes: u64,
}

impl RawOp<'_> {
    /// The record as an owned event.
    pub(crate) fn to_event(self) -> Op {
        Op {
            span_id: self.span_id.into(),
            op_name: self.op_name.into(),
            inputs: self.inputs.to_vec(),
            output: self.output.map(Into::into),
            shape: self.shape.to_vec(),
            dtype: self.dtype.into(),
            device: self.device.into(),
            duration_ns: self.duration_ns,
            timestamp_ns: self.timestamp_ns,
            storage_bytes: self.storage_bytes,
            input_storage_bytes: self.input_storage_bytes,
        }
    }
}

/// A `tensor` line, its strings and lists borrowed from the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawTensor<'a> {
    pub(crate) span_id: &'a str,
    pub(crate) tensor_id: &'a str,
    pub(crate) shape: U64List<'a>,
    pub(crate) dtype: &'a str,
    pub(crate) device: &'a str,
    pub(crate) requires_grad: bool,
    pub(crate) storage_bytes: Option<u64>,
    pub(crate) category: TensorCategory,
}

impl RawTensor<'_> {
    pub(crate) fn to_event(self) -> TensorEvent {
        TensorEvent {
            span_id: self.span_id.into(),
            tensor_id: self.tensor_id.into(),
            shape: self.shape.to_vec(),
            dtype: self.dtype.into(),
            device: self.device.into(),
            requires_grad: self.requires_grad,
            storage_bytes: self.storage_bytes,
            category: self.category,
        }
    }
}

/// A `memory` line, its strings and lists borrowed from the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawMemory<'a> {
    pub(crate) timestamp_ns: u64,
    pub(crate) tensor_id: &'a str,
    pub(crate) span_id: &'a str,
    pub(crate) op_name: Option<&'a str>,
    pub(crate) device: &'a str,
    pub(crate) bytes: u64,
    pub(crate) action: MemoryAction,
    pub(crate) shape: U64List<'a>,
    pub(crate) dtype: &'a str,
    pub(crate) category: TensorCategory,
}

impl RawMemory<'_> {
    /// The record as an owned event.
    pub(crate) fn to_event(self) -> MemoryEvent {
        MemoryEvent {
            timestamp_ns: self.timestamp_ns,
            tensor_id: self.tensor_id.into(),
            span_id: self.span_id.into(),
            op_name: self.op_name.map(Into::into),
            device: self.device.into(),
            bytes: self.bytes,
            action: self.action,
            shape: self.shape.to_vec(),
            dtype: self.dtype.into(),
            category: self.category,
        }
    }
}

/// A line of a hot kind decoded on the fast path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Raw<'a> {
    SpanStart(RawSpanStart<'a>),
    SpanEnd { id: &'a str, duration_ns: u64 },
    Op(RawOp<'a>),
    Tensor(RawTensor<'a>),
    Memory(RawMemory<'a>),
}

impl Raw<'_> {
    /// The owned event, equal to what serde reads from the same line.
    pub(crate) fn to_event(self) -> TraceEvent {
        match self {
            Raw::SpanStart(s) => TraceEvent::SpanStart(s.to_event()),
            Raw::SpanEnd { id, duration_ns } => TraceEvent::SpanEnd(SpanEnd {
                id: id.into(),
                duration_ns,
            }),
            Raw::Op(o) => TraceEvent::Op(o.to_event()),
            Raw::Tensor(t) => TraceEvent::Tensor(t.to_event()),
            Raw::Memory(m) => TraceEvent::Memory(m.to_event()),
        }
    }
}

struct Cursor<'a> {
    /// The whole line, checked as UTF-8 once, so that strings are sliced out of it without
    /// checking each again.
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    /// Compared as a fixed-size array, which compiles to a few loads instead of a `memcmp` call.
    #[inline(always)]
    fn literal<const N: usize>(&mut self, lit: &[u8; N]) -> Option<()> {
        let got: &[u8; N] = self.bytes.get(self.at..self.at + N)?.try_into().ok()?;
        if got == lit {
            self.at += N;
            Some(())
        } else {
            None
        }
    }

    /// `lit` (a field's `,"name":`) if it comes next.
    #[inline(always)]
    fn optional_literal<const N: usize>(&mut self, lit: &[u8; N]) -> bool {
        self.literal(lit).is_some()
    }

    /// A string without escapes or control characters.
    #[inline(always)]
    fn str(&mut self) -> Option<&'a str> {
        self.literal(b"\"")?;
        let start = self.at;
        let len = string_len(self.bytes.get(start..)?)?;
        if self.bytes[start + len] != b'"' {
            return None;
        }
        self.at = start + len + 1;
        // Both ends sit next to an ASCII quote, so they are character boundaries.
        self.text.get(start..start + len)
    }

    /// A JSON integer that fits u64, in JSON's canonical form (no sign, no leading zero).
    #[inline(always)]
    fn u64(&mut self) -> Option<u64> {
        let rest = self.bytes.get(self.at..)?;
        let mut v: u64 = 0;
        let mut len = 0;
        // Nineteen digits never overflow u64 (its maximum has twenty), so only a twentieth
        // is checked.
        for &b in rest.iter().take(19) {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            v = v * 10 + u64::from(d);
            len += 1;
        }
        if len == 19 {
            if let Some(d) = rest
                .get(19)
                .map(|b| b.wrapping_sub(b'0'))
                .filter(|&d| d <= 9)
            {
                // `v * 10 + d` overflows exactly when this holds. Compared rather than
                // `checked_mul`, which wasm32 computes with a 128-bit multiply (`__multi3`).
                if v >= u64::MAX / 10 && (v > u64::MAX / 10 || u64::from(d) > u64::MAX % 10) {
                    return None;
                }
                v = v * 10 + u64::from(d);
                len += 1;
                // A twenty-first digit overflows whatever the first twenty were.
                if rest.get(20).is_some_and(u8::is_ascii_digit) {
                    return None;
                }
            }
        }
        if len == 0 || (len > 1 && rest[0] == b'0') {
            return None;
        }
        // A fraction or exponent makes it a float: serde reports that.
        if matches!(rest.get(len), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        self.at += len;
        Some(v)
    }

    #[inline(always)]
    fn bool(&mut self) -> Option<bool> {
        if self.literal(b"true").is_some() {
            Some(true)
        } else {
            self.literal(b"false").map(|()| false)
        }
    }

    /// The text from `start` to the cursor, which has just passed a `]`, without that `]`.
    fn list_text(&self, start: usize) -> Option<&'a str> {
        // Both ends sit next to ASCII brackets, so they are character boundaries.
        self.text.get(start..self.at - 1)
    }

    fn u64_array(&mut self) -> Option<U64List<'a>> {
        self.literal(b"[")?;
        let start = self.at;
        if self.literal(b"]").is_none() {
            loop {
                self.u64()?;
                if self.literal(b",").is_none() {
                    self.literal(b"]")?;
                    break;
                }
            }
        }
        self.list_text(start).map(U64List)
    }

    fn string_array(&mut self) -> Option<StrList<'a>> {
        self.literal(b"[")?;
        let start = self.at;
        if self.literal(b"]").is_none() {
            loop {
                self.str()?;
                if self.literal(b",").is_none() {
                    self.literal(b"]")?;
                    break;
                }
            }
        }
        self.list_text(start).map(StrList)
    }

    /// The closing brace, then nothing but JSON whitespace.
    fn end(&mut self) -> Option<()> {
        self.literal(b"}")?;
        self.bytes[self.at..]
            .iter()
            .all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
            .then_some(())
    }
}

/// The number of bytes before the first `"`, `\\` or control character of `rest`, `None` when
/// there is none. Eight bytes at a time: a byte is flagged when it equals `"` or `\\` or is
/// below 0x20 (the usual has-zero-byte and has-less-than bit tricks; a flag can be wrong only
/// above a byte correctly flagged, so the lowest flag is exact).
#[inline]
fn string_len(rest: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let flags = |w: u64| {
        let quote = w ^ (ONES * u64::from(b'"'));
        let backslash = w ^ (ONES * u64::from(b'\\'));
        let zero = |v: u64| v.wrapping_sub(ONES) & !v;
        (zero(quote) | zero(backslash) | (w.wrapping_sub(ONES * 0x20) & !w)) & HIGH
    };
    let mut at = 0;
    let mut words = rest.chunks_exact(8);
    for word in &mut words {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        let f = flags(u64::from_le_bytes(bytes));
        if f != 0 {
            return Some(at + (f.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    words
        .remainder()
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .map(|i| at + i)
}

fn span_kind(s: &str) -> Option<SpanKind> {
    Some(match s {
        "function" => SpanKind::Function,
        "op" => SpanKind::Op,
        "module" => SpanKind::Module,
        _ => return None,
    })
}

fn pass(s: &str) -> Option<Pass> {
    Some(match s {
        "forward" => Pass::Forward,
        "backward" => Pass::Backward,
        "optimizer" => Pass::Optimizer,
        _ => return None,
    })
}

fn category(s: &str) -> Option<TensorCategory> {
    Some(match s {
        "parameter" => TensorCategory::Parameter,
        "activation" => TensorCategory::Activation,
        "gradient" => TensorCategory::Gradient,
        "optimizer" => TensorCategory::Optimizer,
        "other" => TensorCategory::Other,
        _ => return None,
    })
}

/// Decode `line` (which starts with `{"kind":"<kind>"`) on the fast path and hand the record
/// to `on`; `None` (`on` not called) when the line is not for the fast path. `text` is the line
/// as text when it is already known to be UTF-8.
///
/// The record goes to `on` rather than back to the caller: returned, the enum of borrowed
/// fields was copied whole into the caller's frame, its wide loads stalling on the narrow
/// stores that had just written it.
#[inline]
pub(crate) fn decode<'a, R>(
    kind: &str,
    line: &'a [u8],
    text: Option<&'a str>,
    on: impl FnOnce(Raw<'a>) -> R,
) -> Option<R> {
    let text = match text {
        Some(text) => text,
        None => core::str::from_utf8(line).ok()?,
    };
    let mut c = Cursor {
        text,
        bytes: line,
        at: b"{\"kind\":\"".len() + kind.len() + 1,
    };
    match kind {
        "span_start" => {
            c.literal(b",\"id\":")?;
            let id = c.str()?;
            let parent_id = if c.optional_literal(b",\"parent_id\":") {
                Some(c.str()?)
            } else {
                None
            };
            c.literal(b",\"name\":")?;
            let name = c.str()?;
            c.literal(b",\"start_ns\":")?;
            let start_ns = c.u64()?;
            c.literal(b",\"span_kind\":")?;
            let span_kind = span_kind(c.str()?)?;
            c.literal(b",\"measured\":")?;
            let measured = c.bool()?;
            let pass = if c.optional_literal(b",\"step\":") {
                Some(pass(c.str()?)?)
            } else {
                None
            };
            let module = if c.optional_literal(b",\"module\":") {
                Some(c.str()?)
            } else {
                None
            };
            c.end()?;
            Some(on(Raw::SpanStart(RawSpanStart {
                id,
                parent_id,
                name,
                start_ns,
                span_kind,
                measured,
                pass,
                module,
            })))
        }
        "span_end" => {
            c.literal(b",\"id\":")?;
            let id = c.str()?;
            c.literal(b",\"duration_ns\":")?;
            let duration_ns = c.u64()?;
            c.end()?;
            Some(on(Raw::SpanEnd { id, duration_ns }))
        }
        "op" => {
            c.literal(b",\"span_id\":")?;
            let span_id = c.str()?;
            c.literal(b",\"op_name\":")?;
            let op_name = c.str()?;
            c.literal(b",\"inputs\":")?;
            let inputs = c.string_array()?;
            let output = if c.optional_literal(b",\"output\":") {
                Some(c.str()?)
            } else {
                None
            };
            c.literal(b",\"shape\":")?;
            let shape = c.u64_array()?;
            c.literal(b",\"dtype\":")?;
            let dtype = c.str()?;
            c.literal(b",\"device\":")?;
            let device = c.str()?;
            c.literal(b",\"duration_ns\":")?;
            let duration_ns = c.u64()?;
            c.literal(b",\"timestamp_ns\":")?;
            let timestamp_ns = c.u64()?;
            let storage_bytes = if c.optional_literal(b",\"storage_bytes\":") {
                Some(c.u64()?)
            } else {
                None
            };
            c.literal(b",\"input_storage_bytes\":")?;
            let input_storage_bytes = c.u64()?;
            c.end()?;
            Some(on(Raw::Op(RawOp {
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
            })))
        }
        "tensor" => {
            c.literal(b",\"span_id\":")?;
            let span_id = c.str()?;
            c.literal(b",\"tensor_id\":")?;
            let tensor_id = c.str()?;
            c.literal(b",\"shape\":")?;
            let shape = c.u64_array()?;
            c.literal(b",\"dtype\":")?;
            let dtype = c.str()?;
            c.literal(b",\"device\":")?;
            let device = c.str()?;
            c.literal(b",\"requires_grad\":")?;
            let requires_grad = c.bool()?;
            let storage_bytes = if c.optional_literal(b",\"storage_bytes\":") {
                Some(c.u64()?)
            } else {
                None
            };
            c.literal(b",\"category\":")?;
            let category = category(c.str()?)?;
            c.end()?;
            Some(on(Raw::Tensor(RawTensor {
                span_id,
                tensor_id,
                shape,
                dtype,
                device,
                requires_grad,
                storage_bytes,
                category,
            })))
        }
        "memory" => {
            c.literal(b",\"timestamp_ns\":")?;
            let timestamp_ns = c.u64()?;
            c.literal(b",\"tensor_id\":")?;
            let tensor_id = c.str()?;
            c.literal(b",\"span_id\":")?;
            let span_id = c.str()?;
            let op_name = if c.optional_literal(b",\"op_name\":") {
                Some(c.str()?)
            } else {
                None
            };
            c.literal(b",\"device\":")?;
            let device = c.str()?;
            c.literal(b",\"bytes\":")?;
            let bytes = c.u64()?;
            c.literal(b",\"action\":")?;
            let action = match c.str()? {
                "alloc" => MemoryAction::Alloc,
                "free" => MemoryAction::Free,
                _ => return None,
            };
            c.literal(b",\"shape\":")?;
            let shape = c.u64_array()?;
            c.literal(b",\"dtype\":")?;
            let dtype = c.str()?;
            c.literal(b",\"category\":")?;
            let category = category(c.str()?)?;
            c.end()?;
            Some(on(Raw::Memory(RawMemory {
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
            })))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::events::decode_line;
    use alloc::string::{String, ToString};
    use alloc::vec;

    fn kind_of(line: &str) -> &str {
        let rest = &line["{\"kind\":\"".len()..];
        &rest[..rest.find('"').unwrap()]
    }

    #[test]
    fn writer_lines_of_every_hot_kind_take_the_fast_path() {
        let events = [
            TraceEvent::SpanStart(SpanStart {
                id: "s1".into(),
                parent_id: Some("s0".into()),
                name: "fc1".into(),
                start_ns: 10,
                span_kind: SpanKind::Module,
                measured: false,
                pass: Some(Pass::Forward),
                module: Some("model.layers.0.mlp.fc1".into()),
            }),
            TraceEvent::SpanStart(SpanStart {
                id: "s0".into(),
                parent_id: None,
                name: "µ step".into(),
                start_ns: 0,
                span_kind: SpanKind::Function,
                measured: true,
                pass: None,
                module: None,
            }),
            TraceEvent::SpanEnd(SpanEnd {
                id: "s1".into(),
                duration_ns: u64::MAX,
            }),
            TraceEvent::Op(Op {
                span_id: "s1".into(),
                op_name: "matmul".into(),
                inputs: vec!["t1".into(), "t2".into()],
                output: Some("t3".into()),
                shape: vec![8, 16],
                dtype: "f32".into(),
                device: "cuda:0".into(),
                duration_ns: 1200,
                timestamp_ns: 0,
                storage_bytes: Some(512),
                input_storage_bytes: 1024,
            }),
            TraceEvent::Tensor(TensorEvent {
                span_id: "s1".into(),
                tensor_id: "t3".into(),
                shape: vec![],
                dtype: "bf16".into(),
                device: "cpu".into(),
                requires_grad: true,
                storage_bytes: None,
                category: TensorCategory::Activation,
            }),
            TraceEvent::Memory(MemoryEvent {
                timestamp_ns: 5,
                tensor_id: "t3".into(),
                span_id: "s1".into(),
                op_name: None,
                device: "cpu".into(),
                bytes: 512,
                action: MemoryAction::Free,
                shape: vec![8, 16],
                dtype: "f32".into(),
                category: TensorCategory::Gradient,
            }),
        ];
        for e in events {
            let line = e.to_json_line();
            assert_eq!(
                decode(kind_of(&line), line.as_bytes(), None, Raw::to_event),
                Some(e),
                "{line}"
            );
        }
    }

    #[test]
    fn anything_unusual_falls_back_to_serde() {
        let lines = [
            // an escape in a string
            r#"{"kind":"span_end","id":"a\"b","duration_ns":1}"#,
            // a leading zero (invalid JSON: serde must report it)
            r#"{"kind":"span_end","id":"a","duration_ns":01}"#,
            // a float, a negative number, an overflow
            r#"{"kind":"span_end","id":"a","duration_ns":1.0}"#,
            r#"{"kind":"span_end","id":"a","duration_ns":-1}"#,
            r#"{"kind":"span_end","id":"a","duration_ns":18446744073709551616}"#,
            // another key order, an unknown field, a null, whitespace, trailing garbage
            r#"{"kind":"span_end","duration_ns":1,"id":"a"}"#,
            r#"{"kind":"span_end","id":"a","duration_ns":1,"x":2}"#,
            r#"{"kind":"span_end","id":null,"duration_ns":1}"#,
            r#"{"kind":"span_end", "id":"a","duration_ns":1}"#,
            r#"{"kind":"span_end","id":"a","duration_ns":1}x"#,
            // a raw control character inside a string
            "{\"kind\":\"span_end\",\"id\":\"a\u{1}\",\"duration_ns\":1}",
        ];
        for line in lines {
            assert_eq!(
                decode("span_end", line.as_bytes(), None, |raw| raw),
                None,
                "{line}"
            );
        }
        // The fallback still reads the valid ones and rejects the invalid ones.
        assert!(decode_line(lines[0].as_bytes()).is_ok());
        assert!(decode_line(lines[1].as_bytes()).is_err());
        assert!(decode_line(lines[4].as_bytes()).is_err());
        assert!(decode_line(lines[5].as_bytes()).is_ok());
        assert!(decode_line(lines[9].as_bytes()).is_err());
        assert!(decode_line(lines[10].as_bytes()).is_err());
        assert_eq!("span_end".to_string(), kind_of(lines[0]));
    }

    /// The first `"`, `\\` or control byte, one byte at a time.
    fn naive_string_len(rest: &[u8]) -> Option<usize> {
        rest.iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
    }

    #[test]
    fn string_len_finds_the_first_stop_byte_at_every_offset() {
        // Every stop byte (and bytes next to the stop ranges: 0x20, 0x21, 0x23, 0x5b, 0x5d,
        // 0x7f, 0x80, 0xff) at every offset of buffers of several lengths, over a background
        // of plain letters and of non-ASCII bytes.
        let specials: Vec<u8> = (0u8..0x20)
            .chain([
                b'"', b'\\', 0x20, 0x21, 0x23, 0x5b, 0x5d, 0x7f, 0x80, 0xc3, 0xff,
            ])
            .collect();
        for background in [b'a', 0xa9, 0x7f] {
            for len in 0..40 {
                let buf = vec![background; len];
                assert_eq!(string_len(&buf), naive_string_len(&buf));
                for at in 0..len {
                    for &b in &specials {
                        let mut buf = buf.clone();
                        buf[at] = b;
                        assert_eq!(string_len(&buf), naive_string_len(&buf), "{buf:?}");
                        // A second stop byte after the first does not move the answer.
                        if at + 3 < len {
                            buf[at + 3] = b'"';
                            assert_eq!(string_len(&buf), naive_string_len(&buf), "{buf:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn lists_build_what_they_hold() {
        assert_eq!(U64List("").to_vec(), Vec::<u64>::new());
        assert_eq!(U64List("0").to_vec(), vec![0]);
        assert_eq!(
            U64List("18446744073709551615,7,10").to_vec(),
            vec![u64::MAX, 7, 10]
        );
        assert_eq!(StrList("").to_vec(), Vec::<CompactString>::new());
        assert_eq!(StrList(r#""""#).to_vec(), vec![CompactString::from("")]);
        assert_eq!(
            StrList(r#""t1","","µ,x""#).to_vec(),
            vec![
                CompactString::from("t1"),
                CompactString::from(""),
                CompactString::from("µ,x")
            ]
        );
    }

    /// Writer-shaped lines of every hot kind, the fast path's input.
    fn writer_lines() -> Vec<String> {
        let mut lines = vec![
            r#"{"kind":"span_start","id":"s1","parent_id":"s0","name":"fc1","start_ns":10,"span_kind":"module","measured":false,"step":"forward"}"#.to_string(),
            r#"{"kind":"span_end","id":"s1","duration_ns":18446744073709551615}"#.to_string(),
            r#"{"kind":"op","span_id":"s1","op_name":"matmul","inputs":["t1","t2"],"output":"t3","shape":[8,16],"dtype":"f32","device":"cuda:0","duration_ns":1200,"timestamp_ns":0,"storage_bytes":512,"input_storage_bytes":1024}"#.to_string(),
            r#"{"kind":"op","span_id":"s1","op_name":"add","inputs":[],"shape":[],"dtype":"bf16","device":"cpu","duration_ns":3,"timestamp_ns":4,"input_storage_bytes":0}"#.to_string(),
            r#"{"kind":"tensor","span_id":"s1","tensor_id":"t3","shape":[1],"dtype":"bf16","device":"cpu","requires_grad":true,"storage_bytes":2,"category":"activation"}"#.to_string(),
            r#"{"kind":"memory","timestamp_ns":5,"tensor_id":"t3","span_id":"s1","op_name":"matmul","device":"cpu","bytes":512,"action":"alloc","shape":[8,16],"dtype":"f32","category":"gradient"}"#.to_string(),
        ];
        lines.push(lines[5].replace("\"op_name\":\"matmul\",", ""));
        lines
    }

    proptest::proptest! {
        // Most garbled lines leave the fast path (an edit in a field name, a quote, a brace);
        // enough cases that several hundred are still accepted by it and compared with serde.
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(8192))]

        /// Garbled writer lines: whenever the fast path accepts one, serde reads the same event
        /// from it, so the reader's records and diagnostics cannot depend on which path ran.
        #[test]
        fn the_fast_path_agrees_with_serde_on_garbled_lines(
            which in 0usize..7,
            edits in proptest::collection::vec((0usize..400, proptest::prop_oneof![
                // Mostly edits that can leave the line valid (a letter in a string, a digit in
                // a number), so that the fast path still accepts many of the edited lines.
                6 => proptest::sample::select(vec![b'x', b'5', b'0']),
                4 => proptest::sample::select(
                    vec![b'"', b'\\', b',', b'[', b']', b'9', b' ', b'}', 0xc3, 0x01, b':', b'.'],
                ),
            ], 0u8..3), 1..4),
        ) {
            let mut line = writer_lines()[which].clone().into_bytes();
            for (at, byte, op) in edits {
                let at = at % (line.len() + 1);
                match op {
                    0 => line.insert(at, byte),
                    1 if at < line.len() => { line.remove(at); }
                    _ if at < line.len() => line[at] = byte,
                    _ => line.push(byte),
                }
            }
            let Some(rest) = line.strip_prefix(b"{\"kind\":\"") else { return Ok(()) };
            let Some(end) = rest.iter().position(|&b| b == b'"') else { return Ok(()) };
            let Ok(kind) = core::str::from_utf8(&rest[..end]) else { return Ok(()) };
            if let Some(raw) = decode(kind, &line, None, |raw| raw) {
                let serde = crate::format::events::decode_kind(kind, &line);
                proptest::prop_assert_eq!(&serde, &Ok(raw.to_event()));
                proptest::prop_assert_eq!(serde, Ok(through_a_table(raw)));
            }
        }
    }

    /// `raw` as the reader stores it (an op or memory record pushed into its table from the
    /// line's text, lists included) and read back; other kinds as `to_event`.
    fn through_a_table(raw: Raw<'_>) -> TraceEvent {
        match raw {
            Raw::Op(o) => {
                let mut table = crate::format::table::OpTable::new();
                table.push_raw(7, o);
                TraceEvent::Op(table.row(0).to_event())
            }
            Raw::Memory(m) => {
                let mut table = crate::format::table::MemoryTable::new();
                table.push_raw(7, m);
                TraceEvent::Memory(table.row(0).to_event())
            }
            other => other.to_event(),
        }
    }

    #[test]
    fn unedited_writer_lines_take_the_fast_path_and_agree_with_serde() {
        for line in writer_lines() {
            let kind = kind_of(&line);
            let raw = decode(kind, line.as_bytes(), Some(&line), |raw| raw).expect(&line);
            let serde = crate::format::events::decode_kind(kind, line.as_bytes());
            assert_eq!(serde, Ok(raw.to_event()), "{line}");
            assert_eq!(serde, Ok(through_a_table(raw)), "{line}");
        }
    }

    #[test]
    fn integers_at_the_edge_of_u64() {
        let read = |text: &str| {
            let mut c = Cursor {
                text,
                bytes: text.as_bytes(),
                at: 0,
            };
            c.u64().filter(|_| c.at == text.len())
        };
        assert_eq!(read("18446744073709551615"), Some(u64::MAX));
        assert_eq!(read("18446744073709551610"), Some(u64::MAX - 5));
        assert_eq!(read("1844674407370955161"), Some(u64::MAX / 10));
        for overflow in [
            "18446744073709551616",
            "18446744073709551619",
            "18446744073709551620",
            "18446744073709551700",
            "99999999999999999999",
            "184467440737095516150",
            "100000000000000000000",
        ] {
            assert_eq!(read(overflow), None, "{overflow}");
            assert!(overflow.parse::<u64>().is_err());
        }
        for n in [
            0u64,
            7,
            10,
            12345,
            999_999_999_999_999_999,
            1_000_000_000_000_000_000,
            10_000_000_000_000_000_000,
            u64::MAX / 10 - 1,
            u64::MAX - 1,
        ] {
            assert_eq!(read(&n.to_string()), Some(n));
        }
        // Not canonical, whatever the length: serde reads these.
        assert_eq!(read("0000000000000000001"), None);
        assert_eq!(read("00000000000000000001"), None);
    }
}
