//! The flame chart's display list: what to paint for a [`ChartLayout`], a [`Viewport`] and
//! the rows in view ([`Rows`]: the canvas is as high as its area and its lanes scroll under
//! the time axis) — ticks, group headers, span rectangles with their labels, outlines, a
//! selected range — and which span is under a point. The canvas component only walks the
//! lists this returns, so what a chart shows — level of detail, label elision, colours, hit
//! testing, vertical scrolling — is checked natively here.

use super::lanes::{Lanes, SpanExtent};
use super::layout::{ChartLayout, AXIS_PX, GROUP_HEADER_PX, LANE_PX};
use super::lod::visible_blocks_chunked;
use super::palette::label_color;
use super::ticks::{ticks, Tick};
use super::viewport::Viewport;

/// Minimum distance between ticks, CSS pixels.
pub const TICK_SPACING_PX: f64 = 90.0;
/// A pointer this close to a span (CSS pixels) hits it; a mouse that moved less than this
/// between press and release clicked.
pub const SLOP_PX: f64 = 3.0;
/// Height of the minimap strip.
pub const MINIMAP_PX: f64 = 36.0;
/// Label width estimate: CSS pixels per character of the 12 px font.
const CHAR_PX: f64 = 7.0;
/// At most this many search or table highlights are outlined.
pub const MAX_OUTLINES: usize = 20_000;

/// A span of one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanRef {
    /// The group (top to bottom).
    pub group: usize,
    /// Index into the group's document spans.
    pub span: u32,
}

/// What the scene needs to know about the groups' spans.
pub trait SpanSource {
    /// Lanes of group `g` (`None` past the last group).
    fn lanes(&self, g: usize) -> Option<&Lanes>;
    /// Name of a span (its label).
    fn name(&self, g: usize, span: u32) -> &str;
    /// Fill colour of a span.
    fn fill(&self, g: usize, span: u32) -> &'static str;
    /// Colour key of a span: merged blocks of different keys take the merged fill.
    fn key(&self, g: usize, span: u32) -> u32;
    /// The keys of lane `depth` of group `g` a chunk at a time ([`chunk_keys`](super::lod::chunk_keys)), where they
    /// have been built: level of detail then merges dense spans a chunk at a time.
    fn chunk_keys(&self, _g: usize, _depth: usize) -> Option<&[Option<u32>]> {
        None
    }
    /// Where a span is drawn (its own time and depth).
    fn extent(&self, g: usize, span: u32) -> Option<SpanExtent>;
}

/// One filled rectangle (a span, or a merged block of narrow spans).
#[derive(Debug, Clone, PartialEq)]
pub struct Rect {
    /// Left, CSS pixels.
    pub x: f64,
    /// Top.
    pub y: f64,
    /// Width (at least 1).
    pub w: f64,
    /// Height.
    pub h: f64,
    /// Fill colour.
    pub fill: &'static str,
    /// The span drawn (the first of a merged block).
    pub span: SpanRef,
    /// Its label and the label's colour, when the block is one span and wide enough.
    pub label: Option<(String, &'static str)>,
}

/// An outline around a span: the selection (thick) or a highlight (thin).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outline {
    /// Left, CSS pixels.
    pub x: f64,
    /// Top.
    pub y: f64,
    /// Width.
    pub w: f64,
    /// Height.
    pub h: f64,
    /// Line width.
    pub line_px: f64,
}

/// A group's name row.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// Top of the row.
    pub y: f64,
    /// The group's name.
    pub label: String,
}

/// The rows of the chart in view: the canvas, `height_px` high, shows the time axis on top
/// and under it the chart's rows from layout y `AXIS_PX + top_px` on (the lanes scrolled up
/// by `top_px`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rows {
    /// How far the lanes are scrolled up, CSS pixels.
    pub top_px: f64,
    /// The canvas's height.
    pub height_px: f64,
}

impl Rows {
    /// Every row of `layout`, unscrolled, on a canvas as high as the chart.
    pub fn all(layout: &ChartLayout) -> Self {
        Rows {
            top_px: 0.0,
            height_px: layout.height_px,
        }
    }

