//! Device synchronization: [`DeviceSync`] lets span guards wait for queued device work.
//!
//! Device backends queue work and return early, so a host clock read right after a CUDA or
//! Metal op measures the launch, not the work. A span that must measure the work calls
//! [`DeviceSync::synchronize`] at its edges (the trace's `timing_mode` is then
//! `device_synchronized`). Synchronizing never panics and never returns an error: a failed
//! synchronization is counted ([`sync_error_count`]) and the caller carries on, because the
//! training loop must not stop for its instrumentation.

use std::sync::atomic::{AtomicU64, Ordering};

/// Something that can wait until all queued work on a device has finished: a candle `Device`,
/// a CUDA stream or context (feature `cuda`), or any `Fn()` closure.
pub trait DeviceSync: Send + Sync {
    /// Block until the device is idle. Errors are ignored but counted ([`sync_error_count`]);
    /// never panics.
    fn synchronize(&self);
}

/// The host: nothing is ever queued, so synchronizing does nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoSync;

impl DeviceSync for NoSync {
    fn synchronize(&self) {}
}

impl<F: Fn() + Send + Sync> DeviceSync for F {
    fn synchronize(&self) {
        self()
    }
}

static SYNC_ERRORS: AtomicU64 = AtomicU64::new(0);

/// How many device synchronizations failed in this process so far.
pub fn sync_error_count() -> u64 {
    SYNC_ERRORS.load(Ordering::Relaxed)
}

/// Count one failed synchronization (for [`DeviceSync`] implementations).
pub fn note_sync_error() {
    SYNC_ERRORS.fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Failing;
    impl DeviceSync for Failing {
        fn synchronize(&self) {
            note_sync_error();
        }
    }

    #[test]
    fn failures_are_counted_not_raised() {
        let before = sync_error_count();
        NoSync.synchronize();
        Failing.synchronize();
        (|| note_sync_error()).synchronize();
        assert!(sync_error_count() >= before + 2);
    }
}
