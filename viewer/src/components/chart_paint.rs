//! Painting the flame chart: the scene of [`crate::timeline::scene`] rasterised strip by strip
//! into the canvas (rectangles, rules, outlines, a selected range), its text drawn on top;
//! the minimap; the memory strip. The component ([`super::timeline`]) decides what to paint.

use std::sync::Arc;

use leptos::prelude::*;
use wasm_bindgen::{Clamped, JsCast};
use web_sys::CanvasRenderingContext2d;

use crate::timeline::layout::{ChartLayout, GROUP_HEADER_PX, LANE_PX};
use crate::timeline::memory_curve::{curve_lines, DeviceCurve};
use crate::timeline::minimap::window_on_minimap;
use crate::timeline::palette::{axis_color, device_color, highlight_color, merged_fill, Theme};
use crate::timeline::raster::{rgb, Raster};
use crate::timeline::scene::{minimap_rects, Rect, Scene, SpanSource, MINIMAP_PX};
use crate::timeline::ticks::label_x;
use crate::timeline::viewport::Viewport;

/// Height of the memory strip.
pub(super) const MEMORY_PX: f64 = 48.0;

/// The 2D context of a canvas sized to its CSS box times the device pixel ratio, with the
/// transform set so that drawing uses CSS pixels. Returns the CSS width and the ratio too.
pub(super) fn prepare(
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
pub(super) fn raster_rects(raster: &mut Raster, rects: &[Rect]) {
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
pub(super) fn put_raster(ctx: &CanvasRenderingContext2d, raster: &Raster) {
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
/// a strip of 64 rows however large the canvas is. Wasm memory never shrinks, so the buffer
/// is kept small rather than the number of `putImageData` calls.
const STRIP_ROWS: usize = 64;
/// Rows past this are not rasterised: no browser keeps a canvas taller than this (Chromium's
/// limit is 32 767 pixels a side; the chart's canvas is as high as its area, far below it).
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
pub(super) fn paint(
    canvas: &web_sys::HtmlCanvasElement,
    s: &Scene,
    theme: Theme,
    raster: &mut Raster,
) {
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
        // A selected range: a veil over the lanes and a rule at each end.
        if let Some((x0, x1)) = s.range_px {
            raster.fill_rect(
                x0,
                axis,
                (x1 - x0).max(1.0),
                s.height_px - axis,
                highlight,
                0.14,
            );
            for x in [x0, x1] {
                raster.fill_rect(x.round(), 0.0, 1.0, s.height_px, highlight, 0.9);
            }
        }
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
        let label_w = ctx.measure_text(&t.label).map_or(0.0, |m| m.width());
        let _ = ctx.fill_text(&t.label, label_x(t.x, label_w, width), axis - 8.0);
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
pub(super) type MinimapCache = Option<(f64, Arc<ChartLayout>, Theme, Raster)>;

/// Paint the minimap and the visible window on it.
pub(super) fn paint_minimap(
    canvas: &web_sys::HtmlCanvasElement,
    layout: &Arc<ChartLayout>,
    src: &impl SpanSource,
    theme: Theme,
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
                || *t != theme
                || (r.width(), r.height()) != (device_w, device_h)
        })
    });
    if stale {
        let rects = minimap_rects(layout, src, width, merged_fill(theme));
        let mut raster = Raster::new();
        raster.reset(device_w, device_h, dpr);
        raster_rects(&mut raster, &rects);
        cache.set_value(Some((width, layout.clone(), theme, raster)));
    }
    cache.with_value(|c| {
        if let Some((_, _, _, raster)) = c {
            put_raster(&ctx, raster);
        }
    });
    let (x0, x1) = window_on_minimap(view, width);
    ctx.set_stroke_style_str(highlight_color(theme));
    ctx.set_line_width(2.0);
    ctx.stroke_rect(x0 + 1.0, 1.0, (x1 - x0 - 2.0).max(1.0), MINIMAP_PX - 2.0);
}

/// Paint every group's devices' live bytes on one scale (the largest peak), rasterised in
/// `raster` (a canvas stroke of the curve cost about 10 ms a frame).
pub(super) fn paint_memory(
    canvas: &web_sys::HtmlCanvasElement,
    curves: &[(usize, &DeviceCurve)],
    layout: &ChartLayout,
    view: &Viewport,
    theme: Theme,
    raster: &mut Raster,
) {
    let Some((ctx, _, dpr)) = prepare(canvas, MEMORY_PX) else {
        return;
    };
    let top = curves.iter().map(|(_, c)| c.peak_bytes).max().unwrap_or(0);
    // Each device's colour and polylines.
    let lines: Vec<_> = curves
        .iter()
        .enumerate()
        .map(|(i, (g, curve))| {
            (
                rgb(device_color(i, theme)).unwrap_or([0x80; 3]),
                curve_lines(curve, &layout.group_view(view, *g), top, MEMORY_PX),
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
