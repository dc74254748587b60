//! The column kinds a part's layout is declared with, and [`columns!`], which turns one
//! declaration into both ends: the writer the worker fills row by row and the reader the page
//! decodes rows from, with the table's column count summed from the kinds.
//!
//! A kind lays one field out as one or more byte columns of a table ([`wire`]):
//!
//! | kind | columns |
//! |---|---|
//! | [`U8`], [`U32`], [`U64`], [`I64`], [`F64`] | the values, fixed width |
//! | [`Bit`] | a bitmap |
//! | [`OptU64`], [`OptF64`] | a presence bitmap, the values (0 when absent) |
//! | [`OptU32`] | the values, [`NONE`] when absent |
//! | [`Code`], [`OptCode`] | an enum as its place in its list (`0` for none, else place + 1) |
//! | [`Id`], [`OptId`] | an index into the string table ([`NONE`] when absent) |
//! | [`Str`], [`OptStr`] | a string in place: a presence bitmap (optional only), each end, the bytes |
//! | [`IdList`], [`U32List`], [`U64List`] | each row's end in values, the values |
//! | [`U64s`] | `N` columns of `u64` |
//!
//! Writers append without a check per cell beyond `Vec`'s; readers check each column's size
//! against the row count once per table and every row index they are asked for, so hostile
//! bytes are an error, never a panic.

use std::marker::PhantomData;
use std::ops::Range;

use super::wire::{self, Bits, Col, Out, Result, Strings, Strs, Table, NONE};

/// How one field is laid out: its columns, its writer and its reader.
pub(super) trait Column {
    /// How many byte columns of the table it takes.
    const COLUMNS: usize;
    /// Appends one row's value at a time.
    type Writer;
    /// Reads row `i`'s value from a decoded table.
    type Reader<'b>;
    /// A writer for `n` rows.
    fn writer(n: usize) -> Self::Writer;
    /// The writer's columns, in order, into `out`.
    fn finish(w: Self::Writer, out: &mut Out);
    /// The reader of the columns from `c` on of table `t` in `b` (`s`: the string table).
    fn reader<'b>(t: &Table, b: &'b [u8], s: Strs<'b>, c: usize) -> Result<Self::Reader<'b>>;
}

/// Which end a layout struct is: its fields are the kinds' [`Column::Writer`]s ([`Write`]) or
/// [`Column::Reader`]s ([`Read`]).
pub(super) trait Mode {
    type Of<K: Column>;
}

/// The writing end of a layout (in the worker).
pub(super) struct Write;

/// The reading end of a layout (on the page), borrowing the chunk and the string table.
pub(super) struct Read<'b>(PhantomData<&'b ()>);

impl Mode for Write {
    type Of<K: Column> = K::Writer;
}

impl<'b> Mode for Read<'b> {
    type Of<K: Column> = K::Reader<'b>;
}

/// The writing end of a layout, for code generic over parts ([`columns!`] implements it).
pub(super) trait Layout {
    /// Empty columns for `n` rows.
    fn new(n: usize) -> Self;
    /// The table of the `n` rows written into `out`.
    fn finish(self, n: usize, out: &mut Out);
}

/// Declares a part's table once: `columns! { Name { field: Kind, … } }` makes the struct
/// `Name<M: Mode>` with one field per column kind, `Name::<Write>::new(n)` and
/// `finish(n, out)` for the worker, `Name::<Read<'_>>::from(t, b, s)` for the page, and
/// `Name::<M>::COLUMNS`, the byte columns of the table.
macro_rules! columns {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident: $kind:ty),+ $(,)? }) => {
        $(#[$doc])*
        pub(super) struct $name<M: $crate::transfer::columns::Mode> {
            $($(#[$fdoc])* pub(super) $field: M::Of<$kind>,)+
        }

        impl<M: $crate::transfer::columns::Mode> $name<M> {
            /// The byte columns of the table, summed over the kinds.
            #[allow(dead_code)]
            pub(super) const COLUMNS: usize =
                0 $(+ <$kind as $crate::transfer::columns::Column>::COLUMNS)+;
        }

        impl $crate::transfer::columns::Layout for $name<$crate::transfer::columns::Write> {
            fn new(n: usize) -> Self {
                Self::new(n)
            }
            fn finish(self, n: usize, out: &mut $crate::transfer::wire::Out) {
                Self::finish(self, n, out)
            }
        }

        impl $name<$crate::transfer::columns::Write> {
            /// Empty columns for `n` rows.
            pub(super) fn new(n: usize) -> Self {
                $name {
                    $($field: <$kind as $crate::transfer::columns::Column>::writer(n),)+
                }
            }

            /// The table of the `n` rows written: its head, then every column in order.
            pub(super) fn finish(self, n: usize, out: &mut $crate::transfer::wire::Out) {
                out.table_head(n, Self::COLUMNS);
                $(<$kind as $crate::transfer::columns::Column>::finish(self.$field, out);)+
            }
        }

        impl<'b> $name<$crate::transfer::columns::Read<'b>> {
            /// The columns of table `t` in `b`, checked to be this layout's.
            pub(super) fn from(
                t: &$crate::transfer::wire::Table,
                b: &'b [u8],
                s: $crate::transfer::wire::Strs<'b>,
            ) -> $crate::transfer::wire::Result<Self> {
                t.expect_columns(Self::COLUMNS, stringify!($name))?;
                let c = 0;
                $(
                    let $field = <$kind as $crate::transfer::columns::Column>::reader(t, b, s, c)?;
                    let c = c + <$kind as $crate::transfer::columns::Column>::COLUMNS;
                )+
                let _ = c;
                Ok($name { $($field,)+ })
            }
        }
    };
}
pub(super) use columns;

mod codes;
mod fixed;
mod lists;
mod optional;
mod strings;

pub(super) use codes::*;
pub(super) use fixed::*;
pub(super) use lists::*;
pub(super) use optional::*;
pub(super) use strings::*;
