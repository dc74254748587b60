//! Bits and optional numbers: [`Bit`], [`OptU32`], [`OptU64`], [`OptF64`].

use super::*;

/// A bitmap being written.
pub(in crate::transfer) struct BitsW {
    pub(super) bytes: Vec<u8>,
    n: usize,
}

impl BitsW {
    pub(super) fn with(n: usize) -> Self {
        BitsW {
            bytes: Vec::with_capacity(n.div_ceil(8)),
            n: 0,
        }
    }

    /// One row's bit.
    #[inline]
    pub(in crate::transfer) fn put(&mut self, v: bool) {
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
pub(in crate::transfer) struct Bit;

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
pub(in crate::transfer) struct OptW {
    has: BitsW,
    values: FixedW,
}

/// An optional number read.
#[derive(Clone, Copy)]
pub(in crate::transfer) struct OptR<'b> {
    has: Bits<'b>,
    values: Col<'b>,
}

/// An optional 8-byte number a row, read and written as a `T`.
pub(in crate::transfer) struct Opt8<T>(std::marker::PhantomData<fn() -> T>);

/// An optional `u64` a row.
pub(in crate::transfer) type OptU64 = Opt8<u64>;

/// An optional `f64` a row.
pub(in crate::transfer) type OptF64 = Opt8<f64>;

impl<T> Column for Opt8<T> {
    const COLUMNS: usize = 2;
    type Writer = OptW;
    type Reader<'b> = OptR<'b>;
    fn writer(n: usize) -> OptW {
        OptW {
            has: BitsW::with(n),
            values: FixedW::with(n, 8),
        }
    }
    fn finish(w: OptW, out: &mut Out) {
        out.column(&w.has.bytes);
        out.column(&w.values.0);
    }
    fn reader<'b>(t: &Table, b: &'b [u8], _: Strs<'b>, c: usize) -> Result<OptR<'b>> {
        Ok(OptR {
            has: t.bits(b, c)?,
            values: t.col(b, c + 1, 8)?,
        })
    }
}

impl OptW {
    /// An optional `u64`.
    #[inline]
    pub(in crate::transfer) fn u64(&mut self, v: Option<u64>) {
        self.has.put(v.is_some());
        self.values.u64(v.unwrap_or(0));
    }

    /// An optional `f64`.
    #[inline]
    pub(in crate::transfer) fn f64(&mut self, v: Option<f64>) {
        self.has.put(v.is_some());
        self.values.f64(v.unwrap_or(0.0));
    }
}

impl OptR<'_> {
    /// Row `i` as an optional `u64`.
    #[inline(always)]
    pub(in crate::transfer) fn u64(&self, i: usize) -> Result<Option<u64>> {
        self.has.opt_u64(&self.values, i)
    }

    /// Row `i` as an optional `f64`.
    #[inline(always)]
    pub(in crate::transfer) fn f64(&self, i: usize) -> Result<Option<f64>> {
        Ok(self.u64(i)?.map(f64::from_bits))
    }
}
