//! [`InferenceProfiler`]: writes the inference profile (SCHEMA.md §2, schema_version 1).
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
//!
//! let config = ProfilingConfig {
//!     detail: DetailLevel::Latency,
//!     sample_rate: 1.0,
//!     outputs: vec!["profile.jsonl".into()],
//! };
//! let profiler = InferenceProfiler::builder(config)
//!     .backend("cpu")
//!     .runtime_preset_hash("sha256:0f")
//!     .writer(out.clone()) // instead of the config's outputs
//!     .build()?;
//! let mut shape = serde_json::Map::new();
//! shape.insert("prompt_tokens".into(), 12.into());
//! let request = profiler.request_open("r1", shape.into_iter().collect());
//! request.prefill(std::time::Duration::from_micros(800));
//! request.record_token_commit(); // first token
//! {
//!     let _wave = request.decode_wave();
//!     request.record_token_commit();
//! }
//! request.request_close();
//! profiler.finish()?;
//!
//! let doc = read_profile(&out.0.lock().unwrap());
//! assert!(doc.diagnostics.is_empty());
//! assert_eq!(doc.requests()[0].output_tokens, Some(2));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What each detail level records
//!
//! - `off`: nothing; no file is created and every handle is inert.
//! - `basic`: per sampled request, an `instant` `request_open` event (its attributes state the
//!   profiler's `detail_level` and `sample_rate`, so readers can show them), `timed_span` events for
//!   prefill (phase `prefill`) and each decode wave (phase `decode`), `error` events, and a
//!   closing `timed_span` of phase `request` whose `duration_us` is the whole request.
//! - `resource` and above: plus memory snapshots and resource accounting events.
//! - `latency kernel replay verify full` (those that capture engine token timing): the
//!   closing event also carries the attributes derived from the request's engine token timing
//!   ([`EngineTokenTiming::derived_attributes`]): TTFT, ITL and the decode wall.
//! - `kernel debug replay verify full` are diagnostic-only: every event that would be `ok` is
//!   written with status `diagnostic_only`.
//!
//! # Choices where SCHEMA.md is silent
//!
//! - Sampling is decided per request id, deterministically: a 64-bit FNV-1a hash of the id
//!   (finalized with splitmix64), mapped to [0, 1), is compared with the sample rate. The same
//!   id is sampled in every run and every process.
//! - Every event of a request carries the `shape` given to
//!   [`request_open`](InferenceProfiler::request_open) (§2 requires at least one entry).
//! - Times come from one `Instant` per request, anchored once to the wall clock when the
//!   request opens (`wall_anchor_max_error_nanos` is the width of the two monotonic reads that
//!   bracket the wall-clock read). A timed span's `ts_unix_nanos` is its start.
//! - `decode_ready` is the first decode wave's start unless set with
//!   [`RequestHandle::decode_ready`]; each decode wave is also a `decode_execution` interval.
//! - Every event is checked with [`validate_event`] before it is written; one that breaks a
//!   rule is not written, and is counted (with its first messages) in the [`ProfileReport`].
//! - A [`RequestHandle`] dropped without being closed closes the request as a `failure` with
//!   error kind `request_not_closed`.
//! - When the queue dropped events, a last line
//!   `{"schema_version":1,"event_kind":"capture_stats","events_dropped":N,...}` says so
//!   (readers skip an unknown `event_kind` with a warning).

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use candle_trace_schema::format::events::SpanKind;
use candle_trace_schema::format::profile::{
    validate_event, DecodeStage, DecodeStageInterval, DetailLevel, EngineTokenTiming, Entrypoint,
    EventHeader, EventKind, JsonMap, MemorySnapshot, ProfileError, ProfileEvent, ProfilingConfig,
    ResourceTraceEvent, Status,
};
use serde_json::Value;

use crate::error::CaptureError;
use crate::wallclock::{self, WallAnchor};
use crate::writer::{Encode, Framing, Target, Writer, DEFAULT_QUEUE_CAPACITY};

/// How many messages of invalid events the report keeps.
const KEPT_INVALID_MESSAGES: usize = 16;

struct Line(ProfileEvent);

impl Encode for Line {
    type State = ();
    crate::writer::local_rings!(Line);
    fn encode(&self, out: &mut Vec<u8>, _: &mut ()) {
        // Serializing into a Vec cannot fail: every map key is a string.
        let _ = serde_json::to_writer(&mut *out, &self.0);
    }
}

