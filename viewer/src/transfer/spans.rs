//! The spans part: a row per span, in document order (their id index crosses after them).

use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::events::{CompactString, Pass, SpanKind};
use candle_trace_schema::format::records::Span;

use super::columns::{
    columns, Bit, Code, Id, OptCode, OptId, OptStr, OptU64, Read, Str, Write, U64,
};
use super::wire::{Result, Strings, Strs, Table};

columns! {
    /// A span's columns.
    Spans {
        id: Str,
        parent_id: OptStr,
        name: Id,
        start_ns: U64,
        span_kind: Code<SpanKind>,
        measured: Bit,
        pass: OptCode<Pass>,
        duration_ns: OptU64,
        line: U64,
        end_line: OptU64,
        module: OptId,
    }
}

/// One span into the columns.
#[inline]
pub(super) fn write<'d>(c: &mut Spans<Write>, s: &mut Strings<'d>, x: &'d Span) {
    c.id.put(&x.id);
    c.parent_id.put(x.parent_id.as_deref());
    c.name.put(s, &x.name);
    c.start_ns.u64(x.start_ns);
    c.span_kind.put(&x.span_kind);
    c.measured.put(x.measured);
    c.pass.put(x.pass.as_ref());
    c.duration_ns.u64(x.duration_ns);
    c.line.u64(x.line);
    c.end_line.u64(x.end_line);
    c.module.opt(s, x.module.as_deref());
}

/// A block of spans, appended to `d`.
#[inline(never)]
pub(super) fn read(d: &mut TraceDocument, t: &Table, b: &[u8], s: Strs<'_>) -> Result<()> {
    let c = Spans::<Read<'_>>::from(t, b, s)?;
    d.spans.reserve(t.n);
    for i in 0..t.n {
        d.spans.push(Span {
            id: CompactString::new(c.id.get(i as u32)?),
            parent_id: c.parent_id.get(i)?.map(CompactString::new),
            name: CompactString::new(c.name.get(i)?),
            start_ns: c.start_ns.get(i)?,
            span_kind: c.span_kind.get(i)?,
            measured: c.measured.get(i)?,
            pass: c.pass.get(i)?,
            module: c.module.opt(i)?.map(CompactString::new),
            duration_ns: c.duration_ns.u64(i)?,
            line: c.line.get(i)?,
            end_line: c.end_line.u64(i)?,
        });
    }
    Ok(())
}
