//! The flame chart: a `<canvas>` painted from [`crate::timeline`]'s blocks and ticks, a
//! minimap, a hover tooltip, search, and zoom/pan by wheel, drag and the WASD keys.

use std::sync::Arc;

use leptos::html::Canvas;
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::CanvasRenderingContext2d;

use candle_trace_schema::analysis::units::{format_bytes, format_ns};

use super::TraceContext;
use crate::model::spans::{navigate, SpanMove};
use crate::model::TraceModel;
use crate::timeline::lod::{visible_blocks_keyed, Block};
use crate::timeline::memory_curve::column_max;
use crate::timeline::minimap::{tooltip_position, view_for_minimap_click, window_on_minimap};
use crate::timeline::palette::{
    axis_color, device_color, highlight_color, kind_name, label_color, merged_fill, span_fill,
    step_name, Theme, STEP_LEGEND,
};
use crate::timeline::search::{matching_spans, step_match};
use crate::timeline::ticks::ticks;
use crate::timeline::viewport::Viewport;

/// Height of one lane in CSS pixels.
const LANE_PX: f64 = 20.0;
/// Height of the time axis above the lanes.
const AXIS_PX: f64 = 22.0;
/// Height of the minimap.
const MINIMAP_PX: f64 = 36.0;
/// Width the tooltip is assumed to have when placing it (its CSS `max-width`).
const TOOLTIP_PX: f64 = 320.0;
/// A mouse that moved less than this between press and release clicked.
const CLICK_SLOP_PX: f64 = 3.0;

/// The 2D context of a canvas sized to its CSS box times the device pixel ratio, with the
/// transform set so that drawing uses CSS pixels. Returns the CSS width too.
pub(super) fn prepare(
    canvas: &web_sys::HtmlCanvasElement,
    css_height: f64,
) -> Option<(CanvasRenderingContext2d, f64)> {
    let dpr = web_sys::window()
        .map_or(1.0, |w| w.device_pixel_ratio())
        .max(1.0);
    let css_width = f64::from(canvas.client_width()).max(1.0);
    let (w, h) = (
        (css_width * dpr).round() as u32,
        (css_height * dpr).round() as u32,
    );
    if canvas.width() != w {
        canvas.set_width(w);
    }
    if canvas.height() != h {
        canvas.set_height(h);
    }
    let ctx: CanvasRenderingContext2d = canvas.get_context("2d").ok()??.dyn_into().ok()?;
    let _ = ctx.set_transform(dpr, 0.0, 0.0, dpr, 0.0, 0.0);
    ctx.clear_rect(0.0, 0.0, css_width, css_height);
    Some((ctx, css_width))
}

/// The part of `name` that fits `width_px` (an estimate at 7 px per character).
pub(super) fn fit_label(name: &str, width_px: f64) -> Option<String> {
    let room = ((width_px - 6.0) / 7.0).floor();
    if room < 3.0 {
        return None;
    }
    let room = room as usize;
    if name.chars().count() <= room {
        Some(name.to_string())
    } else {
        let mut s: String = name.chars().take(room.saturating_sub(1)).collect();
        s.push('…');
        Some(s)
    }
}

/// What picks a span's colour: its step and kind.
pub(super) fn step_key(model: &TraceModel, i: u32) -> u32 {
    model.doc.spans.get(i as usize).map_or(0, |s| {
        let step = match s.step {
            None => 0,
            Some(candle_trace_schema::format::events::Step::Forward) => 1,
            Some(candle_trace_schema::format::events::Step::Backward) => 2,
            Some(candle_trace_schema::format::events::Step::Optimizer) => 3,
        };
        step * 4 + s.span_kind as u32
    })
}