/// What [`InferenceProfiler::finish`] reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProfileReport {
    /// Lines written.
    pub events_written: u64,
    /// Events dropped because the queue was full.
    pub events_dropped: u64,
    /// Events not written because they broke a §2 rule.
    pub events_invalid: u64,
    /// The first messages of those broken rules.
    pub invalid_messages: Vec<String>,
    /// Requests that were sampled and recorded.
    pub requests_sampled: u64,
    /// Requests left out by sampling.
    pub requests_skipped: u64,
    /// Bytes written to each output.
    pub bytes_written: u64,
    /// The files written.
    pub paths: Vec<PathBuf>,
    /// What the live OpenTelemetry exporter did, when one was configured (feature `otlp`).
    #[cfg(feature = "otlp")]
    pub otlp: Option<crate::otlp::OtlpReport>,
}

/// Configures an [`InferenceProfiler`]. Made by [`InferenceProfiler::builder`].
///
/// Defaults: entrypoint `run`, backend `cpu`, runtime preset hash `unspecified`, no model,
/// correlation id generated from the time and the process id, outputs from the config.
#[must_use]
pub struct ProfilerBuilder {
    config: ProfilingConfig,
    entrypoint: Entrypoint,
    backend: String,
    runtime_preset_hash: String,
    model: Option<String>,
    correlation_id: Option<String>,
    writer: Option<Box<dyn io::Write + Send>>,
    queue_capacity: usize,
    #[cfg(feature = "otlp")]
    otlp: Option<crate::otlp::OtlpConfig>,
}

impl std::fmt::Debug for ProfilerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfilerBuilder")
            .field("config", &self.config)
            .field("entrypoint", &self.entrypoint)
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

impl ProfilerBuilder {
    /// How the binary was entered (`run` by default).
    pub fn entrypoint(mut self, entrypoint: Entrypoint) -> Self {
        self.entrypoint = entrypoint;
        self
    }

    /// The backend (`cpu`, `cuda`, `metal` ...).
    pub fn backend(mut self, backend: impl Into<String>) -> Self {
        self.backend = backend.into();
        self
    }

    /// Hash of the runtime preset (`sha256:...`).
    pub fn runtime_preset_hash(mut self, hash: impl Into<String>) -> Self {
        self.runtime_preset_hash = hash.into();
        self
    }

    /// The model name written on every event.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// The caller-owned correlation key written on every event.
    pub fn correlation_id(mut self, id: impl Into<String>) -> Self {
        self.correlation_id = Some(id.into());
        self
    }

    /// Write to `writer` instead of the config's output paths (the config must still be valid).
    pub fn writer(mut self, writer: impl io::Write + Send + 'static) -> Self {
        self.writer = Some(Box::new(writer));
        self
    }

    /// How many of one thread's events may wait for the writer thread before that thread's
    /// new ones are dropped (each recording thread gets a ring of this many slots).
    pub fn queue_capacity(mut self, events: usize) -> Self {
        self.queue_capacity = events;
        self
    }

    /// Also send each finished request to an OpenTelemetry collector (feature `otlp`; see
    /// [`crate::otlp`]). Serving never waits for it: events go through a bounded queue to a
    /// background thread, and what was dropped is in [`ProfileReport::otlp`]. With detail `off`
    /// nothing is recorded, so nothing is sent and no exporter is started.
    #[cfg(feature = "otlp")]
    pub fn otlp(mut self, config: crate::otlp::OtlpConfig) -> Self {
        self.otlp = Some(config);
        self
    }

    /// [`build`](ProfilerBuilder::build) the profiler and route the program's `tracing` spans
    /// into it: the module spans (candle-transformers' layers) of each request's forward calls
    /// run through [`RequestHandle::prefill_step`] and [`RequestHandle::decode_step`] are
    /// written with the request. Call it before building the model; see [`crate::subscriber`].
    pub fn install(self) -> Result<InferenceProfiler, CaptureError> {
        let profiler = self.build()?;
        crate::subscriber::install()?;
        Ok(profiler)
    }

