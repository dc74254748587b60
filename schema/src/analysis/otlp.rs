//! An inference profile as OpenTelemetry traces: the spans ([`request_spans`]) and their
//! OTLP/JSON encoding, an `ExportTraceServiceRequest` ([`to_otlp_json`], [`profile_to_otlp`]).
//!
//! Pure and deterministic (no clock, no randomness, no I/O), so the same profile always gives
//! the same file, and the capture library's live exporter sends the same spans.
//!
//! ```
//! use candle_trace_schema::analysis::otlp::{profile_to_otlp, request_spans};
//! use candle_trace_schema::format::profile::read_profile;
//!
//! let line = concat!(
//!     r#"{"schema_version":1,"event_kind":"timed_span","ts_unix_nanos":1767225600000000000,"#,
//!     r#""timestamp":"2026-01-01T00:00:00Z","event_id":"e1","request_id":"r1","#,
//!     r#""correlation_id":"c1","entrypoint":"serve","backend":"cpu","#,
//!     r#""runtime_preset_hash":"sha256:ab","phase":"request","status":"ok","duration_us":2500,"#,
//!     r#""model":"tiny","shape":{"prompt_tokens":12}}"#, "\n",
//! );
//! let doc = read_profile(line.as_bytes());
//! let spans = request_spans(&doc);
//! assert_eq!(spans.len(), 1);
//! assert_eq!(spans[0].end_unix_nanos - spans[0].start_unix_nanos, 2_500_000);
//! let json = profile_to_otlp(&doc, "my-server");
//! assert!(json.contains(r#""key":"gen_ai.request.model","value":{"stringValue":"tiny"}"#));
//! ```
//!
//! # The mapping
//!
//! - **One trace per request** (events grouped by `request_id`, in order of first appearance).
//! - **The request span** (kind `SERVER`, name `request`): from the request's first `timed_span`
//!   of phase `request` (start `ts_unix_nanos`, the capture library's span start; end start +
//!   `duration_us` × 1000). A request without one (not closed) spans from its earliest
//!   `ts_unix_nanos` to the latest end of its events. Status `ERROR` (message: the first error
//!   message) when the request failed ([`RequestSummary::status`]), otherwise unset.
//! - **Phase spans** (kind `INTERNAL`, named after the phase: `prefill`, `decode` — one per
//!   decode wave — ...): every other `timed_span` with a `duration_us`, except module spans;
//!   children of the request span.
//! - **Module spans** (phase `module`, SCHEMA.md §4): named after `attributes.name`, ns times
//!   from `ts_unix_nanos` and `attributes.duration_nanos` (else `duration_us` × 1000). The parent
//!   is the module span `parent_span_id`; at the top of a forward call, the forward's phase
//!   span (`forward` `prefill` → the first `prefill` span; `decode` with `forward_index` n →
//!   the n-th `decode` span by start), else the request span.
//! - **Batched forwards** (SCHEMA.md §4, events of an engine): each forward is a trace of its
//!   own: a root span `iteration` (kind `INTERNAL`, from its event's start and duration,
//!   attributes `candle_trace.engine`, `.iteration`, `.batch_size`, `.prefill_tokens`,
//!   `.decode_tokens`, `.committed_tokens`, `.requests` (the ids, comma-separated), `.thread`;
//!   status `ERROR` when it failed) with its module spans under it ([`iteration_spans`]). Every
//!   request it lists gets a child of its request span for its part (named `prefill` when the
//!   forward ran its prompt tokens, else `decode`; same times; its own token counts) carrying
//!   an OTLP span link to the forward's span (link attribute `candle_trace.link` =
//!   `batched_forward`).
//! - **Span events on the request span**: one `token` per engine token commit (at
//!   `engine_token_wall_anchor_unix_nanos` + commit, attribute `candle_trace.token.index`,
//!   1-based); one `exception` per `error` (`exception.type`, `exception.message`); every other
//!   event that is not a `timed_span` as `<event_kind>: <phase>`.
//! - **Attributes**. GenAI semantic conventions on the request span where the profile has the
//!   value: `gen_ai.request.model` (`model`), `gen_ai.usage.input_tokens` (`shape.prompt_tokens`),
//!   `gen_ai.usage.output_tokens` (`engine_token_commit_count`),
//!   `gen_ai.server.time_to_first_token` (s, `ttft_us` / 10^6),
//!   `gen_ai.server.time_per_output_token` (s, mean of `itl_nanos` / 10^9). Everything else is
//!   under `candle_trace.`: `request_id`, `correlation_id`, `entrypoint`, `backend`,
//!   `runtime_preset_hash`, `status`, `shape.<key>` on the request span; `event_id`, `phase`,
//!   `line` on every span; `module.name`, `module.span_kind`, `module.forward`,
//!   `module.forward_index` on module spans, and `module` (the module name of its weights,
//!   `model.layers.0.self_attn.q_proj`) on those that have one. Strings, integers (`intValue`, a decimal string in
//!   JSON), doubles and booleans are kept as such; other JSON values are written as their JSON
//!   text.
//! - **Resource**: `service.name` (the caller's); scope `candle-trace` with the crate version.
//!
//! # Ids: derived, not random
//!
//! `h(seed, parts)` = splitmix64(FNV-1a 64 over the parts, each followed by a 0 byte, starting
//! from the FNV offset basis XOR `seed`). With `key` = (`correlation_id` of the request's first
//! event, `request_id`): trace id = `h(1, key)` ‖ `h(2, key)` (big-endian, 16 bytes); request
//! span id = `h(3, key + "request")`; phase span id = `h(3, key + "event" + event_id)`; module
//! span id = `h(3, key + "module" + span_id)` (its decimal `span_id`, unique in the request); a
//! request's part in a batched forward `h(3, key + "forward" + engine + iteration)`. A batched
//! forward's trace id is `h(1, f)` ‖ `h(2, f)` with `f` = (`correlation_id`, engine,
//! `"iteration"`, iteration), its span id `h(3, (correlation_id, engine, "iteration",
//! iteration))`, its module spans' `h(3, (correlation_id, engine, "iteration", iteration,
//! "module", span_id))`. So
//! a profile exported twice, or exported and sent live, gives the same ids; an id that comes
//! out all zero (invalid in OTLP) becomes 1.
//!
//! # OTLP/JSON
//!
//! As the OTLP specification's JSON encoding requires: lowerCamelCase field names, trace and
//! span ids as lowercase hex strings, 64-bit integers (`startTimeUnixNano`, `intValue`) as
//! decimal strings, enums (`kind`, `status.code`) as integers, optional fields omitted.
//!
//! [`RequestSummary::status`]: crate::analysis::requests::RequestSummary

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use serde_json::Value;

