//! `tracing` spans recorded through `TraceLayer`, read back with the schema reader.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

mod common;

use candle_trace_capture::{Recorder, SpanKind, TraceLayer};
use common::{parent_name, span_names, SharedBuf};
use tracing_subscriber::layer::SubscriberExt;

#[test]
fn tracing_spans_nest_inside_recorder_spans_and_around_them() {
    let out = SharedBuf::default();
    let rec = Recorder::builder("layer")
        .capture_step(2)
        .writer(out.clone())
        .build()
        .unwrap();
    let subscriber = tracing_subscriber::registry().with(TraceLayer::new(rec.clone()));
    tracing::subscriber::with_default(subscriber, || {
        // Entered before the captured step and exited inside it: never recorded.
        let mut early = Some(tracing::info_span!("early").entered());
        for _ in 0..3 {
            let _step = rec.begin_step();
            drop(early.take());
            let _total = rec.measured("update");
            let _outer = rec.span("outer", SpanKind::Function);
            let linear = tracing::info_span!("linear");
            let _entered = linear.enter();
            {
                let _inner = tracing::info_span!("inner_fn").entered();
                let _op = rec.op_span("matmul");
            }
            // A span entered on another thread takes its parent from tracing's span tree.
            let dispatch = tracing::dispatcher::get_default(|d| d.clone());
            std::thread::scope(|s| {
                s.spawn(|| {
                    tracing::dispatcher::with_default(&dispatch, || {
                        let _worker = tracing::info_span!(parent: &linear, "worker").entered();
                        let _child = rec.span("worker_child", SpanKind::Function);
                    });
                });
            });
        }
    });
    rec.finish().unwrap();

    let doc = out.document();
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    assert_eq!(
        span_names(&doc),
        [
            "update",
            "outer",
            "linear",
            "inner_fn",
            "matmul",
            "worker",
            "worker_child"
        ]
    );
    assert_eq!(parent_name(&doc, "linear").as_deref(), Some("outer"));
    assert_eq!(parent_name(&doc, "inner_fn").as_deref(), Some("linear"));
    assert_eq!(parent_name(&doc, "matmul").as_deref(), Some("inner_fn"));
    assert_eq!(parent_name(&doc, "worker").as_deref(), Some("linear"));
    assert_eq!(parent_name(&doc, "worker_child").as_deref(), Some("worker"));
    let kind = |name: &str| doc.spans.iter().find(|s| s.name == name).unwrap().span_kind;
    assert_eq!(kind("linear"), SpanKind::Module);
    assert_eq!(kind("inner_fn"), SpanKind::Function);
    assert!(doc.spans.iter().all(|s| s.duration_ns.is_some()));
}

#[test]
fn a_custom_module_rule_decides_the_kind() {
    let out = SharedBuf::default();
    let rec = Recorder::builder("layer")
        .capture_step(1)
        .writer(out.clone())
        .build()
        .unwrap();
    let layer = TraceLayer::new(rec.clone()).with_module_rule(|m| m.name() == "rot");
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        let _step = rec.begin_step();
        let _total = rec.measured("update");
        let _rot = tracing::trace_span!("rot").entered();
        let _mlp = tracing::trace_span!("mlp").entered();
    });
    rec.finish().unwrap();
    let doc = out.document();
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    let kinds: Vec<SpanKind> = doc.spans.iter().map(|s| s.span_kind).collect();
    assert_eq!(
        kinds,
        [SpanKind::Function, SpanKind::Module, SpanKind::Function]
    );
}

#[test]
fn a_span_entered_on_two_threads_at_once_closes_each_enter_on_its_own_thread() {
    use std::sync::Barrier;
    use std::time::Duration;
    let out = SharedBuf::default();
    let rec = Recorder::builder("layer")
        .capture_step(1)
        .writer(out.clone())
        .build()
        .unwrap();
    let dispatch =
        tracing::Dispatch::new(tracing_subscriber::registry().with(TraceLayer::new(rec.clone())));
    tracing::dispatcher::with_default(&dispatch, || {
        let _step = rec.begin_step();
        let _total = rec.measured("update");
        let shared = tracing::info_span!("shared");
        let both_in = Barrier::new(2);
        let a_out = Barrier::new(2);
        std::thread::scope(|s| {
            // A enters first and leaves first, after 5 ms; B leaves 50 ms after that.
            s.spawn(|| {
                tracing::dispatcher::with_default(&dispatch, || {
                    let entered = shared.enter();
                    both_in.wait();
                    std::thread::sleep(Duration::from_millis(5));
                    drop(entered);
                    let _after = rec.span("after_a", SpanKind::Function);
                    a_out.wait();
                });
            });
            s.spawn(|| {
                tracing::dispatcher::with_default(&dispatch, || {
                    std::thread::sleep(Duration::from_millis(5));
                    let entered = shared.enter();
                    both_in.wait();
                    a_out.wait();
                    std::thread::sleep(Duration::from_millis(50));
                    drop(entered);
                    let _after = rec.span("after_b", SpanKind::Function);
                });
            });
        });
    });
    rec.finish().unwrap();

    let doc = out.document();
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    let shared: Vec<u64> = doc
        .spans
        .iter()
        .filter(|s| s.name == "shared")
        .map(|s| s.duration_ns.unwrap())
        .collect();
    // In file order A's enter, then B's: A's lasted about 5 ms, B's over 50 ms.
    assert_eq!(shared.len(), 2);
    assert!(
        shared[0] < 40_000_000 && shared[1] >= 50_000_000,
        "{shared:?}"
    );
    // Each thread's stack is empty after its exit: the next spans are roots.
    assert_eq!(parent_name(&doc, "after_a"), None);
    assert_eq!(parent_name(&doc, "after_b"), None);
}
