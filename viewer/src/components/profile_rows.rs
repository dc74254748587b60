//! A profile's chart as its tabs' tables link to it ([`ProfileLinks`]).

use std::sync::Arc;

use leptos::prelude::*;

use super::rows::{select_only, LinkedRows, Pick};
use super::{PageState, TraceContext};
use crate::model::profile_chart::ProfileChart;
use crate::model::profile_links::ChartSpan;

/// A profile's chart as its tabs' tables link to it (`model::profile_links`): each table's
/// rows are [`LinkedRows`] over the chart's groups, a row's activation selecting its first
/// span only (the chart has one selection).
#[derive(Clone)]
pub struct ProfileLinks {
    /// The chart's spans and what they stand for.
    pub chart: Arc<ProfileChart>,
    /// The chart's groups' contexts (their selections and outlines).
    pub groups: Arc<Vec<TraceContext>>,
    /// The view's state (the active group, the range).
    pub page: PageState,
}

impl ProfileLinks {
    /// The rows of a table whose row `r` (`data-row`) stands for `spans_of(r)` and is linked
    /// to a selected span `s` when `links_to(r, s)`.
    pub fn rows(
        &self,
        spans_of: impl Fn(usize) -> Vec<ChartSpan> + Send + Sync + 'static,
        links_to: impl Fn(usize, ChartSpan) -> bool + Send + Sync + 'static,
    ) -> LinkedRows {
        LinkedRows::new(&self.groups, Pick::First, spans_of, links_to)
    }

    /// Select, show and outline span `s` alone.
    pub fn show(&self, s: ChartSpan) {
        for (g, ctx) in self.groups.iter().enumerate() {
            let outline = if g == s.group {
                vec![s.span]
            } else {
                Vec::new()
            };
            if ctx.highlighted.with_untracked(|now| **now != outline) {
                ctx.highlighted.set(Arc::new(outline));
            }
        }
        select_only(&self.groups.iter().collect::<Vec<_>>(), s);
    }

    /// The selected span: the active group's, else the first group's that has one.
    pub fn selected(&self) -> Option<ChartSpan> {
        let of = |g: usize| {
            self.groups
                .get(g)
                .and_then(|ctx| ctx.selected.get().map(|span| ChartSpan { group: g, span }))
        };
        of(self.page.active.get()).or_else(|| (0..self.groups.len()).find_map(of))
    }
}
