//! Diagnostics: what a reader found wrong with a file, line by line.
//!
//! Every reader in this crate collects diagnostics instead of stopping at the first bad line
//! (the rerun warning-reporter pattern): a diagnostic names the 1-based line, a severity, a
//! category a tool can filter on, and a human message.

use alloc::string::String;
use core::fmt;
use serde::{Deserialize, Serialize};

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The file is still read, but something is off (unclosed span, truncated last line ...).
    Warning,
    /// The document is untrusted (an invalid line, a broken reference ...).
    Error,
}

impl Severity {
    /// The lowercase spelling used in JSON output: `error` or `warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of problem a diagnostic reports. Spelled in snake_case in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// The line is not valid JSON (or not valid UTF-8), or not a JSON object.
    Syntax,
    /// The last line ends without a newline and is incomplete (a writer killed mid-write).
    Truncated,
    /// A `kind` (or `event_kind`) this reader does not know; the line is skipped.
    UnknownKind,
    /// A required field is absent.
    MissingField,
    /// A field has the wrong JSON type, or a number is out of range for its type.
    WrongType,
    /// A field has a value outside what the schema allows (an unknown enum spelling, a blank
    /// string where a non-blank one is required, a broken rule of the inference profile ...).
    InvalidValue,
    /// The `meta` line is missing, not first, repeated, or names another schema.
    Meta,
    /// A span id is used twice, a span is closed twice, or a JSON object has the same key
    /// twice.
    Duplicate,
    /// A record names a span (or parent) that does not exist.
    Reference,
    /// The parent chain of a span loops back on itself.
    Cycle,
    /// A span was opened and never closed.
    Unclosed,
    /// More than one measured span, or none.
    Measured,
    /// A `free` without a live `alloc`, or an `alloc` of a tensor that is already live.
    Memory,
    /// The file is not in a format this reader handles (or not yet).
    Format,
    /// Something the capture itself noticed and wrote down (a `capture_sources` warning), or
    /// a second `capture_sources` line.
    Capture,
}

impl Category {
    /// The snake_case spelling used in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Syntax => "syntax",
            Category::Truncated => "truncated",
            Category::UnknownKind => "unknown_kind",
            Category::MissingField => "missing_field",
            Category::WrongType => "wrong_type",
            Category::InvalidValue => "invalid_value",
            Category::Meta => "meta",
            Category::Duplicate => "duplicate",
            Category::Reference => "reference",
            Category::Cycle => "cycle",
            Category::Unclosed => "unclosed",
            Category::Measured => "measured",
            Category::Memory => "memory",
            Category::Format => "format",
            Category::Capture => "capture",
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One problem found in a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// 1-based line number of the offending record.
    pub line: u64,
    /// Error (document untrusted) or warning.
    pub severity: Severity,
    /// Machine-readable kind of problem.
    pub category: Category,
    /// Human-readable explanation.
    pub message: String,
}

impl Diagnostic {
    /// An error at `line`.
    pub fn error(line: u64, category: Category, message: impl Into<String>) -> Self {
        Diagnostic {
            line,
            severity: Severity::Error,
            category,
            message: message.into(),
        }
    }

    /// A warning at `line`.
    pub fn warning(line: u64, category: Category, message: impl Into<String>) -> Self {
        Diagnostic {
            line,
            severity: Severity::Warning,
            category,
            message: message.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}: {}[{}]: {}",
            self.line, self.severity, self.category, self.message
        )
    }
}

/// Counts of diagnostics by severity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiagnosticCounts {
    /// Number of error-severity diagnostics.
    pub errors: u64,
    /// Number of warning-severity diagnostics.
    pub warnings: u64,
}

impl DiagnosticCounts {
    /// Count the diagnostics in `diagnostics`.
    pub fn of(diagnostics: &[Diagnostic]) -> Self {
        let mut counts = DiagnosticCounts::default();
        for d in diagnostics {
            match d.severity {
                Severity::Error => counts.errors += 1,
                Severity::Warning => counts.warnings += 1,
            }
        }
        counts
    }
}

/// Sort diagnostics by line, then errors before warnings, keeping the discovery order
/// otherwise (stable sort).
pub fn sort_diagnostics(diagnostics: &mut [Diagnostic]) {
    diagnostics.sort_by(|a, b| a.line.cmp(&b.line).then(b.severity.cmp(&a.severity)));
}

/// Turn a serde_json error for one line into a category and a message without serde's own
/// "at line 1 column N" suffix (every line is parsed on its own, so that position is the column).
pub fn classify_json_error(err: &serde_json::Error) -> (Category, String) {
    use alloc::string::ToString;
    let text = err.to_string();
    // serde_json appends " at line L column C"; keep the column, drop the per-line "line 1".
    let message = match text.rfind(" at line ") {
        Some(at) => {
            let tail = &text[at + " at line ".len()..];
            let column = tail.split(" column ").nth(1).unwrap_or("");
            let mut m = String::from(&text[..at]);
            if !column.is_empty() {
                m.push_str(" (column ");
                m.push_str(column);
                m.push(')');
            }
            m
        }
        None => text,
    };
    let category = match err.classify() {
        serde_json::error::Category::Syntax | serde_json::error::Category::Io => Category::Syntax,
        serde_json::error::Category::Eof => Category::Truncated,
        serde_json::error::Category::Data => {
            if message.starts_with("missing field") {
                Category::MissingField
            } else if message.starts_with("duplicate field") {
                // The same key twice in one object: which value was meant is unknowable.
                Category::Duplicate
            } else if message.starts_with("unknown variant") {
                Category::InvalidValue
            } else {
                Category::WrongType
            }
        }
    };
    (category, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_missing_field_and_unknown_variant() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct T {
            a: u64,
            b: Severity,
        }
        let e = serde_json::from_str::<T>(r#"{"b":"error"}"#).unwrap_err();
        let (c, m) = classify_json_error(&e);
        assert_eq!(c, Category::MissingField);
        assert!(m.starts_with("missing field `a`"), "{m}");
        let e = serde_json::from_str::<T>(r#"{"a":1,"b":"fatal"}"#).unwrap_err();
        assert_eq!(classify_json_error(&e).0, Category::InvalidValue);
        let e = serde_json::from_str::<T>(r#"{"a":"x","b":"error"}"#).unwrap_err();
        assert_eq!(classify_json_error(&e).0, Category::WrongType);
        let e = serde_json::from_str::<T>(r#"{"a":1,"a":2,"b":"error"}"#).unwrap_err();
        assert_eq!(classify_json_error(&e).0, Category::Duplicate);
        let e = serde_json::from_str::<T>(r#"{"a":1,"#).unwrap_err();
        assert_eq!(classify_json_error(&e).0, Category::Truncated);
        let e = serde_json::from_str::<T>(r#"{"a":1 x"#).unwrap_err();
        let (c, m) = classify_json_error(&e);
        assert_eq!(c, Category::Syntax);
        assert!(m.contains("(column 8)"), "{m}");
    }

    #[test]
    fn sort_is_by_line_then_errors_first() {
        let mut d = alloc::vec![
            Diagnostic::warning(3, Category::Unclosed, "w"),
            Diagnostic::error(1, Category::Meta, "e"),
            Diagnostic::error(3, Category::Syntax, "e3"),
        ];
        sort_diagnostics(&mut d);
        assert_eq!(d[0].line, 1);
        assert_eq!(d[1].severity, Severity::Error);
        assert_eq!(d[2].severity, Severity::Warning);
    }
}
