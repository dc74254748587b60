//! The document's span id → index map.

use alloc::vec;
use alloc::vec::Vec;
use core::cell::Cell;
use core::hash::BuildHasher;

use foldhash::fast::{FixedState, RandomState};

use crate::format::records::Span;

/// A slot's tag when it holds no span.
const EMPTY: u8 = 0;

/// Span id → index into `spans`: an open-addressing table (linear probing) of indices only, 4
/// bytes a slot rather than a copy of the id beside it, whose lookups compare the id of the
/// span an index points at. Beside each slot, a byte of the id's hash (its top 7 bits, the
/// high bit set so it is never [`EMPTY`]) rules out nearly every other id without reading its
/// span. At most 3/4 of the slots are full.
///
/// Its whole state is two arrays and the hasher's seed ([`SpanIndexParts`]), so a document
/// decoded from another process (the viewer's worker) takes the index its sender built
/// rather than hashing every id again ([`SpanIndex::from_parts`]).
#[derive(Clone)]
pub(super) struct SpanIndex {
    seed: u64,
    hasher: FixedState,
    /// A tag per slot; a power of two of them, or none.
    tags: Vec<u8>,
    /// The span index per slot (meaningful where the tag is not [`EMPTY`]).
    slots: Vec<u32>,
    len: usize,
}

/// A [`SpanIndex`]'s state, to hand to another process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanIndexParts<'a> {
    /// The hasher's seed.
    pub seed: u64,
    /// A byte per slot: 0 for an empty slot, else the top 7 bits of the id's hash with the high
    /// bit set.
    pub tags: &'a [u8],
    /// The span index per slot (0 where empty).
    pub slots: &'a [u32],
}

impl Default for SpanIndex {
    fn default() -> Self {
        // A seed of its own per document, as a std `HashMap` has: ids chosen to collide in one
        // document collide in no other.
        Self::with_seed(RandomState::default().hash_one(0u64))
    }
}

impl core::fmt::Debug for SpanIndex {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SpanIndex")
            .field("len", &self.len)
            .field("slots", &self.slots.len())
            .finish()
    }
}

/// The tag of a hash.
fn tag(hash: u64) -> u8 {
    (hash >> 57) as u8 | 0x80
}

/// Slots for `n` entries at most 3/4 full (a power of two, at least 8; 0 for none).
fn slots_for(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        n.saturating_mul(4).div_ceil(3).max(8).next_power_of_two()
    }
}

impl SpanIndex {
    fn with_seed(seed: u64) -> Self {
        SpanIndex {
            seed,
            hasher: FixedState::with_seed(seed),
            tags: Vec::new(),
            slots: Vec::new(),
            len: 0,
        }
    }

    fn hash(&self, id: &str) -> u64 {
        self.hasher.hash_one(id)
    }

    /// The slot holding `id` (`Ok`), or the empty slot where it would go (`Err`). The table
    /// has slots, and an empty one.
    fn find(&self, spans: &[Span], id: &str, hash: u64) -> Result<usize, usize> {
        let mask = self.tags.len() - 1;
        let want = tag(hash);
        let mut at = hash as usize & mask;
        loop {
            match self.tags[at] {
                EMPTY => return Err(at),
                t if t == want
                    && spans
                        .get(self.slots[at] as usize)
                        .is_some_and(|s| s.id == id) =>
                {
                    return Ok(at)
                }
                _ => at = (at + 1) & mask,
            }
        }
    }

