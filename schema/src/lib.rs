//! # candle-trace-schema
//!
//! The shared model of candle-trace: event types for the execution trace
//! `candle-graph/trace/6` and the inference profile (schema v1), a streaming JSONL reader that
//! reports every bad line with its 1-based line number and keeps everything valid, the import
//! of Chrome Trace Event JSON into the same document model and the export to it ([`chrome`]),
//! and the analysis behind every number the CLI and the viewer show, including the comparison
//! of a candidate run with a baseline ([`compare`]).
//!
//! ```
//! use candle_trace_schema::document::TraceReader;
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

pub mod chrome;
pub mod compare;
pub mod diagnostics;
pub mod document;
pub mod events;
pub mod findings;
pub mod flops;
pub mod format;
pub mod gate;
pub mod gradients;
pub mod histogram;
pub mod jsonl;
pub mod memory;
pub mod ops;
pub mod otlp;
pub mod paths;
pub mod percentiles;
pub mod phases;
pub mod profile;
pub mod reconcile;
pub mod records;
pub mod spans;
pub mod steps;
pub mod summary;
pub mod tracks;
pub mod units;

// The types most programs need, at the root (the modules above hold the rest).
pub use chrome::ChromeReader;
pub use diagnostics::{Category, Diagnostic, Severity};
pub use document::{TraceDocument, TraceReader};
pub use events::{Meta, SpanKind, Step, TraceEvent};
pub use format::{AnyDocument, AnyReader};
pub use memory::MemoryProfile;
pub use paths::ModulePaths;
pub use profile::{ProfileDocument, ProfileReader};
pub use records::{Lined, Span};
pub use spans::SpanTree;
pub use summary::TraceSummary;
pub use tracks::ChromeImport;
