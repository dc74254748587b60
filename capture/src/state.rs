//! The state every recording handle shares ([`Inner`]: configuration, gating flags, the writer,
//! per-source counts) and the host-memory hook the allocator calls ([`HostSink`]); the records
//! it sends the writer are [`crate::record`]'s. Its own module, below the [`Recorder`](crate::Recorder) API,
//! the span guards, the gating, the tracing layer and the candle helpers, which all use it and
//! none of which it uses.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use candle_trace_schema::format::events::{
    source, CaptureSource, CaptureSources, Pass, SpanKind, TensorCategory, TimingMode, TraceEvent,
};

use crate::alloc::HostSink;
use crate::intern::{Label, NameTable};
use crate::record::{Checkpoint, NamedSpanStart, Record, WideHostAlloc};
use crate::stack as span;
use crate::sync::{DeviceSync, SpanTimer, TimerMark};
use crate::writer::Writer;

/// Source of recorder keys for the per-thread span stacks.
static NEXT_RECORDER: AtomicU64 = AtomicU64::new(1);

/// The shared state behind every clone of a [`Recorder`].
pub(crate) struct Inner {
    /// Distinguishes this recorder's per-thread span stacks from other recorders'.
    pub(crate) key: u64,
    pub(crate) recording: AtomicBool,
    /// The clock of every timestamp: the CPU's time-stamp counter where it is invariant
    /// (quanta calibrates it against the OS monotonic clock once per process), else the OS
    /// monotonic clock. A span reads it twice; on a virtual machine `Instant::now()` may go
    /// through the hypervisor's clock, which a TSC read does not.
    pub(crate) clock: quanta::Clock,
    /// `clock.raw()` when the recorder was built: time zero of the trace.
    pub(crate) start: u64,
    pub(crate) run_id: String,
    pub(crate) device: String,
    pub(crate) capture_step: u64,
    pub(crate) steps_begun: AtomicU64,
    pub(crate) capture_ended: AtomicBool,
    /// Span numbers not yet handed to any thread (see [`span::ID_BLOCK`]).
    pub(crate) next_span: AtomicU64,
    pub(crate) measured_used: AtomicBool,
    pub(crate) timing_mode: TimingMode,
    pub(crate) sync: Option<Arc<dyn DeviceSync>>,
    /// Times nested spans on the device (CUDA events), when given.
    pub(crate) timer: Option<Arc<dyn SpanTimer>>,
    pub(crate) notes: Mutex<Vec<String>>,
    pub(crate) finished: AtomicBool,
    pub(crate) writer: Writer<Record>,
    /// The names of this recorder's spans (the writer thread holds it too).
    pub(crate) names: Arc<NameTable>,
    /// Events each instrumentation source gave (the `capture_sources` line).
    pub(crate) counts: SourceCounts,
    /// Host allocations of at least this many bytes are written one by one (see `alloc`).
    pub(crate) host_threshold_bytes: u64,
    /// Whether this recorder is the allocator's host sink now.
    pub(crate) host_attached: AtomicBool,
    /// Whether `install` routed tracing spans to this recorder.
    pub(crate) tracing_routed: AtomicBool,
    /// Whether this recorder's captured step counts in the subscriber's active consumers.
    pub(crate) subscriber_active: AtomicBool,
    /// The `capture_sources` line, handed to the writer thread at `finish`.
    pub(crate) closing: Arc<Mutex<Option<Vec<u8>>>>,
    /// The training step begun by `Recorder::forward` and ended by `optimizer_step`.
    #[cfg_attr(not(feature = "candle"), allow(dead_code))] // only the candle helpers drive it
    pub(crate) train: Mutex<Option<TrainStep>>,
    /// Reads candle's tensor-id counter (feature `candle`): tensors created inside a span have
    /// ids between its readings at open and close.
    pub(crate) tensor_clock: Option<fn() -> Option<u64>>,
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
    /// Spans written with a module name.
    pub(crate) module_names: AtomicU64,
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
    /// The table the writer's [`HostBlocks`] was given.
    pub(crate) names: Arc<NameTable>,
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
            names: parts.names,
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

