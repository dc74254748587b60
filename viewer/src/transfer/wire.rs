//! The bytes under [`crate::transfer`]: little-endian scalars, the string table, and tables of
//! fixed-width columns. Writing cannot fail; every read is bounds-checked and returns a
//! [`TransferError`] on bytes that do not fit, so hostile or truncated input never panics.
//!
//! A table is `n: u64` (rows), `k: u32` (columns), then `k` columns, each `len: u64` and that
//! many bytes. A column is one of: fixed-width values (`n × width` bytes), a bitmap (`⌈n/8⌉`
//! bytes, bit `i % 8` of byte `i / 8`), or a list's values (any multiple of the width, indexed
//! by a `u32` column of each row's end). Which columns a table has is its layout's business
//! ([`columns`](super::columns)).

use std::ops::Range;

use hashbrown::HashMap;

use super::TransferError;

/// The string index that stands for `None` (a table never holds `u32::MAX` strings: wasm32
/// has 4 GiB of memory in all).
pub const NONE: u32 = u32::MAX;

/// A decoding result.
pub type Result<T> = std::result::Result<T, TransferError>;

/// The error for bytes that do not fit.
pub(super) fn broken(what: impl Into<String>) -> TransferError {
    TransferError(what.into())
}

// ---------------------------------------------------------------------------------------------
// Writing.

/// Each distinct string once, numbered in order of first use.
#[derive(Default)]
pub struct Strings<'d> {
    ids: HashMap<&'d str, u32>,
    list: Vec<&'d str>,
}

impl<'d> Strings<'d> {
    /// The index of `s`, added when new.
    pub fn id(&mut self, s: &'d str) -> u32 {
        let next = self.list.len() as u32;
        let list = &mut self.list;
        *self.ids.entry(s).or_insert_with(|| {
            list.push(s);
            next
        })
    }

    /// The index of `s`, [`NONE`] for `None`.
    pub fn opt(&mut self, s: Option<&'d str>) -> u32 {
        s.map_or(NONE, |s| self.id(s))
    }

    /// A table whose strings `sent` are numbered already, in their order (an encoding that
    /// goes on where another stopped).
    pub fn resumed(sent: &'d [Box<str>]) -> Self {
        let list: Vec<&'d str> = sent.iter().map(|s| &**s).collect();
        let mut ids = HashMap::with_capacity(list.len());
        for (i, s) in list.iter().enumerate() {
            ids.insert(*s, i as u32);
        }
        Strings { ids, list }
    }

    /// A copy of every string, in the order of their numbers (for [`Strings::resumed`]).
    pub fn to_owned_list(&self) -> Vec<Box<str>> {
        self.list.iter().map(|s| Box::from(*s)).collect()
    }

    /// How many strings there are.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// The strings from number `from` on, as a table into `out`: a column of each string's
    /// end offset (from the first of them) and a column of their bytes.
    pub fn write_table_from(&self, from: usize, out: &mut Out) {
        let list = self.list.get(from..).unwrap_or_default();
        let mut ends = Vec::with_capacity(list.len() * 4);
        let mut end = 0u32;
        for s in list {
            end += s.len() as u32;
            ends.extend_from_slice(&end.to_le_bytes());
        }
        out.table_head(list.len(), 2);
        out.column(&ends);
        out.u64(u64::from(end));
        out.buf.reserve(end as usize);
        for s in list {
            out.buf.extend_from_slice(s.as_bytes());
        }
    }
}

/// The encoded bytes being written.
#[derive(Default)]
pub struct Out {
    /// Everything written so far.
    pub buf: Vec<u8>,
}

impl Out {
    /// A `u8`.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    /// A `bool` as `0` or `1`.
    pub fn bool(&mut self, v: bool) {
        self.buf.push(u8::from(v));
    }

    /// A `u32`.
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// A `u64`.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// An `i64`.
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// An optional `u64`: a presence byte, then the value when present.
    pub fn opt_u64(&mut self, v: Option<u64>) {
        self.bool(v.is_some());
        if let Some(v) = v {
            self.u64(v);
        }
    }

