//! Train a small candle-nn MLP on synthetic data for four AdamW updates and capture update 2
//! as a `candle-graph/trace/6` file with a [`Recorder`].
//!
//! ```sh
//! cargo run --release -p candle-trace-capture --features candle --example train_mlp -- --out train.jsonl
//! cargo trace summary train.jsonl     # compare with the counts this example prints
//! ```
//!
//! Every update calls `recorder.begin_step()`; the recorder turns recording on for update 2
//! only (one warm-up update), so the same instrumented code runs in every update and costs one
//! atomic load per call outside the captured one.
//!
//! The captured update has a measured root span `train_step` with three step spans:
//! - `forward` (step `forward`): a `module` span per layer (`fc1`, `fc2`); every tensor op is
//!   timed with [`timed_op`] and every activation gets a `memory` alloc;
//! - `backward` (step `backward`): the gradients get `tensor` events and `memory` allocs, the
//!   activations are freed, and every parameter gets a `gradient` fact;
//! - `optimizer` (step `optimizer`): AdamW written out with candle ops (the same arithmetic as
//!   `candle_nn::AdamW`) so that each of its ops is timed too; its moments get `tensor` events
//!   (category `optimizer`) and its temporaries are allocated and freed inside the span.
//!
//! The gradients are freed in `train_step` after the optimizer. Each step span starts and ends
//! with a `device_memory` checkpoint of the host from the tracking allocator.
//! `frozen.scale` is deliberately frozen (used detached and left out of the optimizer), so its
//! gradient is `missing`.
//!
//! The example counts what it asks the recorder to write (spans, ops, tensors, allocs, frees,
//! checkpoints, gradients per state) and times the measured region with its own `Instant`s;
//! `main` prints both next to the recorder's `CaptureReport`, and `tests/examples.rs` checks
//! them against the file.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::backprop::GradStore;
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{Linear, Module, VarBuilder, VarMap};
use candle_trace_capture::alloc;
use candle_trace_capture::candle::{
    candle_version, device_name, record_tensor, record_tensor_alloc, record_tensor_free,
    record_varmap_gradients, timed_op, varmap_params, GradientTally,
};
use candle_trace_capture::{CaptureReport, Recorder, Sink, SpanGuard, Step};
use candle_trace_schema::events::TensorCategory;

// Counts live and peak host bytes for the `device_memory` checkpoints. Left out when a test
// includes this file as a module: the test binary installs its own.
#[cfg(not(test))]
#[global_allocator]
static ALLOC: alloc::TrackingAllocator = alloc::TrackingAllocator::system();

/// Updates run; the one captured is update `WARMUP + 1`.
const STEPS: u64 = 4;
const WARMUP: u64 = 1;
const BATCH: usize = 32;
const IN: usize = 8;
const HIDDEN: usize = 32;
const OUT: usize = 4;
const LR: f64 = 1e-2;

/// What the example asked the recorder to write during the captured update, counted as it
/// went (not read back from the file).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counts {
    /// `op` events (forward and optimizer ops).
    pub op_count: u64,
    /// Spans opened (one `span_start` each).
    pub span_count: u64,
    /// `tensor` events.
    pub tensor_count: u64,
    /// `memory` allocs.
    pub alloc_count: u64,
    /// `memory` frees.
    pub free_count: u64,
    /// `device_memory` checkpoints.
    pub device_memory_count: u64,
    /// `gradient` events per state.
    pub gradients: GradientTally,
    /// The measured region timed with the example's own `Instant`s, taken just before the
    /// measured span opens and just after it closes: the file's `total_ns` is at most this.
    pub measured_outer_ns: u64,
}

/// What [`run`] returns: the example's own counts and the recorder's report.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// What the example counted.
    pub counts: Counts,
    /// What `Recorder::finish` reported.
    pub report: CaptureReport,
    /// The loss after each update.
    pub losses: Vec<f32>,
}

/// The recorder plus the example's tally of what it recorded. Every call records only while
/// the recorder is recording (the captured update) and counts only what it recorded.
pub struct Capture {
    recorder: Recorder,
    counts: RefCell<Counts>,
}

impl Capture {
    fn count(&self, f: impl FnOnce(&mut Counts)) {
        if self.recorder.is_recording() {
            f(&mut self.counts.borrow_mut());
        }
    }

