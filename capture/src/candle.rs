//! candle instrumentation: `op`, `tensor`, `memory` and `gradient` events from candle tensors.
//!
//! Every recording function starts with one [`Sink::is_recording`] check and returns at once
//! when the sink is not capturing, so the calls can stay in a training loop for every step.
//! Functions take `&S` with `S: Sink + ?Sized`: a `&VecSink`, a `&Recorder` or a `&dyn Sink`.
//!
//! Spellings written into events:
//! - tensor ids: the number inside candle's [`Tensor::id`] (`"17"`), see [`tensor_id`];
//! - dtypes: candle's own names ([`DType::as_str`]), which are SCHEMA.md's for every dtype
//!   SCHEMA.md knows (`u8 u32 i16 i32 i64 f16 bf16 f32 f64`); candle's sub-byte and 8-bit float
//!   formats keep candle's names (`f8e4m3`, `f6e2m3`, `f4` ...);
//! - devices: `cpu`, `cuda:N`, `metal:N` ([`device_name`]);
//! - `storage_bytes`: element count × element size of the dense tensor ([`storage_bytes`]),
//!   always written, so readers never need to derive it (scalars included);
//! - `span_id`: the sink's current span, or `""` when no span is open (readers warn about it).
//!
//! Timing: [`timed_op`] reads the sink's clock before and after the closure. In
//! `device_synchronized` mode (a recorder with a device sync hook) it synchronizes the device
//! first at both edges ([`Sink::sync_for_timing`]), so on CUDA and Metal it measures the device
//! time, not the launch; in `host` mode it measures the launch there.

use std::sync::atomic::{AtomicU64, Ordering};

use candle_core::backprop::GradStore;
use candle_core::{DType, Device, DeviceLocation, Tensor, Var};
use candle_nn::{Optimizer, VarMap};
use candle_trace_schema::format::events::{
    Gradient, GradientState, MemoryAction, MemoryEvent, Op, TensorCategory, TensorEvent, TraceEvent,
};

use crate::sink::Sink;
use crate::state::{Inner, TrainStep};
use crate::sync::{note_sync_error, DeviceSync};
use crate::Recorder;
use candle_trace_schema::format::events::Step;

/// The resolved `candle-core` version this crate was built against (e.g. `0.11.1`), for the
/// `candle_version` field of the trace's `meta` line.
///
/// The build script reads it from the build's `Cargo.lock` (the nearest one above this crate's
/// manifest or the build's `OUT_DIR`); when no lock file can be found it is the semver series
/// of the dependency requirement, `0.11`.
pub fn candle_version() -> &'static str {
    env!("CANDLE_TRACE_CANDLE_CORE_VERSION")
}

/// The trace spelling of a tensor's id: the number in candle's `TensorId` (`"17"`).
///
/// candle exposes `TensorId` only through `Debug` (`TensorId(17)`); should that text ever
/// change shape, the whole `Debug` text is used, which is still unique per tensor.
pub fn tensor_id(tensor: &Tensor) -> String {
    let debug = format!("{:?}", tensor.id());
    match debug
        .strip_prefix("TensorId(")
        .and_then(|rest| rest.strip_suffix(')'))
    {
        Some(number) => number.to_string(),
        None => debug,
    }
}

/// The trace spelling of a candle dtype (see the module docs).
pub fn dtype_name(dtype: DType) -> &'static str {
    dtype.as_str()
}

/// The trace spelling of a candle device: `cpu`, `cuda:N` or `metal:N`.
pub fn device_name(device: &Device) -> String {
    match device.location() {
        DeviceLocation::Cpu => "cpu".to_string(),
        DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
        DeviceLocation::Metal { gpu_id } => format!("metal:{gpu_id}"),
    }
}

/// Bytes of one dense tensor: element count × element size. Sub-byte formats (`f4`, `f6…`)
/// count their bits, rounded up to whole bytes. Saturates instead of overflowing.
pub fn storage_bytes(tensor: &Tensor) -> u64 {
    let elements = tensor.elem_count() as u64;
    let dtype = tensor.dtype();
    match dtype.size_in_bytes() {
        0 => {
            let bits: u64 = match dtype {
                DType::F4 => 4,
                DType::F6E2M3 | DType::F6E3M2 => 6,
                _ => 0,
            };
            elements.saturating_mul(bits).div_ceil(8)
        }
        size => elements.saturating_mul(size as u64),
    }
}

/// A tensor's shape as trace `shape` values.
pub fn shape_of(tensor: &Tensor) -> Vec<u64> {
    tensor.dims().iter().map(|&d| d as u64).collect()
}

/// Build the `op` event for `output = op_name(inputs)` that started at `timestamp_ns`.
fn op_event<S: Sink + ?Sized>(
    sink: &S,
    op_name: &str,
    inputs: &[&Tensor],
    output: &Tensor,
    timestamp_ns: u64,
    duration_ns: u64,
) -> TraceEvent {
    TraceEvent::Op(Op {
        span_id: sink.current_span_id().unwrap_or_default().into(),
        op_name: op_name.into(),
        inputs: inputs.iter().map(|t| tensor_id(t).into()).collect(),
        output: Some(tensor_id(output).into()),
        shape: shape_of(output),
        dtype: dtype_name(output.dtype()).into(),
        device: device_name(output.device()).into(),
        duration_ns,
        timestamp_ns,
        storage_bytes: Some(storage_bytes(output)),
        input_storage_bytes: inputs
            .iter()
            .fold(0u64, |sum, t| sum.saturating_add(storage_bytes(t))),
    })
}

/// Record an `op` event for `output = op_name(inputs)` that just finished and took
/// `duration_ns`. Its `timestamp_ns` is the op's start: now − `duration_ns`.
pub fn record_op<S: Sink + ?Sized>(
    sink: &S,
    op_name: &str,
    inputs: &[&Tensor],
    output: &Tensor,
    duration_ns: u64,
) {
    if !sink.is_recording() {
        return;
    }
    let timestamp_ns = sink.now_ns().saturating_sub(duration_ns);
    sink.emit(op_event(
        sink,
        op_name,
        inputs,
        output,
        timestamp_ns,
        duration_ns,
    ));
}

