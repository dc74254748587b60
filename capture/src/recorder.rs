//! [`Recorder`]: the handle a training or inference binary holds while it runs.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use candle_trace_schema::events::{SpanKind, Step, TimingMode, TraceEvent};

use crate::error::CaptureError;
use crate::gating::StepToken;
use crate::meta::RecorderBuilder;
use crate::sink::Sink;
use crate::span::{self, SpanGuard};
use crate::sync::DeviceSync;
use crate::writer::{CaptureReport, Encode, Writer};

/// Records one step of a run into a trace/6 file.
///
/// Built with [`Recorder::builder`]. Cheap to clone (an `Arc`); every clone records into the
/// same file. Call [`begin_step`](Recorder::begin_step) once per optimizer update or inference
/// invocation: only the configured capture step turns recording on, and outside it every
/// instrumentation call costs one atomic load. Open spans with the guard-returning methods
/// ([`span`](Recorder::span), [`module`](Recorder::module), [`op_span`](Recorder::op_span),
/// [`step`](Recorder::step), [`measured`](Recorder::measured)); other events go through
/// [`Sink::emit`]. End with [`finish`](Recorder::finish).
#[derive(Clone)]
pub struct Recorder {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("run_id", &self.inner.run_id)
            .field("device", &self.inner.device)
            .field("capture_step", &self.inner.capture_step)
            .field("recording", &self.is_recording())
            .finish()
    }
}

/// What the recorder queues for the writer thread. Spans are kept as numbers and a name that is
/// usually `&'static`, so opening and closing a span allocates nothing on the caller's thread.
pub(crate) enum Record {
    SpanStart {
        id: u64,
        parent: Option<u64>,
        name: Cow<'static, str>,
        start_ns: u64,
        kind: SpanKind,
        measured: bool,
        step: Option<Step>,
    },
    SpanEnd {
        id: u64,
        duration_ns: u64,
    },
    /// Boxed so that the queue's slots stay small.
    Event(Box<TraceEvent>),
}

fn span_kind_str(kind: SpanKind) -> &'static str {
    match kind {
        SpanKind::Function => "function",
        SpanKind::Op => "op",
        SpanKind::Module => "module",
    }
}

fn step_str(step: Step) -> &'static str {
    match step {
        Step::Forward => "forward",
        Step::Backward => "backward",
        Step::Optimizer => "optimizer",
    }
}

/// Append the decimal digits of `n`.
fn push_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

