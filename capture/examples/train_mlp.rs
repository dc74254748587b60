//! Train a small candle-nn MLP on synthetic data for four AdamW updates and capture update 2
//! as a `candle-graph/trace/6` file.
//!
//! ```sh
//! cargo run -p candle-trace-capture --features candle --example train_mlp -- --out train.jsonl
//! cargo trace summary train.jsonl     # compare with the counts this example prints
//! ```
//!
//! The captured update has a measured root span `train_step` with `forward` (two `module`
//! spans, one per layer), `backward` and `optimizer` children; every tensor op of the forward
//! pass is timed with `timed_op`; activations and gradients get `memory` alloc/free records;
//! parameters and gradients get `tensor` events; and every parameter gets a `gradient` fact.
//! `frozen.scale` is deliberately frozen (used detached and left out of the optimizer), so its
//! gradient is `missing`.
//!
//! TODO(recorder): this example writes through `VecSink` and a small local JSONL writer
//! (`StepSink`, `write_trace`) because the `Recorder` lives in another branch. Switch to
//! `Recorder` (its span guards, writer and meta) once that branch is merged; the library calls
//! (`timed_op`, `record_*`) stay as they are.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{AdamW, Linear, Module, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use candle_trace_capture::alloc::{self, AttributionScope, TrackingAllocator};
use candle_trace_capture::candle::{
    candle_version, record_tensor, record_tensor_alloc, record_tensor_free,
    record_varmap_gradients, timed_op, varmap_params, GradientTally,
};
use candle_trace_capture::sink::{Sink, VecSink};
use candle_trace_capture::sync::DeviceSync;
use candle_trace_schema::events::{
    GradientState, MemoryAction, Meta, Phase, SpanEnd, SpanKind, SpanStart, Step, TensorCategory,
    TimingMode, TraceEvent, TRACE_SCHEMA,
};

#[global_allocator]
static ALLOC: TrackingAllocator = TrackingAllocator::system();

/// Updates run; the one captured (one-based).
const STEPS: u64 = 4;
const CAPTURE_STEP: u64 = 2;
const BATCH: usize = 32;
const IN: usize = 8;
const HIDDEN: usize = 32;
const OUT: usize = 4;

/// TODO(recorder): stand-in for `Recorder`: a `VecSink` that records only while `recording` is
/// set and keeps a stack of open spans for `current_span_id`.
struct StepSink {
    inner: VecSink,
    recording: AtomicBool,
    open: Mutex<Vec<String>>,
    next_span: AtomicU64,
}

/// An open span (example stand-in for the recorder's span guard).
struct OpenSpan {
    id: String,
    start_ns: u64,
}

impl StepSink {
    fn new(device: &str) -> Self {
        StepSink {
            inner: VecSink::new(device),
            recording: AtomicBool::new(false),
            open: Mutex::new(Vec::new()),
            next_span: AtomicU64::new(1),
        }
    }

    fn open_spans(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn span_start(
        &self,
        name: &str,
        span_kind: SpanKind,
        step: Option<Step>,
        measured: bool,
    ) -> Option<OpenSpan> {
        if !self.is_recording() {
            return None;
        }
        let id = format!("s{}", self.next_span.fetch_add(1, Ordering::Relaxed));
        let start_ns = self.now_ns();
        let parent_id = self.open_spans().last().cloned();
        self.emit(TraceEvent::SpanStart(SpanStart {
            id: id.clone(),
            parent_id,
            name: name.to_string(),
            start_ns,
            span_kind,
            measured,
            step,
        }));
        self.open_spans().push(id.clone());
        self.inner.set_current_span(Some(id.clone()));
        Some(OpenSpan { id, start_ns })
    }

    fn span_end(&self, span: Option<OpenSpan>) {
        let Some(span) = span else { return };
        let duration_ns = self.now_ns().saturating_sub(span.start_ns);
        let mut open = self.open_spans();
        if let Some(pos) = open.iter().rposition(|id| *id == span.id) {
            open.remove(pos);
        }
        self.inner.set_current_span(open.last().cloned());
        drop(open);
        self.emit(TraceEvent::SpanEnd(SpanEnd {
            id: span.id,
            duration_ns,
        }));
    }

    /// Run `f` inside a span.
    fn span<R>(
        &self,
        name: &str,
        span_kind: SpanKind,
        step: Option<Step>,
        f: impl FnOnce() -> R,
    ) -> R {
        let span = self.span_start(name, span_kind, step, false);
        let result = f();
        self.span_end(span);
        result
    }
}

impl Sink for StepSink {
    fn is_recording(&self) -> bool {
        self.recording.load(Ordering::Relaxed)
    }
    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }
    fn current_span_id(&self) -> Option<String> {
        self.inner.current_span_id()
    }
    fn device(&self) -> &str {
        self.inner.device()
    }
    fn emit(&self, event: TraceEvent) {
        self.inner.emit(event);
    }
}

