//! The [`Sink`] trait every instrumentation point talks to, and [`VecSink`], an in-memory sink
//! for tests.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use candle_trace_schema::format::events::TraceEvent;

/// Where instrumentation sends events. Implemented by `Recorder`; tests may use `VecSink`.
pub trait Sink: Send + Sync {
    /// True only inside the captured step: callers skip all work when false (one atomic load).
    fn is_recording(&self) -> bool;
    /// Monotonic ns since the run started.
    fn now_ns(&self) -> u64;
    /// Id of the innermost open span on the calling thread, if any.
    fn current_span_id(&self) -> Option<String>;
    /// Device string from the meta (`cpu`, `cuda:0`).
    fn device(&self) -> &str;
    /// Record one event (never blocks, never panics; drops are counted).
    fn emit(&self, event: TraceEvent);
    /// Wait for the device before reading the clock around a timed op, when the sink times in
    /// `device_synchronized` mode (a recorder with a device sync hook); nothing by default.
    fn sync_for_timing(&self) {}
}

impl<S: Sink + ?Sized> Sink for Arc<S> {
    fn is_recording(&self) -> bool {
        (**self).is_recording()
    }
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
    fn current_span_id(&self) -> Option<String> {
        (**self).current_span_id()
    }
    fn device(&self) -> &str {
        (**self).device()
    }
    fn emit(&self, event: TraceEvent) {
        (**self).emit(event)
    }
    fn sync_for_timing(&self) {
        (**self).sync_for_timing()
    }
}

impl<S: Sink + ?Sized> Sink for &S {
    fn is_recording(&self) -> bool {
        (**self).is_recording()
    }
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
    fn current_span_id(&self) -> Option<String> {
        (**self).current_span_id()
    }
    fn device(&self) -> &str {
        (**self).device()
    }
    fn emit(&self, event: TraceEvent) {
        (**self).emit(event)
    }
    fn sync_for_timing(&self) {
        (**self).sync_for_timing()
    }
}

/// A [`Sink`] that keeps every event in memory and is always recording: for unit tests of
/// instrumentation code.
///
/// Its "current span" is one value shared by all threads, set with
/// [`VecSink::set_current_span`] (there are no span guards here).
///
/// ```
/// use candle_trace_capture::{Sink, VecSink};
/// use candle_trace_schema::format::events::{Edge, TraceEvent};
///
/// let sink = VecSink::new("cuda:0");
/// assert!(sink.is_recording());
/// sink.emit(TraceEvent::Edge(Edge { from_span: "a".into(), to_span: "b".into(), duration_ns: 3 }));
/// assert_eq!(sink.events().len(), 1);
/// assert_eq!(sink.device(), "cuda:0");
/// ```
#[derive(Debug)]
pub struct VecSink {
    device: String,
    start: Instant,
    current_span: Mutex<Option<String>>,
    events: Mutex<Vec<TraceEvent>>,
}

impl VecSink {
    /// An empty sink for `device`; its clock starts now.
    pub fn new(device: impl Into<String>) -> Self {
        VecSink {
            device: device.into(),
            start: Instant::now(),
            current_span: Mutex::new(None),
            events: Mutex::new(Vec::new()),
        }
    }

    /// Make `id` what [`Sink::current_span_id`] returns, on every thread.
    pub fn set_current_span(&self, id: Option<String>) {
        *lock(&self.current_span) = id;
    }

    /// A copy of the events emitted so far, in order.
    pub fn events(&self) -> Vec<TraceEvent> {
        lock(&self.events).clone()
    }

    /// The events emitted so far, leaving the sink empty.
    pub fn take(&self) -> Vec<TraceEvent> {
        std::mem::take(&mut *lock(&self.events))
    }
}

impl Default for VecSink {
    /// A sink for `cpu`.
    fn default() -> Self {
        VecSink::new("cpu")
    }
}

/// Lock ignoring poisoning: the data (a list of events) stays consistent after a panic
/// elsewhere, and a test sink must not turn one panic into many.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Sink for VecSink {
    fn is_recording(&self) -> bool {
        true
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn current_span_id(&self) -> Option<String> {
        lock(&self.current_span).clone()
    }

    fn device(&self) -> &str {
        &self.device
    }

    fn emit(&self, event: TraceEvent) {
        lock(&self.events).push(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_trace_schema::format::events::SpanEnd;

    #[test]
    fn vec_sink_keeps_events_and_the_current_span() {
        let sink = Arc::new(VecSink::default());
        let as_dyn: &dyn Sink = &sink;
        assert_eq!(as_dyn.device(), "cpu");
        assert_eq!(as_dyn.current_span_id(), None);
        sink.set_current_span(Some("s1".into()));
        assert_eq!(as_dyn.current_span_id().as_deref(), Some("s1"));
        let a = as_dyn.now_ns();
        assert!(as_dyn.now_ns() >= a);
        as_dyn.emit(TraceEvent::SpanEnd(SpanEnd {
            id: "s1".into(),
            duration_ns: 1,
        }));
        assert_eq!(sink.events().len(), 1);
        assert_eq!(sink.take().len(), 1);
        assert!(sink.events().is_empty());
    }
}
