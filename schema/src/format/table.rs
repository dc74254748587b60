//! Compact tables of records. A trace holds hundreds of thousands of records whose strings are
//! short and repeat (device, dtype, op name) or follow one another (the span id of consecutive
//! records), and whose shapes come from a few dozen; as one struct per record, each with its own
//! strings and its own shape on the heap, a `memory` record took 176 bytes and a heap block.
//! A table keeps each record as a fixed row of numbers; its names and shapes are stored once and
//! its ids end to end, in pools of their own (`Strings`, `Shapes`); a record is read back as a
//! row of borrowed fields ([`MemoryRow`], [`OpRow`]).
//!
//! [`MemoryTable`] holds a document's `memory` records (56 bytes a row, plus the bytes of its
//! tensor id), [`OpTable`] its `op` records (72 bytes a row, plus its input and output ids).

use alloc::vec::Vec;
use core::fmt;

use crate::format::events::fast::{RawMemory, RawOp};
use crate::format::events::{
    derived_storage_bytes, CompactString, MemoryAction, MemoryEvent, Op, TensorCategory,
};
use crate::format::records::{Lined, MemoryRecord, MemoryRecords};

mod pool;

pub use pool::{CellError, Pools};
use pool::{Strings, DEVICE, DTYPE, NONE, OP_NAME};

/// A table whose records are read back by position.
pub trait Table {
    /// A record read back.
    type Row<'a>
    where
        Self: 'a;
    /// Number of records.
    fn len(&self) -> usize;
    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Record `i` (below [`Table::len`]).
    fn row(&self, i: usize) -> Self::Row<'_>;
}

/// The records of a table in order ([`MemoryTable::iter`], [`OpTable::iter`]).
pub struct Rows<'a, T> {
    table: &'a T,
    range: core::ops::Range<usize>,
}

impl<T> Clone for Rows<'_, T> {
    fn clone(&self) -> Self {
        Rows {
            table: self.table,
            range: self.range.clone(),
        }
    }
}

impl<'a, T: Table> Iterator for Rows<'a, T> {
    type Item = T::Row<'a>;
    fn next(&mut self) -> Option<T::Row<'a>> {
        self.range.next().map(|i| self.table.row(i))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.range.size_hint()
    }
    fn nth(&mut self, n: usize) -> Option<T::Row<'a>> {
        self.range.nth(n).map(|i| self.table.row(i))
    }
}

impl<'a, T: Table> DoubleEndedIterator for Rows<'a, T> {
    fn next_back(&mut self) -> Option<T::Row<'a>> {
        self.range.next_back().map(|i| self.table.row(i))
    }
}

impl<T: Table> ExactSizeIterator for Rows<'_, T> {}

/// A list of records that the reader grows to its projected size (`make_room` in
/// `document`): a `Vec` or a table.
pub(crate) trait Room {
    fn len(&self) -> usize;
    fn capacity(&self) -> usize;
    fn reserve_exact(&mut self, additional: usize);
}

impl<T> Room for Vec<T> {
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn capacity(&self) -> usize {
        Vec::capacity(self)
    }
    fn reserve_exact(&mut self, additional: usize) {
        Vec::reserve_exact(self, additional);
    }
}

/// What both tables share: size and room, records by position ([`Table`], [`Rows`]), equality
/// by records (however the strings were numbered), and building from owned events.
macro_rules! table_common {
    ($table:ident, $row:ident, $cells:ident, $event:ident) => {
        impl $table {
            /// An empty table.
            pub fn new() -> Self {
                $table::default()
            }

            /// Number of records.
            pub fn len(&self) -> usize {
                self.rows.len()
            }

            /// Whether there are none.
            pub fn is_empty(&self) -> bool {
                self.rows.is_empty()
            }

            /// Rows the table holds without growing.
            pub fn capacity(&self) -> usize {
                self.rows.capacity()
            }

            /// Make room for exactly `additional` more rows.
            pub fn reserve_exact(&mut self, additional: usize) {
                self.rows.reserve_exact(additional);
            }

            /// `reserve_exact`, or the reason there is no room.
            pub fn try_reserve_exact(
                &mut self,
                additional: usize,
            ) -> Result<(), alloc::collections::TryReserveError> {
                self.rows.try_reserve_exact(additional)
            }

            /// The strings and shapes the rows refer to by number.
            pub fn pools(&self) -> &Pools {
                &self.pools
            }

            /// The pools, to store values as they are before the rows that refer to them
            /// (`push_cells`).
            pub fn pools_mut(&mut self) -> &mut Pools {
                &mut self.pools
            }

            /// The records as stored.
            pub fn cells(&self) -> &[$cells] {
                &self.rows
            }

            /// Record `i`, if there is one.
            pub fn get(&self, i: usize) -> Option<$row<'_>> {
                (i < self.len()).then(|| self.row(i))
            }

            /// The records in order.
            pub fn iter(&self) -> Rows<'_, $table> {
                Rows {
                    table: self,
                    range: 0..self.len(),
                }
            }
        }

        impl Table for $table {
            type Row<'a> = $row<'a>;
            fn len(&self) -> usize {
                self.rows.len()
            }
            fn row(&self, i: usize) -> $row<'_> {
                $table::row(self, i)
            }
        }

        impl Room for $table {
            fn len(&self) -> usize {
                self.rows.len()
            }
            fn capacity(&self) -> usize {
                self.rows.capacity()
            }
            fn reserve_exact(&mut self, additional: usize) {
                self.rows.reserve_exact(additional);
            }
        }

        impl<'a> IntoIterator for &'a $table {
            type Item = $row<'a>;
            type IntoIter = Rows<'a, $table>;
            fn into_iter(self) -> Self::IntoIter {
                self.iter()
            }
        }

        impl fmt::Debug for $table {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_list().entries(self.iter()).finish()
            }
        }

        impl PartialEq for $table {
            fn eq(&self, other: &Self) -> bool {
                self.len() == other.len() && self.iter().eq(other.iter())
            }
        }

        impl Eq for $table {}

        impl FromIterator<Lined<$event>> for $table {
            fn from_iter<I: IntoIterator<Item = Lined<$event>>>(iter: I) -> Self {
                let mut table = $table::new();
                table.extend(iter);
                table
            }
        }

        impl Extend<Lined<$event>> for $table {
            fn extend<I: IntoIterator<Item = Lined<$event>>>(&mut self, iter: I) {
                for e in iter {
                    self.push_event(e.line, &e.event);
                }
            }
        }
    };
}

