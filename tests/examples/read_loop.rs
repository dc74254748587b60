//! Read a trace/6 file N times, for profiling the reader alone:
//! `cargo run --release -p candle-trace-tests --example read_loop -- FILE [doc|digest] [N]`.
//! Prints the median rate of the N reads (1 MiB chunks, size hint given, as the CLI does).

#![allow(clippy::expect_used)]

use std::hint::black_box;
use std::time::Instant;

use candle_trace_schema::format::digest::TraceDigestReader;
use candle_trace_schema::format::document::TraceReader;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: read_loop FILE [doc|digest] [N]");
    let mode = args.next().unwrap_or_else(|| "doc".into());
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let bytes = std::fs::read(&path).expect("read the file");
    let mut times = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        if mode == "digest" {
            let mut r = TraceDigestReader::with_size_hint(bytes.len() as u64);
            for c in bytes.chunks(1 << 20) {
                r.push(c);
            }
            let d = r.finish();
            black_box(d.spans().len());
        } else {
            let mut r = TraceReader::with_size_hint(bytes.len() as u64);
            for c in bytes.chunks(1 << 20) {
                r.push(c);
            }
            let d = r.finish();
            black_box(d.summary());
        }
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let med = times[times.len() / 2];
    println!(
        "{mode}: median {:.3} s, {:.0} MB/s",
        med,
        bytes.len() as f64 / 1e6 / med
    );
}
