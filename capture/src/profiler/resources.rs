//! [`ResourcePool`]: a scheduler's accounting of a resource it hands out to requests (KV-cache
//! blocks, batch slots, tokens), one `resource` event per call.
//!
//! The pool keeps the level (units held by all requests, sampled or not), so each event says
//! `before` and `after` it and the `capacity`; the scheduler decides, the pool records. Events
//! belong to the request they concern (`owner_kind` `request`, `owner_id` its id, phase
//! `schedule`); a request that is not sampled moves the level but writes nothing. Creating the
//! pool writes a `capacity_snapshot` owned by the engine. Detail `resource` and above. Readers
//! take a resource kind's events as one pool's: engines with a cache each name their kinds
//! apart (`kv_blocks:engine-0`).
//!
//! | call | action | `amount` | `before` → `after` |
//! | --- | --- | --- | --- |
//! | [`reserve`](ResourcePool::reserve) | `reserve` | units | level → level + units |
//! | [`commit`](ResourcePool::commit) | `commit` | units | level → level (a reservation put to use) |
//! | [`release`](ResourcePool::release), [`rollback`](ResourcePool::rollback) | `release`, `rollback` | units | level → level − units, at least 0; past 0, `underflow_amount` says by how much |
//! | [`defer`](ResourcePool::defer), [`reject`](ResourcePool::reject) | `defer`, `reject` (with `reason`) | units asked for | level → level |

use std::sync::{Arc, Mutex};
use std::time::Instant;

use candle_trace_schema::format::profile::{
    DetailLevel, EventKind, ResourceAction, ResourceTraceEvent,
};

use super::lines::Owner;
use super::{lock, ProfilerInner, RequestHandle};

/// The phase of a pool's events on a request.
const PHASE: &str = "schedule";

/// A resource a scheduler hands out; made by [`Engine::resource_pool`](super::Engine::resource_pool).
/// Each of [`reserve`](Self::reserve), [`commit`](Self::commit), [`release`](Self::release),
/// [`rollback`](Self::rollback), [`defer`](Self::defer) and [`reject`](Self::reject) writes one
/// `resource` event on the request it concerns (phase `schedule`; nothing for a request that is
/// not sampled); making the pool writes a `capacity_snapshot` owned by the engine. Detail
/// `resource` and above.
pub struct ResourcePool {
    /// The profiler and the engine's own owner (its id and clock); `None` when inert.
    engine: Option<(Arc<ProfilerInner>, Arc<Owner>)>,
    resource_kind: String,
    capacity: u64,
    level: Mutex<u64>,
}

impl std::fmt::Debug for ResourcePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourcePool")
            .field("engine", &self.engine.as_ref().map(|(_, o)| &o.request_id))
            .field("resource_kind", &self.resource_kind)
            .field("capacity", &self.capacity)
            .field("level", &*lock(&self.level))
            .finish()
    }
}

fn signed(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl ResourcePool {
    pub(super) fn new(
        engine: Option<(Arc<ProfilerInner>, Arc<Owner>)>,
        resource_kind: String,
        capacity: u64,
    ) -> ResourcePool {
        let pool = ResourcePool {
            engine,
            resource_kind,
            capacity,
            level: Mutex::new(0),
        };
        if let Some((p, owner)) = pool.recording() {
            let mut r = ResourceTraceEvent::new(
                "engine",
                &*owner.request_id,
                pool.resource_kind.as_str(),
                ResourceAction::CapacitySnapshot,
            );
            r.capacity = Some(signed(capacity));
            r.after = Some(0);
            let mut event = p.engine_event(
                owner,
                EventKind::Resource,
                PHASE,
                p.head.ok,
                Instant::now(),
                [],
            );
            event.resource = Some(Box::new(r));
            p.send(event);
        }
        pool
    }

    fn recording(&self) -> Option<(&Arc<ProfilerInner>, &Arc<Owner>)> {
        self.engine
            .as_ref()
            .filter(|(p, _)| !p.is_finished() && p.detail >= DetailLevel::Resource)
            .map(|(p, o)| (p, o))
    }

    /// The units the pool can hand out.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The units held now.
    pub fn level(&self) -> u64 {
        *lock(&self.level)
    }

    /// The units free now (capacity − level, at least 0).
    pub fn available(&self) -> u64 {
        self.capacity.saturating_sub(self.level())
    }

    /// Move the level by `change` and record `action` for `request` (under the level's lock,
    /// so the events' order is the level's).
    fn step(
        &self,
        request: &RequestHandle,
        action: ResourceAction,
        amount: u64,
        change: impl FnOnce(u64) -> (u64, Option<u64>),
        reason: Option<&str>,
    ) {
        let mut level = lock(&self.level);
        let before = *level;
        let (after, underflow) = change(before);
        *level = after;
        if self.recording().is_none() {
            return;
        }
        let kind = self.resource_kind.as_str();
        let capacity = self.capacity;
        request.resource_with(String::from(PHASE), |id| {
            let mut r = ResourceTraceEvent::new("request", id, kind, action);
            r.amount = Some(signed(amount));
            r.before = Some(signed(before));
            r.after = Some(signed(after));
            r.capacity = Some(signed(capacity));
            r.underflow_amount = underflow.filter(|&u| u > 0).map(signed);
            r.reason = reason.map(String::from);
            r
        });
        drop(level);
    }

    /// `request` was given `amount` units.
    pub fn reserve(&self, request: &RequestHandle, amount: u64) {
        self.step(
            request,
            ResourceAction::Reserve,
            amount,
            |l| (l.saturating_add(amount), None),
            None,
        );
    }

    /// `request` put `amount` of its reserved units to use (the level does not change).
    pub fn commit(&self, request: &RequestHandle, amount: u64) {
        self.step(request, ResourceAction::Commit, amount, |l| (l, None), None);
    }

    /// `request` gave back `amount` units.
    pub fn release(&self, request: &RequestHandle, amount: u64) {
        self.step(request, ResourceAction::Release, amount, down(amount), None);
    }

    /// A reservation of `amount` units for `request` was undone.
    pub fn rollback(&self, request: &RequestHandle, amount: u64) {
        self.step(
            request,
            ResourceAction::Rollback,
            amount,
            down(amount),
            None,
        );
    }

    /// `request` asked for `amount` units and must wait, because `reason` (non-blank).
    pub fn defer(&self, request: &RequestHandle, amount: u64, reason: &str) {
        self.step(
            request,
            ResourceAction::Defer,
            amount,
            |l| (l, None),
            Some(reason),
        );
    }

    /// `request` asked for `amount` units and was refused, because `reason` (non-blank).
    pub fn reject(&self, request: &RequestHandle, amount: u64, reason: &str) {
        self.step(
            request,
            ResourceAction::Reject,
            amount,
            |l| (l, None),
            Some(reason),
        );
    }
}

/// The level after giving back `amount`, and how far it would have gone below 0.
fn down(amount: u64) -> impl FnOnce(u64) -> (u64, Option<u64>) {
    move |level| (level.saturating_sub(amount), amount.checked_sub(level))
}
