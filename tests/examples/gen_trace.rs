//! Write a generated trace/6 file: `cargo run --release -p candle-trace-tests --example gen_trace -- OUT.jsonl [MB]`.

use std::io::BufWriter;

use candle_trace_tests::generate::{write_trace, GenConfig};

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let Some(out) = args.next() else {
        eprintln!("usage: gen_trace OUT.jsonl [MB]");
        std::process::exit(2);
    };
    let mb: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let mut file = BufWriter::new(std::fs::File::create(&out)?);
    let stats = write_trace(&GenConfig::with_target_bytes(mb * 1_000_000), &mut file)?;
    eprintln!(
        "{out}: {} bytes, {} lines, {} spans, {} ops",
        stats.bytes, stats.lines, stats.spans, stats.ops
    );
    Ok(())
}
