//! [`Recorder`]: the handle a training or inference binary holds while it runs.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::collections::HashMap;

use candle_trace_schema::events::{
    source, CaptureSource, CaptureSources, MemoryAction, MemoryEvent, Op, SpanKind, Step,
    TensorCategory, TimingMode, TraceEvent,
};

use crate::error::CaptureError;
use crate::gating::StepToken;
use crate::meta::RecorderBuilder;
use crate::sink::Sink;
use crate::span::{self, SpanGuard};
use crate::sync::{DeviceSync, SpanTimer, TimerMark};
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
    /// A host allocation of at least the allocator threshold, on a thread whose innermost open
    /// span was `span` (see [`crate::alloc`]). Written as a `memory` `alloc` of tensor
    /// `host-N` (N counts the allocations of this trace).
    HostAlloc {
        ptr: u64,
        bytes: u64,
        span: u64,
        at_ns: u64,
        category: TensorCategory,
    },
    /// A leaf layer's `op` row (see [`Inner::leaf_op`]); kept as numbers and a static name so
    /// that the captured layer allocates nothing, its output bytes filled in by the writer.
    LeafOp {
        span: u64,
        name: &'static str,
        start_ns: u64,
        end_ns: u64,
    },
    /// A host `device_memory` checkpoint taken at `at_ns`: `used_bytes` = `live_bytes` (the
    /// counting allocator's), else the process's resident set read when the line is written.
    HostCheckpoint {
        at_ns: u64,
        live_bytes: Option<u64>,
    },
    /// The free of a block recorded by [`Record::HostAlloc`]; written only when that alloc
    /// was (a block allocated before the captured step is not in the trace).
    HostFree {
        ptr: u64,
        span: u64,
        at_ns: u64,
    },
}

/// What the writer thread remembers between records: the host blocks written as allocated and
/// not yet freed (address → trace id, bytes, span, category).
#[derive(Default)]
pub(crate) struct HostBlocks {
    live: HashMap<u64, (u64, u64, u64, TensorCategory)>,
    /// Live bytes of the blocks each span allocated.
    by_span: HashMap<u64, u64>,
    next: u64,
    /// The recorder's device, for leaf-layer op rows.
    device: String,
}

impl HostBlocks {
    /// The state of a recorder on `device`.
    pub(crate) fn for_device(device: &str) -> Self {
        HostBlocks {
            device: device.to_string(),
            ..HostBlocks::default()
        }
    }

    fn add(&mut self, span: u64, bytes: u64) {
        *self.by_span.entry(span).or_default() += bytes;
    }

    fn remove(&mut self, span: u64, bytes: u64) {
        if let Some(live) = self.by_span.get_mut(&span) {
            *live = live.saturating_sub(bytes);
        }
    }
}

