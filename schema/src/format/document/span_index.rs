//! The document's span id → index map.

use core::cell::Cell;
use core::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

use crate::format::records::Span;

/// Span id → index into `spans`: a hash table of indices only (4 bytes a span rather than a
/// copy of the id beside it), whose lookups compare the id of the span an index points at.
#[derive(Clone, Default)]
pub(super) struct SpanIndex {
    table: HashTable<u32>,
    hasher: DefaultHashBuilder,
}

impl core::fmt::Debug for SpanIndex {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SpanIndex")
            .field("len", &self.table.len())
            .finish()
    }
}

impl SpanIndex {
    pub(super) fn hash(&self, id: &str) -> u64 {
        self.hasher.hash_one(id)
    }

    /// The index of the span with this id in `spans` (the spans this index was built over).
    pub(super) fn get(&self, spans: &[Span], id: &str) -> Option<u32> {
        self.table
            .find(self.hash(id), |&i| spans[i as usize].id == id)
            .copied()
    }

    /// Index `id` as span `index` (the next span of `spans`, or one of them), unless some
    /// span already has this id: then the index of that one.
    pub(super) fn insert_first(&mut self, spans: &[Span], id: &str, index: u32) -> Result<(), u32> {
        let hash = self.hash(id);
        let hasher = &self.hasher;
        match self.table.entry(
            hash,
            |&i| spans[i as usize].id == id,
            |&i| hasher.hash_one(spans[i as usize].id.as_str()),
        ) {
            hashbrown::hash_table::Entry::Occupied(first) => Err(*first.get()),
            hashbrown::hash_table::Entry::Vacant(slot) => {
                slot.insert(index);
                Ok(())
            }
        }
    }

    pub(super) fn reserve(&mut self, spans: &[Span], additional: usize) {
        let hasher = &self.hasher;
        self.table.reserve(additional, |&i| {
            hasher.hash_one(spans[i as usize].id.as_str())
        });
    }

    /// [`SpanIndex::get`] for a run of lookups that often repeat an id (consecutive spans
    /// usually share a parent): the last span found is compared before the id is hashed.
    pub(super) fn resolver<'s>(&'s self, spans: &'s [Span]) -> impl Fn(&str) -> Option<usize> + 's {
        let last = Cell::new(usize::MAX);
        move |id| {
            let hit = last.get();
            if spans.get(hit).is_some_and(|s| s.id == id) {
                return Some(hit);
            }
            let i = self.get(spans, id)? as usize;
            last.set(i);
            Some(i)
        }
    }

    pub(super) fn len(&self) -> usize {
        self.table.len()
    }

    pub(super) fn capacity(&self) -> usize {
        self.table.capacity()
    }
}
