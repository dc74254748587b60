//! Serve a few requests with the tiny candle-transformers Llama of `train_llama` (random
//! weights, no download) and a KV cache, greedy decoding, and write an inference profile at
//! detail `latency`: per request the prefill, each decode step, the module spans of every
//! forward call, host memory around each call (the counting allocator), token commits (TTFT and
//! inter-token latency), all measured by the library.
//!
//! ```sh
//! cargo run --release -p candle-trace-capture --features candle --example serve_llama -- --out infer.profile.jsonl
//! cargo trace summary infer.profile.jsonl
//! cargo trace query infer.profile.jsonl --kind requests
//! ```
//!
//! One request asks for more tokens than the model's context holds: it is refused before its
//! prefill and closed as failed. The capture code is the lines marked `// capture` (seven, the
//! allocator line included; `name_modules` names each layer's spans after its weights).

use std::path::Path;

use candle_core::{DType, Device, Tensor, D};
use candle_nn::{VarBuilder, VarMap};
use candle_trace_capture::prelude::*;
use candle_transformers::models::llama::{Cache, Llama};

#[path = "common/run.rs"]
#[allow(dead_code)] // the training examples' printing is not used here
mod run;

#[path = "common/llama.rs"]
mod llama;
use llama::config;

// Left out when a test includes this file as a module: the test binary installs its own.
#[cfg(not(test))]
#[global_allocator]
static ALLOC: TrackingAllocator = TrackingAllocator::system(); // capture

/// (request id, prompt tokens, output tokens): the last one exceeds the context.
pub const REQUESTS: [(&str, usize, usize); 4] = [
    ("req-1", 5, 8),
    ("req-2", 17, 4),
    ("req-3", 2, 12),
    ("req-4-too-long", 40, 40),
];

/// What [`run`] returns.
#[derive(Debug)]
pub struct Outcome {
    /// The tokens generated per request (`None`: refused).
    pub outputs: Vec<(String, Option<Vec<u32>>)>,
    /// What the profiler reported.
    pub report: ProfileReport,
}

/// Why a request was refused.
#[derive(Debug)]
enum Refused {
    TooLong(usize),
    Model(candle_core::Error),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::TooLong(n) => write!(f, "{n} tokens exceed the context"),
            Refused::Model(e) => write!(f, "model error: {e}"),
        }
    }
}

impl From<candle_core::Error> for Refused {
    fn from(e: candle_core::Error) -> Self {
        Refused::Model(e)
    }
}

/// Run `tokens` at position `pos` through the model and choose the next token greedily.
fn next_token(
    model: &Llama,
    tokens: &[u32],
    pos: usize,
    cache: &mut Cache,
) -> candle_core::Result<u32> {
    let input = Tensor::new(tokens, &Device::Cpu)?.unsqueeze(0)?;
    let logits = model.forward(&input, pos, cache)?;
    logits.argmax(D::Minus1)?.squeeze(0)?.to_scalar::<u32>()
}

/// Serve [`REQUESTS`] one after the other, writing the profile to `out`.
pub fn run(out: &Path) -> Result<Outcome, Box<dyn std::error::Error>> {
    let out = out.to_str().ok_or("the output path is not UTF-8")?;
    // Before the model is built: candle-transformers creates its spans in `Llama::load`.
    let profiler = InferenceProfiler::latency(out)
        .model("llama-tiny")
        .install()?; // capture
    let cfg = config();
    let varmap = VarMap::new();
    let vb = name_modules(VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu)); // capture
    let model = Llama::load(vb, &cfg)?;
    let mut outputs = Vec::new();
    for (id, prompt_len, wanted) in REQUESTS {
        let prompt: Vec<u32> = (0..prompt_len)
            .map(|i| (11 * i % cfg.vocab_size) as u32)
            .collect();
        let shape = [("prompt_tokens", prompt_len), ("max_new_tokens", wanted)];
        let served = profiler.request(id, shape, |req| -> Result<Vec<u32>, Refused> {
            // capture
            if prompt_len + wanted > cfg.max_position_embeddings {
                return Err(Refused::TooLong(prompt_len + wanted));
            }
            let mut cache = Cache::new(true, DType::F32, &cfg, &Device::Cpu)?;
            let mut token = req.prefill_step(|| next_token(&model, &prompt, 0, &mut cache))?; // capture
            let mut generated = vec![token];
            for pos in prompt_len..prompt_len + wanted - 1 {
                token = req.decode_step(|| next_token(&model, &[token], pos, &mut cache))?; // capture
                generated.push(token);
            }
            Ok(generated)
        });
        outputs.push((id.to_string(), served.ok()));
    }
    let report = profiler.finish()?; // capture
    Ok(Outcome { outputs, report })
}

#[allow(dead_code)] // a test includes this file as a module and calls `run` itself
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = run::out_path("infer.profile.jsonl")?;
    let Outcome { outputs, report } = run(&out)?;
    for (id, tokens) in &outputs {
        match tokens {
            Some(tokens) => println!("{id}: {} tokens {tokens:?}", tokens.len()),
            None => println!("{id}: refused"),
        }
    }
    println!(
        "wrote {} ({} events, {} dropped, {} invalid)",
        out.display(),
        report.events_written,
        report.events_dropped,
        report.events_invalid
    );
    Ok(())
}
