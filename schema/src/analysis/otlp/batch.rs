//! Each batched forward as a trace of its own: the forward's span and its module spans, and the
//! links a request span gets to the forwards that served it.

use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use serde_json::Value;

use crate::analysis::iterations::Iteration;
use crate::analysis::requests::RequestSummary;
use crate::format::profile::{
    attribute, engine_of, ProfileDocument, ProfileRecord, ITERATION_PHASE, MODULE_PHASE,
};

use super::{
    end_of, event_attributes, id_hash, module_span, s, span_id, unix, Attribute, AttributeValue,
    OtlpLink, OtlpSpan, OtlpSpanKind, LINE_ATTRIBUTE,
};

/// The trace id of an engine's batched forward (module docs).
pub fn iteration_trace_id(correlation_id: &str, engine: &str, iteration: u64) -> [u8; 16] {
    let n = iteration.to_string();
    let parts = [correlation_id, engine, "iteration", n.as_str()];
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&id_hash(1, &parts).to_be_bytes());
    id[8..].copy_from_slice(&id_hash(2, &parts).to_be_bytes());
    if id == [0; 16] {
        id[15] = 1;
    }
    id
}

/// The span id of an engine's batched forward (module docs).
pub fn iteration_span_id(correlation_id: &str, engine: &str, iteration: u64) -> [u8; 8] {
    span_id(
        correlation_id,
        engine,
        &["iteration", &iteration.to_string()],
    )
}

fn forward_attributes(it: &Iteration) -> Vec<Attribute> {
    let int = |k: &str, v: u64| {
        (
            String::from(k),
            AttributeValue::Int(i64::try_from(v).unwrap_or(i64::MAX)),
        )
    };
    alloc::vec![
        s("candle_trace.engine", &it.engine),
        int("candle_trace.iteration", it.iteration),
        int("candle_trace.batch_size", it.batch_size),
    ]
}

/// A request's part in each batched forward that lists it: a child of its request span
/// (named `prefill` when it ran the request's prompt tokens, else `decode`), linked to the
/// forward's span.
pub(super) fn forward_parts(
    root: &OtlpSpan,
    summary: &RequestSummary,
    iterations: &[Iteration],
) -> Vec<OtlpSpan> {
    let request_id = summary.request_id.as_str();
    let correlation = root
        .attributes
        .iter()
        .find_map(|(k, v)| match v {
            AttributeValue::String(s) if k == "candle_trace.correlation_id" => Some(s.as_str()),
            _ => None,
        })
        .unwrap_or("");
    let mut out = Vec::new();
    for it in iterations {
        let Some(part) = it.requests.iter().find(|r| r.request_id == request_id) else {
            continue;
        };
        let start = unix(it.start_unix_nanos);
        let iteration = it.iteration.to_string();
        let int = |k: &str, v: u64| {
            (
                String::from(k),
                AttributeValue::Int(i64::try_from(v).unwrap_or(i64::MAX)),
            )
        };
        let mut attributes = forward_attributes(it);
        attributes.push(int("candle_trace.prefill_tokens", part.prefill_tokens));
        attributes.push(int("candle_trace.decode_tokens", part.decode_tokens));
        attributes.push(int("candle_trace.committed_tokens", part.committed_tokens));
        attributes.push((
            String::from(LINE_ATTRIBUTE),
            AttributeValue::Int(i64::try_from(it.line).unwrap_or(i64::MAX)),
        ));
        out.push(OtlpSpan {
            trace_id: root.trace_id,
            span_id: span_id(
                correlation,
                request_id,
                &["forward", &it.engine, &iteration],
            ),
            parent_span_id: Some(root.span_id),
            name: String::from(if part.prefill_tokens > 0 {
                "prefill"
            } else {
                "decode"
            }),
            kind: OtlpSpanKind::Internal,
            start_unix_nanos: start,
            end_unix_nanos: end_of(start, it.duration_ns),
            attributes,
            events: Vec::new(),
            error: None,
            links: alloc::vec![OtlpLink {
                trace_id: iteration_trace_id(correlation, &it.engine, it.iteration),
                span_id: iteration_span_id(correlation, &it.engine, it.iteration),
                attributes: alloc::vec![s("candle_trace.link", "batched_forward")],
            }],
        });
    }
    out
}

/// The spans of every batched forward of `doc` (SCHEMA.md §4): per forward, a trace of its
/// own with the forward's span (kind `INTERNAL`, name `iteration`) and its module spans under
/// it, in time order.
pub fn iteration_spans(doc: &ProfileDocument) -> Vec<OtlpSpan> {
    let iterations = doc.iterations().iterations;
    // (engine, iteration) → the records of its module spans.
    let mut modules: BTreeMap<(&str, u64), Vec<&ProfileRecord>> = BTreeMap::new();
    for r in &doc.records {
        let Some(engine) = engine_of(r) else { continue };
        if r.event.phase.as_deref() != Some(MODULE_PHASE) {
            continue;
        }
        if let Some(n) = r
            .event
            .attributes
            .get(attribute::ITERATION)
            .and_then(Value::as_u64)
        {
            modules.entry((engine, n)).or_default().push(r);
        }
    }
    let mut out = Vec::new();
    for it in &iterations {
        let Some(record) = doc.records.iter().find(|r| r.line == it.line) else {
            continue;
        };
        let correlation = record.event.correlation_id.as_deref().unwrap_or("");
        let trace = iteration_trace_id(correlation, &it.engine, it.iteration);
        let root = iteration_span_id(correlation, &it.engine, it.iteration);
        let start = unix(it.start_unix_nanos);
        let mut attributes = forward_attributes(it);
        for (key, v) in [
            ("candle_trace.prefill_tokens", it.prefill_tokens),
            ("candle_trace.decode_tokens", it.decode_tokens),
            ("candle_trace.committed_tokens", it.committed_tokens),
        ] {
            attributes.push((
                String::from(key),
                AttributeValue::Int(i64::try_from(v).unwrap_or(i64::MAX)),
            ));
        }
        let ids: Vec<&str> = it.requests.iter().map(|r| r.request_id.as_str()).collect();
        attributes.push(s("candle_trace.requests", &ids.join(",")));
        if let Some(thread) = &it.thread {
            attributes.push(s("candle_trace.thread", thread));
        }
        attributes.extend(event_attributes(record));
        out.push(OtlpSpan {
            trace_id: trace,
            span_id: root,
            parent_span_id: None,
            name: String::from(ITERATION_PHASE),
            kind: OtlpSpanKind::Internal,
            start_unix_nanos: start,
            end_unix_nanos: end_of(start, it.duration_ns),
            attributes,
            events: Vec::new(),
            error: (it.status == "failure").then(|| {
                record
                    .event
                    .error
                    .as_ref()
                    .and_then(|e| e.message.clone())
                    .unwrap_or_default()
            }),
            links: Vec::new(),
        });
        let iteration = it.iteration.to_string();
        let module_id = |n: u64| {
            span_id(
                correlation,
                &it.engine,
                &["iteration", &iteration, "module", &n.to_string()],
            )
        };
        for r in modules
            .get(&(it.engine.as_str(), it.iteration))
            .into_iter()
            .flatten()
        {
            let a = &r.event.attributes;
            let own = a
                .get(attribute::SPAN_ID)
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let parent = a
                .get(attribute::PARENT_SPAN_ID)
                .and_then(Value::as_u64)
                .map_or(root, module_id);
            out.push(module_span(r, trace, module_id(own), parent));
        }
    }
    out
}
