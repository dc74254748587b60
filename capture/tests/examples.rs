//! Runs the `train_mlp` and `generate` examples in-process, then reads each file they wrote
//! with the schema's `AnyReader` and with the `candle-trace` CLI (`validate --json`,
//! `summary --json`), and checks that the files are clean and that their numbers are what the
//! examples themselves counted.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

#[path = "../examples/train_mlp.rs"]
#[allow(dead_code)]
mod train_mlp;

#[path = "../examples/generate.rs"]
#[allow(dead_code)]
mod generate;

mod common;

use std::path::Path;

use candle_trace_capture::alloc::TrackingAllocator;
use candle_trace_schema::diagnostics::Severity;
use candle_trace_schema::events::{GradientState, Step};
use candle_trace_schema::format::{AnyDocument, AnyReader};
use candle_trace_schema::profile::Status;
use serde_json::Value;

// The examples install this allocator in their own binaries; included as modules, they leave
// it to the test binary.
#[global_allocator]
static ALLOC: TrackingAllocator = TrackingAllocator::system();

/// Read `path` with the streaming reader, in small chunks.
fn read_any(path: &Path) -> AnyDocument {
    let bytes = std::fs::read(path).unwrap();
    let mut reader = AnyReader::new();
    for chunk in bytes.chunks(4096) {
        reader.push(chunk);
    }
    reader.finish()
}

/// Run the CLI; returns (exit code, stdout parsed as JSON).
fn cli_json(command: &str, path: &Path) -> (i32, Value) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = candle_trace_capture::cli::run(
        ["candle-trace", command, "--json", path.to_str().unwrap()],
        &mut out,
        &mut err,
    );
    assert!(err.is_empty(), "stderr: {}", String::from_utf8_lossy(&err));
    (code, serde_json::from_slice(&out).unwrap())
}

/// `validate --json` exits 0 with no diagnostic at all.
fn assert_cli_validates_clean(path: &Path, format: &str) {
    let (code, v) = cli_json("validate", path);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["format"], format);
    assert_eq!(v["errors"], 0, "{v:#}");
    assert_eq!(v["warnings"], 0, "{v:#}");
    assert_eq!(v["diagnostics"].as_array().map(Vec::len), Some(0));
}

