//! The flame chart, one component for every view: one lane group (a file), several (files on
//! one axis) or two (a comparison's sides). It paints the display list of
//! [`crate::timeline::scene`], hands keys, wheel and drags to [`crate::timeline::input`], and
//! keeps its window and selection in the URL fragment ([`crate::timeline::fragment`]).
//! Each group is a [`TraceContext`]: its model and its own selection, highlights and focus
//! requests, so the tables and the details panel of a file talk to the chart as they always did.

use std::sync::Arc;
use std::time::Duration;

use leptos::context::Provider;
use leptos::html::Canvas;
use leptos::prelude::*;
use wasm_bindgen::{Clamped, JsCast, JsValue};
use web_sys::CanvasRenderingContext2d;

use candle_trace_schema::analysis::units::{format_bytes, format_ns};
use candle_trace_schema::format::events::SpanKind;

use super::details::SpanDetailsPanel;
use super::TraceContext;
use crate::model::spans::{navigate, SpanMove};
use crate::timeline::fragment::ChartState;
use crate::timeline::input::{
    key_action, reveal, show, to_match, view_after, wheel, Drag, KeyAction, Nav,
};
use crate::timeline::lanes::{Lanes, SpanExtent};
use crate::timeline::layout::{ChartLayout, GROUP_HEADER_PX, LANE_PX};
use crate::timeline::memory_curve::curve_lines;
use crate::timeline::minimap::{tooltip_position, view_for_minimap_click, window_on_minimap};
use crate::timeline::palette::{
    axis_color, colour_key, device_color, highlight_color, kind_name, merged_fill, span_fill,
    step_name, Theme, STEP_LEGEND,
};
use crate::timeline::raster::{rgb, Raster};
use crate::timeline::scene::{
    hit, minimap_rects, scene, Marks, Rect, Scene, SpanRef, SpanSource, MINIMAP_PX,
};
use crate::timeline::search::{matching_spans, merge_by_time, step_match};
use crate::timeline::viewport::Viewport;

/// Width the tooltip is assumed to have when placing it (its CSS `max-width`).
const TOOLTIP_PX: f64 = 320.0;
/// Height of the memory strip.
const MEMORY_PX: f64 = 48.0;
/// The URL fragment is written once window and selection have not changed for this long.
const FRAGMENT_DELAY: Duration = Duration::from_millis(250);

/// A span's fill: (group, span index, theme) → CSS colour.
pub type FillFn = Arc<dyn Fn(usize, u32, Theme) -> &'static str + Send + Sync>;
/// A span's colour key for level-of-detail merging: (group, span index) → key.
pub type KeyFn = Arc<dyn Fn(usize, u32) -> u32 + Send + Sync>;

/// How a chart colours spans.
#[derive(Clone)]
pub struct Colours {
    /// Each span's fill.
    pub fill: FillFn,
    /// Each span's colour key: merged blocks of different keys are drawn grey.
    pub key: KeyFn,
}

impl Colours {
    /// By step (hue) and kind (shade), the page's usual colours.
    pub fn by_step(groups: &Arc<Vec<ChartGroup>>) -> Self {
        let (a, b) = (groups.clone(), groups.clone());
        Colours {
            fill: Arc::new(move |g, i, theme| {
                a.get(g)
                    .and_then(|x| x.ctx.model.doc.spans.get(i as usize))
                    .map_or(merged_fill(theme), |s| {
                        span_fill(s.step, s.span_kind, theme)
                    })
            }),
            key: Arc::new(move |g, i| {
                b.get(g)
                    .and_then(|x| x.ctx.model.doc.spans.get(i as usize))
                    .map_or(0, |s| colour_key(s.step, s.span_kind))
            }),
        }
    }
}

/// One lane group: a name (its header row when there are several) and the file's context.
#[derive(Clone)]
pub struct ChartGroup {
    /// Shown above the group's lanes.
    pub label: String,
    /// The file's model, selection, highlights and focus requests.
    pub ctx: TraceContext,
}

impl ChartGroup {
    /// A group with fresh signals for `model`.
    pub fn new(label: String, model: Arc<crate::model::TraceModel>, theme: Signal<Theme>) -> Self {
        ChartGroup {
            label,
            ctx: TraceContext {
                model,
                selected: RwSignal::new(None),
                highlighted: RwSignal::new(Arc::new(Vec::new())),
                focus: RwSignal::new(None),
                theme,
            },
        }
    }
}

