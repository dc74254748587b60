//! The OTLP/JSON encoding of spans: an `ExportTraceServiceRequest`.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use serde_json::{json, Map, Value};

use crate::format::profile::ProfileDocument;

use super::{batch::iteration_spans, request::request_spans};
use super::{Attribute, AttributeValue, OtlpSpan, SCOPE_NAME};

pub(super) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

pub(super) fn value_json(v: &AttributeValue) -> Value {
    match v {
        AttributeValue::String(s) => json!({ "stringValue": s }),
        AttributeValue::Int(i) => json!({ "intValue": i.to_string() }),
        // JSON has no NaN or infinity: such a double is written as its text.
        AttributeValue::Double(f) if f.is_finite() => json!({ "doubleValue": f }),
        AttributeValue::Double(f) => json!({ "stringValue": f.to_string() }),
        AttributeValue::Bool(b) => json!({ "boolValue": b }),
    }
}

fn attributes_json(attrs: &[Attribute]) -> Value {
    Value::Array(
        attrs
            .iter()
            .map(|(k, v)| json!({ "key": k, "value": value_json(v) }))
            .collect(),
    )
}

fn span_json(span: &OtlpSpan) -> Value {
    let mut m = Map::new();
    m.insert("traceId".into(), Value::String(hex(&span.trace_id)));
    m.insert("spanId".into(), Value::String(hex(&span.span_id)));
    if let Some(parent) = &span.parent_span_id {
        m.insert("parentSpanId".into(), Value::String(hex(parent)));
    }
    m.insert("name".into(), Value::String(span.name.clone()));
    m.insert("kind".into(), Value::from(span.kind as i32));
    m.insert(
        "startTimeUnixNano".into(),
        Value::String(span.start_unix_nanos.to_string()),
    );
    m.insert(
        "endTimeUnixNano".into(),
        Value::String(span.end_unix_nanos.to_string()),
    );
    m.insert("attributes".into(), attributes_json(&span.attributes));
    if !span.events.is_empty() {
        let events = span
            .events
            .iter()
            .map(|e| {
                json!({
                    "timeUnixNano": e.time_unix_nanos.to_string(),
                    "name": e.name,
                    "attributes": attributes_json(&e.attributes),
                })
            })
            .collect();
        m.insert("events".into(), Value::Array(events));
    }
    if !span.links.is_empty() {
        let links = span
            .links
            .iter()
            .map(|l| {
                json!({
                    "traceId": hex(&l.trace_id),
                    "spanId": hex(&l.span_id),
                    "attributes": attributes_json(&l.attributes),
                })
            })
            .collect();
        m.insert("links".into(), Value::Array(links));
    }
    if let Some(message) = &span.error {
        // STATUS_CODE_ERROR = 2.
        m.insert("status".into(), json!({ "code": 2, "message": message }));
    }
    Value::Object(m)
}

/// `spans` as one OTLP/JSON `ExportTraceServiceRequest` with resource `service.name`.
pub fn to_otlp_json(spans: &[OtlpSpan], service_name: &str) -> String {
    let spans: Vec<Value> = spans.iter().map(span_json).collect();
    let request = json!({
        "resourceSpans": [{
            "resource": { "attributes": [
                { "key": "service.name", "value": { "stringValue": service_name } }
            ] },
            "scopeSpans": [{
                "scope": { "name": SCOPE_NAME, "version": env!("CARGO_PKG_VERSION") },
                "spans": spans,
            }],
        }],
    });
    // Serializing a `Value` cannot fail.
    let mut out = serde_json::to_string(&request).unwrap_or_default();
    out.push('\n');
    out
}

/// [`request_spans`] of `doc` encoded by [`to_otlp_json`].
pub fn profile_to_otlp(doc: &ProfileDocument, service_name: &str) -> String {
    let mut spans = request_spans(doc);
    spans.extend(iteration_spans(doc));
    to_otlp_json(&spans, service_name)
}
