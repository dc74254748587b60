//! Colours of the flame chart: the step picks the hue (forward, backward, optimizer, none),
//! the span kind the shade (module light, function medium, op dark), so colour-blind readers
//! still get the kind from the shade and the legend.

use candle_trace_schema::events::{SpanKind, Step};

/// Light or dark page theme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Theme {
    /// Light background.
    Light,
    /// Dark background.
    Dark,
}

/// The legend's step categories, in display order.
pub const STEP_LEGEND: [(Option<Step>, &str); 4] = [
    (Some(Step::Forward), "forward"),
    (Some(Step::Backward), "backward"),
    (Some(Step::Optimizer), "optimizer"),
    (None, "no step"),
];

/// The fill colour of a span block as a CSS colour.
pub fn span_fill(step: Option<Step>, kind: SpanKind, theme: Theme) -> &'static str {
    // [module, function, op] shades per step, for light and dark backgrounds.
    const LIGHT: [[&str; 3]; 4] = [
        ["#9cc3f5", "#5b9be6", "#2f6fc0"], // forward: blue
        ["#f7c08c", "#ee9550", "#c86a1f"], // backward: orange
        ["#9fdcaa", "#5cbf70", "#2f8f45"], // optimizer: green
        ["#c9ccd1", "#a4a9b1", "#7d838c"], // none: grey
    ];
    const DARK: [[&str; 3]; 4] = [
        ["#3b6eb0", "#2c5a96", "#1f446f"],
        ["#b0672a", "#8f521f", "#6c3d16"],
        ["#3e8f50", "#2f733f", "#22552e"],
        ["#6b717a", "#555a62", "#41454b"],
    ];
    let row = match step {
        Some(Step::Forward) => 0,
        Some(Step::Backward) => 1,
        Some(Step::Optimizer) => 2,
        None => 3,
    };
    let col = match kind {
        SpanKind::Module => 0,
        SpanKind::Function => 1,
        SpanKind::Op => 2,
    };
    match theme {
        Theme::Light => LIGHT[row][col],
        Theme::Dark => DARK[row][col],
    }
}

/// Colour of a block that merges several narrow spans (their steps may differ).
pub fn merged_fill(theme: Theme) -> &'static str {
    match theme {
        Theme::Light => "#8a8f98",
        Theme::Dark => "#7a808a",
    }
}

/// Text colour drawn on span blocks.
pub fn label_color(theme: Theme) -> &'static str {
    match theme {
        Theme::Light => "#0b1220",
        Theme::Dark => "#f2f4f8",
    }
}

/// Outline of the selected span, of search matches and of table highlights.
pub fn highlight_color(theme: Theme) -> &'static str {
    match theme {
        Theme::Light => "#d01c8b",
        Theme::Dark => "#ff79c6",
    }
}

/// Axis lines and tick labels.
pub fn axis_color(theme: Theme) -> &'static str {
    match theme {
        Theme::Light => "#555b66",
        Theme::Dark => "#aab1bd",
    }
}

/// Short name of a step for tooltips and tables.
pub fn step_name(step: Option<Step>) -> &'static str {
    match step {
        Some(Step::Forward) => "forward",
        Some(Step::Backward) => "backward",
        Some(Step::Optimizer) => "optimizer",
        None => "—",
    }
}

/// Short name of a span kind.
pub fn kind_name(kind: SpanKind) -> &'static str {
    match kind {
        SpanKind::Function => "function",
        SpanKind::Op => "op",
        SpanKind::Module => "module",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_and_kind_has_a_distinct_colour_per_theme() {
        for theme in [Theme::Light, Theme::Dark] {
            let mut seen = Vec::new();
            for (step, _) in STEP_LEGEND {
                for kind in [SpanKind::Module, SpanKind::Function, SpanKind::Op] {
                    let c = span_fill(step, kind, theme);
                    assert!(c.starts_with('#') && c.len() == 7);
                    assert!(!seen.contains(&c));
                    seen.push(c);
                }
            }
        }
        assert_eq!(step_name(Some(Step::Backward)), "backward");
        assert_eq!(kind_name(SpanKind::Module), "module");
    }
}
