//! The live OTLP exporter (feature `otlp`) against a real OTLP/HTTP receiver: a thread on
//! 127.0.0.1 that decodes each request body as an `ExportTraceServiceRequest` with the
//! upstream definitions (`opentelemetry-proto` + prost). The spans received must be the spans
//! `candle_trace_schema::analysis::otlp::request_spans` makes from the profile file written in the same
//! run; with the collector down or stuck, serving finishes and the losses are counted.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use candle_trace_capture::otlp::OtlpConfig;
use candle_trace_capture::InferenceProfiler;
use candle_trace_schema::analysis::otlp::{request_spans, AttributeValue};
use candle_trace_schema::format::profile::{read_profile, DetailLevel, JsonMap, ProfilingConfig};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Read one HTTP/1.1 request (headers, then `Content-Length` bytes of body).
fn read_request(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(p) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&data[..head_end]).to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while data.len() < head_end + length {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    }
    Some((head, data[head_end..head_end + length].to_vec()))
}

/// An OTLP/HTTP receiver: every POST body decoded and sent to the test, answered 200.
fn receiver() -> (String, mpsc::Receiver<(String, ExportTraceServiceRequest)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let Some((head, body)) = read_request(&mut stream) else {
                continue;
            };
            let decoded = ExportTraceServiceRequest::decode(&body[..]).expect("protobuf");
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n",
            );
            if tx.send((head, decoded)).is_err() {
                return;
            }
        }
    });
    (endpoint, rx)
}

fn config() -> ProfilingConfig {
    ProfilingConfig {
        detail: DetailLevel::Latency,
        sample_rate: 1.0,
        outputs: vec!["unused.jsonl".into()],
    }
}

fn shape() -> JsonMap {
    let mut shape = JsonMap::new();
    shape.insert("prompt_tokens".into(), 3.into());
    shape
}

/// One request: a prefill step (the first token) and two decode steps (a wave and a token
/// each), measured by the profiler around the (empty) forward calls.
fn serve(profiler: &InferenceProfiler, id: &str) {
    let request = profiler.request_open(id, shape());
    request.prefill_step(|| Ok::<(), ()>(())).unwrap();
    for _ in 0..2 {
        request.decode_step(|| Ok::<(), ()>(())).unwrap();
    }
    request.request_close();
}

fn any_of(v: &AttributeValue) -> Any {
    match v {
        AttributeValue::String(s) => Any::StringValue(s.clone()),
        AttributeValue::Int(i) => Any::IntValue(*i),
        AttributeValue::Double(f) => Any::DoubleValue(*f),
        AttributeValue::Bool(b) => Any::BoolValue(*b),
    }
}

fn attrs(span_attrs: &[opentelemetry_proto::tonic::common::v1::KeyValue]) -> Vec<(String, Any)> {
    span_attrs
        .iter()
        .map(|kv| {
            (
                kv.key.clone(),
                kv.value.as_ref().unwrap().value.clone().unwrap(),
            )
        })
        .collect()
}

