//! Tracing spans go to the recorder installed for the step that records them: with recorders
//! one after another on a thread (each thread keeps the routed recorder, checked by a
//! generation number), no span reaches a recorder that has finished or one installed later.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

mod common;

use candle_trace_capture::Recorder;
use common::SharedBuf;

/// The names of the spans in `out`'s trace, in file order.
fn span_names(out: &SharedBuf) -> Vec<String> {
    out.document()
        .spans
        .iter()
        .map(|s| s.name.to_string())
        .collect()
}

#[test]
fn each_recorder_gets_the_tracing_spans_of_its_own_step() {
    candle_trace_capture::install().unwrap();
    // Built once, before any recorder, as candle-transformers builds its layers' spans.
    let first = tracing::info_span!("first_layer");
    let second = tracing::info_span!("second_layer");
    let mut outs = Vec::new();
    for span in [&first, &second] {
        let out = SharedBuf::default();
        let recorder = Recorder::builder("routing::test")
            .capture_step(1)
            .writer(out.clone())
            .install()
            .unwrap();
        let step = recorder.begin_step();
        drop(span.enter());
        drop(step);
        recorder.finish().unwrap();
        outs.push(out);
    }
    // After both have finished, a span goes nowhere.
    drop(first.enter());
    assert_eq!(span_names(&outs[0]), ["first_layer"]);
    assert_eq!(span_names(&outs[1]), ["second_layer"]);
}
