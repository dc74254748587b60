//! The inference profiler, read back with the schema's profile reader.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

mod common;

use std::time::{Duration, Instant};

use candle_trace_capture::{CaptureError, InferenceProfiler};
use candle_trace_schema::format::profile::{
    read_profile, DecodeStage, DetailLevel, Entrypoint, JsonMap, MemorySnapshot, ProfilingConfig,
    ResourceAction, ResourceTraceEvent, Status,
};
use common::{temp_dir, SharedBuf};
use serde_json::Value;

fn shape(prompt_tokens: u64) -> JsonMap {
    let mut shape = JsonMap::new();
    shape.insert("prompt_tokens".into(), Value::from(prompt_tokens));
    shape
}

fn config(detail: DetailLevel, sample_rate: f64, output: &str) -> ProfilingConfig {
    ProfilingConfig {
        detail,
        sample_rate,
        outputs: vec![output.into()],
    }
}

#[test]
fn a_request_reads_back_valid_with_the_ttft_the_test_measured() {
    let dir = temp_dir("profile");
    let path = dir.join("profile.jsonl");
    let profiler =
        InferenceProfiler::builder(config(DetailLevel::Latency, 1.0, path.to_str().unwrap()))
            .entrypoint(Entrypoint::Serve)
            .backend("cuda")
            .runtime_preset_hash("sha256:ab12")
            .model("tiny-llama")
            .correlation_id("corr-7")
            .build()
            .unwrap();

    let before_open = Instant::now();
    let request = profiler.request_open("r1", shape(5));
    assert!(request.is_recording());
    let prefill_start = Instant::now();
    std::thread::sleep(Duration::from_millis(3));
    request.prefill(prefill_start.elapsed());
    request.record_token_commit();
    let after_first_commit = Instant::now();
    for _ in 0..3 {
        let _wave = request.decode_wave();
        std::thread::sleep(Duration::from_millis(1));
        request.record_token_commit();
    }
    let t = Instant::now();
    request.decode_stage(DecodeStage::DecodePostprocess, t, Instant::now());
    request.memory("decode", MemorySnapshot::new("device", 10, 20, 20, 30));
    let mut reserve =
        ResourceTraceEvent::new("request", "r1", "kv_blocks", ResourceAction::Reserve);
    reserve.amount = Some(4);
    reserve.before = Some(0);
    reserve.after = Some(4);
    request.resource("decode", reserve);
    request.error("decode", "slow_token", "a token took long", false);
    let timing = request.token_timing().unwrap();
    request.request_close();
    let report = profiler.finish().unwrap();

    assert_eq!(report.events_invalid, 0, "{:?}", report.invalid_messages);
    assert_eq!(report.events_dropped, 0);
    assert_eq!(report.paths, vec![path.clone()]);
    // open, prefill, 3 waves, memory, resource, error, close
    assert_eq!(report.events_written, 9);

    let doc = read_profile(&std::fs::read(&path).unwrap());
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    assert_eq!(doc.records.len(), 9);
    let requests = doc.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];

    // TTFT as the test saw it: at least the prefill sleep, at most the time to the commit.
    let commits = &timing.token_commit_nanos_since_request_start;
    assert_eq!(commits.len(), 4);
    let ttft_us = r.ttft_us.unwrap();
    assert_eq!(ttft_us, commits[0] / 1000);
    assert!(ttft_us >= 3000, "{ttft_us}");
    assert!(
        u128::from(ttft_us) <= (after_first_commit - before_open).as_micros(),
        "{ttft_us}"
    );
    assert_eq!(r.output_tokens, Some(4));
    assert_eq!(r.itl_nanos.len(), 3);
    assert!(r.itl_nanos.iter().all(|&n| n >= 1_000_000));
    assert_eq!(r.status, Status::Failure); // the non-blocking error event
    assert_eq!(r.model.as_deref(), Some("tiny-llama"));

    // The opening event states the detail level and sample rate; readers show them.
    let settings = doc.settings();
    assert_eq!(settings.detail_level.as_deref(), Some("latency"));
    assert_eq!(settings.sample_rate, Some(1.0));

    let close = &doc.records.last().unwrap().event;
    assert_eq!(close.phase.as_deref(), Some("request"));
    for (name, value) in timing.derived_attributes() {
        assert_eq!(close.attributes.get(&name), Some(&value), "{name}");
    }
    assert_eq!(close.attributes["decode_wall_timing_eligible"], true);
    assert_eq!(close.attributes["engine_decode_stage_interval_count"], 4);
    assert_eq!(r.duration_us, close.duration_us);
    assert!(close.duration_us.unwrap() >= 6000);
    assert!(doc.records.iter().all(|rec| {
        rec.event.correlation_id.as_deref() == Some("corr-7")
            && rec.event.entrypoint.as_deref() == Some("serve")
            && rec.event.shape["prompt_tokens"] == 5
    }));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn sampling_follows_the_request_id() {
    let out = SharedBuf::default();
    let profiler = InferenceProfiler::builder(config(DetailLevel::Basic, 0.5, "unused.jsonl"))
        .writer(out.clone())
        .build()
        .unwrap();
    let mut expected = Vec::new();
    for i in 0..200 {
        let id = format!("req-{i}");
        let sampled = profiler.is_sampled(&id);
        let handle = profiler.request_open(id.clone(), shape(1));
        assert_eq!(handle.is_recording(), sampled);
        // Basic detail: commits are accepted and ignored.
        handle.record_token_commit();
        assert!(handle.token_timing().is_none());
        handle.request_close();
        if sampled {
            expected.push(id);
        }
    }
    let report = profiler.finish().unwrap();
    assert_eq!(report.requests_sampled, expected.len() as u64);
    assert_eq!(report.requests_sampled + report.requests_skipped, 200);
    assert!((60..140).contains(&expected.len()), "{}", expected.len());

    let doc = read_profile(&out.bytes());
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    let mut seen: Vec<String> = doc.requests().into_iter().map(|r| r.request_id).collect();
    seen.sort();
    expected.sort();
    assert_eq!(seen, expected);
    // No token timing at basic detail.
    assert!(doc.requests().iter().all(|r| r.ttft_us.is_none()));
}

