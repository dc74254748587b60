//! Batched forwards of an inference profile (SCHEMA.md §4, "batched forwards"): each forward in
//! time order with its composition, and the distribution of batch sizes and forward times.
//!
//! capture's `Engine` writes one `timed_span` event of phase
//! [`ITERATION_PHASE`] per forward call, owned by its
//! engine ([`engine_of`]): `ts_unix_nanos` its start, `duration_us` (and `duration_nanos`) its
//! length, attributes `iteration`, `batch_size`, `prefill_tokens`, `decode_tokens`,
//! `committed_tokens`, `thread` and `requests` (per request `{request_id, prefill_tokens,
//! decode_tokens, committed_tokens}`).
//!
//! Rules where SCHEMA.md is silent:
//! - An iteration is an engine event of phase `iteration` and kind `timed_span` with a
//!   `ts_unix_nanos`; others of that phase are not placed (counted in
//!   [`Iterations::unreadable`]).
//! - `batch_size` is the attribute, else the number of entries of `requests`; the token counts
//!   are the attributes, else the sums over `requests` (0 when neither says).
//! - Duration: `duration_nanos`, else `duration_us × 1000`.
//! - `tokens_per_s` = (prefill + decode tokens) × 10^9 / duration ns, integer division; `None`
//!   for a forward of 0 ns.
//! - Order: by start, then engine, then iteration, then line.
//! - The distributions are nearest-rank [`Percentiles`] over every placed iteration.

use crate::analysis::sort;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use serde::Serialize;
use serde_json::Value;

use crate::analysis::percentiles::Percentiles;
use crate::format::profile::{
    attribute, engine_of, EventKind, JsonMap, ProfileDocument, ProfileRecord, ITERATION_PHASE,
};

/// One request's part in a batched forward.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IterationRequest {
    /// The request.
    pub request_id: String,
    /// Its prompt tokens in the forward.
    pub prefill_tokens: u64,
    /// Its decode tokens in the forward.
    pub decode_tokens: u64,
    /// The tokens the forward committed for it.
    pub committed_tokens: u64,
}

/// One batched forward.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Iteration {
    /// The engine that ran it.
    pub engine: String,
    /// Its number within the engine.
    pub iteration: u64,
    /// Its start, Unix ns.
    pub start_unix_nanos: i64,
    /// Its duration.
    pub duration_ns: u64,
    /// Requests in it.
    pub batch_size: u64,
    /// Prompt tokens it ran.
    pub prefill_tokens: u64,
    /// Decode tokens it ran.
    pub decode_tokens: u64,
    /// Tokens it committed.
    pub committed_tokens: u64,
    /// (prefill + decode tokens) per second of the forward.
    pub tokens_per_s: Option<u64>,
    /// The requests it lists.
    pub requests: Vec<IterationRequest>,
    /// The thread that ran it.
    pub thread: Option<String>,
    /// Its status as written.
    pub status: String,
    /// Line of its event.
    pub line: u64,
}

/// Every batched forward of a profile and their distribution.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Iterations {
    /// In time order.
    pub iterations: Vec<Iteration>,
    /// Of `batch_size`.
    pub batch_size: Option<Percentiles>,
    /// Of `duration_ns`.
    pub duration_ns: Option<Percentiles>,
    /// Iteration events that could not be placed.
    pub unreadable: u64,
}

fn u64_of(a: &JsonMap, key: &str) -> Option<u64> {
    a.get(key).and_then(Value::as_u64)
}

fn entry(v: &Value) -> Option<IterationRequest> {
    let o = v.as_object()?;
    let n = |k: &str| o.get(k).and_then(Value::as_u64).unwrap_or(0);
    Some(IterationRequest {
        request_id: o.get(attribute::REQUEST_ID)?.as_str()?.to_string(),
        prefill_tokens: n(attribute::PREFILL_TOKENS),
        decode_tokens: n(attribute::DECODE_TOKENS),
        committed_tokens: n(attribute::COMMITTED_TOKENS),
    })
}