    /// A string: its length in bytes, then its UTF-8.
    pub fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.buf.extend_from_slice(s.as_bytes());
    }

    /// A table's head: its rows and how many columns follow.
    pub fn table_head(&mut self, n: usize, k: usize) {
        self.u64(n as u64);
        self.u32(k as u32);
    }

    /// One column of a table: its length, then its bytes.
    pub fn column(&mut self, bytes: &[u8]) {
        self.u64(bytes.len() as u64);
        self.buf.extend_from_slice(bytes);
    }
}

// ---------------------------------------------------------------------------------------------
// Reading.

/// A cursor over the encoded bytes.
pub struct In<'b> {
    bytes: &'b [u8],
    /// The next byte to read.
    pub at: usize,
}

impl<'b> In<'b> {
    /// Read `bytes` from `at`.
    pub fn new(bytes: &'b [u8], at: usize) -> Self {
        In { bytes, at }
    }

    fn take(&mut self, n: usize) -> Result<&'b [u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| broken(format!("the bytes end early (at byte {})", self.at)))?;
        let s = self.bytes.get(self.at..end).unwrap_or_default();
        self.at = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.take(N)?;
        let mut a = [0; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// A `u8`.
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    /// A `bool` written as `0` or `1`.
    pub fn bool(&mut self) -> Result<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(broken(format!(
                "{v} is not a boolean (byte {})",
                self.at - 1
            ))),
        }
    }

    /// A `u32`.
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// A `u64`.
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// An `i64`.
    pub fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    /// An optional `u64` (see [`Out::opt_u64`]).
    pub fn opt_u64(&mut self) -> Result<Option<u64>> {
        Ok(if self.bool()? {
            Some(self.u64()?)
        } else {
            None
        })
    }

    /// A string written by [`Out::str`], checked to be UTF-8.
    pub fn str(&mut self) -> Result<&'b str> {
        let at = self.at;
        let n = self.len()?;
        std::str::from_utf8(self.take(n)?)
            .map_err(|_| broken(format!("the string at byte {at} is not UTF-8")))
    }

    /// How many bytes are left to read.
    pub fn left(&self) -> usize {
        self.bytes.len().saturating_sub(self.at)
    }

    /// A length or count that must fit in memory.
    pub fn len(&mut self) -> Result<usize> {
        let v = self.u64()?;
        usize::try_from(v).map_err(|_| broken(format!("a length of {v} does not fit")))
    }

    /// A table: where each of its columns lies (checked to lie within the bytes). How many
    /// columns it must have is checked by its layout ([`Table::expect_columns`]).
    pub fn table(&mut self) -> Result<Table> {
        let start = self.at;
        let n = self.len()?;
        let k = self.u32()? as usize;
        // Each column takes at least its length's 8 bytes: a larger count is hostile.
        if k > self.left() / 8 {
            return Err(broken(format!(
                "a table at byte {start} has {k} columns, more than its bytes hold"
            )));
        }
        let mut cols = Vec::with_capacity(k);
        for _ in 0..k {
            let len = self.len()?;
            let from = self.at;
            self.take(len)?;
            cols.push(from..self.at);
        }
        Ok(Table { n, start, cols })
    }
}

/// Where one table's columns lie in the encoded bytes.
#[derive(Debug, Clone)]
pub struct Table {
    /// Rows.
    pub n: usize,
    /// The byte it starts at.
    start: usize,
    cols: Vec<Range<usize>>,
}

impl Table {
    /// An error unless the table has `k` columns (`what`: its layout, for the message).
    pub fn expect_columns(&self, k: usize, what: &str) -> Result<()> {
        if self.cols.len() == k {
            Ok(())
        } else {
            Err(broken(format!(
                "a {what} table at byte {} has {} columns, not {k}",
                self.start,
                self.cols.len()
            )))
        }
    }

