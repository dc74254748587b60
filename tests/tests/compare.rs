//! `candle-trace compare` on the handwritten pair in `tests/fixtures/compare/`: every delta
//! equals the value computed by hand from the two files (see tests/fixtures/README.md), the
//! refusal names the differing meta field with both values, and the human output matches its
//! golden file.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use candle_trace_cli::run;
use candle_trace_tests::fixtures_dir;
use serde_json::{json, Value};

fn cli(args: &[&str]) -> (i32, String, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let mut argv = vec!["candle-trace"];
    argv.extend_from_slice(args);
    let code = run(argv, &mut out, &mut err);
    (
        code,
        String::from_utf8(out).expect("UTF-8"),
        String::from_utf8(err).expect("UTF-8"),
    )
}

const BASE: &str = "fixtures/compare/base.trace6.jsonl";
const CAND: &str = "fixtures/compare/cand.trace6.jsonl";
const OTHER: &str = "fixtures/compare/other_device.trace6.jsonl";

fn golden(name: &str, actual: &str) {
    let path = fixtures_dir().join("golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).expect("write golden");
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 creates it)", path.display()));
    assert_eq!(actual, want, "{} differs", path.display());
}

#[test]
fn deltas_equal_the_hand_computed_values() {
    let (code, stdout, stderr) = cli(&["compare", BASE, CAND, "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(v["mismatches"], json!([]));
    // The eight summary numbers: (field, base, cand, delta).
    let summary: Vec<(String, u64, u64, i64)> = v["summary"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["field"].as_str().unwrap().to_string(),
                s["base"].as_u64().unwrap(),
                s["cand"].as_u64().unwrap(),
                s["delta"].as_i64().unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, u64, u64, i64)> = [
        ("op_count", 3, 3, 0),
        ("total_ns", 100_000, 80_000, -20_000),
        ("span_count", 6, 7, 1),
        ("root_span_count", 1, 1, 0),
        ("max_depth", 2, 2, 0),
        ("alloc_count", 3, 3, 0),
        ("free_count", 1, 1, 0),
        ("peak_bytes", 2048, 1536, -512),
    ]
    .into_iter()
    .map(|(f, b, c, d)| (f.to_string(), b, c, d))
    .collect();
    assert_eq!(summary, want);
    assert_eq!(v["summary"][1]["percent"], json!(-20.0));
    assert_eq!(v["summary"][7]["percent"], json!(-25.0));

    // Span paths, sorted by |delta|: (path, n base, n cand, base ns, cand ns, delta, presence).
    let paths: Vec<(String, u64, u64, u64, u64, i64, String)> = v["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["path"].as_str().unwrap().to_string(),
                p["base_count"].as_u64().unwrap(),
                p["cand_count"].as_u64().unwrap(),
                p["base_ns"].as_u64().unwrap(),
                p["cand_ns"].as_u64().unwrap(),
                p["delta_ns"].as_i64().unwrap(),
                p["presence"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want: Vec<(String, u64, u64, u64, u64, i64, String)> = [
        ("step", 1, 1, 100_000, 80_000, -20_000, "both"),
        ("step/forward/linear", 2, 2, 35_000, 22_000, -13_000, "both"),
        ("step/forward", 1, 1, 40_000, 30_000, -10_000, "both"),
        ("step/optimizer", 1, 0, 6_000, 0, -6_000, "vanished"),
        ("step/backward", 1, 1, 50_000, 45_000, -5_000, "both"),
        ("step/forward/fused_gelu", 0, 1, 0, 4_000, 4_000, "new"),
        ("step/sgd", 0, 1, 0, 1_500, 1_500, "new"),
    ]
    .into_iter()
    .map(|(p, a, b, c, d, e, f)| (p.to_string(), a, b, c, d, e, f.to_string()))
    .collect();
    assert_eq!(paths, want);
    // 13 000 / 35 000 = 37.142857...%
    let linear = v["paths"][1]["percent"].as_f64().unwrap();
    assert!((linear - -37.142_857).abs() < 1e-4, "{linear}");
    assert_eq!(v["paths"][3]["percent"], json!(-100.0));
    assert_eq!(v["paths"][5]["percent"], Value::Null);

    // Modules by key (nesting paths: no module names here): the two `linear` places,
    // 20 000 → 12 000 ns and 15 000 → 10 000 ns; the `fused_gelu` op span is no module.
    let modules: Vec<(String, u64, u64, u64, u64, i64)> = v["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["path"].as_str().unwrap().to_string(),
                p["base_count"].as_u64().unwrap(),
                p["cand_count"].as_u64().unwrap(),
                p["base_ns"].as_u64().unwrap(),
                p["cand_ns"].as_u64().unwrap(),
                p["delta_ns"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        modules,
        [
            ("linear[0]".to_string(), 1, 1, 20_000, 12_000, -8_000),
            ("linear[1]".to_string(), 1, 1, 15_000, 10_000, -5_000),
        ]
    );

    // Ops by (name, shape, dtype).
    let ops: Vec<(String, String, u64, u64, i64, String)> = v["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            assert_eq!(o["shape"], json!([8, 16]));
            (
                o["op_name"].as_str().unwrap().to_string(),
                o["dtype"].as_str().unwrap().to_string(),
                o["base_ns"].as_u64().unwrap(),
                o["cand_ns"].as_u64().unwrap(),
                o["delta_ns"].as_i64().unwrap(),
                o["presence"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want: Vec<(String, String, u64, u64, i64, String)> = [
        ("matmul", "f32", 21_000, 13_000, -8_000, "both"),
        ("gelu", "bf16", 0, 2_000, 2_000, "new"),
        ("relu", "f32", 1_000, 0, -1_000, "vanished"),
    ]
    .into_iter()
    .map(|(a, b, c, d, e, f)| (a.to_string(), b.to_string(), c, d, e, f.to_string()))
    .collect();
    assert_eq!(ops, want);

    // Memory: peak 2048 (param 512 + activation 1024 + gradient 512) → 1536 (no gradient live).
    let m = &v["memory"];
    assert_eq!(
        (
            &m["base_peak_bytes"],
            &m["cand_peak_bytes"],
            &m["delta_bytes"]
        ),
        (&json!(2048), &json!(1536), &json!(-512))
    );
    let cats: Vec<(String, i64)> = m["by_category"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["category"].as_str().unwrap().to_string(),
                c["delta_bytes"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        cats,
        [
            ("parameter", 0),
            ("activation", 0),
            ("gradient", -512),
            ("optimizer", 0),
            ("other", 0)
        ]
        .map(|(c, d)| (c.to_string(), d))
    );

    // Gradients: only the two parameters whose state changed.
    assert_eq!(
        v["gradients"],
        json!([
            {"root": "m", "key": "new", "base": null, "cand": "present"},
            {"root": "m", "key": "w", "base": "present", "cand": "non_finite"},
        ])
    );

    let (code, human, _) = cli(&["compare", BASE, CAND]);
    assert_eq!(code, 0);
    golden("compare.base-cand.txt", &human);
}

#[test]
fn a_trace_compared_with_itself_has_no_delta() {
    let (code, stdout, _) = cli(&["compare", BASE, BASE, "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&stdout).unwrap();
    for s in v["summary"].as_array().unwrap() {
        assert_eq!(s["delta"], json!(0), "{s}");
    }
    for p in v["paths"].as_array().unwrap() {
        assert_eq!(
            (&p["delta_ns"], &p["presence"]),
            (&json!(0), &json!("both"))
        );
    }
    assert_eq!(v["gradients"], json!([]));
}

#[test]
fn a_category_whose_two_sides_sum_past_u64_is_still_listed() {
    // Baseline: a parameter of u64::MAX bytes; candidate: one of 1 byte. Their sum wraps, and
    // the row once vanished from "memory at the peak".
    let meta = r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#;
    let file = |bytes: u64| {
        format!(
            "{meta}\n{}\n{}\n{}\n",
            r#"{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
            format_args!(
                r#"{{"kind":"memory","timestamp_ns":1,"tensor_id":"t","span_id":"s","device":"cpu","bytes":{bytes},"action":"alloc","dtype":"f32","category":"parameter"}}"#
            ),
            r#"{"kind":"span_end","id":"s","duration_ns":100}"#,
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let (base, cand) = (dir.path().join("b.jsonl"), dir.path().join("c.jsonl"));
    std::fs::write(&base, file(u64::MAX)).unwrap();
    std::fs::write(&cand, file(1)).unwrap();
    let (code, stdout, err) = cli(&["compare", base.to_str().unwrap(), cand.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("parameter"))
        .collect();
    assert_eq!(rows.len(), 1, "{stdout}");
}

#[test]
fn differing_meta_is_refused_unless_forced() {
    let (code, stdout, stderr) = cli(&["compare", BASE, OTHER]);
    assert_eq!(code, 1);
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("device differs (baseline `cpu`, candidate `cuda:0`)"),
        "{stderr}"
    );
    assert!(stderr.contains("--force"), "{stderr}");
    let (code, stdout, _) = cli(&["compare", BASE, OTHER, "--force"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("warning: device differs"), "{stdout}");
    let (code, stdout, _) = cli(&["compare", BASE, OTHER, "--force", "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["forced"], json!(true));
    assert_eq!(
        v["mismatches"],
        json!([{"field": "device", "base": "cpu", "cand": "cuda:0"}])
    );
    // A Chrome import (phase infer, device unknown) against a training trace: refused, naming
    // every differing field.
    let (code, _, stderr) = cli(&["compare", BASE, "fixtures/candle_tracing.chrome.json"]);
    assert_eq!(code, 1);
    for field in ["entrypoint", "phase", "device"] {
        assert!(stderr.contains(&format!("{field} differs")), "{stderr}");
    }
    // A profile is not a trace: exit 2 naming the file.
    let (code, _, stderr) = cli(&["compare", BASE, "fixtures/infer_run.profile.jsonl"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("infer_run.profile.jsonl"), "{stderr}");
}
