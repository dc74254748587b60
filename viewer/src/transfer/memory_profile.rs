//! The memory profile: its head part (the peak, the allocations live at the peak and each
//! device's figures, read in one step) and its samples part (the live-bytes curve, in blocks).

use candle_trace_schema::format::events::TensorCategory;
use candle_trace_schema::format::memory::{
    DeviceMemoryProfile, LiveAllocation, MemoryProfile, MemorySample,
};

use super::columns::{columns, Code, Id, OptId, OptU64, Read, U64s, Write, U32, U64};
use super::wire::{broken, In, Out, Result, Strings, Strs, Table};

columns! {
    /// An allocation live at the peak.
    Live {
        memory_index: U64,
        tensor_id: Id,
        bytes: U64,
        category: Code<TensorCategory>,
        span_id: Id,
        op_name: OptId,
        timestamp_ns: U64,
        line: U64,
    }
}

columns! {
    /// One device's figures.
    Devices {
        device: Id,
        peak_bytes: U64,
        peak_timestamp_ns: OptU64,
        final_live_bytes: U64,
        capacity_bytes: OptU64,
        alloc_count: U64,
        free_count: U64,
    }
}

columns! {
    /// A point of the live-bytes curve.
    Samples {
        timestamp_ns: U64,
        device: U32,
        live_bytes: U64,
        by_category: U64s<{ TensorCategory::ALL.len() }>,
    }
}

/// The head part into `out`.
pub(super) fn write_head<'d>(out: &mut Out, s: &mut Strings<'d>, m: &'d MemoryProfile) {
    out.u64(m.peak_bytes);
    out.opt_u64(m.peak_timestamp_ns);
    out.u32(s.opt(m.peak_device.as_deref()));
    for v in m.peak_by_category {
        out.u64(v);
    }
    out.u64(m.alloc_count);
    out.u64(m.free_count);
    let n = m.live_at_peak.len();
    let mut c = Live::<Write>::new(n);
    for x in &m.live_at_peak {
        c.memory_index.u64(x.memory_index as u64);
        c.tensor_id.put(s, &x.tensor_id);
        c.bytes.u64(x.bytes);
        c.category.put(&x.category);
        c.span_id.put(s, &x.span_id);
        c.op_name.opt(s, x.op_name.as_deref());
        c.timestamp_ns.u64(x.timestamp_ns);
        c.line.u64(x.line);
    }
    c.finish(n, out);
    let n = m.devices.len();
    let mut c = Devices::<Write>::new(n);
    for x in &m.devices {
        c.device.put(s, &x.device);
        c.peak_bytes.u64(x.peak_bytes);
        c.peak_timestamp_ns.u64(x.peak_timestamp_ns);
        c.final_live_bytes.u64(x.final_live_bytes);
        c.capacity_bytes.u64(x.capacity_bytes);
        c.alloc_count.u64(x.alloc_count);
        c.free_count.u64(x.free_count);
    }
    c.finish(n, out);
}

/// The head part, into `m`.
#[inline(never)]
pub(super) fn read_head(
    m: &mut MemoryProfile,
    r: &mut In<'_>,
    b: &[u8],
    s: Strs<'_>,
) -> Result<()> {
    m.peak_bytes = r.u64()?;
    m.peak_timestamp_ns = r.opt_u64()?;
    m.peak_device = s.opt(r.u32()?)?.map(String::from);
    for v in &mut m.peak_by_category {
        *v = r.u64()?;
    }
    m.alloc_count = r.u64()?;
    m.free_count = r.u64()?;
    let t = r.table()?;
    let c = Live::<Read<'_>>::from(&t, b, s)?;
    m.live_at_peak = (0..t.n)
        .map(|i| {
            Ok(LiveAllocation {
                memory_index: usize::try_from(c.memory_index.get(i)?)
                    .map_err(|_| broken("a memory index does not fit"))?,
                tensor_id: String::from(c.tensor_id.get(i)?),
                bytes: c.bytes.get(i)?,
                category: c.category.get(i)?,
                span_id: String::from(c.span_id.get(i)?),
                op_name: c.op_name.opt(i)?.map(String::from),
                timestamp_ns: c.timestamp_ns.get(i)?,
                line: c.line.get(i)?,
            })
        })
        .collect::<Result<_>>()?;
    let t = r.table()?;
    let c = Devices::<Read<'_>>::from(&t, b, s)?;
    m.devices = (0..t.n)
        .map(|i| {
            Ok(DeviceMemoryProfile {
                device: String::from(c.device.get(i)?),
                peak_bytes: c.peak_bytes.get(i)?,
                peak_timestamp_ns: c.peak_timestamp_ns.u64(i)?,
                final_live_bytes: c.final_live_bytes.get(i)?,
                capacity_bytes: c.capacity_bytes.u64(i)?,
                alloc_count: c.alloc_count.get(i)?,
                free_count: c.free_count.get(i)?,
            })
        })
        .collect::<Result<_>>()?;
    Ok(())
}

/// One sample into the columns.
#[inline]
pub(super) fn write_sample(c: &mut Samples<Write>, _: &mut Strings<'_>, x: &MemorySample) {
    c.timestamp_ns.u64(x.timestamp_ns);
    c.device.u32(x.device);
    c.live_bytes.u64(x.live_bytes);
    for (col, v) in c.by_category.iter_mut().zip(x.by_category) {
        col.u64(v);
    }
}

/// A block of samples, appended to `v`.
#[inline(never)]
pub(super) fn read_samples(
    v: &mut Vec<MemorySample>,
    t: &Table,
    b: &[u8],
    s: Strs<'_>,
) -> Result<()> {
    let c = Samples::<Read<'_>>::from(t, b, s)?;
    for i in 0..t.n {
        let mut by_category = [0; TensorCategory::ALL.len()];
        for (slot, col) in by_category.iter_mut().zip(&c.by_category) {
            *slot = col.get(i)?;
        }
        v.push(MemorySample {
            timestamp_ns: c.timestamp_ns.get(i)?,
            device: c.device.get(i)?,
            live_bytes: c.live_bytes.get(i)?,
            by_category,
        });
    }
    Ok(())
}