    /// The rows of `layout` on a canvas `height_px` high scrolled by `top_px`, the scroll
    /// kept between 0 and [`max_scroll`].
    pub fn new(layout: &ChartLayout, top_px: f64, height_px: f64) -> Self {
        let height_px = height_px.max(AXIS_PX);
        Rows {
            top_px: top_px.clamp(0.0, max_scroll(layout, height_px)),
            height_px,
        }
    }

    /// Where layout y `y` is on the canvas (below the axis; the axis row itself stays).
    pub fn display_y(&self, y: f64) -> f64 {
        if y < AXIS_PX {
            y
        } else {
            y - self.top_px
        }
    }

    /// The layout y under canvas y `y`.
    pub fn layout_y(&self, y: f64) -> f64 {
        if y < AXIS_PX {
            y
        } else {
            y + self.top_px
        }
    }
}

/// How far the lanes of `layout` can scroll under a canvas `height_px` high.
pub fn max_scroll(layout: &ChartLayout, height_px: f64) -> f64 {
    (layout.height_px - height_px).max(0.0)
}

/// The scroll that shows lane `lane` of group `g` whole on a canvas `height_px` high now
/// scrolled by `top_px`: unchanged when it is in view, else the lane at the nearest edge.
pub fn scroll_to_lane(
    layout: &ChartLayout,
    g: usize,
    lane: usize,
    top_px: f64,
    height_px: f64,
) -> f64 {
    let Some(y) = layout.lane_top(g, lane) else {
        return top_px;
    };
    let (first, last) = (top_px + AXIS_PX, top_px + height_px);
    let top = if y < first {
        y - AXIS_PX
    } else if y + LANE_PX > last {
        y + LANE_PX - height_px
    } else {
        top_px
    };
    top.clamp(0.0, max_scroll(layout, height_px))
}

/// Everything one frame of the chart paints.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Scene {
    /// Height of the canvas, CSS pixels.
    pub height_px: f64,
    /// Time-axis ticks (a label above, a rule through the lanes).
    pub ticks: Vec<Tick>,
    /// Group name rows (none with one group).
    pub headers: Vec<Header>,
    /// Span rectangles, group by group, lane by lane, left to right.
    pub rects: Vec<Rect>,
    /// Highlight outlines, then the selections' (drawn last, on top).
    pub outlines: Vec<Outline>,
    /// A selected range `[x0, x1]`, CSS pixels, clamped to the canvas (shaded over the lanes).
    pub range_px: Option<(f64, f64)>,
}

/// What is outlined: per group, the highlighted spans and the selected one.
#[derive(Debug, Clone, Copy, Default)]
pub struct Marks<'a> {
    /// Highlighted spans, per group (search matches, a table row's spans).
    pub highlighted: &'a [&'a [u32]],
    /// Selected spans.
    pub selected: &'a [SpanRef],
    /// A range selected on the time axis `[start, end]`, axis ns.
    pub range: Option<(f64, f64)>,
}

/// The part of `name` that fits `width_px` (an estimate at 7 px per character, 3 px padding
/// each side), elided with `…`; `None` when fewer than 3 characters fit. A module's weight path
/// (`model.layers.1.self_attn.q_proj`) keeps its last segments, the most specific part
/// (`…self_attn.q_proj`); any other name, or a last segment too long for the room, keeps its
/// start.
pub fn fit_label(name: &str, width_px: f64) -> Option<String> {
    let room = ((width_px - 6.0) / CHAR_PX).floor();
    if room < 3.0 {
        return None;
    }
    let room = room as usize;
    if name.chars().count() <= room {
        return Some(name.to_string());
    }
    // The longest run of whole last segments that fits after the ellipsis.
    let tail = name
        .match_indices('.')
        .map(|(at, _)| &name[at + 1..])
        .find(|tail| tail.chars().count() < room);
    let kept = tail.unwrap_or_else(|| name.rsplit('.').next().unwrap_or(name));
    if tail.is_some() {
        return Some(format!("…{kept}"));
    }
    let mut s: String = kept.chars().take(room.saturating_sub(1)).collect();
    s.push('…');
    Some(s)
}

