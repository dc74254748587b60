//! The tab panel under the flame chart: which tabs each view has, how the keyboard moves
//! between them (ARIA tabs with manual activation: arrows move the focus, Enter or Space open
//! the focused tab), which tab a finding's row lives in, and the panel's remembered height.

/// One tab of the panel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tab {
    /// The ranked findings.
    Findings,
    /// Module spans as a tree.
    Modules,
    /// Ops and the top spans.
    Ops,
    /// Memory: devices, peak, live set, charts and checkpoints.
    Memory,
    /// Gradient health.
    Gradients,
    /// Training phases and module pairs.
    Phases,
    /// Op efficiency.
    Efficiency,
    /// An inference profile's requests, their waterfalls and the events listed apart.
    Requests,
    /// TTFT and ITL distributions.
    Latency,
    /// An inference profile's batched forwards.
    Iterations,
    /// An inference profile's resources (KV-cache blocks …).
    Resources,
    /// The steps of one run: totals, spreads, outliers, shape churn.
    Steps,
    /// A comparison's summary deltas.
    Summary,
    /// A comparison's span-path deltas.
    Paths,
    /// Several files: each file's numbers and the totals.
    Files,
    /// Several files: where each file sits on the axis.
    Alignment,
}

impl Tab {
    /// Every tab.
    pub const ALL: [Tab; 16] = [
        Tab::Findings,
        Tab::Modules,
        Tab::Ops,
        Tab::Memory,
        Tab::Gradients,
        Tab::Phases,
        Tab::Efficiency,
        Tab::Requests,
        Tab::Latency,
        Tab::Iterations,
        Tab::Resources,
        Tab::Steps,
        Tab::Summary,
        Tab::Paths,
        Tab::Files,
        Tab::Alignment,
    ];

    /// The tab's id: its `data-tab`, `data-testid="tab-<id>"` and its name in the URL.
    pub fn id(self) -> &'static str {
        match self {
            Tab::Findings => "findings",
            Tab::Modules => "modules",
            Tab::Ops => "ops",
            Tab::Memory => "memory",
            Tab::Gradients => "gradients",
            Tab::Phases => "phases",
            Tab::Efficiency => "efficiency",
            Tab::Requests => "requests",
            Tab::Latency => "latency",
            Tab::Iterations => "iterations",
            Tab::Resources => "resources",
            Tab::Steps => "steps",
            Tab::Summary => "summary",
            Tab::Paths => "paths",
            Tab::Files => "files",
            Tab::Alignment => "alignment",
        }
    }

    /// The tab's label.
    pub fn label(self) -> &'static str {
        match self {
            Tab::Findings => "Findings",
            Tab::Modules => "Modules",
            Tab::Ops => "Ops",
            Tab::Memory => "Memory",
            Tab::Gradients => "Gradients",
            Tab::Phases => "Phases",
            Tab::Efficiency => "Efficiency",
            Tab::Requests => "Requests",
            Tab::Latency => "Latency",
            Tab::Iterations => "Iterations",
            Tab::Resources => "Resources",
            Tab::Steps => "Steps",
            Tab::Summary => "Summary",
            Tab::Paths => "Span paths",
            Tab::Files => "Files",
            Tab::Alignment => "Alignment",
        }
    }

    /// The tab with this id.
    pub fn of_id(id: &str) -> Option<Tab> {
        Tab::ALL.into_iter().find(|t| t.id() == id)
    }

    /// Whether the tab's numbers follow a range selection of the chart in a trace's views
    /// (the others cover the whole run and say so while a range is selected); a profile's
    /// tabs have their own rule ([`ViewKind::follows_range`]).
    fn follows_range(self) -> bool {
        matches!(
            self,
            Tab::Modules | Tab::Ops | Tab::Memory | Tab::Phases | Tab::Efficiency
        )
    }
}

/// What a page shows, each with its own tabs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewKind {
    /// One execution trace.
    Trace,
    /// An inference profile.
    Profile,
    /// The steps of one run (with the first step in detail).
    Steps,
    /// A baseline and a candidate.
    Compare,
    /// Several files on one axis.
    Multi,
}

