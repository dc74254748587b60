//! The `candle-trace` CLI on every fixture: numbers equal the independently computed
//! `tests/fixtures/expected/*.json` (made by `oracle.py` from SCHEMA.md alone), JSON shapes and
//! exit codes are as promised, and the outputs match the golden files in
//! `tests/fixtures/golden/` (rewrite them with `UPDATE_GOLDEN=1`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use std::path::{Path, PathBuf};

use candle_trace_cli::run;
use candle_trace_tests::fixtures_dir;
use serde_json::Value;

struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

fn cli(args: &[&str]) -> Output {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let mut argv = vec!["candle-trace"];
    argv.extend_from_slice(args);
    let code = run(argv, &mut out, &mut err);
    Output {
        code,
        stdout: String::from_utf8(out).expect("stdout is UTF-8"),
        stderr: String::from_utf8(err).expect("stderr is UTF-8"),
    }
}

/// Fixture paths relative to this package (so outputs that echo the path are stable).
fn fixtures(suffix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .expect("tests/fixtures exists")
        .map(|e| e.expect("readable dir entry").path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .map(|p| Path::new("fixtures").join(p.file_name().expect("file name")))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no *{suffix} fixtures");
    files
}

fn expected(fixture: &Path) -> Value {
    let name = fixture
        .file_name()
        .expect("file name")
        .to_string_lossy()
        .to_string();
    let path = fixtures_dir().join("expected").join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("expected file is JSON")
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"))
}

/// (line, severity) pairs of a `validate --json` or oracle diagnostics array.
fn line_severities(v: &Value) -> Vec<(u64, String)> {
    v.as_array()
        .expect("diagnostics array")
        .iter()
        .map(|d| {
            (
                d["line"].as_u64().expect("line"),
                d["severity"].as_str().expect("severity").to_string(),
            )
        })
        .collect()
}

fn golden(name: &str, actual: &str) {
    let path = fixtures_dir().join("golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("create golden dir");
        std::fs::write(&path, actual).expect("write golden");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    });
    assert_eq!(
        actual,
        want,
        "{} differs (UPDATE_GOLDEN=1 rewrites it after review)",
        path.display()
    );
}

const SUMMARY_FIELDS: [&str; 8] = [
    "op_count",
    "total_ns",
    "span_count",
    "root_span_count",
    "max_depth",
    "alloc_count",
    "free_count",
    "peak_bytes",
];

#[test]
fn trace_summary_json_matches_the_oracle_on_every_fixture() {
    let mut files = fixtures(".trace6.jsonl");
    files.extend(fixtures(".chrome.json"));
    for f in files {
        let path = f.to_str().expect("UTF-8 path");
        let out = cli(&["summary", "--json", path]);
        assert_eq!(out.code, 0, "{path}: {}", out.stderr);
        let got = json(&out.stdout);
        let obj = got.as_object().expect("one JSON object");
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        let mut want_keys = SUMMARY_FIELDS.to_vec();
        want_keys.push("extra");
        want_keys.sort_unstable();
        assert_eq!(
            keys, want_keys,
            "{path}: only the eight fields and `extra` at the top level"
        );
        let want = &expected(&f)["summary"];
        for field in SUMMARY_FIELDS {
            assert_eq!(got[field], want[field], "{path}: {field}");
        }
        golden(
            &format!(
                "{}.summary.json",
                f.file_name().expect("name").to_string_lossy()
            ),
            &out.stdout,
        );
    }
}

#[test]
fn trace_validate_json_matches_the_oracle_on_every_fixture() {
    let mut files = fixtures(".trace6.jsonl");
    files.extend(fixtures(".chrome.json"));
    for f in files {
        let path = f.to_str().expect("UTF-8 path");
        let out = cli(&["validate", "--json", path]);
        let got = json(&out.stdout);
        let want = line_severities(&expected(&f)["diagnostics"]);
        assert_eq!(line_severities(&got["diagnostics"]), want, "{path}");
        let has_error = want.iter().any(|(_, s)| s == "error");
        assert_eq!(out.code, i32::from(has_error), "{path}: exit code");
        for d in got["diagnostics"].as_array().expect("array") {
            for key in ["line", "severity", "category", "message"] {
                assert!(
                    d.get(key).is_some(),
                    "{path}: diagnostic without {key}: {d}"
                );
            }
            assert!(!d["message"].as_str().expect("message").is_empty());
        }
        golden(
            &format!(
                "{}.validate.json",
                f.file_name().expect("name").to_string_lossy()
            ),
            &out.stdout,
        );
    }
}

