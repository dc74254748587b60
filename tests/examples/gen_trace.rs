//! Write a generated trace/6 file:
//! `cargo run --release -p candle-trace-tests --example gen_trace -- OUT.jsonl [MB]` (a
//! realistic training update of about MB megabytes), or `... -- OUT.jsonl --spans N` (exactly
//! N spans in blocks of a module and 99 ops, for browser panning benchmarks), or `... --
//! OUT.jsonl --memory-heavy MB` (about MB megabytes of the memory- and op-heavy mix of
//! `write_memory_heavy`).

use std::io::BufWriter;

use candle_trace_tests::generate::{write_blocks, write_memory_heavy, write_trace, GenConfig};

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let Some(out) = args.next() else {
        eprintln!("usage: gen_trace OUT.jsonl [MB | --spans N | --memory-heavy MB]");
        std::process::exit(2);
    };
    let size = args.next();
    let mut file = BufWriter::new(std::fs::File::create(&out)?);
    let stats = if size.as_deref() == Some("--spans") {
        let Some(spans) = args.next().and_then(|a| a.parse().ok()) else {
            eprintln!("usage: gen_trace OUT.jsonl --spans N");
            std::process::exit(2);
        };
        write_blocks(spans, &mut file)?
    } else if size.as_deref() == Some("--memory-heavy") {
        let mb: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
        write_memory_heavy(mb * 1_000_000, &mut file)?
    } else {
        let mb: u64 = size.and_then(|a| a.parse().ok()).unwrap_or(100);
        write_trace(&GenConfig::with_target_bytes(mb * 1_000_000), &mut file)?
    };
    eprintln!(
        "{out}: {} bytes, {} lines, {} spans, {} ops",
        stats.bytes, stats.lines, stats.spans, stats.ops
    );
    Ok(())
}
