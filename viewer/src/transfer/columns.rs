//! The column kinds a part's layout is declared with, and [`columns!`], which turns one
//! declaration into both ends: the writer the worker fills row by row and the reader the page
//! decodes rows from, with the table's column count summed from the kinds.
//!
//! A kind lays one field out as one or more byte columns of a table ([`wire`](super::wire)):
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
//! | [`StrList`] | each row's end in strings, each string's end, the bytes |
//! | [`IdList`], [`U64List`] | each row's end in values, the values |
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

// ---------------------------------------------------------------------------------------------
// Fixed-width values.

/// Fixed-width values being written: one column.
pub(super) struct FixedW(Vec<u8>);

impl FixedW {
    fn with(n: usize, width: usize) -> Self {
        FixedW(Vec::with_capacity(n.saturating_mul(width)))
    }
}

macro_rules! fixed {
    ($(#[$doc:meta])* $kind:ident, $reader:ident, $t:ty, $width:expr) => {
        $(#[$doc])*
        pub(super) struct $kind;

        /// Its reader.
        #[derive(Clone, Copy)]
        pub(super) struct $reader<'b>(Col<'b>);

        impl Column for $kind {
            const COLUMNS: usize = 1;
            type Writer = FixedW;
            type Reader<'b> = $reader<'b>;
            fn writer(n: usize) -> FixedW {
                FixedW::with(n, $width)
            }
            fn finish(w: FixedW, out: &mut Out) {
                out.column(&w.0);
            }
            fn reader<'b>(t: &Table, b: &'b [u8], _: Strs<'b>, c: usize) -> Result<$reader<'b>> {
                Ok($reader(t.col(b, c, $width)?))
            }
        }
    };
}

fixed!(
    /// A `u8` a row.
    U8, U8R, u8, 1
);
fixed!(
    /// A `u32` a row.
    U32, U32R, u32, 4
);
fixed!(
    /// A `u64` a row.
    U64, U64R, u64, 8
);
fixed!(
    /// An `i64` a row.
    I64, I64R, i64, 8
);
fixed!(
    /// An `f64` a row (its bits).
    F64, F64R, f64, 8
);

impl FixedW {
    /// A `u8`.
    #[inline]
    pub(super) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }

    /// A `u32`.
    #[inline]
    pub(super) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    /// A `u64`.
    #[inline]
    pub(super) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    /// An `i64`.
    #[inline]
    pub(super) fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    /// An `f64` (its bits).
    #[inline]
    pub(super) fn f64(&mut self, v: f64) {
        self.u64(v.to_bits());
    }
}

impl U8R<'_> {
    /// Row `i`.
    #[inline]
    pub(super) fn get(&self, i: usize) -> Result<u8> {
        self.0.u8(i)
    }
}

impl<'b> U32R<'b> {
    /// Row `i`.
    #[inline]
    pub(super) fn get(&self, i: usize) -> Result<u32> {
        self.0.u32(i)
    }

    /// Every row, in order (no check per row: the column's size is exact).
    pub(super) fn all(&self) -> impl Iterator<Item = u32> + 'b {
        self.0.all_u32()
    }
}

impl<'b> U64R<'b> {
    /// Row `i`.
    #[inline]
    pub(super) fn get(&self, i: usize) -> Result<u64> {
        self.0.u64(i)
    }

    /// Every row, in order.
    pub(super) fn all(&self) -> impl Iterator<Item = u64> + 'b {
        self.0.all_u64()
    }
}

impl I64R<'_> {
    /// Row `i`.
    #[inline]
    pub(super) fn get(&self, i: usize) -> Result<i64> {
        self.0.i64(i)
    }
}

impl F64R<'_> {
    /// Row `i`.
    #[inline]
    pub(super) fn get(&self, i: usize) -> Result<f64> {
        self.0.f64(i)
    }
}

/// `N` columns of `u64` (an array field).
pub(super) struct U64s<const N: usize>;

impl<const N: usize> Column for U64s<N> {
    const COLUMNS: usize = N;
    type Writer = [FixedW; N];
    type Reader<'b> = [U64R<'b>; N];
    fn writer(n: usize) -> [FixedW; N] {
        std::array::from_fn(|_| FixedW::with(n, 8))
    }
    fn finish(w: [FixedW; N], out: &mut Out) {
        for c in &w {
            out.column(&c.0);
        }
    }
    fn reader<'b>(t: &Table, b: &'b [u8], _: Strs<'b>, c: usize) -> Result<[U64R<'b>; N]> {
        let mut cols = [U64R(Col::EMPTY); N];
        for (k, col) in cols.iter_mut().enumerate() {
            *col = U64R(t.col(b, c + k, 8)?);
        }
        Ok(cols)
    }
}

