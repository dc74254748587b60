//! [`install`]: the one call that routes a program's `tracing` spans into candle-trace.
//!
//! candle-transformers instruments its models with `tracing` spans (`linear`, `attn`, `mlp`,
//! `rms-norm` ...) that it creates **when the model is built**: a subscriber installed after
//! `Llama::load` sees none of them. Call [`Recorder::install`](crate::Recorder::install) or
//! [`ProfilerBuilder::install`](crate::ProfilerBuilder::install) (or [`install`] itself)
//! before building the model.
//!
//! The installed subscriber is this crate's own ([`CaptureSubscriber`]), not a
//! `tracing_subscriber` registry: outside a captured step (or an inference request's forward
//! call) its work on entering a span is one relaxed atomic load and on exiting one more (plus
//! `tracing`'s own dispatch to it), where a registry-based layer pays the registry's
//! bookkeeping on every enter and exit. Inside them:
//! - with a [`Recorder`](crate::Recorder) recording, each enter/exit pair becomes one trace/6
//!   span nested by the thread's span stack (module spans per [`looks_like_module`]), and a
//!   span that opened no span inside it (a **leaf layer**: `linear`, `rms-norm`, `embedding`,
//!   `conv2d`, `qmatmul` ...) also becomes one `op` row named after it, timed by the span;
//! - with an inference request's forward call running on the thread (see
//!   [`RequestHandle::prefill`](crate::RequestHandle::prefill)), each pair becomes one module
//!   span of that request.
//!
//! A program that already has a global subscriber (a `tracing_subscriber::fmt` logger ...) can
//! add [`TraceLayer`](crate::TraceLayer) to it instead; `install` then returns
//! [`CaptureError::SubscriberTaken`].

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Instant;

use candle_trace_schema::format::events::SpanKind;
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

use crate::error::CaptureError;
use crate::names::looks_like_module;
use crate::naming::ModuleSlot;
use crate::routed::{Cache, Routed};
use crate::state::Inner;

/// Whether [`install`] has set the global subscriber.
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// The recorder that tracing spans go to.
static RECORDER: Routed<Inner> = Routed::new();
/// Span names by callsite, the index is in the low bits of every span [`Id`]. Only appended to.
/// A span named by its weights ([`crate::naming`]) gets an entry of its own, with its slot.
static CALLSITES: RwLock<Vec<Callsite>> = RwLock::new(Vec::new());
/// Source of the high bits of span ids, so that ids of live spans never collide.
static NEXT_SPAN: AtomicU64 = AtomicU64::new(1);

/// Bits of an [`Id`] that hold the callsite index + 1 (0 = unknown).
const CALLSITE_BITS: u32 = 20;

#[derive(Clone, Copy)]
struct Callsite {
    metadata: &'static Metadata<'static>,
    module: bool,
    /// The module the spans of this entry run (entries of named spans only).
    slot: Option<&'static ModuleSlot>,
}

/// One span entered on this thread while something was recording: 16 bytes, so that a stack
/// of them is a line or two of cache between a forward call's operations.
struct Entered {
    tracing_id: u64,
    /// Its index in the thread's inference forward buffer, or [`Entered::NO_MODULE`].
    module: u32,
    /// A trace/6 span was opened for it: its [`OpenTrace`] is on [`TRACES`], which holds one
    /// for each such entry of [`STACK`], in the same order.
    traced: bool,
    /// A span was entered inside it: it is not a leaf.
    has_child: bool,
}

impl Entered {
    const NO_MODULE: u32 = u32::MAX;

    fn module(&self) -> Option<u32> {
        (self.module != Self::NO_MODULE).then_some(self.module)
    }
}

/// The trace/6 span opened for an entered tracing span.
struct OpenTrace {
    /// The key of the recorder it opened in: its exit closes it there only (the route may
    /// have moved to another recorder, the next step's, in between).
    recorder: u64,
    id: u64,
    name: &'static str,
    start_ns: u64,
    sync: bool,
    /// The tensor clock when it opened (see `Inner::tensor_clock`).
    first_tensor: Option<u64>,
    /// The span timer's device mark, when the recorder has a timer.
    mark: Option<crate::sync::TimerMark>,
}

