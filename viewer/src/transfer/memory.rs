//! The memory part: the document's memory table, a row per `memory` record.

use candle_trace_schema::format::events::{MemoryAction, TensorCategory};
use candle_trace_schema::format::table::{MemoryRow, MemoryTable};

use super::columns::{columns, Code, Id, OptId, Read, Str, U64List, Write, U64};
use super::wire::{Result, Strings, Strs, Table};

columns! {
    /// A memory record's columns.
    Memory {
        line: U64,
        timestamp_ns: U64,
        tensor_id: Str,
        span_id: Str,
        op_name: OptId,
        device: Id,
        bytes: U64,
        action: Code<MemoryAction>,
        shape: U64List,
        dtype: Id,
        category: Code<TensorCategory>,
    }
}

/// One memory record into the columns.
#[inline]
pub(super) fn write<'d>(c: &mut Memory<Write>, s: &mut Strings<'d>, x: MemoryRow<'d>) {
    c.line.u64(x.line);
    c.timestamp_ns.u64(x.timestamp_ns);
    c.tensor_id.put(x.tensor_id);
    c.span_id.put(x.span_id);
    c.op_name.opt(s, x.op_name);
    c.device.put(s, x.device);
    c.bytes.u64(x.bytes);
    c.action.put(&x.action);
    c.shape.u64s(x.shape);
    c.dtype.put(s, x.dtype);
    c.category.put(&x.category);
}

/// A block of memory records, appended to `v`.
#[inline(never)]
pub(super) fn read(v: &mut MemoryTable, t: &Table, b: &[u8], s: Strs<'_>) -> Result<()> {
    let c = Memory::<Read<'_>>::from(t, b, s)?;
    for i in 0..t.n {
        let row = MemoryRow {
            line: c.line.get(i)?,
            timestamp_ns: c.timestamp_ns.get(i)?,
            tensor_id: c.tensor_id.get(i as u32)?,
            span_id: c.span_id.get(i as u32)?,
            op_name: c.op_name.opt(i)?,
            device: c.device.get(i)?,
            bytes: c.bytes.get(i)?,
            action: c.action.get(i)?,
            shape: &[],
            dtype: c.dtype.get(i)?,
            category: c.category.get(i)?,
        };
        v.push_with_dims(row, c.shape.u64s(i)?);
    }
    Ok(())
}
