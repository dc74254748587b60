//! [`Engine`]: forward calls that serve several requests at once (continuous batching, wave
//! batching, chunked prefill, speculative decoding), each recorded once.
//!
//! ```
//! use candle_trace_capture::InferenceProfiler;
//! use candle_trace_schema::format::profile::{read_profile, DetailLevel, ProfilingConfig};
//! # use std::sync::{Arc, Mutex};
//! # #[derive(Clone, Default)]
//! # struct Shared(Arc<Mutex<Vec<u8>>>);
//! # impl std::io::Write for Shared {
//! #     fn write(&mut self, b: &[u8]) -> std::io::Result<usize> { self.0.lock().unwrap().extend_from_slice(b); Ok(b.len()) }
//! #     fn flush(&mut self) -> std::io::Result<()> { Ok(()) }
//! # }
//! # let out = Shared::default();
//! let config = ProfilingConfig { detail: DetailLevel::Latency, sample_rate: 1.0, outputs: vec!["p.jsonl".into()] };
//! let profiler = InferenceProfiler::builder(config).writer(out.clone()).build()?;
//! let engine = profiler.engine("engine-0");
//! let shape = |n: u64| [(String::from("prompt_tokens"), n.into())].into_iter().collect();
//! let (a, b) = (profiler.request_open("a", shape(6)), profiler.request_open("b", shape(3)));
//! // One forward: a's whole prompt and b's first chunk; a's first token comes out of it.
//! engine.forward().prefill(&a, 6).prefill_chunk(&b, 2).run(|| Ok::<_, String>(()))?;
//! // Then a decodes while b finishes its prompt: one token each.
//! engine.forward().decode(&a).prefill(&b, 1).run(|| Ok::<_, String>(()))?;
//! a.request_close();
//! b.request_close();
//! profiler.finish()?;
//!
//! let doc = read_profile(&out.0.lock().unwrap());
//! assert!(doc.diagnostics.is_empty());
//! let iterations: Vec<_> = doc.records.iter().filter(|r| r.event.phase.as_deref() == Some("iteration")).collect();
//! assert_eq!(iterations.len(), 2);
//! assert_eq!(iterations[1].event.attributes["batch_size"], 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What a forward call writes
//!
//! [`Forward::run`] writes, besides what the forward call itself returns:
//! - one `timed_span` event of phase `iteration` (detail `basic` and above), owned by the
//!   engine: its `request_id` is the engine's id and its attributes say `engine` (that id,
//!   which marks every event of the engine as not a request's), `iteration` (0, 1, … per
//!   engine), `batch_size` (requests in it), `prefill_tokens`, `decode_tokens`,
//!   `committed_tokens` (sums over them), `duration_nanos`, `thread` (the thread that ran it)
//!   and `requests`: per sampled request `{request_id, prefill_tokens, decode_tokens,
//!   committed_tokens}`. A failed forward call has status `failure` and error kind
//!   `forward_failed`;
//! - its module spans (detail `latency` and above), once, owned by the engine: attributes as a
//!   request's (`span_id`, `parent_span_id`, `name`, `module`, `span_kind`,
//!   `duration_nanos`), with `engine`, `iteration` and `start_nanos_since_iteration_start`
//!   instead of `forward`, `forward_index` and `start_nanos_since_request_start`;
//! - with [`TrackingAllocator`](crate::alloc::TrackingAllocator) installed (detail `resource`
//!   and above), a host `memory` snapshot of phase `iteration`, owned by the engine;
//! - per request in it, at the forward call's end: its committed tokens (engine token timing,
//!   so its TTFT and ITL are what they are when it is served alone), and for a decode a
//!   `decode_execution` interval (the first one's start is its decode-ready time unless set).
//!   A request writes no event per forward call: the iteration lists it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use candle_trace_schema::format::profile::{
    DecodeStage, DecodeStageInterval, DetailLevel, EventKind, JsonMap, ProfileError,
    ResourceTraceEvent, Status,
};
use serde_json::Value;

use super::lines::{Attr, BatchEntry, ForwardOf, Owner};
use super::request::{host_snapshot, Live};
use super::resources::ResourcePool;
use super::{thread_label, ProfilerInner, RequestHandle};

/// An engine serving requests in batches. Made by
/// [`InferenceProfiler::engine`](super::InferenceProfiler::engine); inert (every call does
/// nothing beyond running the forward call) when the detail level is `off`. What a forward
/// call writes: [`Forward::run`].
#[derive(Debug)]
pub struct Engine {
    pub(super) inner: Option<Arc<EngineInner>>,
}

pub(super) struct EngineInner {
    profiler: Arc<ProfilerInner>,
    /// The engine's id and clock; its own events' `shape` is `{"engine": id}`.
    owner: Arc<Owner>,
    next_iteration: AtomicU64,
}

impl std::fmt::Debug for EngineInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineInner")
            .field("engine", &self.owner.request_id)
            .finish_non_exhaustive()
    }
}

impl EngineInner {
    fn recording(&self) -> bool {
        !self.profiler.is_finished()
    }

