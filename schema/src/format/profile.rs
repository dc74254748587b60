//! The inference profile, schema_version 1 (SCHEMA.md §2): event types, per-line validation,
//! a streaming reader, detail levels and profiling config, engine token timing, and the
//! per-request analysis behind `summary` and the viewer.
//!
//! ```
//! use candle_trace_schema::format::profile::ProfileReader;
//!
//! let file = concat!(
//!     r#"{"schema_version":1,"event_kind":"timed_span","ts_unix_nanos":1767225600000000000,"#,
//!     r#""timestamp":"2026-01-01T00:00:00Z","event_id":"e1","request_id":"r1","#,
//!     r#""correlation_id":"c1","entrypoint":"serve","backend":"cuda","#,
//!     r#""runtime_preset_hash":"sha256:ab","phase":"request","status":"ok","duration_us":2500,"#,
//!     r#""shape":{"batch":1},"attributes":{"ttft_us":1000}}"#, "\n",
//!     r#"{"schema_version":1,"event_kind":"instant","request_id":"  "}"#, "\n",
//! );
//! let mut reader = ProfileReader::new();
//! for chunk in file.as_bytes().chunks(5) {
//!     reader.push(chunk);
//! }
//! let doc = reader.finish();
//! // Both lines are kept; the second breaks many rules and each one is a diagnostic on line 2.
//! assert_eq!(doc.records.len(), 2);
//! assert!(doc.records[0].violations.is_empty());
//! assert!(doc.diagnostics.iter().all(|d| d.line == 2));
//! assert!(doc.records[1].violations.contains(&"`request_id` must be non-blank".to_string()));
//! let requests = doc.requests();
//! assert_eq!(requests[0].duration_us, Some(2500));
//! assert_eq!(requests[0].ttft_us, Some(1000));
//! ```
//!
//! # Reading: what is kept, what is dropped
//!
//! - A line that is not JSON, or not a JSON object: error, category `syntax`; the line is dropped.
//! - A field with the wrong JSON type (a string where a number belongs, a negative `u64` ...):
//!   error (category from [`classify_json_error`]); the line is dropped, because there is no
//!   value to show for that field.
//! - An `event_kind` this reader does not know: **warning**, category `unknown_kind`, and the
//!   line is skipped. §2's table lists `event_kind` among the enum fields whose unknown spelling
//!   is an error, but the general rules for both JSONL formats say a line with an unknown kind is
//!   skipped with a warning because a newer writer may add kinds; the forward-compatibility rule
//!   wins. [`validate_event`] on its own still reports an unknown `event_kind` as a broken rule.
//! - Anything else is kept as a [`ProfileRecord`], and every rule of §2 it breaks is one error
//!   diagnostic at its line (category `missing_field` when a required field is absent,
//!   `invalid_value` otherwise). A missing required field, an unknown `entrypoint`, `status` or
//!   `resource.action`, a blank string, an invalid `timestamp` are all broken rules, never
//!   reasons to drop the event: §2 says such an event "is still shown, marked invalid". To make
//!   that possible, every field a rule can report missing is decoded as an `Option` (nested
//!   ones too: `error.kind`, `memory.scope`, `resource.owner_id` ...), and enum-like fields are
//!   decoded as strings.
//! - A last line without a trailing `\n` that serde_json says ends early is a **warning**,
//!   category `truncated`, and is dropped. The same incomplete JSON on a line that does end in
//!   `\n` is an ordinary `syntax` error.
//!
//! # Choices where SCHEMA.md is silent
//!
//! - A line with no `event_kind` at all is kept and reported as a missing field (it is not an
//!   unknown kind). A `schema_version` other than 1 is a broken rule, not a reason to skip.
//! - `ResourceTraceEvent`: "(> 0 when set)" is read as applying to `underflow_amount` only;
//!   `amount`, `before`, `after` and `capacity` are signed and unconstrained (a `before` of 0 is
//!   the normal first reservation). "Non-empty" for `reason`, `error_kind`, `message` and
//!   `resource_error_kind` is taken literally (length > 0), while `defer`/`reject` need a
//!   non-blank `reason` (not empty after trimming) as the text says; for those two actions only
//!   the stricter rule is reported, so one bad `reason` is one diagnostic.
//! - No rule ties an `event_kind` of `memory`, `resource` or `error` to the presence of the
//!   matching object, and `event_id` uniqueness is not checked: §2 states neither.
//! - `timestamp` is checked against RFC 3339 `date-time` strictly (see [`is_rfc3339`]): `T`/`t`
//!   separator, `Z`/`z` or `±HH:MM` offset, optional fraction with at least one digit, day range
//!   checked against the month (leap years included), second ≤ 60.
//! - `shape` may be absent (it defaults to `{}`), but an empty `shape` breaks "at least one
//!   entry" and is reported as `invalid_value`.
//! - Profiling config: blank output paths do not count as output paths.
//! - Engine token timing: ITL differences saturate at 0 if commits go backwards (validation
//!   reports that); all arithmetic is integer, the ppm computed in `u128` and saturated to `u64`.
//!   For the ordering rules, the first out-of-order commit and the first out-of-order interval
//!   are reported (one message per rule); every interval with end < start is reported.
//! - Analysis: events without `request_id` are grouped under the empty string, so every kept
//!   event belongs to exactly one request summary; a request's `duration_us` is taken from the
//!   first `timed_span` event of phase `request` that has a `duration_us`; the token-timing
//!   attributes (`ttft_us`, `engine_token_commit_count`, `itl_us_avg`, `itl_nanos`) are all read
//!   from the first event of the request whose `attributes.ttft_us` is an unsigned integer, and
//!   `itl_nanos` keeps only the array's unsigned-integer elements. `events_by_kind` and
//!   `events_by_status` leave out events where the field is absent (their diagnostics say so);
//!   an unknown `status` spelling is counted under that spelling.

