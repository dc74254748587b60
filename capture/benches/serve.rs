//! What capturing costs a serving program, in two measures (`cargo xtask bench --only serve`
//! judges both goals on them):
//!
//! 1. **One module span** at detail `latency`, on the serving thread: a forward call of 144
//!    `tracing` spans created once (16 blocks of `block` > `attn` > 3 × `linear`, `mlp` > 3 ×
//!    `linear`, as candle-transformers creates its layer spans when a model is built) and
//!    entered with no work inside, run through [`RequestHandle::decode_step`] of a recorded
//!    request, beside the same forward call uncaptured (the subscriber installed, nothing
//!    recording) and beside a captured forward call of no span (what `decode_step` costs
//!    whatever the model: the decode wave, the token commit). ns per module span =
//!    ((captured − captured with no span) − (uncaptured − uncaptured with no span)) / 144,
//!    the median over paired rounds (each round times the four back to back, 64 forward
//!    calls each; a fresh request every 64 calls, opened and closed untimed).
//! 2. **Served requests** of the demo's tiny candle-transformers Llama (`serve_llama`'s model:
//!    random weights, layers named by `name_modules`): 3 threads, each serving 2 requests one
//!    after the other (prefill of 5 to 17 prompt tokens, then 8 decode steps, each with its
//!    own KV cache) through `InferenceProfiler::request`, `prefill_step` and `decode_step`, so
//!    3 requests are in flight at any time. A round serves them uncaptured (detail `off`:
//!    every handle inert) and then captured (detail `latency`, every request sampled, module
//!    spans, writing to `io::sink()` through the profiler's writer thread), each from a
//!    barrier to the last thread's end; the two profilers and the threads live for the whole
//!    measure, as a server's do. The same rounds serve the `serve_batched` example's two
//!    engines, each on a thread (`batched`). The overhead is the median of the rounds' ratios. Beside it: the CPU time of
//!    the whole process in the same rounds, and of the profile's writer thread alone in each
//!    captured round (its flush included), as a share of the paired uncaptured round's.
//!
//! ```text
//! RAYON_NUM_THREADS=2 cargo bench -p candle-trace-capture --features candle --bench serve
//! ```
//!
//! `CANDLE_TRACE_BENCH_ROUNDS=N` changes the number of rounds of each measure (default 30 and
//! 20); with `CANDLE_TRACE_BENCH_OUT=FILE` the results are also written to FILE as JSON.

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor, D};
use candle_nn::{VarBuilder, VarMap};
use candle_trace_capture::alloc::TrackingAllocator;
use candle_trace_capture::nn::name_modules;
use candle_trace_capture::{DetailLevel, InferenceProfiler, ProfilingConfig, RequestHandle};
use candle_transformers::models::llama::{Cache, Llama};

#[path = "../examples/common/llama.rs"]
#[allow(dead_code, unreachable_pub)]
mod llama;

#[path = "../examples/serve_batched.rs"]
#[allow(dead_code, unreachable_pub, clippy::duplicate_mod)]
mod serve_batched;

#[global_allocator]
static ALLOC: TrackingAllocator = TrackingAllocator::system();

/// Blocks of the synthetic forward call; each opens 9 spans.
const BLOCKS: usize = 16;
/// Module spans per synthetic forward call.
const SPANS: usize = BLOCKS * 9;
/// Forward calls per timed batch (and per request).
const CALLS: usize = 64;

/// The spans of one synthetic block, created once like a model's layer spans.
struct Block {
    block: tracing::Span,
    attn: tracing::Span,
    mlp: tracing::Span,
    linears: [tracing::Span; 6],
}

fn blocks() -> Vec<Block> {
    (0..BLOCKS)
        .map(|_| Block {
            block: tracing::trace_span!("block"),
            attn: tracing::trace_span!("attn"),
            mlp: tracing::trace_span!("mlp"),
            linears: std::array::from_fn(|_| tracing::trace_span!("linear")),
        })
        .collect()
}

/// One synthetic forward call: every span entered and exited, no work inside.
fn forward(blocks: &[Block]) {
    for b in blocks {
        let _block = b.block.enter();
        for (group, linears) in [(&b.attn, &b.linears[..3]), (&b.mlp, &b.linears[3..])] {
            let _group = group.enter();
            for l in linears {
                let _l = black_box(l.enter());
            }
        }
    }
}

