//! # candle-trace-viewer
//!
//! The browser viewer for candle-trace files. The Leptos app lands with the viewer issue; the
//! crate exists now so that the workspace layout, the dependency guard and the wasm32 clippy run
//! are in place from the start. Everything it will show is computed by
//! [`candle_trace_schema`].
#![no_std]

pub use candle_trace_schema as schema;
