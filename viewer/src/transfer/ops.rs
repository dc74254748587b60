//! The ops part: the document's op table, a row per `op` record.

use candle_trace_schema::format::table::{Inputs, OpRow, OpTable};

use super::columns::{columns, Id, OptStr, OptU64, Read, Str, StrList, U64List, Write, U64};
use super::wire::{Result, Strings, Strs, Table};

columns! {
    /// An op's columns.
    Ops {
        line: U64,
        span_id: Str,
        op_name: Id,
        inputs: StrList,
        output: OptStr,
        shape: U64List,
        dtype: Id,
        device: Id,
        duration_ns: U64,
        timestamp_ns: U64,
        storage_bytes: OptU64,
        input_storage_bytes: U64,
    }
}

/// One op into the columns.
#[inline]
pub(super) fn write<'d>(c: &mut Ops<Write>, s: &mut Strings<'d>, x: OpRow<'d>) {
    c.line.u64(x.line);
    c.span_id.put(x.span_id);
    c.op_name.put(s, x.op_name);
    c.inputs.put(x.inputs.iter());
    c.output.put(x.output);
    c.shape.u64s(x.shape);
    c.dtype.put(s, x.dtype);
    c.device.put(s, x.device);
    c.duration_ns.u64(x.duration_ns);
    c.timestamp_ns.u64(x.timestamp_ns);
    c.storage_bytes.u64(x.storage_bytes);
    c.input_storage_bytes.u64(x.input_storage_bytes);
}

/// A block of ops, appended to `v`.
#[inline(never)]
pub(super) fn read(v: &mut OpTable, t: &Table, b: &[u8], s: Strs<'_>) -> Result<()> {
    let c = Ops::<Read<'_>>::from(t, b, s)?;
    // A row's inputs, checked before the row is stored.
    let mut inputs: Vec<&str> = Vec::new();
    for i in 0..t.n {
        c.inputs.fill(i, &mut inputs)?;
        let row = OpRow {
            line: c.line.get(i)?,
            span_id: c.span_id.get(i as u32)?,
            op_name: c.op_name.get(i)?,
            inputs: Inputs::NONE,
            output: c.output.get(i)?,
            shape: &[],
            dtype: c.dtype.get(i)?,
            device: c.device.get(i)?,
            duration_ns: c.duration_ns.get(i)?,
            timestamp_ns: c.timestamp_ns.get(i)?,
            storage_bytes: c.storage_bytes.u64(i)?,
            input_storage_bytes: c.input_storage_bytes.get(i)?,
        };
        v.push_with_lists(row, inputs.iter().copied(), c.shape.u64s(i)?);
    }
    Ok(())
}
