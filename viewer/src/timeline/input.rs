//! What the flame chart's keys, wheel and drags do to its view: the keymap, the zoom and pan
//! steps, click-versus-drag, a range dragged over the time axis, how far to move to show a
//! span, and the list of every shortcut the page's `?` shows. The canvas component only
//! forwards events here and stores what comes back.

use super::layout::AXIS_PX;
use super::scene::SLOP_PX;
use super::viewport::Viewport;

/// A key press zooms by this factor (W in, S out).
pub const KEY_ZOOM: f64 = 1.5;
/// A key press pans by this fraction of the width.
pub const KEY_PAN: f64 = 0.15;
/// Margin (fraction of the window) around a span the view is moved to show.
pub const SHOW_MARGIN: f64 = 0.1;

/// A move through the span tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    /// To the parent (↑).
    Parent,
    /// To the first child (↓).
    FirstChild,
    /// To the previous sibling (`[`).
    PrevSibling,
    /// To the next sibling (`]`).
    NextSibling,
}

/// A change of the visible window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewKey {
    /// Zoom in around the centre.
    ZoomIn,
    /// Zoom out around the centre.
    ZoomOut,
    /// Show earlier time.
    PanLeft,
    /// Show later time.
    PanRight,
    /// Show the whole axis.
    Fit,
    /// Show the selected span.
    ZoomToSelection,
}

/// What a key does on the chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAction {
    /// Move the window.
    View(ViewKey),
    /// Select another span of the tree.
    Move(Nav),
    /// Clear the selected range when there is one, else the selected span.
    Deselect,
    /// Scroll the lanes by this many canvas heights (Page Up: −1, Page Down: +1).
    ScrollLanes(i8),
}

/// The chart's keymap: W/S (or +/−) zoom, A/D (or ←/→) pan, 0 fits, F zooms to the
/// selection, ↑/↓ parent/child, `[`/`]` siblings, Page Up/Down scroll the lanes, Escape
/// clears the range or the selection. Other keys: `None`.
pub fn key_action(key: &str) -> Option<KeyAction> {
    use KeyAction::{Deselect, Move, ScrollLanes, View};
    Some(match key {
        "w" | "W" | "+" | "=" => View(ViewKey::ZoomIn),
        "s" | "S" | "-" => View(ViewKey::ZoomOut),
        "a" | "A" | "ArrowLeft" => View(ViewKey::PanLeft),
        "d" | "D" | "ArrowRight" => View(ViewKey::PanRight),
        "0" => View(ViewKey::Fit),
        "f" | "F" => View(ViewKey::ZoomToSelection),
        "ArrowUp" => Move(Nav::Parent),
        "ArrowDown" => Move(Nav::FirstChild),
        "[" => Move(Nav::PrevSibling),
        "]" => Move(Nav::NextSibling),
        "Escape" => Deselect,
        "PageUp" => ScrollLanes(-1),
        "PageDown" => ScrollLanes(1),
        _ => return None,
    })
}

/// Every shortcut of the page, as the `?` list shows them: (keys, what they do).
pub const SHORTCUTS: &[(&str, &str)] = &[
    (
        "W / S, + / −, wheel",
        "zoom in / out (the wheel at the pointer)",
    ),
    ("A / D, ← / →, drag", "pan earlier / later"),
    (
        "Shift + drag, or drag on the time axis",
        "select a range: the tabs show its numbers",
    ),
    ("Escape", "clear the range, else the selected span"),
    ("↑ / ↓", "select the parent / first child"),
    ("[ / ]", "select the previous / next sibling"),
    ("F", "zoom to the selected span"),
    ("0", "fit the whole run"),
    ("Page Up / Page Down", "scroll the lanes"),
    ("Enter / Shift + Enter in search", "next / previous match"),
    (
        "← / →, Home / End on the tabs",
        "move between tabs; Enter or Space opens one",
    ),
    ("↑ / ↓ on the panel's edge", "make the panel taller / lower"),
    ("?", "show or hide this list"),
];

/// What a press on the chart starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DragMode {
    /// Panning the window (or a click, if it does not move).
    Pan,
    /// Selecting a range of time.
    Range,
}

