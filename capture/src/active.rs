//! How many consumers record `tracing` spans right now: the installed recorder during its
//! captured step, plus one per inference forward call in progress. Zero outside them, so the
//! subscriber's `enter` returns after one load. Its own module, below both the recorder state
//! that starts and ends a captured step and the subscriber that reads the count.

use std::sync::atomic::{AtomicUsize, Ordering};

static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// Whether anything records spans now (one relaxed load).
#[inline]
pub(crate) fn any() -> bool {
    ACTIVE.load(Ordering::Relaxed) != 0
}

/// Something started recording spans (a captured step began, a forward call started).
pub(crate) fn activate() {
    ACTIVE.fetch_add(1, Ordering::AcqRel);
}

/// What [`activate`] started has ended.
pub(crate) fn deactivate() {
    let _ = ACTIVE.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| n.checked_sub(1));
}
