//! Waiting for the browser's next frame.

use leptos::prelude::*;

/// Resolves in the next animation frame's callbacks, before that frame is painted.
pub async fn next_frame() {
    let promise = js_sys::Promise::new(&mut |resolve, _reject| {
        request_animation_frame(move || {
            let _ = resolve.call0(&wasm_bindgen::JsValue::NULL);
        });
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}
