//! Batched serving through the `candle-trace` CLI, on `tests/fixtures/serving/batched.profile.jsonl`
//! (made by its `make.py`): every number below is worked out by hand from that script.
//!
//! The engine `engine-0` serves `a` (5-token prompt), `b` (4) and `c` (6) in five forwards
//! (ms from the first forward's start): 0–2 prefill a, b; 2–3 and 3–4 decode a, b; 4.5–6
//! prefill c, decode b; 6–7 decode c. `d` (40 tokens) is rejected. A pool of 8 KV blocks:
//! a reserves 4, b 3, c is deferred twice (1 free), then reserves 3 once a releases; b releases
//! 4 of its 3; c never releases.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use candle_trace_cli::run;
use candle_trace_tests::fixtures_dir;
use serde_json::Value;

fn cli(args: &[&str]) -> (i32, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let mut argv = vec!["candle-trace"];
    argv.extend_from_slice(args);
    let code = run(argv, &mut out, &mut err);
    assert!(err.is_empty(), "{}", String::from_utf8_lossy(&err));
    (code, String::from_utf8(out).unwrap())
}

fn fixture() -> String {
    fixtures_dir()
        .join("serving/batched.profile.jsonl")
        .to_string_lossy()
        .to_string()
}

fn json(args: &[&str]) -> Value {
    let (code, out) = cli(args);
    assert_eq!(code, 0);
    serde_json::from_str(&out).unwrap()
}

#[test]
fn the_fixture_is_valid_and_its_engine_is_no_request() {
    let f = fixture();
    let (code, out) = cli(&["validate", &f]);
    assert_eq!(code, 0);
    assert!(out.contains("0 error(s), 0 warning(s)"), "{out}");
    let v = json(&["query", &f, "--kind", "requests", "--json"]);
    let ids: Vec<&str> = v["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["request_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "b", "c", "d"]);
    let summary = json(&["summary", &f, "--json"]);
    assert_eq!(summary["request_count"], 4);
    assert_eq!(summary["iteration_count"], 5);
}

#[test]
fn iterations_in_time_order_with_their_distribution() {
    let f = fixture();
    let v = json(&["query", &f, "--kind", "iterations", "--json"]);
    let rows = v["iterations"].as_array().unwrap();
    let got: Vec<(u64, u64, u64, u64, u64, u64)> = rows
        .iter()
        .map(|r| {
            let n = |k: &str| r[k].as_u64().unwrap();
            (
                n("iteration"),
                n("batch_size"),
                n("prefill_tokens"),
                n("decode_tokens"),
                n("duration_ns"),
                n("tokens_per_s"),
            )
        })
        .collect();
    // tokens/s: 9 / 2 ms = 4500; 2 / 1 ms = 2000; 7 / 1.5 ms = 4666 (rounded down); 1 / 1 ms.
    assert_eq!(
        got,
        [
            (0, 2, 9, 0, 2_000_000, 4500),
            (1, 2, 0, 2, 1_000_000, 2000),
            (2, 2, 0, 2, 1_000_000, 2000),
            (3, 2, 6, 1, 1_500_000, 4666),
            (4, 1, 0, 1, 1_000_000, 1000),
        ]
    );
    // Batch sizes [1, 2, 2, 2, 2]: p50 rank 3 → 2, p90 rank 5 → 2. Forward times sorted
    // [1, 1, 1, 1.5, 2] ms: p50 1 ms, p90 2 ms.
    assert_eq!(
        (
            v["batch_size"]["p50"].as_u64(),
            v["batch_size"]["p90"].as_u64()
        ),
        (Some(2), Some(2))
    );
    assert_eq!(
        (
            v["duration_ns"]["p50"].as_u64(),
            v["duration_ns"]["p90"].as_u64()
        ),
        (Some(1_000_000), Some(2_000_000))
    );
    assert_eq!(v["count"], 5);
    assert_eq!(rows[3]["requests"][0]["request_id"], "c");
    let (_, text) = cli(&["query", &f, "--kind", "iterations"]);
    assert!(
        text.starts_with(
            "5 forward(s): batch size p50 2, p90 2; forward time p50 1.00 ms, p90 2.00 ms"
        ),
        "{text}"
    );
    assert!(text.contains("engine-0          3  +4.50 ms   1.50 ms      2        6       1          2      4666  ok"), "{text}");
}

