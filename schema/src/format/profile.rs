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
//!   error (category from [`classify_json_error`](crate::format::diagnostics::classify_json_error)); the line is dropped, because there is no
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

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::format::diagnostics::Diagnostic;
use crate::format::jsonl::LineSplitter;

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
mod event;
mod reader;
mod timestamp;
mod token_timing;
mod validate;

pub use event::{
    decode_line, Entrypoint, EventHeader, EventKind, MemorySnapshot, ProfileError, ProfileEvent,
    Replay, ResourceAction, ResourceTraceEvent, Status,
};
pub use reader::read_profile;

pub mod attribute;

pub use config::{DetailLevel, ProfilingConfig, DEFAULT_SAMPLE_RATE};
pub use timestamp::is_rfc3339;
pub use token_timing::{
    token_commits, DecodeStage, DecodeStageInterval, Derived, EngineTokenTiming, RUST_STD_INSTANT,
};
pub use validate::{validate_error, validate_event, validate_resource, violations, Violation};

/// The `phase` of module-span events (see
/// [`RequestModules`](crate::analysis::profile_modules::RequestModules) for their attributes).
pub const MODULE_PHASE: &str = "module";

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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::format::diagnostics::Category;
    use crate::format::diagnostics::Severity;
    use crate::format::events::LineError;
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