/// A press with Shift held, or on the time axis row (canvas y above [`AXIS_PX`]), selects a
/// range; any other press pans.
pub fn drag_mode(shift: bool, y: f64) -> DragMode {
    if shift || y < AXIS_PX {
        DragMode::Range
    } else {
        DragMode::Pan
    }
}

/// The range (axis ns, in order, whole ns within the view's bounds) dragged on `view` from
/// canvas x `press_x` to `x`.
pub fn range_from_drag(view: &Viewport, press_x: f64, x: f64) -> (u64, u64) {
    let ns = |x: f64| {
        ns_u64(
            view.ns_from_x(x.clamp(0.0, view.width_px))
                .clamp(view.bound_start_ns, view.bound_end_ns),
        )
    };
    let (a, b) = (ns(press_x), ns(x));
    (a.min(b), a.max(b))
}

/// The window after `key`: `whole` is the fitted view, `selection` the selected span's
/// `[start, end]` in axis time (zooming to no selection keeps the view).
pub fn view_after(
    key: ViewKey,
    v: &Viewport,
    whole: Viewport,
    selection: Option<(f64, f64)>,
) -> Viewport {
    let centre = v.width_px / 2.0;
    match key {
        ViewKey::ZoomIn => v.zoom_at(centre, KEY_ZOOM),
        ViewKey::ZoomOut => v.zoom_at(centre, 1.0 / KEY_ZOOM),
        ViewKey::PanLeft => v.pan_px(v.width_px * KEY_PAN),
        ViewKey::PanRight => v.pan_px(-v.width_px * KEY_PAN),
        ViewKey::Fit => whole.resized(v.width_px),
        ViewKey::ZoomToSelection => match selection {
            Some((s, e)) => show(v, s, e),
            None => *v,
        },
    }
}

/// `[start, end]` (axis ns) with [`SHOW_MARGIN`] on both sides.
pub fn show(v: &Viewport, start_ns: f64, end_ns: f64) -> Viewport {
    v.show_range(ns_u64(start_ns), ns_u64(end_ns), SHOW_MARGIN)
}

fn ns_u64(ns: f64) -> u64 {
    // Axis times are never negative; NaN becomes 0.
    ns.max(0.0).round() as u64
}

/// The view after selecting a span by keyboard: unchanged when the span is wholly visible,
/// else the span with a margin.
pub fn reveal(v: &Viewport, start_ns: f64, end_ns: f64) -> Viewport {
    if start_ns < v.start_ns || end_ns > v.end_ns() {
        show(v, start_ns, end_ns)
    } else {
        *v
    }
}

/// The view after stepping to a search match: centred on it at the same scale, or zoomed out
/// to show it when it is longer than the window.
pub fn to_match(v: &Viewport, start_ns: f64, end_ns: f64) -> Viewport {
    if end_ns - start_ns > v.end_ns() - v.start_ns {
        show(v, start_ns, end_ns)
    } else {
        v.centered_on((start_ns + end_ns) / 2.0)
    }
}

/// The view after a wheel event at `x`: a mostly horizontal wheel pans; otherwise it zooms
/// around `x` (pinch gestures arrive as ctrl+wheel with small deltas, so they zoom faster).
pub fn wheel(v: &Viewport, x: f64, dx: f64, dy: f64, ctrl: bool) -> Viewport {
    if dx.abs() > dy.abs() && !ctrl {
        v.pan_px(-dx)
    } else {
        let factor = (-dy * if ctrl { 0.01 } else { 0.002 }).exp();
        v.zoom_at(x, factor)
    }
}

/// A press on the chart: a click until the pointer moves [`SLOP_PX`] away, a drag after.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Drag {
    /// Pointer x at the press (client pixels).
    pub press_x: f64,
    /// The view at the press.
    pub start: Viewport,
    /// Whether it has become a drag.
    pub moved: bool,
}

impl Drag {
    /// A press at `press_x` on `view`.
    pub fn new(press_x: f64, view: Viewport) -> Self {
        Drag {
            press_x,
            start: view,
            moved: false,
        }
    }

