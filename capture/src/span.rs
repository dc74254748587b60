//! Span guards and the device synchronization hook.
//!
//! A guard's parent is the top of the calling thread's span stack; ids come from
//! one counter per recorder, taken by each thread in blocks, so they are unique across threads.

use std::borrow::Cow;
use std::marker::PhantomData;

use candle_trace_schema::format::events::Pass;

use crate::stack::span_id;
use crate::state::Inner;
use crate::sync::TimerMark;

/// An open span: writes `span_start` when created and `span_end` with `duration_ns` when
/// dropped, also while unwinding from a panic.
///
/// Returned by [`Recorder::span`] and its siblings. Outside the captured step it is inert: it
/// was created with one atomic load and dropping it does nothing. It is not `Send`: a span ends
/// on the thread that opened it, which keeps the per-thread parent stacks exact.
///
/// [`Recorder::span`]: crate::Recorder::span
#[must_use = "the span ends when the guard is dropped; bind it with `let _span = ...`"]
pub struct SpanGuard<'r> {
    open: Option<OpenSpan<'r>>,
    _not_send: PhantomData<*const ()>,
}

struct OpenSpan<'r> {
    inner: &'r Inner,
    id: u64,
    start_ns: u64,
    sync: bool,
    /// Write a `device_memory` checkpoint after closing (training-step spans).
    checkpoint: bool,
    /// The device mark of a span timer, when the recorder has one.
    mark: Option<TimerMark>,
}

impl<'r> SpanGuard<'r> {
    /// Write a `device_memory` checkpoint when the span closes.
    pub(crate) fn with_checkpoint(mut self) -> Self {
        if let Some(o) = &mut self.open {
            o.checkpoint = true;
        }
        self
    }

    /// A guard that records nothing.
    #[inline]
    pub(crate) fn inert() -> Self {
        SpanGuard {
            open: None,
            _not_send: PhantomData,
        }
    }

    /// Open a span: push it on this thread's stack, synchronize when asked, write `span_start`.
    pub(crate) fn open(
        inner: &'r Inner,
        name: Cow<'static, str>,
        kind: candle_trace_schema::format::events::SpanKind,
        measured: bool,
        pass: Option<Pass>,
        sync: bool,
    ) -> Self {
        let (id, start_ns) = inner.open_span(name, None, kind, measured, pass, None, sync);
        // The measured region keeps the host clock between synchronizations.
        let mark = if measured { None } else { inner.timer_start() };
        SpanGuard {
            open: Some(OpenSpan {
                inner,
                id,
                start_ns,
                sync,
                checkpoint: false,
                mark,
            }),
            _not_send: PhantomData,
        }
    }

    /// True when this guard is recording a span.
    pub fn is_recording(&self) -> bool {
        self.open.is_some()
    }

    /// The span's trace/6 id, for events that name it (`op.span_id` ...); `None` when inert.
    pub fn id(&self) -> Option<String> {
        self.open.as_ref().map(|o| span_id(o.id))
    }

    /// The span's number (`sN` in the file); `None` when inert.
    #[cfg_attr(not(feature = "candle"), allow(dead_code))] // used by the candle helpers
    pub(crate) fn number(&self) -> Option<u64> {
        self.open.as_ref().map(|o| o.id)
    }

    /// End the span now (the same as dropping the guard).
    pub fn end(self) {}
}

impl Drop for SpanGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(o) = self.open.take() {
            o.inner.close_span_timed(o.id, o.start_ns, o.sync, o.mark);
            if o.checkpoint {
                o.inner.checkpoint();
            }
        }
    }
}

impl std::fmt::Debug for SpanGuard<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpanGuard").field("id", &self.id()).finish()
    }
}
