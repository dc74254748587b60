//! The steps view: several per-step captures of one run side by side — per-step totals and
//! phases, the spread (median, p90, MAD) of every phase and module path, outlier steps with
//! what made them slow, and shape churn. Everything is from [`crate::model::steps`].

use std::sync::Arc;

use leptos::prelude::*;

use super::tables::ShowAllRows;
use crate::model::modules::SHOWN_ROWS;
use crate::model::steps::{outlier_rule_text, SpreadLine, StepLine, StepsModel};

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

/// The heading of a step set.
#[component]
pub fn StepsHeading(
    /// The set.
    model: Arc<StepsModel>,
) -> impl IntoView {
    view! {
        <section class="run-header">
            <h2>{format!("{} steps of run ", model.steps.len())} <span class="file-name">{model.run_id.clone()}</span></h2>
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
    let (detail_step, detail_file) = model.detail_step.clone();
    view! {
        <section class="steps panel" data-testid="steps" data-steps=model.steps.len().to_string()>
            <h3>"Steps"</h3>
            <table data-testid="steps-table">
                <thead><tr>
                    <th scope="col">"step"</th><th scope="col">"file"</th><th scope="col">"total"</th>
                    <th scope="col">"forward"</th><th scope="col">"backward"</th><th scope="col">"optimizer"</th>
                    <th scope="col">"other"</th><th scope="col">"diagnostics"</th><th scope="col">"outlier"</th>
                </tr></thead>
                <tbody>
                    {steps.iter().map(|s| {
                        let phases = s.phases_ns.map(|p| p.map(|v| v.to_string()).join(",")).unwrap_or_default();
                        let [f, b, o, other] = s.phases.clone();
                        view! {
                            <tr data-testid="step-row" class:problem=s.outlier data-step=s.step.clone() data-file=s.file.clone()
                                data-total=s.total_ns.map(|t| t.to_string()).unwrap_or_default() data-phases=phases data-outlier=s.outlier.to_string()>
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
                        {model.outliers.iter().map(|o| view! {
                            <li data-testid="steps-outlier" data-step=o.step.clone() data-excess=o.excess_ns.to_string()
                                data-reasons=o.reasons.join("; ")>
                                {o.text.clone()}
                                {(!o.reasons.is_empty()).then(|| format!(" — above their medians: {}", o.reasons.join(", ")))}
                            </li>
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
            <h3 data-testid="steps-detail" data-step=detail_step.clone()>
                {format!("Step {detail_step} in detail ({detail_file}, the first captured; the findings above read it, except the outlier step)")}
            </h3>
        </section>
    }
}
