//! The span id index part: the worker's id → span map as it stands, a slot a row, read in one
//! step, so the page hashes no span id ([`TraceDocument::take_span_index`]).

use candle_trace_schema::format::document::{SpanIndexParts, TraceDocument};

use super::columns::{columns, Read, Write, U32, U8};
use super::wire::{In, Out, Result, Strs};

columns! {
    /// A slot of the index: its tag (0 empty) and the span it names.
    Slots {
        tag: U8,
        span: U32,
    }
}

/// The index of `d`'s spans into `out`.
pub(super) fn write(out: &mut Out, d: &TraceDocument) {
    let p = d.span_index_parts();
    out.u64(p.seed);
    let n = p.tags.len();
    let mut c = Slots::<Write>::new(n);
    for (&tag, &span) in p.tags.iter().zip(p.slots) {
        c.tag.u8(tag);
        c.span.u32(span);
    }
    c.finish(n, out);
}

/// The index, into `d` (whose spans are decoded); `d` indexes its spans itself if the slots
/// are not an index of them.
#[inline(never)]
pub(super) fn read(d: &mut TraceDocument, r: &mut In<'_>, b: &[u8], s: Strs<'_>) -> Result<()> {
    let seed = r.u64()?;
    let t = r.table()?;
    let c = Slots::<Read<'_>>::from(&t, b, s)?;
    let slots = c.span.all();
    d.take_span_index(SpanIndexParts {
        seed,
        tags: c.tag.bytes(),
        slots: &slots,
    });
    Ok(())
}
