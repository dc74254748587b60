//! The op families: `op` and `tensor` lines, op-kind spans, and the composite ops (a softmax
//! made of several ops).

use std::io::{self, Write};

use candle_trace_schema::format::events::{
    derived_storage_bytes, Op, SpanKind, TensorCategory, TensorEvent, TraceEvent,
};

use super::memory::Alloc;
use super::Gen;

/// The fields of one `op` line the callers choose (span and timestamp come from the generator).
pub(super) struct OpLine<'a> {
    pub(super) op_name: &'a str,
    pub(super) inputs: &'a [&'a str],
    pub(super) output: Option<&'a str>,
    pub(super) shape: &'a [u64],
    pub(super) dtype: &'a str,
    pub(super) device: usize,
    pub(super) duration_ns: u64,
}

impl<W: Write> Gen<'_, W> {
    /// An `op` line in the current span.
    pub(super) fn op(&mut self, line: OpLine<'_>) -> io::Result<()> {
        let OpLine {
            op_name,
            inputs,
            output,
            shape,
            dtype,
            device,
            duration_ns,
        } = line;
        self.tick(1);
        let storage_bytes = self.maybe_storage(shape, dtype);
        let input_storage_bytes = if self.rng.chance(30) {
            0
        } else {
            derived_storage_bytes(shape, dtype) * inputs.len() as u64
        };
        let event = TraceEvent::Op(Op {
            span_id: self.current_span(),
            op_name: op_name.into(),
            inputs: inputs.iter().map(|&s| s.into()).collect(),
            output: output.map(Into::into),
            shape: shape.to_vec(),
            dtype: dtype.into(),
            device: self.devices[device].clone().into(),
            duration_ns,
            timestamp_ns: self.now,
            storage_bytes,
            input_storage_bytes,
        });
        self.emit(&event)?;
        self.tick(duration_ns);
        Ok(())
    }

    pub(super) fn tensor(
        &mut self,
        tensor_id: &str,
        shape: &[u64],
        dtype: &str,
        device: usize,
        requires_grad: bool,
        category: TensorCategory,
    ) -> io::Result<()> {
        let storage_bytes = self.maybe_storage(shape, dtype);
        let event = TraceEvent::Tensor(TensorEvent {
            span_id: self.current_span(),
            tensor_id: tensor_id.into(),
            shape: shape.to_vec(),
            dtype: dtype.into(),
            device: self.devices[device].clone().into(),
            requires_grad,
            storage_bytes,
            category,
        });
        self.emit(&event)
    }

    /// An op span holding one op that allocates its output as an activation (kept for
    /// backward when `saved` is given, freed at once otherwise).
    pub(super) fn op_span(
        &mut self,
        op_name: &str,
        inputs: &[&str],
        shape: &[u64],
        dtype: &'static str,
        device: usize,
        saved: Option<&mut Vec<Alloc>>,
    ) -> io::Result<String> {
        self.open(op_name, SpanKind::Op, false)?;
        let out = self.alloc(
            device,
            shape.to_vec(),
            dtype,
            TensorCategory::Activation,
            Some(op_name),
        )?;
        let flops_ns = derived_storage_bytes(shape, dtype) / 2048 + 200;
        let duration = self.rng.range(flops_ns / 2, flops_ns * 2);
        self.op(OpLine {
            op_name,
            inputs,
            output: Some(&out.tensor_id),
            shape,
            dtype,
            device,
            duration_ns: duration,
        })?;
        let id = out.tensor_id.clone();
        match saved {
            Some(saved) => saved.push(out),
            None => self.free(&out)?,
        }
        self.close()?;
        Ok(id)
    }

    /// A composite op (softmax = max, sub, exp, sum, div) with nested op spans.
    pub(super) fn composite_softmax(
        &mut self,
        input: &str,
        shape: &[u64],
        device: usize,
        saved: &mut Vec<Alloc>,
    ) -> io::Result<String> {
        self.open("softmax", SpanKind::Op, false)?;
        let mut reduced = shape.to_vec();
        if let Some(last) = reduced.last_mut() {
            *last = 1;
        }
        let mut temps = Vec::new();
        let m = self.op_span(
            "max_keepdim",
            &[input],
            &reduced,
            "f32",
            device,
            Some(&mut temps),
        )?;
        let s = self.op_span(
            "broadcast_sub",
            &[input, &m],
            shape,
            "f32",
            device,
            Some(&mut temps),
        )?;
        let e = self.op_span("exp", &[&s], shape, "f32", device, Some(&mut temps))?;
        let z = self.op_span(
            "sum_keepdim",
            &[&e],
            &reduced,
            "f32",
            device,
            Some(&mut temps),
        )?;
        let out = self.alloc(
            device,
            shape.to_vec(),
            "f32",
            TensorCategory::Activation,
            Some("softmax"),
        )?;
        let duration = self.rng.range(2_000, 20_000);
        self.op(OpLine {
            op_name: "broadcast_div",
            inputs: &[&e, &z],
            output: Some(&out.tensor_id),
            shape,
            dtype: "f32",
            device,
            duration_ns: duration,
        })?;
        for t in temps.iter().rev() {
            self.free(t)?;
        }
        let id = out.tensor_id.clone();
        saved.push(out);
        self.close()?;
        Ok(id)
    }
}
