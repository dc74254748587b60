//! The op-efficiency panel.

use candle_trace_schema::analysis::range::TimeRange;
use leptos::prelude::*;

use std::sync::Arc;

use super::missing::MissingPanel;
use super::rows::LinkedRows;
use super::{PageState, TraceContext};
use crate::model::efficiency::{si, EfficiencyPanel};
use crate::model::links::op_name_spans_in;
use crate::model::missing::Panel;

/// Estimated FLOPs, FLOP/s, bytes moved per ns and dtype mix per op name; while a range is
/// selected on the chart, of the ops inside it (an op crossing an edge with its part inside).
/// A row links to the spans its op ran in ([`LinkedRows`]).
#[component]
pub fn EfficiencyView() -> impl IntoView {
    let Some(ctx) = use_context::<TraceContext>() else {
        return ().into_any();
    };
    let whole = ctx.model.efficiency().clone();
    if whole.count == 0 {
        // No ops: "not captured (layer_ops off)" when the file says so, else that there are
        // none; and how to capture them.
        let not_captured = ctx.model.capture.not_captured.ops.clone();
        return view! {
            <MissingPanel panel=Panel::Ops class="efficiency panel" testid="efficiency" title="Op efficiency" not_captured=not_captured />
        }
        .into_any();
    }
    let Some(page) = use_context::<PageState>() else {
        return view! { <EfficiencyOf ctx=ctx panel=whole range=TimeRange::ALL /> }.into_any();
    };
    let panel = {
        let ctx = ctx.clone();
        Memo::new(move |_| match page.time_range() {
            None => (whole.clone(), TimeRange::ALL),
            Some(r) => (
                Arc::new(EfficiencyPanel::in_range(
                    &ctx.model.doc,
                    ctx.model.op_estimates(),
                    r,
                )),
                r,
            ),
        })
    };
    (move || {
        let (p, range) = panel.get();
        if p.count == 0 {
            return view! {
                <section class="efficiency panel" data-testid="efficiency">
                    <h3>"Op efficiency"</h3>
                    <p class="muted" data-testid="efficiency-range-empty">"No op ran inside the range."</p>
                </section>
            }
            .into_any();
        }
        view! { <EfficiencyOf ctx=ctx.clone() panel=p range=range /> }.into_any()
    })
    .into_any()
}

/// The efficiency table of `panel` (with ops); a row links to every span its ops inside
/// `range` ran in.
#[component]
fn EfficiencyOf(
    /// The trace.
    ctx: TraceContext,
    /// The whole run's or a range's efficiency.
    panel: Arc<EfficiencyPanel>,
    /// The range `panel` counts ([`TimeRange::ALL`]: the whole run).
    range: TimeRange,
) -> impl IntoView {
    let e = panel;
    let mut by_name = op_name_spans_in(&ctx.model.doc, ctx.model.op_spans(), range);
    let links = LinkedRows::of_trace(
        &ctx,
        e.rows
            .iter()
            .map(|r| by_name.remove(r.op_name.as_str()).unwrap_or_default())
            .collect(),
    );
    view! {
        <section class="efficiency panel" data-testid="efficiency">
            <h3>"Op efficiency"</h3>
            <p>
                <span data-testid="flops-total" data-value=e.flops.to_string()>
                    "Estimated " <strong>{si(e.flops as f64, "FLOP")}</strong>
                </span>
                {e.flops_per_s.map(|r| view! {
                    <span data-testid="flops-rate" data-value=r.to_string()>
                        " at " <strong>{si(r as f64, "FLOP/s")}</strong>
                    </span>
                })}
                {format!(" — estimates cover {}.", e.coverage)}
            </p>
            <details>
                <summary>"How FLOPs are estimated"</summary>
                <ul>
                    <li>"matmul, bmm, broadcast_matmul, linear: 2·b·M·N·K from the output [..b, M, N]; K from an operand's known shape, else from input bytes (a bias add is not counted)."</li>
                    <li>"conv1d / conv2d: 2 · output elements · C_in/groups · kernel size, when the weight's shape is known."</li>
                    <li>"Elementwise (add, mul, relu, gelu, exp …): 1 per output element. Reductions (sum, mean, max …): 1 per input element. Softmax: 5 per element."</li>
                    <li>"FLOP/s = FLOPs / time of the estimated ops. Bytes/ns = (input + output bytes) / time of all the ops with the name."</li>
                    <li>"In a range: only the ops inside it; an op crossing an edge counts its time inside, and its FLOPs and bytes in the same proportion (rounded down), so its FLOP/s is unchanged."</li>
                </ul>
            </details>
            <table>
                <thead><tr>
                    <th scope="col">"op"</th><th scope="col">"count"</th><th scope="col">"time"</th>
                    <th scope="col">"FLOPs"</th><th scope="col">"FLOP/s"</th><th scope="col">"bytes/ns"</th>
                    <th scope="col">"dtypes"</th><th scope="col">"formula"</th>
                </tr></thead>
                <tbody {..links.body_attrs()}>
                    {e.rows.iter().enumerate().map(|(pos, r)| view! {
                        <tr data-testid="flops-row" data-op=r.op_name.clone() data-count=r.count.to_string()
                            data-total=r.total_ns.to_string()
                            data-flops=r.flops.to_string()
                            data-row=pos.to_string()
                            data-flops-per-s=r.flops_per_s.map(|v| v.to_string()).unwrap_or_default()
                            data-bytes-per-ns=r.bytes_per_ns.map(|v| v.to_string()).unwrap_or_default() {..links.linked_attrs(pos)}>
                            <th scope="row">{r.op_name.clone()}</th>
                            <td class="num">{r.count}</td>
                            <td class="num">{r.time.clone()}</td>
                            <td class="num">{r.flops_text.clone()}{(!r.coverage.is_empty()).then(|| format!(" ({})", r.coverage))}</td>
                            <td class="num">{r.flops_per_s_text.clone()}</td>
                            <td class="num">{r.bytes_per_ns_text.clone()}</td>
                            <td>{r.dtypes.clone()}</td>
                            <td class="muted">{r.formula}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </section>
    }
}