use alloc::borrow::Cow;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::format::diagnostics::{classify_json_error, Category, Diagnostic};
use crate::format::events::{null_as_default, LineError};
use crate::format::jsonl::{Line, LineSplitter};

/// A closed set of snake_case spellings: the enum, `ALL`, `as_str`, exact `parse`, `Display`
/// and serde impls that use the same spellings.
macro_rules! spelled_enum {
    (
        $(#[$meta:meta])*
        $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $spelling:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord,
            serde::Serialize, serde::Deserialize,
        )]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $spelling)] $variant, )+
        }

        impl $name {
            /// Every value, in SCHEMA.md order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The spelling SCHEMA.md uses.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $spelling, )+
                }
            }

            /// The value spelled exactly `s` (spellings are case-sensitive), if any.
            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $( $spelling => Some($name::$variant), )+
                    _ => None,
                }
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

mod config;
mod timestamp;
mod token_timing;
mod validate;

pub use config::{DetailLevel, ProfilingConfig, DEFAULT_SAMPLE_RATE};
pub use timestamp::is_rfc3339;
pub use token_timing::{
    token_commits, DecodeStage, DecodeStageInterval, EngineTokenTiming, RUST_STD_INSTANT,
};
pub use validate::{validate_event, validate_resource, violations, Violation};

/// The `phase` of module-span events (see
/// [`RequestModules`](crate::analysis::profile_modules::RequestModules) for their attributes).
pub const MODULE_PHASE: &str = "module";