/// Each group's spans' colour keys, computed once: level of detail asks for a key per span
/// in view, a million times a frame when a million spans are in view.
type Keys = Arc<Vec<Vec<u8>>>;

fn keys_of(groups: &[ChartGroup], colours: &Colours) -> Keys {
    Arc::new(
        groups
            .iter()
            .enumerate()
            .map(|(g, x)| {
                (0..x.ctx.model.doc.spans.len() as u32)
                    .map(|i| u8::try_from((colours.key)(g, i)).unwrap_or(u8::MAX))
                    .collect()
            })
            .collect(),
    )
}

/// The groups as [`SpanSource`] for one frame.
struct Source<'a> {
    groups: &'a [ChartGroup],
    colours: &'a Colours,
    keys: &'a [Vec<u8>],
    theme: Theme,
}

impl SpanSource for Source<'_> {
    fn lanes(&self, g: usize) -> Option<&Lanes> {
        self.groups.get(g).map(|x| &x.ctx.model.lanes)
    }
    fn name(&self, g: usize, span: u32) -> &str {
        self.groups
            .get(g)
            .and_then(|x| x.ctx.model.doc.spans.get(span as usize))
            .map_or("", |s| s.name.as_str())
    }
    fn fill(&self, g: usize, span: u32) -> &'static str {
        (self.colours.fill)(g, span, self.theme)
    }
    fn key(&self, g: usize, span: u32) -> u32 {
        self.keys
            .get(g)
            .and_then(|k| k.get(span as usize))
            .map_or(0, |&k| u32::from(k))
    }
    fn extent(&self, g: usize, span: u32) -> Option<SpanExtent> {
        self.groups.get(g)?.ctx.model.extent(span)
    }
}

/// The 2D context of a canvas sized to its CSS box times the device pixel ratio, with the
/// transform set so that drawing uses CSS pixels. Returns the CSS width and the ratio too.
fn prepare(
    canvas: &web_sys::HtmlCanvasElement,
    css_height: f64,
) -> Option<(CanvasRenderingContext2d, f64, f64)> {
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
    Some((ctx, css_width, dpr))
}

/// Fill `rects` into `raster`, a band (rectangles of the same rows, as a lane's are) at a
/// time, each colour read once per change of fill.
fn raster_rects(raster: &mut Raster, rects: &[Rect]) {
    let mut current: (&str, [u8; 3]) = ("", [0; 3]);
    let mut band: Vec<(f64, f64, [u8; 3])> = Vec::new();
    let mut start = 0;
    while start < rects.len() {
        let (y, h) = (rects[start].y, rects[start].h);
        let len = rects[start..]
            .iter()
            .take_while(|r| r.y == y && r.h == h)
            .count();
        band.clear();
        for r in &rects[start..start + len] {
            if r.fill != current.0 {
                current = (r.fill, rgb(r.fill).unwrap_or([0x80; 3]));
            }
            band.push((r.x, r.w, current.1));
        }
        raster.fill_band(y, h, &band);
        start += len;
    }
}

/// Put `raster`'s pixels on the canvas at its place, its first row on the picture's row
/// `raster.top()` (device pixels: the transform is ignored).
fn put_raster(ctx: &CanvasRenderingContext2d, raster: &Raster) {
    if raster.width() == 0 || raster.height() == 0 {
        return;
    }
    if let Ok(image) = web_sys::ImageData::new_with_u8_clamped_array_and_sh(
        Clamped(raster.data()),
        raster.width() as u32,
        raster.height() as u32,
    ) {
        let _ = ctx.put_image_data(&image, 0.0, raster.top() as f64);
    }
}

/// The rectangles' labels.
fn fill_labels(ctx: &CanvasRenderingContext2d, rects: &[Rect]) {
    let mut current = "";
    for r in rects {
        if let Some((label, colour)) = &r.label {
            if *colour != current {
                ctx.set_fill_style_str(colour);
                current = colour;
            }
            let _ = ctx.fill_text(label, r.x + 3.0, r.y + LANE_PX - 7.0);
        }
    }
}

