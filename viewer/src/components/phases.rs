//! The training-phase panel.

use leptos::prelude::*;

use std::sync::Arc;

use candle_trace_schema::analysis::phases::measured_region;
use candle_trace_schema::analysis::range::{module_pairs_in, phases_in, TimeRange};
use candle_trace_schema::format::events::Pass;

use super::missing::MissingPanel;
use super::rows::LinkedRows;
use super::tables::ShowAllRows;
use super::{PageState, TraceContext};
use crate::model::links::{pair_spans, phase_spans};
use crate::model::missing::Panel;
use crate::model::modules::SHOWN_ROWS;
use crate::model::phases::PhasesPanel;

/// Forward / backward / optimizer / other of the measured region (a bar and a table), and
/// each module's forward time next to its backward time; while a range is selected on the
/// chart, of the part inside it. A phase's row links to its spans, a module's to its forward
/// and backward spans, in a range those that count in it ([`LinkedRows`]).
#[component]
pub fn PhasesView() -> impl IntoView {
    let Some(ctx) = use_context::<TraceContext>() else {
        return ().into_any();
    };
    let Some(page) = use_context::<PageState>() else {
        return view! { <PhasesOf panel=ctx.model.phases().clone() range=TimeRange::ALL /> }
            .into_any();
    };
    (move || {
        let panel = match page.time_range() {
            None => ctx.model.phases().clone(),
            Some(r) => {
                let doc = &ctx.model.doc;
                Arc::new(match phases_in(doc, r) {
                    Some(b) => PhasesPanel::of_parts(
                        doc,
                        &b,
                        module_pairs_in(doc, ctx.model.modules().paths(), r),
                    ),
                    None => PhasesPanel::default(),
                })
            }
        };
        view! { <PhasesOf panel=panel range=page.time_range().unwrap_or(TimeRange::ALL) /> }
    })
    .into_any()
}

/// The phases panel of `panel`.
#[component]
fn PhasesOf(
    /// The whole run's or a range's phases.
    panel: Arc<PhasesPanel>,
    /// The range its numbers count ([`TimeRange::ALL`]: the whole run); its rows link to the
    /// spans that count in it.
    range: TimeRange,
) -> impl IntoView {
    let p = panel;
    let Some(ctx) = use_context::<TraceContext>() else {
        return ().into_any();
    };
    let doc = &ctx.model.doc;
    let (Some(region), false) = (measured_region(doc), p.rows.is_empty()) else {
        return view! {
            <MissingPanel panel=Panel::Phases class="phases panel" testid="phases" title="Training phases" not_captured=None />
        }
        .into_any();
    };
    let phase_links = LinkedRows::of_trace(
        &ctx,
        p.rows
            .iter()
            .map(|r| match r.phase {
                "forward" => phase_spans(doc, region, Pass::Forward, range),
                "backward" => phase_spans(doc, region, Pass::Backward, range),
                "optimizer" => phase_spans(doc, region, Pass::Optimizer, range),
                // The time between the phases: no span of its own.
                _ => Vec::new(),
            })
            .collect(),
    );
    let pair_paths: Vec<&str> = p.modules.iter().map(|m| m.path.as_str()).collect();
    let pair_links = LinkedRows::of_trace(
        &ctx,
        pair_spans(doc, ctx.model.module_paths(), region, &pair_paths, range),
    );
    // A model with thousands of module paths would make thousands of rows (a 1M-span trace's
    // 6 667 made 54 000 elements and a 0.7 s layout): the heaviest first, the rest on request.
    let modules = p.modules.clone();
    let total = modules.len();
    let show_all = RwSignal::new(false);
    view! {
        <section class="phases panel" data-testid="phases">
            <h3>"Training phases"</h3>
            <p data-testid="phase-region" data-value=p.region_ns.to_string()>
                "Measured region " <strong>{p.region.clone()}</strong> ": "
                {candle_trace_schema::analysis::units::format_ns(p.region_ns)}
                {(p.overlap_ns > 0).then(|| format!(
                    " (steps exceed it by {})",
                    candle_trace_schema::analysis::units::format_ns(p.overlap_ns)
                ))}
            </p>
            <div class="phase-bar" role="img" aria-label="share of the measured region per phase">
                {p.rows.iter().filter(|r| r.ns > 0).map(|r| view! {
                    <div class=format!("phase-seg ph-{}", r.phase)
                        style:left=format!("{:.3}%", r.left_pct)
                        style:width=format!("{:.3}%", r.share_pct)
                        title=format!("{} {} ({})", r.phase, r.time, r.share)>
                        {(r.share_pct >= 8.0).then_some(r.phase)}
                    </div>
                }).collect_view()}
            </div>
            <table>
                <thead><tr><th scope="col">"phase"</th><th scope="col">"time"</th><th scope="col">"share"</th></tr></thead>
                <tbody {..phase_links.body_attrs()}>
                    {p.rows.iter().enumerate().map(|(pos, r)| view! {
                        <tr data-testid=format!("phase-{}", r.phase) data-value=r.ns.to_string()
                            data-row=pos.to_string() {..phase_links.linked_attrs(pos)}>
                            <th scope="row"><span class=format!("swatch ph-{}", r.phase)></span>{r.phase}</th>
                            <td class="num">{r.time.clone()}</td>
                            <td class="num">{r.share.clone()}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
            <h4>"Forward and backward per module"</h4>
            {if p.modules.is_empty() {
                view! { <p class="muted">"No module spans in forward or backward."</p> }.into_any()
            } else {
                view! {
                    <p class="muted">{p.pairing}</p>
                    <table>
                        <thead><tr>
                            <th scope="col">"module"</th><th scope="col">"forward"</th><th scope="col">"backward"</th>
                            <th scope="col">"backward / forward"</th><th scope="col">"compared"</th>
                        </tr></thead>
                        <tbody {..pair_links.body_attrs()}>
                            {move || modules.iter().enumerate().take(if show_all.get() { total } else { SHOWN_ROWS }).map(|(pos, m)| view! {
                                <tr data-testid="module-pair" data-path=m.path.clone()
                                    data-row=pos.to_string()
                                    data-forward=m.forward_ns.to_string() data-backward=m.backward_ns.to_string() {..pair_links.linked_attrs(pos)}>
                                    <th scope="row">{m.path.clone()}</th>
                                    <td class="num">{m.forward.clone()}</td>
                                    <td class="num">{m.backward.clone()}</td>
                                    <td class="num">{m.ratio.clone()}</td>
                                    <td class="pair-bars" aria-hidden="true">
                                        <div class="pair-bar ph-forward" style:width=format!("{:.2}%", m.forward_pct)></div>
                                        <div class="pair-bar ph-backward" style:width=format!("{:.2}%", m.backward_pct)></div>
                                    </td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                    <ShowAllRows testid="module-pairs" noun="module paths" total=total show_all=show_all />
                }.into_any()
            }}
        </section>
    }
    .into_any()
}
