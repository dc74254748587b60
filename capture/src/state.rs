//! The state every recording handle shares ([`Inner`]: configuration, gating flags, the writer,
//! per-source counts), the records it writes ([`Record`]) and the host-memory hook the
//! allocator calls ([`HostSink`]). Its own module, below the [`Recorder`](crate::Recorder) API,
//! the span guards, the gating, the tracing layer and the candle helpers, which all use it and
//! none of which it uses.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use std::collections::HashMap;

use candle_trace_schema::format::events::line::{self, MemoryLine, OpLine, SpanStartLine, Text};
use candle_trace_schema::format::events::{
    source, CaptureSource, CaptureSources, MemoryAction, SpanKind, Step, TensorCategory,
    TimingMode, TraceEvent,
};

use crate::alloc::HostSink;
use crate::intern::{Label, NameId, NameTable, Names};
use crate::stack as span;
use crate::sync::{DeviceSync, SpanTimer, TimerMark};
use crate::writer::{Encode, Writer};

/// What the recorder queues for the writer thread: at most 32 bytes (checked below), so that
/// a span's two records fill one 64-byte cache line of the thread's ring. Spans are kept as
/// numbers and an interned name ([`NameId`]), so opening and closing a span allocates nothing on
/// the caller's thread; the writer thread turns them into the same lines serde would write.
pub(crate) enum Record {
    /// A `span_start` whose name (and module) is in the recorder's [`NameTable`].
    SpanStart {
        id: u64,
        /// The parent's number; 0 when the span has none (span numbers start at 1).
        parent: u64,
        start_ns: u64,
        name: NameId,
        kind: SpanKind,
        measured: bool,
        step: Option<Step>,
    },
    SpanEnd {
        id: u64,
        duration_ns: u64,
    },
    /// A `span_start` whose name is an owned string (not interned): boxed.
    NamedSpanStart(Box<NamedSpanStart>),
    /// Boxed so that the queue's slots stay small.
    Event(Box<TraceEvent>),
    /// A host allocation of at least the allocator threshold, on a thread whose innermost open
    /// span was `span` (see [`crate::alloc`]). Written as a `memory` `alloc` of tensor
    /// `host-N` (N counts the allocations of this trace).
    HostAlloc {
        ptr: u64,
        bytes: u64,
        at_ns: u64,
        /// The span's number, when it fits 32 bits (else [`Record::WideHostAlloc`]).
        span: u32,
        category: TensorCategory,
    },
    /// A [`Record::HostAlloc`] whose span number does not fit 32 bits: boxed.
    WideHostAlloc(Box<WideHostAlloc>),
    /// A leaf layer's `op` row (see [`Inner::leaf_op`]); kept as numbers and an interned name
    /// so that the captured layer allocates nothing, its output bytes filled in by the writer.
    LeafOp {
        span: u64,
        name: NameId,
        start_ns: u64,
        end_ns: u64,
    },
    /// A host `device_memory` checkpoint taken at `at_ns`: `used_bytes` = the counting
    /// allocator's live bytes, else the process's resident set, and `free_bytes` the OS's
    /// available memory, both read by the writer thread when it first sees the record (see
    /// [`Checkpoint`]).
    HostCheckpoint(Checkpoint),
    /// The free of a block recorded by [`Record::HostAlloc`]; written only when that alloc
    /// was (a block allocated before the captured step is not in the trace).
    HostFree {
        ptr: u64,
        span: u64,
        at_ns: u64,
    },
}

// A ring slot is one `Record`: keep a span (two records) within one cache line.
const _: () = assert!(std::mem::size_of::<Record>() <= 32);

/// A host checkpoint's numbers: `used_bytes` known at once when the counting allocator is
/// installed; the `/proc` readings (the resident set without the allocator, `MemAvailable`)
/// taken by the writer thread when it first sees the record: when it samples it in a held
/// ring ([`Encode::sample`]) or, when nothing is held, as it writes it (both within a poll
/// interval of `at_ns`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    pub(crate) at_ns: u64,
    /// [`Checkpoint::UNREAD`] until read; [`Checkpoint::UNREADABLE`] when the resident set
    /// could not be read (nothing is written then).
    used_bytes: u64,
    /// [`Checkpoint::UNREAD`] until read; [`Checkpoint::UNREADABLE`] where the OS does not say
    /// how much memory is available (nothing is written then: a 0 would be no measurement).
    free_bytes: u64,
}

