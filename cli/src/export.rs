//! `candle-trace export`: write a trace/6 file or an inference profile as Chrome Trace Event
//! JSON, or an inference profile as OTLP/JSON (the conversions are
//! `candle_trace_schema::format::chrome::export` and `candle_trace_schema::analysis::otlp`; this only wires them).

use std::io::Write;
use std::path::Path;

use anyhow::Context as _;
use candle_trace_schema::analysis::otlp::profile_to_otlp;
use candle_trace_schema::format::chrome::export::{profile_to_chrome, trace_to_chrome};
use candle_trace_schema::format::detect::AnyDocument;
use candle_trace_schema::format::diagnostics::DiagnosticCounts;

use super::EXIT_OK;

/// The format to write.
pub(super) enum Format<'a> {
    /// Chrome Trace Event JSON.
    Chrome,
    /// OTLP/JSON with this `service.name`.
    Otlp { service_name: &'a str },
}

pub(super) fn run(
    path: &Path,
    doc: &AnyDocument,
    format: Format<'_>,
    output: Option<&Path>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    let text = match (doc, format) {
        (AnyDocument::Trace(_), Format::Otlp { .. }) => anyhow::bail!(
            "{} is an execution trace; `--format otlp` exports inference profiles (one trace per request)",
            path.display()
        ),
        (AnyDocument::Trace(t), Format::Chrome) => trace_to_chrome(t),
        (AnyDocument::Profile(p), Format::Chrome) => profile_to_chrome(p),
        (AnyDocument::Profile(p), Format::Otlp { service_name }) => profile_to_otlp(p, service_name),
        (AnyDocument::Unsupported { .. }, _) => {
            super::summary::unreachable_unsupported()?;
            String::new()
        }
    };
    let counts = DiagnosticCounts::of(doc.diagnostics());
    if counts.errors > 0 {
        writeln!(
            err,
            "candle-trace: note: {} has {} error(s) (see `candle-trace validate`); exported what could be read",
            path.display(),
            counts.errors
        )?;
    }
    match output {
        Some(o) => {
            std::fs::write(o, text.as_bytes())
                .with_context(|| format!("cannot write {}", o.display()))?;
            writeln!(out, "wrote {} ({} bytes)", o.display(), text.len())?;
        }
        None => out.write_all(text.as_bytes())?,
    }
    Ok(EXIT_OK)
}
