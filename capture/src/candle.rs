//! candle instrumentation: `op`, `tensor`, `memory` and `gradient` events from candle tensors.
//!
//! Every recording function starts with one [`Sink::is_recording`](crate::sink::Sink::is_recording) check and returns at once
//! when the sink is not capturing, so the calls can stay in a training loop for every step.
//! Functions take `&S` with `S: Sink + ?Sized`: a `&VecSink`, a `&Recorder` or a `&dyn Sink`.
//!
//! Spellings written into events:
//! - tensor ids: the number inside candle's [`Tensor::id`](candle_core::Tensor::id) (`"17"`), see [`names::tensor_id`];
//! - dtypes: candle's own names ([`DType::as_str`](candle_core::DType::as_str)), which are SCHEMA.md's for every dtype
//!   SCHEMA.md knows (`u8 u32 i16 i32 i64 f16 bf16 f32 f64`); candle's sub-byte and 8-bit float
//!   formats keep candle's names (`f8e4m3`, `f6e2m3`, `f4` ...);
//! - devices: `cpu`, `cuda:N`, `metal:N` ([`names::device_name`]);
//! - `storage_bytes`: element count × element size of the dense tensor ([`names::storage_bytes`]),
//!   always written, so readers never need to derive it (scalars included);
//! - `span_id`: the sink's current span, or `""` when no span is open (readers warn about it).
//!
//! Timing: [`events::timed_op`] reads the sink's clock before and after the closure. In
//! `device_synchronized` mode (a recorder with a device sync hook) it synchronizes the device
//! first at both edges ([`Sink::sync_for_timing`](crate::sink::Sink::sync_for_timing)), so on CUDA and Metal it measures the device
//! time, not the launch; in `host` mode it measures the launch there.

pub mod events;
pub mod gradients;
pub mod graph;
pub mod names;
mod train;

#[cfg(test)]
mod tests;
