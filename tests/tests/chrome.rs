//! Chrome Trace Event JSON end to end: the file written by the real `tracing-chrome` layer over
//! candle ops imports with the structure the example produced; `candle-trace export --format
//! chrome` writes what Perfetto's JSON importer accepts (as far as it can be checked offline);
//! export → import keeps names, parent paths, start times and durations (to the ns: µs are
//! written with three decimals).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use candle_trace_schema::analysis::spans::span_path;
use std::collections::{BTreeMap, HashMap};

use candle_trace_cli::run;
use candle_trace_schema::format::chrome::export::{profile_to_chrome, trace_to_chrome};
use candle_trace_schema::format::detect::{AnyDocument, AnyReader};
use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::profile::read_profile;
use candle_trace_tests::fixtures_dir;
use serde_json::Value;

fn read_any(path: &std::path::Path) -> AnyDocument {
    let mut r = AnyReader::new();
    r.push(&std::fs::read(path).expect("fixture"));
    r.finish()
}

fn trace(name: &str) -> TraceDocument {
    match read_any(&fixtures_dir().join(name)) {
        AnyDocument::Trace(t) => *t,
        _ => panic!("{name} is not a trace"),
    }
}

/// Everything offline about an exported file that Perfetto's JSON importer (and
/// chrome://tracing) rely on. Returns the problems found.
fn perfetto_problems(text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let v: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return vec![format!("not well-formed JSON: {e}")],
    };
    let Some(events) = v.get("traceEvents").and_then(Value::as_array) else {
        return vec!["no traceEvents array".into()];
    };
    let int = |e: &Value, k: &str| e.get(k).is_some_and(|x| x.is_i64() || x.is_u64());
    let num = |e: &Value, k: &str| e.get(k).and_then(Value::as_f64);
    let mut last_ts: HashMap<(String, String), f64> = HashMap::new();
    let mut stacks: HashMap<(String, String), Vec<(f64, f64)>> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        let at = format!("event {i}: {e}");
        let ph = e.get("ph").and_then(Value::as_str).unwrap_or("");
        if !["X", "i", "C", "M"].contains(&ph) {
            problems.push(format!(
                "{at}: phase {ph:?} is not one this exporter may write"
            ));
            continue;
        }
        if !int(e, "pid") || !int(e, "tid") {
            problems.push(format!("{at}: pid and tid must be integers"));
        }
        if e.get("name").and_then(Value::as_str).is_none() {
            problems.push(format!("{at}: no name"));
        }
        let key = (e["pid"].to_string(), e["tid"].to_string());
        match ph {
            "M" => {
                let name = e["name"].as_str().unwrap_or("");
                if !["process_name", "thread_name"].contains(&name) {
                    problems.push(format!("{at}: unexpected metadata record"));
                }
                if e["args"]["name"].as_str().is_none() {
                    problems.push(format!("{at}: M without args.name"));
                }
            }
            _ => {
                let Some(ts) = num(e, "ts") else {
                    problems.push(format!("{at}: no numeric ts"));
                    continue;
                };
                if ts < 0.0 {
                    problems.push(format!("{at}: negative ts"));
                }
                // Monotonic per track (counters: per counter name).
                let series = if ph == "C" {
                    (key.0.clone(), e["name"].to_string())
                } else {
                    key.clone()
                };
                let last = last_ts.entry(series).or_insert(f64::MIN);
                if ts < *last {
                    problems.push(format!("{at}: ts goes backwards on its track"));
                }
                *last = ts;
                if ph == "X" {
                    let Some(dur) = num(e, "dur") else {
                        problems.push(format!("{at}: X without dur"));
                        continue;
                    };
                    if dur < 0.0 {
                        problems.push(format!("{at}: negative dur"));
                    }
                    let end = ts + dur;
                    let stack = stacks.entry(key).or_default();
                    while let Some(&(_, top_end)) = stack.last() {
                        if top_end >= end {
                            break;
                        }
                        if top_end > ts {
                            problems.push(format!("{at}: partially overlaps a slice on its track"));
                        }
                        stack.pop();
                    }
                    stack.push((ts, end));
                }
                if ph == "i" && !["g", "p", "t"].contains(&e["s"].as_str().unwrap_or("t")) {
                    problems.push(format!("{at}: bad instant scope"));
                }
                if ph == "C" {
                    let ok = e["args"]
                        .as_object()
                        .is_some_and(|a| !a.is_empty() && a.values().all(Value::is_number));
                    if !ok {
                        problems.push(format!("{at}: counter args must be numbers"));
                    }
                }
            }
        }
    }
    problems
}

/// (path, start, duration) of every span and op of a trace/6 document, ops as children of their
/// span: what an exported file must import back as.
fn expected_slices(doc: &TraceDocument) -> Vec<(String, u64, u64)> {
    let mut v: Vec<(String, u64, u64)> = doc
        .spans
        .iter()
        .enumerate()
        .map(|(i, s)| (span_path(doc, i), s.start_ns, s.duration_or_zero()))
        .collect();
    for op in &doc.ops {
        let i = doc.span_index(op.span_id).expect("op in a span");
        v.push((
            format!("{}/{}", span_path(doc, i), op.op_name),
            op.timestamp_ns,
            op.duration_ns,
        ));
    }
    v.sort();
    v
}

