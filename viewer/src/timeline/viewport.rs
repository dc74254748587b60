//! The visible time window of the timeline: x-from-time and back, zoom around a point, pan.
//!
//! A [`Viewport`] maps nanoseconds to CSS pixels with `x = (ns - start_ns) / ns_per_px`. It is
//! kept inside the trace's bounds (with a small margin) and never zooms in past
//! [`MIN_NS_PER_PX`] or out past the whole trace.

/// The most zoomed-in view: this many nanoseconds per CSS pixel.
pub const MIN_NS_PER_PX: f64 = 0.01;

/// A visible time window `width_px` pixels wide.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Viewport {
    /// Time at the left edge, in ns since the run started.
    pub start_ns: f64,
    /// Nanoseconds per CSS pixel.
    pub ns_per_px: f64,
    /// Width of the drawing area in CSS pixels.
    pub width_px: f64,
    /// Start of the whole trace (ns); the view never pans before it.
    pub bound_start_ns: f64,
    /// End of the whole trace (ns); the view never pans past it.
    pub bound_end_ns: f64,
}

impl Viewport {
    /// A view that shows `[start_ns, end_ns]` (the whole trace) in `width_px` pixels.
    pub fn fit(start_ns: u64, end_ns: u64, width_px: f64) -> Self {
        let width_px = width_px.max(1.0);
        let (start, end) = (
            start_ns as f64,
            (end_ns.max(start_ns.saturating_add(1))) as f64,
        );
        Viewport {
            start_ns: start,
            ns_per_px: ((end - start) / width_px).max(MIN_NS_PER_PX),
            width_px,
            bound_start_ns: start,
            bound_end_ns: end,
        }
    }

    /// The x pixel of time `ns`.
    pub fn x_from_ns(&self, ns: f64) -> f64 {
        (ns - self.start_ns) / self.ns_per_px
    }

    /// The time at pixel `x`.
    pub fn ns_from_x(&self, x: f64) -> f64 {
        self.start_ns + x * self.ns_per_px
    }

    /// Time at the right edge.
    pub fn end_ns(&self) -> f64 {
        self.ns_from_x(self.width_px)
    }

    /// Largest `ns_per_px`: the whole trace fits the width.
    fn max_ns_per_px(&self) -> f64 {
        ((self.bound_end_ns - self.bound_start_ns) / self.width_px).max(MIN_NS_PER_PX)
    }

    /// Keep the view inside the bounds and the zoom within its limits.
    fn clamped(mut self) -> Self {
        self.ns_per_px = self.ns_per_px.clamp(MIN_NS_PER_PX, self.max_ns_per_px());
        let visible = self.ns_per_px * self.width_px;
        let latest_start = (self.bound_end_ns - visible).max(self.bound_start_ns);
        self.start_ns = self.start_ns.clamp(self.bound_start_ns, latest_start);
        self
    }

    /// Zoom by `factor` (> 1 zooms in) keeping the time under pixel `x` fixed.
    pub fn zoom_at(&self, x: f64, factor: f64) -> Self {
        if !(factor.is_finite() && factor > 0.0) {
            return *self;
        }
        let anchor = self.ns_from_x(x);
        let ns_per_px = (self.ns_per_px / factor).clamp(MIN_NS_PER_PX, self.max_ns_per_px());
        Viewport {
            start_ns: anchor - x * ns_per_px,
            ns_per_px,
            ..*self
        }
        .clamped()
    }

    /// Move the view so that content moves right by `dx_px` pixels (drag to the right shows
    /// earlier time).
    pub fn pan_px(&self, dx_px: f64) -> Self {
        Viewport {
            start_ns: self.start_ns - dx_px * self.ns_per_px,
            ..*self
        }
        .clamped()
    }

    /// Show `[start_ns, end_ns]` with `margin` (a fraction of the window) on both sides.
    /// A range shorter than the closest zoom allows is centred at that zoom.
    pub fn show_range(&self, start_ns: u64, end_ns: u64, margin: f64) -> Self {
        let span = (end_ns.saturating_sub(start_ns)).max(1) as f64;
        let padded = span * (1.0 + 2.0 * margin);
        // The scale first, limited as `clamped` would: the window is then placed around the
        // range's centre at the scale it really gets.
        let ns_per_px = (padded / self.width_px).clamp(MIN_NS_PER_PX, self.max_ns_per_px());
        let centre = start_ns as f64 + span / 2.0;
        Viewport {
            start_ns: centre - ns_per_px * self.width_px / 2.0,
            ns_per_px,
            ..*self
        }
        .clamped()
    }

