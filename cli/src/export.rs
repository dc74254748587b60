//! `candle-trace export`: write a trace/6 file or an inference profile as Chrome Trace Event
//! JSON (the conversion is `candle_trace_schema::chrome::export`; this only wires it).

use std::io::Write;
use std::path::Path;

use anyhow::Context as _;
use candle_trace_schema::chrome::export::{profile_to_chrome, trace_to_chrome};
use candle_trace_schema::diagnostics::DiagnosticCounts;
use candle_trace_schema::format::AnyDocument;

use super::EXIT_OK;

pub(super) fn run(
    path: &Path,
    doc: &AnyDocument,
    output: Option<&Path>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    let text = match doc {
        AnyDocument::Trace(t) => trace_to_chrome(t),
        AnyDocument::Profile(p) => profile_to_chrome(p),
        AnyDocument::Unsupported { .. } => {
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
