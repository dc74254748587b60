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
//! - Times are read on the monotonic clock (`Instant`) and converted to the wall clock through
//!   one pairing of the two, made when the profiler is built (`wall_anchor_max_error_nanos` is
//!   the width of the two monotonic reads that bracket its wall-clock read): every request's
//!   anchor (its open) and every event's `ts_unix_nanos` are on that one conversion, so the
//!   events of all requests and engines lie on one time axis, in the order they happened. A
//!   timed span's `ts_unix_nanos` is its start.
//! - `decode_ready` is the first decode wave's start unless set with
//!   [`RequestHandle::decode_ready`]; each decode wave is also a `decode_execution` interval.
//! - The serving thread only queues what it measured; the writer thread turns it into lines
//!   (a forward call's module spans are one item: see `profiler/lines.rs`). Every event is
//!   checked with [`validate_event`](candle_trace_schema::format::profile::validate_event) before it is written; one that breaks a rule is not
//!   written, and is counted (with its first messages) in the [`ProfileReport`].
//! - Batched serving: [`Engine`] (forward calls that serve several requests, recorded once)
//!   and [`ResourcePool`] (a scheduler's KV-cache blocks or other resources); their events are
//!   owned by the engine (attribute `engine`), not by a request.
//! - A [`RequestHandle`] dropped without being closed closes the request as a `failure` with
//!   error kind `request_not_closed`.
//! - When the queue dropped events, a last line
//!   `{"schema_version":1,"event_kind":"capture_stats","events_dropped":N,...}` says so
//!   (readers skip an unknown `event_kind` with a warning).

use std::borrow::Cow;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use candle_trace_schema::format::profile::{
    DetailLevel, EngineTokenTiming, Entrypoint, EventKind, JsonMap, ProfilingConfig, Status,
};
use serde_json::Value;

use crate::error::CaptureError;
use crate::sync::DeviceSync;
use crate::wallclock::{self, WallAnchor};
use crate::writer::{Framing, Target, Writer, DEFAULT_QUEUE_CAPACITY};

mod batch;
mod lines;
mod request;
mod resources;

pub use batch::{Accepted, Engine, Forward};
pub use request::{DecodeWave, RequestHandle};
pub use resources::ResourcePool;

