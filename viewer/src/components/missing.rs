//! A panel without data: what is missing and how to capture it, instead of no panel.

use leptos::prelude::*;

use super::capture::NotCapturedNote;
use crate::model::missing::Panel;

/// A panel without data: its title, then "not captured (… off)" when the file says the
/// source was off, else what the file lacks; then how a program captures it.
#[component]
pub fn MissingPanel(
    /// Which panel.
    panel: Panel,
    /// The section's class.
    class: &'static str,
    /// The section's `data-testid` (the panel's own).
    testid: &'static str,
    /// The panel's title.
    title: &'static str,
    /// The file's "not captured (… off)" for the panel's source, if it says so.
    not_captured: Option<String>,
) -> impl IntoView {
    let what = panel.as_str();
    view! {
        <section class=class data-testid=testid>
            <h3>{title}</h3>
            {match not_captured {
                Some(text) => view! { <NotCapturedNote what=what text=text /> }.into_any(),
                None => view! { <p class="muted" data-testid="panel-missing" data-what=what>{panel.missing()}</p> }.into_any(),
            }}
            <p class="muted" data-testid="capture-how" data-what=what>{panel.how()}</p>
        </section>
    }
}
