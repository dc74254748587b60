//! Every request of an inference profile on one wall-clock axis, beside the batched forwards
//! that served them: what the viewer draws as one lane per request (grouped by worker thread)
//! under a lane of forwards per engine, so that concurrency, queueing and contention show.
//!
//! Rules where SCHEMA.md is silent:
//! - Time 0 is the earliest of every request's open and every forward's start; times are ns
//!   after it. A request opens at its `request_open` event's `ts_unix_nanos`, else at
//!   `attributes.engine_token_wall_anchor_unix_nanos` of its timing event, else at the earliest
//!   `ts_unix_nanos` of its events; it closes at the end of its `request` timed span
//!   (`ts_unix_nanos` + `duration_us` × 1000), if it has one.
//! - Its forwards: its own `prefill` and `decode` timed spans (a request served alone), and the
//!   batched forwards ([`crate::analysis::iterations`]) whose `requests` list it: a prefill
//!   where its `prefill_tokens` > 0, else a decode where its `decode_tokens` > 0. Queueing runs
//!   from its open to the start of its first forward, when that is later.
//! - Token commits: `engine_token_commit_nanos_since_request_start` after the anchor of its
//!   timing event (see [`requests`](crate::analysis::requests)).
//! - Worker thread: `attributes.thread` of its first `prefill` event, else of the first batched
//!   forward that lists it, else of its `request_open`. Groups are in order of their first
//!   request; requests without a thread are in a last group of their own. Within a group,
//!   requests are ordered by open, then by the line of their first event.
//! - An engine's events are its own lane, not a request's ([`engine_of`]).

use crate::analysis::sort;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use hashbrown::HashMap;
use serde::Serialize;
use serde_json::Value;

use crate::analysis::iterations::Iteration;
use crate::format::profile::{attribute, engine_of, EventKind, ProfileDocument};

/// A span of time on the axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Interval {
    /// Start, ns after time 0.
    pub start_ns: u64,
    /// End, ns after time 0.
    pub end_ns: u64,
}

/// A batched forward on its engine's lane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ForwardSlot {
    /// Its number within the engine.
    pub iteration: u64,
    /// When it ran.
    pub at: Interval,
    /// Requests in it.
    pub batch_size: u64,
    /// Prompt tokens it ran.
    pub prefill_tokens: u64,
    /// Decode tokens it ran.
    pub decode_tokens: u64,
    /// Line of its event.
    pub line: u64,
}

/// One engine's forwards.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EngineLane {
    /// The engine.
    pub engine: String,
    /// Its forwards by start.
    pub forwards: Vec<ForwardSlot>,
}

/// A batched forward a request took part in: its engine's lane and the forward's place in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ForwardRef {
    /// Index into [`RequestAxis::engines`].
    pub engine: usize,
    /// Index into that lane's `forwards`.
    pub forward: usize,
}

/// One request on the axis.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequestLane {
    /// The request.
    pub request_id: String,
    /// Its worker thread, where known.
    pub thread: Option<String>,
    /// When it opened.
    pub open_ns: u64,
    /// When it closed.
    pub close_ns: Option<u64>,
    /// From its open to its first forward.
    pub queue: Option<Interval>,
    /// The forwards that ran its prompt.
    pub prefill: Vec<Interval>,
    /// The forwards that ran its decode tokens.
    pub decode: Vec<Interval>,
    /// Its token commits.
    pub commits_ns: Vec<u64>,
    /// The batched forwards it took part in.
    pub forwards: Vec<ForwardRef>,
    /// Line of its first event.
    pub line: u64,
}

/// The requests of one worker thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadGroup {
    /// The thread (`None`: not known).
    pub thread: Option<String>,
    /// Its requests.
    pub requests: Vec<RequestLane>,
}

/// Every request and engine on one axis.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RequestAxis {
    /// Unix ns of time 0 (`None` when nothing is placed).
    pub origin_unix_nanos: Option<i64>,
    /// The largest time of anything placed.
    pub extent_ns: u64,
    /// One lane per engine, in order of first forward.
    pub engines: Vec<EngineLane>,
    /// Requests by worker thread.
    pub groups: Vec<ThreadGroup>,
}

