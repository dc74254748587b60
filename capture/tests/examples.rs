//! Runs the `train_llama` and `serve_llama` examples in-process (a real candle-transformers
//! Llama), then reads each file they wrote with the schema's `AnyReader` and with the
//! `candle-trace` CLI, and checks that the files are clean and that what the library measured
//! is what the model's configuration implies, worked out by hand below.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// test code: a failed expectation is the report
// Both examples include `examples/common/llama.rs`, so this crate loads it twice.
#![allow(clippy::duplicate_mod)]

#[path = "../examples/train_llama.rs"]
#[allow(dead_code)]
mod train_llama;

#[path = "../examples/serve_llama.rs"]
#[allow(dead_code)]
mod serve_llama;

#[path = "../examples/serve_batched.rs"]
#[allow(dead_code)]
mod serve_batched;

mod common;

use std::path::Path;

use candle_trace_capture::alloc::TrackingAllocator;
use candle_trace_schema::analysis::modules::ModulePaths;
use candle_trace_schema::format::detect::{AnyDocument, AnyReader};
use candle_trace_schema::format::diagnostics::Severity;
use candle_trace_schema::format::events::{
    source, GradientState, MemoryAction, SpanKind, TensorCategory,
};
use candle_trace_schema::format::profile::Status;
use serde_json::Value;

// The examples install this allocator in their own binaries; included as modules, they leave
// it to the test binary.
#[global_allocator]
static ALLOC: TrackingAllocator = TrackingAllocator::system();

/// Read `path` with the streaming reader, in small chunks.
fn read_any(path: &Path) -> AnyDocument {
    let bytes = std::fs::read(path).unwrap();
    let mut reader = AnyReader::new();
    for chunk in bytes.chunks(4096) {
        reader.push(chunk);
    }
    reader.finish()
}

/// Run the CLI; returns (exit code, stdout parsed as JSON).
fn cli_json(command: &str, path: &Path) -> (i32, Value) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = candle_trace_cli::run(
        ["candle-trace", command, "--json", path.to_str().unwrap()],
        &mut out,
        &mut err,
    );
    assert!(err.is_empty(), "stderr: {}", String::from_utf8_lossy(&err));
    (code, serde_json::from_slice(&out).unwrap())
}

/// `validate --json` exits 0 with no diagnostic at all.
fn assert_cli_validates_clean(path: &Path, format: &str) {
    let (code, v) = cli_json("validate", path);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["format"], format);
    assert_eq!(v["errors"], 0, "{v:#}");
    assert_eq!(v["warnings"], 0, "{v:#}");
    assert_eq!(v["diagnostics"].as_array().map(Vec::len), Some(0));
}

/// The module keys of one forward call of the 2-layer Llama, from its source and its weight
/// names by hand (the examples build it from `name_modules(vb)`): `Block::forward` enters
/// `block` (no weight of its own: the common prefix of its layers, `model.layers.N`), then
/// `rms-norm` (input_layernorm), `attn` (`…self_attn`: q, k, v `linear`, two `attn-rot`, which
/// load nothing and hold no named span, so `…self_attn/attn-rot[k]`, o `linear`), `rms-norm`
/// (post_attention_layernorm), `mlp` (gate, up, down `linear`); after the blocks, `rms-norm`
/// (model.norm) and `linear` (lm_head). The embedding is candle-nn's, which has no span.
/// 2 × 14 + 2 = 30 spans, one key each.
fn llama_paths_by_hand() -> Vec<String> {
    let mut paths = Vec::new();
    for b in 0..2 {
        let block = format!("model.layers.{b}");
        paths.push(block.clone());
        paths.push(format!("{block}.input_layernorm"));
        paths.push(format!("{block}.self_attn"));
        for p in ["q_proj", "k_proj", "v_proj", "o_proj"] {
            paths.push(format!("{block}.self_attn.{p}"));
        }
        for r in 0..2 {
            paths.push(format!("{block}.self_attn/attn-rot[{r}]"));
        }
        paths.push(format!("{block}.post_attention_layernorm"));
        paths.push(format!("{block}.mlp"));
        for p in ["gate_proj", "up_proj", "down_proj"] {
            paths.push(format!("{block}.mlp.{p}"));
        }
    }
    paths.push("model.norm".into());
    paths.push("lm_head".into());
    paths.sort();
    paths
}

