//! [`TraceLayer`]: `tracing` spans as trace/6 spans.
//!
//! candle's examples record with `tracing-chrome`'s layer, and candle-transformers instruments
//! its models with `tracing::span!` (`linear`, `attn`, `mlp` ...). This layer takes its place:
//!
//! ```
//! use candle_trace_capture::{Recorder, TraceLayer};
//! use tracing_subscriber::layer::SubscriberExt;
//!
//! let recorder = Recorder::builder("Model::forward").capture_step(1).writer(std::io::sink()).build()?;
//! let subscriber = tracing_subscriber::registry().with(TraceLayer::new(recorder.clone()));
//! tracing::subscriber::with_default(subscriber, || {
//!     let _step = recorder.begin_step();
//!     let _total = recorder.measured("forward");
//!     let _attn = tracing::trace_span!("attn").entered(); // recorded, parent `forward`
//! });
//! recorder.finish()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Each enter/exit pair of a tracing span during the captured step becomes one trace/6 span
//! (a span entered twice is two spans, like `tracing-chrome`'s default threaded mode), named
//! after the tracing span. Its parent is the tracing parent's open trace/6 span when the parent
//! was recorded, else the innermost recorder span on the thread; recorder spans opened inside
//! it nest under it. The kind is `module` when [`looks_like_module`] (or the rule given to
//! [`TraceLayer::with_module_rule`]) says so, else `function`. Outside the captured step
//! `on_enter` costs one atomic load, and `on_exit` one more when no layer span is open.

use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};

use candle_trace_schema::format::events::SpanKind;
use tracing::span::Id;
use tracing::{Metadata, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use crate::naming::ModuleSlot;
use crate::recorder::Recorder;

use crate::names::looks_like_module;

/// A `tracing_subscriber` layer that records tracing spans into a [`Recorder`] during the
/// captured step. See the [module docs](self).
pub struct TraceLayer {
    recorder: Recorder,
    module_rule: fn(&Metadata<'_>) -> bool,
    /// Spans this layer opened and has not closed yet: lets `on_exit` skip the span lookup.
    open: AtomicUsize,
}

impl std::fmt::Debug for TraceLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceLayer")
            .field("recorder", &self.recorder)
            .finish_non_exhaustive()
    }
}

/// The trace/6 spans open for one tracing span (one per active enter), innermost last. One
/// tracing span can be entered on several threads at once: each exit closes the latest enter
/// of its own thread.
struct Entered(Vec<OpenEntry>);

impl Entered {
    /// The latest enter on this thread, else the latest anywhere (a parent entered on another
    /// thread still names the span it is in).
    fn latest(&self, thread: std::thread::ThreadId) -> Option<&OpenEntry> {
        self.0
            .iter()
            .rev()
            .find(|o| o.thread == thread)
            .or(self.0.last())
    }

    /// Take the latest enter on `thread`.
    fn take(&mut self, thread: std::thread::ThreadId) -> Option<OpenEntry> {
        let at = self.0.iter().rposition(|o| o.thread == thread)?;
        Some(self.0.remove(at))
    }
}

/// The module a tracing span runs ([`crate::naming`]), kept in the span's extensions.
struct Named(&'static ModuleSlot);

struct OpenEntry {
    /// The thread that entered (and so must exit).
    thread: std::thread::ThreadId,
    id: u64,
    start_ns: u64,
    sync: bool,
    mark: Option<crate::sync::TimerMark>,
}

impl TraceLayer {
    /// A layer recording into `recorder`, with [`looks_like_module`] as the kind rule.
    pub fn new(recorder: Recorder) -> Self {
        recorder
            .inner
            .tracing_routed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        TraceLayer {
            recorder,
            module_rule: looks_like_module,
            open: AtomicUsize::new(0),
        }
    }

    /// Use `rule` instead of [`looks_like_module`] to decide which spans are modules.
    #[must_use]
    pub fn with_module_rule(mut self, rule: fn(&Metadata<'_>) -> bool) -> Self {
        self.module_rule = rule;
        self
    }
}

impl<S> Layer<S> for TraceLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &tracing::span::Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let field = crate::subscriber::module_field(attrs);
        let Some(slot) = crate::naming::span_created(attrs.metadata().name(), field.as_deref())
        else {
            return;
        };
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Named(slot));
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        let inner = &self.recorder.inner;
        if !inner.is_recording() {
            return;
        }
        let Some(span) = ctx.span(id) else {
            return;
        };
        let thread = std::thread::current().id();
        let parent = span.parent().and_then(|p| {
            p.extensions()
                .get::<Entered>()
                .and_then(|e| e.latest(thread).map(|o| o.id))
        });
        let metadata = span.metadata();
        let named = span.extensions().get::<Named>().map(|n| n.0);
        let module = named.and_then(ModuleSlot::get);
        let kind = if named.is_some() || (self.module_rule)(metadata) {
            SpanKind::Module
        } else {
            SpanKind::Function
        };
        let sync = inner.nested_sync();
        let (sid, start_ns) = inner.open_span(
            Cow::Borrowed(metadata.name()),
            module,
            kind,
            false,
            None,
            parent,
            sync,
        );
        inner.counts.tracing_spans.fetch_add(1, Ordering::Relaxed);
        let entry = OpenEntry {
            thread,
            id: sid,
            start_ns,
            sync,
            mark: inner.timer_start(),
        };
        let mut extensions = span.extensions_mut();
        match extensions.get_mut::<Entered>() {
            Some(entered) => entered.0.push(entry),
            None => extensions.insert(Entered(vec![entry])),
        }
        self.open.fetch_add(1, Ordering::Relaxed);
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if self.open.load(Ordering::Relaxed) == 0 {
            return;
        }
        let Some(span) = ctx.span(id) else {
            return;
        };
        let thread = std::thread::current().id();
        let entry = span
            .extensions_mut()
            .get_mut::<Entered>()
            .and_then(|e| e.take(thread));
        if let Some(entry) = entry {
            self.open.fetch_sub(1, Ordering::Relaxed);
            self.recorder
                .inner
                .close_span_timed(entry.id, entry.start_ns, entry.sync, entry.mark);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;

    fn kind_of(span: tracing::Span) -> bool {
        span.metadata().map(looks_like_module).unwrap()
    }

    #[test]
    fn module_rule_reads_names_and_targets() {
        // A subscriber must be set for spans to carry metadata.
        let subscriber = tracing_subscriber::registry();
        tracing::subscriber::with_default(subscriber, || {
            assert!(kind_of(tracing::span!(Level::TRACE, "self-attn")));
            assert!(kind_of(tracing::span!(Level::TRACE, "layer-norm")));
            assert!(kind_of(tracing::span!(Level::TRACE, "Linear")));
            assert!(kind_of(tracing::span!(Level::TRACE, "mlp")));
            assert!(kind_of(
                tracing::span!(target: "candle_nn::ops", Level::TRACE, "softmax")
            ));
            assert!(kind_of(tracing::span!(Level::TRACE, "self-out")));
            // BERT's `inter` holds one named layer and an activation: as a module it would take
            // that layer's name and its time the activation's.
            assert!(!kind_of(tracing::span!(Level::TRACE, "inter")));
            assert!(!kind_of(tracing::span!(Level::TRACE, "outer")));
            assert!(!kind_of(tracing::span!(Level::TRACE, "hidden-act")));
            assert!(!kind_of(tracing::span!(Level::TRACE, "rot")));
            assert!(!kind_of(tracing::span!(Level::TRACE, "qmatmul")));
            assert!(!kind_of(tracing::span!(Level::TRACE, "cache-kv")));
        });
    }
}