impl ViewKind {
    /// The view's tabs, left to right; the first is open when nothing else is asked for.
    pub fn tabs(self) -> &'static [Tab] {
        match self {
            ViewKind::Trace => &[
                Tab::Findings,
                Tab::Modules,
                Tab::Ops,
                Tab::Memory,
                Tab::Gradients,
                Tab::Phases,
                Tab::Efficiency,
            ],
            ViewKind::Profile => &[
                Tab::Findings,
                Tab::Requests,
                Tab::Iterations,
                Tab::Resources,
                Tab::Latency,
                Tab::Modules,
                Tab::Memory,
            ],
            ViewKind::Steps => &[
                Tab::Findings,
                Tab::Steps,
                Tab::Modules,
                Tab::Ops,
                Tab::Memory,
                Tab::Gradients,
                Tab::Phases,
                Tab::Efficiency,
            ],
            ViewKind::Compare => &[
                Tab::Summary,
                Tab::Paths,
                Tab::Ops,
                Tab::Memory,
                Tab::Gradients,
            ],
            ViewKind::Multi => &[Tab::Files, Tab::Alignment],
        }
    }

    /// The tab named `id` when this view has it, else the view's first tab.
    pub fn tab_or_first(self, id: Option<&str>) -> Tab {
        tab_or_first_of(self.tabs(), id)
    }

    /// Whether this view's `tab` follows a range selection of the chart. A profile's
    /// Requests, Iterations, Modules and Memory do; its Findings, Resources and Latency cover
    /// the whole run.
    pub fn follows_range(self, tab: Tab) -> bool {
        match self {
            ViewKind::Profile => matches!(
                tab,
                Tab::Requests | Tab::Iterations | Tab::Modules | Tab::Memory
            ),
            _ => tab.follows_range(),
        }
    }

    /// What the range bar says of this view's open `tab` while a range is selected: how the
    /// tab counts the range, or that it covers the whole run.
    pub fn range_note(self, tab: Tab) -> &'static str {
        match tab {
            _ if !self.follows_range(tab) => {
                " — this tab covers the whole run: it does not follow a range."
            }
            Tab::Efficiency => {
                " — this tab counts the ops inside it; one crossing an edge with its part inside, \
                 its FLOPs and bytes in proportion (FLOP/s unchanged)."
            }
            _ if self == ViewKind::Profile => {
                " — this tab counts only what ran inside it (a span crossing an edge with its part \
                 inside, a snapshot taken inside it)."
            }
            _ => {
                " — this tab counts only what ran inside it (a span crossing an edge with its part \
                 inside)."
            }
        }
    }
}

/// The tab of `tabs` named `id`, else the first of `tabs` (a name another file's view had,
/// or a tab this one hides, opens the first).
pub fn tab_or_first_of(tabs: &[Tab], id: Option<&str>) -> Tab {
    id.and_then(Tab::of_id)
        .filter(|t| tabs.contains(t))
        .or_else(|| tabs.first().copied())
        .unwrap_or(Tab::Findings)
}

/// A profile's tabs: [`ViewKind::Profile`]'s, less Iterations without batched forwards (an
/// engine's `iteration` events) and Resources without `resource` events. Those two are a
/// serving engine's and a scheduler's: a profile without them never had them to capture.
/// Latency, Modules and Memory stay, saying what was not captured and how to capture it.
pub fn profile_tabs(iterations: bool, resources: bool) -> &'static [Tab] {
    const BASE: [Tab; 4] = [Tab::Findings, Tab::Requests, Tab::Latency, Tab::Modules];
    match (iterations, resources) {
        (true, true) => ViewKind::Profile.tabs(),
        (true, false) => &[
            BASE[0],
            BASE[1],
            Tab::Iterations,
            BASE[2],
            BASE[3],
            Tab::Memory,
        ],
        (false, true) => &[
            BASE[0],
            BASE[1],
            Tab::Resources,
            BASE[2],
            BASE[3],
            Tab::Memory,
        ],
        (false, false) => &[BASE[0], BASE[1], BASE[2], BASE[3], Tab::Memory],
    }
}

/// What a key does on a focused tab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TabKey {
    /// Move the focus to tab `i` (not opening it).
    Focus(usize),
    /// Open the focused tab.
    Activate,
}

