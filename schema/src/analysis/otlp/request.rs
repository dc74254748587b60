//! Each request as one trace: the request span, its phase and module spans, its token events
//! and the links to the batched forwards that served it.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use serde_json::Value;

use crate::format::profile::{attribute, ProfileDocument, ProfileRecord, Status, MODULE_PHASE};

use super::batch::forward_parts;
use super::{
    end_of, event_attributes, module_span, s, span_id, to_attribute, trace_id, unix, Attribute,
    AttributeValue, OtlpEvent, OtlpSpan, OtlpSpanKind,
};

/// The spans of every request of `doc`, request by request (request span first, then the
/// phase spans and module spans in file order).
pub fn request_spans(doc: &ProfileDocument) -> Vec<OtlpSpan> {
    let summaries = doc.requests();
    let mut by_request: BTreeMap<&str, Vec<&ProfileRecord>> = BTreeMap::new();
    for r in &doc.records {
        by_request
            .entry(r.event.request_id.as_deref().unwrap_or(""))
            .or_default()
            .push(r);
    }
    let iterations = doc.iterations().iterations;
    let mut out = Vec::new();
    for summary in &summaries {
        let Some(records) = by_request.get(summary.request_id.as_str()) else {
            continue;
        };
        let mut spans = spans_of_request(summary, records);
        spans.extend(forward_parts(&spans[0], summary, &iterations));
        out.extend(spans);
    }
    out
}