/// The `attributes` keys that cross a layer, each spelled once: written by capture or derived
/// by this crate, read by the analyses, the CLI and the viewer (SCHEMA.md §2 and §4).
pub mod attribute {
    /// Time to first token, µs (derived from the token commits).
    pub const TTFT_US: &str = "ttft_us";
    /// Inter-token latencies, ns (derived).
    pub const ITL_NANOS: &str = "itl_nanos";
    /// How many inter-token latencies there are (derived).
    pub const ITL_INTERVAL_COUNT: &str = "itl_interval_count";
    /// Mean inter-token latency, µs (derived).
    pub const ITL_US_AVG: &str = "itl_us_avg";
    /// Where the inter-token latencies come from (derived).
    pub const ITL_SOURCE: &str = "itl_source";
    /// How many tokens the engine committed (derived).
    pub const ENGINE_TOKEN_COMMIT_COUNT: &str = "engine_token_commit_count";
    /// Each token commit, ns since the request started.
    pub const ENGINE_TOKEN_COMMIT_NANOS_SINCE_REQUEST_START: &str =
        "engine_token_commit_nanos_since_request_start";
    /// The clock the token commits were read from.
    pub const ENGINE_TOKEN_CLOCK_SOURCE: &str = "engine_token_clock_source";
    /// The Unix ns of the token clock's zero.
    pub const ENGINE_TOKEN_WALL_ANCHOR_UNIX_NANOS: &str = "engine_token_wall_anchor_unix_nanos";
    /// The wall anchor's largest error, ns.
    pub const CLOCK_CONVERSION_MAX_ERROR_NANOS: &str = "clock_conversion_max_error_nanos";
    /// That error relative to the decode's wall time, ppm.
    pub const CLOCK_CONVERSION_ERROR_PPM: &str = "clock_conversion_error_ppm";
    /// The decode stages, each `{stage, start_…, end_…}` (the keys below).
    pub const ENGINE_DECODE_STAGE_INTERVALS: &str = "engine_decode_stage_intervals";
    /// How many decode stage intervals there are.
    pub const ENGINE_DECODE_STAGE_INTERVAL_COUNT: &str = "engine_decode_stage_interval_count";
    /// When the decode was ready, ns since the request started.
    pub const ENGINE_DECODE_READY_NANOS_SINCE_REQUEST_START: &str =
        "engine_decode_ready_nanos_since_request_start";
    /// The decode's wall time, ns.
    pub const ENGINE_DECODE_WALL_NANOS: &str = "engine_decode_wall_nanos";
    /// Whether the decode's wall time could be measured.
    pub const DECODE_WALL_TIMING_ELIGIBLE: &str = "decode_wall_timing_eligible";
    /// Why it could not.
    pub const DECODE_WALL_TIMING_UNAVAILABLE_REASON: &str = "decode_wall_timing_unavailable_reason";
    /// A decode stage interval's stage.
    pub const STAGE: &str = "stage";
    /// A start, ns since the request started (a stage interval's, a module span's).
    pub const START_NANOS_SINCE_REQUEST_START: &str = "start_nanos_since_request_start";
    /// A stage interval's end, ns since the request started.
    pub const END_NANOS_SINCE_REQUEST_START: &str = "end_nanos_since_request_start";
    /// The profile's detail level (a `request_open` event's).
    pub const DETAIL_LEVEL: &str = "detail_level";
    /// The profile's sample rate (a `request_open` event's).
    pub const SAMPLE_RATE: &str = "sample_rate";
    /// A module span's number within its request.
    pub const SPAN_ID: &str = "span_id";
    /// The number of a module span's parent.
    pub const PARENT_SPAN_ID: &str = "parent_span_id";
    /// A module span's name.
    pub const NAME: &str = "name";
    /// A module span's kind (`module`, `op`, `function`).
    pub const SPAN_KIND: &str = "span_kind";
    /// The module a module span runs, named by its weights.
    pub const MODULE: &str = "module";
    /// A module span's forward call: `prefill` or `decode`.
    pub const FORWARD: &str = "forward";
    /// A module span's forward call's number (0 for the prefill, n for the n-th decode).
    pub const FORWARD_INDEX: &str = "forward_index";
    /// A module span's duration, ns (also a batched forward's).
    pub const DURATION_NANOS: &str = "duration_nanos";
    /// The engine an event belongs to (its id, also the event's `request_id`): an event
    /// with it is the engine's, not a request's.
    pub const ENGINE: &str = "engine";
    /// A batched forward's number within its engine (its event's, its module spans').
    pub const ITERATION: &str = "iteration";
    /// A batched forward's module span's start, ns since the forward started.
    pub const START_NANOS_SINCE_ITERATION_START: &str = "start_nanos_since_iteration_start";
    /// Requests in a batched forward.
    pub const BATCH_SIZE: &str = "batch_size";
    /// Prompt tokens a forward ran (in all, or for one request).
    pub const PREFILL_TOKENS: &str = "prefill_tokens";
    /// Decode tokens a forward ran (in all, or for one request).
    pub const DECODE_TOKENS: &str = "decode_tokens";
    /// Tokens a forward committed (in all, or for one request).
    pub const COMMITTED_TOKENS: &str = "committed_tokens";
    /// A batched forward's requests, each `{request_id, prefill_tokens, decode_tokens,
    /// committed_tokens}`.
    pub const REQUESTS: &str = "requests";
    /// A batched forward's request entry's id.
    pub const REQUEST_ID: &str = "request_id";
    /// The thread that ran a forward or opened a request (its name, else its id).
    pub const THREAD: &str = "thread";
    /// How forwards were timed: `host` or `device_synchronized` (a `request_open` event's).
    pub const TIMING_MODE: &str = "timing_mode";
    /// Why a request was preempted (a `preempted` event's).
    pub const REASON: &str = "reason";
    /// A decode wave's number within its request.
    pub const WAVE: &str = "wave";
}

/// The `phase` of a batched forward's event (see
/// [`Iterations`](crate::analysis::iterations::Iterations)).
pub const ITERATION_PHASE: &str = "iteration";

/// The `phase` of the event that says a request was preempted.
pub const PREEMPTED_PHASE: &str = "preempted";

/// True when `record` is a module-span event (`phase` = [`MODULE_PHASE`]).
pub fn is_module_event(record: &ProfileRecord) -> bool {
    record.event.phase.as_deref() == Some(MODULE_PHASE)
}

/// The engine `record` belongs to: its `attributes.engine` when that is a non-blank string.
/// Such an event (a batched forward, its module spans, a scheduler's own resource event) is
/// no request's, whatever its `request_id` (which names the engine, as §2 requires one).
pub fn engine_of(record: &ProfileRecord) -> Option<&str> {
    record
        .event
        .attributes
        .get(attribute::ENGINE)
        .and_then(Value::as_str)
        .filter(|e| !e.trim().is_empty())
}

/// The only `schema_version` this module reads and writes.
pub const PROFILE_SCHEMA_VERSION: u32 = 1;

/// A JSON object with string keys: `shape`, `backend_detail`, `attributes`.
pub type JsonMap = BTreeMap<String, Value>;

spelled_enum! {
    /// How the profiled binary was entered (`entrypoint`).
    Entrypoint {
        /// A one-shot run.
        Run => "run",
        /// A serving process.
        Serve => "serve",
        /// A serving benchmark.
        BenchServe => "bench_serve",
        /// A synthetic workload.
        Synthetic => "synthetic",
    }
}

spelled_enum! {
    /// What an event records (`event_kind`).
    EventKind {
        /// A point in time.
        Instant => "instant",
        /// A span with a `duration_us`.
        TimedSpan => "timed_span",
        /// A resource accounting step (see [`ResourceTraceEvent`]).
        Resource => "resource",
        /// A memory snapshot (see [`MemorySnapshot`]).
        Memory => "memory",
        /// An error (see [`ProfileError`]).
        Error => "error",
    }
}