/// The tab list's keyboard (WAI-ARIA tabs, manual activation): ←/→ move the focus to the
/// previous/next tab, wrapping; Home/End to the first/last; Enter and Space open the focused
/// tab. Other keys: `None` (they are not the tab list's, and do nothing there).
pub fn tab_key(key: &str, focused: usize, count: usize) -> Option<TabKey> {
    if count == 0 {
        return None;
    }
    let focused = focused.min(count - 1);
    Some(match key {
        "ArrowRight" => TabKey::Focus((focused + 1) % count),
        "ArrowLeft" => TabKey::Focus((focused + count - 1) % count),
        "Home" => TabKey::Focus(0),
        "End" => TabKey::Focus(count - 1),
        "Enter" | " " => TabKey::Activate,
        _ => return None,
    })
}

/// The tab that holds the rows of a finding's row link (its `data-testid`), `None` for rows
/// the tabs do not hold.
pub fn tab_of_row(testid: &str) -> Option<Tab> {
    Some(match testid {
        "module-row" | "profile-module-row" => Tab::Modules,
        "gradient-group" | "gradient-row" => Tab::Gradients,
        "memory-chart" | "memory-device" => Tab::Memory,
        "request-row" => Tab::Requests,
        "iteration-row" => Tab::Iterations,
        "resource-kind" => Tab::Resources,
        "step-row" => Tab::Steps,
        "op-row" => Tab::Ops,
        "module-pair" => Tab::Phases,
        t if t.starts_with("phase-") => Tab::Phases,
        _ => return None,
    })
}

/// The panel's height when nothing is remembered: this share of the window.
pub const DEFAULT_SHARE: f64 = 0.25;
/// The panel is never lower than this (its tab bar and a few rows).
pub const MIN_PANEL_PX: f64 = 120.0;
/// The chart keeps at least this share of the window however tall the panel is dragged.
pub const MIN_CHART_SHARE: f64 = 0.4;
/// What sits above the panel besides the chart: the top bar, the view's header, the chart's
/// toolbar, the minimap and the splitter (their height at most, with a header of three lines).
pub const CHROME_ABOVE_PX: f64 = 200.0;
/// The `localStorage` key of the remembered height.
pub const STORAGE_KEY: &str = "candle-trace.panel-px";

/// The panel's height in a window `window_px` high: `wanted` (a remembered or dragged
/// height) kept between [`MIN_PANEL_PX`] and what leaves the chart [`MIN_CHART_SHARE`] of the
/// window under [`CHROME_ABOVE_PX`] of header and toolbars; without one, [`DEFAULT_SHARE`] of
/// the window. A window too low for both minimums gets the minimum panel.
pub fn panel_px(wanted: Option<f64>, window_px: f64) -> f64 {
    let most = (window_px * (1.0 - MIN_CHART_SHARE) - CHROME_ABOVE_PX).max(MIN_PANEL_PX);
    let px = wanted
        .filter(|p| p.is_finite())
        .unwrap_or((window_px * DEFAULT_SHARE).round());
    px.clamp(MIN_PANEL_PX, most)
}

/// A remembered height as stored (`"240"`), `None` when it is not a positive number.
pub fn parse_stored(text: Option<&str>) -> Option<f64> {
    text.and_then(|t| t.trim().parse::<f64>().ok())
        .filter(|p| p.is_finite() && *p > 0.0)
}

/// The height after dragging the splitter from `press_y` (where the panel was `start_px`
/// high) to `y`: up makes the panel taller. Kept in bounds by [`panel_px`].
pub fn dragged_px(start_px: f64, press_y: f64, y: f64, window_px: f64) -> f64 {
    panel_px(Some(start_px + (press_y - y)), window_px)
}