use crate::format::profile::{attribute, ProfileRecord, MODULE_PHASE};

mod batch;
mod encode;
mod request;

pub use batch::{iteration_span_id, iteration_spans, iteration_trace_id};
pub use encode::{profile_to_otlp, to_otlp_json};
pub use request::request_spans;

/// The instrumentation scope name written with every span.
pub const SCOPE_NAME: &str = "candle-trace";

/// The span attribute holding the profile line an event came from (a live exporter leaves it
/// out: a live request has no file line).
pub const LINE_ATTRIBUTE: &str = "candle_trace.line";

/// An OTLP span kind (the values of the protobuf enum).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpSpanKind {
    /// `SPAN_KIND_INTERNAL` (1).
    Internal = 1,
    /// `SPAN_KIND_SERVER` (2).
    Server = 2,
}

/// An attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum AttributeValue {
    /// `stringValue`.
    String(String),
    /// `intValue`.
    Int(i64),
    /// `doubleValue`.
    Double(f64),
    /// `boolValue`.
    Bool(bool),
}

/// One attribute.
pub type Attribute = (String, AttributeValue);

/// A span event.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpEvent {
    /// Event name.
    pub name: String,
    /// When it happened, ns since the Unix epoch.
    pub time_unix_nanos: u64,
    /// Its attributes.
    pub attributes: Vec<Attribute>,
}

/// One span, ready to encode.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpSpan {
    /// 16-byte trace id (one per request).
    pub trace_id: [u8; 16],
    /// 8-byte span id.
    pub span_id: [u8; 8],
    /// The parent's span id; `None` for the request span.
    pub parent_span_id: Option<[u8; 8]>,
    /// Span name.
    pub name: String,
    /// Span kind.
    pub kind: OtlpSpanKind,
    /// Start, ns since the Unix epoch.
    pub start_unix_nanos: u64,
    /// End, ns since the Unix epoch.
    pub end_unix_nanos: u64,
    /// Attributes, in a fixed order.
    pub attributes: Vec<Attribute>,
    /// Span events, by time.
    pub events: Vec<OtlpEvent>,
    /// `Some(message)` when the span's status is `ERROR`; `None` leaves it unset.
    pub error: Option<String>,
    /// Links to spans of other traces (a request's part in a batched forward → the forward).
    pub links: Vec<OtlpLink>,
}

/// A link from a span to a span of another trace.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpLink {
    /// The linked span's trace.
    pub trace_id: [u8; 16],
    /// The linked span.
    pub span_id: [u8; 8],
    /// The link's attributes.
    pub attributes: Vec<Attribute>,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `h(seed, parts)` from the module docs.
