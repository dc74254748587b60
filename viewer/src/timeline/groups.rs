//! Several files' lanes on one time axis: each file is a group (a header row, then one lane
//! per depth), shifted by its offset.
//!
//! The shared axis starts at the earliest shifted span start, so its times are never negative:
//! a span at `t` of a file with offset `o` is drawn at `t + o − start` ([`SharedAxis`]). Each
//! group is painted with its own [`Viewport`] ([`SharedAxis::group_view`]), so the per-lane
//! level-of-detail and hit-testing code runs unchanged in the file's own time.

use super::lanes::Lanes;
use super::viewport::Viewport;

/// Height of a group's header row (its file name), CSS pixels.
pub const GROUP_HEADER_PX: f64 = 18.0;

/// The shared axis of several groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedAxis {
    /// Earliest shifted start over all groups (ns, the offsets' frame; may be negative).
    pub start_ns: i64,
    /// Latest shifted end (ns).
    pub end_ns: i64,
}

impl SharedAxis {
    /// The axis around `groups` (`(lanes, offset_ns)`); groups without spans take no part.
    pub fn of(groups: &[(&Lanes, i64)]) -> Self {
        let shifted = groups.iter().filter(|(l, _)| !l.is_empty()).map(|(l, o)| {
            (
                (l.start_ns as i64).saturating_add(*o),
                (l.end_ns as i64).saturating_add(*o),
            )
        });
        let (start_ns, end_ns) = shifted
            .reduce(|(a0, a1), (b0, b1)| (a0.min(b0), a1.max(b1)))
            .unwrap_or((0, 0));
        SharedAxis { start_ns, end_ns }
    }

    /// Length of the axis (ns); the shared view fits `[0, length]`.
    pub fn length_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns).max(0) as u64
    }

    /// Where a group with `offset_ns` starts on the axis (its own 0, in axis ns).
    pub fn shift_ns(&self, offset_ns: i64) -> f64 {
        offset_ns as f64 - self.start_ns as f64
    }

    /// The view of a group in its own time, given the shared view (axis time).
    pub fn group_view(&self, shared: &Viewport, offset_ns: i64) -> Viewport {
        let shift = self.shift_ns(offset_ns);
        Viewport {
            start_ns: shared.start_ns - shift,
            bound_start_ns: shared.bound_start_ns - shift,
            bound_end_ns: shared.bound_end_ns - shift,
            ..*shared
        }
    }
}

/// Where each group is drawn vertically.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupRows {
    /// Top of the group's header row.
    pub top_px: f64,
    /// Top of its first lane.
    pub lanes_top_px: f64,
    /// Its number of lanes (at least 1, so an empty file still has a row).
    pub lanes: usize,
}

/// The rows of groups with these lane counts, starting at `top_px`, lanes `lane_px` high.
pub fn group_rows(lane_counts: &[usize], top_px: f64, lane_px: f64) -> Vec<GroupRows> {
    let mut y = top_px;
    lane_counts
        .iter()
        .map(|&n| {
            let lanes = n.max(1);
            let row = GroupRows {
                top_px: y,
                lanes_top_px: y + GROUP_HEADER_PX,
                lanes,
            };
            y += GROUP_HEADER_PX + lane_px * lanes as f64;
            row
        })
        .collect()
}

/// Total height of the rows (`top_px` when there are none).
pub fn rows_height(rows: &[GroupRows], top_px: f64, lane_px: f64) -> f64 {
    rows.last()
        .map_or(top_px, |r| r.lanes_top_px + lane_px * r.lanes as f64)
}

/// The (group, lane) under `y`, `None` on a header row or outside.
pub fn group_lane_at(rows: &[GroupRows], y: f64, lane_px: f64) -> Option<(usize, usize)> {
    rows.iter().enumerate().find_map(|(g, r)| {
        let rel = y - r.lanes_top_px;
        (rel >= 0.0 && rel < lane_px * r.lanes as f64).then(|| (g, (rel / lane_px) as usize))
    })
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
    fn axis_spans_the_shifted_groups() {
        let a = lanes(&[(0, 100, 0)]);
        let b = lanes(&[(10, 60, 0), (20, 30, 1)]);
        let empty = Lanes::default();
        let axis = SharedAxis::of(&[(&a, 0), (&b, 80), (&empty, -1000)]);
        assert_eq!(
            axis,
            SharedAxis {
                start_ns: 0,
                end_ns: 140
            }
        );
        assert_eq!(axis.length_ns(), 140);
        // A negative offset moves the axis start; every axis time stays non-negative.
        let axis = SharedAxis::of(&[(&a, 0), (&b, -30)]);
        assert_eq!(
            axis,
            SharedAxis {
                start_ns: -20,
                end_ns: 100
            }
        );
        assert_eq!(axis.shift_ns(-30), -10.0);
        assert_eq!(axis.shift_ns(0), 20.0);
        assert_eq!(SharedAxis::of(&[]).length_ns(), 0);
    }

    #[test]
    fn a_group_is_drawn_at_its_offset() {
        let a = lanes(&[(0, 100, 0)]);
        let b = lanes(&[(0, 100, 0)]);
        let axis = SharedAxis::of(&[(&a, 0), (&b, 100)]);
        let shared = Viewport::fit(0, axis.length_ns(), 200.0);
        // Group a fills the left half, group b the right half.
        let va = axis.group_view(&shared, 0);
        let vb = axis.group_view(&shared, 100);
        let ba = visible_blocks(&a.lanes[0], &va);
        let bb = visible_blocks(&b.lanes[0], &vb);
        assert_eq!((ba[0].x0, ba[0].x1), (0.0, 100.0));
        assert_eq!((bb[0].x0, bb[0].x1), (100.0, 200.0));
        // Moving b by 50 ns moves its block by 50 px (the axis is 1 ns/px).
        let axis2 = SharedAxis::of(&[(&a, 0), (&b, 50)]);
        let shared2 = Viewport { ..shared };
        let bb2 = visible_blocks(&b.lanes[0], &axis2.group_view(&shared2, 50));
        assert_eq!((bb2[0].x0, bb2[0].x1), (50.0, 150.0));
    }

    #[test]
    fn rows_stack_and_hit_lanes() {
        let rows = group_rows(&[2, 0, 1], 22.0, 20.0);
        assert_eq!(rows[0].top_px, 22.0);
        assert_eq!(rows[0].lanes_top_px, 40.0);
        assert_eq!(rows[1].top_px, 80.0);
        assert_eq!(rows[1].lanes, 1);
        assert_eq!(rows[2].top_px, 118.0);
        assert_eq!(rows_height(&rows, 22.0, 20.0), 156.0);
        assert_eq!(group_lane_at(&rows, 30.0, 20.0), None); // header
        assert_eq!(group_lane_at(&rows, 45.0, 20.0), Some((0, 0)));
        assert_eq!(group_lane_at(&rows, 61.0, 20.0), Some((0, 1)));
        assert_eq!(group_lane_at(&rows, 150.0, 20.0), Some((2, 0)));
        assert_eq!(group_lane_at(&rows, 500.0, 20.0), None);
        assert_eq!(rows_height(&[], 22.0, 20.0), 22.0);
    }
}
