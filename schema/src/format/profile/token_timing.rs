//! Engine token timing: the evidence an engine records per request, its rules, and the
//! attributes derived from it (SCHEMA.md §2, "Engine token timing ...").

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::attribute;
use crate::format::events::null_as_default;

/// The only accepted `clock_source`: Rust's `std::time::Instant`.
pub const RUST_STD_INSTANT: &str = "rust_std_instant";

spelled_enum! {
    /// Which part of a decode step an interval covers.
    DecodeStage {
        /// Choosing what to run next.
        DecodeScheduling => "decode_scheduling",
        /// Running the model.
        DecodeExecution => "decode_execution",
        /// Sampling, detokenizing, streaming out.
        DecodePostprocess => "decode_postprocess",
    }
}

/// One stage of decoding, in ns since the request started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecodeStageInterval {
    /// Which stage.
    pub stage: DecodeStage,
    /// Start, ns since the request started.
    pub start_nanos_since_request_start: u64,
    /// End, ns since the request started; must be ≥ the start.
    pub end_nanos_since_request_start: u64,
}

/// The value of one attribute derived from token timing
/// ([`EngineTokenTiming::each_derived_attribute`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Derived<'a> {
    /// A count or a time in ns or µs.
    U64(u64),
    /// A time in Unix ns.
    I64(i64),
    /// A yes or no.
    Bool(bool),
    /// A word.
    Str(&'a str),
    /// An array of numbers.
    U64s(&'a [u64]),
    /// An array of objects `{end_nanos_since_request_start, stage, start_nanos_since_request_start}`.
    Intervals(&'a [DecodeStageInterval]),
}

impl Derived<'_> {
    /// The value as JSON.
    pub fn to_value(self) -> Value {
        let u64s = |values: &[u64]| Value::Array(values.iter().map(|&v| Value::from(v)).collect());
        match self {
            Derived::U64(v) => Value::from(v),
            Derived::I64(v) => Value::from(v),
            Derived::Bool(v) => Value::Bool(v),
            Derived::Str(v) => Value::from(v),
            Derived::U64s(v) => u64s(v),
            Derived::Intervals(v) => Value::Array(
                v.iter()
                    .map(|iv| {
                        let mut o = Map::new();
                        o.insert(attribute::STAGE.into(), Value::from(iv.stage.as_str()));
                        o.insert(
                            attribute::START_NANOS_SINCE_REQUEST_START.into(),
                            Value::from(iv.start_nanos_since_request_start),
                        );
                        o.insert(
                            attribute::END_NANOS_SINCE_REQUEST_START.into(),
                            Value::from(iv.end_nanos_since_request_start),
                        );
                        Value::Object(o)
                    })
                    .collect(),
            ),
        }
    }
}

/// What an engine measured about one request's tokens, on one monotonic clock anchored to the
/// wall clock once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineTokenTiming {
    /// Must be [`RUST_STD_INSTANT`].
    pub clock_source: String,
    /// Wall-clock time of the request start, ns since the Unix epoch; must be > 0.
    pub wall_anchor_unix_nanos: i64,
    /// Largest error of the anchor's monotonic-to-wall conversion, ns.
    pub wall_anchor_max_error_nanos: u64,
    /// When decoding became ready to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_ready_nanos_since_request_start: Option<u64>,
    /// One per output token, non-decreasing.
    #[serde(default, deserialize_with = "null_as_default")]
    pub token_commit_nanos_since_request_start: Vec<u64>,
    /// Decode stages, ordered by start.
    #[serde(default, deserialize_with = "null_as_default")]
    pub decode_stage_intervals: Vec<DecodeStageInterval>,
}

impl EngineTokenTiming {
    /// Evidence on the [`RUST_STD_INSTANT`] clock with no commits and no intervals yet.
    pub fn new(wall_anchor_unix_nanos: i64, wall_anchor_max_error_nanos: u64) -> Self {
        EngineTokenTiming {
            clock_source: String::from(RUST_STD_INSTANT),
            wall_anchor_unix_nanos,
            wall_anchor_max_error_nanos,
            decode_ready_nanos_since_request_start: None,
            token_commit_nanos_since_request_start: Vec::new(),
            decode_stage_intervals: Vec::new(),
        }
    }