fn slices(doc: &TraceDocument, origin: u64) -> Vec<(String, u64, u64)> {
    let mut v: Vec<(String, u64, u64)> = doc
        .spans
        .iter()
        .enumerate()
        .map(|(i, s)| (span_path(doc, i), s.start_ns + origin, s.duration_or_zero()))
        .collect();
    v.sort();
    v
}

fn earliest(doc: &TraceDocument) -> u64 {
    let spans = doc.spans.iter().map(|s| s.start_ns);
    let ops = doc.ops.iter().map(|o| o.timestamp_ns);
    let mem = doc.memory_profile.samples.iter().map(|s| s.timestamp_ns);
    let dm = doc.device_memory.iter().map(|c| c.timestamp_ns);
    spans.chain(ops).chain(mem).chain(dm).min().unwrap_or(0)
}

#[test]
fn the_real_tracing_chrome_file_imports_with_its_structure() {
    let doc = trace("candle_tracing.chrome.json");
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    let c = doc.chrome.as_ref().unwrap();
    let labels: Vec<String> = c.tracks.iter().map(|t| t.label()).collect();
    assert_eq!(labels, ["main", "worker"]);
    // Three `tracing::info!` events, one per forward pass.
    assert_eq!(c.instants.len(), 3);
    assert!(c
        .instants
        .iter()
        .all(|i| i.name.contains("chrome_tracing.rs")));
    // Spans: the synthetic root, 3 × (forward, linear, gelu, linear, softmax), one matmul.
    let mut paths: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..doc.spans.len() {
        *paths.entry(span_path(&doc, i)).or_default() += 1;
    }
    let want: BTreeMap<String, usize> = [
        ("(trace)", 1),
        ("(trace)/forward", 3),
        ("(trace)/forward/linear", 6),
        ("(trace)/forward/gelu", 3),
        ("(trace)/forward/softmax", 3),
        ("(trace)/matmul", 1),
    ]
    .into_iter()
    .map(|(p, n)| (p.to_string(), n))
    .collect();
    assert_eq!(paths, want);
    // The worker's span is on the worker's track.
    let matmul = doc.spans.iter().position(|s| s.name == "matmul").unwrap();
    assert_eq!(c.span_tracks[matmul], Some(1));
    // Every forward pass lies inside the root, and the root is the file's extent.
    let root = &doc.spans[0];
    assert!(doc.spans.iter().all(|s| s.end_ns() <= root.end_ns()));
}

#[test]
fn exported_traces_are_valid_for_perfetto_and_import_back_unchanged() {
    for name in [
        "train_step.trace6.jsonl",
        "valid_out_of_order.trace6.jsonl",
        "compare/base.trace6.jsonl",
        "compare/cand.trace6.jsonl",
    ] {
        let doc = trace(name);
        let text = trace_to_chrome(&doc);
        let problems = perfetto_problems(&text);
        assert!(problems.is_empty(), "{name}: {problems:#?}");
        let back = TraceDocument::from_chrome(text.as_bytes());
        assert!(!back.is_untrusted(), "{name}: {:?}", back.diagnostics);
        assert_eq!(
            back.meta.as_ref().map(|m| &m.event),
            doc.meta.as_ref().map(|m| &m.event),
            "{name}: meta"
        );
        // Names, parent paths, start times (up to the import's rebase) and durations.
        assert_eq!(
            slices(&back, earliest(&doc)),
            expected_slices(&doc),
            "{name}: slices"
        );
        assert_eq!(back.summary().total_ns, doc.summary().total_ns, "{name}");
        // Memory as counters: one sample per memory event.
        assert_eq!(
            back.chrome.as_ref().unwrap().counters.len(),
            doc.memory_profile.samples.len() + 2 * doc.device_memory.len(),
            "{name}: counters"
        );
        // Steps and span kinds survive.
        for (i, s) in doc.spans.iter().enumerate() {
            let j = back
                .spans
                .iter()
                .position(|b| {
                    b.start_ns + earliest(&doc) == s.start_ns
                        && span_path(&back, back.span_index(&b.id).unwrap()) == span_path(&doc, i)
                })
                .unwrap();
            assert_eq!(
                (back.spans[j].pass, back.spans[j].span_kind),
                (s.pass, s.span_kind)
            );
        }
    }
}

#[test]
fn imported_chrome_files_export_and_import_back() {
    for name in [
        "candle_tracing.chrome.json",
        "be_pairs.chrome.json",
        "nested_x.chrome.json",
    ] {
        let doc = trace(name);
        let text = trace_to_chrome(&doc);
        assert!(perfetto_problems(&text).is_empty(), "{name}");
        let back = TraceDocument::from_chrome(text.as_bytes());
        assert_eq!(slices(&back, 0), slices(&doc, 0), "{name}");
        assert_eq!(back.summary(), doc.summary(), "{name}");
    }
}

