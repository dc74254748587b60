//! Which step of a step set is shown in detail ([`StepsNav`]): the steps view switches it,
//! and a finding's link into another step asks it to.

use std::sync::Arc;

use leptos::prelude::*;

use super::frame::next_frame;
use super::targets::go_to;
use super::{PageState, TraceContext};
use crate::model::findings::FindingTarget;
use crate::model::panel::{tab_of_row, Tab};
use crate::model::step_switch::{carried_note, carry_range, StepExtent};
use crate::model::steps::StepsModel;

/// What takes the focus in the next step's view, once it is up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FocusNext {
    /// The shown step's row in the steps tab.
    Row,
    /// The step picker in the heading.
    Picker,
}

/// Which step of a set is shown in detail, and what the next step's view does once it is up
/// (each step's view is built anew: its chart, header and tabs read that step's model; the
/// view's state, `page`, and its tabs' grouping and sort outlive it).
#[derive(Clone, Copy)]
pub struct StepsNav {
    /// The set.
    pub model: StoredValue<Arc<StepsModel>>,
    /// The state every step's view shares: the open tab, the chart's window, the range.
    pub page: PageState,
    /// The shown step's position in the set's steps.
    pub shown: RwSignal<usize>,
    /// The tab the next step's view opens.
    pub tab: StoredValue<Option<Tab>>,
    /// What takes the focus in the next step's view.
    pub focus: StoredValue<Option<FocusNext>>,
    /// A finding's link the next step's view follows.
    pub follow: StoredValue<Option<FindingTarget>>,
}

impl StepsNav {
    /// Show the step at `pos` with `tab` open (nothing when it is shown already), at the same
    /// place: the chart's window and the range at the same offsets from its start.
    pub fn show(&self, pos: usize, tab: Tab, focus: Option<FocusNext>) {
        let from = self.shown.get_untracked();
        if from == pos {
            return;
        }
        self.carry(from, pos);
        self.tab.set_value(Some(tab));
        self.focus.set_value(focus);
        self.shown.set(pos);
    }

    /// Move the chart's window and the range from step `from` onto step `to`, each at the same
    /// offsets from its step's start (`model::step_switch`); the range bar says when the range
    /// was clipped or cleared.
    fn carry(&self, from: usize, to: usize) {
        let (models, step) = self.model.with_value(|m| {
            (
                m.model(from).zip(m.model(to)),
                m.steps.get(to).map(|s| s.step.clone()),
            )
        });
        let Some((a, b)) = models else {
            return;
        };
        let (from_x, to_x) = (StepExtent::of(&a.lanes), StepExtent::of(&b.lanes));
        let page = self.page;
        page.view
            .update(|v| *v = v.carried(from_x.start_ns, to_x.start_ns, to_x.end_ns));
        page.carried.set_value(true);
        let Some(range) = page.range.get_untracked() else {
            return;
        };
        let carried = carry_range(range, from_x, to_x);
        let note = carried_note(carried, range, from_x, step.as_deref().unwrap_or("?"), to_x);
        page.range.set(carried.range());
        page.range_note.set(note);
    }

    /// When finding row `i` leads into a step other than the shown one: show that step and
    /// follow the link there (its tab open), and `true`; else `false` (the link is followed
    /// where it is).
    pub fn follow_in_step(&self, i: usize, target: &FindingTarget, page: PageState) -> bool {
        let Some(pos) = self.model.with_value(|m| m.finding_step(i)) else {
            return false;
        };
        if pos == self.shown.get_untracked() {
            return false;
        }
        let tab = match target {
            FindingTarget::Row { testid, .. } => tab_of_row(testid),
            FindingTarget::Span { .. } => None,
        };
        self.follow.set_value(Some(target.clone()));
        self.show(pos, tab.unwrap_or_else(|| page.tab.get_untracked()), None);
        true
    }

    /// The shown step's file.
    pub fn shown_file(&self) -> Option<String> {
        let pos = self.shown.get_untracked();
        self.model
            .with_value(|m| m.steps.get(pos).map(|s| s.file.clone()))
    }

    /// Which step finding row `i` read, in words (`None` past the last finding).
    pub fn finding_reads(&self, i: usize) -> Option<String> {
        self.model.with_value(|m| m.finding_reads(i))
    }

    /// A step's view was just built with `page` and `ctx`: it opens the tab the step was
    /// shown with, keeps its step in the URL, and follows the finding that showed it.
    pub fn view_built(&self, page: PageState, ctx: TraceContext) {
        let pos = self.shown.get_untracked();
        page.step.set_value(
            self.model
                .with_value(|m| m.steps.get(pos).map(|s| s.step.clone())),
        );
        if let Some(tab) = self.tab.try_update_value(Option::take).flatten() {
            page.tab.set(tab);
        }
        if let Some(target) = self.follow.try_update_value(Option::take).flatten() {
            leptos::task::spawn_local(async move {
                // The chart's first frames lay the step out; a span is shown after them.
                next_frame().await;
                next_frame().await;
                go_to(target, Some(page), Some(ctx)).await;
            });
        }
    }

    /// Whether `what` takes the focus in this step's view (asked once).
    pub fn take_focus(&self, what: FocusNext) -> bool {
        let wanted = self.focus.get_value() == Some(what);
        if wanted {
            self.focus.set_value(None);
        }
        wanted
    }
}
