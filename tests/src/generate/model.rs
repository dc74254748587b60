//! The model: its weights and optimizer state, loaded once, and the layers a forward goes
//! through (linear with LoRA adapters, RMS norm, attention, MLP).

use std::io::{self, Write};

use candle_trace_schema::format::events::{SpanKind, TensorCategory};

use super::memory::Alloc;
use super::ops::OpLine;
use super::{Gen, BATCH, HEADS, HIDDEN, INTERMEDIATE, SEQ, VOCAB};

/// One weight of the model.
#[derive(Debug, Clone)]
pub(super) struct Param {
    pub(super) name: String,
    pub(super) shape: Vec<u64>,
    pub(super) alloc: Alloc,
}

/// The model's weights and optimizer state.
pub(super) struct Model {
    pub(super) embed: Param,
    /// Per layer: q, k, v, o, gate, up, down.
    pub(super) params: Vec<Param>,
    pub(super) lm_head: Param,
    /// Host-side buffers (rotary frequencies).
    pub(super) host_buffers: Vec<Alloc>,
    /// AdamW moments (device) and the scheduler state (host), allocated on the first step.
    pub(super) optimizer_state: Vec<Alloc>,
}

impl Model {
    pub(super) const PER_LAYER: usize = 7;

    pub(super) fn layer(&self, i: usize) -> (&[Param], &[Param]) {
        let p = &self.params[i * Self::PER_LAYER..(i + 1) * Self::PER_LAYER];
        (&p[..4], &p[4..])
    }
}

pub(super) fn load_model<W: Write>(g: &mut Gen<'_, W>, layers: usize) -> io::Result<Model> {
    let dev = g.devices.len() - 1;
    g.open("load_weights", SpanKind::Function, false)?;
    let param = |g: &mut Gen<'_, W>, name: String, shape: Vec<u64>| -> io::Result<Param> {
        let alloc = g.alloc(dev, shape.clone(), "bf16", TensorCategory::Parameter, None)?;
        Ok(Param { name, shape, alloc })
    };
    let embed = param(
        g,
        String::from("model.embed_tokens.weight"),
        vec![VOCAB, HIDDEN],
    )?;
    let mut params = Vec::new();
    for l in 0..layers {
        for (name, shape) in [
            ("self_attn.q_proj", [HIDDEN, HIDDEN]),
            ("self_attn.k_proj", [HIDDEN, HIDDEN]),
            ("self_attn.v_proj", [HIDDEN, HIDDEN]),
            ("self_attn.o_proj", [HIDDEN, HIDDEN]),
            ("mlp.gate_proj", [INTERMEDIATE, HIDDEN]),
            ("mlp.up_proj", [INTERMEDIATE, HIDDEN]),
            ("mlp.down_proj", [HIDDEN, INTERMEDIATE]),
        ] {
            params.push(param(
                g,
                format!("model.layers.{l}.{name}.weight"),
                shape.to_vec(),
            )?);
        }
    }
    let lm_head = param(g, String::from("lm_head.weight"), vec![VOCAB, HIDDEN])?;
    // Rotary frequencies stay on the host.
    let inv_freq = g.alloc(
        0,
        vec![HIDDEN / HEADS / 2],
        "f32",
        TensorCategory::Parameter,
        Some("rotary_emb"),
    )?;
    g.close()?;
    Ok(Model {
        embed,
        params,
        lm_head,
        host_buffers: vec![inv_freq],
        optimizer_state: Vec::new(),
    })
}

