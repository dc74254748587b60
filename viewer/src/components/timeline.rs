//! The flame chart, one component for every view: one lane group (a file), several (files on
//! one axis) or two (a comparison's sides). It builds the display list of
//! [`crate::timeline::scene`] for the rows in view and has [`super::chart_paint`] paint it,
//! hands keys, wheel and drags to [`crate::timeline::input`], and keeps its window,
//! selection, range and the view's tab in the URL fragment ([`crate::timeline::fragment`]).
//! Each group is a [`TraceContext`]: its model and its own selection, highlights and focus
//! requests, so the tables and the details panel of a file talk to the chart as they always did.

use std::sync::Arc;

use candle_trace_schema::analysis::modules::names_mode;
use leptos::html::Canvas;
use leptos::prelude::*;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};

use super::chart_paint::{MinimapCache, MEMORY_PX};
use super::{read_fragment, PageState};
use crate::model::spans::{navigate, SpanMove};
use crate::timeline::input::{
    key_action, reveal, show, to_match, view_after, wheel, DragMode, KeyAction, Nav,
};
use crate::timeline::lanes::Lanes;
use crate::timeline::layout::{ChartLayout, AXIS_PX, LANE_PX};
use crate::timeline::minimap::view_for_minimap_click;
use crate::timeline::palette::{device_color, Theme};
use crate::timeline::pointer::{Moved, Pointer};
use crate::timeline::raster::Raster;
use crate::timeline::scene::{hit, scroll_to_lane, Rows, SpanRef, MINIMAP_PX};
use crate::timeline::search::{matching_spans, merge_by_time, step_match};
use crate::timeline::settle::Settle;

mod frame;
mod groups;
mod legend;
mod url;

use frame::{paint_frame, Frame};
use groups::{keys_of, Source};
pub use groups::{ChartGroup, Colours};
use legend::{memory_legend, tooltip};
pub use legend::{ChartDetails, PassLegend};
use url::keep_in_url;

fn span_move(nav: Nav) -> SpanMove {
    match nav {
        Nav::Parent => SpanMove::Parent,
        Nav::FirstChild => SpanMove::FirstChild,
        Nav::PrevSibling => SpanMove::PrevSibling,
        Nav::NextSibling => SpanMove::NextSibling,
    }
}

/// What the tooltip shows.
#[derive(Clone, Copy, PartialEq)]
struct Hover {
    x: f64,
    y: f64,
    span: SpanRef,
}

