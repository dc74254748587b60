//! Parse throughput of a generated trace/6 file: our `TraceReader` (decode + document assembly +
//! summary) against the peer baseline, `serde_json::Value` per line.
//!
//! `cargo bench -p candle-trace-tests --bench parse`; `CANDLE_TRACE_BENCH_MB` sets the file size
//! in MB (default 100; 2 under `cargo test --benches`). After criterion's groups the bench prints one `ratio` line (median of
//! five plain timed runs of each side) for BENCHMARKS.md.

// A bench aborts loudly on a broken input or a reader that disagrees with the generator.
#![allow(clippy::expect_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use candle_trace_schema::analysis::summary::TraceSummary;
use candle_trace_schema::format::document::{TraceDocument, TraceReader};
use candle_trace_tests::generate::{write_trace, GenConfig, GenStats};
use criterion::{Criterion, SamplingMode, Throughput};

/// The same allocator the `candle-trace` CLI ships with, for ours and the peer alike.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CHUNK: usize = 1 << 20;

struct Input {
    bytes: Vec<u8>,
    stats: GenStats,
}

fn input(default_mb: u64) -> Input {
    let mb: u64 = std::env::var("CANDLE_TRACE_BENCH_MB")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default_mb);
    let cfg = GenConfig::with_target_bytes(mb * 1_000_000);
    let mut bytes = Vec::with_capacity(cfg.target_bytes as usize + (1 << 20));
    let started = Instant::now();
    let stats = write_trace(&cfg, &mut bytes).expect("writing to a Vec cannot fail");
    eprintln!(
        "generated {:.1} MB ({} lines, {} spans, {} ops, {} memory events) in {:.2?}",
        bytes.len() as f64 / 1e6,
        stats.lines,
        stats.spans,
        stats.ops,
        stats.allocs + stats.frees,
        started.elapsed()
    );
    Input { bytes, stats }
}

/// Ours: the streaming reader in 1 MiB chunks, then assembly and the summary (the document is
/// dropped inside the timed region).
fn ours(bytes: &[u8]) -> TraceSummary {
    ours_kept(bytes).1
}

/// Ours, handing the document back so its drop can be timed apart.
fn ours_kept(bytes: &[u8]) -> (TraceDocument, TraceSummary) {
    // As the CLI and the viewer do, tell the reader the file's size.
    let mut reader = TraceReader::with_size_hint(bytes.len() as u64);
    for chunk in bytes.chunks(CHUNK) {
        reader.push(chunk);
    }
    let doc = reader.finish();
    let summary = doc.summary();
    (doc, summary)
}

/// Peer: split on `\n`, parse each non-blank line into a `serde_json::Value`.
fn peer(bytes: &[u8]) -> usize {
    let mut n = 0;
    for line in bytes.split(|&b| b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let value: serde_json::Value = serde_json::from_slice(line).expect("generated JSON");
        black_box(&value);
        n += 1;
    }
    n
}

fn median_secs(mut run: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            run();
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[2]
}

/// Median of five runs of `run`, not counting the time to drop what it returns.
fn median_secs_excluding<T>(mut run: impl FnMut() -> T) -> f64 {
    let mut times: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            let kept = run();
            let secs = t.elapsed().as_secs_f64();
            drop(black_box(kept));
            secs
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[2]
}

fn bench(c: &mut Criterion, input: &Input) {
    let bytes = &input.bytes[..];
    // The reader must agree with the generator before its speed means anything.
    let summary = ours(bytes);
    assert_eq!(summary.op_count, input.stats.ops);
    assert_eq!(summary.span_count, input.stats.spans);
    assert_eq!(summary.total_ns, input.stats.total_ns);
    assert_eq!(summary.peak_bytes, input.stats.peak_bytes());
    assert_eq!(peer(bytes) as u64, input.stats.lines);

    let mut group = c.benchmark_group("parse_trace6");
    group
        .throughput(Throughput::Bytes(bytes.len() as u64))
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(15));
    group.bench_function("ours_trace_reader", |b| {
        b.iter(|| black_box(ours(black_box(bytes))))
    });
    group.bench_function("peer_serde_json_value", |b| {
        b.iter(|| black_box(peer(black_box(bytes))))
    });
    group.finish();
}

fn parse(c: &mut Criterion, bench_mode: bool) {
    let input = input(if bench_mode { 100 } else { 2 });
    bench(c, &input);
    if !bench_mode {
        return;
    }

    let bytes = &input.bytes[..];
    let mb = bytes.len() as f64 / 1e6;
    let ours_s = median_secs(|| {
        black_box(ours(black_box(bytes)));
    });
    let peer_s = median_secs(|| {
        black_box(peer(black_box(bytes)));
    });
    // The same work with the document's drop left out of the timing (the CLI exits instead and
    // the viewer keeps the document while it is shown).
    let kept_s = median_secs_excluding(|| ours_kept(black_box(bytes)));
    println!(
        "ours without dropping the document: {:.0} MB/s (ratio to peer {:.2})",
        mb / kept_s,
        peer_s / kept_s
    );
    println!(
        "ratio ours/peer = {:.2} (ours {:.0} MB/s, peer {:.0} MB/s; median of 5 on {:.1} MB, 1 MB = 10^6 B)",
        peer_s / ours_s,
        mb / ours_s,
        mb / peer_s,
        mb
    );
}

fn main() {
    // `cargo bench` passes `--bench`; without it (`cargo test --benches`) criterion runs each
    // routine once as a smoke test, so a small input and no ratio run are enough.
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let mut c = Criterion::default().configure_from_args();
    parse(&mut c, bench_mode);
    c.final_summary();
}
