//! # candle-trace-capture
//!
//! Writes candle-trace files from training and inference binaries: one representative
//! optimizer update or inference invocation as a `candle-graph/trace/6` execution trace
//! ([`Recorder`]), and inference requests as an inference profile ([`InferenceProfiler`]).
//!
//! ```
//! use candle_trace_capture::{Recorder, Sink};
//! use candle_trace_schema::format::document::TraceDocument;
//! use candle_trace_schema::format::events::Pass;
//! # use std::sync::{Arc, Mutex};
//! # #[derive(Clone, Default)]
//! # struct Shared(Arc<Mutex<Vec<u8>>>);
//! # impl std::io::Write for Shared {
//! #     fn write(&mut self, b: &[u8]) -> std::io::Result<usize> { self.0.lock().unwrap().extend_from_slice(b); Ok(b.len()) }
//! #     fn flush(&mut self) -> std::io::Result<()> { Ok(()) }
//! # }
//! # let out = Shared::default();
//!
//! // Usually `.path("trace.jsonl")`; here an in-memory writer.
//! let recorder = Recorder::builder("train::step")
//!     .warmup_steps(1) // capture the second step
//!     .tag("batch_size", "32")
//!     .writer(out.clone())
//!     .build()?;
//!
//! for _ in 0..3 {
//!     let _step = recorder.begin_step(); // only step 2 records
//!     let _total = recorder.measured("update");
//!     {
//!         let _fwd = recorder.pass(Pass::Forward);
//!         let _linear = recorder.module("Linear");
//!         // ... model code; candle helpers emit ops and memory through `Sink` ...
//!     }
//!     let _bwd = recorder.pass(Pass::Backward);
//! }
//! let report = recorder.finish()?;
//! assert_eq!(report.events_dropped, 0);
//!
//! let doc = TraceDocument::from_bytes(&out.0.lock().unwrap());
//! assert!(doc.diagnostics.is_empty());
//! assert_eq!(doc.summary().span_count, 4); // update, forward, Linear, backward
//! assert_eq!(doc.meta.unwrap().event.capture_step, 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # How it records
//!
//! - **Gating.** [`Recorder::begin_step`] counts steps; only the capture step sets the
//!   recording flag, and dropping its [`StepToken`] clears it. Outside the captured step every
//!   span guard, [`Sink::emit`] and tracing-layer call returns after one atomic load.
//!   [`RecorderBuilder::capture_steps`] captures several consecutive steps, one recorder and
//!   one trace/6 file per step ([`steps`]).
//! - **Spans** are RAII guards ([`SpanGuard`]): `span_start` on creation, `span_end` with
//!   `duration_ns` on drop, also during a panic unwind. Parents come from a per-thread stack, so
//!   spans nest correctly on every thread; ids are unique across threads.
//! - **Writing** never blocks the caller: each recording thread puts its events in a bounded
//!   ring of its own, drained by one background thread that writes whole lines into a buffered
//!   output, flushed at least every 100 ms, when asked ([`Recorder::flush`]) and at
//!   [`Recorder::finish`]. A full ring drops
//!   events and counts them; the count is in the [`CaptureReport`] and, only when it is not
//!   zero, in a last line `{"kind":"capture_stats","events_dropped":N,...}` that readers show
//!   as an unknown-kind warning, so the file itself says it is incomplete. The first I/O error
//!   is kept and returned by `finish()`; the training loop never sees it.
//! - **tracing.** [`Recorder::install`] (or [`RecorderBuilder::install`]) sets this crate's own
//!   `tracing` subscriber ([`subscriber`]) and routes spans entered during the captured step, on
//!   any thread, into the recorder; spans that open no span inside them (leaf layers) are also
//!   `op` rows. Install before building a candle-transformers model: it creates its spans in
//!   `load`. [`TraceLayer`] does the same inside a program's own `tracing_subscriber` registry.
//! - **Module names.** A model built from [`nn::name_modules`]`(vb)` has each layer's span
//!   named by the weights it loaded (`span_start.module`); [`nn`]'s constructors do the same for
//!   plain candle-nn layers, which open no span of their own.
//! - **Memory.** With [`alloc::TrackingAllocator`] as the global allocator, host blocks of at
//!   least [`RecorderBuilder::alloc_threshold_bytes`] allocated in a span during the captured
//!   step are `memory` events of that span; training-step spans write `device_memory`
//!   checkpoints at both edges.
//! - **What was captured.** `finish()` writes a `capture_sources` line: each source (tracing,
//!   layer ops, allocator, graph, device memory, gradients), on or off, with its event count,
//!   and the warnings also returned in [`CaptureReport::notes`] (a captured step that saw no
//!   tracing span, dropped events).
//!
//! # Choices where SCHEMA.md is silent
//!
//! - Span ids are `s1`, `s2` ... in opening order across all threads.
//! - A span without a `step` of its own inherits its parent's.
//! - [`Sink::emit`] outside the captured step is ignored; a `meta` passed to it is refused
//!   (the recorder writes the only meta line) and noted in the report.
//! - Only the first [`Recorder::measured`] call in a run records; later calls return an inert
//!   guard and are noted in the report.
//! - Spans still open at `finish()` stay unclosed in the file (readers warn).
//! - `timestamp` in the meta is the time the recorder was built, in UTC with nanoseconds.