fn profiler(detail: DetailLevel) -> InferenceProfiler {
    InferenceProfiler::builder(ProfilingConfig {
        detail,
        sample_rate: 1.0,
        // Required by the config; the writer below replaces it.
        outputs: vec![String::from("bench.profile.jsonl")],
    })
    .writer(std::io::sink())
    .build()
    .unwrap_or_else(|e| panic!("profiler: {e}"))
}

fn shape() -> [(&'static str, u64); 1] {
    [("prompt_tokens", 1)]
}

/// [`CALLS`] forward calls of `blocks` through a fresh recorded request's `decode_step`.
fn captured(profiler: &InferenceProfiler, blocks: &[Block], n: usize) -> Duration {
    let handle: RequestHandle = profiler.request_open(
        format!("r{n}"),
        shape()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.into()))
            .collect(),
    );
    let started = Instant::now();
    for _ in 0..CALLS {
        let r: Result<(), ()> = handle.decode_step(|| {
            forward(blocks);
            Ok(())
        });
        black_box(r).unwrap_or(());
    }
    let took = started.elapsed();
    handle.request_close();
    took
}

fn uncaptured(blocks: &[Block]) -> Duration {
    let started = Instant::now();
    for _ in 0..CALLS {
        forward(black_box(blocks));
    }
    started.elapsed()
}

/// CPU time of every thread of this process so far, ns (Linux: the first field of each
/// `/proc/self/task/*/schedstat`, the time the thread ran); `None` where it cannot be read.
fn process_cpu_ns() -> Option<u64> {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
        let ns = stat.split_whitespace().next()?.parse::<u64>().ok()?;
        total += ns;
    }
    Some(total)
}

/// CPU time so far of the profilers' writer threads (`candle-trace-profile-writer`, which
/// Linux shortens to its first 15 bytes), ns; `None` where it cannot be read.
fn writer_cpu_ns() -> Option<u64> {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).ok()?;
        if "candle-trace-profile-writer".starts_with(comm.trim_end()) {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
            total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
        }
    }
    Some(total)
}

fn rounds(default: usize) -> usize {
    std::env::var("CANDLE_TRACE_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .filter(|&r| r > 0)
        .unwrap_or(default)
}

struct SpanCost {
    ns_per_span: f64,
    q1: f64,
    q3: f64,
    captured_forward_us: f64,
    uncaptured_forward_us: f64,
    empty_forward_ns: f64,
    rounds: usize,
    dropped: u64,
}

fn module_span_cost() -> SpanCost {
    let full = blocks();
    let none: Vec<Block> = Vec::new();
    let profiler = profiler(DetailLevel::Latency);
    // Warm up: rings made, callsites cached, the writer thread started.
    for i in 0..4 {
        captured(&profiler, &full, i);
        uncaptured(&full);
    }
    let per_call = |d: Duration| d.as_secs_f64() * 1e9 / CALLS as f64;
    let n = rounds(30);
    let (mut per_span, mut on, mut off, mut empty) = (vec![], vec![], vec![], vec![]);
    for i in 0..n {
        let a = per_call(uncaptured(&full));
        let a0 = per_call(uncaptured(&none));
        let b = per_call(captured(&profiler, &full, 3 * i));
        let b0 = per_call(captured(&profiler, &none, 3 * i + 1));
        // Give the writer thread its turn outside the timed part, as a serving loop's idle
        // moments do.
        profiler.flush(Duration::from_secs(5));
        per_span.push(((b - b0) - (a - a0)) / SPANS as f64);
        on.push(b);
        off.push(a);
        empty.push(b0 - a0);
    }
    let report = profiler.finish().unwrap_or_else(|e| panic!("finish: {e}"));
    SpanCost {
        ns_per_span: median(&mut per_span),
        q1: quantile(&mut per_span, 0.25),
        q3: quantile(&mut per_span, 0.75),
        captured_forward_us: median(&mut on) / 1e3,
        uncaptured_forward_us: median(&mut off) / 1e3,
        empty_forward_ns: median(&mut empty),
        rounds: n,
        dropped: report.events_dropped,
    }
}

/// Serving threads.
const THREADS: usize = 3;
/// Requests each thread serves one after the other: (prompt tokens, decode steps).
const REQUESTS: [(usize, usize); 2] = [(5, 8), (17, 8)];

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

/// How the served-requests measure serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    /// [`THREADS`] threads, each serving [`REQUESTS`] one request at a time.
    OnePerThread,
    /// The `serve_batched` example's two engines, each on its own thread, serving its
    /// requests in waves with a KV-cache budget.
    Batched,
}

