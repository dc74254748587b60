//! The formats as written: the trace/6 events and the inference profile's events, the JSONL
//! framing, the readers that keep every valid line and report every bad one with its line
//! number, the documents they build (with the span tree laid out while reading), format
//! detection, and the Chrome Trace Event JSON import and export.
//!
//! Nothing here names [`analysis`](crate::analysis): the analyses read these documents, never the
//! reverse (`cargo xtask deps` checks it). The numbers a document carries from the moment it is
//! read (self time, the memory profile) are computed by the readers' `finish`, which
//! [`analysis::finish`](crate::analysis::finish) defines.

pub mod chrome;
pub mod detect;
pub mod diagnostics;
pub mod digest;
pub mod document;
pub mod events;
pub mod jsonl;
pub mod memory;
pub mod profile;
pub mod records;
pub mod spans;
pub mod table;
pub mod tracks;
