//! What capturing costs a training update of the `train_llama` example's candle-transformers
//! Llama (forward, backward, AdamW through `Recorder::forward` / `backward` /
//! `optimizer_step`): the captured update (tracing spans, leaf-layer ops, graph tensors, host
//! memory per span, checkpoints, gradients) beside the same update uncaptured, in one run.
//!
//! ```text
//! RAYON_NUM_THREADS=2 cargo bench -p candle-trace-capture --features candle --bench train_step
//! ```
//!
//! Each timed iteration is one update. A fresh recorder (writing to `io::sink()`, its writer
//! thread running concurrently as in training) is built before and finished after each update,
//! outside the timed part, so that every captured iteration is a real first capture. The
//! `tracing` subscriber is installed before the model is built (candle-transformers creates its
//! layer spans in `Llama::load`), as the example does, so the captured update records every
//! layer span and leaf-layer op. Before criterion, one captured update is written to memory and
//! its lines are counted by kind (printed, and checked to hold layer spans, leaf-layer ops,
//! host memory, graph tensors and gradients). After criterion, paired rounds (10 updates uncaptured, then 10
//! captured, 40 rounds; `CANDLE_TRACE_BENCH_ROUNDS=N` changes it) print each side's median and
//! the median of the rounds' ratios as the overhead in percent; with `CANDLE_TRACE_BENCH_OUT=FILE`
//! they are also written to FILE as JSON (`cargo xtask bench` judges the goal on them).

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor};
use candle_nn::{AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use candle_trace_capture::alloc::TrackingAllocator;
use candle_trace_capture::Recorder;
use candle_transformers::models::llama::{Cache, Llama};
use criterion::Criterion;

#[path = "../examples/train_llama.rs"]
#[allow(dead_code, unreachable_pub)]
mod train_llama;

#[global_allocator]
static ALLOC: TrackingAllocator = TrackingAllocator::system();

struct Trainer {
    model: Llama,
    cache: Cache,
    varmap: VarMap,
    optimizer: AdamW,
    inputs: Tensor,
    targets: Tensor,
}

fn trainer() -> candle_core::Result<Trainer> {
    let cfg = train_llama::config();
    let varmap = VarMap::new();
    // Named by their weights, as the example does: the names cost the model's load, not the
    // captured update (their spans carry an interned label).
    let vb = candle_trace_capture::nn::name_modules(VarBuilder::from_varmap(
        &varmap,
        DType::F32,
        &Device::Cpu,
    ));
    let model = Llama::load(vb, &cfg)?;
    let cache = Cache::new(false, DType::F32, &cfg, &Device::Cpu)?;
    let optimizer = AdamW::new(varmap.all_vars(), ParamsAdamW::default())?;
    let (inputs, targets) = train_llama::batch(&cfg, &Device::Cpu)?;
    Ok(Trainer {
        model,
        cache,
        varmap,
        optimizer,
        inputs,
        targets,
    })
}

/// A writer into shared memory, to count what one captured update writes.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| panic!("lock: {e}"))
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One update through `recorder` (which records it when it is its capture step).
fn update(t: &mut Trainer, recorder: &Recorder) -> Tensor {
    let Trainer {
        model,
        cache,
        varmap,
        optimizer,
        inputs,
        targets,
    } = t;
    recorder
        .forward(|| train_llama::loss_of(model, inputs, targets, cache))
        .and_then(|loss| {
            let grads = recorder.backward(&loss)?;
            recorder.optimizer_step(optimizer, &grads, varmap)?;
            Ok(loss)
        })
        .unwrap_or_else(|e| panic!("update: {e}"))
}

/// The lines of one captured update, counted by `kind` (span starts also by span kind).
fn lines_of_one_update(t: &mut Trainer) -> BTreeMap<String, u64> {
    let out = Shared::default();
    let recorder = Recorder::builder("bench::train_step")
        .capture_step(1)
        .writer(out.clone())
        .install()
        .unwrap_or_else(|e| panic!("recorder: {e}"));
    std::hint::black_box(update(t, &recorder));
    recorder.finish().unwrap_or_else(|e| panic!("finish: {e}"));
    let bytes = out.0.lock().unwrap_or_else(|e| panic!("lock: {e}")).clone();
    let mut counts = BTreeMap::new();
    for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let v: serde_json::Value =
            serde_json::from_slice(line).unwrap_or_else(|e| panic!("line: {e}"));
        let kind = v["kind"].as_str().unwrap_or("?").to_string();
        let key = match v["span_kind"].as_str() {
            Some(span_kind) => format!("{kind} ({span_kind})"),
            None => kind,
        };
        *counts.entry(key).or_insert(0) += 1;
        if v.get("module").is_some() {
            *counts
                .entry(String::from("span_start (named)"))
                .or_insert(0) += 1;
        }
    }
    counts
}