    /// An engine event (attribute `engine` set) queued now.
    fn event<const N: usize>(
        &self,
        owner: &Arc<Owner>,
        kind: EventKind,
        phase: &'static str,
        status: Status,
        at: Instant,
        attributes: [(&'static str, Attr); N],
    ) -> Box<super::lines::Pending> {
        self.profiler
            .engine_event(owner, kind, phase, status, at, attributes)
    }
}

impl Engine {
    pub(super) fn new(profiler: &Arc<ProfilerInner>, id: String) -> Engine {
        if profiler.detail == DetailLevel::Off || profiler.is_finished() {
            return Engine { inner: None };
        }
        let mut shape = JsonMap::new();
        shape.insert(String::from("engine"), Value::from(id.as_str()));
        let anchor = profiler.anchor_now();
        Engine {
            inner: Some(Arc::new(EngineInner {
                profiler: Arc::clone(profiler),
                owner: Arc::new(Owner::new(&profiler.head, id, shape, anchor)),
                next_iteration: AtomicU64::new(0),
            })),
        }
    }

    /// The engine's id (`None` when inert).
    pub fn id(&self) -> Option<&str> {
        self.inner.as_ref().map(|e| &*e.owner.request_id)
    }

    /// A forward call to compose: add each request's part, then [`run`](Forward::run) it.
    pub fn forward(&self) -> Forward<'_> {
        Forward {
            engine: self,
            entries: Vec::new(),
        }
    }

    /// The pool of a resource this engine's scheduler hands out (`kv_blocks` …) with
    /// `capacity` units: see [`ResourcePool`]. Writes a `capacity_snapshot`.
    pub fn resource_pool(&self, resource_kind: impl Into<String>, capacity: u64) -> ResourcePool {
        let engine = self
            .inner
            .as_ref()
            .map(|e| (Arc::clone(&e.profiler), Arc::clone(&e.owner)));
        ResourcePool::new(engine, resource_kind.into(), capacity)
    }

    /// A resource accounting step of the engine itself (not of a request; detail `resource`
    /// and above): a `resource` event owned by the engine.
    pub fn resource(&self, phase: &'static str, resource: ResourceTraceEvent) {
        let Some(engine) = self.inner.as_ref().filter(|e| e.recording()) else {
            return;
        };
        if engine.profiler.detail < DetailLevel::Resource {
            return;
        }
        let p = &engine.profiler;
        let mut event = engine.event(
            &engine.owner,
            EventKind::Resource,
            phase,
            p.head.ok,
            Instant::now(),
            [],
        );
        event.resource = Some(Box::new(resource));
        p.send(event);
    }
}

/// One request's part in a [`Forward`].
struct Entry {
    live: Option<Arc<Live>>,
    prefill_tokens: u64,
    decode_tokens: u64,
    commits: u64,
}

/// A forward call being composed; see [`Engine::forward`]. Entries are numbered in the order
/// they are added (for [`Accepted::set`]).
#[must_use = "a forward is recorded when it is run"]
#[derive(Debug)]
pub struct Forward<'e> {
    engine: &'e Engine,
    entries: Vec<Entry>,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("prefill_tokens", &self.prefill_tokens)
            .field("decode_tokens", &self.decode_tokens)
            .field("commits", &self.commits)
            .finish_non_exhaustive()
    }
}

/// How many tokens each request of a forward call committed: what each entry declared
/// (1 for [`Forward::prefill`] and [`Forward::decode`], 0 for [`Forward::prefill_chunk`], k
/// for [`Forward::decode_tokens`]) unless the forward call says otherwise (speculative
/// decoding: the draft tokens it accepted).
#[derive(Debug)]
pub struct Accepted {
    commits: Vec<u64>,
}

impl Accepted {
    /// Entry `entry` (numbered from 0 in the order added) committed `tokens` tokens.
    pub fn set(&mut self, entry: usize, tokens: u64) {
        if let Some(c) = self.commits.get_mut(entry) {
            *c = tokens;
        }
    }
}

impl<'e> Forward<'e> {
    fn add(mut self, request: &RequestHandle, prefill: u64, decode: u64, commits: u64) -> Self {
        self.entries.push(Entry {
            live: request.live.clone(),
            prefill_tokens: prefill,
            decode_tokens: decode,
            commits,
        });
        self
    }

    /// `tokens` prompt tokens of `request`, the last of its prompt: the forward call yields
    /// its first token.
    pub fn prefill(self, request: &RequestHandle, tokens: u64) -> Self {
        self.add(request, tokens, 0, 1)
    }

    /// `tokens` prompt tokens of `request` that do not end its prompt (chunked prefill, or the
    /// recomputation of a preempted request's cache): no token comes out.
    pub fn prefill_chunk(self, request: &RequestHandle, tokens: u64) -> Self {
        self.add(request, tokens, 0, 0)
    }

    /// One decode token of `request`: one token comes out.
    pub fn decode(self, request: &RequestHandle) -> Self {
        self.add(request, 0, 1, 1)
    }

    /// `tokens` decode tokens of `request` checked in one pass (speculative decoding: the
    /// drafts and the next position); `tokens` come out unless the forward call sets fewer
    /// through [`run_accepting`](Forward::run_accepting).
    pub fn decode_tokens(self, request: &RequestHandle, tokens: u64) -> Self {
        self.add(request, 0, tokens, tokens)
    }