use lines::{Attr, Head, Line, Owner, Pending, SpanBatch};
use request::{Live, RequestState};

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
/// correlation id generated from the time and the process id, outputs from the config, forward
/// calls timed on the host clock.
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
    sync: Option<Arc<dyn DeviceSync>>,
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

    /// How many of one thread's items may wait for the writer thread before that thread's
    /// new ones are dropped (each recording thread gets a ring of this many slots; the module
    /// spans of one forward call are one item).
    pub fn queue_capacity(mut self, events: usize) -> Self {
        self.queue_capacity = events;
        self
    }

    /// Time forward calls after a device synchronization (`device_synchronized`): `sync` is
    /// called before a forward call's start and before its end are read, so a device that
    /// queues work (CUDA, Metal) is timed doing it, not launching it. Each request's
    /// `request_open` says `timing_mode` (`host` or `device_synchronized`).
    pub fn device_sync(mut self, sync: impl DeviceSync + 'static) -> Self {
        self.sync = Some(Arc::new(sync));
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
    /// run through [`RequestHandle::prefill_step`], [`RequestHandle::decode_step`] and
    /// [`Forward::run`] are written with the request or the batched forward. Call it before
    /// building the model; see [`crate::subscriber`].
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
        let correlation_id = self.correlation_id.unwrap_or_else(|| {
            format!("{:x}-{:x}", wallclock::unix_nanos_now(), std::process::id())
        });
        let ok = if self.config.detail.is_diagnostic_only() {
            Status::DiagnosticOnly
        } else {
            Status::Ok
        };
        #[allow(unused_mut)] // the OTLP exporter is set only with feature `otlp`
        let mut head = Head::new(
            correlation_id,
            self.entrypoint,
            self.backend,
            self.runtime_preset_hash,
            self.model,
            ok,
        );
        if self.config.detail >= DetailLevel::Latency {
            // The module spans' clock calibrates once per process (about 0.7 ms here): now,
            // not in the first profiled request's forward call.
            crate::subscriber::span_clock();
        }
        #[cfg(feature = "otlp")]
        {
            head.otlp = match self.otlp {
                Some(config) if writer.is_some() => Some(crate::otlp::OtlpExporter::spawn(config)?),
                _ => None,
            };
        }
        Ok(InferenceProfiler {
            inner: Arc::new(ProfilerInner {
                detail: self.config.detail,
                sample_rate: self.config.sample_rate,
                head: Arc::new(head),
                next_event: AtomicU64::new(1),
                sampled: AtomicU64::new(0),
                skipped: AtomicU64::new(0),
                finished: AtomicBool::new(false),
                writer,
                sync: self.sync,
                anchor: WallAnchor::now(),
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

pub(crate) struct ProfilerInner {
    detail: DetailLevel,
    sample_rate: f64,
    head: Arc<Head>,
    next_event: AtomicU64,
    sampled: AtomicU64,
    skipped: AtomicU64,
    finished: AtomicBool,
    writer: Option<Writer<Line>>,
    sync: Option<Arc<dyn DeviceSync>>,
    /// The one pairing of the monotonic clock with the wall clock that every event's
    /// `ts_unix_nanos` is converted on, so the events of all requests share one time axis.
    anchor: WallAnchor,
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

/// The calling thread's name, else its id (`ThreadId(3)`): the `thread` attribute, made once
/// per thread.
fn thread_label() -> Arc<str> {
    fn make() -> Arc<str> {
        let thread = std::thread::current();
        match thread.name() {
            Some(name) => Arc::from(name),
            None => Arc::from(format!("{:?}", thread.id())),
        }
    }
    thread_local! {
        static LABEL: std::cell::OnceCell<Arc<str>> = const { std::cell::OnceCell::new() };
    }
    LABEL
        .try_with(|label| Arc::clone(label.get_or_init(make)))
        .unwrap_or_else(|_| make())
}

impl ProfilerInner {
    /// An anchor at the monotonic time now, on the profiler's one anchor.
    fn anchor_now(&self) -> WallAnchor {
        let instant = Instant::now();
        WallAnchor {
            instant,
            unix_nanos: self.anchor.unix_nanos_at(instant),
            max_error_nanos: self.anchor.max_error_nanos,
        }
    }

    fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Relaxed)
    }

    /// An event of `owner`, numbered now; its line is made on the writer thread.
    fn pending(
        self: &Arc<Self>,
        owner: &Arc<Owner>,
        kind: EventKind,
        phase: impl Into<Cow<'static, str>>,
        status: Status,
        at: Instant,
    ) -> Box<Pending> {
        Box::new(Pending {
            owner: Arc::clone(owner),
            kind,
            phase: phase.into(),
            status,
            at,
            number: self.next_event.fetch_add(1, Ordering::Relaxed),
            duration: None,
            memory: None,
            resource: None,
            error: None,
            attributes: Vec::new(),
            batch: Vec::new(),
            timing: None,
        })
    }

    /// An event of an engine, numbered now, with the attribute `engine` (the engine's id: its
    /// owner's `request_id`) and then `attributes`, made in one allocation; `owner` gives its
    /// `request_id` and `shape` (the engine's own, or a forward's).
    fn engine_event<const N: usize>(
        self: &Arc<Self>,
        owner: &Arc<Owner>,
        kind: EventKind,
        phase: &'static str,
        status: Status,
        at: Instant,
        attributes: [(&'static str, Attr); N],
    ) -> Box<Pending> {
        let mut event = self.pending(owner, kind, phase, status, at);
        event.attributes.reserve_exact(1 + N);
        event
            .attributes
            .push(("engine", Attr::from(&owner.request_id)));
        event.attributes.extend(attributes);
        event
    }

    /// Queue one event (checked and written by the writer thread).
    fn send(&self, pending: Box<Pending>) {
        if let Some(writer) = &self.writer {
            writer.send(Line::Event(pending));
        }
    }

    /// Queue the module spans of one forward call as one item; `first_span` is the `span_id`
    /// of the first.
    fn send_spans(
        &self,
        owner: &Arc<Owner>,
        of: lines::ForwardOf,
        first_span: u64,
        end: Instant,
        forward: crate::subscriber::ForwardSpans,
    ) {
        let Some(writer) = &self.writer else { return };
        if forward.spans.is_empty() {
            return;
        }
        let n = forward.spans.len() as u64;
        let batch = SpanBatch {
            owner: Arc::clone(owner),
            of,
            first_event: self.next_event.fetch_add(n, Ordering::Relaxed),
            first_span,
            end,
            forward,
        };
        writer.send_counted(Line::Spans(Arc::new(batch)), n);
    }

    /// Wait for the device, when forward calls are timed `device_synchronized`.
    fn synchronize(&self) {
        if let Some(sync) = &self.sync {
            sync.synchronize();
        }
    }

    fn timing_mode(&self) -> &'static str {
        if self.sync.is_some() {
            "device_synchronized"
        } else {
            "host"
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
            sync: None,
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
        let inner = &self.inner;
        if inner.is_finished() || !self.is_sampled(&request_id) {
            inner.skipped.fetch_add(1, Ordering::Relaxed);
            return RequestHandle { live: None };
        }
        inner.sampled.fetch_add(1, Ordering::Relaxed);
        let anchor = inner.anchor_now();
        let timing = inner
            .detail
            .captures_engine_token_timing()
            .then(|| EngineTokenTiming::new(anchor.unix_nanos, anchor.max_error_nanos));
        let owner = Arc::new(Owner::new(&inner.head, request_id, shape, anchor));
        let mut open = inner.pending(
            &owner,
            EventKind::Instant,
            "request_open",
            inner.head.ok,
            anchor.instant,
        );
        open.attributes = vec![
            ("detail_level", Value::from(inner.detail.as_str()).into()),
            ("sample_rate", Value::from(inner.sample_rate).into()),
            ("timing_mode", Value::from(inner.timing_mode()).into()),
            ("thread", Attr::Shared(thread_label())),
        ];
        inner.send(open);
        RequestHandle {
            live: Some(Arc::new(Live {
                profiler: Arc::clone(inner),
                owner,
                state: Mutex::new(RequestState {
                    timing,
                    waves: 0,
                    module_spans: 0,
                    closed: false,
                }),
            })),
        }
    }

    /// An engine that serves several requests per forward call (continuous or wave
    /// batching): see [`Engine`]. `engine_id` names it in the file (the `request_id` and
    /// `engine` attribute of its events; non-blank).
    pub fn engine(&self, engine_id: impl Into<String>) -> Engine {
        Engine::new(&self.inner, engine_id.into())
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
        // After the writer thread, which checks each event before writing it.
        report.events_invalid = inner.head.invalid.load(Ordering::Relaxed);
        report.invalid_messages = lock(&inner.head.invalid_messages).clone();
        #[cfg(feature = "otlp")]
        {
            report.otlp = inner
                .head
                .otlp
                .as_ref()
                .map(crate::otlp::OtlpExporter::finish);
        }
        Ok(report)
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