/// Device rows rasterised at a time: the buffer (one for the chart and the memory strip) stays
/// a strip of 64 rows, about 320 KB at 1246 pixels wide, however tall the chart is (a
/// 100 000-deep trace makes it two million CSS pixels tall). Wasm memory never shrinks, so the
/// buffer is kept small rather than the number of `putImageData` calls.
const STRIP_ROWS: usize = 64;
/// Rows past this are not rasterised: no browser keeps a canvas taller than this (Chromium's
/// limit is 32 767 pixels a side), so painting them would only cost time.
const MAX_RASTER_ROWS: usize = 32_767;

/// Rasterise `canvas`'s picture a strip of rows at a time: `draw` fills each strip (in the
/// whole picture's CSS coordinates), which is then put on the canvas in its place.
fn put_in_strips(
    ctx: &CanvasRenderingContext2d,
    canvas: &web_sys::HtmlCanvasElement,
    dpr: f64,
    raster: &mut Raster,
    mut draw: impl FnMut(&mut Raster),
) {
    let rows = (canvas.height() as usize).min(MAX_RASTER_ROWS);
    for top in (0..rows).step_by(STRIP_ROWS) {
        raster.reset_strip(
            canvas.width() as usize,
            STRIP_ROWS.min(rows - top),
            dpr,
            top,
        );
        draw(raster);
        put_raster(ctx, raster);
    }
}

/// Paint a scene: the tick rules, the rectangles and the outlines rasterised in `raster` strip
/// by strip, then the text on top.
fn paint(canvas: &web_sys::HtmlCanvasElement, s: &Scene, theme: Theme, raster: &mut Raster) {
    let Some((ctx, width, dpr)) = prepare(canvas, s.height_px) else {
        return;
    };
    let axis = crate::timeline::layout::AXIS_PX;
    let axis_rgb = rgb(axis_color(theme)).unwrap_or([0x80; 3]);
    let highlight = rgb(highlight_color(theme)).unwrap_or([0x80; 3]);
    // The scene's rectangles go top to bottom (group by group, lane by lane): each strip
    // takes the run of them that reaches into it.
    let mut first = 0;
    put_in_strips(&ctx, canvas, dpr, raster, |raster| {
        for t in &s.ticks {
            // A 1 px rule at a quarter opacity from under the label down through the lanes.
            raster.fill_rect(
                t.x.round(),
                axis - 6.0,
                1.0,
                s.height_px - (axis - 6.0),
                axis_rgb,
                0.25,
            );
        }
        let strip_top = raster.top() as f64 / dpr;
        let strip_bottom = (raster.top() + raster.height()) as f64 / dpr;
        while first < s.rects.len() && s.rects[first].y + s.rects[first].h <= strip_top {
            first += 1;
        }
        let reach = s.rects[first..]
            .iter()
            .take_while(|r| r.y < strip_bottom)
            .count();
        raster_rects(raster, &s.rects[first..first + reach]);
        // Outlines last, over the rectangles (a search can outline 20 000 spans: stroked on
        // the canvas, they cost 60 ms a frame).
        for o in &s.outlines {
            if o.y + o.h + o.line_px >= strip_top && o.y - o.line_px < strip_bottom {
                raster.stroke_rect(o.x, o.y, o.w, o.h, o.line_px, highlight);
            }
        }
    });
    ctx.set_font("11px system-ui, sans-serif");
    ctx.set_fill_style_str(axis_color(theme));
    for t in &s.ticks {
        let _ = ctx.fill_text(&t.label, t.x.round() + 3.5, axis - 8.0);
    }
    if !s.headers.is_empty() {
        ctx.set_font("bold 12px system-ui, sans-serif");
    }
    for h in &s.headers {
        ctx.fill_rect(0.0, h.y, width, 1.0);
        let _ = ctx.fill_text(&h.label, 4.0, h.y + GROUP_HEADER_PX - 5.0);
    }
    ctx.set_font("12px system-ui, sans-serif");
    fill_labels(&ctx, &s.rects);
}

/// The minimap's pixels for one width and layout (the minimap always shows everything).
type MinimapCache = Option<(f64, Arc<ChartLayout>, Theme, Raster)>;

