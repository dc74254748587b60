//! Runs the `train_mlp` example in-process and reads its trace back with the schema reader.

#[path = "../examples/train_mlp.rs"]
#[allow(dead_code)]
mod train_mlp;

use candle_trace_schema::diagnostics::Severity;
use candle_trace_schema::document::TraceDocument;
use candle_trace_schema::events::{GradientState, Step};

#[test]
fn the_example_trace_reads_back_clean_and_matches_its_counts() {
    let dir = std::env::temp_dir().join(format!("candle-trace-train-mlp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("train.trace6.jsonl");
    let counts = train_mlp::run(&out).unwrap();
    let bytes = std::fs::read(&out).unwrap();
    std::fs::remove_dir_all(&dir).ok();

    let doc = TraceDocument::from_bytes(&bytes);
    let errors: Vec<_> = doc
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    assert!(errors.is_empty(), "errors: {errors:?}");
    assert!(
        doc.diagnostics.is_empty(),
        "warnings: {:?}",
        doc.diagnostics
    );

    let meta = &doc.meta.as_ref().unwrap().event;
    assert_eq!(meta.capture_step, 2);
    assert_eq!(meta.warmup_steps, 1);
    assert!(meta.candle_version.as_deref().unwrap().starts_with("0.11"));

    let summary = doc.summary();
    assert_eq!(summary.op_count, counts.op_count);
    assert_eq!(summary.span_count, counts.span_count);
    assert_eq!(summary.alloc_count, counts.alloc_count);
    assert_eq!(summary.free_count, counts.free_count);
    assert_eq!(summary.root_span_count, 1);
    assert_eq!(summary.max_depth, 2, "train_step > forward > fc1");
    assert!(summary.total_ns > 0);
    // 7 forward ops, spans train_step, forward, fc1, fc2, backward, optimizer.
    assert_eq!(counts.op_count, 7);
    assert_eq!(counts.span_count, 6);
    // Every activation and gradient allocated in the step is freed in it.
    assert_eq!(counts.alloc_count, counts.free_count);
    assert!(summary.peak_bytes > 0);

    for step in [Step::Forward, Step::Backward, Step::Optimizer] {
        assert!(doc.spans.iter().any(|s| s.step == Some(step)), "{step:?}");
    }
    assert_eq!(doc.spans.iter().filter(|s| s.measured).count(), 1);

    // fc1.{weight,bias}, fc2.{weight,bias} present; frozen.scale missing.
    assert_eq!(counts.gradients.present, 4);
    assert_eq!(counts.gradients.missing, 1);
    assert_eq!(doc.gradients.len(), 5);
    let missing: Vec<&str> = doc
        .gradients
        .iter()
        .filter(|g| g.event.state == GradientState::Missing)
        .map(|g| g.event.key.as_str())
        .collect();
    assert_eq!(missing, vec!["frozen.scale"]);
    assert!(doc
        .gradients
        .iter()
        .filter(|g| g.event.state == GradientState::Present)
        .all(|g| g.event.norm.is_some_and(|n| n.is_finite() && n > 0.0)));
    // Two host checkpoints around the step.
    assert_eq!(doc.device_memory.len(), 2);
}
