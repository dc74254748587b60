//! The modules panel.

use std::sync::Arc;

use leptos::prelude::*;

use candle_trace_schema::analysis::modules::ModuleGrouping;

use super::tables::ShowAllRows;
use super::TraceContext;
use crate::model::modules::{NO_MODULE_SPANS, SHOWN_ROWS};
use crate::model::profile_modules::NO_PROFILE_MODULE_SPANS;
use crate::model::ProfileModel;

/// The "group by module path / leaf name" choice of a modules table; its `data-value` is
/// `path` or `name`.
#[component]
fn GroupBySelect(
    /// The select's `data-testid`.
    testid: &'static str,
    /// The grouping it sets.
    by: RwSignal<ModuleGrouping>,
) -> impl IntoView {
    let by_name = move || by.get() == ModuleGrouping::Name;
    view! {
        <label>
            "group by "
            <select data-testid=testid data-value=move || if by_name() { "name" } else { "path" }
                on:change=move |ev| by.set(if event_target_value(&ev) == "name" { ModuleGrouping::Name } else { ModuleGrouping::Path })>
                <option value="path" selected=true>"module path"</option>
                <option value="name">"leaf name"</option>
            </select>
        </label>
    }
}

/// Module spans by module path (default) or by leaf name: calls, total, self, mean and share
/// of the measured total, heaviest first (`candle-trace query --kind modules`), the heaviest
/// 50 until "Show all". Without module spans, says how to capture them.
#[component]
pub fn ModulesView() -> impl IntoView {
    let Some(ctx) = use_context::<TraceContext>() else {
        return ().into_any();
    };
    if ctx.model.modules().is_empty() {
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
        move || model.modules().rows(by.get()).len()
    });
    let by_name = move || by.get() == ModuleGrouping::Name;
    view! {
        <section class="modules panel" data-testid="modules">
            <div class="table-bar">
                <h3>"Modules"</h3>
                <GroupBySelect testid="modules-by" by=by />
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
                        let rows = model.modules().rows(by.get());
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

/// The module spans of an inference profile's forward calls, across every request, by module
/// path (default) or by leaf name: calls, total, mean and the requests they occur in, heaviest
/// first (`candle-trace query PROFILE --kind modules`), the heaviest 50 until "Show all".
/// Without module spans, says how to get them.
#[component]
pub fn ProfileModulesView(
    /// The profile's view models (this reads `modules`).
    model: Arc<ProfileModel>,
) -> impl IntoView {
    let panel = &model.modules;
    if panel.is_empty() {
        let unplaced = panel.has_module_events().then(|| panel.totals_text());
        return view! {
            <section class="modules panel" data-testid="profile-modules">
                <h3>"Modules"</h3>
                <p class="muted" data-testid="profile-modules-empty">{NO_PROFILE_MODULE_SPANS}</p>
                {unplaced.map(|t| view! { <p class="muted">{t}</p> })}
            </section>
        }
        .into_any();
    }
    let by = RwSignal::new(ModuleGrouping::Path);
    let show_all = RwSignal::new(false);
    let total = Signal::derive({
        let model = model.clone();
        move || model.modules.rows(by.get()).len()
    });
    let by_name = move || by.get() == ModuleGrouping::Name;
    let totals = panel.totals_text();
    view! {
        <section class="modules panel" data-testid="profile-modules">
            <div class="table-bar">
                <h3>"Modules"</h3>
                <GroupBySelect testid="profile-modules-by" by=by />
            </div>
            <p class="muted" data-testid="profile-modules-totals">
                {totals}
                ". Module spans (span_kind module) of every request's prefill and decode forward calls, by their place in the model or every place of a leaf name together; requests = requests with at least one such span."
            </p>
            <table>
                <thead><tr>
                    <th scope="col">{move || if by_name() { "module" } else { "module path" }}</th>
                    <th scope="col">"calls"</th><th scope="col">"total"</th>
                    <th scope="col">"mean"</th><th scope="col">"requests"</th>
                </tr></thead>
                <tbody>
                    {move || {
                        let rows = model.modules.rows(by.get());
                        let n = if show_all.get() { rows.len() } else { SHOWN_ROWS };
                        rows.iter().take(n).map(|r| view! {
                            <tr data-testid="profile-module-row" data-key=r.key.clone() data-calls=r.calls.to_string()
                                data-total=r.total_ns.to_string() data-mean=r.mean_ns.to_string()
                                data-requests=r.requests.to_string()>
                                <th scope="row" class="name">{r.key.clone()}</th>
                                <td class="num">{r.calls}</td>
                                <td class="num">{r.total.clone()}</td>
                                <td class="num">{r.mean.clone()}</td>
                                <td class="num">{r.requests}</td>
                            </tr>
                        }).collect_view()
                    }}
                </tbody>
            </table>
            <ShowAllRows testid="profile-modules" noun=Signal::derive(move || if by_name() { "module names" } else { "module paths" })
                total=total show_all=show_all />
        </section>
    }
    .into_any()
}
