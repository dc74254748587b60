//! Level of detail: what to draw in one lane for a viewport.
//!
//! Spans at least [`MIN_BLOCK_PX`] wide are drawn one by one; runs of narrower spans that touch
//! (within one pixel) are merged into a single block, so a lane never draws more blocks than it
//! has pixels, whatever the number of spans. Only spans that overlap the view are visited (see
//! [`Lane::candidates`]), and where they are dense a whole chunk of them joins a merged block
//! at once ([`visible_blocks_chunked`]): a zoomed-out lane of densely packed spans costs a step
//! per [`CHUNK`] spans, not one per span.

use super::lanes::{Lane, CHUNK};
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
    visible_blocks_chunked(lane, view, key, None)
}

/// Each chunk of `lane`'s spans ([`CHUNK`] at a time, in lane order): the `key` they all
/// have, or `None` where they differ. Built once per lane and key, it lets
/// [`visible_blocks_chunked`] merge a chunk without asking each span its key.
pub fn chunk_keys(lane: &Lane, key: impl Fn(u32) -> u32) -> Vec<Option<u32>> {
    lane.spans
        .chunks(CHUNK)
        .map(|spans| {
            let first = key(spans[0]);
            spans[1..].iter().all(|&s| key(s) == first).then_some(first)
        })
        .collect()
}

