//! What was captured, and what was not.

use leptos::prelude::*;

use super::header::{close_on_escape, HEADER_POPOVERS};
use super::TraceContext;
use crate::model::capture::{CapturePanel, NOT_STATED};

/// The "captured" chips of the header: each source on or off with its event count
/// (`data-testid="capture-source"`, `data-source`, `data-on`, `data-value`), then one chip
/// counting the dropped events and capture warnings, which opens them; "capture sources not
/// stated" for files without the line.
#[component]
pub fn CaptureSourcesView() -> impl IntoView {
    let Some(ctx) = use_context::<TraceContext>() else {
        return ().into_any();
    };
    let c = ctx.model.capture.clone();
    if !c.stated {
        return view! {
            <section class="capture-sources" data-testid="capture-sources" data-stated="false">
                <p class="muted">{NOT_STATED}</p>
            </section>
        }
        .into_any();
    }
    view! {
        <section class="capture-sources" data-testid="capture-sources" data-stated="true">
            <div class="captured">
                "Captured: "
                {if c.sources.is_empty() {
                    view! { <span class="muted">"no sources listed"</span> }.into_any()
                } else {
                    view! {
                        <ul class="tags">
                            {c.sources.iter().map(|s| view! {
                                <li class="tag" class:off=!s.on data-testid="capture-source" data-source=s.source.clone()
                                    data-on=s.on.to_string() data-value=s.events.to_string()>{s.text.clone()}</li>
                            }).collect_view()}
                        </ul>
                    }.into_any()
                }}
            </div>
            {capture_alerts(&c)}
        </section>
    }
    .into_any()
}

/// The chip `2 capture warnings` (dropped events count as one), whose dropdown lists them
/// (`data-testid="capture-dropped"`, `capture-warning`); nothing when there are none.
fn capture_alerts(c: &CapturePanel) -> Option<impl IntoView> {
    c.alerts_label().map(|label| {
        view! {
            <details class="capture-alerts dropdown" name=HEADER_POPOVERS data-testid="capture-alerts"
                on:keydown=move |ev| close_on_escape(&ev)>
                <summary class="capture-warning-chip">{label}</summary>
                <div class="dropdown-body">
                    {c.dropped.clone().map(|d| view! {
                        <p class="capture-warning" data-testid="capture-dropped" data-value=c.events_dropped.to_string()>{d}</p>
                    })}
                    {c.warnings.iter().map(|w| view! {
                        <p class="capture-warning" role="alert" data-testid="capture-warning">"Capture warning: " {w.clone()}</p>
                    }).collect_view()}
                </div>
            </details>
        }
    })
}

/// A panel's "not captured (<source> off)" in place of a 0.
#[component]
pub fn NotCapturedNote(
    /// What is missing: `ops`, `memory` or `gradients` (`data-what`).
    what: &'static str,
    /// The sentence (`schema::analysis::summary::not_captured`'s wording).
    text: String,
) -> impl IntoView {
    view! { <p class="not-captured" data-testid="not-captured" data-what=what>{text}</p> }
}