impl<W: Write> Gen<'_, W> {
    /// A linear module (optionally through a LoRA adapter) applied to `input`.
    pub(super) fn linear(
        &mut self,
        name: &str,
        input: &str,
        weight: &Param,
        out_features: u64,
        device: usize,
        saved: &mut Vec<Alloc>,
    ) -> io::Result<String> {
        self.open(name, SpanKind::Module, false)?;
        let dtype = "bf16";
        self.tensor(
            &weight.alloc.tensor_id,
            &weight.shape,
            dtype,
            device,
            true,
            TensorCategory::Parameter,
        )?;
        if self.rng.chance(50) {
            self.tensor(
                input,
                &[BATCH, SEQ, weight.shape[1]],
                dtype,
                device,
                false,
                TensorCategory::Activation,
            )?;
        }
        let shape = [BATCH, SEQ, out_features];
        let out = if self.rng.chance(20) {
            // LoRA: base_layer → linear → matmul (+ contiguous sub-op), plus the adapter.
            self.open("base_layer", SpanKind::Module, false)?;
            self.open("linear", SpanKind::Module, false)?;
            self.open("matmul", SpanKind::Op, false)?;
            let c = self.op_span(
                "contiguous",
                &[input],
                &[BATCH, SEQ, HIDDEN],
                dtype,
                device,
                None,
            )?;
            let y = self.alloc(
                device,
                shape.to_vec(),
                dtype,
                TensorCategory::Activation,
                Some("matmul"),
            )?;
            let duration = self.rng.range(20_000, 200_000);
            self.op(OpLine {
                op_name: "matmul",
                inputs: &[&c, &weight.alloc.tensor_id],
                output: Some(&y.tensor_id),
                shape: &shape,
                dtype,
                device,
                duration_ns: duration,
            })?;
            let id = y.tensor_id.clone();
            saved.push(y);
            self.close()?;
            self.close()?;
            self.close()?;
            self.open("lora_A", SpanKind::Module, false)?;
            let a = self.op_span("matmul", &[input], &[BATCH, SEQ, 16], dtype, device, None)?;
            self.close()?;
            self.open("lora_B", SpanKind::Module, false)?;
            let b = self.op_span("matmul", &[&a], &shape, dtype, device, None)?;
            self.close()?;
            self.op_span("add", &[&id, &b], &shape, dtype, device, Some(&mut *saved))?
        } else {
            let y = self.op_span(
                "matmul",
                &[input, &weight.alloc.tensor_id],
                &shape,
                dtype,
                device,
                Some(&mut *saved),
            )?;
            if self.rng.chance(30) {
                self.op_span("add", &[&y], &shape, dtype, device, Some(&mut *saved))?
            } else {
                y
            }
        };
        self.close()?;
        Ok(out)
    }

    pub(super) fn rms_norm(
        &mut self,
        name: &str,
        input: &str,
        device: usize,
        saved: &mut Vec<Alloc>,
    ) -> io::Result<String> {
        self.open(name, SpanKind::Module, false)?;
        let shape = [BATCH, SEQ, HIDDEN];
        let y = self.op_span(
            "rms_norm",
            &[input],
            &shape,
            "bf16",
            device,
            Some(&mut *saved),
        )?;
        self.close()?;
        Ok(y)
    }

    pub(super) fn attention(
        &mut self,
        input: &str,
        params: &[Param],
        device: usize,
        saved: &mut Vec<Alloc>,
    ) -> io::Result<String> {
        self.open("attention", SpanKind::Module, false)?;
        let q = self.linear("q_proj", input, &params[0], HIDDEN, device, saved)?;
        let k = self.linear("k_proj", input, &params[1], HIDDEN, device, saved)?;
        let v = self.linear("v_proj", input, &params[2], HIDDEN, device, saved)?;
        let head_shape = [BATCH, HEADS, SEQ, HIDDEN / HEADS];
        // Views: op lines straight in the module span, no span of their own.
        for t in [&q, &k, &v] {
            let d = self.rng.range(200, 900);
            self.op(OpLine {
                op_name: "reshape",
                inputs: &[t],
                output: None,
                shape: &head_shape,
                dtype: "bf16",
                device,
                duration_ns: d,
            })?;
            let d = self.rng.range(200, 900);
            self.op(OpLine {
                op_name: "transpose",
                inputs: &[t],
                output: None,
                shape: &head_shape,
                dtype: "bf16",
                device,
                duration_ns: d,
            })?;
        }
        let q = self.op_span(
            "rope",
            &[&q],
            &head_shape,
            "bf16",
            device,
            Some(&mut *saved),
        )?;
        let k = self.op_span(
            "rope",
            &[&k],
            &head_shape,
            "bf16",
            device,
            Some(&mut *saved),
        )?;
        self.open("sdpa", SpanKind::Module, false)?;
        let scores_shape = [BATCH, HEADS, SEQ, SEQ];
        let s = self.op_span(
            "matmul",
            &[&q, &k],
            &scores_shape,
            "f32",
            device,
            Some(&mut *saved),
        )?;
        let p = if self.rng.chance(50) {
            self.composite_softmax(&s, &scores_shape, device, saved)?
        } else {
            self.op_span(
                "softmax",
                &[&s],
                &scores_shape,
                "f32",
                device,
                Some(&mut *saved),
            )?
        };
        let p = self.op_span(
            "to_dtype",
            &[&p],
            &scores_shape,
            "bf16",
            device,
            Some(&mut *saved),
        )?;
        let o = self.op_span(
            "matmul",
            &[&p, &v],
            &head_shape,
            "bf16",
            device,
            Some(&mut *saved),
        )?;
        self.close()?;
        let d = self.rng.range(200, 900);
        self.op(OpLine {
            op_name: "reshape",
            inputs: &[&o],
            output: None,
            shape: &[BATCH, SEQ, HIDDEN],
            dtype: "bf16",
            device,
            duration_ns: d,
        })?;
        let y = self.linear("o_proj", &o, &params[3], HIDDEN, device, saved)?;
        self.close()?;
        Ok(y)
    }

    pub(super) fn mlp(
        &mut self,
        input: &str,
        params: &[Param],
        device: usize,
        saved: &mut Vec<Alloc>,
    ) -> io::Result<String> {
        self.open("mlp", SpanKind::Module, false)?;
        let g = self.linear("gate_proj", input, &params[0], INTERMEDIATE, device, saved)?;
        let u = self.linear("up_proj", input, &params[1], INTERMEDIATE, device, saved)?;
        let shape = [BATCH, SEQ, INTERMEDIATE];
        let a = self.op_span("silu", &[&g], &shape, "bf16", device, Some(&mut *saved))?;
        let h = self.op_span("mul", &[&a, &u], &shape, "bf16", device, Some(&mut *saved))?;
        let y = self.linear("down_proj", &h, &params[2], HIDDEN, device, saved)?;
        self.close()?;
        Ok(y)
    }
}