    /// Count a span guard that records.
    fn span<'r>(&self, guard: SpanGuard<'r>) -> SpanGuard<'r> {
        if guard.is_recording() {
            self.counts.borrow_mut().span_count += 1;
        }
        guard
    }

    /// A step span with a host-memory checkpoint at each edge.
    fn step(&self, step: Step) -> StepSpan<'_> {
        let guard = self.span(self.recorder.step(step));
        self.host_checkpoint();
        StepSpan {
            capture: self,
            guard: Some(guard),
        }
    }

    fn host_checkpoint(&self) {
        alloc::record_host_memory(&self.recorder);
        self.count(|c| c.device_memory_count += 1);
    }

    fn op(
        &self,
        name: &str,
        inputs: &[&Tensor],
        f: impl FnOnce() -> candle_core::Result<Tensor>,
    ) -> candle_core::Result<Tensor> {
        let out = timed_op(&self.recorder, name, inputs, f)?;
        self.count(|c| c.op_count += 1);
        Ok(out)
    }

    fn tensor(&self, name: &str, t: &Tensor, category: TensorCategory) {
        record_tensor(&self.recorder, name, t, category);
        self.count(|c| c.tensor_count += 1);
    }

    fn alloc(&self, t: &Tensor, category: TensorCategory, op: &str) {
        record_tensor_alloc(&self.recorder, t, category, Some(op));
        self.count(|c| c.alloc_count += 1);
    }

    fn free(&self, t: &Tensor, category: TensorCategory) {
        record_tensor_free(&self.recorder, t, category);
        self.count(|c| c.free_count += 1);
    }
}

/// A step span whose end is preceded by a host-memory checkpoint.
struct StepSpan<'c> {
    capture: &'c Capture,
    guard: Option<SpanGuard<'c>>,
}

impl Drop for StepSpan<'_> {
    fn drop(&mut self) {
        self.capture.host_checkpoint();
        drop(self.guard.take());
    }
}

/// The model: `fc2(relu(fc1(x))) * frozen.scale`, with `frozen.scale` never trained.
struct Mlp {
    fc1: Linear,
    fc2: Linear,
    frozen: Tensor,
}

/// Forward pass; every tensor op timed, every activation recorded as allocated and kept in
/// `activations` until backward has run.
fn forward(
    model: &Mlp,
    cap: &Capture,
    x: &Tensor,
    y: &Tensor,
    activations: &mut Vec<Tensor>,
) -> candle_core::Result<Tensor> {
    let mut keep = |t: &Tensor, op: &str| {
        cap.alloc(t, TensorCategory::Activation, op);
        activations.push(t.clone());
    };
    let h = {
        let _fc1 = cap.span(cap.recorder.module("fc1"));
        let h = cap.op("linear", &[x, model.fc1.weight()], || model.fc1.forward(x))?;
        keep(&h, "linear");
        let h = cap.op("relu", &[&h], || h.relu())?;
        keep(&h, "relu");
        h
    };
    let out = {
        let _fc2 = cap.span(cap.recorder.module("fc2"));
        let o = cap.op("linear", &[&h, model.fc2.weight()], || {
            model.fc2.forward(&h)
        })?;
        keep(&o, "linear");
        // Frozen: the scale is used detached, so no gradient reaches it.
        let frozen = model.frozen.detach();
        let o = cap.op("broadcast_mul", &[&o, &frozen], || o.broadcast_mul(&frozen))?;
        keep(&o, "broadcast_mul");
        o
    };
    let diff = cap.op("sub", &[&out, y], || out.sub(y))?;
    keep(&diff, "sub");
    let sq = cap.op("sqr", &[&diff], || diff.sqr())?;
    keep(&sq, "sqr");
    let loss = cap.op("mean_all", &[&sq], || sq.mean_all())?;
    keep(&loss, "mean_all");
    Ok(loss)
}

/// AdamW with `candle_nn::AdamW`'s arithmetic and defaults (betas 0.9/0.999, eps 1e-8,
/// weight decay 0.01), written with timed candle ops.
struct AdamW {
    /// (name, parameter, first moment, second moment).
    params: Vec<(String, Var, Var, Var)>,
    step_t: i32,
}

impl AdamW {
    const BETA1: f64 = 0.9;
    const BETA2: f64 = 0.999;
    const EPS: f64 = 1e-8;
    const WEIGHT_DECAY: f64 = 0.01;

    fn new(params: Vec<(String, Var)>) -> candle_core::Result<Self> {
        let params = params
            .into_iter()
            .map(|(name, var)| {
                let t = var.as_tensor();
                let m = Var::zeros(t.shape(), t.dtype(), t.device())?;
                let v = Var::zeros(t.shape(), t.dtype(), t.device())?;
                Ok((name, var, m, v))
            })
            .collect::<candle_core::Result<_>>()?;
        Ok(AdamW { params, step_t: 0 })
    }

