//! Batched forwards ([`Engine`]) and a scheduler's resource pool, read back with the schema's
//! profile reader: one event per forward call whatever its batch, every request's token
//! timing as when it is served alone, resource events one per call, a full queue dropping and
//! counting rather than blocking.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use candle_trace_capture::{DetailLevel, InferenceProfiler, ProfilingConfig};
use candle_trace_schema::format::profile::{read_profile, JsonMap, ProfileDocument, ProfileRecord};
use common::SharedBuf;
use serde_json::Value;

fn shape(prompt_tokens: u64) -> JsonMap {
    let mut shape = JsonMap::new();
    shape.insert("prompt_tokens".into(), Value::from(prompt_tokens));
    shape
}

fn profiler(detail: DetailLevel, out: &SharedBuf) -> InferenceProfiler {
    InferenceProfiler::builder(ProfilingConfig {
        detail,
        sample_rate: 1.0,
        outputs: vec!["unused.jsonl".into()],
    })
    .writer(out.clone())
    .build()
    .unwrap()
}

fn phase<'d>(doc: &'d ProfileDocument, phase: &str) -> Vec<&'d ProfileRecord> {
    doc.records
        .iter()
        .filter(|r| r.event.phase.as_deref() == Some(phase))
        .collect()
}

#[test]
fn a_forward_of_one_prefill_and_three_decodes_is_one_event_and_four_requests_timed_as_alone() {
    let out = SharedBuf::default();
    let p = profiler(DetailLevel::Latency, &out);
    let engine = p.engine("engine-0");
    let requests: Vec<_> = (0..4)
        .map(|i| p.request_open(format!("r{i}"), shape(4 + i)))
        .collect();
    // r1..r3 have had their prefill; r0 joins now.
    let mut first = engine.forward();
    for r in &requests[1..] {
        first = first.prefill(r, 5);
    }
    first.run(|| Ok::<_, String>(())).unwrap();
    std::thread::sleep(Duration::from_millis(2));
    let before = Instant::now();
    let mixed = engine
        .forward()
        .prefill(&requests[0], 4)
        .decode(&requests[1])
        .decode(&requests[2])
        .decode(&requests[3])
        .run(|| {
            std::thread::sleep(Duration::from_millis(3));
            Ok::<_, String>(7)
        });
    let after = Instant::now();
    assert_eq!(mixed, Ok(7));
    let timings: Vec<_> = requests.iter().map(|r| r.token_timing().unwrap()).collect();
    for r in requests {
        r.request_close();
    }
    let report = p.finish().unwrap();
    assert_eq!(report.events_invalid, 0, "{:?}", report.invalid_messages);

    let doc = read_profile(&out.bytes());
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    let iterations = phase(&doc, "iteration");
    assert_eq!(iterations.len(), 2);
    let e = &iterations[1].event;
    assert_eq!(e.request_id.as_deref(), Some("engine-0"));
    let a = &e.attributes;
    assert_eq!(a["engine"], "engine-0");
    assert_eq!(a["iteration"], 1);
    assert_eq!(a["batch_size"], 4);
    assert_eq!(a["prefill_tokens"], 4);
    assert_eq!(a["decode_tokens"], 3);
    assert_eq!(a["committed_tokens"], 4);
    assert_eq!(e.shape["batch_size"], 4);
    let listed: Vec<&str> = a["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["request_id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["r0", "r1", "r2", "r3"]);
    assert_eq!(a["requests"][0]["prefill_tokens"], 4);
    assert_eq!(a["requests"][1]["decode_tokens"], 1);
    let took = e.duration_us.unwrap();
    assert!(took >= 3000 && u128::from(took) <= (after - before).as_micros());

    // Every request committed one token at the forward's end: r0 its first (its TTFT), the
    // others their second. Commits are on each request's own clock, so their wall times agree.
    let wall: Vec<i64> = timings
        .iter()
        .map(|t| {
            t.wall_anchor_unix_nanos
                + *t.token_commit_nanos_since_request_start.last().unwrap() as i64
        })
        .collect();
    assert!(wall.windows(2).all(|w| w[0] == w[1]), "{wall:?}");
    assert_eq!(timings[0].token_commit_nanos_since_request_start.len(), 1);
    assert!(timings[1..]
        .iter()
        .all(|t| t.token_commit_nanos_since_request_start.len() == 2));
    // The decodes' execution intervals are the forward's.
    assert_eq!(timings[1].decode_stage_intervals.len(), 1);
    assert!(timings[0].decode_stage_intervals.is_empty());

    // Nothing shows as a request that is not one: the engine's events are its own.
    let ids: Vec<String> = doc.requests().into_iter().map(|r| r.request_id).collect();
    assert!(ids.iter().all(|id| id.starts_with('r')), "{ids:?}");
    let ttft: Vec<Option<u64>> = doc.requests().iter().map(|r| r.ttft_us).collect();
    assert!(ttft.iter().all(Option::is_some));
}

