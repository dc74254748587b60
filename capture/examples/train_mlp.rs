//! Train a model of your own built from plain candle-nn layers — three linear layers with
//! ReLU, SGD, on the CPU — and capture update 2. candle-nn's layers open no `tracing` spans;
//! imported from `candle_trace_capture::nn` instead of `candle_nn`, the same constructors
//! return the same layers, each in a span named by its `VarBuilder` prefix (`mlp.fc1` …), and
//! `nn::block` names the hidden block around two of them.
//!
//! ```sh
//! cargo run --release -p candle-trace-capture --features candle --example train_mlp -- --out mlp.trace6.jsonl
//! cargo trace summary mlp.trace6.jsonl
//! cargo trace query mlp.trace6.jsonl --kind modules
//! ```
//!
//! The capture code is the lines marked `// capture` (six, the allocator line included), and
//! the `use` line that takes `linear` and `Linear` from capture rather than from candle-nn.

use std::path::Path;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Optimizer, VarBuilder, VarMap, SGD};
use candle_trace_capture::nn::{block, linear, Linear}; // instead of candle_nn::{linear, Linear}
use candle_trace_capture::prelude::*;

#[path = "common/run.rs"]
#[allow(dead_code)]
mod run_args;

// Left out when a test includes this file as a module: the test binary installs its own.
#[cfg(not(test))]
#[global_allocator]
static ALLOC: TrackingAllocator = TrackingAllocator::system(); // capture

/// Optimizer updates run; the recorder captures update 2 (its default).
pub const STEPS: usize = 4;
/// Examples per batch.
pub const BATCH: usize = 32;
/// Input features, hidden units, classes.
pub const DIMS: (usize, usize, usize) = (16, 64, 4);

/// Input → hidden block (fc1, fc2) → head.
pub struct Mlp {
    fc1: Linear,
    fc2: Linear,
    head: Linear,
    hidden: tracing::Span,
}

impl Mlp {
    /// The layers under `vb` (`mlp.fc1`, `mlp.fc2`, `mlp.head` from `vb.pp("mlp")`).
    pub fn new(vb: VarBuilder<'_>) -> candle_core::Result<Self> {
        let (input, hidden, classes) = DIMS;
        Ok(Mlp {
            fc1: linear(input, hidden, vb.pp("fc1"))?,
            fc2: linear(hidden, hidden, vb.pp("fc2"))?,
            head: linear(hidden, classes, vb.pp("head"))?,
            hidden: block(&format!("{}.hidden", vb.prefix())),
        })
    }
}

impl Module for Mlp {
    fn forward(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        let xs = {
            let _hidden = self.hidden.enter();
            let xs = self.fc1.forward(xs)?.relu()?;
            self.fc2.forward(&xs)?.relu()?
        };
        self.head.forward(&xs)
    }
}

/// A fixed batch: feature j of example i is sin(i + j); its class is i mod 4.
pub fn batch(device: &Device) -> candle_core::Result<(Tensor, Tensor)> {
    let (input, _, classes) = DIMS;
    let xs: Vec<f32> = (0..BATCH * input)
        .map(|k| ((k / input + k % input) as f32).sin())
        .collect();
    let ys: Vec<u32> = (0..BATCH).map(|i| (i % classes) as u32).collect();
    Ok((
        Tensor::from_vec(xs, (BATCH, input), device)?,
        Tensor::from_vec(ys, BATCH, device)?,
    ))
}

/// Train [`STEPS`] updates and capture update 2 into `out`; returns the report and the losses.
pub fn run(out: &Path) -> Result<(CaptureReport, Vec<f32>), Box<dyn std::error::Error>> {
    let recorder = Recorder::builder("mlp::train_step").path(out).install()?; // capture
    let device = Device::Cpu;
    let varmap = VarMap::new();
    let model = Mlp::new(VarBuilder::from_varmap(&varmap, DType::F32, &device).pp("mlp"))?;
    let mut optimizer = SGD::new(varmap.all_vars(), 0.05)?;
    let (xs, ys) = batch(&device)?;
    let mut losses = Vec::with_capacity(STEPS);
    for _ in 0..STEPS {
        let loss =
            recorder.forward(|| candle_nn::loss::cross_entropy(&model.forward(&xs)?, &ys))?; // capture
        let grads = recorder.backward(&loss)?; // capture
        recorder.optimizer_step(&mut optimizer, &grads, &varmap)?; // capture
        losses.push(loss.to_scalar::<f32>()?);
    }
    let report = recorder.finish()?; // capture
    Ok((report, losses))
}

#[allow(dead_code)] // a test includes this file as a module and calls `run` itself
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = run_args::out_path("mlp.trace6.jsonl")?;
    let (report, losses) = run(&out)?;
    run_args::print_run(&out, &report, &losses);
    Ok(())
}