/// A recorder takes the tracing spans of every thread during its captured step: the two
/// examples take turns so that one's model does not run inside the other's capture.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn train_llama_trace_is_measured_from_the_real_model() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = common::temp_dir("example-train-llama");
    let out = dir.join("train.trace6.jsonl");
    let train_llama::Outcome { report, losses } = train_llama::run(&out).unwrap();
    assert_eq!(report.path.as_deref(), Some(out.as_path()));
    assert_eq!(report.events_dropped, 0);
    assert!(report.notes.is_empty(), "{:?}", report.notes);
    assert_eq!(losses.len(), train_llama::STEPS);
    assert!(losses.iter().all(|l| l.is_finite()));

    assert_cli_validates_clean(&out, "candle-graph/trace/6");
    let AnyDocument::Trace(doc) = read_any(&out) else {
        panic!("not a trace")
    };
    assert_eq!(doc.meta.as_ref().unwrap().event.capture_step, 2);

    // Spans: the measured region, the three steps, and the model's 30 module spans, each a place
    // of its own.
    let paths = ModulePaths::new(&doc);
    let mut module_paths: Vec<String> = (0..doc.spans.len())
        .filter(|&i| doc.spans[i].span_kind == SpanKind::Module)
        .map(|i| paths.path(i).to_string())
        .collect();
    module_paths.sort();
    assert_eq!(module_paths, llama_paths_by_hand());
    assert_eq!(doc.spans.len(), 1 + 3 + 30);
    let measured: Vec<&str> = doc
        .spans
        .iter()
        .filter(|s| s.measured)
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(measured, vec!["train_step"]);

    // Ops: one row per leaf layer (a span with no span inside): per block 2 rms-norm,
    // 7 linear, 2 attn-rot; then model.norm and lm_head: 2 × 11 + 2 = 24.
    assert_eq!(doc.ops.len(), 24);
    let count = |name: &str| doc.ops.iter().filter(|o| o.op_name == name).count();
    assert_eq!(
        (count("linear"), count("rms-norm"), count("attn-rot")),
        (15, 5, 4)
    );
    for op in &doc.ops {
        let span = doc.span(op.span_id).unwrap();
        assert_eq!(span.name.as_str(), op.op_name);
        assert_eq!(Some(op.duration_ns), span.duration_ns);
    }
    // Their output bytes, measured by the allocator, against the shapes by hand (f32, batch 2,
    // 16 tokens): hidden states 2·16·64·4 = 8192; gate and up projections 2·16·172·4 = 22 016;
    // rotary embedding of q or k, 2 × 4 heads × 16 × 16 × 4 = 8192; lm_head on the last token
    // only, 2·256·4 = 2048.
    let mut measured: Vec<(String, Option<u64>)> = doc
        .ops
        .iter()
        .map(|o| (o.op_name.to_string(), o.storage_bytes))
        .collect();
    measured.sort();
    let mut by_hand: Vec<(String, Option<u64>)> = Vec::new();
    for _layer in 0..2 {
        for bytes in [8192, 8192, 8192, 8192, 22_016, 22_016, 8192] {
            by_hand.push(("linear".into(), Some(bytes)));
        }
        by_hand.push(("rms-norm".into(), Some(8192)));
        by_hand.push(("rms-norm".into(), Some(8192)));
        by_hand.push(("attn-rot".into(), Some(8192)));
        by_hand.push(("attn-rot".into(), Some(8192)));
    }
    by_hand.push(("rms-norm".into(), Some(8192)));
    by_hand.push(("linear".into(), Some(2048)));
    by_hand.sort();
    assert_eq!(measured, by_hand);

    // Gradients: 21 parameters (embedding, 9 per layer, the final norm, lm_head); candle-nn's
    // rms_norm has no backward, so only lm_head, after the last norm, gets one.
    assert_eq!(doc.gradients.len(), 21);
    let present: Vec<&str> = doc
        .gradients
        .iter()
        .filter(|g| g.event.state == GradientState::Present)
        .map(|g| g.event.key.as_str())
        .collect();
    assert_eq!(present, vec!["lm_head.weight"]);

    // The autograd graph: lm_head.weight (256 × 64 f32 = 65 536 bytes) is its only parameter;
    // every tensor's bytes are its elements × 4.
    let params: Vec<_> = doc
        .tensors
        .iter()
        .filter(|t| t.event.category == TensorCategory::Parameter)
        .collect();
    assert_eq!(params.len(), 1);
    assert_eq!(params[0].event.shape, vec![256, 64]);
    assert_eq!(params[0].event.storage_bytes, Some(65_536));
    for t in &doc.tensors {
        let elements: u64 = t.event.shape.iter().product();
        assert_eq!(t.event.storage_bytes, Some(elements * 4), "{:?}", t.event);
    }
    // Each graph tensor sits in the span that created it: lm_head's `linear` made the
    // transposed weight (a 64 × 256 view) and the logits (2 × 256); the loss's tensors were made
    // in `forward` outside any layer; the parameter, made by `load`, in `backward`.
    let span_name = |id: &str| doc.span(id).map(|s| s.name.to_string()).unwrap_or_default();
    let mut in_linear: Vec<Vec<u64>> = doc
        .tensors
        .iter()
        .filter(|t| span_name(&t.event.span_id) == "linear")
        .map(|t| t.event.shape.clone())
        .collect();
    in_linear.sort();
    assert_eq!(in_linear, vec![vec![2, 256], vec![64, 256]]);
    assert_eq!(span_name(&params[0].event.span_id), "backward");
    assert!(doc
        .tensors
        .iter()
        .filter(|t| t.event.category == TensorCategory::Activation)
        .all(|t| ["linear", "forward"].contains(&span_name(&t.event.span_id).as_str())));

    // Host memory from the allocator: every free follows its alloc, all in known spans.
    assert!(!doc.memory.is_empty());
    let allocs = doc
        .memory
        .iter()
        .filter(|m| m.action == MemoryAction::Alloc)
        .count();
    assert!(allocs > 0);
    for m in &doc.memory {
        assert!(doc.span(m.span_id).is_some(), "{m:?}");
        assert!(m.bytes >= 1024);
    }
    assert!(doc.summary().peak_bytes > 0);

    // What the file says was captured.
    let sources = &doc.capture_sources.as_ref().unwrap().event;
    let events = |name: &str| sources.get(name).map(|s| (s.on, s.events));
    assert_eq!(events(source::TRACING), Some((true, 30)));
    assert_eq!(events(source::LAYER_OPS), Some((true, 24)));
    assert_eq!(events(source::GRADIENTS), Some((true, 21)));
    assert_eq!(
        events(source::GRAPH),
        Some((true, doc.tensors.len() as u64))
    );
    assert_eq!(events(source::ALLOCATOR), Some((true, allocs as u64)));
    assert_eq!(
        events(source::DEVICE_MEMORY),
        Some((true, 6)),
        "a checkpoint at both edges of forward, backward and optimizer"
    );
    assert!(sources.warnings.is_empty());
}

