//! The viewer page's entry point: in the browser it mounts the app (the parsing worker is the
//! `candle-trace-worker` binary, `src/bin/worker.rs`); natively it only explains itself.

fn main() {
    #[cfg(target_arch = "wasm32")]
    candle_trace_viewer::start();
    #[cfg(not(target_arch = "wasm32"))]
    println!("candle-trace-viewer runs in the browser: `cd web && trunk serve`");
}