    /// Column `c`'s bytes.
    pub fn raw<'b>(&self, bytes: &'b [u8], c: usize) -> Result<&'b [u8]> {
        self.cols
            .get(c)
            .and_then(|r| bytes.get(r.clone()))
            .ok_or_else(|| broken(format!("column {c} is missing")))
    }

    /// Column `c` of `width`-byte values, one per row.
    pub fn col<'b>(&self, bytes: &'b [u8], c: usize, width: usize) -> Result<Col<'b>> {
        let b = self.raw(bytes, c)?;
        if Some(b.len()) != self.n.checked_mul(width) {
            return Err(broken(format!(
                "column {c} has {} bytes for {} rows of {width}",
                b.len(),
                self.n
            )));
        }
        Ok(Col { b })
    }

    /// Column `c`, a bitmap of one bit per row.
    pub fn bits<'b>(&self, bytes: &'b [u8], c: usize) -> Result<Bits<'b>> {
        let b = self.raw(bytes, c)?;
        if b.len() != self.n.div_ceil(8) {
            return Err(broken(format!(
                "bitmap column {c} has {} bytes for {} rows",
                b.len(),
                self.n
            )));
        }
        Ok(Bits { b })
    }

    /// A column of strings written in place ([`Str`](super::columns::Str)): their ends in column `c`, their
    /// bytes in `c + 1`, checked to be UTF-8 once for the whole table.
    pub fn strs<'b>(&self, bytes: &'b [u8], c: usize) -> Result<Strs<'b>> {
        let ends = self.col(bytes, c, 4)?;
        Ok(Strs {
            ends,
            pool: self.utf8(bytes, c + 1)?,
        })
    }

    /// Column `c`'s bytes, checked to be UTF-8.
    pub fn utf8<'b>(&self, bytes: &'b [u8], c: usize) -> Result<&'b str> {
        std::str::from_utf8(self.raw(bytes, c)?)
            .map_err(|e| broken(format!("column {c} is not UTF-8 ({e})")))
    }
}

/// Fixed-width values.
#[derive(Clone, Copy)]
pub struct Col<'b> {
    b: &'b [u8],
}

impl<'b> Col<'b> {
    /// No values.
    pub const EMPTY: Col<'static> = Col { b: &[] };

    /// The values in `b`.
    pub fn of(b: &'b [u8]) -> Self {
        Col { b }
    }

    /// Its bytes.
    pub fn bytes(&self) -> &'b [u8] {
        self.b
    }

    // The readers below are inlined into the loops that read a column row by row (the page's
    // wasm is built for size, where each was a call a cell: about a tenth of a 10 MB open's
    // decoding); their errors are built out of line.
    #[inline(always)]
    fn array<const N: usize>(&self, i: usize) -> Result<[u8; N]> {
        match i
            .checked_mul(N)
            .and_then(|from| self.b.get(from..from.checked_add(N)?))
        {
            Some(s) => {
                let mut a = [0; N];
                a.copy_from_slice(s);
                Ok(a)
            }
            None => Err(past_column(i)),
        }
    }

    /// Row `i` as a `u8`.
    #[inline(always)]
    pub fn u8(&self, i: usize) -> Result<u8> {
        Ok(self.array::<1>(i)?[0])
    }

    /// Row `i` as a `u32`.
    #[inline(always)]
    pub fn u32(&self, i: usize) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(i)?))
    }

    /// Row `i` as a `u64`.
    #[inline(always)]
    pub fn u64(&self, i: usize) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(i)?))
    }

    /// Row `i` as an `i64`.
    #[inline(always)]
    pub fn i64(&self, i: usize) -> Result<i64> {
        Ok(i64::from_le_bytes(self.array(i)?))
    }

    /// Row `i` as an `f64`.
    #[inline(always)]
    pub fn f64(&self, i: usize) -> Result<f64> {
        Ok(f64::from_bits(self.u64(i)?))
    }

    /// Every value as a `u32`, in order (no check per value: the width is exact).
    pub fn all_u32(&self) -> impl Iterator<Item = u32> + 'b {
        self.b
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
    }

    /// Every value as a `u32`, into a vector with one copy of the bytes.
    pub fn u32s(&self) -> Vec<u32> {
        let n = self.b.len() / 4;
        let mut v = vec![0u32; n];
        bytemuck::cast_slice_mut::<u32, u8>(&mut v).copy_from_slice(&self.b[..n * 4]);
        // Nothing to do on a little-endian target (wasm32 is one).
        v.iter_mut().for_each(|x| *x = u32::from_le(*x));
        v
    }

    /// Every value as a `u64`, into a vector with one copy of the bytes.
    pub fn u64s(&self) -> Vec<u64> {
        let n = self.b.len() / 8;
        let mut v = vec![0u64; n];
        bytemuck::cast_slice_mut::<u64, u8>(&mut v).copy_from_slice(&self.b[..n * 8]);
        v.iter_mut().for_each(|x| *x = u64::from_le(*x));
        v
    }

    /// Every value as a `u64`, in order.
    pub fn all_u64(&self) -> impl Iterator<Item = u64> + 'b {
        self.b.chunks_exact(8).map(|c| {
            let mut a = [0; 8];
            a.copy_from_slice(c);
            u64::from_le_bytes(a)
        })
    }
}