impl Scenario {
    fn threads(self) -> usize {
        match self {
            Scenario::OnePerThread => THREADS,
            Scenario::Batched => serve_batched::WORKERS.len(),
        }
    }

    fn serve(self, model: &Llama, profiler: &InferenceProfiler, thread: usize, round: usize) {
        match self {
            Scenario::OnePerThread => serve_thread(model, profiler, thread, round),
            Scenario::Batched => {
                let engine = format!("engine-{thread}-{round}");
                let served =
                    serve_batched::serve(profiler, model, &engine, serve_batched::WORKERS[thread]);
                black_box(served.unwrap_or_else(|e| panic!("serve: {e}")));
            }
        }
    }
}

/// Serve one thread's requests of round `round` through `profiler`.
fn serve_thread(model: &Llama, profiler: &InferenceProfiler, thread: usize, round: usize) {
    let cfg = llama::config();
    for (k, (prompt_len, steps)) in REQUESTS.into_iter().enumerate() {
        let prompt: Vec<u32> = (0..prompt_len)
            .map(|i| ((7 * i + thread) % 256) as u32)
            .collect();
        let id = format!("r{round}-t{thread}-{k}");
        let shape = [("prompt_tokens", prompt_len)];
        let served = profiler.request(id, shape, |req| -> candle_core::Result<u32> {
            let mut cache = Cache::new(true, DType::F32, &cfg, &Device::Cpu)?;
            let mut token = req.prefill_step(|| next_token(model, &prompt, 0, &mut cache))?;
            for pos in prompt_len..prompt_len + steps {
                token = req.decode_step(|| next_token(model, &[token], pos, &mut cache))?;
            }
            Ok(token)
        });
        black_box(served.unwrap_or_else(|e| panic!("serve: {e}")));
    }
}

/// A round's CPU time, every thread of the process (serving, candle's pool, the writer).
struct CpuCost {
    uncaptured_ms: f64,
    captured_ms: f64,
    overhead_pct: f64,
    q1_pct: f64,
    q3_pct: f64,
    /// The writer thread's CPU time in a captured round (its flush after the round included):
    /// the median, and as a share of the paired uncaptured round's CPU time (median, quartiles).
    writer_ms: Option<f64>,
    writer_pct: Option<(f64, f64, f64)>,
}

struct ServeCost {
    cpu: Option<CpuCost>,
    uncaptured_ms: f64,
    captured_ms: f64,
    overhead_pct: f64,
    q1_pct: f64,
    q3_pct: f64,
    rounds: usize,
    events_per_round: u64,
    dropped: u64,
}

