//! The malformed-input suite: every file in `tests/fixtures/malformed/` (one concern each) read
//! through the reader (`AnyReader` whole and in small chunks, and the format's own reader) and
//! through the CLI (`validate --json` exit code and diagnostics, `summary --json`), against the
//! diagnostics written by hand in `tests/fixtures/malformed/expected.json`. Inputs too large to
//! commit (a 10 MB line, a 1 MB name, JSON nested a million deep) are generated here.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use candle_trace_cli::run;
use candle_trace_schema::analysis::ops::{op_groups, OpGrouping};
use candle_trace_schema::format::detect::{AnyDocument, AnyReader, Format};
use candle_trace_schema::format::diagnostics::{sort_diagnostics, Diagnostic};
use candle_trace_schema::format::document::{TraceDocument, TraceReader};
use candle_trace_schema::format::profile::read_profile;
use candle_trace_tests::fixtures_dir;
use serde_json::Value;

/// (line, severity, category), as written in expected.json.
type Diag = (u64, String, String);

fn malformed_dir() -> PathBuf {
    fixtures_dir().join("malformed")
}

fn expectations() -> BTreeMap<String, Value> {
    let path = malformed_dir().join("expected.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let Value::Object(map) = serde_json::from_str(&text).unwrap() else {
        panic!("expected.json is not an object")
    };
    map.into_iter()
        .filter(|(k, _)| !k.starts_with('_'))
        .collect()
}

fn files() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(malformed_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    names.sort();
    names
}

fn format_key(format: Option<Format>) -> Value {
    match format {
        Some(Format::Trace) => Value::from("trace"),
        Some(Format::Profile) => Value::from("profile"),
        Some(Format::Chrome) => Value::from("chrome"),
        None => Value::Null,
    }
}

fn diags_of(diagnostics: &[Diagnostic]) -> Vec<Diag> {
    diagnostics
        .iter()
        .map(|d| {
            (
                d.line,
                d.severity.as_str().to_string(),
                d.category.as_str().to_string(),
            )
        })
        .collect()
}

fn multiset(mut d: Vec<Diag>) -> Vec<Diag> {
    d.sort();
    d
}

