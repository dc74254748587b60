//! One training step: batch, forward, loss, backward, gradient clipping, optimizer, and the
//! device checkpoints after it.

use std::io::{self, Write};

use candle_trace_schema::format::events::{
    DeviceMemory, Edge, Pass, SpanKind, TensorCategory, TraceEvent,
};

use super::memory::Alloc;
use super::model::{Model, Param};
use super::ops::OpLine;
use super::{Gen, GenConfig, BATCH, HIDDEN, SEQ, VOCAB};

impl<W: Write> Gen<'_, W> {
    /// One `step.N` span: forward, backward, optimizer.
    pub(super) fn train_step(
        &mut self,
        n: u64,
        model: &mut Model,
        cfg: &GenConfig,
    ) -> io::Result<()> {
        let cpu = 0;
        let dev = self.devices.len() - 1;
        self.open(&format!("step.{n}"), SpanKind::Function, false)?;

        // Load and collate the batch on the host; it is copied to the device in forward.
        self.open("data_loader", SpanKind::Function, false)?;
        let mut host_batch = Vec::new();
        for (dtype, op) in [
            ("u32", "tokenize"),
            ("u8", "attention_mask"),
            ("u32", "labels"),
        ] {
            let t = self.alloc(
                cpu,
                vec![BATCH, SEQ],
                dtype,
                TensorCategory::Other,
                Some("load_batch"),
            )?;
            let d = self.rng.range(20_000, 200_000);
            self.op(OpLine {
                op_name: op,
                inputs: &[],
                output: Some(&t.tensor_id),
                shape: &[BATCH, SEQ],
                dtype,
                device: cpu,
                duration_ns: d,
            })?;
            host_batch.push(t);
        }
        let batch = host_batch.remove(0);
        self.close()?;
        let mut saved: Vec<Alloc> = Vec::new();

        self.pass = Some(Pass::Forward);
        let forward_id = self.open("forward", SpanKind::Function, false)?;
        self.open("model", SpanKind::Module, false)?;
        let ids = self.op_span(
            "to_device",
            &[&batch.tensor_id],
            &[BATCH, SEQ],
            "u32",
            dev,
            Some(&mut saved),
        )?;
        self.free(&batch)?;
        if let Some(mask) = host_batch.first() {
            self.free(mask)?;
        }
        self.open("embed_tokens", SpanKind::Module, false)?;
        self.tensor(
            &model.embed.alloc.tensor_id,
            &model.embed.shape,
            "bf16",
            dev,
            true,
            TensorCategory::Parameter,
        )?;
        let mut x = self.op_span(
            "embedding",
            &[&ids, &model.embed.alloc.tensor_id],
            &[BATCH, SEQ, HIDDEN],
            "bf16",
            dev,
            Some(&mut saved),
        )?;
        self.close()?;
        for layer in 0..cfg.layers.max(1) {
            self.open(&format!("layers.{layer}"), SpanKind::Module, false)?;
            let (attn, mlp) = model.layer(layer);
            let h = self.rms_norm("input_layernorm", &x, dev, &mut saved)?;
            let a = self.attention(&h, attn, dev, &mut saved)?;
            let r = self.op_span(
                "add",
                &[&x, &a],
                &[BATCH, SEQ, HIDDEN],
                "bf16",
                dev,
                Some(&mut saved),
            )?;
            let h = self.rms_norm("post_attention_layernorm", &r, dev, &mut saved)?;
            let m = self.mlp(&h, mlp, dev, &mut saved)?;
            x = self.op_span(
                "add",
                &[&r, &m],
                &[BATCH, SEQ, HIDDEN],
                "bf16",
                dev,
                Some(&mut saved),
            )?;
            self.close()?;
        }
        let x = self.rms_norm("norm", &x, dev, &mut saved)?;
        let lm_head = model.lm_head.clone();
        let logits = self.linear("lm_head", &x, &lm_head, VOCAB, dev, &mut saved)?;
        self.close()?; // model
        self.open("loss", SpanKind::Function, false)?;
        let loss = self.op_span(
            "cross_entropy",
            &[&logits],
            &[1],
            "f32",
            dev,
            Some(&mut saved),
        )?;
        // Copy the loss to the host for logging: a short-lived host activation.
        let host = self.alloc(
            cpu,
            vec![1],
            "f32",
            TensorCategory::Activation,
            Some("to_cpu"),
        )?;
        let d = self.rng.range(1_000, 5_000);
        self.op(OpLine {
            op_name: "to_device",
            inputs: &[&loss],
            output: Some(&host.tensor_id),
            shape: &[1],
            dtype: "f32",
            device: cpu,
            duration_ns: d,
        })?;
        self.free(&host)?;
        if let Some(labels) = host_batch.last() {
            self.free(labels)?;
        }
        self.close()?; // loss
        self.close()?; // forward
        let forward_end = self.now;

        // Backward: layers in reverse, activations freed, gradients allocated.
        self.pass = Some(Pass::Backward);
        let backward_id = self.open("backward", SpanKind::Function, false)?;
        let backward_start = self.now;
        if n % 10 == 0 {
            self.emit(&TraceEvent::Edge(Edge {
                from_span: forward_id,
                to_span: backward_id.clone(),
                duration_ns: backward_start - forward_end,
            }))?;
        }
        let layers = cfg.layers.max(1);
        let layer_params: Vec<Param> = model.params.clone();
        let mut grads: Vec<Option<Alloc>> = vec![None; layer_params.len()];
        // Free the forward's saved activations evenly over the parameters' backward ops.
        let per_param = saved.len().div_ceil(layer_params.len().max(1));
        self.open("model", SpanKind::Module, false)?;
        for layer in (0..layers).rev() {
            self.open(&format!("layers.{layer}"), SpanKind::Module, false)?;
            for (block, range) in [("mlp", 4..7), ("attention", 0..4)] {
                self.open(block, SpanKind::Module, false)?;
                for j in range.rev() {
                    let idx = layer * Model::PER_LAYER + j;
                    let p = &layer_params[idx];
                    self.open("matmul_backward", SpanKind::Op, false)?;
                    let g = self.alloc(
                        dev,
                        p.shape.clone(),
                        "f32",
                        TensorCategory::Gradient,
                        Some("matmul_backward"),
                    )?;
                    let d = self.rng.range(30_000, 300_000);
                    self.op(OpLine {
                        op_name: "matmul",
                        inputs: &[&p.alloc.tensor_id],
                        output: Some(&g.tensor_id),
                        shape: &p.shape,
                        dtype: "f32",
                        device: dev,
                        duration_ns: d,
                    })?;
                    let shape = [BATCH, SEQ, p.shape[1]];
                    let ws = self.alloc(
                        dev,
                        shape.to_vec(),
                        "bf16",
                        TensorCategory::Other,
                        Some("workspace"),
                    )?;
                    let d = self.rng.range(10_000, 80_000);
                    self.op(OpLine {
                        op_name: "matmul",
                        inputs: &[&g.tensor_id],
                        output: None,
                        shape: &shape,
                        dtype: "bf16",
                        device: dev,
                        duration_ns: d,
                    })?;
                    self.free(&ws)?;
                    for _ in 0..per_param {
                        if let Some(a) = saved.pop() {
                            self.free(&a)?;
                        }
                    }
                    self.close()?;
                    grads[idx] = Some(g);
                }
                self.close()?;
            }
            self.close()?;
        }
        while let Some(a) = saved.pop() {
            self.free(&a)?;
        }
        self.close()?; // model
        self.close()?; // backward

        // Optimizer: AdamW per parameter; state allocated on the first step, kept to the end.
        self.pass = Some(Pass::Optimizer);
        self.open("optimizer", SpanKind::Function, false)?;
        // Gradient clipping: the global norm goes through the host.
        self.open("clip_grad_norm", SpanKind::Op, false)?;
        let norm = self.alloc(
            cpu,
            vec![1],
            "f32",
            TensorCategory::Gradient,
            Some("clip_grad_norm"),
        )?;
        let d = self.rng.range(50_000, 150_000);
        let grad_ids: Vec<&str> = grads
            .iter()
            .flatten()
            .map(|g| g.tensor_id.as_str())
            .collect();
        self.op(OpLine {
            op_name: "clip_grad_norm",
            inputs: &grad_ids,
            output: Some(&norm.tensor_id),
            shape: &[1],
            dtype: "f32",
            device: cpu,
            duration_ns: d,
        })?;
        self.free(&norm)?;
        self.close()?;
        self.open("adamw.step", SpanKind::Function, false)?;
        let first = model.optimizer_state.is_empty();
        if first {
            // Learning-rate scheduler state lives on the host.
            let lr = self.alloc(
                cpu,
                vec![4],
                "f64",
                TensorCategory::Optimizer,
                Some("lr_scheduler"),
            )?;
            model.optimizer_state.push(lr);
        }
        for (i, p) in layer_params.iter().enumerate() {
            self.open("adamw_update", SpanKind::Op, false)?;
            if first {
                let m = self.alloc(
                    dev,
                    p.shape.clone(),
                    "f32",
                    TensorCategory::Optimizer,
                    Some("adamw.m"),
                )?;
                let v = self.alloc(
                    dev,
                    p.shape.clone(),
                    "f32",
                    TensorCategory::Optimizer,
                    Some("adamw.v"),
                )?;
                model.optimizer_state.push(m);
                model.optimizer_state.push(v);
            }
            let d = self.rng.range(5_000, 60_000);
            let grad = grads[i].as_ref().map_or("", |g| g.tensor_id.as_str());
            let inputs = [p.alloc.tensor_id.as_str(), grad];
            self.op(OpLine {
                op_name: "adamw",
                inputs: &inputs,
                output: None,
                shape: &p.shape,
                dtype: "f32",
                device: dev,
                duration_ns: d,
            })?;
            self.close()?;
        }
        self.close()?;
        for g in grads.iter().rev().flatten() {
            self.free(g)?;
        }
        self.close()?; // optimizer
        self.pass = None;
        self.close()?; // step.N

        // Device checkpoints: live bytes plus framework overhead.
        for d in 0..self.devices.len() {
            let capacity: u64 = if d == 0 { 64 << 30 } else { 80 << 30 };
            let used = self.live[d] + (512 << 20);
            let reserved = (d > 0).then(|| used + (self.rng.range(0, 256) << 20));
            self.tick(1);
            self.emit(&TraceEvent::DeviceMemory(DeviceMemory {
                timestamp_ns: self.now,
                device: self.devices[d].clone(),
                used_bytes: used,
                free_bytes: capacity.saturating_sub(used),
                reserved_bytes: reserved,
            }))?;
        }
        self.stats.steps += 1;
        Ok(())
    }
}