/// One `memory` record as stored: numbers, and strings and shape by their numbers in the
/// table's [`Pools`]; the fields as in [`MemoryRow`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryCells {
    /// 1-based line number in the file.
    pub line: u64,
    /// When it happened.
    pub timestamp_ns: u64,
    /// Number of bytes.
    pub bytes: u64,
    /// String number of the tensor id.
    pub tensor_id: u32,
    /// String number of the span id.
    pub span_id: u32,
    /// String number of the op name, `u32::MAX` for none.
    pub op_name: u32,
    /// String number of the device.
    pub device: u32,
    /// String number of the dtype.
    pub dtype: u32,
    /// Shape number.
    pub shape: u32,
    /// Alloc or free.
    pub action: MemoryAction,
    /// What the bytes hold.
    pub category: TensorCategory,
}

/// One `memory` record read from a [`MemoryTable`]: the fields of a [`MemoryEvent`] (strings
/// and shape borrowed from the table) and its line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryRow<'a> {
    /// 1-based line number in the file.
    pub line: u64,
    /// When it happened, ns since the run started.
    pub timestamp_ns: u64,
    /// Tensor the bytes belong to.
    pub tensor_id: &'a str,
    /// Span it happened in.
    pub span_id: &'a str,
    /// Op that caused it.
    pub op_name: Option<&'a str>,
    /// Device holding the bytes.
    pub device: &'a str,
    /// Number of bytes.
    pub bytes: u64,
    /// Alloc or free.
    pub action: MemoryAction,
    /// Tensor shape.
    pub shape: &'a [u64],
    /// Tensor dtype.
    pub dtype: &'a str,
    /// What the bytes hold.
    pub category: TensorCategory,
}

impl<'a> MemoryRow<'a> {
    /// The fields of `event`, read from `line`, as a row.
    pub fn of(line: u64, event: &'a MemoryEvent) -> Self {
        MemoryRow {
            line,
            timestamp_ns: event.timestamp_ns,
            tensor_id: &event.tensor_id,
            span_id: &event.span_id,
            op_name: event.op_name.as_deref(),
            device: &event.device,
            bytes: event.bytes,
            action: event.action,
            shape: &event.shape,
            dtype: &event.dtype,
            category: event.category,
        }
    }

    /// The record as an owned event.
    pub fn to_event(&self) -> MemoryEvent {
        MemoryEvent {
            timestamp_ns: self.timestamp_ns,
            tensor_id: self.tensor_id.into(),
            span_id: self.span_id.into(),
            op_name: self.op_name.map(Into::into),
            device: self.device.into(),
            bytes: self.bytes,
            action: self.action,
            shape: self.shape.to_vec(),
            dtype: self.dtype.into(),
            category: self.category,
        }
    }
}

/// One record of a [`MemoryTable`], its fields read when asked for.
#[derive(Clone, Copy)]
pub(crate) struct MemoryFields<'a> {
    table: &'a MemoryTable,
    cells: &'a MemoryCells,
}

impl<'a> MemoryRecord<'a> for MemoryFields<'a> {
    fn line(&self) -> u64 {
        self.cells.line
    }
    fn timestamp_ns(&self) -> u64 {
        self.cells.timestamp_ns
    }
    fn tensor_id(&self) -> &'a str {
        self.table.pools.str(self.cells.tensor_id)
    }
    fn device(&self) -> &'a str {
        self.table.pools.str(self.cells.device)
    }
    fn bytes(&self) -> u64 {
        self.cells.bytes
    }
    fn action(&self) -> MemoryAction {
        self.cells.action
    }
    fn category(&self) -> TensorCategory {
        self.cells.category
    }
    fn span_id(&self) -> &'a str {
        self.table.pools.str(self.cells.span_id)
    }
    fn op_name(&self) -> Option<&'a str> {
        self.table.pools.opt_str(self.cells.op_name)
    }
}

