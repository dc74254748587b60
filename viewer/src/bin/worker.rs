//! The parsing worker's entry point: `web/worker.js` runs this binary's wasm, which reads,
//! analyses and encodes files for the page (`candle_trace_viewer::start_worker`). It is a
//! binary of its own so that the page's wasm holds no reader and this one no Leptos.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen::prelude::wasm_bindgen;

fn main() {
    #[cfg(target_arch = "wasm32")]
    candle_trace_viewer::start_worker();
    #[cfg(not(target_arch = "wasm32"))]
    println!("candle-trace-worker runs in the browser, started by the viewer's page");
}

/// Serve parse requests arriving on `port` on this thread: the page calls it (through
/// `web/loader.js`) when it cannot start a worker, and reads its files itself.
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen]
pub fn serve_port(port: web_sys::MessagePort) {
    candle_trace_viewer::serve_port(port);
}
