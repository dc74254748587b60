//! A step set on the page: the step shown in detail as a trace view with the set's heading,
//! findings and steps tab ([`StepsPage`]).

use std::sync::Arc;

use leptos::prelude::*;

use super::read_fragment;
use super::step_nav::StepsNav;
use super::trace_view::TraceView;
use crate::model::steps::StepsModel;
use crate::timeline::palette::Theme;

/// A step set: the step shown in detail (the URL's `step`, else the first captured) as a
/// trace view with the set's heading, findings and steps tab; showing another step builds
/// its view (and its model, the first time).
#[component]
pub fn StepsPage(
    /// The set.
    model: Arc<StepsModel>,
    /// The set's title (its files' names).
    file_name: String,
    /// Light or dark.
    theme: Signal<Theme>,
) -> impl IntoView {
    let state = read_fragment();
    let step = state.step.filter(|_| state.files == file_name);
    let nav = StepsNav {
        model: StoredValue::new(model.clone()),
        shown: RwSignal::new(model.position_of(step.as_deref())),
        tab: StoredValue::new(None),
        focus: StoredValue::new(None),
        follow: StoredValue::new(None),
    };
    provide_context(nav);
    let findings = Arc::new(model.findings.clone());
    move || {
        match model.model(nav.shown.get()) {
        Some(step) => view! {
            <TraceView model=step file_name=file_name.clone() theme=theme findings=findings.clone() steps=model.clone() />
        }
        .into_any(),
        None => view! { <p class="load-error" role="alert">"This step could not be shown."</p> }.into_any(),
    }
    }
}