/// The height after a splitter key (↑ taller, ↓ lower, by `step_px`), `None` for other keys.
pub fn keyed_px(key: &str, px: f64, step_px: f64, window_px: f64) -> Option<f64> {
    match key {
        "ArrowUp" => Some(panel_px(Some(px + step_px), window_px)),
        "ArrowDown" => Some(panel_px(Some(px - step_px), window_px)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_hides_the_serving_tabs_it_has_nothing_for() {
        let ids = |tabs: &[Tab]| tabs.iter().map(|t| t.id()).collect::<Vec<_>>();
        assert_eq!(ids(profile_tabs(true, true)), ids(ViewKind::Profile.tabs()));
        assert_eq!(
            ids(profile_tabs(false, false)),
            ["findings", "requests", "latency", "modules", "memory"]
        );
        assert_eq!(
            ids(profile_tabs(false, true)),
            [
                "findings",
                "requests",
                "resources",
                "latency",
                "modules",
                "memory"
            ]
        );
        assert_eq!(
            ids(profile_tabs(true, false)),
            [
                "findings",
                "requests",
                "iterations",
                "latency",
                "modules",
                "memory"
            ]
        );
        // A URL naming a hidden tab opens the first.
        let tabs = profile_tabs(false, false);
        assert_eq!(tab_or_first_of(tabs, Some("iterations")), Tab::Findings);
        assert_eq!(tab_or_first_of(tabs, Some("memory")), Tab::Memory);
        // Which of a profile's tabs follow a range.
        let follows: Vec<&str> = ViewKind::Profile
            .tabs()
            .iter()
            .filter(|t| ViewKind::Profile.follows_range(**t))
            .map(|t| t.id())
            .collect();
        assert_eq!(follows, ["requests", "iterations", "modules", "memory"]);
        assert!(ViewKind::Trace.follows_range(Tab::Ops));
        assert!(!ViewKind::Trace.follows_range(Tab::Gradients));
    }

    #[test]
    fn every_view_has_its_tabs_with_distinct_ids() {
        assert_eq!(
            ViewKind::Trace
                .tabs()
                .iter()
                .map(|t| t.label())
                .collect::<Vec<_>>(),
            [
                "Findings",
                "Modules",
                "Ops",
                "Memory",
                "Gradients",
                "Phases",
                "Efficiency"
            ]
        );
        assert_eq!(
            ViewKind::Profile
                .tabs()
                .iter()
                .map(|t| t.id())
                .collect::<Vec<_>>(),
            [
                "findings",
                "requests",
                "iterations",
                "resources",
                "latency",
                "modules",
                "memory"
            ]
        );
        for t in Tab::ALL {
            assert_eq!(Tab::of_id(t.id()), Some(t));
        }
        let mut ids: Vec<&str> = Tab::ALL.iter().map(|t| t.id()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), Tab::ALL.len());
        assert_eq!(Tab::of_id("nope"), None);
    }

    #[test]
    fn the_tabs_that_follow_a_range_and_what_the_range_bar_says() {
        let following = |kind: ViewKind| {
            kind.tabs()
                .iter()
                .filter(|t| kind.follows_range(**t))
                .map(|t| t.id())
                .collect::<Vec<_>>()
        };
        // Gradients (per parameter, no time) and findings (of the whole run) do not.
        assert_eq!(
            following(ViewKind::Trace),
            ["modules", "ops", "memory", "phases", "efficiency"]
        );
        assert_eq!(
            following(ViewKind::Steps),
            ["modules", "ops", "memory", "phases", "efficiency"]
        );
        let trace = ViewKind::Trace;
        assert!(trace.range_note(Tab::Efficiency).contains(
            "one crossing an edge with its part inside, its FLOPs and bytes in proportion"
        ));
        assert!(trace.range_note(Tab::Ops).contains("with its part inside)"));
        assert!(!trace.range_note(Tab::Memory).contains("snapshot"));
        assert!(ViewKind::Profile
            .range_note(Tab::Memory)
            .contains("a snapshot taken inside it"));
        let whole = " — this tab covers the whole run: it does not follow a range.";
        assert_eq!(trace.range_note(Tab::Gradients), whole);
        assert_eq!(trace.range_note(Tab::Findings), whole);
        assert_eq!(ViewKind::Profile.range_note(Tab::Latency), whole);
    }

    #[test]
    fn a_tab_from_the_url_only_when_the_view_has_it() {
        assert_eq!(ViewKind::Trace.tab_or_first(Some("ops")), Tab::Ops);
        assert_eq!(
            ViewKind::Trace.tab_or_first(Some("requests")),
            Tab::Findings
        );
        assert_eq!(
            ViewKind::Profile.tab_or_first(Some("latency")),
            Tab::Latency
        );
        assert_eq!(ViewKind::Compare.tab_or_first(None), Tab::Summary);
        assert_eq!(ViewKind::Multi.tab_or_first(Some("x")), Tab::Files);
    }

    #[test]
    fn arrows_move_the_focus_and_enter_or_space_open() {
        assert_eq!(tab_key("ArrowRight", 0, 3), Some(TabKey::Focus(1)));
        assert_eq!(tab_key("ArrowRight", 2, 3), Some(TabKey::Focus(0)));
        assert_eq!(tab_key("ArrowLeft", 0, 3), Some(TabKey::Focus(2)));
        assert_eq!(tab_key("Home", 2, 3), Some(TabKey::Focus(0)));
        assert_eq!(tab_key("End", 0, 3), Some(TabKey::Focus(2)));
        assert_eq!(tab_key("Enter", 1, 3), Some(TabKey::Activate));
        assert_eq!(tab_key(" ", 1, 3), Some(TabKey::Activate));
        // Keys of the chart are not the tab list's.
        for key in ["ArrowUp", "ArrowDown", "w", "a", "?"] {
            assert_eq!(tab_key(key, 1, 3), None, "{key}");
        }
        assert_eq!(tab_key("ArrowRight", 0, 0), None);
        // A focus past the end (tabs changed) moves from the last.
        assert_eq!(tab_key("ArrowLeft", 9, 3), Some(TabKey::Focus(1)));
    }

    #[test]
    fn finding_rows_open_their_tab() {
        assert_eq!(tab_of_row("module-row"), Some(Tab::Modules));
        assert_eq!(tab_of_row("gradient-group"), Some(Tab::Gradients));
        assert_eq!(tab_of_row("memory-chart"), Some(Tab::Memory));
        assert_eq!(tab_of_row("request-row"), Some(Tab::Requests));
        assert_eq!(tab_of_row("step-row"), Some(Tab::Steps));
        assert_eq!(tab_of_row("phase-backward"), Some(Tab::Phases));
        assert_eq!(tab_of_row("nothing"), None);
    }

    #[test]
    fn the_panel_height_stays_in_bounds() {
        // 900 px window: 25% = 225 px by default.
        assert_eq!(panel_px(None, 900.0), 225.0);
        assert_eq!(panel_px(Some(300.0), 900.0), 300.0);
        // At most what leaves the chart 40% of the window (360 px of 900) under 200 px of
        // header and toolbars: 900 - 360 - 200 = 340 px; at least 120 px.
        assert_eq!(panel_px(Some(800.0), 900.0), 340.0);
        // 720 px: 720 - 288 - 200 = 232 px.
        assert_eq!(panel_px(Some(800.0), 720.0), 232.0);
        assert_eq!(panel_px(Some(10.0), 900.0), 120.0);
        assert_eq!(panel_px(Some(f64::NAN), 900.0), 225.0);
        // A window lower than both minimums: the minimum panel.
        assert_eq!(panel_px(Some(300.0), 350.0), 120.0);
        assert_eq!(panel_px(Some(300.0), 500.0), 120.0);
        assert_eq!(parse_stored(Some(" 240 ")), Some(240.0));
        for bad in [
            None,
            Some(""),
            Some("x"),
            Some("-5"),
            Some("inf"),
            Some("NaN"),
        ] {
            assert_eq!(parse_stored(bad), None, "{bad:?}");
        }
        // Dragging the splitter 50 px up makes the panel 50 px taller.
        assert_eq!(dragged_px(252.0, 600.0, 550.0, 900.0), 302.0);
        // A 720 px window: 180 px.
        assert_eq!(panel_px(None, 720.0), 180.0);
        // Dragged to the top: the cap.
        assert_eq!(dragged_px(252.0, 600.0, 0.0, 900.0), 340.0);
        assert_eq!(keyed_px("ArrowUp", 252.0, 24.0, 900.0), Some(276.0));
        assert_eq!(keyed_px("ArrowDown", 130.0, 24.0, 900.0), Some(120.0));
        assert_eq!(keyed_px("w", 252.0, 24.0, 900.0), None);
    }
}