    /// Every broken rule, as messages naming the field; empty when the evidence is valid.
    ///
    /// The ordering rules report their first offending element only; every interval whose end
    /// is before its start is reported.
    pub fn validate(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.clock_source != RUST_STD_INSTANT {
            out.push(format!(
                "`clock_source` must be `{RUST_STD_INSTANT}`, found `{}`",
                self.clock_source
            ));
        }
        if self.wall_anchor_unix_nanos <= 0 {
            out.push(format!(
                "`wall_anchor_unix_nanos` must be > 0, found {}",
                self.wall_anchor_unix_nanos
            ));
        }
        let commits = &self.token_commit_nanos_since_request_start;
        if let Some(i) = commits.windows(2).position(|w| w[1] < w[0]) {
            out.push(format!(
                "`token_commit_nanos_since_request_start` must be non-decreasing: [{}] = {} < [{}] = {}",
                i + 1,
                commits[i + 1],
                i,
                commits[i]
            ));
        }
        let intervals = &self.decode_stage_intervals;
        for (i, iv) in intervals.iter().enumerate() {
            if iv.end_nanos_since_request_start < iv.start_nanos_since_request_start {
                out.push(format!(
                    "`decode_stage_intervals[{i}]` must end at or after its start: end {} < start {}",
                    iv.end_nanos_since_request_start, iv.start_nanos_since_request_start
                ));
            }
        }
        if let Some(i) = intervals.windows(2).position(|w| {
            w[1].start_nanos_since_request_start < w[0].start_nanos_since_request_start
        }) {
            out.push(format!(
                "`decode_stage_intervals` must be ordered by start: [{}] starts at {} before [{}] at {}",
                i + 1,
                intervals[i + 1].start_nanos_since_request_start,
                i,
                intervals[i].start_nanos_since_request_start
            ));
        }
        out
    }

    /// Differences between consecutive token commits (saturating at 0 if commits go backwards).
    pub fn itl_nanos(&self) -> Vec<u64> {
        self.token_commit_nanos_since_request_start
            .windows(2)
            .map(|w| w[1].saturating_sub(w[0]))
            .collect()
    }

    /// The attributes SCHEMA.md §2 derives from this evidence, by their normative names, ready to
    /// be merged into an event's `attributes`.
    pub fn derived_attributes(&self) -> BTreeMap<String, Value> {
        let mut a = BTreeMap::new();
        self.each_derived_attribute(&mut |name, value| {
            a.insert(String::from(name), value.to_value());
        });
        a
    }

