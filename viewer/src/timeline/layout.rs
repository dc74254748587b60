//! Lane groups laid out into rows on one time axis: the layout every flame chart of the page
//! uses (one group for a file, one per file of several, one per side of a comparison).
//!
//! Each group is a file's [`Lanes`] shifted by an offset (ns, may be negative). The axis starts
//! at `origin_ns = min(0, earliest shifted start)`, so a span at `t` of a group with offset `o`
//! sits at axis time `t + o − origin_ns`, never negative. With one group at offset 0 (a file
//! whose spans start at or after 0) the axis is the file's own time. Each group is painted and
//! hit-tested through its own [`Viewport`] ([`ChartLayout::group_view`]), so the per-lane
//! level-of-detail and hit-testing code runs unchanged in the file's own time.
//!
//! Vertically: the time axis, then per group a header row (only when there are several
//! groups) and one row per lane (at least one, so an empty file still has a row).

use super::lanes::Lanes;
use super::viewport::Viewport;

/// Height of one lane, CSS pixels.
pub const LANE_PX: f64 = 20.0;
/// Height of the time axis above the groups.
pub const AXIS_PX: f64 = 22.0;
/// Height of a group's header row (its name) when the chart has several groups.
pub const GROUP_HEADER_PX: f64 = 18.0;

/// Where one group sits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupRow {
    /// Top of the group's header row (equal to `lanes_top_px` without a header).
    pub top_px: f64,
    /// Top of its first lane.
    pub lanes_top_px: f64,
    /// Its number of lane rows (at least 1).
    pub lanes: usize,
    /// Axis time of the group's own 0 ns: `offset − origin`.
    pub shift_ns: f64,
}

/// The rows and the axis of a chart's groups.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartLayout {
    /// Axis time 0 in the offsets' frame: `min(0, earliest shifted start)`.
    pub origin_ns: i64,
    /// Earliest shifted span start, axis time (0 without spans).
    pub start_ns: u64,
    /// Latest shifted span end, axis time (0 without spans).
    pub end_ns: u64,
    /// One row per group, top to bottom.
    pub groups: Vec<GroupRow>,
    /// Whether groups have a header row.
    pub headers: bool,
    /// Total height: axis plus every group.
    pub height_px: f64,
}

impl ChartLayout {
    /// Lay out `groups` (`(lanes, offset_ns)`, top to bottom). Groups without spans take no
    /// part in the axis bounds but keep their row.
    pub fn new(groups: &[(&Lanes, i64)]) -> Self {
        let shifted: Vec<(i64, i64)> = groups
            .iter()
            .filter(|(l, _)| !l.is_empty())
            .map(|(l, o)| {
                (
                    (l.start_ns.min(i64::MAX as u64) as i64).saturating_add(*o),
                    (l.end_ns.min(i64::MAX as u64) as i64).saturating_add(*o),
                )
            })
            .collect();
        let earliest = shifted.iter().map(|s| s.0).min();
        let latest = shifted.iter().map(|s| s.1).max();
        let origin_ns = earliest.unwrap_or(0).min(0);
        let axis = |ns: i64| ns.saturating_sub(origin_ns).max(0) as u64;
        let headers = groups.len() > 1;
        let header_px = if headers { GROUP_HEADER_PX } else { 0.0 };
        let mut y = AXIS_PX;
        let rows = groups
            .iter()
            .map(|(l, o)| {
                let lanes = l.len().max(1);
                let row = GroupRow {
                    top_px: y,
                    lanes_top_px: y + header_px,
                    lanes,
                    shift_ns: *o as f64 - origin_ns as f64,
                };
                y += header_px + LANE_PX * lanes as f64;
                row
            })
            .collect();
        ChartLayout {
            origin_ns,
            start_ns: earliest.map_or(0, axis),
            end_ns: latest.map_or(0, axis),
            groups: rows,
            headers,
            height_px: y,
        }
    }

    /// The view that shows the whole axis in `width_px`.
    pub fn fit(&self, width_px: f64) -> Viewport {
        Viewport::fit(self.start_ns, self.end_ns, width_px)
    }

    /// Axis time of `ns` of group `g` (its own time).
    pub fn to_axis(&self, g: usize, ns: u64) -> f64 {
        ns as f64 + self.groups.get(g).map_or(0.0, |r| r.shift_ns)
    }

    /// The view of group `g` in its own time, given the chart's view (axis time).
    pub fn group_view(&self, shared: &Viewport, g: usize) -> Viewport {
        let shift = self.groups.get(g).map_or(0.0, |r| r.shift_ns);
        Viewport {
            start_ns: shared.start_ns - shift,
            bound_start_ns: shared.bound_start_ns - shift,
            bound_end_ns: shared.bound_end_ns - shift,
            ..*shared
        }
    }

    /// Top of lane `lane` of group `g`.
    pub fn lane_top(&self, g: usize, lane: usize) -> Option<f64> {
        self.groups
            .get(g)
            .map(|r| r.lanes_top_px + lane as f64 * LANE_PX)
    }

    /// The (group, lane) under `y`; `None` on the axis, a header row or below the chart.
    pub fn lane_at(&self, y: f64) -> Option<(usize, usize)> {
        self.groups.iter().enumerate().find_map(|(g, r)| {
            let rel = y - r.lanes_top_px;
            (rel >= 0.0 && rel < LANE_PX * r.lanes as f64).then(|| (g, (rel / LANE_PX) as usize))
        })
    }
}