#[test]
fn serve_llama_profile_carries_module_spans_and_token_timing() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = common::temp_dir("example-serve-llama");
    let out = dir.join("infer.profile.jsonl");
    let outcome = serve_llama::run(&out).unwrap();
    let report = &outcome.report;
    assert_eq!(report.events_dropped, 0);
    assert_eq!(report.events_invalid, 0, "{:?}", report.invalid_messages);
    assert_eq!(report.requests_sampled, 4);
    let lengths: Vec<Option<usize>> = outcome
        .outputs
        .iter()
        .map(|(_, t)| t.as_ref().map(Vec::len))
        .collect();
    assert_eq!(lengths, vec![Some(8), Some(4), Some(12), None]);

    assert_cli_validates_clean(&out, "inference profile (schema_version 1)");
    let AnyDocument::Profile(doc) = read_any(&out) else {
        panic!("not a profile")
    };
    let requests = doc.requests();
    let tokens: Vec<Option<u64>> = requests.iter().map(|r| r.output_tokens).collect();
    assert_eq!(tokens[..3], [Some(8), Some(4), Some(12)]);
    assert_eq!(requests[3].status, Status::Failure);

    // Module spans: 30 per forward call (see `llama_paths_by_hand`), one prefill and
    // (tokens − 1) decode steps per served request.
    let modules = doc.module_spans();
    for (request, want_tokens) in modules.iter().zip([8usize, 4, 12]) {
        assert_eq!(
            request.forwards.len(),
            want_tokens,
            "{}",
            request.request_id
        );
        assert_eq!(request.unreadable, 0);
        for forward in &request.forwards {
            let mut paths: Vec<String> = forward.spans.iter().map(|s| s.path.clone()).collect();
            paths.sort();
            assert_eq!(paths, llama_paths_by_hand(), "{}", request.request_id);
        }
        assert_eq!(request.forwards[0].forward, "prefill");
        assert!(request.forwards[1..].iter().all(|f| f.forward == "decode"));
    }
    // The refused request ran no forward call.
    assert!(modules.iter().all(|m| m.request_id != "req-4-too-long"));
}

