//! Export to Chrome Trace Event JSON, the format Perfetto (ui.perfetto.dev) and
//! `chrome://tracing` open.
//!
//! [`trace_to_chrome`] writes a trace/6 document, [`profile_to_chrome`] an inference profile;
//! both return the file as a `String` (no I/O, no_std). The output is the object form, one event
//! per line: `{"traceEvents":[...],"displayTimeUnit":"ns","metadata":{"candle_trace":{...}}}`.
//!
//! # Trace/6
//! - Every span is an `X` event (pid 1): `ts`/`dur` in µs written with three decimals, so every
//!   ns survives (import reads them back exactly). `cat` is the span kind; `args` hold `id`,
//!   `parent_id`, `span_kind`, `step`, `module` (its module name, when it has one), `measured`
//!   (when true) and `unclosed` (an unclosed span is written with `dur` 0).
//! - Every `op` is an `X` event (`cat` `op`) nested inside its span, `args` with `span_kind` `op`,
//!   `span_id`, `shape`, `dtype`, `device`, `output_bytes`.
//! - Tracks: Chrome nests slices of one (pid, tid) by time, so a span (or op) goes on its
//!   parent's track only when it nests properly there: inside the parent's interval, with nothing
//!   partially overlapping it and no sibling enclosing it. Otherwise (concurrent spans on several
//!   threads, ops without timestamps ...) it starts the next track that has room: `spans`,
//!   `spans (overlap 1)`, ... named with `M` `thread_name`; the process is named after the meta's
//!   entrypoint with `M` `process_name`. A slice moved to another track is a root there, so
//!   importing the file back gives it no parent.
//! - Memory: a `C` counter `live bytes <device>` (`args.bytes`) after every memory event, from the
//!   memory profile's replay; `device_memory` checkpoints as `C` `device memory <device>`
//!   (`used_bytes`, `free_bytes`).
//! - `metadata.candle_trace`: `meta`, `summary`, `gradients`, `edges` and `tensor_count`.
//!   Import restores the meta from there.
//! - Events are written ordered by time (parents before children at equal times), so
//!   timestamps are monotonic per track.
//! - A document imported from Chrome JSON: its synthetic root `(trace)` is not written (importing
//!   the file again recreates it, so parent paths survive even for spans moved to overflow
//!   tracks); its instants go on one extra track `instants`, its counter samples are `C` events
//!   again (one per sample, `args` holding the series).
//!
//! # Inference profile
//! Times are ns after the earliest `ts_unix_nanos`. One track per request (`thread_name` = the
//! request id, in order of first appearance; overflow tracks as above); `timed_span` events are
//! `X` slices named after their `phase`, starting at `ts_unix_nanos` (the capture library writes
//! a span's start there) and lasting `duration_us`; every other event is an instant
//! (`i`, scope `t`) named `<event_kind>: <phase>`; the engine's token commits
//! (`engine_token_commit_nanos_since_request_start` after `engine_token_wall_anchor_unix_nanos`)
//! are instants `token <n>`; memory snapshots with a `current_bytes` are a `C` counter
//! `memory <scope>`.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write as _;

use serde_json::{json, Map, Value};

use crate::format::document::TraceDocument;
use crate::format::profile::ProfileDocument;

/// The process id every exported event uses.
pub const PID: u64 = 1;

/// µs with three decimals, from ns: exact.
fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

fn json_str(s: &str) -> String {
    // Serializing a `&str` cannot fail.
    serde_json::to_string(s).unwrap_or_default()
}

/// One slice to place on a track.
#[derive(Debug, Clone)]
struct Slice {
    start: u64,
    end: u64,
    /// Index of the parent slice (in the same list), when it must nest there.
    parent: Option<usize>,
    /// Tie-break for equal intervals: smaller first (parents are shallower).
    depth: u64,
}