/// Run `op` and, when recording, emit an `op` event timed on the sink's clock. The closure's
/// result is returned unchanged; a failed op records nothing.
///
/// ```
/// # use candle_core::{Device, Tensor};
/// # use candle_trace_capture::{candle::timed_op, sink::VecSink};
/// let sink = VecSink::new("cpu");
/// let a = Tensor::ones((2, 3), candle_core::DType::F32, &Device::Cpu)?;
/// let b = Tensor::ones((3, 4), candle_core::DType::F32, &Device::Cpu)?;
/// let c = timed_op(&sink, "matmul", &[&a, &b], || a.matmul(&b))?;
/// assert_eq!(c.dims(), &[2, 4]);
/// assert_eq!(sink.events().len(), 1);
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn timed_op<S, F>(
    sink: &S,
    op_name: &str,
    inputs: &[&Tensor],
    op: F,
) -> candle_core::Result<Tensor>
where
    S: Sink + ?Sized,
    F: FnOnce() -> candle_core::Result<Tensor>,
{
    if !sink.is_recording() {
        return op();
    }
    sink.sync_for_timing();
    let start_ns = sink.now_ns();
    let output = op()?;
    sink.sync_for_timing();
    let duration_ns = sink.now_ns().saturating_sub(start_ns);
    sink.emit(op_event(
        sink,
        op_name,
        inputs,
        &output,
        start_ns,
        duration_ns,
    ));
    Ok(output)
}

/// Record a `tensor` event: `tensor` observed in the current span under `name_or_id` (a
/// parameter name such as `fc1.weight`, or [`tensor_id`]). `requires_grad` is candle's
/// [`Tensor::is_variable`].
pub fn record_tensor<S: Sink + ?Sized>(
    sink: &S,
    name_or_id: &str,
    tensor: &Tensor,
    category: TensorCategory,
) {
    if !sink.is_recording() {
        return;
    }
    sink.emit(TraceEvent::Tensor(TensorEvent {
        span_id: sink.current_span_id().unwrap_or_default().into(),
        tensor_id: name_or_id.into(),
        shape: shape_of(tensor),
        dtype: dtype_name(tensor.dtype()).into(),
        device: device_name(tensor.device()).into(),
        requires_grad: tensor.is_variable(),
        storage_bytes: Some(storage_bytes(tensor)),
        category,
    }));
}

fn tensor_memory_event<S: Sink + ?Sized>(
    sink: &S,
    tensor: &Tensor,
    action: MemoryAction,
    category: TensorCategory,
    op_name: Option<&str>,
) -> TraceEvent {
    TraceEvent::Memory(MemoryEvent {
        timestamp_ns: sink.now_ns(),
        tensor_id: tensor_id(tensor).into(),
        span_id: sink.current_span_id().unwrap_or_default().into(),
        op_name: op_name.map(Into::into),
        device: device_name(tensor.device()).into(),
        bytes: storage_bytes(tensor),
        action,
        shape: shape_of(tensor),
        dtype: dtype_name(tensor.dtype()).into(),
        category,
    })
}

/// Record a `memory` `alloc` of `tensor`'s storage (id, bytes, shape, dtype and device taken
/// from the tensor), made by `op_name` when known.
pub fn record_tensor_alloc<S: Sink + ?Sized>(
    sink: &S,
    tensor: &Tensor,
    category: TensorCategory,
    op_name: Option<&str>,
) {
    if !sink.is_recording() {
        return;
    }
    sink.emit(tensor_memory_event(
        sink,
        tensor,
        MemoryAction::Alloc,
        category,
        op_name,
    ));
}

/// Record a `memory` `free` of `tensor`'s storage (call it where the tensor is dropped).
pub fn record_tensor_free<S: Sink + ?Sized>(sink: &S, tensor: &Tensor, category: TensorCategory) {
    if !sink.is_recording() {
        return;
    }
    sink.emit(tensor_memory_event(
        sink,
        tensor,
        MemoryAction::Free,
        category,
        None,
    ));
}

/// How many `gradient` events of each state one call recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GradientTally {
    /// Finite, non-zero gradients.
    pub present: u64,
    /// Parameters without a gradient.
    pub missing: u64,
    /// Gradients that are zero everywhere.
    pub zero: u64,
    /// Gradients with NaN or infinite entries.
    pub non_finite: u64,
}

impl GradientTally {
    /// The count for one state.
    pub fn get(&self, state: GradientState) -> u64 {
        match state {
            GradientState::Present => self.present,
            GradientState::Missing => self.missing,
            GradientState::Zero => self.zero,
            GradientState::NonFinite => self.non_finite,
        }
    }

    /// All events counted.
    pub fn total(&self) -> u64 {
        self.present + self.missing + self.zero + self.non_finite
    }

    fn add(&mut self, state: GradientState) {
        match state {
            GradientState::Present => self.present += 1,
            GradientState::Missing => self.missing += 1,
            GradientState::Zero => self.zero += 1,
            GradientState::NonFinite => self.non_finite += 1,
        }
    }
}

/// One gradient's classification: its state and, when finite, its L2 norm.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GradientFact {
    /// `present`, `missing`, `zero` or `non_finite`.
    pub state: GradientState,
    /// The L2 norm: `Some` for `present` and `zero` (0.0), `None` otherwise (JSON has no NaN).
    pub norm: Option<f64>,
}