    /// Each attribute of [`derived_attributes`](Self::derived_attributes), as its name and its
    /// value before it becomes JSON (a writer that spells JSON itself needs no `Value`).
    pub fn each_derived_attribute(&self, put: &mut dyn FnMut(&'static str, Derived<'_>)) {
        let commits = &self.token_commit_nanos_since_request_start;
        if let Some(&first) = commits.first() {
            put(attribute::TTFT_US, Derived::U64(first / 1000));
        }
        let itl = self.itl_nanos();
        let itl_mean = if itl.is_empty() {
            0
        } else {
            let sum: u128 = itl.iter().map(|&v| u128::from(v)).sum();
            // The mean of u64 values fits in u64.
            u64::try_from(sum / itl.len() as u128).unwrap_or(u64::MAX)
        };
        put(
            attribute::ITL_INTERVAL_COUNT,
            Derived::U64(itl.len() as u64),
        );
        put(attribute::ITL_NANOS, Derived::U64s(&itl));
        put(attribute::ITL_US_AVG, Derived::U64(itl_mean / 1000));
        put(attribute::ITL_SOURCE, Derived::Str("engine_token_commit"));
        put(
            attribute::ENGINE_TOKEN_COMMIT_COUNT,
            Derived::U64(commits.len() as u64),
        );
        put(
            attribute::ENGINE_TOKEN_COMMIT_NANOS_SINCE_REQUEST_START,
            Derived::U64s(commits),
        );
        put(
            attribute::ENGINE_TOKEN_CLOCK_SOURCE,
            Derived::Str(&self.clock_source),
        );
        put(
            attribute::ENGINE_TOKEN_WALL_ANCHOR_UNIX_NANOS,
            Derived::I64(self.wall_anchor_unix_nanos),
        );
        put(
            attribute::CLOCK_CONVERSION_MAX_ERROR_NANOS,
            Derived::U64(self.wall_anchor_max_error_nanos),
        );
        put(
            attribute::ENGINE_DECODE_STAGE_INTERVALS,
            Derived::Intervals(&self.decode_stage_intervals),
        );
        put(
            attribute::ENGINE_DECODE_STAGE_INTERVAL_COUNT,
            Derived::U64(self.decode_stage_intervals.len() as u64),
        );
        if let Some(ready) = self.decode_ready_nanos_since_request_start {
            put(
                attribute::ENGINE_DECODE_READY_NANOS_SINCE_REQUEST_START,
                Derived::U64(ready),
            );
        }

        match self.decode_wall_nanos() {
            Ok(wall) => {
                let ppm =
                    u128::from(self.wall_anchor_max_error_nanos) * 1_000_000 / u128::from(wall);
                put(attribute::ENGINE_DECODE_WALL_NANOS, Derived::U64(wall));
                put(
                    attribute::CLOCK_CONVERSION_ERROR_PPM,
                    Derived::U64(u64::try_from(ppm).unwrap_or(u64::MAX)),
                );
                put(attribute::DECODE_WALL_TIMING_ELIGIBLE, Derived::Bool(true));
            }
            Err(reason) => {
                put(attribute::DECODE_WALL_TIMING_ELIGIBLE, Derived::Bool(false));
                put(
                    attribute::DECODE_WALL_TIMING_UNAVAILABLE_REASON,
                    Derived::Str(reason),
                );
            }
        }
    }

    /// Last commit − decode ready when both exist and the difference is > 0; otherwise the
    /// reason, checked in SCHEMA.md's order.
    fn decode_wall_nanos(&self) -> Result<u64, &'static str> {
        let Some(&last) = self.token_commit_nanos_since_request_start.last() else {
            return Err("no_token_commits");
        };
        let Some(ready) = self.decode_ready_nanos_since_request_start else {
            return Err("decode_not_entered");
        };
        match last.checked_sub(ready) {
            Some(wall) if wall > 0 => Ok(wall),
            _ => Err("no_positive_decode_commit_interval"),
        }
    }
}