/// Paint the lanes, the axis and the outlines.
fn paint(
    canvas: &web_sys::HtmlCanvasElement,
    model: &TraceModel,
    view: &Viewport,
    selected: Option<u32>,
    highlighted: &[u32],
    theme: Theme,
) {
    let height = AXIS_PX + LANE_PX * model.lanes.len().max(1) as f64;
    let Some((ctx, _)) = prepare(canvas, height) else {
        return;
    };
    // Axis.
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
    // Lanes.
    ctx.set_font("12px system-ui, sans-serif");
    for (depth, lane) in model.lanes.lanes.iter().enumerate() {
        let y = AXIS_PX + depth as f64 * LANE_PX;
        for b in visible_blocks_keyed(lane, view, |i| step_key(model, i)) {
            // Lanes are built from this document's spans: every block's span index is valid.
            let span = &model.doc.spans[b.span as usize];
            let fill = if b.mixed {
                merged_fill(theme)
            } else {
                span_fill(span.step, span.span_kind, theme)
            };
            ctx.set_fill_style_str(fill);
            ctx.fill_rect(b.x0, y + 1.0, (b.x1 - b.x0 - 0.5).max(1.0), LANE_PX - 2.0);
            if !b.is_merged() {
                if let Some(label) = fit_label(&span.name, b.x1 - b.x0) {
                    ctx.set_fill_style_str(label_color(fill));
                    let _ = ctx.fill_text(&label, b.x0 + 3.0, y + LANE_PX - 6.0);
                }
            }
        }
    }
    // Outlines: highlights thin, selection thick; only those in view are drawn.
    let outline = |i: u32, width: f64| {
        let Some(extent) = model.extent(i) else {
            return;
        };
        let depth = extent.depth;
        let (x0, x1) = (
            view.x_from_ns(extent.start_ns as f64),
            view.x_from_ns(extent.end_ns as f64),
        );
        if x1 < 0.0 || x0 > view.width_px {
            return;
        }
        let (x0, x1) = (x0.max(-2.0), x1.min(view.width_px + 2.0).max(x0 + 1.0));
        let y = AXIS_PX + f64::from(depth) * LANE_PX;
        ctx.set_stroke_style_str(highlight_color(theme));
        ctx.set_line_width(width);
        ctx.stroke_rect(x0 + 0.5, y + 1.0, x1 - x0 - 1.0, LANE_PX - 2.0);
    };
    for &i in highlighted.iter().take(20_000) {
        outline(i, 1.5);
    }
    if let Some(i) = selected {
        outline(i, 3.0);
    }
}

/// Paint the minimap: every lane squeezed into the strip, and the visible window.
/// The minimap's blocks for one width: (lane, block) pairs, computed once per width because
/// the minimap always shows the whole run.
type MinimapBlocks = (f64, Vec<(usize, Block)>);

fn paint_minimap(
    canvas: &web_sys::HtmlCanvasElement,
    model: &TraceModel,
    view: &Viewport,
    theme: Theme,
    cache: StoredValue<Option<MinimapBlocks>>,
) {
    let Some((ctx, width)) = prepare(canvas, MINIMAP_PX) else {
        return;
    };
    if cache.with_value(|c| c.as_ref().is_none_or(|(w, _)| (*w - width).abs() > 0.5)) {
        let whole = Viewport::fit(model.lanes.start_ns, model.lanes.end_ns, width);
        let blocks = model
            .lanes
            .lanes
            .iter()
            .enumerate()
            .flat_map(|(depth, lane)| {
                visible_blocks_keyed(lane, &whole, |i| step_key(model, i))
                    .into_iter()
                    .map(move |b| (depth, b))
            })
            .collect();
        cache.set_value(Some((width, blocks)));
    }
    let lane_h = (MINIMAP_PX / model.lanes.len().max(1) as f64).min(6.0);
    cache.with_value(|c| {
        for (depth, b) in c.iter().flat_map(|(_, blocks)| blocks.iter()) {
            let span = &model.doc.spans[b.span as usize];
            ctx.set_fill_style_str(if b.mixed {
                merged_fill(theme)
            } else {
                span_fill(span.step, span.span_kind, theme)
            });
            ctx.fill_rect(
                b.x0,
                *depth as f64 * lane_h,
                (b.x1 - b.x0).max(1.0),
                lane_h.max(1.0),
            );
        }
    });
    let (x0, x1) = window_on_minimap(view, width);
    ctx.set_stroke_style_str(highlight_color(theme));
    ctx.set_line_width(2.0);
    ctx.stroke_rect(x0 + 1.0, 1.0, (x1 - x0 - 2.0).max(1.0), MINIMAP_PX - 2.0);
}

