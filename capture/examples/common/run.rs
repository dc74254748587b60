//! The command line the examples share: `--out PATH`; then what a training run wrote.

use std::path::PathBuf;

use candle_trace_capture::CaptureReport;

/// The `--out PATH` argument (else `default`); any other argument is refused.
pub fn out_path(default: &str) -> Result<PathBuf, String> {
    let mut out = PathBuf::from(default);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--out" => out = args.next().map(PathBuf::from).ok_or("--out needs a path")?,
            other => return Err(format!("unknown argument {other} (use --out PATH)")),
        }
    }
    Ok(out)
}

/// Print the losses and what the recorder wrote to `out`.
pub fn print_run(out: &std::path::Path, report: &CaptureReport, losses: &[f32]) {
    let losses: Vec<String> = losses.iter().map(|l| format!("{l:.4}")).collect();
    println!("losses per update: {}", losses.join(", "));
    println!(
        "wrote {} ({} lines, {} events dropped)",
        out.display(),
        report.events_written,
        report.events_dropped
    );
    for note in &report.notes {
        println!("note: {note}");
    }
}
