//! Live OpenTelemetry export (feature `otlp`): an [`InferenceProfiler`](crate::InferenceProfiler) sends each finished
//! request to an OpenTelemetry collector as OTLP/HTTP protobuf while serving.
//!
//! ```no_run
//! use candle_trace_capture::otlp::OtlpConfig;
//! use candle_trace_capture::InferenceProfiler;
//!
//! let profiler = InferenceProfiler::latency("profile.jsonl")
//!     .otlp(OtlpConfig::new("http://127.0.0.1:4318/v1/traces").service_name("llama-server"))
//!     .build()?;
//! // ... serve requests ...
//! let report = profiler.finish()?;
//! if let Some(otlp) = report.otlp {
//!     eprintln!("{} request(s) exported, {} event(s) dropped", otlp.requests_exported, otlp.events_dropped);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # How serving stays unblocked
//!
//! - Every event the profiler writes is also offered to a bounded queue
//!   ([`OtlpConfig::queue_capacity`] events) with a non-blocking `try_send`; when the queue is
//!   full the event is dropped and counted ([`OtlpReport::events_dropped`]). The serving thread
//!   never waits for the network.
//! - One background thread (`candle-trace-otlp`) collects a request's events and, when its
//!   closing `request` span arrives, maps them with `candle_trace_schema::analysis::otlp::request_spans`
//!   (the same spans `candle-trace export --format otlp` writes, minus `candle_trace.line`,
//!   which a live request does not have) and exports them with `opentelemetry-otlp`'s
//!   `SpanExporter` (HTTP, binary protobuf) — one attempt, no retries, bounded by
//!   [`OtlpConfig::export_timeout`]. A failed or timed-out export is counted
//!   ([`OtlpReport::requests_failed`], the first error kept) and its spans are dropped.
//! - A batched forward ([`Engine`](crate::profiler::Engine)) is exported as a trace of its own
//!   (its span and its module spans) once its engine's next forward starts, or at
//!   [`finish`](crate::InferenceProfiler::finish); a request's spans link to the forwards that
//!   served it among the latest `queue_capacity` (`candle_trace_schema::analysis::otlp`).
//! - A request some of whose events were dropped is exported with the events that arrived; at
//!   most `queue_capacity` requests wait for their closing event (the oldest is then given up
//!   and counted in [`OtlpReport::requests_incomplete`], as are requests still open at
//!   [`finish`](crate::InferenceProfiler::finish)).
//! - [`finish`](crate::InferenceProfiler::finish) lets the thread export what is queued and
//!   waits for it at most [`OtlpConfig::finish_timeout`]; the report says what happened.
//!
//! # The HTTP client
//!
//! `opentelemetry-otlp` leaves the HTTP client to the program; this module brings a small
//! blocking HTTP/1.1 client over std's `TcpStream` (connect, write and read time-outs, one
//! request per connection), so no async runtime or TLS stack is compiled. Endpoints are
//! `http://` only: send to a collector (or agent) near the server, which forwards over TLS.

use std::collections::VecDeque;
use std::future::Future;
use std::io::{Read as _, Write as _};
use std::net::{TcpStream, ToSocketAddrs as _};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant, SystemTime};

use candle_trace_schema::analysis::otlp::{
    iteration_spans, request_spans, AttributeValue, OtlpSpan, OtlpSpanKind, LINE_ATTRIBUTE,
    SCOPE_NAME,
};
use candle_trace_schema::format::profile::{
    attribute, ProfileDocument, ProfileEvent, ProfileRecord, ITERATION_PHASE,
};
use opentelemetry::trace::{
    Event, Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue, Value};
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, RetryPolicy, SpanExporter, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter as _, SpanLinks};
use opentelemetry_sdk::Resource;

use crate::error::CaptureError;

/// Where and how to send requests. [`OtlpConfig::new`] has the defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpConfig {
    /// The collector's OTLP/HTTP traces URL, e.g. `http://127.0.0.1:4318/v1/traces`.
    pub endpoint: String,
    /// The resource's `service.name` (default `candle-trace`).
    pub service_name: String,
    /// Events that may wait for the export thread before new ones are dropped (default 4096).
    pub queue_capacity: usize,
    /// Limit for one request's export: connect, send and response (default 2 s).
    pub export_timeout: Duration,
    /// How long [`finish`](crate::InferenceProfiler::finish) waits for queued requests to be
    /// exported (default 5 s).
    pub finish_timeout: Duration,
}

