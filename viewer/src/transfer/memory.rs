//! The memory part: the document's memory table, a row per `memory` record as stored, its
//! strings and shape by their numbers in the table's pools (sent before it, `pools.rs`).

use candle_trace_schema::format::events::{MemoryAction, TensorCategory};
use candle_trace_schema::format::table::{MemoryCells, MemoryTable};

use super::columns::{columns, Code, Read, Write, U32, U64};
use super::wire::{broken, Result, Strings, Strs, Table};

columns! {
    /// A memory record's columns.
    Memory {
        line: U64,
        timestamp_ns: U64,
        tensor_id: U32,
        span_id: U32,
        /// `u32::MAX` when absent, as the cells hold it.
        op_name: U32,
        device: U32,
        bytes: U64,
        action: Code<MemoryAction>,
        shape: U32,
        dtype: U32,
        category: Code<TensorCategory>,
    }
}

/// One memory record into the columns.
#[inline]
pub(super) fn write(c: &mut Memory<Write>, _: &mut Strings<'_>, x: &MemoryCells) {
    c.line.u64(x.line);
    c.timestamp_ns.u64(x.timestamp_ns);
    c.tensor_id.u32(x.tensor_id);
    c.span_id.u32(x.span_id);
    c.op_name.u32(x.op_name);
    c.device.u32(x.device);
    c.bytes.u64(x.bytes);
    c.action.put(&x.action);
    c.shape.u32(x.shape);
    c.dtype.u32(x.dtype);
    c.category.put(&x.category);
}

/// A block of memory records, appended to `v` (whose pools hold every number they refer to).
#[inline(never)]
pub(super) fn read(v: &mut MemoryTable, t: &Table, b: &[u8], s: Strs<'_>) -> Result<()> {
    let c = Memory::<Read<'_>>::from(t, b, s)?;
    for i in 0..t.n {
        let cells = MemoryCells {
            line: c.line.get(i)?,
            timestamp_ns: c.timestamp_ns.get(i)?,
            bytes: c.bytes.get(i)?,
            tensor_id: c.tensor_id.get(i)?,
            span_id: c.span_id.get(i)?,
            op_name: c.op_name.get(i)?,
            device: c.device.get(i)?,
            dtype: c.dtype.get(i)?,
            shape: c.shape.get(i)?,
            action: c.action.get(i)?,
            category: c.category.get(i)?,
        };
        v.push_cells(cells)
            .map_err(|e| broken(format!("memory record {i} of its block: {e}")))?;
    }
    Ok(())
}
