//! The bytes under [`crate::transfer`]: little-endian scalars, the string table, and tables of
//! fixed-width columns. Writing cannot fail; every read is bounds-checked and returns a
//! [`TransferError`] on bytes that do not fit, so hostile or truncated input never panics.
//!
//! A table is `n: u64` (rows), `k: u32` (columns), then `k` columns, each `len: u64` and that
//! many bytes. A column is one of: fixed-width values (`n × width` bytes), a bitmap (`⌈n/8⌉`
//! bytes, bit `i % 8` of byte `i / 8`), or a list's values (any multiple of the width, indexed
//! by a `u32` column of each row's end).

use std::ops::Range;

use hashbrown::HashMap;

use super::TransferError;

/// The string index that stands for `None` (a table never holds `u32::MAX` strings: wasm32
/// has 4 GiB of memory in all).
pub const NONE: u32 = u32::MAX;

/// A decoding result.
pub type Result<T> = std::result::Result<T, TransferError>;

fn broken(what: impl Into<String>) -> TransferError {
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

    /// How many strings there are.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// The strings from number `from` on, as a table: a column of each string's end offset
    /// (from the first of them) and a column of their bytes.
    pub fn table_from(&self, from: usize) -> Cols {
        let list = self.list.get(from..).unwrap_or_default();
        let mut c = Cols::new(2, list.len());
        let bytes: usize = list.iter().map(|s| s.len()).sum();
        c.buf(1).reserve_exact(bytes);
        for s in list {
            c.buf(1).extend_from_slice(s.as_bytes());
            let end = c.buf(1).len() as u32;
            c.u32(0, end);
        }
        c
    }
}

/// The columns of one table being written, row by row.
pub struct Cols {
    n: usize,
    bufs: Vec<Vec<u8>>,
    bits: Vec<usize>,
}

impl Cols {
    /// `k` columns for `n` rows.
    pub fn new(k: usize, n: usize) -> Self {
        Cols {
            n,
            bufs: (0..k).map(|_| Vec::new()).collect(),
            bits: vec![0; k],
        }
    }

    /// Column `c` (grown to have it: the encoder names its columns by constants).
    pub fn buf(&mut self, c: usize) -> &mut Vec<u8> {
        if c >= self.bufs.len() {
            self.bufs.resize_with(c + 1, Vec::new);
            self.bits.resize(c + 1, 0);
        }
        if self.bufs[c].capacity() == 0 {
            // The usual width: one reservation rather than growing.
            self.bufs[c].reserve(self.n.saturating_mul(4));
        }
        &mut self.bufs[c]
    }

    /// A `u8` into column `c`.
    pub fn u8(&mut self, c: usize, v: u8) {
        self.buf(c).push(v);
    }

    /// A `u32` into column `c`.
    pub fn u32(&mut self, c: usize, v: u32) {
        self.buf(c).extend_from_slice(&v.to_le_bytes());
    }

    /// A `u64` into column `c`.
    pub fn u64(&mut self, c: usize, v: u64) {
        self.buf(c).extend_from_slice(&v.to_le_bytes());
    }

    /// An `i64` into column `c`.
    pub fn i64(&mut self, c: usize, v: i64) {
        self.buf(c).extend_from_slice(&v.to_le_bytes());
    }

    /// An `f64` (its bits) into column `c`.
    pub fn f64(&mut self, c: usize, v: f64) {
        self.u64(c, v.to_bits());
    }

    /// One bit of the bitmap in column `c`.
    pub fn bit(&mut self, c: usize, v: bool) {
        self.buf(c);
        let at = self.bits[c];
        self.bits[c] += 1;
        let buf = &mut self.bufs[c];
        if at % 8 == 0 {
            buf.push(0);
        }
        if v {
            if let Some(last) = buf.last_mut() {
                *last |= 1 << (at % 8);
            }
        }
    }

    /// An optional `u64`: presence in bitmap column `c`, the value (0 when absent) in `c + 1`.
    pub fn opt_u64(&mut self, c: usize, v: Option<u64>) {
        self.bit(c, v.is_some());
        self.u64(c + 1, v.unwrap_or(0));
    }

    /// A list of `u64`: its end in column `c`, its values appended to column `c + 1`.
    pub fn list_u64(&mut self, c: usize, v: &[u64]) {
        let pool = self.buf(c + 1);
        for x in v {
            pool.extend_from_slice(&x.to_le_bytes());
        }
        let end = (pool.len() / 8) as u32;
        self.u32(c, end);
    }

    /// A string written in place (ids: nearly every one distinct, so a table of them would
    /// only cost a hash lookup a row): its end in column `c`, its bytes appended to `c + 1`.
    pub fn str(&mut self, c: usize, v: &str) {
        let pool = self.buf(c + 1);
        pool.extend_from_slice(v.as_bytes());
        let end = pool.len() as u32;
        self.u32(c, end);
    }

    /// An optional string in place: presence in bitmap column `c`, the string (empty when
    /// absent) in `c + 1` and `c + 2` as [`Cols::str`].
    pub fn opt_str(&mut self, c: usize, v: Option<&str>) {
        self.bit(c, v.is_some());
        self.str(c + 1, v.unwrap_or_default());
    }