#[test]
fn resources_occupancy_holders_reasons_and_errors() {
    let f = fixture();
    let v = json(&["query", &f, "--kind", "resources", "--json"]);
    let kv = &v["resources"][0];
    assert_eq!(kv["resource_kind"], "kv_blocks");
    assert_eq!(kv["capacity"], 8);
    let levels: Vec<i64> = kv["occupancy"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["level"].as_i64().unwrap())
        .collect();
    // snapshot 0, a +4, b +3, c deferred, d rejected, c deferred, a −4, c +3, b −4 (level 2).
    assert_eq!(levels, [0, 4, 7, 7, 7, 7, 3, 6, 2]);
    assert_eq!(kv["peak"]["level"], 7);
    assert_eq!(kv["peak"]["line"], 5);
    let holders: Vec<(String, i64, i64, i64, u64, u64)> = kv["holders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["holder"].as_str().unwrap().to_string(),
                h["reserved"].as_i64().unwrap(),
                h["released"].as_i64().unwrap(),
                h["held"].as_i64().unwrap(),
                h["deferrals"].as_u64().unwrap(),
                h["rejections"].as_u64().unwrap(),
            )
        })
        .collect();
    let h = |id: &str, r, rel, held, d, rej| (id.to_string(), r, rel, held, d, rej);
    assert_eq!(
        holders,
        [
            h("a", 4, 4, 0, 0, 0),
            h("b", 3, 4, 0, 0, 0),
            h("c", 3, 0, 3, 2, 0),
            h("d", 0, 0, 0, 0, 1)
        ]
    );
    assert_eq!(
        (kv["deferrals"].as_u64(), kv["rejections"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(kv["reasons"][0]["reason"], "kv_blocks: 3 needed, 1 free");
    assert_eq!(kv["reasons"][0]["count"], 2);
    assert_eq!(kv["underflows"][0]["holder"], "b");
    assert_eq!(kv["underflows"][0]["amount"], 1);
    assert_eq!(kv["leaks"][0]["holder"], "c");
    assert_eq!(kv["leaks"][0]["held"], 3);
    let (_, text) = cli(&["query", &f, "--kind", "resources"]);
    assert!(text.contains("kv_blocks: capacity 8, peak 7; 2 deferral(s), 1 rejection(s), 1 underflow(s), 1 never released"), "{text}");
    assert!(
        text.contains("UNDERFLOW line 21: b went 1 below 0 (release_exceeds_holding)"),
        "{text}"
    );
    assert!(text.contains("NEVER RELEASED: c still holds 3"), "{text}");
}

#[test]
fn serving_findings_rank_queueing_first() {
    let f = fixture();
    let v = json(&["findings", &f, "--json"]);
    let rules: Vec<(&str, &Value)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["rule"].as_str().unwrap(), &f["stake"]))
        .collect();
    // Queueing: a 1 ms of its 3 ms TTFT, b 0.8 of 2.8, c 5.1 of 6.6: 6.9 of 12.4 ms (> half).
    // TTFT tail: [2800, 3000, 6600] µs, p50 3000, p99 6600 > 2 × 3000: 3.6 ms at stake.
    // Under-fill: forward 4 (batch 1 ≤ p50 2 / 2), 1 ms × (2 − 1) / 2 = 0.5 ms.
    // KV pressure: 2 deferrals + 1 rejection; accounting: b's underflow and c's blocks.
    let expected = [
        ("queueing_ttft", serde_json::json!({"ns": 6_900_000})),
        ("ttft_tail", serde_json::json!({"ns": 3_600_000})),
        ("batch_underfill", serde_json::json!({"ns": 500_000})),
        ("kv_pressure", serde_json::json!({"count": 3})),
        ("resource_accounting", serde_json::json!({"count": 2})),
    ];
    assert_eq!(rules.len(), expected.len(), "{v}");
    for ((rule, stake), (want_rule, want_stake)) in rules.iter().zip(&expected) {
        assert_eq!(rule, want_rule);
        assert_eq!(*stake, want_stake);
    }
    let (_, text) = cli(&["findings", &f]);
    assert!(
        text.contains("[kv_pressure; at stake 3 deferral(s) and rejection(s)]"),
        "{text}"
    );
    assert!(
        text.contains("requests wait in the queue for 56% of their time to first token"),
        "{text}"
    );
}

#[test]
fn otlp_export_links_each_request_to_the_forwards_that_served_it() {
    let f = fixture();
    let dir = std::env::temp_dir().join(format!("ct-serving-otlp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("batched.otlp.json");
    let (code, _) = cli(&[
        "export",
        &f,
        "--format",
        "otlp",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let spans = v["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap();
    let forwards: Vec<&Value> = spans.iter().filter(|s| s["name"] == "iteration").collect();
    assert_eq!(forwards.len(), 5);
    // Parts: a 3 forwards, b 4, c 2.
    let linked: Vec<&Value> = spans.iter().filter(|s| s.get("links").is_some()).collect();
    assert_eq!(linked.len(), 9);
    for part in &linked {
        let target = &part["links"][0];
        assert!(forwards
            .iter()
            .any(|f| f["spanId"] == target["spanId"] && f["traceId"] == target["traceId"]));
    }
    // Forward 1's module spans are in its trace, under it.
    let block = spans.iter().find(|s| s["name"] == "block").unwrap();
    assert_eq!(block["traceId"], forwards[1]["traceId"]);
    assert_eq!(block["parentSpanId"], forwards[1]["spanId"]);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_batched_forwards_module_spans_are_the_engines() {
    let f = fixture();
    // make.py: forward 1 (3.0–4.0 ms) wrote `block` (800 µs) > `linear` (300 µs) once, for the
    // engine: 1 forward call of the engine, none of a request; 800 of its 1000 µs covered.
    let (code, text) = cli(&["query", &f, "--kind", "modules"]);
    assert_eq!(code, 0);
    assert!(
        text.starts_with("1 engine(s), 1 forward call(s);"),
        "{text}"
    );
    assert!(
        text.contains("engine engine-0 (1 forward call(s)): modules cover 80% of forward"),
        "{text}"
    );
    assert!(!text.contains("request engine-0"), "{text}");
    let v = json(&["query", &f, "--kind", "modules", "--json"]);
    let owners: Vec<(&str, bool)> = v["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["request_id"].as_str().unwrap(),
                r["engine"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(owners, [("engine-0", true)]);
}