spelled_enum! {
    /// Outcome of an event (`status`).
    Status {
        /// Succeeded.
        Ok => "ok",
        /// Failed; the event must carry an `error`.
        Failure => "failure",
        /// Recorded only for diagnosis (kernel, debug, replay, verify detail levels).
        DiagnosticOnly => "diagnostic_only",
    }
}

spelled_enum! {
    /// What a resource accounting step did (`resource.action`).
    ResourceAction {
        /// A request started holding resources.
        RequestOpen => "request_open",
        /// Resources were reserved (needs `amount`, `before`, `after`).
        Reserve => "reserve",
        /// A reservation was committed (needs `amount`, `before`, `after`).
        Commit => "commit",
        /// A reservation was deferred (needs a non-blank `reason`).
        Defer => "defer",
        /// A reservation was rejected (needs a non-blank `reason`).
        Reject => "reject",
        /// Resources were released (needs `amount`, `before`, `after`).
        Release => "release",
        /// A reservation was rolled back (needs `amount`, `before`, `after`).
        Rollback => "rollback",
        /// A request stopped holding resources.
        RequestClose => "request_close",
        /// The capacity at this point (needs `capacity`).
        CapacitySnapshot => "capacity_snapshot",
    }
}

/// Memory at one point of a request (`memory`).
///
/// The four byte counts are optional on the wire but all required for the event to be valid.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemorySnapshot {
    /// What was measured (`device`, `kv_cache` ...); must be non-blank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Backend the memory belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// Bytes before the measured step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_bytes: Option<u64>,
    /// Bytes after the measured step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_bytes: Option<u64>,
    /// Bytes in use now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_bytes: Option<u64>,
    /// Largest number of bytes in use so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_water_bytes: Option<u64>,
    /// Bytes still available; must be ≥ 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<i64>,
}

impl MemorySnapshot {
    /// A snapshot with every required field set.
    pub fn new(
        scope: impl Into<String>,
        before_bytes: u64,
        after_bytes: u64,
        current_bytes: u64,
        high_water_bytes: u64,
    ) -> Self {
        MemorySnapshot {
            scope: Some(scope.into()),
            backend: None,
            before_bytes: Some(before_bytes),
            after_bytes: Some(after_bytes),
            current_bytes: Some(current_bytes),
            high_water_bytes: Some(high_water_bytes),
            available_bytes: None,
        }
    }
}

/// One resource accounting step (`resource`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceTraceEvent {
    /// Kind of owner (`request`, `scheduler` ...); must be non-blank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_kind: Option<String>,
    /// Id of the owner; must be non-blank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<String>,
    /// Kind of resource (`kv_blocks`, `tokens` ...); must be non-blank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_kind: Option<String>,
    /// One of the [`ResourceAction`] spellings, kept as written so that an unknown one can be
    /// reported while the event is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// Amount moved by this step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<i64>,
    /// Level before this step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<i64>,
    /// Level after this step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<i64>,
    /// Total capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<i64>,
    /// How far a release went below zero; must be > 0 when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub underflow_amount: Option<i64>,
    /// Why (required, non-blank, for `defer` and `reject`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Error kind, non-empty when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<String>,
    /// Message, non-empty when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Resource error kind, non-empty when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_error_kind: Option<String>,
}

impl ResourceTraceEvent {
    /// A step with its owner, resource kind and action set and nothing else.
    pub fn new(
        owner_kind: impl Into<String>,
        owner_id: impl Into<String>,
        resource_kind: impl Into<String>,
        action: ResourceAction,
    ) -> Self {
        ResourceTraceEvent {
            owner_kind: Some(owner_kind.into()),
            owner_id: Some(owner_id.into()),
            resource_kind: Some(resource_kind.into()),
            action: Some(String::from(action.as_str())),
            ..ResourceTraceEvent::default()
        }
    }

    /// The action, when it is one of the known spellings.
    pub fn action(&self) -> Option<ResourceAction> {
        self.action.as_deref().and_then(ResourceAction::parse)
    }
}

/// An error attached to an event (`error`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileError {
    /// Machine-readable kind; must be non-blank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Human-readable message; must be non-blank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Whether the error stopped the request (default false).
    #[serde(default, deserialize_with = "null_as_default")]
    pub blocking: bool,
}

impl ProfileError {
    /// A non-blocking error.
    pub fn new(kind: impl Into<String>, message: impl Into<String>) -> Self {
        ProfileError {
            kind: Some(kind.into()),
            message: Some(message.into()),
            blocking: false,
        }
    }
}

/// How to replay the event (`replay`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replay {
    /// The command line; must be non-blank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Where the replay bundle lives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle_dir: Option<String>,
}

impl Replay {
    /// A replay command without a bundle.
    pub fn new(command: impl Into<String>) -> Self {
        Replay {
            command: Some(command.into()),
            bundle_dir: None,
        }
    }
}

