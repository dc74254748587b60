//! [`Recorder`]: the handle a training or inference binary holds while it runs.

use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use candle_trace_schema::format::events::{Pass, SpanKind, TraceEvent};

use crate::error::CaptureError;
use crate::gating::StepToken;
use crate::record::Record;
use crate::sink::Sink;
use crate::span::SpanGuard;
use crate::stack as span;
use crate::state::Inner;

use crate::writer::CaptureReport;

/// Records one step of a run into a trace/6 file.
///
/// Built with [`Recorder::builder`]. Cheap to clone (an `Arc`); every clone records into the
/// same file. Call [`begin_step`](Recorder::begin_step) once per optimizer update or inference
/// invocation: only the configured capture step turns recording on, and outside it every
/// instrumentation call costs one atomic load. Open spans with the guard-returning methods
/// ([`span`](Recorder::span), [`module`](Recorder::module), [`op_span`](Recorder::op_span),
/// [`pass`](Recorder::pass), [`measured`](Recorder::measured)); other events go through
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

impl Recorder {
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

    /// A span for one pass of a training update (named `forward`, `backward` or `optimizer`,
    /// with the file's `step` key set); spans opened inside it inherit the pass.
    #[inline]
    ///
    /// A `device_memory` checkpoint is written at both edges: the driver's numbers on a CUDA
    /// device (feature `cuda`), else host memory (the counting allocator's live bytes when it
    /// is installed, the process's resident set otherwise; none where neither is known).
    pub fn pass(&self, pass: Pass) -> SpanGuard<'_> {
        if !self.inner.is_recording() {
            return SpanGuard::inert();
        }
        let sync = self.inner.nested_sync();
        self.inner.checkpoint();
        SpanGuard::open(
            &self.inner,
            Cow::Borrowed(pass.as_str()),
            SpanKind::Function,
            false,
            Some(pass),
            sync,
        )
        .with_checkpoint()
    }

    /// Route the program's `tracing` spans into this recorder: installs
    /// [`CaptureSubscriber`](crate::subscriber::CaptureSubscriber) as the global subscriber
    /// (once per process). Call it **before building the model**: candle-transformers creates
    /// its spans when the model is built. See [`crate::subscriber`].
    ///
    /// The subscriber then holds the recorder until [`finish`](Recorder::finish) (or until
    /// another recorder is installed): dropping every handle of an installed recorder without
    /// finishing it does not stop its writer thread or write its closing lines.
    pub fn install(&self) -> Result<(), CaptureError> {
        crate::subscriber::install()?;
        self.inner.tracing_routed.store(true, Ordering::Relaxed);
        crate::subscriber::attach_recorder(Arc::clone(&self.inner));
        Ok(())
    }

    /// The run's single measured region: its duration is the trace's `total_ns`. Synchronizes
    /// the device at both edges when a [`DeviceSync`](crate::DeviceSync) was given, whatever the timing mode.
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
        inner.end_captured_step();
        inner.detach_host();
        crate::subscriber::detach_recorder(inner.key);
        let begun = inner.steps_begun.load(Ordering::Relaxed);
        if begun < inner.capture_step {
            inner.note(format!(
                "the capture step {} was never reached ({begun} steps begun): nothing was recorded",
                inner.capture_step
            ));
        }
        let warnings = inner.capture_warnings(crate::subscriber::no_span_reason());
        for warning in &warnings {
            inner.note(warning.clone());
        }
        let sources = inner.sources_line(&warnings, inner.writer.dropped());
        *inner
            .closing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(sources.into_bytes());
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

    /// In `device_synchronized` mode, synchronize the device (so `timed_op` measures device
    /// time, not the launch).
    fn sync_for_timing(&self) {
        if self.inner.is_recording() && self.inner.nested_sync() {
            self.inner.synchronize();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intern::NameTable;
    use crate::record::{
        host_memory_event, host_memory_line, HostBlocks, NamedSpanStart, WideHostAlloc,
    };
    use crate::writer::Encode;
    use candle_trace_schema::format::events::MemoryAction;
    use candle_trace_schema::format::events::TensorCategory;
    use candle_trace_schema::format::events::{decode_line, SpanEnd, SpanStart};
    use proptest::prelude::*;
    use std::sync::Arc;

    fn encoded(r: &Record) -> String {
        encoded_with(r, &mut HostBlocks::default())
    }

    fn encoded_with(r: &Record, host: &mut HostBlocks) -> String {
        let mut out = Vec::new();
        r.encode(&mut out, host);
        String::from_utf8(out).unwrap()
    }

    /// The same span start as an interned record (name leaked to be `'static`) and as one
    /// with an owned name, each encoded by a writer state of its own.
    #[allow(clippy::too_many_arguments)] // the fields of one line
    fn both_encodings(
        id: u64,
        parent: Option<u64>,
        name: &str,
        start_ns: u64,
        kind: SpanKind,
        measured: bool,
        pass: Option<Pass>,
        module: Option<&str>,
    ) -> [String; 2] {
        let table = Arc::new(NameTable::default());
        let mut host = HostBlocks::for_device("cpu", Arc::clone(&table));
        let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
        let module: Option<&'static str> =
            module.map(|m| &*Box::leak(m.to_string().into_boxed_str()));
        let interned = Record::SpanStart {
            id,
            parent: parent.unwrap_or(0),
            name: table
                .label_id(crate::intern::Label {
                    name: leaked,
                    module,
                })
                .unwrap(),
            start_ns,
            kind,
            measured,
            pass,
        };
        let owned = Record::NamedSpanStart(Box::new(NamedSpanStart {
            id,
            parent,
            name: Cow::Owned(name.to_string()),
            module,
            start_ns,
            kind,
            measured,
            pass,
        }));
        [encoded_with(&interned, &mut host), encoded(&owned)]
    }

    #[test]
    fn hand_written_span_lines_match_serde() {
        let cases = [
            (None, None, false, SpanKind::Function, None),
            (
                Some(3),
                Some(Pass::Backward),
                true,
                SpanKind::Module,
                Some("model.layers.0.mlp.\"q\"\\é"),
            ),
            (Some(1), None, false, SpanKind::Op, Some("lm_head")),
        ];
        for (parent, pass, measured, kind, module) in cases {
            let name = "quote\" back\\slash \u{1} é";
            let want = TraceEvent::SpanStart(SpanStart {
                id: "s7".into(),
                parent_id: parent.map(|p| span::span_id(p).into()),
                name: name.into(),
                start_ns: 42,
                span_kind: kind,
                measured,
                pass,
                module: module.map(Into::into),
            });
            for line in both_encodings(7, parent, name, 42, kind, measured, pass, module) {
                assert_eq!(line, want.to_json_line());
            }
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

    #[test]
    fn a_wide_host_alloc_writes_the_same_line() {
        let compact = Record::HostAlloc {
            ptr: 0x1000,
            bytes: 4096,
            at_ns: 77,
            span: 5,
            category: TensorCategory::Gradient,
        };
        let wide = Record::WideHostAlloc(Box::new(WideHostAlloc {
            ptr: 0x1000,
            bytes: 4096,
            span: 5,
            at_ns: 77,
            category: TensorCategory::Gradient,
        }));
        let line = encoded(&compact);
        assert_eq!(line, encoded(&wide));
        assert_eq!(
            line,
            r#"{"kind":"memory","timestamp_ns":77,"tensor_id":"host-1","span_id":"s5","device":"cpu","bytes":4096,"action":"alloc","shape":[],"dtype":"u8","category":"gradient"}"#
        );
    }

    fn categories() -> impl Strategy<Value = TensorCategory> {
        proptest::sample::select(TensorCategory::ALL.to_vec())
    }

    fn kinds() -> impl Strategy<Value = SpanKind> {
        prop_oneof![
            Just(SpanKind::Function),
            Just(SpanKind::Op),
            Just(SpanKind::Module)
        ]
    }

    fn passes() -> impl Strategy<Value = Option<Pass>> {
        prop_oneof![
            Just(None),
            Just(Some(Pass::Forward)),
            Just(Some(Pass::Backward)),
            Just(Some(Pass::Optimizer))
        ]
    }

    /// `(action, host id, span, at_ns)` of each line of `text`.
    fn host_lines(text: &str) -> Vec<(&'static str, u64, u64, u64)> {
        text.lines()
            .map(|l| match decode_line(l.as_bytes()).unwrap() {
                candle_trace_schema::format::events::TraceEvent::Memory(m) => (
                    match m.action {
                        MemoryAction::Alloc => "alloc",
                        MemoryAction::Free => "free",
                    },
                    m.tensor_id.strip_prefix("host-").unwrap().parse().unwrap(),
                    m.span_id.strip_prefix('s').unwrap().parse().unwrap(),
                    m.timestamp_ns,
                ),
                other => panic!("not a memory line: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_free_read_before_its_alloc_is_written_with_it() {
        // Thread B frees (its ring read first) a block thread A allocated: the free waits for
        // the alloc, and both lines come with it.
        let mut host = HostBlocks::default();
        let alloc = |at_ns| Record::HostAlloc {
            ptr: 0x1000,
            bytes: 4096,
            at_ns,
            span: 3,
            category: TensorCategory::Activation,
        };
        let free = |at_ns, span| Record::HostFree {
            ptr: 0x1000,
            span,
            at_ns,
        };
        assert_eq!(encoded_with(&free(20, 7), &mut host), "");
        let both = encoded_with(&alloc(10), &mut host);
        assert_eq!(host_lines(&both), [("alloc", 1, 3, 10), ("free", 1, 7, 20)]);
        // The writer counts the second line (asked once: then none are left).
        assert_eq!(crate::record::Record::extra_lines(&mut host), 1);
        assert_eq!(crate::record::Record::extra_lines(&mut host), 0);
        // Nothing stays live.
        assert_eq!(encoded_with(&free(30, 7), &mut host), "");
        // A free never matched is forgotten after its pass and the next.
        crate::record::Record::pass_done(&mut host);
        crate::record::Record::pass_done(&mut host);
        assert_eq!(
            host_lines(&encoded_with(&alloc(40), &mut host)),
            [("alloc", 2, 3, 40)]
        );
        assert_eq!(
            host_lines(&encoded_with(&free(50, 0), &mut host)),
            [("free", 2, 3, 50)]
        );
    }

    #[test]
    fn a_block_reusing_an_address_read_before_the_old_ones_free_leaves_that_free_to_it() {
        // A block at 0x1000 (t = 10), freed at t = 20 on another thread, then a new block at
        // the same address (t = 30) read before that free.
        let mut host = HostBlocks::default();
        let alloc = |at_ns, span| Record::HostAlloc {
            ptr: 0x1000,
            bytes: 100,
            at_ns,
            span,
            category: TensorCategory::Other,
        };
        let free = |at_ns| Record::HostFree {
            ptr: 0x1000,
            span: 0,
            at_ns,
        };
        let mut lines = String::new();
        for r in [alloc(10, 1), alloc(30, 2), free(20), free(40)] {
            lines += &encoded_with(&r, &mut host);
            lines.push('\n');
        }
        assert_eq!(
            host_lines(&lines),
            [
                ("alloc", 1, 1, 10),
                ("alloc", 2, 2, 30),
                ("free", 1, 1, 20),
                ("free", 2, 2, 40)
            ]
        );
        // The old block's alloc read after the new one's (its ring read later), and a free
        // from before both (of a block this trace never saw) in between, which frees neither.
        let mut host = HostBlocks::default();
        let mut lines = String::new();
        for r in [alloc(30, 2), alloc(10, 1), free(5), free(20), free(40)] {
            let line = encoded_with(&r, &mut host);
            if line.is_empty() {
                continue;
            }
            lines += &line;
            lines.push('\n');
        }
        assert_eq!(
            host_lines(&lines),
            [
                ("alloc", 1, 2, 30),
                ("alloc", 2, 1, 10),
                ("free", 2, 1, 20),
                ("free", 1, 2, 40)
            ]
        );
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
            pass in passes(),
            duration_ns in any::<u64>(),
            module in proptest::option::of(any::<String>()),
        ) {
            // Span number 0 is never handed out (they start at 1): it stands for "no parent".
            let parent = parent.filter(|&p| p != 0);
            let want = TraceEvent::SpanStart(SpanStart {
                id: span::span_id(id).into(),
                parent_id: parent.map(|p| span::span_id(p).into()),
                name: name.as_str().into(),
                start_ns,
                span_kind: kind,
                measured,
                pass,
                module: module.as_deref().map(Into::into),
            });
            for line in both_encodings(id, parent, &name, start_ns, kind, measured, pass, module.as_deref()) {
                prop_assert_eq!(&line, &want.to_json_line());
                prop_assert_eq!(decode_line(line.as_bytes()).ok(), Some(want.clone()));
            }

            let end = Record::SpanEnd { id, duration_ns };
            let want = TraceEvent::SpanEnd(SpanEnd { id: span::span_id(id).into(), duration_ns });
            prop_assert_eq!(decode_line(encoded(&end).as_bytes()).ok(), Some(want));
        }

        /// Any host block's `memory` line, written by hand, is byte-identical to what serde
        /// writes for the same event, for both actions and every category.
        #[test]
        fn host_memory_lines_match_serde(
            id in any::<u64>(),
            span in any::<u64>(),
            at_ns in any::<u64>(),
            bytes in any::<u64>(),
            free in any::<bool>(),
            category in categories(),
        ) {
            let action = if free { MemoryAction::Free } else { MemoryAction::Alloc };
            let mut line = Vec::new();
            host_memory_line(&mut line, id, span, at_ns, bytes, action, category);
            let want = host_memory_event(id, span, at_ns, bytes, action, category);
            prop_assert_eq!(String::from_utf8(line.clone()).ok(), Some(want.to_json_line()));
            prop_assert_eq!(decode_line(&line).ok(), Some(want));
        }

        /// A host block written as allocated and then freed gives the two lines serde would.
        #[test]
        fn host_alloc_then_free_round_trip(
            ptr in any::<u64>(),
            bytes in any::<u64>(),
            span in 1..=u64::from(u32::MAX),
            free_span in 0..=u64::from(u32::MAX),
            at_ns in any::<u64>(),
            category in categories(),
        ) {
            let mut host = HostBlocks::default();
            let span32 = u32::try_from(span).unwrap();
            let alloc = Record::HostAlloc { ptr, bytes, at_ns, span: span32, category };
            let free = Record::HostFree { ptr, span: free_span, at_ns };
            // The free keeps the alloc's span when it happened outside any span.
            let free_in = if free_span == 0 { span } else { free_span };
            prop_assert_eq!(
                encoded_with(&alloc, &mut host),
                host_memory_event(1, span, at_ns, bytes, MemoryAction::Alloc, category).to_json_line()
            );
            prop_assert_eq!(
                encoded_with(&free, &mut host),
                host_memory_event(1, free_in, at_ns, bytes, MemoryAction::Free, category).to_json_line()
            );
            // A second free of the same block writes nothing.
            prop_assert_eq!(encoded_with(&free, &mut host), "");
        }
    }
}
