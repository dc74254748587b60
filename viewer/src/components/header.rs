//! The run header.

use leptos::prelude::*;

use crate::model::header::RunHeader;

/// What was captured: entry point, phase, device, timing, step, time, candle version, tags.
#[component]
pub fn RunHeaderView(
    /// The header facts.
    header: RunHeader,
    /// The opened file's name.
    file_name: String,
) -> impl IntoView {
    view! {
        <section class="run-header" data-testid="run-header">
            <h2>
                <span class="entrypoint">{header.entrypoint}</span>
                <span class="file-name">{file_name}</span>
            </h2>
            <dl class="facts">
                {header
                    .facts
                    .into_iter()
                    .map(|(k, v)| view! { <div><dt>{k}</dt><dd>{v}</dd></div> })
                    .collect_view()}
            </dl>
            <ul class="tags" aria-label="tags">
                {header
                    .tags
                    .into_iter()
                    .map(|(k, v)| view! { <li class="tag">{k}" = "{v}</li> })
                    .collect_view()}
            </ul>
        </section>
    }
}
