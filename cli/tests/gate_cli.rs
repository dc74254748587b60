//! `candle-trace compare --fail-if` run as the built binary on the step fixtures
//! (`tests/fixtures/steps_*`, written by `tests/fixtures/make_steps_fixtures.py`): every exit
//! code of the gate, and the lines it prints. Expected values worked out by hand:
//! - `steps_base` totals 1000, 1040, 960, 1100, 990 µs: sorted 960 … 1100, median 1000 µs;
//!   |x − 1000| = 0, 40, 40, 100, 10 → sorted 0, 10, 40, 40, 100, MAD 40 µs.
//! - `steps_cand_noisy` 1080, 1070, 1090 µs: median 1080 µs, MAD 10 µs. +80 µs is +8 % but
//!   not beyond 3 × max(40, 10) = 120 µs: not breached.
//! - `steps_cand_slow` 1200, 1190, 1210 µs: median 1200 µs, +200 µs > 120 µs and +20 %:
//!   breached; its peak 1 150 000 bytes against 1 000 000 is +15 % (MADs 0): breached.
//! - One file per side (step 2: 1000 µs against 1080 µs): no noise, +8 % > 5 %: breached.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use std::path::PathBuf;
use std::process::Command;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

/// Run the binary in the fixtures directory: (exit code, stdout, stderr).
fn candle_trace(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_candle-trace"))
        .args(args)
        .current_dir(fixtures())
        .output()
        .expect("the binary runs");
    (
        out.status.code().expect("exited"),
        String::from_utf8(out.stdout).expect("UTF-8"),
        String::from_utf8(out.stderr).expect("UTF-8"),
    )
}

#[test]
fn a_change_within_the_steps_noise_passes_with_exit_0() {
    let (code, out, err) = candle_trace(&[
        "compare",
        "steps_base",
        "steps_cand_noisy",
        "--fail-if",
        "total>+5%",
        "--fail-if",
        "peak_bytes>+10%",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "ok   total>+5%: 1000000 → 1080000 ns (+8.0%), medians of 5 and 3 steps, noise 3×MAD = 120000 ns\n\
         ok   peak_bytes>+10%: 1000000 → 1000000 bytes (+0.0%), medians of 5 and 3 steps, noise 3×MAD = 0 bytes\n\
         0 of 2 rule(s) breached\n"
    );
}

#[test]
fn a_change_beyond_the_noise_fails_with_exit_1_and_one_line_per_breach() {
    let (code, out, err) = candle_trace(&[
        "compare",
        "steps_base",
        "steps_cand_slow",
        "--fail-if",
        "total>+5%",
        "--fail-if",
        "peak_bytes>+10%",
        "--fail-if",
        "backward<-50%",
    ]);
    assert_eq!(code, 1, "{err}");
    let fails: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert_eq!(
        fails,
        [
            "FAIL total>+5%: 1000000 → 1200000 ns (+20.0%), medians of 5 and 3 steps, noise 3×MAD = 120000 ns",
            "FAIL peak_bytes>+10%: 1000000 → 1150000 bytes (+15.0%), medians of 5 and 3 steps, noise 3×MAD = 0 bytes",
        ]
    );
    assert!(out.ends_with("2 of 3 rule(s) breached\n"), "{out}");
}

#[test]
fn one_step_per_side_is_judged_by_the_percent_alone() {
    let (code, out, _) = candle_trace(&[
        "compare",
        "steps_base/step-2.trace6.jsonl",
        "steps_cand_noisy/step-2.trace6.jsonl",
        "--fail-if",
        "total>+5%",
    ]);
    assert_eq!(code, 1);
    assert!(
        out.starts_with("FAIL total>+5%: 1000000 → 1080000 ns (+8.0%)\n"),
        "{out}"
    );
}

#[test]
fn the_json_report_carries_every_verdict() {
    let (code, out, _) = candle_trace(&[
        "compare",
        "steps_base",
        "steps_cand_slow",
        "--fail-if",
        "total>+5%",
        "--json",
    ]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["breached"], 1);
    assert_eq!(v["base"].as_array().unwrap().len(), 5);
    let r = &v["rules"][0];
    assert_eq!(r["base"]["median"], 1_000_000);
    assert_eq!(r["base"]["mad"], 40_000);
    assert_eq!(r["cand"]["median"], 1_200_000);
    assert_eq!(r["noise"], 120_000);
    assert_eq!(r["breached"], true);
}

#[test]
fn bad_rules_and_missing_metrics_exit_2_naming_the_rule() {
    for (rule, message) in [
        (
            "speed>+5%",
            "candle-trace: --fail-if: bad rule `speed>+5%`: unknown metric `speed`",
        ),
        (
            "total>-5%",
            "candle-trace: --fail-if: bad rule `total>-5%`: `>` checks a rise: write `>+X%`",
        ),
        (
            "total=5%",
            "candle-trace: --fail-if: bad rule `total=5%`: expected METRIC>THRESHOLD",
        ),
        (
            "ttft_p90>+10%",
            "candle-trace: rule `ttft_p90>+10%`: steps_base/step-2.trace6.jsonl: ttft_p90 is read from inference profiles",
        ),
    ] {
        let (code, out, err) =
            candle_trace(&["compare", "steps_base", "steps_cand_slow", "--fail-if", rule]);
        assert_eq!(code, 2, "{rule}: {out}");
        assert!(err.starts_with(message), "{rule}: {err}");
    }
    // A bad rule is reported before any file is read.
    let (code, _, err) = candle_trace(&["compare", "nope", "nope", "--fail-if", "x>1"]);
    assert_eq!(code, 2);
    assert!(err.contains("bad rule `x>1`"), "{err}");
}

#[test]
fn inference_profiles_gate_on_ttft() {
    let (code, out, err) = candle_trace(&[
        "compare",
        "infer_run.profile.jsonl",
        "infer_run.profile.jsonl",
        "--fail-if",
        "ttft_p90>+10%",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "ok   ttft_p90>+10%: 1450 → 1450 µs (+0.0%)\n0 of 1 rule(s) breached\n"
    );
    // An absolute budget below the profile's p90 (1450 µs) is breached.
    let (code, out, _) = candle_trace(&[
        "compare",
        "infer_run.profile.jsonl",
        "infer_run.profile.jsonl",
        "--fail-if",
        "ttft_p90>1000",
    ]);
    assert_eq!(code, 1, "{out}");
}

#[test]
fn directories_without_rules_are_explained_with_exit_2() {
    let (code, _, err) = candle_trace(&["compare", "steps_base", "steps_cand_slow"]);
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "candle-trace: steps_base is a directory: compare reads one file per side; directories of step files are compared by --fail-if rules (or run `candle-trace steps`)\n"
    );
}

#[test]
fn runs_whose_meta_differ_are_refused_with_exit_1() {
    let (code, _, err) = candle_trace(&[
        "compare",
        "compare/base.trace6.jsonl",
        "compare/other_device.trace6.jsonl",
        "--fail-if",
        "total>+5%",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("device differs"), "{err}");
}
