//! How many recorders record the `tracing` spans of every thread right now: the installed
//! recorder during its captured step. Zero outside it, so the subscriber's `enter` returns
//! after this load and one of the thread's own count of inference forward calls (which record
//! only that thread's spans). Its own module, below both the recorder state that starts and
//! ends a captured step and the subscriber that reads the count.

use std::sync::atomic::{AtomicUsize, Ordering};

static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// Whether anything records spans now (one relaxed load).
#[inline]
pub(crate) fn any() -> bool {
    ACTIVE.load(Ordering::Relaxed) != 0
}

/// A recorder started recording spans (its captured step began).
pub(crate) fn activate() {
    ACTIVE.fetch_add(1, Ordering::AcqRel);
}

/// What [`activate`] started has ended.
pub(crate) fn deactivate() {
    let _ = ACTIVE.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| n.checked_sub(1));
}