/// Classify gradients (`None` = the parameter has none), reading each once.
///
/// For each gradient two scalars are computed, Σg² and max|g| (in f64). A gradient in host
/// memory (the CPU device), contiguous and of a float dtype, is read in place in one pass with
/// no tensor made ([`host_sum_sq_max_abs`]). For any other (a device's, a view, an integer
/// dtype) the device computes them (in f64, or f32 on Metal, which has no f64); all those
/// scalars are stacked into one tensor and read with one `to_vec1`. Σg² = NaN means NaN
/// entries, max|g| = ∞ means infinite entries (both `non_finite`); max|g| = 0 means `zero`;
/// otherwise the norm is √Σg². The rare gradients whose Σg² over- or underflowed while max|g|
/// is finite and non-zero are read back alone and their norm is computed on the host with
/// scaling (max|g|·√Σ(g/max|g|)²), so they are never misfiled. Gradients on different
/// devices cannot be stacked; they are then read one scalar at a time.
pub fn classify_gradients(grads: &[Option<&Tensor>]) -> candle_core::Result<Vec<GradientFact>> {
    /// Where a non-empty gradient's two scalars come from.
    enum Pair {
        Host(f64, f64),
        /// Index of its Σg² in the device scalars (max|g| follows).
        Device(usize),
    }
    let mut scalars: Vec<Tensor> = Vec::new();
    let mut pairs: Vec<Pair> = Vec::with_capacity(grads.len());
    for grad in grads.iter().flatten() {
        if grad.elem_count() == 0 {
            continue;
        }
        if let Some((sum_sq, max_abs)) = host_sum_sq_max_abs(grad) {
            pairs.push(Pair::Host(sum_sq, max_abs));
            continue;
        }
        let wide = if matches!(grad.device().location(), DeviceLocation::Metal { .. }) {
            DType::F32
        } else {
            DType::F64
        };
        let g = grad.detach().to_dtype(wide)?;
        pairs.push(Pair::Device(scalars.len()));
        scalars.push(g.sqr()?.sum_all()?.to_dtype(DType::F64)?);
        scalars.push(g.abs()?.max_all()?.to_dtype(DType::F64)?);
    }
    let values: Vec<f64> = if scalars.is_empty() {
        Vec::new()
    } else {
        match Tensor::stack(&scalars, 0).and_then(|all| all.to_vec1::<f64>()) {
            Ok(values) => values,
            Err(_) => scalars
                .iter()
                .map(|s| s.to_device(&Device::Cpu)?.to_scalar::<f64>())
                .collect::<candle_core::Result<_>>()?,
        }
    };

    let mut facts = Vec::with_capacity(grads.len());
    let mut next = pairs.into_iter();
    for grad in grads {
        let fact = match grad {
            None => GradientFact {
                state: GradientState::Missing,
                norm: None,
            },
            Some(g) if g.elem_count() == 0 => GradientFact {
                state: GradientState::Zero,
                norm: Some(0.0),
            },
            Some(g) => {
                let pair = match next.next() {
                    Some(Pair::Host(sum_sq, max_abs)) => Some((sum_sq, max_abs)),
                    Some(Pair::Device(i)) => values.get(i).copied().zip(values.get(i + 1).copied()),
                    None => None,
                };
                match pair {
                    Some((sum_sq, max_abs)) => classify_one(g, sum_sq, max_abs)?,
                    // One pair was pushed per non-empty gradient above, so this cannot
                    // happen; should it ever, read this gradient alone.
                    None => exact_fact(g)?,
                }
            }
        };
        facts.push(fact);
    }
    Ok(facts)
}

/// Σg² and max|g| of a gradient held in host memory, read in place: `None` unless the tensor
/// is on the CPU device, contiguous, and `f32`, `f64`, `f16` or `bf16`.
///
/// One pass, in f64, over sixteen independent partial sums (so the additions pipeline instead
/// of waiting on each other; the order of additions is not the device's, which changes the sum
/// in its last bits at most). NaN entries make Σg² NaN and infinite ones make both ∞, as on the
/// device. An `f32` gradient, the usual one, is read by [`f32_sum_sq_max_abs`].
fn host_sum_sq_max_abs(grad: &Tensor) -> Option<(f64, f64)> {
    use candle_core::{CpuStorage, Storage, WithDType};
    fn pass<T: WithDType>(values: &[T]) -> (f64, f64) {
        const LANES: usize = 16;
        let mut sums = [0.0f64; LANES];
        let mut maxes = [0.0f64; LANES];
        let chunks = values.chunks_exact(LANES);
        let rest = chunks.remainder();
        for chunk in chunks {
            for ((sum, max), &v) in sums.iter_mut().zip(maxes.iter_mut()).zip(chunk) {
                let v = v.to_f64();
                *sum += v * v;
                *max = max.max(v.abs());
            }
        }
        for (i, &v) in rest.iter().enumerate() {
            let v = v.to_f64();
            sums[i] += v * v;
            maxes[i] = maxes[i].max(v.abs());
        }
        (
            sums.iter().sum(),
            maxes.iter().fold(0.0f64, |m, &x| m.max(x)),
        )
    }
    let (storage, layout) = grad.storage_and_layout();
    let (start, end) = layout.contiguous_offsets()?;
    let Storage::Cpu(cpu) = &*storage else {
        return None;
    };
    match cpu {
        CpuStorage::F32(v) => v.get(start..end).map(f32_sum_sq_max_abs),
        CpuStorage::F64(v) => v.get(start..end).map(pass),
        CpuStorage::F16(v) => v.get(start..end).map(pass),
        CpuStorage::BF16(v) => v.get(start..end).map(pass),
        _ => None,
    }
}

/// Σv² (in f64) and max|v| of `f32` values, in the widest vector instructions the CPU has
/// (`pulp` picks them at run time: AVX2 and FMA where present) over sixteen partial sums. The
/// maximum is taken in `f32`, where it is exact, with a comparison that skips NaN (a NaN makes
/// Σv² NaN already); an infinity is the maximum.
fn f32_sum_sq_max_abs(values: &[f32]) -> (f64, f64) {
    #[inline(always)]
    fn pass(values: &[f32]) -> (f64, f64) {
        const LANES: usize = 16;
        let mut sums = [0.0f64; LANES];
        let mut maxes = [0.0f32; LANES];
        let mut chunks = values.chunks_exact(LANES);
        for chunk in &mut chunks {
            for i in 0..LANES {
                let v = chunk[i];
                let wide = f64::from(v);
                sums[i] += wide * wide;
                let a = v.abs();
                maxes[i] = if a > maxes[i] { a } else { maxes[i] };
            }
        }
        for (i, &v) in chunks.remainder().iter().enumerate() {
            let wide = f64::from(v);
            sums[i] += wide * wide;
            let a = v.abs();
            maxes[i] = if a > maxes[i] { a } else { maxes[i] };
        }
        let max = maxes.iter().fold(0.0f32, |m, &x| if x > m { x } else { m });
        (sums.iter().sum(), f64::from(max))
    }
    pulp::Arch::new().dispatch(|| pass(values))
}

fn classify_one(grad: &Tensor, sum_sq: f64, max_abs: f64) -> candle_core::Result<GradientFact> {
    let non_finite = GradientFact {
        state: GradientState::NonFinite,
        norm: None,
    };
    if sum_sq.is_nan() || max_abs.is_nan() || max_abs.is_infinite() {
        return Ok(non_finite);
    }
    if max_abs == 0.0 {
        return Ok(GradientFact {
            state: GradientState::Zero,
            norm: Some(0.0),
        });
    }
    if sum_sq.is_infinite() || sum_sq == 0.0 {
        // Finite, non-zero entries whose squares over- or underflowed.
        return exact_fact(grad);
    }
    Ok(GradientFact {
        state: GradientState::Present,
        norm: Some(sum_sq.sqrt()),
    })
}