impl Encode for Record {
    /// Span lines are written by hand (the same bytes serde would produce for
    /// `TraceEvent::SpanStart`/`SpanEnd`, checked by a test); other events go through serde.
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Record::SpanStart {
                id,
                parent,
                name,
                start_ns,
                kind,
                measured,
                step,
            } => {
                out.extend_from_slice(br#"{"kind":"span_start","id":"s"#);
                push_u64(out, *id);
                if let Some(parent) = parent {
                    out.extend_from_slice(br#"","parent_id":"s"#);
                    push_u64(out, *parent);
                }
                out.extend_from_slice(br#"","name":"#);
                // Writing a string into a Vec<u8> cannot fail.
                let _ = serde_json::to_writer(&mut *out, name.as_ref());
                out.extend_from_slice(br#","start_ns":"#);
                push_u64(out, *start_ns);
                out.extend_from_slice(br#","span_kind":""#);
                out.extend_from_slice(span_kind_str(*kind).as_bytes());
                out.extend_from_slice(if *measured {
                    br#"","measured":true"#.as_slice()
                } else {
                    br#"","measured":false"#.as_slice()
                });
                if let Some(step) = step {
                    out.extend_from_slice(br#","step":""#);
                    out.extend_from_slice(step_str(*step).as_bytes());
                    out.push(b'"');
                }
                out.push(b'}');
            }
            Record::SpanEnd { id, duration_ns } => {
                out.extend_from_slice(br#"{"kind":"span_end","id":"s"#);
                push_u64(out, *id);
                out.extend_from_slice(br#"","duration_ns":"#);
                push_u64(out, *duration_ns);
                out.push(b'}');
            }
            Record::Event(event) => {
                // Serializing these plain structs into a Vec<u8> cannot fail.
                let _ = serde_json::to_writer(&mut *out, event.as_ref());
            }
        }
    }
}

/// Source of recorder keys for the per-thread span stacks.
static NEXT_RECORDER: AtomicU64 = AtomicU64::new(1);

/// The shared state behind every clone of a [`Recorder`].
pub(crate) struct Inner {
    /// Distinguishes this recorder's per-thread span stacks from other recorders'.
    pub(crate) key: u64,
    pub(crate) recording: AtomicBool,
    /// The clock of every timestamp: the CPU's time-stamp counter where it is invariant
    /// (quanta calibrates it against the OS monotonic clock once per process), else the OS
    /// monotonic clock. A span reads it twice; a read costs ~14 ns on the benchmark VM, where
    /// `Instant::now()` costs ~45 ns (BENCHMARKS.md, span cost).
    clock: quanta::Clock,
    /// `clock.raw()` when the recorder was built: time zero of the trace.
    start: u64,
    pub(crate) run_id: String,
    pub(crate) device: String,
    pub(crate) capture_step: u64,
    steps_begun: AtomicU64,
    capture_ended: AtomicBool,
    next_span: AtomicU64,
    measured_used: AtomicBool,
    timing_mode: TimingMode,
    sync: Option<Arc<dyn DeviceSync>>,
    notes: Mutex<Vec<String>>,
    finished: AtomicBool,
    writer: Writer<Record>,
}

/// Everything [`Inner`] needs from the builder.
pub(crate) struct InnerParts {
    pub(crate) run_id: String,
    pub(crate) device: String,
    pub(crate) capture_step: u64,
    pub(crate) timing_mode: TimingMode,
    pub(crate) sync: Option<Arc<dyn DeviceSync>>,
    pub(crate) writer: Writer<Record>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("run_id", &self.run_id)
            .field("capture_step", &self.capture_step)
            .finish_non_exhaustive()
    }
}

impl Inner {
    pub(crate) fn new(parts: InnerParts) -> Self {
        let clock = quanta::Clock::new();
        let start = clock.raw();
        Inner {
            key: NEXT_RECORDER.fetch_add(1, Ordering::Relaxed),
            recording: AtomicBool::new(false),
            clock,
            start,
            run_id: parts.run_id,
            device: parts.device,
            capture_step: parts.capture_step,
            steps_begun: AtomicU64::new(0),
            capture_ended: AtomicBool::new(false),
            next_span: AtomicU64::new(1),
            measured_used: AtomicBool::new(false),
            timing_mode: parts.timing_mode,
            sync: parts.sync,
            notes: Mutex::new(Vec::new()),
            finished: AtomicBool::new(false),
            writer: parts.writer,
        }
    }

    #[inline]
    pub(crate) fn is_recording(&self) -> bool {
        self.recording.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        self.clock.delta_as_nanos(self.start, self.clock.raw())
    }

    fn synchronize(&self) {
        if let Some(sync) = &self.sync {
            sync.synchronize();
        }
    }

    /// Whether a nested (non-measured) span synchronizes at its edges.
    pub(crate) fn nested_sync(&self) -> bool {
        self.timing_mode == TimingMode::DeviceSynchronized && self.sync.is_some()
    }

    /// Open a span on this thread; returns its number and start time. `parent` overrides the
    /// thread's innermost span as the recorded parent (the tracing layer's span tree).
    pub(crate) fn open_span(
        &self,
        name: Cow<'static, str>,
        kind: SpanKind,
        measured: bool,
        step: Option<Step>,
        parent: Option<u64>,
        sync: bool,
    ) -> (u64, u64) {
        let id = self.next_span.fetch_add(1, Ordering::Relaxed);
        let (below, frame) = span::push(self.key, id, step);
        if sync {
            self.synchronize();
        }
        let start_ns = self.now_ns();
        self.writer.send(Record::SpanStart {
            id,
            parent: parent.or(below.map(|f| f.id)),
            name,
            start_ns,
            kind,
            measured,
            step: frame.step,
        });
        (id, start_ns)
    }

    /// Close span `id` opened at `start_ns` on this thread.
    pub(crate) fn close_span(&self, id: u64, start_ns: u64, sync: bool) {
        if sync {
            self.synchronize();
        }
        let end_ns = self.now_ns();
        span::pop(self.key, id);
        self.writer.send(Record::SpanEnd {
            id,
            duration_ns: end_ns.saturating_sub(start_ns),
        });
    }

    pub(crate) fn note(&self, message: String) {
        match self.notes.lock() {
            Ok(mut notes) => notes.push(message),
            Err(poisoned) => poisoned.into_inner().push(message),
        }
    }

    pub(crate) fn begin_step(&self) -> (u64, bool) {
        let step = self.steps_begun.fetch_add(1, Ordering::Relaxed) + 1;
        let captured = step == self.capture_step && !self.finished.load(Ordering::Relaxed);
        if captured {
            self.recording.store(true, Ordering::Release);
        }
        (step, captured)
    }

    pub(crate) fn end_captured_step(&self) {
        if self.recording.swap(false, Ordering::AcqRel) {
            self.capture_ended.store(true, Ordering::Release);
        }
    }
}

impl Recorder {
    /// A builder for a recorder of `entrypoint` (`train::step`, `Model::forward` ...).
    pub fn builder(entrypoint: impl Into<String>) -> RecorderBuilder {
        RecorderBuilder::new(entrypoint)
    }

    /// Start the next step (optimizer update or inference invocation; the first call is step
    /// 1). When it is the capture step, recording turns on until the returned token is dropped
    /// or [`end_step`](Recorder::end_step) is called.
    pub fn begin_step(&self) -> StepToken<'_> {
        let (step, captured) = self.inner.begin_step();
        StepToken::new(&self.inner, step, captured)
    }

    /// Turn recording off if the captured step is running (what dropping its [`StepToken`]
    /// does).
    pub fn end_step(&self) {
        self.inner.end_captured_step();
    }

    /// True when `step` (one-based) is the step this recorder captures.
    pub fn should_capture(&self, step: u64) -> bool {
        step == self.inner.capture_step
    }

    /// The one-based step this recorder captures.
    pub fn capture_step(&self) -> u64 {
        self.inner.capture_step
    }

    /// Number of steps begun so far.
    pub fn steps_begun(&self) -> u64 {
        self.inner.steps_begun.load(Ordering::Relaxed)
    }

    /// True once the captured step has ended: a loop that only runs to be traced may stop.
    pub fn capture_done(&self) -> bool {
        self.inner.capture_ended.load(Ordering::Acquire)
    }

    /// The run id written in the meta line.
    pub fn run_id(&self) -> &str {
        &self.inner.run_id
    }

    /// Open a span named `name` of kind `kind` under this thread's innermost open span.
    #[inline]
    pub fn span(&self, name: impl Into<Cow<'static, str>>, kind: SpanKind) -> SpanGuard<'_> {
        if !self.inner.is_recording() {
            return SpanGuard::inert();
        }
        let sync = self.inner.nested_sync();
        SpanGuard::open(&self.inner, name.into(), kind, false, None, sync)
    }

    /// A span of kind `module` (`Linear`, `Attention` ...).
    #[inline]
    pub fn module(&self, name: impl Into<Cow<'static, str>>) -> SpanGuard<'_> {
        self.span(name, SpanKind::Module)
    }

    /// A span of kind `op` (one tensor operation).
    #[inline]
    pub fn op_span(&self, name: impl Into<Cow<'static, str>>) -> SpanGuard<'_> {
        self.span(name, SpanKind::Op)
    }

    /// A span for a training step (named `forward`, `backward` or `optimizer`, with `step`
    /// set); spans opened inside it inherit the step.
    #[inline]
    pub fn step(&self, step: Step) -> SpanGuard<'_> {
        if !self.inner.is_recording() {
            return SpanGuard::inert();
        }
        let sync = self.inner.nested_sync();
        SpanGuard::open(
            &self.inner,
            Cow::Borrowed(step_str(step)),
            SpanKind::Function,
            false,
            Some(step),
            sync,
        )
    }

    /// The run's single measured region: its duration is the trace's `total_ns`. Synchronizes
    /// the device at both edges when a [`DeviceSync`] was given, whatever the timing mode.
    ///
    /// Only the first call inside the captured step records; any later call returns an inert
    /// guard and is noted in the [`CaptureReport`].
    pub fn measured(&self, name: impl Into<Cow<'static, str>>) -> SpanGuard<'_> {
        if !self.inner.is_recording() {
            return SpanGuard::inert();
        }
        let name = name.into();
        if self.inner.measured_used.swap(true, Ordering::AcqRel) {
            self.inner.note(format!(
                "a second measured region `{name}` was refused: a run has exactly one"
            ));
            return SpanGuard::inert();
        }
        SpanGuard::open(
            &self.inner,
            name,
            SpanKind::Function,
            true,
            None,
            self.inner.sync.is_some(),
        )
    }

    /// Block until every event queued so far is written and flushed to the output, or
    /// `timeout` passes; true when confirmed. Recording never needs this (the writer flushes at
    /// least every 100 ms); it is for callers that want a checkpoint.
    pub fn flush(&self, timeout: Duration) -> bool {
        self.inner.writer.flush(timeout)
    }

    /// Events dropped so far because the queue was full.
    pub fn events_dropped(&self) -> u64 {
        self.inner.writer.dropped()
    }

    /// Stop recording, write everything queued, flush, and (for an atomic capture) publish the
    /// file. Returns the first I/O error, if any happened while recording.
    ///
    /// Works through any clone; later calls return [`CaptureError::AlreadyFinished`]. Spans
    /// still open are left unclosed in the file (readers warn about them), and events emitted
    /// afterwards are discarded.
    pub fn finish(&self) -> Result<CaptureReport, CaptureError> {
        let inner = &self.inner;
        if inner.finished.swap(true, Ordering::AcqRel) {
            return Err(CaptureError::AlreadyFinished);
        }
        inner.recording.store(false, Ordering::Release);
        let begun = inner.steps_begun.load(Ordering::Relaxed);
        if begun < inner.capture_step {
            inner.note(format!(
                "the capture step {} was never reached ({begun} steps begun): nothing was recorded",
                inner.capture_step
            ));
        }
        let report = inner.writer.finish()?;
        let notes = match inner.notes.lock() {
            Ok(notes) => notes.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        Ok(CaptureReport {
            events_written: report.events_written,
            events_dropped: report.events_dropped,
            bytes_written: report.bytes_written,
            path: report.paths.into_iter().next(),
            notes,
        })
    }
}

impl Sink for Recorder {
    #[inline]
    fn is_recording(&self) -> bool {
        self.inner.is_recording()
    }

    #[inline]
    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }

    fn current_span_id(&self) -> Option<String> {
        span::top(self.inner.key).map(|f| span::span_id(f.id))
    }

    fn device(&self) -> &str {
        &self.inner.device
    }

    /// Queue `event` for writing. Ignored outside the captured step (so a caller that forgot to
    /// check [`Sink::is_recording`] still records only the captured step) and after
    /// [`Recorder::finish`]. A `meta` event is refused and noted: the recorder writes the one
    /// meta line itself.
    fn emit(&self, event: TraceEvent) {
        if !self.inner.is_recording() {
            return;
        }
        if let TraceEvent::Meta(_) = event {
            self.inner
                .note(String::from("a `meta` event passed to emit() was refused"));
            return;
        }
        self.inner.writer.send(Record::Event(Box::new(event)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_trace_schema::events::{decode_line, SpanEnd, SpanStart};
    use proptest::prelude::*;

    fn encoded(r: &Record) -> String {
        let mut out = Vec::new();
        r.encode(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn hand_written_span_lines_match_serde() {
        let cases = [
            (None, None, false, SpanKind::Function),
            (Some(3), Some(Step::Backward), true, SpanKind::Module),
            (Some(1), None, false, SpanKind::Op),
        ];
        for (parent, step, measured, kind) in cases {
            let name = "quote\" back\\slash \u{1} é";
            let r = Record::SpanStart {
                id: 7,
                parent,
                name: Cow::Borrowed(name),
                start_ns: 42,
                kind,
                measured,
                step,
            };
            let want = TraceEvent::SpanStart(SpanStart {
                id: "s7".into(),
                parent_id: parent.map(|p| span::span_id(p).into()),
                name: name.into(),
                start_ns: 42,
                span_kind: kind,
                measured,
                step,
            });
            assert_eq!(encoded(&r), want.to_json_line());
        }
        let r = Record::SpanEnd {
            id: 9,
            duration_ns: 1234,
        };
        let want = TraceEvent::SpanEnd(SpanEnd {
            id: "s9".into(),
            duration_ns: 1234,
        });
        assert_eq!(encoded(&r), want.to_json_line());
    }

    fn kinds() -> impl Strategy<Value = SpanKind> {
        prop_oneof![
            Just(SpanKind::Function),
            Just(SpanKind::Op),
            Just(SpanKind::Module)
        ]
    }

    fn steps() -> impl Strategy<Value = Option<Step>> {
        prop_oneof![
            Just(None),
            Just(Some(Step::Forward)),
            Just(Some(Step::Backward)),
            Just(Some(Step::Optimizer))
        ]
    }

    proptest! {
        /// Any span line the writer can produce reads back equal, and is byte-identical to
        /// what serde writes for the same event.
        #[test]
        fn span_lines_round_trip(
            id in any::<u64>(),
            parent in proptest::option::of(any::<u64>()),
            name in any::<String>(),
            start_ns in any::<u64>(),
            kind in kinds(),
            measured in any::<bool>(),
            step in steps(),
            duration_ns in any::<u64>(),
        ) {
            let start = Record::SpanStart {
                id,
                parent,
                name: Cow::Owned(name.clone()),
                start_ns,
                kind,
                measured,
                step,
            };
            let want = TraceEvent::SpanStart(SpanStart {
                id: span::span_id(id).into(),
                parent_id: parent.map(|p| span::span_id(p).into()),
                name: name.into(),
                start_ns,
                span_kind: kind,
                measured,
                step,
            });
            let line = encoded(&start);
            prop_assert_eq!(&line, &want.to_json_line());
            prop_assert_eq!(decode_line(line.as_bytes()).ok(), Some(want));

            let end = Record::SpanEnd { id, duration_ns };
            let want = TraceEvent::SpanEnd(SpanEnd { id: span::span_id(id).into(), duration_ns });
            prop_assert_eq!(decode_line(encoded(&end).as_bytes()).ok(), Some(want));
        }
    }
}