/// A `u32` a row, [`NONE`] for `None` (a row number or a track: never `u32::MAX`).
pub(super) struct OptU32;

/// Its reader.
#[derive(Clone, Copy)]
pub(super) struct OptU32R<'b>(Col<'b>);

/// Its writer.
pub(super) struct OptU32W(FixedW);

impl Column for OptU32 {
    const COLUMNS: usize = 1;
    type Writer = OptU32W;
    type Reader<'b> = OptU32R<'b>;
    fn writer(n: usize) -> OptU32W {
        OptU32W(FixedW::with(n, 4))
    }
    fn finish(w: OptU32W, out: &mut Out) {
        out.column(&w.0 .0);
    }
    fn reader<'b>(t: &Table, b: &'b [u8], _: Strs<'b>, c: usize) -> Result<OptU32R<'b>> {
        Ok(OptU32R(t.col(b, c, 4)?))
    }
}

impl OptU32W {
    /// Row's value.
    #[inline]
    pub(super) fn put(&mut self, v: Option<u32>) {
        self.0.u32(v.unwrap_or(NONE));
    }
}

impl<'b> OptU32R<'b> {
    /// Every row, in order.
    pub(super) fn all(&self) -> impl Iterator<Item = Option<u32>> + 'b {
        self.0.all_u32().map(|v| (v != NONE).then_some(v))
    }
}

// ---------------------------------------------------------------------------------------------
// Bits and optional numbers.

/// A bitmap being written.
pub(super) struct BitsW {
    bytes: Vec<u8>,
    n: usize,
}

impl BitsW {
    fn with(n: usize) -> Self {
        BitsW {
            bytes: Vec::with_capacity(n.div_ceil(8)),
            n: 0,
        }
    }

    /// One row's bit.
    #[inline]
    pub(super) fn put(&mut self, v: bool) {
        let at = self.n;
        self.n += 1;
        if at % 8 == 0 {
            self.bytes.push(0);
        }
        if v {
            if let Some(last) = self.bytes.last_mut() {
                *last |= 1 << (at % 8);
            }
        }
    }
}

/// A `bool` a row, as a bitmap.
pub(super) struct Bit;

impl Column for Bit {
    const COLUMNS: usize = 1;
    type Writer = BitsW;
    type Reader<'b> = Bits<'b>;
    fn writer(n: usize) -> BitsW {
        BitsW::with(n)
    }
    fn finish(w: BitsW, out: &mut Out) {
        out.column(&w.bytes);
    }
    fn reader<'b>(t: &Table, b: &'b [u8], _: Strs<'b>, c: usize) -> Result<Bits<'b>> {
        t.bits(b, c)
    }
}

/// An optional number being written: presence, then the value (0 when absent).
pub(super) struct OptW {
    has: BitsW,
    values: FixedW,
}

/// An optional number read.
#[derive(Clone, Copy)]
pub(super) struct OptR<'b> {
    has: Bits<'b>,
    values: Col<'b>,
}

/// An optional `u64` a row.
pub(super) struct OptU64;

/// An optional `f64` a row.
pub(super) struct OptF64;

fn opt_writer(n: usize) -> OptW {
    OptW {
        has: BitsW::with(n),
        values: FixedW::with(n, 8),
    }
}

fn opt_finish(w: OptW, out: &mut Out) {
    out.column(&w.has.bytes);
    out.column(&w.values.0);
}

fn opt_reader<'b>(t: &Table, b: &'b [u8], c: usize) -> Result<OptR<'b>> {
    Ok(OptR {
        has: t.bits(b, c)?,
        values: t.col(b, c + 1, 8)?,
    })
}

impl Column for OptU64 {
    const COLUMNS: usize = 2;
    type Writer = OptW;
    type Reader<'b> = OptR<'b>;
    fn writer(n: usize) -> OptW {
        opt_writer(n)
    }
    fn finish(w: OptW, out: &mut Out) {
        opt_finish(w, out)
    }
    fn reader<'b>(t: &Table, b: &'b [u8], _: Strs<'b>, c: usize) -> Result<OptR<'b>> {
        opt_reader(t, b, c)
    }
}

