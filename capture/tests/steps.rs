//! `RecorderBuilder::capture_steps`: one trace/6 file per captured step, read back with the
//! schema's reader and analysed as a step set.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

mod common;

use candle_trace_capture::{Pass, Recorder, Sink};
use candle_trace_schema::analysis::steps::StepSet;
use candle_trace_schema::format::document::TraceDocument;
use common::{errors, span_names, temp_dir};

#[test]
fn three_captured_steps_write_three_files_of_one_run() {
    let dir = temp_dir("capture_steps");
    let steps = Recorder::builder("train::step")
        .run_id("run-7")
        .tag("batch_size", "4")
        .capture_steps(2..=4, &dir)
        .unwrap();
    for n in 1..=5u64 {
        let token = steps.begin_step();
        assert_eq!(token.step(), n);
        assert_eq!(token.is_captured(), (2..=4).contains(&n));
        let rec = steps.recorder();
        assert_eq!(rec.is_recording(), (2..=4).contains(&n), "step {n}");
        let _total = rec.measured("train_step");
        {
            let _forward = rec.pass(Pass::Forward);
            let _enc = rec.module(format!("enc{n}"));
        }
        let _backward = rec.pass(Pass::Backward);
    }
    assert!(steps.capture_done());
    let reports = steps.finish().unwrap();
    assert_eq!(reports.len(), 3);

    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "step-2.trace6.jsonl",
            "step-3.trace6.jsonl",
            "step-4.trace6.jsonl"
        ]
    );
    let docs: Vec<TraceDocument> = names
        .iter()
        .map(|n| TraceDocument::from_bytes(&std::fs::read(dir.join(n)).unwrap()))
        .collect();
    for (doc, n) in docs.iter().zip(2u64..) {
        assert!(errors(doc).is_empty(), "step {n}: {:?}", errors(doc));
        let meta = doc.meta.as_ref().unwrap();
        assert_eq!(
            (
                meta.run_id.as_str(),
                meta.correlation_id.as_str(),
                meta.capture_step,
                meta.warmup_steps
            ),
            ("run-7", "run-7", n, n - 1)
        );
        assert_eq!(meta.tags.get("batch_size").map(String::as_str), Some("4"));
        // Only that step's spans: its own module name, one measured region.
        assert_eq!(
            span_names(doc),
            ["train_step", "forward", &format!("enc{n}"), "backward"]
        );
        assert_eq!(doc.spans.iter().filter(|s| s.measured).count(), 1);
    }
    let refs: Vec<&TraceDocument> = docs.iter().collect();
    let set = StepSet::of(&refs);
    assert_eq!(set.run_ids, ["run-7"]);
    let order: Vec<Option<u64>> = set.steps.iter().map(|s| s.capture_step).collect();
    assert_eq!(order, [Some(2), Some(3), Some(4)]);
    assert!(set.steps.iter().all(|s| s.phases_ns.is_some()));
}

#[test]
fn bad_ranges_and_writers_are_refused() {
    let dir = temp_dir("capture_steps_bad");
    let err = |b: candle_trace_capture::RecorderBuilder, r| b.capture_steps(r, &dir).unwrap_err();
    #[allow(clippy::reversed_empty_ranges)] // the empty range is the point
    let empty = 5..=4;
    assert_eq!(
        err(Recorder::builder("e"), empty).to_string(),
        "capture_steps needs a non-empty range of one-based steps, e.g. 2..=9"
    );
    assert_eq!(
        err(Recorder::builder("e"), 0..=2).to_string(),
        "capture_steps needs a non-empty range of one-based steps, e.g. 2..=9"
    );
    assert_eq!(
        err(Recorder::builder("e").writer(Vec::new()), 2..=3).to_string(),
        "capture_steps writes one file per step into a directory: use it without .writer(W)"
    );
}