#[test]
fn live_export_sends_the_profiles_spans_to_a_real_otlp_receiver() {
    let (endpoint, received) = receiver();
    let out = Shared::default();
    let profiler = InferenceProfiler::builder(config())
        .writer(out.clone())
        .model("tiny")
        .correlation_id("live")
        .otlp(OtlpConfig::new(&endpoint).service_name("llama-server"))
        .build()
        .unwrap();
    serve(&profiler, "a");
    serve(&profiler, "b");
    let report = profiler.finish().unwrap();
    let otlp = report.otlp.expect("otlp report");
    // Per request: request + prefill + 2 decode waves = 4 spans.
    assert_eq!(otlp.requests_exported, 2, "{otlp:?}");
    assert_eq!(otlp.spans_exported, 8);
    assert_eq!(
        (
            otlp.requests_failed,
            otlp.events_dropped,
            otlp.requests_incomplete
        ),
        (0, 0, 0)
    );

    let mut got: Vec<Span> = Vec::new();
    while got.len() < 8 {
        let (head, request) = received
            .recv_timeout(Duration::from_secs(10))
            .expect("the receiver got every export");
        let head = head.to_ascii_lowercase();
        assert!(head.starts_with("post /v1/traces http/1.1"), "{head}");
        assert!(
            head.contains("content-type: application/x-protobuf"),
            "{head}"
        );
        for rs in request.resource_spans {
            let resource = rs.resource.unwrap();
            assert_eq!(
                attrs(&resource.attributes)
                    .into_iter()
                    .find(|(k, _)| k == "service.name")
                    .map(|(_, v)| v),
                Some(Any::StringValue("llama-server".into()))
            );
            for ss in rs.scope_spans {
                assert_eq!(ss.scope.unwrap().name, "candle-trace");
                got.extend(ss.spans);
            }
        }
    }
    assert_eq!(got.len(), 8);

    // The same spans, computed from the file this run wrote.
    let doc = read_profile(&out.0.lock().unwrap());
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    let want = request_spans(&doc);
    assert_eq!(want.len(), 8);
    let by_id: HashMap<Vec<u8>, &Span> = got.iter().map(|s| (s.span_id.clone(), s)).collect();
    for w in &want {
        let g = by_id.get(w.span_id.as_slice()).expect("every span arrived");
        assert_eq!(g.trace_id, w.trace_id.to_vec(), "{}", w.name);
        assert_eq!(
            g.parent_span_id,
            w.parent_span_id.map(|p| p.to_vec()).unwrap_or_default(),
            "{}",
            w.name
        );
        assert_eq!(g.name, w.name);
        assert_eq!(g.kind, w.kind as i32);
        assert_eq!(g.start_time_unix_nano, w.start_unix_nanos, "{}", w.name);
        assert_eq!(g.end_time_unix_nano, w.end_unix_nanos, "{}", w.name);
        let want_attrs: Vec<(String, Any)> = w
            .attributes
            .iter()
            .filter(|(k, _)| k != "candle_trace.line")
            .map(|(k, v)| (k.clone(), any_of(v)))
            .collect();
        assert_eq!(attrs(&g.attributes), want_attrs, "{}", w.name);
        let times: Vec<(String, u64)> = g
            .events
            .iter()
            .map(|e| (e.name.clone(), e.time_unix_nano))
            .collect();
        let want_times: Vec<(String, u64)> = w
            .events
            .iter()
            .map(|e| (e.name.clone(), e.time_unix_nanos))
            .collect();
        assert_eq!(times, want_times, "{}", w.name);
    }
    // Independently of the mapping: each request is one trace of a root and three children,
    // with three token events and the GenAI attributes the requests were served with.
    for id in ["a", "b"] {
        let root = got
            .iter()
            .find(|s| {
                s.parent_span_id.is_empty()
                    && attrs(&s.attributes).contains(&(
                        "candle_trace.request_id".into(),
                        Any::StringValue(id.into()),
                    ))
            })
            .unwrap();
        let a = attrs(&root.attributes);
        assert!(a.contains(&(
            "gen_ai.request.model".into(),
            Any::StringValue("tiny".into())
        )));
        assert!(a.contains(&("gen_ai.usage.input_tokens".into(), Any::IntValue(3))));
        assert!(a.contains(&("gen_ai.usage.output_tokens".into(), Any::IntValue(3))));
        assert!(a
            .iter()
            .any(|(k, _)| k == "gen_ai.server.time_to_first_token"));
        assert!(a
            .iter()
            .any(|(k, _)| k == "gen_ai.server.time_per_output_token"));
        assert_eq!(root.events.iter().filter(|e| e.name == "token").count(), 3);
        let children: Vec<&Span> = got
            .iter()
            .filter(|s| s.parent_span_id == root.span_id)
            .collect();
        let mut names: Vec<&str> = children.iter().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["decode", "decode", "prefill"]);
        for c in children {
            assert_eq!(c.trace_id, root.trace_id);
            assert!(c.start_time_unix_nano >= root.start_time_unix_nano);
            assert!(c.end_time_unix_nano >= c.start_time_unix_nano);
        }
    }
}

/// Serve `n` requests on another thread; true when it finished within a generous guard (a
/// serving thread blocked on the collector would not finish at all while it is down).
fn serving_finishes(profiler: &InferenceProfiler, n: usize) -> bool {
    let p = profiler.clone();
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        for i in 0..n {
            serve(&p, &format!("r{i}"));
        }
        let _ = done_tx.send(());
    });
    done_rx.recv_timeout(Duration::from_secs(60)).is_ok()
}

