//! Time-axis ticks: steps of 1, 2 or 5 times a power of ten nanoseconds, at least a given
//! number of pixels apart, labelled in the unit that suits the step.

use super::viewport::Viewport;

/// One tick on the time axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Tick {
    /// Time of the tick (ns since the run started).
    pub ns: u64,
    /// Its x position in CSS pixels.
    pub x: f64,
    /// Label relative to the run start, e.g. `1.5 ms`.
    pub label: String,
}

/// The smallest 1-2-5 step (in ns, at least 1) whose ticks are `min_spacing_px` apart or more.
pub fn tick_step_ns(ns_per_px: f64, min_spacing_px: f64) -> u64 {
    let wanted = (ns_per_px * min_spacing_px).max(1.0);
    let mut power: u64 = 1;
    loop {
        for m in [1, 2, 5] {
            let step = power.saturating_mul(m);
            if step as f64 >= wanted {
                return step;
            }
        }
        if power >= u64::MAX / 10 {
            return power;
        }
        power *= 10;
    }
}

/// Label a time in a unit that suits `step_ns` (ns, µs, ms or s) and just enough decimals to tell
/// neighbouring ticks apart.
pub fn tick_label(ns: u64, step_ns: u64) -> String {
    // The unit is a thousand times smaller than ten steps, so labels need at most one or two
    // decimals: 100 µs steps read `0.1 ms, 0.2 ms`, 50 µs steps `50 µs, 100 µs`.
    let (scale, unit) = if step_ns >= 100_000_000 {
        (1e9, "s")
    } else if step_ns >= 100_000 {
        (1e6, "ms")
    } else if step_ns >= 100 {
        (1e3, "µs")
    } else {
        (1.0, "ns")
    };
    // Decimals needed so that step / scale shows: a step of 0.2 ms needs one.
    let step_units = step_ns as f64 / scale;
    let mut decimals = 0usize;
    while decimals < 9 {
        let x = step_units * 10f64.powi(decimals as i32);
        if x >= 1.0 - 1e-9 && (x - x.round()).abs() < 1e-6 {
            break;
        }
        decimals += 1;
    }
    format!("{:.*} {unit}", decimals, ns as f64 / scale)
}

/// The ticks visible in `view`, at least `min_spacing_px` apart.
pub fn ticks(view: &Viewport, min_spacing_px: f64) -> Vec<Tick> {
    let step = tick_step_ns(view.ns_per_px, min_spacing_px);
    let first = (view.start_ns.max(0.0) as u64)
        .div_ceil(step)
        .saturating_mul(step);
    let end = view.end_ns();
    let mut out = Vec::new();
    let mut ns = first;
    while (ns as f64) <= end && out.len() < 10_000 {
        out.push(Tick {
            ns,
            x: view.x_from_ns(ns as f64),
            label: tick_label(ns, step),
        });
        ns = match ns.checked_add(step) {
            Some(n) => n,
            None => break,
        };
    }
    out
}

/// Gap between a tick's rule and its label, and between a label and the chart's right edge.
pub const LABEL_GAP_PX: f64 = 3.5;

/// Where a tick's label `label_w` wide starts: just right of its rule at `tick_x`, moved left
/// as far as needed to end inside a chart `width_px` wide (the last label is never cut off),
/// and never left of the chart.
pub fn label_x(tick_x: f64, label_w: f64, width_px: f64) -> f64 {
    (tick_x.round() + LABEL_GAP_PX)
        .min(width_px - label_w - LABEL_GAP_PX)
        .max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_stay_inside_the_chart() {
        // Room to the right: the label starts 3.5 px right of its rule.
        assert_eq!(label_x(100.0, 30.0, 1000.0), 103.5);
        assert_eq!(label_x(99.6, 30.0, 1000.0), 103.5);
        // A rule 10 px from the right edge of a 1000 px chart, its label 30 px wide: it ends
        // 3.5 px inside the edge, left of its rule.
        assert_eq!(label_x(990.0, 30.0, 1000.0), 966.5);
        assert!(label_x(990.0, 30.0, 1000.0) + 30.0 <= 1000.0);
        // Exactly fitting stays put.
        assert_eq!(label_x(963.0, 30.0, 1000.0), 966.5);
        // A chart narrower than the label: from its left edge.
        assert_eq!(label_x(5.0, 30.0, 20.0), 0.0);
    }

    #[test]
    fn steps_are_one_two_five() {
        assert_eq!(tick_step_ns(0.001, 10.0), 1);
        assert_eq!(tick_step_ns(1.0, 80.0), 100);
        assert_eq!(tick_step_ns(1.5, 80.0), 200);
        assert_eq!(tick_step_ns(4.0, 80.0), 500);
        assert_eq!(tick_step_ns(7.0, 80.0), 1_000);
        assert_eq!(tick_step_ns(1e6, 100.0), 100_000_000);
        assert_eq!(tick_step_ns(3e6, 100.0), 500_000_000);
    }

    #[test]
    fn labels_use_the_step_unit() {
        assert_eq!(tick_label(500, 100), "0.5 µs");
        assert_eq!(tick_label(40, 20), "40 ns");
        assert_eq!(tick_label(1_500, 500), "1.5 µs");
        assert_eq!(tick_label(3_000, 1_000), "3 µs");
        assert_eq!(tick_label(1_200_000, 200_000), "1.2 ms");
        assert_eq!(tick_label(50_000_000, 10_000_000), "50 ms");
        assert_eq!(tick_label(2_000_000_000, 1_000_000_000), "2 s");
        assert_eq!(tick_label(0, 1_000_000), "0 ms");
        assert_eq!(tick_label(250_000, 50_000), "250 µs");
    }

    #[test]
    fn ticks_fill_the_view_with_spacing() {
        let v = Viewport::fit(0, 1_000_000, 1000.0); // 1000 ns/px
        let t = ticks(&v, 80.0);
        // 100 µs step: 0, 100, ..., 1000 µs.
        assert_eq!(t.len(), 11);
        assert_eq!(t[0].ns, 0);
        assert_eq!(t[1].ns, 100_000);
        assert_eq!(t[1].label, "0.1 ms");
        assert!((t[10].x - 1000.0).abs() < 1e-9);
        for w in t.windows(2) {
            assert!(w[1].x - w[0].x >= 80.0);
        }
    }

    #[test]
    fn ticks_start_at_the_first_multiple_in_view() {
        let v = Viewport::fit(0, 1_000_000, 1000.0).show_range(123_456, 223_456, 0.0);
        let t = ticks(&v, 80.0);
        assert!(t[0].ns >= 123_456);
        assert_eq!(t[0].ns % tick_step_ns(v.ns_per_px, 80.0), 0);
        assert!(t.iter().all(|t| t.x >= 0.0 && t.x <= v.width_px + 1e-9));
    }
}