impl Column for OptF64 {
    const COLUMNS: usize = 2;
    type Writer = OptW;
    type Reader<'b> = OptR<'b>;
    fn writer(n: usize) -> OptW {
        opt_writer(n)
    }
    fn finish(w: OptW, out: &mut Out) {
        opt_finish(w, out)
    }
    fn reader<'b>(t: &Table, b: &'b [u8], _: Strs<'b>, c: usize) -> Result<OptR<'b>> {
        opt_reader(t, b, c)
    }
}

impl OptW {
    /// An optional `u64`.
    #[inline]
    pub(super) fn u64(&mut self, v: Option<u64>) {
        self.has.put(v.is_some());
        self.values.u64(v.unwrap_or(0));
    }

    /// An optional `f64`.
    #[inline]
    pub(super) fn f64(&mut self, v: Option<f64>) {
        self.has.put(v.is_some());
        self.values.f64(v.unwrap_or(0.0));
    }
}

impl OptR<'_> {
    /// Row `i` as an optional `u64`.
    #[inline]
    pub(super) fn u64(&self, i: usize) -> Result<Option<u64>> {
        self.has.opt_u64(&self.values, i)
    }

    /// Row `i` as an optional `f64`.
    #[inline]
    pub(super) fn f64(&self, i: usize) -> Result<Option<f64>> {
        Ok(self.u64(i)?.map(f64::from_bits))
    }
}

// ---------------------------------------------------------------------------------------------
// Small enums.

/// An enum that crosses as a byte: its place in [`Coded::ALL`], which names each variant once.
pub(super) trait Coded: Copy + PartialEq + 'static {
    /// Every variant, in the order of their codes.
    const ALL: &'static [Self];
    /// What it is, for an error message.
    const WHAT: &'static str;
}

/// The byte of `v`.
pub(super) fn code<T: Coded>(v: &T) -> u8 {
    T::ALL.iter().position(|x| x == v).unwrap_or(0) as u8
}

/// The variant of byte `v`.
pub(super) fn variant<T: Coded>(v: u8) -> Result<T> {
    T::ALL
        .get(usize::from(v))
        .copied()
        .ok_or_else(|| wire::broken(format!("{v} is no {}", T::WHAT)))
}

/// An optional variant's byte: `0` for `None`, else its place + 1.
pub(super) fn opt_code<T: Coded>(v: Option<&T>) -> u8 {
    v.map_or(0, |v| code(v) + 1)
}

/// The optional variant of byte `v`.
pub(super) fn opt_variant<T: Coded>(v: u8) -> Result<Option<T>> {
    match v.checked_sub(1) {
        None => Ok(None),
        Some(v) => variant(v).map(Some),
    }
}

/// An enum a row.
pub(super) struct Code<T>(PhantomData<T>);

/// An optional enum a row.
pub(super) struct OptCode<T>(PhantomData<T>);

/// An enum column being written.
pub(super) struct CodeW<T>(Vec<u8>, PhantomData<T>);

/// An enum column read.
pub(super) struct CodeR<'b, T>(Col<'b>, PhantomData<T>);

impl<T: Coded> Column for Code<T> {
    const COLUMNS: usize = 1;
    type Writer = CodeW<T>;
    type Reader<'b> = CodeR<'b, T>;
    fn writer(n: usize) -> CodeW<T> {
        CodeW(Vec::with_capacity(n), PhantomData)
    }
    fn finish(w: CodeW<T>, out: &mut Out) {
        out.column(&w.0);
    }
    fn reader<'b>(t: &Table, b: &'b [u8], _: Strs<'b>, c: usize) -> Result<CodeR<'b, T>> {
        Ok(CodeR(t.col(b, c, 1)?, PhantomData))
    }
}

impl<T: Coded> Column for OptCode<T> {
    const COLUMNS: usize = 1;
    type Writer = CodeW<Option<T>>;
    type Reader<'b> = CodeR<'b, Option<T>>;
    fn writer(n: usize) -> CodeW<Option<T>> {
        CodeW(Vec::with_capacity(n), PhantomData)
    }
    fn finish(w: CodeW<Option<T>>, out: &mut Out) {
        out.column(&w.0);
    }
    fn reader<'b>(t: &Table, b: &'b [u8], _: Strs<'b>, c: usize) -> Result<CodeR<'b, Option<T>>> {
        Ok(CodeR(t.col(b, c, 1)?, PhantomData))
    }
}

