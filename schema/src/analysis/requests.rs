//! What the CLI and the viewer show about an inference profile: per-request summaries, latency
//! percentiles, counts, the error list and the memory snapshots.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use serde::Serialize;

use crate::analysis::percentiles::Percentiles;
use crate::format::profile::{
    attribute, engine_of, EventKind, ProfileDocument, ProfileRecord, Status,
};

/// One request: its events folded together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequestSummary {
    /// The `request_id` shared by the events (empty for events without one).
    pub request_id: String,
    /// `failure` if any event failed, else `ok` if any succeeded, else `diagnostic_only`.
    pub status: Status,
    /// First `model` named by an event of the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// First `backend` named by an event of the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// Distinct phases in order of first appearance (module-span events, phase `module`, are
    /// no phase of the request and are left out).
    pub phases: Vec<String>,
    /// `duration_us` of the first `timed_span` event of phase `request` that has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_us: Option<u64>,
    /// `attributes.ttft_us` of the request's first event that has it (the timing event).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_us: Option<u64>,
    /// `attributes.engine_token_commit_count` of the timing event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// `attributes.itl_us_avg` of the timing event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub itl_us_avg: Option<u64>,
    /// `attributes.itl_nanos` of the timing event (its unsigned-integer elements).
    pub itl_nanos: Vec<u64>,
    /// Number of kept events of the request.
    pub event_count: u64,
    /// Number of those that break at least one rule.
    pub invalid_event_count: u64,
}

/// Latency percentiles over a profile's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LatencyStats {
    /// Over the requests' `ttft_us`; `None` when no request has one.
    pub ttft_us: Option<Percentiles>,
    /// Over every request's `itl_nanos` pooled; `None` when there are none.
    pub itl_nanos: Option<Percentiles>,
}

/// The headline numbers of an inference profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProfileSummary {
    /// Number of distinct `request_id`s of requests (an engine's events are not a request's).
    pub request_count: u64,
    /// Number of kept events.
    pub event_count: u64,
    /// Kept events that break at least one rule.
    pub invalid_event_count: u64,
    /// Kept events per `event_kind` (events without one are left out).
    pub events_by_kind: BTreeMap<String, u64>,
    /// Kept events per `status` as written (events without one are left out).
    pub events_by_status: BTreeMap<String, u64>,
    /// Percentiles of the requests' time to first token, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_us: Option<Percentiles>,
    /// Percentiles of the inter-token latencies of all requests, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub itl_nanos: Option<Percentiles>,
    /// Events carrying an `error` object.
    pub error_count: u64,
    /// Events carrying a `memory` snapshot.
    pub memory_snapshot_count: u64,
    /// Batched forwards ([`crate::analysis::iterations`]); left out of the JSON when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub iteration_count: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// An event's `error`, with where it was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorEntry {
    /// 1-based line of the event.
    pub line: u64,
    /// The event's `request_id`.
    pub request_id: Option<String>,
    /// `error.kind`.
    pub kind: Option<String>,
    /// `error.message`.
    pub message: Option<String>,
    /// `error.blocking`.
    pub blocking: bool,
}

/// An event's `memory` snapshot, with where and when it was taken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemorySnapshotEntry {
    /// 1-based line of the event.
    pub line: u64,
    /// The event's `request_id`.
    pub request_id: Option<String>,
    /// The event's `ts_unix_nanos`.
    pub ts_unix_nanos: Option<i64>,
    /// `memory.scope`.
    pub scope: Option<String>,
    /// `memory.current_bytes`.
    pub current_bytes: Option<u64>,
    /// `memory.high_water_bytes`.
    pub high_water_bytes: Option<u64>,
    /// `memory.available_bytes`.
    pub available_bytes: Option<i64>,
}

