//! Gradient classification (present, zero, NaN, infinite, missing, with the L2 norm) and
//! `gradient` events for a set of parameters or a `VarMap`.

use std::sync::atomic::{AtomicU64, Ordering};

use candle_core::backprop::GradStore;
use candle_core::{DType, Device, DeviceLocation, Tensor, Var};
use candle_nn::VarMap;
use candle_trace_schema::format::events::{Gradient, GradientState, TraceEvent};

use crate::sink::Sink;

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
/// no tensor made. For any other (a device's, a view, an integer
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
pub(super) fn host_sum_sq_max_abs(grad: &Tensor) -> Option<(f64, f64)> {
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
pub(super) fn f32_sum_sq_max_abs(values: &[f32]) -> (f64, f64) {
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