impl OtlpConfig {
    /// Send to `endpoint` with the defaults.
    pub fn new(endpoint: impl Into<String>) -> Self {
        Self {
            endpoint: endpoint.into(),
            service_name: String::from("candle-trace"),
            queue_capacity: 4096,
            export_timeout: Duration::from_secs(2),
            finish_timeout: Duration::from_secs(5),
        }
    }

    /// The resource's `service.name`.
    #[must_use]
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.service_name = name.into();
        self
    }

    /// The queue's capacity in events (at least 1).
    #[must_use]
    pub fn queue_capacity(mut self, events: usize) -> Self {
        self.queue_capacity = events.max(1);
        self
    }

    /// The limit for one request's export.
    #[must_use]
    pub fn export_timeout(mut self, timeout: Duration) -> Self {
        self.export_timeout = timeout;
        self
    }

    /// How long `finish` waits for the queue to be exported.
    #[must_use]
    pub fn finish_timeout(mut self, timeout: Duration) -> Self {
        self.finish_timeout = timeout;
        self
    }
}

/// What the live exporter did, in [`ProfileReport::otlp`](crate::ProfileReport::otlp).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OtlpReport {
    /// Requests the collector accepted.
    pub requests_exported: u64,
    /// Their spans.
    pub spans_exported: u64,
    /// Requests whose export failed or timed out (their spans are lost).
    pub requests_failed: u64,
    /// Events dropped because the queue was full.
    pub events_dropped: u64,
    /// Requests given up before their closing event arrived.
    pub requests_incomplete: u64,
    /// Batched forwards the collector accepted (each a trace of its own, with its module
    /// spans; their spans are counted in `spans_exported`).
    pub forwards_exported: u64,
    /// The first export error.
    pub first_error: Option<String>,
    /// True when `finish` stopped waiting before the queue was exported.
    pub finish_timed_out: bool,
}

#[derive(Debug, Default)]
struct Counters {
    requests_exported: AtomicU64,
    forwards_exported: AtomicU64,
    spans_exported: AtomicU64,
    requests_failed: AtomicU64,
    events_dropped: AtomicU64,
    requests_incomplete: AtomicU64,
    first_error: Mutex<Option<String>>,
    /// The HTTP client's own message for its latest failure (the exporter's error says only
    /// "network error").
    client_error: Arc<Mutex<Option<String>>>,
    closing: AtomicBool,
}

/// The queue and the export thread.
pub(crate) struct OtlpExporter {
    tx: SyncSender<ProfileEvent>,
    counters: Arc<Counters>,
    finish_timeout: Duration,
    done: Mutex<Option<(Receiver<()>, JoinHandle<()>)>>,
}

impl std::fmt::Debug for OtlpExporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpExporter").finish_non_exhaustive()
    }
}

impl OtlpExporter {
    /// Build the `opentelemetry-otlp` exporter and start the thread.
    pub(crate) fn spawn(config: OtlpConfig) -> Result<Self, CaptureError> {
        let counters = Arc::new(Counters::default());
        let mut exporter = SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(config.endpoint.clone())
            .with_timeout(config.export_timeout)
            .with_retry_policy(RetryPolicy::disabled())
            .with_http_client(BlockingHttp {
                timeout: config.export_timeout,
                last_error: Arc::clone(&counters.client_error),
            })
            .build()
            .map_err(|e| CaptureError::Otlp(e.to_string()))?;
        exporter.set_resource(
            &Resource::builder_empty()
                .with_service_name(config.service_name.clone())
                .build(),
        );
        let capacity = config.queue_capacity.max(1);
        let (tx, rx) = mpsc::sync_channel(capacity);
        let (done_tx, done_rx) = mpsc::channel();
        let thread_counters = Arc::clone(&counters);
        let handle = thread::Builder::new()
            .name(String::from("candle-trace-otlp"))
            .spawn(move || {
                run(&exporter, &rx, &thread_counters, capacity);
                let _ = exporter.shutdown();
                let _ = done_tx.send(());
            })
            .map_err(CaptureError::Build)?;
        Ok(Self {
            tx,
            counters,
            finish_timeout: config.finish_timeout,
            done: Mutex::new(Some((done_rx, handle))),
        })
    }

