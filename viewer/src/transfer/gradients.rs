//! The gradients part: a row per `gradient` record.

use candle_trace_schema::format::events::{Gradient, GradientState};
use candle_trace_schema::format::records::Lined;

use super::columns::{columns, Code, Id, OptF64, OptU64, Read, Write, U64};
use super::wire::{Result, Strings, Strs, Table};

columns! {
    /// A gradient record's columns.
    Gradients {
        line: U64,
        event_id: Id,
        root: Id,
        key: Id,
        state: Code<GradientState>,
        norm: OptF64,
        storage_bytes: OptU64,
    }
}

/// One gradient record into the columns.
#[inline]
pub(super) fn write<'d>(c: &mut Gradients<Write>, s: &mut Strings<'d>, x: &'d Lined<Gradient>) {
    c.line.u64(x.line);
    let x = &x.event;
    c.event_id.put(s, &x.event_id);
    c.root.put(s, &x.root);
    c.key.put(s, &x.key);
    c.state.put(&x.state);
    c.norm.f64(x.norm);
    c.storage_bytes.u64(x.storage_bytes);
}

/// A block of gradient records, appended to `v`.
#[inline(never)]
pub(super) fn read(v: &mut Vec<Lined<Gradient>>, t: &Table, b: &[u8], s: Strs<'_>) -> Result<()> {
    let c = Gradients::<Read<'_>>::from(t, b, s)?;
    for i in 0..t.n {
        let event = Gradient {
            event_id: String::from(c.event_id.get(i)?),
            root: String::from(c.root.get(i)?),
            key: String::from(c.key.get(i)?),
            state: c.state.get(i)?,
            norm: c.norm.f64(i)?,
            storage_bytes: c.storage_bytes.u64(i)?,
        };
        v.push(Lined::new(c.line.get(i)?, event));
    }
    Ok(())
}