/// [`visible_blocks_keyed`], the same blocks, in time that grows with the pixels rather than
/// with the spans where spans are dense: while a merged block is open, a whole chunk of
/// narrow spans that starts within its reach joins it at once (its longest duration, latest
/// end and last start decide, and `chunk_keys`, from [`chunk_keys`] with the same `key`,
/// whether their keys agree; without them only a block already mixed takes whole chunks).
pub fn visible_blocks_chunked(
    lane: &Lane,
    view: &Viewport,
    key: impl Fn(u32) -> u32,
    chunk_keys: Option<&[Option<u32>]>,
) -> Vec<Block> {
    let mut out: Vec<Block> = Vec::new();
    if lane.is_empty() {
        return out;
    }
    let from = view.start_ns.max(0.0) as u64;
    let to = view.end_ns().max(0.0).ceil() as u64;
    // A chunk whose longest span is under this many ns is narrow throughout: under half a
    // pixel, far from the 1 px line whatever the rounding of each span's edges.
    let narrow_ns = view.ns_per_px * 0.5;
    // A merged block still open for more narrow spans, and its first span's key.
    let mut open: Option<Block> = None;
    let mut open_key = 0;
    let candidates = lane.candidates(from, to);
    let mut p = candidates.start;
    while p < candidates.end {
        if let Some(b) = open.as_mut() {
            let c = p / CHUNK;
            let extent = lane.chunks.get(c).copied();
            if let Some(extent) = extent.filter(|_| p % CHUNK == 0 && p + CHUNK <= candidates.end) {
                let last = p + CHUNK - 1;
                // Starts never decrease, so every span in the chunk starts within the view
                // and no later than the last, which reaches the block: each one would join it.
                let last_x0 = view.x_from_ns(lane.start_ns[last] as f64).max(0.0);
                let joins = lane.start_ns[p] >= from
                    && (extent.max_duration_ns as f64) < narrow_ns
                    && last_x0 <= b.x1 + MIN_BLOCK_PX;
                let keys_known = b.mixed || chunk_keys.is_some_and(|k| k.len() > c);
                if joins && keys_known {
                    let latest = view.x_from_ns(extent.max_end_ns as f64).min(view.width_px);
                    b.x1 = b.x1.max(latest).max(last_x0 + MIN_BLOCK_PX);
                    b.count += CHUNK as u32;
                    if !b.mixed {
                        let same = chunk_keys.and_then(|k| k[c]);
                        b.mixed = same != Some(open_key);
                    }
                    p += CHUNK;
                    continue;
                }
            }
        }
        let (s, e) = (lane.start_ns[p], lane.end_ns[p]);
        let span = lane.spans[p];
        p += 1;
        if e < from || s > to {
            continue;
        }
        let x0 = view.x_from_ns(s as f64).max(0.0);
        let x1 = view.x_from_ns(e as f64).min(view.width_px);
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

    /// Level of detail one span at a time: what [`visible_blocks_chunked`] must equal.
    #[cfg(not(target_arch = "wasm32"))]
    fn span_by_span(lane: &Lane, view: &Viewport, key: impl Fn(u32) -> u32) -> Vec<Block> {
        let (from, to) = (
            view.start_ns.max(0.0) as u64,
            view.end_ns().max(0.0).ceil() as u64,
        );
        let mut out: Vec<Block> = Vec::new();
        let mut open: Option<(Block, u32)> = None;
        for p in lane.candidates(from, to) {
            let (s, e, span) = (lane.start_ns[p], lane.end_ns[p], lane.spans[p]);
            if e < from || s > to {
                continue;
            }
            let x0 = view.x_from_ns(s as f64).max(0.0);
            let x1 = view.x_from_ns(e as f64).min(view.width_px);
            if x1 - x0 >= MIN_BLOCK_PX {
                out.extend(open.take().map(|(b, _)| b));
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
                Some((b, k)) if x0 <= b.x1 + MIN_BLOCK_PX => {
                    b.x1 = b.x1.max(x1);
                    b.count += 1;
                    b.mixed |= key(span) != *k;
                }
                _ => {
                    out.extend(open.take().map(|(b, _)| b));
                    open = Some((
                        Block {
                            x0,
                            x1,
                            span,
                            count: 1,
                            mixed: false,
                        },
                        key(span),
                    ));
                }
            }
        }
        out.extend(open.map(|(b, _)| b));
        out
    }

    // proptest is a native-only dev-dependency.
    #[cfg(not(target_arch = "wasm32"))]
    proptest::proptest! {
        /// Whole chunks merged at once give exactly the blocks of merging span by span: dense
        /// runs of narrow spans with gaps, wide spans and overlaps among them, keys that agree
        /// over long runs or not, at any zoom and pan.
        #[test]
        fn chunks_merge_exactly_as_spans_do(
            steps in proptest::collection::vec((0u64..40, 0u64..30, 0u32..100), 1..700),
            gaps in proptest::collection::vec((0usize..700, 100u64..100_000), 0..4),
            wide in proptest::collection::vec((0usize..700, 1_000u64..50_000), 0..4),
            key_every in 1u32..400,
            window in (0.0f64..1.0, 0.0f64..1.0),
            width in proptest::sample::select(vec![50.0, 300.0, 1280.0]),
        ) {
            let mut at = 0u64;
            let spans: Vec<(u64, u64)> = steps
                .iter()
                .enumerate()
                .map(|(i, &(gap, dur, _))| {
                    at += gap + gaps.iter().filter(|g| g.0 == i).map(|g| g.1).sum::<u64>();
                    let long = wide.iter().filter(|w| w.0 == i).map(|w| w.1).sum::<u64>();
                    (at, at + dur + long)
                })
                .collect();
            let l = lane_of(&spans);
            let lane = &l.lanes[0];
            // Keys in runs of `key_every` spans, one run in three of another key.
            let key = |s: u32| u32::from((s / key_every) % 3 == 1);
            let keys = chunk_keys(lane, key);
            let whole = Viewport::fit(l.start_ns, l.end_ns.max(l.start_ns + 1), width);
            let (a, b) = (window.0.min(window.1), window.0.max(window.1));
            let span = (l.end_ns - l.start_ns) as f64;
            let view = whole.show_range(
                l.start_ns + (span * a) as u64,
                l.start_ns + (span * b) as u64,
                0.0,
            );
            for v in [whole, view] {
                let expected = span_by_span(lane, &v, key);
                proptest::prop_assert_eq!(&visible_blocks_chunked(lane, &v, key, Some(&keys)), &expected);
                proptest::prop_assert_eq!(&visible_blocks_chunked(lane, &v, key, None), &expected);
                proptest::prop_assert_eq!(&visible_blocks_keyed(lane, &v, key), &expected);
            }
        }
    }

    #[test]
    fn a_dense_lane_is_merged_a_chunk_at_a_time() {
        // 100 000 back-to-back spans of 3 ns in 1 ms at 800 px: one block, counted whole, and
        // mixed only where the keys are.
        let spans: Vec<(u64, u64)> = (0..100_000).map(|i| (i * 10, i * 10 + 3)).collect();
        let l = lane_of(&spans);
        let lane = &l.lanes[0];
        let v = Viewport::fit(0, 1_000_000, 800.0);
        let same = |_| 7;
        let b = visible_blocks_chunked(lane, &v, same, Some(&chunk_keys(lane, same)));
        assert_eq!(b.len(), 1);
        assert_eq!((b[0].count, b[0].mixed), (100_000, false));
        let one_differs = |s| u32::from(s == 99_000);
        let b = visible_blocks_chunked(lane, &v, one_differs, Some(&chunk_keys(lane, one_differs)));
        assert_eq!((b[0].count, b[0].mixed), (100_000, true));
        assert_eq!(
            chunk_keys(lane, one_differs)
                .iter()
                .filter(|k| k.is_none())
                .count(),
            1
        );
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