/// The iteration of `record`, when it is one that can be placed.
pub(crate) fn read_iteration(record: &ProfileRecord) -> Option<Iteration> {
    let e = &record.event;
    let engine = engine_of(record)?;
    let a = &e.attributes;
    let start = e.ts_unix_nanos?;
    let duration_ns = u64_of(a, attribute::DURATION_NANOS)
        .or_else(|| e.duration_us.map(|us| us.saturating_mul(1000)))?;
    let requests: Vec<IterationRequest> = a
        .get(attribute::REQUESTS)
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(entry).collect())
        .unwrap_or_default();
    let sum = |f: fn(&IterationRequest) -> u64| requests.iter().map(f).sum::<u64>();
    let prefill = u64_of(a, attribute::PREFILL_TOKENS).unwrap_or_else(|| sum(|r| r.prefill_tokens));
    let decode = u64_of(a, attribute::DECODE_TOKENS).unwrap_or_else(|| sum(|r| r.decode_tokens));
    let committed =
        u64_of(a, attribute::COMMITTED_TOKENS).unwrap_or_else(|| sum(|r| r.committed_tokens));
    let tokens = u128::from(prefill) + u128::from(decode);
    Some(Iteration {
        engine: engine.to_string(),
        iteration: u64_of(a, attribute::ITERATION)?,
        start_unix_nanos: start,
        duration_ns,
        batch_size: u64_of(a, attribute::BATCH_SIZE).unwrap_or(requests.len() as u64),
        prefill_tokens: prefill,
        decode_tokens: decode,
        committed_tokens: committed,
        tokens_per_s: (duration_ns > 0).then(|| {
            u64::try_from(tokens * 1_000_000_000 / u128::from(duration_ns)).unwrap_or(u64::MAX)
        }),
        requests,
        thread: a
            .get(attribute::THREAD)
            .and_then(Value::as_str)
            .map(str::to_string),
        status: e.status.clone().unwrap_or_default(),
        line: record.line,
    })
}

/// Whether `record` is an iteration event (placed or not).
pub(crate) fn is_iteration_event(record: &ProfileRecord) -> bool {
    record.event.phase.as_deref() == Some(ITERATION_PHASE)
        && record.event.event_kind() == Some(EventKind::TimedSpan)
        && engine_of(record).is_some()
}