/// Read one gradient to the host and classify it exactly, with a scaled norm.
fn exact_fact(grad: &Tensor) -> candle_core::Result<GradientFact> {
    let values = grad
        .detach()
        .to_device(&Device::Cpu)?
        .to_dtype(DType::F64)?
        .flatten_all()?
        .to_vec1::<f64>()?;
    Ok(fact_from_values(&values))
}

/// Classify host values: `non_finite` if any is NaN/∞, `zero` if all are 0, else `present`
/// with the L2 norm computed as max|x|·√Σ(x/max|x|)² so it neither over- nor underflows.
fn fact_from_values(values: &[f64]) -> GradientFact {
    if values.iter().any(|v| !v.is_finite()) {
        return GradientFact {
            state: GradientState::NonFinite,
            norm: None,
        };
    }
    let max_abs = values.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if max_abs == 0.0 {
        return GradientFact {
            state: GradientState::Zero,
            norm: Some(0.0),
        };
    }
    let scaled: f64 = values.iter().map(|v| (v / max_abs).powi(2)).sum();
    GradientFact {
        state: GradientState::Present,
        norm: Some(max_abs * scaled.sqrt()),
    }
}

static GRADIENT_EVENT_SEQ: AtomicU64 = AtomicU64::new(0);

/// A process-unique `event_id` for a `gradient` event (`grad-N`).
fn next_gradient_event_id() -> String {
    format!(
        "grad-{}",
        GRADIENT_EVENT_SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// Record one `gradient` event per parameter of `params` (name under `root`, variable): the
/// state and norm come from [`classify_gradients`] (host gradients read in place, the others in one batched device read). Returns what was
/// recorded per state; records nothing and returns an empty tally when the sink is not
/// recording. An error means a device computation or read failed; nothing was emitted then.
pub fn record_gradients<S: Sink + ?Sized>(
    sink: &S,
    root: &str,
    params: &[(String, Var)],
    grads: &GradStore,
) -> candle_core::Result<GradientTally> {
    if !sink.is_recording() {
        return Ok(GradientTally::default());
    }
    let found: Vec<Option<&Tensor>> = params
        .iter()
        .map(|(_, var)| grads.get(var.as_tensor()))
        .collect();
    let facts = classify_gradients(&found)?;
    let mut tally = GradientTally::default();
    for ((key, var), fact) in params.iter().zip(facts) {
        tally.add(fact.state);
        let bytes = var.elem_count() as u64 * var.dtype().size_in_bytes() as u64;
        sink.emit(TraceEvent::Gradient(Gradient {
            event_id: next_gradient_event_id(),
            root: root.to_string(),
            key: key.clone(),
            state: fact.state,
            norm: fact.norm,
            storage_bytes: Some(bytes),
        }));
    }
    Ok(tally)
}

/// The variables of a `VarMap`, sorted by name (the order `gradient` events are written in).
pub fn varmap_params(varmap: &VarMap) -> Vec<(String, Var)> {
    let data = varmap
        .data()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut params: Vec<(String, Var)> = data
        .iter()
        .map(|(name, var)| (name.clone(), var.clone()))
        .collect();
    drop(data);
    params.sort_by(|a, b| a.0.cmp(&b.0));
    params
}

/// [`record_gradients`] for every variable of a `VarMap` (sorted by name).
pub fn record_varmap_gradients<S: Sink + ?Sized>(
    sink: &S,
    root: &str,
    varmap: &VarMap,
    grads: &GradStore,
) -> candle_core::Result<GradientTally> {
    if !sink.is_recording() {
        return Ok(GradientTally::default());
    }
    record_gradients(sink, root, &varmap_params(varmap), grads)
}

/// The tensors of the autograd graph that ends in `output` (candle's
/// [`Tensor::sorted_nodes`]: every tensor backward will visit, variables included), each as a
/// `tensor` event in the current span ([`Recorder::backward`] puts each in the layer span that
/// created it, when a traced layer did): id (candle's), shape, dtype, device, bytes
/// (elements × element size, so a view counts its own elements), `requires_grad` = is a
/// variable, category `parameter` for variables and `activation` for the rest. These are the
/// tensors backward keeps alive. Returns how many were recorded (0 when not recording).
pub fn record_graph<S: Sink + ?Sized>(sink: &S, output: &Tensor) -> usize {
    record_graph_in(sink, output, |_| None)
}

/// [`record_graph`], each tensor in the span `span_of(its id)` names (`None`: the current one).
fn record_graph_in<S: Sink + ?Sized>(
    sink: &S,
    output: &Tensor,
    span_of: impl Fn(u64) -> Option<u64>,
) -> usize {
    if !sink.is_recording() {
        return 0;
    }
    let current = sink.current_span_id().unwrap_or_default();
    let nodes = output.sorted_nodes();
    for node in &nodes {
        let category = if node.is_variable() {
            TensorCategory::Parameter
        } else {
            TensorCategory::Activation
        };
        let id = tensor_id(node);
        let span = id
            .parse::<u64>()
            .ok()
            .and_then(&span_of)
            .map_or_else(|| current.clone(), crate::stack::span_id);
        sink.emit(TraceEvent::Tensor(TensorEvent {
            span_id: span.into(),
            tensor_id: id.into(),
            shape: shape_of(node),
            dtype: dtype_name(node.dtype()).into(),
            device: device_name(node.device()).into(),
            requires_grad: node.is_variable(),
            storage_bytes: Some(storage_bytes(node)),
            category,
        }));
    }
    nodes.len()
}

/// candle's tensor-id counter now: the id of a tensor made for the purpose (a detached view of
/// a one-byte variable; no storage is allocated). candle numbers every tensor from one
/// process-wide counter, so the tensors created inside a span have ids between the readings
/// at its open and close. `None` if the probe cannot be made.
pub(crate) fn tensor_clock() -> Option<u64> {
    static PROBE: std::sync::OnceLock<Option<Var>> = std::sync::OnceLock::new();
    let probe = PROBE
        .get_or_init(|| Var::zeros((), DType::U8, &Device::Cpu).ok())
        .as_ref()?;
    tensor_number(&probe.as_tensor().detach())
}

/// The number in candle's `TensorId` (a `usize` behind a private field): the one value its
/// derived `Hash` writes, else read from its `Debug` text (`TensorId(17)`) in a stack buffer.
/// The tensor clock reads it at every span edge of the captured step, without allocating or
/// formatting.
fn tensor_number(tensor: &Tensor) -> Option<u64> {
    /// Keeps the one `usize` that `TensorId`'s derived `Hash` writes, and counts every write.
    #[derive(Default)]
    struct Take {
        value: u64,
        writes: u32,
    }
    impl std::hash::Hasher for Take {
        fn finish(&self) -> u64 {
            self.value
        }
        fn write(&mut self, _: &[u8]) {
            // Any other shape of hash: not the id alone.
            self.writes += 2;
        }
        fn write_usize(&mut self, n: usize) {
            self.value = n as u64;
            self.writes += 1;
        }
    }
    let mut take = Take::default();
    std::hash::Hash::hash(&tensor.id(), &mut take);
    if take.writes == 1 {
        return Some(take.value);
    }
    // `TensorId` hashed as something else than its number: read its `Debug` text.
    struct Stack {
        bytes: [u8; 48],
        len: usize,
    }
    impl std::fmt::Write for Stack {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            let end = self.len + s.len();
            self.bytes
                .get_mut(self.len..end)
                .ok_or(std::fmt::Error)?
                .copy_from_slice(s.as_bytes());
            self.len = end;
            Ok(())
        }
    }
    let mut text = Stack {
        bytes: [0; 48],
        len: 0,
    };
    std::fmt::Write::write_fmt(&mut text, format_args!("{:?}", tensor.id())).ok()?;
    let digits = text.bytes.get(..text.len)?;
    let digits = digits.strip_prefix(b"TensorId(")?.strip_suffix(b")")?;
    std::str::from_utf8(digits).ok()?.parse().ok()
}

fn lock_train(inner: &Inner) -> std::sync::MutexGuard<'_, Option<TrainStep>> {
    inner
        .train
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One training update in three calls: [`forward`](Recorder::forward),
/// [`backward`](Recorder::backward), [`optimizer_step`](Recorder::optimizer_step).
///
/// `forward` begins the next step (the first call is step 1) unless one is running, so a loop
/// needs no [`begin_step`](Recorder::begin_step) of its own (do not mix the two); in the
/// captured step it also opens the measured region `train_step`, which `optimizer_step` closes.
/// A `forward` or `backward` that returns an error ends the step there (measured region
/// closed, capturing over when it was the captured step), so a loop that skips a failed batch
/// starts the next update as the next step. Each call is a training-step span (`forward` /
/// `backward` / `optimizer`) with a `device_memory` checkpoint at both edges (see
/// [`Recorder::step`]).
///
/// ```
/// use candle_core::{DType, Device, Tensor};
/// use candle_nn::{Module, Optimizer, VarBuilder, VarMap, SGD};
/// use candle_trace_capture::Recorder;
///
/// let recorder = Recorder::builder("train::step").writer(std::io::sink()).build()?;
/// let varmap = VarMap::new();
/// let model = candle_nn::linear(4, 1, VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu))?;
/// let mut opt = SGD::new(varmap.all_vars(), 0.1)?;
/// let x = Tensor::ones((8, 4), DType::F32, &Device::Cpu)?;
/// for _ in 0..3 {
///     let loss = recorder.forward(|| model.forward(&x)?.sqr()?.mean_all())?;
///     let grads = recorder.backward(&loss)?;
///     recorder.optimizer_step(&mut opt, &grads, &varmap)?;
/// }
/// assert!(recorder.capture_done());
/// recorder.finish()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl Recorder {
    /// Run the forward pass `f` as the `forward` span, beginning the next training step when
    /// none is running (see the [type-level docs](#impl-Recorder-1)).
    pub fn forward<T>(&self, f: impl FnOnce() -> candle_core::Result<T>) -> candle_core::Result<T> {
        let inner = &self.inner;
        {
            let mut train = lock_train(inner);
            if train.is_none() {
                let (_, captured) = inner.begin_step();
                let measured = (captured && !inner.measured_used.swap(true, Ordering::AcqRel))
                    .then(|| {
                        inner.open_span(
                            std::borrow::Cow::Borrowed("train_step"),
                            None,
                            candle_trace_schema::format::events::SpanKind::Function,
                            true,
                            None,
                            None,
                            inner.measured_sync(),
                        )
                    });
                *train = Some(TrainStep { captured, measured });
            }
        }
        let forward = self.step(Step::Forward);
        let first = forward.number().and_then(|_| inner.tensor_clock());
        let result = f();
        // Tensors made in forward outside any traced layer belong to the forward span.
        if let (Some(span), Some(first), Some(end)) =
            (forward.number(), first, inner.tensor_clock())
        {
            inner.tensor_range(span, first, end);
        }
        drop(forward);
        if result.is_err() {
            self.abandon_train_step();
        }
        result
    }

    /// A forward or backward that failed ends its training step there (a loop that skips the
    /// batch and goes on would otherwise run its next update inside this step, recording on).
    fn abandon_train_step(&self) {
        let train = lock_train(&self.inner).take();
        self.close_measured(train);
        self.end_capture(train);
    }

    /// Close the measured region `train_step` that `forward` opened for `train`, if any.
    fn close_measured(&self, train: Option<TrainStep>) {
        let inner = &self.inner;
        if let Some(TrainStep {
            measured: Some((id, start_ns)),
            ..
        }) = train
        {
            inner.close_span_timed(id, start_ns, inner.measured_sync(), None);
        }
    }

    /// When `train` was the captured step, stop capturing.
    fn end_capture(&self, train: Option<TrainStep>) {
        if train.is_some_and(|t| t.captured) {
            let inner = &self.inner;
            inner.end_captured_step();
            inner
                .tensor_ranges
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clear();
        }
    }

    /// `loss.backward()` as the `backward` span. In the captured step, the autograd graph's
    /// tensors are first recorded in it ([`record_graph`]).
    pub fn backward(&self, loss: &Tensor) -> candle_core::Result<GradStore> {
        let backward = self.step(Step::Backward);
        if self.is_recording() {
            let counts = &self.inner.counts;
            counts.graph_on.store(true, Ordering::Relaxed);
            // Each tensor in the layer span that created it, when one did.
            let n = record_graph_in(self, loss, |id| self.inner.span_of_tensor(id));
            counts.graph_tensors.fetch_add(n as u64, Ordering::Relaxed);
        }
        let grads = loss.backward();
        drop(backward);
        if grads.is_err() {
            self.abandon_train_step();
        }
        grads
    }

    /// `optimizer.step(grads)` as the `optimizer` span; then closes the measured region, records
    /// one `gradient` event per variable of `varmap` ([`record_varmap_gradients`], root
    /// `varmap`) and ends the training step.
    pub fn optimizer_step<O: Optimizer>(
        &self,
        optimizer: &mut O,
        grads: &GradStore,
        varmap: &VarMap,
    ) -> candle_core::Result<()> {
        let stepped = {
            let _optimizer = self.step(Step::Optimizer);
            optimizer.step(grads)
        };
        let inner = &self.inner;
        let train = lock_train(inner).take();
        self.close_measured(train);
        let recorded = if self.is_recording() {
            let counts = &inner.counts;
            counts.gradients_on.store(true, Ordering::Relaxed);
            record_varmap_gradients(self, "varmap", varmap, grads).map(|tally| {
                counts.gradients.fetch_add(tally.total(), Ordering::Relaxed);
            })
        } else {
            Ok(())
        };
        self.end_capture(train);
        stepped.and(recorded)
    }
}

