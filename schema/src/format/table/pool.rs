//! A table's pools: strings and shapes stored once, end to end, and what each column last
//! stored.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

/// The number of an absent optional string.
pub(super) const NONE: u32 = u32::MAX;

/// What a [`Pool`] keeps its values in, end to end: a `String` (values `str`) or a `Vec<u64>`
/// (values `[u64]`, shapes).
pub(super) trait Buffer: Default {
    type Value: ?Sized + Eq + core::hash::Hash;
    fn value(&self, range: core::ops::Range<usize>) -> &Self::Value;
    /// Whether the value at `range` is `value` (without making it a `Value` first).
    fn holds(&self, range: core::ops::Range<usize>, value: &Self::Value) -> bool {
        self.value(range) == value
    }
    fn append(&mut self, value: &Self::Value);
    fn len(&self) -> usize;
}

impl Buffer for String {
    type Value = str;
    fn value(&self, range: core::ops::Range<usize>) -> &str {
        &self[range]
    }
    /// As bytes: slicing a `str` checks that both ends are character boundaries.
    fn holds(&self, range: core::ops::Range<usize>, value: &str) -> bool {
        self.as_bytes().get(range) == Some(value.as_bytes())
    }
    fn append(&mut self, value: &str) {
        self.push_str(value);
    }
    fn len(&self) -> usize {
        String::len(self)
    }
}

impl Buffer for Vec<u64> {
    type Value = [u64];
    fn value(&self, range: core::ops::Range<usize>) -> &[u64] {
        &self[range]
    }
    fn append(&mut self, value: &[u64]) {
        self.extend_from_slice(value);
    }
    fn len(&self) -> usize {
        Vec::len(self)
    }
}

/// Values end to end in one buffer, each known by its number (in order of storing). Values
/// that repeat (names, shapes) are stored once ([`Pool::intern`]); ids, nearly all distinct,
/// are appended as they come ([`Pool::push`], or [`Pool::push_unless_last`] for a run of
/// records that share one).
#[derive(Clone, Default)]
pub(super) struct Pool<B> {
    pub(super) values: B,
    pub(super) ends: Vec<usize>,
    /// The interned values' numbers, by hash.
    pub(super) index: HashTable<u32>,
    pub(super) hasher: DefaultHashBuilder,
}

/// Strings: ids and names.
pub(super) type Strings = Pool<String>;

impl<B: Buffer> Pool<B> {
    /// Value number `i` (`i` was returned by this pool).
    pub(crate) fn get(&self, i: u32) -> &B::Value {
        value_at(&self.values, &self.ends, i)
    }

    /// Whether value number `i` is `value`.
    pub(super) fn holds(&self, i: u32, value: &B::Value) -> bool {
        self.values.holds(range_at(&self.ends, i), value)
    }

    /// Store `value` as the next one.
    pub(crate) fn push(&mut self, value: &B::Value) -> u32 {
        self.values.append(value);
        self.ends.push(self.values.len());
        // A pool of 2^32 values would need hundreds of gigabytes of trace in memory.
        (self.ends.len() - 1) as u32
    }

    /// `last` when that value is `value` (records in a run share their span), otherwise
    /// `value` stored as the next one.
    pub(crate) fn push_unless_last(&mut self, last: u32, value: &B::Value) -> u32 {
        if last != NONE && self.holds(last, value) {
            return last;
        }
        self.push(value)
    }

    /// The number of `value` among the interned values, storing it the first time: `cache`
    /// (the column's last value) is compared before the value is hashed, and set to it.
    pub(crate) fn intern(&mut self, cache: &mut u32, value: &B::Value) -> u32 {
        if *cache != NONE && self.holds(*cache, value) {
            return *cache;
        }
        let hash = self.hasher.hash_one(value);
        let found = {
            let (values, ends) = (&self.values, &self.ends);
            self.index
                .find(hash, |&i| values.holds(range_at(ends, i), value))
                .copied()
        };
        let n = match found {
            Some(n) => n,
            None => {
                let n = self.push(value);
                let (values, ends, hasher) = (&self.values, &self.ends, &self.hasher);
                self.index
                    .insert_unique(hash, n, |&i| hasher.hash_one(value_at(values, ends, i)));
                n
            }
        };
        *cache = n;
        n
    }