fn spans_of_request(
    summary: &crate::analysis::requests::RequestSummary,
    records: &[&ProfileRecord],
) -> Vec<OtlpSpan> {
    let request_id = summary.request_id.as_str();
    let first = &records[0].event;
    let correlation = first.correlation_id.as_deref().unwrap_or("");
    let trace = trace_id(correlation, request_id);
    let root_id = span_id(correlation, request_id, &["request"]);
    let is_timed = |r: &ProfileRecord| {
        r.event.event_kind.as_deref() == Some("timed_span") && r.event.duration_us.is_some()
    };
    let closing = records
        .iter()
        .find(|r| is_timed(r) && r.event.phase.as_deref() == Some("request"));

    // The request's extent.
    let (start, end) = match closing {
        Some(r) => {
            let start = unix(r.event.ts_unix_nanos.unwrap_or(0));
            let d = r.event.duration_us.unwrap_or(0).saturating_mul(1000);
            (start, end_of(start, d))
        }
        None => {
            let start = records
                .iter()
                .filter_map(|r| r.event.ts_unix_nanos)
                .min()
                .map_or(0, unix);
            let end = records
                .iter()
                .filter_map(|r| {
                    let ts = unix(r.event.ts_unix_nanos?);
                    Some(end_of(
                        ts,
                        r.event.duration_us.unwrap_or(0).saturating_mul(1000),
                    ))
                })
                .max()
                .unwrap_or(start);
            (start, end)
        }
    };

    // Root attributes: GenAI where it exists, then candle_trace.*.
    let mut attrs: Vec<Attribute> = Vec::new();
    if let Some(model) = &summary.model {
        attrs.push(s("gen_ai.request.model", model));
    }
    let prompt_tokens = records
        .iter()
        .find_map(|r| r.event.shape.get("prompt_tokens").and_then(Value::as_i64));
    if let Some(n) = prompt_tokens {
        attrs.push((
            String::from("gen_ai.usage.input_tokens"),
            AttributeValue::Int(n),
        ));
    }
    if let Some(n) = summary.output_tokens.and_then(|n| i64::try_from(n).ok()) {
        attrs.push((
            String::from("gen_ai.usage.output_tokens"),
            AttributeValue::Int(n),
        ));
    }
    if let Some(ttft) = summary.ttft_us {
        attrs.push((
            String::from("gen_ai.server.time_to_first_token"),
            AttributeValue::Double(ttft as f64 / 1e6),
        ));
    }
    if !summary.itl_nanos.is_empty() {
        let sum: u128 = summary.itl_nanos.iter().map(|&n| u128::from(n)).sum();
        let mean_s = sum as f64 / summary.itl_nanos.len() as f64 / 1e9;
        attrs.push((
            String::from("gen_ai.server.time_per_output_token"),
            AttributeValue::Double(mean_s),
        ));
    }
    attrs.push(s("candle_trace.request_id", request_id));
    for (key, value) in [
        ("candle_trace.correlation_id", &first.correlation_id),
        ("candle_trace.entrypoint", &first.entrypoint),
        ("candle_trace.backend", &first.backend),
        (
            "candle_trace.runtime_preset_hash",
            &first.runtime_preset_hash,
        ),
    ] {
        if let Some(v) = value {
            attrs.push(s(key, v));
        }
    }
    attrs.push(s("candle_trace.status", summary.status.as_str()));
    for (key, value) in &first.shape {
        attrs.push((format!("candle_trace.shape.{key}"), to_attribute(value)));
    }
    if let Some(r) = closing {
        attrs.extend(event_attributes(r));
    }

    // Span events on the request span.
    let mut events: Vec<OtlpEvent> = Vec::new();
    let mut error: Option<String> = None;
    let mut tokens_done = false;
    for r in records {
        let e = &r.event;
        if !tokens_done {
            let commits = crate::format::profile::token_commits(&e.attributes);
            if !commits.is_empty() {
                tokens_done = true;
                for (n, (_, at)) in commits.into_iter().enumerate() {
                    events.push(OtlpEvent {
                        name: String::from("token"),
                        time_unix_nanos: unix(at),
                        attributes: alloc::vec![(
                            String::from("candle_trace.token.index"),
                            AttributeValue::Int(n as i64 + 1),
                        )],
                    });
                }
            }
        }
        if let Some(err) = &e.error {
            let message = err.message.clone().unwrap_or_default();
            if error.is_none() {
                error = Some(message.clone());
            }
            events.push(OtlpEvent {
                name: String::from("exception"),
                time_unix_nanos: unix(e.ts_unix_nanos.unwrap_or(0)),
                attributes: alloc::vec![
                    s("exception.type", err.kind.as_deref().unwrap_or("")),
                    s("exception.message", &message),
                    s("candle_trace.phase", e.phase.as_deref().unwrap_or("")),
                ],
            });
        } else if e.event_kind.as_deref() != Some("timed_span") {
            let kind = e.event_kind.as_deref().unwrap_or("event");
            let mut attributes = event_attributes(r);
            if let Some(status) = &e.status {
                attributes.push(s("candle_trace.status", status));
            }
            events.push(OtlpEvent {
                name: format!("{kind}: {}", e.phase.as_deref().unwrap_or("")),
                time_unix_nanos: unix(e.ts_unix_nanos.unwrap_or(0)),
                attributes,
            });
        }
    }
    // Stable: equal times keep file order.
    events.sort_by_key(|ev| ev.time_unix_nanos);
    let failed = summary.status == Status::Failure;
    let mut spans = alloc::vec![OtlpSpan {
        trace_id: trace,
        span_id: root_id,
        parent_span_id: None,
        name: String::from("request"),
        kind: OtlpSpanKind::Server,
        start_unix_nanos: start,
        end_unix_nanos: end,
        attributes: attrs,
        events,
        error: failed.then(|| error.unwrap_or_default()),
        links: Vec::new(),
    }];

    // Phase spans, then module spans (which may point at them).
    let mut prefill: Option<[u8; 8]> = None;
    let mut decodes: Vec<(u64, usize, [u8; 8])> = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let phase = r.event.phase.as_deref().unwrap_or("");
        if !is_timed(r) || phase == "request" || phase == MODULE_PHASE {
            continue;
        }
        let event_id = r.event.event_id.as_deref().unwrap_or("");
        let id = span_id(correlation, request_id, &["event", event_id]);
        let start = unix(r.event.ts_unix_nanos.unwrap_or(0));
        let d = r.event.duration_us.unwrap_or(0).saturating_mul(1000);
        match phase {
            "prefill" if prefill.is_none() => prefill = Some(id),
            "decode" => decodes.push((start, i, id)),
            _ => {}
        }
        spans.push(OtlpSpan {
            trace_id: trace,
            span_id: id,
            parent_span_id: Some(root_id),
            name: String::from(phase),
            kind: OtlpSpanKind::Internal,
            start_unix_nanos: start,
            end_unix_nanos: end_of(start, d),
            attributes: event_attributes(r),
            events: Vec::new(),
            error: None,
            links: Vec::new(),
        });
    }
    decodes.sort_by_key(|d| (d.0, d.1));
    for r in records {
        let e = &r.event;
        if !is_timed(r) || e.phase.as_deref() != Some(MODULE_PHASE) {
            continue;
        }
        let a = &e.attributes;
        let own = a
            .get(attribute::SPAN_ID)
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let own = own.to_string();
        let parent = match a.get(attribute::PARENT_SPAN_ID).and_then(Value::as_u64) {
            Some(p) => span_id(correlation, request_id, &["module", &p.to_string()]),
            None => {
                let forward = a.get(attribute::FORWARD).and_then(Value::as_str);
                let index = a
                    .get(attribute::FORWARD_INDEX)
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                let phase_span = match forward {
                    Some("prefill") => prefill,
                    Some("decode") => usize::try_from(index)
                        .ok()
                        .and_then(|n| n.checked_sub(1))
                        .and_then(|n| decodes.get(n))
                        .map(|d| d.2),
                    _ => None,
                };
                phase_span.unwrap_or(root_id)
            }
        };
        spans.push(module_span(
            r,
            trace,
            span_id(correlation, request_id, &["module", &own]),
            parent,
        ));
    }
    spans
}
