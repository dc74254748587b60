//! Span names as numbers: the process's table of the [`Label`]s spans used (a `&'static str`
//! name and, for a layer named by its weights, the module it runs), so that a span's record in
//! the ring carries a 4-byte [`NameId`] instead of two string references (a span's two records
//! then fill one 64-byte cache line; see `record::Record`).
//!
//! One table ([`NameTable::shared`]) serves every recorder of the process, every recording
//! thread and every writer thread: labels are `&'static str`s, so their ids can outlive a
//! recorder, and a thread's [`NameCache`] (kept with its span stacks) stays valid when a new
//! recorder starts. A thread asks the table only the first time it sees a label; the cache
//! answers after that, without a lock; a writer thread copies the labels it does not know yet.
//! A label's id is handed out under the table's lock before the record that uses it is pushed,
//! and the ring's push/pop pair orders the two, so the writer always finds it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

/// The number of a label in a [`NameTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct NameId(u32);

/// What an id the table never handed out is written as (cannot happen: see the module docs).
pub(crate) const UNKNOWN_NAME: &str = "(unknown name)";

/// A span's name and the module it runs (`span_start.module`), when named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Label {
    pub(crate) name: &'static str,
    pub(crate) module: Option<&'static str>,
}

impl Label {
    /// A name without a module.
    pub(crate) const fn plain(name: &'static str) -> Self {
        Label { name, module: None }
    }
}

/// Every label spans used, in the order they were first seen.
#[derive(Debug, Default)]
pub(crate) struct NameTable {
    inner: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    labels: Vec<Label>,
    ids: HashMap<Label, NameId>,
    /// How many times a thread asked (the tests count a cache's misses).
    #[cfg(test)]
    asked: u64,
}

impl NameTable {
    /// The process's table, which every recorder uses (see the module docs).
    pub(crate) fn shared() -> Arc<NameTable> {
        static SHARED: OnceLock<Arc<NameTable>> = OnceLock::new();
        Arc::clone(SHARED.get_or_init(Arc::default))
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // The table stays consistent after a panic elsewhere (one push, one insert).
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The id of `name` (without a module), added when new.
    #[cfg(test)]
    pub(crate) fn id_of(&self, name: &'static str) -> Option<NameId> {
        self.label_id(Label::plain(name))
    }

    /// How many times a thread asked the table.
    #[cfg(test)]
    pub(crate) fn asked(&self) -> u64 {
        self.lock().asked
    }

    /// The id of `label`, added when new; `None` once `u32::MAX` labels are in the table.
    pub(crate) fn label_id(&self, label: Label) -> Option<NameId> {
        let mut table = self.lock();
        #[cfg(test)]
        {
            table.asked += 1;
        }
        if let Some(&id) = table.ids.get(&label) {
            return Some(id);
        }
        let id = NameId(
            u32::try_from(table.labels.len())
                .ok()
                .filter(|&n| n < u32::MAX)?,
        );
        table.labels.push(label);
        table.ids.insert(label, id);
        Some(id)
    }

    /// Append to `local` the labels it does not hold yet (the writer thread's copy).
    pub(crate) fn copy_new(&self, local: &mut Vec<Label>) {
        let table = self.lock();
        if let Some(new) = table.labels.get(local.len()..) {
            local.extend_from_slice(new);
        }
    }
}

/// The writer thread's copy of a table: looks an id up, copying new labels when it meets one.
#[derive(Debug, Default)]
pub(crate) struct Names {
    local: Vec<Label>,
}

impl Names {
    /// The label of `id`.
    pub(crate) fn label(&mut self, id: NameId, table: &NameTable) -> Label {
        let i = id.0 as usize;
        if i >= self.local.len() {
            table.copy_new(&mut self.local);
        }
        self.local
            .get(i)
            .copied()
            .unwrap_or(Label::plain(UNKNOWN_NAME))
    }

    /// The name of `id`.
    pub(crate) fn get(&mut self, id: NameId, table: &NameTable) -> &'static str {
        self.label(id, table).name
    }
}

/// Slots of a thread's cache: labels used inside one step are few (a model's layers).
/// A power of two (see [`NameCache::slot`]).
const CACHE_SLOTS: usize = 64;
const _: () = assert!(CACHE_SLOTS.is_power_of_two());

/// One thread's answers from one table: name address and length and module address → id,
/// direct-mapped by address. Two labels that share a slot just ask the table again when they
/// alternate. Asked about another table than the one it holds answers from, it forgets them.
pub(crate) struct NameCache {
    /// The address of the table the answers are from (0: none yet).
    table: usize,
    slots: [(usize, usize, usize, NameId); CACHE_SLOTS],
}

impl NameCache {
    pub(crate) fn new() -> Self {
        // Address 0 is no name's: an empty slot never matches.
        NameCache {
            table: 0,
            slots: [(0, 0, 0, NameId(0)); CACHE_SLOTS],
        }
    }

