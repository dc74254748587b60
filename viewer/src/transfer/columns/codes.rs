//! Small enums, each crossing as a byte: [`Code`], [`OptCode`].

use super::*;

/// An enum that crosses as a byte: its place in [`Coded::ALL`], which names each variant once.
pub(in crate::transfer) trait Coded: Copy + PartialEq + 'static {
    /// Every variant, in the order of their codes.
    const ALL: &'static [Self];
    /// What it is, for an error message.
    const WHAT: &'static str;
}

/// The byte of `v`.
pub(in crate::transfer) fn code<T: Coded>(v: &T) -> u8 {
    T::ALL.iter().position(|x| x == v).unwrap_or(0) as u8
}

/// The variant of byte `v`.
pub(in crate::transfer) fn variant<T: Coded>(v: u8) -> Result<T> {
    T::ALL
        .get(usize::from(v))
        .copied()
        .ok_or_else(|| wire::broken(format!("{v} is no {}", T::WHAT)))
}

/// An optional variant's byte: `0` for `None`, else its place + 1.
pub(in crate::transfer) fn opt_code<T: Coded>(v: Option<&T>) -> u8 {
    v.map_or(0, |v| code(v) + 1)
}

/// The optional variant of byte `v`.
pub(in crate::transfer) fn opt_variant<T: Coded>(v: u8) -> Result<Option<T>> {
    match v.checked_sub(1) {
        None => Ok(None),
        Some(v) => variant(v).map(Some),
    }
}

/// An enum a row.
pub(in crate::transfer) struct Code<T>(PhantomData<T>);

/// An optional enum a row.
pub(in crate::transfer) struct OptCode<T>(PhantomData<T>);

/// An enum column being written.
pub(in crate::transfer) struct CodeW<T>(Vec<u8>, PhantomData<T>);

/// An enum column read.
pub(in crate::transfer) struct CodeR<'b, T>(Col<'b>, PhantomData<T>);

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
    pub(in crate::transfer) fn put(&mut self, v: &T) {
        self.0.push(code(v));
    }
}

impl<T: Coded> CodeW<Option<T>> {
    /// Row's optional variant.
    #[inline]
    pub(in crate::transfer) fn put(&mut self, v: Option<&T>) {
        self.0.push(opt_code(v));
    }
}

impl<T: Coded> CodeR<'_, T> {
    /// Row `i`'s variant.
    #[inline]
    pub(in crate::transfer) fn get(&self, i: usize) -> Result<T> {
        variant(self.0.u8(i)?)
    }
}

impl<T: Coded> CodeR<'_, Option<T>> {
    /// Row `i`'s optional variant.
    #[inline]
    pub(in crate::transfer) fn get(&self, i: usize) -> Result<Option<T>> {
        opt_variant(self.0.u8(i)?)
    }
}
