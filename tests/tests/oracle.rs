//! Every trace/6 fixture read by `candle-trace-schema` agrees with `tests/fixtures/expected/`,
//! which `oracle.py` computed from SCHEMA.md alone: depth and self time of every span, the whole
//! memory profile, op aggregates by name and gradient counts.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use candle_trace_schema::analysis::spans::span_path;
use std::collections::BTreeMap;

use candle_trace_schema::analysis::gradients::GradientCounts;
use candle_trace_schema::analysis::ops::{op_groups, OpGrouping};
use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::events::TensorCategory;
use candle_trace_tests::fixtures_dir;
use serde_json::{json, Value};

#[test]
fn every_trace_fixture_matches_the_oracle_in_detail() {
    let mut checked = 0;
    for entry in std::fs::read_dir(fixtures_dir()).expect("fixtures dir") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        if !name.ends_with(".trace6.jsonl") {
            continue;
        }
        let want: Value = serde_json::from_str(
            &std::fs::read_to_string(fixtures_dir().join("expected").join(format!("{name}.json")))
                .expect("expected file"),
        )
        .expect("JSON");
        let bytes = std::fs::read(&path).expect("fixture");
        // Odd chunk sizes: the reader must not care where chunks end.
        let mut reader = candle_trace_schema::format::document::TraceReader::new();
        for chunk in bytes.chunks(37) {
            reader.push(chunk);
        }
        let doc: TraceDocument = reader.finish();

        let spans: BTreeMap<String, Value> = doc
            .spans
            .iter()
            .enumerate()
            .map(|(i, s)| {
                (
                    s.id.to_string(),
                    json!({ "depth": doc.tree.depth[i], "self_ns": doc.tree.self_ns[i] }),
                )
            })
            .collect();
        assert_eq!(json!(spans), want["spans"], "{name}: spans");

        let m = &doc.memory_profile;
        let w = &want["memory"];
        assert_eq!(json!(m.peak_bytes), w["peak_bytes"], "{name}: peak_bytes");
        assert_eq!(
            json!(m.peak_timestamp_ns),
            w["peak_timestamp_ns"],
            "{name}: peak_timestamp_ns"
        );
        assert_eq!(
            json!(m.peak_device),
            w["peak_device"],
            "{name}: peak_device"
        );
        let by_category: BTreeMap<&str, u64> = TensorCategory::ALL
            .iter()
            .filter(|c| m.peak_by_category[c.index()] > 0)
            .map(|c| (c.as_str(), m.peak_by_category[c.index()]))
            .collect();
        assert_eq!(
            json!(by_category),
            w["peak_by_category"],
            "{name}: peak_by_category"
        );
        let live: Vec<Value> = m
            .live_at_peak
            .iter()
            .map(|a| json!({ "tensor_id": a.tensor_id, "bytes": a.bytes }))
            .collect();
        assert_eq!(json!(live), w["live_at_peak"], "{name}: live_at_peak");
        let device_peaks: BTreeMap<&str, u64> = m
            .devices
            .iter()
            .filter(|d| d.alloc_count + d.free_count > 0)
            .map(|d| (d.device.as_str(), d.peak_bytes))
            .collect();
        assert_eq!(
            json!(device_peaks),
            w["device_peaks"],
            "{name}: device_peaks"
        );
        let capacity: BTreeMap<&str, u64> = m
            .devices
            .iter()
            .filter_map(|d| d.capacity_bytes.map(|c| (d.device.as_str(), c)))
            .collect();
        assert_eq!(
            json!(capacity),
            w["device_capacity"],
            "{name}: device_capacity"
        );

        let ops: BTreeMap<String, Value> = op_groups(&doc.ops, OpGrouping::Name)
            .into_iter()
            .map(|g| {
                (g.op_name, json!({ "count": g.count, "total_ns": g.total_ns, "max_ns": g.max_ns, "output_bytes": g.output_bytes }))
            })
            .collect();
        assert_eq!(json!(ops), want["ops_by_name"], "{name}: ops_by_name");
        assert_eq!(
            json!(GradientCounts::of(&doc.gradients)),
            want["gradients"],
            "{name}: gradients"
        );
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} trace fixtures");
}

/// Every Chrome JSON fixture (`*.chrome.json`) imported through `AnyReader` in odd-sized chunks
/// agrees with `oracle.py`'s independent import: the eight summary numbers, each diagnostic's
/// line and severity, every span's depth, self time, duration and name path, and the Chrome
/// extras (track labels, element, instant and counter-sample counts, skipped phases).
#[test]
fn every_chrome_fixture_matches_the_oracle() {
    use candle_trace_schema::format::detect::{AnyDocument, AnyReader, Format};
    let mut checked = 0;
    for entry in std::fs::read_dir(fixtures_dir()).expect("fixtures dir") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        if !name.ends_with(".chrome.json") {
            continue;
        }
        let want: Value = serde_json::from_str(
            &std::fs::read_to_string(fixtures_dir().join("expected").join(format!("{name}.json")))
                .expect("expected file"),
        )
        .expect("JSON");
        let bytes = std::fs::read(&path).expect("fixture");
        for chunk_size in [37, 1 << 20] {
            let mut reader = AnyReader::new();
            for chunk in bytes.chunks(chunk_size) {
                reader.push(chunk);
            }
            let any = reader.finish();
            assert_eq!(any.format(), Some(Format::Chrome), "{name}");
            let AnyDocument::Trace(doc) = any else {
                panic!("{name}: not imported as a trace")
            };
            assert_eq!(
                serde_json::to_value(doc.summary()).unwrap(),
                want["summary"],
                "{name}: summary"
            );
            let diags: Vec<Value> = doc
                .diagnostics
                .iter()
                .map(|d| json!({ "line": d.line, "severity": d.severity.as_str() }))
                .collect();
            assert_eq!(json!(diags), want["diagnostics"], "{name}: diagnostics");
            let spans: BTreeMap<String, Value> = doc
                .spans
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    (
                        s.id.to_string(),
                        json!({
                            "depth": doc.tree.depth[i],
                            "self_ns": doc.tree.self_ns[i],
                            "duration_ns": s.duration_or_zero(),
                            "path": span_path(&doc, i),
                        }),
                    )
                })
                .collect();
            assert_eq!(json!(spans), want["spans"], "{name}: spans");
            let c = doc.chrome.as_ref().expect("chrome extras");
            let w = &want["chrome"];
            let tracks: Vec<Value> = c
                .tracks
                .iter()
                .map(|t| json!({ "label": t.label(), "process_name": t.process_name }))
                .collect();
            assert_eq!(json!(tracks), w["tracks"], "{name}: tracks");
            assert_eq!(json!(c.element_count), w["elements"], "{name}: elements");
            assert_eq!(json!(c.instants.len()), w["instants"], "{name}: instants");
            assert_eq!(
                json!(c.counters.len()),
                w["counter_samples"],
                "{name}: counter samples"
            );
            let skipped: BTreeMap<&str, u64> =
                c.skipped.iter().map(|s| (s.ph.as_str(), s.count)).collect();
            assert_eq!(json!(skipped), w["skipped"], "{name}: skipped");
            assert_eq!(
                json!(c.synthetic_root),
                w["synthetic_root"],
                "{name}: synthetic root"
            );
            // A diagnostic never names a line past the end of the file.
            let lines = bytes.iter().filter(|&&b| b == b'\n').count() as u64 + 1;
            assert!(doc
                .diagnostics
                .iter()
                .all(|d| d.line >= 1 && d.line <= lines));
        }
        checked += 1;
    }
    assert!(checked >= 9, "only {checked} chrome fixtures");
}