/// Paint the minimap and the visible window on it.
fn paint_minimap(
    canvas: &web_sys::HtmlCanvasElement,
    layout: &Arc<ChartLayout>,
    src: &Source<'_>,
    view: &Viewport,
    cache: StoredValue<MinimapCache>,
) {
    let Some((ctx, width, dpr)) = prepare(canvas, MINIMAP_PX) else {
        return;
    };
    let (device_w, device_h) = (canvas.width() as usize, canvas.height() as usize);
    let stale = cache.with_value(|c| {
        c.as_ref().is_none_or(|(w, l, t, r)| {
            (*w - width).abs() > 0.5
                || !Arc::ptr_eq(l, layout)
                || *t != src.theme
                || (r.width(), r.height()) != (device_w, device_h)
        })
    });
    if stale {
        let rects = minimap_rects(layout, src, width, merged_fill(src.theme));
        let mut raster = Raster::new();
        raster.reset(device_w, device_h, dpr);
        raster_rects(&mut raster, &rects);
        cache.set_value(Some((width, layout.clone(), src.theme, raster)));
    }
    cache.with_value(|c| {
        if let Some((_, _, _, raster)) = c {
            put_raster(&ctx, raster);
        }
    });
    let (x0, x1) = window_on_minimap(view, width);
    ctx.set_stroke_style_str(highlight_color(src.theme));
    ctx.set_line_width(2.0);
    ctx.stroke_rect(x0 + 1.0, 1.0, (x1 - x0 - 2.0).max(1.0), MINIMAP_PX - 2.0);
}

/// Paint every group's devices' live bytes on one scale (the largest peak), rasterised in
/// `raster` (a canvas stroke of the curve cost about 10 ms a frame).
fn paint_memory(
    canvas: &web_sys::HtmlCanvasElement,
    groups: &[ChartGroup],
    layout: &ChartLayout,
    view: &Viewport,
    theme: Theme,
    raster: &mut Raster,
) {
    let Some((ctx, _, dpr)) = prepare(canvas, MEMORY_PX) else {
        return;
    };
    let curves = groups
        .iter()
        .enumerate()
        .flat_map(|(g, x)| x.ctx.model.memory_curves.iter().map(move |c| (g, c)));
    let top = curves.clone().map(|(_, c)| c.peak_bytes).max().unwrap_or(0);
    // Each device's colour and polylines.
    let lines: Vec<_> = curves
        .enumerate()
        .map(|(i, (g, curve))| {
            (
                rgb(device_color(i, theme)).unwrap_or([0x80; 3]),
                curve_lines(curve, &layout.group_view(view, g), top, MEMORY_PX),
            )
        })
        .collect();
    put_in_strips(&ctx, canvas, dpr, raster, |raster| {
        for (colour, device_lines) in &lines {
            for line in device_lines {
                raster.stroke_steps(line, 1.5, *colour);
            }
        }
    });
}

/// The page's URL fragment, as chart state.
fn read_fragment() -> ChartState {
    let hash = web_sys::window().and_then(|w| w.location().hash().ok());
    ChartState::parse(&hash.unwrap_or_default())
}

/// After `delay`, write the chart's state if it has not changed since, else wait for the rest
/// of [`FRAGMENT_DELAY`]. Nothing is written once the chart is gone (another file opened).
fn write_when_still(
    changed_ms: StoredValue<f64>,
    timer: StoredValue<bool>,
    state: Arc<dyn Fn() -> Option<ChartState>>,
    delay: Duration,
) {
    set_timeout(
        move || {
            let Some(changed) = changed_ms.try_get_value() else {
                return;
            };
            let quiet_ms = js_sys::Date::now() - changed;
            let wanted_ms = FRAGMENT_DELAY.as_secs_f64() * 1000.0;
            if quiet_ms + 1.0 < wanted_ms {
                let rest = Duration::from_secs_f64(((wanted_ms - quiet_ms) / 1000.0).max(0.001));
                write_when_still(changed_ms, timer, state, rest);
            } else {
                let _ = timer.try_set_value(false);
                if let Some(state) = state() {
                    write_fragment(&state.to_fragment());
                }
            }
        },
        delay,
    );
}

