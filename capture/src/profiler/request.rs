//! [`RequestHandle`]: one request being profiled, and the forward calls it runs on its own.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use candle_trace_schema::format::profile::{
    DecodeStage, DecodeStageInterval, DetailLevel, EngineTokenTiming, EventKind, MemorySnapshot,
    ProfileError, ResourceTraceEvent, Status,
};
use serde_json::Value;

use super::lines::{Attr, ForwardOf, Memory, Owner, Pending};
use super::{lock, thread_label, ProfilerInner};

/// One request being profiled, from [`InferenceProfiler::request_open`](super::InferenceProfiler::request_open) to
/// [`request_close`](RequestHandle::request_close). Inert when the request is not sampled.
///
/// Methods take `&self` (the state is behind a mutex), so token commits can be recorded
/// inside a [`decode_wave`](RequestHandle::decode_wave); the handle is `Send + Sync`.
#[derive(Debug)]
pub struct RequestHandle {
    pub(super) live: Option<Arc<Live>>,
}

pub(super) struct Live {
    pub(super) profiler: Arc<ProfilerInner>,
    pub(super) owner: Arc<Owner>,
    pub(super) state: Mutex<RequestState>,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("request_id", &self.owner.request_id)
            .finish_non_exhaustive()
    }
}

pub(super) struct RequestState {
    pub(super) timing: Option<EngineTokenTiming>,
    pub(super) waves: u64,
    /// Module spans written so far (their ids continue from here).
    pub(super) module_spans: u64,
    pub(super) closed: bool,
}

impl Live {
    /// An event of this request, numbered now.
    pub(super) fn event(
        &self,
        kind: EventKind,
        phase: impl Into<std::borrow::Cow<'static, str>>,
        status: Status,
        at: Instant,
    ) -> Box<Pending> {
        self.profiler.pending(&self.owner, kind, phase, status, at)
    }

    pub(super) fn ok(&self) -> Status {
        self.profiler.head.ok
    }

    /// Run `f` on the open request's state; nothing once closed or after `finish()`.
    pub(super) fn with_open(&self, f: impl FnOnce(&Live, &mut RequestState)) {
        if self.profiler.is_finished() {
            return;
        }
        let mut st = lock(&self.state);
        if !st.closed {
            f(self, &mut st);
        }
    }

    fn close(&self, error: Option<ProfileError>) {
        self.with_open(|live, st| {
            st.closed = true;
            let now = Instant::now();
            let status = if error.is_some() {
                Status::Failure
            } else {
                live.ok()
            };
            let start = live.owner.anchor.instant;
            let mut event = live.event(EventKind::TimedSpan, "request", status, start);
            event.duration = Some(now.saturating_duration_since(start));
            event.error = error.map(Box::new);
            event.timing = st.timing.take().map(Box::new);
            live.profiler.send(event);
        });
    }
}

impl RequestHandle {
    /// True when this request is sampled and still open.
    pub fn is_recording(&self) -> bool {
        self.live
            .as_ref()
            .is_some_and(|l| !l.profiler.is_finished() && !lock(&l.state).closed)
    }

    /// The request's id, when it is sampled (an inert handle keeps nothing).
    pub fn request_id(&self) -> Option<&str> {
        self.live.as_ref().map(|l| &*l.owner.request_id)
    }

    /// The prefill just finished and took `duration`: a `timed_span` of phase `prefill`.
    pub fn prefill(&self, duration: Duration) {
        let Some(live) = &self.live else { return };
        live.with_open(|live, _| {
            let now = Instant::now();
            let start = now
                .checked_sub(duration)
                .unwrap_or(live.owner.anchor.instant);
            let mut event = live.event(EventKind::TimedSpan, "prefill", live.ok(), start);
            event.duration = Some(duration);
            live.profiler.send(event);
        });
    }

    /// Run the prefill `forward` (the prompt through the model and the choice of the first
    /// token): a `timed_span` of phase `prefill` over it (attribute `thread`: the thread that
    /// ran it), the module spans it entered (detail `latency` and above; see
    /// [`RequestHandle::decode_step`]), with
    /// [`TrackingAllocator`](crate::alloc::TrackingAllocator) installed a host memory snapshot
    /// (detail `resource` and above: live bytes before and after, and the bytes before plus the
    /// largest growth of this thread's own allocations during the call) and, when it succeeds, one token commit at the moment it returned. Its
    /// result is returned unchanged. With [`device_sync`](super::ProfilerBuilder::device_sync),
    /// its start and end are read after a device synchronization.
    pub fn prefill_step<T, E>(&self, forward: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        self.forward_step(None, forward)
    }

