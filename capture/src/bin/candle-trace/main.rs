//! `candle-trace`: read, validate, summarise and query candle-trace files.
//! See `candle-trace --help`; the tool itself is `candle_trace_capture::cli::run`.

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut err = stderr.lock();
    let code = candle_trace_capture::cli::run(std::env::args_os(), &mut out, &mut err);
    // A closed pipe (`candle-trace ... | head`) is not worth a panic or a message.
    let _ = out.flush();
    ExitCode::from(u8::try_from(code).unwrap_or(2))
}