    /// The index of the span with this id in `spans` (the spans this index was built over).
    pub(super) fn get(&self, spans: &[Span], id: &str) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        self.find(spans, id, self.hash(id))
            .ok()
            .map(|at| self.slots[at])
    }

    /// Index `id` as span `index` (the next span of `spans`, or one of them), unless some
    /// span already has this id: then the index of that one.
    pub(super) fn insert_first(&mut self, spans: &[Span], id: &str, index: u32) -> Result<(), u32> {
        if self.len >= self.capacity() {
            self.rebuild(spans, slots_for(self.len + 1).max(self.tags.len() * 2));
        }
        let hash = self.hash(id);
        match self.find(spans, id, hash) {
            Ok(at) => Err(self.slots[at]),
            Err(at) => {
                self.tags[at] = tag(hash);
                self.slots[at] = index;
                self.len += 1;
                Ok(())
            }
        }
    }

    /// Room for `additional` more ids without growing.
    pub(super) fn reserve(&mut self, spans: &[Span], additional: usize) {
        let want = slots_for(self.len.saturating_add(additional));
        if want > self.tags.len() {
            self.rebuild(spans, want);
        }
    }

    /// The same entries in `n` slots.
    fn rebuild(&mut self, spans: &[Span], n: usize) {
        let old_tags = core::mem::replace(&mut self.tags, vec![EMPTY; n]);
        let old_slots = core::mem::replace(&mut self.slots, vec![0; n]);
        let mask = n - 1;
        for (t, i) in old_tags.into_iter().zip(old_slots) {
            if t == EMPTY {
                continue;
            }
            let Some(span) = spans.get(i as usize) else {
                continue;
            };
            let hash = self.hash(&span.id);
            let mut at = hash as usize & mask;
            while self.tags[at] != EMPTY {
                at = (at + 1) & mask;
            }
            self.tags[at] = tag(hash);
            self.slots[at] = i;
        }
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
        self.len
    }

    /// How many ids it holds before it grows.
    pub(super) fn capacity(&self) -> usize {
        self.tags.len() / 4 * 3
    }

    pub(super) fn parts(&self) -> SpanIndexParts<'_> {
        SpanIndexParts {
            seed: self.seed,
            tags: &self.tags,
            slots: &self.slots,
        }
    }

    /// The index `parts` describe, over `spans`, if it is one: as many tags as slots, a power
    /// of two of them (or none), at most 3/4 full, every full slot naming a span, and a sample
    /// of the spans (up to 64, spread over them) each found at itself or at an earlier span of
    /// the same id. `None` otherwise.
    pub(super) fn from_parts(spans: &[Span], parts: SpanIndexParts<'_>) -> Option<Self> {
        let n = parts.tags.len();
        if parts.slots.len() != n || (n != 0 && !n.is_power_of_two()) {
            return None;
        }
        let mut len = 0;
        for (&t, &i) in parts.tags.iter().zip(parts.slots) {
            if t != EMPTY {
                if t & 0x80 == 0 || i as usize >= spans.len() {
                    return None;
                }
                len += 1;
            }
        }
        let index = SpanIndex {
            tags: parts.tags.to_vec(),
            slots: parts.slots.to_vec(),
            len,
            ..Self::with_seed(parts.seed)
        };
        if len > index.capacity() || (spans.is_empty() != (len == 0)) {
            return None;
        }
        let sample = spans.len().min(64);
        for k in 0..sample {
            let i = k * spans.len() / sample;
            let found = index.get(spans, &spans[i].id)? as usize;
            if found > i {
                return None;
            }
        }
        Some(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::events::CompactString;
    use alloc::format;
    use alloc::string::String;

    fn span(id: &str) -> Span {
        Span {
            id: CompactString::new(id),
            parent_id: None,
            name: CompactString::new("s"),
            start_ns: 0,
            span_kind: crate::format::events::SpanKind::Function,
            measured: false,
            pass: None,
            module: None,
            duration_ns: None,
            line: 1,
            end_line: None,
        }
    }

    /// Index `ids` one by one as a reader does (the id inserted before its span is pushed).
    fn indexed(ids: &[String]) -> (Vec<Span>, SpanIndex) {
        let mut spans = Vec::new();
        let mut index = SpanIndex::default();
        for id in ids {
            if index.insert_first(&spans, id, spans.len() as u32).is_ok() {
                spans.push(span(id));
            }
        }
        (spans, index)
    }

    #[test]
    fn finds_every_id_and_keeps_the_first_of_a_duplicate() {
        let ids: Vec<String> = (0..5000).map(|i| format!("s{}", i % 3000)).collect();
        let (spans, index) = indexed(&ids);
        assert_eq!(spans.len(), 3000);
        assert_eq!(index.len(), 3000);
        for (i, s) in spans.iter().enumerate() {
            assert_eq!(index.get(&spans, &s.id), Some(i as u32));
        }
        assert_eq!(index.get(&spans, "s3000"), None);
        assert_eq!(index.get(&spans, ""), None);
        let mut index = index;
        assert_eq!(index.insert_first(&spans, "s17", 3000), Err(17));
        // Never more than 3/4 full.
        assert!(index.len() * 4 <= index.tags.len() * 3);
    }

    #[test]
    fn reserve_and_rebuild_keep_every_entry() {
        let ids: Vec<String> = (0..100).map(|i| format!("id-{i}")).collect();
        let (spans, mut index) = indexed(&ids);
        let before = index.tags.len();
        index.reserve(&spans, 10_000);
        assert!(index.tags.len() > before);
        assert!(index.capacity() >= 10_100);
        for (i, s) in spans.iter().enumerate() {
            assert_eq!(index.get(&spans, &s.id), Some(i as u32));
        }
        // An empty index finds nothing, and grows at its first insert.
        let mut empty = SpanIndex::default();
        assert_eq!(empty.get(&[], "a"), None);
        assert_eq!(empty.capacity(), 0);
        assert_eq!(empty.insert_first(&[], "a", 0), Ok(()));
        assert_eq!(empty.tags.len(), 8);
    }

    #[test]
    fn slots_for_leaves_a_quarter_empty() {
        // By hand: 6 ids fit 8 slots (6 ≤ 3/4 × 8); 7 need 16; 12 fit 16; 13 need 32.
        assert_eq!(slots_for(0), 0);
        assert_eq!(slots_for(1), 8);
        assert_eq!(slots_for(6), 8);
        assert_eq!(slots_for(7), 16);
        assert_eq!(slots_for(12), 16);
        assert_eq!(slots_for(13), 32);
    }

    #[test]
    fn an_index_crosses_as_its_parts() {
        let ids: Vec<String> = (0..2000)
            .map(|i| format!("b{}o{}", i / 40, i % 40))
            .collect();
        let (spans, index) = indexed(&ids);
        let parts = index.parts();
        let back = SpanIndex::from_parts(&spans, parts).unwrap();
        assert_eq!(back.len(), index.len());
        for (i, s) in spans.iter().enumerate() {
            assert_eq!(back.get(&spans, &s.id), Some(i as u32));
        }
        // No spans, no slots.
        let none = SpanIndex::default();
        assert!(SpanIndex::from_parts(&[], none.parts()).is_some());
    }

    #[test]
    fn parts_that_are_no_index_of_these_spans_are_refused() {
        let ids: Vec<String> = (0..500).map(|i| format!("x{i}")).collect();
        let (spans, index) = indexed(&ids);
        let p = index.parts();
        let refused = |tags: &[u8], slots: &[u32], seed: u64, spans: &[Span]| {
            SpanIndex::from_parts(spans, SpanIndexParts { seed, tags, slots }).is_none()
        };
        // Another seed: the ids are not where its hashes look.
        assert!(refused(p.tags, p.slots, p.seed ^ 1, &spans));
        // Lengths that differ, or are no power of two.
        assert!(refused(&p.tags[1..], p.slots, p.seed, &spans));
        assert!(refused(&p.tags[1..], &p.slots[1..], p.seed, &spans));
        // A slot naming no span.
        let mut slots = p.slots.to_vec();
        let full = p.tags.iter().position(|&t| t != EMPTY).unwrap();
        slots[full] = spans.len() as u32;
        assert!(refused(p.tags, &slots, p.seed, &spans));
        // A tag without its high bit.
        let mut tags = p.tags.to_vec();
        tags[full] = 0x7f;
        assert!(refused(&tags, p.slots, p.seed, &spans));
        // Every slot full: a lookup of a missing id would never end.
        let all = vec![0x80u8; p.tags.len()];
        let zeros = vec![0u32; p.tags.len()];
        assert!(refused(&all, &zeros, p.seed, &spans));
        // The right parts over other spans.
        let others: Vec<Span> = (0..500).map(|i| span(&format!("y{i}"))).collect();
        assert!(refused(p.tags, p.slots, p.seed, &others));
        // An index without entries over spans that have some.
        let none = SpanIndex::default();
        assert!(SpanIndex::from_parts(&spans, none.parts()).is_none());
    }
}
