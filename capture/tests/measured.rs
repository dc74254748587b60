//! What capture measures by itself: host allocations attributed to the span that made them,
//! and the warning for a subscriber installed after the model was built.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

mod common;

use std::sync::Mutex;

use candle_core::{DType, Device, Tensor};
use candle_nn::{Optimizer, VarBuilder, VarMap, SGD};
use candle_trace_capture::alloc::TrackingAllocator;
use candle_trace_capture::Recorder;
use candle_trace_schema::analysis::findings::trace_findings;
use candle_trace_schema::analysis::units::format_bytes;
use candle_trace_schema::format::diagnostics::Severity;
use candle_trace_schema::format::events::{source, MemoryAction, TensorCategory};
use candle_transformers::models::llama::{Cache, Llama};
use common::SharedBuf;

#[global_allocator]
static ALLOC: TrackingAllocator = TrackingAllocator::system();

/// The allocator follows one recorder at a time: these tests take turns.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A recorder writing to `out` whose first step is captured.
fn capturing_into(out: &SharedBuf) -> Recorder {
    Recorder::builder("alloc::test")
        .capture_step(1)
        .writer(out.clone())
        .build()
        .unwrap()
}

#[test]
fn many_threads_freeing_host_blocks_never_block_the_writer() {
    // 40 threads each free a 4 KiB block during the captured step, one after another. The
    // writer adopts their rings as they come; once its list of rings grew (32 → 64) while it
    // held the lock that a new ring takes, the free of the list's old block made a ring on
    // the writer's own thread: the writer deadlocked, then every thread freeing a block.
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    // A writer that allocates nothing: the writer thread's first free of a host-sized block
    // is then its list of rings growing.
    let rec = Recorder::builder("alloc::test")
        .capture_step(1)
        .writer(std::io::sink())
        .build()
        .unwrap();
    let step = rec.begin_step();
    let threads = 40;
    let go = std::sync::Arc::new(std::sync::Barrier::new(threads + 1));
    // The threads live on until all have freed, so the writer holds all their rings at once.
    let stay = std::sync::Arc::new(std::sync::Barrier::new(threads + 1));
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    for i in 0..threads {
        let (go, stay, done) = (go.clone(), stay.clone(), done_tx.clone());
        std::thread::spawn(move || {
            let block = vec![1u8; 4096];
            go.wait();
            std::thread::sleep(std::time::Duration::from_millis(3 * i as u64));
            drop(block);
            let _ = done.send(());
            stay.wait();
        });
    }
    go.wait();
    for _ in 0..threads {
        done_rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("a thread freeing a host block was blocked");
    }
    stay.wait();
    drop(step);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(rec.finish().is_ok());
    });
    assert_eq!(
        rx.recv_timeout(std::time::Duration::from_secs(20)),
        Ok(true),
        "finish() did not return: the writer is blocked"
    );
}

#[test]
fn host_blocks_are_written_in_the_span_that_allocated_them() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let out = SharedBuf::default();
    let recorder = capturing_into(&out);
    let step = recorder.begin_step();
    let span = recorder.measured("fill");
    let span_id = span.id().unwrap();
    let a = std::hint::black_box(vec![1u8; 10_000]);
    let b = std::hint::black_box(vec![2u8; 3_000]);
    let small = std::hint::black_box(vec![3u8; 500]); // under the 1 KiB threshold
    drop(a);
    drop(span);
    drop(step);
    drop(b); // after the step: still followed until the next step or finish
    drop(small);
    recorder.finish().unwrap();

    let doc = out.document();
    assert_eq!(doc.diagnostics, vec![], "a clean trace");
    let ours: Vec<(MemoryAction, u64, String)> = doc
        .memory
        .iter()
        .filter(|m| [10_000, 3_000, 500].contains(&m.bytes))
        .map(|m| (m.action, m.bytes, m.span_id.to_string()))
        .collect();
    assert_eq!(
        ours,
        vec![
            (MemoryAction::Alloc, 10_000, span_id.clone()),
            (MemoryAction::Alloc, 3_000, span_id.clone()),
            (MemoryAction::Free, 10_000, span_id.clone()),
            (MemoryAction::Free, 3_000, span_id.clone()),
        ]
    );
    // Live bytes peak with both blocks alive: 10 000 + 3 000.
    assert_eq!(doc.summary().peak_bytes, 13_000);
    let sources = &doc.capture_sources.as_ref().unwrap().event;
    let allocator = sources.get(source::ALLOCATOR).unwrap();
    assert!(allocator.on);
    assert_eq!(allocator.threshold_bytes, Some(1024));
}