    /// Index value number `i` (stored by [`Pool::push`]) for [`Pool::intern`], unless an equal
    /// value is indexed already.
    pub(super) fn index_stored(&mut self, i: u32) {
        let (values, ends, hasher) = (&self.values, &self.ends, &self.hasher);
        let value = value_at(values, ends, i);
        let hash = hasher.hash_one(value);
        if self
            .index
            .find(hash, |&j| values.holds(range_at(ends, j), value))
            .is_none()
        {
            self.index
                .insert_unique(hash, i, |&j| hasher.hash_one(value_at(values, ends, j)));
        }
    }
}

pub(super) fn value_at<'a, B: Buffer>(values: &'a B, ends: &[usize], i: u32) -> &'a B::Value {
    values.value(range_at(ends, i))
}

pub(super) fn range_at(ends: &[usize], i: u32) -> core::ops::Range<usize> {
    let i = i as usize;
    let start = if i == 0 { 0 } else { ends[i - 1] };
    start..ends[i]
}

/// Shapes, each stored once.
#[derive(Clone)]
pub(super) struct Shapes {
    pub(super) pool: Pool<Vec<u64>>,
    /// The dimensions of the shape being stored ([`Shapes::intern_iter`]).
    pub(super) scratch: Vec<u64>,
    /// The last shape stored or found.
    pub(super) last: u32,
    /// Shapes as a line writes them (`8,16`), each stored once, and the shape each one is
    /// ([`Shapes::intern_written`]): a shape read from a line is then found by its text,
    /// without reading its numbers.
    pub(super) written: Pool<String>,
    pub(super) shape_of_written: Vec<u32>,
    pub(super) last_written: u32,
}

impl Default for Shapes {
    fn default() -> Self {
        Shapes {
            pool: Pool::default(),
            scratch: Vec::new(),
            last: NONE,
            written: Pool::default(),
            shape_of_written: Vec::new(),
            last_written: NONE,
        }
    }
}

impl Shapes {
    /// Shape number `i`.
    pub(super) fn get(&self, i: u32) -> &[u64] {
        self.pool.get(i)
    }

    /// The number of the shape `dims`, storing it the first time.
    pub(super) fn intern(&mut self, dims: &[u64]) -> u32 {
        self.pool.intern(&mut self.last, dims)
    }

    /// [`Shapes::intern`] of dimensions that come one at a time.
    pub(super) fn intern_iter(&mut self, dims: impl IntoIterator<Item = u64>) -> u32 {
        let mut scratch = core::mem::take(&mut self.scratch);
        scratch.clear();
        scratch.extend(dims);
        let n = self.intern(&scratch);
        self.scratch = scratch;
        n
    }

    /// [`Shapes::intern`] of a shape as a line wrote it, `text` (between the brackets), whose
    /// numbers `dims` gives when it is new. The text must be canonical (digits without
    /// leading zeros, no spaces: the fast path's lists), so that two texts are the same shape
    /// exactly when they are the same text.
    pub(super) fn intern_written(
        &mut self,
        text: &str,
        dims: impl IntoIterator<Item = u64>,
    ) -> u32 {
        let t = self.written.intern(&mut self.last_written, text);
        match self.shape_of_written.get(t as usize) {
            Some(&n) => n,
            None => {
                let n = self.intern_iter(dims);
                self.shape_of_written.push(n);
                n
            }
        }
    }
}

/// The strings and shapes of one table, with what its columns last stored (compared before
/// anything is hashed: consecutive records mostly share a span, a device and a dtype).
///
/// Read as they are ([`Pools::strings`], [`Pools::shapes`]) and stored as they are
/// ([`Pools::push_string`], [`Pools::push_shape`]), the pools and a table's rows as stored
/// (`push_cells`) move a table without hashing its strings again.
#[derive(Clone)]
pub struct Pools {
    pub(super) strings: Strings,
    pub(super) shapes: Shapes,
    /// The last op name, device and dtype.
    pub(super) names: [u32; 3],
    pub(super) last_span: u32,
    /// One past the highest string number a row stored as cells refers to: a name numbered
    /// at or above it is that row's first use of the name, so it is indexed then.
    pub(super) referenced: u32,
}

/// Why a row or a pool value given by numbers was refused (`push_cells`, [`Pools::push_shape`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellError(pub(super) String);

impl core::fmt::Display for CellError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

pub(super) const OP_NAME: usize = 0;
pub(super) const DEVICE: usize = 1;
pub(super) const DTYPE: usize = 2;

impl Default for Pools {
    fn default() -> Self {
        Pools {
            strings: Strings::default(),
            shapes: Shapes::default(),
            names: [NONE; 3],
            last_span: NONE,
            referenced: 0,
        }
    }
}

