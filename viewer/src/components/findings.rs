//! The findings panel: the schema's ranked findings of the opened run, each with its evidence
//! and a link to where it shows (a span selected in the timeline, or a table row scrolled to
//! and outlined). What the links lead to is resolved in [`crate::model::findings`].

use std::sync::Arc;

use leptos::prelude::*;

use candle_trace_schema::analysis::findings::Link;

use super::step_nav::StepsNav;
use super::targets::go_to;
use super::{PageState, TraceContext};
use crate::model::findings::FindingsPanel;

/// The `data-link-*` attributes of a finding: the schema's link as it is.
fn link_attrs(link: Option<&Link>) -> [Option<String>; 5] {
    match link {
        None => [None, None, None, None, None],
        Some(Link::Span { id, line }) => [
            Some("span".into()),
            None,
            None,
            Some(id.clone()),
            Some(line.to_string()),
        ],
        Some(Link::Row { table, key }) => [
            Some("row".into()),
            Some(table.clone()),
            Some(key.clone()),
            None,
            None,
        ],
    }
}

/// The run's findings, most at stake first, with the notes of rules that had too little data.
/// On a trace page (a [`TraceContext`] provided) a span link selects the span.
#[component]
pub fn FindingsView(
    /// The panel to show.
    panel: Arc<FindingsPanel>,
) -> impl IntoView {
    let ctx = use_context::<TraceContext>();
    let page = use_context::<PageState>();
    let nav = use_context::<StepsNav>();
    // The finding whose place is not on the page right now (its note is shown).
    let missing: RwSignal<Option<usize>> = RwSignal::new(None);
    let items = panel
        .rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let [to, table, key, id, line] = link_attrs(r.link.as_ref());
            let title = match r.target.clone() {
                Some(target) => {
                    let ctx = ctx.clone();
                    view! {
                        <button type="button" class="link finding-title" data-testid="finding-link"
                            on:click=move |_| {
                                // In a step set, a link into another step shows that step
                                // first, whose view follows it.
                                if let (Some(nav), Some(p)) = (nav, page) {
                                    if nav.follow_in_step(i, &target, p) {
                                        return;
                                    }
                                }
                                let target = target.clone();
                                let ctx = ctx.clone();
                                leptos::task::spawn_local(async move {
                                    let found = go_to(target, page, ctx).await;
                                    let _ = missing.try_set((!found).then_some(i));
                                });
                            }>
                            {r.title.clone()}
                        </button>
                    }
                    .into_any()
                }
                None => view! { <span class="finding-title">{r.title.clone()}</span> }.into_any(),
            };
            view! {
                <li class="finding" data-testid="finding" data-rule=r.rule.clone()
                    data-stake-kind=r.stake_kind data-stake=r.stake_value.to_string()
                    data-link-to=to data-link-table=table data-link-key=key data-link-id=id data-link-line=line
                    data-followable=r.target.is_some().to_string()>
                    {title}
                    <span class="stake" data-testid="finding-stake">" — at stake " {r.stake.clone()}</span>
                    <ul class="evidence">
                        {r.evidence.iter().map(|e| view! { <li data-testid="finding-evidence">{e.clone()}</li> }).collect_view()}
                    </ul>
                    {nav.and_then(|n| n.finding_reads(i)).map(|t| view! {
                        <p class="muted finding-where" data-testid="finding-step">{t}</p>
                    })}
                    {r.target_text.clone().map(|t| view! {
                        <p class="muted finding-where" data-testid="finding-where">
                            {if r.target.is_some() { "Shows in " } else { "Names " }} {t}
                            {r.target.is_none().then_some(", which this page does not show")}
                        </p>
                    })}
                    {move || (missing.get() == Some(i)).then(|| view! {
                        <p class="muted" data-testid="finding-missing">
                            "That row is not on the page now: the table may be grouped another way, filtered or shortened."
                        </p>
                    })}
                </li>
            }
        })
        .collect_view();
    view! {
        <section class="findings-panel panel" data-testid="findings-panel"
            data-count=panel.rows.len().to_string() data-left-out=panel.left_out.to_string()>
            <h3>"Findings"</h3>
            {panel.rows.is_empty().then(|| view! { <p class="muted" data-testid="findings-none">{panel.empty_text()}</p> })}
            <ol class="findings">{items}</ol>
            {(panel.left_out > 0).then(|| view! {
                <p class="muted" data-testid="findings-left-out" data-value=panel.left_out.to_string()>
                    {format!("{} more left out (the ranking keeps the {} with the most at stake).", panel.left_out, panel.rows.len())}
                </p>
            })}
            {(!panel.notes.is_empty()).then(|| view! {
                <h4>"Rules without enough data"</h4>
                <ul class="finding-notes">
                    {panel.notes.iter().map(|n| view! { <li data-testid="finding-note">{n.clone()}</li> }).collect_view()}
                </ul>
            })}
        </section>
    }
}
