//! The steps view: several per-step captures of one run side by side — per-step totals and
//! phases, the spread (median, p90, MAD) of every phase and module path, outlier steps with
//! what made them slow, and shape churn — and one step at a time in detail ([`StepsPage`]):
//! a step's row, an outlier line or the step picker in the heading shows that step's chart,
//! header and trace tabs. Everything is from [`crate::model::steps`].

use std::sync::Arc;

use leptos::prelude::*;
use wasm_bindgen::JsCast;

use super::frame::next_frame;
use super::step_nav::{FocusNext, StepsNav};
use super::tables::ShowAllRows;
use super::PageState;
use crate::model::modules::SHOWN_ROWS;
use crate::model::panel::Tab;
use crate::model::steps::{outlier_rule_text, SpreadLine, StepLine, StepsModel};

/// The element matching `selector` in the page, as an HTML element.
fn html_element(selector: &str) -> Option<web_sys::HtmlElement> {
    web_sys::window()?
        .document()?
        .query_selector(selector)
        .ok()??
        .dyn_into()
        .ok()
}

/// `data-per-step`: the per-step ns, comma-separated, empty where a step has none.
fn per_step_attr(line: &SpreadLine) -> String {
    line.per_step_ns
        .iter()
        .map(|v| v.map_or_else(String::new, |n| n.to_string()))
        .collect::<Vec<_>>()
        .join(",")
}

/// One row of a spread table (phase, module path).
fn spread_row(line: &SpreadLine, steps: &[StepLine], testid: &'static str) -> impl IntoView {
    let s = line.spread;
    let [median, p90, mad, min, max] = line.cells.clone();
    view! {
        <tr data-testid=testid data-key=line.key.clone() data-count=s.count.to_string()
            data-median=s.median.to_string() data-p90=s.p90.to_string() data-mad=s.mad.to_string()
            data-min=s.min.to_string() data-max=s.max.to_string() data-per-step=per_step_attr(line)
            title=line.per_step_text(steps)>
            <th scope="row" class="name">{line.key.clone()}</th>
            <td class="num">{s.count}</td>
            <td class="num">{median}</td><td class="num">{p90}</td><td class="num">{mad}</td>
            <td class="num">{min}</td><td class="num">{max}</td>
        </tr>
    }
}

fn spread_head(first: &'static str) -> impl IntoView {
    view! {
        <thead><tr>
            <th scope="col">{first}</th><th scope="col">"steps"</th><th scope="col">"median"</th>
            <th scope="col">"p90"</th><th scope="col">"MAD"</th><th scope="col">"min"</th><th scope="col">"max"</th>
        </tr></thead>
    }
}

/// The heading of a step set: the run, the step shown in detail and a picker for another.
#[component]
pub fn StepsHeading(
    /// The set.
    model: Arc<StepsModel>,
) -> impl IntoView {
    let nav = use_context::<StepsNav>();
    let page = use_context::<PageState>();
    let shown = nav.map_or(0, |n| n.shown.get_untracked());
    let (step, file) = model
        .steps
        .get(shown)
        .map_or_else(Default::default, |s| (s.step.clone(), s.file.clone()));
    let picker = NodeRef::<leptos::html::Select>::new();
    Effect::new(move |_| {
        if let (Some(el), Some(nav)) = (picker.get(), nav) {
            if nav.take_focus(FocusNext::Picker) {
                let _ = el.focus();
            }
        }
    });
    let on_change = move |ev: leptos::ev::Event| {
        let pos = event_target_value(&ev).parse::<usize>().ok();
        if let (Some(pos), Some(nav), Some(page)) = (pos, nav, page) {
            nav.show(pos, page.tab.get_untracked(), Some(FocusNext::Picker));
        }
    };
    view! {
        <section class="run-header steps-heading" data-testid="steps-heading" data-step=step.clone() data-file=file.clone()>
            <h2>{format!("{} steps of run ", model.steps.len())} <span class="file-name">{model.run_id.clone()}</span></h2>
            <label class="steps-shown">
                "showing step "
                <select node_ref=picker data-testid="steps-shown" on:change=on_change
                    title="the step whose chart, header and tabs are shown (or click a row of the Steps tab)">
                    {model.steps.iter().enumerate().map(|(pos, s)| view! {
                        <option value=pos.to_string() selected=pos == shown>
                            {format!("{} ({}{})", s.step, s.file, if s.outlier { ", outlier" } else { "" })}
                        </option>
                    }).collect_view()}
                </select>
            </label>
        </section>
    }
}

