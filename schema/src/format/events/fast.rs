//! Hand-written decoder for lines exactly as [`TraceEvent::to_json_line`] writes them.
//!
//! The hot kinds (`span_start`, `span_end`, `op`, `tensor`, `memory`) make up nearly every line
//! of a real trace. Our writer emits their fields in declaration order, without whitespace, with
//! absent optionals omitted. This decoder accepts exactly that layout, and only strings without
//! escapes and plain unsigned integers; anything else (another key order, an unknown field, an
//! escape, a float, a `null`) returns `None` and the caller falls back to serde, which decodes
//! every valid layout and reports every error. So the fast path can never accept a line serde
//! would reject, nor read it differently: the property tests in `tests/roundtrip.rs` check the
//! second half against serde's output.

use alloc::vec::Vec;

use super::{
    CompactString, MemoryAction, MemoryEvent, Op, SpanEnd, SpanKind, SpanStart, Step,
    TensorCategory, TensorEvent, TraceEvent,
};

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

    /// `,"name":`
    #[inline(always)]
    fn field<const N: usize>(&mut self, name: &[u8; N]) -> Option<()> {
        self.literal(b",\"")?;
        self.literal(name)?;
        self.literal(b"\":")
    }

    /// `,"name":` if it comes next.
    #[inline(always)]
    fn optional_field<const N: usize>(&mut self, name: &[u8; N]) -> bool {
        let save = self.at;
        if self.field(name).is_some() {
            true
        } else {
            self.at = save;
            false
        }
    }

    /// A string without escapes or control characters.
    fn str(&mut self) -> Option<&'a str> {
        self.literal(b"\"")?;
        let start = self.at;
        let rest = self.bytes.get(start..)?;
        let len = rest
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        if rest[len] != b'"' {
            return None;
        }
        self.at = start + len + 1;
        // Both ends sit next to an ASCII quote, so they are character boundaries.
        self.text.get(start..start + len)
    }

    fn string(&mut self) -> Option<CompactString> {
        self.str().map(CompactString::from)
    }

    /// A JSON integer that fits u64, in JSON's canonical form (no sign, no leading zero).
    fn u64(&mut self) -> Option<u64> {
        let rest = self.bytes.get(self.at..)?;
        let len = rest
            .iter()
            .position(|b| !b.is_ascii_digit())
            .unwrap_or(rest.len());
        if len == 0 || (len > 1 && rest[0] == b'0') {
            return None;
        }
        // A fraction or exponent makes it a float: serde reports that.
        if matches!(rest.get(len), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let mut v: u64 = 0;
        for &d in &rest[..len] {
            v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        }
        self.at += len;
        Some(v)
    }

    fn bool(&mut self) -> Option<bool> {
        if self.literal(b"true").is_some() {
            Some(true)
        } else {
            self.literal(b"false").map(|()| false)
        }
    }

    fn u64_array(&mut self) -> Option<Vec<u64>> {
        self.literal(b"[")?;
        let mut out = Vec::new();
        if self.literal(b"]").is_some() {
            return Some(out);
        }
        loop {
            out.push(self.u64()?);
            if self.literal(b",").is_none() {
                self.literal(b"]")?;
                return Some(out);
            }
        }
    }

    fn string_array(&mut self) -> Option<Vec<CompactString>> {
        self.literal(b"[")?;
        let mut out = Vec::new();
        if self.literal(b"]").is_some() {
            return Some(out);
        }
        loop {
            out.push(self.string()?);
            if self.literal(b",").is_none() {
                self.literal(b"]")?;
                return Some(out);
            }
        }
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

fn span_kind(s: &str) -> Option<SpanKind> {
    Some(match s {
        "function" => SpanKind::Function,
        "op" => SpanKind::Op,
        "module" => SpanKind::Module,
        _ => return None,
    })
}

fn step(s: &str) -> Option<Step> {
    Some(match s {
        "forward" => Step::Forward,
        "backward" => Step::Backward,
        "optimizer" => Step::Optimizer,
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

/// Decode `line` (which starts with `{"kind":"<kind>"`) on the fast path, or `None`.
pub(super) fn decode(kind: &str, line: &[u8]) -> Option<TraceEvent> {
    let text = core::str::from_utf8(line).ok()?;
    let mut c = Cursor {
        text,
        bytes: line,
        at: b"{\"kind\":\"".len() + kind.len() + 1,
    };
    let event = match kind {
        "span_start" => {
            c.literal(b",\"id\":")?;
            let id = c.string()?;
            let parent_id = if c.optional_field(b"parent_id") {
                Some(c.string()?)
            } else {
                None
            };
            c.field(b"name")?;
            let name = c.string()?;
            c.field(b"start_ns")?;
            let start_ns = c.u64()?;
            c.field(b"span_kind")?;
            let span_kind = span_kind(c.str()?)?;
            c.field(b"measured")?;
            let measured = c.bool()?;
            let step = if c.optional_field(b"step") {
                Some(step(c.str()?)?)
            } else {
                None
            };
            TraceEvent::SpanStart(SpanStart {
                id,
                parent_id,
                name,
                start_ns,
                span_kind,
                measured,
                step,
            })
        }
        "span_end" => {
            c.field(b"id")?;
            let id = c.string()?;
            c.field(b"duration_ns")?;
            let duration_ns = c.u64()?;
            TraceEvent::SpanEnd(SpanEnd { id, duration_ns })
        }
        "op" => {
            c.field(b"span_id")?;
            let span_id = c.string()?;
            c.field(b"op_name")?;
            let op_name = c.string()?;
            c.field(b"inputs")?;
            let inputs = c.string_array()?;
            let output = if c.optional_field(b"output") {
                Some(c.string()?)
            } else {
                None
            };
            c.field(b"shape")?;
            let shape = c.u64_array()?;
            c.field(b"dtype")?;
            let dtype = c.string()?;
            c.field(b"device")?;
            let device = c.string()?;
            c.field(b"duration_ns")?;
            let duration_ns = c.u64()?;
            c.field(b"timestamp_ns")?;
            let timestamp_ns = c.u64()?;
            let storage_bytes = if c.optional_field(b"storage_bytes") {
                Some(c.u64()?)
            } else {
                None
            };
            c.field(b"input_storage_bytes")?;
            let input_storage_bytes = c.u64()?;
            TraceEvent::Op(Op {
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
            })
        }
        "tensor" => {
            c.field(b"span_id")?;
            let span_id = c.string()?;
            c.field(b"tensor_id")?;
            let tensor_id = c.string()?;
            c.field(b"shape")?;
            let shape = c.u64_array()?;
            c.field(b"dtype")?;
            let dtype = c.string()?;
            c.field(b"device")?;
            let device = c.string()?;
            c.field(b"requires_grad")?;
            let requires_grad = c.bool()?;
            let storage_bytes = if c.optional_field(b"storage_bytes") {
                Some(c.u64()?)
            } else {
                None
            };
            c.field(b"category")?;
            let category = category(c.str()?)?;
            TraceEvent::Tensor(TensorEvent {
                span_id,
                tensor_id,
                shape,
                dtype,
                device,
                requires_grad,
                storage_bytes,
                category,
            })
        }
        "memory" => {
            c.field(b"timestamp_ns")?;
            let timestamp_ns = c.u64()?;
            c.field(b"tensor_id")?;
            let tensor_id = c.string()?;
            c.field(b"span_id")?;
            let span_id = c.string()?;
            let op_name = if c.optional_field(b"op_name") {
                Some(c.string()?)
            } else {
                None
            };
            c.field(b"device")?;
            let device = c.string()?;
            c.field(b"bytes")?;
            let bytes = c.u64()?;
            c.field(b"action")?;
            let action = match c.str()? {
                "alloc" => MemoryAction::Alloc,
                "free" => MemoryAction::Free,
                _ => return None,
            };
            c.field(b"shape")?;
            let shape = c.u64_array()?;
            c.field(b"dtype")?;
            let dtype = c.string()?;
            c.field(b"category")?;
            let category = category(c.str()?)?;
            TraceEvent::Memory(MemoryEvent {
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
            })
        }
        _ => return None,
    };
    c.end()?;
    Some(event)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::events::decode_line;
    use alloc::string::ToString;
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
                step: Some(Step::Forward),
            }),
            TraceEvent::SpanStart(SpanStart {
                id: "s0".into(),
                parent_id: None,
                name: "µ step".into(),
                start_ns: 0,
                span_kind: SpanKind::Function,
                measured: true,
                step: None,
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
            assert_eq!(decode(kind_of(&line), line.as_bytes()), Some(e), "{line}");
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
            assert_eq!(decode("span_end", line.as_bytes()), None, "{line}");
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
}