fn expected_diags(e: &Value) -> Vec<Diag> {
    e["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d[0].as_u64().unwrap(),
                d[1].as_str().unwrap().to_string(),
                d[2].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn read_chunked(bytes: &[u8], chunk: usize) -> AnyDocument {
    let mut r = AnyReader::new();
    for c in bytes.chunks(chunk.max(1)) {
        r.push(c);
    }
    r.finish()
}

fn assert_sorted(name: &str, diagnostics: &[Diagnostic]) {
    let mut sorted = diagnostics.to_vec();
    sort_diagnostics(&mut sorted);
    assert_eq!(
        sorted, diagnostics,
        "{name}: diagnostics not sorted by line, errors first"
    );
}

struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

fn cli(args: &[&str]) -> Output {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut argv = vec!["candle-trace"];
    argv.extend_from_slice(args);
    let code = run(argv, &mut out, &mut err);
    Output {
        code,
        stdout: String::from_utf8(out).expect("stdout is UTF-8"),
        stderr: String::from_utf8(err).expect("stderr is UTF-8"),
    }
}

/// `validate --json` on `path`: exit code and (line, severity, category) of its diagnostics
/// (empty when the file cannot be read, exit 2).
fn cli_validate(path: &Path) -> (i32, Vec<Diag>) {
    let path = path.to_str().unwrap();
    let out = cli(&["validate", "--json", path]);
    if out.code == 2 {
        assert!(out.stdout.is_empty(), "{path}: exit 2 with stdout");
        assert!(out.stderr.contains(path), "{path}: {}", out.stderr);
        return (2, Vec::new());
    }
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let d = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["line"].as_u64().unwrap(),
                d["severity"].as_str().unwrap().to_string(),
                d["category"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (out.code, d)
}

#[test]
fn every_file_has_expectations_and_there_are_enough() {
    let e = expectations();
    let f = files();
    let expected_names: Vec<&String> = e.keys().collect();
    let file_names: Vec<&String> = f.iter().collect();
    assert_eq!(
        expected_names, file_names,
        "expected.json and the files differ"
    );
    assert!(f.len() >= 30, "only {} malformed files", f.len());
}

#[test]
fn the_reader_gives_the_expected_diagnostics() {
    let mut failures = Vec::new();
    for (name, e) in expectations() {
        let bytes = std::fs::read(malformed_dir().join(&name)).unwrap();
        let want = multiset(expected_diags(&e));
        let doc = read_chunked(&bytes, 1 << 20);
        if format_key(doc.format()) != e["format"] {
            failures.push(format!("{name}: format {:?}", doc.format()));
        }
        assert_sorted(&name, doc.diagnostics());
        let got = multiset(diags_of(doc.diagnostics()));
        if got != want {
            failures.push(format!(
                "{name} ({}): diagnostics {got:?}, expected {want:?}\n  {:?}",
                e["concern"],
                doc.diagnostics()
            ));
        }
        // Chunk boundaries never change anything.
        for chunk in [1, 2, 3, 64] {
            let small = read_chunked(&bytes, chunk);
            if small.diagnostics() != doc.diagnostics() {
                failures.push(format!(
                    "{name}: chunks of {chunk}: {:?}",
                    small.diagnostics()
                ));
            }
        }
        // The format's own reader agrees with AnyReader (a BOM is skipped by both).
        match &doc {
            // (A Chrome import is a trace document too, but not TraceReader's.)
            AnyDocument::Trace(t) if doc.format() == Some(Format::Trace) => {
                let direct = TraceDocument::from_bytes(&bytes);
                if direct.diagnostics != t.diagnostics || direct.summary() != t.summary() {
                    failures.push(format!("{name}: TraceReader: {:?}", direct.diagnostics));
                }
            }
            AnyDocument::Profile(p) => {
                let direct = read_profile(&bytes);
                if &direct != p {
                    failures.push(format!("{name}: ProfileReader: {:?}", direct.diagnostics));
                }
            }
            _ => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_cli_gives_the_same_diagnostics_and_exit_codes() {
    for (name, e) in expectations() {
        let path = malformed_dir().join(&name);
        let (code, got) = cli_validate(&path);
        let want_code = e["exit"].as_i64().unwrap() as i32;
        assert_eq!(code, want_code, "{name}: exit code of validate");
        if code != 2 {
            assert_eq!(
                multiset(got),
                multiset(expected_diags(&e)),
                "{name}: validate --json"
            );
        }
        let summary = cli(&["summary", "--json", path.to_str().unwrap()]);
        if code == 2 {
            assert_eq!(summary.code, 2, "{name}: summary of an unreadable file");
            continue;
        }
        assert_eq!(summary.code, 0, "{name}: summary: {}", summary.stderr);
        let v: Value = serde_json::from_str(&summary.stdout).unwrap();
        if let Some(Value::Object(fields)) = e.get("summary") {
            for (field, want) in fields {
                assert_eq!(&v[field], want, "{name}: summary {field}");
            }
        }
    }
}

/// Write `bytes` to a fresh temporary file for the CLI.
/// Writes `bytes` to `name` in `dir`. Each test has its own directory, removed when
/// its `TempDir` drops: tests run in parallel, and a shared one was removed under
/// another test's feet.
fn temp_file(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

const META: &str = r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00Z","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#;

fn trace_with_root_name(name: &str) -> Vec<u8> {
    let mut t = String::from(META);
    t.push('\n');
    t.push_str(&format!(
        r#"{{"kind":"span_start","id":"root","name":"{name}","start_ns":0,"span_kind":"function","measured":true}}"#
    ));
    t.push_str("\n{\"kind\":\"span_end\",\"id\":\"root\",\"duration_ns\":7}\n");
    t.into_bytes()
}

#[test]
fn a_ten_megabyte_line_is_read_whole() {
    // A valid span whose name is 10 MB: no diagnostic, the name intact, through reader and CLI.
    let name = "n".repeat(10 << 20);
    let bytes = trace_with_root_name(&name);
    let doc = read_chunked(&bytes, 1 << 20);
    assert_eq!(doc.diagnostics(), &[]);
    let AnyDocument::Trace(t) = &doc else {
        panic!("not a trace")
    };
    assert_eq!(t.spans[0].name.len(), 10 << 20);
    let dir = tempfile::tempdir().unwrap();
    let path = temp_file(&dir, "ten_mb_name.trace6.jsonl", &bytes);
    assert_eq!(cli_validate(&path), (0, Vec::new()));

    // 10 MB of garbage on line 2: one syntax error at line 2, and it is the only one.
    let mut bytes = Vec::from(META.as_bytes());
    bytes.push(b'\n');
    bytes.extend(std::iter::repeat_n(b'x', 10 << 20));
    bytes.extend_from_slice(b"\n{\"kind\":\"span_start\",\"id\":\"s\",\"name\":\"s\",\"start_ns\":0,\"span_kind\":\"function\",\"measured\":true}\n{\"kind\":\"span_end\",\"id\":\"s\",\"duration_ns\":1}\n");
    let want = vec![(2, "error".to_string(), "syntax".to_string())];
    assert_eq!(diags_of(read_chunked(&bytes, 1 << 20).diagnostics()), want);
    let path = temp_file(&dir, "ten_mb_garbage.trace6.jsonl", &bytes);
    assert_eq!(cli_validate(&path), (1, want));
}

#[test]
fn a_one_megabyte_hostile_name_is_kept_verbatim() {
    let unit = "<script>alert(1)</script>\u{202e}\u{200b}\u{1f525}";
    let name = unit.repeat((1 << 20) / unit.len() + 1);
    let bytes = trace_with_root_name(&name);
    let doc = TraceDocument::from_bytes(&bytes);
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    assert_eq!(doc.spans[0].name, name);
}

#[test]
fn json_nested_a_million_deep_never_overflows_the_stack() {
    let deep = format!("{}{}", "[".repeat(1_000_000), "]".repeat(1_000_000));
    // In an unknown field of a trace line it is skipped like any unknown field (serde_json skips
    // values without recursion); as a line of its own it is one error; in a profile's
    // `attributes` (kept as JSON values) it hits the 128-level limit: one error, line dropped.
    let trace = format!(
        "{META}\n{{\"kind\":\"span_start\",\"id\":\"s\",\"name\":\"s\",\"start_ns\":0,\"span_kind\":\"function\",\"measured\":true,\"x\":{deep}}}\n{deep}\n{{\"kind\":\"span_end\",\"id\":\"s\",\"duration_ns\":1}}\n"
    );
    let mut r = TraceReader::new();
    r.push(trace.as_bytes());
    let doc = r.finish();
    assert_eq!(
        diags_of(&doc.diagnostics),
        vec![(3, "error".to_string(), "syntax".to_string())]
    );
    assert_eq!(doc.summary().total_ns, 1);
    let dir = tempfile::tempdir().unwrap();
    let path = temp_file(&dir, "deep.trace6.jsonl", trace.as_bytes());
    assert_eq!(cli_validate(&path).0, 1);
    let profile = format!(
        "{{\"schema_version\":1,\"event_kind\":\"instant\",\"attributes\":{{\"x\":{deep}}}}}\n"
    );
    let p = read_profile(profile.as_bytes());
    assert_eq!(
        diags_of(&p.diagnostics),
        vec![(1, "error".to_string(), "syntax".to_string())]
    );
    let any = read_chunked(profile.as_bytes(), 1 << 20);
    assert_eq!(format_key(any.format()), Value::from("profile"));
}

#[test]
fn every_number_computed_from_a_malformed_trace_is_consistent() {
    // Regression for the op mean found by fuzzing u64_max_values: a saturated total gave a mean
    // below the shortest op. Checked on every malformed trace.
    for name in files() {
        let bytes = std::fs::read(malformed_dir().join(&name)).unwrap();
        let AnyDocument::Trace(doc) = read_chunked(&bytes, 1 << 20) else {
            continue;
        };
        for grouping in [OpGrouping::Name, OpGrouping::NameShapeDtype] {
            for g in op_groups(&doc.ops, grouping) {
                assert!(
                    g.min_ns <= g.mean_ns && g.mean_ns <= g.max_ns,
                    "{name}: {g:?}"
                );
            }
        }
        let p = &doc.memory_profile;
        assert!(
            p.devices.iter().all(|d| d.peak_bytes <= p.peak_bytes),
            "{name}"
        );
        assert!(doc
            .spans
            .iter()
            .enumerate()
            .all(|(i, s)| doc.tree.self_ns[i] <= s.duration_or_zero()));
    }
    // And through the CLI: `query --kind ops` on the file that found it.
    let path = malformed_dir().join("u64_max_values.trace6.jsonl");
    let out = cli(&["query", path.to_str().unwrap(), "--kind", "ops", "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("18446744073709551615"),
        "{}",
        out.stdout
    );
    assert!(
        !out.stdout.contains("9223372036854775807"),
        "{}",
        out.stdout
    );
}
