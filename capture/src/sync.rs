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

/// Times spans on the device instead of the host clock: a device event at a span's open and
/// another at its close, the duration measured by the device between them (CUDA events with
/// feature `cuda`: `cuda::CudaEventTimer`). Given to
/// [`RecorderBuilder::span_timer`](crate::RecorderBuilder::span_timer).
pub trait SpanTimer: Send + Sync {
    /// Mark a span's start on the device; `None` when the device cannot (the span then keeps
    /// its host duration).
    fn start(&self) -> Option<TimerMark>;
    /// Mark the end of the span started at `mark` and return the device time between the two
    /// marks, ns (waits for the device to reach the end mark); `None` when it cannot.
    fn elapsed_ns(&self, mark: TimerMark) -> Option<u64>;
}

/// A start mark of a [`SpanTimer`] (whatever the timer keeps: a recorded CUDA event ...).
pub struct TimerMark(Box<dyn std::any::Any + Send + Sync>);

impl std::fmt::Debug for TimerMark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TimerMark")
    }
}

impl TimerMark {
    /// Wrap what the timer needs to finish the measurement.
    pub fn new<T: std::any::Any + Send + Sync>(start: T) -> Self {
        TimerMark(Box::new(start))
    }

    /// Take back what [`new`](TimerMark::new) wrapped, if it is a `T`.
    pub fn into_inner<T: std::any::Any + Send + Sync>(self) -> Option<T> {
        self.0.downcast::<T>().ok().map(|b| *b)
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
    fn marks_give_back_what_they_hold() {
        assert_eq!(TimerMark::new(7u64).into_inner::<u64>(), Some(7));
        assert_eq!(TimerMark::new(7u64).into_inner::<u32>(), None);
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