/// Assign each slice a track (0-based) such that slices on one track nest properly and, when
/// `strict` is set, each slice's enclosing slice on its track is its parent (roots: none).
/// Returns the order to write them in and the track of each slice.
fn place(slices: &[Slice], strict: bool) -> (Vec<usize>, Vec<usize>) {
    let mut order: Vec<usize> = (0..slices.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (&slices[a], &slices[b]);
        x.start
            .cmp(&y.start)
            .then(y.end.cmp(&x.end))
            .then(x.depth.cmp(&y.depth))
            .then(a.cmp(&b))
    });
    let mut track = alloc::vec![usize::MAX; slices.len()];
    let mut stacks: Vec<Vec<usize>> = Vec::new();
    for &i in &order {
        let s = &slices[i];
        // How many entries of `stack` would be popped for `s`, or None on a partial overlap.
        let fit = |stack: &Vec<usize>, want_top: Option<usize>| -> Option<usize> {
            let mut keep = stack.len();
            while keep > 0 {
                let top = &slices[stack[keep - 1]];
                if top.end >= s.end {
                    break;
                }
                if top.end > s.start {
                    return None;
                }
                keep -= 1;
            }
            let top = keep.checked_sub(1).map(|k| stack[k]);
            (!strict || top == want_top).then_some(keep)
        };
        let home = s
            .parent
            .map(|p| track[p])
            .filter(|&t| t != usize::MAX)
            .unwrap_or(0);
        let want_top = |t: usize| {
            if t == home {
                s.parent
            } else {
                None
            }
        };
        let mut chosen = None;
        if home < stacks.len() {
            if let Some(keep) = fit(&stacks[home], want_top(home)) {
                chosen = Some((home, keep));
            }
        } else {
            chosen = Some((home, 0));
        }
        if chosen.is_none() {
            for (t, stack) in stacks.iter().enumerate() {
                if t == home {
                    continue;
                }
                if let Some(keep) = fit(stack, None) {
                    chosen = Some((t, keep));
                    break;
                }
            }
        }
        let (t, keep) = chosen.unwrap_or((stacks.len(), 0));
        while stacks.len() <= t {
            stacks.push(Vec::new());
        }
        stacks[t].truncate(keep);
        stacks[t].push(i);
        track[i] = t;
    }
    (order, track)
}

fn track_name(base: &str, t: usize) -> String {
    if t == 0 {
        String::from(base)
    } else {
        format!("{base} (overlap {t})")
    }
}

fn push_event(out: &mut String, first: &mut bool, event: &str) {
    if !*first {
        out.push_str(",\n");
    }
    *first = false;
    out.push_str(event);
}

fn x_event(name: &str, cat: &str, tid: usize, start: u64, dur: u64, args: &Value) -> String {
    format!(
        "{{\"ph\":\"X\",\"pid\":{PID},\"tid\":{tid},\"name\":{},\"cat\":{},\"ts\":{},\"dur\":{},\"args\":{}}}",
        json_str(name),
        json_str(cat),
        us(start),
        us(dur),
        args
    )
}

fn m_event(what: &str, tid: usize, name: &str) -> String {
    format!(
        "{{\"ph\":\"M\",\"pid\":{PID},\"tid\":{tid},\"name\":\"{what}\",\"args\":{{\"name\":{}}}}}",
        json_str(name)
    )
}