#[test]
fn profile_summary_and_validate_match_the_oracle() {
    for f in fixtures(".profile.jsonl") {
        let path = f.to_str().expect("UTF-8 path");
        let want = expected(&f);
        let out = cli(&["summary", "--json", path]);
        assert_eq!(out.code, 0, "{path}: {}", out.stderr);
        let got = json(&out.stdout);
        for field in ["request_count", "event_count", "invalid_event_count"] {
            assert_eq!(got[field], want[field], "{path}: {field}");
        }
        for dist in ["ttft_us", "itl_nanos"] {
            assert_eq!(got[dist], want[dist], "{path}: {dist}");
        }
        let out = cli(&["validate", "--json", path]);
        let got = json(&out.stdout);
        let want_diags = line_severities(&want["diagnostics"]);
        assert_eq!(line_severities(&got["diagnostics"]), want_diags, "{path}");
        let has_error = want_diags.iter().any(|(_, s)| s == "error");
        assert_eq!(out.code, i32::from(has_error), "{path}: exit code");
        golden(
            &format!(
                "{}.validate.json",
                f.file_name().expect("name").to_string_lossy()
            ),
            &out.stdout,
        );
    }
}

#[test]
fn human_output_names_file_and_line() {
    let out = cli(&["validate", "fixtures/broken_cycle.trace6.jsonl"]);
    assert_eq!(out.code, 1);
    let first = out.stdout.lines().next().expect("a diagnostic line");
    assert!(
        first.starts_with("fixtures/broken_cycle.trace6.jsonl:"),
        "{first}"
    );
    assert!(first.contains(": error[cycle]: "), "{first}");
    assert!(out
        .stdout
        .lines()
        .last()
        .expect("verdict")
        .contains("untrusted"));

    let out = cli(&["summary", "fixtures/train_step.trace6.jsonl"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("peak memory"), "{}", out.stdout);
    assert!(out.stdout.contains("no diagnostics"), "{}", out.stdout);
}

#[test]
fn query_kinds_answer_on_the_golden_trace() {
    let f = "fixtures/train_step.trace6.jsonl";
    let want = expected(Path::new(f));
    for kind in [
        "slowest",
        "self",
        "heaviest",
        "memory",
        "gradients",
        "ops",
        "edges",
    ] {
        let out = cli(&["query", f, "--kind", kind]);
        assert_eq!(out.code, 0, "{kind}: {}", out.stderr);
        assert!(!out.stdout.trim().is_empty(), "{kind}");
    }
    // self: the top span's self time is the largest self time the oracle computed.
    let out = json(&cli(&["query", f, "--kind", "self", "--json", "--limit", "3"]).stdout);
    let rows = out["spans"].as_array().expect("spans");
    assert_eq!(rows.len(), 3);
    let max_self = want["spans"]
        .as_object()
        .expect("spans")
        .values()
        .map(|s| s["self_ns"].as_u64().expect("self"))
        .max();
    assert_eq!(rows[0]["self_ns"].as_u64(), max_self);
    for r in rows {
        let id = r["id"].as_str().expect("id");
        assert_eq!(
            r["self_ns"], want["spans"][id]["self_ns"],
            "self time of {id}"
        );
        assert_eq!(r["depth"], want["spans"][id]["depth"], "depth of {id}");
    }
    // memory: the peak and its device and category split.
    let out = json(&cli(&["query", f, "--kind", "memory", "--json", "--limit", "1000"]).stdout);
    let m = &want["memory"];
    assert_eq!(out["peak_bytes"], m["peak_bytes"]);
    assert_eq!(out["peak_timestamp_ns"], m["peak_timestamp_ns"]);
    assert_eq!(out["peak_device"], m["peak_device"]);
    assert_eq!(out["peak_by_category"], m["peak_by_category"]);
    let live: Vec<(Value, Value)> = out["live_at_peak"]
        .as_array()
        .expect("live")
        .iter()
        .map(|a| (a["tensor_id"].clone(), a["bytes"].clone()))
        .collect();
    let want_live: Vec<(Value, Value)> = m["live_at_peak"]
        .as_array()
        .expect("live")
        .iter()
        .map(|a| (a["tensor_id"].clone(), a["bytes"].clone()))
        .collect();
    assert_eq!(live, want_live);
    for d in out["devices"].as_array().expect("devices") {
        let name = d["device"].as_str().expect("device");
        if let Some(peak) = m["device_peaks"].get(name) {
            assert_eq!(&d["peak_bytes"], peak, "peak of {name}");
        }
        assert_eq!(
            d["capacity_bytes"],
            m["device_capacity"]
                .get(name)
                .cloned()
                .unwrap_or(Value::Null),
            "capacity of {name}"
        );
    }
    // edges: the fixture's two edges (fwd → bwd and bwd → opt, 10 µs each), in file order.
    let out = json(&cli(&["query", f, "--kind", "edges", "--json"]).stdout);
    let pairs: Vec<(&str, &str, u64)> = out["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| {
            (
                e["from_span"].as_str().expect("from"),
                e["to_span"].as_str().expect("to"),
                e["duration_ns"].as_u64().expect("d"),
            )
        })
        .collect();
    assert_eq!(pairs, [("fwd", "bwd", 10_000), ("bwd", "opt", 10_000)]);
    // gradients: counts per state.
    let out = json(&cli(&["query", f, "--kind", "gradients", "--json"]).stdout);
    assert_eq!(out["counts"], want["gradients"]);
    // ops by name: count, total, max and bytes.
    let out = json(&cli(&["query", f, "--kind", "ops", "--json", "--limit", "1000"]).stdout);
    let groups = out["groups"].as_array().expect("groups");
    let want_ops = want["ops_by_name"].as_object().expect("ops_by_name");
    assert_eq!(groups.len(), want_ops.len());
    for g in groups {
        let name = g["op_name"].as_str().expect("name");
        let w = &want_ops[name];
        for (ours, theirs) in [
            ("count", "count"),
            ("total_ns", "total_ns"),
            ("max_ns", "max_ns"),
            ("output_bytes", "output_bytes"),
        ] {
            assert_eq!(g[ours], w[theirs], "{name}: {ours}");
        }
    }
    let totals: Vec<u64> = groups
        .iter()
        .map(|g| g["total_ns"].as_u64().expect("total"))
        .collect();
    assert!(
        totals.windows(2).all(|w| w[0] >= w[1]),
        "ops sorted by total time"
    );
}