impl ProfileDocument {
    /// One summary per `request_id`, in order of first appearance; an engine's events
    /// ([`engine_of`]) are left out.
    pub fn requests(&self) -> Vec<RequestSummary> {
        let mut out: Vec<RequestSummary> = Vec::new();
        let mut outcome: Vec<(bool, bool)> = Vec::new(); // (any failure, any ok) per request
        let mut index: BTreeMap<&str, usize> = BTreeMap::new();
        for record in &self.records {
            // An engine's events (batched forwards …) are no request's.
            if engine_of(record).is_some() {
                continue;
            }
            let e = &record.event;
            let id = e.request_id.as_deref().unwrap_or("");
            let i = *index.entry(id).or_insert_with(|| {
                out.push(RequestSummary {
                    request_id: String::from(id),
                    status: Status::DiagnosticOnly,
                    model: None,
                    backend: None,
                    phases: Vec::new(),
                    duration_us: None,
                    ttft_us: None,
                    output_tokens: None,
                    itl_us_avg: None,
                    itl_nanos: Vec::new(),
                    event_count: 0,
                    invalid_event_count: 0,
                });
                outcome.push((false, false));
                out.len() - 1
            });
            let r = &mut out[i];
            r.event_count += 1;
            if !record.is_valid() {
                r.invalid_event_count += 1;
            }
            match e.status() {
                Some(Status::Failure) => outcome[i].0 = true,
                Some(Status::Ok) => outcome[i].1 = true,
                _ => {}
            }
            if r.model.is_none() {
                r.model.clone_from(&e.model);
            }
            if r.backend.is_none() {
                r.backend.clone_from(&e.backend);
            }
            if let Some(phase) = e
                .phase
                .as_ref()
                .filter(|p| *p != crate::format::profile::MODULE_PHASE)
            {
                if !r.phases.contains(phase) {
                    r.phases.push(phase.clone());
                }
            }
            if r.duration_us.is_none()
                && e.event_kind() == Some(EventKind::TimedSpan)
                && e.phase.as_deref() == Some("request")
            {
                r.duration_us = e.duration_us;
            }
            if r.ttft_us.is_none() {
                if let Some(ttft) = e
                    .attributes
                    .get(attribute::TTFT_US)
                    .and_then(|v| v.as_u64())
                {
                    let attr = |name: &str| e.attributes.get(name).and_then(|v| v.as_u64());
                    r.ttft_us = Some(ttft);
                    r.output_tokens = attr(attribute::ENGINE_TOKEN_COMMIT_COUNT);
                    r.itl_us_avg = attr(attribute::ITL_US_AVG);
                    r.itl_nanos = e
                        .attributes
                        .get(attribute::ITL_NANOS)
                        .and_then(|v| v.as_array())
                        .map(|a| a.iter().filter_map(|v| v.as_u64()).collect())
                        .unwrap_or_default();
                }
            }
        }
        for (r, (failure, ok)) in out.iter_mut().zip(outcome) {
            r.status = if failure {
                Status::Failure
            } else if ok {
                Status::Ok
            } else {
                Status::DiagnosticOnly
            };
        }
        out
    }

    /// Time-to-first-token and inter-token latency percentiles over the requests.
    pub fn latency(&self) -> LatencyStats {
        latency_of(&self.requests())
    }

    /// The headline numbers.
    pub fn summary(&self) -> ProfileSummary {
        self.summary_with(&self.requests())
    }

