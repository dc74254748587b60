//! The ops part: the document's op table, a row per `op` record as stored, its strings and
//! shape by their numbers in the table's pools (sent before it, `pools.rs`).

use candle_trace_schema::format::table::{OpCells, OpTable};

use super::columns::{columns, OptU64, Read, U32List, Write, U32, U64};
use super::wire::{broken, Result, Strings, Strs, Table};

columns! {
    /// An op's columns.
    Ops {
        line: U64,
        span_id: U32,
        op_name: U32,
        inputs: U32List,
        /// `u32::MAX` when absent, as the cells hold it.
        output: U32,
        shape: U32,
        dtype: U32,
        device: U32,
        duration_ns: U64,
        timestamp_ns: U64,
        storage_bytes: OptU64,
        input_storage_bytes: U64,
    }
}

/// One op into the columns: its cells and its inputs' string numbers.
#[inline]
pub(super) fn write(c: &mut Ops<Write>, _: &mut Strings<'_>, (x, inputs): (&OpCells, &[u32])) {
    c.line.u64(x.line);
    c.span_id.u32(x.span_id);
    c.op_name.u32(x.op_name);
    c.inputs.u32s(inputs);
    c.output.u32(x.output);
    c.shape.u32(x.shape);
    c.dtype.u32(x.dtype);
    c.device.u32(x.device);
    c.duration_ns.u64(x.duration_ns);
    c.timestamp_ns.u64(x.timestamp_ns);
    c.storage_bytes
        .u64(x.has_storage_bytes.then_some(x.storage_bytes));
    c.input_storage_bytes.u64(x.input_storage_bytes);
}

/// A block of ops, appended to `v` (whose pools hold every number they refer to).
#[inline(never)]
pub(super) fn read(v: &mut OpTable, t: &Table, b: &[u8], s: Strs<'_>) -> Result<()> {
    let c = Ops::<Read<'_>>::from(t, b, s)?;
    for i in 0..t.n {
        let storage_bytes = c.storage_bytes.u64(i)?;
        let cells = OpCells {
            line: c.line.get(i)?,
            duration_ns: c.duration_ns.get(i)?,
            timestamp_ns: c.timestamp_ns.get(i)?,
            storage_bytes: storage_bytes.unwrap_or(0),
            input_storage_bytes: c.input_storage_bytes.get(i)?,
            span_id: c.span_id.get(i)?,
            op_name: c.op_name.get(i)?,
            output: c.output.get(i)?,
            dtype: c.dtype.get(i)?,
            device: c.device.get(i)?,
            shape: c.shape.get(i)?,
            inputs_end: 0,
            has_storage_bytes: storage_bytes.is_some(),
        };
        v.push_cells(cells, c.inputs.u32s(i)?)
            .map_err(|e| broken(format!("op {i} of its block: {e}")))?;
    }
    Ok(())
}