/// The flame chart of one or more lane groups on one time axis, with its search, minimap,
/// tooltip and memory strip, filling its area: the canvas is as high as the area and its
/// lanes scroll under the time axis. Shift+drag (or a drag on the axis row) selects a range,
/// kept in the view's [`PageState`] with the open tab; after a click anywhere in the chart
/// (minimap and memory strip included) its keys work.
#[component]
pub fn FlameChart(
    /// The lane groups, top to bottom.
    groups: Arc<Vec<ChartGroup>>,
    /// Each group's offset on the shared axis (ns).
    #[prop(into)]
    offsets: Signal<Vec<i64>>,
    /// How spans are coloured.
    colours: Colours,
    /// Light or dark.
    theme: Signal<Theme>,
    /// The opened files' names: a URL fragment is restored only for the same names.
    files: String,
    /// The view's tab, range and active group (kept in the URL fragment with the window and
    /// the selection).
    page: PageState,
    /// More of the toolbar (a legend, a choice).
    #[prop(optional)]
    children: Option<Children>,
) -> impl IntoView {
    let keys = keys_of(&groups, &colours);
    let canvas_ref = NodeRef::<Canvas>::new();
    let minimap_ref = NodeRef::<Canvas>::new();
    let memory_ref = NodeRef::<Canvas>::new();
    let scroll_ref = NodeRef::<leptos::html::Div>::new();
    let layout = {
        let groups = groups.clone();
        Memo::new(move |_| {
            let offs = offsets.get();
            let pairs: Vec<(&Lanes, i64)> = groups
                .iter()
                .enumerate()
                .map(|(g, x)| (&x.ctx.model.lanes, offs.get(g).copied().unwrap_or(0)))
                .collect();
            Arc::new(ChartLayout::new(&pairs))
        })
    };
    let view_sig = page.view;
    let bounds = layout.with_untracked(|l| (l.start_ns, l.end_ns));
    // The axis bounds and width the window was last settled on: a window carried over from
    // another step's chart is kept, any other starts as the whole axis.
    let settle = if page.carried.try_update_value(std::mem::take) == Some(true) {
        StoredValue::new(Settle::sized(bounds))
    } else {
        view_sig.set(layout.get_untracked().fit(1000.0));
        StoredValue::new(Settle::new(bounds))
    };
    // The group whose selection the details, F and the arrow keys use.
    let active = page.active;
    let hover: RwSignal<Option<Hover>> = RwSignal::new(None);
    // A press, a drag or a range drag on the canvas.
    let pointer = StoredValue::new(Pointer::default());
    let minimap_drag = StoredValue::new(false);
    let minimap_cache: StoredValue<MinimapCache> = StoredValue::new(None);
    // A strip of the chart's or the memory strip's pixels, kept between frames for its
    // allocation.
    let raster = StoredValue::new(Raster::new());
    // The URL's state, when it was written for these files (and, in a step set, this step).
    let pending = StoredValue::new(
        Some(read_fragment()).filter(|s| s.files == files && s.step == page.step.get_value()),
    );
    // The chart's area (its scroll box) and how far its lanes are scrolled.
    let area_h = RwSignal::new(0.0f64);
    let scroll_top = RwSignal::new(0.0f64);
    let resize_tick = RwSignal::new(0u32);
    {
        // The area changes with the window, the panel's height and the header's wrapping:
        // one observer sees them all.
        let observer = StoredValue::new_local(None::<web_sys::ResizeObserver>);
        Effect::new(move |_| {
            let Some(el) = scroll_ref.get() else {
                return;
            };
            if observer.with_value(Option::is_some) {
                return;
            }
            let target = el.clone();
            let callback = Closure::<dyn FnMut(JsValue)>::new(move |_| {
                let h = f64::from(target.client_height());
                if (area_h.get_untracked() - h).abs() > 0.5 {
                    area_h.set(h);
                }
                resize_tick.update(|t| *t = t.wrapping_add(1));
            });
            if let Ok(ro) = web_sys::ResizeObserver::new(callback.as_ref().unchecked_ref()) {
                ro.observe(&el);
                observer.set_value(Some(ro));
            }
            callback.forget();
        });
        on_cleanup(move || {
            if let Some(Some(ro)) = observer.try_get_value() {
                ro.disconnect();
            }
        });
    }
    let rows = move || {
        let l = layout.get();
        Rows::new(&l, scroll_top.get(), area_h.get())
    };

    // The current selection: the active group's, else the first group's that has one.
    let current = {
        let groups = groups.clone();
        move || -> Option<SpanRef> {
            let of = |g: usize| {
                groups
                    .get(g)
                    .and_then(|x| x.ctx.selected.get().map(|span| SpanRef { group: g, span }))
            };
            of(active.get()).or_else(|| (0..groups.len()).find_map(of))
        }
    };
    // Select one span (or none): every other group's selection is cleared.
    let select = {
        let groups = groups.clone();
        move |r: Option<SpanRef>| {
            for (g, x) in groups.iter().enumerate() {
                let want = r.filter(|r| r.group == g).map(|r| r.span);
                if x.ctx.selected.get_untracked() != want {
                    x.ctx.selected.set(want);
                }
            }
            if let Some(r) = r {
                active.set(r.group);
            }
        }
    };
    // A span's [start, end] in axis time.
    let extent_axis = {
        let groups = groups.clone();
        move |r: SpanRef| -> Option<(f64, f64)> {
            let e = groups.get(r.group)?.ctx.model.extent(r.span)?;
            let l = layout.get_untracked();
            Some((l.to_axis(r.group, e.start_ns), l.to_axis(r.group, e.end_ns)))
        }
    };
    // Scroll the lanes so that span `r`'s lane shows.
    let reveal_lane = {
        let groups = groups.clone();
        move |r: SpanRef| {
            let Some(e) = groups.get(r.group).and_then(|x| x.ctx.model.extent(r.span)) else {
                return;
            };
            let Some(el) = scroll_ref.get_untracked() else {
                return;
            };
            let l = layout.get_untracked();
            let now = f64::from(el.scroll_top());
            let to = scroll_to_lane(&l, r.group, e.depth as usize, now, area_h.get_untracked());
            if (to - now).abs() > 0.5 {
                el.set_scroll_top(to.round() as i32);
            }
        }
    };

    // Whether the module spans' labels (their keys) have been built, after the first frame.
    let labels_built = RwSignal::new(false);
    // Search over every group; the matches become each group's highlights.
    let query = RwSignal::new(String::new());
    let current_match: RwSignal<Option<usize>> = RwSignal::new(None);
    let matches = {
        let groups = groups.clone();
        Memo::new(move |_| {
            let q = query.get();
            let l = layout.get();
            // A query typed before the labels were built is matched again against them.
            labels_built.track();
            let per_group = groups.iter().enumerate().map(|(g, x)| {
                let model = &x.ctx.model;
                let spans = &model.doc.spans;
                // By its name and by what the chart labels it with (a module span's key).
                matching_spans(
                    spans
                        .iter()
                        .enumerate()
                        .map(|(i, s)| (s.name.as_str(), Some(model.span_label(i)), s.start_ns)),
                    &q,
                )
                .into_iter()
                .map(|i| {
                    let start = spans.get(i as usize).map_or(0, |s| s.start_ns);
                    (l.to_axis(g, start), i)
                })
                .collect::<Vec<_>>()
            });
            Arc::new(
                merge_by_time(per_group)
                    .into_iter()
                    .map(|(group, span)| SpanRef { group, span })
                    .collect::<Vec<_>>(),
            )
        })
    };
    {
        let groups = groups.clone();
        Effect::new(move |was_searching: Option<bool>| {
            let m = matches.get();
            current_match.set(None);
            let searching = !query.with(|q| q.trim().is_empty());
            if searching {
                for (g, x) in groups.iter().enumerate() {
                    let mine: Vec<u32> =
                        m.iter().filter(|r| r.group == g).map(|r| r.span).collect();
                    x.ctx.highlighted.set(Arc::new(mine));
                }
            } else if was_searching == Some(true) {
                for x in groups.iter() {
                    x.ctx.highlighted.set(Arc::new(Vec::new()));
                }
            }
            searching
        });
    }

    // Module spans are labelled by their module keys (`TraceModel::span_label`), built after the
    // first frame (on a large trace they take a while): then the chart repaints with them.
    // Traces without module names have no such labels and skip the work.
    {
        let groups = groups.clone();
        leptos::task::spawn_local(async move {
            super::frame::next_frame().await;
            crate::load::yield_now().await;
            let mut built = false;
            for x in groups.iter() {
                if names_mode(&x.ctx.model.doc.spans) {
                    x.ctx.model.module_paths();
                    built = true;
                }
            }
            if built {
                let _ = labels_built.try_set(true);
                let _ = resize_tick.try_update(|t| *t = t.wrapping_add(1));
            }
        });
    }

    // Repaint whenever anything drawn changes.
    {
        let groups = groups.clone();
        let colours = colours.clone();
        let keys = keys.clone();
        let select = select.clone();
        let reveal_lane = reveal_lane.clone();
        Effect::new(move |_| {
            resize_tick.track();
            let (Some(canvas), Some(minimap)) = (canvas_ref.get(), minimap_ref.get()) else {
                return;
            };
            let height = area_h.get();
            if height < 1.0 {
                // Not laid out yet: the observer reports the area's height first.
                return;
            }
            let css_height = format!("{height}px");
            let style = web_sys::HtmlElement::style(&canvas);
            if style.get_property_value("height").ok().as_deref() != Some(css_height.as_str()) {
                let _ = style.set_property("height", &css_height);
            }
            let width = f64::from(canvas.client_width()).max(1.0);
            let l = layout.get();
            let view = view_sig.get();
            let bounds = (l.start_ns, l.end_ns);
            if let Some(next) = settle
                .try_update_value(|s| s.next(&view, bounds, width))
                .flatten()
            {
                // A moved axis, the first real width or a new one: this effect runs again.
                view_sig.set(next);
                return;
            }
            if let Some(state) = pending.get_value() {
                // The URL's window, selection and range, once the real width is known.
                pending.set_value(None);
                for (g, id) in &state.selected {
                    let span = groups.get(*g).and_then(|x| x.ctx.model.doc.span_index(id));
                    if let Some(span) = span {
                        let r = SpanRef {
                            group: *g,
                            span: span as u32,
                        };
                        select(Some(r));
                        reveal_lane(r);
                    }
                }
                if state.range.is_some() {
                    page.range.set(state.range);
                }
                if let Some((s, e)) = state.view {
                    view_sig.set(view.show_range(s, e, 0.0));
                    return;
                }
            }
            let selected: Vec<SpanRef> = groups
                .iter()
                .enumerate()
                .filter_map(|(g, x)| x.ctx.selected.get().map(|span| SpanRef { group: g, span }))
                .collect();
            let highlighted: Vec<Arc<Vec<u32>>> =
                groups.iter().map(|x| x.ctx.highlighted.get()).collect();
            let hl: Vec<&[u32]> = highlighted.iter().map(|h| h.as_slice()).collect();
            let frame = Frame {
                groups: &groups,
                colours: &colours,
                keys: &keys,
                theme: theme.get(),
                layout: &l,
                view: &view,
                rows: Rows::new(&l, scroll_top.get(), height),
                selected: &selected,
                highlighted: &hl,
                range: page.dragging.get().or_else(|| page.range.get()),
            };
            let memory = memory_ref.get();
            paint_frame(
                &frame,
                &canvas,
                &minimap,
                memory.as_ref(),
                raster,
                minimap_cache,
            );
        });
    }
    // Show a range when a table, the details or a panel asks for it (in the group's time),
    // and bring the selected span's lane into view.
    for (g, x) in groups.iter().enumerate() {
        let focus = x.ctx.focus;
        let selected = x.ctx.selected;
        let reveal_lane = reveal_lane.clone();
        Effect::new(move |_| {
            if let Some((s, e)) = focus.get() {
                let l = layout.get_untracked();
                view_sig.update(|v| *v = show(v, l.to_axis(g, s), l.to_axis(g, e)));
                active.set(g);
                focus.set(None);
                if let Some(span) = selected.get_untracked() {
                    reveal_lane(SpanRef { group: g, span });
                }
            }
        });
    }
    keep_in_url(groups.clone(), files.clone(), page, view_sig);
    let span_at = {
        let groups = groups.clone();
        let colours = colours.clone();
        let keys = keys.clone();
        move |x: f64, y: f64| -> Option<SpanRef> {
            let src = Source {
                groups: &groups,
                colours: &colours,
                keys: &keys,
                theme: Theme::Light,
            };
            let l = layout.get_untracked();
            let rows = Rows::new(&l, scroll_top.get_untracked(), area_h.get_untracked());
            hit(&l, &src, &view_sig.get_untracked(), rows, x, y)
        }
    };
    let on_wheel = move |ev: web_sys::WheelEvent| {
        ev.prevent_default();
        let x = f64::from(ev.offset_x());
        view_sig.update(|v| *v = wheel(v, x, ev.delta_x(), ev.delta_y(), ev.ctrl_key()));
    };
    let on_down = move |ev: web_sys::MouseEvent| {
        if ev.button() != 0 {
            return;
        }
        let (x, y) = (f64::from(ev.offset_x()), f64::from(ev.offset_y()));
        let (client_x, view) = (f64::from(ev.client_x()), view_sig.get_untracked());
        let mode = pointer
            .try_update_value(|p| p.down(ev.shift_key(), x, y, client_x, view))
            .unwrap_or(DragMode::Pan);
        if mode == DragMode::Range {
            // No text selection while dragging a range with Shift.
            ev.prevent_default();
            if let Some(c) = canvas_ref.get_untracked() {
                let _ = c.focus();
            }
        }
    };
    let on_move = {
        let span_at = span_at.clone();
        move |ev: web_sys::MouseEvent| {
            let (x, y) = (f64::from(ev.offset_x()), f64::from(ev.offset_y()));
            let view = view_sig.get_untracked();
            let moved = pointer.try_update_value(|p| p.moved(x, f64::from(ev.client_x()), &view));
            match moved {
                Some(Moved::Range(Some(r))) => {
                    if page.dragging.get_untracked() != Some(r) {
                        page.dragging.set(Some(r));
                    }
                }
                Some(Moved::Range(None)) | None => {}
                Some(Moved::Panned(v)) => {
                    view_sig.set(v);
                    if hover.get_untracked().is_some() {
                        hover.set(None);
                    }
                }
                Some(Moved::Hover) => hover.set(span_at(x, y).map(|span| Hover { x, y, span })),
            }
        }
    };
    let on_up = {
        let span_at = span_at.clone();
        let select = select.clone();
        move |ev: web_sys::MouseEvent| {
            let (x, y) = (f64::from(ev.offset_x()), f64::from(ev.offset_y()));
            commit_drag(page);
            if pointer.try_update_value(|p| p.up(x)) == Some(true) {
                select(span_at(x, y));
            }
        }
    };
    let on_leave = move |_| {
        commit_drag(page);
        pointer.update_value(Pointer::leave);
        hover.set(None);
    };
    let on_key = {
        let groups = groups.clone();
        let current = current.clone();
        let select = select.clone();
        let extent_axis = extent_axis.clone();
        let reveal_lane = reveal_lane.clone();
        move |ev: web_sys::KeyboardEvent| {
            // Keys typed into the search box (or any field) are the field's.
            if ev
                .target()
                .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
                .is_some_and(|el| matches!(el.tag_name().as_str(), "INPUT" | "SELECT" | "TEXTAREA"))
            {
                return;
            }
            if ev.ctrl_key() || ev.meta_key() || ev.alt_key() {
                return;
            }
            let Some(action) = key_action(&ev.key()) else {
                return;
            };
            ev.prevent_default();
            let v = view_sig.get_untracked();
            match action {
                KeyAction::View(k) => {
                    let whole = layout.with_untracked(|l| l.fit(v.width_px));
                    let sel = untrack(&current).and_then(&extent_axis);
                    view_sig.set(view_after(k, &v, whole, sel));
                }
                KeyAction::Deselect => {
                    if page.range.get_untracked().is_some() {
                        page.range.set(None);
                    } else {
                        select(None);
                    }
                }
                KeyAction::ScrollLanes(pages) => {
                    if let Some(el) = scroll_ref.get_untracked() {
                        let step = (area_h.get_untracked() - AXIS_PX - LANE_PX).max(LANE_PX);
                        let to = f64::from(el.scroll_top()) + f64::from(pages) * step;
                        el.set_scroll_top(to.max(0.0).round() as i32);
                    }
                }
                KeyAction::Move(nav) => {
                    // Without a selection, start at the active group's first root.
                    let next = match untrack(&current) {
                        Some(r) => groups.get(r.group).and_then(|x| {
                            navigate(&x.ctx.model.doc, r.span, span_move(nav)).map(|span| SpanRef {
                                group: r.group,
                                span,
                            })
                        }),
                        None => {
                            let g = active.get_untracked();
                            groups.get(g).and_then(|x| {
                                x.ctx
                                    .model
                                    .doc
                                    .tree
                                    .roots
                                    .first()
                                    .map(|&span| SpanRef { group: g, span })
                            })
                        }
                    };
                    if let Some(r) = next {
                        select(Some(r));
                        reveal_lane(r);
                        if let Some((s, e)) = extent_axis(r) {
                            view_sig.set(reveal(&v, s, e));
                        }
                    }
                }
            }
        }
    };
    let go_match = {
        let select = select.clone();
        let extent_axis = extent_axis.clone();
        let reveal_lane = reveal_lane.clone();
        move |forward: bool| {
            let m = matches.get_untracked();
            if let Some(pos) = step_match(m.len(), current_match.get_untracked(), forward) {
                current_match.set(Some(pos));
                let r = m[pos];
                select(Some(r));
                reveal_lane(r);
                if let Some((s, e)) = extent_axis(r) {
                    view_sig.update(|v| *v = to_match(v, s, e));
                }
            }
        }
    };
    let zoom_selection = {
        let current = current.clone();
        let extent_axis = extent_axis.clone();
        move |_| {
            if let Some((s, e)) = untrack(&current).and_then(&extent_axis) {
                view_sig.update(|v| *v = show(v, s, e));
            }
        }
    };
    let minimap_set = move |ev: &web_sys::MouseEvent| {
        if let Some(el) = minimap_ref.get_untracked() {
            let width = f64::from(el.client_width());
            view_sig.update(|v| *v = view_for_minimap_click(v, f64::from(ev.offset_x()), width));
        }
    };
    // A press anywhere in the chart but its fields and buttons gives the canvas the focus,
    // so the chart's keys work after a click on the minimap or the memory strip too.
    let focus_chart = move |ev: web_sys::MouseEvent| {
        let interactive = ev
            .target()
            .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
            .is_some_and(|el| {
                matches!(
                    el.tag_name().as_str(),
                    "INPUT" | "SELECT" | "TEXTAREA" | "BUTTON" | "LABEL"
                ) || el.closest("button, label").ok().flatten().is_some()
            });
        if interactive {
            return;
        }
        if let Some(c) = canvas_ref.get_untracked() {
            if !ev
                .target()
                .is_some_and(|t| JsValue::from(t) == JsValue::from(c.clone()))
            {
                // The default would move the focus to the page: keep it on the canvas.
                ev.prevent_default();
            }
            let _ = c.focus();
        }
    };

    let tooltip = {
        let groups = groups.clone();
        move || {
            hover
                .get()
                .and_then(|h| tooltip(&groups, h, view_sig.get_untracked().width_px))
        }
    };
    let selected_id = {
        let groups = groups.clone();
        let current = current.clone();
        move || {
            current()
                .and_then(|r| {
                    groups
                        .get(r.group)?
                        .ctx
                        .model
                        .doc
                        .spans
                        .get(r.span as usize)
                        .map(|s| s.id.to_string())
                })
                .unwrap_or_default()
        }
    };
    let group_items = groups
        .iter()
        .enumerate()
        .map(|(g, x)| {
            let ctx = x.ctx.clone();
            let label = x.label.clone();
            view! {
                <li
                    data-testid="chart-group"
                    data-group=g.to_string()
                    data-shift-ns=move || {
                        format!("{:.0}", layout.with(|l| l.groups.get(g).map_or(0.0, |r| r.shift_ns)))
                    }
                    data-selected=move || {
                        ctx.selected
                            .get()
                            .and_then(|i| ctx.model.doc.spans.get(i as usize).map(|s| s.id.to_string()))
                            .unwrap_or_default()
                    }
                >
                    {label}
                </li>
            }
        })
        .collect_view();
    let memory_legend = memory_legend(&groups);
    let wrap_height = move || format!("{}px", layout.with(|l| l.height_px));
    // How many spans are outlined (search matches, a table row's spans), for tests.
    let highlighted_count = {
        let groups = groups.clone();
        move || {
            groups
                .iter()
                .map(|x| x.ctx.highlighted.with(|h| h.len()))
                .sum::<usize>()
                .to_string()
        }
    };
    let range_attr = move |range: RwSignal<Option<(u64, u64)>>, end: bool| {
        range
            .get()
            .map(|(s, e)| if end { e } else { s }.to_string())
            .unwrap_or_default()
    };

    view! {
        <div
            class="flame-chart"
            data-testid="flame-chart"
            data-groups=groups.len().to_string()
            data-view-start-ns=move || format!("{:.0}", view_sig.get().start_ns)
            data-view-end-ns=move || format!("{:.0}", view_sig.get().end_ns())
            data-selected=selected_id
            data-range-start-ns=move || range_attr(page.range, false)
            data-range-end-ns=move || range_attr(page.range, true)
            data-drag-start-ns=move || range_attr(page.dragging, false)
            data-drag-end-ns=move || range_attr(page.dragging, true)
            data-lanes-top=move || format!("{:.0}", rows().top_px)
            data-highlighted=highlighted_count
            on:keydown=on_key
            on:mousedown=focus_chart
        >
            <div class="chart-toolbar">
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
                    <button type="button" on:click={
                        let go = go_match.clone();
                        move |_| go(false)
                    } aria-label="previous match">"↑"</button>
                    <button type="button" on:click=move |_| go_match(true) aria-label="next match">"↓"</button>
                </div>
                <button type="button" data-testid="zoom-selection" on:click=zoom_selection>
                    "Zoom to selection"
                </button>
                <button
                    type="button"
                    data-testid="zoom-fit"
                    on:click=move |_| view_sig.update(|v| *v = layout.with_untracked(|l| l.fit(v.width_px)))
                >
                    "Fit"
                </button>
                // Always in place (hidden without a range), so that adding a range does not
                // move the toolbar's other items or the chart.
                <button type="button" class="range-clear" data-testid="range-clear-chart"
                    class:unset=move || page.range.get().is_none()
                    disabled=move || page.range.get().is_none()
                    aria-hidden=move || page.range.get().is_none().to_string()
                    on:click=move |_| page.range.set(None)>
                    "Clear range"
                </button>
                {children.map(|c| c())}
                <span class="chart-hint muted" title="Shift+drag: select a range · ?: the chart's keys">
                    "Shift+drag: range · ? keys"
                </span>
            </div>
            <ul class="visually-hidden" aria-label="lane groups">{group_items}</ul>
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
            <div class="chart-stage">
                <div
                    class="chart-scroll"
                    node_ref=scroll_ref
                    data-testid="chart-scroll"
                    on:scroll=move |_| {
                        if let Some(el) = scroll_ref.get_untracked() {
                            scroll_top.set(f64::from(el.scroll_top()));
                            hover.set(None);
                        }
                    }
                >
                    <div class="chart-wrap" style:height=wrap_height>
                        <canvas
                            class="chart"
                            node_ref=canvas_ref
                            tabindex="0"
                            role="img"
                            aria-label="flame chart: W/S zoom, A/D pan, Shift+drag selects a range, arrow up/down parent/child, [ ] siblings, F zoom to selection, 0 fit, ? all keys"
                            data-testid="timeline-canvas"
                            on:wheel=on_wheel
                            on:mousedown=on_down
                            on:mousemove=on_move
                            on:mouseup=on_up
                            on:mouseleave=on_leave
                        ></canvas>
                    </div>
                </div>
                {tooltip}
            </div>
            {(!memory_legend.is_empty()).then(|| {
                view! {
                    <div class="memory-strip">
                        <canvas class="memory-curve" node_ref=memory_ref style:height=format!("{MEMORY_PX}px") data-testid="memory-curve" aria-label="live bytes over time per device"></canvas>
                        <ul class="legend" aria-label="memory legend" data-testid="memory-legend">
                            <li>"live memory:"</li>
                            {memory_legend.into_iter().map(|(i, device, peak)| view! {
                                <li>
                                    <span class="swatch" style:background=move || device_color(i, theme.get())></span>
                                    {device} " (peak " {peak} ")"
                                </li>
                            }).collect_view()}
                        </ul>
                    </div>
                }
            })}
        </div>
    }
}

/// The range dragged so far becomes the view's range (the tabs follow it from now on).
fn commit_drag(page: PageState) {
    if let Some(r) = page.dragging.get_untracked() {
        page.dragging.set(None);
        if page.range.get_untracked() != Some(r) {
            page.range.set(Some(r));
        }
    }
}
