//! Runs the `train_mistral` and `train_mlp` examples in-process and checks the module names in
//! their files against the names written by hand from each model's config, and that each
//! example's capture code stays within seven marked lines.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// test code: a failed expectation is the report
// Both examples include `examples/common/run.rs`, so this crate loads it twice.
#![allow(clippy::duplicate_mod)]

#[path = "../examples/train_mistral.rs"]
#[allow(dead_code)]
mod train_mistral;

#[path = "../examples/train_mlp.rs"]
#[allow(dead_code)]
mod train_mlp;

mod common;

use std::collections::BTreeSet;
use std::sync::Mutex;

use candle_trace_capture::alloc::TrackingAllocator;
use candle_trace_schema::format::diagnostics::Severity;
use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::events::source;

#[global_allocator]
static ALLOC: TrackingAllocator = TrackingAllocator::system();

/// One recorder at a time: tracing spans go to the one routed recorder of the process.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn read(path: &std::path::Path) -> TraceDocument {
    let doc = TraceDocument::from_bytes(&std::fs::read(path).unwrap());
    let errors: Vec<_> = doc
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    doc
}

fn modules(doc: &TraceDocument) -> BTreeSet<(String, String)> {
    doc.spans
        .iter()
        .filter_map(|s| Some((s.name.to_string(), s.module.as_ref()?.to_string())))
        .collect()
}

fn module_names_events(doc: &TraceDocument) -> u64 {
    let sources = &doc.capture_sources.as_ref().unwrap().event.sources;
    let s = sources
        .iter()
        .find(|s| s.source == source::MODULE_NAMES)
        .unwrap();
    assert!(s.on);
    s.events
}

/// Lines of `source` marked `// capture`.
fn capture_lines(source: &str) -> usize {
    source
        .lines()
        .filter(|l| l.trim_end().ends_with("// capture"))
        .count()
}

#[test]
fn each_example_captures_in_at_most_seven_lines() {
    let mistral = include_str!("../examples/train_mistral.rs");
    let mlp = include_str!("../examples/train_mlp.rs");
    assert_eq!(capture_lines(mistral), 7);
    assert_eq!(capture_lines(mlp), 6);
}

#[test]
fn mistral_example_names_every_layer() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = common::temp_dir("named_examples_mistral");
    let out = dir.join("mistral.trace6.jsonl");
    let (report, losses) = train_mistral::run(&out).unwrap();
    assert_eq!(report.events_dropped, 0);
    assert_eq!(losses.len(), train_mistral::STEPS);
    let doc = read(&out);
    // From the config: 2 layers of q/k/v/o and gate/up/down projections and two norms, the
    // final norm and the head — 9 × 2 + 2 distinct modules, one forward: one span each.
    let mut want = BTreeSet::new();
    for i in 0..2 {
        for p in ["q_proj", "k_proj", "v_proj", "o_proj"] {
            want.insert((
                String::from("linear"),
                format!("model.layers.{i}.self_attn.{p}"),
            ));
        }
        for p in ["gate_proj", "up_proj", "down_proj"] {
            want.insert((String::from("linear"), format!("model.layers.{i}.mlp.{p}")));
        }
        for n in ["input_layernorm", "post_attention_layernorm"] {
            want.insert((String::from("rms-norm"), format!("model.layers.{i}.{n}")));
        }
    }
    want.insert((String::from("rms-norm"), String::from("model.norm")));
    want.insert((String::from("linear"), String::from("lm_head")));
    assert_eq!(modules(&doc), want);
    assert_eq!(module_names_events(&doc), 20);
}

#[test]
fn mlp_example_names_its_candle_nn_layers() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = common::temp_dir("named_examples_mlp");
    let out = dir.join("mlp.trace6.jsonl");
    let (report, losses) = train_mlp::run(&out).unwrap();
    assert_eq!(report.events_dropped, 0);
    assert!(losses.first() > losses.last(), "{losses:?}");
    let doc = read(&out);
    let want: BTreeSet<(String, String)> = [
        ("block", "mlp.hidden"),
        ("linear", "mlp.fc1"),
        ("linear", "mlp.fc2"),
        ("linear", "mlp.head"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(modules(&doc), want);
    assert_eq!(module_names_events(&doc), 4);
    // Parameters: fc1 16×64 + 64, fc2 64×64 + 64, head 64×4 + 4, all f32.
    let bytes: u64 = doc.gradients.iter().filter_map(|g| g.storage_bytes).sum();
    assert_eq!(bytes, 4 * (16 * 64 + 64 + 64 * 64 + 64 + 64 * 4 + 4));
}
