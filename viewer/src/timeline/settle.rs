//! Before the chart paints a frame its window settles, one change at a time (each sets the
//! window, and the chart paints again): onto an axis whose bounds moved (an offset changed),
//! into the canvas's first real width (the whole axis), into a new width (same window).

use super::viewport::Viewport;

/// What the chart remembers between frames to settle its window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settle {
    /// The axis bounds the window was last given.
    fitted: (u64, u64),
    /// Whether the window has been fitted to the canvas's real width yet.
    sized: bool,
}

impl Settle {
    /// A chart whose window was made for an axis of `bounds`, before its canvas has a width.
    pub fn new(bounds: (u64, u64)) -> Self {
        Settle {
            fitted: bounds,
            sized: false,
        }
    }

    /// A chart whose window was given for an axis of `bounds` at the canvas's width (a window
    /// carried over from another chart): it is kept, following later widths.
    pub fn sized(bounds: (u64, u64)) -> Self {
        Settle {
            fitted: bounds,
            sized: true,
        }
    }

    /// The window to show instead of `view` on an axis of `bounds` in a canvas `width_px`
    /// wide, or `None` when `view` is the one to paint.
    pub fn next(&mut self, view: &Viewport, bounds: (u64, u64), width_px: f64) -> Option<Viewport> {
        if self.fitted != bounds {
            self.fitted = bounds;
            return Some(view.rebound(bounds.0, bounds.1));
        }
        if !self.sized {
            self.sized = true;
            return Some(Viewport::fit(bounds.0, bounds.1, width_px));
        }
        if (view.width_px - width_px).abs() > 0.5 {
            return Some(view.resized(width_px));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_width_fits_the_axis_then_widths_and_bounds_are_followed() {
        // Made for a 1000 px guess; the canvas turns out 200 px wide.
        let guess = Viewport::fit(0, 1000, 1000.0);
        let mut s = Settle::new((0, 1000));
        let fitted = s
            .next(&guess, (0, 1000), 200.0)
            .expect("fit to the real width");
        assert_eq!(
            (fitted.start_ns, fitted.width_px, fitted.ns_per_px),
            (0.0, 200.0, 5.0)
        );
        assert_eq!(s.next(&fitted, (0, 1000), 200.0), None);
        // Zoomed in to 100 ns to 200 ns, the canvas grows to 400 px: the same left edge and
        // scale, 200 ns more in view.
        let zoomed = fitted.show_range(100, 200, 0.0);
        let wider = s.next(&zoomed, (0, 1000), 400.0).expect("adopt the width");
        assert_eq!(
            (wider.start_ns, wider.ns_per_px, wider.width_px),
            (zoomed.start_ns, zoomed.ns_per_px, 400.0)
        );
        assert_eq!(s.next(&wider, (0, 1000), 400.0), None);
        // An offset moved the axis to end at 2000 ns: the window keeps its place in it.
        let moved = s.next(&wider, (0, 2000), 400.0).expect("rebound");
        assert_eq!(moved, wider.rebound(0, 2000));
        assert_eq!(moved.bound_end_ns, 2000.0);
        assert_eq!(s.next(&moved, (0, 2000), 400.0), None);
    }

    #[test]
    fn a_carried_window_is_kept_then_follows_the_width() {
        // 200 – 400 ns of 0 – 1000 ns in 500 px, given to a chart of the same width.
        let carried = Viewport::fit(0, 1000, 500.0).show_range(200, 400, 0.0);
        let mut s = Settle::sized((0, 1000));
        assert_eq!(s.next(&carried, (0, 1000), 500.0), None);
        let wider = s.next(&carried, (0, 1000), 600.0).expect("adopt the width");
        assert_eq!((wider.start_ns, wider.ns_per_px), (200.0, 0.4));
    }
}
