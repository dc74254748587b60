//! Serve requests in batches with the tiny candle-transformers Llama of `train_llama` (random
//! weights, no download): two worker threads, each an engine with a small wave-batching
//! scheduler and a KV-cache budget, writing an inference profile at detail `latency` — every
//! batched forward once with its composition and module spans, each request's queueing,
//! prefill, decode and token commits (TTFT, inter-token latency) on one time axis, and the
//! KV-cache blocks reserved, deferred, rejected and released.
//!
//! ```sh
//! cargo run --release -p candle-trace-capture --features candle --example serve_batched -- --out infer.profile.jsonl
//! cargo trace query infer.profile.jsonl --kind iterations
//! cargo trace query infer.profile.jsonl --kind resources
//! cargo trace findings infer.profile.jsonl
//! ```
//!
//! The scheduler forms **waves**: requests of one prompt length prefilled together as one
//! (batch, length) input, then decoded together one position at a time until the longest is
//! done; new requests join between waves. That is all candle-transformers' Llama allows: its
//! `forward` takes one position offset and one KV cache for the whole batch. A request is
//! admitted when its blocks (prompt + wanted tokens, 8 tokens a block) fit in the budget;
//! otherwise it is deferred (it waits for blocks) and tried again at the next wave of its
//! length; one that could never fit is rejected. Blocks are released when the wave ends.
//!
//! What a real engine (vLLM, TGI, mistral.rs) does differently: paged attention keeps a block
//! table per sequence, so each sequence has its own positions and cache pages; the scheduler
//! then runs **continuous batching** — every forward mixes new prompts (often in chunks: chunked
//! prefill) with one decode token of every running sequence, sequences leave the batch the
//! moment they finish (their blocks freed at once) and others join the next forward, and under
//! memory pressure a running sequence is preempted (its blocks given back, recomputed later).
//! Here a finished request's row stays in the batch until its wave ends (computed, not
//! committed, and not listed in the forward's composition). The capture calls are the same
//! for both: [`Engine::forward`](candle_trace_capture::profiler::Engine::forward) with
//! `prefill`, `prefill_chunk`, `decode` per request, and a
//! [`ResourcePool`](candle_trace_capture::profiler::ResourcePool) for the blocks; the lines
//! marked `// capture` are all this example adds to a server.

use std::path::Path;

use candle_core::{DType, Device, Tensor, D};
use candle_nn::{VarBuilder, VarMap};
use candle_trace_capture::prelude::*;
use candle_trace_capture::profiler::Engine;
use candle_transformers::models::llama::{Cache, Config, Llama};

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

/// Tokens per KV-cache block.
pub const BLOCK_TOKENS: usize = 8;
/// KV-cache blocks one engine may hand out.
pub const CAPACITY_BLOCKS: u64 = 7;
/// Most requests in one wave.
pub const MAX_BATCH: usize = 4;

/// Each worker's requests: (request id, prompt tokens, tokens wanted). The last one of
/// `worker-0` asks for more than the context holds: it is rejected.
pub const WORKERS: [&[(&str, usize, usize)]; 2] = [
    &[
        ("w0-r1", 6, 8),
        ("w0-r2", 6, 6),
        ("w0-r3", 6, 8),
        ("w0-r4", 12, 10),
        ("w0-r5", 12, 6),
        ("w0-r6", 6, 4),
        ("w0-r7", 12, 8),
        ("w0-r8", 6, 8),
        ("w0-r9-too-long", 40, 40),
    ],
    &[
        ("w1-r1", 9, 6),
        ("w1-r2", 9, 8),
        ("w1-r3", 9, 4),
        ("w1-r4", 9, 6),
        ("w1-r5", 5, 6),
    ],
];

/// What [`run`] returns.
#[derive(Debug)]
pub struct Outcome {
    /// The tokens generated per request (`None`: rejected).
    pub outputs: Vec<(String, Option<Vec<u32>>)>,
    /// What the profiler reported.
    pub report: ProfileReport,
}

/// A request the scheduler holds.
struct Sequence {
    id: String,
    prompt: Vec<u32>,
    wanted: usize,
    blocks: u64,
    tokens: Vec<u32>,
    handle: RequestHandle,
}

fn blocks_for(tokens: usize) -> u64 {
    tokens.div_ceil(BLOCK_TOKENS) as u64
}