#[test]
fn a_block_allocated_on_one_thread_and_freed_on_another_keeps_its_free() {
    // A loader thread allocates a batch in its span and hands it over; the main thread frees
    // it in the step. The writer reads the threads' rings one after another, and the main
    // thread's, read first, held the free before the loader's alloc was seen: the free was
    // dropped, and the batch looked leaked.
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let out = SharedBuf::default();
    let rec = capturing_into(&out);
    {
        let _step = rec.begin_step();
        let _total = rec.measured("update");
        let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
        std::thread::scope(|s| {
            s.spawn(|| {
                let _load = rec.span("load_batch", candle_trace_capture::SpanKind::Function);
                tx.send(vec![7u8; 4_194_301]).unwrap();
            });
        });
        drop(std::hint::black_box(rx.recv().unwrap()));
    }
    rec.finish().unwrap();
    assert_eq!(
        blocks_of(&out, &[4_194_301]),
        vec![
            (MemoryAction::Alloc, 4_194_301),
            (MemoryAction::Free, 4_194_301)
        ]
    );
}

/// The bytes of this test's own blocks (sizes no other allocation here has) in `out`'s trace.
fn blocks_of(out: &SharedBuf, sizes: &[u64]) -> Vec<(MemoryAction, u64)> {
    out.document()
        .memory
        .iter()
        .filter(|m| sizes.contains(&m.bytes))
        .map(|m| (m.action, m.bytes))
        .collect()
}

#[test]
fn each_recorder_gets_the_blocks_of_its_own_step() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let sizes = [7_001, 7_002, 7_003];
    let mut outs = Vec::new();
    // One recorder after another on this thread (each caches the allocator's sink per thread):
    // every block goes to the recorder whose step allocated it, none to one that finished.
    for bytes in [7_001usize, 7_002] {
        let out = SharedBuf::default();
        let recorder = capturing_into(&out);
        let step = recorder.begin_step();
        let span = recorder.measured("fill");
        drop(std::hint::black_box(vec![1u8; bytes]));
        drop(span);
        drop(step);
        recorder.finish().unwrap();
        outs.push(out);
    }
    // After both have finished, no recorder follows the allocator.
    drop(std::hint::black_box(vec![1u8; 7_003]));
    assert_eq!(
        blocks_of(&outs[0], &sizes),
        [(MemoryAction::Alloc, 7_001), (MemoryAction::Free, 7_001)]
    );
    assert_eq!(
        blocks_of(&outs[1], &sizes),
        [(MemoryAction::Alloc, 7_002), (MemoryAction::Free, 7_002)]
    );
}

#[path = "../examples/common/llama.rs"]
mod llama;