    /// The same view on a drawing area of a new width (time at the left edge and scale kept).
    pub fn resized(&self, width_px: f64) -> Self {
        Viewport {
            width_px: width_px.max(1.0),
            ..*self
        }
        .clamped()
    }

    /// The view on new bounds `[start_ns, end_ns]`: a view that showed all of the old bounds
    /// shows all of the new; any other keeps its window, moved inside the new bounds.
    pub fn rebound(&self, start_ns: u64, end_ns: u64) -> Self {
        let whole = Viewport::fit(start_ns, end_ns, self.width_px);
        let showed_all = self.start_ns <= self.bound_start_ns
            && self.end_ns() >= self.bound_end_ns - self.ns_per_px * 0.5;
        if showed_all {
            whole
        } else {
            Viewport {
                bound_start_ns: whole.bound_start_ns,
                bound_end_ns: whole.bound_end_ns,
                ..*self
            }
            .clamped()
        }
    }

    /// The same window on another step's axis `[start_ns, end_ns]`: each step file has its own
    /// time origin, so the window keeps its offset from its step's start (`from_start_ns`, the
    /// earliest span of the step it showed) and its scale; a view of all of its step shows all
    /// of the next, and a window running past the next step's end moves inside it
    /// ([`Viewport::rebound`]).
    pub fn carried(&self, from_start_ns: u64, start_ns: u64, end_ns: u64) -> Self {
        let shift = start_ns as f64 - from_start_ns as f64;
        Viewport {
            start_ns: self.start_ns + shift,
            bound_start_ns: self.bound_start_ns + shift,
            bound_end_ns: self.bound_end_ns + shift,
            ..*self
        }
        .rebound(start_ns, end_ns)
    }

    /// Centre the view on `ns` keeping the scale.
    pub fn centered_on(&self, ns: f64) -> Self {
        Viewport {
            start_ns: ns - self.width_px * self.ns_per_px / 2.0,
            ..*self
        }
        .clamped()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6 * a.abs().max(b.abs()).max(1.0)
    }

    #[test]
    fn fit_maps_bounds_to_edges() {
        let v = Viewport::fit(1_000, 11_000, 1000.0);
        assert!(close(v.ns_per_px, 10.0));
        assert!(close(v.x_from_ns(1_000.0), 0.0));
        assert!(close(v.x_from_ns(11_000.0), 1000.0));
        assert!(close(v.ns_from_x(500.0), 6_000.0));
        assert!(close(v.end_ns(), 11_000.0));
    }

    #[test]
    fn x_and_ns_are_inverse() {
        let v = Viewport::fit(0, 1_000_000, 777.0).zoom_at(300.0, 8.0);
        for x in [0.0, 1.5, 300.0, 776.0] {
            assert!(close(v.x_from_ns(v.ns_from_x(x)), x));
        }
    }

    #[test]
    fn zoom_keeps_the_time_under_the_cursor() {
        let v = Viewport::fit(0, 1_000_000, 1000.0);
        let before = v.ns_from_x(250.0);
        let z = v.zoom_at(250.0, 4.0);
        assert!(close(z.ns_per_px, 250.0));
        assert!(close(z.ns_from_x(250.0), before));
        // Zooming back out restores the whole trace.
        let back = z.zoom_at(250.0, 0.25);
        assert!(close(back.start_ns, 0.0));
        assert!(close(back.ns_per_px, 1000.0));
    }

    #[test]
    fn zoom_is_limited() {
        let v = Viewport::fit(0, 1_000, 1000.0);
        assert!(close(v.zoom_at(0.0, 1e9).ns_per_px, MIN_NS_PER_PX));
        assert!(close(v.zoom_at(0.0, 1e-9).ns_per_px, 1.0));
        assert_eq!(v.zoom_at(0.0, f64::NAN), v);
        assert_eq!(v.zoom_at(0.0, 0.0), v);
    }

