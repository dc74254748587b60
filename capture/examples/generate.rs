//! Serve a few requests with a tiny autoregressive candle model and write an inference profile
//! (SCHEMA.md §2) with an [`InferenceProfiler`] at detail `latency`, sample rate 1.0.
//!
//! ```sh
//! cargo run --release -p candle-trace-capture --features candle --example generate -- --out infer.profile.jsonl
//! cargo trace summary infer.profile.jsonl                  # compare with what this example prints
//! cargo trace query infer.profile.jsonl --kind requests
//! ```
//!
//! The model is a one-layer recurrent language model over a small vocabulary: an embedding,
//! `h' = tanh(e·W_x + h·W_h + b)` and `logits = h'·W_o`, with weights drawn from a fixed seed
//! (no downloads), decoded greedily. Requests are served one after the other; each one is
//! - opened (`request_open`, with its prompt length and token budget as the event `shape`),
//! - prefilled: the whole prompt runs through the model, timed with the example's own
//!   `Instant`s and written as the `prefill` timed span; the prefill's logits give the first
//!   output token, committed at once (`record_token_commit`),
//! - given a host memory snapshot (from the tracking allocator) after prefill,
//! - decoded one token per decode wave (`decode_wave`), each token committed when chosen,
//! - closed (`request_close`), which writes the TTFT/ITL attributes the profiler derives.
//!
//! One request asks for more tokens than the model's context holds: it is refused before
//! prefill with an `error` event and closed as failed (`request_fail`).
//!
//! The example counts what it asked the profiler to write (requests, events, tokens per
//! request) and brackets every timing call with its own `Instant`s, so it can print its own
//! TTFT and ITL (the midpoints of the brackets) and `tests/examples.rs` can check that the
//! profile's numbers fall inside the brackets.

use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{DType, Device, Tensor, D};
use candle_trace_capture::alloc;
use candle_trace_capture::candle::device_name;
use candle_trace_capture::{InferenceProfiler, ProfileReport, RequestHandle};
use candle_trace_schema::profile::{
    DetailLevel, Entrypoint, JsonMap, MemorySnapshot, ProfilingConfig,
};
use serde_json::Value;

// Counts live and peak host bytes for the memory snapshots. Left out when a test includes this
// file as a module: the test binary installs its own.
#[cfg(not(test))]
#[global_allocator]
static ALLOC: alloc::TrackingAllocator = alloc::TrackingAllocator::system();

const VOCAB: usize = 512;
const EMBED: usize = 64;
const HIDDEN: usize = 256;
/// Prompt plus output tokens a request may use.
const MAX_CONTEXT: usize = 64;
const SEED: u64 = 0x5eed_cafe;

/// (request id, prompt length, output tokens): the last one exceeds [`MAX_CONTEXT`].
const REQUESTS: [(&str, usize, usize); 4] = [
    ("req-1", 5, 8),
    ("req-2", 17, 4),
    ("req-3", 2, 12),
    ("req-4-too-long", 40, 40),
];

/// What the example asked the profiler to write for one request, and its own timings.
#[derive(Debug, Clone)]
pub struct RequestCount {
    /// The request id.
    pub request_id: String,
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// Output tokens committed (`record_token_commit` calls).
    pub tokens: u64,
    /// Events the calls write: open, prefill, memory, one per decode wave, error, close.
    pub events: u64,
    /// True for the request refused with an error.
    pub failed: bool,
    /// `Instant`s just before and just after `request_open` (the profiler's clock starts
    /// between them).
    pub opened: (Instant, Instant),
    /// `Instant`s just before and just after each `record_token_commit`.
    pub commits: Vec<(Instant, Instant)>,
    /// The generated token ids.
    pub output: Vec<u32>,
}

fn ns(later: Instant, earlier: Instant) -> u64 {
    u64::try_from(later.saturating_duration_since(earlier).as_nanos()).unwrap_or(u64::MAX)
}

impl RequestCount {
    /// Bounds on the profiler's first commit time since request start, ns: `(lo, hi)`.
    pub fn ttft_ns_bounds(&self) -> Option<(u64, u64)> {
        let (before, after) = *self.commits.first()?;
        Some((ns(before, self.opened.1), ns(after, self.opened.0)))
    }

    /// Bounds on each inter-token latency, ns.
    pub fn itl_ns_bounds(&self) -> Vec<(u64, u64)> {
        self.commits
            .windows(2)
            .map(|w| (ns(w[1].0, w[0].1), ns(w[1].1, w[0].0)))
            .collect()
    }

    /// The example's own TTFT, µs (midpoint of its bracket).
    pub fn ttft_us(&self) -> Option<u64> {
        self.ttft_ns_bounds()
            .map(|(lo, hi)| (lo / 2 + hi / 2) / 1000)
    }