fn host_memory(
    id: u64,
    span: u64,
    at_ns: u64,
    bytes: u64,
    action: MemoryAction,
    category: TensorCategory,
) -> TraceEvent {
    TraceEvent::Memory(MemoryEvent {
        timestamp_ns: at_ns,
        tensor_id: format!("host-{id}").into(),
        span_id: span::span_id(span).into(),
        op_name: None,
        device: "cpu".into(),
        bytes,
        action,
        shape: Vec::new(),
        dtype: "u8".into(),
        category,
    })
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
    type State = HostBlocks;

    /// Span lines are written by hand (the same bytes serde would produce for
    /// `TraceEvent::SpanStart`/`SpanEnd`, checked by a test); other events go through serde.
    fn encode(&self, out: &mut Vec<u8>, host: &mut HostBlocks) {
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
            Record::HostAlloc {
                ptr,
                bytes,
                span,
                at_ns,
                category,
            } => {
                host.next += 1;
                let id = host.next;
                // A block at an address still marked live was freed unseen (a free of a block
                // this trace never saw, on another thread): the new one replaces it.
                if let Some((_, old_bytes, old_span, _)) =
                    host.live.insert(*ptr, (id, *bytes, *span, *category))
                {
                    host.remove(old_span, old_bytes);
                }
                host.add(*span, *bytes);
                let event = host_memory(id, *span, *at_ns, *bytes, MemoryAction::Alloc, *category);
                let _ = serde_json::to_writer(&mut *out, &event);
            }
            Record::LeafOp {
                span: id,
                name,
                start_ns,
                end_ns,
            } => {
                let op = TraceEvent::Op(Op {
                    span_id: span::span_id(*id).into(),
                    op_name: (*name).into(),
                    inputs: Vec::new(),
                    output: None,
                    shape: Vec::new(),
                    dtype: "".into(),
                    device: host.device.as_str().into(),
                    duration_ns: end_ns.saturating_sub(*start_ns),
                    timestamp_ns: *start_ns,
                    // Host blocks the layer allocated and had not freed when it closed: its
                    // output (and anything else it kept). Absent when none was seen.
                    storage_bytes: host.by_span.remove(id).filter(|&b| b > 0),
                    input_storage_bytes: 0,
                });
                let _ = serde_json::to_writer(&mut *out, &op);
            }
            Record::HostCheckpoint { at_ns, live_bytes } => {
                if let Some(event) = crate::alloc::host_checkpoint(*at_ns, *live_bytes) {
                    let _ = serde_json::to_writer(&mut *out, &event);
                }
            }
            Record::HostFree { ptr, span, at_ns } => {
                if let Some((id, bytes, alloc_span, category)) = host.live.remove(ptr) {
                    host.remove(alloc_span, bytes);
                    let span = if *span == 0 { alloc_span } else { *span };
                    let event = host_memory(id, span, *at_ns, bytes, MemoryAction::Free, category);
                    let _ = serde_json::to_writer(&mut *out, &event);
                }
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
    pub(crate) measured_used: AtomicBool,
    timing_mode: TimingMode,
    sync: Option<Arc<dyn DeviceSync>>,
    /// Times nested spans on the device (CUDA events), when given.
    timer: Option<Arc<dyn SpanTimer>>,
    notes: Mutex<Vec<String>>,
    finished: AtomicBool,
    writer: Writer<Record>,
    /// Events each instrumentation source gave (the `capture_sources` line).
    pub(crate) counts: SourceCounts,
    /// Host allocations of at least this many bytes are written one by one (see `alloc`).
    pub(crate) host_threshold_bytes: u64,
    /// Whether this recorder is the allocator's host sink now.
    host_attached: AtomicBool,
    /// Whether `install` routed tracing spans to this recorder.
    pub(crate) tracing_routed: AtomicBool,
    /// Whether this recorder's captured step counts in the subscriber's active consumers.
    subscriber_active: AtomicBool,
    /// The `capture_sources` line, handed to the writer thread at `finish`.
    closing: Arc<Mutex<Option<Vec<u8>>>>,
    /// The training step begun by `Recorder::forward` and ended by `optimizer_step`.
    #[cfg_attr(not(feature = "candle"), allow(dead_code))] // only the candle helpers drive it
    pub(crate) train: Mutex<Option<TrainStep>>,
    /// Reads candle's tensor-id counter (feature `candle`): tensors created inside a span have
    /// ids between its readings at open and close.
    tensor_clock: Option<fn() -> Option<u64>>,
    /// (span, tensor clock at open, at close) of the tracing spans of the captured step.
    pub(crate) tensor_ranges: Mutex<Vec<(u64, u64, u64)>>,
}

/// A training step driven by the `candle` helpers (`forward`, `backward`, `optimizer_step`).
#[derive(Debug, Clone, Copy)]
#[cfg_attr(not(feature = "candle"), allow(dead_code))] // only the candle helpers drive it
pub(crate) struct TrainStep {
    /// Whether it is the captured step.
    pub(crate) captured: bool,
    /// The measured region `train_step` opened by `forward`: span number, start ns.
    pub(crate) measured: Option<(u64, u64)>,
}

/// How many events each instrumentation source gave during the captured step.
#[derive(Debug, Default)]
pub(crate) struct SourceCounts {
    pub(crate) tracing_spans: AtomicU64,
    pub(crate) layer_ops: AtomicU64,
    pub(crate) host_memory: AtomicU64,
    pub(crate) graph_tensors: AtomicU64,
    pub(crate) device_memory: AtomicU64,
    pub(crate) gradients: AtomicU64,
    /// Whether the program asked for the graph / gradients at all (a source that was called).
    pub(crate) graph_on: AtomicBool,
    pub(crate) gradients_on: AtomicBool,
}

/// Everything [`Inner`] needs from the builder.
pub(crate) struct InnerParts {
    pub(crate) run_id: String,
    pub(crate) device: String,
    pub(crate) capture_step: u64,
    pub(crate) timing_mode: TimingMode,
    pub(crate) sync: Option<Arc<dyn DeviceSync>>,
    pub(crate) timer: Option<Arc<dyn SpanTimer>>,
    pub(crate) writer: Writer<Record>,
    pub(crate) host_threshold_bytes: u64,
    pub(crate) closing: Arc<Mutex<Option<Vec<u8>>>>,
    pub(crate) tensor_clock: Option<fn() -> Option<u64>>,
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
            timer: parts.timer,
            notes: Mutex::new(Vec::new()),
            finished: AtomicBool::new(false),
            writer: parts.writer,
            counts: SourceCounts::default(),
            host_threshold_bytes: parts.host_threshold_bytes,
            host_attached: AtomicBool::new(false),
            closing: parts.closing,
            tracing_routed: AtomicBool::new(false),
            subscriber_active: AtomicBool::new(false),
            train: Mutex::new(None),
            tensor_clock: parts.tensor_clock,
            tensor_ranges: Mutex::new(Vec::new()),
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

    /// Whether the measured region synchronizes at its edges (a device sync hook was given).
    #[cfg_attr(not(feature = "candle"), allow(dead_code))] // used by the candle helpers
    pub(crate) fn measured_sync(&self) -> bool {
        self.sync.is_some()
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

    /// A device mark for a span opening now, when a [`SpanTimer`] was given.
    pub(crate) fn timer_start(&self) -> Option<TimerMark> {
        self.timer.as_ref().and_then(|t| t.start())
    }

    /// Close span `id` opened at `start_ns` on this thread; returns its end time. The span's
    /// duration is measured by the device from `mark` when there is one, else by the host
    /// clock.
    pub(crate) fn close_span_timed(
        &self,
        id: u64,
        start_ns: u64,
        sync: bool,
        mark: Option<TimerMark>,
    ) -> u64 {
        if sync {
            self.synchronize();
        }
        let device_ns = mark.and_then(|mark| self.timer.as_ref()?.elapsed_ns(mark));
        let end_ns = self.now_ns();
        span::pop(self.key, id);
        self.writer.send(Record::SpanEnd {
            id,
            duration_ns: device_ns.unwrap_or_else(|| end_ns.saturating_sub(start_ns)),
        });
        end_ns
    }

    /// The `op` row of a leaf layer: a tracing span `name` (span number `id`) inside which no
    /// other span opened, timed by that span. Shape and dtype are unknown to tracing (empty).
    ///
    /// With the counting allocator on, its `storage_bytes` are the host bytes the layer
    /// allocated (in blocks of at least the threshold) and had not freed when it closed.
    pub(crate) fn leaf_op(&self, id: u64, name: &'static str, start_ns: u64, end_ns: u64) {
        self.counts.layer_ops.fetch_add(1, Ordering::Relaxed);
        self.writer.send(Record::LeafOp {
            span: id,
            name,
            start_ns,
            end_ns,
        });
    }

    /// The tensor clock now, when there is one (see `tensor_ranges`).
    pub(crate) fn tensor_clock(&self) -> Option<u64> {
        self.tensor_clock.and_then(|clock| clock())
    }

    /// Span `span` saw the tensor clock go from `first` to `end`.
    pub(crate) fn tensor_range(&self, span: u64, first: u64, end: u64) {
        self.tensor_ranges
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((span, first, end));
    }

    /// The innermost span whose tensor clock range holds tensor `id` (created inside it).
    #[cfg_attr(not(feature = "candle"), allow(dead_code))] // used by the candle helpers
    pub(crate) fn span_of_tensor(&self, id: u64) -> Option<u64> {
        let ranges = self
            .tensor_ranges
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        ranges
            .iter()
            .filter(|(_, first, end)| *first < id && id < *end)
            .min_by_key(|(_, first, end)| end - first)
            .map(|(span, _, _)| *span)
    }

    /// Queue an event built by this crate (bypasses the recording check of `Sink::emit`).
    #[cfg(feature = "cuda")]
    pub(crate) fn send_event(&self, event: TraceEvent) {
        self.writer.send(Record::Event(Box::new(event)));
    }

    /// A `device_memory` checkpoint of the recorder's device: the driver's numbers on CUDA
    /// (feature `cuda`), else the host's: the counting allocator's live bytes when it is
    /// installed, the process's resident set otherwise.
    pub(crate) fn checkpoint(&self) {
        if !self.is_recording() {
            return;
        }
        #[cfg(feature = "cuda")]
        if let Some(ordinal) = self
            .device
            .strip_prefix("cuda:")
            .and_then(|n| n.parse::<usize>().ok())
        {
            // The sink counts the checkpoint it writes; a failed driver call writes none.
            let _ = crate::cuda::record_cuda_memory(&CountingSink(self), ordinal);
            return;
        }
        // The live bytes are one atomic load here; the `/proc` reads (the OS's available memory,
        // and the resident set without the allocator) happen on the writer thread.
        let live_bytes = crate::alloc::installed().then(crate::alloc::live_bytes);
        if live_bytes.is_some() || cfg!(target_os = "linux") {
            self.counts.device_memory.fetch_add(1, Ordering::Relaxed);
            self.writer.send(Record::HostCheckpoint {
                at_ns: self.now_ns(),
                live_bytes,
            });
        }
    }

    pub(crate) fn note(&self, message: String) {
        match self.notes.lock() {
            Ok(mut notes) => notes.push(message),
            Err(poisoned) => poisoned.into_inner().push(message),
        }
    }

    pub(crate) fn begin_step(self: &Arc<Self>) -> (u64, bool) {
        let step = self.steps_begun.fetch_add(1, Ordering::Relaxed) + 1;
        // Frees of the captured step's blocks are followed until the next step begins.
        self.detach_host();
        let captured = step == self.capture_step && !self.finished.load(Ordering::Relaxed);
        if captured {
            if crate::alloc::installed() && self.host_threshold_bytes != u64::MAX {
                crate::alloc::attach_host_sink(Arc::clone(self) as Arc<dyn HostSink>);
                self.host_attached.store(true, Ordering::Release);
            }
            self.recording.store(true, Ordering::Release);
            // The subscriber's slow path only matters to a recorder it routes spans to.
            if self.tracing_routed.load(Ordering::Relaxed)
                && !self.subscriber_active.swap(true, Ordering::AcqRel)
            {
                crate::subscriber::activate();
            }
        }
        (step, captured)
    }

    pub(crate) fn end_captured_step(&self) {
        if self.recording.swap(false, Ordering::AcqRel) {
            self.capture_ended.store(true, Ordering::Release);
        }
        if self.subscriber_active.swap(false, Ordering::AcqRel) {
            crate::subscriber::deactivate();
        }
    }

    fn detach_host(&self) {
        if self.host_attached.swap(false, Ordering::AcqRel) {
            crate::alloc::detach_host_sink(self.key);
        }
    }

    /// The `capture_sources` line: each source, on or off, and how many events it gave.
    fn sources_line(&self, warnings: &[String], dropped: u64) -> String {
        let c = &self.counts;
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let tracing_on = self.tracing_routed.load(Ordering::Relaxed) || n(&c.tracing_spans) > 0;
        let allocator_on = crate::alloc::installed() && self.host_threshold_bytes != u64::MAX;
        let source = |name: &str, on: bool, events: u64| CaptureSource {
            source: name.to_string(),
            on,
            events,
            threshold_bytes: None,
        };
        let sources = vec![
            source(source::TRACING, tracing_on, n(&c.tracing_spans)),
            source(source::LAYER_OPS, tracing_on, n(&c.layer_ops)),
            CaptureSource {
                threshold_bytes: allocator_on.then_some(self.host_threshold_bytes),
                ..source(source::ALLOCATOR, allocator_on, n(&c.host_memory))
            },
            source(
                source::GRAPH,
                c.graph_on.load(Ordering::Relaxed),
                n(&c.graph_tensors),
            ),
            source(
                source::DEVICE_MEMORY,
                n(&c.device_memory) > 0,
                n(&c.device_memory),
            ),
            source(
                source::GRADIENTS,
                c.gradients_on.load(Ordering::Relaxed),
                n(&c.gradients),
            ),
        ];
        TraceEvent::CaptureSources(CaptureSources {
            sources,
            events_dropped: dropped,
            warnings: warnings.to_vec(),
        })
        .to_json_line()
    }

    /// Warnings about what the captured step did not see.
    fn capture_warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        let begun = self.steps_begun.load(Ordering::Relaxed);
        if begun >= self.capture_step
            && self.tracing_routed.load(Ordering::Relaxed)
            && self.counts.tracing_spans.load(Ordering::Relaxed) == 0
        {
            warnings.push(String::from(
                "the captured step saw no tracing spans: install candle-trace before building \
                 the model (candle-transformers creates its spans when the model is built)",
            ));
        }
        let dropped = self.writer.dropped();
        if dropped > 0 {
            warnings.push(format!(
                "{dropped} events were dropped because a ring was full: the trace is incomplete \
                 (raise queue_capacity)"
            ));
        }
        warnings
    }
}

/// The allocator's view of a recorder: host blocks of at least the threshold.
pub(crate) trait HostSink: Send + Sync {
    fn key(&self) -> u64;
    fn threshold_bytes(&self) -> u64;
    fn host_alloc(&self, ptr: u64, bytes: u64, span: u64, step: Option<Step>);
    fn host_free(&self, ptr: u64, span: u64);
}

impl HostSink for Inner {
    fn key(&self) -> u64 {
        self.key
    }

    fn threshold_bytes(&self) -> u64 {
        self.host_threshold_bytes
    }

    fn host_alloc(&self, ptr: u64, bytes: u64, span: u64, step: Option<Step>) {
        self.counts.host_memory.fetch_add(1, Ordering::Relaxed);
        let category = match step {
            Some(Step::Forward) => TensorCategory::Activation,
            Some(Step::Backward) => TensorCategory::Gradient,
            Some(Step::Optimizer) => TensorCategory::Optimizer,
            None => TensorCategory::Other,
        };
        self.writer.send(Record::HostAlloc {
            ptr,
            bytes,
            span,
            at_ns: self.now_ns(),
            category,
        });
    }

    fn host_free(&self, ptr: u64, span: u64) {
        self.writer.send(Record::HostFree {
            ptr,
            span,
            at_ns: self.now_ns(),
        });
    }
}

/// A sink over a recorder that counts `device_memory` checkpoints (the CUDA probe emits
/// through `Sink`).
#[cfg(feature = "cuda")]
struct CountingSink<'a>(&'a Inner);

#[cfg(feature = "cuda")]
impl Sink for CountingSink<'_> {
    fn is_recording(&self) -> bool {
        self.0.is_recording()
    }
    fn now_ns(&self) -> u64 {
        self.0.now_ns()
    }
    fn current_span_id(&self) -> Option<String> {
        span::top(self.0.key).map(|f| span::span_id(f.id))
    }
    fn device(&self) -> &str {
        &self.0.device
    }
    fn emit(&self, event: TraceEvent) {
        if matches!(event, TraceEvent::DeviceMemory(_)) {
            self.0.counts.device_memory.fetch_add(1, Ordering::Relaxed);
        }
        self.0.send_event(event);
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
    ///
    /// A `device_memory` checkpoint is written at both edges: the driver's numbers on a CUDA
    /// device (feature `cuda`), else host memory (the counting allocator's live bytes when it
    /// is installed, the process's resident set otherwise; none where neither is known).
    pub fn step(&self, step: Step) -> SpanGuard<'_> {
        if !self.inner.is_recording() {
            return SpanGuard::inert();
        }
        let sync = self.inner.nested_sync();
        self.inner.checkpoint();
        SpanGuard::open(
            &self.inner,
            Cow::Borrowed(step_str(step)),
            SpanKind::Function,
            false,
            Some(step),
            sync,
        )
        .with_checkpoint()
    }

    /// Route the program's `tracing` spans into this recorder: installs
    /// [`CaptureSubscriber`](crate::subscriber::CaptureSubscriber) as the global subscriber
    /// (once per process). Call it **before building the model**: candle-transformers creates
    /// its spans when the model is built. See [`crate::subscriber`].
    pub fn install(&self) -> Result<(), CaptureError> {
        crate::subscriber::install()?;
        self.inner.tracing_routed.store(true, Ordering::Relaxed);
        crate::subscriber::attach_recorder(Arc::clone(&self.inner));
        Ok(())
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
        let warnings = inner.capture_warnings();
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
    use candle_trace_schema::events::{decode_line, SpanEnd, SpanStart};
    use proptest::prelude::*;

    fn encoded(r: &Record) -> String {
        let mut out = Vec::new();
        r.encode(&mut out, &mut HostBlocks::default());
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