fn id_hash(seed: u64, parts: &[&str]) -> u64 {
    let mut h = FNV_OFFSET ^ seed;
    for part in parts {
        for &b in part.as_bytes().iter().chain(core::iter::once(&0u8)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(FNV_PRIME);
        }
    }
    splitmix64(h)
}

/// The trace id of a request (module docs).
pub fn trace_id(correlation_id: &str, request_id: &str) -> [u8; 16] {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&id_hash(1, &[correlation_id, request_id]).to_be_bytes());
    id[8..].copy_from_slice(&id_hash(2, &[correlation_id, request_id]).to_be_bytes());
    if id == [0; 16] {
        id[15] = 1;
    }
    id
}

/// A span id from the request key and the span's own parts (module docs).
pub fn span_id(correlation_id: &str, request_id: &str, parts: &[&str]) -> [u8; 8] {
    let mut all: Vec<&str> = Vec::with_capacity(parts.len() + 2);
    all.push(correlation_id);
    all.push(request_id);
    all.extend_from_slice(parts);
    match id_hash(3, &all) {
        0 => 1u64.to_be_bytes(),
        h => h.to_be_bytes(),
    }
}

fn to_attribute(v: &Value) -> AttributeValue {
    match v {
        Value::String(s) => AttributeValue::String(s.clone()),
        Value::Bool(b) => AttributeValue::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => AttributeValue::Int(i),
            (None, Some(f)) if n.is_f64() => AttributeValue::Double(f),
            // A u64 above i64::MAX: keep every digit.
            _ => AttributeValue::String(n.to_string()),
        },
        other => AttributeValue::String(other.to_string()),
    }
}

fn s(key: &str, value: &str) -> Attribute {
    (
        String::from(key),
        AttributeValue::String(String::from(value)),
    )
}

fn end_of(start: u64, duration_ns: u64) -> u64 {
    start.saturating_add(duration_ns)
}

fn unix(ts: i64) -> u64 {
    u64::try_from(ts).unwrap_or(0)
}

/// A module span's span (name, times, attributes) with the given ids.
fn module_span(r: &ProfileRecord, trace: [u8; 16], id: [u8; 8], parent: [u8; 8]) -> OtlpSpan {
    let e = &r.event;
    let a = &e.attributes;
    let start = unix(e.ts_unix_nanos.unwrap_or(0));
    let d = a
        .get(attribute::DURATION_NANOS)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| e.duration_us.unwrap_or(0).saturating_mul(1000));
    let name = a
        .get(attribute::NAME)
        .and_then(Value::as_str)
        .unwrap_or(MODULE_PHASE);
    let mut attributes = event_attributes(r);
    attributes.push(s("candle_trace.module.name", name));
    for (key, field) in [
        ("candle_trace.module.span_kind", attribute::SPAN_KIND),
        ("candle_trace.module.forward", attribute::FORWARD),
        (
            "candle_trace.module.forward_index",
            attribute::FORWARD_INDEX,
        ),
        ("candle_trace.module.iteration", attribute::ITERATION),
        ("candle_trace.module", attribute::MODULE),
    ] {
        if let Some(v) = a.get(field) {
            attributes.push((String::from(key), to_attribute(v)));
        }
    }
    OtlpSpan {
        trace_id: trace,
        span_id: id,
        parent_span_id: Some(parent),
        name: String::from(name),
        kind: OtlpSpanKind::Internal,
        start_unix_nanos: start,
        end_unix_nanos: end_of(start, d),
        attributes,
        events: Vec::new(),
        error: None,
        links: Vec::new(),
    }
}

/// `candle_trace.event_id`, `.phase`, `.line` of one event.
fn event_attributes(r: &ProfileRecord) -> Vec<Attribute> {
    let mut out = Vec::new();
    if let Some(id) = &r.event.event_id {
        out.push(s("candle_trace.event_id", id));
    }
    if let Some(phase) = &r.event.phase {
        out.push(s("candle_trace.phase", phase));
    }
    out.push((
        String::from(LINE_ATTRIBUTE),
        AttributeValue::Int(i64::try_from(r.line).unwrap_or(i64::MAX)),
    ));
    out
}

#[cfg(test)]
mod tests {

    use super::encode::{hex, value_json};
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_follow_the_documented_derivation() {
        // FNV-1a 64 of "" with the plain offset basis is the basis itself; check the hash on
        // a known FNV-1a vector: "a" → 0xaf63dc4c8601ec8c (before the splitmix finalizer).
        let mut h = FNV_OFFSET;
        for &b in b"a" {
            h ^= u64::from(b);
            h = h.wrapping_mul(FNV_PRIME);
        }
        assert_eq!(h, 0xaf63_dc4c_8601_ec8c);
        // splitmix64(0) is the first output of the reference generator seeded with 0.
        assert_eq!(splitmix64(0), 0xe220_a839_7b1d_cdaf);
        assert_eq!(trace_id("c", "r1"), trace_id("c", "r1"));
        assert_ne!(trace_id("c", "r1"), trace_id("c", "r2"));
        assert_ne!(trace_id("c", "r1"), trace_id("d", "r1"));
        // The separator keeps ("ab", "c") and ("a", "bc") apart.
        assert_ne!(trace_id("ab", "c"), trace_id("a", "bc"));
    }

