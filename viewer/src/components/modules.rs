//! The modules panel.

use leptos::prelude::*;

use candle_trace_schema::paths::ModuleGrouping;

use super::tables::ShowAllRows;
use super::TraceContext;
use crate::model::modules::{NO_MODULE_SPANS, SHOWN_ROWS};

/// Module spans by module path (default) or by leaf name: calls, total, self, mean and share
/// of the measured total, heaviest first (`candle-trace query --kind modules`), the heaviest
/// 50 until "Show all". Without module spans, says how to capture them.
#[component]
pub fn ModulesView() -> impl IntoView {
    let Some(ctx) = use_context::<TraceContext>() else {
        return ().into_any();
    };
    if ctx.model.modules.is_empty() {
        return view! {
            <section class="modules panel" data-testid="modules">
                <h3>"Modules"</h3>
                <p class="muted" data-testid="modules-empty">{NO_MODULE_SPANS}</p>
            </section>
        }
        .into_any();
    }
    let by = RwSignal::new(ModuleGrouping::Path);
    let show_all = RwSignal::new(false);
    let model = ctx.model.clone();
    let total = Signal::derive({
        let model = model.clone();
        move || model.modules.rows(by.get()).len()
    });
    let by_name = move || by.get() == ModuleGrouping::Name;
    view! {
        <section class="modules panel" data-testid="modules">
            <div class="table-bar">
                <h3>"Modules"</h3>
                <label>
                    "group by "
                    <select data-testid="modules-by" data-value=move || if by_name() { "name" } else { "path" }
                        on:change=move |ev| by.set(if event_target_value(&ev) == "name" { ModuleGrouping::Name } else { ModuleGrouping::Path })>
                        <option value="path" selected=true>"module path"</option>
                        <option value="name">"leaf name"</option>
                    </select>
                </label>
            </div>
            <p class="muted">"Module spans (span_kind module) by their place in the model, or every place of a leaf name together; self = total less the spans inside; share = total / measured total."</p>
            <table>
                <thead><tr>
                    <th scope="col">{move || if by_name() { "module" } else { "module path" }}</th>
                    <th scope="col">"calls"</th><th scope="col">"total"</th><th scope="col">"self"</th>
                    <th scope="col">"mean"</th><th scope="col">"share"</th>
                </tr></thead>
                <tbody>
                    {move || {
                        let rows = model.modules.rows(by.get());
                        let n = if show_all.get() { rows.len() } else { SHOWN_ROWS };
                        rows.iter().take(n).map(|r| view! {
                            <tr data-testid="module-row" data-key=r.key.clone() data-calls=r.calls.to_string()
                                data-total=r.total_ns.to_string() data-self=r.self_ns.to_string()>
                                <th scope="row" class="name">{r.key.clone()}</th>
                                <td class="num">{r.calls}</td>
                                <td class="num">{r.total.clone()}</td>
                                <td class="num">{r.self_time.clone()}</td>
                                <td class="num">{r.mean.clone()}</td>
                                <td class="num share">
                                    <span class="share-bar" aria-hidden="true" style:width=format!("{:.2}%", r.share_pct)></span>
                                    {r.share.clone()}
                                </td>
                            </tr>
                        }).collect_view()
                    }}
                </tbody>
            </table>
            <ShowAllRows testid="modules" noun=Signal::derive(move || if by_name() { "module names" } else { "module paths" })
                total=total show_all=show_all />
        </section>
    }
    .into_any()
}
