//! Resources an inference profile accounts for (`resource` objects, SCHEMA.md §2): per
//! resource kind, occupancy over time against capacity, what each holder reserved, committed
//! and released, the deferrals and rejections with their reasons, and the accounting errors
//! (an underflow, a reservation never released).
//!
//! Rules where SCHEMA.md is silent:
//! - An event counts when its `resource` has a non-blank `resource_kind` and a known `action`
//!   (others are counted in [`Resources::unreadable`]). Events are taken in time order: by
//!   `ts_unix_nanos` (events without one after all the others), then by line.
//! - The holder is `resource.owner_id` when non-blank, else the event's `request_id`. Events
//!   of owner kind `engine` (a scheduler's capacity snapshot) and `request_open` /
//!   `request_close` / `capacity_snapshot` actions hold nothing.
//! - Occupancy: every event with an `after` is a point (its time, `after`): the level the
//!   writer states. Its capacity is the last `capacity` stated at or before it (by any event
//!   of the kind). The peak is the first point with the largest level.
//! - Holdings per holder: `reserve` adds `amount`, `release` and `rollback` take it off,
//!   `commit` counts `amount` as committed and leaves the holding; `defer` and `reject` count
//!   one each (and their `reason`). A missing `amount` counts 0.
//! - Underflows: an event with `underflow_amount` (that amount), an `after` below 0 (by
//!   how much), and a `release` or `rollback` of more than its holder holds (the excess; the
//!   holding stops at 0). One event with several of these is listed once per kind of error.
//! - Leaks: a holder that holds more than 0 once every event is read (reserved, never
//!   released).

use crate::analysis::sort;
use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use serde::Serialize;

use crate::format::profile::{ProfileDocument, ResourceAction};

/// One point of a resource kind's occupancy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OccupancyPoint {
    /// The event's `ts_unix_nanos`.
    pub at_unix_nanos: Option<i64>,
    /// The level after the event (`after`).
    pub level: i64,
    /// The capacity stated at or before it.
    pub capacity: Option<i64>,
    /// The event's action.
    pub action: ResourceAction,
    /// Its holder (empty for the engine's own events).
    pub holder: String,
    /// Line of the event.
    pub line: u64,
}

/// What one holder did with a resource kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Holder {
    /// The holder (a request id).
    pub holder: String,
    /// Sum of its `reserve` amounts.
    pub reserved: i64,
    /// Sum of its `commit` amounts.
    pub committed: i64,
    /// Sum of its `release` amounts.
    pub released: i64,
    /// Sum of its `rollback` amounts.
    pub rolled_back: i64,
    /// What it holds once every event is read.
    pub held: i64,
    /// Its `defer` events.
    pub deferrals: u64,
    /// Its `reject` events.
    pub rejections: u64,
}

/// How often one reason was given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReasonCount {
    /// `defer` or `reject`.
    pub action: ResourceAction,
    /// The `reason` (empty when absent).
    pub reason: String,
    /// Events with it.
    pub count: u64,
}

/// An accounting error: the level or a holding went below 0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Underflow {
    /// Line of the event.
    pub line: u64,
    /// Its holder.
    pub holder: String,
    /// By how much.
    pub amount: i64,
    /// `underflow_amount` (the writer says so), `negative_level` (`after` < 0) or
    /// `release_exceeds_holding`.
    pub kind: String,
}

/// A holder that still holds some of the resource at the end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Leak {
    /// The holder.
    pub holder: String,
    /// What it still holds.
    pub held: i64,
}

/// One resource kind's accounting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceUsage {
    /// `resource_kind`.
    pub resource_kind: String,
    /// The last `capacity` stated.
    pub capacity: Option<i64>,
    /// The stated levels in time order.
    pub occupancy: Vec<OccupancyPoint>,
    /// The first point with the largest level.
    pub peak: Option<OccupancyPoint>,
    /// Holders in order of first appearance.
    pub holders: Vec<Holder>,
    /// `defer` events.
    pub deferrals: u64,
    /// `reject` events.
    pub rejections: u64,
    /// Per action and reason, in order of first appearance.
    pub reasons: Vec<ReasonCount>,
    /// In time order.
    pub underflows: Vec<Underflow>,
    /// In holder order.
    pub leaks: Vec<Leak>,
}