/// Per-step totals and phases, spreads, outliers and shape churn of a step set.
#[component]
pub fn StepsView(
    /// The set.
    model: Arc<StepsModel>,
) -> impl IntoView {
    let show_all = RwSignal::new(false);
    let modules_total = model.modules.len();
    let steps = model.steps.clone();
    let module_rows = {
        let model = model.clone();
        move || {
            let n = if show_all.get() {
                model.modules.len()
            } else {
                SHOWN_ROWS
            };
            model
                .modules
                .iter()
                .take(n)
                .map(|l| spread_row(l, &model.steps, "steps-module"))
                .collect_view()
        }
    };
    let nav = use_context::<StepsNav>();
    let shown = nav.map_or(0, |n| n.shown.get_untracked());
    // Show the step at `pos`, keeping this tab open and the focus on its row.
    let show = move |pos: usize| {
        if let Some(nav) = nav {
            nav.show(pos, Tab::Steps, Some(FocusNext::Row));
        }
    };
    // This view was built for a step shown from its row: the row keeps the focus.
    if nav.is_some_and(|n| n.take_focus(FocusNext::Row)) {
        leptos::task::spawn_local(async {
            next_frame().await;
            if let Some(row) = html_element("[data-testid=step-row][aria-current=true]") {
                let _ = row.focus();
            }
        });
    }
    let detail = steps.get(shown).map(|s| {
        let first = if shown == 0 { ", the first captured" } else { "" };
        view! {
            <p data-testid="steps-detail" data-step=s.step.clone() data-file=s.file.clone()>
                {format!("Step {} in detail ({}{first}): the chart, the header and the other tabs show it. Click a step's row (or press Enter on it) or an outlier to show that step instead.", s.step, s.file)}
            </p>
        }
    });
    let position_of = {
        let steps = steps.clone();
        move |step: &str| steps.iter().position(|s| s.step == step)
    };
    view! {
        <section class="steps panel" data-testid="steps" data-steps=model.steps.len().to_string()>
            <h3>"Steps"</h3>
            {detail}
            <table data-testid="steps-table">
                <thead><tr>
                    <th scope="col">"step"</th><th scope="col">"file"</th><th scope="col">"total"</th>
                    <th scope="col">"forward"</th><th scope="col">"backward"</th><th scope="col">"optimizer"</th>
                    <th scope="col">"other"</th><th scope="col">"diagnostics"</th><th scope="col">"outlier"</th>
                </tr></thead>
                <tbody>
                    {steps.iter().enumerate().map(|(pos, s)| {
                        let phases = s.phases_ns.map(|p| p.map(|v| v.to_string()).join(",")).unwrap_or_default();
                        let [f, b, o, other] = s.phases.clone();
                        view! {
                            <tr data-testid="step-row" class:problem=s.outlier data-step=s.step.clone() data-file=s.file.clone()
                                data-total=s.total_ns.map(|t| t.to_string()).unwrap_or_default() data-phases=phases data-outlier=s.outlier.to_string()
                                aria-current=(pos == shown).then_some("true") tabindex="0"
                                title=format!("show step {} in detail", s.step)
                                on:click=move |_| show(pos)
                                on:keydown=move |ev: web_sys::KeyboardEvent| {
                                    if ev.key() == "Enter" {
                                        ev.prevent_default();
                                        show(pos);
                                    }
                                }>
                                <th scope="row">{s.step.clone()}</th>
                                <td class="name">{s.file.clone()}</td>
                                <td class="num">{s.total.clone()}</td>
                                <td class="num">{f}</td><td class="num">{b}</td><td class="num">{o}</td><td class="num">{other}</td>
                                <td>{s.diagnostics.clone()}</td>
                                <td>{if s.outlier { "outlier" } else { "" }}</td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
            {model.total.clone().map(|t| {
                let [median, p90, mad, _, _] = t.cells.clone();
                view! {
                    <p data-testid="steps-total" data-median=t.spread.median.to_string() data-p90=t.spread.p90.to_string()
                        data-mad=t.spread.mad.to_string()>
                        {format!("Total over the steps: median {median} · p90 {p90} · MAD {mad}")}
                    </p>
                }
            })}
            <h4>"Phases over the steps"</h4>
            <table data-testid="steps-phases">
                {spread_head("phase")}
                <tbody>{model.phases.iter().map(|l| spread_row(l, &model.steps, "steps-phase")).collect_view()}</tbody>
            </table>
            <h4>"Module paths over the steps, largest median first"</h4>
            {if modules_total == 0 {
                view! { <p class="muted" data-testid="steps-modules-empty">"No module spans in these steps."</p> }.into_any()
            } else {
                view! {
                    <table data-testid="steps-modules">
                        {spread_head("module path")}
                        <tbody>{module_rows}</tbody>
                    </table>
                    <ShowAllRows testid="steps-modules" noun="module paths" total=modules_total show_all=show_all />
                }.into_any()
            }}
            <p class="muted">"Median and p90 are nearest-rank percentiles (each one of the steps' values); MAD is the median absolute deviation from the median."</p>
            <h4>"Outlier steps"</h4>
            <p class="muted">{outlier_rule_text()}</p>
            {match (&model.outliers_reason, model.outliers.is_empty()) {
                (Some(why), _) => view! { <p class="muted" data-testid="steps-outliers-reason">{format!("Not looked for: {why}.")}</p> }.into_any(),
                (None, true) => view! { <p class="muted" data-testid="steps-outliers-none">"No outlier step."</p> }.into_any(),
                (None, false) => view! {
                    <ul class="outliers">
                        {model.outliers.iter().map(|o| {
                            let pos = position_of(&o.step);
                            view! {
                                <li data-testid="steps-outlier" data-step=o.step.clone() data-excess=o.excess_ns.to_string()
                                    data-reasons=o.reasons.join("; ")>
                                    <button type="button" class="link" data-testid="steps-outlier-show"
                                        title=format!("show step {} in detail", o.step)
                                        on:click=move |_| if let Some(pos) = pos { show(pos) }>
                                        {o.text.clone()}
                                    </button>
                                    {(!o.reasons.is_empty()).then(|| format!(" — above their medians: {}", o.reasons.join(", ")))}
                                </li>
                            }
                        }).collect_view()}
                    </ul>
                }.into_any(),
            }}
            <h4>"Shape churn"</h4>
            {if model.churn.is_empty() {
                view! { <p class="muted" data-testid="steps-churn-none">"No module path saw different shapes in different steps."</p> }.into_any()
            } else {
                view! {
                    <ul class="churn">
                        {model.churn.iter().map(|c| view! {
                            <li data-testid="steps-churn" data-path=c.path.clone()>
                                <span class="name">{c.path.clone()}</span> ": "
                                {c.variants.iter().map(|(shapes, at)| format!("{shapes} in step(s) {at}")).collect::<Vec<_>>().join(" | ")}
                            </li>
                        }).collect_view()}
                    </ul>
                }.into_any()
            }}
        </section>
    }
}