/// One line of an inference profile.
///
/// Decoded leniently: every field a §2 rule can report missing is an `Option`, and the enum-like
/// fields (`entrypoint`, `event_kind`, `status`) are strings, so that a broken event is kept and
/// its broken rules reported by [`validate_event`]. Writers build events with
/// [`ProfileEvent::new`] from typed [`EventHeader`] fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileEvent {
    /// Must be 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_version: Option<u32>,
    /// One of the [`EventKind`] spellings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_kind: Option<String>,
    /// Wall-clock time, ns since the Unix epoch; must be > 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts_unix_nanos: Option<i64>,
    /// The same time as an RFC 3339 string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// Id of this event; non-blank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    /// Id of the request the event belongs to; non-blank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// Caller-owned key; optional on the wire, but must be present and non-blank to be valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// One of the [`Entrypoint`] spellings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<String>,
    /// Backend (`cpu`, `cuda`, `metal` ...); non-blank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// Hash of the runtime preset (`sha256:...`); non-blank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_preset_hash: Option<String>,
    /// Free-text phase (`request`, `prefill`, `decode` ...); non-blank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// One of the [`Status`] spellings; `failure` requires `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Duration in µs; required when `event_kind` is `timed_span`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_us: Option<u64>,
    /// Memory snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemorySnapshot>,
    /// Resource accounting step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceTraceEvent>,
    /// Error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ProfileError>,
    /// Replay instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<Replay>,
    /// Shape of the work (`batch`, `prompt_tokens` ...); must have at least one entry.
    #[serde(default, deserialize_with = "null_as_default")]
    pub shape: JsonMap,
    /// Backend-specific details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_detail: Option<JsonMap>,
    /// Free-form attributes, including those derived from engine token timing.
    #[serde(default, deserialize_with = "null_as_default")]
    pub attributes: JsonMap,
}

/// The required fields of a [`ProfileEvent`], typed: the writer's way to build an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventHeader {
    /// What the event records.
    pub event_kind: EventKind,
    /// Wall-clock time, ns since the Unix epoch.
    pub ts_unix_nanos: i64,
    /// The same time as an RFC 3339 string.
    pub timestamp: String,
    /// Id of this event.
    pub event_id: String,
    /// Id of the request.
    pub request_id: String,
    /// Caller-owned correlation key.
    pub correlation_id: String,
    /// How the binary was entered.
    pub entrypoint: Entrypoint,
    /// Backend.
    pub backend: String,
    /// Hash of the runtime preset.
    pub runtime_preset_hash: String,
    /// Free-text phase.
    pub phase: String,
    /// Outcome.
    pub status: Status,
}

impl ProfileEvent {
    /// An event with `schema_version` 1 and the header's fields; `shape` and `attributes` are
    /// empty and the optional fields absent (set them through the public fields).
    pub fn new(header: EventHeader) -> Self {
        ProfileEvent {
            schema_version: Some(PROFILE_SCHEMA_VERSION),
            event_kind: Some(String::from(header.event_kind.as_str())),
            ts_unix_nanos: Some(header.ts_unix_nanos),
            timestamp: Some(header.timestamp),
            event_id: Some(header.event_id),
            request_id: Some(header.request_id),
            correlation_id: Some(header.correlation_id),
            entrypoint: Some(String::from(header.entrypoint.as_str())),
            backend: Some(header.backend),
            runtime_preset_hash: Some(header.runtime_preset_hash),
            phase: Some(header.phase),
            status: Some(String::from(header.status.as_str())),
            ..ProfileEvent::default()
        }
    }

    /// The event kind, when it is one of the known spellings.
    pub fn event_kind(&self) -> Option<EventKind> {
        self.event_kind.as_deref().and_then(EventKind::parse)
    }

    /// The status, when it is one of the known spellings.
    pub fn status(&self) -> Option<Status> {
        self.status.as_deref().and_then(Status::parse)
    }

    /// The entry point, when it is one of the known spellings.
    pub fn entrypoint(&self) -> Option<Entrypoint> {
        self.entrypoint.as_deref().and_then(Entrypoint::parse)
    }

