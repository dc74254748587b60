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
//! outside the timed part, so that every captured iteration is a real first capture. After
//! criterion, a best-of-5 loop prints both and the overhead in percent.

use std::io;

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
    let model = Llama::load(
        VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu),
        &cfg,
    )?;
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
        let Trainer {
            model,
            cache,
            varmap,
            optimizer,
            inputs,
            targets,
        } = t;
        let loss = recorder
            .forward(|| train_llama::loss_of(model, inputs, targets, cache))
            .and_then(|loss| {
                let grads = recorder.backward(&loss)?;
                recorder.optimizer_step(optimizer, &grads, varmap)?;
                Ok(loss)
            })
            .unwrap_or_else(|e| panic!("update: {e}"));
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
    let mut t = trainer().unwrap_or_else(|e| panic!("model: {e}"));
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

    // Best of 5 rounds of 20 updates each, alternating, for the one-line summary.
    let mut best = [f64::MAX; 2];
    for _ in 0..5 {
        for (i, captured) in [false, true].into_iter().enumerate() {
            let d = timed_updates(&mut t, captured, 20);
            best[i] = best[i].min(d.as_secs_f64() * 1e6 / 20.0);
        }
    }
    println!(
        "llama update: uncaptured {:.1} µs, captured {:.1} µs, overhead {:+.1}%",
        best[0],
        best[1],
        (best[1] / best[0] - 1.0) * 100.0
    );
}