/// `Device::synchronize`; a failure is counted ([`crate::sync::sync_error_count`]), never raised.
impl DeviceSync for Device {
    fn synchronize(&self) {
        if Device::synchronize(self).is_err() {
            note_sync_error();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::VecSink;
    use candle_core::Device;

    fn ops(sink: &VecSink) -> Vec<Op> {
        sink.events()
            .into_iter()
            .filter_map(|e| match e {
                TraceEvent::Op(op) => Some(op),
                _ => None,
            })
            .collect()
    }

    /// A sink that never records: every function must do nothing.
    struct Off;
    impl Sink for Off {
        fn is_recording(&self) -> bool {
            false
        }
        fn now_ns(&self) -> u64 {
            panic!("now_ns called while not recording")
        }
        fn current_span_id(&self) -> Option<String> {
            panic!("current_span_id called while not recording")
        }
        fn device(&self) -> &str {
            "cpu"
        }
        fn emit(&self, _event: TraceEvent) {
            panic!("emit called while not recording")
        }
    }

    #[test]
    fn record_op_of_a_matmul_has_exact_shape_dtype_bytes_and_ids() -> candle_core::Result<()> {
        let sink = VecSink::new("cpu");
        sink.set_current_span(Some("forward".into()));
        let a = Tensor::ones((8, 16), DType::F32, &Device::Cpu)?;
        let b = Tensor::ones((16, 4), DType::F32, &Device::Cpu)?;
        let c = a.matmul(&b)?;
        record_op(&sink, "matmul", &[&a, &b], &c, 1_000);
        let ops = ops(&sink);
        assert_eq!(ops.len(), 1);
        let op = &ops[0];
        assert_eq!(op.span_id, "forward");
        assert_eq!(op.op_name, "matmul");
        assert_eq!(op.shape, vec![8, 4]);
        assert_eq!(op.dtype, "f32");
        assert_eq!(op.device, "cpu");
        assert_eq!(op.storage_bytes, Some(8 * 4 * 4));
        assert_eq!(op.input_storage_bytes, (8 * 16 + 16 * 4) * 4);
        assert_eq!(op.duration_ns, 1_000);
        assert_eq!(op.inputs, vec![tensor_id(&a), tensor_id(&b)]);
        assert_eq!(op.output.as_deref(), Some(tensor_id(&c).as_str()));
        // Ids are candle's TensorId numbers, distinct per tensor.
        assert!(op.inputs[0].parse::<u64>().is_ok());
        assert_ne!(op.inputs[0], op.inputs[1]);
        assert_ne!(op.inputs[0], tensor_id(&c));
        // The bytes agree with what a reader derives from shape and dtype.
        assert_eq!(
            op.storage_bytes,
            Some(candle_trace_schema::format::events::derived_storage_bytes(
                &op.shape, &op.dtype
            ))
        );
        Ok(())
    }

    #[test]
    fn timed_op_times_and_passes_the_result_through() -> candle_core::Result<()> {
        let sink = VecSink::new("cpu");
        let a = Tensor::new(&[1u8, 2, 3], &Device::Cpu)?;
        let b = timed_op(&sink, "to_f16", &[&a], || a.to_dtype(DType::F16))?;
        assert_eq!(b.dtype(), DType::F16);
        let ops = ops(&sink);
        assert_eq!(ops.len(), 1);
        assert_eq!(ops[0].span_id, "");
        assert_eq!(ops[0].dtype, "f16");
        assert_eq!(ops[0].storage_bytes, Some(6));
        assert_eq!(ops[0].input_storage_bytes, 3);
        // A failing op records nothing and returns the error.
        let bad = timed_op(&sink, "bad", &[&a], || a.matmul(&a));
        assert!(bad.is_err());
        assert_eq!(sink.events().len(), 1);
        Ok(())
    }

    #[test]
    fn nothing_happens_when_not_recording() -> candle_core::Result<()> {
        let a = Tensor::ones((2, 2), DType::F32, &Device::Cpu)?;
        record_op(&Off, "x", &[&a], &a, 1);
        let dyn_sink: &dyn Sink = &Off;
        let b = timed_op(dyn_sink, "x", &[&a], || a.exp())?;
        assert_eq!(b.dims(), &[2, 2]);
        record_tensor(&Off, "a", &a, TensorCategory::Activation);
        record_tensor_alloc(&Off, &a, TensorCategory::Activation, None);
        record_tensor_free(&Off, &a, TensorCategory::Activation);
        let grads = a.sum_all()?.backward()?;
        assert_eq!(
            record_gradients(&Off, "m", &[], &grads)?,
            GradientTally::default()
        );
        Ok(())
    }

    #[test]
    fn dtype_and_device_spellings() -> candle_core::Result<()> {
        for (dtype, name, size) in [
            (DType::U8, "u8", 1u64),
            (DType::U32, "u32", 4),
            (DType::I64, "i64", 8),
            (DType::F16, "f16", 2),
            (DType::BF16, "bf16", 2),
            (DType::F32, "f32", 4),
            (DType::F64, "f64", 8),
        ] {
            assert_eq!(dtype_name(dtype), name);
            assert_eq!(
                candle_trace_schema::format::events::dtype_size(name),
                Some(size),
                "{name}"
            );
            let t = Tensor::zeros((3, 5), dtype, &Device::Cpu)?;
            assert_eq!(storage_bytes(&t), 15 * size);
        }
        assert_eq!(device_name(&Device::Cpu), "cpu");
        let scalar = Tensor::new(2.0f32, &Device::Cpu)?;
        assert_eq!(storage_bytes(&scalar), 4);
        assert!(shape_of(&scalar).is_empty());
        Ok(())
    }

    #[test]
    fn record_tensor_and_memory_events() -> candle_core::Result<()> {
        let sink = VecSink::new("cpu");
        sink.set_current_span(Some("s".into()));
        let var = Var::zeros((4, 2), DType::F32, &Device::Cpu)?;
        record_tensor(
            &sink,
            "fc.weight",
            var.as_tensor(),
            TensorCategory::Parameter,
        );
        let act = var.as_tensor().exp()?;
        record_tensor_alloc(&sink, &act, TensorCategory::Activation, Some("exp"));
        record_tensor_free(&sink, &act, TensorCategory::Activation);
        let events = sink.events();
        assert_eq!(events.len(), 3);
        match &events[0] {
            TraceEvent::Tensor(t) => {
                assert_eq!(t.tensor_id, "fc.weight");
                assert!(t.requires_grad);
                assert_eq!(t.storage_bytes, Some(32));
                assert_eq!(t.category, TensorCategory::Parameter);
                assert_eq!(t.span_id, "s");
            }
            other => panic!("expected a tensor event, got {other:?}"),
        }
        match (&events[1], &events[2]) {
            (TraceEvent::Memory(a), TraceEvent::Memory(f)) => {
                assert_eq!(a.action, MemoryAction::Alloc);
                assert_eq!(f.action, MemoryAction::Free);
                assert_eq!(a.tensor_id, tensor_id(&act));
                assert_eq!(a.tensor_id, f.tensor_id);
                assert_eq!(a.bytes, 32);
                assert_eq!(a.op_name.as_deref(), Some("exp"));
                assert_eq!(a.shape, vec![4, 2]);
                assert!(f.timestamp_ns >= a.timestamp_ns);
            }
            other => panic!("expected memory events, got {other:?}"),
        }
        Ok(())
    }

    fn norm_close(fact: GradientFact, want: f64) {
        let got = fact.norm.unwrap_or(f64::NAN);
        assert!(
            (got - want).abs() <= want.abs() * 1e-12,
            "norm {got} != {want}"
        );
    }

    #[test]
    fn classify_hand_made_gradients() -> candle_core::Result<()> {
        let cpu = Device::Cpu;
        let present = Tensor::new(&[3.0f32, 4.0], &cpu)?; // √(9+16) = 5
        let present_2d = Tensor::new(&[[1.0f64, 2.0], [2.0, 4.0]], &cpu)?; // √25 = 5
        let half = Tensor::new(&[1.0f32, -1.0, 1.0, -1.0], &cpu)?.to_dtype(DType::F16)?; // 2
        let zero = Tensor::zeros((3, 3), DType::F32, &cpu)?;
        let nan = Tensor::new(&[1.0f32, f32::NAN], &cpu)?;
        let inf = Tensor::new(&[f32::NEG_INFINITY, 0.0], &cpu)?;
        let big = Tensor::new(&[3e200f64, 4e200], &cpu)?; // Σg² overflows f64: 5e200
        let tiny = Tensor::new(&[3e-200f64, 4e-200], &cpu)?; // Σg² underflows: 5e-200
        let empty = Tensor::zeros((0, 4), DType::F32, &cpu)?;
        let facts = classify_gradients(&[
            Some(&present),
            None,
            Some(&present_2d),
            Some(&half),
            Some(&zero),
            Some(&nan),
            Some(&inf),
            Some(&big),
            Some(&tiny),
            Some(&empty),
        ])?;
        let states: Vec<GradientState> = facts.iter().map(|f| f.state).collect();
        use GradientState::*;
        assert_eq!(
            states,
            vec![
                Present, Missing, Present, Present, Zero, NonFinite, NonFinite, Present, Present,
                Zero
            ]
        );
        norm_close(facts[0], 5.0);
        assert_eq!(facts[1].norm, None);
        norm_close(facts[2], 5.0);
        norm_close(facts[3], 2.0);
        assert_eq!(facts[4].norm, Some(0.0));
        assert_eq!(facts[5].norm, None);
        assert_eq!(facts[6].norm, None);
        norm_close(facts[7], 5e200);
        norm_close(facts[8], 5e-200);
        assert_eq!(facts[9].norm, Some(0.0));
        Ok(())
    }

    #[test]
    fn host_pass_reads_in_place_and_views_go_to_the_device() -> candle_core::Result<()> {
        let cpu = Device::Cpu;
        // 19 values (two chunks of 8 and a remainder of 3): Σ k² for k = 1..=19 is
        // 19·20·39/6 = 2470, max 19; negated odd entries change neither.
        let values: Vec<f32> = (1..=19)
            .map(|k| if k % 2 == 1 { -(k as f32) } else { k as f32 })
            .collect();
        let t = Tensor::new(values.as_slice(), &cpu)?;
        assert_eq!(host_sum_sq_max_abs(&t), Some((2470.0, 19.0)));
        let half = t.to_dtype(DType::BF16)?;
        assert_eq!(host_sum_sq_max_abs(&half), Some((2470.0, 19.0)));
        // A NaN makes Σg² NaN; an infinity makes both infinite.
        let nan = Tensor::new(&[1.0f64, f64::NAN, 2.0], &cpu)?;
        assert!(host_sum_sq_max_abs(&nan).is_some_and(|(s, _)| s.is_nan()));
        let inf = Tensor::new(&[1.0f32, f32::NEG_INFINITY], &cpu)?;
        assert_eq!(
            host_sum_sq_max_abs(&inf),
            Some((f64::INFINITY, f64::INFINITY))
        );
        // In f32 too: a NaN makes Σg² NaN (and is no maximum).
        let nan32 = Tensor::new(&[1.0f32, f32::NAN, -2.0], &cpu)?;
        assert!(host_sum_sq_max_abs(&nan32).is_some_and(|(s, m)| s.is_nan() && m == 2.0));
        // 1000 f32 values (62 chunks of 16 and 8 left): the f32 pass against Σ and max in f64
        // added one by one; they differ in the order of additions only.
        let many: Vec<f32> = (0..1000)
            .map(|i| ((i * 7919) % 1000) as f32 * 1e-3 - 0.5)
            .collect();
        let (want_sum, want_max) = many.iter().fold((0.0f64, 0.0f64), |(s, m), &v| {
            (s + f64::from(v) * f64::from(v), m.max(f64::from(v).abs()))
        });
        let (sum, max) = f32_sum_sq_max_abs(&many);
        assert!(
            (sum - want_sum).abs() <= want_sum * 1e-12,
            "{sum} vs {want_sum}"
        );
        assert_eq!(max, want_max);
        // [[1, 2], [3, 4]]: its second row is contiguous at an offset (read in place: 9 + 16);
        // its transpose is not contiguous and an integer tensor is not a float (both left to
        // the device).
        let m = Tensor::new(&[[1.0f32, 2.0], [3.0, 4.0]], &cpu)?;
        let row = m.narrow(0, 1, 1)?;
        assert_eq!(host_sum_sq_max_abs(&row), Some((25.0, 4.0)));
        let transposed = m.t()?;
        assert_eq!(host_sum_sq_max_abs(&transposed), None);
        let ints = Tensor::new(&[3u32, 4], &cpu)?;
        assert_eq!(host_sum_sq_max_abs(&ints), None);
        // Both paths in one call, in order: √25, √30 (1+4+9+16), √25.
        let facts = classify_gradients(&[Some(&row), Some(&transposed), None, Some(&ints)])?;
        norm_close(facts[0], 5.0);
        norm_close(facts[1], 30f64.sqrt());
        assert_eq!(facts[2].state, GradientState::Missing);
        norm_close(facts[3], 5.0);
        Ok(())
    }

    #[test]
    fn record_gradients_after_a_real_backward() -> candle_core::Result<()> {
        let cpu = Device::Cpu;
        // loss = Σ w·x with x = [1, 2, 2]: ∂loss/∂w = x, norm 3.
        let w = Var::new(&[0.5f32, 0.5, 0.5], &cpu)?;
        // d enters the loss multiplied by a zero tensor: its gradient exists and is all zero.
        let d = Var::new(&[7.0f32, 8.0], &cpu)?;
        // frozen never enters the loss: its gradient is missing.
        let frozen = Var::new(&[1.0f32], &cpu)?;
        let x = Tensor::new(&[1.0f32, 2.0, 2.0], &cpu)?;
        let loss = (w.as_tensor() * &x)?
            .sum_all()?
            .add(&(d.as_tensor() * Tensor::zeros(2, DType::F32, &cpu)?)?.sum_all()?)?;
        let grads = loss.backward()?;
        let sink = VecSink::new("cpu");
        let params = vec![
            ("w".to_string(), w),
            ("d".to_string(), d),
            ("frozen".to_string(), frozen),
        ];
        let tally = record_gradients(&sink, "model", &params, &grads)?;
        assert_eq!(
            tally,
            GradientTally {
                present: 1,
                missing: 1,
                zero: 1,
                non_finite: 0
            }
        );
        let gradients: Vec<Gradient> = sink
            .events()
            .into_iter()
            .filter_map(|e| match e {
                TraceEvent::Gradient(g) => Some(g),
                _ => None,
            })
            .collect();
        assert_eq!(gradients.len(), 3);
        assert_eq!(gradients[0].key, "w");
        assert_eq!(gradients[0].root, "model");
        assert_eq!(gradients[0].state, GradientState::Present);
        assert!((gradients[0].norm.unwrap_or(0.0) - 3.0).abs() < 1e-9);
        assert_eq!(gradients[1].state, GradientState::Zero);
        assert_eq!(gradients[2].state, GradientState::Missing);
        assert_eq!(gradients[2].norm, None);
        let mut ids: Vec<&str> = gradients.iter().map(|g| g.event_id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 3, "event ids are unique");
        Ok(())
    }

    #[test]
    fn a_failed_forward_ends_its_training_step() -> candle_core::Result<()> {
        // A loop that skips a failed batch and goes on: the captured step (the first) ends at
        // the failure instead of running on into the next update with recording on.
        let recorder = crate::Recorder::builder("train::fail")
            .capture_step(1)
            .writer(std::io::sink())
            .build()
            .map_err(|e| candle_core::Error::Msg(e.to_string()))?;
        let failed: candle_core::Result<Tensor> =
            recorder.forward(|| Err(candle_core::Error::Msg("bad batch".into())));
        assert!(failed.is_err());
        assert!(
            recorder.capture_done(),
            "the captured step ended at its failure"
        );
        assert!(!recorder.is_recording());
        // The next update is step 2, not recorded.
        use candle_nn::Module;
        let varmap = VarMap::new();
        let vb = candle_nn::VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
        let lin = candle_nn::linear(3, 1, vb.pp("fc"))?;
        let mut opt = candle_nn::SGD::new(varmap.all_vars(), 0.1)?;
        let x = Tensor::ones((2, 3), DType::F32, &Device::Cpu)?;
        let loss = recorder.forward(|| lin.forward(&x)?.sqr()?.mean_all())?;
        assert!(!recorder.is_recording());
        let grads = recorder.backward(&loss)?;
        recorder.optimizer_step(&mut opt, &grads, &varmap)?;
        Ok(())
    }

    #[test]
    fn varmap_gradients_are_sorted_by_name() -> candle_core::Result<()> {
        let varmap = VarMap::new();
        let vb = candle_nn::VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
        let lin = candle_nn::linear(3, 2, vb.pp("fc"))?;
        let x = Tensor::ones((4, 3), DType::F32, &Device::Cpu)?;
        let loss = candle_nn::Module::forward(&lin, &x)?.sqr()?.sum_all()?;
        let grads = loss.backward()?;
        let sink = VecSink::new("cpu");
        let tally = record_varmap_gradients(&sink, "varmap", &varmap, &grads)?;
        assert_eq!(tally.total(), 2);
        let keys: Vec<String> = sink
            .events()
            .into_iter()
            .filter_map(|e| match e {
                TraceEvent::Gradient(g) => Some(g.key),
                _ => None,
            })
            .collect();
        assert_eq!(keys, vec!["fc.bias", "fc.weight"]);
        Ok(())
    }

    #[test]
    fn tensor_numbers_are_the_ids_and_the_clock_moves() -> candle_core::Result<()> {
        let t = Tensor::ones(3, DType::F32, &Device::Cpu)?;
        assert_eq!(
            tensor_number(&t).map(|n| n.to_string()),
            Some(tensor_id(&t))
        );
        let before = tensor_clock().unwrap_or(0);
        let u = t.exp()?;
        let after = tensor_clock().unwrap_or(0);
        // The probe's own reading takes an id too: the tensor made between lies strictly inside.
        let id = tensor_number(&u).unwrap_or(0);
        assert!(before < id && id < after, "{before} < {id} < {after}");
        Ok(())
    }

    #[test]
    fn version_and_sync() {
        assert!(candle_version().starts_with("0.11"));
        DeviceSync::synchronize(&Device::Cpu);
    }
}
