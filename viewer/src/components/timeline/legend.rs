//! What the chart shows beside its canvas: the tooltip, the pass legend, the memory strip's
//! legend, the selected span's details.

use std::sync::Arc;

use leptos::context::Provider;
use leptos::prelude::*;

use candle_trace_schema::analysis::units::{format_bytes, format_ns};
use candle_trace_schema::format::events::SpanKind;

use crate::components::details::SpanDetailsPanel;
use crate::components::PageState;
use crate::timeline::minimap::tooltip_position;
use crate::timeline::palette::{kind_name, pass_name, span_fill, Theme, PASS_LEGEND};

use super::{ChartGroup, Hover};

/// Width the tooltip is assumed to have when placing it (its CSS `max-width`).
const TOOLTIP_PX: f64 = 320.0;

/// The tooltip of the span under the pointer, placed inside a canvas `width_px` wide.
pub(super) fn tooltip(groups: &[ChartGroup], h: Hover, width_px: f64) -> Option<impl IntoView> {
    let x = groups.get(h.span.group)?;
    let model = &x.ctx.model;
    let s = model.doc.spans.get(h.span.span as usize)?;
    let self_ns = model
        .doc
        .tree
        .self_ns
        .get(h.span.span as usize)
        .copied()
        .unwrap_or(0);
    let duration = s
        .duration_ns
        .map_or_else(|| "never closed".to_string(), format_ns);
    // Named as in the chart: a module span by its module key.
    let label = model.span_label(h.span.span as usize).to_string();
    let (left, top) = tooltip_position(h.x, h.y, width_px, TOOLTIP_PX);
    let group = (groups.len() > 1).then(|| x.label.clone());
    Some(view! {
        <div
            class="tooltip"
            data-testid="tooltip"
            style:left=format!("{left}px")
            style:top=format!("{top}px")
        >
            <div class="tooltip-name">{label.clone()}</div>
            {group.map(|g| view! { <div>{g}</div> })}
            <div>
                {(label != s.name).then(|| format!("{} · ", s.name))}
                {kind_name(s.span_kind)} " · step " {pass_name(s.pass)}
            </div>
            <div>"duration " {duration}</div>
            <div>"self " {format_ns(self_ns)}</div>
        </div>
    })
}

/// Each memory curve's legend row: (index, device, peak), devices named with their group when
/// several groups have memory.
pub(super) fn memory_legend(groups: &[ChartGroup]) -> Vec<(usize, String, String)> {
    // Devices are named with their group when several groups have memory.
    let with_memory = groups
        .iter()
        .filter(|x| !x.ctx.model.memory_curves.is_empty())
        .count();
    groups
        .iter()
        .flat_map(|x| {
            let prefix = if with_memory > 1 {
                format!("{}: ", x.label)
            } else {
                String::new()
            };
            x.ctx
                .model
                .memory_curves
                .iter()
                .map(move |c| (format!("{prefix}{}", c.device), format_bytes(c.peak_bytes)))
                .collect::<Vec<_>>()
        })
        .enumerate()
        .map(|(i, (device, peak))| (i, device, peak))
        .collect()
}

/// The selected span's details of a chart's active group (the panel's side).
#[component]
pub fn ChartDetails(
    /// The chart's groups.
    groups: Arc<Vec<ChartGroup>>,
    /// The view's state (its active group).
    page: PageState,
) -> impl IntoView {
    move || {
        let g = page.active.get();
        groups.get(g).map(|x| {
            view! {
                <Provider value=x.ctx.clone()>
                    <SpanDetailsPanel />
                </Provider>
            }
        })
    }
}

/// The pass colour legend (forward, backward, optimizer, none).
#[component]
pub fn PassLegend(
    /// Light or dark.
    theme: Signal<Theme>,
) -> impl IntoView {
    view! {
        <ul class="legend" aria-label="colour legend"
            title="shade: module light · function · op dark; grey = merged spans of mixed colours">
            {PASS_LEGEND
                .iter()
                .map(|(pass, label)| {
                    view! {
                        <li>
                            <span
                                class="swatch"
                                style:background=move || span_fill(*pass, SpanKind::Function, theme.get())
                            ></span>
                            {*label}
                        </li>
                    }
                })
                .collect_view()}
            <li class="legend-note">"shade: module · function · op; grey: merged"</li>
        </ul>
    }
}
