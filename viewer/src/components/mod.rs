//! Leptos components: they read signals and render what [`crate::model`] and
//! [`crate::timeline`] computed. Names from the file are always text nodes, never HTML.

pub mod app;
pub mod capture;
pub mod cards;
pub mod compare;
pub mod details;
pub mod diagnostics;
pub mod efficiency;
pub mod findings;
pub mod gradients;
pub mod header;
pub mod memory;
pub mod missing;
pub mod modules;
pub mod multi;
pub mod phases;
pub mod profile;
pub mod sortable;
pub mod steps;
pub mod tables;
pub mod theme;
pub mod timeline;

use std::sync::Arc;

use leptos::prelude::*;

use crate::model::TraceModel;
use crate::timeline::palette::Theme;

/// What the trace components share: the model, the selected span, the spans highlighted by a
/// table or a search, a range the timeline should show next, and the theme.
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
    /// Light or dark.
    pub theme: Signal<Theme>,
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