    /// Run one decode `forward` (one token through the model and the choice of the next): a
    /// decode wave ([`decode_wave`](RequestHandle::decode_wave)), the module spans it entered
    /// and, when it succeeds, one token commit at its end.
    ///
    /// Module spans are `timed_span` events of phase `module` with attributes `span_id`
    /// (unique in the request), `parent_span_id` (absent at the top of a forward call),
    /// `name`, `module` (when the layer was named by its weights: [`crate::nn::name_modules`]),
    /// `span_kind`, `forward` (`prefill` / `decode`), `forward_index` (0 = prefill,
    /// n = n-th decode step), `start_nanos_since_request_start` and `duration_nanos`. The
    /// serving thread hands the writer thread the spans of a forward call as one item; their
    /// lines are made there.
    pub fn decode_step<T, E>(&self, forward: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        let wave = self.decode_wave();
        let index = wave.live.map(|(_, i)| i + 1);
        let result = self.forward_step(Some(index.unwrap_or(0)), forward);
        drop(wave);
        result
    }

    /// Run a forward call; `decode` is the decode step index (None = prefill).
    fn forward_step<T, E>(
        &self,
        decode: Option<u64>,
        forward: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        let Some(live) = self.live.as_ref().filter(|_| self.is_recording()) else {
            return forward();
        };
        let p = &live.profiler;
        let with_modules = p.detail >= DetailLevel::Latency;
        let memory = crate::alloc::installed() && p.detail >= DetailLevel::Resource;
        let phase = if decode.is_some() {
            "decode"
        } else {
            "prefill"
        };
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
            let (result, spans) = crate::subscriber::with_forward(forward);
            (result, Some(spans))
        } else {
            (forward(), None)
        };
        p.synchronize();
        let end = Instant::now();
        let snapshot = scope.map(|s| host_snapshot(before_bytes, s.finish()));
        let mut first_span = None;
        live.with_open(|live, st| {
            if let Some(snapshot) = snapshot {
                let mut event = live.event(EventKind::Memory, phase, live.ok(), end);
                event.memory = Some(snapshot);
                p.send(event);
            }
            if decode.is_none() {
                let mut event = live.event(EventKind::TimedSpan, "prefill", live.ok(), start);
                event.duration = Some(end.saturating_duration_since(start));
                event.attributes = vec![("thread", Attr::Shared(thread_label()))];
                p.send(event);
            }
            first_span = Some(st.module_spans);
            st.module_spans += spans.as_ref().map_or(0, |f| f.spans.len() as u64);
            if result.is_ok() {
                // The token was chosen when `forward` returned.
                let at = live.owner.since_start(end);
                if let Some(timing) = &mut st.timing {
                    timing.token_commit_nanos_since_request_start.push(at);
                }
            }
        });
        if let (Some(first), Some(spans)) = (first_span, spans) {
            p.send_spans(
                &live.owner,
                ForwardOf::Request { decode },
                first,
                end,
                spans,
            );
        }
        result
    }

    /// Decoding is ready to run now (`decode_ready_nanos_since_request_start`). Without this
    /// call, the first decode wave's start is used.
    pub fn decode_ready(&self) {
        let Some(live) = &self.live else { return };
        live.with_open(|live, st| {
            let at = live.owner.since_start(Instant::now());
            if let Some(timing) = &mut st.timing {
                timing.decode_ready_nanos_since_request_start = Some(at);
            }
        });
    }

    /// Start a decode wave; when the returned guard is dropped, a `timed_span` of phase
    /// `decode` (attribute `wave`: its zero-based index) is written, and with token timing the
    /// wave is a `decode_execution` interval.
    pub fn decode_wave(&self) -> DecodeWave<'_> {
        let start = Instant::now();
        let Some(live) = &self.live else {
            return DecodeWave { live: None, start };
        };
        let mut index = None;
        live.with_open(|live, st| {
            let at = live.owner.since_start(start);
            if let Some(timing) = &mut st.timing {
                timing
                    .decode_ready_nanos_since_request_start
                    .get_or_insert(at);
            }
            index = Some(st.waves);
            st.waves += 1;
        });
        DecodeWave {
            live: index.map(|i| (&**live, i)),
            start,
        }
    }

    /// Record a decode stage that ran from `start` to `end` (with token timing only).
    pub fn decode_stage(&self, stage: DecodeStage, start: Instant, end: Instant) {
        let Some(live) = &self.live else { return };
        live.with_open(|live, st| {
            let interval = DecodeStageInterval {
                stage,
                start_nanos_since_request_start: live.owner.since_start(start),
                end_nanos_since_request_start: live.owner.since_start(end),
            };
            if let Some(timing) = &mut st.timing {
                timing.decode_stage_intervals.push(interval);
            }
        });
    }

    /// One output token was committed now (with token timing only).
    pub fn record_token_commit(&self) {
        let now = Instant::now();
        let Some(live) = &self.live else { return };
        live.with_open(|live, st| {
            let at = live.owner.since_start(now);
            if let Some(timing) = &mut st.timing {
                timing.token_commit_nanos_since_request_start.push(at);
            }
        });
    }

    /// A memory snapshot taken during `phase` (detail `resource` and above).
    pub fn memory(&self, phase: &str, snapshot: MemorySnapshot) {
        let Some(live) = &self.live else { return };
        if live.profiler.detail < DetailLevel::Resource {
            return;
        }
        live.with_open(|live, _| {
            let mut event = live.event(
                EventKind::Memory,
                String::from(phase),
                live.ok(),
                Instant::now(),
            );
            event.memory = Some(Memory::Given(Box::new(snapshot)));
            live.profiler.send(event);
        });
    }

    /// A resource accounting step during `phase` (detail `resource` and above). A scheduler
    /// that owns the resource (a KV cache) records through a
    /// [`ResourcePool`](super::ResourcePool), which keeps its level and writes one such event
    /// per call.
    pub fn resource(&self, phase: &str, resource: ResourceTraceEvent) {
        self.resource_with(String::from(phase), |_| resource);
    }

    /// [`resource`](RequestHandle::resource), the event made from the request's id.
    pub(super) fn resource_with(
        &self,
        phase: String,
        make: impl FnOnce(&str) -> ResourceTraceEvent,
    ) {
        let Some(live) = &self.live else { return };
        if live.profiler.detail < DetailLevel::Resource {
            return;
        }
        live.with_open(|live, _| {
            let mut event = live.event(EventKind::Resource, phase, live.ok(), Instant::now());
            event.resource = Some(Box::new(make(&live.owner.request_id)));
            live.profiler.send(event);
        });
    }

    /// The request was preempted now (its KV cache given up, to be recomputed when it is
    /// scheduled again): an `instant` event of phase `preempted` with attribute `reason`.
    /// Record the blocks it gave back on the [`ResourcePool`](super::ResourcePool), and its
    /// recomputation as [`Forward::prefill_chunk`](super::Forward::prefill_chunk)s.
    pub fn preempted(&self, reason: &str) {
        let Some(live) = &self.live else { return };
        live.with_open(|live, _| {
            let mut event = live.event(EventKind::Instant, "preempted", live.ok(), Instant::now());
            event.attributes = vec![("reason", Value::from(reason).into())];
            live.profiler.send(event);
        });
    }

    /// An error during `phase`: an `error` event with status `failure`. `blocking` says whether
    /// it stopped the request (close it with [`request_fail`](RequestHandle::request_fail)).
    pub fn error(&self, phase: &str, kind: &str, message: &str, blocking: bool) {
        let Some(live) = &self.live else { return };
        live.with_open(|live, _| {
            let mut event = live.event(
                EventKind::Error,
                String::from(phase),
                Status::Failure,
                Instant::now(),
            );
            let mut error = ProfileError::new(kind, message);
            error.blocking = blocking;
            event.error = Some(Box::new(error));
            live.profiler.send(event);
        });
    }

    /// The engine token timing collected so far (`None` when inert, closed, or the detail
    /// level does not capture it).
    pub fn token_timing(&self) -> Option<EngineTokenTiming> {
        self.live
            .as_ref()
            .and_then(|l| lock(&l.state).timing.clone())
    }

    /// Close the request: a `timed_span` of phase `request` over the whole request, carrying
    /// the derived token-timing attributes.
    pub fn request_close(self) {
        if let Some(live) = &self.live {
            live.close(None);
        }
    }

    /// Close the request as failed with `kind` and `message` (a blocking error).
    pub fn request_fail(self, kind: &str, message: &str) {
        if let Some(live) = &self.live {
            let mut error = ProfileError::new(kind, message);
            error.blocking = true;
            live.close(Some(error));
        }
    }
}