/// A module span of an inference forward call, as the serving thread records it: what it
/// measured and the callsite it ran, 32 bytes. Its name, module and kind are looked up from
/// the callsite on the writer thread ([`span_site`]); its id is its index in the forward
/// call's spans. Its times are [`span_clock`] readings (see [`ForwardSpans`]).
#[derive(Debug, Clone)]
pub(crate) struct ModuleSpan {
    pub(crate) start: u64,
    /// `None` while open (a span still open when the forward call ended).
    pub(crate) end: Option<u64>,
    /// The callsite's entry in [`CALLSITES`] + 1 (0: unknown), as in the span's [`Id`].
    pub(crate) site: u32,
    /// The index of the enclosing module span, or [`ModuleSpan::ROOT`].
    pub(crate) parent: u32,
}

impl ModuleSpan {
    /// The `parent` of a span entered in no other.
    pub(crate) const ROOT: u32 = u32::MAX;

    /// The index of the enclosing span, if any.
    pub(crate) fn parent(&self) -> Option<u64> {
        (self.parent != Self::ROOT).then_some(u64::from(self.parent))
    }
}

/// What a span's callsite says of it: its name, the module it runs (when its layer was named,
/// [`crate::naming`]) and its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SpanSite {
    pub(crate) name: &'static str,
    pub(crate) module: Option<&'static str>,
    pub(crate) kind: SpanKind,
}

/// The [`SpanSite`] of callsite entry `site` ([`ModuleSpan::site`]).
pub(crate) fn span_site(site: u32) -> SpanSite {
    match (site as usize).checked_sub(1).and_then(callsite) {
        Some(c) => SpanSite {
            name: c.metadata.name(),
            module: c.slot.and_then(ModuleSlot::get),
            kind: if c.module {
                SpanKind::Module
            } else {
                SpanKind::Function
            },
        },
        None => SpanSite {
            name: "span",
            module: None,
            kind: SpanKind::Function,
        },
    }
}

/// The module spans of one forward call, and the clock reading of its start beside the
/// monotonic clock's, to turn span times into `Instant`s.
#[derive(Debug, Clone)]
pub(crate) struct ForwardSpans {
    pub(crate) spans: Vec<ModuleSpan>,
    /// [`span_clock`]'s raw reading when the forward call started.
    pub(crate) raw_start: u64,
    /// `Instant::now()` read at the same moment.
    pub(crate) start: Instant,
}

#[cfg(test)]
impl ForwardSpans {
    /// The `Instant` of the [`span_clock`] reading `raw`.
    pub(crate) fn instant(&self, raw: u64) -> Instant {
        let after = if raw >= self.raw_start {
            span_clock().delta_as_nanos(self.raw_start, raw)
        } else {
            0
        };
        self.start + std::time::Duration::from_nanos(after)
    }
}

/// The clock of module spans: the CPU's time-stamp counter where it is invariant (quanta
/// calibrates it against the OS monotonic clock, once per process), else the OS monotonic
/// clock. A span reads it twice; `Instant::now()` cost about three times a TSC read there.
pub(crate) fn span_clock() -> &'static quanta::Clock {
    static CLOCK: std::sync::OnceLock<quanta::Clock> = std::sync::OnceLock::new();
    CLOCK.get_or_init(quanta::Clock::new)
}

