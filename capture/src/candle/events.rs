//! `op`, `tensor` and `memory` events from candle tensors; [`timed_op`] times an op.

use candle_core::Tensor;
use candle_trace_schema::format::events::{
    MemoryAction, MemoryEvent, Op, TensorCategory, TensorEvent, TraceEvent,
};

use super::names::{device_name, dtype_name, shape_of, storage_bytes, tensor_id};
use crate::sink::Sink;

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
/// # use candle_trace_capture::{candle::events::timed_op, sink::VecSink};
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