    fn step(&mut self, grads: &GradStore, cap: &Capture) -> candle_core::Result<()> {
        self.step_t += 1;
        let scale_m = 1.0 / (1.0 - Self::BETA1.powi(self.step_t));
        let scale_v = 1.0 / (1.0 - Self::BETA2.powi(self.step_t));
        let opt = TensorCategory::Optimizer;
        for (name, theta, m_var, v_var) in &self.params {
            let Some(g) = grads.get(theta.as_tensor()) else {
                continue;
            };
            let (m, v) = (m_var.as_tensor(), v_var.as_tensor());
            let next_m = cap.op("adamw_moment1", &[m, g], || {
                (m * Self::BETA1)? + (g * (1.0 - Self::BETA1))?
            })?;
            cap.alloc(&next_m, opt, "adamw_moment1");
            let next_v = cap.op("adamw_moment2", &[v, g], || {
                (v * Self::BETA2)? + (g.sqr()? * (1.0 - Self::BETA2))?
            })?;
            cap.alloc(&next_v, opt, "adamw_moment2");
            let direction = cap.op("adamw_direction", &[&next_m, &next_v], || {
                let m_hat = (&next_m * scale_m)?;
                let v_hat = (&next_v * scale_v)?;
                m_hat / (v_hat.sqrt()? + Self::EPS)?
            })?;
            cap.alloc(&direction, opt, "adamw_direction");
            let t = theta.as_tensor();
            let next_theta = cap.op("adamw_apply", &[t, &direction], || {
                (t * (1.0 - LR * Self::WEIGHT_DECAY))? - (&direction * LR)?
            })?;
            cap.alloc(&next_theta, TensorCategory::Parameter, "adamw_apply");
            // `Var::set` copies into the variables' storage; the temporaries die here.
            m_var.set(&next_m)?;
            v_var.set(&next_v)?;
            theta.set(&next_theta)?;
            cap.tensor(&format!("{name}.adamw_m"), m, opt);
            cap.tensor(&format!("{name}.adamw_v"), v, opt);
            for (tmp, category) in [
                (&next_m, opt),
                (&next_v, opt),
                (&direction, opt),
                (&next_theta, TensorCategory::Parameter),
            ] {
                cap.free(tmp, category);
            }
        }
        Ok(())
    }
}

/// The model, its optimizer and a fixed synthetic batch: one [`Trainer::update`] is one
/// training update, instrumented through a [`Capture`].
pub struct Trainer {
    varmap: VarMap,
    model: Mlp,
    opt: AdamW,
    x: Tensor,
    y: Tensor,
}

impl Trainer {
    /// A freshly initialised model on the CPU.
    pub fn new() -> candle_core::Result<Self> {
        let device = Device::Cpu;
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
        let model = Mlp {
            fc1: candle_nn::linear(IN, HIDDEN, vb.pp("fc1"))?,
            fc2: candle_nn::linear(HIDDEN, OUT, vb.pp("fc2"))?,
            frozen: vb
                .pp("frozen")
                .get_with_hints(OUT, "scale", candle_nn::Init::Const(1.0))?,
        };
        let trainable: Vec<(String, Var)> = varmap_params(&varmap)
            .into_iter()
            .filter(|(name, _)| !name.starts_with("frozen."))
            .collect();
        let opt = AdamW::new(trainable)?;

        // Synthetic regression data: x in [-1, 1], y = x · W_true.
        let x = (Tensor::arange(0u32, (BATCH * IN) as u32, &device)?
            .to_dtype(DType::F32)?
            .reshape((BATCH, IN))?
            * 0.37)?
            .sin()?;
        let w_true = (Tensor::arange(0u32, (IN * OUT) as u32, &device)?
            .to_dtype(DType::F32)?
            .reshape((IN, OUT))?
            * 0.11)?
            .cos()?;
        let y = x.matmul(&w_true)?;
        Ok(Trainer {
            varmap,
            model,
            opt,
            x,
            y,
        })
    }

