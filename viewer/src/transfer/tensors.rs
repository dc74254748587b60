//! The tensors part: a row per `tensor` record.

use candle_trace_schema::format::events::{CompactString, TensorCategory, TensorEvent};
use candle_trace_schema::format::records::Lined;

use super::columns::{columns, Bit, Code, Id, OptU64, Read, Str, U64List, Write, U64};
use super::wire::{Result, Strings, Strs, Table};

columns! {
    /// A tensor record's columns.
    Tensors {
        line: U64,
        span_id: Str,
        tensor_id: Str,
        shape: U64List,
        dtype: Id,
        device: Id,
        requires_grad: Bit,
        storage_bytes: OptU64,
        category: Code<TensorCategory>,
    }
}

/// One tensor record into the columns.
#[inline]
pub(super) fn write<'d>(c: &mut Tensors<Write>, s: &mut Strings<'d>, x: &'d Lined<TensorEvent>) {
    c.line.u64(x.line);
    let x = &x.event;
    c.span_id.put(&x.span_id);
    c.tensor_id.put(&x.tensor_id);
    c.shape.u64s(&x.shape);
    c.dtype.put(s, &x.dtype);
    c.device.put(s, &x.device);
    c.requires_grad.put(x.requires_grad);
    c.storage_bytes.u64(x.storage_bytes);
    c.category.put(&x.category);
}

/// A block of tensor records, appended to `v`.
#[inline(never)]
pub(super) fn read(
    v: &mut Vec<Lined<TensorEvent>>,
    t: &Table,
    b: &[u8],
    s: Strs<'_>,
) -> Result<()> {
    let c = Tensors::<Read<'_>>::from(t, b, s)?;
    for i in 0..t.n {
        let event = TensorEvent {
            span_id: CompactString::new(c.span_id.get(i as u32)?),
            tensor_id: CompactString::new(c.tensor_id.get(i as u32)?),
            shape: c.shape.u64_vec(i)?,
            dtype: CompactString::new(c.dtype.get(i)?),
            device: CompactString::new(c.device.get(i)?),
            requires_grad: c.requires_grad.get(i)?,
            storage_bytes: c.storage_bytes.u64(i)?,
            category: c.category.get(i)?,
        };
        v.push(Lined::new(c.line.get(i)?, event));
    }
    Ok(())
}
