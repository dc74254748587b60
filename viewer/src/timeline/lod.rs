//! Level of detail: what to draw in one lane for a viewport.
//!
//! Spans at least [`MIN_BLOCK_PX`] wide are drawn one by one; runs of narrower spans that touch
//! (within one pixel) are merged into a single block, so a lane never draws more blocks than it
//! has pixels, whatever the number of spans. Only spans that overlap the view are visited (see
//! [`Lane::candidates`]).

use super::lanes::Lane;
use super::viewport::Viewport;

/// Spans narrower than this (CSS pixels) are merged with their narrow neighbours.
pub const MIN_BLOCK_PX: f64 = 1.0;

/// One thing to draw in a lane.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Block {
    /// Left edge in CSS pixels (clipped to the view).
    pub x0: f64,
    /// Right edge in CSS pixels (clipped to the view); at least `x0 + MIN_BLOCK_PX`.
    pub x1: f64,
    /// The span drawn, or for a merged block the first span in it.
    pub span: u32,
    /// Number of spans the block stands for (1 for a single span).
    pub count: u32,
    /// True when the merged spans have different keys (see [`visible_blocks_keyed`]), so the
    /// block cannot be drawn in the first span's colour.
    pub mixed: bool,
}

impl Block {
    /// True when the block stands for several merged spans.
    pub fn is_merged(&self) -> bool {
        self.count > 1
    }
}

/// The blocks of `lane` visible in `view`, left to right (by span start).
pub fn visible_blocks(lane: &Lane, view: &Viewport) -> Vec<Block> {
    visible_blocks_keyed(lane, view, |_| 0)
}