/// What is gathered of one request before it is placed (times in Unix ns).
#[derive(Default)]
struct Gathered {
    line: u64,
    open: Option<i64>,
    anchor: Option<i64>,
    earliest: Option<i64>,
    close: Option<i64>,
    prefill: Vec<(i64, i64)>,
    decode: Vec<(i64, i64)>,
    commits: Vec<u64>,
    /// (thread of its prefill event, of its request_open).
    prefill_thread: Option<String>,
    open_thread: Option<String>,
    /// (iteration index, is prefill).
    iterations: Vec<(usize, bool)>,
}

fn span_end(ts: i64, us: u64) -> i64 {
    ts.saturating_add(i64::try_from(us.saturating_mul(1000)).unwrap_or(i64::MAX))
}

fn thread_of(a: &crate::format::profile::JsonMap) -> Option<String> {
    a.get(attribute::THREAD)
        .and_then(Value::as_str)
        .map(str::to_string)
}

impl ProfileDocument {
    /// Every request on one wall-clock axis (see the module docs).
    pub fn request_axis(&self) -> RequestAxis {
        let iterations = self.iterations().iterations;
        let mut order: Vec<String> = Vec::new();
        let mut gathered: HashMap<String, Gathered> = HashMap::new();
        for r in &self.records {
            if engine_of(r).is_some() || crate::format::profile::is_module_event(r) {
                continue;
            }
            let e = &r.event;
            let id = e.request_id.as_deref().unwrap_or("");
            let g = gathered.entry(id.to_string()).or_insert_with(|| {
                order.push(id.to_string());
                Gathered {
                    line: r.line,
                    ..Gathered::default()
                }
            });
            let ts = e.ts_unix_nanos;
            if let Some(ts) = ts {
                g.earliest = Some(g.earliest.map_or(ts, |t| t.min(ts)));
            }
            let timed = e.event_kind() == Some(EventKind::TimedSpan);
            match (e.phase.as_deref(), ts, e.duration_us) {
                (Some("request_open"), Some(ts), _) if g.open.is_none() => {
                    g.open = Some(ts);
                    g.open_thread = thread_of(&e.attributes);
                }
                (Some("request"), Some(ts), Some(us)) if timed && g.close.is_none() => {
                    g.close = Some(span_end(ts, us));
                }
                (Some("prefill"), Some(ts), Some(us)) if timed => {
                    g.prefill.push((ts, span_end(ts, us)));
                    if g.prefill_thread.is_none() {
                        g.prefill_thread = thread_of(&e.attributes);
                    }
                }
                (Some("decode"), Some(ts), Some(us)) if timed => {
                    g.decode.push((ts, span_end(ts, us)));
                }
                _ => {}
            }
            let a = &e.attributes;
            if g.anchor.is_none() && a.get(attribute::TTFT_US).and_then(Value::as_u64).is_some() {
                g.anchor = a
                    .get(attribute::ENGINE_TOKEN_WALL_ANCHOR_UNIX_NANOS)
                    .and_then(Value::as_i64);
                g.commits = a
                    .get(attribute::ENGINE_TOKEN_COMMIT_NANOS_SINCE_REQUEST_START)
                    .and_then(Value::as_array)
                    .map(|c| c.iter().filter_map(Value::as_u64).collect())
                    .unwrap_or_default();
            }
        }
        for (i, it) in iterations.iter().enumerate() {
            let end = it
                .start_unix_nanos
                .saturating_add(i64::try_from(it.duration_ns).unwrap_or(i64::MAX));
            for part in &it.requests {
                let Some(g) = gathered.get_mut(part.request_id.as_str()) else {
                    continue;
                };
                if part.prefill_tokens > 0 {
                    g.prefill.push((it.start_unix_nanos, end));
                    g.iterations.push((i, true));
                } else if part.decode_tokens > 0 {
                    g.decode.push((it.start_unix_nanos, end));
                    g.iterations.push((i, false));
                } else {
                    g.iterations.push((i, false));
                }
            }
        }
        place(&iterations, &order, &gathered)
    }
}

