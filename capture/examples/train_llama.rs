//! Train a tiny candle-transformers Llama (random weights from a `VarMap`, no download) for four
//! updates on the CPU and capture update 2 as a trace/6 file. Every number in the file is
//! measured by the library from the real model: the layers' spans and op rows from the
//! model's own `tracing` spans, host memory from the counting allocator, the autograd graph's
//! tensors from `Tensor::sorted_nodes`, gradients from the `VarMap` and `GradStore`.
//!
//! ```sh
//! cargo run --release -p candle-trace-capture --features candle --example train_llama -- --out train.trace6.jsonl
//! cargo trace summary train.trace6.jsonl
//! cargo trace query train.trace6.jsonl --kind gradients
//! ```
//!
//! The capture code is the lines marked `// capture` (seven, the allocator line included;
//! `name_modules` names each layer's spans after its weights: `model.layers.0.mlp.down_proj`).
//!
//! With `--capture-steps FIRST..=LAST` (and `--updates N`, default LAST + 1), the run captures
//! every update of the range, one trace/6 file per update in the directory `--out` names
//! (`step-N.trace6.jsonl`, one run id), for `candle-trace steps DIR` and `findings DIR`:
//!
//! ```sh
//! cargo run --release -p candle-trace-capture --features candle --example train_llama -- --capture-steps 2..=9 --out steps/
//! cargo trace steps steps/
//! ```

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::{AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use candle_trace_capture::prelude::*;
use candle_transformers::models::llama::{Cache, Config, Llama};

#[path = "common/llama.rs"]
mod llama;
pub use llama::config;

// Left out when a test includes this file as a module: the test binary installs its own.
#[cfg(not(test))]
#[global_allocator]
static ALLOC: TrackingAllocator = TrackingAllocator::system(); // capture

/// Optimizer updates run; update [`CAPTURED`] is the one recorded.
pub const STEPS: usize = 4;
/// The captured update (one-based; the recorder's default).
pub const CAPTURED: usize = 2;
/// Sequences per batch and tokens per sequence.
pub const BATCH: usize = 2;
/// Tokens per sequence.
pub const SEQ_LEN: usize = 16;

/// What [`run`] returns.
#[derive(Debug)]
pub struct Outcome {
    /// What the recorder reported.
    pub report: CaptureReport,
    /// The loss of every update.
    pub losses: Vec<f32>,
}

/// A fixed batch: token `t` of sequence `b` is `(7·b + 3·t) mod vocab`; the target of each
/// sequence is the token that would follow its last one.
pub fn batch(cfg: &Config, device: &Device) -> candle_core::Result<(Tensor, Tensor)> {
    let token = |b: usize, t: usize| ((7 * b + 3 * t) % cfg.vocab_size) as u32;
    let inputs: Vec<u32> = (0..BATCH)
        .flat_map(|b| (0..SEQ_LEN).map(move |t| token(b, t)))
        .collect();
    let targets: Vec<u32> = (0..BATCH).map(|b| token(b, SEQ_LEN)).collect();
    Ok((
        Tensor::from_vec(inputs, (BATCH, SEQ_LEN), device)?,
        Tensor::from_vec(targets, BATCH, device)?,
    ))
}

/// The cross-entropy of the model's next-token logits against `targets`.
pub fn loss_of(
    model: &Llama,
    inputs: &Tensor,
    targets: &Tensor,
    cache: &mut Cache,
) -> candle_core::Result<Tensor> {
    let logits = model.forward(inputs, 0, cache)?;
    candle_nn::loss::cross_entropy(&logits, targets)
}

/// Train [`STEPS`] updates and capture update [`CAPTURED`] into `out`.
pub fn run(out: &Path) -> Result<Outcome, Box<dyn std::error::Error>> {
    // Before the model is built: candle-transformers creates its spans in `Llama::load`.
    let recorder = Recorder::builder("llama::train_step").path(out).install()?; // capture
    let device = Device::Cpu;
    let cfg = config();
    let varmap = VarMap::new();
    let vb = name_modules(VarBuilder::from_varmap(&varmap, DType::F32, &device)); // capture
    let model = Llama::load(vb, &cfg)?;
    let mut cache = Cache::new(false, DType::F32, &cfg, &device)?;
    let params = ParamsAdamW {
        lr: 1e-3,
        ..ParamsAdamW::default()
    };
    let mut optimizer = AdamW::new(varmap.all_vars(), params)?;
    let (inputs, targets) = batch(&cfg, &device)?;
    let mut losses = Vec::with_capacity(STEPS);
    for _ in 0..STEPS {
        let loss = recorder.forward(|| loss_of(&model, &inputs, &targets, &mut cache))?; // capture
        let grads = recorder.backward(&loss)?; // capture
        recorder.optimizer_step(&mut optimizer, &grads, &varmap)?; // capture
        losses.push(loss.to_scalar::<f32>()?);
    }
    let report = recorder.finish()?; // capture
    Ok(Outcome { report, losses })
}

/// Train `updates` updates and capture every update of `steps`, one file each into `dir`.
pub fn run_steps(
    dir: &Path,
    updates: usize,
    steps: std::ops::RangeInclusive<u64>,
) -> Result<Vec<CaptureReport>, Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    let recorders = Recorder::builder("llama::train_step").capture_steps(steps, dir)?; // capture
    recorders.install()?; // capture
    let device = Device::Cpu;
    let cfg = config();
    let varmap = VarMap::new();
    let vb = name_modules(VarBuilder::from_varmap(&varmap, DType::F32, &device)); // capture
    let model = Llama::load(vb, &cfg)?;
    let mut cache = Cache::new(false, DType::F32, &cfg, &device)?;
    let mut optimizer = AdamW::new(varmap.all_vars(), ParamsAdamW::default())?;
    let (inputs, targets) = batch(&cfg, &device)?;
    for _ in 0..updates {
        let loss = recorders.forward(|| loss_of(&model, &inputs, &targets, &mut cache))?; // capture
        let grads = recorders.backward(&loss)?; // capture
        recorders.optimizer_step(&mut optimizer, &grads, &varmap)?; // capture
    }
    Ok(recorders.finish()?) // capture
}