#[test]
fn invalid_events_are_not_written_but_counted() {
    let out = SharedBuf::default();
    let profiler = InferenceProfiler::builder(config(DetailLevel::Basic, 1.0, "unused.jsonl"))
        .writer(out.clone())
        .build()
        .unwrap();
    // An empty shape breaks "at least one entry" on every event of the request.
    let bad = profiler.request_open("bad", JsonMap::new());
    bad.prefill(Duration::from_micros(5));
    bad.request_close();
    let good = profiler.request_open("good", shape(2));
    good.request_fail("oom", "out of memory");
    let report = profiler.finish().unwrap();
    assert_eq!(report.events_invalid, 3);
    assert!(
        report.invalid_messages[0].contains("shape"),
        "{:?}",
        report.invalid_messages
    );
    assert_eq!(report.events_written, 2);

    let doc = read_profile(&out.bytes());
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    let requests = doc.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].request_id, "good");
    assert_eq!(requests[0].status, Status::Failure);
    let close = &doc.records[1].event;
    assert!(close.error.as_ref().unwrap().blocking);
}

#[test]
fn diagnostic_levels_mark_events_and_dropped_handles_close_as_failures() {
    let out = SharedBuf::default();
    let profiler = InferenceProfiler::builder(config(DetailLevel::Full, 1.0, "unused.jsonl"))
        .writer(out.clone())
        .build()
        .unwrap();
    {
        let request = profiler.request_open("r", shape(1));
        request.record_token_commit();
        // Dropped without request_close.
    }
    let open_at_finish = profiler.request_open("open_at_finish", shape(1));
    profiler.finish().unwrap();
    // Still open at finish: it writes nothing more, not even when dropped.
    assert!(!open_at_finish.is_recording());
    drop(open_at_finish);
    let late = profiler.request_open("late", shape(1));
    assert!(!late.is_recording());
    assert!(matches!(
        profiler.finish(),
        Err(CaptureError::AlreadyFinished)
    ));

    let doc = read_profile(&out.bytes());
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    assert_eq!(doc.records.len(), 3, "{:#?}", doc.records);
    assert_eq!(doc.records[0].event.status(), Some(Status::DiagnosticOnly));
    assert_eq!(
        doc.records[2].event.request_id.as_deref(),
        Some("open_at_finish")
    );
    let close = &doc.records[1].event;
    assert_eq!(close.status(), Some(Status::Failure));
    assert_eq!(
        close.error.as_ref().unwrap().kind.as_deref(),
        Some("request_not_closed")
    );
    // Full detail captures token timing.
    assert_eq!(close.attributes["engine_token_commit_count"], 1);
    assert_eq!(
        close.attributes["decode_wall_timing_unavailable_reason"],
        "decode_not_entered"
    );
}