/// Replace the URL fragment without a history entry or a scroll.
fn write_fragment(fragment: &str) {
    if let Some(history) = web_sys::window().and_then(|w| w.history().ok()) {
        let _ = history.replace_state_with_url(&JsValue::NULL, "", Some(fragment));
    }
}

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
/// tooltip, memory strip and (optionally) the selected span's details.
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
    /// Show the selected span's details under the chart (the one-file page shows its own).
    #[prop(optional)]
    details: bool,
) -> impl IntoView {
    let keys = keys_of(&groups, &colours);
    let canvas_ref = NodeRef::<Canvas>::new();
    let minimap_ref = NodeRef::<Canvas>::new();
    let memory_ref = NodeRef::<Canvas>::new();
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
    let view_sig = RwSignal::new(layout.get_untracked().fit(1000.0));
    // The axis bounds the view was last given.
    let fitted = StoredValue::new(layout.with_untracked(|l| (l.start_ns, l.end_ns)));
    // The group whose selection the details, F and the arrow keys use.
    let active = RwSignal::new(0usize);
    let hover: RwSignal<Option<Hover>> = RwSignal::new(None);
    let drag: StoredValue<Option<Drag>> = StoredValue::new(None);
    let minimap_drag = StoredValue::new(false);
    let minimap_cache: StoredValue<MinimapCache> = StoredValue::new(None);
    // A strip of the chart's or the memory strip's pixels, kept between frames for its
    // allocation.
    let raster = StoredValue::new(Raster::new());
    // Whether the view has been fitted to the canvas's real width yet.
    let sized = StoredValue::new(false);
    let pending = StoredValue::new(Some(read_fragment()).filter(|s| s.files == files));
    let resize_tick = RwSignal::new(0u32);
    let resize = window_event_listener(leptos::ev::resize, move |_| {
        resize_tick.update(|t| *t = t.wrapping_add(1))
    });
    // Another file replaces this chart: stop listening then.
    on_cleanup(move || resize.remove());

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

    // Search over every group; the matches become each group's highlights.
    let query = RwSignal::new(String::new());
    let current_match: RwSignal<Option<usize>> = RwSignal::new(None);
    let matches = {
        let groups = groups.clone();
        Memo::new(move |_| {
            let q = query.get();
            let l = layout.get();
            let per_group = groups.iter().enumerate().map(|(g, x)| {
                let spans = &x.ctx.model.doc.spans;
                matching_spans(spans.iter().map(|s| (s.name.as_str(), s.start_ns)), &q)
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

    // Repaint whenever anything drawn changes.
    {
        let groups = groups.clone();
        let colours = colours.clone();
        let keys = keys.clone();
        let select = select.clone();
        Effect::new(move |_| {
            resize_tick.track();
            let (Some(canvas), Some(minimap)) = (canvas_ref.get(), minimap_ref.get()) else {
                return;
            };
            let width = f64::from(canvas.client_width()).max(1.0);
            let l = layout.get();
            let view = view_sig.get();
            if fitted.get_value() != (l.start_ns, l.end_ns) {
                // An offset moved: the same window on the new axis (or all of it).
                fitted.set_value((l.start_ns, l.end_ns));
                view_sig.set(view.rebound(l.start_ns, l.end_ns));
                return;
            }
            if !sized.get_value() {
                // The first real width: the whole axis in it; this effect runs again.
                sized.set_value(true);
                view_sig.set(l.fit(width));
                return;
            }
            if (view.width_px - width).abs() > 0.5 {
                // Adopt a new width; this effect runs again with it.
                view_sig.set(view.resized(width));
                return;
            }
            if let Some(state) = pending.get_value() {
                // The URL's window and selection, once the real width is known.
                pending.set_value(None);
                for (g, id) in &state.selected {
                    let span = groups.get(*g).and_then(|x| x.ctx.model.doc.span_index(id));
                    if let Some(span) = span {
                        select(Some(SpanRef {
                            group: *g,
                            span: span as u32,
                        }));
                    }
                }
                if let Some((s, e)) = state.view {
                    view_sig.set(view.show_range(s, e, 0.0));
                    return;
                }
            }
            let theme = theme.get();
            let src = Source {
                groups: &groups,
                colours: &colours,
                keys: &keys,
                theme,
            };
            let selected: Vec<SpanRef> = groups
                .iter()
                .enumerate()
                .filter_map(|(g, x)| x.ctx.selected.get().map(|span| SpanRef { group: g, span }))
                .collect();
            let highlighted: Vec<Arc<Vec<u32>>> =
                groups.iter().map(|x| x.ctx.highlighted.get()).collect();
            let hl: Vec<&[u32]> = highlighted.iter().map(|h| h.as_slice()).collect();
            let labels: Vec<&str> = groups.iter().map(|x| x.label.as_str()).collect();
            let marks = Marks {
                highlighted: &hl,
                selected: &selected,
            };
            let s = scene(&l, &src, &labels, &view, marks, merged_fill(theme));
            raster.update_value(|raster| paint(&canvas, &s, theme, raster));
            paint_minimap(&minimap, &l, &src, &view, minimap_cache);
            if let Some(memory) = memory_ref.get() {
                raster.update_value(|raster| {
                    paint_memory(&memory, &groups, &l, &view, theme, raster)
                });
            }
        });
    }
    // Show a range when a table, the details or a panel asks for it (in the group's time).
    for (g, x) in groups.iter().enumerate() {
        let focus = x.ctx.focus;
        Effect::new(move |_| {
            if let Some((s, e)) = focus.get() {
                let l = layout.get_untracked();
                view_sig.update(|v| *v = show(v, l.to_axis(g, s), l.to_axis(g, e)));
                active.set(g);
                focus.set(None);
            }
        });
    }
    // Keep the window and selection in the URL, written once they have not changed for
    // FRAGMENT_DELAY (during a zoom or a drag: one pending timer, no write, no state built).
    {
        let groups = groups.clone();
        let files = files.clone();
        let changed_ms: StoredValue<f64> = StoredValue::new(0.0);
        let timer = StoredValue::new(false);
        let tracked = groups.clone();
        // `None` once the chart is gone (another file opened).
        let state: Arc<dyn Fn() -> Option<ChartState>> = Arc::new(move || {
            let v = view_sig.try_get_untracked()?;
            let selected: Vec<(usize, String)> = groups
                .iter()
                .enumerate()
                .filter_map(|(g, x)| {
                    let i = x.ctx.selected.try_get_untracked().flatten()?;
                    Some((g, x.ctx.model.doc.spans.get(i as usize)?.id.to_string()))
                })
                .collect();
            Some(ChartState {
                files: files.clone(),
                view: Some((
                    v.start_ns.max(0.0).round() as u64,
                    v.end_ns().max(0.0).round() as u64,
                )),
                selected,
            })
        });
        Effect::new(move |_| {
            view_sig.track();
            for x in tracked.iter() {
                x.ctx.selected.track();
            }
            changed_ms.set_value(js_sys::Date::now());
            if !timer.get_value() {
                timer.set_value(true);
                write_when_still(changed_ms, timer, state.clone(), FRAGMENT_DELAY);
            }
        });
    }
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
            layout.with_untracked(|l| hit(l, &src, &view_sig.get_untracked(), x, y))
        }
    };
    let on_wheel = move |ev: web_sys::WheelEvent| {
        ev.prevent_default();
        let x = f64::from(ev.offset_x());
        view_sig.update(|v| *v = wheel(v, x, ev.delta_x(), ev.delta_y(), ev.ctrl_key()));
    };
    let on_down = move |ev: web_sys::MouseEvent| {
        if ev.button() == 0 {
            drag.set_value(Some(Drag::new(
                f64::from(ev.client_x()),
                view_sig.get_untracked(),
            )));
        }
    };
    let on_move = {
        let span_at = span_at.clone();
        move |ev: web_sys::MouseEvent| {
            let (x, y) = (f64::from(ev.offset_x()), f64::from(ev.offset_y()));
            if let Some(mut d) = drag.get_value() {
                let panned = d.to(f64::from(ev.client_x()));
                drag.set_value(Some(d));
                if let Some(v) = panned {
                    view_sig.set(v);
                    if hover.get_untracked().is_some() {
                        hover.set(None);
                    }
                    return;
                }
            }
            hover.set(span_at(x, y).map(|span| Hover { x, y, span }));
        }
    };
    let on_up = {
        let span_at = span_at.clone();
        let select = select.clone();
        move |ev: web_sys::MouseEvent| {
            if drag.get_value().is_some_and(|d| d.is_click()) {
                select(span_at(f64::from(ev.offset_x()), f64::from(ev.offset_y())));
            }
            drag.set_value(None);
        }
    };
    let on_leave = move |_| {
        drag.set_value(None);
        hover.set(None);
    };
    let on_key = {
        let groups = groups.clone();
        let current = current.clone();
        let select = select.clone();
        let extent_axis = extent_axis.clone();
        move |ev: web_sys::KeyboardEvent| {
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
                KeyAction::Deselect => select(None),
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
        move |forward: bool| {
            let m = matches.get_untracked();
            if let Some(pos) = step_match(m.len(), current_match.get_untracked(), forward) {
                current_match.set(Some(pos));
                let r = m[pos];
                select(Some(r));
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

    let tooltip = {
        let groups = groups.clone();
        move || {
            hover.get().and_then(|h| {
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
                let (left, top) =
                    tooltip_position(h.x, h.y, view_sig.get_untracked().width_px, TOOLTIP_PX);
                let group = (groups.len() > 1).then(|| x.label.clone());
                Some(view! {
                    <div
                        class="tooltip"
                        data-testid="tooltip"
                        style:left=format!("{left}px")
                        style:top=format!("{top}px")
                    >
                        <div class="tooltip-name">{s.name.to_string()}</div>
                        {group.map(|g| view! { <div>{g}</div> })}
                        <div>{kind_name(s.span_kind)} " · step " {step_name(s.step)}</div>
                        <div>"duration " {duration}</div>
                        <div>"self " {format_ns(self_ns)}</div>
                    </div>
                })
            })
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
    let memory_legend: Vec<(usize, String, String)> = groups
        .iter()
        .flat_map(|x| {
            let prefix = if groups.len() > 1 {
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
        .collect();
    let details_view = details.then(|| {
        let groups = groups.clone();
        move || {
            let g = active.get();
            groups.get(g).map(|x| {
                view! {
                    <Provider value=x.ctx.clone()>
                        <SpanDetailsPanel />
                    </Provider>
                }
            })
        }
    });
    let chart_height = move || format!("{}px", layout.with(|l| l.height_px));

    view! {
        <div
            class="flame-chart"
            data-testid="flame-chart"
            data-groups=groups.len().to_string()
            data-view-start-ns=move || format!("{:.0}", view_sig.get().start_ns)
            data-view-end-ns=move || format!("{:.0}", view_sig.get().end_ns())
            data-selected=selected_id
        >
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
            <div class="chart-scroll">
                <div class="chart-wrap">
                    <canvas
                        class="chart"
                        node_ref=canvas_ref
                        tabindex="0"
                        role="img"
                        aria-label="flame chart: W/S zoom, A/D pan, arrow up/down parent/child, [ ] siblings, F zoom to selection, 0 fit"
                        data-testid="timeline-canvas"
                        style:height=chart_height
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
            {(!memory_legend.is_empty()).then(|| {
                view! {
                    <div class="memory-strip">
                        <canvas class="memory-curve" node_ref=memory_ref style:height=format!("{MEMORY_PX}px") data-testid="memory-curve" aria-label="live bytes over time per device"></canvas>
                        <ul class="legend" aria-label="memory legend">
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
            <p class="timeline-help">
                "Wheel or W/S to zoom at the cursor, drag or A/D to pan, click a span for details; ↑/↓ parent/child, [ ] siblings, F zooms to the selection, 0 fits the run. The window and selection are kept in the page's address."
            </p>
            {details_view}
        </div>
    }
}

/// The step colour legend.
#[component]
pub fn StepLegend(
    /// Light or dark.
    theme: Signal<Theme>,
) -> impl IntoView {
    view! {
        <ul class="legend" aria-label="colour legend">
            {STEP_LEGEND
                .iter()
                .map(|(step, label)| {
                    view! {
                        <li>
                            <span
                                class="swatch"
                                style:background=move || span_fill(*step, SpanKind::Function, theme.get())
                            ></span>
                            {*label}
                        </li>
                    }
                })
                .collect_view()}
            <li class="legend-note">"shade: module light · function · op dark; grey = merged spans of mixed colours"</li>
        </ul>
    }
}

/// The one-file page's timeline: its context's model as one lane group.
#[component]
pub fn Timeline(
    /// The opened file's name (the URL fragment is kept for it).
    #[prop(into)]
    file_name: String,
) -> impl IntoView {
    let Some(ctx) = use_context::<TraceContext>() else {
        return view! { <p>"no trace"</p> }.into_any();
    };
    let theme = ctx.theme;
    let groups = Arc::new(vec![ChartGroup {
        label: file_name.clone(),
        ctx,
    }]);
    let colours = Colours::by_step(&groups);
    view! {
        <section class="timeline" aria-label="timeline">
            <div class="timeline-bar">
                <h3>"Timeline"</h3>
                <StepLegend theme=theme />
            </div>
            <FlameChart groups=groups offsets=Signal::derive(|| vec![0]) colours=colours theme=theme files=file_name />
        </section>
    }
    .into_any()
}
