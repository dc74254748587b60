//! Leptos components: they read signals and render what [`crate::model`] and
//! [`crate::timeline`] computed. Names from the file are always text nodes, never HTML.

pub mod app;
pub mod capture;
pub mod cards;
pub mod chart_paint;
pub mod compare;
pub mod details;
pub mod diagnostics;
pub mod efficiency;
pub mod findings;
pub mod frame;
pub mod gradients;
pub mod header;
pub mod memory;
pub mod missing;
pub mod modules;
pub mod multi;
pub mod panel;
pub mod phases;
pub mod profile;
pub mod profile_rows;
pub mod rows;
pub mod sortable;
pub mod step_nav;
pub mod steps;
pub mod steps_page;
pub mod tables;
pub mod targets;
pub mod theme;
pub mod timeline;
pub mod trace_view;

use std::sync::Arc;

use leptos::prelude::*;

use crate::model::panel::{Tab, ViewKind};
use crate::model::TraceModel;
use crate::timeline::fragment::ChartState;
use crate::timeline::viewport::Viewport;

/// What the trace components share: the model, the selected span, the spans highlighted by a
/// table or a search, and a range the timeline should show next.
#[derive(Clone)]
pub struct TraceContext {
    /// The document and its view models.
    pub model: Arc<TraceModel>,
    /// The selected span (index into the document's spans).
    pub selected: RwSignal<Option<u32>>,
    /// Spans outlined in the timeline.
    pub highlighted: RwSignal<Arc<Vec<u32>>>,
    /// When set, the timeline shows this `[start_ns, end_ns]` and clears it.
    pub focus: RwSignal<Option<(u64, u64)>>,
}

impl TraceContext {
    /// Select span `i` and ask the timeline to show it.
    pub fn select_and_show(&self, i: u32) {
        if let Some(e) = self.model.extent(i) {
            self.selected.set(Some(i));
            self.focus.set(Some((e.start_ns, e.end_ns)));
        }
    }
}

/// The page's count of documents shown whole (`<main data-load-seq>`), for a view that counts
/// itself once its first tab is built.
#[derive(Clone, Copy)]
pub struct LoadSeq(pub RwSignal<u64>);

/// What a view's chart and its tab panel share: the open tab, the range selected on the
/// chart's time axis, the group whose selection the details show, and a module key the
/// modules tab should bring into view (a finding's link).
#[derive(Clone, Copy)]
pub struct PageState {
    /// Which view this is.
    pub kind: ViewKind,
    /// Its tabs, left to right (the kind's, or fewer: a profile hides the serving tabs it has
    /// nothing for).
    pub tabs: &'static [Tab],
    /// The open tab.
    pub tab: RwSignal<Tab>,
    /// A range selected on the time axis `[start, end]`, axis ns: what the tabs' numbers
    /// follow, set when a drag ends (or from the URL, a table, a key).
    pub range: RwSignal<Option<(u64, u64)>>,
    /// The range being dragged, drawn on the chart as the pointer moves; it becomes
    /// [`PageState::range`] on release, so the tabs are not recomputed on every move.
    pub dragging: RwSignal<Option<(u64, u64)>>,
    /// The chart's active group.
    pub active: RwSignal<usize>,
    /// A module key to show in the modules tab (its ancestors expanded), then cleared.
    pub reveal: RwSignal<Option<String>>,
    /// The step of a step set shown in detail (the URL's `step`), `None` in other views.
    pub step: StoredValue<Option<String>>,
    /// The chart's visible window (a steps view keeps it from one step's chart to the next).
    pub view: RwSignal<Viewport>,
    /// Whether the next chart keeps `view` (carried over from another step) instead of
    /// fitting its whole axis; taken by the chart.
    pub carried: StoredValue<bool>,
    /// What became of the range when another step was shown (clipped or cleared).
    pub range_note: RwSignal<Option<crate::model::step_switch::RangeNote>>,
}

impl PageState {
    /// The state of a new view of `files`: the tab the URL fragment names when it was
    /// written for the same files (and this view has it), else the view's first tab.
    pub fn new(kind: ViewKind, files: &str) -> Self {
        Self::with_tabs(kind, kind.tabs(), files)
    }

    /// [`PageState::new`] with `tabs` of the view's kind.
    pub fn with_tabs(kind: ViewKind, tabs: &'static [Tab], files: &str) -> Self {
        let state = read_fragment();
        let tab = (state.files == files).then_some(state.tab).flatten();
        PageState {
            kind,
            tabs,
            tab: RwSignal::new(crate::model::panel::tab_or_first_of(tabs, tab.as_deref())),
            range: RwSignal::new(None),
            dragging: RwSignal::new(None),
            active: RwSignal::new(0),
            reveal: RwSignal::new(None),
            step: StoredValue::new(None),
            view: RwSignal::new(Viewport::fit(0, 1, 1000.0)),
            carried: StoredValue::new(false),
            range_note: RwSignal::new(None),
        }
    }

    /// The note on the range bar about the range carried from another step, while the range
    /// is still the one it speaks of.
    pub fn carried_range_note(&self) -> Option<String> {
        let range = self.range.get();
        self.range_note
            .get()
            .filter(|n| n.range == range)
            .map(|n| n.text)
    }

    /// The selected range as the schema's type, `None` without one.
    pub fn time_range(&self) -> Option<candle_trace_schema::analysis::range::TimeRange> {
        self.range
            .get()
            .map(|(s, e)| candle_trace_schema::analysis::range::TimeRange::new(s, e))
    }
}

/// What the trace tabs keep while another tab is open (a tab's content is built when it
/// opens): the modules tab's grouping, sort and expanded nodes, the ops tab's grouping and sort.
#[derive(Clone, Copy)]
pub struct TabStates {
    /// Modules by path or by leaf name.
    pub modules_by: RwSignal<candle_trace_schema::analysis::modules::ModuleGrouping>,
    /// The modules tree's sort.
    pub modules_sort:
        RwSignal<crate::model::sort::SortState<crate::model::module_tree::TreeColumn>>,
    /// The expanded nodes' keys (`None` until the tab first opens: its roots then).
    pub modules_expanded: RwSignal<Option<hashbrown::HashSet<String>>>,
    /// Ops grouped by shape and dtype too.
    pub ops_by_shape: RwSignal<bool>,
    /// The op table's sort.
    pub ops_sort: RwSignal<crate::model::sort::SortState<crate::model::ops::OpColumn>>,
}

impl TabStates {
    /// Each tab as it first opens.
    pub fn new() -> Self {
        use crate::model::module_tree::TreeColumn;
        use crate::model::ops::OpColumn;
        use crate::model::sort::SortState;
        TabStates {
            modules_by: RwSignal::new(candle_trace_schema::analysis::modules::ModuleGrouping::Path),
            modules_sort: RwSignal::new(SortState::new(TreeColumn::Total, true)),
            modules_expanded: RwSignal::new(None),
            ops_by_shape: RwSignal::new(false),
            ops_sort: RwSignal::new(SortState::new(OpColumn::Total, true)),
        }
    }
}

/// The page's URL fragment, as chart state.
pub fn read_fragment() -> ChartState {
    let hash = web_sys::window().and_then(|w| w.location().hash().ok());
    ChartState::parse(&hash.unwrap_or_default())
}
