//! One frame of the chart: the display list of the rows in view with their marks
//! ([`scene`]), painted by [`chart_paint`](crate::components::chart_paint) with the minimap
//! and the memory strip.

use std::sync::Arc;

use leptos::prelude::*;

use crate::components::chart_paint::{paint, paint_memory, paint_minimap, MinimapCache};
use crate::timeline::layout::ChartLayout;
use crate::timeline::memory_curve::DeviceCurve;
use crate::timeline::palette::{merged_fill, Theme};
use crate::timeline::raster::Raster;
use crate::timeline::scene::{scene, Marks, Rows, SpanRef};
use crate::timeline::viewport::Viewport;

use super::groups::KeyTable;
use super::{ChartGroup, Colours, Source};

/// What a frame shows, read from the chart's signals by the effect that paints it.
pub(super) struct Frame<'a> {
    pub(super) groups: &'a [ChartGroup],
    pub(super) colours: &'a Colours,
    pub(super) keys: &'a KeyTable,
    pub(super) theme: Theme,
    pub(super) layout: &'a Arc<ChartLayout>,
    pub(super) view: &'a Viewport,
    pub(super) rows: Rows,
    /// Each group's selected span.
    pub(super) selected: &'a [SpanRef],
    /// Each group's outlined spans.
    pub(super) highlighted: &'a [&'a [u32]],
    /// The selected range (axis ns).
    pub(super) range: Option<(u64, u64)>,
}

/// Paint `f` on the chart's canvas, its minimap and (when the chart has one) its memory strip.
pub(super) fn paint_frame(
    f: &Frame<'_>,
    canvas: &web_sys::HtmlCanvasElement,
    minimap: &web_sys::HtmlCanvasElement,
    memory: Option<&web_sys::HtmlCanvasElement>,
    raster: StoredValue<Raster>,
    minimap_cache: StoredValue<MinimapCache>,
) {
    let src = Source {
        groups: f.groups,
        colours: f.colours,
        keys: f.keys,
        theme: f.theme,
    };
    let labels: Vec<&str> = f.groups.iter().map(|x| x.label.as_str()).collect();
    let marks = Marks {
        highlighted: f.highlighted,
        selected: f.selected,
        range: f.range.map(|(s, e)| (s as f64, e as f64)),
    };
    let s = scene(
        f.layout,
        &src,
        &labels,
        f.view,
        f.rows,
        marks,
        merged_fill(f.theme),
    );
    raster.update_value(|raster| paint(canvas, &s, f.theme, raster));
    paint_minimap(minimap, f.layout, &src, f.theme, f.view, minimap_cache);
    if let Some(memory) = memory {
        let curves: Vec<(usize, &DeviceCurve)> = f
            .groups
            .iter()
            .enumerate()
            .flat_map(|(g, x)| x.ctx.model.memory_curves.iter().map(move |c| (g, c)))
            .collect();
        raster.update_value(|raster| {
            paint_memory(memory, &curves, f.layout, f.view, f.theme, raster)
        });
    }
}