thread_local! {
    /// This thread's copy of [`RECORDER`] (see [`crate::routed`]).
    static ROUTED: Cache<Inner> = const { RefCell::new(None) };
    /// This thread's copy of [`CALLSITES`], read again when a span's callsite is past its end.
    static LOCAL_CALLSITES: RefCell<Vec<Callsite>> = const { RefCell::new(Vec::new()) };
    static STACK: RefCell<Vec<Entered>> = const { RefCell::new(Vec::new()) };
    /// The trace/6 spans of the traced entries of [`STACK`], in the same order.
    static TRACES: RefCell<Vec<OpenTrace>> = const { RefCell::new(Vec::new()) };
    /// The module spans of the inference forward call running on this thread, if any.
    static FORWARD: RefCell<Option<Vec<ModuleSpan>>> = const { RefCell::new(None) };
    /// How many module spans this thread's last forward call had: the next one's vector is
    /// made that large at once (grown span by span, its copies cost a tenth of a span).
    static FORWARD_HINT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// Spans on [`STACK`] (mirrors its length): `exit` returns after one load of this
    /// thread's own counter when zero, reading no cache line that other threads write.
    static OPEN_HERE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// Inference forward calls running on this thread ([`with_forward`]): while any, `enter`
    /// records this thread's spans. A count of this thread's own, so that starting and ending
    /// a forward call writes no cache line that other serving threads read on every span.
    static FORWARDS_HERE: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Read or write a lock whatever a panic elsewhere left in it: the data stays consistent.
fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

/// `f` with the recorder tracing spans are routed to.
fn with_routed<R: Default>(f: impl FnOnce(Option<&Inner>) -> R) -> R {
    RECORDER.with(&ROUTED, true, f)
}

/// The callsite of index `i` in [`CALLSITES`], through this thread's copy.
fn callsite(i: usize) -> Option<Callsite> {
    LOCAL_CALLSITES
        .try_with(|local| {
            let mut local = local.try_borrow_mut().ok()?;
            if i >= local.len() {
                let global = read(&CALLSITES);
                let known = local.len();
                local.extend_from_slice(global.get(known..).unwrap_or_default());
            }
            local.get(i).copied()
        })
        .ok()
        .flatten()
        .or_else(|| read(&CALLSITES).get(i).copied())
}

/// The `tracing` subscriber [`install`] sets as the global default. See the module docs.
#[derive(Debug, Default)]
pub struct CaptureSubscriber {
    _private: (),
}

impl CaptureSubscriber {
    fn callsite_index(metadata: &'static Metadata<'static>) -> u64 {
        let plain = |c: &Callsite| std::ptr::eq(c.metadata, metadata) && c.slot.is_none();
        {
            let callsites = read(&CALLSITES);
            if let Some(i) = callsites.iter().position(plain) {
                return i as u64 + 1;
            }
        }
        let mut callsites = write(&CALLSITES);
        if let Some(i) = callsites.iter().position(plain) {
            return i as u64 + 1;
        }
        if callsites.len() + 1 >= (1 << CALLSITE_BITS) {
            return 0;
        }
        callsites.push(Callsite {
            metadata,
            module: looks_like_module(metadata),
            slot: None,
        });
        callsites.len() as u64
    }

    /// The entry of spans of `metadata` named by `slot` (a module always); `None` once the
    /// index bits are used up (the span is then recorded unnamed).
    fn named_index(metadata: &'static Metadata<'static>, slot: &'static ModuleSlot) -> Option<u64> {
        let same = |c: &Callsite| {
            std::ptr::eq(c.metadata, metadata) && c.slot.is_some_and(|s| std::ptr::eq(s, slot))
        };
        let mut callsites = write(&CALLSITES);
        // The latest entries are the likeliest: a layer's span is created once per build.
        if let Some(i) = callsites.iter().rposition(same) {
            return Some(i as u64 + 1);
        }
        if callsites.len() + 1 >= (1 << CALLSITE_BITS) {
            return None;
        }
        callsites.push(Callsite {
            metadata,
            module: true,
            slot: Some(slot),
        });
        Some(callsites.len() as u64)
    }
}

/// The `module` field of a span being created, when its callsite has one.
pub(crate) fn module_field(span: &Attributes<'_>) -> Option<String> {
    let field = span.metadata().fields().field("module")?;
    struct Visit(tracing::field::Field, Option<String>);
    impl tracing::field::Visit for Visit {
        fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
            if *field == self.0 {
                self.1 = Some(value.to_owned());
            }
        }
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            if *field == self.0 && self.1.is_none() {
                self.1 = Some(format!("{value:?}"));
            }
        }
    }
    let mut visit = Visit(field, None);
    span.record(&mut visit);
    visit.1
}

/// Mark the innermost entered span as having a child.
fn mark_parent(stack: &mut [Entered]) {
    if let Some(top) = stack.last_mut() {
        top.has_child = true;
    }
}