    /// Run the forward call and record it; its result is returned unchanged. It writes one
    /// `timed_span` event of phase `iteration` owned by the engine (detail `basic` and above;
    /// attributes `engine`, `iteration`, `batch_size`, `prefill_tokens`, `decode_tokens`,
    /// `committed_tokens`, `duration_nanos`, `thread`, `requests`), its module spans once
    /// (detail `latency` and above), a host memory snapshot where the tracking allocator is
    /// installed (detail `resource` and above), and at its end each request's committed tokens
    /// (SCHEMA.md §4).
    pub fn run<T, E: std::fmt::Display>(
        self,
        forward: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        self.run_accepting(|_| forward())
    }

    /// [`run`](Forward::run) a forward call that says how many tokens each request committed.
    pub fn run_accepting<T, E: std::fmt::Display>(
        self,
        forward: impl FnOnce(&mut Accepted) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut accepted = Accepted {
            commits: self.entries.iter().map(|e| e.commits).collect(),
        };
        let Some(engine) = self.engine.inner.as_ref().filter(|e| e.recording()) else {
            return forward(&mut accepted);
        };
        let p = &engine.profiler;
        let with_modules = p.detail >= DetailLevel::Latency;
        let memory = crate::alloc::installed() && p.detail >= DetailLevel::Resource;
        // Summing every thread's counters reads lines other cores write: only when needed.
        let before_bytes = if memory {
            crate::alloc::live_bytes()
        } else {
            0
        };
        // This thread's own allocations: resetting the process-wide peak instead made every
        // serving thread's allocations contend for one cache line.
        let scope = memory.then(crate::alloc::AttributionScope::open);
        p.synchronize();
        let start = Instant::now();
        let (result, spans) = if with_modules {
            let (result, spans) = crate::subscriber::with_forward(|| forward(&mut accepted));
            (result, Some(spans))
        } else {
            (forward(&mut accepted), None)
        };
        p.synchronize();
        let end = Instant::now();
        let growth = scope.map(crate::alloc::AttributionScope::finish);
        let iteration = engine.next_iteration.fetch_add(1, Ordering::Relaxed);

        let mut batch = Vec::with_capacity(self.entries.len());
        let (mut prefill, mut decode, mut committed) = (0u64, 0u64, 0u64);
        for (entry, commits) in self.entries.iter().zip(&accepted.commits) {
            let commits = if result.is_ok() { *commits } else { 0 };
            prefill += entry.prefill_tokens;
            decode += entry.decode_tokens;
            committed += commits;
            let Some(live) = &entry.live else { continue };
            live.with_open(|live, st| {
                let Some(timing) = &mut st.timing else { return };
                if entry.decode_tokens > 0 {
                    let from = live.owner.since_start(start);
                    timing
                        .decode_ready_nanos_since_request_start
                        .get_or_insert(from);
                    timing.decode_stage_intervals.push(DecodeStageInterval {
                        stage: DecodeStage::DecodeExecution,
                        start_nanos_since_request_start: from,
                        end_nanos_since_request_start: live.owner.since_start(end),
                    });
                }
                let at = live.owner.since_start(end);
                for _ in 0..commits {
                    timing.token_commit_nanos_since_request_start.push(at);
                }
            });
            batch.push(BatchEntry {
                owner: Arc::clone(&live.owner),
                prefill_tokens: entry.prefill_tokens,
                decode_tokens: entry.decode_tokens,
                committed_tokens: commits,
            });
        }

        let batch_size = self.entries.len() as u64;
        let owner = Arc::new(engine.owner.for_forward(batch_size, prefill, decode));
        let duration = end.saturating_duration_since(start);
        let status = if result.is_ok() {
            p.head.ok
        } else {
            Status::Failure
        };
        let mut event = engine.event(
            &owner,
            EventKind::TimedSpan,
            "iteration",
            status,
            start,
            [
                ("iteration", Attr::U64(iteration)),
                ("batch_size", Attr::U64(batch_size)),
                ("prefill_tokens", Attr::U64(prefill)),
                ("decode_tokens", Attr::U64(decode)),
                ("committed_tokens", Attr::U64(committed)),
                ("duration_nanos", Attr::U64(super::lines::nanos(duration))),
                ("thread", Attr::Shared(thread_label())),
            ],
        );
        event.duration = Some(duration);
        event.batch = batch;
        if let Err(e) = &result {
            event.error = Some(Box::new(ProfileError::new("forward_failed", e.to_string())));
        }
        p.send(event);
        if let Some(growth) = growth {
            let mut event = engine.event(
                &owner,
                EventKind::Memory,
                "iteration",
                p.head.ok,
                end,
                [("iteration", Attr::U64(iteration))],
            );
            event.memory = Some(host_snapshot(before_bytes, growth));
            p.send(event);
        }
        if let Some(spans) = spans {
            p.send_spans(
                &owner,
                ForwardOf::Iteration { iteration, start },
                0,
                end,
                spans,
            );
        }
        result
    }
}