impl Checkpoint {
    /// Not read yet (no machine has this many bytes).
    const UNREAD: u64 = u64::MAX;
    /// The reading failed.
    const UNREADABLE: u64 = u64::MAX - 1;

    /// A checkpoint at `at_ns` whose used bytes are `live_bytes` when the allocator counts them.
    pub(crate) fn new(at_ns: u64, live_bytes: Option<u64>) -> Self {
        Checkpoint {
            at_ns,
            // A count this large is not a count: read the resident set instead.
            used_bytes: live_bytes
                .filter(|&b| b < Self::UNREADABLE)
                .unwrap_or(Self::UNREAD),
            free_bytes: Self::UNREAD,
        }
    }

    /// Take the readings not taken yet (see the type's docs).
    pub(crate) fn sample(&mut self, meminfo: &mut crate::alloc::MemInfo) {
        if self.used_bytes == Self::UNREAD {
            self.used_bytes = crate::alloc::process_resident_bytes()
                .filter(|&b| b < Self::UNREADABLE)
                .unwrap_or(Self::UNREADABLE);
        }
        if self.free_bytes == Self::UNREAD {
            self.free_bytes = meminfo
                .available_bytes()
                .filter(|&b| b < Self::UNREADABLE)
                .unwrap_or(Self::UNREADABLE);
        }
    }

    /// The `device_memory` event, `None` when the used or the free bytes could not be read.
    pub(crate) fn event(mut self, meminfo: &mut crate::alloc::MemInfo) -> Option<TraceEvent> {
        self.sample(meminfo);
        (self.used_bytes != Self::UNREADABLE && self.free_bytes != Self::UNREADABLE).then(|| {
            TraceEvent::DeviceMemory(candle_trace_schema::format::events::DeviceMemory {
                timestamp_ns: self.at_ns,
                device: "cpu".to_string(),
                used_bytes: self.used_bytes,
                free_bytes: self.free_bytes,
                reserved_bytes: None,
            })
        })
    }
}

/// A `span_start` with an owned name (see [`Record::NamedSpanStart`]).
pub(crate) struct NamedSpanStart {
    pub(crate) id: u64,
    pub(crate) parent: Option<u64>,
    pub(crate) name: Cow<'static, str>,
    pub(crate) module: Option<&'static str>,
    pub(crate) start_ns: u64,
    pub(crate) kind: SpanKind,
    pub(crate) measured: bool,
    pub(crate) step: Option<Step>,
}

/// A host allocation with a span number above `u32::MAX` (see [`Record::WideHostAlloc`]).
pub(crate) struct WideHostAlloc {
    pub(crate) ptr: u64,
    pub(crate) bytes: u64,
    pub(crate) span: u64,
    pub(crate) at_ns: u64,
    pub(crate) category: TensorCategory,
}

/// A host block written as allocated and not yet freed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LiveBlock {
    /// Its trace id (`host-{id}`).
    id: u64,
    bytes: u64,
    span: u64,
    category: TensorCategory,
    /// When it was allocated.
    at_ns: u64,
    /// The pass over the rings ([`Encode::pass_done`]) that saw it displaced, for
    /// [`HostBlocks::displaced`].
    pass: u64,
}

/// A free seen before its block's alloc.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EarlyFree {
    span: u64,
    at_ns: u64,
    /// The pass over the rings that saw it.
    pass: u64,
}

