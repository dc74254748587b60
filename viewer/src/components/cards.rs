//! Summary cards.

use leptos::prelude::*;

use crate::model::summary::{card_runs, SummaryCard};

/// A row of summary cards, each with `data-testid="summary-<field>"` and the exact integer in
/// `data-value`; a card whose source was off says so (`data-not-captured`) instead of showing 0.
/// A series (a profile's TTFT p50 … max) shows its label once, before its cards.
#[component]
pub fn SummaryCards(
    /// The cards, in display order.
    cards: Vec<SummaryCard>,
) -> impl IntoView {
    view! {
        <section class="cards" aria-label="summary">
            {card_runs(&cards)
                .into_iter()
                .map(|(series, run)| match series {
                    Some(label) => view! {
                        <div class="card-series" role="group" aria-label=label>
                            <span class="card-label series-label">{label}</span>
                            {run.into_iter().map(|c| card_view(c, false)).collect_view()}
                        </div>
                    }
                    .into_any(),
                    None => run.into_iter().map(|c| card_view(c, true)).collect_view().into_any(),
                })
                .collect_view()}
        </section>
    }
}

/// One card: its value, then its label unless its series shows it.
fn card_view(c: SummaryCard, labelled: bool) -> impl IntoView {
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
            {labelled.then(|| view! { <div class="card-label">{c.label}</div> })}
        </div>
    }
}
