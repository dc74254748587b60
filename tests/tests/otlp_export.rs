//! `candle-trace export PROFILE --format otlp`: the file decodes as an
//! `ExportTraceServiceRequest` with the upstream OTLP definitions (`opentelemetry-proto`'s
//! serde, which implements the OTLP/JSON rules: hex ids, decimal-string 64-bit integers), and
//! every span, parent link, time and attribute equals what `otlp_request.profile.jsonl` says,
//! worked out by hand below.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use std::collections::HashMap;

use candle_trace_cli::run;
use candle_trace_schema::analysis::otlp::{span_id, trace_id};
use candle_trace_tests::fixtures_dir;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::Span;

/// 2026-01-01T00:00:00Z, the fixture's request r1 start (A); r2 starts at A + 3 ms.
const A: u64 = 1_767_225_600_000_000_000;

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a Any> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn export(args: &[&str]) -> (i32, String, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let mut all = vec!["candle-trace", "export"];
    all.extend_from_slice(args);
    let code = run(all, &mut out, &mut err);
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

fn decode(text: &str) -> ExportTraceServiceRequest {
    serde_json::from_str(text).expect("an OTLP/JSON ExportTraceServiceRequest")
}

#[test]
fn otlp_export_decodes_with_the_upstream_definitions_and_matches_the_profile() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.json");
    let fixture = fixtures_dir()
        .join("otlp")
        .join("otlp_request.profile.jsonl");
    let (code, _, err) = export(&[
        fixture.to_str().unwrap(),
        "--format",
        "otlp",
        "--service-name",
        "llama-server",
        "-o",
        path.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let request = decode(&std::fs::read_to_string(&path).unwrap());

    assert_eq!(request.resource_spans.len(), 1);
    let rs = &request.resource_spans[0];
    let resource = rs.resource.as_ref().unwrap();
    assert_eq!(
        attr(&resource.attributes, "service.name"),
        Some(&Any::StringValue("llama-server".into()))
    );
    assert_eq!(rs.scope_spans.len(), 1);
    assert_eq!(
        rs.scope_spans[0].scope.as_ref().unwrap().name,
        "candle-trace"
    );
    let spans: &[Span] = &rs.scope_spans[0].spans;
    // r1: request, prefill, 2 decode waves, 3 module spans; r2: request.
    assert_eq!(spans.len(), 8);

    // One trace per request, ids as documented in `schema::analysis::otlp`.
    let t1 = trace_id("c1", "r1").to_vec();
    let t2 = trace_id("c1", "r2").to_vec();
    assert_ne!(t1, t2);
    assert_eq!(spans.iter().filter(|s| s.trace_id == t1).count(), 7);
    assert_eq!(spans.iter().filter(|s| s.trace_id == t2).count(), 1);

    let by_id: HashMap<&[u8], &Span> = spans.iter().map(|s| (&s.span_id[..], s)).collect();
    assert_eq!(by_id.len(), 8, "span ids are unique");
    let find = |trace: &[u8], name: &str, start: u64| -> &Span {
        spans
            .iter()
            .find(|s| s.trace_id == trace && s.name == name && s.start_time_unix_nano == start)
            .unwrap_or_else(|| panic!("no span {name} at {start}"))
    };
    let parent_of = |s: &Span| -> Option<&Span> { by_id.get(&s.parent_span_id[..]).copied() };

    // r1's request span: `request` timed_span at A for 2500 µs.
    let root = find(&t1, "request", A);
    assert!(root.parent_span_id.is_empty());
    assert_eq!(root.span_id, span_id("c1", "r1", &["request"]).to_vec());
    assert_eq!(root.end_time_unix_nano, A + 2_500_000);
    assert_eq!(root.kind, 2, "SPAN_KIND_SERVER");
    assert!(root.status.is_none() || root.status.as_ref().unwrap().code == 0);
    let a = &root.attributes;
    assert_eq!(
        attr(a, "gen_ai.request.model"),
        Some(&Any::StringValue("tiny".into()))
    );
    assert_eq!(
        attr(a, "gen_ai.usage.input_tokens"),
        Some(&Any::IntValue(4))
    );
    assert_eq!(
        attr(a, "gen_ai.usage.output_tokens"),
        Some(&Any::IntValue(3))
    );
    // ttft_us 1000 → 0.001 s; itl_nanos [700 000, 500 000] → mean 600 000 ns = 0.0006 s.
    assert_eq!(
        attr(a, "gen_ai.server.time_to_first_token"),
        Some(&Any::DoubleValue(0.001))
    );
    assert_eq!(
        attr(a, "gen_ai.server.time_per_output_token"),
        Some(&Any::DoubleValue(0.0006))
    );
    assert_eq!(
        attr(a, "candle_trace.request_id"),
        Some(&Any::StringValue("r1".into()))
    );
    assert_eq!(attr(a, "candle_trace.shape.batch"), Some(&Any::IntValue(1)));
    // Span events: the request_open instant at A, then the three token commits at
    // A + 1.0, 1.7 and 2.2 ms (anchor A + commit ns).
    let events: Vec<(&str, u64)> = root
        .events
        .iter()
        .map(|e| (e.name.as_str(), e.time_unix_nano))
        .collect();
    assert_eq!(
        events,
        vec![
            ("instant: request", A),
            ("token", A + 1_000_000),
            ("token", A + 1_700_000),
            ("token", A + 2_200_000),
        ]
    );
    assert_eq!(
        attr(&root.events[3].attributes, "candle_trace.token.index"),
        Some(&Any::IntValue(3))
    );

    // Phase spans: prefill A+0.1 ms for 900 µs; decode waves at A+1.2 ms (500 µs) and
    // A+1.8 ms (400 µs); all children of the request span, kind INTERNAL.
    let prefill = find(&t1, "prefill", A + 100_000);
    let decode1 = find(&t1, "decode", A + 1_200_000);
    let decode2 = find(&t1, "decode", A + 1_800_000);
    for (span, end) in [
        (prefill, A + 1_000_000),
        (decode1, A + 1_700_000),
        (decode2, A + 2_200_000),
    ] {
        assert_eq!(span.end_time_unix_nano, end, "{}", span.name);
        assert_eq!(span.parent_span_id, root.span_id);
        assert_eq!(span.kind, 1, "SPAN_KIND_INTERNAL");
    }
    // Module spans: `forward` of the prefill under the prefill span, `linear` (parent_span_id 1)
    // under it with its ns duration (300 500), the decode step's `forward` (forward_index 1)
    // under the first decode wave.
    let fwd0 = find(&t1, "forward", A + 150_000);
    assert_eq!(fwd0.end_time_unix_nano, A + 950_000);
    assert_eq!(parent_of(fwd0).unwrap().span_id, prefill.span_id);
    let linear = find(&t1, "linear", A + 200_000);
    assert_eq!(linear.end_time_unix_nano, A + 500_500);
    assert_eq!(linear.parent_span_id, fwd0.span_id);
    assert_eq!(
        attr(&linear.attributes, "candle_trace.module.span_kind"),
        Some(&Any::StringValue("module".into()))
    );
    let fwd1 = find(&t1, "forward", A + 1_250_000);
    assert_eq!(fwd1.end_time_unix_nano, A + 1_650_000);
    assert_eq!(parent_of(fwd1).unwrap().span_id, decode1.span_id);
    assert_eq!(
        attr(&fwd1.attributes, "candle_trace.module.forward_index"),
        Some(&Any::IntValue(1))
    );

    // r2 failed: status ERROR with the error's message; the error event and the closing
    // event's error are `exception` span events; no token timing, so no TTFT attributes.
    let failed = find(&t2, "request", A + 3_000_000);
    assert_eq!(failed.end_time_unix_nano, A + 3_200_000);
    let status = failed.status.as_ref().unwrap();
    assert_eq!(
        (status.code, status.message.as_str()),
        (2, "no free KV blocks")
    );
    let exceptions: Vec<u64> = failed
        .events
        .iter()
        .filter(|e| e.name == "exception")
        .map(|e| e.time_unix_nano)
        .collect();
    assert_eq!(exceptions, vec![A + 3_000_000, A + 3_100_000]);
    assert_eq!(
        attr(&failed.events[1].attributes, "exception.type"),
        Some(&Any::StringValue("kv_cache_exhausted".into()))
    );
    assert_eq!(
        attr(&failed.attributes, "gen_ai.server.time_to_first_token"),
        None
    );
}

#[test]
fn otlp_export_is_deterministic_and_refuses_execution_traces() {
    let fixture = fixtures_dir()
        .join("otlp")
        .join("otlp_request.profile.jsonl");
    let f = fixture.to_str().unwrap();
    let (c1, first, _) = export(&[f, "--format", "otlp"]);
    let (c2, second, _) = export(&[f, "--format", "otlp"]);
    assert_eq!((c1, c2), (0, 0));
    assert_eq!(first, second);
    // Every other profile fixture decodes too.
    let (code, text, err) = export(&[
        fixtures_dir()
            .join("infer_run.profile.jsonl")
            .to_str()
            .unwrap(),
        "--format",
        "otlp",
    ]);
    assert_eq!(code, 0, "{err}");
    let spans = &decode(&text).resource_spans[0].scope_spans[0].spans;
    // infer_run: 3 requests; each has one `request` span.
    assert_eq!(spans.iter().filter(|s| s.name == "request").count(), 3);

    let trace = fixtures_dir().join("train_step.trace6.jsonl");
    let (code, _, err) = export(&[trace.to_str().unwrap(), "--format", "otlp"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("train_step.trace6.jsonl is an execution trace"),
        "{err}"
    );
}