/// The error for row `i` of a column too short for it.
#[cold]
#[inline(never)]
fn past_column(i: usize) -> TransferError {
    broken(format!("row {i} is past its column"))
}

/// One bit per row.
#[derive(Clone, Copy)]
pub struct Bits<'b> {
    b: &'b [u8],
}

impl Bits<'_> {
    /// Row `i`'s bit.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Result<bool> {
        match self.b.get(i / 8) {
            Some(byte) => Ok(byte & (1 << (i % 8)) != 0),
            None => Err(past_bitmap(i)),
        }
    }

    /// Row `i` of an optional `u64` ([`OptU64`](super::columns::OptU64)), with `values` its
    /// column.
    #[inline(always)]
    pub fn opt_u64(&self, values: &Col<'_>, i: usize) -> Result<Option<u64>> {
        Ok(if self.get(i)? {
            Some(values.u64(i)?)
        } else {
            None
        })
    }
}

/// The error for row `i` of a bitmap too short for it.
#[cold]
#[inline(never)]
fn past_bitmap(i: usize) -> TransferError {
    broken(format!("row {i} is past its bitmap"))
}

/// The strings received so far, numbered in order: each chunk's table appended. Their bytes
/// are checked to be UTF-8 once, as they come, and each string to start and end on a
/// character boundary when it is read, so a lookup costs no UTF-8 check.
#[derive(Default)]
pub struct StringPool {
    /// Each string's end in `pool`, as little-endian `u32`s (read through a [`Col`]).
    ends: Vec<u8>,
    pool: String,
}

impl StringPool {
    /// Append the strings of a chunk's table `t` in `bytes` (see [`Strings::write_table_from`]).
    pub fn append(&mut self, t: &Table, bytes: &[u8]) -> Result<()> {
        t.expect_columns(2, "string")?;
        let ends = t.col(bytes, 0, 4)?;
        let pool = std::str::from_utf8(t.raw(bytes, 1)?)
            .map_err(|e| broken(format!("a string is not UTF-8 ({e})")))?;
        let base = u32::try_from(self.pool.len()).map_err(|_| broken("too many strings"))?;
        self.ends.reserve(t.n * 4);
        let mut last = 0;
        for end in ends.all_u32() {
            if end < last || end as usize > pool.len() {
                return Err(broken(format!("a string ends at {end}, outside its table")));
            }
            last = end;
            let end = base
                .checked_add(end)
                .ok_or_else(|| broken("too many strings"))?;
            self.ends.extend_from_slice(&end.to_le_bytes());
        }
        self.pool.push_str(pool);
        Ok(())
    }

    /// The strings, to look up.
    pub fn strs(&self) -> Strs<'_> {
        Strs {
            ends: Col { b: &self.ends },
            pool: &self.pool,
        }
    }
}