    /// The example's own mean ITL, µs (midpoints of its brackets); `None` with one token.
    pub fn itl_us_avg(&self) -> Option<u64> {
        let itl = self.itl_ns_bounds();
        let n = itl.len() as u64;
        let sum: u64 = itl.iter().map(|(lo, hi)| lo / 2 + hi / 2).sum();
        (n > 0).then(|| sum / n / 1000)
    }
}

/// What [`run`] returns.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// One entry per request, in serving order.
    pub requests: Vec<RequestCount>,
    /// What `InferenceProfiler::finish` reported.
    pub report: ProfileReport,
}

impl Outcome {
    /// Events the example asked for, over all requests.
    pub fn events(&self) -> u64 {
        self.requests.iter().map(|r| r.events).sum()
    }
}

/// splitmix64: the fixed-seed source of the model's weights.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-scale, scale).
    fn uniform(&mut self, scale: f32) -> f32 {
        let unit = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        (unit * 2.0 - 1.0) * scale
    }

    fn tensor(&mut self, rows: usize, cols: usize, device: &Device) -> candle_core::Result<Tensor> {
        let scale = 1.0 / (rows as f32).sqrt();
        let data: Vec<f32> = (0..rows * cols).map(|_| self.uniform(scale)).collect();
        Tensor::from_vec(data, (rows, cols), device)
    }
}

/// The tiny recurrent language model.
struct TinyLm {
    embed: Tensor,
    w_x: Tensor,
    w_h: Tensor,
    bias: Tensor,
    w_o: Tensor,
}

impl TinyLm {
    fn new(seed: u64, device: &Device) -> candle_core::Result<Self> {
        let mut rng = Rng(seed);
        Ok(TinyLm {
            embed: rng.tensor(VOCAB, EMBED, device)?,
            w_x: rng.tensor(EMBED, HIDDEN, device)?,
            w_h: rng.tensor(HIDDEN, HIDDEN, device)?,
            bias: rng.tensor(1, HIDDEN, device)?,
            w_o: rng.tensor(HIDDEN, VOCAB, device)?,
        })
    }

    fn zero_state(&self) -> candle_core::Result<Tensor> {
        Tensor::zeros((1, HIDDEN), DType::F32, self.w_h.device())
    }

    /// One recurrent step over input projections `x_proj` (1 × HIDDEN): the new state and the
    /// greedy next token.
    fn cell(&self, x_proj: &Tensor, h: &Tensor) -> candle_core::Result<(Tensor, u32)> {
        let h = (x_proj + h.matmul(&self.w_h)?)?
            .broadcast_add(&self.bias)?
            .tanh()?;
        let next = h.matmul(&self.w_o)?.argmax(D::Minus1)?.to_vec1::<u32>()?;
        Ok((h, next.first().copied().unwrap_or(0)))
    }

    /// Run the prompt (all its input projections in one matmul, then the recurrence): the
    /// state after it and the first output token.
    fn prefill(&self, prompt: &[u32]) -> candle_core::Result<(Tensor, u32)> {
        let device = self.w_h.device();
        let ids = Tensor::new(prompt, device)?;
        let x_proj = self.embed.index_select(&ids, 0)?.matmul(&self.w_x)?;
        let mut h = self.zero_state()?;
        let mut next = 0;
        for i in 0..prompt.len() {
            (h, next) = self.cell(&x_proj.narrow(0, i, 1)?, &h)?;
        }
        Ok((h, next))
    }

    /// Feed `token`: the new state and the next token.
    fn decode(&self, token: u32, h: &Tensor) -> candle_core::Result<(Tensor, u32)> {
        let x_proj = self.embed.narrow(0, token as usize, 1)?.matmul(&self.w_x)?;
        self.cell(&x_proj, h)
    }
}

/// A prompt of `len` tokens, fixed per request index.
fn prompt(index: usize, len: usize) -> Vec<u32> {
    (0..len)
        .map(|i| ((index * 131 + i * 17 + 3) % VOCAB) as u32)
        .collect()
}

/// FNV-1a over the model configuration: the `runtime_preset_hash`.
fn preset_hash() -> String {
    let config = format!(
        "tiny-gru vocab={VOCAB} embed={EMBED} hidden={HIDDEN} ctx={MAX_CONTEXT} seed={SEED} greedy"
    );
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in config.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("fnv1a64:{h:016x}")
}

/// Commit one token, bracketed by the example's own `Instant`s.
fn commit(request: &RequestHandle, count: &mut RequestCount, token: u32) {
    let before = Instant::now();
    request.record_token_commit();
    let after = Instant::now();
    count.commits.push((before, after));
    count.tokens += 1;
    count.output.push(token);
}

