//! The viewer's entry point: in the browser it mounts the app; natively it only explains itself.

fn main() {
    #[cfg(target_arch = "wasm32")]
    candle_trace_viewer::start();
    #[cfg(not(target_arch = "wasm32"))]
    println!("candle-trace-viewer runs in the browser: `cd web && trunk serve`");
}