/// Run one wave: its prompts as one (batch, length) input, then one position at a time until
/// every sequence has the tokens it wants.
fn run_wave(
    engine: &Engine,
    model: &Llama,
    cfg: &Config,
    wave: &mut [Sequence],
) -> candle_core::Result<()> {
    let len = wave[0].prompt.len();
    let mut cache = Cache::new(true, DType::F32, cfg, &Device::Cpu)?;
    let flat: Vec<u32> = wave.iter().flat_map(|s| s.prompt.iter().copied()).collect();
    let input = Tensor::new(flat, &Device::Cpu)?.reshape((wave.len(), len))?;
    let mut forward = engine.forward(); // capture
    for s in wave.iter() {
        forward = forward.prefill(&s.handle, len as u64); // capture
    }
    let next = forward.run(|| {
        // capture
        model
            .forward(&input, 0, &mut cache)?
            .argmax(D::Minus1)?
            .to_vec1::<u32>()
    })?;
    for (s, t) in wave.iter_mut().zip(next) {
        s.tokens.push(t);
    }
    let mut pos = len;
    while wave.iter().any(|s| s.tokens.len() < s.wanted) {
        // Every row takes its last token; a finished one rides along, uncommitted.
        let last: Vec<u32> = wave.iter().map(|s| s.tokens[s.tokens.len() - 1]).collect();
        let input = Tensor::new(last, &Device::Cpu)?.unsqueeze(1)?;
        let mut forward = engine.forward(); // capture
        for s in wave.iter().filter(|s| s.tokens.len() < s.wanted) {
            forward = forward.decode(&s.handle); // capture
        }
        let next = forward.run(|| {
            // capture
            model
                .forward(&input, pos, &mut cache)?
                .argmax(D::Minus1)?
                .to_vec1::<u32>()
        })?;
        for (s, t) in wave.iter_mut().zip(next) {
            if s.tokens.len() < s.wanted {
                s.tokens.push(t);
            }
        }
        pos += 1;
    }
    Ok(())
}

/// Serve `requests` on this thread as engine `engine_id`: admit, defer or reject each against
/// the block budget, run waves until none waits. Returns the tokens per request.
pub fn serve(
    profiler: &InferenceProfiler,
    model: &Llama,
    engine_id: &str,
    requests: &[(&str, usize, usize)],
) -> candle_core::Result<Vec<(String, Option<Vec<u32>>)>> {
    let cfg = config();
    let engine = profiler.engine(engine_id); // capture
                                             // One pool per resource kind: each engine's cache is its own.
    let kind = format!("kv_blocks:{engine_id}");
    let pool = engine.resource_pool(kind.as_str(), CAPACITY_BLOCKS); // capture
    let mut outputs = Vec::new();
    let mut waiting: Vec<Sequence> = Vec::new();
    for (k, &(id, prompt_len, wanted)) in requests.iter().enumerate() {
        let shape = [("prompt_tokens", prompt_len), ("max_new_tokens", wanted)];
        let handle = profiler.request_open(
            id,
            shape
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.into()))
                .collect(),
        );
        let blocks = blocks_for(prompt_len + wanted);
        if prompt_len + wanted > cfg.max_position_embeddings || blocks > CAPACITY_BLOCKS {
            let reason = format!(
                "{} tokens need {blocks} blocks of the {CAPACITY_BLOCKS} (context {})",
                prompt_len + wanted,
                cfg.max_position_embeddings
            );
            pool.reject(&handle, blocks, &reason); // capture
            handle.request_fail("rejected", &reason);
            outputs.push((id.to_string(), None));
            continue;
        }
        let prompt = (0..prompt_len)
            .map(|i| ((11 * i + 7 * k) % cfg.vocab_size) as u32)
            .collect();
        waiting.push(Sequence {
            id: id.to_string(),
            prompt,
            wanted,
            blocks,
            tokens: Vec::new(),
            handle,
        });
    }
    while !waiting.is_empty() {
        // A wave: the oldest waiting request's prompt length, as many of that length as fit.
        let len = waiting[0].prompt.len();
        let mut wave = Vec::new();
        let mut i = 0;
        while i < waiting.len() {
            let s = &waiting[i];
            if s.prompt.len() != len || wave.len() == MAX_BATCH {
                i += 1;
            } else if s.blocks <= pool.available() {
                pool.reserve(&s.handle, s.blocks); // capture
                wave.push(waiting.remove(i));
            } else {
                let reason = format!("{} blocks needed, {} free", s.blocks, pool.available());
                pool.defer(&s.handle, s.blocks, &reason); // capture
                i += 1;
            }
        }
        run_wave(&engine, model, &cfg, &mut wave)?;
        for s in wave {
            pool.release(&s.handle, s.blocks); // capture
            s.handle.request_close();
            outputs.push((s.id, Some(s.tokens)));
        }
    }
    Ok(outputs)
}

/// Serve [`WORKERS`] on two threads (`worker-0`, `worker-1`), writing the profile to `out`.
pub fn run(out: &Path) -> Result<Outcome, Box<dyn std::error::Error>> {
    let out = out.to_str().ok_or("the output path is not UTF-8")?;
    // Before the model is built: candle-transformers creates its spans in `Llama::load`.
    let profiler = InferenceProfiler::latency(out)
        .model("llama-tiny")
        .entrypoint(Entrypoint::Serve)
        .install()?; // capture
    let varmap = VarMap::new();
    let vb = name_modules(VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu)); // capture
    let model = Llama::load(vb, &config())?;
    let mut outputs = Vec::new();
    std::thread::scope(|s| -> Result<(), Box<dyn std::error::Error>> {
        let workers: Vec<_> = WORKERS
            .iter()
            .enumerate()
            .map(|(w, requests)| {
                let (profiler, model) = (&profiler, &model);
                std::thread::Builder::new()
                    .name(format!("worker-{w}"))
                    .spawn_scoped(s, move || {
                        serve(profiler, model, &format!("engine-{w}"), requests)
                    })
            })
            .collect::<Result<_, _>>()?;
        for worker in workers {
            let served = worker.join().map_err(|_| "a worker panicked")??;
            outputs.extend(served);
        }
        Ok(())
    })?;
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
            None => println!("{id}: rejected"),
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