/// What one generated request does.
#[derive(Debug, Clone)]
struct Plan {
    prompt_tokens: u64,
    /// Decode waves, each followed by one token commit.
    waves: usize,
    /// A token commit right after prefill (the first token).
    first_token: bool,
    memory_snapshots: usize,
    /// 0: closes normally; 1: a non-blocking error, then closes; 2: fails; 3: dropped open.
    ending: u8,
}

fn plan() -> impl proptest::strategy::Strategy<Value = Plan> {
    use proptest::prelude::*;
    (1u64..5000, 0usize..5, any::<bool>(), 0usize..3, 0u8..4).prop_map(
        |(prompt_tokens, waves, first_token, memory_snapshots, ending)| Plan {
            prompt_tokens,
            waves,
            first_token,
            memory_snapshots,
            ending,
        },
    )
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Whatever requests a server makes, at any detail level, the profile it writes reads back
    /// with no diagnostic, one record per event written, and per request the status, shape and
    /// token timing that the profiler itself reported.
    #[test]
    fn any_requests_read_back_as_the_profiler_recorded_them(
        plans in proptest::collection::vec(plan(), 1..8),
        detail in proptest::sample::select(vec![
            DetailLevel::Basic, DetailLevel::Resource, DetailLevel::Latency, DetailLevel::Full,
        ]),
    ) {
        let out = SharedBuf::default();
        let profiler = InferenceProfiler::builder(config(detail, 1.0, "unused.jsonl"))
            .writer(out.clone())
            .model("m")
            .build()
            .unwrap();
        let mut timings = Vec::new();
        for (i, p) in plans.iter().enumerate() {
            let id = format!("req-{i}");
            let request = profiler.request_open(id.clone(), shape(p.prompt_tokens));
            request.prefill(Duration::from_micros(10 + i as u64));
            if p.first_token {
                request.record_token_commit();
            }
            for _ in 0..p.waves {
                let _wave = request.decode_wave();
                request.record_token_commit();
            }
            for m in 0..p.memory_snapshots as u64 {
                request.memory("decode", MemorySnapshot::new("device", m, m + 1, m + 1, m + 2));
            }
            timings.push((id, p.clone(), request.token_timing()));
            match p.ending {
                0 => request.request_close(),
                1 => {
                    request.error("decode", "slow", "slow token", false);
                    request.request_close();
                }
                2 => request.request_fail("oom", "out of memory"),
                _ => drop(request),
            }
        }
        let report = profiler.finish().unwrap();
        proptest::prop_assert_eq!(report.events_invalid, 0, "{:?}", report.invalid_messages);
        proptest::prop_assert_eq!(report.events_dropped, 0);

        let doc = read_profile(&out.bytes());
        proptest::prop_assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        proptest::prop_assert_eq!(doc.records.len() as u64, report.events_written);
        let requests = doc.requests();
        proptest::prop_assert_eq!(requests.len(), plans.len());
        for (id, p, timing) in &timings {
            let r = requests.iter().find(|r| &r.request_id == id).unwrap();
            // At a diagnostic-only level, what did not fail says so.
            let expected = match (p.ending, detail.is_diagnostic_only()) {
                (0, false) => Status::Ok,
                (0, true) => Status::DiagnosticOnly,
                _ => Status::Failure,
            };
            proptest::prop_assert_eq!(r.status, expected, "{}", id);
            proptest::prop_assert_eq!(r.model.as_deref(), Some("m"));
            let commits = timing
                .as_ref()
                .map_or(0, |t| t.token_commit_nanos_since_request_start.len());
            if detail >= DetailLevel::Latency {
                let t = timing.as_ref().unwrap();
                proptest::prop_assert_eq!(commits, p.waves + usize::from(p.first_token));
                let first = t.token_commit_nanos_since_request_start.first();
                proptest::prop_assert_eq!(r.ttft_us, first.map(|n| n / 1000));
                if commits > 0 {
                    proptest::prop_assert_eq!(r.output_tokens, Some(commits as u64));
                }
                proptest::prop_assert_eq!(r.itl_nanos.len(), commits.saturating_sub(1));
            } else {
                proptest::prop_assert!(timing.is_none());
                proptest::prop_assert_eq!(r.ttft_us, None);
            }
        }
        for rec in &doc.records {
            let id = rec.event.request_id.as_deref().unwrap();
            let i: usize = id.trim_start_matches("req-").parse().unwrap();
            proptest::prop_assert_eq!(&rec.event.shape["prompt_tokens"], &plans[i].prompt_tokens);
        }
    }
}
