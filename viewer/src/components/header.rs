//! The compact header of a view: the run's identity on one line (its other facts and tags one
//! click away), and the findings count, which opens the findings tab.

use std::sync::Arc;

use leptos::prelude::*;
use wasm_bindgen::JsCast;

use super::PageState;
use crate::model::findings::FindingsPanel;
use crate::model::header::RunHeader;
use crate::model::panel::Tab;

/// The `name` shared by the header's dropdowns (run details, diagnostics, capture warnings, the
/// top bar's load timings, and the compare chart's alignment): the browser keeps at most one of
/// them open, so their bodies never cover each other; Escape closes the open one
/// ([`close_on_escape`]).
pub const HEADER_POPOVERS: &str = "header-popover";

/// Escape in an open header dropdown (a `<details>` named [`HEADER_POPOVERS`], on which the
/// handler sits) closes it and gives the focus to its summary, as a menu does.
pub fn close_on_escape(ev: &web_sys::KeyboardEvent) {
    if ev.key() != "Escape" {
        return;
    }
    let Some(details) = ev
        .current_target()
        .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
    else {
        return;
    };
    let dropdown = details.get_attribute("name").as_deref() == Some(HEADER_POPOVERS);
    if !dropdown || !details.has_attribute("open") {
        return;
    }
    ev.prevent_default();
    let _ = details.remove_attribute("open");
    let summary = details
        .query_selector(":scope > summary")
        .ok()
        .flatten()
        .and_then(|s| s.dyn_into::<web_sys::HtmlElement>().ok());
    if let Some(summary) = summary {
        let _ = summary.focus();
    }
}

/// Facts shown on the header's line; the rest (and the tags) are under "run details".
const INLINE_FACTS: [&str; 4] = ["phase", "device", "capture step", "timing mode"];

/// What was captured: entry point and file, then phase, device, capture step and timing on
/// one line; every fact (timestamp, versions, ids) and the tags under "run details".
#[component]
pub fn RunHeaderView(
    /// The header facts.
    header: RunHeader,
    /// The opened file's name.
    file_name: String,
    /// More of the line (the diagnostics).
    #[prop(optional)]
    children: Option<Children>,
) -> impl IntoView {
    let inline: Vec<(&'static str, String)> = header
        .facts
        .iter()
        .filter(|(k, _)| INLINE_FACTS.contains(k))
        .cloned()
        .collect();
    view! {
        <div class="run-header doc-line" data-testid="run-header">
            <h2>
                <span class="entrypoint">{header.entrypoint}</span>
                <span class="file-name">{file_name}</span>
            </h2>
            <dl class="facts inline-facts">
                {inline.into_iter().map(|(k, v)| view! { <div><dt>{k}</dt><dd>{v}</dd></div> }).collect_view()}
            </dl>
            <details class="run-details dropdown" name=HEADER_POPOVERS data-testid="run-details"
                on:keydown=move |ev| close_on_escape(&ev)>
                <summary>"run details"</summary>
                <div class="dropdown-body">
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
                </div>
            </details>
            {children.map(|c| c())}
        </div>
    }
}

/// `3 findings`: opens the findings tab (`data-value` is the count shown).
#[component]
pub fn FindingsCount(
    /// The findings of the view.
    panel: Arc<FindingsPanel>,
) -> impl IntoView {
    let page = use_context::<PageState>();
    let n = panel.rows.len();
    let text = match n {
        0 => "no findings".to_string(),
        1 => "1 finding".to_string(),
        n => format!("{n} findings"),
    };
    view! {
        <button type="button" class="findings-count" class:has-findings={n > 0} data-testid="findings-count"
            data-value=n.to_string()
            on:click=move |_| {
                if let Some(p) = page {
                    p.tab.set(Tab::Findings);
                }
            }>
            {text}
        </button>
    }
}