    #[test]
    fn a_window_carried_to_another_step_keeps_its_offsets_and_scale() {
        // 1000 px on a step of 0 – 1 000 000 ns, zoomed to 200 000 – 400 000 ns (200 ns/px).
        let zoomed = Viewport::fit(0, 1_000_000, 1000.0).show_range(200_000, 400_000, 0.0);
        // Onto a step of 0 – 1 600 000 ns: the same window.
        let c = zoomed.carried(0, 0, 1_600_000);
        assert!(close(c.start_ns, 200_000.0) && close(c.end_ns(), 400_000.0));
        assert!(close(c.bound_end_ns, 1_600_000.0));
        // Onto a step on its own clock, 7 s – 7.0009 s: 200 µs – 400 µs after its start.
        let c = zoomed.carried(0, 7_000_000_000, 7_000_900_000);
        assert!(close(c.start_ns, 7_000_200_000.0) && close(c.end_ns(), 7_000_400_000.0));
        // Onto a step of 0 – 300 000 ns: 200 ns/px kept, moved to end at its end.
        let c = zoomed.carried(0, 0, 300_000);
        assert!(close(c.ns_per_px, 200.0));
        assert!(close(c.start_ns, 100_000.0) && close(c.end_ns(), 300_000.0));
        // A view of all of its step shows all of the next.
        let whole = Viewport::fit(5_000, 1_005_000, 1000.0);
        let c = whole.carried(5_000, 0, 1_600_000);
        assert!(close(c.start_ns, 0.0) && close(c.end_ns(), 1_600_000.0));
    }

    #[test]
    fn pan_stays_in_bounds() {
        let v = Viewport::fit(0, 1_000_000, 1000.0).zoom_at(0.0, 10.0);
        assert!(close(v.start_ns, 0.0));
        let right = v.pan_px(-500.0);
        assert!(close(right.start_ns, 50_000.0));
        let far = v.pan_px(-1e9);
        assert!(close(far.end_ns(), 1_000_000.0));
        let left = right.pan_px(1e9);
        assert!(close(left.start_ns, 0.0));
    }

    #[test]
    fn show_range_and_centre() {
        let v = Viewport::fit(0, 1_000_000, 1000.0);
        let s = v.show_range(100_000, 200_000, 0.0);
        assert!(close(s.start_ns, 100_000.0));
        assert!(close(s.end_ns(), 200_000.0));
        let c = s.centered_on(500_000.0);
        assert!(close(c.ns_from_x(500.0), 500_000.0));
        let r = s.resized(500.0);
        assert!(close(r.ns_per_px, s.ns_per_px));
        // A 1 ns range asks for 0.001 ns per px, under the closest zoom (0.01): the window,
        // 10 ns wide at that zoom, is centred on the range (500_000.5 at x = 500).
        let tiny = v.show_range(500_000, 500_001, 0.0);
        assert!(close(tiny.ns_per_px, MIN_NS_PER_PX));
        assert!(close(tiny.x_from_ns(500_000.5), 500.0));
        // With a margin the same.
        let tiny = v.show_range(500_000, 500_001, 0.1);
        assert!(close(tiny.x_from_ns(500_000.5), 500.0));
        // A span at the very end of time does not overflow.
        let end = Viewport::fit(u64::MAX, u64::MAX, 100.0);
        assert!(end.ns_per_px >= MIN_NS_PER_PX);
    }

    #[test]
    fn new_bounds_keep_a_zoomed_window_and_refit_a_whole_one() {
        let v = Viewport::fit(0, 1000, 100.0);
        // Showing everything: the new bounds are shown whole.
        let r = v.rebound(0, 2000);
        assert!(close(r.start_ns, 0.0) && close(r.end_ns(), 2000.0));
        // Zoomed on 200..400: kept when still inside.
        let z = v.show_range(200, 400, 0.0);
        let r = z.rebound(0, 2000);
        assert!(close(r.start_ns, 200.0) && close(r.end_ns(), 400.0));
        // Zoomed on 800..1000 and the bounds shrink to 0..900: moved inside them.
        let z = v.show_range(800, 1000, 0.0);
        let r = z.rebound(0, 900);
        assert!(close(r.start_ns, 700.0) && close(r.end_ns(), 900.0));
    }

    #[test]
    fn empty_trace_does_not_divide_by_zero() {
        let v = Viewport::fit(5, 5, 0.0);
        assert!(v.ns_per_px.is_finite() && v.ns_per_px > 0.0);
        assert!(v.x_from_ns(5.0).is_finite());
    }
}
