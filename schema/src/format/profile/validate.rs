//! The rules of SCHEMA.md §2, checked on one decoded event. Every broken rule is reported, in
//! the order of §2's table (nested objects after the top-level fields they belong to).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::{
    is_rfc3339, Entrypoint, EventKind, MemorySnapshot, ProfileError, ProfileEvent, Replay,
    ResourceAction, ResourceTraceEvent, Status, PROFILE_SCHEMA_VERSION,
};
use crate::format::diagnostics::Category;

/// One broken rule: the diagnostic category and a message that starts with the field's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// [`Category::MissingField`] when a required field is absent, otherwise
    /// [`Category::InvalidValue`].
    pub category: Category,
    /// Human-readable message naming the field in backticks, e.g. "`request_id` must be non-blank".
    pub message: String,
}

/// Every §2 rule `event` breaks, as messages; empty when the event is valid.
pub fn validate_event(event: &ProfileEvent) -> Vec<String> {
    violations(event).into_iter().map(|v| v.message).collect()
}

/// The rules of a `resource` object alone that `res` breaks, as messages: those
/// [`validate_event`] reports for an event that carries it (a writer that makes every other
/// field itself checks only this part).
pub fn validate_resource(res: &ResourceTraceEvent) -> Vec<String> {
    let mut r = Rules::default();
    r.resource(res);
    r.out.into_iter().map(|v| v.message).collect()
}

/// The rules of an `error` object alone that `e` breaks, as messages: those [`validate_event`]
/// reports for an event that carries it.
pub fn validate_error(e: &ProfileError) -> Vec<String> {
    let mut r = Rules::default();
    r.error(e);
    r.out.into_iter().map(|v| v.message).collect()
}

/// Every §2 rule `event` breaks, with the diagnostic category of each.
pub fn violations(event: &ProfileEvent) -> Vec<Violation> {
    let mut r = Rules::default();
    match event.schema_version {
        None => r.missing("schema_version"),
        Some(PROFILE_SCHEMA_VERSION) => {}
        Some(v) => r.invalid(format!(
            "`schema_version` must be {PROFILE_SCHEMA_VERSION}, found {v}"
        )),
    }
    match event.ts_unix_nanos {
        None => r.missing("ts_unix_nanos"),
        Some(t) if t <= 0 => r.invalid(format!("`ts_unix_nanos` must be > 0, found {t}")),
        Some(_) => {}
    }
    r.non_blank("event_id", event.event_id.as_deref());
    r.non_blank("request_id", event.request_id.as_deref());
    r.non_blank("correlation_id", event.correlation_id.as_deref());
    r.one_of(
        "entrypoint",
        event.entrypoint.as_deref(),
        Entrypoint::ALL.iter().map(|e| e.as_str()),
        |s| Entrypoint::parse(s).is_some(),
    );
    r.non_blank("backend", event.backend.as_deref());
    r.non_blank("runtime_preset_hash", event.runtime_preset_hash.as_deref());
    r.non_blank("phase", event.phase.as_deref());
    r.one_of(
        "event_kind",
        event.event_kind.as_deref(),
        EventKind::ALL.iter().map(|k| k.as_str()),
        |s| EventKind::parse(s).is_some(),
    );
    match event.timestamp.as_deref() {
        None => r.missing("timestamp"),
        Some(t) if !is_rfc3339(t) => r.invalid(format!(
            "`timestamp` must be an RFC 3339 date-time, found `{t}`"
        )),
        Some(_) => {}
    }
    r.one_of(
        "status",
        event.status.as_deref(),
        Status::ALL.iter().map(|s| s.as_str()),
        |s| Status::parse(s).is_some(),
    );
    if event.status() == Some(Status::Failure) && event.error.is_none() {
        r.missing_when("error", "`status` is `failure`");
    }
    if event.event_kind() == Some(EventKind::TimedSpan) && event.duration_us.is_none() {
        r.missing_when("duration_us", "`event_kind` is `timed_span`");
    }
    if let Some(memory) = &event.memory {
        r.memory(memory);
    }
    if let Some(resource) = &event.resource {
        r.resource(resource);
    }
    if let Some(error) = &event.error {
        r.error(error);
    }
    if let Some(replay) = &event.replay {
        r.replay(replay);
    }
    if event.shape.is_empty() {
        r.invalid(String::from("`shape` must have at least one entry"));
    }
    r.out
}

#[derive(Default)]
struct Rules {
    out: Vec<Violation>,
}

impl Rules {
    fn invalid(&mut self, message: String) {
        self.out.push(Violation {
            category: Category::InvalidValue,
            message,
        });
    }

