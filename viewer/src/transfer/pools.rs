//! A table's pools, as they are: the op and memory tables' strings and shapes, each part a
//! value a row in the order of their numbers, sent before the rows that refer to them by
//! number (`ops.rs`, `memory.rs`), so the page stores them without hashing them again.

use candle_trace_schema::format::table::Pools;

use super::columns::{columns, Read, Str, U64List, Write};
use super::wire::{broken, Result, Strings, Strs, Table};

columns! {
    /// A table's strings, one a row.
    PoolStrings {
        value: Str,
    }
}

columns! {
    /// A table's shapes, one a row.
    PoolShapes {
        dims: U64List,
    }
}

/// One string into the columns.
#[inline]
pub(super) fn write_string(c: &mut PoolStrings<Write>, _: &mut Strings<'_>, x: &str) {
    c.value.put(x);
}

/// A block of strings, stored as the pool's next ones.
#[inline(never)]
pub(super) fn read_strings(p: &mut Pools, t: &Table, b: &[u8], s: Strs<'_>) -> Result<()> {
    let c = PoolStrings::<Read<'_>>::from(t, b, s)?;
    // At once: one string at a time cost the page 60 ms of a 10 MB open (its wasm is built
    // for size, each push a call).
    let (block, ends) = c.value.block(t.n)?;
    p.extend_strings(block, ends)
        .map_err(|e| broken(e.to_string()))
}

/// One shape into the columns.
#[inline]
pub(super) fn write_shape(c: &mut PoolShapes<Write>, _: &mut Strings<'_>, x: &[u64]) {
    c.dims.u64s(x);
}

/// A block of shapes, stored as the pool's next ones.
#[inline(never)]
pub(super) fn read_shapes(p: &mut Pools, t: &Table, b: &[u8], s: Strs<'_>) -> Result<()> {
    let c = PoolShapes::<Read<'_>>::from(t, b, s)?;
    let mut dims = Vec::new();
    for i in 0..t.n {
        dims.clear();
        dims.extend(c.dims.u64s(i)?);
        p.push_shape(&dims).map_err(|e| broken(e.to_string()))?;
    }
    Ok(())
}