impl<T: Coded> CodeW<T> {
    /// Row's variant.
    #[inline]
    pub(super) fn put(&mut self, v: &T) {
        self.0.push(code(v));
    }
}

impl<T: Coded> CodeW<Option<T>> {
    /// Row's optional variant.
    #[inline]
    pub(super) fn put(&mut self, v: Option<&T>) {
        self.0.push(opt_code(v));
    }
}

impl<T: Coded> CodeR<'_, T> {
    /// Row `i`'s variant.
    #[inline]
    pub(super) fn get(&self, i: usize) -> Result<T> {
        variant(self.0.u8(i)?)
    }
}

impl<T: Coded> CodeR<'_, Option<T>> {
    /// Row `i`'s optional variant.
    #[inline]
    pub(super) fn get(&self, i: usize) -> Result<Option<T>> {
        opt_variant(self.0.u8(i)?)
    }
}

// ---------------------------------------------------------------------------------------------
// Strings.

/// A string a row, an index into the string table (each distinct string crosses once).
pub(super) struct Id;

/// An optional string a row, an index into the string table ([`NONE`] for `None`).
pub(super) struct OptId;

/// An index into the string table read, with the table.
#[derive(Clone, Copy)]
pub(super) struct IdR<'b> {
    ids: Col<'b>,
    strings: Strs<'b>,
}

/// A column of string-table indices being written.
pub(super) struct IdW(FixedW);

impl Column for Id {
    const COLUMNS: usize = 1;
    type Writer = IdW;
    type Reader<'b> = IdR<'b>;
    fn writer(n: usize) -> IdW {
        IdW(FixedW::with(n, 4))
    }
    fn finish(w: IdW, out: &mut Out) {
        out.column(&w.0 .0);
    }
    fn reader<'b>(t: &Table, b: &'b [u8], s: Strs<'b>, c: usize) -> Result<IdR<'b>> {
        Ok(IdR {
            ids: t.col(b, c, 4)?,
            strings: s,
        })
    }
}

impl Column for OptId {
    const COLUMNS: usize = 1;
    type Writer = IdW;
    type Reader<'b> = IdR<'b>;
    fn writer(n: usize) -> IdW {
        Id::writer(n)
    }
    fn finish(w: IdW, out: &mut Out) {
        Id::finish(w, out)
    }
    fn reader<'b>(t: &Table, b: &'b [u8], s: Strs<'b>, c: usize) -> Result<IdR<'b>> {
        Id::reader(t, b, s, c)
    }
}

impl IdW {
    /// Row's string.
    #[inline]
    pub(super) fn put<'d>(&mut self, s: &mut Strings<'d>, v: &'d str) {
        self.0.u32(s.id(v));
    }

    /// Row's optional string.
    #[inline]
    pub(super) fn opt<'d>(&mut self, s: &mut Strings<'d>, v: Option<&'d str>) {
        self.0.u32(s.opt(v));
    }
}

impl<'b> IdR<'b> {
    /// Row `i`'s string.
    #[inline]
    pub(super) fn get(&self, i: usize) -> Result<&'b str> {
        self.strings.get(self.ids.u32(i)?)
    }

    /// Row `i`'s optional string.
    #[inline]
    pub(super) fn opt(&self, i: usize) -> Result<Option<&'b str>> {
        self.strings.opt(self.ids.u32(i)?)
    }
}

/// A string a row written in place (ids: nearly every one distinct, so interning them would
/// cost a hash lookup a row for nothing): each string's end, then their bytes.
pub(super) struct Str;

/// Strings in place being written.
pub(super) struct StrW {
    ends: FixedW,
    bytes: Vec<u8>,
}

impl StrW {
    fn with(n: usize) -> Self {
        StrW {
            ends: FixedW::with(n, 4),
            bytes: Vec::with_capacity(n.saturating_mul(8)),
        }
    }

    /// One string.
    #[inline]
    pub(super) fn put(&mut self, v: &str) {
        self.bytes.extend_from_slice(v.as_bytes());
        self.ends.u32(self.bytes.len() as u32);
    }

    fn finish(&self, out: &mut Out) {
        out.column(&self.ends.0);
        out.column(&self.bytes);
    }
}

impl Column for Str {
    const COLUMNS: usize = 2;
    type Writer = StrW;
    type Reader<'b> = Strs<'b>;
    fn writer(n: usize) -> StrW {
        StrW::with(n)
    }
    fn finish(w: StrW, out: &mut Out) {
        w.finish(out);
    }
    fn reader<'b>(t: &Table, b: &'b [u8], _: Strs<'b>, c: usize) -> Result<Strs<'b>> {
        t.strs(b, c)
    }
}