    /// One JSONL line (without the `\n`); absent optional fields are omitted.
    pub fn to_json_line(&self) -> String {
        // Serializing into a String cannot fail: every map key is a string and no field has a
        // fallible Serialize impl.
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[derive(Deserialize)]
struct EventKindOnly<'a> {
    #[serde(borrow, default)]
    event_kind: Option<Cow<'a, str>>,
}

/// Decode one inference-profile line (the bytes of one JSONL line, without its `\n`).
///
/// `Err(LineError::UnknownKind)` for a well-formed line whose `event_kind` this reader does not
/// know, `Err(LineError::Invalid)` for a line that is not a JSON object or has a field of the
/// wrong JSON type. Broken §2 rules are not decoding errors: check them with [`validate_event`].
pub fn decode_line(bytes: &[u8]) -> Result<ProfileEvent, LineError> {
    fn invalid(e: &serde_json::Error) -> LineError {
        let (category, message) = classify_json_error(e);
        LineError::Invalid(category, message)
    }
    // A derived struct also deserializes from a JSON array, so check for an object first.
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return Err(
            match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
                Err(e) => invalid(&e),
                Ok(_) => LineError::Invalid(
                    Category::Syntax,
                    String::from("expected a JSON object, found another JSON value"),
                ),
            },
        );
    }
    match serde_json::from_slice::<ProfileEvent>(bytes) {
        Ok(event) => match event.event_kind.as_deref() {
            Some(kind) if EventKind::parse(kind).is_none() => {
                Err(LineError::UnknownKind(String::from(kind)))
            }
            _ => Ok(event),
        },
        Err(e) => {
            // A newer writer's kind may carry fields of types this reader does not expect:
            // an unknown kind is still only a warning.
            if e.classify() == serde_json::error::Category::Data {
                if let Ok(EventKindOnly {
                    event_kind: Some(kind),
                }) = serde_json::from_slice::<EventKindOnly<'_>>(bytes)
                {
                    if EventKind::parse(&kind).is_none() {
                        return Err(LineError::UnknownKind(kind.into_owned()));
                    }
                }
            }
            Err(invalid(&e))
        }
    }
}

/// One kept event and the §2 rules it breaks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileRecord {
    /// 1-based line number in the file.
    pub line: u64,
    /// The decoded event.
    pub event: ProfileEvent,
    /// One message per broken rule; empty when the event is valid.
    pub violations: Vec<String>,
}