#[test]
fn collector_down_serving_goes_on_and_failures_are_counted() {
    // A port nothing listens on.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let out = Shared::default();
    let profiler = InferenceProfiler::builder(config())
        .writer(out.clone())
        .otlp(
            OtlpConfig::new(format!("http://127.0.0.1:{port}/v1/traces"))
                .export_timeout(Duration::from_millis(200)),
        )
        .build()
        .unwrap();
    assert!(serving_finishes(&profiler, 20));
    let report = profiler.finish().unwrap();
    let otlp = report.otlp.unwrap();
    assert_eq!(otlp.requests_exported, 0);
    assert!(otlp.requests_failed >= 1, "{otlp:?}");
    // Every request is accounted for: failed, never completed, or its events dropped.
    assert!(
        otlp.requests_failed + otlp.requests_incomplete <= 20 && otlp.requests_failed > 0,
        "{otlp:?}"
    );
    assert!(
        otlp.first_error
            .as_deref()
            .unwrap_or("")
            .contains("connect"),
        "{otlp:?}"
    );
    // The profile itself is whole.
    let doc = read_profile(&out.0.lock().unwrap());
    assert_eq!(doc.requests().len(), 20);
    assert_eq!(report.events_dropped, 0);
}

#[test]
fn stuck_collector_drops_events_instead_of_blocking_serving() {
    // Accepts connections and never answers until the test ends.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
    let keep = Arc::clone(&held);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            keep.lock().unwrap().push(stream);
        }
    });
    let out = Shared::default();
    let profiler = InferenceProfiler::builder(config())
        .writer(out.clone())
        .otlp(
            OtlpConfig::new(&endpoint)
                .queue_capacity(4)
                .export_timeout(Duration::from_millis(300)),
        )
        .build()
        .unwrap();
    // 100 requests × 5 events through a queue of 4 while each export waits 300 ms.
    assert!(serving_finishes(&profiler, 100));
    let report = profiler.finish().unwrap();
    let otlp = report.otlp.unwrap();
    assert!(otlp.events_dropped > 0, "{otlp:?}");
    assert_eq!(otlp.requests_exported, 0, "{otlp:?}");
    assert!(otlp.requests_failed >= 1, "{otlp:?}");
    assert!(
        otlp.first_error
            .as_deref()
            .unwrap_or("")
            .contains("timed out"),
        "{otlp:?}"
    );
    assert!(!held.lock().unwrap().is_empty(), "the exporter did connect");
    let doc = read_profile(&out.0.lock().unwrap());
    assert_eq!(doc.requests().len(), 100);
}

#[test]
fn a_batched_forward_reaches_the_collector_linked_from_the_requests_it_served() {
    let (endpoint, received) = receiver();
    let out = Shared::default();
    let profiler = InferenceProfiler::builder(config())
        .writer(out.clone())
        .correlation_id("live")
        .otlp(OtlpConfig::new(&endpoint))
        .build()
        .unwrap();
    let engine = profiler.engine("engine-0");
    let (a, b) = (
        profiler.request_open("a", shape()),
        profiler.request_open("b", shape()),
    );
    engine
        .forward()
        .prefill(&a, 3)
        .prefill(&b, 3)
        .run(|| Ok::<_, String>(()))
        .unwrap();
    engine
        .forward()
        .decode(&a)
        .decode(&b)
        .run(|| Ok::<_, String>(()))
        .unwrap();
    a.request_close();
    b.request_close();
    let report = profiler.finish().unwrap();
    let otlp = report.otlp.expect("otlp report");
    assert_eq!(
        (otlp.requests_exported, otlp.forwards_exported),
        (2, 2),
        "{otlp:?}"
    );
    let mut spans: Vec<Span> = Vec::new();
    while let Ok((_, req)) = received.recv_timeout(Duration::from_secs(2)) {
        for rs in req.resource_spans {
            for ss in rs.scope_spans {
                spans.extend(ss.spans);
            }
        }
        if spans.len() >= 8 {
            break;
        }
    }
    // 2 forward spans, and per request its span and its 2 parts.
    assert_eq!(spans.len(), 8);
    let forwards: Vec<&Span> = spans.iter().filter(|s| s.name == "iteration").collect();
    assert_eq!(forwards.len(), 2);
    let linked: Vec<&Span> = spans.iter().filter(|s| !s.links.is_empty()).collect();
    assert_eq!(linked.len(), 4);
    for part in linked {
        let target = &part.links[0];
        assert!(
            forwards
                .iter()
                .any(|f| f.span_id == target.span_id && f.trace_id == target.trace_id),
            "a link to a forward that was exported"
        );
    }
    // The same spans as the file's export.
    let doc = read_profile(&out.0.lock().unwrap());
    let from_file = candle_trace_schema::analysis::otlp::iteration_spans(&doc);
    assert_eq!(from_file.len(), 2);
    assert!(from_file
        .iter()
        .all(|f| forwards.iter().any(|s| s.span_id == f.span_id.to_vec())));
}
