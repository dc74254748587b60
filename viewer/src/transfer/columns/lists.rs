//! Lists a row: [`U64List`], [`U32List`], [`IdList`].

use super::*;

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
pub(in crate::transfer) struct ListW {
    ends: FixedW,
    values: FixedW,
    count: u32,
}

/// A list of numbers read.
#[derive(Clone, Copy)]
pub(in crate::transfer) struct ListR<'b> {
    ends: Col<'b>,
    values: &'b [u8],
}

/// A list of numbers a row, `WIDTH` bytes each.
pub(in crate::transfer) struct NumList<const WIDTH: usize>;

/// A list of `u64` a row.
pub(in crate::transfer) type U64List = NumList<8>;

/// A list of `u32` a row.
pub(in crate::transfer) type U32List = NumList<4>;

/// A list of strings a row, as indices into the string table.
pub(in crate::transfer) struct IdList;

/// An [`IdList`] read, with the string table.
#[derive(Clone, Copy)]
pub(in crate::transfer) struct IdListR<'b> {
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

impl<const WIDTH: usize> Column for NumList<WIDTH> {
    const COLUMNS: usize = 2;
    type Writer = ListW;
    type Reader<'b> = ListR<'b>;
    fn writer(n: usize) -> ListW {
        list_writer(n, WIDTH)
    }
    fn finish(w: ListW, out: &mut Out) {
        list_finish(w, out)
    }
    fn reader<'b>(t: &Table, b: &'b [u8], _: Strs<'b>, c: usize) -> Result<ListR<'b>> {
        list_reader(t, b, c, WIDTH)
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
    pub(in crate::transfer) fn u64s(&mut self, v: &[u64]) {
        for &x in v {
            self.values.u64(x);
        }
        self.count += v.len() as u32;
        self.ends.u32(self.count);
    }

    /// Row's list of `u32`.
    #[inline]
    pub(in crate::transfer) fn u32s(&mut self, v: &[u32]) {
        for &x in v {
            self.values.u32(x);
        }
        self.count += v.len() as u32;
        self.ends.u32(self.count);
    }

    /// Row's list of strings, as string-table indices.
    #[inline]
    pub(in crate::transfer) fn ids<'d>(
        &mut self,
        s: &mut Strings<'d>,
        v: impl IntoIterator<Item = &'d str>,
    ) {
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
    pub(in crate::transfer) fn u64s(&self, i: usize) -> Result<impl Iterator<Item = u64> + 'b> {
        Ok(Col::of(self.bytes(i, 8)?).all_u64())
    }

    /// Row `i`'s list of `u32`, one at a time.
    #[inline]
    pub(in crate::transfer) fn u32s(&self, i: usize) -> Result<impl Iterator<Item = u32> + 'b> {
        Ok(Col::of(self.bytes(i, 4)?).all_u32())
    }

    /// Row `i`'s list of `u64`, collected.
    pub(in crate::transfer) fn u64_vec(&self, i: usize) -> Result<Vec<u64>> {
        Ok(self.u64s(i)?.collect())
    }
}

impl<'b> IdListR<'b> {
    /// Row `i`'s strings.
    pub(in crate::transfer) fn get(
        &self,
        i: usize,
    ) -> Result<impl Iterator<Item = Result<&'b str>> + 'b> {
        let strings = self.strings;
        Ok(Col::of(self.list.bytes(i, 4)?)
            .all_u32()
            .map(move |id| strings.get(id)))
    }
}