/// Serve one request; returns what was counted.
fn serve(
    profiler: &InferenceProfiler,
    model: &TinyLm,
    index: usize,
    (request_id, prompt_len, max_new): (&str, usize, usize),
) -> candle_core::Result<RequestCount> {
    let mut shape = JsonMap::new();
    shape.insert("batch".into(), Value::from(1));
    shape.insert("prompt_tokens".into(), Value::from(prompt_len));
    shape.insert("max_new_tokens".into(), Value::from(max_new));
    let host_before = alloc::live_bytes();
    let before = Instant::now();
    let request = profiler.request_open(request_id, shape);
    let opened = (before, Instant::now());
    let mut count = RequestCount {
        request_id: request_id.to_string(),
        prompt_tokens: prompt_len,
        tokens: 0,
        events: 1,
        failed: false,
        opened,
        commits: Vec::new(),
        output: Vec::new(),
    };

    if prompt_len + max_new > MAX_CONTEXT {
        let message = format!(
            "prompt of {prompt_len} tokens + {max_new} new tokens exceeds the context of {MAX_CONTEXT}"
        );
        request.error("admission", "context_overflow", &message, true);
        request.request_fail("context_overflow", &message);
        count.events += 2;
        count.failed = true;
        return Ok(count);
    }

    let started = Instant::now();
    let (mut h, mut token) = model.prefill(&prompt(index, prompt_len))?;
    request.prefill(started.elapsed());
    count.events += 1;
    commit(&request, &mut count, token);

    let current = alloc::live_bytes();
    let mut snapshot = MemorySnapshot::new(
        "host",
        host_before,
        current,
        current,
        alloc::peak_bytes().max(current),
    );
    snapshot.backend = Some(device_name(model.w_h.device()));
    snapshot.available_bytes = i64::try_from(alloc::host_available_bytes()).ok();
    request.memory("prefill", snapshot);
    count.events += 1;

    while count.tokens < max_new as u64 {
        let _wave = request.decode_wave();
        (h, token) = model.decode(token, &h)?;
        commit(&request, &mut count, token);
        count.events += 1;
    }
    request.request_close();
    count.events += 1;
    Ok(count)
}

/// Serve [`REQUESTS`] and write the profile to `out`.
pub fn run(out: &Path) -> Result<Outcome, Box<dyn std::error::Error>> {
    let device = Device::Cpu;
    let model = TinyLm::new(SEED, &device)?;
    let config = ProfilingConfig {
        detail: DetailLevel::Latency,
        sample_rate: 1.0,
        outputs: vec![out
            .to_str()
            .ok_or("the output path is not UTF-8")?
            .to_string()],
    };
    let profiler = InferenceProfiler::builder(config)
        .entrypoint(Entrypoint::Serve)
        .backend(device_name(&device))
        .runtime_preset_hash(preset_hash())
        .model(format!("tiny-gru-v{VOCAB}-h{HIDDEN}"))
        .build()?;

    // Warm up outside any request (first-call costs of the matmul kernels and the allocator),
    // as a server does before it takes traffic.
    let (h, token) = model.prefill(&prompt(REQUESTS.len(), 4))?;
    model.decode(token, &h)?;

    let mut requests = Vec::new();
    for (index, spec) in REQUESTS.into_iter().enumerate() {
        requests.push(serve(&profiler, &model, index, spec)?);
    }
    let report = profiler.finish()?;
    Ok(Outcome { requests, report })
}

#[allow(dead_code)] // Unused when a test includes this file as a module.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut out = PathBuf::from("generate.profile.jsonl");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--out" => out = args.next().ok_or("--out needs a path")?.into(),
            "-h" | "--help" => {
                println!("usage: generate [--out PATH]");
                return Ok(());
            }
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    let outcome = run(&out)?;
    let r = &outcome.report;
    println!("wrote {}", out.display());
    println!(
        "profiler: events_written={} events_dropped={} events_invalid={} requests_sampled={} requests_skipped={}",
        r.events_written, r.events_dropped, r.events_invalid, r.requests_sampled, r.requests_skipped
    );
    println!(
        "counted: requests={} events={}",
        outcome.requests.len(),
        outcome.events()
    );
    let show = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    for q in &outcome.requests {
        println!(
            "  {:<15} prompt={:>2} tokens={:>2} events={:>2} ttft_us={:>6} itl_us_avg={:>6}{}",
            q.request_id,
            q.prompt_tokens,
            q.tokens,
            q.events,
            show(q.ttft_us()),
            show(q.itl_us_avg()),
            if q.failed {
                "  failed: context_overflow"
            } else {
                ""
            },
        );
    }
    Ok(())
}