/// Offsets that line up each group's `anchor_ns` (its own time; `None`: not aligned, offset 0)
/// at the latest anchor: `offset = latest − anchor`, so no offset is negative. Used to align
/// a comparison's sides at their measured-region starts or at a span path's first start.
pub fn align_at(anchors: &[Option<u64>]) -> Vec<i64> {
    let latest = anchors.iter().flatten().max().copied().unwrap_or(0);
    anchors
        .iter()
        .map(|a| a.map_or(0, |a| latest.saturating_sub(a).min(i64::MAX as u64) as i64))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::lanes::SpanExtent;
    use crate::timeline::lod::visible_blocks;

    fn lanes(spans: &[(u64, u64, u32)]) -> Lanes {
        let extents: Vec<SpanExtent> = spans
            .iter()
            .map(|&(start_ns, end_ns, depth)| SpanExtent {
                start_ns,
                end_ns,
                depth,
            })
            .collect();
        Lanes::build(&extents)
    }

    #[test]
    fn one_group_is_its_own_time_without_a_header() {
        let a = lanes(&[(100, 900, 0), (200, 300, 1)]);
        let l = ChartLayout::new(&[(&a, 0)]);
        assert_eq!((l.origin_ns, l.start_ns, l.end_ns), (0, 100, 900));
        assert!(!l.headers);
        // Axis 22 px, then two lanes of 20 px.
        assert_eq!(l.groups[0].lanes_top_px, 22.0);
        assert_eq!(l.height_px, 62.0);
        assert_eq!(l.to_axis(0, 250), 250.0);
        assert_eq!(l.lane_at(10.0), None);
        assert_eq!(l.lane_at(22.0), Some((0, 0)));
        assert_eq!(l.lane_at(45.0), Some((0, 1)));
        assert_eq!(l.lane_at(62.0), None);
    }

    #[test]
    fn groups_stack_with_headers_and_shift() {
        let a = lanes(&[(0, 100, 0)]);
        let b = lanes(&[(10, 60, 0), (20, 30, 1)]);
        let empty = Lanes::default();
        // b at +80: its spans at 90..140; the empty group counts for no bound.
        let l = ChartLayout::new(&[(&a, 0), (&b, 80), (&empty, -1000)]);
        assert_eq!((l.origin_ns, l.start_ns, l.end_ns), (0, 0, 140));
        assert!(l.headers);
        // Rows: a at 22 (header 18, 1 lane 20) → b at 60 (18 + 2 × 20) → empty at 118.
        let tops: Vec<(f64, f64, usize)> = l
            .groups
            .iter()
            .map(|r| (r.top_px, r.lanes_top_px, r.lanes))
            .collect();
        assert_eq!(
            tops,
            vec![(22.0, 40.0, 1), (60.0, 78.0, 2), (118.0, 136.0, 1)]
        );
        assert_eq!(l.height_px, 156.0);
        assert_eq!(l.lane_at(30.0), None); // a's header
        assert_eq!(l.lane_at(41.0), Some((0, 0)));
        assert_eq!(l.lane_at(99.0), Some((1, 1)));
        assert_eq!(l.lane_at(140.0), Some((2, 0)));
        assert_eq!(l.lane_top(1, 1), Some(98.0));
        assert_eq!(l.to_axis(1, 10), 90.0);
    }

    #[test]
    fn a_negative_offset_moves_the_origin() {
        let a = lanes(&[(0, 100, 0)]);
        let b = lanes(&[(0, 100, 0)]);
        // b 30 ns earlier: the axis starts at b's start; a is drawn 30 ns later.
        let l = ChartLayout::new(&[(&a, 0), (&b, -30)]);
        assert_eq!((l.origin_ns, l.start_ns, l.end_ns), (-30, 0, 130));
        assert_eq!(l.groups[0].shift_ns, 30.0);
        assert_eq!(l.groups[1].shift_ns, 0.0);
        let none = ChartLayout::new(&[]);
        assert_eq!(
            (none.start_ns, none.end_ns, none.height_px),
            (0, 0, AXIS_PX)
        );
    }

    #[test]
    fn a_group_is_drawn_at_its_shift() {
        let a = lanes(&[(0, 100, 0)]);
        let b = lanes(&[(0, 100, 0)]);
        let l = ChartLayout::new(&[(&a, 0), (&b, 100)]);
        let shared = l.fit(200.0); // 1 ns per px
        let ba = visible_blocks(&a.lanes[0], &l.group_view(&shared, 0));
        let bb = visible_blocks(&b.lanes[0], &l.group_view(&shared, 1));
        assert_eq!((ba[0].x0, ba[0].x1), (0.0, 100.0));
        assert_eq!((bb[0].x0, bb[0].x1), (100.0, 200.0));
    }

    #[test]
    fn alignment_lines_up_the_anchors() {
        // Measured regions starting at 100 and 300 ns: the first moves 200 ns later.
        assert_eq!(align_at(&[Some(100), Some(300)]), vec![200, 0]);
        assert_eq!(align_at(&[Some(5), None, Some(5)]), vec![0, 0, 0]);
        assert_eq!(align_at(&[]), Vec::<i64>::new());
        let a = lanes(&[(100, 200, 0)]);
        let b = lanes(&[(300, 400, 0)]);
        let offsets = align_at(&[Some(100), Some(300)]);
        let l = ChartLayout::new(&[(&a, offsets[0]), (&b, offsets[1])]);
        assert_eq!(l.to_axis(0, 100), l.to_axis(1, 300));
    }
}