/// What the example recorded, in `candle-trace summary` terms.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counts {
    /// `op` events.
    pub op_count: u64,
    /// `span_start` events.
    pub span_count: u64,
    /// `tensor` events.
    pub tensor_count: u64,
    /// `memory` allocs.
    pub alloc_count: u64,
    /// `memory` frees.
    pub free_count: u64,
    /// `gradient` events per state.
    pub gradients: GradientTally,
}

impl Counts {
    fn of(events: &[TraceEvent]) -> Self {
        let mut counts = Counts::default();
        for event in events {
            match event {
                TraceEvent::Op(_) => counts.op_count += 1,
                TraceEvent::SpanStart(_) => counts.span_count += 1,
                TraceEvent::Tensor(_) => counts.tensor_count += 1,
                TraceEvent::Memory(m) if m.action == MemoryAction::Alloc => counts.alloc_count += 1,
                TraceEvent::Memory(_) => counts.free_count += 1,
                TraceEvent::Gradient(g) => match g.state {
                    GradientState::Present => counts.gradients.present += 1,
                    GradientState::Missing => counts.gradients.missing += 1,
                    GradientState::Zero => counts.gradients.zero += 1,
                    GradientState::NonFinite => counts.gradients.non_finite += 1,
                },
                _ => {}
            }
        }
        counts
    }
}

/// The model: `fc2(relu(fc1(x))) * frozen.scale`, with `frozen.scale` never trained.
struct Mlp {
    fc1: Linear,
    fc2: Linear,
    frozen: Tensor,
}

/// Forward pass; every tensor op timed, every activation recorded as allocated.
fn forward(
    model: &Mlp,
    sink: &StepSink,
    x: &Tensor,
    y: &Tensor,
    activations: &mut Vec<Tensor>,
) -> candle_core::Result<Tensor> {
    let mut keep = |t: &Tensor, op: &str| {
        record_tensor_alloc(sink, t, TensorCategory::Activation, Some(op));
        activations.push(t.clone());
    };
    let h = sink.span("fc1", SpanKind::Module, Some(Step::Forward), || {
        let h = timed_op(sink, "linear", &[x, model.fc1.weight()], || {
            model.fc1.forward(x)
        })?;
        keep(&h, "linear");
        let h = timed_op(sink, "relu", &[&h], || h.relu())?;
        keep(&h, "relu");
        Ok::<_, candle_core::Error>(h)
    })?;
    let out = sink.span("fc2", SpanKind::Module, Some(Step::Forward), || {
        let o = timed_op(sink, "linear", &[&h, model.fc2.weight()], || {
            model.fc2.forward(&h)
        })?;
        keep(&o, "linear");
        // Frozen: the scale is used detached, so no gradient reaches it.
        let frozen = model.frozen.detach();
        let o = timed_op(sink, "broadcast_mul", &[&o, &frozen], || {
            o.broadcast_mul(&frozen)
        })?;
        keep(&o, "broadcast_mul");
        Ok::<_, candle_core::Error>(o)
    })?;
    let diff = timed_op(sink, "sub", &[&out, y], || out.sub(y))?;
    keep(&diff, "sub");
    let sq = timed_op(sink, "sqr", &[&diff], || diff.sqr())?;
    keep(&sq, "sqr");
    let loss = timed_op(sink, "mean_all", &[&sq], || sq.mean_all())?;
    keep(&loss, "mean_all");
    Ok(loss)
}