    /// The slot of the name at `ptr` of `len` bytes. String literals are packed next to each
    /// other, byte-aligned: the address's low bits tell them apart, so every bit of it is mixed
    /// in (Fibonacci hashing: the top bits of the product by 2^64/φ). Dropping the low three
    /// bits, as this once did, put the spans bench's names "a", "b" and "c" in one slot, and
    /// every span then went to the table's lock. A module's address (interned, one per
    /// distinct module) is mixed in too: the layers of one type differ only by it.
    #[inline]
    fn slot(ptr: usize, len: usize) -> usize {
        const PHI: u64 = 0x9e37_79b9_7f4a_7c15;
        let key = (ptr as u64) ^ (len as u64).rotate_left(40);
        (key.wrapping_mul(PHI) >> (64 - CACHE_SLOTS.trailing_zeros())) as usize
    }

    /// The id of `name` (without a module), from the cache or else the table.
    #[cfg(test)]
    pub(crate) fn id_of(&mut self, name: &'static str, table: &NameTable) -> Option<NameId> {
        self.label_id(Label::plain(name), table)
    }

    /// The id of `label`, from the cache or else the table.
    #[inline]
    pub(crate) fn label_id(&mut self, label: Label, table: &NameTable) -> Option<NameId> {
        let at = std::ptr::from_ref(table) as usize;
        if self.table != at {
            *self = NameCache::new();
            self.table = at;
        }
        let (ptr, len) = (label.name.as_ptr() as usize, label.name.len());
        let module = label.module.map_or(0, |m| m.as_ptr() as usize);
        let slot = &mut self.slots[Self::slot(ptr ^ module.rotate_left(17), len)];
        if slot.0 == ptr && slot.1 == len && slot.2 == module && ptr != 0 {
            return Some(slot.3);
        }
        let id = table.label_id(label)?;
        *slot = (ptr, len, module, id);
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_forgets_the_answers_of_another_table() {
        let (a, b) = (NameTable::default(), NameTable::default());
        let mut cache = NameCache::new();
        assert_eq!(cache.id_of("x", &a), Some(NameId(0)));
        // In `b`, "x" is the second label: the cache must not answer with `a`'s id.
        assert_eq!(b.id_of("y"), Some(NameId(0)));
        assert_eq!(cache.id_of("x", &b), Some(NameId(1)));
        assert_eq!(cache.id_of("x", &b), Some(NameId(1)));
        assert_eq!(b.asked(), 2);
    }

    #[test]
    fn ids_are_per_content_and_the_writer_copy_follows() {
        let table = NameTable::default();
        let mut cache = NameCache::new();
        let a = cache.id_of("attn", &table).unwrap();
        let b = cache.id_of("mlp", &table).unwrap();
        assert_ne!(a, b);
        // The same text at another address is the same name.
        let owned: &'static str = Box::leak(String::from("attn").into_boxed_str());
        assert_eq!(cache.id_of(owned, &table), Some(a));
        assert_eq!(cache.id_of("attn", &table), Some(a));
        let mut names = Names::default();
        assert_eq!(names.get(b, &table), "mlp");
        assert_eq!(names.get(a, &table), "attn");
        // Added after the writer's copy was made: copied when first met.
        let c = table.id_of("norm").unwrap();
        assert_eq!(names.get(c, &table), "norm");
        assert_eq!(names.get(NameId(99), &table), UNKNOWN_NAME);
    }

    #[test]
    fn neighbouring_names_get_their_own_slots() {
        // Short string literals lie one byte apart: four such names, of any length and at any
        // address (every base in a wide range, a pure function of the numbers), keep four
        // slots, so alternating between them never goes back to the table. (Consecutive keys
        // under Fibonacci hashing are at least 1/7 of the range apart for four of them.)
        for base in (0x5555_0000_0000usize..).step_by(997).take(20_000) {
            for len in 1..=8 {
                let mut slots: Vec<usize> =
                    (0..4).map(|i| NameCache::slot(base + i, len)).collect();
                slots.sort_unstable();
                slots.dedup();
                assert_eq!(
                    slots.len(),
                    4,
                    "names of {len} bytes at {base:#x}.. share a slot"
                );
                assert!(slots.iter().all(|&s| s < CACHE_SLOTS));
            }
        }
    }

    #[test]
    fn colliding_names_stay_right() {
        let table = NameTable::default();
        let mut cache = NameCache::new();
        let words: Vec<&'static str> = (0..500)
            .map(|i| &*Box::leak(format!("layer.{i}").into_boxed_str()))
            .collect();
        let first: Vec<NameId> = words
            .iter()
            .map(|w| cache.id_of(w, &table).unwrap())
            .collect();
        let again: Vec<NameId> = words
            .iter()
            .rev()
            .map(|w| cache.id_of(w, &table).unwrap())
            .collect();
        assert!(first.iter().eq(again.iter().rev()));
        let mut names = Names::default();
        for (w, id) in words.iter().zip(&first) {
            assert_eq!(names.get(*id, &table), *w);
        }
    }
}
