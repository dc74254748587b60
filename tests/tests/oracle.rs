//! Every trace/6 fixture read by `candle-trace-schema` agrees with `tests/fixtures/expected/`,
//! which `oracle.py` computed from SCHEMA.md alone: depth and self time of every span, the whole
//! memory profile, op aggregates by name and gradient counts.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use std::collections::BTreeMap;

use candle_trace_schema::document::TraceDocument;
use candle_trace_schema::events::TensorCategory;
use candle_trace_schema::gradients::GradientCounts;
use candle_trace_schema::ops::{op_groups, OpGrouping};
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
        let mut reader = candle_trace_schema::document::TraceReader::new();
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
                    s.id.clone(),
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