/// Time `iters` updates, each with its own recorder built and finished untimed.
fn timed_updates(t: &mut Trainer, captured: bool, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let recorder = Recorder::builder("bench::train_step")
            .capture_step(if captured { 1 } else { 2 })
            .writer(io::sink())
            .install()
            .unwrap_or_else(|e| panic!("recorder: {e}"));
        let started = Instant::now();
        let loss = update(t, &recorder);
        total += started.elapsed();
        std::hint::black_box(loss);
        let report = recorder.finish().unwrap_or_else(|e| panic!("finish: {e}"));
        assert_eq!(
            report.events_dropped, 0,
            "the bench must not overflow a ring"
        );
    }
    total
}

fn main() {
    // Before the model is built: candle-transformers creates its spans in `Llama::load`.
    candle_trace_capture::install().unwrap_or_else(|e| panic!("subscriber: {e}"));
    let mut t = trainer().unwrap_or_else(|e| panic!("model: {e}"));
    let counts = lines_of_one_update(&mut t);
    let total: u64 = counts.values().sum();
    let listed: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
    println!(
        "one captured update writes {total} lines: {}",
        listed.join(", ")
    );
    for kind in [
        "span_start (module)",
        "span_start (named)",
        "op",
        "memory",
        "tensor",
        "gradient",
    ] {
        assert!(
            counts.get(kind).is_some_and(|&n| n > 0),
            "the captured update wrote no `{kind}` line"
        );
    }
    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("llama_update");
    group.bench_function("uncaptured", |b| {
        b.iter_custom(|iters| timed_updates(&mut t, false, iters))
    });
    group.bench_function("captured", |b| {
        b.iter_custom(|iters| timed_updates(&mut t, true, iters))
    });
    group.finish();
    c.final_summary();

    // Paired rounds: in each, 10 updates uncaptured then 10 captured, so that the machine's
    // load, which drifts on a shared machine, is nearly the same for both halves of a round.
    // The overhead is the median of the rounds' ratios; the times are each side's median.
    let rounds: usize = std::env::var("CANDLE_TRACE_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(40);
    let per_round = 10;
    let (mut off, mut on, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let a = timed_updates(&mut t, false, per_round).as_secs_f64() * 1e6 / per_round as f64;
        let b = timed_updates(&mut t, true, per_round).as_secs_f64() * 1e6 / per_round as f64;
        off.push(a);
        on.push(b);
        ratios.push(b / a);
    }
    let (uncaptured_us, captured_us) = (median(&mut off), median(&mut on));
    let overhead_pct = (median(&mut ratios) - 1.0) * 100.0;
    let q1_pct = (quantile(&mut ratios, 0.25) - 1.0) * 100.0;
    let q3_pct = (quantile(&mut ratios, 0.75) - 1.0) * 100.0;
    println!(
        "llama update, median of {rounds} paired rounds of {per_round}: uncaptured {uncaptured_us:.1} µs, captured {captured_us:.1} µs, overhead {overhead_pct:+.1}% (rounds' ratios: quartiles {q1_pct:+.1}% to {q3_pct:+.1}%)",
    );
    // For `cargo xtask bench`, which judges the overhead goal on these rounds.
    if let Ok(path) = std::env::var("CANDLE_TRACE_BENCH_OUT") {
        let json = serde_json::json!({
            "rounds": rounds,
            "per_round": per_round,
            "uncaptured_us": uncaptured_us,
            "captured_us": captured_us,
            "overhead_pct": overhead_pct,
            "q1_pct": q1_pct,
            "q3_pct": q3_pct,
        });
        std::fs::write(&path, json.to_string()).unwrap_or_else(|e| panic!("{path}: {e}"));
    }
}

fn quantile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let at = ((values.len().saturating_sub(1)) as f64 * q).round() as usize;
    values.get(at).copied().unwrap_or(f64::NAN)
}

fn median(values: &mut [f64]) -> f64 {
    quantile(values, 0.5)
}
