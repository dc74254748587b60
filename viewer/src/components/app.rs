//! The app shell.

use leptos::prelude::*;

/// The whole page.
#[component]
pub fn App() -> impl IntoView {
    view! { <main>"candle-trace viewer"</main> }
}