    fn missing(&mut self, field: &str) {
        self.out.push(Violation {
            category: Category::MissingField,
            message: format!("`{field}` is missing"),
        });
    }

    fn missing_when(&mut self, field: &str, condition: &str) {
        self.out.push(Violation {
            category: Category::MissingField,
            message: format!("`{field}` is missing (required when {condition})"),
        });
    }

    fn non_blank(&mut self, field: &str, value: Option<&str>) {
        match value {
            None => self.missing(field),
            Some(v) if v.trim().is_empty() => {
                self.invalid(format!("`{field}` must be non-blank"));
            }
            Some(_) => {}
        }
    }

    /// An optional string that must not be empty when it is set.
    fn non_empty_when_set(&mut self, field: &str, value: Option<&str>) {
        if value == Some("") {
            self.invalid(format!("`{field}` must be non-empty when set"));
        }
    }

    fn one_of<'s>(
        &mut self,
        field: &str,
        value: Option<&str>,
        spellings: impl Iterator<Item = &'s str>,
        known: impl Fn(&str) -> bool,
    ) {
        match value {
            None => self.missing(field),
            Some(v) if !known(v) => {
                let mut allowed = String::new();
                for (i, s) in spellings.enumerate() {
                    if i > 0 {
                        allowed.push_str(", ");
                    }
                    allowed.push('`');
                    allowed.push_str(s);
                    allowed.push('`');
                }
                self.invalid(format!("`{field}` must be one of {allowed}, found `{v}`"));
            }
            Some(_) => {}
        }
    }

    fn memory(&mut self, m: &MemorySnapshot) {
        self.non_blank("memory.scope", m.scope.as_deref());
        for (field, value) in [
            ("memory.before_bytes", m.before_bytes),
            ("memory.after_bytes", m.after_bytes),
            ("memory.current_bytes", m.current_bytes),
            ("memory.high_water_bytes", m.high_water_bytes),
        ] {
            if value.is_none() {
                self.missing(field);
            }
        }
        if let Some(a) = m.available_bytes {
            if a < 0 {
                self.invalid(format!("`memory.available_bytes` must be >= 0, found {a}"));
            }
        }
    }

    fn resource(&mut self, res: &ResourceTraceEvent) {
        self.non_blank("resource.owner_kind", res.owner_kind.as_deref());
        self.non_blank("resource.owner_id", res.owner_id.as_deref());
        self.non_blank("resource.resource_kind", res.resource_kind.as_deref());
        self.one_of(
            "resource.action",
            res.action.as_deref(),
            ResourceAction::ALL.iter().map(|a| a.as_str()),
            |s| ResourceAction::parse(s).is_some(),
        );
        if let Some(u) = res.underflow_amount {
            if u <= 0 {
                self.invalid(format!(
                    "`resource.underflow_amount` must be > 0 when set, found {u}"
                ));
            }
        }
        let action = res.action();
        let needs_reason = matches!(action, Some(ResourceAction::Defer | ResourceAction::Reject));
        if !needs_reason {
            self.non_empty_when_set("resource.reason", res.reason.as_deref());
        }
        self.non_empty_when_set("resource.error_kind", res.error_kind.as_deref());
        self.non_empty_when_set("resource.message", res.message.as_deref());
        self.non_empty_when_set(
            "resource.resource_error_kind",
            res.resource_error_kind.as_deref(),
        );
        let Some(action) = action else { return };
        let condition = format!("`resource.action` is `{action}`");
        match action {
            ResourceAction::Reserve
            | ResourceAction::Commit
            | ResourceAction::Release
            | ResourceAction::Rollback => {
                for (field, value) in [
                    ("resource.amount", res.amount),
                    ("resource.before", res.before),
                    ("resource.after", res.after),
                ] {
                    if value.is_none() {
                        self.missing_when(field, &condition);
                    }
                }
            }
            ResourceAction::Defer | ResourceAction::Reject => match res.reason.as_deref() {
                None => self.missing_when("resource.reason", &condition),
                Some(reason) if reason.trim().is_empty() => self.invalid(format!(
                    "`resource.reason` must be non-blank when {condition}"
                )),
                Some(_) => {}
            },
            ResourceAction::CapacitySnapshot => {
                if res.capacity.is_none() {
                    self.missing_when("resource.capacity", &condition);
                }
            }
            ResourceAction::RequestOpen | ResourceAction::RequestClose => {}
        }
    }

    fn error(&mut self, e: &ProfileError) {
        self.non_blank("error.kind", e.kind.as_deref());
        self.non_blank("error.message", e.message.as_deref());
    }

    fn replay(&mut self, r: &Replay) {
        self.non_blank("replay.command", r.command.as_deref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::profile::tests::good;
    use crate::format::profile::JsonMap;
    use alloc::string::ToString;
    use alloc::vec;

    /// The messages for `event`, sorted, and whether each is a missing-field one.
    fn broken(event: &ProfileEvent) -> Vec<(Category, String)> {
        let mut v: Vec<(Category, String)> = violations(event)
            .into_iter()
            .map(|v| (v.category, v.message))
            .collect();
        v.sort();
        v
    }

    fn one(category: Category, message: &str) -> Vec<(Category, String)> {
        vec![(category, message.to_string())]
    }

    const MISSING: Category = Category::MissingField;
    const INVALID: Category = Category::InvalidValue;

    #[test]
    fn every_top_level_rule_broken_once() {
        /// How to break the good event, and the one violation that must result.
        type Case = (fn(&mut ProfileEvent), Category, &'static str);
        let cases: Vec<Case> = vec![
            (|e| e.schema_version = None, MISSING, "`schema_version` is missing"),
            (
                |e| e.schema_version = Some(0),
                INVALID,
                "`schema_version` must be 1, found 0",
            ),
            (|e| e.ts_unix_nanos = None, MISSING, "`ts_unix_nanos` is missing"),
            (
                |e| e.ts_unix_nanos = Some(0),
                INVALID,
                "`ts_unix_nanos` must be > 0, found 0",
            ),
            (
                |e| e.ts_unix_nanos = Some(-1),
                INVALID,
                "`ts_unix_nanos` must be > 0, found -1",
            ),
            (|e| e.event_id = None, MISSING, "`event_id` is missing"),
            (
                |e| e.event_id = Some("".into()),
                INVALID,
                "`event_id` must be non-blank",
            ),
            (
                |e| e.request_id = Some(" \t".into()),
                INVALID,
                "`request_id` must be non-blank",
            ),
            (|e| e.request_id = None, MISSING, "`request_id` is missing"),
            (
                |e| e.correlation_id = None,
                MISSING,
                "`correlation_id` is missing",
            ),
            (
                |e| e.correlation_id = Some("  ".into()),
                INVALID,
                "`correlation_id` must be non-blank",
            ),
            (|e| e.entrypoint = None, MISSING, "`entrypoint` is missing"),
            (
                |e| e.entrypoint = Some("Serve".into()),
                INVALID,
                "`entrypoint` must be one of `run`, `serve`, `bench_serve`, `synthetic`, found `Serve`",
            ),
            (|e| e.backend = None, MISSING, "`backend` is missing"),
            (
                |e| e.backend = Some("\n".into()),
                INVALID,
                "`backend` must be non-blank",
            ),
            (
                |e| e.runtime_preset_hash = None,
                MISSING,
                "`runtime_preset_hash` is missing",
            ),
            (
                |e| e.runtime_preset_hash = Some(" ".into()),
                INVALID,
                "`runtime_preset_hash` must be non-blank",
            ),
            (|e| e.phase = None, MISSING, "`phase` is missing"),
            (
                |e| e.phase = Some("".into()),
                INVALID,
                "`phase` must be non-blank",
            ),
            (
                |e| {
                    e.event_kind = None;
                    // `duration_us` is only required for timed spans; keep it so one rule breaks.
                },
                MISSING,
                "`event_kind` is missing",
            ),
            (
                |e| e.event_kind = Some("span".into()),
                INVALID,
                "`event_kind` must be one of `instant`, `timed_span`, `resource`, `memory`, `error`, found `span`",
            ),
            (|e| e.timestamp = None, MISSING, "`timestamp` is missing"),
            (
                |e| e.timestamp = Some("2026-02-30T00:00:00Z".into()),
                INVALID,
                "`timestamp` must be an RFC 3339 date-time, found `2026-02-30T00:00:00Z`",
            ),
            (|e| e.status = None, MISSING, "`status` is missing"),
            (
                |e| e.status = Some("error".into()),
                INVALID,
                "`status` must be one of `ok`, `failure`, `diagnostic_only`, found `error`",
            ),
            (
                |e| e.status = Some("failure".into()),
                MISSING,
                "`error` is missing (required when `status` is `failure`)",
            ),
            (
                |e| e.duration_us = None,
                MISSING,
                "`duration_us` is missing (required when `event_kind` is `timed_span`)",
            ),
            (
                |e| e.shape = JsonMap::new(),
                INVALID,
                "`shape` must have at least one entry",
            ),
        ];
        for (break_it, category, message) in cases {
            let mut e = good();
            break_it(&mut e);
            assert_eq!(broken(&e), one(category, message), "{message}");
        }
    }

    #[test]
    fn optional_fields_break_nothing_when_absent() {
        let mut e = good();
        e.model = None;
        e.event_kind = Some("instant".into());
        e.duration_us = None;
        e.backend_detail = None;
        e.attributes.clear();
        assert!(validate_event(&e).is_empty());
        // A failure with its error is fine.
        e.status = Some("failure".into());
        e.error = Some(ProfileError::new("oom", "out of memory"));
        assert!(validate_event(&e).is_empty());
    }

    #[test]
    fn three_broken_rules_give_three_messages() {
        let mut e = good();
        e.event_id = None;
        e.timestamp = Some("yesterday".into());
        e.shape.clear();
        assert_eq!(
            broken(&e),
            vec![
                (MISSING, "`event_id` is missing".to_string()),
                (INVALID, "`shape` must have at least one entry".to_string()),
                (
                    INVALID,
                    "`timestamp` must be an RFC 3339 date-time, found `yesterday`".to_string()
                ),
            ]
        );
        // validate_event reports them in table order.
        assert_eq!(
            validate_event(&e),
            vec![
                "`event_id` is missing",
                "`timestamp` must be an RFC 3339 date-time, found `yesterday`",
                "`shape` must have at least one entry",
            ]
        );
    }

    #[test]
    fn memory_snapshot_rules() {
        let check = |m: MemorySnapshot| {
            let mut e = good();
            e.memory = Some(m);
            broken(&e)
        };
        let ok = MemorySnapshot::new("device", 1, 2, 3, 4);
        assert!(check(ok.clone()).is_empty());
        assert!(check(MemorySnapshot {
            available_bytes: Some(0),
            ..ok.clone()
        })
        .is_empty());
        assert_eq!(
            check(MemorySnapshot {
                scope: Some(" ".into()),
                ..ok.clone()
            }),
            one(INVALID, "`memory.scope` must be non-blank")
        );
        assert_eq!(
            check(MemorySnapshot {
                available_bytes: Some(-1),
                ..ok.clone()
            }),
            one(INVALID, "`memory.available_bytes` must be >= 0, found -1")
        );
        for (m, field) in [
            (
                MemorySnapshot {
                    before_bytes: None,
                    ..ok.clone()
                },
                "before_bytes",
            ),
            (
                MemorySnapshot {
                    after_bytes: None,
                    ..ok.clone()
                },
                "after_bytes",
            ),
            (
                MemorySnapshot {
                    current_bytes: None,
                    ..ok.clone()
                },
                "current_bytes",
            ),
            (
                MemorySnapshot {
                    high_water_bytes: None,
                    ..ok.clone()
                },
                "high_water_bytes",
            ),
        ] {
            assert_eq!(
                check(m),
                one(MISSING, &alloc::format!("`memory.{field}` is missing"))
            );
        }
        // An empty object: scope and the four byte counts.
        assert_eq!(check(MemorySnapshot::default()).len(), 5);
    }

    #[test]
    fn resource_rules() {
        let check = |r: ResourceTraceEvent| {
            let mut alone = validate_resource(&r);
            alone.sort();
            let mut e = good();
            e.resource = Some(r);
            let found = broken(&e);
            // The object alone breaks what the event that carries it breaks (`good` breaks
            // nothing).
            let mut messages: Vec<String> = found.iter().map(|(_, m)| m.clone()).collect();
            messages.sort();
            assert_eq!(alone, messages);
            found
        };
        let open =
            ResourceTraceEvent::new("request", "r1", "kv_blocks", ResourceAction::RequestOpen);
        assert!(check(open.clone()).is_empty());
        assert_eq!(
            check(ResourceTraceEvent {
                owner_kind: None,
                ..open.clone()
            }),
            one(MISSING, "`resource.owner_kind` is missing")
        );
        assert_eq!(
            check(ResourceTraceEvent {
                owner_id: Some("".into()),
                ..open.clone()
            }),
            one(INVALID, "`resource.owner_id` must be non-blank")
        );
        assert_eq!(
            check(ResourceTraceEvent {
                resource_kind: Some(" ".into()),
                ..open.clone()
            }),
            one(INVALID, "`resource.resource_kind` must be non-blank")
        );
        assert_eq!(
            check(ResourceTraceEvent {
                action: None,
                ..open.clone()
            }),
            one(MISSING, "`resource.action` is missing")
        );
        assert_eq!(
            check(ResourceTraceEvent {
                action: Some("grow".into()),
                ..open.clone()
            }),
            one(
                INVALID,
                "`resource.action` must be one of `request_open`, `reserve`, `commit`, `defer`, \
                 `reject`, `release`, `rollback`, `request_close`, `capacity_snapshot`, found `grow`"
            )
        );
        assert_eq!(
            check(ResourceTraceEvent {
                underflow_amount: Some(0),
                ..open.clone()
            }),
            one(
                INVALID,
                "`resource.underflow_amount` must be > 0 when set, found 0"
            )
        );
        assert!(check(ResourceTraceEvent {
            underflow_amount: Some(3),
            ..open.clone()
        })
        .is_empty());
        for field in ["reason", "error_kind", "message", "resource_error_kind"] {
            let mut r = open.clone();
            let slot = match field {
                "reason" => &mut r.reason,
                "error_kind" => &mut r.error_kind,
                "message" => &mut r.message,
                _ => &mut r.resource_error_kind,
            };
            *slot = Some(String::new());
            assert_eq!(
                check(r.clone()),
                one(
                    INVALID,
                    &alloc::format!("`resource.{field}` must be non-empty when set")
                )
            );
            // Non-empty is literal: a single space passes.
            let slot = match field {
                "reason" => &mut r.reason,
                "error_kind" => &mut r.error_kind,
                "message" => &mut r.message,
                _ => &mut r.resource_error_kind,
            };
            *slot = Some(" ".into());
            assert!(check(r).is_empty(), "{field}");
        }
        for action in [
            ResourceAction::Reserve,
            ResourceAction::Commit,
            ResourceAction::Release,
            ResourceAction::Rollback,
        ] {
            let mut r = ResourceTraceEvent::new("request", "r1", "kv_blocks", action);
            assert_eq!(
                check(r.clone()),
                vec![
                    (
                        MISSING,
                        alloc::format!(
                            "`resource.after` is missing (required when `resource.action` is `{action}`)"
                        )
                    ),
                    (
                        MISSING,
                        alloc::format!(
                            "`resource.amount` is missing (required when `resource.action` is `{action}`)"
                        )
                    ),
                    (
                        MISSING,
                        alloc::format!(
                            "`resource.before` is missing (required when `resource.action` is `{action}`)"
                        )
                    ),
                ]
            );
            r.amount = Some(-2);
            r.before = Some(2);
            r.after = Some(0);
            assert!(check(r).is_empty(), "{action}");
        }
        for action in [ResourceAction::Defer, ResourceAction::Reject] {
            let mut r = ResourceTraceEvent::new("request", "r1", "kv_blocks", action);
            assert_eq!(
                check(r.clone()),
                one(
                    MISSING,
                    &alloc::format!(
                        "`resource.reason` is missing (required when `resource.action` is `{action}`)"
                    )
                )
            );
            for blank in ["", "  "] {
                r.reason = Some(blank.into());
                assert_eq!(
                    check(r.clone()),
                    one(
                        INVALID,
                        &alloc::format!(
                            "`resource.reason` must be non-blank when `resource.action` is `{action}`"
                        )
                    )
                );
            }
            r.reason = Some("pool full".into());
            assert!(check(r).is_empty());
        }
        let mut snap =
            ResourceTraceEvent::new("pool", "p", "kv_blocks", ResourceAction::CapacitySnapshot);
        assert_eq!(
            check(snap.clone()),
            one(
                MISSING,
                "`resource.capacity` is missing (required when `resource.action` is `capacity_snapshot`)"
            )
        );
        snap.capacity = Some(0);
        assert!(check(snap).is_empty());
    }

    #[test]
    fn an_error_alone_breaks_what_it_breaks_in_an_event() {
        assert!(validate_error(&ProfileError::new("oom", "out of memory")).is_empty());
        let e = ProfileError {
            kind: None,
            message: Some(" ".into()),
            blocking: false,
        };
        assert_eq!(
            validate_error(&e),
            [
                "`error.kind` is missing",
                "`error.message` must be non-blank"
            ]
        );
    }

    #[test]
    fn error_and_replay_rules() {
        let mut e = good();
        e.error = Some(ProfileError {
            kind: None,
            message: Some(" ".into()),
            blocking: true,
        });
        assert_eq!(
            broken(&e),
            vec![
                (MISSING, "`error.kind` is missing".to_string()),
                (INVALID, "`error.message` must be non-blank".to_string()),
            ]
        );
        let mut e = good();
        e.replay = Some(Replay {
            command: Some("".into()),
            bundle_dir: Some("/tmp/b".into()),
        });
        assert_eq!(
            broken(&e),
            one(INVALID, "`replay.command` must be non-blank")
        );
        e.replay = Some(Replay::default());
        assert_eq!(broken(&e), one(MISSING, "`replay.command` is missing"));
    }
}