/// Rounds of the scenario's serving threads, kept for the whole measure as a server keeps its
/// workers, alternating an uncaptured and a captured profiler that live as long (a server
/// builds one). A round's time runs from the barrier that starts it to the last thread's end;
/// the writer thread works meanwhile, and what it has left at the end is written before the
/// next round, untimed. The CPU time of the whole process over the same span (every thread,
/// the writer's included, and the flush's) is measured beside it.
fn served_requests(scenario: Scenario) -> ServeCost {
    let cfg = llama::config();
    let varmap = VarMap::new();
    let vb = name_modules(VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu));
    let model = Llama::load(vb, &cfg).unwrap_or_else(|e| panic!("model: {e}"));
    let off = profiler(DetailLevel::Off);
    let on = profiler(DetailLevel::Latency);
    let warmup = 2;
    let n = rounds(20);
    let threads = scenario.threads();
    let start = Barrier::new(threads + 1);
    let (done_tx, done) = std::sync::mpsc::channel::<()>();
    let times = std::thread::scope(|s| {
        let mut orders = Vec::new();
        for t in 0..threads {
            let (tx, rx) = std::sync::mpsc::channel::<Option<(&InferenceProfiler, usize)>>();
            orders.push(tx);
            let (start, done_tx, model) = (&start, done_tx.clone(), &model);
            std::thread::Builder::new()
                .name(format!("worker-{t}"))
                .spawn_scoped(s, move || {
                    while let Ok(Some((profiler, round))) = rx.recv() {
                        start.wait();
                        scenario.serve(model, profiler, t, round);
                        let _ = done_tx.send(());
                    }
                })
                .unwrap_or_else(|e| panic!("spawn: {e}"));
        }
        let round = |captured: bool, r: usize| -> (Duration, Option<u64>, Option<u64>) {
            let profiler = if captured { &on } else { &off };
            let cpu_before = process_cpu_ns();
            let writer_before = writer_cpu_ns();
            for tx in &orders {
                tx.send(Some((profiler, r)))
                    .unwrap_or_else(|_| panic!("a serving thread is gone"));
            }
            start.wait();
            let started = Instant::now();
            for _ in 0..threads {
                done.recv()
                    .unwrap_or_else(|_| panic!("a serving thread is gone"));
            }
            let took = started.elapsed();
            // Untimed: the writer thread works while serving goes on (it looks at the rings
            // every 10 ms), as in a server, where it never has to catch up at an end;
            // what it has left when the round ends is written before the next round, so none
            // of it falls into an uncaptured one. (Timed, the flush measured the scheduler's
            // latency in waking two threads on a busy machine, not the capture.)
            if profiler.detail() != DetailLevel::Off {
                profiler.flush(Duration::from_secs(10));
            }
            let cpu = process_cpu_ns()
                .zip(cpu_before)
                .map(|(after, before)| after.saturating_sub(before));
            let writer = writer_cpu_ns()
                .zip(writer_before)
                .map(|(after, before)| after.saturating_sub(before));
            (took, cpu, writer)
        };
        let mut times = Vec::new();
        for r in 0..warmup + n {
            let a = round(false, r);
            let b = round(true, r);
            if r >= warmup {
                times.push((a, b));
            }
        }
        for tx in &orders {
            let _ = tx.send(None);
        }
        times
    });
    let report = on.finish().unwrap_or_else(|e| panic!("finish: {e}"));
    off.finish().unwrap_or_else(|e| panic!("finish: {e}"));
    let (mut a_ms, mut b_ms, mut ratios) = (vec![], vec![], vec![]);
    let (mut a_cpu, mut b_cpu, mut cpu_ratios) = (vec![], vec![], vec![]);
    let (mut writer_ms, mut writer_shares) = (vec![], vec![]);
    for ((a, a_ns, _), (b, b_ns, writer_ns)) in &times {
        a_ms.push(a.as_secs_f64() * 1e3);
        b_ms.push(b.as_secs_f64() * 1e3);
        ratios.push(b.as_secs_f64() / a.as_secs_f64());
        if let (Some(a_ns), Some(b_ns)) = (a_ns, b_ns) {
            a_cpu.push(*a_ns as f64 / 1e6);
            b_cpu.push(*b_ns as f64 / 1e6);
            cpu_ratios.push(*b_ns as f64 / (*a_ns).max(1) as f64);
            if let Some(w) = writer_ns {
                writer_ms.push(*w as f64 / 1e6);
                writer_shares.push(*w as f64 / (*a_ns).max(1) as f64 * 100.0);
            }
        }
    }
    let cpu = (!cpu_ratios.is_empty()).then(|| CpuCost {
        uncaptured_ms: median(&mut a_cpu),
        captured_ms: median(&mut b_cpu),
        overhead_pct: (median(&mut cpu_ratios) - 1.0) * 100.0,
        q1_pct: (quantile(&mut cpu_ratios, 0.25) - 1.0) * 100.0,
        q3_pct: (quantile(&mut cpu_ratios, 0.75) - 1.0) * 100.0,
        writer_ms: (!writer_ms.is_empty()).then(|| median(&mut writer_ms)),
        writer_pct: (!writer_shares.is_empty()).then(|| {
            (
                median(&mut writer_shares),
                quantile(&mut writer_shares, 0.25),
                quantile(&mut writer_shares, 0.75),
            )
        }),
    });
    ServeCost {
        uncaptured_ms: median(&mut a_ms),
        captured_ms: median(&mut b_ms),
        overhead_pct: (median(&mut ratios) - 1.0) * 100.0,
        q1_pct: (quantile(&mut ratios, 0.25) - 1.0) * 100.0,
        q3_pct: (quantile(&mut ratios, 0.75) - 1.0) * 100.0,
        rounds: n,
        events_per_round: report.events_written / (warmup + n) as u64,
        dropped: report.events_dropped,
        cpu,
    }
}

