//! Deterministic generator of realistic `candle-graph/trace/6` files (SCHEMA.md §1).
//!
//! Every line is built from the schema crate's event types and written with
//! [`TraceEvent::to_json_line`], so the output is exactly what the writer emits. Lines are
//! streamed to any [`Write`]: a multi-gigabyte trace never has to be held in memory (only the
//! allocations of the current training step are remembered, to free them later).
//!
//! The shape of a generated training trace:
//! - one `meta` line;
//! - one measured root span `train_step` (the only span with `measured: true`) around everything;
//! - repeated `step.N` spans, each with `forward` (module tree `model → layers.K → attention|mlp
//!   → q_proj … → op spans`, some through LoRA adapters and composite ops, up to depth 10),
//!   `backward` and `optimizer` subtrees, every span of a subtree tagged with its `step`;
//! - `op` lines (matmul, add, softmax, … in `f32`/`bf16`, about half with `storage_bytes`), some
//!   inside op-kind spans and some directly in module spans; `tensor` lines for weights and
//!   inputs;
//! - memory churn on `cpu` and `cuda:0` (with `devices: 2`) in all five categories: parameters
//!   and optimizer state live for the whole run, activations from forward to backward, gradients
//!   from backward to the optimizer, batches and workspaces briefly; every `alloc` is freed
//!   before the root closes;
//! - a `device_memory` checkpoint per device after every step, `gradient` lines at the end and
//!   an `edge` (forward → backward) every few steps.
//!
//! Time is one monotonic clock that moves forward at every event, so children lie inside their
//! parents, each `span_end` duration is end − start, and memory events have strictly increasing
//! timestamps (the reader's replay order is the file order). [`GenStats`] holds the numbers the
//! generator itself counted, to compare with what a reader makes of the file.
//!
//! ```
//! use candle_trace_tests::generate::{trace_bytes, GenConfig};
//! use candle_trace_schema::format::document::TraceDocument;
//!
//! let cfg = GenConfig { target_bytes: 64 * 1024, ..GenConfig::default() };
//! let bytes = trace_bytes(&cfg);
//! let doc = TraceDocument::from_bytes(&bytes);
//! assert!(doc.diagnostics.is_empty());
//! ```

use std::collections::BTreeMap;
use std::io::{self, Write};

use candle_trace_schema::format::events::{
    derived_storage_bytes, CompactString, DeviceMemory, Edge, Gradient, GradientState,
    MemoryAction, MemoryEvent, Meta, Op, Pass, Phase, SpanEnd, SpanKind, SpanStart, TensorCategory,
    TensorEvent, TimingMode, TraceEvent, TRACE_SCHEMA,
};

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenConfig {
    /// Stop starting new training steps once this many bytes are written (the file ends a
    /// little past it: the current step and the closing lines are always completed).
    pub target_bytes: u64,
    /// Seed of the generator's random choices: the same config gives the same bytes.
    pub seed: u64,
    /// Number of devices: device 0 is `cpu`, device `i ≥ 1` is `cuda:{i-1}`. The model lives on
    /// the last one. Values below 1 count as 1.
    pub devices: usize,
    /// Transformer layers of the generated model (at least 1).
    pub layers: usize,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            target_bytes: 1 << 20,
            seed: 0x5eed,
            devices: 2,
            layers: 4,
        }
    }
}

impl GenConfig {
    /// The default config with another size target.
    pub fn with_target_bytes(target_bytes: u64) -> Self {
        GenConfig {
            target_bytes,
            ..GenConfig::default()
        }
    }
}

/// Peak live bytes of one device, as the generator tracked it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevicePeak {
    /// Device name (`cpu`, `cuda:0` ...).
    pub device: String,
    /// Largest live total on the device after any memory event.
    pub peak_bytes: u64,
    /// Live bytes after the last memory event (0: every alloc is freed).
    pub final_live_bytes: u64,
    /// `alloc` lines on the device.
    pub alloc_count: u64,
    /// `free` lines on the device.
    pub free_count: u64,
}

