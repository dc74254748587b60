//! Summary cards.

use leptos::prelude::*;

use crate::model::summary::SummaryCard;

/// A row of summary cards, each with `data-testid="summary-<field>"` and the exact integer in
/// `data-value`; a card whose source was off says so (`data-not-captured`) instead of showing 0.
#[component]
pub fn SummaryCards(
    /// The cards, in display order.
    cards: Vec<SummaryCard>,
) -> impl IntoView {
    view! {
        <section class="cards" aria-label="summary">
            {cards
                .into_iter()
                .map(|c| {
                    view! {
                        <div
                            class="card"
                            class:not-captured=c.not_captured.is_some()
                            data-not-captured=c.not_captured.clone()
                            data-testid=format!("summary-{}", c.field)
                            data-value=c.value.to_string()
                            title=format!("{} = {}", c.field, c.value)
                        >
                            <div class="card-value">{c.display}</div>
                            <div class="card-label">{c.label}</div>
                        </div>
                    }
                })
                .collect_view()}
        </section>
    }
}
