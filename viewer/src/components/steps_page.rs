//! A step set on the page: the step shown in detail as a trace view with the set's heading,
//! findings and steps tab ([`StepsPage`]).

use std::sync::Arc;

use leptos::prelude::*;

use super::step_nav::StepsNav;
use super::trace_view::TraceView;
use super::{read_fragment, PageState, TabStates};
use crate::model::panel::ViewKind;
use crate::model::steps::StepsModel;
use crate::timeline::palette::Theme;

/// A step set: the step shown in detail (the URL's `step`, else the first captured) as a
/// trace view with the set's heading, findings and steps tab; showing another step builds
/// its view (and its model, the first time) on the state the steps share ([`PageState`],
/// [`TabStates`]).
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
    // The view's state and its tabs' grouping and sort outlive each step's view: showing
    // another step keeps the open tab, the chart's window, the range, the tables' order.
    let page = PageState::new(ViewKind::Steps, &file_name);
    let tab_states = TabStates::new();
    // A note on a range carried from another step lasts until the range changes.
    Effect::new(move |_| {
        let range = page.range.get();
        let stale = page
            .range_note
            .with_untracked(|n| n.as_ref().is_some_and(|n| n.range != range));
        if stale {
            page.range_note.set(None);
        }
    });
    let nav = StepsNav {
        model: StoredValue::new(model.clone()),
        page,
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
            <TraceView model=step file_name=file_name.clone() theme=theme findings=findings.clone() steps=model.clone()
                page=page tab_states=tab_states />
        }
        .into_any(),
        None => view! { <p class="load-error" role="alert">"This step could not be shown."</p> }.into_any(),
    }
    }
}