/// The token commits an event's attributes record, as (nanoseconds since the request started,
/// Unix nanoseconds = wall anchor + that offset), in commit order; empty when the event has no
/// `engine_token_commit_nanos_since_request_start` array or no
/// `engine_token_wall_anchor_unix_nanos`. Entries that are not integers are skipped.
pub fn token_commits(attributes: &BTreeMap<String, Value>) -> Vec<(i64, i64)> {
    let commits = attributes
        .get(attribute::ENGINE_TOKEN_COMMIT_NANOS_SINCE_REQUEST_START)
        .and_then(Value::as_array);
    let anchor = attributes
        .get(attribute::ENGINE_TOKEN_WALL_ANCHOR_UNIX_NANOS)
        .and_then(Value::as_i64);
    match (commits, anchor) {
        (Some(commits), Some(anchor)) => commits
            .iter()
            .filter_map(Value::as_i64)
            .map(|c| (c, anchor.saturating_add(c)))
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_commits_are_offsets_and_unix_times() {
        let mut a = BTreeMap::new();
        a.insert(
            "engine_token_commit_nanos_since_request_start".into(),
            serde_json::json!([100, "x", 350]),
        );
        assert!(token_commits(&a).is_empty(), "no anchor");
        a.insert(
            "engine_token_wall_anchor_unix_nanos".into(),
            serde_json::json!(1_000),
        );
        // 1 000 + 100 and 1 000 + 350; the string is skipped.
        assert_eq!(token_commits(&a), vec![(100, 1_100), (350, 1_350)]);
    }
    use alloc::vec;

    fn worked_example() -> EngineTokenTiming {
        let mut t = EngineTokenTiming::new(1_767_225_600_000_000_000, 400);
        t.token_commit_nanos_since_request_start = vec![1_000_000, 2_500_000, 5_000_000];
        t.decode_ready_nanos_since_request_start = Some(2_000_000);
        t
    }

    #[test]
    fn the_worked_example_of_the_schema() {
        let t = worked_example();
        assert!(t.validate().is_empty());
        let a = t.derived_attributes();
        // ttft = 1 000 000 / 1000
        assert_eq!(a["ttft_us"], Value::from(1000u64));
        // 2 500 000 − 1 000 000, 5 000 000 − 2 500 000
        assert_eq!(
            a["itl_nanos"],
            serde_json::json!([1_500_000u64, 2_500_000u64])
        );
        assert_eq!(a["itl_interval_count"], Value::from(2u64));
        // (1 500 000 + 2 500 000) / 2 = 2 000 000 ns → 2000 µs
        assert_eq!(a["itl_us_avg"], Value::from(2000u64));
        assert_eq!(a["itl_source"], Value::from("engine_token_commit"));
        // 5 000 000 − 2 000 000
        assert_eq!(a["engine_decode_wall_nanos"], Value::from(3_000_000u64));
        // 400 × 1 000 000 / 3 000 000 = 133.3 → 133
        assert_eq!(a["clock_conversion_error_ppm"], Value::from(133u64));
        assert_eq!(a["decode_wall_timing_eligible"], Value::Bool(true));
        assert!(!a.contains_key("decode_wall_timing_unavailable_reason"));
        assert_eq!(a["engine_token_commit_count"], Value::from(3u64));
        assert_eq!(
            a["engine_token_commit_nanos_since_request_start"],
            serde_json::json!([1_000_000u64, 2_500_000u64, 5_000_000u64])
        );
        assert_eq!(
            a["engine_token_clock_source"],
            Value::from("rust_std_instant")
        );
        assert_eq!(
            a["engine_token_wall_anchor_unix_nanos"],
            Value::from(1_767_225_600_000_000_000i64)
        );
        assert_eq!(a["clock_conversion_max_error_nanos"], Value::from(400u64));
        assert_eq!(a["engine_decode_stage_intervals"], serde_json::json!([]));
        assert_eq!(a["engine_decode_stage_interval_count"], Value::from(0u64));
        assert_eq!(
            a["engine_decode_ready_nanos_since_request_start"],
            Value::from(2_000_000u64)
        );
        assert_eq!(a.len(), 16);
    }

    #[test]
    fn unavailable_reasons_in_order() {
        let reason = |t: &EngineTokenTiming| {
            let a = t.derived_attributes();
            assert_eq!(a["decode_wall_timing_eligible"], Value::Bool(false));
            assert!(!a.contains_key("engine_decode_wall_nanos"));
            assert!(!a.contains_key("clock_conversion_error_ppm"));
            a["decode_wall_timing_unavailable_reason"].clone()
        };
        // No commits and no decode ready: the first reason wins.
        let mut t = EngineTokenTiming::new(1, 0);
        assert_eq!(reason(&t), Value::from("no_token_commits"));
        let a = t.derived_attributes();
        assert!(!a.contains_key("ttft_us"));
        assert!(!a.contains_key("engine_decode_ready_nanos_since_request_start"));
        assert_eq!(a["itl_nanos"], serde_json::json!([]));
        assert_eq!(a["itl_us_avg"], Value::from(0u64));
        assert_eq!(a["itl_interval_count"], Value::from(0u64));
        // Commits but never entered decode.
        t.token_commit_nanos_since_request_start = vec![10];
        assert_eq!(reason(&t), Value::from("decode_not_entered"));
        // Last commit at decode ready (0 ns wall) and before it.
        t.decode_ready_nanos_since_request_start = Some(10);
        assert_eq!(
            reason(&t),
            Value::from("no_positive_decode_commit_interval")
        );
        t.decode_ready_nanos_since_request_start = Some(11);
        assert_eq!(
            reason(&t),
            Value::from("no_positive_decode_commit_interval")
        );
    }

    #[test]
    fn a_single_commit_has_a_ttft_and_no_itl() {
        let mut t = EngineTokenTiming::new(1, 7);
        t.token_commit_nanos_since_request_start = vec![1_999];
        t.decode_ready_nanos_since_request_start = Some(999);
        let a = t.derived_attributes();
        assert_eq!(a["ttft_us"], Value::from(1u64)); // 1999 / 1000 rounds down
        assert_eq!(a["itl_nanos"], serde_json::json!([]));
        assert_eq!(a["engine_decode_wall_nanos"], Value::from(1000u64));
        // 7 × 1 000 000 / 1000
        assert_eq!(a["clock_conversion_error_ppm"], Value::from(7000u64));
    }

    #[test]
    fn intervals_are_written_out() {
        let mut t = worked_example();
        t.decode_stage_intervals = vec![
            DecodeStageInterval {
                stage: DecodeStage::DecodeScheduling,
                start_nanos_since_request_start: 2_000_000,
                end_nanos_since_request_start: 2_100_000,
            },
            DecodeStageInterval {
                stage: DecodeStage::DecodeExecution,
                start_nanos_since_request_start: 2_100_000,
                end_nanos_since_request_start: 2_400_000,
            },
        ];
        assert!(t.validate().is_empty());
        let a = t.derived_attributes();
        assert_eq!(a["engine_decode_stage_interval_count"], Value::from(2u64));
        assert_eq!(
            a["engine_decode_stage_intervals"],
            serde_json::json!([
                {"stage": "decode_scheduling", "start_nanos_since_request_start": 2_000_000u64,
                 "end_nanos_since_request_start": 2_100_000u64},
                {"stage": "decode_execution", "start_nanos_since_request_start": 2_100_000u64,
                 "end_nanos_since_request_start": 2_400_000u64},
            ])
        );
    }

    #[test]
    fn every_rule_broken() {
        let iv = |start, end| DecodeStageInterval {
            stage: DecodeStage::DecodePostprocess,
            start_nanos_since_request_start: start,
            end_nanos_since_request_start: end,
        };
        let t = EngineTokenTiming {
            clock_source: "tsc".into(),
            wall_anchor_unix_nanos: 0,
            wall_anchor_max_error_nanos: 0,
            decode_ready_nanos_since_request_start: None,
            token_commit_nanos_since_request_start: vec![5, 7, 6, 4],
            decode_stage_intervals: vec![iv(10, 20), iv(30, 25), iv(5, 4)],
        };
        assert_eq!(
            t.validate(),
            vec![
                "`clock_source` must be `rust_std_instant`, found `tsc`",
                "`wall_anchor_unix_nanos` must be > 0, found 0",
                "`token_commit_nanos_since_request_start` must be non-decreasing: [2] = 6 < [1] = 7",
                "`decode_stage_intervals[1]` must end at or after its start: end 25 < start 30",
                "`decode_stage_intervals[2]` must end at or after its start: end 4 < start 5",
                "`decode_stage_intervals` must be ordered by start: [2] starts at 5 before [1] at 30",
            ]
        );
        // Backwards commits give 0 ns intervals rather than wrapping around.
        assert_eq!(t.itl_nanos(), vec![2, 0, 0]);
        // Equal commits and equal starts are allowed.
        let mut ok = EngineTokenTiming::new(1, 0);
        ok.token_commit_nanos_since_request_start = vec![3, 3];
        ok.decode_stage_intervals = vec![iv(1, 1), iv(1, 2)];
        assert!(ok.validate().is_empty());
    }

    #[test]
    fn evidence_round_trips_through_json() {
        let t = worked_example();
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<EngineTokenTiming>(&json).unwrap(), t);
    }
}