/// Train for [`STEPS`] updates, capture update [`CAPTURE_STEP`], write the trace to `out`.
pub fn run(out: &Path) -> Result<Counts, Box<dyn std::error::Error>> {
    let device = Device::Cpu;
    let sink = StepSink::new("cpu");

    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
    let model = Mlp {
        fc1: candle_nn::linear(IN, HIDDEN, vb.pp("fc1"))?,
        fc2: candle_nn::linear(HIDDEN, OUT, vb.pp("fc2"))?,
        frozen: vb
            .pp("frozen")
            .get_with_hints(OUT, "scale", candle_nn::Init::Const(1.0))?,
    };
    let trainable: Vec<Var> = varmap_params(&varmap)
        .into_iter()
        .filter(|(name, _)| !name.starts_with("frozen."))
        .map(|(_, var)| var)
        .collect();
    let mut opt = AdamW::new(
        trainable,
        ParamsAdamW {
            lr: 1e-2,
            ..Default::default()
        },
    )?;

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

    for step in 1..=STEPS {
        let capture = step == CAPTURE_STEP;
        if capture {
            alloc::reset_peak();
            sink.recording.store(true, Ordering::Relaxed);
            alloc::record_host_memory(&sink);
        }
        DeviceSync::synchronize(&device);
        let root = sink.span_start("train_step", SpanKind::Function, None, true);

        let mut activations = Vec::new();
        let scope = AttributionScope::open();
        let loss = sink.span("forward", SpanKind::Function, Some(Step::Forward), || {
            forward(&model, &sink, &x, &y, &mut activations)
        })?;
        let forward_alloc = scope.finish();

        let grads = sink.span("backward", SpanKind::Function, Some(Step::Backward), || {
            let grads = loss.backward()?;
            for (name, var) in varmap_params(&varmap) {
                if let Some(g) = grads.get(var.as_tensor()) {
                    record_tensor_alloc(&sink, g, TensorCategory::Gradient, Some("backward"));
                    record_tensor(&sink, &format!("{name}.grad"), g, TensorCategory::Gradient);
                }
            }
            // The graph (and with it every activation) is released once backward is done.
            for a in activations.drain(..) {
                record_tensor_free(&sink, &a, TensorCategory::Activation);
            }
            record_varmap_gradients(&sink, "varmap", &varmap, &grads)?;
            Ok::<_, candle_core::Error>(grads)
        })?;

        sink.span(
            "optimizer",
            SpanKind::Function,
            Some(Step::Optimizer),
            || {
                opt.step(&grads)?;
                for (name, var) in varmap_params(&varmap) {
                    record_tensor(&sink, &name, var.as_tensor(), TensorCategory::Parameter);
                }
                Ok::<_, candle_core::Error>(())
            },
        )?;
        // The gradients are released here, in the root span.
        for (_, var) in varmap_params(&varmap) {
            if let Some(g) = grads.get(var.as_tensor()) {
                record_tensor_free(&sink, g, TensorCategory::Gradient);
            }
        }
        drop(grads);

        DeviceSync::synchronize(&device);
        sink.span_end(root);
        if capture {
            alloc::record_host_memory(&sink);
            sink.recording.store(false, Ordering::Relaxed);
            println!(
                "update {step}: loss {:.5}, forward allocated {} B on this thread (peak growth {} B), host peak {} B",
                loss.to_scalar::<f32>()?,
                forward_alloc.allocated_bytes,
                forward_alloc.peak_growth_bytes,
                alloc::peak_bytes(),
            );
        } else {
            println!("update {step}: loss {:.5}", loss.to_scalar::<f32>()?);
        }
    }

    let events = sink.inner.events();
    write_trace(out, &events)?;
    Ok(Counts::of(&events))
}

/// TODO(recorder): the recorder's writer replaces this. Writes the meta line, then each event.
fn write_trace(out: &Path, events: &[TraceEvent]) -> std::io::Result<()> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let run_id = format!("train-mlp-{}-{}", std::process::id(), now.as_nanos());
    let meta = TraceEvent::Meta(Meta {
        schema: TRACE_SCHEMA.to_string(),
        run_id: run_id.clone(),
        correlation_id: run_id,
        entrypoint: "train_mlp::train_step".to_string(),
        phase: Phase::Train,
        timestamp: iso8601(now.as_secs()),
        capture_step: CAPTURE_STEP,
        warmup_steps: CAPTURE_STEP - 1,
        device: "cpu".to_string(),
        // The root span is bounded by `Device::synchronize` (a no-op on the CPU).
        measured_region_device_synchronized: true,
        timing_mode: TimingMode::Host,
        tags: [
            ("batch_size", BATCH.to_string()),
            ("model", format!("mlp {IN}-{HIDDEN}-{OUT}")),
            ("optimizer", "adamw".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
        candle_version: Some(candle_version().to_string()),
    });
    let mut file = std::io::BufWriter::new(std::fs::File::create(out)?);
    writeln!(file, "{}", meta.to_json_line())?;
    for event in events {
        writeln!(file, "{}", event.to_json_line())?;
    }
    file.flush()
}

/// `YYYY-MM-DDTHH:MM:SSZ` for seconds since the Unix epoch (proleptic Gregorian, UTC).
fn iso8601(unix_secs: u64) -> String {
    let days = (unix_secs / 86_400) as i64;
    let secs = unix_secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
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
    let counts = run(&out)?;
    println!("wrote {}", out.display());
    println!(
        "counted: op_count={} span_count={} tensor_count={} alloc_count={} free_count={}",
        counts.op_count,
        counts.span_count,
        counts.tensor_count,
        counts.alloc_count,
        counts.free_count
    );
    println!(
        "gradients: present={} missing={} zero={} non_finite={}",
        counts.gradients.get(GradientState::Present),
        counts.gradients.get(GradientState::Missing),
        counts.gradients.get(GradientState::Zero),
        counts.gradients.get(GradientState::NonFinite),
    );
    Ok(())
}