/// Exact counts of what a generator wrote, kept by the generator itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GenStats {
    /// Bytes written, `\n`s included.
    pub bytes: u64,
    /// Lines written (all non-blank).
    pub lines: u64,
    /// `span_start` lines (all ids are distinct).
    pub spans: u64,
    /// Spans without `parent_id`.
    pub root_spans: u64,
    /// Spans with `span_kind: op`.
    pub op_spans: u64,
    /// `op` lines.
    pub ops: u64,
    /// `tensor` lines.
    pub tensors: u64,
    /// `memory` lines with action `alloc`.
    pub allocs: u64,
    /// `memory` lines with action `free`.
    pub frees: u64,
    /// `device_memory` lines.
    pub device_memory: u64,
    /// `gradient` lines.
    pub gradients: u64,
    /// `edge` lines.
    pub edges: u64,
    /// Training steps (`step.N` spans) written.
    pub steps: u64,
    /// Deepest span: a root has depth 0.
    pub max_depth: u64,
    /// Sum of the durations of measured spans.
    pub total_ns: u64,
    /// Per-device memory numbers, in device order (devices without memory events included).
    pub device_peaks: Vec<DevicePeak>,
}

impl GenStats {
    /// Largest per-device peak (the summary's `peak_bytes`).
    pub fn peak_bytes(&self) -> u64 {
        self.device_peaks
            .iter()
            .map(|d| d.peak_bytes)
            .max()
            .unwrap_or(0)
    }
}

/// SplitMix64: tiny, fast, good enough for choosing shapes and durations.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi` (slightly biased; irrelevant here).
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// True with probability `percent`/100.
    fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }
}

/// A live allocation the generator must free later.
#[derive(Debug, Clone)]
struct Alloc {
    tensor_id: String,
    device: usize,
    bytes: u64,
    shape: Vec<u64>,
    dtype: &'static str,
    category: TensorCategory,
    op_name: Option<String>,
}

#[derive(Debug)]
struct OpenSpan {
    id: CompactString,
    start_ns: u64,
    measured: bool,
}

/// The fields of one `op` line the callers choose (span and timestamp come from the generator).
struct OpLine<'a> {
    op_name: &'a str,
    inputs: &'a [&'a str],
    output: Option<&'a str>,
    shape: &'a [u64],
    dtype: &'a str,
    device: usize,
    duration_ns: u64,
}

/// One weight of the model.
#[derive(Debug, Clone)]
struct Param {
    name: String,
    shape: Vec<u64>,
    alloc: Alloc,
}

// Model dimensions: a small Llama-like block.
const BATCH: u64 = 4;
const SEQ: u64 = 512;
const HIDDEN: u64 = 1024;
const HEADS: u64 = 16;
const INTERMEDIATE: u64 = 2816;
const VOCAB: u64 = 32_000;

/// Streams events and keeps the books.
struct Gen<'w, W: Write> {
    out: &'w mut W,
    rng: SplitMix64,
    now: u64,
    stack: Vec<OpenSpan>,
    next_span: u64,
    next_tensor: u64,
    pass: Option<Pass>,
    stats: GenStats,
    devices: Vec<String>,
    live: Vec<u64>,
}

impl<'w, W: Write> Gen<'w, W> {
    fn new(out: &'w mut W, seed: u64, devices: usize) -> Self {
        let devices: Vec<String> = (0..devices.max(1))
            .map(|i| {
                if i == 0 {
                    String::from("cpu")
                } else {
                    format!("cuda:{}", i - 1)
                }
            })
            .collect();
        let stats = GenStats {
            device_peaks: devices
                .iter()
                .map(|d| DevicePeak {
                    device: d.clone(),
                    peak_bytes: 0,
                    final_live_bytes: 0,
                    alloc_count: 0,
                    free_count: 0,
                })
                .collect(),
            ..GenStats::default()
        };
        Gen {
            out,
            rng: SplitMix64(seed),
            now: 0,
            stack: Vec::new(),
            next_span: 0,
            next_tensor: 0,
            pass: None,
            live: vec![0; devices.len()],
            devices,
            stats,
        }
    }

    fn finish(mut self) -> GenStats {
        for (peak, live) in self.stats.device_peaks.iter_mut().zip(&self.live) {
            peak.final_live_bytes = *live;
        }
        self.stats
    }

    /// Write one line and count it.
    fn emit(&mut self, event: &TraceEvent) -> io::Result<()> {
        let line = event.to_json_line();
        self.out.write_all(line.as_bytes())?;
        self.out.write_all(b"\n")?;
        let s = &mut self.stats;
        s.lines += 1;
        s.bytes += line.len() as u64 + 1;
        match event {
            TraceEvent::Meta(_) | TraceEvent::SpanEnd(_) | TraceEvent::CaptureSources(_) => {}
            TraceEvent::SpanStart(start) => {
                s.spans += 1;
                s.root_spans += u64::from(start.parent_id.is_none());
                s.op_spans += u64::from(start.span_kind == SpanKind::Op);
            }
            TraceEvent::Op(_) => s.ops += 1,
            TraceEvent::Tensor(_) => s.tensors += 1,
            TraceEvent::Memory(m) => match m.action {
                MemoryAction::Alloc => s.allocs += 1,
                MemoryAction::Free => s.frees += 1,
            },
            TraceEvent::DeviceMemory(_) => s.device_memory += 1,
            TraceEvent::Gradient(_) => s.gradients += 1,
            TraceEvent::Edge(_) => s.edges += 1,
        }
        Ok(())
    }