    /// Validate the config, open the outputs (every non-blank path of `outputs`) and start the
    /// writer thread. With detail `off`, nothing is opened.
    pub fn build(self) -> Result<InferenceProfiler, CaptureError> {
        let broken = self.config.validate();
        if !broken.is_empty() {
            return Err(CaptureError::InvalidConfig(broken));
        }
        let writer = if self.config.detail == DetailLevel::Off {
            None
        } else {
            let targets = match self.writer {
                Some(w) => vec![Target::Writer(w)],
                None => self
                    .config
                    .outputs
                    .iter()
                    .filter(|p| !p.trim().is_empty())
                    .map(|p| Target::Path {
                        path: PathBuf::from(p),
                        atomic: false,
                    })
                    .collect(),
            };
            Some(Writer::spawn(
                targets,
                self.queue_capacity,
                Framing {
                    header: None,
                    closing: Default::default(),
                    trailer: capture_stats_line,
                },
                "candle-trace-profile-writer",
            )?)
        };
        #[cfg(feature = "otlp")]
        let otlp = match self.otlp {
            Some(config) if writer.is_some() => Some(crate::otlp::OtlpExporter::spawn(config)?),
            _ => None,
        };
        let correlation_id = self.correlation_id.unwrap_or_else(|| {
            format!("{:x}-{:x}", wallclock::unix_nanos_now(), std::process::id())
        });
        Ok(InferenceProfiler {
            inner: Arc::new(ProfilerInner {
                detail: self.config.detail,
                sample_rate: self.config.sample_rate,
                entrypoint: self.entrypoint,
                backend: self.backend,
                runtime_preset_hash: self.runtime_preset_hash,
                model: self.model,
                correlation_id,
                next_event: AtomicU64::new(1),
                invalid: AtomicU64::new(0),
                invalid_messages: Mutex::new(Vec::new()),
                sampled: AtomicU64::new(0),
                skipped: AtomicU64::new(0),
                finished: AtomicBool::new(false),
                writer,
                #[cfg(feature = "otlp")]
                otlp,
            }),
        })
    }
}

fn capture_stats_line(dropped: u64, written: u64) -> Option<Vec<u8>> {
    (dropped > 0).then(|| {
        format!(
            r#"{{"schema_version":1,"event_kind":"capture_stats","events_dropped":{dropped},"events_written":{written}}}"#
        )
        .into_bytes()
    })
}

/// Records inference requests into an inference profile. Cheap to clone.
#[derive(Clone)]
pub struct InferenceProfiler {
    inner: Arc<ProfilerInner>,
}

impl std::fmt::Debug for InferenceProfiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InferenceProfiler")
            .field("detail", &self.inner.detail)
            .field("sample_rate", &self.inner.sample_rate)
            .finish_non_exhaustive()
    }
}