    /// Offer an event without blocking; a full queue drops it (counted).
    pub(crate) fn offer(&self, event: &ProfileEvent) {
        if self.counters.closing.load(Ordering::Relaxed) {
            return;
        }
        match self.tx.try_send(event.clone()) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.counters.events_dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Stop taking events, let the thread export what is queued (waiting at most the finish
    /// time-out) and report.
    pub(crate) fn finish(&self) -> OtlpReport {
        self.counters.closing.store(true, Ordering::Release);
        let mut timed_out = false;
        let taken = self.done.lock().ok().and_then(|mut d| d.take());
        if let Some((done, handle)) = taken {
            match done.recv_timeout(self.finish_timeout) {
                Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                    let _ = handle.join();
                }
                // The thread is still exporting: leave it (it ends after its own time-out).
                Err(RecvTimeoutError::Timeout) => timed_out = true,
            }
        }
        let c = &self.counters;
        OtlpReport {
            requests_exported: c.requests_exported.load(Ordering::Relaxed),
            spans_exported: c.spans_exported.load(Ordering::Relaxed),
            requests_failed: c.requests_failed.load(Ordering::Relaxed),
            events_dropped: c.events_dropped.load(Ordering::Relaxed),
            requests_incomplete: c.requests_incomplete.load(Ordering::Relaxed),
            forwards_exported: c.forwards_exported.load(Ordering::Relaxed),
            first_error: c.first_error.lock().ok().and_then(|e| e.clone()),
            finish_timed_out: timed_out,
        }
    }
}

/// An engine's event: (engine, iteration) when it belongs to a batched forward.
fn forward_of(event: &ProfileEvent) -> Option<(String, u64)> {
    let a = &event.attributes;
    let engine = a.get(attribute::ENGINE)?.as_str()?.to_string();
    Some((engine, a.get(attribute::ITERATION)?.as_u64()?))
}

/// The export thread: group events by request, export each closed request; group an engine's
/// events by batched forward, export each forward once the engine's next one starts (or at the
/// end), and keep the latest forwards' events to link the requests they served.
fn run(exporter: &SpanExporter, rx: &Receiver<ProfileEvent>, c: &Counters, max_pending: usize) {
    let mut pending: VecDeque<(String, Vec<ProfileEvent>)> = VecDeque::new();
    // Forwards not exported yet: (engine, iteration) and their events.
    let mut forwards: VecDeque<((String, u64), Vec<ProfileEvent>)> = VecDeque::new();
    // The latest forwards' own events (phase `iteration`), for the requests they served.
    let mut recent: VecDeque<ProfileEvent> = VecDeque::new();
    loop {
        let event = match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(event) => event,
            Err(RecvTimeoutError::Timeout) if c.closing.load(Ordering::Acquire) => break,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        if event.attributes.contains_key(attribute::ENGINE) {
            let Some(key) = forward_of(&event) else {
                continue;
            };
            if event.phase.as_deref() == Some(ITERATION_PHASE) {
                // The engine's earlier forwards are whole: their module spans came before.
                while let Some(i) = forwards
                    .iter()
                    .position(|((e, n), _)| *e == key.0 && *n < key.1)
                {
                    if let Some((_, events)) = forwards.remove(i) {
                        export_forward(exporter, events, c);
                    }
                }
                if recent.len() >= max_pending {
                    recent.pop_front();
                }
                recent.push_back(event.clone());
            }
            match forwards.iter_mut().find(|(k, _)| *k == key) {
                Some((_, events)) => events.push(event),
                None => {
                    if forwards.len() >= max_pending {
                        if let Some((_, events)) = forwards.pop_front() {
                            export_forward(exporter, events, c);
                        }
                    }
                    forwards.push_back((key, vec![event]));
                }
            }
            continue;
        }
        let request_id = event.request_id.clone().unwrap_or_default();
        let closes = event.event_kind.as_deref() == Some("timed_span")
            && event.phase.as_deref() == Some("request");
        let slot = match pending.iter().position(|(id, _)| *id == request_id) {
            Some(i) => i,
            None => {
                if pending.len() >= max_pending {
                    pending.pop_front();
                    c.requests_incomplete.fetch_add(1, Ordering::Relaxed);
                }
                pending.push_back((request_id.clone(), Vec::new()));
                pending.len() - 1
            }
        };
        pending[slot].1.push(event);
        if closes {
            if let Some((_, mut events)) = pending.remove(slot) {
                // The forwards that served it, for its links to them.
                events.extend(recent.iter().filter(|it| lists(it, &request_id)).cloned());
                export_request(exporter, events, c);
            }
        }
    }
    for (_, events) in forwards {
        export_forward(exporter, events, c);
    }
    c.requests_incomplete
        .fetch_add(pending.len() as u64, Ordering::Relaxed);
}

/// Whether a batched forward's event lists `request_id` among its requests.
fn lists(iteration: &ProfileEvent, request_id: &str) -> bool {
    iteration
        .attributes
        .get(attribute::REQUESTS)
        .and_then(|r| r.as_array())
        .is_some_and(|r| {
            r.iter().any(|e| {
                e.get(attribute::REQUEST_ID).and_then(|id| id.as_str()) == Some(request_id)
            })
        })
}

fn document(events: Vec<ProfileEvent>) -> ProfileDocument {
    ProfileDocument {
        records: events
            .into_iter()
            .enumerate()
            .map(|(i, event)| ProfileRecord {
                line: i as u64 + 1,
                event,
                violations: Vec::new(),
            })
            .collect(),
        diagnostics: Vec::new(),
    }
}

/// Send `batch`; true when the collector took it (a failure is counted and its first error
/// kept).
fn send(exporter: &SpanExporter, batch: Vec<SpanData>, c: &Counters) -> bool {
    match block_on(exporter.export(batch)) {
        Ok(()) => true,
        Err(e) => {
            c.requests_failed.fetch_add(1, Ordering::Relaxed);
            let detail = c.client_error.lock().ok().and_then(|mut d| d.take());
            if let Ok(mut first) = c.first_error.lock() {
                first.get_or_insert_with(|| match detail {
                    Some(detail) => format!("{e} ({detail})"),
                    None => e.to_string(),
                });
            }
            false
        }
    }
}

fn export_request(exporter: &SpanExporter, events: Vec<ProfileEvent>, c: &Counters) {
    let batch: Vec<SpanData> = request_spans(&document(events))
        .iter()
        .map(span_data)
        .collect();
    let n = batch.len() as u64;
    if send(exporter, batch, c) {
        c.requests_exported.fetch_add(1, Ordering::Relaxed);
        c.spans_exported.fetch_add(n, Ordering::Relaxed);
    }
}

fn export_forward(exporter: &SpanExporter, events: Vec<ProfileEvent>, c: &Counters) {
    let batch: Vec<SpanData> = iteration_spans(&document(events))
        .iter()
        .map(span_data)
        .collect();
    if batch.is_empty() {
        return;
    }
    let n = batch.len() as u64;
    if send(exporter, batch, c) {
        c.forwards_exported.fetch_add(1, Ordering::Relaxed);
        c.spans_exported.fetch_add(n, Ordering::Relaxed);
    }
}

fn value(v: &AttributeValue) -> Value {
    match v {
        AttributeValue::String(s) => Value::from(s.clone()),
        AttributeValue::Int(i) => Value::I64(*i),
        AttributeValue::Double(f) => Value::F64(*f),
        AttributeValue::Bool(b) => Value::Bool(*b),
    }
}

fn attributes(attrs: &[(String, AttributeValue)]) -> Vec<KeyValue> {
    attrs
        .iter()
        // A live request has no file line.
        .filter(|(k, _)| k != LINE_ATTRIBUTE)
        .map(|(k, v)| KeyValue::new(k.clone(), value(v)))
        .collect()
}

fn time(unix_nanos: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_nanos(unix_nanos)
}

/// One schema span as the SDK's `SpanData`.
fn span_data(s: &OtlpSpan) -> SpanData {
    let mut events = SpanEvents::default();
    events.events = s
        .events
        .iter()
        .map(|e| {
            Event::new(
                e.name.clone(),
                time(e.time_unix_nanos),
                attributes(&e.attributes),
                0,
            )
        })
        .collect();
    SpanData {
        span_context: SpanContext::new(
            TraceId::from_bytes(s.trace_id),
            SpanId::from_bytes(s.span_id),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id: s.parent_span_id.map_or(SpanId::INVALID, SpanId::from_bytes),
        parent_span_is_remote: false,
        span_kind: match s.kind {
            OtlpSpanKind::Server => SpanKind::Server,
            OtlpSpanKind::Internal => SpanKind::Internal,
        },
        name: s.name.clone().into(),
        start_time: time(s.start_unix_nanos),
        end_time: time(s.end_unix_nanos),
        attributes: attributes(&s.attributes),
        dropped_attributes_count: 0,
        events,
        links: {
            let mut links = SpanLinks::default();
            links.links = s
                .links
                .iter()
                .map(|l| {
                    Link::new(
                        SpanContext::new(
                            TraceId::from_bytes(l.trace_id),
                            SpanId::from_bytes(l.span_id),
                            TraceFlags::SAMPLED,
                            false,
                            TraceState::default(),
                        ),
                        attributes(&l.attributes),
                        0,
                    )
                })
                .collect();
            links
        },
        status: match &s.error {
            Some(message) => Status::error(message.clone()),
            None => Status::Unset,
        },
        instrumentation_scope: InstrumentationScope::builder(SCOPE_NAME)
            .with_version(env!("CARGO_PKG_VERSION"))
            .build(),
    }
}

/// Run a future to completion on this thread (the exporter's futures never wait on a
/// runtime: the HTTP client below is blocking).
fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(out) => return out,
            Poll::Pending => thread::park(),
        }
    }
}

