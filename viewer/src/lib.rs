//! # candle-trace-viewer
//!
//! The browser viewer for candle-trace files: a Leptos (client-side rendered) page compiled to
//! wasm and served from `web/`. Everything it shows is computed by [`candle_trace_schema`] and
//! shaped for display by plain Rust that native tests check:
//!
//! - [`model`]: view models (summary cards, run header, diagnostics, op and span tables, span
//!   details, memory panel and charts with checkpoint reconciliation, training phases, op
//!   efficiency, gradient health, inference requests, latency histograms and waterfalls, a
//!   comparison of two traces, several traces on one axis, the findings panel, the steps of
//!   one run);
//! - [`timeline`]: the flame chart's math (viewport, lanes, level of detail, ticks, minimap,
//!   search, colours);
//! - [`transfer`]: how the parsing worker hands a read document to the page.
//!
//! In the browser (`target_arch = "wasm32"`) the `components` module renders them with Leptos
//! and `start` mounts the app; the parsing worker is a binary of its own (`start_worker`), so
//! the page's wasm holds no reader and the worker's no Leptos. Natively the crate is just the models:
//!
//! ```
//! use candle_trace_viewer::model::TraceModel;
//! use candle_trace_viewer::schema::format::document::TraceDocument;
//! use candle_trace_viewer::timeline::{lod::visible_blocks, viewport::Viewport};
//!
//! let file = concat!(
//!     r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","#,
//!     r#""entrypoint":"train::step","phase":"train","timestamp":"2026-01-01T00:00:00Z","#,
//!     r#""capture_step":2,"warmup_steps":1,"device":"cpu","timing_mode":"host","tags":{}}"#, "\n",
//!     r#"{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}"#, "\n",
//!     r#"{"kind":"span_end","id":"s","duration_ns":1500}"#, "\n",
//! );
//! let model = TraceModel::new(TraceDocument::from_bytes(file.as_bytes()));
//! assert_eq!(model.cards[0].field, "total_ns");
//! assert_eq!(model.cards[0].value, 1500);
//! let view = Viewport::fit(model.lanes.start_ns, model.lanes.end_ns, 600.0);
//! let blocks = visible_blocks(&model.lanes.lanes[0], &view);
//! assert_eq!((blocks[0].x0, blocks[0].x1), (0.0, 600.0));
//! ```

// Not published: its modules' docs are read with `--document-private-items`, where links to
// their private parts resolve.
#![allow(rustdoc::private_intra_doc_links)]

pub use candle_trace_schema as schema;

pub mod model;
pub mod timeline;
pub mod transfer;
pub mod warm;

#[cfg(target_arch = "wasm32")]
mod components;
#[cfg(target_arch = "wasm32")]
mod load;
#[cfg(target_arch = "wasm32")]
mod worker;

/// Start the page in the browser: mount the app on `<body>`, and start the first parsing
/// worker (`web/worker.js` runs the `candle-trace-worker` binary's wasm, see [`start_worker`]).
#[cfg(target_arch = "wasm32")]
pub fn start() {
    leptos::mount::mount_to_body(components::app::App);
    // A worker loads its wasm while the user picks a file, and if the user takes a
    // moment, the page and that worker warm the engine (`warm`).
    worker::prepare();
    worker::warm_page_when_idle();
}

/// Start the parsing worker's wasm (the `candle-trace-worker` binary): inside a dedicated
/// worker, serve parse requests; elsewhere (the page running it itself, when it cannot start
/// a worker) nothing until [`serve_port`] is called.
#[cfg(target_arch = "wasm32")]
pub fn start_worker() {
    use wasm_bindgen::JsCast;
    if let Ok(scope) = js_sys::global().dyn_into::<web_sys::DedicatedWorkerGlobalScope>() {
        let name = scope.name();
        // A worker's global scope takes and posts messages as a port does.
        worker::serve(scope.unchecked_into(), &name);
    }
}

/// Serve parse requests arriving on `port` (the page's end of a `MessageChannel` is its
/// worker then), on whatever thread this wasm runs.
#[cfg(target_arch = "wasm32")]
pub fn serve_port(port: web_sys::MessagePort) {
    worker::serve(port, "");
}