/// The error for string `id` past its table's ends.
#[cold]
#[inline(never)]
fn not_in_table(id: u32) -> TransferError {
    broken(format!("string {id} is not in the table"))
}

/// The error for string `id` whose ends lie outside its bytes or inside a character.
#[cold]
#[inline(never)]
fn outside_pool(id: u32) -> TransferError {
    broken(format!(
        "string {id} lies outside its table or is not UTF-8"
    ))
}

/// Strings by number: the string table, or a column of strings written in place.
#[derive(Clone, Copy)]
pub struct Strs<'b> {
    ends: Col<'b>,
    pool: &'b str,
}

impl<'b> Strs<'b> {
    /// The first `n` strings as one: the bytes they span, and each one's end in them (the
    /// ends as written, checked where they are used: [`Pools::extend_strings`]).
    ///
    /// [`Pools::extend_strings`]: candle_trace_schema::format::table::Pools::extend_strings
    pub fn block(&self, n: usize) -> Result<(&'b str, impl ExactSizeIterator<Item = u32> + 'b)> {
        let ends = self
            .ends
            .b
            .get(..n.saturating_mul(4))
            .ok_or_else(|| broken(format!("{n} strings, but fewer ends")))?;
        let ends = ends
            .chunks_exact(4)
            .map(|e| u32::from_le_bytes([e[0], e[1], e[2], e[3]]));
        Ok((self.pool, ends))
    }

    /// String `id`.
    #[inline(always)]
    pub fn get(&self, id: u32) -> Result<&'b str> {
        let i = id as usize;
        let (Ok(end), Ok(start)) = (
            self.ends.u32(i),
            i.checked_sub(1).map_or(Ok(0), |p| self.ends.u32(p)),
        ) else {
            return Err(not_in_table(id));
        };
        // `None` also where a bound is not on a character boundary: the pool is UTF-8 as a
        // whole, so a string cut from it on boundaries is too.
        match self.pool.get(start as usize..end as usize) {
            Some(s) => Ok(s),
            None => Err(outside_pool(id)),
        }
    }

    /// String `id`, `None` for [`NONE`].
    #[inline(always)]
    pub fn opt(&self, id: u32) -> Result<Option<&'b str>> {
        if id == NONE {
            Ok(None)
        } else {
            self.get(id).map(Some)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failed expectation is the report

    use super::*;

    #[test]
    fn numbers_copied_whole_are_the_values_read_one_by_one() {
        let bytes: Vec<u8> = (0u8..40).collect();
        let col = Col::of(&bytes);
        assert_eq!(col.u32s(), col.all_u32().collect::<Vec<_>>());
        assert_eq!(col.u64s(), col.all_u64().collect::<Vec<_>>());
        // By hand: the first values, little-endian.
        assert_eq!(col.u32s()[..2], [0x0302_0100, 0x0706_0504]);
        assert_eq!(col.u64s()[0], 0x0706_0504_0302_0100);
        assert_eq!((col.u32s().len(), col.u64s().len()), (10, 5));
        assert!(Col::EMPTY.u32s().is_empty() && Col::EMPTY.u64s().is_empty());
    }

    #[test]
    fn a_block_of_strings_is_their_bytes_and_each_end() {
        // "ab" ends at 2, "é" (2 bytes) at 4.
        let ends: Vec<u8> = [2u32, 4].iter().flat_map(|e| e.to_le_bytes()).collect();
        let strs = Strs {
            ends: Col::of(&ends),
            pool: "abé",
        };
        let (block, each) = strs.block(2).unwrap();
        assert_eq!((block, each.collect::<Vec<_>>()), ("abé", vec![2, 4]));
        let (_, each) = strs.block(1).unwrap();
        assert_eq!(each.collect::<Vec<_>>(), [2]);
        let e = strs.block(3).err().unwrap();
        assert!(e.to_string().contains("3 strings, but fewer ends"), "{e}");
    }
}