    /// [`summary`](Self::summary) from this document's [`requests`](Self::requests), already
    /// computed by the caller (they are the costly part).
    pub fn summary_with(&self, requests: &[RequestSummary]) -> ProfileSummary {
        let latency = latency_of(requests);
        let mut events_by_kind = BTreeMap::new();
        let mut events_by_status = BTreeMap::new();
        let (mut invalid, mut errors, mut memory, mut iterations) = (0, 0, 0, 0);
        for record in &self.records {
            let e = &record.event;
            iterations += u64::from(crate::analysis::iterations::is_iteration_event(record));
            if let Some(kind) = &e.event_kind {
                *events_by_kind.entry(kind.clone()).or_insert(0) += 1;
            }
            if let Some(status) = &e.status {
                *events_by_status.entry(status.clone()).or_insert(0) += 1;
            }
            invalid += u64::from(!record.is_valid());
            errors += u64::from(e.error.is_some());
            memory += u64::from(e.memory.is_some());
        }
        ProfileSummary {
            request_count: requests.len() as u64,
            event_count: self.records.len() as u64,
            invalid_event_count: invalid,
            events_by_kind,
            events_by_status,
            ttft_us: latency.ttft_us,
            itl_nanos: latency.itl_nanos,
            error_count: errors,
            memory_snapshot_count: memory,
            iteration_count: iterations,
        }
    }

    /// Every event's `error`, in file order.
    pub fn errors(&self) -> Vec<ErrorEntry> {
        self.records
            .iter()
            .filter_map(|r| {
                let error = r.event.error.as_ref()?;
                Some(ErrorEntry {
                    line: r.line,
                    request_id: r.event.request_id.clone(),
                    kind: error.kind.clone(),
                    message: error.message.clone(),
                    blocking: error.blocking,
                })
            })
            .collect()
    }

    /// Every event's `memory` snapshot, in file order.
    pub fn memory_snapshots(&self) -> Vec<MemorySnapshotEntry> {
        self.records
            .iter()
            .filter_map(|r| {
                let m = r.event.memory.as_ref()?;
                Some(MemorySnapshotEntry {
                    line: r.line,
                    request_id: r.event.request_id.clone(),
                    ts_unix_nanos: r.event.ts_unix_nanos,
                    scope: m.scope.clone(),
                    current_bytes: m.current_bytes,
                    high_water_bytes: m.high_water_bytes,
                    available_bytes: m.available_bytes,
                })
            })
            .collect()
    }

    /// The events recorded for diagnosis only (`status` `diagnostic_only`), in file order; shown
    /// apart from the request timeline.
    pub fn diagnostic_only(&self) -> Vec<&ProfileRecord> {
        self.records
            .iter()
            .filter(|r| r.event.status() == Some(Status::DiagnosticOnly))
            .collect()
    }
}

impl LatencyStats {
    /// The percentiles over `requests` (what [`ProfileDocument::latency`] gives).
    pub fn of(requests: &[RequestSummary]) -> Self {
        latency_of(requests)
    }
}