    fn tick(&mut self, ns: u64) {
        self.now += ns.max(1);
    }

    fn current_span(&self) -> CompactString {
        self.stack.last().map(|s| s.id.clone()).unwrap_or_default()
    }

    fn meta(&mut self, layers: usize) -> io::Result<()> {
        let mut tags = BTreeMap::new();
        tags.insert(String::from("batch_size"), BATCH.to_string());
        tags.insert(String::from("seq_len"), SEQ.to_string());
        tags.insert(String::from("layers"), layers.to_string());
        tags.insert(
            String::from("generator"),
            String::from("candle-trace-tests::generate"),
        );
        let device = self.devices.last().cloned().unwrap_or_default();
        self.emit(&TraceEvent::Meta(Meta {
            schema: String::from(TRACE_SCHEMA),
            run_id: format!("gen-{:016x}", self.rng.0),
            correlation_id: format!("corr-{:08x}", self.rng.0 & 0xffff_ffff),
            entrypoint: String::from("train::step"),
            phase: Phase::Train,
            timestamp: String::from("2026-01-01T00:00:00Z"),
            capture_step: 2,
            warmup_steps: 1,
            device,
            measured_region_device_synchronized: true,
            timing_mode: TimingMode::Host,
            tags,
            candle_version: Some(String::from("0.9.1")),
        }))
    }

    /// Open a span under the current one; returns its id.
    fn open(&mut self, name: &str, span_kind: SpanKind, measured: bool) -> io::Result<String> {
        let id = format!("s{}", self.next_span);
        self.next_span += 1;
        let depth = self.stack.len() as u64;
        self.stats.max_depth = self.stats.max_depth.max(depth);
        let gap = self.rng.range(1, 40);
        self.tick(gap);
        let start_ns = self.now;
        let parent_id = self.stack.last().map(|s| s.id.clone());
        self.emit(&TraceEvent::SpanStart(SpanStart {
            id: id.clone().into(),
            parent_id,
            name: name.into(),
            start_ns,
            span_kind,
            measured,
            pass: self.pass,
            module: None,
        }))?;
        self.stack.push(OpenSpan {
            id: id.clone().into(),
            start_ns,
            measured,
        });
        Ok(id)
    }

    /// Close the innermost open span.
    fn close(&mut self) -> io::Result<()> {
        let gap = self.rng.range(1, 40);
        self.tick(gap);
        let Some(span) = self.stack.pop() else {
            return Ok(());
        };
        let duration_ns = self.now - span.start_ns;
        if span.measured {
            self.stats.total_ns += duration_ns;
        }
        self.emit(&TraceEvent::SpanEnd(SpanEnd {
            id: span.id,
            duration_ns,
        }))
    }

    fn new_tensor_id(&mut self) -> String {
        let id = format!("t{}", self.next_tensor);
        self.next_tensor += 1;
        id
    }

    /// `storage_bytes` written on about half the lines (readers derive it otherwise).
    fn maybe_storage(&mut self, shape: &[u64], dtype: &str) -> Option<u64> {
        self.rng
            .chance(50)
            .then(|| derived_storage_bytes(shape, dtype))
    }

    fn alloc(
        &mut self,
        device: usize,
        shape: Vec<u64>,
        dtype: &'static str,
        category: TensorCategory,
        op_name: Option<&str>,
    ) -> io::Result<Alloc> {
        let a = Alloc {
            tensor_id: self.new_tensor_id(),
            device,
            bytes: derived_storage_bytes(&shape, dtype),
            shape,
            dtype,
            category,
            op_name: op_name.map(String::from),
        };
        self.memory(&a, MemoryAction::Alloc)?;
        Ok(a)
    }

    fn free(&mut self, a: &Alloc) -> io::Result<()> {
        self.memory(a, MemoryAction::Free)
    }