impl Pools {
    pub(super) fn str(&self, i: u32) -> &str {
        self.strings.get(i)
    }

    pub(super) fn opt_str(&self, i: u32) -> Option<&str> {
        (i != NONE).then(|| self.strings.get(i))
    }

    /// An id, stored as it comes.
    pub(super) fn id(&mut self, s: &str) -> u32 {
        self.strings.push(s)
    }

    /// A span id, stored once for a run of records in that span.
    pub(super) fn span(&mut self, s: &str) -> u32 {
        let n = self.strings.push_unless_last(self.last_span, s);
        self.last_span = n;
        n
    }

    /// A name of column `column` (`OP_NAME`, `DEVICE`, `DTYPE`), stored once.
    pub(super) fn name(&mut self, column: usize, s: &str) -> u32 {
        self.strings.intern(&mut self.names[column], s)
    }

    /// The strings in order of their numbers.
    pub fn strings(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        (0..self.strings.ends.len() as u32).map(|i| self.strings.get(i))
    }

    /// The shapes in order of their numbers.
    pub fn shapes(&self) -> impl ExactSizeIterator<Item = &[u64]> + '_ {
        (0..self.shapes.pool.ends.len() as u32).map(|i| self.shapes.get(i))
    }

    /// Store `s` as the next string, as it is: nothing is hashed (a name is indexed by the
    /// first row stored as cells that names it).
    pub fn push_string(&mut self, s: &str) -> u32 {
        self.strings.push(s)
    }

    /// Store the strings of `block` as the next ones, as [`Pools::push_string`] would one by
    /// one: string `k` ends at `ends[k]` bytes into `block` and starts where string `k - 1`
    /// ends (at 0 for the first). The bytes are copied at once. Refused, leaving the pool as
    /// it was, where an end is before the one before it, past the block, or not on a
    /// character boundary.
    pub fn extend_strings(
        &mut self,
        block: &str,
        ends: impl ExactSizeIterator<Item = u32>,
    ) -> Result<(), CellError> {
        let pool = &mut self.strings;
        let (base, held) = (pool.values.len(), pool.ends.len());
        pool.ends.reserve(ends.len());
        let mut last = 0;
        for (k, end) in ends.enumerate() {
            let end = end as usize;
            let wrong = if end > block.len() {
                "past its block"
            } else if end < last {
                "before the string before it"
            } else if !block.is_char_boundary(end) {
                "inside a character"
            } else {
                ""
            };
            if !wrong.is_empty() {
                pool.ends.truncate(held);
                return Err(CellError(format!(
                    "string {k} of a block of {} bytes ends at byte {end}, {wrong}",
                    block.len()
                )));
            }
            pool.ends.push(base + end);
            last = end;
        }
        pool.values.push_str(&block[..last]);
        Ok(())
    }

    /// Store `dims` as the next shape (indexed, as every shape is), or an error if the pool
    /// holds it already (each shape is stored once).
    pub fn push_shape(&mut self, dims: &[u64]) -> Result<u32, CellError> {
        let next = self.shapes.pool.ends.len() as u32;
        let mut cache = NONE;
        let n = self.shapes.pool.intern(&mut cache, dims);
        if n != next {
            return Err(CellError(format!("shape {next} is shape {n} again")));
        }
        Ok(n)
    }

    /// Shape number `n`, checked to be in the pool.
    pub(super) fn check_shape(&self, n: u32) -> Result<(), CellError> {
        let held = self.shapes.pool.ends.len();
        if (n as usize) < held {
            Ok(())
        } else {
            Err(CellError(format!("shape {n} of a pool of {held}")))
        }
    }

    /// A row's string numbers, checked to be in the pool: `ids` (appended as they came) and
    /// `names` (interned). A name the row is the first to use is indexed, so that later rows
    /// pushed by value intern it.
    pub(super) fn refer(
        &mut self,
        ids: impl IntoIterator<Item = u32>,
        names: impl IntoIterator<Item = u32>,
    ) -> Result<(), CellError> {
        let held = self.strings.ends.len();
        let check = |n: u32| {
            if (n as usize) < held {
                Ok(n)
            } else {
                Err(CellError(format!("string {n} of a pool of {held}")))
            }
        };
        let mut end = self.referenced;
        for n in ids {
            end = end.max(check(n)? + 1);
        }
        for n in names {
            if check(n)? >= self.referenced {
                self.strings.index_stored(n);
            }
            end = end.max(n + 1);
        }
        self.referenced = end;
        Ok(())
    }
}