impl<'a> MemoryRecords<'a> for &'a MemoryTable {
    type Record = MemoryFields<'a>;
    fn len(self) -> usize {
        MemoryTable::len(self)
    }
    fn at(self, i: usize) -> MemoryFields<'a> {
        self.fields(i)
    }
}

/// A document's `memory` records in file order, as compact rows (see the [module](self)).
#[derive(Clone, Default)]
pub struct MemoryTable {
    rows: Vec<MemoryCells>,
    pools: Pools,
}

table_common!(MemoryTable, MemoryRow, MemoryCells, MemoryEvent);

impl MemoryTable {
    /// Record `i`.
    ///
    /// # Panics
    /// When `i` is not below [`MemoryTable::len`], as indexing a slice would.
    pub fn row(&self, i: usize) -> MemoryRow<'_> {
        self.row_of(&self.rows[i])
    }

    /// Record `i`'s fields one at a time (a replay reads a few of each record, some of them
    /// many times: building whole rows was most of its time).
    pub(crate) fn fields(&self, i: usize) -> MemoryFields<'_> {
        MemoryFields {
            table: self,
            cells: &self.rows[i],
        }
    }

    fn row_of(&self, c: &MemoryCells) -> MemoryRow<'_> {
        let p = &self.pools;
        let s = |i| p.str(i);
        MemoryRow {
            line: c.line,
            timestamp_ns: c.timestamp_ns,
            tensor_id: s(c.tensor_id),
            span_id: s(c.span_id),
            op_name: p.opt_str(c.op_name),
            device: s(c.device),
            bytes: c.bytes,
            action: c.action,
            shape: p.shapes.get(c.shape),
            dtype: s(c.dtype),
            category: c.category,
        }
    }

    /// Append a record (as read from a line, or as moved from another table).
    pub fn push(&mut self, row: MemoryRow<'_>) {
        let shape = self.pools.shapes.intern(row.shape);
        self.push_with_shape(row, shape);
    }

    /// Append `event`, read from `line`.
    pub fn push_event(&mut self, line: u64, event: &MemoryEvent) {
        self.push(MemoryRow::of(line, event));
    }

    /// [`MemoryTable::push`] with the shape given by its dimensions one at a time (`row.shape`
    /// is not read).
    pub fn push_with_dims(&mut self, row: MemoryRow<'_>, dims: impl Iterator<Item = u64>) {
        let shape = self.pools.shapes.intern_iter(dims);
        self.push_with_shape(row, shape);
    }

    /// [`MemoryTable::push_with_dims`] of a row the fast path read, with its shape's canonical
    /// text as well (see [`pool::Shapes::intern_written`]).
    fn push_written(
        &mut self,
        row: MemoryRow<'_>,
        shape_text: &str,
        dims: impl Iterator<Item = u64>,
    ) {
        let shape = self.pools.shapes.intern_written(shape_text, dims);
        self.push_with_shape(row, shape);
    }

    /// A record the fast path read from `line` (its shape still text).
    #[inline]
    pub(crate) fn push_raw(&mut self, line: u64, raw: RawMemory<'_>) {
        let row = MemoryRow {
            line,
            timestamp_ns: raw.timestamp_ns,
            tensor_id: raw.tensor_id,
            span_id: raw.span_id,
            op_name: raw.op_name,
            device: raw.device,
            bytes: raw.bytes,
            action: raw.action,
            shape: &[],
            dtype: raw.dtype,
            category: raw.category,
        };
        self.push_written(row, raw.shape.text(), raw.shape.iter());
    }

    /// Append a record as stored, its numbers referring to this table's pools (filled first
    /// through [`MemoryTable::pools_mut`]): each is checked to be in them, and nothing is
    /// hashed but the names the record is the first to use.
    pub fn push_cells(&mut self, c: MemoryCells) -> Result<(), CellError> {
        let p = &mut self.pools;
        p.check_shape(c.shape)?;
        let op_name = (c.op_name != NONE).then_some(c.op_name);
        p.refer(
            [c.tensor_id, c.span_id],
            op_name.into_iter().chain([c.device, c.dtype]),
        )?;
        self.rows.push(c);
        Ok(())
    }

    fn push_with_shape(&mut self, row: MemoryRow<'_>, shape: u32) {
        let p = &mut self.pools;
        let tensor_id = p.id(row.tensor_id);
        let span_id = p.span(row.span_id);
        let op_name = row.op_name.map_or(NONE, |name| p.name(OP_NAME, name));
        let device = p.name(DEVICE, row.device);
        let dtype = p.name(DTYPE, row.dtype);
        self.rows.push(MemoryCells {
            line: row.line,
            timestamp_ns: row.timestamp_ns,
            bytes: row.bytes,
            tensor_id,
            span_id,
            op_name,
            device,
            dtype,
            shape,
            action: row.action,
            category: row.category,
        });
    }
}