struct ProfilerInner {
    detail: DetailLevel,
    sample_rate: f64,
    entrypoint: Entrypoint,
    backend: String,
    runtime_preset_hash: String,
    model: Option<String>,
    correlation_id: String,
    next_event: AtomicU64,
    invalid: AtomicU64,
    invalid_messages: Mutex<Vec<String>>,
    sampled: AtomicU64,
    skipped: AtomicU64,
    finished: AtomicBool,
    writer: Option<Writer<Line>>,
    #[cfg(feature = "otlp")]
    otlp: Option<crate::otlp::OtlpExporter>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Where `request_id` falls in [0, 1): FNV-1a 64, finalized with splitmix64, top 53 bits.
fn sample_point(request_id: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in request_id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    (h >> 11) as f64 / (1u64 << 53) as f64
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl ProfilerInner {
    fn ok_status(&self) -> Status {
        if self.detail.is_diagnostic_only() {
            Status::DiagnosticOnly
        } else {
            Status::Ok
        }
    }

    /// Validate and queue one event.
    fn write(&self, event: ProfileEvent) {
        let Some(writer) = &self.writer else {
            return;
        };
        let broken = validate_event(&event);
        if broken.is_empty() {
            #[cfg(feature = "otlp")]
            if let Some(otlp) = &self.otlp {
                otlp.offer(&event);
            }
            writer.send(Line(event));
            return;
        }
        self.invalid.fetch_add(1, Ordering::Relaxed);
        let mut kept = lock(&self.invalid_messages);
        for message in broken {
            if kept.len() >= KEPT_INVALID_MESSAGES {
                break;
            }
            let id = event.event_id.as_deref().unwrap_or("?");
            kept.push(format!("event {id}: {message}"));
        }
    }
}

impl InferenceProfiler {
    /// A builder for a profiler configured by `config` (validated by `build`).
    pub fn builder(config: ProfilingConfig) -> ProfilerBuilder {
        ProfilerBuilder {
            config,
            entrypoint: Entrypoint::Run,
            backend: String::from("cpu"),
            runtime_preset_hash: String::from("unspecified"),
            model: None,
            correlation_id: None,
            writer: None,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            #[cfg(feature = "otlp")]
            otlp: None,
        }
    }

    /// A builder for a profiler at detail `latency` (engine token timing: TTFT and ITL, and
    /// module spans), every request sampled, writing to `path`.
    pub fn latency(path: impl Into<String>) -> ProfilerBuilder {
        InferenceProfiler::builder(ProfilingConfig {
            detail: DetailLevel::Latency,
            sample_rate: 1.0,
            outputs: vec![path.into()],
        })
    }

    /// Serve one request: open it (`shape`: what the work is, e.g.
    /// `[("prompt_tokens", 12)]`; at least one entry), run `serve` with its handle, then close
    /// it, or close it as failed (error kind `request_failed`, the error's text) when `serve`
    /// returns an error, which is passed through.
    pub fn request<K, V, T, E>(
        &self,
        request_id: impl Into<String>,
        shape: impl IntoIterator<Item = (K, V)>,
        serve: impl FnOnce(&RequestHandle) -> Result<T, E>,
    ) -> Result<T, E>
    where
        K: Into<String>,
        V: Into<Value>,
        E: std::fmt::Display,
    {
        let shape: JsonMap = shape
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        let handle = self.request_open(request_id, shape);
        let result = serve(&handle);
        match &result {
            Ok(_) => handle.request_close(),
            Err(e) => handle.request_fail("request_failed", &e.to_string()),
        }
        result
    }

    /// The configured detail level.
    pub fn detail(&self) -> DetailLevel {
        self.inner.detail
    }

    /// True when requests with this id are recorded: the detail level is not `off` and the id
    /// falls under the sample rate (deterministic; see the module docs).
    pub fn is_sampled(&self, request_id: &str) -> bool {
        let inner = &self.inner;
        inner.detail != DetailLevel::Off
            && inner.sample_rate > 0.0
            && (inner.sample_rate >= 1.0 || sample_point(request_id) < inner.sample_rate)
    }

    /// Open a request. When it is sampled, writes its `request_open` event and returns a
    /// recording handle; otherwise an inert one (every call on it does nothing). `shape`
    /// describes the work (`batch`, `prompt_tokens` ...) and needs at least one entry.
    pub fn request_open(&self, request_id: impl Into<String>, shape: JsonMap) -> RequestHandle {
        let request_id = request_id.into();
        if self.inner.finished.load(Ordering::Relaxed) || !self.is_sampled(&request_id) {
            self.inner.skipped.fetch_add(1, Ordering::Relaxed);
            return RequestHandle { live: None };
        }
        self.inner.sampled.fetch_add(1, Ordering::Relaxed);
        let anchor = WallAnchor::now();
        let timing = self
            .inner
            .detail
            .captures_engine_token_timing()
            .then(|| EngineTokenTiming::new(anchor.unix_nanos, anchor.max_error_nanos));
        let handle = RequestHandle {
            live: Some(Live {
                profiler: Arc::clone(&self.inner),
                state: Mutex::new(RequestState {
                    request_id,
                    shape,
                    anchor,
                    timing,
                    waves: 0,
                    module_spans: 0,
                    closed: false,
                }),
            }),
        };
        if let Some(live) = &handle.live {
            let st = lock(&live.state);
            let status = live.profiler.ok_status();
            let mut event = live.event(
                &st,
                EventKind::Instant,
                "request_open",
                status,
                anchor.instant,
            );
            event.attributes.insert(
                String::from("detail_level"),
                Value::from(live.profiler.detail.as_str()),
            );
            event.attributes.insert(
                String::from("sample_rate"),
                Value::from(live.profiler.sample_rate),
            );
            live.profiler.write(event);
        }
        handle
    }

    /// Block until everything queued so far is written and flushed, or `timeout` passes.
    pub fn flush(&self, timeout: Duration) -> bool {
        self.inner.writer.as_ref().is_some_and(|w| w.flush(timeout))
    }

    /// Write everything queued, flush, and report. Requests still open are not closed (their
    /// handles write nothing afterwards). Returns the first I/O error, if any.
    pub fn finish(&self) -> Result<ProfileReport, CaptureError> {
        let inner = &self.inner;
        if inner.finished.swap(true, Ordering::AcqRel) {
            return Err(CaptureError::AlreadyFinished);
        }
        let mut report = ProfileReport {
            events_invalid: inner.invalid.load(Ordering::Relaxed),
            invalid_messages: lock(&inner.invalid_messages).clone(),
            requests_sampled: inner.sampled.load(Ordering::Relaxed),
            requests_skipped: inner.skipped.load(Ordering::Relaxed),
            ..ProfileReport::default()
        };
        if let Some(writer) = &inner.writer {
            let w = writer.finish()?;
            report.events_written = w.events_written;
            report.events_dropped = w.events_dropped;
            report.bytes_written = w.bytes_written;
            report.paths = w.paths;
        }
        #[cfg(feature = "otlp")]
        {
            report.otlp = inner.otlp.as_ref().map(crate::otlp::OtlpExporter::finish);
        }
        Ok(report)
    }
}

/// One request being profiled, from [`InferenceProfiler::request_open`] to
/// [`request_close`](RequestHandle::request_close). Inert when the request is not sampled.
///
/// Methods take `&self` (the state is behind a mutex), so token commits can be recorded
/// inside a [`decode_wave`](RequestHandle::decode_wave); the handle is `Send + Sync`.
#[derive(Debug)]
pub struct RequestHandle {
    live: Option<Live>,
}

struct Live {
    profiler: Arc<ProfilerInner>,
    state: Mutex<RequestState>,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("request_id", &lock(&self.state).request_id)
            .finish_non_exhaustive()
    }
}

struct RequestState {
    request_id: String,
    shape: JsonMap,
    anchor: WallAnchor,
    timing: Option<EngineTokenTiming>,
    waves: u64,
    /// Module spans written so far (their ids continue from here).
    module_spans: u64,
    closed: bool,
}

impl RequestState {
    fn since_start(&self, t: Instant) -> u64 {
        nanos(t.saturating_duration_since(self.anchor.instant))
    }
}

impl Live {
    fn event(
        &self,
        st: &RequestState,
        kind: EventKind,
        phase: &str,
        status: Status,
        at: Instant,
    ) -> ProfileEvent {
        let p = &self.profiler;
        let ts_unix_nanos = st.anchor.unix_nanos_at(at);
        let n = p.next_event.fetch_add(1, Ordering::Relaxed);
        let mut event = ProfileEvent::new(EventHeader {
            event_kind: kind,
            ts_unix_nanos,
            timestamp: wallclock::rfc3339_from_unix_nanos(ts_unix_nanos),
            event_id: format!("{}-e{n}", p.correlation_id),
            request_id: st.request_id.clone(),
            correlation_id: p.correlation_id.clone(),
            entrypoint: p.entrypoint,
            backend: p.backend.clone(),
            runtime_preset_hash: p.runtime_preset_hash.clone(),
            phase: String::from(phase),
            status,
        });
        event.model.clone_from(&p.model);
        event.shape = st.shape.clone();
        event
    }