impl ProfileDocument {
    /// The batched forwards, in time order, and their distribution.
    pub fn iterations(&self) -> Iterations {
        let mut out = Iterations::default();
        for record in self.records.iter().filter(|r| is_iteration_event(r)) {
            match read_iteration(record) {
                Some(it) => out.iterations.push(it),
                None => out.unreadable += 1,
            }
        }
        sort::by(&mut out.iterations, |a, b| {
            a.start_unix_nanos
                .cmp(&b.start_unix_nanos)
                .then_with(|| a.engine.cmp(&b.engine))
                .then(a.iteration.cmp(&b.iteration))
                .then(a.line.cmp(&b.line))
        });
        let sizes: Vec<u64> = out.iterations.iter().map(|i| i.batch_size).collect();
        let times: Vec<u64> = out.iterations.iter().map(|i| i.duration_ns).collect();
        out.batch_size = Percentiles::of(&sizes);
        out.duration_ns = Percentiles::of(&times);
        out
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::format::profile::read_profile;
    use alloc::format;

    /// An iteration event as capture writes it: `requests` as (id, prefill, decode, committed).
    pub(crate) fn iteration_line(
        engine: &str,
        iteration: u64,
        start_unix_nanos: i64,
        duration_ns: u64,
        requests: &[(&str, u64, u64, u64)],
    ) -> String {
        let entries: Vec<String> = requests
            .iter()
            .map(|(id, p, d, c)| {
                format!(
                    r#"{{"request_id":"{id}","prefill_tokens":{p},"decode_tokens":{d},"committed_tokens":{c}}}"#
                )
            })
            .collect();
        let (p, d, c) = requests
            .iter()
            .fold((0, 0, 0), |(p, d, c), r| (p + r.1, d + r.2, c + r.3));
        format!(
            concat!(
                r#"{{"schema_version":1,"event_kind":"timed_span","ts_unix_nanos":{start},"#,
                r#""timestamp":"2026-01-01T00:00:00Z","event_id":"{engine}-i{iteration}","request_id":"{engine}","#,
                r#""correlation_id":"c","entrypoint":"serve","backend":"cpu","runtime_preset_hash":"h","#,
                r#""phase":"iteration","status":"ok","duration_us":{us},"#,
                r#""shape":{{"batch_size":{n}}},"attributes":{{"engine":"{engine}","iteration":{iteration},"#,
                r#""batch_size":{n},"prefill_tokens":{p},"decode_tokens":{d},"committed_tokens":{c},"#,
                r#""duration_nanos":{ns},"thread":"engine-thread","requests":[{entries}]}}}}"#,
                "\n"
            ),
            start = start_unix_nanos,
            engine = engine,
            iteration = iteration,
            us = duration_ns / 1000,
            ns = duration_ns,
            n = requests.len(),
            p = p,
            d = d,
            c = c,
            entries = entries.join(","),
        )
    }

    #[test]
    fn a_batch_of_one_prefill_and_three_decodes() {
        // Iteration 1: a's 6-token prompt with b, c, d decoding one token each, in 2 ms:
        // 9 tokens / 2 ms = 4500 tokens/s. Iteration 0 (before it): b, c, d's prompts.
        let t0 = 1_767_225_600_000_000_000;
        let text = [
            iteration_line(
                "e",
                1,
                t0 + 5_000_000,
                2_000_000,
                &[
                    ("a", 6, 0, 1),
                    ("b", 0, 1, 1),
                    ("c", 0, 1, 1),
                    ("d", 0, 1, 1),
                ],
            ),
            iteration_line(
                "e",
                0,
                t0,
                3_000_000,
                &[("b", 4, 0, 1), ("c", 4, 0, 1), ("d", 5, 0, 1)],
            ),
        ]
        .concat();
        let doc = read_profile(text.as_bytes());
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        let it = doc.iterations();
        assert_eq!(it.unreadable, 0);
        let rows: Vec<(u64, u64, u64, u64, u64, Option<u64>)> = it
            .iterations
            .iter()
            .map(|i| {
                (
                    i.iteration,
                    i.batch_size,
                    i.prefill_tokens,
                    i.decode_tokens,
                    i.committed_tokens,
                    i.tokens_per_s,
                )
            })
            .collect();
        // 13 prompt tokens in 3 ms: 4333 tokens/s (integer division).
        assert_eq!(
            rows,
            [(0, 3, 13, 0, 3, Some(4333)), (1, 4, 6, 3, 4, Some(4500))]
        );
        assert_eq!(it.iterations[1].requests[0].request_id, "a");
        assert_eq!(it.iterations[1].thread.as_deref(), Some("engine-thread"));
        // Nearest rank over [3, 4]: p50 rank 1 → 3, p90 rank 2 → 4.
        let b = it.batch_size.unwrap();
        assert_eq!((b.p50, b.p90), (3, 4));
        let d = it.duration_ns.unwrap();
        assert_eq!((d.p50, d.p90), (2_000_000, 3_000_000));
        // The engine is not a request.
        assert!(doc.requests().is_empty());
    }

    #[test]
    fn iteration_events_without_what_places_them_are_counted() {
        let good = iteration_line("e", 0, 5, 1000, &[("a", 1, 0, 1)]);
        // Not an engine event: no `engine` attribute. Read as a request's phase.
        let stray = good.replace(r#""engine":"e","#, "");
        // An engine event without `iteration`.
        let unplaced = good.replace(r#""iteration":0,"#, "");
        let doc = read_profile([good.as_str(), &stray, &unplaced].concat().as_bytes());
        let it = doc.iterations();
        assert_eq!((it.iterations.len(), it.unreadable), (1, 1));
        assert_eq!(it.iterations[0].tokens_per_s, Some(1_000_000));
    }
}
