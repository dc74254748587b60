//! The producers' rings: one single-producer ring per recording thread and writer, what the
//! producers and the writer thread share, and the writer thread's view of every ring (drain,
//! hold, sample).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use rtrb::{Consumer, Producer, PushError};

use super::output::State;
use super::{Counters, Encode, HOLD_FRACTION, HOLD_LIMIT};

/// A ring a thread made: its consumer half, and the producer half of the ring that hands
/// written items back.
pub(super) type NewRing<T> = (Consumer<T>, Option<Producer<T>>);

/// What the producers and the writer thread share. Producers read the first cache line on
/// every push; the writer thread writes `counters` on every line, so they live apart (sharing
/// one line made `closed`'s load cost more than the rest of a span).
#[repr(C)]
pub(super) struct Shared<T> {
    /// Distinguishes this writer's ring in a thread's [`LocalRings`].
    pub(super) id: u64,
    /// Most items one thread's ring holds before new ones are dropped.
    pub(super) capacity: usize,
    /// The writer thread is (about to be) blocked on the control channel: the next push must
    /// wake it.
    pub(super) sleeping: AtomicBool,
    /// `finish()` or drop has begun: pushes are discarded.
    pub(super) closed: AtomicBool,
    /// The owner is in a region it measures: the writer thread leaves items in the rings (see
    /// [`Writer::hold`]).
    pub(super) held: AtomicBool,
    /// The writer thread waits the longer poll interval (it has not been held lately): a hold
    /// must wake it.
    pub(super) polling_slowly: AtomicBool,
    /// Rings that threads made since the writer thread last looked: the consumer half of
    /// each, and the producer half of the ring that hands written items back (see
    /// [`ThreadRing::written`](super::ThreadRing)).
    pub(super) new_rings: Mutex<Vec<NewRing<T>>>,
    pub(super) counters: Padded<Counters>,
}

impl<T> Shared<T> {
    /// Writer `id`'s, rings of `capacity` items, nothing held, closed or asleep.
    pub(super) fn new(id: u64, capacity: usize) -> Self {
        Shared {
            id,
            capacity,
            sleeping: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            held: AtomicBool::new(false),
            polling_slowly: AtomicBool::new(false),
            new_rings: Mutex::new(Vec::new()),
            counters: Padded::default(),
        }
    }
}

/// Starts on a cache-line pair of its own.
#[repr(align(128))]
#[derive(Debug, Default)]
pub(super) struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// The writer thread's side: every thread's ring, drained in turn.
pub(super) struct Rings<T> {
    pub(super) consumers: Vec<HeldRing<T>>,
    /// When the writer first left items in a ring because the writer is held (see
    /// [`Writer::hold`]); `None` when it holds none.
    pub(super) holding_since: Option<Instant>,
}

/// One thread's ring on the writer thread's side.
pub(super) struct HeldRing<T> {
    pub(super) ring: Consumer<T>,
    /// Items at the front of the ring already passed to [`Encode::sample`] and left there.
    pub(super) sampled: usize,
    /// Where written items go back to their thread, to be dropped there.
    pub(super) back: Option<Producer<T>>,
}

impl<T> HeldRing<T> {
    /// Hand a written item back to its thread; dropped here when the ring back is full or
    /// the thread has ended.
    fn give_back(back: &mut Option<Producer<T>>, item: T) {
        match back {
            Some(back) if !back.is_abandoned() => {
                if let Err(PushError::Full(item)) = back.push(item) {
                    drop(item);
                }
            }
            _ => drop(item),
        }
    }
}

impl<T: Encode> Rings<T> {
    pub(super) fn new() -> Self {
        Rings {
            consumers: Vec::new(),
            holding_since: None,
        }
    }

    /// Take the consumer halves of rings that threads made since the last look.
    ///
    /// The list is taken out and the lock let go before anything allocates: growing
    /// `consumers` frees its old block, a free the allocator may hand to the recorder from
    /// this thread, whose first event makes a ring, which takes this lock. Held across the
    /// growth, the lock deadlocked the writer, and then every thread freeing a host block.
    pub(super) fn adopt(&mut self, shared: &Shared<T>) {
        let new = std::mem::take(
            &mut *shared
                .new_rings
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        self.consumers
            .extend(new.into_iter().map(|(ring, back)| HeldRing {
                ring,
                sampled: 0,
                back,
            }));
    }

    /// Pass every item waiting in any ring to `each`, oldest first within each ring; forget
    /// the rings of threads that have ended once they are empty. Returns how many there were.
    pub(super) fn drain(
        &mut self,
        shared: &Shared<T>,
        s: &mut State<'_>,
        encoder: &mut T::State,
    ) -> usize {
        self.adopt(shared);
        self.holding_since = None;
        let mut n = 0;
        self.consumers.retain_mut(|held| {
            let HeldRing {
                ring,
                sampled,
                back,
            } = held;
            *sampled = 0;
            let slots = ring.slots();
            if slots > 0 {
                if let Ok(chunk) = ring.read_chunk(slots) {
                    n += slots;
                    chunk.into_iter().for_each(|item| {
                        s.write_item(&item, encoder);
                        HeldRing::give_back(back, item);
                    });
                }
            }
            // The producer is dropped with its thread; what it pushed before is taken above.
            !(ring.is_abandoned() && ring.is_empty())
        });
        T::pass_done(encoder);
        n
    }

    /// One look at the rings while events flow: drain them (as [`drain`](Rings::drain)) unless
    /// the writer is held, a ring is not yet [`HOLD_FRACTION`] full and the oldest item left
    /// has waited less than [`HOLD_LIMIT`]. Items left in the rings are
    /// [sampled](Encode::sample) once, when first seen; items drained because they had waited
    /// [`HOLD_LIMIT`] are flushed at once. Returns how many items there were.
    pub(super) fn poll(
        &mut self,
        shared: &Shared<T>,
        s: &mut State<'_>,
        encoder: &mut T::State,
    ) -> usize {
        self.adopt(shared);
        let limit = (shared.capacity / HOLD_FRACTION).max(1);
        let held = shared.held.load(Ordering::Acquire);
        let too_full = self.consumers.iter().any(|h| h.ring.slots() >= limit);
        let waited = self
            .holding_since
            .is_some_and(|since| since.elapsed() >= HOLD_LIMIT);
        if !held || too_full || waited {
            let n = self.drain(shared, s, encoder);
            if held && waited {
                s.flush();
            }
            return n;
        }
        let mut n = 0;
        for held in &mut self.consumers {
            let slots = held.ring.slots();
            n += slots;
            if slots <= held.sampled {
                continue;
            }
            if let Ok(mut chunk) = held.ring.read_chunk(slots) {
                // Not committed: the items stay in the ring for the drain.
                let (first, second) = chunk.as_mut_slices();
                first
                    .iter_mut()
                    .chain(second.iter_mut())
                    .skip(held.sampled)
                    .for_each(|item| item.sample(encoder));
                held.sampled = slots;
            }
        }
        if n > 0 && self.holding_since.is_none() {
            self.holding_since = Some(Instant::now());
        }
        n
    }
}