fn latency_of(requests: &[RequestSummary]) -> LatencyStats {
    let ttft: Vec<u64> = requests.iter().filter_map(|r| r.ttft_us).collect();
    let itl: Vec<u64> = requests
        .iter()
        .flat_map(|r| r.itl_nanos.iter().copied())
        .collect();
    LatencyStats {
        ttft_us: Percentiles::of(&ttft),
        itl_nanos: Percentiles::of(&itl),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::profile::tests::good;
    use crate::format::profile::{
        read_profile, EngineTokenTiming, MemorySnapshot, ProfileError, ProfileEvent,
    };
    use alloc::string::ToString;
    use alloc::vec;
    use serde_json::Value;

    fn event(
        request: &str,
        kind: &str,
        phase: &str,
        status: &str,
        f: impl FnOnce(&mut ProfileEvent),
    ) -> String {
        let mut e = good();
        e.request_id = Some(request.into());
        e.event_kind = Some(kind.into());
        e.phase = Some(phase.into());
        e.status = Some(status.into());
        e.attributes.clear();
        if kind != "timed_span" {
            e.duration_us = None;
        }
        f(&mut e);
        let mut line = e.to_json_line();
        line.push('\n');
        line
    }

    /// Three requests:
    /// - a: ok, request span 9000 µs, timing commits [1 000 000, 2 500 000, 5 000 000]
    /// - b: a prefill event, then a failed decode, then the request span (12 000 µs),
    ///   timing commits [3 000 000, 3 400 000]
    /// - c: only diagnostic events, one of them invalid (blank backend)
    fn file() -> String {
        let timing = |commits: Vec<u64>| {
            let mut t = EngineTokenTiming::new(1, 0);
            t.token_commit_nanos_since_request_start = commits;
            t.derived_attributes()
        };
        let mut f = String::new();
        f += &event("a", "instant", "prefill", "ok", |e| e.model = None); // 1
        f += &event("b", "instant", "prefill", "ok", |e| {
            e.model = Some("mb".into());
            e.backend = Some("metal".into());
        }); // 2
        f += &event("a", "timed_span", "request", "ok", |e| {
            e.duration_us = Some(9000);
            e.model = Some("ma".into());
            e.attributes = timing(vec![1_000_000, 2_500_000, 5_000_000]);
        }); // 3
        f += &event("b", "error", "decode", "failure", |e| {
            let mut err = ProfileError::new("oom", "out of memory");
            err.blocking = true;
            e.error = Some(err);
        }); // 4
        f += &event("b", "timed_span", "request", "ok", |e| {
            e.duration_us = Some(12_000);
            e.attributes = timing(vec![3_000_000, 3_400_000]);
        }); // 5
        f += &event("c", "memory", "decode", "diagnostic_only", |e| {
            e.memory = Some(MemorySnapshot {
                available_bytes: Some(64),
                ..MemorySnapshot::new("kv_cache", 1, 2, 30, 40)
            });
        }); // 6
        f += &event("c", "instant", "decode", "diagnostic_only", |e| {
            e.backend = Some(" ".into());
        }); // 7
        f
    }

    #[test]
    fn requests_fold_events_in_first_appearance_order() {
        let doc = read_profile(file().as_bytes());
        assert_eq!(doc.records.len(), 7);
        let r = doc.requests();
        let ids: Vec<&str> = r.iter().map(|r| r.request_id.as_str()).collect();
        assert_eq!(ids, vec!["a", "b", "c"]);

        let a = &r[0];
        assert_eq!(a.status, Status::Ok);
        assert_eq!(a.model.as_deref(), Some("ma")); // line 1 has none
        assert_eq!(a.backend.as_deref(), Some("cuda"));
        assert_eq!(a.phases, vec!["prefill".to_string(), "request".to_string()]);
        assert_eq!(a.duration_us, Some(9000));
        assert_eq!(a.ttft_us, Some(1000)); // 1 000 000 ns / 1000
        assert_eq!(a.output_tokens, Some(3));
        assert_eq!(a.itl_nanos, vec![1_500_000, 2_500_000]);
        assert_eq!(a.itl_us_avg, Some(2000));
        assert_eq!((a.event_count, a.invalid_event_count), (2, 0));

        let b = &r[1];
        assert_eq!(b.status, Status::Failure);
        assert_eq!(b.model.as_deref(), Some("mb"));
        assert_eq!(b.backend.as_deref(), Some("metal"));
        assert_eq!(
            b.phases,
            vec![
                "prefill".to_string(),
                "decode".to_string(),
                "request".to_string()
            ]
        );
        assert_eq!(b.duration_us, Some(12_000));
        assert_eq!(b.ttft_us, Some(3000));
        assert_eq!(b.output_tokens, Some(2));
        assert_eq!(b.itl_nanos, vec![400_000]);
        assert_eq!(b.itl_us_avg, Some(400));
        assert_eq!((b.event_count, b.invalid_event_count), (3, 0));

        let c = &r[2];
        assert_eq!(c.status, Status::DiagnosticOnly);
        assert_eq!(c.duration_us, None);
        assert_eq!(c.ttft_us, None);
        assert_eq!(c.output_tokens, None);
        assert!(c.itl_nanos.is_empty());
        assert_eq!((c.event_count, c.invalid_event_count), (2, 1));
    }

    #[test]
    fn summary_counts_and_percentiles() {
        let doc = read_profile(file().as_bytes());
        let s = doc.summary();
        assert_eq!(s.request_count, 3);
        assert_eq!(s.event_count, 7);
        assert_eq!(s.invalid_event_count, 1);
        let by_kind: Vec<(&str, u64)> = s
            .events_by_kind
            .iter()
            .map(|(k, &n)| (k.as_str(), n))
            .collect();
        assert_eq!(
            by_kind,
            vec![
                ("error", 1),
                ("instant", 3),
                ("memory", 1),
                ("timed_span", 2)
            ]
        );
        let by_status: Vec<(&str, u64)> = s
            .events_by_status
            .iter()
            .map(|(k, &n)| (k.as_str(), n))
            .collect();
        assert_eq!(
            by_status,
            vec![("diagnostic_only", 2), ("failure", 1), ("ok", 4)]
        );
        assert_eq!(s.error_count, 1);
        assert_eq!(s.memory_snapshot_count, 1);
        // ttft over [1000, 3000]: p50 rank ceil(1.0) = 1 → 1000; p90 rank ceil(1.8) = 2 → 3000.
        let ttft = s.ttft_us.unwrap();
        assert_eq!(
            (ttft.count, ttft.min, ttft.p50, ttft.p90, ttft.p99, ttft.max, ttft.mean),
            (2, 1000, 1000, 3000, 3000, 3000, 2000)
        );
        // itl pooled: [1 500 000, 2 500 000, 400 000] → sorted [400 000, 1 500 000, 2 500 000];
        // p50 rank ceil(1.5) = 2; mean 4 400 000 / 3 = 1 466 666.
        let itl = s.itl_nanos.unwrap();
        assert_eq!(
            (itl.count, itl.min, itl.p50, itl.p90, itl.max, itl.mean),
            (3, 400_000, 1_500_000, 2_500_000, 2_500_000, 1_466_666)
        );
        assert_eq!(doc.latency().ttft_us, Some(ttft));
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["events_by_kind"]["instant"], Value::from(3u64));
    }

    #[test]
    fn error_memory_and_diagnostic_lists() {
        let doc = read_profile(file().as_bytes());
        assert_eq!(
            doc.errors(),
            vec![ErrorEntry {
                line: 4,
                request_id: Some("b".into()),
                kind: Some("oom".into()),
                message: Some("out of memory".into()),
                blocking: true,
            }]
        );
        assert_eq!(
            doc.memory_snapshots(),
            vec![MemorySnapshotEntry {
                line: 6,
                request_id: Some("c".into()),
                ts_unix_nanos: Some(1_767_225_600_000_000_000),
                scope: Some("kv_cache".into()),
                current_bytes: Some(30),
                high_water_bytes: Some(40),
                available_bytes: Some(64),
            }]
        );
        let lines: Vec<u64> = doc.diagnostic_only().iter().map(|r| r.line).collect();
        assert_eq!(lines, vec![6, 7]);
    }

    #[test]
    fn an_empty_document_has_no_requests_and_no_percentiles() {
        let doc = read_profile(b"");
        assert!(doc.requests().is_empty());
        let s = doc.summary();
        assert_eq!((s.request_count, s.event_count), (0, 0));
        assert_eq!(s.ttft_us, None);
        assert_eq!(s.itl_nanos, None);
    }

    #[test]
    fn events_without_request_id_are_grouped_under_the_empty_id() {
        let mut f = String::new();
        f += &event("x", "instant", "p", "ok", |e| e.request_id = None);
        f += &event("x", "instant", "p", "bogus", |e| e.request_id = None);
        let doc = read_profile(f.as_bytes());
        let r = doc.requests();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].request_id, "");
        assert_eq!((r[0].event_count, r[0].invalid_event_count), (2, 2));
        assert_eq!(r[0].status, Status::Ok);
        assert_eq!(doc.summary().events_by_status.get("bogus"), Some(&1));
    }
}