/// The batch sizes of one engine's forwards in `serve_batched`, worked out from its scheduler
/// (blocks of 8 tokens, 7 a pool, at most 4 a wave; a wave decodes until its longest request
/// is done, listing only the requests that still want tokens).
fn batched_waves_by_hand(engine: &str) -> Vec<u64> {
    let wave = |prefill: u64, decodes: &[(u64, usize)]| {
        let mut sizes = vec![prefill];
        for &(size, n) in decodes {
            sizes.extend(std::iter::repeat_n(size, n));
        }
        sizes
    };
    match engine {
        // r1 r2 r3 (6 tokens; r6, r8 deferred: 1 block free); r4 r5 (12; r7 deferred);
        // r6 r8; r7 alone.
        "engine-0" => [
            wave(3, &[(3, 5), (2, 2)]),
            wave(2, &[(2, 5), (1, 4)]),
            wave(2, &[(2, 3), (1, 4)]),
            wave(1, &[(1, 7)]),
        ]
        .concat(),
        // r1 r2 r3 (9 tokens; r4 deferred: 0 free); r4; r5 (5 tokens).
        _ => [
            wave(3, &[(3, 3), (2, 2), (1, 2)]),
            wave(1, &[(1, 5)]),
            wave(1, &[(1, 5)]),
        ]
        .concat(),
    }
}

#[test]
fn serve_batched_profile_has_batched_forwards_deferrals_and_one_time_axis() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = common::temp_dir("example-serve-batched");
    let out = dir.join("infer.profile.jsonl");
    let outcome = serve_batched::run(&out).unwrap();
    let report = &outcome.report;
    assert_eq!(report.events_dropped, 0);
    assert_eq!(report.events_invalid, 0, "{:?}", report.invalid_messages);
    assert_eq!(report.requests_sampled, 14);
    let mut lengths: Vec<(String, Option<usize>)> = outcome
        .outputs
        .iter()
        .map(|(id, t)| (id.clone(), t.as_ref().map(Vec::len)))
        .collect();
    lengths.sort();
    let want: Vec<(String, Option<usize>)> = serve_batched::WORKERS
        .iter()
        .flat_map(|w| w.iter())
        .map(|&(id, prompt, wanted)| (id.to_string(), (prompt + wanted <= 64).then_some(wanted)))
        .collect();
    let mut want = want;
    want.sort();
    assert_eq!(lengths, want);

    assert_cli_validates_clean(&out, "inference profile (schema_version 1)");
    let AnyDocument::Profile(doc) = read_any(&out) else {
        panic!("not a profile")
    };
    let requests = doc.requests();
    assert_eq!(requests.len(), 14);
    assert!(requests.iter().all(|r| r.request_id.starts_with('w')));
    let iterations = doc.iterations();
    assert_eq!(iterations.iterations.len(), 54);
    for engine in ["engine-0", "engine-1"] {
        let sizes: Vec<u64> = iterations
            .iterations
            .iter()
            .filter(|i| i.engine == engine)
            .map(|i| i.batch_size)
            .collect();
        assert_eq!(sizes, batched_waves_by_hand(engine), "{engine}");
    }
    // Every request's tokens were committed by the forwards that list it.
    for r in &requests {
        let committed: u64 = iterations
            .iterations
            .iter()
            .flat_map(|i| &i.requests)
            .filter(|p| p.request_id == r.request_id)
            .map(|p| p.committed_tokens)
            .sum();
        assert_eq!(
            Some(committed).filter(|&c| c > 0),
            r.output_tokens,
            "{}",
            r.request_id
        );
    }

    let resources = doc.resources();
    let kinds: Vec<(&str, u64, u64, Option<i64>)> = resources
        .kinds
        .iter()
        .map(|k| {
            (
                k.resource_kind.as_str(),
                k.deferrals,
                k.rejections,
                k.peak.as_ref().map(|p| p.level),
            )
        })
        .collect();
    assert_eq!(
        kinds.iter().find(|k| k.0 == "kv_blocks:engine-0"),
        Some(&("kv_blocks:engine-0", 3, 1, Some(6)))
    );
    assert_eq!(
        kinds.iter().find(|k| k.0 == "kv_blocks:engine-1"),
        Some(&("kv_blocks:engine-1", 1, 0, Some(7)))
    );
    assert!(resources
        .kinds
        .iter()
        .all(|k| k.underflows.is_empty() && k.leaks.is_empty() && k.capacity == Some(7)));

    // One time axis: a group per worker thread, a lane per engine; w0-r7 waited three waves.
    let axis = doc.request_axis();
    let groups: Vec<(Option<&str>, usize)> = axis
        .groups
        .iter()
        .map(|g| (g.thread.as_deref(), g.requests.len()))
        .collect();
    assert!(groups.contains(&(Some("worker-0"), 9)), "{groups:?}");
    assert!(groups.contains(&(Some("worker-1"), 5)), "{groups:?}");
    assert_eq!(axis.engines.len(), 2);
    let r7 = axis
        .groups
        .iter()
        .flat_map(|g| &g.requests)
        .find(|r| r.request_id == "w0-r7")
        .unwrap();
    assert_eq!(r7.forwards.len(), 8);
    assert!(r7.queue.is_some_and(|q| q.end_ns > q.start_ns));

    // Module spans: once per forward, under its engine, 30 per forward.
    let modules = doc.module_spans();
    let owners: Vec<(&str, usize)> = modules
        .iter()
        .map(|m| (m.request_id.as_str(), m.forwards.len()))
        .collect();
    assert_eq!(owners.len(), 2, "{owners:?}");
    assert!(owners.contains(&("engine-0", 34)) && owners.contains(&("engine-1", 20)));
    for forward in modules.iter().flat_map(|m| &m.forwards) {
        assert_eq!(forward.forward, "iteration");
        let mut paths: Vec<String> = forward.spans.iter().map(|s| s.path.clone()).collect();
        paths.sort();
        assert_eq!(paths, llama_paths_by_hand());
    }
}

