//! `candle-trace validate`.

use std::io::Write;
use std::path::Path;

use candle_trace_schema::format::detect::AnyDocument;
use candle_trace_schema::format::diagnostics::{Diagnostic, DiagnosticCounts};
use serde::Serialize;

use super::{write_json, EXIT_INVALID, EXIT_OK};

#[derive(Serialize)]
struct ValidateJson<'a> {
    file: String,
    format: &'static str,
    errors: u64,
    warnings: u64,
    diagnostics: &'a [Diagnostic],
}

pub(super) fn run(
    path: &Path,
    doc: &AnyDocument,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    let diagnostics = doc.diagnostics();
    let counts = DiagnosticCounts::of(diagnostics);
    let format = doc.format().map_or("unknown", |f| f.name());
    if json {
        write_json(
            out,
            &ValidateJson {
                file: path.display().to_string(),
                format,
                errors: counts.errors,
                warnings: counts.warnings,
                diagnostics,
            },
        )?;
    } else {
        for d in diagnostics {
            writeln!(
                out,
                "{}:{}: {}[{}]: {}",
                path.display(),
                d.line,
                d.severity,
                d.category,
                d.message
            )?;
        }
        let verdict = if counts.errors > 0 {
            "untrusted"
        } else if counts.warnings > 0 {
            "valid, with warnings"
        } else {
            "valid"
        };
        writeln!(
            out,
            "{}: {format}: {} error(s), {} warning(s): {verdict}",
            path.display(),
            counts.errors,
            counts.warnings
        )?;
    }
    Ok(if counts.errors > 0 {
        EXIT_INVALID
    } else {
        EXIT_OK
    })
}