/// One `op` record as stored: numbers, and strings and shape by their numbers in the table's
/// [`Pools`]; the fields as in [`OpRow`]. Its inputs are `inputs[previous row's
/// inputs_end..inputs_end]` of the table's list of input string numbers
/// ([`OpTable::inputs_of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpCells {
    /// 1-based line number in the file.
    pub line: u64,
    /// How long the op took.
    pub duration_ns: u64,
    /// When the op started.
    pub timestamp_ns: u64,
    /// Dense output bytes when `has_storage_bytes`, else 0.
    pub storage_bytes: u64,
    /// Bytes of all inputs.
    pub input_storage_bytes: u64,
    /// String number of the span id.
    pub span_id: u32,
    /// String number of the op name.
    pub op_name: u32,
    /// String number of the output id, `u32::MAX` for none.
    pub output: u32,
    /// String number of the dtype.
    pub dtype: u32,
    /// String number of the device.
    pub device: u32,
    /// Shape number.
    pub shape: u32,
    /// Where the op's inputs end in the table's list of input string numbers.
    pub inputs_end: u32,
    /// Whether the record had `storage_bytes`.
    pub has_storage_bytes: bool,
}

/// An op's input tensor ids, borrowed from its [`OpTable`] (or from an [`Op`]).
#[derive(Clone, Copy)]
pub struct Inputs<'a>(InputsRepr<'a>);

#[derive(Clone, Copy)]
enum InputsRepr<'a> {
    Table(&'a Strings, &'a [u32]),
    Event(&'a [CompactString]),
}

impl<'a> Inputs<'a> {
    /// No inputs (a row built to be pushed with [`OpTable::push_with_lists`], which reads its
    /// inputs from elsewhere).
    pub const NONE: Inputs<'static> = Inputs(InputsRepr::Event(&[]));