#[test]
fn train_mlp_trace_is_clean_and_matches_what_the_example_counted() {
    let dir = common::temp_dir("example-train-mlp");
    let out = dir.join("train.trace6.jsonl");
    let train_mlp::Outcome {
        counts,
        report,
        losses,
    } = train_mlp::run(&out).unwrap();

    // Atomic publication: the final name exists, the temporary one is gone.
    assert_eq!(report.path.as_deref(), Some(out.as_path()));
    assert!(!candle_trace_capture::writer::temporary_path(&out).exists());
    assert_eq!(report.events_dropped, 0);
    assert!(report.notes.is_empty(), "{:?}", report.notes);
    assert_eq!(losses.len(), 4);
    assert!(losses.iter().all(|l| l.is_finite()));

    // What the example did, by construction: 7 forward ops + 4 AdamW ops for each of the 4
    // trained parameters; spans train_step, forward, fc1, fc2, backward, optimizer; one
    // checkpoint at each edge of the 3 step spans; activations and gradients and optimizer
    // temporaries all freed in the step.
    assert_eq!(counts.op_count, 7 + 4 * 4);
    assert_eq!(counts.span_count, 6);
    assert_eq!(counts.device_memory_count, 6);
    assert_eq!(counts.alloc_count, 7 + 4 + 4 * 4);
    assert_eq!(counts.alloc_count, counts.free_count);
    // 4 gradients, 5 parameters, 2 moments for each of the 4 trained parameters.
    assert_eq!(counts.tensor_count, 4 + 5 + 8);
    assert_eq!(counts.gradients.present, 4, "fc1/fc2 weight and bias");
    assert_eq!(counts.gradients.missing, 1, "frozen.scale");
    assert_eq!(counts.gradients.zero + counts.gradients.non_finite, 0);
    // The recorder wrote every event the example asked for, plus the meta line.
    let asked = 2 * counts.span_count
        + counts.op_count
        + counts.tensor_count
        + counts.alloc_count
        + counts.free_count
        + counts.device_memory_count
        + counts.gradients.total();
    assert_eq!(report.events_written, 1 + asked);

    // The schema reader.
    let doc = match read_any(&out) {
        AnyDocument::Trace(doc) => doc,
        other => panic!("not a trace: {:?}", other.format()),
    };
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    let meta = &doc.meta.as_ref().unwrap().event;
    assert_eq!(meta.entrypoint, "train_mlp::train_step");
    assert_eq!((meta.capture_step, meta.warmup_steps), (2, 1));
    assert_eq!(meta.device, "cpu");
    assert!(meta.measured_region_device_synchronized);
    for tag in ["batch_size", "lr", "hidden"] {
        assert!(meta.tags.contains_key(tag), "tag {tag}");
    }
    assert_eq!(meta.tags["batch_size"], "32");
    assert!(meta.candle_version.as_deref().unwrap().starts_with("0.11"));

    let summary = doc.summary();
    assert_eq!(summary.op_count, counts.op_count);
    assert_eq!(summary.span_count, counts.span_count);
    assert_eq!(summary.alloc_count, counts.alloc_count);
    assert_eq!(summary.free_count, counts.free_count);
    assert_eq!(doc.tensors.len() as u64, counts.tensor_count);
    assert_eq!(doc.device_memory.len() as u64, counts.device_memory_count);
    assert_eq!(summary.root_span_count, 1);
    assert_eq!(summary.max_depth, 2, "train_step > forward > fc1");
    assert!(summary.total_ns > 0);
    assert!(
        summary.total_ns <= counts.measured_outer_ns,
        "measured span {} ns inside the example's own {} ns",
        summary.total_ns,
        counts.measured_outer_ns
    );
    assert!(summary.peak_bytes > 0);
    assert!(doc.device_memory.iter().all(|m| m.event.device == "cpu"));

    let measured: Vec<_> = doc.spans.iter().filter(|s| s.measured).collect();
    assert_eq!(measured.len(), 1);
    assert_eq!(measured[0].name, "train_step");
    for (name, step) in [
        ("forward", Step::Forward),
        ("backward", Step::Backward),
        ("optimizer", Step::Optimizer),
    ] {
        let span = doc.spans.iter().find(|s| s.name == name).unwrap();
        assert_eq!(span.step, Some(step));
        assert_eq!(
            common::parent_name(&doc, name).as_deref(),
            Some("train_step")
        );
    }
    assert_eq!(common::parent_name(&doc, "fc1").as_deref(), Some("forward"));
    // The optimizer's ops are in the optimizer span.
    let optimizer = doc.spans.iter().find(|s| s.name == "optimizer").unwrap();
    let optimizer_ops = doc
        .ops
        .iter()
        .filter(|o| o.event.span_id == optimizer.id)
        .count();
    assert_eq!(optimizer_ops, 16);

    let by_state = |state| {
        doc.gradients
            .iter()
            .filter(|g| g.event.state == state)
            .count() as u64
    };
    for state in [
        GradientState::Present,
        GradientState::Missing,
        GradientState::Zero,
        GradientState::NonFinite,
    ] {
        assert_eq!(by_state(state), counts.gradients.get(state), "{state:?}");
    }
    let missing: Vec<&str> = doc
        .gradients
        .iter()
        .filter(|g| g.event.state == GradientState::Missing)
        .map(|g| g.event.key.as_str())
        .collect();
    assert_eq!(missing, vec!["frozen.scale"]);
    assert!(doc
        .gradients
        .iter()
        .filter(|g| g.event.state == GradientState::Present)
        .all(|g| g.event.norm.is_some_and(|n| n.is_finite() && n > 0.0)));

    // The CLI.
    assert_cli_validates_clean(&out, "candle-graph/trace/6");
    let (code, s) = cli_json("summary", &out);
    assert_eq!(code, 0);
    assert_eq!(s["op_count"], counts.op_count);
    assert_eq!(s["span_count"], counts.span_count);
    assert_eq!(s["alloc_count"], counts.alloc_count);
    assert_eq!(s["free_count"], counts.free_count);
    assert_eq!(s["total_ns"], summary.total_ns);
    assert_eq!(s["extra"]["errors"], 0);
    assert_eq!(s["extra"]["warnings"], 0);
}

