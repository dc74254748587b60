//! Module paths, gradient groups, capture sources and inference-profile module spans through
//! the `candle-trace` CLI, on the fixtures of `tests/fixtures/modules/` (made by its
//! `make.py`; every expected number below is worked out by hand from that script).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use candle_trace_cli::run;
use candle_trace_tests::fixtures_dir;
use serde_json::{json, Value};

fn fixture(name: &str) -> String {
    fixtures_dir()
        .join("modules")
        .join(name)
        .to_string_lossy()
        .to_string()
}

fn cli(args: &[&str]) -> (i32, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut argv = vec!["candle-trace"];
    argv.extend_from_slice(args);
    let code = run(argv, &mut out, &mut err);
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

fn json_of(args: &[&str]) -> Value {
    let (code, out, err) = cli(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}\n{out}"))
}

const TRACE: &str = "llama_modules.trace6.jsonl";
const PROFILE: &str = "module_spans.profile.jsonl";

#[test]
fn modules_by_path_name_a_place_each() {
    let trace = fixture(TRACE);
    let v = json_of(&[
        "query", &trace, "--kind", "modules", "--limit", "100", "--json",
    ]);
    assert_eq!(v["by"], "path");
    let rows = v["modules"].as_array().unwrap();
    // 30 module spans, 30 places.
    assert_eq!(rows.len(), 30);
    // block[0]: 1000 ns; self = 1000 − (50 + 500 + 50 + 300) = 100; share 1000 / 10000
    // (the measured `update`). Ties with block[1] are broken by path.
    assert_eq!(
        rows[0],
        json!({"path": "block[0]", "calls": 1, "total_ns": 1000, "self_ns": 100,
               "mean_ns": 1000, "share": 0.1})
    );
    assert_eq!(rows[1]["path"], "block[1]");
    let paths: Vec<&str> = rows.iter().map(|r| r["path"].as_str().unwrap()).collect();
    for p in [
        "block[1]/rms-norm[1]",
        "block[1]/attn/linear[3]",
        "block[0]/attn/attn-rot[1]",
        "block[0]/mlp/linear[2]",
        "rms-norm",
        "linear",
    ] {
        assert!(paths.contains(&p), "{p} in {paths:?}");
    }

    // By name, `linear`: per block 4 × 40 + 3 × 90 = 430, two blocks 860, plus the head's 110
    // = 970 ns in 15 calls, mean 64 (integer), share 0.097.
    let v = json_of(&[
        "query", &trace, "--kind", "modules", "--by", "name", "--json",
    ]);
    let linear = v["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "linear")
        .unwrap()
        .clone();
    assert_eq!(
        linear,
        json!({"name": "linear", "calls": 15, "total_ns": 970, "self_ns": 970, "mean_ns": 64,
               "share": 0.097})
    );

    // The table says the same.
    let (code, text, _) = cli(&["query", &trace, "--kind", "modules", "--limit", "3"]);
    assert_eq!(code, 0);
    assert!(
        text.contains("30 module span(s) in 30 group(s) by path"),
        "{text}"
    );
    assert!(
        text.contains("block[0]") && text.contains("10.0%"),
        "{text}"
    );

    // `--by shape` is for ops only; `--by` on another kind is refused.
    assert_eq!(
        cli(&["query", &trace, "--kind", "modules", "--by", "shape"]).0,
        2
    );
    assert_eq!(
        cli(&["query", &trace, "--kind", "slowest", "--by", "name"]).0,
        2
    );
}

#[test]
fn ops_by_module_path() {
    let v = json_of(&[
        "query",
        &fixture(TRACE),
        "--kind",
        "ops",
        "--by",
        "path",
        "--json",
    ]);
    // One 30 ns matmul in each block's last attn linear (f32 [2, 8]: 2 × 8 × 4 = 64 B).
    assert_eq!(
        v["groups"],
        json!([
            {"path": "block[0]/attn/linear[3]", "count": 1, "total_ns": 30, "mean_ns": 30,
             "max_ns": 30, "output_bytes": 64},
            {"path": "block[1]/attn/linear[3]", "count": 1, "total_ns": 30, "mean_ns": 30,
             "max_ns": 30, "output_bytes": 64},
        ])
    );
}

#[test]
fn gradient_groups_and_finding() {
    let trace = fixture(TRACE);
    let v = json_of(&[
        "query",
        &trace,
        "--kind",
        "gradients",
        "--limit",
        "50",
        "--json",
    ]);
    let groups = v["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 21);
    assert_eq!(
        groups[0],
        json!({"root": "varmap", "module": "lm_head", "params": 1, "present": 1, "missing": 0,
               "zero": 0, "non_finite": 0, "flow": "none_missing"})
    );
    assert_eq!(groups[20]["module"], "model.norm");
    assert_eq!(groups[20]["flow"], "all_missing");
    let finding = "20 of 21 parameters have no gradient; only lm_head receives gradients; \
                   no gradient reaches 20 modules under model: model.embed_tokens, \
                   model.layers.0.input_layernorm, model.layers.0.mlp.down_proj, … and model.norm";
    assert_eq!(v["finding"], finding);
    // Existing fields are unchanged.
    assert_eq!(v["counts"]["missing"], 20);
    assert_eq!(v["gradients"].as_array().unwrap().len(), 21);

    let (code, text, _) = cli(&["query", &trace, "--kind", "gradients"]);
    assert_eq!(code, 0);
    assert!(text.contains(&format!("finding: {finding}")), "{text}");
    assert!(text.contains("by module (file order):"), "{text}");
    assert!(text.find("by module").unwrap() < text.find("parameters, problems first").unwrap());
}

#[test]
fn summary_says_what_was_captured() {
    let trace = fixture(TRACE);
    let (code, text, _) = cli(&["summary", &trace]);
    assert_eq!(code, 0);
    assert!(
        text.contains(
            "captured: tracing on (60 events), layer_ops on (2 events), allocator off, \
             gradients on (21 events)"
        ),
        "{text}"
    );
    assert!(
        text.contains("capture warning: only lm_head received a gradient"),
        "{text}"
    );
    assert!(text.contains("not captured (allocator off)"), "{text}");
    assert!(!text.contains("0 B"), "{text}");

    let v = json_of(&["summary", "--json", &trace]);
    assert_eq!(v["peak_bytes"], 0);
    assert_eq!(
        v["extra"]["capture_sources"]["sources"][2],
        json!({"source": "allocator", "on": false, "events": 0})
    );
    assert_eq!(
        v["extra"]["capture_sources"]["warnings"],
        json!(["only lm_head received a gradient"])
    );

    // The warning is a diagnostic of the file at the capture_sources line (the last, 89).
    let v = json_of(&["validate", "--json", &trace]);
    assert_eq!(
        v["diagnostics"],
        json!([{"line": 89, "severity": "warning", "category": "capture",
                "message": "capture: only lm_head received a gradient"}])
    );
}

#[test]
fn profile_module_spans() {
    let profile = fixture(PROFILE);
    assert_eq!(cli(&["validate", &profile]).0, 0);
    // r1: prefill + 1 decode step, r2: prefill; each call: `forward` (function) → block,
    // block (4000 ns each, a 3000 ns linear inside each), lm_head 1000 ns.
    let v = json_of(&["query", &profile, "--kind", "modules", "--json"]);
    let row = |path: &str, calls: u64, total: u64, mean: u64| json!({"path": path, "calls": calls, "total_ns": total, "mean_ns": mean, "requests": 2});
    assert_eq!(
        v["modules"],
        json!([
            row("block[0]", 3, 12000, 4000),
            row("block[1]", 3, 12000, 4000),
            row("block[0]/linear", 3, 9000, 3000),
            row("block[1]/linear", 3, 9000, 3000),
            row("lm_head", 3, 3000, 1000),
        ])
    );
    assert_eq!(v["requests"][0]["request_id"], "r1");
    assert_eq!(v["requests"][0]["forward_calls"], 2);
    assert_eq!(v["requests"][0]["modules"][0]["total_ns"], 8000);
    assert_eq!(v["requests"][1]["forward_calls"], 1);

    let v = json_of(&[
        "query", &profile, "--kind", "modules", "--by", "name", "--json",
    ]);
    let names: Vec<(String, u64, u64)> = v["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["calls"].as_u64().unwrap(),
                r["total_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("block".to_string(), 6, 24000),
            ("linear".to_string(), 6, 18000),
            ("lm_head".to_string(), 3, 3000)
        ]
    );

    // Module events are no request phase.
    let v = json_of(&["query", &profile, "--kind", "requests", "--json"]);
    assert_eq!(v["requests"][0]["phases"], json!(["request"]));
    assert_eq!(v["requests"][0]["duration_us"], 50);

    let (code, text, _) = cli(&["query", &profile, "--kind", "modules"]);
    assert_eq!(code, 0);
    assert!(
        text.contains("2 request(s), 3 forward call(s); all requests by path:"),
        "{text}"
    );
    assert!(text.contains("request r1 (2 forward call(s)):"), "{text}");
}