/// An optional string a row in place: presence, then as [`Str`] (empty when absent).
pub(super) struct OptStr;

/// Optional strings in place being written.
pub(super) struct OptStrW {
    has: BitsW,
    strs: StrW,
}

/// Optional strings in place read.
#[derive(Clone, Copy)]
pub(super) struct OptStrR<'b> {
    has: Bits<'b>,
    strs: Strs<'b>,
}

impl Column for OptStr {
    const COLUMNS: usize = 3;
    type Writer = OptStrW;
    type Reader<'b> = OptStrR<'b>;
    fn writer(n: usize) -> OptStrW {
        OptStrW {
            has: BitsW::with(n),
            strs: StrW::with(n),
        }
    }
    fn finish(w: OptStrW, out: &mut Out) {
        out.column(&w.has.bytes);
        w.strs.finish(out);
    }
    fn reader<'b>(t: &Table, b: &'b [u8], _: Strs<'b>, c: usize) -> Result<OptStrR<'b>> {
        Ok(OptStrR {
            has: t.bits(b, c)?,
            strs: t.strs(b, c + 1)?,
        })
    }
}

impl OptStrW {
    /// Row's optional string.
    #[inline]
    pub(super) fn put(&mut self, v: Option<&str>) {
        self.has.put(v.is_some());
        self.strs.put(v.unwrap_or_default());
    }
}

impl<'b> OptStrR<'b> {
    /// Row `i`'s string, `None` where it was absent.
    #[inline]
    pub(super) fn get(&self, i: usize) -> Result<Option<&'b str>> {
        Ok(if self.has.get(i)? {
            Some(self.strs.get(i as u32)?)
        } else {
            None
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Lists.

/// A list of strings a row in place: each row's end (in strings), then as [`Str`].
pub(super) struct StrList;

/// Lists of strings in place being written.
pub(super) struct StrListW {
    ends: FixedW,
    strs: StrW,
    count: u32,
}

/// Lists of strings in place read.
#[derive(Clone, Copy)]
pub(super) struct StrListR<'b> {
    ends: Col<'b>,
    strs: Strs<'b>,
}

impl Column for StrList {
    const COLUMNS: usize = 3;
    type Writer = StrListW;
    type Reader<'b> = StrListR<'b>;
    fn writer(n: usize) -> StrListW {
        StrListW {
            ends: FixedW::with(n, 4),
            strs: StrW::with(n),
            count: 0,
        }
    }
    fn finish(w: StrListW, out: &mut Out) {
        out.column(&w.ends.0);
        w.strs.finish(out);
    }
    fn reader<'b>(t: &Table, b: &'b [u8], _: Strs<'b>, c: usize) -> Result<StrListR<'b>> {
        // Each row's end (in strings), then each string's end (any number of them), then
        // their bytes.
        let ends = t.col(b, c, 4)?;
        let string_ends = t.raw(b, c + 1)?;
        if string_ends.len() % 4 != 0 {
            return Err(wire::broken(format!("list column {} is cut", c + 1)));
        }
        let strs = Strs::new(Col::of(string_ends), t.utf8(b, c + 2)?);
        Ok(StrListR { ends, strs })
    }
}

impl StrListW {
    /// Row's list.
    #[inline]
    pub(super) fn put<'s>(&mut self, v: impl IntoIterator<Item = &'s str>) {
        for s in v {
            self.strs.put(s);
            self.count += 1;
        }
        self.ends.u32(self.count);
    }
}

impl<'b> StrListR<'b> {
    /// Row `i`'s strings into `to` (cleared first; reused across rows, so reading a list
    /// allocates nothing once `to` has grown).
    #[inline]
    pub(super) fn fill(&self, i: usize, to: &mut Vec<&'b str>) -> Result<()> {
        to.clear();
        for k in range(&self.ends, i)? {
            to.push(self.strs.get(k as u32)?);
        }
        Ok(())
    }
}

/// Row `i`'s range of a list whose rows' ends are `ends`.
fn range(ends: &Col<'_>, i: usize) -> Result<Range<usize>> {
    let end = ends.u32(i)? as usize;
    let start = match i.checked_sub(1) {
        Some(p) => ends.u32(p)? as usize,
        None => 0,
    };
    if start > end {
        return Err(wire::broken(format!(
            "row {i}'s list ends before it starts"
        )));
    }
    Ok(start..end)
}

/// A list of numbers being written: each row's end (in values), then the values.
pub(super) struct ListW {
    ends: FixedW,
    values: FixedW,
    count: u32,
}

/// A list of numbers read.
#[derive(Clone, Copy)]
pub(super) struct ListR<'b> {
    ends: Col<'b>,
    values: &'b [u8],
}