#[test]
fn severity_is_what_validate_counts() {
    // Guard for the helpers above: a broken file makes `validate` exit 1.
    let dir = common::temp_dir("example-broken");
    let path = dir.join("broken.jsonl");
    std::fs::write(&path, "{\"kind\":\"span_end\",\"id\":\"s1\"}\n").unwrap();
    let (code, v) = cli_json("validate", &path);
    assert_eq!(code, 1);
    assert!(v["errors"].as_u64().unwrap() > 0);
    let AnyDocument::Trace(doc) = read_any(&path) else {
        panic!("not a trace")
    };
    assert!(doc
        .diagnostics
        .iter()
        .any(|d| d.severity == Severity::Error));
}

#[test]
fn train_llama_captures_several_steps_into_one_file_each() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = common::temp_dir("example-train-llama-steps");
    let reports = train_llama::run_steps(&dir, 5, 2..=4).unwrap();
    assert_eq!(reports.len(), 3);
    let mut run_ids = Vec::new();
    for (report, n) in reports.iter().zip(2u64..) {
        let path = dir.join(format!("step-{n}.trace6.jsonl"));
        assert_eq!(report.path.as_deref(), Some(path.as_path()));
        assert!(report.notes.is_empty(), "step {n}: {:?}", report.notes);
        assert_cli_validates_clean(&path, "candle-graph/trace/6");
        let AnyDocument::Trace(doc) = read_any(&path) else {
            panic!("not a trace")
        };
        let meta = &doc.meta.as_ref().unwrap().event;
        assert_eq!((meta.capture_step, meta.warmup_steps), (n, n - 1));
        run_ids.push((meta.run_id.clone(), meta.correlation_id.clone()));
        // Each file holds its own update: the measured region, the three steps and the same
        // 30 module spans as the single-step capture (see the test above).
        assert_eq!(doc.spans.iter().filter(|s| s.measured).count(), 1);
        let modules = doc
            .spans
            .iter()
            .filter(|s| s.span_kind == SpanKind::Module)
            .count();
        assert_eq!(modules, 30, "step {n}");
    }
    run_ids.dedup();
    assert_eq!(run_ids.len(), 1, "{run_ids:?}");
    // The CLI reads the directory as one run of three steps.
    let (code, v) = cli_json("steps", &dir);
    assert_eq!(code, 0);
    let steps: Vec<u64> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["capture_step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [2, 3, 4]);
    assert_eq!(v["modules"].as_array().unwrap().len(), 30);
}