    /// A list of strings in place: the list's end (in strings) in column `c`, each string's
    /// end in `c + 1`, their bytes in `c + 2`.
    pub fn list_str<'s>(&mut self, c: usize, v: impl IntoIterator<Item = &'s str>) {
        for s in v {
            self.str(c + 1, s);
        }
        let end = (self.buf(c + 1).len() / 4) as u32;
        self.u32(c, end);
    }

    /// A list of `u32`: its end in column `c`, its values appended to column `c + 1`.
    pub fn list_u32(&mut self, c: usize, v: impl IntoIterator<Item = u32>) {
        let pool = self.buf(c + 1);
        for x in v {
            pool.extend_from_slice(&x.to_le_bytes());
        }
        let end = (pool.len() / 4) as u32;
        self.u32(c, end);
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

    /// A finished table.
    pub fn table(&mut self, cols: Cols) {
        self.u64(cols.n as u64);
        self.u32(cols.bufs.len() as u32);
        let bytes: usize = cols.bufs.iter().map(|b| b.len() + 8).sum();
        self.buf.reserve(bytes);
        for b in cols.bufs {
            self.u64(b.len() as u64);
            self.buf.extend_from_slice(&b);
        }
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

    /// A length or count that must fit in memory.
    pub fn len(&mut self) -> Result<usize> {
        let v = self.u64()?;
        usize::try_from(v).map_err(|_| broken(format!("a length of {v} does not fit")))
    }

    /// A table of `k` columns: where each column lies (checked to lie within the bytes).
    pub fn table(&mut self, k: usize) -> Result<Table> {
        let start = self.at;
        let n = self.len()?;
        let found = self.u32()? as usize;
        if found != k {
            return Err(broken(format!(
                "a table at byte {start} has {found} columns, not {k}"
            )));
        }
        let mut cols = Vec::with_capacity(k);
        for _ in 0..k {
            let len = self.len()?;
            let from = self.at;
            self.take(len)?;
            cols.push(from..self.at);
        }
        Ok(Table { n, cols })
    }
}

/// Where one table's columns lie in the encoded bytes.
#[derive(Debug, Clone)]
pub struct Table {
    /// Rows.
    pub n: usize,
    cols: Vec<Range<usize>>,
}

impl Table {
    fn raw<'b>(&self, bytes: &'b [u8], c: usize) -> Result<&'b [u8]> {
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

    /// A column of strings written in place ([`Cols::str`]): their ends in column `c`, their
    /// bytes in `c + 1`, checked to be UTF-8 once for the whole table.
    pub fn strs<'b>(&self, bytes: &'b [u8], c: usize) -> Result<Strs<'b>> {
        let ends = self.col(bytes, c, 4)?;
        Ok(Strs {
            ends,
            pool: self.utf8(bytes, c + 1)?,
        })
    }

    /// A column of optional strings in place ([`Cols::opt_str`]).
    pub fn opt_strs<'b>(&self, bytes: &'b [u8], c: usize) -> Result<OptStrs<'b>> {
        Ok(OptStrs {
            has: self.bits(bytes, c)?,
            strs: self.strs(bytes, c + 1)?,
        })
    }

    /// A column of lists of strings in place ([`Cols::list_str`]): each row's range of
    /// strings, and the strings.
    pub fn str_lists<'b>(&self, bytes: &'b [u8], c: usize) -> Result<(List<'b>, Strs<'b>)> {
        let lists = self.list(bytes, c, 4)?;
        let strs = Strs {
            ends: lists.pool,
            pool: self.utf8(bytes, c + 2)?,
        };
        Ok((lists, strs))
    }

    fn utf8<'b>(&self, bytes: &'b [u8], c: usize) -> Result<&'b str> {
        std::str::from_utf8(self.raw(bytes, c)?)
            .map_err(|e| broken(format!("column {c} is not UTF-8 ({e})")))
    }

    /// A list column: the rows' ends in column `c`, their `width`-byte values in `c + 1`.
    pub fn list<'b>(&self, bytes: &'b [u8], c: usize, width: usize) -> Result<List<'b>> {
        let ends = self.col(bytes, c, 4)?;
        let pool = self.raw(bytes, c + 1)?;
        if pool.len() % width != 0 {
            return Err(broken(format!("list column {} is cut", c + 1)));
        }
        Ok(List {
            ends,
            pool: Col { b: pool },
        })
    }
}

/// Fixed-width values.
#[derive(Clone, Copy)]
pub struct Col<'b> {
    b: &'b [u8],
}