    fn memory(&mut self, a: &Alloc, action: MemoryAction) -> io::Result<()> {
        let d = a.device;
        let peak = &mut self.stats.device_peaks[d];
        match action {
            MemoryAction::Alloc => {
                self.live[d] += a.bytes;
                peak.peak_bytes = peak.peak_bytes.max(self.live[d]);
                peak.alloc_count += 1;
            }
            MemoryAction::Free => {
                self.live[d] -= a.bytes;
                peak.free_count += 1;
            }
        }
        let event = TraceEvent::Memory(MemoryEvent {
            timestamp_ns: self.now,
            tensor_id: a.tensor_id.clone().into(),
            span_id: self.current_span(),
            op_name: a.op_name.as_deref().map(Into::into),
            device: self.devices[d].clone().into(),
            bytes: a.bytes,
            action,
            shape: a.shape.clone(),
            dtype: a.dtype.into(),
            category: a.category,
        });
        self.emit(&event)?;
        // Strictly increasing memory timestamps: replay order is file order.
        self.tick(1);
        Ok(())
    }

    /// An `op` line in the current span.
    fn op(&mut self, line: OpLine<'_>) -> io::Result<()> {
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

    fn tensor(
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
    fn op_span(
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
    fn composite_softmax(
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

    /// A linear module (optionally through a LoRA adapter) applied to `input`.
    fn linear(
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

    fn rms_norm(
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

    fn attention(
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

    fn mlp(
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

    /// One `step.N` span: forward, backward, optimizer.
    fn train_step(&mut self, n: u64, model: &mut Model, cfg: &GenConfig) -> io::Result<()> {
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

/// The model's weights and optimizer state.
struct Model {
    embed: Param,
    /// Per layer: q, k, v, o, gate, up, down.
    params: Vec<Param>,
    lm_head: Param,
    /// Host-side buffers (rotary frequencies).
    host_buffers: Vec<Alloc>,
    /// AdamW moments (device) and the scheduler state (host), allocated on the first step.
    optimizer_state: Vec<Alloc>,
}

impl Model {
    const PER_LAYER: usize = 7;

    fn layer(&self, i: usize) -> (&[Param], &[Param]) {
        let p = &self.params[i * Self::PER_LAYER..(i + 1) * Self::PER_LAYER];
        (&p[..4], &p[4..])
    }
}

fn load_model<W: Write>(g: &mut Gen<'_, W>, layers: usize) -> io::Result<Model> {
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

/// Stream a training trace of about `cfg.target_bytes` bytes to `out`.
///
/// Lines are written one at a time with [`Write::write_all`]; wrap a file in a
/// [`std::io::BufWriter`]. Returns the generator's own counts, or the first write error.
pub fn write_trace(cfg: &GenConfig, out: &mut impl Write) -> io::Result<GenStats> {
    let layers = cfg.layers.max(1);
    let mut g = Gen::new(out, cfg.seed, cfg.devices);
    g.meta(layers)?;
    g.open("train_step", SpanKind::Function, true)?;
    let mut model = load_model(&mut g, layers)?;
    let mut n = 0;
    loop {
        g.train_step(n, &mut model, cfg)?;
        n += 1;
        if g.stats.bytes >= cfg.target_bytes {
            break;
        }
    }
    // Gradient facts for every parameter, then release everything still live.
    g.open("report_gradients", SpanKind::Function, false)?;
    let all: Vec<Param> = std::iter::once(model.embed.clone())
        .chain(model.params.iter().cloned())
        .chain(std::iter::once(model.lm_head.clone()))
        .collect();
    for (i, p) in all.iter().enumerate() {
        let roll = g.rng.range(0, 99);
        let (state, norm) = match roll {
            0..=1 => (GradientState::Missing, None),
            2 => (GradientState::Zero, Some(0.0)),
            3 => (GradientState::NonFinite, None),
            _ => (
                GradientState::Present,
                Some(g.rng.range(1, 1_000_000) as f64 / 1e4),
            ),
        };
        g.emit(&TraceEvent::Gradient(Gradient {
            event_id: format!("g{i}"),
            root: String::from("varmap"),
            key: p.name.clone(),
            state,
            norm,
            storage_bytes: None,
        }))?;
    }
    g.close()?;
    g.open("teardown", SpanKind::Function, false)?;
    for a in model.optimizer_state.iter().rev() {
        g.free(a)?;
    }
    for p in all.iter().rev() {
        g.free(&p.alloc)?;
    }
    for a in &model.host_buffers {
        g.free(a)?;
    }
    g.close()?;
    g.close()?; // train_step
    Ok(g.finish())
}

/// The trace of [`write_trace`] as one buffer.
pub fn trace_bytes(cfg: &GenConfig) -> Vec<u8> {
    let mut out = Vec::with_capacity(usize::try_from(cfg.target_bytes).unwrap_or(0) + (64 << 10));
    // Writing to a Vec<u8> never fails.
    let _ = write_trace(cfg, &mut out);
    out
}

/// A meta line for the synthetic span-only traces.
fn simple_meta<W: Write>(g: &mut Gen<'_, W>) -> io::Result<()> {
    g.meta(1)
}

/// Write `depth` op-kind spans, each the only child of the one before (the first is the
/// measured root): all open first, then all closed, innermost first. `max_depth` is
/// `depth - 1`. Span `i` starts at `i` ns and lasts `2 × (depth − i)` ns.
pub fn write_deep_chain(depth: u64, out: &mut impl Write) -> io::Result<GenStats> {
    let mut g = Gen::new(out, 0, 1);
    simple_meta(&mut g)?;
    for i in 0..depth {
        let start = SpanStart {
            id: format!("s{i}").into(),
            parent_id: i.checked_sub(1).map(|p| format!("s{p}").into()),
            name: "op".into(),
            start_ns: i,
            span_kind: SpanKind::Op,
            measured: i == 0,
            pass: None,
            module: None,
        };
        g.emit(&TraceEvent::SpanStart(start))?;
        g.stats.max_depth = i;
    }
    for i in (0..depth).rev() {
        let duration_ns = 2 * (depth - i);
        if i == 0 {
            g.stats.total_ns = duration_ns;
        }
        g.emit(&TraceEvent::SpanEnd(SpanEnd {
            id: format!("s{i}").into(),
            duration_ns,
        }))?;
    }
    Ok(g.finish())
}

/// Write `spans` op-kind spans: a measured root followed by `spans − 1` direct children, each
/// closed right after it opens (child `i` starts at `2i − 1` ns and lasts 1 ns). `max_depth` is
/// 1 (0 for a single span).
pub fn write_wide(spans: u64, out: &mut impl Write) -> io::Result<GenStats> {
    let mut g = Gen::new(out, 0, 1);
    simple_meta(&mut g)?;
    if spans == 0 {
        return Ok(g.finish());
    }
    g.emit(&TraceEvent::SpanStart(SpanStart {
        id: "s0".into(),
        parent_id: None,
        name: "wide".into(),
        start_ns: 0,
        span_kind: SpanKind::Op,
        measured: true,
        pass: None,
        module: None,
    }))?;
    for i in 1..spans {
        g.emit(&TraceEvent::SpanStart(SpanStart {
            id: format!("s{i}").into(),
            parent_id: Some("s0".into()),
            name: "op".into(),
            start_ns: 2 * i - 1,
            span_kind: SpanKind::Op,
            measured: false,
            pass: None,
            module: None,
        }))?;
        g.emit(&TraceEvent::SpanEnd(SpanEnd {
            id: format!("s{i}").into(),
            duration_ns: 1,
        }))?;
        g.stats.max_depth = 1;
    }
    let duration_ns = 2 * spans;
    g.stats.total_ns = duration_ns;
    g.emit(&TraceEvent::SpanEnd(SpanEnd {
        id: "s0".into(),
        duration_ns,
    }))?;
    Ok(g.finish())
}

/// A trace of exactly `spans` spans shaped like a long flat profile: one measured root and
/// blocks of a `module` span with 99 `op` children (7 distinct op names), the first third of
/// the blocks in the forward step, then backward, then optimizer. It is what the browser
/// benchmarks and the large-trace browser test pan across (the same shape as
/// `tests/e2e/viewer.test.mjs`'s `writeBigTrace`).
pub fn write_blocks(spans: u64, out: &mut impl Write) -> io::Result<GenStats> {
    let mut g = Gen::new(out, 0, 1);
    simple_meta(&mut g)?;
    if spans == 0 {
        return Ok(g.finish());
    }
    g.emit(&TraceEvent::SpanStart(SpanStart {
        id: "r".into(),
        parent_id: None,
        name: "step".into(),
        start_ns: 0,
        span_kind: SpanKind::Function,
        measured: true,
        pass: None,
        module: None,
    }))?;
    let blocks = (spans - 1).div_ceil(100);
    let (mut made, mut t) = (1u64, 0u64);
    for b in 0..blocks {
        let pass = [Pass::Forward, Pass::Backward, Pass::Optimizer][(b * 3 / blocks) as usize];
        let block_start = t;
        g.emit(&TraceEvent::SpanStart(SpanStart {
            id: format!("b{b}").into(),
            parent_id: Some("r".into()),
            name: format!("block_{b}").into(),
            start_ns: block_start,
            span_kind: SpanKind::Module,
            measured: false,
            pass: Some(pass),
            module: None,
        }))?;
        made += 1;
        g.stats.max_depth = g.stats.max_depth.max(1);
        let mut i = 0;
        while i < 99 && made < spans {
            g.emit(&TraceEvent::SpanStart(SpanStart {
                id: format!("b{b}o{i}").into(),
                parent_id: Some(format!("b{b}").into()),
                name: format!("op_{}", i % 7).into(),
                start_ns: t,
                span_kind: SpanKind::Op,
                measured: false,
                pass: Some(pass),
                module: None,
            }))?;
            g.emit(&TraceEvent::SpanEnd(SpanEnd {
                id: format!("b{b}o{i}").into(),
                duration_ns: 80 + (i % 5) * 10,
            }))?;
            g.stats.max_depth = 2;
            t += 150;
            i += 1;
            made += 1;
        }
        g.emit(&TraceEvent::SpanEnd(SpanEnd {
            id: format!("b{b}").into(),
            duration_ns: t - block_start + 50,
        }))?;
        t += 100;
    }
    g.stats.total_ns = t + 10;
    g.emit(&TraceEvent::SpanEnd(SpanEnd {
        id: "r".into(),
        duration_ns: t + 10,
    }))?;
    Ok(g.finish())
}

/// The ops of each block of [`write_memory_heavy`]: name, output shape, dtype.
const HEAVY_OPS: [(&str, &[u64], &str); 6] = [
    ("matmul", &[BATCH, SEQ, HIDDEN], "bf16"),
    ("add", &[BATCH, SEQ, HIDDEN], "bf16"),
    ("silu", &[BATCH, SEQ, INTERMEDIATE], "bf16"),
    ("mul", &[BATCH, SEQ, INTERMEDIATE], "bf16"),
    ("softmax", &[BATCH, HEADS, SEQ, SEQ], "f32"),
    ("to_dtype", &[BATCH, SEQ, HIDDEN], "f32"),
];

/// A trace of about `target_bytes` whose mix is memory- and op-heavy, unlike
/// [`write_trace`]'s: per block, one `module` span (2 span lines) holding 6 ops, each
/// allocating its output, and the 6 frees of the block before (12 memory lines): the 4 800
/// span, 14 400 op and 28 800 memory lines per 10 MB of issue #40's held-out files, in
/// proportion. One device (`cuda:0`), a measured root; every allocation is freed by the end.
pub fn write_memory_heavy(target_bytes: u64, out: &mut impl Write) -> io::Result<GenStats> {
    let mut g = Gen::new(out, 0x4ea7, 2);
    g.meta(1)?;
    g.pass = Some(Pass::Forward);
    g.open("train_step", SpanKind::Function, true)?;
    let mut held: Vec<Alloc> = Vec::new();
    let mut block = 0u64;
    while g.stats.bytes < target_bytes {
        g.open(&format!("layers.{}", block % 32), SpanKind::Module, false)?;
        let mut made = Vec::with_capacity(HEAVY_OPS.len());
        for (i, (name, shape, dtype)) in HEAVY_OPS.iter().enumerate() {
            // The output is allocated while the op runs; its line follows.
            let output = g.alloc(
                1,
                shape.to_vec(),
                dtype,
                TensorCategory::Activation,
                Some(name),
            )?;
            let input = held.get(i).map(|a| a.tensor_id.as_str());
            let duration_ns = g.rng.range(2_000, 90_000);
            g.op(OpLine {
                op_name: name,
                inputs: input.as_slice(),
                output: Some(&output.tensor_id),
                shape,
                dtype,
                device: 1,
                duration_ns,
            })?;
            made.push(output);
        }
        for a in held.drain(..) {
            g.free(&a)?;
        }
        held = made;
        g.close()?;
        block += 1;
    }
    for a in held.drain(..) {
        g.free(&a)?;
    }
    g.close()?;
    Ok(g.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_trace_schema::format::document::{TraceDocument, TraceReader};

    fn read_chunked(bytes: &[u8], chunk: usize) -> TraceDocument {
        let mut reader = TraceReader::new();
        for c in bytes.chunks(chunk) {
            reader.push(c);
        }
        reader.finish()
    }

    #[test]
    fn blocks_have_exactly_the_spans_asked_for() {
        for spans in [1u64, 2, 100, 101, 250] {
            let mut out = Vec::new();
            let stats = write_blocks(spans, &mut out).unwrap();
            let doc = read_chunked(&out, 37);
            let summary = doc.summary();
            assert_eq!(summary.span_count, spans, "{spans}");
            assert_eq!(stats.spans, spans, "{spans}");
            assert_eq!(summary.total_ns, stats.total_ns, "{spans}");
            assert_eq!(summary.max_depth, stats.max_depth, "{spans}");
            assert!(doc.diagnostics.is_empty(), "{spans}: {:?}", doc.diagnostics);
        }
    }

    #[test]
    fn summary_matches_generator_counts() {
        let cfg = GenConfig::with_target_bytes(2 << 20);
        let mut bytes = Vec::new();
        let stats = write_trace(&cfg, &mut bytes).unwrap();
        assert_eq!(stats.bytes, bytes.len() as u64);
        assert!(bytes.len() as u64 >= cfg.target_bytes);
        assert!(bytes.len() < 3 << 20, "{} bytes", bytes.len());
        assert_eq!(
            stats.lines,
            bytes.iter().filter(|&&b| b == b'\n').count() as u64
        );

        let doc = read_chunked(&bytes, 64 << 10);
        assert!(
            doc.diagnostics.is_empty(),
            "{:?}",
            &doc.diagnostics[..5.min(doc.diagnostics.len())]
        );
        let s = doc.summary();
        assert_eq!(s.op_count, stats.ops);
        assert_eq!(s.span_count, stats.spans);
        assert_eq!(s.root_span_count, stats.root_spans);
        assert_eq!(s.root_span_count, 1);
        assert_eq!(s.max_depth, stats.max_depth);
        assert_eq!(s.alloc_count, stats.allocs);
        assert_eq!(s.free_count, stats.frees);
        assert_eq!(s.total_ns, stats.total_ns);
        assert_eq!(s.peak_bytes, stats.peak_bytes());

        // The rest of the document agrees too.
        assert_eq!(doc.tensors.len() as u64, stats.tensors);
        assert_eq!(doc.device_memory.len() as u64, stats.device_memory);
        assert_eq!(doc.gradients.len() as u64, stats.gradients);
        assert_eq!(doc.edges.len() as u64, stats.edges);
        let op_spans = doc
            .spans
            .iter()
            .filter(|s| s.span_kind == SpanKind::Op)
            .count() as u64;
        assert_eq!(op_spans, stats.op_spans);
        assert_eq!(doc.spans.iter().filter(|s| s.measured).count(), 1);
        assert_eq!(doc.spans[0].name, "train_step");
        for peak in &stats.device_peaks {
            let d = doc.memory_profile.device(&peak.device).unwrap();
            assert_eq!(d.peak_bytes, peak.peak_bytes, "{}", peak.device);
            assert_eq!(d.final_live_bytes, 0, "{}", peak.device);
            assert_eq!(peak.final_live_bytes, 0);
            assert_eq!(
                (d.alloc_count, d.free_count),
                (peak.alloc_count, peak.free_count)
            );
            assert!(peak.alloc_count > 0, "{}", peak.device);
        }
        assert_eq!(stats.allocs, stats.frees);
    }

    #[test]
    fn content_is_realistic() {
        let cfg = GenConfig::with_target_bytes(1 << 20);
        let doc = TraceDocument::from_bytes(&trace_bytes(&cfg));
        let stats = {
            let mut sink = io::sink();
            write_trace(&cfg, &mut sink).unwrap()
        };
        assert!(stats.steps >= 3, "{stats:?}");
        assert!((6..=10).contains(&stats.max_depth), "{}", stats.max_depth);
        assert!(stats.ops > stats.op_spans / 2);
        assert!(stats.edges >= 1 && stats.gradients > 0 && stats.tensors > 0);
        // Every category and both dtypes appear; storage_bytes is sometimes present, sometimes not.
        for c in TensorCategory::ALL {
            assert!(doc.memory.iter().any(|m| m.category == c), "{c:?}");
        }
        for dt in ["f32", "bf16"] {
            assert!(doc.ops.iter().any(|o| o.dtype == dt), "{dt}");
        }
        assert!(doc.ops.iter().any(|o| o.storage_bytes.is_some()));
        assert!(doc.ops.iter().any(|o| o.storage_bytes.is_none()));
        for pass in [Pass::Forward, Pass::Backward, Pass::Optimizer] {
            assert!(doc.spans.iter().any(|s| s.pass == Some(pass)), "{pass:?}");
        }
        // Children lie inside their parents.
        for (i, s) in doc.spans.iter().enumerate() {
            if let Some(p) = doc.tree.parent[i] {
                let p = &doc.spans[p as usize];
                assert!(
                    s.start_ns >= p.start_ns && s.end_ns() <= p.end_ns(),
                    "{}",
                    s.id
                );
            }
        }
        // Ops lie inside their spans.
        for o in &doc.ops {
            let s = doc.span(o.span_id).unwrap();
            assert!(o.timestamp_ns >= s.start_ns);
            assert!(
                o.timestamp_ns + o.duration_ns <= s.end_ns(),
                "line {}",
                o.line
            );
        }
    }

    #[test]
    fn memory_heavy_has_the_held_out_mix() {
        let mut bytes = Vec::new();
        let stats = write_memory_heavy(2_000_000, &mut bytes).unwrap();
        // Per block: 1 span, 6 ops, 6 allocs and 6 frees; the root adds one span.
        let blocks = stats.spans - 1;
        assert_eq!(stats.ops, 6 * blocks);
        assert_eq!((stats.allocs, stats.frees), (6 * blocks, 6 * blocks));
        let doc = read_chunked(&bytes, 1 << 16);
        assert!(
            doc.diagnostics.is_empty(),
            "{:?}",
            &doc.diagnostics[..3.min(doc.diagnostics.len())]
        );
        let summary = doc.summary();
        assert_eq!(summary.op_count, stats.ops);
        assert_eq!(summary.span_count, stats.spans);
        assert_eq!(summary.total_ns, stats.total_ns);
        assert_eq!(summary.peak_bytes, stats.peak_bytes());
        assert_eq!(stats.device_peaks[1].final_live_bytes, 0);
        // About the issue's lines per 10 MB (4 800 span, 14 400 op, 28 800 memory).
        let per_10mb = |n: u64| n as f64 * 1e7 / stats.bytes as f64;
        let span_lines = per_10mb(2 * stats.spans);
        assert!((3_500.0..6_000.0).contains(&span_lines), "{span_lines}");
        assert!((10_500.0..18_000.0).contains(&per_10mb(stats.ops)));
    }

    #[test]
    fn same_seed_same_bytes() {
        let cfg = GenConfig::with_target_bytes(256 << 10);
        assert_eq!(trace_bytes(&cfg), trace_bytes(&cfg));
        let other = GenConfig {
            seed: cfg.seed + 1,
            ..cfg.clone()
        };
        assert_ne!(trace_bytes(&cfg), trace_bytes(&other));
    }

    #[test]
    fn one_device_and_one_layer() {
        let cfg = GenConfig {
            target_bytes: 64 << 10,
            devices: 1,
            layers: 1,
            ..GenConfig::default()
        };
        let mut bytes = Vec::new();
        let stats = write_trace(&cfg, &mut bytes).unwrap();
        let doc = TraceDocument::from_bytes(&bytes);
        assert!(doc.diagnostics.is_empty());
        assert_eq!(stats.device_peaks.len(), 1);
        assert_eq!(doc.summary().peak_bytes, stats.peak_bytes());
        assert!(doc.memory.iter().all(|m| m.device == "cpu"));
    }

    #[test]
    fn deep_chain_and_wide() {
        let mut bytes = Vec::new();
        let stats = write_deep_chain(10_000, &mut bytes).unwrap();
        let doc = read_chunked(&bytes, 64 << 10);
        assert!(doc.diagnostics.is_empty());
        let s = doc.summary();
        assert_eq!(
            (s.span_count, s.max_depth, s.root_span_count),
            (10_000, 9_999, 1)
        );
        assert_eq!((stats.spans, stats.max_depth), (10_000, 9_999));
        assert_eq!(s.total_ns, stats.total_ns);
        assert_eq!(stats.bytes, bytes.len() as u64);

        let mut bytes = Vec::new();
        let stats = write_wide(10_000, &mut bytes).unwrap();
        let doc = read_chunked(&bytes, 64 << 10);
        assert!(doc.diagnostics.is_empty());
        let s = doc.summary();
        assert_eq!(
            (s.span_count, s.max_depth, s.root_span_count),
            (10_000, 1, 1)
        );
        assert_eq!(
            (stats.spans, stats.max_depth, stats.op_spans),
            (10_000, 1, 10_000)
        );
        assert_eq!(s.total_ns, stats.total_ns);
        assert_eq!(doc.tree.self_ns[0], 20_000 - 9_999);
    }

    #[test]
    #[ignore = "1M spans each way: run with --ignored (about 45 s unoptimized)"]
    fn a_million_spans() {
        let mut bytes = Vec::new();
        let stats = write_wide(1_000_000, &mut bytes).unwrap();
        let s = read_chunked(&bytes, 1 << 20).summary();
        assert_eq!((s.span_count, s.total_ns), (stats.spans, stats.total_ns));
        let mut bytes = Vec::new();
        let stats = write_deep_chain(1_000_000, &mut bytes).unwrap();
        let s = read_chunked(&bytes, 1 << 20).summary();
        assert_eq!((s.span_count, s.max_depth), (stats.spans, stats.max_depth));
    }
}