/// The scene of `layout` in `view`, the rows `rows` in view. `labels` names each group's
/// header row; `merged_fill` colours merged blocks whose spans have different keys. A row cut
/// by the axis keeps its part below it, without its label.
pub fn scene(
    layout: &ChartLayout,
    source: &impl SpanSource,
    labels: &[&str],
    view: &Viewport,
    rows: Rows,
    marks: Marks<'_>,
    merged_fill: &'static str,
) -> Scene {
    let mut out = Scene {
        height_px: rows.height_px,
        ticks: ticks(view, TICK_SPACING_PX),
        ..Scene::default()
    };
    // Whether a row at layout y (height h) shows, and where and how much of it.
    let place = |y: f64, h: f64| -> Option<(f64, f64, bool)> {
        let top = rows.display_y(y);
        if top + h <= AXIS_PX || top >= rows.height_px {
            return None;
        }
        let cut = top < AXIS_PX;
        let shown_top = top.max(AXIS_PX);
        Some((shown_top, top + h - shown_top, cut))
    };
    for (g, row) in layout.groups.iter().enumerate() {
        if layout.headers && place(row.top_px, GROUP_HEADER_PX).is_some_and(|(_, _, cut)| !cut) {
            out.headers.push(Header {
                y: rows.display_y(row.top_px),
                label: labels.get(g).copied().unwrap_or_default().to_string(),
            });
        }
        let Some(lanes) = source.lanes(g) else {
            continue;
        };
        let gv = layout.group_view(view, g);
        // Only the lanes in view.
        let first = ((rows.top_px + AXIS_PX - row.lanes_top_px) / LANE_PX)
            .floor()
            .max(0.0) as usize;
        let last = ((rows.top_px + rows.height_px - row.lanes_top_px) / LANE_PX)
            .ceil()
            .max(0.0) as usize;
        for (depth, lane) in lanes
            .lanes
            .iter()
            .enumerate()
            .take(last.min(lanes.lanes.len()))
            .skip(first)
        {
            let Some((y, h, cut)) = place(
                row.lanes_top_px + depth as f64 * LANE_PX + 1.0,
                LANE_PX - 2.0,
            ) else {
                continue;
            };
            let chunk_keys = source.chunk_keys(g, depth);
            for b in visible_blocks_chunked(lane, &gv, |i| source.key(g, i), chunk_keys) {
                let fill = if b.mixed {
                    merged_fill
                } else {
                    source.fill(g, b.span)
                };
                let label = if b.is_merged() || cut {
                    None
                } else {
                    fit_label(source.name(g, b.span), b.x1 - b.x0).map(|l| (l, label_color(fill)))
                };
                out.rects.push(Rect {
                    x: b.x0,
                    y,
                    w: (b.x1 - b.x0 - 0.5).max(1.0),
                    h,
                    fill,
                    span: SpanRef {
                        group: g,
                        span: b.span,
                    },
                    label,
                });
            }
        }
    }
    for (g, spans) in marks.highlighted.iter().enumerate() {
        for &span in spans.iter().take(MAX_OUTLINES) {
            out.outlines.extend(outline(
                layout,
                source,
                view,
                rows,
                SpanRef { group: g, span },
                1.5,
            ));
        }
    }
    for &s in marks.selected {
        out.outlines
            .extend(outline(layout, source, view, rows, s, 3.0));
    }
    out.range_px = marks.range.and_then(|(s, e)| {
        let (x0, x1) = (view.x_from_ns(s.min(e)), view.x_from_ns(s.max(e)));
        (x1 >= 0.0 && x0 <= view.width_px).then(|| (x0.max(0.0), x1.min(view.width_px)))
    });
    out
}

/// The outline of span `s`, `None` when it is out of view (across, or scrolled away under
/// the axis or below the canvas) or unknown.
pub fn outline(
    layout: &ChartLayout,
    source: &impl SpanSource,
    view: &Viewport,
    rows: Rows,
    s: SpanRef,
    line_px: f64,
) -> Option<Outline> {
    let e = source.extent(s.group, s.span)?;
    let y = rows.display_y(layout.lane_top(s.group, e.depth as usize)?);
    let x0 = view.x_from_ns(layout.to_axis(s.group, e.start_ns));
    let x1 = view.x_from_ns(layout.to_axis(s.group, e.end_ns));
    if x1 < 0.0 || x0 > view.width_px || y < AXIS_PX || y >= rows.height_px {
        return None;
    }
    let (x0, x1) = (x0.max(-2.0), x1.min(view.width_px + 2.0).max(x0 + 1.0));
    Some(Outline {
        x: x0 + 0.5,
        y: y + 1.0,
        w: x1 - x0 - 1.0,
        h: LANE_PX - 2.0,
        line_px,
    })
}

