//! Fixed-width values: `u8`, `u32`, `u64`, `i64`, `f64` a row, and arrays of `u64`.

use super::*;

/// Fixed-width values being written: one column.
pub(in crate::transfer) struct FixedW(pub(super) Vec<u8>);

impl FixedW {
    pub(super) fn with(n: usize, width: usize) -> Self {
        FixedW(Vec::with_capacity(n.saturating_mul(width)))
    }
}

macro_rules! fixed {
    ($(#[$doc:meta])* $kind:ident, $reader:ident, $t:ty, $width:expr) => {
        $(#[$doc])*
        pub(in crate::transfer) struct $kind;

        /// Its reader.
        #[derive(Clone, Copy)]
        pub(in crate::transfer) struct $reader<'b>(Col<'b>);

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
    pub(in crate::transfer) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }

    /// A `u32`.
    #[inline]
    pub(in crate::transfer) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    /// A `u64`.
    #[inline]
    pub(in crate::transfer) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    /// An `i64`.
    #[inline]
    pub(in crate::transfer) fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    /// An `f64` (its bits).
    #[inline]
    pub(in crate::transfer) fn f64(&mut self, v: f64) {
        self.u64(v.to_bits());
    }
}

impl<'b> U8R<'b> {
    /// Row `i`.
    #[inline]
    pub(in crate::transfer) fn get(&self, i: usize) -> Result<u8> {
        self.0.u8(i)
    }

    /// Every row, as the column's bytes.
    pub(in crate::transfer) fn bytes(&self) -> &'b [u8] {
        self.0.bytes()
    }
}

impl<'b> U32R<'b> {
    /// Row `i`.
    #[inline]
    pub(in crate::transfer) fn get(&self, i: usize) -> Result<u32> {
        self.0.u32(i)
    }

    /// Every row, in order, as a vector (one copy of the column's bytes; the column's size is
    /// exact).
    pub(in crate::transfer) fn all(&self) -> Vec<u32> {
        self.0.u32s()
    }
}

impl<'b> U64R<'b> {
    /// Row `i`.
    #[inline]
    pub(in crate::transfer) fn get(&self, i: usize) -> Result<u64> {
        self.0.u64(i)
    }

    /// Every row, in order, as a vector (one copy of the column's bytes; the column's size is
    /// exact).
    pub(in crate::transfer) fn all(&self) -> Vec<u64> {
        self.0.u64s()
    }
}

impl I64R<'_> {
    /// Row `i`.
    #[inline]
    pub(in crate::transfer) fn get(&self, i: usize) -> Result<i64> {
        self.0.i64(i)
    }
}

impl F64R<'_> {
    /// Row `i`.
    #[inline]
    pub(in crate::transfer) fn get(&self, i: usize) -> Result<f64> {
        self.0.f64(i)
    }
}

/// `N` columns of `u64` (an array field).
pub(in crate::transfer) struct U64s<const N: usize>;

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
pub(in crate::transfer) struct OptU32;

/// Its reader.
#[derive(Clone, Copy)]
pub(in crate::transfer) struct OptU32R<'b>(Col<'b>);

/// Its writer.
pub(in crate::transfer) struct OptU32W(FixedW);

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
    pub(in crate::transfer) fn put(&mut self, v: Option<u32>) {
        self.0.u32(v.unwrap_or(NONE));
    }
}

impl<'b> OptU32R<'b> {
    /// Every row, in order.
    pub(in crate::transfer) fn all(&self) -> impl Iterator<Item = Option<u32>> + 'b {
        self.0.all_u32().map(|v| (v != NONE).then_some(v))
    }
}