#[test]
fn overlapping_spans_go_to_overflow_tracks() {
    // Two root spans that overlap in time (two threads in the capture).
    let meta = r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"infer","timestamp":"t","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#;
    let lines = [
        meta,
        r#"{"kind":"span_start","id":"a","name":"a","start_ns":0,"span_kind":"function","measured":true}"#,
        r#"{"kind":"span_start","id":"b","name":"b","start_ns":500,"span_kind":"function"}"#,
        r#"{"kind":"span_start","id":"c","parent_id":"b","name":"c","start_ns":600,"span_kind":"function"}"#,
        r#"{"kind":"span_end","id":"a","duration_ns":1000}"#,
        r#"{"kind":"span_end","id":"b","duration_ns":1000}"#,
        r#"{"kind":"span_end","id":"c","duration_ns":100}"#,
    ];
    let doc = TraceDocument::from_bytes((lines.join("\n") + "\n").as_bytes());
    let text = trace_to_chrome(&doc);
    assert!(perfetto_problems(&text).is_empty());
    assert!(
        text.contains(r#""name":"thread_name","args":{"name":"spans (overlap 1)"}"#),
        "{text}"
    );
    let back = TraceDocument::from_chrome(text.as_bytes());
    assert_eq!(slices(&back, 0), slices(&doc, 0));
}

#[test]
fn exported_profiles_are_valid_for_perfetto() {
    let doc = read_profile(&std::fs::read(fixtures_dir().join("infer_run.profile.jsonl")).unwrap());
    let text = profile_to_chrome(&doc);
    let problems = perfetto_problems(&text);
    assert!(problems.is_empty(), "{problems:#?}");
    let back = TraceDocument::from_chrome(text.as_bytes());
    assert!(!back.is_untrusted(), "{:?}", back.diagnostics);
    let c = back.chrome.as_ref().unwrap();
    let labels: Vec<String> = c.tracks.iter().map(|t| t.label()).collect();
    assert_eq!(&labels[..3], ["req-1", "req-2", "req-3"]);
    // 9 timed spans (+ the importer's synthetic root); 17 − 9 other events + 5 + 3 + 2 token
    // commits as instants.
    let timed = back.spans.iter().filter(|s| s.id != "root").count();
    assert_eq!(timed, 9);
    assert_eq!(c.instants.len(), 8 + 10);
    assert_eq!(
        c.instants
            .iter()
            .filter(|i| i.name.starts_with("token "))
            .count(),
        10
    );
}

#[test]
fn export_command_writes_the_file() {
    let dir = std::env::temp_dir().join(format!("candle-trace-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out_path = dir.join("base.json");
    let mut out = Vec::new();
    let mut err = Vec::new();
    let code = run(
        [
            "candle-trace",
            "export",
            "fixtures/compare/base.trace6.jsonl",
            "--format",
            "chrome",
            "-o",
            out_path.to_str().unwrap(),
        ],
        &mut out,
        &mut err,
    );
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    let written = std::fs::read_to_string(&out_path).unwrap();
    let golden = fixtures_dir()
        .join("golden")
        .join("compare-base.export.chrome.json");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &written).unwrap();
    }
    assert_eq!(
        written,
        std::fs::read_to_string(&golden).unwrap(),
        "golden export differs"
    );
    // The written file is itself readable by every command.
    let mut out = Vec::new();
    let code = run(
        ["candle-trace", "validate", out_path.to_str().unwrap()],
        &mut out,
        &mut err,
    );
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&out));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_large_single_line_file_streams_in_small_chunks() {
    // 20 000 `B`/`E` pairs (each with an `X` inside) on one line, object form without its
    // closing `]}`: framed element by element, whatever the chunk size.
    const N: u64 = 20_000;
    let mut text = String::from("{\"traceEvents\":[");
    for i in 0..N {
        let t = i * 10;
        text.push_str(&format!(
            "{{\"ph\":\"B\",\"name\":\"step \\\"{i}\\\"\",\"pid\":1,\"tid\":1,\"ts\":{t}}},\
             {{\"ph\":\"X\",\"name\":\"op\",\"pid\":1,\"tid\":1,\"ts\":{},\"dur\":2.5}},\
             {{\"ph\":\"E\",\"pid\":1,\"tid\":1,\"ts\":{}}},",
            t + 1,
            t + 5
        ));
    }
    for chunk in [8191, 65_536] {
        let mut r = AnyReader::new();
        for c in text.as_bytes().chunks(chunk) {
            r.push(c);
        }
        let AnyDocument::Trace(doc) = r.finish() else {
            panic!("not a trace")
        };
        assert!(doc.diagnostics.is_empty(), "{:?}", &doc.diagnostics[..1]);
        let s = doc.summary();
        assert_eq!(s.span_count, 2 * N + 1);
        assert_eq!(s.max_depth, 2);
        assert_eq!(s.total_ns, (N - 1) * 10_000 + 5_000);
        assert_eq!(doc.spans[1].name, "step \"0\"");
        assert!(doc.tree.self_ns[1..].iter().step_by(2).all(|&x| x == 2_500));
        assert_eq!(doc.chrome.as_ref().unwrap().element_count, 3 * N);
    }
}