/// Every resource kind of a profile.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Resources {
    /// In order of first appearance.
    pub kinds: Vec<ResourceUsage>,
    /// `resource` objects without a kind or a known action.
    pub unreadable: u64,
}

impl ResourceUsage {
    fn new(kind: &str) -> ResourceUsage {
        ResourceUsage {
            resource_kind: kind.to_string(),
            capacity: None,
            occupancy: Vec::new(),
            peak: None,
            holders: Vec::new(),
            deferrals: 0,
            rejections: 0,
            reasons: Vec::new(),
            underflows: Vec::new(),
            leaks: Vec::new(),
        }
    }
}

impl ProfileDocument {
    /// Every resource kind's accounting (see the module docs).
    pub fn resources(&self) -> Resources {
        let mut out = Resources::default();
        // (time, line, record index) of each readable resource event.
        let mut order: Vec<(i64, u64, usize)> = Vec::new();
        for (i, r) in self.records.iter().enumerate() {
            let Some(res) = &r.event.resource else {
                continue;
            };
            let kind_ok = res
                .resource_kind
                .as_deref()
                .is_some_and(|k| !k.trim().is_empty());
            if !kind_ok || res.action().is_none() {
                out.unreadable += 1;
                continue;
            }
            order.push((r.event.ts_unix_nanos.unwrap_or(i64::MAX), r.line, i));
        }
        sort::by(&mut order, Ord::cmp);
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        let mut holders: BTreeMap<(usize, String), usize> = BTreeMap::new();
        let mut reasons: BTreeMap<(usize, ResourceAction, String), usize> = BTreeMap::new();
        for &(_, line, i) in &order {
            let e = &self.records[i].event;
            let Some(res) = &e.resource else { continue };
            let (Some(kind), Some(action)) = (res.resource_kind.as_deref(), res.action()) else {
                continue;
            };
            let k = *kinds.entry(kind.to_string()).or_insert_with(|| {
                out.kinds.push(ResourceUsage::new(kind));
                out.kinds.len() - 1
            });
            let usage = &mut out.kinds[k];
            if let Some(capacity) = res.capacity {
                usage.capacity = Some(capacity);
            }
            let engine = res.owner_kind.as_deref() == Some("engine");
            let holder = if engine {
                String::new()
            } else {
                res.owner_id
                    .as_deref()
                    .filter(|o| !o.trim().is_empty())
                    .or(e.request_id.as_deref())
                    .unwrap_or("")
                    .to_string()
            };
            let amount = res.amount.unwrap_or(0);
            let mut underflow = |kind: &str, amount: i64| {
                usage.underflows.push(Underflow {
                    line,
                    holder: holder.clone(),
                    amount,
                    kind: kind.to_string(),
                });
            };
            if let Some(u) = res.underflow_amount {
                underflow("underflow_amount", u);
            }
            if let Some(after) = res.after.filter(|&a| a < 0) {
                underflow("negative_level", after.saturating_neg());
            }
            let holds = !engine
                && !matches!(
                    action,
                    ResourceAction::RequestOpen
                        | ResourceAction::RequestClose
                        | ResourceAction::CapacitySnapshot
                );
            if holds {
                let h = *holders.entry((k, holder.clone())).or_insert_with(|| {
                    usage.holders.push(Holder {
                        holder: holder.clone(),
                        ..Holder::default()
                    });
                    usage.holders.len() - 1
                });
                let mut excess = None;
                let held = &mut usage.holders[h];
                match action {
                    ResourceAction::Reserve => {
                        held.reserved = held.reserved.saturating_add(amount);
                        held.held = held.held.saturating_add(amount);
                    }
                    ResourceAction::Commit => {
                        held.committed = held.committed.saturating_add(amount)
                    }
                    ResourceAction::Release | ResourceAction::Rollback => {
                        if action == ResourceAction::Release {
                            held.released = held.released.saturating_add(amount);
                        } else {
                            held.rolled_back = held.rolled_back.saturating_add(amount);
                        }
                        if amount > held.held {
                            excess = Some(amount.saturating_sub(held.held.max(0)));
                            held.held = 0;
                        } else {
                            held.held -= amount;
                        }
                    }
                    ResourceAction::Defer => held.deferrals += 1,
                    ResourceAction::Reject => held.rejections += 1,
                    _ => {}
                }
                if let Some(excess) = excess {
                    usage.underflows.push(Underflow {
                        line,
                        holder: holder.clone(),
                        amount: excess,
                        kind: String::from("release_exceeds_holding"),
                    });
                }
            }
            if matches!(action, ResourceAction::Defer | ResourceAction::Reject) {
                if action == ResourceAction::Defer {
                    usage.deferrals += 1;
                } else {
                    usage.rejections += 1;
                }
                let reason = res.reason.clone().unwrap_or_default();
                let r = *reasons
                    .entry((k, action, reason.clone()))
                    .or_insert_with(|| {
                        usage.reasons.push(ReasonCount {
                            action,
                            reason,
                            count: 0,
                        });
                        usage.reasons.len() - 1
                    });
                usage.reasons[r].count += 1;
            }
            if let Some(level) = res.after {
                let point = OccupancyPoint {
                    at_unix_nanos: e.ts_unix_nanos,
                    level,
                    capacity: usage.capacity,
                    action,
                    holder,
                    line,
                };
                if usage.peak.as_ref().is_none_or(|p| level > p.level) {
                    usage.peak = Some(point.clone());
                }
                usage.occupancy.push(point);
            }
        }
        for usage in &mut out.kinds {
            usage.leaks = usage
                .holders
                .iter()
                .filter(|h| h.held > 0)
                .map(|h| Leak {
                    holder: h.holder.clone(),
                    held: h.held,
                })
                .collect();
        }
        out
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::format::profile::read_profile;
    use alloc::format;

    /// A resource event of `request` at `at` ns (`fields`: the `resource` object's JSON members
    /// after its owner and kind).
    pub(crate) fn resource_line(request: &str, at: i64, owner_kind: &str, fields: &str) -> String {
        format!(
            concat!(
                r#"{{"schema_version":1,"event_kind":"resource","ts_unix_nanos":{at},"#,
                r#""timestamp":"2026-01-01T00:00:00Z","event_id":"{request}-{at}","request_id":"{request}","#,
                r#""correlation_id":"c","entrypoint":"serve","backend":"cpu","runtime_preset_hash":"h","#,
                r#""phase":"schedule","status":"ok","shape":{{"prompt_tokens":4}},"#,
                r#""resource":{{"owner_kind":"{owner_kind}","owner_id":"{request}","resource_kind":"kv_blocks",{fields}}}}}"#,
                "\n"
            ),
            at = at,
            request = request,
            owner_kind = owner_kind,
            fields = fields,
        )
    }

    fn step(request: &str, at: i64, action: &str, amount: i64, before: i64, after: i64) -> String {
        resource_line(
            request,
            at,
            "request",
            &format!(
                r#""action":"{action}","amount":{amount},"before":{before},"after":{after},"capacity":10"#
            ),
        )
    }

    fn defer(request: &str, at: i64, level: i64, reason: &str) -> String {
        resource_line(
            request,
            at,
            "request",
            &format!(
                r#""action":"defer","amount":6,"before":{level},"after":{level},"capacity":10,"reason":"{reason}""#
            ),
        )
    }

    #[test]
    fn a_request_deferred_twice_then_admitted() {
        // Capacity 10. a holds 6; b asks for 6 twice (4 free), is admitted once a releases.
        let text = [
            resource_line(
                "engine",
                5,
                "engine",
                r#""action":"capacity_snapshot","capacity":10,"after":0"#,
            ),
            step("a", 10, "reserve", 6, 0, 6),
            defer("b", 20, 6, "kv_blocks: 6 needed, 4 free"),
            step("a", 25, "commit", 6, 6, 6),
            defer("b", 30, 6, "kv_blocks: 6 needed, 4 free"),
            step("a", 40, "release", 6, 6, 0),
            step("b", 50, "reserve", 6, 0, 6),
            step("b", 60, "release", 6, 6, 0),
        ]
        .concat();
        let doc = read_profile(text.as_bytes());
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        let r = doc.resources();
        assert_eq!(r.kinds.len(), 1);
        let kv = &r.kinds[0];
        assert_eq!(kv.capacity, Some(10));
        let levels: Vec<(Option<i64>, i64)> = kv
            .occupancy
            .iter()
            .map(|p| (p.at_unix_nanos, p.level))
            .collect();
        assert_eq!(
            levels,
            [
                (Some(5), 0),
                (Some(10), 6),
                (Some(20), 6),
                (Some(25), 6),
                (Some(30), 6),
                (Some(40), 0),
                (Some(50), 6),
                (Some(60), 0)
            ]
        );
        // The first point at the largest level: a's reserve.
        assert_eq!(kv.peak.as_ref().map(|p| (p.line, p.level)), Some((2, 6)));
        let holders: Vec<(&str, i64, i64, i64, i64, u64)> = kv
            .holders
            .iter()
            .map(|h| {
                (
                    h.holder.as_str(),
                    h.reserved,
                    h.committed,
                    h.released,
                    h.held,
                    h.deferrals,
                )
            })
            .collect();
        assert_eq!(holders, [("a", 6, 6, 6, 0, 0), ("b", 6, 0, 6, 0, 2)]);
        assert_eq!((kv.deferrals, kv.rejections), (2, 0));
        assert_eq!(
            kv.reasons,
            [ReasonCount {
                action: ResourceAction::Defer,
                reason: "kv_blocks: 6 needed, 4 free".into(),
                count: 2
            }]
        );
        assert!(kv.underflows.is_empty() && kv.leaks.is_empty());
    }

    #[test]
    fn an_underflow_and_a_reservation_never_released() {
        let text = [
            step("a", 10, "reserve", 3, 0, 3),
            step("b", 20, "reserve", 2, 3, 5),
            // a gives back 5 of its 3: 2 too many; the writer's level goes to 0 and says so.
            resource_line(
                "a",
                30,
                "request",
                r#""action":"release","amount":5,"before":5,"after":0,"underflow_amount":2"#,
            ),
            // A rollback that takes the level below 0.
            step("c", 40, "rollback", 1, 0, -1),
            // A rejection (it never holds anything).
            resource_line(
                "d",
                50,
                "request",
                r#""action":"reject","amount":20,"before":0,"after":0,"reason":"exceeds capacity""#,
            ),
        ]
        .concat();
        let doc = read_profile(text.as_bytes());
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        let r = doc.resources();
        let kv = &r.kinds[0];
        let underflows: Vec<(u64, &str, i64, &str)> = kv
            .underflows
            .iter()
            .map(|u| (u.line, u.holder.as_str(), u.amount, u.kind.as_str()))
            .collect();
        assert_eq!(
            underflows,
            [
                (3, "a", 2, "underflow_amount"),
                (3, "a", 2, "release_exceeds_holding"),
                (4, "c", 1, "negative_level"),
                (4, "c", 1, "release_exceeds_holding"),
            ]
        );
        // b reserved 2 and never released them.
        assert_eq!(
            kv.leaks,
            [Leak {
                holder: "b".into(),
                held: 2
            }]
        );
        assert_eq!(kv.rejections, 1);
        assert_eq!(kv.reasons[0].reason, "exceeds capacity");
        assert_eq!(kv.peak.as_ref().map(|p| p.level), Some(5));
        // The capacity of each point: the last one stated before it (10, then none changed it).
        assert_eq!(kv.occupancy[0].capacity, Some(10));
    }

    #[test]
    fn events_without_a_kind_or_a_known_action_are_counted_apart() {
        let text = [
            resource_line("a", 1, "request", r#""action":"grow","amount":1"#),
            resource_line(
                "a",
                2,
                "request",
                r#""action":"reserve","amount":1,"before":0,"after":1"#,
            )
            .replace(r#""resource_kind":"kv_blocks","#, r#""resource_kind":" ","#),
        ]
        .concat();
        let doc = read_profile(text.as_bytes());
        let r = doc.resources();
        assert_eq!((r.kinds.len(), r.unreadable), (0, 2));
    }
}
