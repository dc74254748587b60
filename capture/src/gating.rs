//! Step gating: only the configured capture step records.
//!
//! The caller marks each optimizer update or inference invocation with
//! [`Recorder::begin_step`](crate::Recorder::begin_step). The recorder counts them; when the
//! count reaches the capture step it sets one `AtomicBool`, and clears it when that step's
//! [`StepToken`] is dropped. Every instrumentation call first loads that flag and returns at
//! once when it is clear, so the steps before and after cost one atomic load per call.

use crate::state::Inner;

/// One step of the run, from [`Recorder::begin_step`](crate::Recorder::begin_step) until it is
/// dropped (or [`end`](StepToken::end)ed). Dropping the captured step's token turns recording
/// off, also while unwinding from a panic.
#[must_use = "the step ends when the token is dropped; bind it with `let _step = ...`"]
#[derive(Debug)]
pub struct StepToken<'r> {
    inner: &'r Inner,
    step: u64,
    captured: bool,
}

impl<'r> StepToken<'r> {
    pub(crate) fn new(inner: &'r Inner, step: u64, captured: bool) -> Self {
        StepToken {
            inner,
            step,
            captured,
        }
    }

    /// The one-based number of this step.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// True when this is the captured step (recording is on while it lasts).
    pub fn is_captured(&self) -> bool {
        self.captured
    }

    /// End the step now (the same as dropping the token).
    pub fn end(self) {}
}

impl Drop for StepToken<'_> {
    fn drop(&mut self) {
        if self.captured {
            self.inner.end_captured_step();
        }
    }
}
