//! The edges part: a row per `edge` record.

use candle_trace_schema::format::events::Edge;
use candle_trace_schema::format::records::Lined;

use super::columns::{columns, Id, Read, Write, U64};
use super::wire::{Result, Strings, Strs, Table};

columns! {
    /// An edge record's columns.
    Edges {
        line: U64,
        from_span: Id,
        to_span: Id,
        duration_ns: U64,
    }
}

/// One edge record into the columns.
#[inline]
pub(super) fn write<'d>(c: &mut Edges<Write>, s: &mut Strings<'d>, x: &'d Lined<Edge>) {
    c.line.u64(x.line);
    c.from_span.put(s, &x.event.from_span);
    c.to_span.put(s, &x.event.to_span);
    c.duration_ns.u64(x.event.duration_ns);
}

/// A block of edge records, appended to `v`.
#[inline(never)]
pub(super) fn read(v: &mut Vec<Lined<Edge>>, t: &Table, b: &[u8], s: Strs<'_>) -> Result<()> {
    let c = Edges::<Read<'_>>::from(t, b, s)?;
    for i in 0..t.n {
        let event = Edge {
            from_span: String::from(c.from_span.get(i)?),
            to_span: String::from(c.to_span.get(i)?),
            duration_ns: c.duration_ns.get(i)?,
        };
        v.push(Lined::new(c.line.get(i)?, event));
    }
    Ok(())
}
