//! A flame chart of several files (groups of lanes) on one time axis, each shifted by its
//! offset; the comparison view uses it with one group (the candidate, coloured by change).
//! The layout is [`crate::timeline::groups`]'s; this only paints and handles zoom and pan.

use std::sync::Arc;

use leptos::html::Canvas;
use leptos::prelude::*;

use candle_trace_schema::analysis::units::format_ns;

use super::timeline::{fit_label, prepare};
use crate::model::TraceModel;
use crate::timeline::groups::{
    group_lane_at, group_rows, rows_height, SharedAxis, GROUP_HEADER_PX,
};
use crate::timeline::lod::visible_blocks_keyed;
use crate::timeline::palette::{axis_color, label_color, merged_fill, Theme};
use crate::timeline::ticks::ticks;
use crate::timeline::viewport::Viewport;

/// Height of one lane in CSS pixels.
const LANE_PX: f64 = 20.0;
/// Height of the time axis above the groups.
const AXIS_PX: f64 = 22.0;

/// A span's fill: (group, span index, theme) → CSS colour.
pub type FillFn = Arc<dyn Fn(usize, u32, Theme) -> &'static str + Send + Sync>;
/// A span's colour key for level-of-detail merging: (group, span index) → key.
pub type KeyFn = Arc<dyn Fn(usize, u32) -> u32 + Send + Sync>;

/// The groups, top to bottom: a label and the file's model.
pub type Groups = Arc<Vec<(String, Arc<TraceModel>)>>;

#[allow(clippy::too_many_arguments)]
fn paint(
    canvas: &web_sys::HtmlCanvasElement,
    groups: &Groups,
    offsets: &[i64],
    view: &Viewport,
    fill: &FillFn,
    key: &KeyFn,
    theme: Theme,
) {
    let counts: Vec<usize> = groups.iter().map(|(_, m)| m.lanes.len()).collect();
    let rows = group_rows(&counts, AXIS_PX, LANE_PX);
    let height = rows_height(&rows, AXIS_PX, LANE_PX);
    let Some((ctx, width)) = prepare(canvas, height) else {
        return;
    };
    let axis = axis_of(groups, offsets);
    ctx.set_font("11px system-ui, sans-serif");
    ctx.set_fill_style_str(axis_color(theme));
    ctx.set_stroke_style_str(axis_color(theme));
    ctx.set_line_width(1.0);
    for t in ticks(view, 90.0) {
        let x = t.x.round() + 0.5;
        ctx.begin_path();
        ctx.move_to(x, AXIS_PX - 6.0);
        ctx.line_to(x, height);
        ctx.set_global_alpha(0.25);
        ctx.stroke();
        ctx.set_global_alpha(1.0);
        let _ = ctx.fill_text(&t.label, x + 3.0, AXIS_PX - 8.0);
    }
    for (g, ((name, model), row)) in groups.iter().zip(&rows).enumerate() {
        let offset = offsets.get(g).copied().unwrap_or(0);
        // Header row: a rule and the file's name.
        ctx.set_fill_style_str(axis_color(theme));
        ctx.fill_rect(0.0, row.top_px, width, 1.0);
        ctx.set_font("bold 12px system-ui, sans-serif");
        let _ = ctx.fill_text(name, 4.0, row.top_px + GROUP_HEADER_PX - 5.0);
        ctx.set_font("12px system-ui, sans-serif");
        let gv = axis.group_view(view, offset);
        for (depth, lane) in model.lanes.lanes.iter().enumerate() {
            let y = row.lanes_top_px + depth as f64 * LANE_PX;
            for b in visible_blocks_keyed(lane, &gv, |i| key(g, i)) {
                let colour = if b.mixed {
                    merged_fill(theme)
                } else {
                    fill(g, b.span, theme)
                };
                ctx.set_fill_style_str(colour);
                ctx.fill_rect(b.x0, y + 1.0, (b.x1 - b.x0 - 0.5).max(1.0), LANE_PX - 2.0);
                if !b.is_merged() {
                    let name = model
                        .doc
                        .spans
                        .get(b.span as usize)
                        .map(|s| s.name.as_str());
                    if let Some(label) = name.and_then(|n| fit_label(n, b.x1 - b.x0)) {
                        ctx.set_fill_style_str(label_color(colour));
                        let _ = ctx.fill_text(&label, b.x0 + 3.0, y + LANE_PX - 6.0);
                    }
                }
            }
        }
    }
}

fn axis_of(groups: &Groups, offsets: &[i64]) -> SharedAxis {
    let pairs: Vec<(&crate::timeline::lanes::Lanes, i64)> = groups
        .iter()
        .enumerate()
        .map(|(g, (_, m))| (&m.lanes, offsets.get(g).copied().unwrap_or(0)))
        .collect();
    SharedAxis::of(&pairs)
}

/// A hovered span: where, which group and span.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Hover {
    x: f64,
    y: f64,
    group: usize,
    span: u32,
}

