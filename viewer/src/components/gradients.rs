//! The gradient panel.

use leptos::prelude::*;

use candle_trace_schema::analysis::gradients::gradient_groups;

use super::missing::MissingPanel;
use super::rows::LinkedRows;
use super::sortable::sort_header;
use super::TraceContext;
use crate::model::gradients::GradientSort;
use crate::model::links::module_spans;
use crate::model::missing::Panel;
use crate::model::sort::SortState;

/// Gradient counts per state, the norm histogram (log scale) and every parameter, sortable,
/// with a filter for problems (missing, zero, non-finite). A module's row links to its module's
/// spans, the backward ones where there are some; a module without a span (an embedding or
/// head the trace did not wrap in a module span) is a plain row ([`LinkedRows`]).
#[component]
pub fn GradientView() -> impl IntoView {
    let Some(ctx) = use_context::<TraceContext>() else {
        return ().into_any();
    };
    let g = ctx.model.gradients.clone();
    if g.total == 0 {
        // No gradient records: "not captured (gradients off)" when the file says so, else that
        // there are none; and how to capture them (no per-state counts shown).
        let not_captured = ctx.model.capture.not_captured.gradients.clone();
        return view! {
            <MissingPanel panel=Panel::Gradients class="gradients panel" testid="gradients" title="Gradients" not_captured=not_captured />
        }
        .into_any();
    }
    let table = ctx.model.gradient_table().clone();
    let sort = RwSignal::new(SortState::new(GradientSort::Review, false));
    let only_problems = RwSignal::new(false);
    let order = {
        let table = table.clone();
        Memo::new(move |_| {
            let s = sort.get();
            table.view(s.column, s.descending, only_problems.get())
        })
    };
    let rows_table = table.clone();
    // The groups' rows are `gradient_groups`' in order (`model::gradients`).
    let group_links = {
        let groups = gradient_groups(&ctx.model.doc.gradients);
        let modules: Vec<&str> = groups.iter().map(|group| group.module.as_str()).collect();
        let spans = module_spans(&ctx.model.doc, ctx.model.module_paths(), &modules);
        LinkedRows::of_trace(&ctx, spans)
    };
    view! {
        <section class="gradients panel" data-testid="gradients">
            <h3>"Gradients"</h3>
            <ul class="tags">
                {g.counts.iter().map(|(s, n)| view! {
                    <li class="tag" class:problem={*s != "present" && *n > 0} data-testid=format!("gradients-{s}") data-value=n.to_string()>{*s} " " {*n}</li>
                }).collect_view()}
            </ul>
            {g.finding.clone().map(|f| view! { <p class="finding" data-testid="gradients-finding">{f}</p> })}
            {(!g.groups.is_empty()).then(|| view! {
                <h4>"By module"</h4>
                <table class="gradient-groups" data-testid="gradient-groups">
                    <thead><tr>
                        <th scope="col">"module"</th><th scope="col">"params"</th>
                        <th scope="col">"present"</th><th scope="col">"missing"</th>
                        <th scope="col">"zero"</th><th scope="col">"non-finite"</th>
                    </tr></thead>
                    <tbody {..group_links.body_attrs()}>
                        {g.groups.iter().enumerate().map(|(pos, r)| view! {
                            <tr class:problem=r.problem data-testid="gradient-group" data-module=r.module.clone() data-flow=r.flow
                                data-row=pos.to_string() {..group_links.linked_attrs(pos)}>
                                <td class="name">{r.module.clone()}</td><td>{r.params}</td><td>{r.present}</td>
                                <td>{r.missing}</td><td>{r.zero}</td><td>{r.non_finite}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            })}
            <h4>"Norm distribution (log scale, one bar per decade)"</h4>
            {if table.bars.is_empty() {
                view! { <p class="muted">"No finite non-zero norms."</p> }.into_any()
            } else {
                view! {
                    <div class="norm-hist" role="img" aria-label="gradient norms per decade">
                        {table.bars.iter().map(|b| view! {
                            <div class="norm-col" data-testid="norm-bin" data-exponent=b.exponent.to_string() data-value=b.count.to_string()
                                title=format!("[{}, 1e{}): {}", b.label, b.exponent + 1, b.count)>
                                <span class="norm-count">{b.count}</span>
                                <div class="norm-bar" style:height=format!("{:.1}%", b.height_pct)></div>
                                <span class="norm-label">{b.label.clone()}</span>
                            </div>
                        }).collect_view()}
                    </div>
                }.into_any()
            }}
            <p class="muted">
                {format!("Not on the chart: {} zero, {} not finite, {} without a norm.", table.zero_norms, table.not_finite_norms, table.without_norm)}
            </p>
            <label>
                <input type="checkbox" data-testid="gradients-only-problems"
                    prop:checked=move || only_problems.get()
                    on:change=move |ev| only_problems.set(event_target_checked(&ev)) />
                " only problems (missing, zero, non-finite)"
            </label>
            <button type="button" class="link" on:click=move |_| sort.set(SortState::new(GradientSort::Review, false))>"review order"</button>
            <table>
                <thead><tr>
                    {[("parameter", GradientSort::Parameter), ("state", GradientSort::State), ("norm", GradientSort::Norm)]
                        .into_iter()
                        .map(|(label, column)| {
                            // Norms start largest first; names and states problems/A first.
                            let first_desc = column == GradientSort::Norm;
                            sort_header(label, column, sort, first_desc, Some(format!("gradients-sort-{label}")), false)
                        })
                        .collect_view()}
                </tr></thead>
                <tbody>
                    {move || {
                        let t = rows_table.clone();
                        order.get().into_iter().take(500).map(|i| {
                            let r = &t.rows[i];
                            view! {
                                <tr class:problem=r.problem data-testid="gradient-row" data-state=r.state
                                    data-parameter=r.parameter.clone()
                                    data-norm=r.norm.map(|n| n.to_string()).unwrap_or_default()>
                                    <td>{r.parameter.clone()}</td>
                                    <td class=format!("state-{}", r.state)>{r.state}</td>
                                    <td class="num">{r.norm_text.clone()}</td>
                                </tr>
                            }
                        }).collect_view()
                    }}
                </tbody>
            </table>
            {move || (order.get().len() > 500).then(|| view! { <p class="muted">{format!("{} more not shown", order.get().len() - 500)}</p> })}
        </section>
    }
    .into_any()
}
