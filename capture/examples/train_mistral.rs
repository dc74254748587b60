//! Train a tiny candle-transformers **Mistral** (random weights from a `VarMap`, hidden 64,
//! 2 layers, no download) for four AdamW updates on the CPU and capture update 2. Mistral's
//! layers open only flat `linear` and `rms-norm` spans (no block, attention or MLP spans), so
//! without names its module table is `linear[0]` … `linear[14]`; built from
//! `name_modules(vb)`, every span carries its weights' name and readers build the tree
//! `model` → `layers.1` → `self_attn` → `q_proj` from them.
//!
//! ```sh
//! cargo run --release -p candle-trace-capture --features candle --example train_mistral -- --out mistral.trace6.jsonl
//! cargo trace summary mistral.trace6.jsonl
//! cargo trace query mistral.trace6.jsonl --kind modules
//! ```
//!
//! The capture code is the lines marked `// capture` (seven, the allocator line included).

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::{AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use candle_trace_capture::prelude::*;
use candle_transformers::models::mistral::{Config, Model};

#[path = "common/run.rs"]
#[allow(dead_code)]
mod run_args;

// Left out when a test includes this file as a module: the test binary installs its own.
#[cfg(not(test))]
#[global_allocator]
static ALLOC: TrackingAllocator = TrackingAllocator::system(); // capture

/// Optimizer updates run; the recorder captures update 2 (its default).
pub const STEPS: usize = 4;
/// Sequences per batch and tokens per sequence.
pub const BATCH: usize = 2;
/// Tokens per sequence.
pub const SEQ_LEN: usize = 12;

/// Hidden 64, 2 layers, 4 attention heads of 16 and 2 key/value heads, MLP 128, vocabulary
/// 128, context 64.
pub fn config() -> Config {
    Config {
        vocab_size: 128,
        hidden_size: 64,
        intermediate_size: 128,
        num_hidden_layers: 2,
        num_attention_heads: 4,
        head_dim: None,
        num_key_value_heads: 2,
        hidden_act: candle_nn::Activation::Silu,
        max_position_embeddings: 64,
        rms_norm_eps: 1e-5,
        rope_theta: 10_000.0,
        sliding_window: None,
        use_flash_attn: false,
    }
}

/// The cross-entropy of the model's next-token logits (its forward returns the last
/// position's) against `targets`; the KV cache is cleared first (every update sees the whole
/// sequence).
pub fn loss_of(
    model: &mut Model,
    inputs: &Tensor,
    targets: &Tensor,
) -> candle_core::Result<Tensor> {
    model.clear_kv_cache();
    let logits = model.forward(inputs, 0)?.squeeze(1)?;
    candle_nn::loss::cross_entropy(&logits, targets)
}

/// Train [`STEPS`] updates and capture update 2 into `out`; returns the report and the losses.
pub fn run(out: &Path) -> Result<(CaptureReport, Vec<f32>), Box<dyn std::error::Error>> {
    let recorder = Recorder::builder("mistral::train_step")
        .path(out)
        .install()?; // capture
    let device = Device::Cpu;
    let cfg = config();
    let varmap = VarMap::new();
    let vb = name_modules(VarBuilder::from_varmap(&varmap, DType::F32, &device)); // capture
    let mut model = Model::new(&cfg, vb)?;
    let mut optimizer = AdamW::new(varmap.all_vars(), ParamsAdamW::default())?;
    let token = |b: usize, t: usize| ((5 * b + 3 * t) % cfg.vocab_size) as u32;
    let inputs: Vec<u32> = (0..BATCH)
        .flat_map(|b| (0..SEQ_LEN).map(move |t| token(b, t)))
        .collect();
    let inputs = Tensor::from_vec(inputs, (BATCH, SEQ_LEN), &device)?;
    let targets: Vec<u32> = (0..BATCH).map(|b| token(b, SEQ_LEN)).collect();
    let targets = Tensor::from_vec(targets, BATCH, &device)?;
    let mut losses = Vec::with_capacity(STEPS);
    for _ in 0..STEPS {
        let loss = recorder.forward(|| loss_of(&mut model, &inputs, &targets))?; // capture
        let grads = recorder.backward(&loss)?; // capture
        recorder.optimizer_step(&mut optimizer, &grads, &varmap)?; // capture
        losses.push(loss.to_scalar::<f32>()?);
    }
    let report = recorder.finish()?; // capture
    Ok((report, losses))
}

#[allow(dead_code)] // a test includes this file as a module and calls `run` itself
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = run_args::out_path("mistral.trace6.jsonl")?;
    let (report, losses) = run(&out)?;
    run_args::print_run(&out, &report, &losses);
    Ok(())
}
