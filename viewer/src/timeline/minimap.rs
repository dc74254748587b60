//! Minimap math: the whole run drawn in a strip, with the visible window marked on it, and
//! clicks or drags on the strip moving the window.

use super::viewport::Viewport;

/// The visible window on a minimap `width_px` wide that shows the viewport's whole bounds:
/// `(x0, x1)` in minimap pixels, at least 2 px wide so it stays visible.
pub fn window_on_minimap(view: &Viewport, width_px: f64) -> (f64, f64) {
    let total = (view.bound_end_ns - view.bound_start_ns).max(1.0);
    let scale = width_px / total;
    let x0 = ((view.start_ns - view.bound_start_ns) * scale).clamp(0.0, width_px);
    let x1 = ((view.end_ns() - view.bound_start_ns) * scale).clamp(0.0, width_px);
    if x1 - x0 < 2.0 {
        let mid = (x0 + x1) / 2.0;
        ((mid - 1.0).max(0.0), (mid + 1.0).min(width_px.max(2.0)))
    } else {
        (x0, x1)
    }
}

/// The time at minimap pixel `x`.
pub fn ns_from_minimap_x(view: &Viewport, x: f64, width_px: f64) -> f64 {
    let total = (view.bound_end_ns - view.bound_start_ns).max(1.0);
    view.bound_start_ns + (x / width_px.max(1.0)).clamp(0.0, 1.0) * total
}

/// The viewport centred where the minimap was clicked (scale kept).
pub fn view_for_minimap_click(view: &Viewport, x: f64, width_px: f64) -> Viewport {
    view.centered_on(ns_from_minimap_x(view, x, width_px))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_covers_the_visible_part() {
        let v = Viewport::fit(0, 1_000_000, 1000.0);
        assert_eq!(window_on_minimap(&v, 200.0), (0.0, 200.0));
        let z = v.show_range(250_000, 500_000, 0.0);
        let (x0, x1) = window_on_minimap(&z, 200.0);
        assert!((x0 - 50.0).abs() < 1e-6 && (x1 - 100.0).abs() < 1e-6);
    }

    #[test]
    fn tiny_windows_stay_visible() {
        let v = Viewport::fit(0, 1_000_000_000, 1000.0).show_range(500_000_000, 500_000_010, 0.0);
        let (x0, x1) = window_on_minimap(&v, 200.0);
        assert!(x1 - x0 >= 2.0 - 1e-9);
        assert!((x0 + x1) / 2.0 > 99.0 && (x0 + x1) / 2.0 < 101.0);
    }

    #[test]
    fn clicks_centre_the_view() {
        let v = Viewport::fit(0, 1_000_000, 1000.0).show_range(0, 100_000, 0.0);
        let c = view_for_minimap_click(&v, 100.0, 200.0);
        assert!((c.ns_from_x(500.0) - 500_000.0).abs() < 1e-3);
        assert_eq!(ns_from_minimap_x(&v, -5.0, 200.0), 0.0);
        assert_eq!(ns_from_minimap_x(&v, 500.0, 200.0), 1_000_000.0);
    }
}

/// Where a tooltip about `(x, y)` goes inside a box `width_px` wide: below-right of the
/// pointer, or below-left when it would overflow the right edge.
pub fn tooltip_position(x: f64, y: f64, width_px: f64, tooltip_width_px: f64) -> (f64, f64) {
    const OFFSET: f64 = 14.0;
    let left = if x + OFFSET + tooltip_width_px > width_px {
        (x - OFFSET - tooltip_width_px).max(0.0)
    } else {
        x + OFFSET
    };
    (left, y + OFFSET)
}

#[cfg(test)]
mod tooltip_tests {
    use super::tooltip_position;

    #[test]
    fn tooltips_stay_inside() {
        assert_eq!(tooltip_position(10.0, 5.0, 1000.0, 300.0), (24.0, 19.0));
        assert_eq!(tooltip_position(900.0, 5.0, 1000.0, 300.0), (586.0, 19.0));
        assert_eq!(tooltip_position(100.0, 5.0, 200.0, 300.0), (0.0, 19.0));
    }
}