/// What the writer thread remembers between records: the host blocks written as allocated and
/// not yet freed (by address).
///
/// The writer reads the threads' rings one after another, so when a block moves between
/// threads its alloc (in one ring) and its free (in another) can come in either order, and a
/// block allocated at a freed block's address can come before that free. A free whose alloc
/// has not come waits in [`early_frees`](Self::early_frees), and a block replaced at its
/// address by one allocated later waits in [`displaced`](Self::displaced), each for the rest
/// of its pass over the rings and the next: whatever another thread pushed before this
/// thread's record is in its ring by then.
#[derive(Default)]
pub(crate) struct HostBlocks {
    pub(crate) live: HashMap<u64, LiveBlock>,
    /// Blocks whose address a later-allocated block took before their free came.
    displaced: HashMap<u64, LiveBlock>,
    /// Frees whose alloc has not come yet.
    early_frees: HashMap<u64, EarlyFree>,
    /// Passes over the rings so far.
    pass: u64,
    /// Lines written by the last record beyond its first (see [`Encode::extra_lines`]).
    extra_lines: u64,
    /// Live bytes of the blocks each span allocated.
    pub(crate) by_span: HashMap<u64, u64>,
    pub(crate) next: u64,
    /// The recorder's device, for leaf-layer op rows.
    pub(crate) device: String,
    /// The recorder's span names, and the writer thread's copy of them.
    pub(crate) name_table: Arc<NameTable>,
    pub(crate) names: Names,
    /// `/proc/meminfo`, kept open for the host checkpoints' `free_bytes`.
    pub(crate) meminfo: crate::alloc::MemInfo,
}

impl HostBlocks {
    /// The state of a recorder on `device` whose spans intern their names in `name_table`.
    pub(crate) fn for_device(device: &str, name_table: Arc<NameTable>) -> Self {
        HostBlocks {
            device: device.to_string(),
            name_table,
            ..HostBlocks::default()
        }
    }

    pub(crate) fn add(&mut self, span: u64, bytes: u64) {
        *self.by_span.entry(span).or_default() += bytes;
    }

    pub(crate) fn remove(&mut self, span: u64, bytes: u64) {
        if let Some(live) = self.by_span.get_mut(&span) {
            *live = live.saturating_sub(bytes);
        }
    }
}

/// The `memory` line of host block `host-{id}` by hand: the same bytes serde writes for the
/// `TraceEvent::Memory` of [`host_memory_event`] (checked by a test in `recorder.rs`), without
/// building the event's strings on the writer thread.
pub(crate) fn host_memory_line(
    out: &mut Vec<u8>,
    id: u64,
    span: u64,
    at_ns: u64,
    bytes: u64,
    action: MemoryAction,
    category: TensorCategory,
) {
    line::memory(
        out,
        &MemoryLine {
            timestamp_ns: at_ns,
            tensor_id: Text::Numbered("host-", id),
            span_id: Text::Numbered("s", span),
            op_name: None,
            device: "cpu",
            bytes,
            action,
            shape: &[],
            dtype: "u8",
            category,
        },
    );
}