/// A trace/6 document as Chrome Trace Event JSON (see the module docs).
pub fn trace_to_chrome(doc: &TraceDocument) -> String {
    // The importer's synthetic root is not written: importing the file again recreates it.
    let skip_root = doc.chrome.as_ref().is_some_and(|c| c.synthetic_root)
        && doc
            .spans
            .first()
            .is_some_and(|s| s.id == crate::format::chrome::ROOT_SPAN_ID);
    let skip = |i: usize| skip_root && i == 0;
    let mut slices: Vec<Slice> = Vec::with_capacity(doc.spans.len() + doc.ops.len());
    for (i, s) in doc.spans.iter().enumerate() {
        let parent = doc
            .tree
            .parent
            .get(i)
            .copied()
            .flatten()
            .map(|p| p as usize);
        slices.push(Slice {
            // A skipped span is an empty slice after everything; it is not written.
            start: if skip(i) { u64::MAX } else { s.start_ns },
            end: if skip(i) { u64::MAX } else { s.end_ns() },
            parent: parent.filter(|&p| !skip(p)),
            depth: u64::from(doc.tree.depth.get(i).copied().unwrap_or(0)) * 2,
        });
    }
    for op in &doc.ops {
        let span = doc.span_index(op.span_id);
        slices.push(Slice {
            start: op.timestamp_ns,
            end: op.timestamp_ns.saturating_add(op.duration_ns),
            parent: span,
            depth: span.map_or(0, |i| {
                u64::from(doc.tree.depth.get(i).copied().unwrap_or(0)) * 2 + 1
            }),
        });
    }
    let (order, track) = place(&slices, true);
    let tracks = track.iter().copied().max().map_or(1, |m| m + 1);

    let mut out = String::from("{\"traceEvents\":[\n");
    let mut first = true;
    let entrypoint = doc
        .meta
        .as_ref()
        .map_or("candle-trace", |m| m.entrypoint.as_str());
    push_event(
        &mut out,
        &mut first,
        &m_event("process_name", 0, entrypoint),
    );
    for t in 0..tracks {
        push_event(
            &mut out,
            &mut first,
            &m_event("thread_name", t + 1, &track_name("spans", t)),
        );
    }
    let n_spans = doc.spans.len();
    for &i in &order {
        if skip(i) {
            continue;
        }
        let tid = track[i] + 1;
        let event = if i < n_spans {
            let s = &doc.spans[i];
            let mut args = Map::new();
            args.insert("id".into(), Value::from(s.id.as_str()));
            if let Some(p) = &s.parent_id {
                args.insert("parent_id".into(), Value::from(p.as_str()));
            }
            args.insert("span_kind".into(), Value::from(s.span_kind.as_str()));
            if let Some(step) = s.pass {
                args.insert("step".into(), Value::from(step.as_str()));
            }
            if let Some(module) = &s.module {
                args.insert("module".into(), Value::from(module.as_str()));
            }
            if s.measured {
                args.insert("measured".into(), Value::Bool(true));
            }
            if s.duration_ns.is_none() {
                args.insert("unclosed".into(), Value::Bool(true));
            }
            x_event(
                &s.name,
                s.span_kind.as_str(),
                tid,
                s.start_ns,
                s.duration_or_zero(),
                &Value::Object(args),
            )
        } else {
            let op = doc.ops.row(i - n_spans);
            let args = json!({
                "span_kind": "op",
                "span_id": op.span_id,
                "shape": op.shape,
                "dtype": op.dtype,
                "device": op.device,
                "output_bytes": op.output_bytes(),
            });
            x_event(
                op.op_name,
                "op",
                tid,
                op.timestamp_ns,
                op.duration_ns,
                &args,
            )
        };
        push_event(&mut out, &mut first, &event);
    }

    // Memory counters, one series per device (samples are already in replay order).
    let profile = &doc.memory_profile;
    for sample in &profile.samples {
        let Some(device) = profile.devices.get(sample.device as usize) else {
            continue;
        };
        let event = format!(
            "{{\"ph\":\"C\",\"pid\":{PID},\"tid\":0,\"name\":{},\"ts\":{},\"args\":{{\"bytes\":{}}}}}",
            json_str(&format!("live bytes {}", device.device)),
            us(sample.timestamp_ns),
            sample.live_bytes
        );
        push_event(&mut out, &mut first, &event);
    }
    let mut checkpoints: Vec<_> = doc.device_memory.iter().collect();
    checkpoints.sort_by_key(|c| (c.device.clone(), c.timestamp_ns));
    for c in checkpoints {
        let event = format!(
            "{{\"ph\":\"C\",\"pid\":{PID},\"tid\":0,\"name\":{},\"ts\":{},\"args\":{{\"used_bytes\":{},\"free_bytes\":{}}}}}",
            json_str(&format!("device memory {}", c.device)),
            us(c.timestamp_ns),
            c.used_bytes,
            c.free_bytes
        );
        push_event(&mut out, &mut first, &event);
    }

    // What only an imported Chrome file has: its instants on one extra track, its counters.
    if let Some(c) = &doc.chrome {
        let tid = tracks + 1;
        if !c.instants.is_empty() {
            push_event(
                &mut out,
                &mut first,
                &m_event("thread_name", tid, "instants"),
            );
        }
        let mut instants: Vec<_> = c.instants.iter().collect();
        instants.sort_by_key(|i| i.timestamp_ns);
        for i in instants {
            let event = format!(
                "{{\"ph\":\"i\",\"s\":\"t\",\"pid\":{PID},\"tid\":{tid},\"name\":{},\"ts\":{}}}",
                json_str(&i.name),
                us(i.timestamp_ns)
            );
            push_event(&mut out, &mut first, &event);
        }
        let mut counters: Vec<_> = c.counters.iter().collect();
        counters.sort_by(|a, b| (&a.name, a.timestamp_ns).cmp(&(&b.name, b.timestamp_ns)));
        for k in counters {
            let event = format!(
                "{{\"ph\":\"C\",\"pid\":{PID},\"tid\":0,\"name\":{},\"ts\":{},\"args\":{{{}:{}}}}}",
                json_str(&k.name),
                us(k.timestamp_ns),
                json_str(&k.series),
                Value::from(k.value)
            );
            push_event(&mut out, &mut first, &event);
        }
    }

    let meta = doc.meta.as_ref().map_or(Value::Null, |m| {
        serde_json::to_value(&m.event).unwrap_or(Value::Null)
    });
    let gradients: Vec<Value> = doc
        .gradients
        .iter()
        .map(|g| serde_json::to_value(&g.event).unwrap_or(Value::Null))
        .collect();
    let edges: Vec<Value> = doc
        .edges
        .iter()
        .map(|e| serde_json::to_value(&e.event).unwrap_or(Value::Null))
        .collect();
    let metadata = json!({
        "candle_trace": {
            "exported_by": "candle-trace",
            "source_format": "candle-graph/trace/6",
            "meta": meta,
            "summary": serde_json::to_value(doc.summary()).unwrap_or(Value::Null),
            "gradients": gradients,
            "edges": edges,
            "tensor_count": doc.tensors.len(),
        }
    });
    let _ = write!(
        out,
        "\n],\n\"displayTimeUnit\":\"ns\",\n\"metadata\":{metadata}}}\n"
    );
    out
}

