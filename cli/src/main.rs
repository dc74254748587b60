//! `candle-trace`: read, validate, summarise and query candle-trace files.
//! See `candle-trace --help`; the tool itself is `candle_trace_cli::run`.

use std::io::Write;

/// Reading a trace allocates and frees millions of small strings, a load mimalloc is built
/// for; BENCHMARKS.md's parse figures are measured with it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::process::ExitCode;

fn main() -> ExitCode {
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut err = stderr.lock();
    let code = candle_trace_cli::run(std::env::args_os(), &mut out, &mut err);
    // A closed pipe (`candle-trace ... | head`) is not worth a panic or a message.
    let _ = out.flush();
    ExitCode::from(u8::try_from(code).unwrap_or(2))
}
