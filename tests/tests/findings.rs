//! `candle-trace findings --json` on fixtures whose findings were worked out by hand
//! (`tests/fixtures/make_findings_fixtures.py` says what each file holds):
//! - `findings_train.trace6.jsonl`: backward 100 µs < forward 700 µs / 2 → `backward_short`,
//!   at stake 700 − 100 = 600 µs, 100 / 700 = 14 %; `attn` 550 µs > 1000 µs / 2 →
//!   `dominant_module` (55 %); forward 700 µs > 1000 µs / 2 → `dominant_phase` (70 %), at
//!   stake 700 − (1000 − 700) = 400 µs; the peak is the 4096-byte activation alive from 100 ns
//!   to 800 000 ns (the optimizer's 1024 bytes come after its free), at 100 ns inside `forward`
//!   → `memory_peak`; `mlp.fc.weight` and `mlp.fc.bias` missing → `gradients_missing` at
//!   `mlp.fc` (root `model`), 2 parameters. Ranked: 600 µs, 550 µs, 400 µs, then bytes, then
//!   counts.
//! - `findings_infer.profile.jsonl`: TTFT sorted 1000, 1100, 1200, 5000 µs: p50 rank 2 → 1100,
//!   p90 rank ceil(3.6) = 4 → 5000, p99 → 5000 > 2 × 1100 → `ttft_tail`, at stake
//!   (5000 − 1100) µs = 3.9 ms; req-4 (prompt 2048) is at the p90; prompts sorted 16, 16, 32,
//!   2048 → median 16. req-1's ITL halves: mean 100 µs then 200 µs, 200 > 1.5 × 100 →
//!   `itl_drift`, at stake (200 − 100) µs × 2 = 200 µs.
//! - `steps_outlier/`: step 6, 590 µs above the median, mostly backward (see steps.rs).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use candle_trace_cli::run;
use candle_trace_tests::fixtures_dir;
use serde_json::{json, Value};

fn findings(file: &str) -> Value {
    let path = fixtures_dir().join(file);
    let mut out = Vec::new();
    let mut err = Vec::new();
    let code = run(
        ["candle-trace", "findings", path.to_str().unwrap(), "--json"],
        &mut out,
        &mut err,
    );
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    serde_json::from_slice(&out).unwrap()
}

/// (rule, stake) of each finding, in rank order.
fn ranked(v: &Value) -> Vec<(String, Value)> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["rule"].as_str().unwrap().to_string(), f["stake"].clone()))
        .collect()
}

#[test]
fn training_findings_are_the_hand_computed_ones_in_rank_order() {
    let v = findings("findings_train.trace6.jsonl");
    assert_eq!(
        ranked(&v),
        [
            ("backward_short".to_string(), json!({"ns": 600_000})),
            ("dominant_module".to_string(), json!({"ns": 550_000})),
            ("dominant_phase".to_string(), json!({"ns": 400_000})),
            ("memory_peak".to_string(), json!({"bytes": 4096})),
            ("gradients_missing".to_string(), json!({"count": 2})),
        ]
    );
    let f = &v["findings"];
    assert_eq!(
        f[0]["title"],
        "backward takes 14% of the forward time: gradients reach few parameters"
    );
    assert_eq!(f[0]["link"], json!({"to": "span", "id": "s", "line": 2}));
    assert_eq!(f[1]["title"], "attn takes 55% of the step");
    assert_eq!(
        f[1]["link"],
        json!({"to": "row", "table": "modules", "key": "attn"})
    );
    // Forward 700, backward 100, optimizer 50, other 150 of the 1000 µs step.
    assert_eq!(f[2]["title"], "forward takes 70% of the step");
    assert_eq!(
        f[2]["evidence"],
        json!([
            "forward 700 µs (70%)",
            "backward 100 µs (10%)",
            "optimizer 50.0 µs (5%)",
            "other 150 µs (15%)",
            "measured step 1.00 ms"
        ])
    );
    assert_eq!(
        f[2]["link"],
        json!({"to": "row", "table": "phases", "key": "forward"})
    );
    assert_eq!(
        f[3]["title"],
        "memory peaks at 4.00 KiB in forward, held mostly by activations (kept for backward)"
    );
    assert_eq!(
        f[4]["title"],
        "2 parameter(s) in 1 module(s) get no gradient"
    );
    assert_eq!(
        f[4]["evidence"],
        json!(["mlp.fc: 2 of 2 parameter(s) missing"])
    );
    assert_eq!(v["notes"], json!([]));
}

#[test]
fn inference_findings_are_the_hand_computed_ones() {
    let v = findings("findings_infer.profile.jsonl");
    assert_eq!(
        ranked(&v),
        [
            ("ttft_tail".to_string(), json!({"ns": 3_900_000})),
            ("itl_drift".to_string(), json!({"ns": 200_000})),
        ]
    );
    let tail = &v["findings"][0];
    assert_eq!(
        tail["title"],
        "TTFT p99 (5000 µs) is 4.5× the p50 (1100 µs)"
    );
    assert_eq!(
        tail["evidence"],
        json!([
            "TTFT p50 1100 µs, p90 5000 µs, p99 5000 µs over 4 request(s)",
            "req-4: TTFT 5000 µs, prompt 2048 tokens",
            "median prompt 16 tokens"
        ])
    );
    assert_eq!(
        v["findings"][1]["title"],
        "inter-token latency of req-1 drifts from 100 µs to 200 µs over the request"
    );
}

#[test]
fn an_outlier_step_is_a_finding_over_a_step_directory() {
    let v = findings("steps_outlier");
    let f = &v["findings"][0];
    assert_eq!(f["rule"], "outlier_step");
    assert_eq!(f["stake"], json!({"ns": 590_000}));
    assert_eq!(
        f["title"],
        "step 6 is an outlier: 590 µs from the median, mostly in backward"
    );
    assert_eq!(
        f["link"],
        json!({"to": "row", "table": "steps", "key": "6"})
    );
}

#[test]
fn rules_with_too_little_data_say_so() {
    // broken_lenient: one request with a TTFT, whose itl_nanos has 2 intervals.
    let v = findings("broken_lenient.profile.jsonl");
    assert_eq!(v["findings"], json!([]));
    assert_eq!(
        v["notes"],
        json!([
            "ttft_tail: 1 request(s) with a TTFT, the rule needs 3",
            "itl_drift: no request has the 4 inter-token intervals the rule needs",
            // Its prefill starts after its open: it queued, but one request is too few.
            "queueing_ttft: 1 request(s) with a TTFT and a place on the time axis, the rule needs 3"
        ])
    );
    // Two steps are too few for outliers; a trace without gradient records says so.
    let base = fixtures_dir().join("steps_base");
    let mut out = Vec::new();
    let code = run(
        [
            "candle-trace".to_string(),
            "findings".to_string(),
            base.join("step-2.trace6.jsonl").display().to_string(),
            base.join("step-3.trace6.jsonl").display().to_string(),
            "--json".to_string(),
        ],
        &mut out,
        &mut Vec::new(),
    );
    assert_eq!(code, 0);
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        v["notes"],
        json!([
            "gradients_missing: the trace has no gradient records",
            "outlier_step: 2 step(s): outlier steps need at least 3"
        ])
    );
}