#[test]
fn generate_profile_is_clean_and_matches_what_the_example_counted() {
    let dir = common::temp_dir("example-generate");
    let out = dir.join("infer.profile.jsonl");
    let outcome = generate::run(&out).unwrap();
    let report = &outcome.report;

    // What the example did, by construction.
    let tokens: Vec<u64> = outcome.requests.iter().map(|r| r.tokens).collect();
    assert_eq!(tokens, vec![8, 4, 12, 0]);
    let failed: Vec<bool> = outcome.requests.iter().map(|r| r.failed).collect();
    assert_eq!(failed, vec![false, false, false, true]);
    // open + prefill + memory + (tokens − 1) waves + close; the refused one: open, error, close.
    for r in &outcome.requests {
        let want = if r.failed { 3 } else { r.tokens + 3 };
        assert_eq!(r.events, want, "{}", r.request_id);
    }
    // The profiler wrote every event the example asked for, all valid.
    assert_eq!(report.events_written, outcome.events());
    assert_eq!(report.events_dropped, 0);
    assert_eq!(report.events_invalid, 0, "{:?}", report.invalid_messages);
    assert_eq!(report.requests_sampled, 4);
    assert_eq!(report.requests_skipped, 0);

    // The schema reader.
    let doc = match read_any(&out) {
        AnyDocument::Profile(doc) => doc,
        other => panic!("not a profile: {:?}", other.format()),
    };
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    assert!(doc.records.iter().all(|r| r.is_valid()));
    let summary = doc.summary();
    assert_eq!(summary.request_count, outcome.requests.len() as u64);
    assert_eq!(summary.event_count, outcome.events());
    assert_eq!(summary.invalid_event_count, 0);
    assert_eq!(
        summary.error_count, 2,
        "the error event and the failed close"
    );
    assert_eq!(summary.memory_snapshot_count, 3, "one per served request");
    let waves: u64 = outcome
        .requests
        .iter()
        .filter(|r| !r.failed)
        .map(|r| r.tokens - 1)
        .sum();
    assert_eq!(summary.events_by_kind["timed_span"], 3 + waves + 4);
    assert_eq!(summary.events_by_kind["instant"], 4);
    assert_eq!(summary.events_by_kind["error"], 1);
    assert_eq!(summary.events_by_kind["memory"], 3);
    assert_eq!(summary.ttft_us.map(|p| p.count), Some(3));

    let requests = doc.requests();
    assert_eq!(requests.len(), outcome.requests.len());
    for (seen, counted) in requests.iter().zip(&outcome.requests) {
        let id = &counted.request_id;
        assert_eq!(&seen.request_id, id);
        assert_eq!(seen.event_count, counted.events, "{id}");
        // The request's closing event carries the derived attributes.
        let close = doc
            .records
            .iter()
            .find(|r| {
                r.event.request_id.as_deref() == Some(id.as_str())
                    && r.event.phase.as_deref() == Some("request")
            })
            .unwrap();
        let attrs = &close.event.attributes;
        assert_eq!(
            attrs["engine_token_commit_count"], counted.tokens,
            "{id}: engine_token_commit_count"
        );
        if counted.failed {
            assert_eq!(seen.status, Status::Failure, "{id}");
            assert_eq!(seen.ttft_us, None);
            assert_eq!(
                close.event.error.as_ref().and_then(|e| e.kind.as_deref()),
                Some("context_overflow")
            );
            continue;
        }
        assert_eq!(seen.status, Status::Ok, "{id}");
        assert_eq!(seen.output_tokens, Some(counted.tokens), "{id}");
        assert_eq!(attrs["itl_interval_count"], counted.tokens - 1);
        assert_eq!(attrs["decode_wall_timing_eligible"], true, "{id}");
        // The profile's TTFT and ITLs fall inside the example's own Instant brackets.
        let (lo, hi) = counted.ttft_ns_bounds().unwrap();
        let ttft_us = seen.ttft_us.unwrap();
        assert!(
            lo / 1000 <= ttft_us && ttft_us <= hi / 1000,
            "{id}: ttft {ttft_us} µs outside [{lo}, {hi}] ns"
        );
        let bounds = counted.itl_ns_bounds();
        assert_eq!(seen.itl_nanos.len(), bounds.len(), "{id}");
        for (itl, (lo, hi)) in seen.itl_nanos.iter().zip(bounds) {
            assert!(
                lo <= *itl && *itl <= hi,
                "{id}: itl {itl} ns outside [{lo}, {hi}]"
            );
        }
    }

    // The CLI.
    assert_cli_validates_clean(&out, "inference profile (schema_version 1)");
    let (code, s) = cli_json("summary", &out);
    assert_eq!(code, 0);
    assert_eq!(s["request_count"], outcome.requests.len() as u64);
    assert_eq!(s["event_count"], outcome.events());
    assert_eq!(s["invalid_event_count"], 0);
    assert_eq!(s["error_count"], 2);
    let (code, q) = {
        let (mut o, mut e) = (Vec::new(), Vec::new());
        let code = candle_trace_capture::cli::run(
            [
                "candle-trace",
                "query",
                out.to_str().unwrap(),
                "--kind",
                "requests",
                "--json",
            ],
            &mut o,
            &mut e,
        );
        (code, serde_json::from_slice::<Value>(&o).unwrap())
    };
    assert_eq!(code, 0);
    let rows = q["requests"].as_array().unwrap();
    assert_eq!(rows.len(), outcome.requests.len());
    for (row, counted) in rows.iter().zip(&outcome.requests) {
        assert_eq!(row["request_id"], counted.request_id.as_str());
        if !counted.failed {
            assert_eq!(row["output_tokens"], counted.tokens);
        }
    }
}

#[test]
fn severity_is_what_validate_counts() {
    // Guard for the helpers above: a broken file makes `validate` exit 1.
    let dir = common::temp_dir("example-broken");
    let path = dir.join("broken.jsonl");
    std::fs::write(&path, "{\"kind\":\"span_end\",\"id\":\"s1\"}\n").unwrap();
    let (code, v) = cli_json("validate", &path);
    assert_eq!(code, 1);
    assert!(v["errors"].as_u64().unwrap() > 0);
    let AnyDocument::Trace(doc) = read_any(&path) else {
        panic!("not a trace")
    };
    assert!(doc
        .diagnostics
        .iter()
        .any(|d| d.severity == Severity::Error));
}
