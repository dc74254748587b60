//! The viewer panels' numbers from `candle-trace-schema` agree with `tests/fixtures/expected/`
//! (`panels` of every trace/6 fixture; histograms and waterfalls of every inference profile),
//! which `oracle.py` re-derives from the rules in the schema modules' docs.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use candle_trace_schema::analysis::flops::efficiency;
use candle_trace_schema::analysis::gradients::norm_histogram;
use candle_trace_schema::analysis::histogram::Histogram;
use candle_trace_schema::analysis::phases::{module_pairs, phase_breakdown};
use candle_trace_schema::analysis::reconcile::reconcile;
use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::profile::read_profile;
use candle_trace_tests::fixtures_dir;
use serde_json::{json, Value};

fn fixtures(suffix: &str) -> Vec<(String, Vec<u8>, Value)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(fixtures_dir()).expect("fixtures dir") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        if !name.ends_with(suffix) {
            continue;
        }
        let want: Value = serde_json::from_str(
            &std::fs::read_to_string(fixtures_dir().join("expected").join(format!("{name}.json")))
                .expect("expected file"),
        )
        .expect("JSON");
        out.push((name, std::fs::read(&path).expect("fixture"), want));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn trace_panels_match_the_oracle() {
    let mut checked = 0;
    for (name, bytes, want) in fixtures(".trace6.jsonl") {
        let doc = TraceDocument::from_bytes(&bytes);
        let w = &want["panels"];

        let phases = phase_breakdown(&doc).map(|b| {
            json!({
                "region": doc.spans[b.region_span].id,
                "region_ns": b.region_ns,
                "forward_ns": b.forward_ns,
                "backward_ns": b.backward_ns,
                "optimizer_ns": b.optimizer_ns,
                "other_ns": b.other_ns,
                "overlap_ns": b.overlap_ns,
            })
        });
        assert_eq!(json!(phases), w["phases"], "{name}: phases");
        assert_eq!(
            serde_json::to_value(module_pairs(&doc)).unwrap(),
            w["module_pairs"],
            "{name}: module pairs"
        );

        let e = efficiency(&doc);
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            w["efficiency"],
            "{name}: efficiency"
        );

        let r = reconcile(&doc);
        let points: Vec<Value> = r
            .points
            .iter()
            .map(|p| {
                json!({
                    "timestamp_ns": p.timestamp_ns,
                    "device": p.device,
                    "used_bytes": p.used_bytes,
                    "live_bytes": p.live_bytes,
                    "unexplained_bytes": p.unexplained_bytes,
                    "overcount_bytes": p.overcount_bytes,
                })
            })
            .collect();
        assert_eq!(
            json!({ "points": points, "max_unexplained": r.max_unexplained }),
            w["reconcile"],
            "{name}: reconcile"
        );

        assert_eq!(
            serde_json::to_value(norm_histogram(&doc.gradients)).unwrap(),
            w["norm_histogram"],
            "{name}: norm histogram"
        );
        checked += 1;
    }
    assert!(checked >= 21, "only {checked} trace fixtures");
}

#[test]
fn profile_panels_match_the_oracle() {
    let mut checked = 0;
    for (name, bytes, want) in fixtures(".profile.jsonl") {
        let doc = read_profile(&bytes);
        let requests = doc.requests();
        let ttft: Vec<u64> = requests.iter().filter_map(|r| r.ttft_us).collect();
        let itl: Vec<u64> = requests.iter().flat_map(|r| r.itl_nanos.clone()).collect();
        assert_eq!(
            serde_json::to_value(Histogram::of(&ttft)).unwrap(),
            want["ttft_histogram"],
            "{name}: ttft histogram"
        );
        assert_eq!(
            serde_json::to_value(Histogram::of(&itl)).unwrap(),
            want["itl_histogram"],
            "{name}: itl histogram"
        );
        let waterfalls: Vec<Value> = doc
            .waterfalls()
            .iter()
            .map(|w| {
                json!({
                    "request_id": w.request_id,
                    "origin_unix_nanos": w.origin_unix_nanos,
                    "bars": w.bars.iter().map(|b| json!({
                        "phase": b.phase, "start_ns": b.start_ns,
                        "duration_ns": b.duration_ns, "line": b.line,
                    })).collect::<Vec<_>>(),
                    "markers": w.markers.iter().map(|m| json!({
                        "phase": m.phase, "event_kind": m.event_kind,
                        "at_ns": m.at_ns, "line": m.line,
                    })).collect::<Vec<_>>(),
                    "commits_ns": w.commits_ns,
                    "stages": serde_json::to_value(&w.stages).unwrap(),
                    "decode_ready_ns": w.decode_ready_ns,
                    "extent_ns": w.extent_ns,
                })
            })
            .collect();
        assert_eq!(json!(waterfalls), want["waterfalls"], "{name}: waterfalls");
        checked += 1;
    }
    assert!(checked >= 3, "only {checked} profile fixtures");
}