/// The host memory snapshot of a forward call: live bytes before and after, and as the high
/// water the bytes before plus the largest growth of the calling thread's own allocations
/// during the call (`call`), at least the bytes after.
pub(super) fn host_snapshot(before_bytes: u64, call: crate::alloc::SpanAllocation) -> Memory {
    let after_bytes = crate::alloc::live_bytes();
    // No available bytes: `/proc/meminfo` would cost the serving thread a file read per token.
    Memory::Host {
        before: before_bytes,
        after: after_bytes,
        high_water: before_bytes
            .saturating_add(call.peak_growth_bytes)
            .max(after_bytes),
    }
}

impl Drop for RequestHandle {
    fn drop(&mut self) {
        if let Some(live) = &self.live {
            live.close(Some(ProfileError::new(
                "request_not_closed",
                "the request handle was dropped without request_close",
            )));
        }
    }
}

/// A decode wave in progress; see [`RequestHandle::decode_wave`].
#[must_use = "the wave ends when the guard is dropped"]
#[derive(Debug)]
pub struct DecodeWave<'h> {
    live: Option<(&'h Live, u64)>,
    start: Instant,
}

impl Drop for DecodeWave<'_> {
    fn drop(&mut self) {
        let Some((live, index)) = self.live else {
            return;
        };
        let start = self.start;
        live.with_open(|live, st| {
            let end = Instant::now();
            let interval = DecodeStageInterval {
                stage: DecodeStage::DecodeExecution,
                start_nanos_since_request_start: live.owner.since_start(start),
                end_nanos_since_request_start: live.owner.since_start(end),
            };
            if let Some(timing) = &mut st.timing {
                timing.decode_stage_intervals.push(interval);
            }
            let mut event = live.event(EventKind::TimedSpan, "decode", live.ok(), start);
            event.duration = Some(end.saturating_duration_since(start));
            event.attributes = vec![("wave", Attr::U64(index))];
            live.profiler.send(event);
        });
    }
}