fn main() {
    // Before any span is created: candle-transformers creates its spans in `Llama::load`.
    candle_trace_capture::install().unwrap_or_else(|e| panic!("subscriber: {e}"));
    // `cargo bench` passes `--bench`; a word names the one measure to run (`module_span`,
    // `serving` (both scenarios), `batched`, `one_per_thread`), as criterion's filters do.
    let only: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let wanted = |name: &str| only.as_deref().is_none_or(|o| name.contains(o));
    let span = wanted("module_span").then(module_span_cost);
    if let Some(span) = &span {
        println!(
            "module span at detail latency: {:.1} ns per span on the serving thread (rounds' quartiles {:.1} to {:.1}); a forward call of {SPANS} spans {:.1} µs captured, {:.1} µs uncaptured; decode_step itself {:.0} ns; {} event(s) dropped",
            span.ns_per_span, span.q1, span.q3, span.captured_forward_us, span.uncaptured_forward_us, span.empty_forward_ns, span.dropped
        );
    }
    let scenarios = [
        ("batched", Scenario::Batched),
        ("one_per_thread", Scenario::OnePerThread),
    ];
    let served: Vec<(&str, Scenario, ServeCost)> = scenarios
        .into_iter()
        .filter(|(name, _)| wanted("serving") || wanted(name))
        .map(|(name, scenario)| (name, scenario, served_requests(scenario)))
        .collect();
    for (name, scenario, serve) in &served {
        println!(
            "served requests, {name} ({} threads), median of {} paired rounds: uncaptured {:.2} ms, captured {:.2} ms, overhead {:+.1}% (rounds' ratios: quartiles {:+.1}% to {:+.1}%); {} lines a round, {} dropped in all",
            scenario.threads(), serve.rounds, serve.uncaptured_ms, serve.captured_ms, serve.overhead_pct, serve.q1_pct, serve.q3_pct, serve.events_per_round, serve.dropped
        );
        if let Some(cpu) = &serve.cpu {
            println!(
                "  CPU time of the process a round: uncaptured {:.2} ms, captured {:.2} ms, overhead {:+.1}% (quartiles {:+.1}% to {:+.1}%)",
                cpu.uncaptured_ms, cpu.captured_ms, cpu.overhead_pct, cpu.q1_pct, cpu.q3_pct
            );
            if let (Some(ms), Some((pct, q1, q3))) = (cpu.writer_ms, cpu.writer_pct) {
                println!(
                    "  of which the writer thread: {ms:.2} ms a captured round, {pct:+.1}% of the uncaptured round's CPU time (quartiles {q1:+.1}% to {q3:+.1}%)"
                );
            }
        }
    }
    if let Ok(path) = std::env::var("CANDLE_TRACE_BENCH_OUT") {
        let mut json = serde_json::Map::new();
        if let Some(span) = span {
            json.insert(
                String::from("module_span"),
                serde_json::json!({
                    "ns_per_span": span.ns_per_span,
                    "q1_ns": span.q1,
                    "q3_ns": span.q3,
                    "rounds": span.rounds,
                    "spans_per_forward": SPANS,
                    "captured_forward_us": span.captured_forward_us,
                    "uncaptured_forward_us": span.uncaptured_forward_us,
                    "decode_step_ns": span.empty_forward_ns,
                    "events_dropped": span.dropped,
                }),
            );
        }
        for (name, scenario, serve) in served {
            json.insert(
                String::from(name),
                serde_json::json!({
                    "threads": scenario.threads(),
                    "rounds": serve.rounds,
                    "uncaptured_ms": serve.uncaptured_ms,
                    "captured_ms": serve.captured_ms,
                    "overhead_pct": serve.overhead_pct,
                    "q1_pct": serve.q1_pct,
                    "q3_pct": serve.q3_pct,
                    "lines_per_round": serve.events_per_round,
                    "events_dropped": serve.dropped,
                    "cpu": serve.cpu.as_ref().map(|c| serde_json::json!({
                        "uncaptured_ms": c.uncaptured_ms,
                        "captured_ms": c.captured_ms,
                        "overhead_pct": c.overhead_pct,
                        "q1_pct": c.q1_pct,
                        "q3_pct": c.q3_pct,
                        "writer_ms": c.writer_ms,
                        "writer_pct": c.writer_pct.map(|w| w.0),
                        "writer_q1_pct": c.writer_pct.map(|w| w.1),
                        "writer_q3_pct": c.writer_pct.map(|w| w.2),
                    })),
                }),
            );
        }
        std::fs::write(&path, serde_json::Value::Object(json).to_string())
            .unwrap_or_else(|e| panic!("{path}: {e}"));
    }
}

fn quantile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let at = ((values.len().saturating_sub(1)) as f64 * q).round() as usize;
    values.get(at).copied().unwrap_or(f64::NAN)
}

fn median(values: &mut [f64]) -> f64 {
    quantile(values, 0.5)
}