/// The event [`host_memory_line`] writes.
#[cfg(test)]
pub(crate) fn host_memory_event(
    id: u64,
    span: u64,
    at_ns: u64,
    bytes: u64,
    action: MemoryAction,
    category: TensorCategory,
) -> TraceEvent {
    TraceEvent::Memory(candle_trace_schema::format::events::MemoryEvent {
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

/// Write a `span_start` line with schema's line writer (byte for byte serde's; checked by a
/// test in `recorder.rs` too).
#[allow(clippy::too_many_arguments)] // the fields of one line
fn span_start_line(
    out: &mut Vec<u8>,
    id: u64,
    parent: Option<u64>,
    name: &str,
    start_ns: u64,
    kind: SpanKind,
    measured: bool,
    step: Option<Step>,
    module: Option<&str>,
) {
    line::span_start(
        out,
        &SpanStartLine {
            id: Text::Numbered("s", id),
            parent_id: parent.map(|p| Text::Numbered("s", p)),
            name,
            start_ns,
            span_kind: kind,
            measured,
            step,
            module,
        },
    );
}

/// The `memory` `alloc` line of a host block, remembered as live until its free.
fn host_alloc_line(
    out: &mut Vec<u8>,
    host: &mut HostBlocks,
    ptr: u64,
    bytes: u64,
    span: u64,
    at_ns: u64,
    category: TensorCategory,
) {
    host.next += 1;
    let block = LiveBlock {
        id: host.next,
        bytes,
        span,
        category,
        at_ns,
        pass: host.pass,
    };
    host_memory_line(
        out,
        block.id,
        span,
        at_ns,
        bytes,
        MemoryAction::Alloc,
        category,
    );
    // Its free came first (from another thread's ring): written now.
    if let Some(free) = host.early_frees.remove(&ptr) {
        if free.at_ns >= at_ns {
            let span = if free.span == 0 { span } else { free.span };
            out.push(b'\n');
            host.extra_lines += 1;
            host_memory_line(
                out,
                block.id,
                span,
                free.at_ns,
                bytes,
                MemoryAction::Free,
                category,
            );
            return;
        }
        // A free from before this block: of an earlier one this trace never saw.
    }
    match host.live.get(&ptr).copied() {
        // A block allocated later is live at this address already: this one came late and
        // waits for its own free beside it.
        Some(later) if later.at_ns > at_ns => {
            host.displaced.insert(ptr, block);
        }
        older => {
            // A block still live at this address was freed, and its free is yet to come (or
            // was never seen): it waits beside the new one, off its span's live bytes.
            if let Some(old) = older {
                host.remove(old.span, old.bytes);
                host.displaced.insert(
                    ptr,
                    LiveBlock {
                        pass: host.pass,
                        ..old
                    },
                );
            }
            host.add(span, bytes);
            host.live.insert(ptr, block);
        }
    }
}

/// A block freed at `ptr`: the live one, or the one displaced from there when the live one is
/// younger than the free; a free of neither waits for its alloc.
fn host_free_line(out: &mut Vec<u8>, host: &mut HostBlocks, ptr: u64, span: u64, at_ns: u64) {
    let live = host.live.get(&ptr).copied();
    let block = match live {
        Some(b) if b.at_ns <= at_ns => {
            host.live.remove(&ptr);
            host.remove(b.span, b.bytes);
            Some(b)
        }
        _ => match host.displaced.get(&ptr) {
            Some(b) if b.at_ns <= at_ns => host.displaced.remove(&ptr),
            _ => None,
        },
    };
    match block {
        Some(b) => {
            let span = if span == 0 { b.span } else { span };
            host_memory_line(
                out,
                b.id,
                span,
                at_ns,
                b.bytes,
                MemoryAction::Free,
                b.category,
            );
        }
        None => {
            let pass = host.pass;
            host.early_frees
                .insert(ptr, EarlyFree { span, at_ns, pass });
        }
    }
}

impl Encode for Record {
    type State = HostBlocks;
    crate::writer::local_rings!(Record);

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
                let label = host.names.label(*name, &host.name_table);
                let parent = (*parent != 0).then_some(*parent);
                span_start_line(
                    out,
                    *id,
                    parent,
                    label.name,
                    *start_ns,
                    *kind,
                    *measured,
                    *step,
                    label.module,
                );
            }
            Record::NamedSpanStart(s) => span_start_line(
                out, s.id, s.parent, &s.name, s.start_ns, s.kind, s.measured, s.step, s.module,
            ),
            Record::SpanEnd { id, duration_ns } => {
                line::span_end(out, Text::Numbered("s", *id), *duration_ns);
            }
            Record::Event(event) => {
                if !line::event(out, event) {
                    // Serializing these plain structs into a Vec<u8> cannot fail.
                    let _ = serde_json::to_writer(&mut *out, event.as_ref());
                }
            }
            Record::HostAlloc {
                ptr,
                bytes,
                at_ns,
                span,
                category,
            } => host_alloc_line(out, host, *ptr, *bytes, u64::from(*span), *at_ns, *category),
            Record::WideHostAlloc(a) => {
                host_alloc_line(out, host, a.ptr, a.bytes, a.span, a.at_ns, a.category)
            }
            Record::LeafOp {
                span: id,
                name,
                start_ns,
                end_ns,
            } => {
                let name = host.names.get(*name, &host.name_table);
                // Host blocks the layer allocated and had not freed when it closed: its
                // output (and anything else it kept). Absent when none was seen.
                let storage_bytes = host.by_span.remove(id).filter(|&b| b > 0);
                line::op(
                    out,
                    &OpLine::<&str> {
                        span_id: Text::Numbered("s", *id),
                        op_name: name,
                        inputs: &[],
                        output: None,
                        shape: &[],
                        dtype: "",
                        device: &host.device,
                        duration_ns: end_ns.saturating_sub(*start_ns),
                        timestamp_ns: *start_ns,
                        storage_bytes,
                        input_storage_bytes: 0,
                    },
                );
            }
            Record::HostCheckpoint(checkpoint) => {
                if let Some(event) = checkpoint.event(&mut host.meminfo) {
                    let _ = serde_json::to_writer(&mut *out, &event);
                }
            }
            Record::HostFree { ptr, span, at_ns } => host_free_line(out, host, *ptr, *span, *at_ns),
        }
    }

    /// A host checkpoint left in a held ring takes its `/proc` readings now, close to its
    /// time; every other record holds all it needs.
    fn sample(&mut self, host: &mut HostBlocks) {
        if let Record::HostCheckpoint(checkpoint) = self {
            checkpoint.sample(&mut host.meminfo);
        }
    }

    /// Early frees and displaced blocks wait out this pass and the next: after that, a free
    /// had no alloc in this trace (a block allocated before the captured step) and a
    /// displaced block's free was never seen.
    fn extra_lines(host: &mut HostBlocks) -> u64 {
        std::mem::take(&mut host.extra_lines)
    }

    fn pass_done(host: &mut HostBlocks) {
        let pass = host.pass;
        host.early_frees.retain(|_, f| f.pass == pass);
        host.displaced.retain(|_, b| b.pass == pass);
        host.pass += 1;
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
    /// monotonic clock. A span reads it twice; on the benchmark VMs `Instant::now()` goes
    /// through the hypervisor's clock and costs several times a TSC read.
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
        step: Option<Step>,
        parent: Option<u64>,
        sync: bool,
    ) -> (u64, u64) {
        let static_name = match &name {
            Cow::Borrowed(name) => Some(Label { name, module }),
            Cow::Owned(_) => None,
        };
        let pushed = span::push(self.key, &self.next_span, step, static_name, &self.names);
        let id = pushed.frame.id;
        if sync {
            self.synchronize();
        }
        let start_ns = self.now_ns();
        let parent = parent.or(pushed.parent.map(|f| f.id));
        let step = pushed.frame.step;
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
                step,
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
                    step,
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

    fn host_alloc(&self, ptr: u64, bytes: u64, span: u64, step: Option<Step>) {
        self.counts.host_memory.fetch_add(1, Ordering::Relaxed);
        let category = match step {
            Some(Step::Forward) => TensorCategory::Activation,
            Some(Step::Backward) => TensorCategory::Gradient,
            Some(Step::Optimizer) => TensorCategory::Optimizer,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::MemInfo;

    fn device_memory(event: Option<TraceEvent>) -> (u64, u64, u64) {
        match event {
            Some(TraceEvent::DeviceMemory(d)) => (d.timestamp_ns, d.used_bytes, d.free_bytes),
            other => panic!("expected device_memory, got {other:?}"),
        }
    }

    #[test]
    fn a_sampled_checkpoint_keeps_its_readings_until_it_is_written() {
        let mut meminfo = MemInfo::default();
        let mut sampled = Checkpoint::new(7, Some(4096));
        sampled.sample(&mut meminfo);
        // What the sample read is what is written, whatever the OS says at write time.
        sampled.free_bytes = 12_345;
        let mut again = sampled;
        again.sample(&mut meminfo);
        assert_eq!(device_memory(again.event(&mut meminfo)), (7, 4096, 12_345));
        // Unsampled, it reads at write time; the allocator's count is kept as given.
        if cfg!(target_os = "linux") {
            let (at, used, free) = device_memory(Checkpoint::new(9, Some(1)).event(&mut meminfo));
            assert_eq!((at, used), (9, 1));
            assert!(free > 0, "MemAvailable is read");
        }
        // Where the OS does not say what is free, nothing is written (not a 0).
        let mut unknown = Checkpoint::new(11, Some(1));
        unknown.free_bytes = Checkpoint::UNREADABLE;
        assert_eq!(unknown.event(&mut meminfo), None);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn without_the_allocator_a_checkpoint_reads_the_resident_set() {
        let mut meminfo = MemInfo::default();
        let (_, used, _) = device_memory(Checkpoint::new(1, None).event(&mut meminfo));
        assert!(used > 0, "VmRSS is read");
        // A record is one ring slot: checkpoint numbers live inline.
        assert!(std::mem::size_of::<Record>() <= 32);
    }
}