    #[test]
    fn hex_is_lowercase_and_two_digits_per_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa0, 0xff]), "000fa0ff");
    }

    #[test]
    fn attribute_values_keep_their_json_type() {
        assert_eq!(to_attribute(&json!(3)), AttributeValue::Int(3));
        assert_eq!(to_attribute(&json!(1.5)), AttributeValue::Double(1.5));
        assert_eq!(to_attribute(&json!(true)), AttributeValue::Bool(true));
        assert_eq!(
            to_attribute(&json!(u64::MAX)),
            AttributeValue::String(String::from("18446744073709551615"))
        );
        assert_eq!(
            to_attribute(&json!([1, 2])),
            AttributeValue::String(String::from("[1,2]"))
        );
        assert_eq!(
            value_json(&AttributeValue::Int(-7)),
            json!({"intValue": "-7"})
        );
    }

    #[test]
    fn a_batched_forward_is_a_span_linked_from_every_request_it_served() {
        use crate::analysis::iterations::tests::iteration_line;
        use crate::analysis::request_axis::tests::{request, T0};
        let ums: u64 = 1_000_000;
        let module = concat!(
            r#"{"schema_version":1,"event_kind":"timed_span","ts_unix_nanos":1767225600002000100,"#,
            r#""timestamp":"2026-01-01T00:00:00Z","event_id":"m0","request_id":"e","#,
            r#""correlation_id":"c","entrypoint":"serve","backend":"cpu","runtime_preset_hash":"h","#,
            r#""phase":"module","status":"ok","duration_us":500,"shape":{"batch_size":2},"#,
            r#""attributes":{"engine":"e","iteration":0,"span_id":0,"name":"block","span_kind":"module","#,
            r#""start_nanos_since_iteration_start":100,"duration_nanos":500000}}"#,
            "\n"
        );
        let text = [
            request("a", 0, "main", 4000, &[3 * ums]),
            request("b", 0, "main", 4000, &[3 * ums]),
            iteration_line(
                "e",
                0,
                T0 + 2_000_000,
                ums,
                &[("a", 4, 0, 1), ("b", 0, 1, 1)],
            ),
            String::from(module),
        ]
        .concat();
        let doc = crate::format::profile::read_profile(text.as_bytes());
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        let forwards = iteration_spans(&doc);
        assert_eq!(forwards.len(), 2);
        let forward = &forwards[0];
        assert_eq!(forward.name, "iteration");
        assert_eq!(forward.trace_id, iteration_trace_id("c", "e", 0));
        assert_eq!(forward.span_id, iteration_span_id("c", "e", 0));
        assert_eq!(forward.end_unix_nanos - forward.start_unix_nanos, 1_000_000);
        // Its module span is under it, in its trace.
        assert_eq!(forwards[1].parent_span_id, Some(forward.span_id));
        assert_eq!(forwards[1].trace_id, forward.trace_id);
        let spans = request_spans(&doc);
        let parts: Vec<&OtlpSpan> = spans.iter().filter(|s| !s.links.is_empty()).collect();
        assert_eq!(parts.len(), 2, "one per request it served");
        let names: Vec<&str> = parts.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["prefill", "decode"]);
        for part in &parts {
            assert_eq!(part.links[0].trace_id, forward.trace_id);
            assert_eq!(part.links[0].span_id, forward.span_id);
            assert_eq!(part.start_unix_nanos, forward.start_unix_nanos);
        }
        assert_eq!(parts[0].trace_id, trace_id("c", "a"));
        assert_eq!(
            parts[0].parent_span_id,
            Some(span_id("c", "a", &["request"]))
        );
        // The engine is not exported as a request.
        assert!(spans.iter().all(|s| s.trace_id != trace_id("c", "e")));
        let json = profile_to_otlp(&doc, "svc");
        let v: Value = serde_json::from_str(&json).unwrap();
        let all = v["resourceSpans"][0]["scopeSpans"][0]["spans"]
            .as_array()
            .unwrap();
        let linked = all.iter().filter(|s| s.get("links").is_some()).count();
        assert_eq!(linked, 2);
        let first = all.iter().find(|s| s.get("links").is_some()).unwrap();
        assert_eq!(first["links"][0]["spanId"], hex(&forward.span_id));
    }
}
