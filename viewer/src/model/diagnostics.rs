//! The diagnostics panel: every diagnostic with its line, and whether the file is untrusted.

use candle_trace_schema::format::diagnostics::{Diagnostic, DiagnosticCounts, Severity};

/// The panel's content.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DiagnosticsPanel {
    /// One row per diagnostic, sorted by line (as the reader returns them).
    pub rows: Vec<DiagnosticRow>,
    /// Errors and warnings.
    pub counts: DiagnosticCounts,
}

/// One diagnostic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiagnosticRow {
    /// 1-based line.
    pub line: u64,
    /// `error` or `warning`.
    pub severity: &'static str,
    /// Category in snake_case.
    pub category: &'static str,
    /// Human message.
    pub message: String,
}

impl DiagnosticsPanel {
    /// The panel for these diagnostics.
    pub fn of(diagnostics: &[Diagnostic]) -> Self {
        DiagnosticsPanel {
            rows: diagnostics
                .iter()
                .map(|d| DiagnosticRow {
                    line: d.line,
                    severity: d.severity.as_str(),
                    category: d.category.as_str(),
                    message: d.message.clone(),
                })
                .collect(),
            counts: DiagnosticCounts::of(diagnostics),
        }
    }

    /// True when some diagnostic is an error: the numbers cannot be fully trusted.
    pub fn is_untrusted(&self) -> bool {
        self.counts.errors > 0
    }

    /// The headline, e.g. `2 errors, 1 warning`.
    pub fn headline(&self) -> String {
        let plural = |n: u64, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
        format!(
            "{}, {}",
            plural(self.counts.errors, "error"),
            plural(self.counts.warnings, "warning")
        )
    }
}

/// The severity of a row as the schema's enum.
pub fn severity_of(row: &DiagnosticRow) -> Severity {
    if row.severity == Severity::Error.as_str() {
        Severity::Error
    } else {
        Severity::Warning
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_trace_schema::format::document::TraceDocument;

    #[test]
    fn broken_fixture_rows() {
        let doc = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/broken_missing_field.trace6.jsonl"
        ));
        let p = DiagnosticsPanel::of(&doc.diagnostics);
        let lines: Vec<u64> = p.rows.iter().map(|r| r.line).collect();
        assert_eq!(lines, vec![4, 5, 6]);
        assert!(p.rows.iter().all(|r| r.severity == "error"));
        assert_eq!(severity_of(&p.rows[0]), Severity::Error);
        assert!(p.is_untrusted());
        assert_eq!(p.headline(), "3 errors, 0 warnings");
    }

    #[test]
    fn clean_fixture_is_trusted() {
        let doc = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/train_step.trace6.jsonl"
        ));
        let p = DiagnosticsPanel::of(&doc.diagnostics);
        assert!(p.rows.is_empty() && !p.is_untrusted());
    }
}