    /// Number of inputs.
    pub fn len(&self) -> usize {
        match self.0 {
            InputsRepr::Table(_, ids) => ids.len(),
            InputsRepr::Event(ids) => ids.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Input `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<&'a str> {
        match self.0 {
            InputsRepr::Table(strings, ids) => Some(strings.get(*ids.get(i)?)),
            InputsRepr::Event(ids) => ids.get(i).map(|id| id.as_str()),
        }
    }

    /// The inputs in order.
    pub fn iter(&self) -> InputsIter<'a> {
        InputsIter {
            inputs: *self,
            range: 0..self.len(),
        }
    }
}

/// The iterator of [`Inputs::iter`].
#[derive(Clone)]
pub struct InputsIter<'a> {
    inputs: Inputs<'a>,
    range: core::ops::Range<usize>,
}

impl<'a> Iterator for InputsIter<'a> {
    type Item = &'a str;
    fn next(&mut self) -> Option<&'a str> {
        self.inputs.get(self.range.next()?)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.range.size_hint()
    }
}

impl<'a> DoubleEndedIterator for InputsIter<'a> {
    fn next_back(&mut self) -> Option<&'a str> {
        self.inputs.get(self.range.next_back()?)
    }
}

impl ExactSizeIterator for InputsIter<'_> {}

impl<'a> IntoIterator for Inputs<'a> {
    type Item = &'a str;
    type IntoIter = InputsIter<'a>;
    fn into_iter(self) -> InputsIter<'a> {
        self.iter()
    }
}

impl fmt::Debug for Inputs<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for Inputs<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Inputs<'_> {}

/// One `op` record read from an [`OpTable`]: the fields of an [`Op`] (strings, inputs and
/// shape borrowed from the table) and its line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpRow<'a> {
    /// 1-based line number in the file.
    pub line: u64,
    /// Span the op ran in.
    pub span_id: &'a str,
    /// Operation name (`matmul`, `add` ...).
    pub op_name: &'a str,
    /// Input tensor ids.
    pub inputs: Inputs<'a>,
    /// Output tensor id.
    pub output: Option<&'a str>,
    /// Output shape.
    pub shape: &'a [u64],
    /// Output dtype (`f32`, `bf16` ...).
    pub dtype: &'a str,
    /// Device the op ran on.
    pub device: &'a str,
    /// How long the op took.
    pub duration_ns: u64,
    /// When the op started, ns since the run started.
    pub timestamp_ns: u64,
    /// Dense output bytes; see [`OpRow::output_bytes`] for the derived value.
    pub storage_bytes: Option<u64>,
    /// Bytes of all inputs.
    pub input_storage_bytes: u64,
}

impl<'a> OpRow<'a> {
    /// The fields of `op`, read from `line`, as a row.
    pub fn of(line: u64, op: &'a Op) -> Self {
        OpRow {
            line,
            span_id: &op.span_id,
            op_name: &op.op_name,
            inputs: Inputs(InputsRepr::Event(&op.inputs)),
            output: op.output.as_deref(),
            shape: &op.shape,
            dtype: &op.dtype,
            device: &op.device,
            duration_ns: op.duration_ns,
            timestamp_ns: op.timestamp_ns,
            storage_bytes: op.storage_bytes,
            input_storage_bytes: op.input_storage_bytes,
        }
    }

    /// `storage_bytes`, or product(shape) × size(dtype) when absent (as [`Op::output_bytes`]).
    pub fn output_bytes(&self) -> u64 {
        self.storage_bytes
            .unwrap_or_else(|| derived_storage_bytes(self.shape, self.dtype))
    }

    /// The output's bytes where the record says them (as [`Op::known_output_bytes`]).
    pub fn known_output_bytes(&self) -> Option<u64> {
        crate::format::events::known_output_bytes(self.storage_bytes, self.shape, self.dtype)
    }

    /// The record as an owned event.
    pub fn to_event(&self) -> Op {
        Op {
            span_id: self.span_id.into(),
            op_name: self.op_name.into(),
            inputs: self.inputs.iter().map(Into::into).collect(),
            output: self.output.map(Into::into),
            shape: self.shape.to_vec(),
            dtype: self.dtype.into(),
            device: self.device.into(),
            duration_ns: self.duration_ns,
            timestamp_ns: self.timestamp_ns,
            storage_bytes: self.storage_bytes,
            input_storage_bytes: self.input_storage_bytes,
        }
    }
}

/// A document's `op` records in file order, as compact rows (see the [module](self)).
#[derive(Clone, Default)]
pub struct OpTable {
    rows: Vec<OpCells>,
    /// Every row's input ids, end to end (string numbers).
    inputs: Vec<u32>,
    pools: Pools,
}

table_common!(OpTable, OpRow, OpCells, Op);

impl OpTable {
    /// Record `i`.
    ///
    /// # Panics
    /// When `i` is not below [`OpTable::len`], as indexing a slice would.
    pub fn row(&self, i: usize) -> OpRow<'_> {
        self.row_of(i, &self.rows[i])
    }

    fn row_of(&self, i: usize, c: &OpCells) -> OpRow<'_> {
        let p = &self.pools;
        let s = |i| p.str(i);
        OpRow {
            line: c.line,
            span_id: s(c.span_id),
            op_name: s(c.op_name),
            inputs: Inputs(InputsRepr::Table(&p.strings, self.inputs_of(i))),
            output: p.opt_str(c.output),
            shape: p.shapes.get(c.shape),
            dtype: s(c.dtype),
            device: s(c.device),
            duration_ns: c.duration_ns,
            timestamp_ns: c.timestamp_ns,
            storage_bytes: c.has_storage_bytes.then_some(c.storage_bytes),
            input_storage_bytes: c.input_storage_bytes,
        }
    }

    /// Append a record (as moved from another table).
    pub fn push(&mut self, row: OpRow<'_>) {
        let shape = self.pools.shapes.intern(row.shape);
        self.push_with_shape(row, row.inputs.iter(), shape);
    }

    /// Append `op`, read from `line`.
    pub fn push_event(&mut self, line: u64, op: &Op) {
        self.push(OpRow::of(line, op));
    }

    /// [`OpTable::push`] with the inputs and the shape's dimensions given one at a time
    /// (`row.inputs` and `row.shape` are not read).
    pub fn push_with_lists<'s>(
        &mut self,
        row: OpRow<'_>,
        inputs: impl Iterator<Item = &'s str>,
        dims: impl Iterator<Item = u64>,
    ) {
        let shape = self.pools.shapes.intern_iter(dims);
        self.push_with_shape(row, inputs, shape);
    }

    /// [`OpTable::push_with_lists`] of a row the fast path read, with its shape's canonical
    /// text as well (see [`pool::Shapes::intern_written`]).
    fn push_written<'s>(
        &mut self,
        row: OpRow<'_>,
        inputs: impl Iterator<Item = &'s str>,
        shape_text: &str,
        dims: impl Iterator<Item = u64>,
    ) {
        let shape = self.pools.shapes.intern_written(shape_text, dims);
        self.push_with_shape(row, inputs, shape);
    }

    /// A record the fast path read from `line` (its inputs and shape still text).
    #[inline]
    pub(crate) fn push_raw(&mut self, line: u64, raw: RawOp<'_>) {
        let row = OpRow {
            line,
            span_id: raw.span_id,
            op_name: raw.op_name,
            inputs: Inputs::NONE,
            output: raw.output,
            shape: &[],
            dtype: raw.dtype,
            device: raw.device,
            duration_ns: raw.duration_ns,
            timestamp_ns: raw.timestamp_ns,
            storage_bytes: raw.storage_bytes,
            input_storage_bytes: raw.input_storage_bytes,
        };
        self.push_written(row, raw.inputs.iter(), raw.shape.text(), raw.shape.iter());
    }

    /// Record `i`'s input string numbers.
    ///
    /// # Panics
    /// When `i` is not below [`OpTable::len`], as indexing a slice would.
    pub fn inputs_of(&self, i: usize) -> &[u32] {
        let start = match i.checked_sub(1) {
            Some(p) => self.rows[p].inputs_end as usize,
            None => 0,
        };
        &self.inputs[start..self.rows[i].inputs_end as usize]
    }

    /// [`MemoryTable::push_cells`] for an op, whose input string numbers are `inputs` (`c`'s
    /// `inputs_end` is not read).
    pub fn push_cells(
        &mut self,
        mut c: OpCells,
        inputs: impl IntoIterator<Item = u32>,
    ) -> Result<(), CellError> {
        let at = self.inputs.len();
        self.inputs.extend(inputs);
        let p = &mut self.pools;
        let output = (c.output != NONE).then_some(c.output);
        let ids = self.inputs[at..]
            .iter()
            .copied()
            .chain([c.span_id])
            .chain(output);
        let checked = p
            .check_shape(c.shape)
            .and_then(|()| p.refer(ids, [c.op_name, c.device, c.dtype]));
        if let Err(e) = checked {
            self.inputs.truncate(at);
            return Err(e);
        }
        c.inputs_end = self.inputs.len() as u32;
        self.rows.push(c);
        Ok(())
    }

    fn push_with_shape<'s>(
        &mut self,
        row: OpRow<'_>,
        inputs: impl Iterator<Item = &'s str>,
        shape: u32,
    ) {
        let p = &mut self.pools;
        for input in inputs {
            self.inputs.push(p.id(input));
        }
        let span_id = p.span(row.span_id);
        let op_name = p.name(OP_NAME, row.op_name);
        let output = row.output.map_or(NONE, |o| p.id(o));
        let device = p.name(DEVICE, row.device);
        let dtype = p.name(DTYPE, row.dtype);
        self.rows.push(OpCells {
            line: row.line,
            duration_ns: row.duration_ns,
            timestamp_ns: row.timestamp_ns,
            storage_bytes: row.storage_bytes.unwrap_or(0),
            input_storage_bytes: row.input_storage_bytes,
            span_id,
            op_name,
            output,
            dtype,
            device,
            shape,
            // A table of 2^32 inputs would need hundreds of gigabytes of trace in memory.
            inputs_end: self.inputs.len() as u32,
            has_storage_bytes: row.storage_bytes.is_some(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;

    fn event(t: u64, tensor: &str, span: &str, op: Option<&str>, shape: &[u64]) -> MemoryEvent {
        MemoryEvent {
            timestamp_ns: t,
            tensor_id: tensor.into(),
            span_id: span.into(),
            op_name: op.map(Into::into),
            device: "cuda:0".into(),
            bytes: t * 10,
            action: if t % 2 == 0 {
                MemoryAction::Alloc
            } else {
                MemoryAction::Free
            },
            shape: shape.to_vec(),
            dtype: "bf16".into(),
            category: TensorCategory::Activation,
        }
    }

    #[test]
    fn rows_read_back_as_pushed() {
        let long = "model.layers.17.self_attn.q_proj.matmul";
        let events = [
            event(2, "t1", "s1", Some("matmul"), &[4, 512, 1024]),
            event(3, "t2", "s1", None, &[]),
            event(4, "t3", "s2", Some(long), &[4, 512, 1024]),
            event(5, "t1", "s1", Some("matmul"), &[7]),
            event(6, "", "", Some(""), &[0, 0]),
        ];
        let mut table = MemoryTable::new();
        for (i, e) in events.iter().enumerate() {
            table.push_event(10 + i as u64, e);
        }
        assert_eq!(table.len(), 5);
        for (i, e) in events.iter().enumerate() {
            let row = table.row(i);
            assert_eq!(row.line, 10 + i as u64);
            assert_eq!(&row.to_event(), e, "row {i}");
        }
        assert_eq!(table.get(5), None);
        assert_eq!(table.iter().next_back().map(|r| r.line), Some(14));
        // Names, devices, dtypes and shapes are stored once; the two rows of span s1 in a run
        // share its id, the third (after s2) stores it again.
        assert_eq!(table.pools.shapes.pool.ends.len(), 4);
        let strings: Vec<&str> = (0..table.pools.strings.ends.len() as u32)
            .map(|i| table.pools.str(i))
            .collect();
        assert_eq!(
            strings,
            vec![
                "t1", "s1", "matmul", "cuda:0", "bf16", "t2", "t3", "s2", long, "t1", "s1", "", "",
                ""
            ]
        );
    }

    #[test]
    fn a_shape_as_written_is_the_shape_of_its_numbers() {
        // Rows pushed from a line's text and from numbers, interleaved: each distinct shape is
        // stored once whichever way it came, and reads back as its numbers.
        let mut table = MemoryTable::new();
        let texts = [
            "4,512,1024",
            "",
            "4,512,1024",
            "7",
            "18446744073709551615,0",
        ];
        let e = event(2, "t1", "s1", None, &[]);
        table.push_event(1, &event(2, "t1", "s1", None, &[7]));
        for (i, text) in texts.iter().enumerate() {
            let row = MemoryRow::of(10 + i as u64, &e);
            let dims = text
                .split(',')
                .filter(|d| !d.is_empty())
                .map(|d| d.parse::<u64>().unwrap());
            table.push_written(row, text, dims);
        }
        table.push_event(20, &event(2, "t1", "s1", None, &[4, 512, 1024]));
        let shapes: Vec<&[u64]> = table.iter().map(|r| r.shape).collect();
        assert_eq!(
            shapes,
            vec![
                &[7][..],
                &[4, 512, 1024],
                &[],
                &[4, 512, 1024],
                &[7],
                &[u64::MAX, 0],
                &[4, 512, 1024],
            ]
        );
        assert_eq!(table.pools.shapes.pool.ends.len(), 4);
        // Each distinct text once.
        assert_eq!(table.pools.shapes.written.ends.len(), 4);
    }

    #[test]
    fn equality_is_by_records() {
        let a = event(2, "t1", "s1", Some("add"), &[3]);
        let b = event(4, "t2", "s1", Some("mul"), &[3]);
        let one: MemoryTable = [Lined::new(1, a.clone()), Lined::new(2, b.clone())]
            .into_iter()
            .collect();
        // The same records, their strings numbered in another order.
        let mut other = MemoryTable::new();
        other.pools.id("unused");
        other.push_event(1, &a);
        other.push_event(2, &b);
        assert_eq!(one, other);
        other.push_event(3, &b);
        assert_ne!(one, other);
        let mut changed = MemoryTable::new();
        changed.push_event(1, &a);
        changed.push_event(2, &MemoryEvent { bytes: 1, ..b });
        assert_ne!(one, changed);
    }

    fn op(
        span: &str,
        name: &str,
        inputs: &[&str],
        output: Option<&str>,
        storage: Option<u64>,
    ) -> Op {
        Op {
            span_id: span.into(),
            op_name: name.into(),
            inputs: inputs.iter().map(|&i| i.into()).collect(),
            output: output.map(Into::into),
            shape: vec![2, inputs.len() as u64],
            dtype: "f32".into(),
            device: "cpu".into(),
            duration_ns: 100 + inputs.len() as u64,
            timestamp_ns: 7,
            storage_bytes: storage,
            input_storage_bytes: 3,
        }
    }

    #[test]
    fn op_rows_read_back_as_pushed() {
        let ops = [
            op("s1", "matmul", &["t1", "t2"], Some("t3"), Some(0)),
            op("s1", "relu", &[], None, None),
            op(
                "s2",
                "add",
                &["t3", "t3", "a-long-tensor-id-of-forty-bytes-or-so"],
                Some("t4"),
                None,
            ),
            op("s2", "matmul", &["t4"], Some(""), Some(u64::MAX)),
        ];
        let table: OpTable = ops
            .iter()
            .enumerate()
            .map(|(i, o)| Lined::new(i as u64 + 1, o.clone()))
            .collect();
        assert_eq!(table.len(), 4);
        for (i, o) in ops.iter().enumerate() {
            let row = table.row(i);
            assert_eq!(row.line, i as u64 + 1);
            assert_eq!(&row.to_event(), o, "row {i}");
            assert_eq!(row, OpRow::of(i as u64 + 1, o), "row {i}");
            assert_eq!(row.output_bytes(), o.output_bytes());
            assert_eq!(row.inputs.len(), o.inputs.len());
            let back: Vec<&str> = row.inputs.iter().rev().collect();
            let want: Vec<&str> = o.inputs.iter().rev().map(|i| i.as_str()).collect();
            assert_eq!(back, want);
            assert_eq!(row.inputs.get(o.inputs.len()), None);
        }
        assert_eq!(table.row(2).inputs.get(1), Some("t3"));
        assert_eq!(
            table.iter().map(|r| r.op_name).collect::<Vec<_>>(),
            ["matmul", "relu", "add", "matmul"]
        );
        // A row moved into another table reads back the same.
        let mut moved = OpTable::new();
        for row in &table {
            moved.push(row);
        }
        assert_eq!(moved, table);
    }

    /// `table`'s pools and rows moved as they are into a new table.
    fn op_table_from_parts(table: &OpTable) -> OpTable {
        let mut moved = OpTable::new();
        for s in table.pools().strings() {
            moved.pools_mut().push_string(s);
        }
        for dims in table.pools().shapes() {
            moved.pools_mut().push_shape(dims).unwrap();
        }
        for (i, &c) in table.cells().iter().enumerate() {
            moved
                .push_cells(c, table.inputs_of(i).iter().copied())
                .unwrap();
        }
        moved
    }

    #[test]
    fn a_table_moved_as_stored_is_the_same_table() {
        let ops = [
            op("s1", "matmul", &["t1", "t2"], Some("t3"), Some(0)),
            op("s1", "relu", &[], None, None),
            op("s2", "matmul", &["t3", "t3"], Some("t4"), None),
            op("s2", "cpu", &["t4"], Some(""), Some(u64::MAX)),
        ];
        let table: OpTable = ops
            .iter()
            .enumerate()
            .map(|(i, o)| Lined::new(i as u64 + 1, o.clone()))
            .collect();
        let mut moved = op_table_from_parts(&table);
        assert_eq!(moved, table);
        assert_eq!(moved.cells(), table.cells());
        assert!(moved.pools().strings().eq(table.pools().strings()));
        assert!(moved.pools().shapes().eq(table.pools().shapes()));
        // The names are indexed ("cpu" as an op name and as a device once): a record pushed
        // by value after them stores its new ids and nothing else.
        let strings = moved.pools().strings().len();
        moved.push_event(5, &op("s9", "cpu", &[], None, None));
        assert_eq!(moved.pools().strings().len(), strings + 1);
        assert_eq!(moved.pools().shapes().len(), table.pools().shapes().len());

        let mut memory = MemoryTable::new();
        for (i, t) in [2, 3, 4].into_iter().enumerate() {
            memory.push_event(i as u64, &event(t, "t1", "s1", Some("add"), &[t]));
        }
        memory.push_event(9, &event(5, "t2", "s2", None, &[2]));
        let mut moved = MemoryTable::new();
        for s in memory.pools().strings() {
            moved.pools_mut().push_string(s);
        }
        for dims in memory.pools().shapes() {
            moved.pools_mut().push_shape(dims).unwrap();
        }
        for &c in memory.cells() {
            moved.push_cells(c).unwrap();
        }
        assert_eq!(moved, memory);
        assert_eq!(moved.cells(), memory.cells());
        assert!(moved.pools().strings().eq(memory.pools().strings()));
    }

    #[test]
    fn strings_stored_as_one_block_are_the_strings_stored_one_by_one() {
        let mut one_by_one = MemoryTable::new();
        let mut block = MemoryTable::new();
        for s in ["t1", "", "é"] {
            one_by_one.pools_mut().push_string(s);
        }
        // "t1" ends at 2, "" at 2, "é" (2 bytes) at 4.
        block
            .pools_mut()
            .extend_strings("t1é", [2, 2, 4].into_iter())
            .unwrap();
        assert!(block.pools().strings().eq(one_by_one.pools().strings()));
        // A second block follows the first; bytes after the last end are not stored.
        block
            .pools_mut()
            .extend_strings("s9xyz", [2].into_iter())
            .unwrap();
        one_by_one.pools_mut().push_string("s9");
        assert!(block.pools().strings().eq(one_by_one.pools().strings()));
        // Refused, the pool left as it was.
        for (ends, why) in [
            (
                vec![2, 7],
                "string 1 of a block of 4 bytes ends at byte 7, past its block",
            ),
            (
                vec![4, 2],
                "string 1 of a block of 4 bytes ends at byte 2, before the string before it",
            ),
            (
                vec![3],
                "string 0 of a block of 4 bytes ends at byte 3, inside a character",
            ),
        ] {
            let e = block
                .pools_mut()
                .extend_strings("t1é", ends.into_iter())
                .unwrap_err();
            assert_eq!(e.to_string(), why);
            assert!(block.pools().strings().eq(one_by_one.pools().strings()));
        }
    }

    #[test]
    fn a_number_outside_the_pools_is_refused() {
        let table: OpTable = [Lined::new(1, op("s1", "add", &["t1"], Some("t2"), None))]
            .into_iter()
            .collect();
        // Strings t1, s1, add, t2, cpu, f32; one shape.
        assert_eq!(table.pools().strings().len(), 6);
        let cells = table.cells()[0];
        let moved = |c: OpCells, inputs: &[u32]| {
            let mut t = OpTable::new();
            for s in table.pools().strings() {
                t.pools_mut().push_string(s);
            }
            t.pools_mut().push_shape(&[2, 1]).unwrap();
            t.push_cells(c, inputs.iter().copied()).map(|()| t)
        };
        assert!(moved(cells, &[0]).is_ok());
        let e = moved(cells, &[6]).unwrap_err();
        assert_eq!(e.to_string(), "string 6 of a pool of 6");
        for bad in [
            OpCells {
                span_id: 6,
                ..cells
            },
            OpCells {
                op_name: NONE,
                ..cells
            },
            OpCells {
                output: 99,
                ..cells
            },
            OpCells { device: 6, ..cells },
            OpCells { dtype: 6, ..cells },
        ] {
            assert!(moved(bad, &[0]).is_err(), "{bad:?}");
        }
        assert_eq!(
            moved(OpCells { shape: 1, ..cells }, &[0])
                .unwrap_err()
                .to_string(),
            "shape 1 of a pool of 1"
        );
        // An absent output is no string; a refused row leaves no inputs behind.
        let t = moved(
            OpCells {
                output: NONE,
                ..cells
            },
            &[0],
        )
        .unwrap();
        assert_eq!(t.row(0).output, None);
        let mut t = OpTable::new();
        t.pools_mut().push_shape(&[2, 1]).unwrap();
        assert!(t.push_cells(cells, [0]).is_err());
        assert_eq!(t.inputs.len(), 0);
        // Each shape is stored once.
        assert_eq!(
            t.pools_mut().push_shape(&[2, 1]).unwrap_err().to_string(),
            "shape 1 is shape 0 again"
        );

        let mut memory = MemoryTable::new();
        memory.push_event(1, &event(2, "t1", "s1", None, &[3]));
        let cells = memory.cells()[0];
        assert_eq!(cells.op_name, NONE);
        let mut moved = MemoryTable::new();
        for s in memory.pools().strings() {
            moved.pools_mut().push_string(s);
        }
        moved.pools_mut().push_shape(&[3]).unwrap();
        assert!(moved
            .push_cells(MemoryCells {
                tensor_id: NONE,
                ..cells
            })
            .is_err());
        assert!(moved
            .push_cells(MemoryCells {
                op_name: 4,
                ..cells
            })
            .is_err());
        assert!(moved.push_cells(MemoryCells { shape: 1, ..cells }).is_err());
        assert!(moved.push_cells(cells).is_ok());
        assert_eq!(moved, memory);
    }

    #[test]
    fn a_row_is_compact() {
        // The point of the tables: a record is a fixed row of numbers (as a struct, a memory
        // record took 176 bytes and an op 216, each with heap blocks of its own).
        assert_eq!(core::mem::size_of::<MemoryCells>(), 56);
        assert_eq!(core::mem::size_of::<OpCells>(), 72);
    }
}
