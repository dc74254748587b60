//! `candle-trace steps` on `tests/fixtures/steps_outlier/` (five step files of one run, written
//! by `tests/fixtures/make_steps_fixtures.py`). Expected values worked out by hand from the
//! script's table:
//! - totals by capture step 2..6: 1000, 1020, 1010, 990, 1600 µs → sorted 990, 1000, 1010,
//!   1020, 1600; median (rank 3) 1010 µs, p90 (rank ceil(4.5) = 5) 1600 µs; |x − 1010| = 10,
//!   10, 0, 20, 590 → sorted 0, 10, 10, 20, 590, MAD 10 µs.
//! - step 6 is 590 µs > 3 × 10 µs from the median: the only outlier. backward 490, 500, 500,
//!   490, 1060 µs has median 500 µs, so step 6's backward is 560 µs above it (forward: 420 −
//!   400 = 20; other: 1600 − 420 − 1060 − 50 = 70 against a median 60, so 10); `enc` 300, 310,
//!   300, 290, 320 µs has median 300 µs, step 6 is 20 µs above.
//! - `enc` holds a tensor of shape [4, 16] in every step but step 4 ([6, 16]): shape churn.

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

#[test]
fn steps_json_gives_the_hand_computed_spread_outlier_and_churn() {
    let dir = fixtures_dir().join("steps_outlier");
    let (code, out, err) = cli(&["steps", dir.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let steps: Vec<(u64, u64)> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["capture_step"].as_u64().unwrap(),
                s["total_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            (2, 1_000_000),
            (3, 1_020_000),
            (4, 1_010_000),
            (5, 990_000),
            (6, 1_600_000)
        ]
    );
    assert_eq!(v["run_ids"], json!(["steps-outlier"]));
    assert_eq!(
        v["total"],
        json!({"count": 5, "min": 990_000, "median": 1_010_000, "p90": 1_600_000, "max": 1_600_000, "mad": 10_000})
    );
    let backward = v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "backward")
        .unwrap();
    assert_eq!(backward["spread"]["median"], 500_000);
    assert_eq!(
        v["outliers"],
        json!([{
            "step": 4, "capture_step": 6, "total_ns": 1_600_000, "excess_ns": 590_000,
            "phase": ["backward", 560_000], "module_paths": [["enc", 20_000]]
        }])
    );
    assert_eq!(
        v["shape_churn"],
        json!([{"path": "enc", "variants": [[[[4, 16]], [0, 1, 3, 4]], [[[6, 16]], [2]]]}])
    );
}

#[test]
fn steps_text_names_the_outlier_and_the_churn() {
    let dir = fixtures_dir().join("steps_outlier");
    let (code, out, _) = cli(&["steps", dir.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(
        out.contains("total: median 1.01 ms · p90 1.60 ms · MAD 10.0 µs\n"),
        "{out}"
    );
    assert!(
        out.contains("step 6: 1.60 ms (+590 µs from the median); backward +560 µs; enc +20.0 µs\n"),
        "{out}"
    );
    assert!(
        out.contains("enc: [4, 16] in step(s) 2,3,5,6 | [6, 16] in step(s) 4\n"),
        "{out}"
    );
}

#[test]
fn too_few_steps_say_so_and_profiles_are_refused() {
    let base = fixtures_dir().join("steps_base");
    let one = base.join("step-2.trace6.jsonl");
    let two = base.join("step-3.trace6.jsonl");
    let (code, out, _) = cli(&["steps", one.to_str().unwrap(), two.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(
        out.contains("not computed: 2 step(s): outlier steps need at least 3\n"),
        "{out}"
    );
    let profile = fixtures_dir().join("infer_run.profile.jsonl");
    let (code, _, err) = cli(&["steps", profile.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("steps reads execution traces"), "{err}");
}
