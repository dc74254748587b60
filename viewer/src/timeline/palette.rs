//! Colours of the flame chart: the step picks the hue (forward, backward, optimizer, none),
//! the span kind the shade (module light, function medium, op dark), so colour-blind readers
//! still get the kind from the shade and the legend.

use candle_trace_schema::format::events::{Pass, SpanKind};

/// Light or dark page theme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Theme {
    /// Light background.
    Light,
    /// Dark background.
    Dark,
}

/// The legend's pass categories, in display order.
pub const PASS_LEGEND: [(Option<Pass>, &str); 4] = [
    (Some(Pass::Forward), Pass::Forward.as_str()),
    (Some(Pass::Backward), Pass::Backward.as_str()),
    (Some(Pass::Optimizer), Pass::Optimizer.as_str()),
    (None, "no step"),
];

/// The fill colour of a span block as a CSS colour.
pub fn span_fill(pass: Option<Pass>, kind: SpanKind, theme: Theme) -> &'static str {
    // [module, function, op] shades per pass, for light and dark backgrounds.
    const LIGHT: [[&str; 3]; 4] = [
        ["#9cc3f5", "#5b9be6", "#2f6fc0"], // forward: blue
        ["#f7c08c", "#ee9550", "#c86a1f"], // backward: orange
        ["#9fdcaa", "#5cbf70", "#2f8f45"], // optimizer: green
        ["#c9ccd1", "#a4a9b1", "#7d838c"], // none: grey
    ];
    const DARK: [[&str; 3]; 4] = [
        ["#3b6eb0", "#2c5a96", "#1f446f"],
        ["#a55f26", "#8f521f", "#6c3d16"],
        ["#3e8f50", "#2f733f", "#22552e"],
        ["#6b717a", "#555a62", "#41454b"],
    ];
    let row = match pass {
        Some(Pass::Forward) => 0,
        Some(Pass::Backward) => 1,
        Some(Pass::Optimizer) => 2,
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

/// What picks a span's colour, as a small integer for level-of-detail merging: equal keys
/// have equal fills ([`span_fill`]): `pass × 4 + kind`.
pub fn colour_key(pass: Option<Pass>, kind: SpanKind) -> u32 {
    let pass = match pass {
        None => 0,
        Some(Pass::Forward) => 1,
        Some(Pass::Backward) => 2,
        Some(Pass::Optimizer) => 3,
    };
    pass * 4 + kind as u32
}

/// Colour of a block that merges several narrow spans (their passes may differ).
pub fn merged_fill(theme: Theme) -> &'static str {
    match theme {
        Theme::Light => "#8a8f98",
        Theme::Dark => "#7a808a",
    }
}

/// Relative luminance (WCAG 2) of a `#rrggbb` colour; `None` for other spellings.
pub fn luminance(hex: &str) -> Option<f64> {
    let hex = hex.strip_prefix('#')?;
    if hex.len() != 6 {
        return None;
    }
    let channel = |i: usize| -> Option<f64> {
        let v = f64::from(u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()?) / 255.0;
        Some(if v <= 0.03928 {
            v / 12.92
        } else {
            ((v + 0.055) / 1.055).powf(2.4)
        })
    };
    Some(0.2126 * channel(0)? + 0.7152 * channel(2)? + 0.0722 * channel(4)?)
}

/// WCAG contrast ratio of two `#rrggbb` colours (1 when either cannot be read).
pub fn contrast(a: &str, b: &str) -> f64 {
    match (luminance(a), luminance(b)) {
        (Some(x), Some(y)) => (x.max(y) + 0.05) / (x.min(y) + 0.05),
        _ => 1.0,
    }
}

/// Text colour for labels drawn on `fill`: near-black or near-white, whichever contrasts more.
pub fn label_color(fill: &str) -> &'static str {
    const DARK: &str = "#0b1220";
    const LIGHT: &str = "#ffffff";
    if contrast(fill, DARK) >= contrast(fill, LIGHT) {
        DARK
    } else {
        LIGHT
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

/// Line colour of the `i`-th device's memory curve.
pub fn device_color(i: usize, theme: Theme) -> &'static str {
    const LIGHT: [&str; 4] = ["#7b3fb3", "#0f7c7c", "#b33f6e", "#6b6b00"];
    const DARK: [&str; 4] = ["#c69cf0", "#5fd3d3", "#f08cb6", "#d6d65c"];
    match theme {
        Theme::Light => LIGHT[i % LIGHT.len()],
        Theme::Dark => DARK[i % DARK.len()],
    }
}

/// Short name of a pass for tooltips and tables.
pub fn pass_name(pass: Option<Pass>) -> &'static str {
    pass.map_or("—", Pass::as_str)
}

/// Short name of a span kind.
pub fn kind_name(kind: SpanKind) -> &'static str {
    kind.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pass_and_kind_has_a_distinct_colour_per_theme() {
        for theme in [Theme::Light, Theme::Dark] {
            let mut seen = Vec::new();
            for (pass, _) in PASS_LEGEND {
                for kind in [SpanKind::Module, SpanKind::Function, SpanKind::Op] {
                    let c = span_fill(pass, kind, theme);
                    assert!(c.starts_with('#') && c.len() == 7);
                    assert!(!seen.contains(&c));
                    seen.push(c);
                }
            }
        }
        assert_eq!(pass_name(Some(Pass::Backward)), "backward");
    }

    #[test]
    fn colour_keys_follow_the_fills() {
        let all = [
            None,
            Some(Pass::Forward),
            Some(Pass::Backward),
            Some(Pass::Optimizer),
        ];
        let kinds = [SpanKind::Module, SpanKind::Function, SpanKind::Op];
        for a in all {
            for b in all {
                for ka in kinds {
                    for kb in kinds {
                        let same_key = colour_key(a, ka) == colour_key(b, kb);
                        let same_fill =
                            span_fill(a, ka, Theme::Light) == span_fill(b, kb, Theme::Light);
                        assert_eq!(same_key, same_fill, "{a:?} {ka:?} / {b:?} {kb:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn labels_are_readable_on_every_fill() {
        assert!((contrast("#000000", "#ffffff") - 21.0).abs() < 1e-9);
        assert_eq!(contrast("nope", "#ffffff"), 1.0);
        for theme in [Theme::Light, Theme::Dark] {
            for (pass, _) in PASS_LEGEND {
                for kind in [SpanKind::Module, SpanKind::Function, SpanKind::Op] {
                    let fill = span_fill(pass, kind, theme);
                    let ratio = contrast(fill, label_color(fill));
                    assert!(ratio >= 4.5, "{fill}: {ratio}");
                }
            }
        }
        assert_eq!(kind_name(SpanKind::Module), "module");
    }
}
