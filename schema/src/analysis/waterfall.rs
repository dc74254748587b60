//! Per-request waterfalls of an inference profile: phase spans, token commits and decode-stage
//! intervals on one time axis; and the profiling settings the file states.
//!
//! Rules where SCHEMA.md is silent:
//! - A request's **origin** (time 0) is `attributes.engine_token_wall_anchor_unix_nanos` of its
//!   first event that has one as an integer (token commits and stage intervals are relative to
//!   it); otherwise the smallest `ts_unix_nanos` among its events.
//! - A `timed_span` event with `ts_unix_nanos` and `duration_us` is a bar that **starts** at
//!   `ts_unix_nanos` (as `capture`'s profiler writes it) and lasts `duration_us × 1000` ns.
//!   Every other event with a `ts_unix_nanos` is a marker at that time.
//! - Token commits, decode-stage intervals and decode-ready come from the request's first event
//!   whose `attributes.ttft_us` is an unsigned integer (the same event as `requests()` reads);
//!   array elements that are not unsigned integers (or malformed intervals) are skipped.
//! - Requests are in order of first appearance; events without `request_id` form the request
//!   with the empty id. Times are ns relative to the origin, signed (an event may precede it).
//! - An engine's events ([`engine_of`]) are no request's: they have no waterfall. A request's
//!   [`forwards`](Waterfall::forwards) are the batched forwards whose `requests` list it
//!   ([`crate::analysis::iterations`]), placed on its time axis by their `ts_unix_nanos`.
//! - Module-span events (phase `module`, see [`RequestModules`](crate::analysis::profile_modules::RequestModules)) are left out: they
//!   are drawn by no bar or marker and set no origin; a request with nothing else has no
//!   waterfall.
//! - Settings: `detail_level` (string) and `sample_rate` (number) are read from the first event
//!   whose `attributes` carry them (capture's profiler writes both on `request_open`).

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use serde::Serialize;
use serde_json::Value;

use crate::analysis::iterations::Iteration;
use crate::format::profile::{attribute, engine_of, ProfileDocument, Status};

/// A `timed_span` bar.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PhaseBar {
    /// Phase (`request`, `prefill`, `decode` ...).
    pub phase: String,
    /// Start relative to the origin.
    pub start_ns: i64,
    /// `duration_us × 1000`.
    pub duration_ns: u64,
    /// The event's status spelling (empty when absent).
    pub status: String,
    /// Line of the event.
    pub line: u64,
}

/// Any other event, drawn as a tick.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Marker {
    /// Phase.
    pub phase: String,
    /// `event_kind` spelling (empty when absent).
    pub event_kind: String,
    /// Status spelling.
    pub status: String,
    /// Time relative to the origin.
    pub at_ns: i64,
    /// Line of the event.
    pub line: u64,
}

/// A decode-stage interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StageBar {
    /// `decode_scheduling`, `decode_execution` or `decode_postprocess`.
    pub stage: String,
    /// Start, ns since the request started.
    pub start_ns: u64,
    /// End, ns since the request started.
    pub end_ns: u64,
}

/// A batched forward the request took part in (an engine's `iteration` event that lists it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ForwardBar {
    /// The engine that ran it.
    pub engine: String,
    /// Its number within the engine.
    pub iteration: u64,
    /// Start relative to the request's origin.
    pub start_ns: i64,
    /// Its duration.
    pub duration_ns: u64,
    /// Requests in it.
    pub batch_size: u64,
    /// This request's prompt tokens in it.
    pub prefill_tokens: u64,
    /// This request's decode tokens in it.
    pub decode_tokens: u64,
    /// Line of the iteration event.
    pub line: u64,
}

/// One request's waterfall.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Waterfall {
    /// Request id.
    pub request_id: String,
    /// Unix ns of time 0 (`None` when no event has a timestamp or anchor).
    pub origin_unix_nanos: Option<i64>,
    /// Timed spans in file order.
    pub bars: Vec<PhaseBar>,
    /// Other events in file order.
    pub markers: Vec<Marker>,
    /// Token commits, ns since the request started.
    pub commits_ns: Vec<u64>,
    /// Decode-stage intervals.
    pub stages: Vec<StageBar>,
    /// When decoding was ready.
    pub decode_ready_ns: Option<u64>,
    /// The batched forwards that served it, by start.
    pub forwards: Vec<ForwardBar>,
    /// Largest end of anything drawn (0 when nothing is).
    pub extent_ns: i64,
}