    /// Run `f` on the open request's state; nothing once closed or after `finish()`.
    fn with_open(&self, f: impl FnOnce(&Live, &mut RequestState)) {
        if self.profiler.finished.load(Ordering::Relaxed) {
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
                live.profiler.ok_status()
            };
            let mut event = live.event(
                st,
                EventKind::TimedSpan,
                "request",
                status,
                st.anchor.instant,
            );
            event.duration_us = Some(micros(now.saturating_duration_since(st.anchor.instant)));
            event.error = error;
            if let Some(timing) = &mut st.timing {
                timing
                    .decode_stage_intervals
                    .sort_by_key(|iv| iv.start_nanos_since_request_start);
                event.attributes.extend(timing.derived_attributes());
            }
            live.profiler.write(event);
        });
    }
}

impl RequestHandle {
    /// True when this request is sampled and still open.
    pub fn is_recording(&self) -> bool {
        self.live
            .as_ref()
            .is_some_and(|l| !lock(&l.state).closed && !l.profiler.finished.load(Ordering::Relaxed))
    }

    /// The prefill just finished and took `duration`: a `timed_span` of phase `prefill`.
    pub fn prefill(&self, duration: Duration) {
        let Some(live) = &self.live else { return };
        live.with_open(|live, st| {
            let now = Instant::now();
            let start = now.checked_sub(duration).unwrap_or(st.anchor.instant);
            let status = live.profiler.ok_status();
            let mut event = live.event(st, EventKind::TimedSpan, "prefill", status, start);
            event.duration_us = Some(micros(duration));
            live.profiler.write(event);
        });
    }