#[test]
fn module_spans_of_a_batched_forward_are_written_once_for_the_engine() {
    let out = SharedBuf::default();
    let p = profiler(DetailLevel::Latency, &out);
    candle_trace_capture::install().unwrap();
    let block = tracing::trace_span!("block");
    let linear = tracing::trace_span!("linear");
    let engine = p.engine("e");
    let (a, b) = (p.request_open("a", shape(2)), p.request_open("b", shape(2)));
    engine
        .forward()
        .prefill(&a, 2)
        .prefill(&b, 2)
        .run(|| {
            let _b = block.enter();
            for _ in 0..2 {
                let _l = linear.enter();
            }
            Ok::<_, String>(())
        })
        .unwrap();
    a.request_close();
    b.request_close();
    p.finish().unwrap();
    let doc = read_profile(&out.bytes());
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    let modules = phase(&doc, "module");
    assert_eq!(modules.len(), 3, "once, not once per request");
    for m in &modules {
        let e = &m.event;
        assert_eq!(e.request_id.as_deref(), Some("e"));
        assert_eq!(e.attributes["engine"], "e");
        assert_eq!(e.attributes["iteration"], 0);
        assert!(e
            .attributes
            .contains_key("start_nanos_since_iteration_start"));
        assert!(!e.attributes.contains_key("forward_index"));
    }
    assert_eq!(modules[1].event.attributes["parent_span_id"], 0);
}

#[test]
fn chunked_prefill_speculative_decoding_and_preemption_are_expressible() {
    let out = SharedBuf::default();
    let p = profiler(DetailLevel::Latency, &out);
    let engine = p.engine("engine");
    let pool = engine.resource_pool("kv_blocks", 8);
    let r = p.request_open("long", shape(40));
    pool.reserve(&r, 3);
    // A 40-token prompt in two chunks: only the second yields a token.
    engine
        .forward()
        .prefill_chunk(&r, 24)
        .run(|| Ok::<_, String>(()))
        .unwrap();
    engine
        .forward()
        .prefill(&r, 16)
        .run(|| Ok::<_, String>(()))
        .unwrap();
    // Speculative: 4 tokens checked, 2 accepted.
    engine
        .forward()
        .decode_tokens(&r, 4)
        .run_accepting(|accepted| {
            accepted.set(0, 2);
            Ok::<_, String>(())
        })
        .unwrap();
    // Preempted: its blocks go back; it is recomputed, then decodes again.
    r.preempted("kv_blocks needed by a higher-priority request");
    pool.release(&r, 3);
    pool.reserve(&r, 3);
    engine
        .forward()
        .prefill_chunk(&r, 43)
        .run(|| Ok::<_, String>(()))
        .unwrap();
    engine
        .forward()
        .decode(&r)
        .run(|| Ok::<_, String>(()))
        .unwrap();
    let timing = r.token_timing().unwrap();
    pool.release(&r, 3);
    r.request_close();
    let report = p.finish().unwrap();
    assert_eq!(report.events_invalid, 0, "{:?}", report.invalid_messages);
    assert_eq!(
        timing.token_commit_nanos_since_request_start.len(),
        1 + 2 + 1
    );
    let doc = read_profile(&out.bytes());
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    let committed: Vec<u64> = phase(&doc, "iteration")
        .iter()
        .map(|i| i.event.attributes["committed_tokens"].as_u64().unwrap())
        .collect();
    assert_eq!(committed, [0, 1, 2, 0, 1]);
    assert_eq!(phase(&doc, "preempted").len(), 1);
    assert_eq!(doc.requests()[0].output_tokens, Some(4));
}