pub mod error;
pub mod gating;
mod intern;
pub mod layer;
pub mod meta;
mod names;
mod naming;
pub mod profiler;
mod record;
pub mod recorder;
mod routed;
pub mod sink;
pub mod span;
mod stack;
mod state;
pub mod steps;
pub mod subscriber;
mod wallclock;
pub mod writer;

mod active;
pub mod alloc;
#[cfg(feature = "candle")]
pub mod candle;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "candle")]
pub mod nn;
#[cfg(feature = "otlp")]
pub mod otlp;
pub mod sync;

pub use error::CaptureError;
pub use gating::StepToken;
pub use layer::TraceLayer;
pub use meta::RecorderBuilder;
pub use names::looks_like_module;
pub use profiler::{InferenceProfiler, ProfileReport, ProfilerBuilder, RequestHandle};
pub use recorder::Recorder;
pub use sink::{Sink, VecSink};
pub use span::SpanGuard;
pub use steps::{StepRecorders, StepTokens};
pub use sync::DeviceSync;
pub use writer::CaptureReport;

pub use candle_trace_schema::format::events::{Pass, Phase, SpanKind, TensorCategory, TimingMode};
pub use candle_trace_schema::format::profile::{
    DetailLevel, Entrypoint, MemorySnapshot, ProfilingConfig,
};
pub use subscriber::{install, CaptureSubscriber};

/// Every type a training or serving program needs, in one `use`:
///
/// ```
/// use candle_trace_capture::prelude::*;
///
/// let recorder = Recorder::builder("train::step").writer(std::io::sink()).build()
///     .map_err(CaptureError::Build)?;
/// let profiler = InferenceProfiler::builder(ProfilingConfig {
///     detail: DetailLevel::Latency,
///     sample_rate: 1.0,
///     outputs: vec![],
/// });
/// # drop(profiler);
/// recorder.finish()?;
/// # Ok::<(), CaptureError>(())
/// ```
pub mod prelude {
    pub use crate::alloc::TrackingAllocator;
    #[cfg(feature = "candle")]
    pub use crate::candle::{
        events::timed_op, gradients::record_varmap_gradients, graph::record_graph,
    };
    #[cfg(feature = "candle")]
    pub use crate::nn::name_modules;
    pub use crate::{
        CaptureError, CaptureReport, DetailLevel, Entrypoint, InferenceProfiler, MemorySnapshot,
        Pass, Phase, ProfileReport, ProfilingConfig, Recorder, RequestHandle, Sink, SpanGuard,
        SpanKind, TensorCategory, TimingMode, TraceLayer,
    };
}