#[test]
fn query_requests_on_the_inference_profile() {
    let out = cli(&[
        "query",
        "fixtures/infer_run.profile.jsonl",
        "--kind",
        "requests",
        "--json",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let got = json(&out.stdout);
    let want = expected(Path::new("fixtures/infer_run.profile.jsonl"));
    assert_eq!(
        got["requests"].as_array().expect("requests").len() as u64,
        want["request_count"].as_u64().expect("count")
    );
    // Asking a profile for trace-only answers is a usage error naming the file.
    let out = cli(&[
        "query",
        "fixtures/infer_run.profile.jsonl",
        "--kind",
        "slowest",
    ]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("infer_run.profile.jsonl"),
        "{}",
        out.stderr
    );
}

#[test]
fn unreadable_inputs_exit_2_with_the_file_named() {
    let dir = std::env::temp_dir().join(format!("candle-trace-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let empty = dir.join("empty.jsonl");
    std::fs::write(&empty, b"").expect("write");
    let binary = dir.join("binary.bin");
    std::fs::write(&binary, [0u8, 159, 146, 150, 1, 2, 3]).expect("write");
    let missing = dir.join("missing.jsonl");
    for (file, needle) in [
        (&empty, "empty"),
        (&binary, "not a candle-trace file"),
        (&missing, "cannot open"),
    ] {
        for cmd in ["summary", "validate"] {
            let out = cli(&[cmd, file.to_str().expect("path")]);
            assert_eq!(out.code, 2, "{cmd} {}", file.display());
            assert!(
                out.stderr.contains(&*file.to_string_lossy()),
                "{}",
                out.stderr
            );
            assert!(out.stderr.contains(needle), "{}", out.stderr);
        }
    }
    let out = cli(&["frobnicate"]);
    assert_eq!(out.code, 2);
    let out = cli(&["--help"]);
    assert_eq!(out.code, 0);
    assert!(out.stdout.contains("validate"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn chrome_json_is_read_by_every_command() {
    let f = "fixtures/candle_tracing.chrome.json";
    let out = cli(&["summary", f]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("Chrome Trace Event JSON"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("2 track(s) (main, worker)"),
        "{}",
        out.stdout
    );
    golden("candle_tracing.chrome.json.summary.txt", &out.stdout);
    let out = cli(&["validate", f]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains(": valid"), "{}", out.stdout);
    let want = expected(Path::new(f));
    let out = json(&cli(&["query", f, "--kind", "self", "--json", "--limit", "100"]).stdout);
    let rows = out["spans"].as_array().expect("spans");
    assert_eq!(
        rows.len() as u64,
        want["summary"]["span_count"].as_u64().unwrap()
    );
    for r in rows {
        let id = r["id"].as_str().expect("id");
        assert_eq!(
            r["self_ns"], want["spans"][id]["self_ns"],
            "self time of {id}"
        );
    }
    // Broken elements: exit 1, every problem with its line.
    let out = cli(&["validate", "fixtures/broken_elements.chrome.json"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stdout
            .contains("fixtures/broken_elements.chrome.json:3: error[syntax]"),
        "{}",
        out.stdout
    );
}