/// The span under canvas point `(x, y)` with the rows `rows` in view: an exact hit, else the
/// nearest within [`SLOP_PX`] in that lane.
pub fn hit(
    layout: &ChartLayout,
    source: &impl SpanSource,
    view: &Viewport,
    rows: Rows,
    x: f64,
    y: f64,
) -> Option<SpanRef> {
    if y < AXIS_PX || y >= rows.height_px {
        return None;
    }
    let (g, lane) = layout.lane_at(rows.layout_y(y))?;
    let gv = layout.group_view(view, g);
    let span = source
        .lanes(g)?
        .hit(lane, gv.ns_from_x(x), SLOP_PX * gv.ns_per_px)?;
    Some(SpanRef { group: g, span })
}

/// The minimap's rectangles at `width_px`: every group's lanes stacked in the strip (lanes at
/// most 6 px high), the whole axis across the width.
pub fn minimap_rects(
    layout: &ChartLayout,
    source: &impl SpanSource,
    width_px: f64,
    merged_fill: &'static str,
) -> Vec<Rect> {
    let whole = layout.fit(width_px);
    let total_lanes: usize = (0..layout.groups.len())
        .map(|g| source.lanes(g).map_or(0, Lanes::len))
        .sum();
    let lane_h = (MINIMAP_PX / total_lanes.max(1) as f64).min(6.0);
    let mut out = Vec::new();
    let mut row = 0usize;
    for g in 0..layout.groups.len() {
        let Some(lanes) = source.lanes(g) else {
            continue;
        };
        let gv = layout.group_view(&whole, g);
        for (depth, lane) in lanes.lanes.iter().enumerate() {
            let chunk_keys = source.chunk_keys(g, depth);
            for b in visible_blocks_chunked(lane, &gv, |i| source.key(g, i), chunk_keys) {
                out.push(Rect {
                    x: b.x0,
                    y: row as f64 * lane_h,
                    w: (b.x1 - b.x0).max(1.0),
                    h: lane_h.max(1.0),
                    fill: if b.mixed {
                        merged_fill
                    } else {
                        source.fill(g, b.span)
                    },
                    span: SpanRef {
                        group: g,
                        span: b.span,
                    },
                    label: None,
                });
            }
            row += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::lanes::Lanes;

    /// Groups of (start, end, depth, name) spans; fill by name's first letter, key = fill.
    struct Fake {
        lanes: Vec<Lanes>,
        spans: Vec<Vec<(u64, u64, u32, &'static str)>>,
    }

    impl Fake {
        fn new(groups: Vec<Vec<(u64, u64, u32, &'static str)>>) -> Self {
            let lanes = groups
                .iter()
                .map(|g| {
                    let ext: Vec<SpanExtent> = g
                        .iter()
                        .map(|&(start_ns, end_ns, depth, _)| SpanExtent {
                            start_ns,
                            end_ns,
                            depth,
                        })
                        .collect();
                    Lanes::build(&ext)
                })
                .collect();
            Fake {
                lanes,
                spans: groups,
            }
        }
        fn layout(&self, offsets: &[i64]) -> ChartLayout {
            let pairs: Vec<(&Lanes, i64)> =
                self.lanes.iter().zip(offsets.iter().copied()).collect();
            ChartLayout::new(&pairs)
        }
    }

    impl SpanSource for Fake {
        fn lanes(&self, g: usize) -> Option<&Lanes> {
            self.lanes.get(g)
        }
        fn name(&self, g: usize, span: u32) -> &str {
            self.spans[g][span as usize].3
        }
        fn fill(&self, g: usize, span: u32) -> &'static str {
            if self.spans[g][span as usize].3.starts_with('m') {
                "#000000"
            } else {
                "#ffffff"
            }
        }
        fn key(&self, g: usize, span: u32) -> u32 {
            u32::from(self.fill(g, span) == "#000000")
        }
        fn extent(&self, g: usize, span: u32) -> Option<SpanExtent> {
            let &(start_ns, end_ns, depth, _) = self.spans.get(g)?.get(span as usize)?;
            Some(SpanExtent {
                start_ns,
                end_ns,
                depth,
            })
        }
    }

    #[test]
    fn labels_fit_or_are_elided() {
        // 50 px: (50 − 6) / 7 = 6.28 → 6 characters.
        assert_eq!(fit_label("matmul", 50.0).as_deref(), Some("matmul"));
        assert_eq!(fit_label("matmul_bwd", 50.0).as_deref(), Some("matmu…"));
        // 26 px: 20 / 7 = 2.86 → under 3: no label.
        assert_eq!(fit_label("matmul", 26.0), None);
        // 27 px: exactly 3 characters: two and the ellipsis.
        assert_eq!(fit_label("matmul", 27.0).as_deref(), Some("ma…"));
        assert_eq!(fit_label("µµµ", 27.0).as_deref(), Some("µµµ"));
    }

    #[test]
    fn module_paths_keep_their_last_segments() {
        let path = "model.layers.1.self_attn.q_proj";
        // 31 characters fit in 6 + 31 × 7 = 223 px.
        assert_eq!(fit_label(path, 223.0).as_deref(), Some(path));
        // 30 characters: "…" + "layers.1.self_attn.q_proj" (1 + 25).
        assert_eq!(
            fit_label(path, 222.0).as_deref(),
            Some("…layers.1.self_attn.q_proj")
        );
        // 17 characters: "…self_attn.q_proj" (1 + 16).
        assert_eq!(fit_label(path, 125.0).as_deref(), Some("…self_attn.q_proj"));
        // 16 characters: only "…q_proj" fits.
        assert_eq!(fit_label(path, 118.0).as_deref(), Some("…q_proj"));
        // 6 characters: the last segment alone does not fit with the ellipsis; its start.
        assert_eq!(fit_label(path, 50.0).as_deref(), Some("q_pro…"));
    }

    #[test]
    fn one_group_paints_rects_labels_and_ticks() {
        // A root 0..1000 with a child 0..500 ("matmul") at depth 1; 1000 ns in 100 px.
        let f = Fake::new(vec![vec![(0, 1000, 0, "step"), (0, 500, 1, "matmul")]]);
        let l = f.layout(&[0]);
        let v = l.fit(100.0);
        let s = scene(
            &l,
            &f,
            &["a"],
            &v,
            Rows::all(&l),
            Marks::default(),
            "#888888",
        );
        assert_eq!(s.height_px, 22.0 + 40.0);
        assert!(s.headers.is_empty());
        assert_eq!(s.rects.len(), 2);
        let root = &s.rects[0];
        // x 0, y = axis 22 + 1, w = 100 − 0.5, h = 20 − 2.
        assert_eq!((root.x, root.y, root.w, root.h), (0.0, 23.0, 99.5, 18.0));
        assert_eq!(root.fill, "#ffffff");
        // "step" fits 100 px; its label is dark on the white fill.
        assert_eq!(root.label, Some(("step".to_string(), "#0b1220")));
        let child = &s.rects[1];
        assert_eq!((child.x, child.y, child.w), (0.0, 43.0, 49.5));
        // 50 px hold 6 characters: "matmul" fits, white on black.
        assert_eq!(child.label, Some(("matmul".to_string(), "#ffffff")));
        // 10 ns per px and 90 px spacing: a 1 µs step, ticks at 0 and 1 µs.
        let t: Vec<u64> = s.ticks.iter().map(|t| t.ns).collect();
        assert_eq!(t, vec![0, 1000]);
    }

    #[test]
    fn narrow_spans_merge_without_labels_and_mixed_blocks_go_grey() {
        // Four 1 ns spans in 1000 ns at 100 px (10 ns per px): one merged block.
        let f = Fake::new(vec![vec![
            (0, 1000, 0, "step"),
            (0, 1, 1, "matmul"),
            (2, 3, 1, "add"),
            (4, 5, 1, "mul"),
            (6, 7, 1, "mm"),
        ]]);
        let l = f.layout(&[0]);
        let s = scene(
            &l,
            &f,
            &[],
            &l.fit(100.0),
            Rows::all(&l),
            Marks::default(),
            "#888888",
        );
        let lane1: Vec<&Rect> = s.rects.iter().filter(|r| r.y == 43.0).collect();
        assert_eq!(lane1.len(), 1);
        assert_eq!(lane1[0].fill, "#888888");
        assert_eq!(lane1[0].label, None);
        // Each narrow span is 1 px wide from its start: the block ends at 0.6 + 1 px, minus
        // the 0.5 px gap.
        assert!((lane1[0].w - 1.1).abs() < 1e-9, "{}", lane1[0].w);
        // Zoomed to 2..3 ns at 100 px (0.01 ns per px), "add" alone fills the lane, labelled.
        let z = l.fit(100.0).show_range(2, 3, 0.0);
        let s = scene(&l, &f, &[], &z, Rows::all(&l), Marks::default(), "#888888");
        let lane1: Vec<&Rect> = s.rects.iter().filter(|r| r.y == 43.0).collect();
        assert_eq!(lane1.len(), 1);
        assert_eq!((lane1[0].x, lane1[0].w), (0.0, 99.5));
        assert_eq!(lane1[0].label, Some(("add".to_string(), "#0b1220")));
    }

    #[test]
    fn groups_get_headers_and_shifted_rects() {
        let f = Fake::new(vec![vec![(0, 100, 0, "a")], vec![(0, 100, 0, "b")]]);
        // b 100 ns later: the axis is 0..200, at 200 px one ns per pixel.
        let l = f.layout(&[0, 100]);
        let s = scene(
            &l,
            &f,
            &["base", "cand"],
            &l.fit(200.0),
            Rows::all(&l),
            Marks::default(),
            "#888",
        );
        assert_eq!(
            s.headers,
            vec![
                Header {
                    y: 22.0,
                    label: "base".into()
                },
                Header {
                    y: 60.0,
                    label: "cand".into()
                }
            ]
        );
        // a: lanes top 22 + 18; b: 60 + 18.
        let placed: Vec<(f64, f64, usize)> =
            s.rects.iter().map(|r| (r.x, r.y, r.span.group)).collect();
        assert_eq!(placed, vec![(0.0, 41.0, 0), (100.0, 79.0, 1)]);
    }

    #[test]
    fn outlines_follow_the_group_and_skip_what_is_out_of_view() {
        let f = Fake::new(vec![
            vec![(0, 100, 0, "a"), (10, 20, 1, "c")],
            vec![(0, 100, 0, "b")],
        ]);
        let l = f.layout(&[0, 100]);
        let v = l.fit(200.0);
        let hl: [&[u32]; 2] = [&[1], &[]];
        let sel = [SpanRef { group: 1, span: 0 }];
        let s = scene(
            &l,
            &f,
            &[],
            &v,
            Rows::all(&l),
            Marks {
                highlighted: &hl,
                selected: &sel,
                range: None,
            },
            "#888",
        );
        // Span c: x 10..20, lane 1 of group 0 (lanes from 40: 60); group 1's header at
        // 22 + 18 + 2 × 20 = 80, its lanes from 98: b at x 100..200.
        assert_eq!(
            s.outlines,
            vec![
                Outline {
                    x: 10.5,
                    y: 61.0,
                    w: 9.0,
                    h: 18.0,
                    line_px: 1.5
                },
                Outline {
                    x: 100.5,
                    y: 99.0,
                    w: 99.0,
                    h: 18.0,
                    line_px: 3.0
                },
            ]
        );
        // Zoomed on 150..200 (group b's right half), c is out of view.
        let z = v.show_range(150, 200, 0.0);
        let s = scene(
            &l,
            &f,
            &[],
            &z,
            Rows::all(&l),
            Marks {
                highlighted: &hl,
                selected: &[],
                range: None,
            },
            "#888",
        );
        assert!(s.outlines.is_empty());
        assert_eq!(
            outline(
                &l,
                &f,
                &v,
                Rows::all(&l),
                SpanRef { group: 5, span: 0 },
                1.0
            ),
            None
        );
    }

    #[test]
    fn hits_find_the_span_under_the_pointer_in_its_group() {
        let f = Fake::new(vec![
            vec![(0, 100, 0, "a"), (10, 20, 1, "c")],
            vec![(0, 100, 0, "b")],
        ]);
        let l = f.layout(&[0, 100]);
        let v = l.fit(200.0);
        // Rows: axis 0..22, header 22..40, lanes 40..80, header 80..98, b's lane 98..118.
        // Axis row and header rows hit nothing.
        assert_eq!(hit(&l, &f, &v, Rows::all(&l), 50.0, 10.0), None);
        assert_eq!(hit(&l, &f, &v, Rows::all(&l), 50.0, 30.0), None);
        assert_eq!(
            hit(&l, &f, &v, Rows::all(&l), 50.0, 45.0),
            Some(SpanRef { group: 0, span: 0 })
        );
        assert_eq!(
            hit(&l, &f, &v, Rows::all(&l), 15.0, 65.0),
            Some(SpanRef { group: 0, span: 1 })
        );
        // 2 px right of c's end is within the 3 px slop; 5 px is not.
        assert_eq!(
            hit(&l, &f, &v, Rows::all(&l), 22.0, 65.0),
            Some(SpanRef { group: 0, span: 1 })
        );
        assert_eq!(hit(&l, &f, &v, Rows::all(&l), 25.0, 65.0), None);
        // Group b starts at x 100.
        assert_eq!(hit(&l, &f, &v, Rows::all(&l), 150.0, 85.0), None);
        assert_eq!(
            hit(&l, &f, &v, Rows::all(&l), 150.0, 105.0),
            Some(SpanRef { group: 1, span: 0 })
        );
        // 50 px left of b (before its own time 0) is no hit, nor 2 px inside the slop is.
        assert_eq!(hit(&l, &f, &v, Rows::all(&l), 50.0, 105.0), None);
        assert_eq!(
            hit(&l, &f, &v, Rows::all(&l), 98.0, 105.0),
            Some(SpanRef { group: 1, span: 0 })
        );
        assert_eq!(hit(&l, &f, &v, Rows::all(&l), 50.0, 500.0), None);
    }

    #[test]
    fn rects_go_top_to_bottom() {
        // The page paints a tall chart in strips of rows and takes the rectangles in order, so
        // they must come top to bottom across groups and lanes.
        let f = Fake::new(vec![
            vec![
                (0, 100, 0, "a"),
                (10, 20, 1, "c"),
                (30, 40, 1, "d"),
                (12, 14, 2, "e"),
            ],
            vec![(0, 100, 0, "b"), (5, 50, 1, "f")],
        ]);
        let l = f.layout(&[0, 30]);
        let s = scene(
            &l,
            &f,
            &["x", "y"],
            &l.fit(300.0),
            Rows::all(&l),
            Marks::default(),
            "#888",
        );
        assert_eq!(s.rects.len(), 6);
        assert!(
            s.rects.windows(2).all(|w| w[0].y <= w[1].y),
            "{:?}",
            s.rects
        );
    }

    #[test]
    fn scrolled_lanes_slide_under_the_axis_and_hits_follow() {
        // Five nested spans (lanes at layout y 22, 42, 62, 82, 102; the chart 122 high) on a
        // canvas 62 px high: the axis (22) and two lanes.
        let f = Fake::new(vec![vec![
            (0, 100, 0, "a"),
            (0, 90, 1, "b"),
            (0, 80, 2, "c"),
            (0, 70, 3, "d"),
            (0, 60, 4, "e"),
        ]]);
        let l = f.layout(&[0]);
        let v = l.fit(100.0);
        assert_eq!(max_scroll(&l, 62.0), 60.0);
        // Scrolled 30 px: lane 1's rect (layout 43..61) shows at 13..31, cut by the axis to
        // 22..31, without its label; lane 2's at 33..51; lane 3's at 53..71 runs past the
        // canvas's bottom (the canvas cuts it); lanes 0 and 4 are out of view.
        let rows = Rows::new(&l, 30.0, 62.0);
        let s = scene(&l, &f, &[], &v, rows, Marks::default(), "#888");
        let placed: Vec<(u32, f64, f64, bool)> = s
            .rects
            .iter()
            .map(|r| (r.span.span, r.y, r.h, r.label.is_some()))
            .collect();
        assert_eq!(
            placed,
            vec![
                (1, 22.0, 9.0, false),
                (2, 33.0, 18.0, true),
                (3, 53.0, 18.0, true)
            ]
        );
        assert_eq!(s.height_px, 62.0);
        // A hit at canvas y 40 is layout y 70: lane 2, span c; the axis row hits nothing.
        assert_eq!(
            hit(&l, &f, &v, rows, 10.0, 40.0),
            Some(SpanRef { group: 0, span: 2 })
        );
        assert_eq!(hit(&l, &f, &v, rows, 10.0, 10.0), None);
        assert_eq!(hit(&l, &f, &v, rows, 10.0, 70.0), None);
        // An outline scrolled under the axis is not drawn; one in view is, moved up.
        assert_eq!(
            outline(&l, &f, &v, rows, SpanRef { group: 0, span: 0 }, 1.0),
            None
        );
        let o = outline(&l, &f, &v, rows, SpanRef { group: 0, span: 2 }, 1.0).unwrap();
        assert_eq!(o.y, 33.0);
        // The scroll is kept in bounds, and moved as little as needed to show a lane.
        assert_eq!(Rows::new(&l, 500.0, 62.0).top_px, 60.0);
        assert_eq!(Rows::new(&l, -5.0, 62.0).top_px, 0.0);
        assert_eq!(scroll_to_lane(&l, 0, 4, 0.0, 62.0), 60.0);
        assert_eq!(scroll_to_lane(&l, 0, 0, 60.0, 62.0), 0.0);
        assert_eq!(scroll_to_lane(&l, 0, 2, 30.0, 62.0), 30.0);
        assert_eq!(scroll_to_lane(&l, 3, 0, 30.0, 62.0), 30.0);
        // Every row of a chart shorter than its canvas: nothing to scroll.
        assert_eq!(Rows::new(&l, 40.0, 500.0).top_px, 0.0);
    }

    #[test]
    fn a_selected_range_is_shaded_in_view() {
        let f = Fake::new(vec![vec![(0, 1000, 0, "a")]]);
        let l = f.layout(&[0]);
        let v = l.fit(100.0);
        let marks = |range| Marks {
            range,
            ..Marks::default()
        };
        let s = scene(
            &l,
            &f,
            &[],
            &v,
            Rows::all(&l),
            marks(Some((300.0, 200.0))),
            "#888",
        );
        assert_eq!(s.range_px, Some((20.0, 30.0)));
        // Clamped to the canvas; out of view: none.
        let z = v.show_range(500, 1000, 0.0);
        let s = scene(
            &l,
            &f,
            &[],
            &z,
            Rows::all(&l),
            marks(Some((400.0, 600.0))),
            "#888",
        );
        assert_eq!(s.range_px, Some((0.0, 20.0)));
        let s = scene(
            &l,
            &f,
            &[],
            &z,
            Rows::all(&l),
            marks(Some((0.0, 100.0))),
            "#888",
        );
        assert_eq!(s.range_px, None);
    }

    #[test]
    fn the_minimap_stacks_every_lane() {
        let f = Fake::new(vec![
            vec![(0, 100, 0, "a"), (10, 20, 1, "c")],
            vec![(0, 100, 0, "b")],
        ]);
        let l = f.layout(&[0, 100]);
        let r = minimap_rects(&l, &f, 100.0, "#888");
        // Three lanes in 36 px: 12 each, capped at 6. Axis 0..200 at 100 px: 2 ns per px.
        let placed: Vec<(f64, f64, f64, f64)> = r.iter().map(|r| (r.x, r.y, r.w, r.h)).collect();
        assert_eq!(
            placed,
            vec![
                (0.0, 0.0, 50.0, 6.0),
                (5.0, 6.0, 5.0, 6.0),
                (50.0, 12.0, 50.0, 6.0)
            ]
        );
    }
}