/// `2..=9` (or `2-9`) → the range.
fn parse_range(text: &str) -> Option<std::ops::RangeInclusive<u64>> {
    let (a, b) = text.split_once("..=").or_else(|| text.split_once('-'))?;
    Some(a.trim().parse().ok()?..=b.trim().parse().ok()?)
}

#[allow(dead_code)] // a test includes this file as a module and calls `run` itself
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut out = PathBuf::from("train.trace6.jsonl");
    let mut steps = None;
    let mut updates = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--out" => out = args.next().map(PathBuf::from).ok_or("--out needs a path")?,
            "--capture-steps" => {
                let text = args.next().ok_or("--capture-steps needs FIRST..=LAST")?;
                steps = Some(parse_range(&text).ok_or_else(|| {
                    format!("--capture-steps {text}: expected FIRST..=LAST, e.g. 2..=9")
                })?);
            }
            "--updates" => {
                let text = args.next().ok_or("--updates needs a number")?;
                updates = Some(text.parse::<usize>().map_err(|_| format!("--updates {text}: not a number"))?);
            }
            other => {
                return Err(format!(
                    "unknown argument {other} (use --out PATH, --capture-steps FIRST..=LAST, --updates N)"
                )
                .into())
            }
        }
    }
    if let Some(steps) = steps {
        let updates = updates.unwrap_or(*steps.end() as usize + 1);
        let reports = run_steps(&out, updates, steps)?;
        for r in &reports {
            let path = r
                .path
                .as_ref()
                .map_or(String::new(), |p| p.display().to_string());
            println!(
                "wrote {path} ({} lines, {} events dropped)",
                r.events_written, r.events_dropped
            );
            for note in &r.notes {
                println!("note: {note}");
            }
        }
        return Ok(());
    }
    let Outcome { report, losses } = run(&out)?;
    let losses: Vec<String> = losses.iter().map(|l| format!("{l:.4}")).collect();
    println!("losses per update: {}", losses.join(", "));
    println!(
        "wrote {} ({} lines, {} events dropped)",
        out.display(),
        report.events_written,
        report.events_dropped
    );
    for note in &report.notes {
        println!("note: {note}");
    }
    Ok(())
}