/// Detail level and sample rate stated by the profile.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProfileSettings {
    /// `attributes.detail_level` of the first event that has it.
    pub detail_level: Option<String>,
    /// `attributes.sample_rate` of the first event that has it.
    pub sample_rate: Option<f64>,
}

fn u64s(v: Option<&Value>) -> Vec<u64> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

impl Waterfall {
    /// Add the batched forwards among `iterations` that list this request.
    fn add_forwards(&mut self, iterations: &[Iteration]) {
        let origin = self.origin_unix_nanos.unwrap_or(0);
        for it in iterations {
            let Some(part) = it.requests.iter().find(|r| r.request_id == self.request_id) else {
                continue;
            };
            let start_ns = it.start_unix_nanos.saturating_sub(origin);
            self.forwards.push(ForwardBar {
                engine: it.engine.clone(),
                iteration: it.iteration,
                start_ns,
                duration_ns: it.duration_ns,
                batch_size: it.batch_size,
                prefill_tokens: part.prefill_tokens,
                decode_tokens: part.decode_tokens,
                line: it.line,
            });
            let end = start_ns.saturating_add(i64::try_from(it.duration_ns).unwrap_or(i64::MAX));
            self.extent_ns = self.extent_ns.max(end);
        }
    }
}

impl ProfileDocument {
    /// One waterfall per request, in order of first appearance.
    pub fn waterfalls(&self) -> Vec<Waterfall> {
        let mut order: Vec<&str> = Vec::new();
        let mut members: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, r) in self.records.iter().enumerate() {
            if crate::format::profile::is_module_event(r) || engine_of(r).is_some() {
                continue;
            }
            let id = r.event.request_id.as_deref().unwrap_or("");
            members
                .entry(id)
                .or_insert_with(|| {
                    order.push(id);
                    Vec::new()
                })
                .push(i);
        }
        let iterations = self.iterations().iterations;
        order
            .into_iter()
            .map(|id| {
                let mut w = self.waterfall(id, members.get(id).map_or(&[][..], Vec::as_slice));
                w.add_forwards(&iterations);
                w
            })
            .collect()
    }

    fn waterfall(&self, id: &str, members: &[usize]) -> Waterfall {
        let events = || members.iter().map(|&i| &self.records[i]);
        let anchor = events().find_map(|r| {
            r.event
                .attributes
                .get("engine_token_wall_anchor_unix_nanos")
                .and_then(Value::as_i64)
        });
        let origin = anchor.or_else(|| events().filter_map(|r| r.event.ts_unix_nanos).min());
        let rel = |ts: i64| ts.saturating_sub(origin.unwrap_or(0));
        let mut w = Waterfall {
            request_id: String::from(id),
            origin_unix_nanos: origin,
            bars: Vec::new(),
            markers: Vec::new(),
            commits_ns: Vec::new(),
            stages: Vec::new(),
            decode_ready_ns: None,
            forwards: Vec::new(),
            extent_ns: 0,
        };
        for r in events() {
            let e = &r.event;
            let Some(ts) = e.ts_unix_nanos else { continue };
            let phase = e.phase.clone().unwrap_or_default();
            let status = e.status.clone().unwrap_or_default();
            match (e.event_kind.as_deref(), e.duration_us) {
                (Some("timed_span"), Some(us)) => w.bars.push(PhaseBar {
                    phase,
                    start_ns: rel(ts),
                    duration_ns: us.saturating_mul(1000),
                    status,
                    line: r.line,
                }),
                (kind, _) => w.markers.push(Marker {
                    phase,
                    event_kind: String::from(kind.unwrap_or("")),
                    status,
                    at_ns: rel(ts),
                    line: r.line,
                }),
            }
        }
        if let Some(t) = events().find(|r| {
            r.event
                .attributes
                .get(attribute::TTFT_US)
                .and_then(Value::as_u64)
                .is_some()
        }) {
            let a = &t.event.attributes;
            w.commits_ns = u64s(a.get(attribute::ENGINE_TOKEN_COMMIT_NANOS_SINCE_REQUEST_START));
            w.decode_ready_ns = a
                .get(attribute::ENGINE_DECODE_READY_NANOS_SINCE_REQUEST_START)
                .and_then(Value::as_u64);
            w.stages = a
                .get(attribute::ENGINE_DECODE_STAGE_INTERVALS)
                .and_then(Value::as_array)
                .map(|ivs| {
                    ivs.iter()
                        .filter_map(|iv| {
                            Some(StageBar {
                                stage: String::from(iv.get(attribute::STAGE)?.as_str()?),
                                start_ns: iv
                                    .get(attribute::START_NANOS_SINCE_REQUEST_START)?
                                    .as_u64()?,
                                end_ns: iv
                                    .get(attribute::END_NANOS_SINCE_REQUEST_START)?
                                    .as_u64()?,
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
        }
        let as_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        w.extent_ns = w
            .bars
            .iter()
            .map(|b| b.start_ns.saturating_add(as_i64(b.duration_ns)))
            .chain(w.markers.iter().map(|m| m.at_ns))
            .chain(w.commits_ns.iter().map(|&c| as_i64(c)))
            .chain(w.stages.iter().map(|s| as_i64(s.end_ns)))
            .chain(w.decode_ready_ns.map(as_i64))
            .max()
            .unwrap_or(0)
            .max(0);
        w
    }

    /// Detail level and sample rate, as far as the file states them.
    pub fn settings(&self) -> ProfileSettings {
        let attr = |name: &str| {
            self.records
                .iter()
                .find_map(|r| r.event.attributes.get(name).filter(|v| !v.is_null()))
        };
        ProfileSettings {
            detail_level: attr(attribute::DETAIL_LEVEL)
                .and_then(Value::as_str)
                .map(String::from),
            sample_rate: attr(attribute::SAMPLE_RATE).and_then(Value::as_f64),
        }
    }

    /// Records whose status is `failure` or that carry an `error`, in file order (the
    /// product errors; [`diagnostic_only`](ProfileDocument::diagnostic_only) lists the rest).
    pub fn failures(&self) -> Vec<&crate::format::profile::ProfileRecord> {
        self.records
            .iter()
            .filter(|r| r.event.status() == Some(Status::Failure) || r.event.error.is_some())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::format::profile::read_profile;

    #[test]
    fn fixture_waterfall() {
        let doc = read_profile(include_bytes!(
            "../../../tests/fixtures/infer_run.profile.jsonl"
        ));
        let w = doc.waterfalls();
        assert_eq!(w.len(), 3);
        let r1 = &w[0];
        assert_eq!(r1.request_id, "req-1");
        assert_eq!(r1.origin_unix_nanos, Some(1_717_000_000_000_000_000));
        assert_eq!(
            r1.commits_ns,
            [1_200_000, 1_640_000, 2_090_000, 2_530_000, 2_985_000]
        );
        assert_eq!(r1.stages.len(), 3);
        let prefill = r1.bars.iter().find(|b| b.phase == "prefill").unwrap();
        // `make_fixtures.py`: req-1's prompt ran 50 µs to 1.15 ms after its open (a timed
        // span's `ts_unix_nanos` is its start).
        assert_eq!((prefill.start_ns, prefill.duration_ns), (50_000, 1_100_000));
        assert!(r1.extent_ns >= 2_985_000);
        assert_eq!(doc.settings().detail_level.as_deref(), Some("kernel"));
    }

    #[test]
    fn a_request_s_waterfall_shows_the_batched_forwards_that_served_it() {
        use crate::analysis::iterations::tests::iteration_line;
        use crate::analysis::request_axis::tests::{request, T0};
        // a opens at T0 + 1 ms; forward 3 (2–2.5 ms) ran its prompt with b.
        let text = [
            request("a", 1_000_000, "main", 2000, &[1_500_000]),
            iteration_line(
                "e",
                3,
                T0 + 2_000_000,
                500_000,
                &[("b", 0, 1, 1), ("a", 5, 0, 1)],
            ),
        ]
        .concat();
        let doc = read_profile(text.as_bytes());
        let w = doc.waterfalls();
        // The engine has no waterfall.
        assert_eq!(w.len(), 1);
        let f = &w[0].forwards;
        assert_eq!(f.len(), 1);
        assert_eq!(
            (
                f[0].iteration,
                f[0].start_ns,
                f[0].duration_ns,
                f[0].batch_size,
                f[0].prefill_tokens
            ),
            (3, 1_000_000, 500_000, 2, 5)
        );
        assert!(w[0].extent_ns >= 1_500_000);
    }
}
