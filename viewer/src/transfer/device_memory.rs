//! The device memory part: a row per `device_memory` record.

use candle_trace_schema::format::events::DeviceMemory;
use candle_trace_schema::format::records::Lined;

use super::columns::{columns, Id, OptU64, Read, Write, U64};
use super::wire::{Result, Strings, Strs, Table};

columns! {
    /// A device memory record's columns.
    DeviceMemoryCols {
        line: U64,
        timestamp_ns: U64,
        device: Id,
        used_bytes: U64,
        free_bytes: U64,
        reserved_bytes: OptU64,
    }
}

/// One device memory record into the columns.
#[inline]
pub(super) fn write<'d>(
    c: &mut DeviceMemoryCols<Write>,
    s: &mut Strings<'d>,
    x: &'d Lined<DeviceMemory>,
) {
    c.line.u64(x.line);
    let x = &x.event;
    c.timestamp_ns.u64(x.timestamp_ns);
    c.device.put(s, &x.device);
    c.used_bytes.u64(x.used_bytes);
    c.free_bytes.u64(x.free_bytes);
    c.reserved_bytes.u64(x.reserved_bytes);
}

/// A block of device memory records, appended to `v`.
#[inline(never)]
pub(super) fn read(
    v: &mut Vec<Lined<DeviceMemory>>,
    t: &Table,
    b: &[u8],
    s: Strs<'_>,
) -> Result<()> {
    let c = DeviceMemoryCols::<Read<'_>>::from(t, b, s)?;
    for i in 0..t.n {
        let event = DeviceMemory {
            timestamp_ns: c.timestamp_ns.get(i)?,
            device: String::from(c.device.get(i)?),
            used_bytes: c.used_bytes.get(i)?,
            free_bytes: c.free_bytes.get(i)?,
            reserved_bytes: c.reserved_bytes.u64(i)?,
        };
        v.push(Lined::new(c.line.get(i)?, event));
    }
    Ok(())
}
