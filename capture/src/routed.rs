//! [`Routed`]: the one value that events of every thread go to (the recorder host blocks go
//! to, the recorder `tracing` spans go to), read by each thread through a cache of its own.
//!
//! Reading an `RwLock` for every event took and released it: two locked instructions, as
//! costly as the rest of a host block's event or a quarter of a span's. A thread's cache is
//! good while the generation it was read at is the current one, so an event costs one plain
//! load of the generation. A cache keeps a replaced value alive until its thread's next event
//! (or its end), which only delays freeing it: a finished recorder discards what it is sent.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::thread::LocalKey;

/// A thread's copy of a [`Routed`] value: the generation it was read at, and the value then.
pub(crate) type Cache<T> = RefCell<Option<(u64, Option<Arc<T>>)>>;

/// A value shared by every thread, changed rarely, read on every event.
pub(crate) struct Routed<T: ?Sized> {
    slot: RwLock<Option<Arc<T>>>,
    /// Changes whenever `slot` does.
    generation: AtomicU64,
}

impl<T: ?Sized> Routed<T> {
    /// No value.
    pub(crate) const fn new() -> Self {
        Routed {
            slot: RwLock::new(None),
            generation: AtomicU64::new(0),
        }
    }

    /// Change the value under the write lock (`f` may read it, replace it, take it); every
    /// thread's cache reads it again. Returns what `f` returns.
    pub(crate) fn update<R>(&self, f: impl FnOnce(&mut Option<Arc<T>>) -> R) -> R {
        let mut slot = self.slot.write().unwrap_or_else(PoisonError::into_inner);
        self.generation.fetch_add(1, Ordering::AcqRel);
        f(&mut slot)
    }

    /// The value now, from the lock. With `wait` false the lock is only tried (inside the
    /// allocator nothing may block): a value being changed then reads as none.
    fn read(&self, wait: bool) -> Option<Arc<T>> {
        if wait {
            self.slot
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        } else {
            self.slot.try_read().ok().and_then(|slot| slot.clone())
        }
    }

    /// `f` with the value, through this thread's `cache` (read again from the lock when the
    /// value changed; `wait` as in [`Routed::read`]). While the thread is torn down, or its
    /// cache is in use further up the stack, straight from the lock.
    pub(crate) fn with<R: Default>(
        &self,
        cache: &'static LocalKey<Cache<T>>,
        wait: bool,
        f: impl FnOnce(Option<&T>) -> R,
    ) -> R {
        let generation = self.generation.load(Ordering::Acquire);
        let mut f = Some(f);
        let ran = cache
            .try_with(|cached| {
                let mut cached = cached.try_borrow_mut().ok()?;
                if cached.as_ref().map(|(g, _)| *g) != Some(generation) {
                    // Read after the generation: a change in between leaves the newer value
                    // under the older generation, read again next time. A lock only tried and
                    // busy leaves nothing cached.
                    *cached = if wait {
                        Some((generation, self.read(true)))
                    } else {
                        self.slot
                            .try_read()
                            .ok()
                            .map(|slot| (generation, slot.clone()))
                    };
                }
                let value = cached.as_ref().and_then(|(_, value)| value.as_deref());
                f.take().map(|f| f(value))
            })
            .ok()
            .flatten();
        match (ran, f) {
            (Some(r), _) => r,
            (None, Some(f)) => f(self.read(wait).as_deref()),
            // `f` ran only where the result came back.
            (None, None) => R::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static VALUE: Routed<u32> = Routed::new();
    thread_local! {
        static CACHE: Cache<u32> = const { RefCell::new(None) };
    }

    #[test]
    fn every_thread_sees_each_new_value() {
        let seen = || VALUE.with(&CACHE, true, |v| v.copied());
        assert_eq!(seen(), None);
        VALUE.update(|slot| *slot = Some(Arc::new(1)));
        assert_eq!(seen(), Some(1));
        // Another thread, with a cache of its own.
        assert_eq!(std::thread::spawn(seen).join().unwrap(), Some(1));
        let old = VALUE.update(|slot| slot.replace(Arc::new(2)));
        assert_eq!((old.as_deref(), seen()), (Some(&1), Some(2)));
        VALUE.update(|slot| slot.take());
        assert_eq!(seen(), None);
        assert_eq!(VALUE.with(&CACHE, false, |v| v.copied()), None);
    }
}