/// Largest response body read.
const MAX_RESPONSE_BYTES: usize = 4 << 20;

/// A blocking HTTP/1.1 client: one request per connection, every step within `timeout`.
#[derive(Debug)]
struct BlockingHttp {
    timeout: Duration,
    /// Where the message of the latest failure goes.
    last_error: Arc<Mutex<Option<String>>>,
}

impl HttpClient for BlockingHttp {
    fn send_bytes<'life0, 'async_trait>(
        &'life0 self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let result = post(&request, self.timeout);
        if let Err(e) = &result {
            if let Ok(mut last) = self.last_error.lock() {
                *last = Some(e.to_string());
            }
        }
        Box::pin(std::future::ready(result))
    }
}

fn post(request: &Request<Bytes>, timeout: Duration) -> Result<Response<Bytes>, HttpError> {
    let deadline = Instant::now() + timeout;
    let uri = request.uri();
    if uri.scheme_str() != Some("http") {
        return Err(format!(
            "{uri}: only http:// endpoints are supported (send to a local collector)"
        )
        .into());
    }
    let host = uri.host().ok_or_else(|| format!("{uri}: no host"))?;
    let port = uri.port_u16().unwrap_or(80);
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut last_error: Option<std::io::Error> = None;
    let mut stream = None;
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last_error = Some(e),
        }
    }
    let mut stream = match (stream, last_error) {
        (Some(s), _) => s,
        (None, Some(e)) => return Err(format!("cannot connect to {host}:{port}: {e}").into()),
        (None, None) => return Err(format!("{host}:{port} resolves to no address").into()),
    };
    let left = |deadline: Instant| {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| HttpError::from(format!("export to {uri} timed out after {timeout:?}")))
    };
    stream.set_write_timeout(Some(left(deadline)?))?;
    let mut head = format!(
        "{} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Length: {}\r\nConnection: close\r\n",
        request.method(),
        request.body().len()
    );
    for (name, value) in request.headers() {
        if let Ok(v) = value.to_str() {
            head.push_str(&format!("{name}: {v}\r\n"));
        }
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(request.body())?;
    stream.flush()?;
    let mut response = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        stream.set_read_timeout(Some(left(deadline)?))?;
        let n = match stream.read(&mut buf) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(format!("export to {uri} timed out after {timeout:?}").into())
            }
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            break;
        }
        response.extend_from_slice(&buf[..n]);
        if response.len() > MAX_RESPONSE_BYTES {
            return Err(format!("{uri}: response larger than 4 MiB").into());
        }
        if let Some(done) = complete_response(&response) {
            response.truncate(done);
            break;
        }
    }
    parse_response(&response).ok_or_else(|| format!("{uri}: not an HTTP response").into())
}