    /// Run the prefill `forward` (the prompt through the model and the choice of the first
    /// token): a `timed_span` of phase `prefill` over it, the module spans it entered (detail
    /// `latency` and above; see [`RequestHandle::decode_step`]), with
    /// [`TrackingAllocator`](crate::alloc::TrackingAllocator) installed a host memory snapshot
    /// (detail `resource` and above: live bytes before and after, the process-wide high water
    /// during the call) and, when it succeeds, one token commit at the moment it returned. Its result is
    /// returned unchanged.
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
    /// n = n-th decode step), `start_nanos_since_request_start` and `duration_nanos`.
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
        let with_modules = live.profiler.detail >= DetailLevel::Latency;
        // Host memory around the call, measured by the counting allocator when installed.
        let memory = crate::alloc::installed() && live.profiler.detail >= DetailLevel::Resource;
        let before_bytes = crate::alloc::live_bytes();
        if memory {
            crate::alloc::reset_peak();
        }
        let start = Instant::now();
        let (result, spans) = if with_modules {
            crate::subscriber::with_forward(forward)
        } else {
            (forward(), Vec::new())
        };
        let end = Instant::now();
        if memory {
            let after_bytes = crate::alloc::live_bytes();
            let snapshot = MemorySnapshot {
                scope: Some(String::from("host")),
                backend: Some(live.profiler.backend.clone()),
                before_bytes: Some(before_bytes),
                after_bytes: Some(after_bytes),
                current_bytes: Some(after_bytes),
                high_water_bytes: Some(crate::alloc::peak_bytes().max(after_bytes)),
                // Not read here: `/proc/meminfo` would cost the serving thread a file read
                // per token.
                available_bytes: None,
            };
            let phase = if decode.is_some() {
                "decode"
            } else {
                "prefill"
            };
            live.with_open(|live, st| {
                let status = live.profiler.ok_status();
                let mut event = live.event(st, EventKind::Memory, phase, status, end);
                event.memory = Some(snapshot);
                live.profiler.write(event);
            });
        }
        if decode.is_none() {
            live.with_open(|live, st| {
                let status = live.profiler.ok_status();
                let mut event = live.event(st, EventKind::TimedSpan, "prefill", status, start);
                event.duration_us = Some(micros(end.saturating_duration_since(start)));
                live.profiler.write(event);
            });
        }
        live.with_open(|live, st| {
            let first = st.module_spans;
            st.module_spans += spans.len() as u64;
            for span in &spans {
                let span_end = span.end.unwrap_or(end);
                let status = live.profiler.ok_status();
                let mut event = live.event(st, EventKind::TimedSpan, "module", status, span.start);
                event.duration_us = Some(micros(span_end.saturating_duration_since(span.start)));
                let mut put = |k: &str, v: Value| {
                    event.attributes.insert(String::from(k), v);
                };
                put("span_id", Value::from(first + span.id));
                if let Some(parent) = span.parent {
                    put("parent_span_id", Value::from(first + parent));
                }
                put("name", Value::from(span.name));
                if let Some(module) = span.module {
                    put("module", Value::from(module));
                }
                put(
                    "span_kind",
                    Value::from(match span.kind {
                        SpanKind::Module => "module",
                        SpanKind::Op => "op",
                        SpanKind::Function => "function",
                    }),
                );
                put(
                    "forward",
                    Value::from(if decode.is_some() {
                        "decode"
                    } else {
                        "prefill"
                    }),
                );
                put("forward_index", Value::from(decode.unwrap_or(0)));
                put(
                    "start_nanos_since_request_start",
                    Value::from(st.since_start(span.start)),
                );
                put(
                    "duration_nanos",
                    Value::from(nanos(span_end.saturating_duration_since(span.start))),
                );
                live.profiler.write(event);
            }
        });
        if result.is_ok() {
            // The token was chosen when `forward` returned, before the events above were built.
            let at = end;
            live.with_open(|_, st| {
                let at = st.since_start(at);
                if let Some(timing) = &mut st.timing {
                    timing.token_commit_nanos_since_request_start.push(at);
                }
            });
        }
        result
    }

    /// Decoding is ready to run now (`decode_ready_nanos_since_request_start`). Without this
    /// call, the first decode wave's start is used.
    pub fn decode_ready(&self) {
        let Some(live) = &self.live else { return };
        live.with_open(|_, st| {
            let at = st.since_start(Instant::now());
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
        live.with_open(|_, st| {
            let at = st.since_start(start);
            if let Some(timing) = &mut st.timing {
                timing
                    .decode_ready_nanos_since_request_start
                    .get_or_insert(at);
            }
            index = Some(st.waves);
            st.waves += 1;
        });
        DecodeWave {
            live: index.map(|i| (live, i)),
            start,
        }
    }

    /// Record a decode stage that ran from `start` to `end` (with token timing only).
    pub fn decode_stage(&self, stage: DecodeStage, start: Instant, end: Instant) {
        let Some(live) = &self.live else { return };
        live.with_open(|_, st| {
            let interval = DecodeStageInterval {
                stage,
                start_nanos_since_request_start: st.since_start(start),
                end_nanos_since_request_start: st.since_start(end),
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
        live.with_open(|_, st| {
            let at = st.since_start(now);
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
        live.with_open(|live, st| {
            let status = live.profiler.ok_status();
            let mut event = live.event(st, EventKind::Memory, phase, status, Instant::now());
            event.memory = Some(snapshot);
            live.profiler.write(event);
        });
    }

    /// A resource accounting step during `phase` (detail `resource` and above).
    pub fn resource(&self, phase: &str, resource: ResourceTraceEvent) {
        let Some(live) = &self.live else { return };
        if live.profiler.detail < DetailLevel::Resource {
            return;
        }
        live.with_open(|live, st| {
            let status = live.profiler.ok_status();
            let mut event = live.event(st, EventKind::Resource, phase, status, Instant::now());
            event.resource = Some(resource);
            live.profiler.write(event);
        });
    }

    /// An error during `phase`: an `error` event with status `failure`. `blocking` says whether
    /// it stopped the request (close it with [`request_fail`](RequestHandle::request_fail)).
    pub fn error(&self, phase: &str, kind: &str, message: &str, blocking: bool) {
        let Some(live) = &self.live else { return };
        live.with_open(|live, st| {
            let mut event =
                live.event(st, EventKind::Error, phase, Status::Failure, Instant::now());
            let mut error = ProfileError::new(kind, message);
            error.blocking = blocking;
            event.error = Some(error);
            live.profiler.write(event);
        });
    }

    /// The engine token timing collected so far (`None` when inert or the detail level does
    /// not capture it).
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
                start_nanos_since_request_start: st.since_start(start),
                end_nanos_since_request_start: st.since_start(end),
            };
            if let Some(timing) = &mut st.timing {
                timing.decode_stage_intervals.push(interval);
            }
            let status = live.profiler.ok_status();
            let mut event = live.event(st, EventKind::TimedSpan, "decode", status, start);
            event.duration_us = Some(micros(end.saturating_duration_since(start)));
            event
                .attributes
                .insert(String::from("wave"), Value::from(index));
            live.profiler.write(event);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_is_deterministic_and_close_to_the_rate() {
        let n = 20_000;
        let hits = (0..n)
            .filter(|i| sample_point(&format!("req-{i}")) < 0.25)
            .count();
        let rate = hits as f64 / n as f64;
        assert!((0.23..0.27).contains(&rate), "{rate}");
        assert_eq!(sample_point("abc"), sample_point("abc"));
        assert!((0.0..1.0).contains(&sample_point("")));
    }

    #[test]
    fn invalid_configs_are_refused() {
        let config = ProfilingConfig {
            detail: DetailLevel::Basic,
            sample_rate: 1.5,
            outputs: vec![],
        };
        match InferenceProfiler::builder(config).build() {
            Err(CaptureError::InvalidConfig(v)) => assert_eq!(v.len(), 2),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn off_records_nothing_and_opens_nothing() {
        let p = InferenceProfiler::builder(ProfilingConfig::default())
            .build()
            .unwrap();
        let mut shape = JsonMap::new();
        shape.insert("batch".into(), Value::from(1));
        let r = p.request_open("r", shape);
        assert!(!r.is_recording());
        r.record_token_commit();
        r.request_close();
        let report = p.finish().unwrap();
        assert_eq!(report.events_written, 0);
        assert_eq!(report.requests_skipped, 1);
        assert!(report.paths.is_empty());
    }
}