/// A list of `u64` a row.
pub(super) struct U64List;

/// A list of strings a row, as indices into the string table.
pub(super) struct IdList;

/// An [`IdList`] read, with the string table.
#[derive(Clone, Copy)]
pub(super) struct IdListR<'b> {
    list: ListR<'b>,
    strings: Strs<'b>,
}

fn list_writer(n: usize, width: usize) -> ListW {
    ListW {
        ends: FixedW::with(n, 4),
        values: FixedW::with(n, width),
        count: 0,
    }
}

fn list_finish(w: ListW, out: &mut Out) {
    out.column(&w.ends.0);
    out.column(&w.values.0);
}

fn list_reader<'b>(t: &Table, b: &'b [u8], c: usize, width: usize) -> Result<ListR<'b>> {
    let ends = t.col(b, c, 4)?;
    let values = t.raw(b, c + 1)?;
    if values.len() % width != 0 {
        return Err(wire::broken(format!("list column {} is cut", c + 1)));
    }
    Ok(ListR { ends, values })
}

impl Column for U64List {
    const COLUMNS: usize = 2;
    type Writer = ListW;
    type Reader<'b> = ListR<'b>;
    fn writer(n: usize) -> ListW {
        list_writer(n, 8)
    }
    fn finish(w: ListW, out: &mut Out) {
        list_finish(w, out)
    }
    fn reader<'b>(t: &Table, b: &'b [u8], _: Strs<'b>, c: usize) -> Result<ListR<'b>> {
        list_reader(t, b, c, 8)
    }
}

impl Column for IdList {
    const COLUMNS: usize = 2;
    type Writer = ListW;
    type Reader<'b> = IdListR<'b>;
    fn writer(n: usize) -> ListW {
        list_writer(n, 4)
    }
    fn finish(w: ListW, out: &mut Out) {
        list_finish(w, out)
    }
    fn reader<'b>(t: &Table, b: &'b [u8], s: Strs<'b>, c: usize) -> Result<IdListR<'b>> {
        Ok(IdListR {
            list: list_reader(t, b, c, 4)?,
            strings: s,
        })
    }
}

impl ListW {
    /// Row's list of `u64`.
    #[inline]
    pub(super) fn u64s(&mut self, v: &[u64]) {
        for &x in v {
            self.values.u64(x);
        }
        self.count += v.len() as u32;
        self.ends.u32(self.count);
    }

    /// Row's list of strings, as string-table indices.
    #[inline]
    pub(super) fn ids<'d>(&mut self, s: &mut Strings<'d>, v: impl IntoIterator<Item = &'d str>) {
        for x in v {
            self.values.u32(s.id(x));
            self.count += 1;
        }
        self.ends.u32(self.count);
    }
}

impl<'b> ListR<'b> {
    /// Row `i`'s values, `width` bytes each: one bounds check for the whole list.
    fn bytes(&self, i: usize, width: usize) -> Result<&'b [u8]> {
        let r = range(&self.ends, i)?;
        r.start
            .checked_mul(width)
            .zip(r.end.checked_mul(width))
            .and_then(|(from, to)| self.values.get(from..to))
            .ok_or_else(|| wire::broken(format!("row {i}'s list is past its values")))
    }

    /// Row `i`'s list of `u64`, one at a time.
    #[inline]
    pub(super) fn u64s(&self, i: usize) -> Result<impl Iterator<Item = u64> + 'b> {
        Ok(Col::of(self.bytes(i, 8)?).all_u64())
    }

    /// Row `i`'s list of `u64`, collected.
    pub(super) fn u64_vec(&self, i: usize) -> Result<Vec<u64>> {
        Ok(self.u64s(i)?.collect())
    }
}

impl<'b> IdListR<'b> {
    /// Row `i`'s strings.
    pub(super) fn get(&self, i: usize) -> Result<impl Iterator<Item = Result<&'b str>> + 'b> {
        let strings = self.strings;
        Ok(Col::of(self.list.bytes(i, 4)?)
            .all_u32()
            .map(move |id| strings.get(id)))
    }
}