/// Height of the memory strip.
const MEMORY_PX: f64 = 48.0;

/// Paint each device's live bytes under the chart, on one scale (the largest device peak).
fn paint_memory(
    canvas: &web_sys::HtmlCanvasElement,
    model: &TraceModel,
    view: &Viewport,
    theme: Theme,
) {
    let Some((ctx, _)) = prepare(canvas, MEMORY_PX) else {
        return;
    };
    let top = model
        .memory_curves
        .iter()
        .map(|c| c.peak_bytes)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let y_of = |bytes: u64| MEMORY_PX - 2.0 - (bytes as f64 / top) * (MEMORY_PX - 4.0);
    for (i, curve) in model.memory_curves.iter().enumerate() {
        ctx.set_stroke_style_str(device_color(i, theme));
        ctx.set_line_width(1.5);
        ctx.begin_path();
        let mut drawing = false;
        for (x, v) in column_max(curve, view).into_iter().enumerate() {
            match v {
                Some(bytes) => {
                    let (x, y) = (x as f64 + 0.5, y_of(bytes));
                    if drawing {
                        ctx.line_to(x, y);
                    } else {
                        ctx.move_to(x, y);
                        drawing = true;
                    }
                }
                None => drawing = false,
            }
        }
        ctx.stroke();
    }
}

/// What the tooltip shows.
#[derive(Clone, PartialEq)]
struct Hover {
    x: f64,
    y: f64,
    span: u32,
}