    /// One update (forward, backward, AdamW) inside the measured region; returns the loss.
    /// It records only while `cap`'s recorder is recording.
    pub fn update(&mut self, cap: &Capture) -> candle_core::Result<f32> {
        let outer_start = Instant::now();
        let measured = cap.span(cap.recorder.measured("train_step"));

        let mut activations = Vec::new();
        let loss = {
            let _forward = cap.step(Step::Forward);
            forward(&self.model, cap, &self.x, &self.y, &mut activations)?
        };

        let grads = {
            let _backward = cap.step(Step::Backward);
            let grads = loss.backward()?;
            for (name, var) in varmap_params(&self.varmap) {
                if let Some(g) = grads.get(var.as_tensor()) {
                    cap.alloc(g, TensorCategory::Gradient, "backward");
                    cap.tensor(&format!("{name}.grad"), g, TensorCategory::Gradient);
                }
            }
            // The graph (and with it every activation) is released once backward is done.
            for a in activations.drain(..) {
                cap.free(&a, TensorCategory::Activation);
            }
            let tally = record_varmap_gradients(&cap.recorder, "varmap", &self.varmap, &grads)?;
            // The library says what it recorded per state (nothing outside the capture).
            let mut counts = cap.counts.borrow_mut();
            counts.gradients.present += tally.present;
            counts.gradients.missing += tally.missing;
            counts.gradients.zero += tally.zero;
            counts.gradients.non_finite += tally.non_finite;
            drop(counts);
            grads
        };

        {
            let _optimizer = cap.step(Step::Optimizer);
            self.opt.step(&grads, cap)?;
            for (name, var) in varmap_params(&self.varmap) {
                cap.tensor(&name, var.as_tensor(), TensorCategory::Parameter);
            }
        }
        // The gradients are released here, in the measured root span.
        for (_, var) in varmap_params(&self.varmap) {
            if let Some(g) = grads.get(var.as_tensor()) {
                cap.free(g, TensorCategory::Gradient);
            }
        }
        drop(grads);

        let recorded = measured.is_recording();
        drop(measured);
        if recorded {
            cap.counts.borrow_mut().measured_outer_ns =
                u64::try_from(outer_start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        }
        loss.to_scalar::<f32>()
    }
}

impl Capture {
    /// Instrument with `recorder`, nothing counted yet.
    pub fn new(recorder: Recorder) -> Self {
        Capture {
            recorder,
            counts: RefCell::new(Counts::default()),
        }
    }

    /// The recorder.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }
}

/// Train for [`STEPS`] updates, capture update `WARMUP + 1`, write the trace to `out`.
pub fn run(out: &Path) -> Result<Outcome, Box<dyn std::error::Error>> {
    let device = Device::Cpu;
    let recorder = Recorder::builder("train_mlp::train_step")
        .phase(candle_trace_capture::Phase::Train)
        .device(device_name(&device))
        .device_sync(device.clone())
        .tag("batch_size", BATCH.to_string())
        .tag("lr", LR.to_string())
        .tag("hidden", HIDDEN.to_string())
        .tag("model", format!("mlp {IN}-{HIDDEN}-{OUT}"))
        .tag("optimizer", "adamw")
        .candle_version(candle_version())
        .warmup_steps(WARMUP)
        .path(out)
        .atomic(true)
        .build()?;
    let cap = Capture::new(recorder);
    let mut trainer = Trainer::new()?;

    let mut losses = Vec::new();
    for _ in 0..STEPS {
        let step = cap.recorder.begin_step();
        if step.is_captured() {
            alloc::reset_peak();
        }
        let loss = trainer.update(&cap)?;
        losses.push(loss);
        if step.is_captured() {
            println!(
                "update {}: loss {loss:.5} (captured; host peak {} B)",
                step.step(),
                alloc::peak_bytes()
            );
        } else {
            println!("update {}: loss {loss:.5}", step.step());
        }
    }

    let report = cap.recorder.finish()?;
    Ok(Outcome {
        counts: cap.counts.into_inner(),
        report,
        losses,
    })
}

#[allow(dead_code)] // Unused when a test includes this file as a module.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut out = PathBuf::from("train_mlp.trace6.jsonl");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--out" => out = args.next().ok_or("--out needs a path")?.into(),
            "-h" | "--help" => {
                println!("usage: train_mlp [--out PATH]");
                return Ok(());
            }
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    let Outcome { counts, report, .. } = run(&out)?;
    let path = report.path.as_deref().unwrap_or(&out);
    println!("wrote {}", path.display());
    println!(
        "recorder: events_written={} events_dropped={} bytes_written={} notes={:?}",
        report.events_written, report.events_dropped, report.bytes_written, report.notes
    );
    println!(
        "counted: op_count={} span_count={} tensor_count={} alloc_count={} free_count={} device_memory={}",
        counts.op_count,
        counts.span_count,
        counts.tensor_count,
        counts.alloc_count,
        counts.free_count,
        counts.device_memory_count,
    );
    println!(
        "gradients: present={} missing={} zero={} non_finite={}",
        counts.gradients.present,
        counts.gradients.missing,
        counts.gradients.zero,
        counts.gradients.non_finite,
    );
    println!(
        "measured total: at most {} ns (own Instants around the measured span)",
        counts.measured_outer_ns
    );
    Ok(())
}