    /// The pointer is at `x`: the panned view once this is a drag, `None` while a click.
    pub fn to(&mut self, x: f64) -> Option<Viewport> {
        let dx = x - self.press_x;
        if self.moved || dx.abs() >= SLOP_PX {
            self.moved = true;
            Some(self.start.pan_px(dx))
        } else {
            None
        }
    }

    /// Whether releasing now is a click.
    pub fn is_click(&self) -> bool {
        !self.moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn keymap() {
        assert_eq!(key_action("w"), Some(KeyAction::View(ViewKey::ZoomIn)));
        assert_eq!(key_action("="), Some(KeyAction::View(ViewKey::ZoomIn)));
        assert_eq!(key_action("S"), Some(KeyAction::View(ViewKey::ZoomOut)));
        assert_eq!(
            key_action("ArrowLeft"),
            Some(KeyAction::View(ViewKey::PanLeft))
        );
        assert_eq!(key_action("d"), Some(KeyAction::View(ViewKey::PanRight)));
        assert_eq!(key_action("0"), Some(KeyAction::View(ViewKey::Fit)));
        assert_eq!(
            key_action("f"),
            Some(KeyAction::View(ViewKey::ZoomToSelection))
        );
        assert_eq!(key_action("ArrowUp"), Some(KeyAction::Move(Nav::Parent)));
        assert_eq!(
            key_action("ArrowDown"),
            Some(KeyAction::Move(Nav::FirstChild))
        );
        assert_eq!(key_action("["), Some(KeyAction::Move(Nav::PrevSibling)));
        assert_eq!(key_action("]"), Some(KeyAction::Move(Nav::NextSibling)));
        assert_eq!(key_action("Escape"), Some(KeyAction::Deselect));
        assert_eq!(key_action("PageDown"), Some(KeyAction::ScrollLanes(1)));
        assert_eq!(key_action("PageUp"), Some(KeyAction::ScrollLanes(-1)));
        assert_eq!(key_action("x"), None);
        assert_eq!(key_action("Enter"), None);
    }

    #[test]
    fn every_chart_key_is_in_the_shortcut_list() {
        // Each key the keymap knows is named in the `?` list (as its letter or its arrow).
        let listed: String = SHORTCUTS
            .iter()
            .map(|(k, _)| *k)
            .collect::<Vec<_>>()
            .join(" ");
        for (key, shown) in [
            ("w", "W"),
            ("s", "S"),
            ("+", "+"),
            ("-", "−"),
            ("a", "A"),
            ("d", "D"),
            ("ArrowLeft", "←"),
            ("ArrowRight", "→"),
            ("0", "0"),
            ("f", "F"),
            ("ArrowUp", "↑"),
            ("ArrowDown", "↓"),
            ("[", "["),
            ("]", "]"),
            ("Escape", "Escape"),
            ("PageUp", "Page Up"),
            ("PageDown", "Page Down"),
        ] {
            assert!(key_action(key).is_some(), "{key}");
            assert!(listed.contains(shown), "{key} is not listed as {shown}");
        }
    }

    #[test]
    fn ranges_are_dragged_with_shift_or_on_the_axis() {
        assert_eq!(drag_mode(true, 100.0), DragMode::Range);
        assert_eq!(drag_mode(false, 10.0), DragMode::Range);
        assert_eq!(drag_mode(false, 100.0), DragMode::Pan);
        // 0..1000 ns in 100 px: from x 60 back to x 20 is 200..600.
        let v = Viewport::fit(0, 1000, 100.0);
        assert_eq!(range_from_drag(&v, 60.0, 20.0), (200, 600));
        // Past the canvas's edges: the view's bounds.
        assert_eq!(range_from_drag(&v, -50.0, 250.0), (0, 1000));
        let z = v.show_range(500, 1000, 0.0);
        assert_eq!(range_from_drag(&z, 0.0, 10.0), (500, 550));
    }

    #[test]
    fn keys_move_the_window() {
        // 0..1000 ns in 100 px: 10 ns per px.
        let whole = Viewport::fit(0, 1000, 100.0);
        // W: 1.5× around the centre (500 ns): 666.67 ns wide, 166.67..833.33.
        let z = view_after(ViewKey::ZoomIn, &whole, whole, None);
        assert!(close(z.start_ns, 500.0 - 1000.0 / 3.0));
        assert!(close(z.end_ns(), 500.0 + 1000.0 / 3.0));
        // D: 15 px at 6.667 ns/px = 100 ns later.
        let d = view_after(ViewKey::PanRight, &z, whole, None);
        assert!(close(d.start_ns, z.start_ns + 100.0));
        let a = view_after(ViewKey::PanLeft, &d, whole, None);
        assert!(close(a.start_ns, z.start_ns));
        // S undoes W; 0 fits whatever the zoom.
        let s = view_after(ViewKey::ZoomOut, &z, whole, None);
        assert!(close(s.start_ns, 0.0) && close(s.end_ns(), 1000.0));
        assert_eq!(view_after(ViewKey::Fit, &d, whole, None), whole);
        // F: a span at 200..300 with 10% margins: 190..310.
        let f = view_after(
            ViewKey::ZoomToSelection,
            &whole,
            whole,
            Some((200.0, 300.0)),
        );
        assert!(close(f.start_ns, 190.0) && close(f.end_ns(), 310.0));
        assert_eq!(view_after(ViewKey::ZoomToSelection, &z, whole, None), z);
    }

    #[test]
    fn revealing_and_stepping_to_matches() {
        let v = Viewport::fit(0, 1000, 100.0).show_range(0, 500, 0.0);
        // Inside the window: unchanged.
        assert_eq!(reveal(&v, 100.0, 200.0), v);
        // Partly outside: shown with margins (600..700 → 590..710).
        let r = reveal(&v, 600.0, 700.0);
        assert!(close(r.start_ns, 590.0) && close(r.end_ns(), 710.0));
        // A short match is centred at the same scale: 650 in the middle of a 500 ns window.
        let m = to_match(&v, 640.0, 660.0);
        assert!(close(m.start_ns, 400.0) && close(m.ns_per_px, v.ns_per_px));
        // A match longer than the window zooms out to it: 0..800 with 80 ns margins is 960 ns
        // wide, which the bounds (0..1000) move to start at 0.
        let m = to_match(&v, 0.0, 800.0);
        assert!(close(m.start_ns, 0.0) && close(m.end_ns(), 960.0));
    }

    #[test]
    fn wheel_zooms_at_the_pointer_or_pans() {
        let v = Viewport::fit(0, 1000, 100.0);
        // deltaY −100: e^(0.2) ≈ 1.2214× around x = 25 (250 ns stays at x 25).
        let z = wheel(&v, 25.0, 0.0, -100.0, false);
        assert!(close(z.ns_per_px, 10.0 / 0.2f64.exp()));
        assert!(close(z.ns_from_x(25.0), 250.0));
        // ctrl: five times the rate.
        let p = wheel(&v, 25.0, 0.0, -20.0, true);
        assert!(close(p.ns_per_px, 10.0 / 0.2f64.exp()));
        // Mostly horizontal: pans by −dx pixels (10 px = 100 ns later).
        let h = wheel(&z, 50.0, 10.0, 1.0, false);
        assert!(close(h.start_ns, z.start_ns + 10.0 * z.ns_per_px));
    }

    #[test]
    fn a_press_is_a_click_until_it_moves_three_pixels() {
        let v = Viewport::fit(0, 1000, 100.0).show_range(400, 600, 0.0); // 2 ns per px
        let mut d = Drag::new(50.0, v);
        assert_eq!(d.to(52.0), None);
        assert!(d.is_click());
        // 3 px to the right: content follows the pointer, 6 ns earlier.
        let p = d.to(53.0).unwrap_or(v);
        assert!(close(p.start_ns, 394.0));
        assert!(!d.is_click());
        // Once a drag, small moves pan too (back to 1 px: 2 ns earlier than at the press).
        let back = d.to(51.0).unwrap_or(v);
        assert!(close(back.start_ns, 398.0));
    }
}
