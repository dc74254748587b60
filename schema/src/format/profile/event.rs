//! An inference profile's event: its closed spellings, its parts (memory, resource, error,
//! replay), the event itself and `decode_line`.

use alloc::borrow::Cow;
use alloc::string::String;

use serde::{Deserialize, Serialize};

use crate::format::diagnostics::{classify_json_error, Category};
use crate::format::events::{null_as_default, LineError};

use super::{JsonMap, PROFILE_SCHEMA_VERSION};

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
/// its broken rules reported by [`validate_event`](super::validate_event). Writers build events with
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
/// wrong JSON type. Broken §2 rules are not decoding errors: check them with [`validate_event`](super::validate_event).
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