#[test]
fn installing_after_the_model_is_built_is_reported() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (cfg, device) = (llama::config(), Device::Cpu);
    let varmap = VarMap::new();
    // The model first: candle-transformers creates its spans here, with no subscriber yet.
    let model = Llama::load(VarBuilder::from_varmap(&varmap, DType::F32, &device), &cfg).unwrap();
    let mut cache = Cache::new(false, DType::F32, &cfg, &device).unwrap();
    let out = SharedBuf::default();
    let recorder = Recorder::builder("late::install")
        .capture_step(1)
        .writer(out.clone())
        .install()
        .unwrap();
    let mut opt = SGD::new(varmap.all_vars(), 0.1).unwrap();
    let x = Tensor::new(&[[1u32, 2, 3]], &device).unwrap();
    let loss = recorder
        .forward(|| model.forward(&x, 0, &mut cache)?.sqr()?.mean_all())
        .unwrap();
    let grads = recorder.backward(&loss).unwrap();
    recorder.optimizer_step(&mut opt, &grads, &varmap).unwrap();
    let report = recorder.finish().unwrap();

    let warning = "the captured step saw no tracing spans";
    assert!(
        report.notes.iter().any(|n| n.contains(warning)),
        "{:?}",
        report.notes
    );
    let doc = out.document();
    assert!(doc.ops.is_empty());
    let sources = &doc.capture_sources.as_ref().unwrap().event;
    assert_eq!(sources.get(source::TRACING).map(|s| s.events), Some(0));
    assert_eq!(sources.warnings.len(), 1);
    assert!(doc
        .diagnostics
        .iter()
        .any(|d| d.severity == Severity::Warning && d.message.contains(warning)));
}

#[test]
fn an_adamw_peak_is_the_update_s_temporaries_not_optimizer_state() {
    // One linear layer 512 → 256 (a 512 KiB weight, a 1 KiB bias), batch 2, one AdamW update
    // captured. candle-nn 0.11's `AdamW::step` computes, per parameter, `next_m`, `next_v`,
    // `m_hat`, `v_hat`, `next_theta`, `adjusted_grad` and the new `next_theta` as fresh
    // tensors, all live until its loop body ends (at least seven of the weight's size), copies
    // them into its state (`Var::set`) and drops them: every optimizer allocation live at the
    // peak is freed before the update ends. Those ≥ 3.5 MiB outweigh what the backward keeps
    // (the weight's 512 KiB gradient and the GradStore's other entries, under 2 MiB) and the
    // forward's few KiB: the peak is in the optimizer.
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let out = SharedBuf::default();
    let recorder = capturing_into(&out);
    let device = Device::Cpu;
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
    let fc = candle_nn::linear(512, 256, vb.pp("fc")).unwrap();
    let mut opt =
        candle_nn::AdamW::new(varmap.all_vars(), candle_nn::ParamsAdamW::default()).unwrap();
    let xs = Tensor::ones((2, 512), DType::F32, &device).unwrap();
    let ys = Tensor::new(&[1u32, 7], &device).unwrap();
    let loss = recorder
        .forward(|| {
            let logits = candle_nn::Module::forward(&fc, &xs)?;
            candle_nn::loss::cross_entropy(&logits, &ys)
        })
        .unwrap();
    let grads = recorder.backward(&loss).unwrap();
    recorder.optimizer_step(&mut opt, &grads, &varmap).unwrap();
    recorder.finish().unwrap();

    let doc = out.document();
    assert_eq!(doc.diagnostics, vec![], "a clean trace");
    let m = &doc.memory_profile;
    let optimizer = m.peak_by_category[TensorCategory::Optimizer.index()];
    // The weight's temporaries only: whole multiples of its 524 288 bytes, at least seven.
    assert_eq!(optimizer % 524_288, 0, "{optimizer}");
    assert!(optimizer >= 7 * 524_288, "{optimizer}");
    let f = trace_findings(&[&doc]);
    let peak = f.findings.iter().find(|x| x.rule == "memory_peak").unwrap();
    assert!(
        peak.title.ends_with(
            " in optimizer, held mostly by the optimizer step's temporaries (freed before it ended)"
        ),
        "{}",
        peak.title
    );
    let temporaries = format!(
        "the optimizer step's temporaries (freed before it ended): {} (",
        format_bytes(optimizer)
    );
    assert!(
        peak.evidence[0].starts_with(&temporaries),
        "{:?}",
        peak.evidence
    );
    assert!(
        !peak
            .evidence
            .iter()
            .any(|e| e.starts_with("optimizer state")),
        "{:?}",
        peak.evidence
    );
}
