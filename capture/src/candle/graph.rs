//! The autograd graph's tensors as `tensor` events, and candle's tensor-id counter read as a
//! clock (which tensors a span created).

use candle_core::{DType, Device, Tensor, Var};
use candle_trace_schema::format::events::{TensorCategory, TensorEvent, TraceEvent};

use super::names::{device_name, dtype_name, shape_of, storage_bytes, tensor_id};
use crate::sink::Sink;

/// The tensors of the autograd graph that ends in `output` (candle's
/// [`Tensor::sorted_nodes`]: every tensor backward will visit, variables included), each as a
/// `tensor` event in the current span ([`Recorder::backward`](crate::Recorder::backward) puts
/// each in the layer span that created it, when a traced layer did): id (candle's), shape,
/// dtype, device, bytes (elements × element size, so a view counts its own elements),
/// `requires_grad` = is a variable, category `parameter` for variables and `activation` for the
/// rest. These are the tensors backward keeps alive. Returns how many were recorded (0 when not
/// recording).
pub fn record_graph<S: Sink + ?Sized>(sink: &S, output: &Tensor) -> usize {
    record_graph_in(sink, output, |_| None)
}

/// [`record_graph`], each tensor in the span `span_of(its id)` names (`None`: the current one).
pub(super) fn record_graph_in<S: Sink + ?Sized>(
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
pub(super) fn tensor_number(tensor: &Tensor) -> Option<u64> {
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
