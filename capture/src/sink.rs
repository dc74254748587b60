//! The `Sink` trait: where instrumentation sends events.

use candle_trace_schema::events::TraceEvent;

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
}

/// A sink that keeps every event in memory and always records (for tests).
#[derive(Debug, Default)]
pub struct VecSink {
    events: std::sync::Mutex<Vec<TraceEvent>>,
    device: String,
    span: std::sync::Mutex<Option<String>>,
    start: StartInstant,
}

/// The creation instant of a [`VecSink`]; a newtype so that `VecSink` can derive `Default`.
#[derive(Debug, Clone, Copy)]
struct StartInstant(std::time::Instant);

impl Default for StartInstant {
    fn default() -> Self {
        StartInstant(std::time::Instant::now())
    }
}

/// Lock a mutex, recovering the data when another thread panicked while holding it.
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl VecSink {
    /// An empty sink whose events carry `device` (`cpu`, `cuda:0` ...); its clock starts now.
    pub fn new(device: impl Into<String>) -> Self {
        VecSink {
            device: device.into(),
            ..VecSink::default()
        }
    }

    /// Set (or clear) the span id that [`Sink::current_span_id`] reports.
    pub fn set_current_span(&self, span_id: Option<String>) {
        *lock(&self.span) = span_id;
    }

    /// A copy of every event emitted so far, in emission order.
    pub fn events(&self) -> Vec<TraceEvent> {
        lock(&self.events).clone()
    }
}

impl Sink for VecSink {
    fn is_recording(&self) -> bool {
        true
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.start.0.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn current_span_id(&self) -> Option<String> {
        lock(&self.span).clone()
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
    use candle_trace_schema::events::{Edge, TraceEvent};

    #[test]
    fn vec_sink_keeps_events_span_and_device() {
        let sink = VecSink::new("cuda:0");
        assert!(sink.is_recording());
        assert_eq!(sink.device(), "cuda:0");
        assert_eq!(sink.current_span_id(), None);
        sink.set_current_span(Some("s1".into()));
        assert_eq!(sink.current_span_id().as_deref(), Some("s1"));
        let a = sink.now_ns();
        let b = sink.now_ns();
        assert!(b >= a);
        let edge = TraceEvent::Edge(Edge {
            from_span: "a".into(),
            to_span: "b".into(),
            duration_ns: 3,
        });
        sink.emit(edge.clone());
        assert_eq!(sink.events(), vec![edge]);
    }
}