    pub(crate) fn synchronize(&self) {
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
    /// thread's innermost span as the recorded parent (the tracing layer's span tree);
    /// `module` is the module the span runs, when its layer was named by its weights.
    #[allow(clippy::too_many_arguments)] // the fields of one span
    pub(crate) fn open_span(
        &self,
        name: Cow<'static, str>,
        module: Option<&'static str>,
        kind: SpanKind,
        measured: bool,
        pass: Option<Pass>,
        parent: Option<u64>,
        sync: bool,
    ) -> (u64, u64) {
        let static_name = match &name {
            Cow::Borrowed(name) => Some(Label { name, module }),
            Cow::Owned(_) => None,
        };
        let pushed = span::push(self.key, &self.next_span, pass, static_name, &self.names);
        let id = pushed.frame.id;
        if sync {
            self.synchronize();
        }
        let start_ns = self.now_ns();
        let parent = parent.or(pushed.parent.map(|f| f.id));
        let pass = pushed.frame.pass;
        if module.is_some() {
            self.counts.module_names.fetch_add(1, Ordering::Relaxed);
        }
        match pushed.name {
            Some(name) => self.writer.send_with(|| Record::SpanStart {
                id,
                parent: parent.unwrap_or(0),
                start_ns,
                name,
                kind,
                measured,
                pass,
            }),
            None => self
                .writer
                .send(Record::NamedSpanStart(Box::new(NamedSpanStart {
                    id,
                    parent,
                    name,
                    module,
                    start_ns,
                    kind,
                    measured,
                    pass,
                }))),
        }
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
        let duration_ns = device_ns.unwrap_or_else(|| end_ns.saturating_sub(start_ns));
        self.writer
            .send_with(|| Record::SpanEnd { id, duration_ns });
        end_ns
    }

    /// The `op` row of a leaf layer: a tracing span `name` (span number `id`) inside which no
    /// other span opened, timed by that span. Shape and dtype are unknown to tracing (empty).
    ///
    /// With the counting allocator on, its `storage_bytes` are the host bytes the layer
    /// allocated (in blocks of at least the threshold) and had not freed when it closed.
    pub(crate) fn leaf_op(&self, id: u64, name: &'static str, start_ns: u64, end_ns: u64) {
        // Only a thread being torn down, or a table of u32::MAX names, has no id for it.
        let Some(name) = span::intern(self.key, name, &self.names) else {
            self.writer.dropped_one();
            return;
        };
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
            self.writer.send(Record::HostCheckpoint(Checkpoint::new(
                self.now_ns(),
                live_bytes,
            )));
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
            // The lines of the step are encoded after it (or when a ring fills), not while it
            // runs: see `Writer::hold`.
            self.writer.hold(true);
            self.recording.store(true, Ordering::Release);
            // The subscriber's slow path only matters to a recorder it routes spans to.
            if self.tracing_routed.load(Ordering::Relaxed)
                && !self.subscriber_active.swap(true, Ordering::AcqRel)
            {
                crate::active::activate();
            }
        }
        (step, captured)
    }

    pub(crate) fn end_captured_step(&self) {
        if self.recording.swap(false, Ordering::AcqRel) {
            self.capture_ended.store(true, Ordering::Release);
        }
        self.writer.hold(false);
        if self.subscriber_active.swap(false, Ordering::AcqRel) {
            crate::active::deactivate();
        }
    }

    pub(crate) fn detach_host(&self) {
        if self.host_attached.swap(false, Ordering::AcqRel) {
            crate::alloc::detach_host_sink(self.key);
        }
    }

    /// The `capture_sources` line: each source, on or off, and how many events it gave.
    pub(crate) fn sources_line(&self, warnings: &[String], dropped: u64) -> String {
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
            source(
                source::MODULE_NAMES,
                crate::naming::used() || n(&c.module_names) > 0,
                n(&c.module_names),
            ),
        ];
        TraceEvent::CaptureSources(CaptureSources {
            sources,
            events_dropped: dropped,
            warnings: warnings.to_vec(),
        })
        .to_json_line()
    }

    /// Warnings about what the captured step did not see; `no_span_reason` says why a step
    /// may have seen no tracing span (the subscriber's guess, see `subscriber::no_span_reason`).
    pub(crate) fn capture_warnings(&self, no_span_reason: &str) -> Vec<String> {
        let mut warnings = Vec::new();
        let begun = self.steps_begun.load(Ordering::Relaxed);
        if begun >= self.capture_step
            && self.tracing_routed.load(Ordering::Relaxed)
            && self.counts.tracing_spans.load(Ordering::Relaxed) == 0
        {
            warnings.push(format!(
                "the captured step saw no tracing spans: {no_span_reason}"
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

impl HostSink for Inner {
    fn key(&self) -> u64 {
        self.key
    }

    fn threshold_bytes(&self) -> u64 {
        self.host_threshold_bytes
    }

    fn host_alloc(&self, ptr: u64, bytes: u64, span: u64, pass: Option<Pass>) {
        self.counts.host_memory.fetch_add(1, Ordering::Relaxed);
        let category = match pass {
            Some(Pass::Forward) => TensorCategory::Activation,
            Some(Pass::Backward) => TensorCategory::Gradient,
            Some(Pass::Optimizer) => TensorCategory::Optimizer,
            None => TensorCategory::Other,
        };
        let at_ns = self.now_ns();
        match u32::try_from(span) {
            Ok(span) => self.writer.send_with(|| Record::HostAlloc {
                ptr,
                bytes,
                at_ns,
                span,
                category,
            }),
            Err(_) => self
                .writer
                .send(Record::WideHostAlloc(Box::new(WideHostAlloc {
                    ptr,
                    bytes,
                    span,
                    at_ns,
                    category,
                }))),
        }
    }

    fn host_free(&self, ptr: u64, span: u64) {
        let at_ns = self.now_ns();
        self.writer
            .send_with(|| Record::HostFree { ptr, span, at_ns });
    }
}

/// A sink over a recorder that counts `device_memory` checkpoints (the CUDA probe emits
/// through `Sink`).
#[cfg(feature = "cuda")]
struct CountingSink<'a>(&'a Inner);

#[cfg(feature = "cuda")]
impl crate::sink::Sink for CountingSink<'_> {
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