/// [`visible_blocks`], marking merged blocks whose spans have different `key`s (for example
/// the step, which picks the colour) as `mixed`.
pub fn visible_blocks_keyed(lane: &Lane, view: &Viewport, key: impl Fn(u32) -> u32) -> Vec<Block> {
    let mut out: Vec<Block> = Vec::new();
    if lane.is_empty() {
        return out;
    }
    let from = view.start_ns.max(0.0) as u64;
    let to = view.end_ns().max(0.0).ceil() as u64;
    // A merged block still open for more narrow spans, and its first span's key.
    let mut open: Option<Block> = None;
    let mut open_key = 0;
    for p in lane.candidates(from, to) {
        let (s, e) = (lane.start_ns[p], lane.end_ns[p]);
        if e < from || s > to {
            continue;
        }
        let x0 = view.x_from_ns(s as f64).max(0.0);
        let x1 = view.x_from_ns(e as f64).min(view.width_px);
        let span = lane.spans[p];
        if x1 - x0 >= MIN_BLOCK_PX {
            if let Some(b) = open.take() {
                out.push(b);
            }
            out.push(Block {
                x0,
                x1,
                span,
                count: 1,
                mixed: false,
            });
            continue;
        }
        let x1 = x1.max(x0 + MIN_BLOCK_PX);
        match &mut open {
            Some(b) if x0 <= b.x1 + MIN_BLOCK_PX => {
                b.x1 = b.x1.max(x1);
                b.count += 1;
                if !b.mixed && key(span) != open_key {
                    b.mixed = true;
                }
            }
            _ => {
                if let Some(b) = open.take() {
                    out.push(b);
                }
                open_key = key(span);
                open = Some(Block {
                    x0,
                    x1,
                    span,
                    count: 1,
                    mixed: false,
                });
            }
        }
    }
    if let Some(b) = open {
        out.push(b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::lanes::{Lanes, SpanExtent};

    fn lane_of(spans: &[(u64, u64)]) -> Lanes {
        let ext: Vec<SpanExtent> = spans
            .iter()
            .map(|&(s, e)| SpanExtent {
                start_ns: s,
                end_ns: e,
                depth: 0,
            })
            .collect();
        Lanes::build(&ext)
    }

    #[test]
    fn wide_spans_are_drawn_one_by_one_and_clipped() {
        let l = lane_of(&[(0, 500), (500, 1000)]);
        let v = Viewport::fit(0, 1000, 100.0);
        let b = visible_blocks(&l.lanes[0], &v);
        assert_eq!(b.len(), 2);
        assert_eq!((b[0].x0, b[0].x1, b[0].span, b[0].count), (0.0, 50.0, 0, 1));
        assert_eq!((b[1].x0, b[1].x1), (50.0, 100.0));
        let z = v.zoom_at(0.0, 4.0); // shows 0..250
        let b = visible_blocks(&l.lanes[0], &z);
        assert_eq!(b.len(), 1);
        assert_eq!((b[0].x0, b[0].x1), (0.0, 100.0));
    }

    #[test]
    fn narrow_neighbours_merge_into_one_block() {
        // 1000 spans of 1 ns back to back in 10 µs at 100 px: 10 ns per px.
        let mut spans: Vec<(u64, u64)> = (0..1000).map(|i| (i, i + 1)).collect();
        spans.push((5000, 10_000)); // one wide span after a gap
        let l = lane_of(&spans);
        let v = Viewport::fit(0, 10_000, 1000.0);
        let b = visible_blocks(&l.lanes[0], &v);
        assert_eq!(b.len(), 2);
        assert!(b[0].is_merged());
        assert_eq!(b[0].count, 1000);
        assert_eq!(b[0].span, 0);
        assert!((b[0].x1 - 100.0).abs() < 1.01);
        assert!(!b[1].is_merged());
        // Zoomed in far enough, the same spans are drawn one by one.
        let z = v.show_range(0, 10, 0.0);
        let b = visible_blocks(&l.lanes[0], &z);
        assert!(b.iter().all(|b| !b.is_merged()));
        assert_eq!(b.len(), 11); // spans 0..=9 plus the one starting at 10
    }

    #[test]
    fn merged_blocks_know_whether_their_keys_agree() {
        let l = lane_of(&[(0, 1), (1, 2), (2, 3), (500, 501), (501, 502)]);
        let v = Viewport::fit(0, 1000, 100.0);
        // Spans 0..3 share key 0; span 3 has key 1, span 4 key 2.
        let b = visible_blocks_keyed(&l.lanes[0], &v, |s| s.saturating_sub(2));
        assert_eq!(b.len(), 2);
        assert!(!b[0].mixed && b[0].count == 3);
        assert!(b[1].mixed && b[1].count == 2);
        assert!(visible_blocks(&l.lanes[0], &v).iter().all(|b| !b.mixed));
    }

    #[test]
    fn separated_narrow_spans_stay_apart() {
        let l = lane_of(&[(0, 1), (500, 501)]);
        let v = Viewport::fit(0, 1000, 100.0);
        let b = visible_blocks(&l.lanes[0], &v);
        assert_eq!(b.len(), 2);
        assert!(b
            .iter()
            .all(|b| b.count == 1 && b.x1 - b.x0 >= MIN_BLOCK_PX));
    }

    #[test]
    fn off_screen_spans_are_not_drawn() {
        let l = lane_of(&[(0, 10), (100, 110), (900, 1000)]);
        let v = Viewport::fit(0, 1000, 1000.0).show_range(90, 120, 0.0);
        let b = visible_blocks(&l.lanes[0], &v);
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].span, 1);
    }

    #[test]
    fn blocks_never_exceed_pixels() {
        let spans: Vec<(u64, u64)> = (0..100_000).map(|i| (i * 10, i * 10 + 3)).collect();
        let l = lane_of(&spans);
        let v = Viewport::fit(0, 1_000_000, 800.0);
        let b = visible_blocks(&l.lanes[0], &v);
        assert!(b.len() <= 800, "{} blocks", b.len());
        let total: u32 = b.iter().map(|b| b.count).sum();
        assert_eq!(total, 100_000);
    }
}