#[test]
fn a_pool_writes_one_event_per_call_with_its_level_and_flags_an_underflow() {
    let out = SharedBuf::default();
    let p = profiler(DetailLevel::Resource, &out);
    let engine = p.engine("engine");
    let pool = engine.resource_pool("kv_blocks", 10);
    let (a, b) = (p.request_open("a", shape(1)), p.request_open("b", shape(1)));
    pool.reserve(&a, 6);
    pool.defer(&b, 6, "kv_blocks: 6 needed, 4 free");
    pool.defer(&b, 6, "kv_blocks: 6 needed, 4 free");
    pool.commit(&a, 6);
    pool.release(&a, 6);
    pool.reserve(&b, 6);
    pool.release(&b, 8);
    assert_eq!(pool.level(), 0);
    a.request_close();
    b.request_close();
    let report = p.finish().unwrap();
    assert_eq!(report.events_invalid, 0, "{:?}", report.invalid_messages);
    let doc = read_profile(&out.bytes());
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    let steps: Vec<(String, String, i64, i64, Option<i64>)> = doc
        .records
        .iter()
        .filter_map(|r| {
            let res = r.event.resource.as_ref()?;
            Some((
                r.event.request_id.clone().unwrap(),
                res.action.clone().unwrap(),
                res.before.unwrap_or(-1),
                res.after.unwrap_or(-1),
                res.underflow_amount,
            ))
        })
        .collect();
    let step = |id: &str, action: &str, before, after, under| {
        (id.to_string(), action.to_string(), before, after, under)
    };
    assert_eq!(
        steps,
        [
            step("engine", "capacity_snapshot", -1, 0, None),
            step("a", "reserve", 0, 6, None),
            step("b", "defer", 6, 6, None),
            step("b", "defer", 6, 6, None),
            step("a", "commit", 6, 6, None),
            step("a", "release", 6, 0, None),
            step("b", "reserve", 0, 6, None),
            step("b", "release", 6, 0, Some(2)),
        ]
    );
    let defer = doc.records.iter().find_map(|r| {
        let res = r.event.resource.as_ref()?;
        (res.action.as_deref() == Some("defer")).then_some(res)
    });
    assert_eq!(
        defer.unwrap().reason.as_deref(),
        Some("kv_blocks: 6 needed, 4 free")
    );
}

#[test]
fn a_full_queue_drops_and_counts_and_never_blocks_a_forward() {
    let out = SharedBuf::default();
    let p = InferenceProfiler::builder(ProfilingConfig {
        detail: DetailLevel::Latency,
        sample_rate: 1.0,
        outputs: vec!["unused.jsonl".into()],
    })
    .writer(out.clone())
    .queue_capacity(1)
    .build()
    .unwrap();
    candle_trace_capture::install().unwrap();
    let linear = tracing::trace_span!("linear");
    let engine = p.engine("engine");
    let r = p.request_open("r", shape(1));
    let started = Instant::now();
    for _ in 0..2000 {
        engine
            .forward()
            .decode(&r)
            .run(|| {
                for _ in 0..5 {
                    let _l = linear.enter();
                }
                Ok::<_, String>(())
            })
            .unwrap();
    }
    // No forward waited for the writer.
    assert!(started.elapsed() < Duration::from_secs(10));
    r.request_close();
    let report = p.finish().unwrap();
    assert!(report.events_dropped > 0);
    let doc = read_profile(&out.bytes());
    // What was written is whole; the last line says how much was not.
    let last = doc.diagnostics.last().unwrap();
    assert!(last.message.contains("capture_stats"), "{last:?}");
    assert_eq!(
        doc.records.len() as u64 + 1,
        report.events_written,
        "every line but capture_stats is an event"
    );
}

#[test]
fn device_synchronized_forwards_wait_for_the_device_at_both_edges() {
    let out = SharedBuf::default();
    let syncs = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&syncs);
    let p = InferenceProfiler::builder(ProfilingConfig {
        detail: DetailLevel::Latency,
        sample_rate: 1.0,
        outputs: vec!["unused.jsonl".into()],
    })
    .writer(out.clone())
    .device_sync(move || {
        counted.fetch_add(1, Ordering::Relaxed);
    })
    .build()
    .unwrap();
    let engine = p.engine("engine");
    let r = p.request_open("r", shape(1));
    engine
        .forward()
        .prefill(&r, 1)
        .run(|| Ok::<_, String>(()))
        .unwrap();
    r.decode_step(|| Ok::<_, String>(())).unwrap();
    r.request_close();
    p.finish().unwrap();
    assert_eq!(syncs.load(Ordering::Relaxed), 4);
    let doc = read_profile(&out.bytes());
    assert_eq!(
        doc.records[0].event.attributes["timing_mode"],
        "device_synchronized"
    );
}

#[test]
fn a_failed_forward_commits_nothing_and_says_why() {
    let out = SharedBuf::default();
    let p = profiler(DetailLevel::Basic, &out);
    let engine = p.engine("engine");
    let r = p.request_open("r", shape(1));
    let failed = engine
        .forward()
        .prefill(&r, 1)
        .run(|| Err::<(), _>("out of memory"));
    assert_eq!(failed, Err("out of memory"));
    r.request_fail("forward_failed", "out of memory");
    p.finish().unwrap();
    let doc = read_profile(&out.bytes());
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    let it = &phase(&doc, "iteration")[0].event;
    assert_eq!(it.status.as_deref(), Some("failure"));
    assert_eq!(it.attributes["committed_tokens"], 0);
    assert_eq!(
        it.error.as_ref().unwrap().message.as_deref(),
        Some("out of memory")
    );
}