impl Subscriber for CaptureSubscriber {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if metadata.is_span() {
            Self::callsite_index(metadata);
        }
        Interest::always()
    }

    fn enabled(&self, _metadata: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let metadata = span.metadata();
        let mut index = Self::callsite_index(metadata);
        let field = module_field(span);
        if let Some(slot) = crate::naming::span_created(metadata.name(), field.as_deref()) {
            index = Self::named_index(metadata, slot).unwrap_or(index);
        }
        let seq = NEXT_SPAN.fetch_add(1, Ordering::Relaxed);
        // Never zero: the sequence starts at 1 and is shifted up.
        Id::from_u64((seq << CALLSITE_BITS) | index)
    }

    fn record(&self, _span: &Id, _values: &Record<'_>) {}

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, _event: &Event<'_>) {}

    #[inline]
    fn enter(&self, span: &Id) {
        if !crate::active::any() && FORWARDS_HERE.try_with(std::cell::Cell::get).unwrap_or(0) == 0 {
            return;
        }
        enter_slow(span.into_u64());
    }

    #[inline]
    fn exit(&self, span: &Id) {
        // A span is exited on the thread that entered it (an entered guard is not `Send`).
        if OPEN_HERE.try_with(std::cell::Cell::get).unwrap_or(0) == 0 {
            return;
        }
        exit_slow(span.into_u64());
    }
}

#[cold]
fn enter_slow(tracing_id: u64) {
    // The low bits: fewer than `CALLSITE_BITS`.
    let site = (tracing_id & ((1 << CALLSITE_BITS) - 1)) as u32;
    let trace = with_routed(|recorder| {
        recorder.filter(|r| r.is_recording()).map(|inner| {
            let SpanSite { name, module, kind } = span_site(site);
            let sync = inner.nested_sync();
            let (id, start_ns) = inner.open_span(
                std::borrow::Cow::Borrowed(name),
                module,
                kind,
                false,
                None,
                None,
                sync,
            );
            inner.counts.tracing_spans.fetch_add(1, Ordering::Relaxed);
            OpenTrace {
                recorder: inner.key,
                id,
                name,
                start_ns,
                sync,
                first_tensor: inner.tensor_clock(),
                mark: inner.timer_start(),
            }
        })
    });
    let module_index = FORWARD
        .try_with(|forward| {
            let mut forward = forward.try_borrow_mut().ok()?;
            let spans = forward.as_mut()?;
            let parent = STACK
                .try_with(|stack| {
                    stack
                        .try_borrow()
                        .ok()?
                        .iter()
                        .rev()
                        .find_map(Entered::module)
                })
                .ok()
                .flatten()
                .unwrap_or(ModuleSpan::ROOT);
            spans.push(ModuleSpan {
                start: span_clock().raw(),
                end: None,
                site,
                parent,
            });
            // A forward call of more spans than `u32` counts records the rest unnamed.
            u32::try_from(spans.len() - 1).ok()
        })
        .ok()
        .flatten();
    if trace.is_none() && module_index.is_none() {
        return;
    }
    let _ = STACK.try_with(|stack| {
        let Ok(mut stack) = stack.try_borrow_mut() else {
            return;
        };
        let traced = trace.is_some_and(|open| {
            TRACES
                .try_with(|traces| traces.try_borrow_mut().map(|mut t| t.push(open)).is_ok())
                .unwrap_or(false)
        });
        mark_parent(&mut stack);
        stack.push(Entered {
            tracing_id,
            module: module_index.unwrap_or(Entered::NO_MODULE),
            traced,
            has_child: false,
        });
        opened();
    });
}

#[cold]
fn exit_slow(tracing_id: u64) {
    let entered = STACK
        .try_with(|stack| {
            let mut stack = stack.try_borrow_mut().ok()?;
            let at = stack.iter().rposition(|e| e.tracing_id == tracing_id)?;
            let entered = stack.remove(at);
            // Its trace span: after those of the traced entries below it.
            let open = entered.traced.then(|| {
                let k = stack[..at].iter().filter(|e| e.traced).count();
                TRACES
                    .try_with(|traces| {
                        let mut traces = traces.try_borrow_mut().ok()?;
                        (k < traces.len()).then(|| traces.remove(k))
                    })
                    .ok()
                    .flatten()
            });
            Some((entered, open.flatten()))
        })
        .ok()
        .flatten();
    let Some((entered, open)) = entered else {
        return;
    };
    closed();
    if let Some(open) = open {
        with_routed(|recorder| {
            // Entered in one step, exited in the next: the span stays open in its own step's
            // file (it was, when that step ended), not closed in another's.
            let Some(inner) = recorder.filter(|r| r.key == open.recorder) else {
                return;
            };
            if let (Some(first), Some(end)) = (open.first_tensor, inner.tensor_clock()) {
                inner.tensor_range(open.id, first, end);
            }
            let end_ns = inner.close_span_timed(open.id, open.start_ns, open.sync, open.mark);
            if !entered.has_child {
                inner.leaf_op(open.id, open.name, open.start_ns, end_ns);
            }
        });
    }
    if let Some(index) = entered.module() {
        let end = span_clock().raw();
        let _ = FORWARD.try_with(|forward| {
            if let Ok(mut forward) = forward.try_borrow_mut() {
                if let Some(span) = forward
                    .as_mut()
                    .and_then(|spans| spans.get_mut(index as usize))
                {
                    span.end = Some(end);
                }
            }
        });
    }
}

