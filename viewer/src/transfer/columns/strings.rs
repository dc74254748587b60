//! Strings: string-table ids ([`Id`], [`OptId`]) and strings in place ([`Str`], [`OptStr`]).

use super::*;

/// A string a row, an index into the string table (each distinct string crosses once).
pub(in crate::transfer) struct Id;

/// An optional string a row, an index into the string table ([`NONE`] for `None`).
pub(in crate::transfer) struct OptId;

/// An index into the string table read, with the table.
#[derive(Clone, Copy)]
pub(in crate::transfer) struct IdR<'b> {
    ids: Col<'b>,
    strings: Strs<'b>,
}

/// A column of string-table indices being written.
pub(in crate::transfer) struct IdW(FixedW);

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
    pub(in crate::transfer) fn put<'d>(&mut self, s: &mut Strings<'d>, v: &'d str) {
        self.0.u32(s.id(v));
    }

    /// Row's optional string.
    #[inline]
    pub(in crate::transfer) fn opt<'d>(&mut self, s: &mut Strings<'d>, v: Option<&'d str>) {
        self.0.u32(s.opt(v));
    }
}

impl<'b> IdR<'b> {
    /// Row `i`'s string.
    #[inline(always)]
    pub(in crate::transfer) fn get(&self, i: usize) -> Result<&'b str> {
        self.strings.get(self.ids.u32(i)?)
    }

    /// Row `i`'s optional string.
    #[inline(always)]
    pub(in crate::transfer) fn opt(&self, i: usize) -> Result<Option<&'b str>> {
        self.strings.opt(self.ids.u32(i)?)
    }
}

/// A string a row written in place (ids: nearly every one distinct, so interning them would
/// cost a hash lookup a row for nothing): each string's end, then their bytes.
pub(in crate::transfer) struct Str;

/// Strings in place being written.
pub(in crate::transfer) struct StrW {
    ends: FixedW,
    bytes: Vec<u8>,
}

impl StrW {
    pub(super) fn with(n: usize) -> Self {
        StrW {
            ends: FixedW::with(n, 4),
            bytes: Vec::with_capacity(n.saturating_mul(8)),
        }
    }

    /// One string.
    #[inline]
    pub(in crate::transfer) fn put(&mut self, v: &str) {
        self.bytes.extend_from_slice(v.as_bytes());
        self.ends.u32(self.bytes.len() as u32);
    }

    pub(super) fn finish(&self, out: &mut Out) {
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
pub(in crate::transfer) struct OptStr;

/// Optional strings in place being written.
pub(in crate::transfer) struct OptStrW {
    has: BitsW,
    strs: StrW,
}

/// Optional strings in place read.
#[derive(Clone, Copy)]
pub(in crate::transfer) struct OptStrR<'b> {
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
    pub(in crate::transfer) fn put(&mut self, v: Option<&str>) {
        self.has.put(v.is_some());
        self.strs.put(v.unwrap_or_default());
    }
}

impl<'b> OptStrR<'b> {
    /// Row `i`'s string, `None` where it was absent.
    #[inline(always)]
    pub(in crate::transfer) fn get(&self, i: usize) -> Result<Option<&'b str>> {
        Ok(if self.has.get(i)? {
            Some(self.strs.get(i as u32)?)
        } else {
            None
        })
    }
}