fn place(
    iterations: &[Iteration],
    order: &[String],
    gathered: &HashMap<String, Gathered>,
) -> RequestAxis {
    let open_of = |g: &Gathered| g.open.or(g.anchor).or(g.earliest);
    let origin = order
        .iter()
        .filter_map(|id| gathered.get(id.as_str()).and_then(open_of))
        .chain(iterations.iter().map(|i| i.start_unix_nanos))
        .min();
    let Some(origin) = origin else {
        return RequestAxis::default();
    };
    let at = |t: i64| u64::try_from(t.saturating_sub(origin)).unwrap_or(0);
    let interval = |(s, e): (i64, i64)| Interval {
        start_ns: at(s),
        end_ns: at(e.max(s)),
    };
    let mut axis = RequestAxis {
        origin_unix_nanos: Some(origin),
        ..RequestAxis::default()
    };
    // Engine lanes, in order of first forward (iterations are in time order).
    let mut lane_of: HashMap<&str, usize> = HashMap::new();
    let mut slot_of: Vec<ForwardRef> = Vec::with_capacity(iterations.len());
    for it in iterations {
        let e = *lane_of.entry(it.engine.as_str()).or_insert_with(|| {
            axis.engines.push(EngineLane {
                engine: it.engine.clone(),
                forwards: Vec::new(),
            });
            axis.engines.len() - 1
        });
        let end = it
            .start_unix_nanos
            .saturating_add(i64::try_from(it.duration_ns).unwrap_or(i64::MAX));
        let lane = &mut axis.engines[e].forwards;
        lane.push(ForwardSlot {
            iteration: it.iteration,
            at: interval((it.start_unix_nanos, end)),
            batch_size: it.batch_size,
            prefill_tokens: it.prefill_tokens,
            decode_tokens: it.decode_tokens,
            line: it.line,
        });
        slot_of.push(ForwardRef {
            engine: e,
            forward: lane.len() - 1,
        });
    }
    let mut lanes: Vec<RequestLane> = Vec::new();
    for id in order {
        let Some(g) = gathered.get(id.as_str()) else {
            continue;
        };
        let Some(open) = open_of(g) else { continue };
        let mut prefill: Vec<Interval> = g.prefill.iter().map(|&p| interval(p)).collect();
        let mut decode: Vec<Interval> = g.decode.iter().map(|&d| interval(d)).collect();
        sort::by_key(&mut prefill, |i| (i.start_ns, i.end_ns));
        sort::by_key(&mut decode, |i| (i.start_ns, i.end_ns));
        let first = prefill.iter().chain(&decode).map(|i| i.start_ns).min();
        let open_ns = at(open);
        let thread = g
            .prefill_thread
            .clone()
            .or_else(|| {
                g.iterations
                    .iter()
                    .find_map(|&(i, _)| iterations.get(i).and_then(|it| it.thread.clone()))
            })
            .or_else(|| g.open_thread.clone());
        let anchor = g.anchor.unwrap_or(open);
        lanes.push(RequestLane {
            request_id: id.clone(),
            thread,
            open_ns,
            close_ns: g.close.map(at),
            queue: first.filter(|&f| f > open_ns).map(|f| Interval {
                start_ns: open_ns,
                end_ns: f,
            }),
            prefill,
            decode,
            commits_ns: g
                .commits
                .iter()
                .map(|&c| at(anchor.saturating_add(i64::try_from(c).unwrap_or(i64::MAX))))
                .collect(),
            forwards: g
                .iterations
                .iter()
                .filter_map(|&(i, _)| slot_of.get(i).copied())
                .collect(),
            line: g.line,
        });
    }
    sort::by_key(&mut lanes, |l| (l.open_ns, l.line));
    let mut group_of: HashMap<Option<String>, usize> = HashMap::new();
    for lane in lanes {
        let key = lane.thread.clone();
        let g = *group_of.entry(key.clone()).or_insert_with(|| {
            axis.groups.push(ThreadGroup {
                thread: key,
                requests: Vec::new(),
            });
            axis.groups.len() - 1
        });
        axis.groups[g].requests.push(lane);
    }
    // Requests without a thread last.
    sort::by_key(&mut axis.groups, |g| g.thread.is_none());
    axis.extent_ns = axis
        .engines
        .iter()
        .flat_map(|e| e.forwards.iter().map(|f| f.at.end_ns))
        .chain(axis.groups.iter().flat_map(|g| {
            g.requests.iter().flat_map(|r| {
                r.close_ns
                    .into_iter()
                    .chain(r.prefill.iter().chain(&r.decode).map(|i| i.end_ns))
                    .chain(r.commits_ns.iter().copied())
                    .chain(core::iter::once(r.open_ns))
            })
        }))
        .max()
        .unwrap_or(0);
    axis
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::analysis::iterations::tests::iteration_line;
    use crate::format::profile::read_profile;
    use alloc::format;
    use alloc::vec;

    pub(crate) const T0: i64 = 1_767_225_600_000_000_000;

    /// A request's `request_open` at `open` (ns after T0) opened on `thread`, and its close
    /// (`request` span of `us` µs) with token commits `commits` (ns after its open).
    pub(crate) fn request(id: &str, open: i64, thread: &str, us: u64, commits: &[u64]) -> String {
        let head = |kind: &str, phase: &str, ts: i64| {
            format!(
                concat!(
                    r#"{{"schema_version":1,"event_kind":"{kind}","ts_unix_nanos":{ts},"#,
                    r#""timestamp":"2026-01-01T00:00:00Z","event_id":"{id}-{phase}","request_id":"{id}","#,
                    r#""correlation_id":"c","entrypoint":"serve","backend":"cpu","runtime_preset_hash":"h","#,
                    r#""phase":"{phase}","status":"ok","shape":{{"prompt_tokens":4}},"#
                ),
                kind = kind,
                ts = ts,
                id = id,
                phase = phase,
            )
        };
        let list: Vec<String> = commits.iter().map(|c| c.to_string()).collect();
        format!(
            "{}\"attributes\":{{\"thread\":\"{thread}\"}}}}\n{}\"duration_us\":{us},\"attributes\":{{\"ttft_us\":{ttft},\"engine_token_wall_anchor_unix_nanos\":{anchor},\"engine_token_commit_nanos_since_request_start\":[{list}]}}}}\n",
            head("instant", "request_open", T0 + open),
            head("timed_span", "request", T0 + open),
            ttft = commits[0] / 1000,
            anchor = T0 + open,
            list = list.join(","),
        )
    }

    #[test]
    fn three_overlapping_requests_on_one_axis() {
        // a opens at 0, b at 1 ms, c at 1.5 ms (all on the engine's thread). Forward 0
        // (2–3 ms) prefills a and b; forward 1 (3–4 ms) decodes a and b and prefills c;
        // forward 2 (4–4.5 ms) decodes c.
        let (ms, ums): (i64, u64) = (1_000_000, 1_000_000);
        let text = [
            request("a", 0, "main", 4000, &[3 * ums, 4 * ums]),
            request("b", ms, "main", 3000, &[2 * ums, 3 * ums]),
            request("c", 3 * ms / 2, "main", 3000, &[5 * ums / 2, 3 * ums]),
            iteration_line("e", 0, T0 + 2 * ms, ums, &[("a", 4, 0, 1), ("b", 4, 0, 1)]),
            iteration_line(
                "e",
                1,
                T0 + 3 * ms,
                ums,
                &[("a", 0, 1, 1), ("b", 0, 1, 1), ("c", 4, 0, 1)],
            ),
            iteration_line("e", 2, T0 + 4 * ms, ums / 2, &[("c", 0, 1, 1)]),
        ]
        .concat();
        let doc = read_profile(text.as_bytes());
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        let axis = doc.request_axis();
        assert_eq!(axis.origin_unix_nanos, Some(T0));
        let ms = ums;
        assert_eq!(axis.engines.len(), 1);
        let slots: Vec<(u64, u64, u64)> = axis.engines[0]
            .forwards
            .iter()
            .map(|f| (f.at.start_ns, f.at.end_ns, f.batch_size))
            .collect();
        assert_eq!(
            slots,
            [
                (2 * ms, 3 * ms, 2),
                (3 * ms, 4 * ms, 3),
                (4 * ms, 9 * ms / 2, 1)
            ]
        );
        // The engine's thread (`engine-thread` in the iteration lines) groups them: each
        // request's first forward says it, before its open's `main`.
        assert_eq!(axis.groups.len(), 1);
        assert_eq!(axis.groups[0].thread.as_deref(), Some("engine-thread"));
        let lanes = &axis.groups[0].requests;
        let ids: Vec<&str> = lanes.iter().map(|l| l.request_id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        let iv = |s: u64, e: u64| Interval {
            start_ns: s,
            end_ns: e,
        };
        // a: open 0, queued until forward 0 at 2 ms, prefill 2–3, decode 3–4, closes at 4.
        assert_eq!(lanes[0].open_ns, 0);
        assert_eq!(lanes[0].queue, Some(iv(0, 2 * ms)));
        assert_eq!(lanes[0].prefill, [iv(2 * ms, 3 * ms)]);
        assert_eq!(lanes[0].decode, [iv(3 * ms, 4 * ms)]);
        assert_eq!(lanes[0].close_ns, Some(4 * ms));
        assert_eq!(lanes[0].commits_ns, [3 * ms, 4 * ms]);
        // b: open 1 ms, queued 1–2 ms; commits 2 and 3 ms after its open: at 3 and 4 ms.
        assert_eq!(lanes[1].queue, Some(iv(ms, 2 * ms)));
        assert_eq!(lanes[1].commits_ns, [3 * ms, 4 * ms]);
        assert_eq!(lanes[1].close_ns, Some(4 * ms));
        // c: open 1.5 ms, queued until forward 1 at 3 ms, decode in forward 2.
        assert_eq!(lanes[2].queue, Some(iv(3 * ms / 2, 3 * ms)));
        assert_eq!(lanes[2].prefill, [iv(3 * ms, 4 * ms)]);
        assert_eq!(lanes[2].decode, [iv(4 * ms, 9 * ms / 2)]);
        assert_eq!(
            lanes[2].forwards,
            [
                ForwardRef {
                    engine: 0,
                    forward: 1
                },
                ForwardRef {
                    engine: 0,
                    forward: 2
                }
            ]
        );
        assert_eq!(axis.extent_ns, 9 * ms / 2);
    }

    #[test]
    fn requests_served_alone_are_grouped_by_their_thread() {
        let (ms, ums): (i64, u64) = (1_000_000, 1_000_000);
        let prefill = |id: &str, at: i64, thread: &str| {
            format!(
                concat!(
                    r#"{{"schema_version":1,"event_kind":"timed_span","ts_unix_nanos":{ts},"#,
                    r#""timestamp":"2026-01-01T00:00:00Z","event_id":"{id}-p","request_id":"{id}","#,
                    r#""correlation_id":"c","entrypoint":"serve","backend":"cpu","runtime_preset_hash":"h","#,
                    r#""phase":"prefill","status":"ok","duration_us":500,"shape":{{"prompt_tokens":4}},"#,
                    r#""attributes":{{"thread":"{thread}"}}}}"#,
                    "\n"
                ),
                ts = T0 + at,
                id = id,
                thread = thread,
            )
        };
        let text = [
            request("x", 0, "w1", 2000, &[ums]),
            prefill("x", ms / 2, "w1"),
            request("y", ms / 4, "w2", 2000, &[ums]),
            prefill("y", ms / 4, "w2"),
            request("z", ms, "w1", 1000, &[ums]),
        ]
        .concat();
        let doc = read_profile(text.as_bytes());
        let axis = doc.request_axis();
        let groups: Vec<(Option<&str>, Vec<&str>)> = axis
            .groups
            .iter()
            .map(|g| {
                (
                    g.thread.as_deref(),
                    g.requests.iter().map(|r| r.request_id.as_str()).collect(),
                )
            })
            .collect();
        // z has no prefill event: its open's thread.
        assert_eq!(
            groups,
            vec![(Some("w1"), vec!["x", "z"]), (Some("w2"), vec!["y"])]
        );
        let x = &axis.groups[0].requests[0];
        assert_eq!(
            x.queue,
            Some(Interval {
                start_ns: 0,
                end_ns: ums / 2
            })
        );
        // y's prefill starts at its open: no queueing.
        assert_eq!(axis.groups[1].requests[0].queue, None);
        assert!(axis.engines.is_empty());
    }
}