/// An inference profile as Chrome Trace Event JSON (see the module docs).
pub fn profile_to_chrome(doc: &ProfileDocument) -> String {
    let origin = doc
        .records
        .iter()
        .filter_map(|r| r.event.ts_unix_nanos)
        .min()
        .unwrap_or(0);
    let rel = |ts: i64| ts.saturating_sub(origin).max(0) as u64;
    let request_index = |id: &str, requests: &mut Vec<String>| -> usize {
        match requests.iter().position(|r| r == id) {
            Some(i) => i,
            None => {
                requests.push(String::from(id));
                requests.len() - 1
            }
        }
    };
    let mut names: Vec<String> = Vec::new();
    // (request, start, dur, name, args) for slices; (request, ts, name, args) for instants.
    let mut spans: Vec<(usize, u64, u64, String, Value)> = Vec::new();
    let mut instants: Vec<(usize, u64, String, Value)> = Vec::new();
    let mut counters: Vec<(u64, String, u64)> = Vec::new();
    for r in &doc.records {
        let e = &r.event;
        let Some(ts) = e.ts_unix_nanos else { continue };
        let req = request_index(e.request_id.as_deref().unwrap_or(""), &mut names);
        let kind = e.event_kind.as_deref().unwrap_or("event");
        let phase = e.phase.as_deref().unwrap_or("");
        let args = json!({
            "event_id": e.event_id,
            "event_kind": kind,
            "status": e.status,
            "line": r.line,
            "valid": r.is_valid(),
        });
        match (kind, e.duration_us) {
            ("timed_span", Some(d)) => {
                spans.push((
                    req,
                    rel(ts),
                    d.saturating_mul(1000),
                    String::from(phase),
                    args,
                ));
            }
            _ => instants.push((req, rel(ts), format!("{kind}: {phase}"), args)),
        }
        if let Some(m) = &e.memory {
            if let Some(current) = m.current_bytes {
                let scope = m.scope.as_deref().unwrap_or("");
                counters.push((rel(ts), format!("memory {scope}"), current));
            }
        }
        for (n, (c, at)) in crate::format::profile::token_commits(&e.attributes)
            .into_iter()
            .enumerate()
        {
            instants.push((
                req,
                rel(at),
                format!("token {}", n + 1),
                json!({ "nanos_since_request_start": c }),
            ));
        }
    }
    // Slices of one request nest by time; overlapping ones move to overflow tracks, which are
    // numbered per request after all requests' first tracks.
    let mut by_request: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, s) in spans.iter().enumerate() {
        by_request.entry(s.0).or_default().push(i);
    }
    let mut tid_of_span = alloc::vec![0usize; spans.len()];
    let mut extra_tracks: Vec<(usize, String)> = Vec::new();
    let mut order_all: Vec<usize> = Vec::new();
    for (req, members) in &by_request {
        let slices: Vec<Slice> = members
            .iter()
            .map(|&i| Slice {
                start: spans[i].1,
                end: spans[i].1.saturating_add(spans[i].2),
                parent: None,
                depth: 0,
            })
            .collect();
        let (order, track) = place(&slices, false);
        for &k in &order {
            let i = members[k];
            tid_of_span[i] = if track[k] == 0 {
                req + 1
            } else {
                let label = track_name(&names[*req], track[k]);
                match extra_tracks.iter().position(|(_, l)| *l == label) {
                    Some(p) => names.len() + p + 1,
                    None => {
                        extra_tracks.push((*req, label));
                        names.len() + extra_tracks.len()
                    }
                }
            };
            order_all.push(i);
        }
    }
    order_all.sort_by_key(|&i| (spans[i].1, core::cmp::Reverse(spans[i].2), i));
    instants.sort_by_key(|i| i.1);
    counters.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)));

    let mut out = String::from("{\"traceEvents\":[\n");
    let mut first = true;
    push_event(
        &mut out,
        &mut first,
        &m_event("process_name", 0, "inference profile"),
    );
    for (i, n) in names.iter().enumerate() {
        let label = if n.is_empty() {
            "(no request id)"
        } else {
            n.as_str()
        };
        push_event(&mut out, &mut first, &m_event("thread_name", i + 1, label));
    }
    for (k, (_, label)) in extra_tracks.iter().enumerate() {
        push_event(
            &mut out,
            &mut first,
            &m_event("thread_name", names.len() + k + 1, label),
        );
    }
    // Slices and instants share their request's track: one stream ordered by time (slices
    // first at equal times, longest first).
    let mut timeline: Vec<(u64, u8, core::cmp::Reverse<u64>, usize, String)> = Vec::new();
    for (k, i) in order_all.into_iter().enumerate() {
        let (_, start, dur, name, args) = &spans[i];
        let event = x_event(name, "timed_span", tid_of_span[i], *start, *dur, args);
        timeline.push((*start, 0, core::cmp::Reverse(*dur), k, event));
    }
    for (k, (req, ts, name, args)) in instants.iter().enumerate() {
        let event = format!(
            "{{\"ph\":\"i\",\"s\":\"t\",\"pid\":{PID},\"tid\":{},\"name\":{},\"ts\":{},\"args\":{}}}",
            req + 1,
            json_str(name),
            us(*ts),
            args
        );
        timeline.push((*ts, 1, core::cmp::Reverse(0), k, event));
    }
    timeline.sort_by_key(|e| (e.0, e.1, e.2, e.3));
    for (.., event) in &timeline {
        push_event(&mut out, &mut first, event);
    }
    for (ts, name, bytes) in &counters {
        let event = format!(
            "{{\"ph\":\"C\",\"pid\":{PID},\"tid\":0,\"name\":{},\"ts\":{},\"args\":{{\"bytes\":{bytes}}}}}",
            json_str(name),
            us(*ts)
        );
        push_event(&mut out, &mut first, &event);
    }
    let metadata = json!({
        "candle_trace": {
            "exported_by": "candle-trace",
            "source_format": "inference profile (schema_version 1)",
            "origin_unix_nanos": origin,
            "summary": serde_json::to_value(doc.summary()).unwrap_or(Value::Null),
        }
    });
    let _ = write!(
        out,
        "\n],\n\"displayTimeUnit\":\"ns\",\n\"metadata\":{metadata}}}\n"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::spans::span_path;
    use crate::format::document::TraceDocument;

    fn slice(start: u64, end: u64, parent: Option<usize>, depth: u64) -> Slice {
        Slice {
            start,
            end,
            parent,
            depth,
        }
    }

    #[test]
    fn placement_keeps_nesting_and_moves_overlaps() {
        // 0: root [0,100); 1: child [10,50); 2: child [40,80) overlaps 1; 3: grandchild of 2.
        let slices = [
            slice(0, 100, None, 0),
            slice(10, 50, Some(0), 1),
            slice(40, 80, Some(0), 1),
            slice(45, 60, Some(2), 2),
            slice(200, 300, None, 0),
        ];
        let (order, track) = place(&slices, true);
        assert_eq!(order, [0, 1, 2, 3, 4]);
        assert_eq!(track, [0, 0, 1, 1, 0]);
    }

    #[test]
    fn us_keeps_every_ns() {
        assert_eq!(us(0), "0.000");
        assert_eq!(us(1_234_567), "1234.567");
        assert_eq!(crate::format::chrome::us_to_ns(1234.567), 1_234_567);
    }

    #[test]
    fn exported_spans_import_back() {
        let meta = r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":2,"warmup_steps":1,"device":"cpu","timing_mode":"host","tags":{}}"#;
        let text = alloc::format!(
            "{meta}\n{}\n{}\n{}\n{}\n",
            r#"{"kind":"span_start","id":"a","name":"step","start_ns":1001,"span_kind":"function","measured":true,"step":"forward"}"#,
            r#"{"kind":"span_start","id":"b","parent_id":"a","name":"mm","start_ns":1500,"span_kind":"op"}"#,
            r#"{"kind":"span_end","id":"b","duration_ns":7}"#,
            r#"{"kind":"span_end","id":"a","duration_ns":999}"#,
        );
        let doc = TraceDocument::from_bytes(text.as_bytes());
        let back = TraceDocument::from_chrome(trace_to_chrome(&doc).as_bytes());
        assert!(back.diagnostics.is_empty(), "{:?}", back.diagnostics);
        assert_eq!(
            back.meta.as_ref().unwrap().event,
            doc.meta.as_ref().unwrap().event
        );
        assert_eq!(back.summary().total_ns, 999);
        assert_eq!(span_path(&back, 1), "step/mm");
        assert_eq!(back.spans[1].duration_ns, Some(7));
        // Times are rebased to the first event: 1001 → 0.
        assert_eq!(back.spans[1].start_ns, 499);
    }
}