/// A span was pushed on this thread's stack.
fn opened() {
    let _ = OPEN_HERE.try_with(|n| n.set(n.get() + 1));
}

/// A span was taken off this thread's stack.
fn closed() {
    let _ = OPEN_HERE.try_with(|n| n.set(n.get().saturating_sub(1)));
}

/// Set [`CaptureSubscriber`] as the global default `tracing` subscriber (once per process;
/// later calls do nothing). Fails with [`CaptureError::SubscriberTaken`] when the program
/// already set another global subscriber.
pub fn install() -> Result<(), CaptureError> {
    if INSTALLED.load(Ordering::Acquire) {
        return Ok(());
    }
    static INSTALLING: Mutex<()> = Mutex::new(());
    let _once = INSTALLING.lock().unwrap_or_else(PoisonError::into_inner);
    if INSTALLED.load(Ordering::Acquire) {
        return Ok(());
    }
    tracing::subscriber::set_global_default(CaptureSubscriber::default())
        .map_err(|_| CaptureError::SubscriberTaken)?;
    INSTALLED.store(true, Ordering::Release);
    Ok(())
}

/// Why a captured step saw no tracing span, as far as the subscriber can tell, and the fix.
pub(crate) fn no_span_reason() -> &'static str {
    let created = NEXT_SPAN.load(Ordering::Relaxed) > 1;
    let transformers = read(&CALLSITES)
        .iter()
        .any(|c| c.metadata.target().starts_with("candle_transformers"));
    match (installed(), created, transformers) {
        (true, false, true) => {
            "the model was built before candle-trace was installed: install it before building \
             the model (candle-transformers creates its spans when the model is built)"
        }
        (true, _, false) => {
            "the model's layers open no tracing spans (candle-nn's own layers open none): build \
             them with candle_trace_capture::nn::{linear, conv2d, embedding, layer_norm, \
             rms_norm, ...}, or open spans of your own around its blocks"
        }
        _ => {
            "install candle-trace before building the model (candle-transformers creates its \
             spans when the model is built); candle-nn's own layers open no spans: build them \
             with candle_trace_capture::nn::{linear, conv2d, ...}"
        }
    }
}

/// Whether [`install`] has set the global subscriber.
pub fn installed() -> bool {
    INSTALLED.load(Ordering::Acquire)
}

/// Route tracing spans to `inner` (replacing any recorder routed before).
pub(crate) fn attach_recorder(inner: Arc<Inner>) {
    let old = RECORDER.update(|slot| slot.replace(inner));
    drop(old);
}

/// Stop routing tracing spans to the recorder `key`, if it is the one attached.
pub(crate) fn detach_recorder(key: u64) {
    let old = RECORDER.update(|slot| {
        if slot.as_ref().is_some_and(|r| r.key == key) {
            slot.take()
        } else {
            None
        }
    });
    drop(old);
}

/// Collect the module spans of an inference forward call run by `f` on this thread.
pub(crate) fn with_forward<R>(f: impl FnOnce() -> R) -> (R, ForwardSpans) {
    let hint = FORWARD_HINT.try_with(std::cell::Cell::get).unwrap_or(0);
    let outer = FORWARD
        .try_with(|forward| {
            forward
                .try_borrow_mut()
                .ok()
                .map(|mut fw| fw.replace(Vec::with_capacity(hint)))
        })
        .ok()
        .flatten();
    let clock = span_clock();
    let (raw_start, start) = (clock.raw(), Instant::now());
    let _ = FORWARDS_HERE.try_with(|n| n.set(n.get() + 1));
    // Restored on the way out, by a panic in `f` too: left counted, every later span of the
    // thread went through the slow path, and its spans piled up in a forward call that had
    // ended.
    let mut restore = ForwardRestore {
        outer: Some(outer.flatten()),
    };
    let result = f();
    let spans = restore.restore().unwrap_or_default();
    let _ = FORWARD_HINT.try_with(|h| h.set(spans.len()));
    (
        result,
        ForwardSpans {
            spans,
            raw_start,
            start,
        },
    )
}