/// Several files' lanes on one shared, zoomable time axis.
#[component]
pub fn GroupTimeline(
    /// The files, top to bottom.
    groups: Groups,
    /// Each group's offset on the shared axis (ns).
    offsets: Signal<Vec<i64>>,
    /// A span's colour.
    fill: FillFn,
    /// A span's colour key (merged blocks of different keys are drawn grey).
    key: KeyFn,
    /// Light or dark.
    theme: Signal<Theme>,
    /// The canvas's `data-testid`.
    testid: &'static str,
) -> impl IntoView {
    let canvas_ref = NodeRef::<Canvas>::new();
    let initial = {
        let axis = axis_of(&groups, &offsets.get_untracked());
        Viewport::fit(0, axis.length_ns(), 800.0)
    };
    let view_sig = RwSignal::new(initial);
    let drag: StoredValue<Option<(f64, Viewport, bool)>> = StoredValue::new(None);
    let hover: RwSignal<Option<Hover>> = RwSignal::new(None);
    // The axis the view was fitted to; a new offset refits the view to the new axis.
    let fitted = StoredValue::new(axis_of(&groups, &offsets.get_untracked()));
    {
        let (groups, fill, key) = (groups.clone(), fill.clone(), key.clone());
        Effect::new(move |_| {
            let Some(canvas) = canvas_ref.get() else {
                return;
            };
            let offs = offsets.get();
            let axis = axis_of(&groups, &offs);
            let width = f64::from(canvas.client_width()).max(1.0);
            let view = view_sig.get();
            if fitted.get_value() != axis {
                fitted.set_value(axis);
                view_sig.set(Viewport::fit(0, axis.length_ns(), width));
                return;
            }
            if (view.width_px - width).abs() > 0.5 {
                view_sig.set(view.resized(width));
                return;
            }
            paint(&canvas, &groups, &offs, &view, &fill, &key, theme.get());
        });
    }
    let counts: Vec<usize> = groups.iter().map(|(_, m)| m.lanes.len()).collect();
    let rows = group_rows(&counts, AXIS_PX, LANE_PX);
    let height = rows_height(&rows, AXIS_PX, LANE_PX);
    let span_at = {
        let groups = groups.clone();
        let rows = rows.clone();
        move |x: f64, y: f64| -> Option<(usize, u32)> {
            let (g, lane) = group_lane_at(&rows, y, LANE_PX)?;
            let offs = offsets.get_untracked();
            let axis = axis_of(&groups, &offs);
            let gv = axis.group_view(&view_sig.get_untracked(), offs.get(g).copied().unwrap_or(0));
            let span = groups
                .get(g)?
                .1
                .lanes
                .hit(lane, gv.ns_from_x(x), 3.0 * gv.ns_per_px)?;
            Some((g, span))
        }
    };
    let on_wheel = move |ev: web_sys::WheelEvent| {
        ev.prevent_default();
        let x = f64::from(ev.offset_x());
        let (dx, dy) = (ev.delta_x(), ev.delta_y());
        view_sig.update(|v| {
            if dx.abs() > dy.abs() && !ev.ctrl_key() {
                *v = v.pan_px(-dx);
            } else {
                let factor = (-dy * if ev.ctrl_key() { 0.01 } else { 0.002 }).exp();
                *v = v.zoom_at(x, factor);
            }
        });
    };
    let on_down = move |ev: web_sys::MouseEvent| {
        if ev.button() == 0 {
            drag.set_value(Some((
                f64::from(ev.client_x()),
                view_sig.get_untracked(),
                false,
            )));
        }
    };
    let on_move = move |ev: web_sys::MouseEvent| {
        let (x, y) = (f64::from(ev.offset_x()), f64::from(ev.offset_y()));
        if let Some((press_x, start, moved)) = drag.get_value() {
            let dx = f64::from(ev.client_x()) - press_x;
            if moved || dx.abs() >= 3.0 {
                drag.set_value(Some((press_x, start, true)));
                view_sig.set(start.pan_px(dx));
                hover.set(None);
                return;
            }
        }
        hover.set(span_at(x, y).map(|(group, span)| Hover { x, y, group, span }));
    };
    let tooltip = {
        let groups = groups.clone();
        move || {
            hover.get().and_then(|h| {
                let (name, model) = groups.get(h.group)?;
                let s = model.doc.spans.get(h.span as usize)?;
                let duration = s
                    .duration_ns
                    .map_or_else(|| "never closed".to_string(), format_ns);
                let left = (h.x + 12.0).min(view_sig.get_untracked().width_px - 320.0).max(0.0);
                Some(view! {
                    <div class="tooltip" data-testid="group-tooltip" style:left=format!("{left}px") style:top=format!("{}px", h.y + 12.0)>
                        <div class="tooltip-name">{s.name.to_string()}</div>
                        <div>{name.clone()}</div>
                        <div>"path " {model.doc.span_path(h.span as usize)}</div>
                        <div>"duration " {duration}</div>
                    </div>
                })
            })
        }
    };
    let fit = {
        let groups = groups.clone();
        move |_| {
            let axis = axis_of(&groups, &offsets.get_untracked());
            view_sig.update(|v| *v = Viewport::fit(0, axis.length_ns(), v.width_px));
        }
    };
    view! {
        <div class="group-timeline">
            <div class="timeline-bar">
                <span class="muted">"Wheel to zoom at the cursor, drag to pan."</span>
                <button type="button" data-testid=format!("{testid}-fit") on:click=fit>"Fit"</button>
            </div>
            <div class="chart-scroll">
                <div class="chart-wrap">
                    <canvas
                        class="chart"
                        node_ref=canvas_ref
                        role="img"
                        aria-label="flame chart of several files on one time axis"
                        data-testid=testid
                        data-view-start=move || format!("{:.0}", view_sig.get().start_ns)
                        data-view-end=move || format!("{:.0}", view_sig.get().end_ns())
                        style:height=format!("{height}px")
                        on:wheel=on_wheel
                        on:mousedown=on_down
                        on:mousemove=on_move
                        on:mouseup=move |_| drag.set_value(None)
                        on:mouseleave=move |_| {
                            drag.set_value(None);
                            hover.set(None);
                        }
                    ></canvas>
                    {tooltip}
                </div>
            </div>
        </div>
    }
}