/// The flame chart with its minimap, legend, search and tooltip.
#[component]
pub fn Timeline() -> impl IntoView {
    let Some(ctx) = use_context::<TraceContext>() else {
        return view! { <p>"no trace"</p> }.into_any();
    };
    let model = ctx.model.clone();
    let canvas_ref = NodeRef::<Canvas>::new();
    let minimap_ref = NodeRef::<Canvas>::new();
    let memory_ref = NodeRef::<Canvas>::new();
    let view_sig = RwSignal::new(Viewport::fit(
        model.lanes.start_ns,
        model.lanes.end_ns,
        1000.0,
    ));
    let hover: RwSignal<Option<Hover>> = RwSignal::new(None);
    // (press x, viewport at press, moved) while the mouse is down on the chart.
    let drag: StoredValue<Option<(f64, Viewport, bool)>> = StoredValue::new(None);
    let minimap_drag = StoredValue::new(false);
    let minimap_cache: StoredValue<Option<MinimapBlocks>> = StoredValue::new(None);
    let resize_tick = RwSignal::new(0u32);
    let resize = window_event_listener(leptos::ev::resize, move |_| {
        resize_tick.update(|t| *t = t.wrapping_add(1))
    });
    // A second file replaces this timeline: stop listening then.
    on_cleanup(move || resize.remove());
    let query = RwSignal::new(String::new());
    let current_match: RwSignal<Option<usize>> = RwSignal::new(None);
    let matches = {
        let model = model.clone();
        Memo::new(move |_| {
            Arc::new(matching_spans(
                model
                    .doc
                    .spans
                    .iter()
                    .map(|s| (s.name.as_str(), s.start_ns)),
                &query.get(),
            ))
        })
    };
    // Search results become the highlight set; clearing the search clears it.
    Effect::new(move |was_searching: Option<bool>| {
        let m = matches.get();
        current_match.set(None);
        let searching = !query.with(|q| q.trim().is_empty());
        if searching {
            ctx.highlighted.set(m);
        } else if was_searching == Some(true) {
            ctx.highlighted.set(Arc::new(Vec::new()));
        }
        searching
    });

    // Repaint whenever anything drawn changes.
    {
        let model = model.clone();
        Effect::new(move |_| {
            resize_tick.track();
            let (Some(canvas), Some(minimap)) = (canvas_ref.get(), minimap_ref.get()) else {
                return;
            };
            let width = f64::from(canvas.client_width()).max(1.0);
            let view = view_sig.get();
            if (view.width_px - width).abs() > 0.5 {
                // Adopt the real width; this effect runs again with it.
                view_sig.set(view.resized(width));
                return;
            }
            let theme = ctx.theme.get();
            let selected = ctx.selected.get();
            ctx.highlighted
                .with(|h| paint(&canvas, &model, &view, selected, h, theme));
            paint_minimap(&minimap, &model, &view, theme, minimap_cache);
            if let Some(memory) = memory_ref.get() {
                paint_memory(&memory, &model, &view, theme);
            }
        });
    }
    // Show a range when a table (or the details panel) asks for it.
    Effect::new(move |_| {
        if let Some((s, e)) = ctx.focus.get() {
            view_sig.update(|v| *v = v.show_range(s, e, 0.1));
            ctx.focus.set(None);
        }
    });

    let span_at = {
        let model = model.clone();
        move |x: f64, y: f64| -> Option<u32> {
            if y < AXIS_PX {
                return None;
            }
            let lane = ((y - AXIS_PX) / LANE_PX).floor() as usize;
            let view = view_sig.get_untracked();
            model
                .lanes
                .hit(lane, view.ns_from_x(x), 3.0 * view.ns_per_px)
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
                // Pinch gestures arrive as ctrl+wheel with small deltas.
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
    let on_move = {
        let span_at = span_at.clone();
        move |ev: web_sys::MouseEvent| {
            let (x, y) = (f64::from(ev.offset_x()), f64::from(ev.offset_y()));
            if let Some((press_x, start, moved)) = drag.get_value() {
                let dx = f64::from(ev.client_x()) - press_x;
                if moved || dx.abs() >= CLICK_SLOP_PX {
                    drag.set_value(Some((press_x, start, true)));
                    view_sig.set(start.pan_px(dx));
                    hover.set(None);
                    return;
                }
            }
            hover.set(span_at(x, y).map(|span| Hover { x, y, span }));
        }
    };
    let on_up = {
        let span_at = span_at.clone();
        move |ev: web_sys::MouseEvent| {
            if let Some((_, _, moved)) = drag.get_value() {
                if !moved {
                    let hit = span_at(f64::from(ev.offset_x()), f64::from(ev.offset_y()));
                    ctx.selected.set(hit);
                }
            }
            drag.set_value(None);
        }
    };
    let on_leave = move |_| {
        drag.set_value(None);
        hover.set(None);
    };
    let on_key = {
        let model = model.clone();
        move |ev: web_sys::KeyboardEvent| {
            let v = view_sig.get_untracked();
            let centre = v.width_px / 2.0;
            let next = match ev.key().as_str() {
                "w" | "W" | "+" | "=" => v.zoom_at(centre, 1.5),
                "s" | "S" | "-" => v.zoom_at(centre, 1.0 / 1.5),
                "a" | "A" | "ArrowLeft" => v.pan_px(v.width_px * 0.15),
                "d" | "D" | "ArrowRight" => v.pan_px(-v.width_px * 0.15),
                "0" => Viewport::fit(model.lanes.start_ns, model.lanes.end_ns, v.width_px),
                "f" | "F" => match ctx.selected.get_untracked().and_then(|i| model.extent(i)) {
                    Some(s) => v.show_range(s.start_ns, s.end_ns, 0.1),
                    None => v,
                },
                "Escape" => {
                    ctx.selected.set(None);
                    v
                }
                key @ ("ArrowUp" | "ArrowDown" | "[" | "]") => {
                    let m = match key {
                        "ArrowUp" => SpanMove::Parent,
                        "ArrowDown" => SpanMove::FirstChild,
                        "[" => SpanMove::PrevSibling,
                        _ => SpanMove::NextSibling,
                    };
                    // Without a selection, start at the first root.
                    let next = match ctx.selected.get_untracked() {
                        Some(i) => navigate(&model.doc, i, m),
                        None => model.doc.tree.roots.first().copied(),
                    };
                    match next.and_then(|i| model.extent(i).map(|s| (i, s))) {
                        Some((i, s)) => {
                            ctx.selected.set(Some(i));
                            if (s.start_ns as f64) < v.start_ns || (s.end_ns as f64) > v.end_ns() {
                                v.show_range(s.start_ns, s.end_ns, 0.1)
                            } else {
                                v
                            }
                        }
                        None => v,
                    }
                }
                _ => return,
            };
            ev.prevent_default();
            view_sig.set(next);
        }
    };
    let go_match = {
        let model = model.clone();
        move |forward: bool| {
            let m = matches.get_untracked();
            if let Some(pos) = step_match(m.len(), current_match.get_untracked(), forward) {
                current_match.set(Some(pos));
                let i = m[pos];
                if let Some(s) = model.extent(i) {
                    ctx.selected.set(Some(i));
                    view_sig.update(|v| {
                        *v = if (s.end_ns as f64) - (s.start_ns as f64) > v.end_ns() - v.start_ns {
                            v.show_range(s.start_ns, s.end_ns, 0.1)
                        } else {
                            v.centered_on((s.start_ns as f64 + s.end_ns as f64) / 2.0)
                        }
                    });
                }
            }
        }
    };
    let go_next = go_match.clone();
    let go_prev = go_match.clone();
    let minimap_set = move |ev: &web_sys::MouseEvent| {
        if let Some(el) = minimap_ref.get_untracked() {
            let width = f64::from(el.client_width());
            view_sig.update(|v| *v = view_for_minimap_click(v, f64::from(ev.offset_x()), width));
        }
    };

    let tooltip = {
        let model = model.clone();
        move || {
            hover.get().and_then(|h| {
                let s = model.doc.spans.get(h.span as usize)?;
                let self_ns = model
                    .doc
                    .tree
                    .self_ns
                    .get(h.span as usize)
                    .copied()
                    .unwrap_or(0);
                let duration = s
                    .duration_ns
                    .map_or_else(|| "never closed".to_string(), format_ns);
                let (left, top) =
                    tooltip_position(h.x, h.y, view_sig.get_untracked().width_px, TOOLTIP_PX);
                Some(view! {
                    <div
                        class="tooltip"
                        data-testid="tooltip"
                        style:left=format!("{left}px")
                        style:top=format!("{top}px")
                    >
                        <div class="tooltip-name">{s.name.to_string()}</div>
                        <div>{kind_name(s.span_kind)} " · step " {step_name(s.step)}</div>
                        <div>"duration " {duration}</div>
                        <div>"self " {format_ns(self_ns)}</div>
                    </div>
                })
            })
        }
    };
    let lanes = model.lanes.len().max(1);
    let chart_height = AXIS_PX + LANE_PX * lanes as f64;

    view! {
        <section class="timeline" aria-label="timeline">
            <div class="timeline-bar">
                <h3>"Timeline"</h3>
                <ul class="legend" aria-label="colour legend">
                    {STEP_LEGEND
                        .iter()
                        .map(|(step, label)| {
                            view! {
                                <li>
                                    <span
                                        class="swatch"
                                        style:background=move || {
                                            span_fill(*step, candle_trace_schema::format::events::SpanKind::Function, ctx.theme.get())
                                        }
                                    ></span>
                                    {*label}
                                </li>
                            }
                        })
                        .collect_view()}
                    <li class="legend-note">"shade: module light · function · op dark; grey = merged spans of mixed colours"</li>
                </ul>
                <div class="search" role="search">
                    <input
                        type="search"
                        placeholder="Search spans"
                        aria-label="search spans by name"
                        data-testid="search-input"
                        prop:value=move || query.get()
                        on:input=move |ev| query.set(event_target_value(&ev))
                        on:keydown={
                            let go = go_match.clone();
                            move |ev: web_sys::KeyboardEvent| {
                                if ev.key() == "Enter" {
                                    go(!ev.shift_key());
                                }
                            }
                        }
                    />
                    <span class="match-count" data-testid="search-count">
                        {move || {
                            let n = matches.get().len();
                            match current_match.get() {
                                Some(c) if n > 0 => format!("{} / {}", c + 1, n),
                                _ => format!("{n} matches"),
                            }
                        }}
                    </span>
                    <button type="button" on:click=move |_| go_prev(false) aria-label="previous match">"↑"</button>
                    <button type="button" on:click=move |_| go_next(true) aria-label="next match">"↓"</button>
                    <button
                        type="button"
                        data-testid="zoom-selection"
                        on:click={
                            let model = model.clone();
                            move |_| {
                                if let Some(s) = ctx.selected.get_untracked().and_then(|i| model.extent(i)) {
                                    view_sig.update(|v| *v = v.show_range(s.start_ns, s.end_ns, 0.1));
                                }
                            }
                        }
                    >
                        "Zoom to selection"
                    </button>
                    <button
                        type="button"
                        data-testid="zoom-fit"
                        on:click={
                            let model = model.clone();
                            move |_| view_sig.update(|v| *v = Viewport::fit(model.lanes.start_ns, model.lanes.end_ns, v.width_px))
                        }
                    >
                        "Fit"
                    </button>
                </div>
            </div>
            <canvas
                class="minimap"
                node_ref=minimap_ref
                style:height=format!("{MINIMAP_PX}px")
                data-testid="minimap"
                on:mousedown=move |ev: web_sys::MouseEvent| {
                    minimap_drag.set_value(true);
                    minimap_set(&ev);
                }
                on:mousemove=move |ev: web_sys::MouseEvent| {
                    if minimap_drag.get_value() {
                        minimap_set(&ev);
                    }
                }
                on:mouseup=move |_| minimap_drag.set_value(false)
                on:mouseleave=move |_| minimap_drag.set_value(false)
            ></canvas>
            <div class="chart-scroll">
                <div class="chart-wrap">
                    <canvas
                        class="chart"
                        node_ref=canvas_ref
                        tabindex="0"
                        role="img"
                        aria-label="flame chart: W/S zoom, A/D pan, arrow up/down parent/child, [ ] siblings, F zoom to selection, 0 fit"
                        data-testid="timeline-canvas"
                        data-view-start=move || format!("{:.0}", view_sig.get().start_ns)
                        data-view-end=move || format!("{:.0}", view_sig.get().end_ns())
                        style:height=format!("{chart_height}px")
                        on:wheel=on_wheel
                        on:mousedown=on_down
                        on:mousemove=on_move
                        on:mouseup=on_up
                        on:mouseleave=on_leave
                        on:keydown=on_key
                    ></canvas>
                    {tooltip}
                </div>
            </div>
            {(!model.memory_curves.is_empty()).then(|| {
                let legend: Vec<_> = model.memory_curves.iter().enumerate().map(|(i, c)| (i, c.device.clone(), format_bytes(c.peak_bytes))).collect();
                view! {
                    <div class="memory-strip">
                        <canvas class="memory-curve" node_ref=memory_ref style:height=format!("{MEMORY_PX}px") data-testid="memory-curve" aria-label="live bytes over time per device"></canvas>
                        <ul class="legend" aria-label="memory legend">
                            <li>"live memory:"</li>
                            {legend.into_iter().map(|(i, device, peak)| view! {
                                <li>
                                    <span class="swatch" style:background=move || device_color(i, ctx.theme.get())></span>
                                    {device} " (peak " {peak} ")"
                                </li>
                            }).collect_view()}
                        </ul>
                    </div>
                }
            })}
            <p class="timeline-help">
                "Wheel or W/S to zoom at the cursor, drag or A/D to pan, click a span for details; ↑/↓ parent/child, [ ] siblings, F zooms to the selection, 0 fits the run."
            </p>
        </section>
    }
    .into_any()
}
