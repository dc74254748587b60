//! The request table of an inference profile.

use candle_trace_schema::profile::ProfileDocument;
use candle_trace_schema::units::format_ns;

/// One request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRow {
    /// Request id.
    pub request_id: String,
    /// `ok`, `failure` or `diagnostic_only`.
    pub status: &'static str,
    /// Model, or empty.
    pub model: String,
    /// Phases in order of first appearance, joined with `, `.
    pub phases: String,
    /// Request duration, human.
    pub duration: String,
    /// Time to first token, human.
    pub ttft: String,
    /// Output tokens, or empty.
    pub output_tokens: String,
    /// Mean inter-token latency, human.
    pub itl_avg: String,
    /// Events, and how many are invalid.
    pub event_count: u64,
    /// Invalid events.
    pub invalid_event_count: u64,
}

fn us(v: Option<u64>) -> String {
    v.map_or_else(|| "—".into(), |us| format_ns(us.saturating_mul(1_000)))
}

/// One row per request, in the profile's order.
pub fn request_rows(doc: &ProfileDocument) -> Vec<RequestRow> {
    doc.requests()
        .into_iter()
        .map(|r| RequestRow {
            status: r.status.as_str(),
            model: r.model.unwrap_or_default(),
            phases: r.phases.join(", "),
            duration: us(r.duration_us),
            ttft: us(r.ttft_us),
            output_tokens: r.output_tokens.map(|n| n.to_string()).unwrap_or_default(),
            itl_avg: us(r.itl_us_avg),
            event_count: r.event_count,
            invalid_event_count: r.invalid_event_count,
            request_id: r.request_id,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_trace_schema::profile::read_profile;

    #[test]
    fn golden_profile_requests() {
        let doc = read_profile(include_bytes!(
            "../../../tests/fixtures/infer_run.profile.jsonl"
        ));
        let rows = request_rows(&doc);
        assert_eq!(rows.len(), 3);
        assert!(rows.iter().any(|r| r.status == "failure"));
        assert_eq!(rows.iter().map(|r| r.event_count).sum::<u64>(), 17);
    }
}
