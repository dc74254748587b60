//! # candle-trace-schema
//!
//! The shared model of candle-trace, in two module trees:
//!
//! - [`format`]: event types for the execution trace `candle-graph/trace/6` and the inference
//!   profile (schema v1), streaming JSONL readers that report every bad line with its 1-based
//!   line number and keep everything valid, format detection, and the import of Chrome Trace
//!   Event JSON into the same document model and the export to it;
//! - [`analysis`]: the analysis behind every number the CLI and the viewer show, from a trace's
//!   summary to the comparison of a candidate run with a baseline and the regression gate.
//!
//! Arrows go one way: [`analysis`] reads [`format`]'s documents, [`format`] never names
//! [`analysis`]. The types most programs need are re-exported here.
//!
//! ```
//! use candle_trace_schema::TraceReader;
//!
//! let file = concat!(
//!     r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","#,
//!     r#""entrypoint":"train::step","phase":"train","timestamp":"2026-01-01T00:00:00Z","#,
//!     r#""capture_step":2,"warmup_steps":1,"device":"cpu","timing_mode":"host","tags":{}}"#, "\n",
//!     r#"{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}"#, "\n",
//!     r#"{"kind":"span_end","id":"s","duration_ns":1500}"#, "\n",
//! );
//! let mut reader = TraceReader::new();
//! // Chunks may split lines anywhere.
//! for chunk in file.as_bytes().chunks(7) {
//!     reader.push(chunk);
//! }
//! let doc = reader.finish();
//! assert!(doc.diagnostics.is_empty());
//! assert_eq!(doc.summary().total_ns, 1500);
//! ```
//!
//! ## `no_std`
//!
//! The crate is `#![no_std]` and needs only `alloc`. The default `std` feature turns on the
//! std features of serde, serde_json, memchr, thiserror and compact_str; to build without it:
//!
//! ```toml
//! [dependencies]
//! candle-trace-schema = { version = "0.1", default-features = false }
//! ```
#![no_std]
#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod analysis;
pub mod format;
#[cfg(test)]
mod test_lines;

// The types most programs need, at the root; the two trees hold the rest.
pub use analysis::compare::{compare, TraceComparison};
pub use analysis::findings::{profile_findings, trace_findings, Findings};
pub use analysis::modules::ModulePaths;
pub use analysis::requests::{LatencyStats, ProfileSummary, RequestSummary};
pub use analysis::steps::StepSet;
pub use analysis::summary::TraceSummary;
pub use analysis::waterfall::Waterfall;
pub use format::chrome::ChromeReader;
pub use format::detect::{AnyDocument, AnyReader};
pub use format::diagnostics::{Category, Diagnostic, Severity};
pub use format::document::{TraceDocument, TraceReader};
pub use format::events::{Meta, Pass, SpanKind, TraceEvent};
pub use format::memory::MemoryProfile;
pub use format::profile::{ProfileDocument, ProfileReader};
pub use format::records::{Lined, Span};
pub use format::spans::SpanTree;
pub use format::tracks::ChromeImport;