impl ProfileRecord {
    /// True when the event breaks no rule.
    pub fn is_valid(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Everything read from an inference profile: the kept events and the diagnostics.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileDocument {
    /// Kept events in file order.
    pub records: Vec<ProfileRecord>,
    /// Problems found, in line order.
    pub diagnostics: Vec<Diagnostic>,
}

/// Streaming reader of an inference profile: push chunks of any size, then [`finish`].
///
/// [`finish`]: ProfileReader::finish
#[derive(Debug, Default)]
pub struct ProfileReader {
    splitter: LineSplitter,
    doc: ProfileDocument,
}

impl ProfileReader {
    /// A reader at the start of a file.
    pub fn new() -> Self {
        Self::default()
    }

    /// Lines completed so far, blank ones included (for progress reporting).
    pub fn lines_read(&self) -> u64 {
        self.splitter.lines_seen()
    }

    /// Feed the next chunk of the file; lines may straddle chunks.
    pub fn push(&mut self, chunk: &[u8]) {
        let doc = &mut self.doc;
        self.splitter.push(chunk, |line| read_line(line, doc));
    }

    /// End of file: reads a last line without `\n` and returns the document.
    pub fn finish(self) -> ProfileDocument {
        let ProfileReader { splitter, mut doc } = self;
        splitter.finish(|line| read_line(line, &mut doc));
        doc
    }
}

/// Read a whole inference profile held in memory.
pub fn read_profile(bytes: &[u8]) -> ProfileDocument {
    let mut reader = ProfileReader::new();
    reader.push(bytes);
    reader.finish()
}

fn read_line(line: Line<'_>, doc: &mut ProfileDocument) {
    let Some(bytes) = crate::format::jsonl::without_bom(&line) else {
        return;
    };
    match decode_line(bytes) {
        Ok(event) => {
            let broken = violations(&event);
            let mut messages = Vec::with_capacity(broken.len());
            for v in broken {
                doc.diagnostics.push(Diagnostic::error(
                    line.number,
                    v.category,
                    v.message.clone(),
                ));
                messages.push(v.message);
            }
            doc.records.push(ProfileRecord {
                line: line.number,
                event,
                violations: messages,
            });
        }
        Err(LineError::UnknownKind(kind)) => doc.diagnostics.push(Diagnostic::warning(
            line.number,
            Category::UnknownKind,
            alloc::format!("unknown event_kind `{kind}`; line skipped"),
        )),
        Err(LineError::Invalid(Category::Truncated, message)) => {
            doc.diagnostics.push(if line.terminated {
                Diagnostic::error(line.number, Category::Syntax, message)
            } else {
                Diagnostic::warning(
                    line.number,
                    Category::Truncated,
                    alloc::format!("truncated last line (no trailing newline): {message}"),
                )
            })
        }
        Err(LineError::Invalid(category, message)) => {
            doc.diagnostics
                .push(Diagnostic::error(line.number, category, message))
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::format::diagnostics::Severity;
    use alloc::string::ToString;
    use alloc::vec;

    /// A line that breaks no rule; tests change one field at a time.
    pub(crate) const GOOD: &str = concat!(
        r#"{"schema_version":1,"event_kind":"timed_span","ts_unix_nanos":1767225600000000000,"#,
        r#""timestamp":"2026-01-01T00:00:00.5+01:00","event_id":"e1","request_id":"r1","#,
        r#""correlation_id":"c1","entrypoint":"bench_serve","backend":"cuda","#,
        r#""runtime_preset_hash":"sha256:ab","phase":"request","status":"ok","model":"m","#,
        r#""duration_us":2500,"shape":{"batch":1},"attributes":{"ttft_us":1000}}"#
    );

    pub(crate) fn good() -> ProfileEvent {
        decode_line(GOOD.as_bytes()).unwrap()
    }

    fn header() -> EventHeader {
        EventHeader {
            event_kind: EventKind::Instant,
            ts_unix_nanos: 5,
            timestamp: "2026-01-01T00:00:00Z".into(),
            event_id: "e".into(),
            request_id: "r".into(),
            correlation_id: "c".into(),
            entrypoint: Entrypoint::Run,
            backend: "cpu".into(),
            runtime_preset_hash: "sha256:00".into(),
            phase: "prefill".into(),
            status: Status::DiagnosticOnly,
        }
    }

    #[test]
    fn the_good_line_decodes_and_is_valid() {
        let e = good();
        assert_eq!(e.event_kind(), Some(EventKind::TimedSpan));
        assert_eq!(e.status(), Some(Status::Ok));
        assert_eq!(e.entrypoint(), Some(Entrypoint::BenchServe));
        assert_eq!(e.duration_us, Some(2500));
        assert_eq!(e.shape.get("batch"), Some(&Value::from(1u64)));
        assert_eq!(validate_event(&e), Vec::<String>::new());
    }

    #[test]
    fn typed_constructor_writes_a_valid_line_that_reads_back_equal() {
        let mut e = ProfileEvent::new(header());
        e.shape.insert("tokens".into(), Value::from(3u64));
        e.error = Some(ProfileError::new("oom", "out of memory"));
        e.memory = Some(MemorySnapshot::new("device", 1, 2, 3, 4));
        let mut r = ResourceTraceEvent::new("request", "r", "kv_blocks", ResourceAction::Reserve);
        r.amount = Some(2);
        r.before = Some(0);
        r.after = Some(2);
        e.resource = Some(r);
        e.replay = Some(Replay::new("candle-trace replay r"));
        assert_eq!(validate_event(&e), Vec::<String>::new());
        let line = e.to_json_line();
        assert!(
            line.starts_with(r#"{"schema_version":1,"event_kind":"instant","#),
            "{line}"
        );
        assert!(!line.contains("null"), "{line}");
        assert!(!line.contains("duration_us"), "{line}");
        assert_eq!(decode_line(line.as_bytes()).unwrap(), e);
    }

    #[test]
    fn enums_round_trip_their_spellings() {
        for &k in EventKind::ALL {
            assert_eq!(EventKind::parse(k.as_str()), Some(k));
        }
        for &s in Status::ALL {
            assert_eq!(Status::parse(&s.to_string()), Some(s));
        }
        for &e in Entrypoint::ALL {
            assert_eq!(
                serde_json::to_string(&e).unwrap(),
                alloc::format!("\"{e}\"")
            );
        }
        assert_eq!(ResourceAction::ALL.len(), 9);
        assert_eq!(
            ResourceAction::parse("capacity_snapshot"),
            Some(ResourceAction::CapacitySnapshot)
        );
        assert_eq!(Status::parse("OK"), None);
        assert_eq!(EventKind::TimedSpan.as_str(), "timed_span");
        assert_eq!(Entrypoint::BenchServe.as_str(), "bench_serve");
    }

    #[test]
    fn null_reads_as_absent_and_unknown_fields_are_ignored() {
        let line = GOOD.replace(
            r#""model":"m""#,
            r#""model":null,"memory":null,"shape":null,"backend_detail":null,"future":[1]"#,
        );
        // `shape` now appears twice; drop the original.
        let line = line.replace(r#","shape":{"batch":1}"#, "");
        let e = decode_line(line.as_bytes()).unwrap();
        assert_eq!(e.model, None);
        assert_eq!(e.memory, None);
        assert!(e.shape.is_empty());
        let err = r#"{"kind":"k","message":"m","blocking":null}"#;
        assert!(!serde_json::from_str::<ProfileError>(err).unwrap().blocking);
    }

    fn read_chunked(file: &[u8], size: usize) -> ProfileDocument {
        let mut reader = ProfileReader::new();
        for chunk in file.chunks(size) {
            reader.push(chunk);
        }
        reader.finish()
    }

    /// One file with every kind of line the reader distinguishes.
    fn mixed_file() -> String {
        let mut f = String::new();
        f.push_str(GOOD); // 1: kept, valid
        f.push('\n');
        f.push_str("not json\n"); // 2: syntax error, dropped
        f.push_str("[1,2]\r\n"); // 3: not an object, dropped
        f.push('\n'); // 4: blank
        f.push_str(&GOOD.replace(r#""event_kind":"timed_span""#, r#""event_kind":"kernel""#));
        f.push('\n'); // 5: unknown kind, warning, skipped
        f.push_str(&GOOD.replace(r#""duration_us":2500"#, r#""duration_us":"long""#));
        f.push('\n'); // 6: wrong type, dropped
                      // 7: three broken rules, kept
        f.push_str(
            &GOOD
                .replace(r#""request_id":"r1""#, r#""request_id":" ""#)
                .replace(r#""status":"ok""#, r#""status":"failure""#)
                .replace(r#""schema_version":1"#, r#""schema_version":2"#),
        );
        f.push('\n');
        f.push_str(r#"{"schema_version":1,"event_kind":"instant","ts_"#); // 8: truncated
        f
    }

    #[test]
    fn reader_sorts_every_line_into_kept_dropped_or_skipped() {
        let doc = read_profile(mixed_file().as_bytes());
        let lines: Vec<u64> = doc.records.iter().map(|r| r.line).collect();
        assert_eq!(lines, vec![1, 7]);
        assert!(doc.records[0].is_valid());
        let seen: Vec<(u64, Severity, Category)> = doc
            .diagnostics
            .iter()
            .map(|d| (d.line, d.severity, d.category))
            .collect();
        assert_eq!(
            seen,
            vec![
                (2, Severity::Error, Category::Syntax),
                (3, Severity::Error, Category::Syntax),
                (5, Severity::Warning, Category::UnknownKind),
                (6, Severity::Error, Category::WrongType),
                (7, Severity::Error, Category::InvalidValue),
                (7, Severity::Error, Category::InvalidValue),
                (7, Severity::Error, Category::MissingField),
                (8, Severity::Warning, Category::Truncated),
            ]
        );
        let mut broken = doc.records[1].violations.clone();
        broken.sort();
        assert_eq!(
            broken,
            vec![
                "`error` is missing (required when `status` is `failure`)".to_string(),
                "`request_id` must be non-blank".to_string(),
                "`schema_version` must be 1, found 2".to_string(),
            ]
        );
        assert!(doc.diagnostics[2].message.contains("`kernel`"));
    }

    #[test]
    fn chunk_size_does_not_change_the_result() {
        let file = mixed_file();
        let whole = read_profile(file.as_bytes());
        for size in 1..=7 {
            assert_eq!(
                read_chunked(file.as_bytes(), size),
                whole,
                "chunk size {size}"
            );
        }
    }

    #[test]
    fn truncation_is_only_a_warning_on_the_unterminated_last_line() {
        let cut = &GOOD[..GOOD.len() - 10];
        let doc = read_profile(cut.as_bytes());
        assert!(doc.records.is_empty());
        assert_eq!(doc.diagnostics.len(), 1);
        assert_eq!(doc.diagnostics[0].severity, Severity::Warning);
        assert_eq!(doc.diagnostics[0].category, Category::Truncated);
        assert_eq!(doc.diagnostics[0].line, 1);

        // The same bytes followed by a newline are a broken line, not a truncated file.
        let doc = read_profile(alloc::format!("{cut}\n").as_bytes());
        assert_eq!(doc.diagnostics[0].severity, Severity::Error);
        assert_eq!(doc.diagnostics[0].category, Category::Syntax);

        // A complete last line without a newline is read normally.
        let doc = read_profile(GOOD.as_bytes());
        assert_eq!(doc.records.len(), 1);
        assert!(doc.diagnostics.is_empty());
    }

    #[test]
    fn an_unknown_kind_with_unexpected_field_types_is_still_only_skipped() {
        let line = br#"{"schema_version":1,"event_kind":"gpu_counter","duration_us":"x"}"#;
        assert_eq!(
            decode_line(line),
            Err(LineError::UnknownKind("gpu_counter".into()))
        );
        // ... but a known kind with the same field is dropped with an error.
        let line = br#"{"schema_version":1,"event_kind":"instant","duration_us":"x"}"#;
        assert!(matches!(
            decode_line(line),
            Err(LineError::Invalid(Category::WrongType, _))
        ));
    }

    #[test]
    fn a_missing_required_field_is_a_kept_event_with_a_missing_field_diagnostic() {
        let line = GOOD.replace(r#""request_id":"r1","#, "");
        let doc = read_profile(line.as_bytes());
        assert_eq!(doc.records.len(), 1);
        assert_eq!(
            doc.records[0].violations,
            vec!["`request_id` is missing".to_string()]
        );
        assert_eq!(doc.diagnostics.len(), 1);
        assert_eq!(doc.diagnostics[0].category, Category::MissingField);
        assert_eq!(doc.diagnostics[0].severity, Severity::Error);
    }

    #[test]
    fn an_empty_object_is_kept_with_every_required_field_missing() {
        let doc = read_profile(b"{}\n");
        assert_eq!(doc.records.len(), 1);
        let mut fields: Vec<&str> = doc.records[0]
            .violations
            .iter()
            .map(|m| m.split('`').nth(1).unwrap())
            .collect();
        fields.sort_unstable();
        // 12 required fields, plus `shape` which defaults to {} and is then empty.
        assert_eq!(
            fields,
            vec![
                "backend",
                "correlation_id",
                "entrypoint",
                "event_id",
                "event_kind",
                "phase",
                "request_id",
                "runtime_preset_hash",
                "schema_version",
                "shape",
                "status",
                "timestamp",
                "ts_unix_nanos",
            ]
        );
        assert_eq!(doc.diagnostics.len(), 13);
    }
}