/// The end of a complete response with a `Content-Length`, if `bytes` holds it all.
fn complete_response(bytes: &[u8]) -> Option<usize> {
    let head_end = bytes.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&bytes[..head_end]).ok()?;
    let length: usize = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse().ok())?
    })?;
    (bytes.len() >= head_end + length).then_some(head_end + length)
}

fn parse_response(bytes: &[u8]) -> Option<Response<Bytes>> {
    let head_end = bytes.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&bytes[..head_end]).ok()?;
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let mut builder = Response::builder().status(status);
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            builder = builder.header(name.trim(), value.trim());
        }
    }
    builder
        .body(Bytes::copy_from_slice(&bytes[head_end + 4..]))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_are_framed_by_content_length() {
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(complete_response(r), Some(r.len()));
        assert_eq!(complete_response(&r[..r.len() - 1]), None);
        let parsed = parse_response(r).unwrap();
        assert_eq!(parsed.status(), 200);
        assert_eq!(&parsed.body()[..], b"ok");
        assert!(parse_response(b"garbage").is_none());
    }

    #[test]
    fn https_is_refused_with_a_message() {
        let request = Request::builder()
            .uri("https://collector:4318/v1/traces")
            .body(Bytes::new())
            .unwrap();
        let err = post(&request, Duration::from_millis(10)).unwrap_err();
        assert!(err.to_string().contains("only http://"), "{err}");
    }
}