/// What [`with_forward`] puts back when it ends, however it ends.
struct ForwardRestore {
    /// The enclosing forward call's spans (`Some(None)`: none); `None` once restored.
    outer: Option<Option<Vec<ModuleSpan>>>,
}

impl ForwardRestore {
    /// Uncount the forward call and put the enclosing spans back; returns this call's spans
    /// (once).
    fn restore(&mut self) -> Option<Vec<ModuleSpan>> {
        let outer = self.outer.take()?;
        let _ = FORWARDS_HERE.try_with(|n| n.set(n.get().saturating_sub(1)));
        FORWARD
            .try_with(|forward| {
                forward
                    .try_borrow_mut()
                    .ok()
                    .and_then(|mut fw| std::mem::replace(&mut *fw, outer))
            })
            .ok()
            .flatten()
    }
}

impl Drop for ForwardRestore {
    fn drop(&mut self) {
        let _ = self.restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forward_call_that_panics_still_puts_things_back() {
        let forward_now = || FORWARD.with(|f| f.borrow().is_some());
        assert!(!forward_now());
        let caught = std::panic::catch_unwind(|| with_forward(|| panic!("in the model")));
        assert!(caught.is_err());
        // Left behind, this thread's later spans piled up in a forward call that had ended.
        assert!(!forward_now());
        // Nested: the inner call's panic puts the outer call's collection back.
        let ((), _) = with_forward(|| {
            let _ = std::panic::catch_unwind(|| with_forward(|| panic!("inner")));
            assert!(forward_now());
        });
        assert!(!forward_now());
    }

    #[test]
    fn ids_carry_their_callsite_and_never_collide() {
        let dispatch = tracing::Dispatch::new(CaptureSubscriber::default());
        tracing::dispatcher::with_default(&dispatch, || {
            let a = tracing::trace_span!("linear");
            let b = tracing::trace_span!("linear");
            let (ia, ib) = (a.id().unwrap().into_u64(), b.id().unwrap().into_u64());
            assert_ne!(ia, ib);
            let mask = (1 << CALLSITE_BITS) - 1;
            let name = |i: u64| read(&CALLSITES)[(i & mask) as usize - 1].metadata.name();
            assert_eq!(name(ia), "linear");
            assert_eq!(name(ib), "linear");
            assert!(read(&CALLSITES)[(ia & mask) as usize - 1].module);
        });
    }

    #[test]
    fn forward_calls_collect_nested_module_spans() {
        let dispatch = tracing::Dispatch::new(CaptureSubscriber::default());
        tracing::dispatcher::with_default(&dispatch, || {
            let block = tracing::trace_span!("block");
            let linear = tracing::trace_span!("linear");
            // Outside a forward call nothing is collected.
            let (_, none) = with_forward(|| ());
            assert!(none.spans.is_empty());
            let ((), forward) = with_forward(|| {
                let _b = block.enter();
                for _ in 0..2 {
                    let _l = linear.enter();
                }
            });
            let spans = &forward.spans;
            assert_eq!(spans.len(), 3);
            let named = |s: &ModuleSpan| (span_site(s.site).name, s.parent());
            assert_eq!(named(&spans[0]), ("block", None));
            assert_eq!(named(&spans[1]), ("linear", Some(0)));
            assert_eq!(named(&spans[2]), ("linear", Some(0)));
            assert_eq!(std::mem::size_of::<ModuleSpan>(), 32);
            assert!(spans.iter().all(|s| s.end.is_some_and(|e| e >= s.start)));
            assert!(forward.instant(spans[0].start) >= forward.start);
            assert!(STACK.with(|stack| stack.borrow().is_empty()));
            assert_eq!(std::mem::size_of::<Entered>(), 16);
            assert_eq!(OPEN_HERE.with(std::cell::Cell::get), 0);
            // The next forward call's vector is made as large as this one's was.
            let ((), next) = with_forward(|| {
                assert!(FORWARD.with(|f| f.borrow().as_ref().is_some_and(|v| v.capacity() >= 3)))
            });
            assert!(next.spans.is_empty());
        });
    }
}