impl<'b> Col<'b> {
    fn array<const N: usize>(&self, i: usize) -> Result<[u8; N]> {
        let s = i
            .checked_mul(N)
            .and_then(|from| self.b.get(from..from.checked_add(N)?))
            .ok_or_else(|| broken(format!("row {i} is past its column")))?;
        let mut a = [0; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// Row `i` as a `u8`.
    pub fn u8(&self, i: usize) -> Result<u8> {
        Ok(self.array::<1>(i)?[0])
    }

    /// Row `i` as a `u32`.
    pub fn u32(&self, i: usize) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(i)?))
    }

    /// Row `i` as a `u64`.
    pub fn u64(&self, i: usize) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(i)?))
    }

    /// Row `i` as an `i64`.
    pub fn i64(&self, i: usize) -> Result<i64> {
        Ok(i64::from_le_bytes(self.array(i)?))
    }

    /// Row `i` as an `f64`.
    pub fn f64(&self, i: usize) -> Result<f64> {
        Ok(f64::from_bits(self.u64(i)?))
    }

    /// Every value as a `u32`, in order (no check per value: the width is exact).
    pub fn all_u32(&self) -> impl Iterator<Item = u32> + 'b {
        self.b
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
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

/// One bit per row.
#[derive(Clone, Copy)]
pub struct Bits<'b> {
    b: &'b [u8],
}

impl Bits<'_> {
    /// Row `i`'s bit.
    pub fn get(&self, i: usize) -> Result<bool> {
        let byte = self
            .b
            .get(i / 8)
            .ok_or_else(|| broken(format!("row {i} is past its bitmap")))?;
        Ok(byte & (1 << (i % 8)) != 0)
    }

    /// Row `i` of an optional `u64` written by [`Cols::opt_u64`], with `values` its column.
    pub fn opt_u64(&self, values: &Col<'_>, i: usize) -> Result<Option<u64>> {
        Ok(if self.get(i)? {
            Some(values.u64(i)?)
        } else {
            None
        })
    }
}

/// A list per row: ends and values.
#[derive(Clone, Copy)]
pub struct List<'b> {
    ends: Col<'b>,
    pool: Col<'b>,
}

impl List<'_> {
    /// Row `i`'s range of values (for a list of strings: which of the strings).
    pub fn range(&self, i: usize) -> Result<Range<usize>> {
        let end = self.ends.u32(i)? as usize;
        let start = match i.checked_sub(1) {
            Some(p) => self.ends.u32(p)? as usize,
            None => 0,
        };
        if start > end {
            return Err(broken(format!("row {i}'s list ends before it starts")));
        }
        Ok(start..end)
    }

    /// Row `i`'s values, `width` bytes each: one bounds check for the whole list.
    fn bytes(&self, i: usize, width: usize) -> Result<&[u8]> {
        let r = self.range(i)?;
        r.start
            .checked_mul(width)
            .zip(r.end.checked_mul(width))
            .and_then(|(from, to)| self.pool.b.get(from..to))
            .ok_or_else(|| broken(format!("row {i}'s list is past its values")))
    }

    /// Row `i`'s list of `u64`, one at a time.
    pub fn u64_iter(&self, i: usize) -> Result<impl Iterator<Item = u64> + '_> {
        Ok(Col {
            b: self.bytes(i, 8)?,
        }
        .all_u64())
    }

    /// Row `i`'s list of `u64`.
    pub fn u64s(&self, i: usize) -> Result<Vec<u64>> {
        Ok(Col {
            b: self.bytes(i, 8)?,
        }
        .all_u64()
        .collect())
    }

    /// Row `i`'s list of `u32`.
    pub fn u32s(&self, i: usize) -> Result<Vec<u32>> {
        Ok(Col {
            b: self.bytes(i, 4)?,
        }
        .all_u32()
        .collect())
    }
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
    /// Append the strings of a chunk's table `t` in `bytes` (see [`Strings::table_from`]).
    pub fn append(&mut self, t: &Table, bytes: &[u8]) -> Result<()> {
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

/// Optional strings written in place, read.
#[derive(Clone, Copy)]
pub struct OptStrs<'b> {
    has: Bits<'b>,
    strs: Strs<'b>,
}

impl<'b> OptStrs<'b> {
    /// Row `i`'s string, `None` where it was absent.
    pub fn get(&self, i: usize) -> Result<Option<&'b str>> {
        Ok(if self.has.get(i)? {
            Some(self.strs.get(i as u32)?)
        } else {
            None
        })
    }
}

/// Strings by number: the string table, or a column of strings written in place.
#[derive(Clone, Copy)]
pub struct Strs<'b> {
    ends: Col<'b>,
    pool: &'b str,
}

impl<'b> Strs<'b> {
    /// String `id`.
    pub fn get(&self, id: u32) -> Result<&'b str> {
        let i = id as usize;
        let outside = |_| broken(format!("string {id} is not in the table"));
        let end = self.ends.u32(i).map_err(outside)? as usize;
        let start = match i.checked_sub(1) {
            Some(p) => self.ends.u32(p).map_err(outside)? as usize,
            None => 0,
        };
        // `None` also where a bound is not on a character boundary: the pool is UTF-8 as a
        // whole, so a string cut from it on boundaries is too.
        self.pool.get(start..end).ok_or_else(|| {
            broken(format!(
                "string {id} lies outside its table or is not UTF-8"
            ))
        })
    }

    /// String `id`, `None` for [`NONE`].
    pub fn opt(&self, id: u32) -> Result<Option<&'b str>> {
        if id == NONE {
            Ok(None)
        } else {
            self.get(id).map(Some)
        }
    }
}
