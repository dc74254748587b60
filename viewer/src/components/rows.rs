//! What the panel's tables share: the panel's scroll (long tables build only the rows in view,
//! [`crate::model::virtual_rows`]), hovering a row to outline its spans in the chart, bringing
//! a row linked to the selected span into view, a row's keys (Enter or Space activate it, ↑/↓
//! move the focus between rows) and keeping the focus on a row its table built again, and
//! [`LinkedRows`]: a table's rows linked both ways with the chart's groups.

use std::sync::Arc;

use leptos::html::Tbody;
use leptos::prelude::*;
use wasm_bindgen::JsCast;

use super::frame::next_frame;
use super::TraceContext;
use crate::model::links::{by_group, GroupRows};
use crate::model::profile_links::ChartSpan;
use crate::model::virtual_rows::{row_window, scroll_to_show, with_kept, RowWindow, WHOLE_ROWS};

/// Height of a row of a long (windowed) table, CSS pixels (`web/style.css`: `tr.vrow`).
pub const ROW_PX: f64 = 26.0;

/// The scroll box of the panel's open tab, which long tables window themselves against.
#[derive(Clone, Copy)]
pub struct PanelScroll {
    /// The tab content's `scrollTop`.
    pub top: RwSignal<f64>,
    /// The panel's height (an upper bound of the visible part).
    pub height: Signal<f64>,
    /// The scroll box.
    pub el: NodeRef<leptos::html::Div>,
    /// What the tables brought into view for the selection in this frame (content pixels), so
    /// that a second table of the tab does not scroll the first one's row away.
    pub kept: StoredValue<Option<(f64, f64)>>,
}

/// `body`'s top inside the panel's scroll box (content coordinates).
fn body_top(scroll: &PanelScroll, body: NodeRef<Tbody>) -> Option<(web_sys::HtmlElement, f64)> {
    let el = scroll.el.get_untracked()?;
    let b = body.get_untracked()?;
    let top = b.get_bounding_client_rect().top() - el.get_bounding_client_rect().top()
        + f64::from(el.scroll_top());
    Some((el.unchecked_into(), top))
}

/// Which of `rows` rows of a table to build: all of a short table, the ones in view (and a
/// few more) of a long one.
pub fn row_window_of(body: NodeRef<Tbody>, rows: Signal<usize>) -> Memo<RowWindow> {
    let scroll = use_context::<PanelScroll>();
    Memo::new(move |_| {
        let n = rows.get();
        match scroll {
            Some(s) if n > WHOLE_ROWS => {
                let top = s.top.get();
                let height = s.height.get();
                let offset = untrack(|| body_top(&s, body)).map_or(0.0, |(_, t)| t);
                row_window(n, ROW_PX, top - offset, height)
            }
            _ => row_window(n, ROW_PX, 0.0, 0.0),
        }
    })
}

/// The `data-row` index of the table row an event happened in (tables take their rows' events
/// on the `<tbody>`: one handler, not one per row).
pub fn row_of(ev: &web_sys::Event) -> Option<usize> {
    ev.target()?
        .dyn_into::<web_sys::Element>()
        .ok()?
        .closest("tr[data-row]")
        .ok()??
        .get_attribute("data-row")?
        .parse()
        .ok()
}

/// A spacer row standing in for `px` of rows not built.
pub fn spacer(px: f64, columns: usize) -> impl IntoView {
    (px > 0.0).then(|| {
        view! {
            <tr class="spacer" aria-hidden="true">
                <td colspan=columns.to_string() style:height=format!("{px}px")></td>
            </tr>
        }
    })
}

/// Bring row `i` (of `rows`) of the table whose body is `body` into the panel's view, wholly
/// (and with it what another table of the tab brought into view for the same selection, where
/// both fit; else that stays).
pub fn reveal_row_in(scroll: PanelScroll, body: NodeRef<Tbody>, i: usize, rows: usize) {
    let Some((el, top)) = body_top(&scroll, body) else {
        return;
    };
    let row = if rows > WHOLE_ROWS {
        let row_top = top + i as f64 * ROW_PX;
        (row_top, row_top + ROW_PX)
    } else {
        let Some(row) = body
            .get_untracked()
            .and_then(|b| b.rows().item(i as u32))
            .and_then(|r| r.dyn_into::<web_sys::HtmlElement>().ok())
        else {
            return;
        };
        let rect = row.get_bounding_client_rect();
        let row_top = rect.top() - el.get_bounding_client_rect().top() + f64::from(el.scroll_top());
        (row_top, row_top + rect.height())
    };
    let view = f64::from(el.client_height());
    let kept = scroll.kept.get_value();
    let Some(show) = with_kept(kept, row, view) else {
        return;
    };
    if kept.is_none() {
        // The next selection starts afresh.
        leptos::task::spawn_local(async move {
            next_frame().await;
            scroll.kept.try_set_value(None);
        });
    }
    scroll.kept.set_value(Some(show));
    let to = scroll_to_show(show, f64::from(el.scroll_top()), view);
    el.set_scroll_top(to.round() as i32);
}

/// The table row an event happened on, when it happened on the row itself (not on a button
/// or a field inside it).
fn event_row(ev: &web_sys::Event) -> Option<web_sys::HtmlElement> {
    ev.target()?
        .dyn_into::<web_sys::HtmlElement>()
        .ok()
        .filter(|el| el.tag_name() == "TR")
}

/// A key on a focused row: Enter or Space runs `activate` with its `data-row`; ↓ and ↑ move the
/// focus to the next and the previous focusable row (the panel does not scroll instead). True
/// when the key was the row's.
pub fn row_key(ev: &web_sys::KeyboardEvent, activate: impl FnOnce(usize)) -> bool {
    let Some(row) = event_row(ev) else {
        return false;
    };
    let key = ev.key();
    match key.as_str() {
        "Enter" | " " => {
            let Some(pos) = row_of(ev) else { return false };
            ev.prevent_default();
            activate(pos);
        }
        "ArrowDown" | "ArrowUp" => {
            ev.prevent_default();
            let mut next = row.clone().unchecked_into::<web_sys::Element>();
            loop {
                let sibling = if key == "ArrowDown" {
                    next.next_element_sibling()
                } else {
                    next.previous_element_sibling()
                };
                let Some(s) = sibling else { break };
                if s.has_attribute("tabindex") {
                    if let Ok(s) = s.dyn_into::<web_sys::HtmlElement>() {
                        let _ = s.focus();
                    }
                    break;
                }
                next = s;
            }
        }
        _ => return false,
    }
    true
}

/// After a row's activation rebuilt its table's rows (the focused one with them), give the
/// focus back to row `pos` if it fell to the page.
pub fn keep_focus(body: NodeRef<Tbody>, pos: usize) {
    leptos::task::spawn_local(async move {
        next_frame().await;
        let Some(doc) = web_sys::window().and_then(|w| w.document()) else {
            return;
        };
        let dropped = match (doc.active_element(), doc.body()) {
            (None, _) => true,
            (Some(a), Some(b)) => wasm_bindgen::JsValue::from(a) == wasm_bindgen::JsValue::from(b),
            (Some(_), None) => false,
        };
        if !dropped {
            return;
        }
        let row = body
            .try_get_untracked()
            .flatten()
            .and_then(|b| {
                b.query_selector(&format!("tr[data-row=\"{pos}\"]"))
                    .ok()
                    .flatten()
            })
            .and_then(|r| r.dyn_into::<web_sys::HtmlElement>().ok());
        if let Some(row) = row {
            let _ = row.focus();
        }
    });
}

/// Outlining a row's spans while the pointer is over it, and putting back what was outlined
/// before when it leaves.
#[derive(Clone, Copy)]
pub struct HoverSpans {
    ctx_highlighted: RwSignal<Arc<Vec<u32>>>,
    before: StoredValue<Option<Arc<Vec<u32>>>>,
}

impl HoverSpans {
    /// For the rows of `ctx`'s tables.
    pub fn new(ctx: &TraceContext) -> Self {
        HoverSpans {
            ctx_highlighted: ctx.highlighted,
            before: StoredValue::new(None),
        }
    }

    /// Outline `spans` (the chart is drawn again only when they change).
    fn outline(&self, spans: Arc<Vec<u32>>) {
        if self.ctx_highlighted.with_untracked(|now| **now != *spans) {
            self.ctx_highlighted.set(spans);
        }
    }

    /// The pointer entered a row standing for `spans`.
    pub fn enter(&self, spans: Arc<Vec<u32>>) {
        if self.before.with_value(Option::is_none) {
            self.before
                .set_value(Some(self.ctx_highlighted.get_untracked()));
        }
        self.outline(spans);
    }

    /// The pointer left the row.
    pub fn leave(&self) {
        if let Some(before) = self.before.try_get_value().flatten() {
            self.before.set_value(None);
            self.outline(before);
        }
    }

    /// A row was clicked: what it outlines now stays after the pointer leaves.
    pub fn pin(&self, spans: Arc<Vec<u32>>) {
        self.before.set_value(Some(spans.clone()));
        self.outline(spans);
    }
}

/// How a row's activation selects its spans.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// Its first span in each group that has one: groups that are files side by side (a
    /// comparison's baseline and candidate, the several-files view), each with its selection.
    EachGroup,
    /// Its first span only, every other group's selection cleared: groups that are lane
    /// groups of one document (an inference profile's engines and requests), whose chart has
    /// one selection.
    First,
}

/// Select and show span `s` of `groups` (lane groups of one document), every other group's
/// selection cleared.
pub fn select_only(groups: &[&TraceContext], s: ChartSpan) {
    for (g, ctx) in groups.iter().enumerate() {
        if g != s.group && ctx.selected.get_untracked().is_some() {
            ctx.selected.set(None);
        }
    }
    if let Some(ctx) = groups.get(s.group) {
        ctx.select_and_show(s.span);
    }
}

/// How a table of [`LinkedRows`] brings the first row linked to a newly selected span into view.
#[derive(Clone, Copy)]
pub enum Reveal {
    /// The first such row built in the body, in its order (a table that builds every row, or
    /// whose `data-row` is not a row's place).
    FirstBuilt,
    /// The first such row by place: the table's `data-row` `r` is its `r`-th of `count` rows,
    /// so a long table's row is brought into view before it is built.
    ByPlace(Signal<usize>),
    /// None: the table brings its rows into view itself (a tree expands to the row first).
    Own,
}

/// The spans a row stands for (by its `data-row`), in the order its activation picks them.
type SpansOf = Arc<dyn Fn(usize) -> Vec<ChartSpan> + Send + Sync>;
/// Whether a row (by its `data-row`) is linked to a selected span.
type LinksTo = Arc<dyn Fn(usize, ChartSpan) -> bool + Send + Sync>;

/// A table's rows linked both ways with the chart's groups (one group in a trace's view,
/// baseline and candidate in a comparison, one per file in the several-files view, engines
/// and requests in an inference profile): a row's click (or Enter, Space) selects its first
/// span ([`Pick`]), shows it and outlines all its spans; hovering a row outlines its spans
/// (leaving puts back what was outlined before); ↑/↓ move the focus between rows and the
/// focus stays on an activated row ([`row_key`], [`keep_focus`]); the rows linked to a
/// selected span are `linked`, the first built one brought into view. A row that stands for no
/// span is not presented as a link ([`LinkedRows::linked_attrs`]).
#[derive(Clone, Copy)]
pub struct LinkedRows {
    /// Each group's context and its rows' hover.
    groups: StoredValue<Vec<(TraceContext, HoverSpans)>>,
    /// The spans a row stands for.
    spans_of: StoredValue<SpansOf>,
    /// Whether a row is linked to a selected span.
    links_to: StoredValue<LinksTo>,
    /// Each group's selected span.
    selected: Memo<Vec<ChartSpan>>,
    /// How a row's activation selects.
    pick: Pick,
    /// The table's body.
    body: NodeRef<Tbody>,
}

impl LinkedRows {
    /// The rows of a table over `groups` whose row `r` (built with `data-row` `r`) stands
    /// for `spans_of(r)` and is linked to a selected span `s` when `links_to(r, s)`; brings
    /// the first built row linked to a newly selected span into view.
    pub fn new(
        groups: &[TraceContext],
        pick: Pick,
        spans_of: impl Fn(usize) -> Vec<ChartSpan> + Send + Sync + 'static,
        links_to: impl Fn(usize, ChartSpan) -> bool + Send + Sync + 'static,
    ) -> Self {
        Self::revealing(groups, pick, Reveal::FirstBuilt, spans_of, links_to)
    }

    /// The rows of a table over one trace's chart whose row `r` (`data-row`: its place) stands
    /// for the spans `spans_of(r)` (sorted) and is linked to a selected span `s` when
    /// `links_to(r, s)`, a table built again when its rows change (sorted, regrouped, of a
    /// range); `reveal`: how the row linked to a newly selected span is brought into view.
    pub fn of_trace_rows(
        ctx: &TraceContext,
        reveal: Reveal,
        spans_of: impl Fn(usize) -> Vec<u32> + Send + Sync + 'static,
        links_to: impl Fn(usize, u32) -> bool + Send + Sync + 'static,
    ) -> Self {
        Self::revealing(
            std::slice::from_ref(ctx),
            Pick::EachGroup,
            reveal,
            move |pos| {
                spans_of(pos)
                    .into_iter()
                    .map(|span| ChartSpan { group: 0, span })
                    .collect()
            },
            move |pos, s| s.group == 0 && links_to(pos, s.span),
        )
    }

    /// [`LinkedRows::new`], the linked row brought into view as `reveal` says.
    fn revealing(
        groups: &[TraceContext],
        pick: Pick,
        reveal: Reveal,
        spans_of: impl Fn(usize) -> Vec<ChartSpan> + Send + Sync + 'static,
        links_to: impl Fn(usize, ChartSpan) -> bool + Send + Sync + 'static,
    ) -> Self {
        let groups = StoredValue::new(
            groups
                .iter()
                .map(|c| (c.clone(), HoverSpans::new(c)))
                .collect::<Vec<_>>(),
        );
        let selected = Memo::new(move |_| {
            groups.with_value(|g| {
                g.iter()
                    .enumerate()
                    .filter_map(|(group, (c, _))| {
                        c.selected.get().map(|span| ChartSpan { group, span })
                    })
                    .collect()
            })
        });
        let links = LinkedRows {
            groups,
            spans_of: StoredValue::new(Arc::new(spans_of)),
            links_to: StoredValue::new(Arc::new(links_to)),
            selected,
            pick,
            body: NodeRef::new(),
        };
        let Some(scroll) = use_context::<PanelScroll>() else {
            return links;
        };
        Effect::new(move |_| {
            let selected = links.selected.get();
            if selected.is_empty() {
                return;
            }
            let linked = |pos: usize| links.links(pos, &selected);
            let at = match reveal {
                Reveal::FirstBuilt => links.first_built(linked).map(|i| (i, 0)),
                Reveal::ByPlace(count) => {
                    let n = count.get_untracked();
                    (0..n).find(|&pos| linked(pos)).map(|i| (i, n))
                }
                Reveal::Own => None,
            };
            if let Some((i, rows)) = at {
                reveal_row_in(scroll, links.body, i, rows);
            }
        });
        links
    }

    /// The rows of a table over `groups` (files side by side) whose row `r` stands for
    /// `per_group[g][r]` in group `g` (each list sorted).
    pub fn of_groups(groups: &[TraceContext], per_group: Vec<Vec<Vec<u32>>>) -> Self {
        let rows = Arc::new(GroupRows::new(per_group));
        let of = rows.clone();
        Self::new(
            groups,
            Pick::EachGroup,
            move |pos| rows.spans(pos),
            move |pos, s| of.holds(pos, s),
        )
    }

    /// The rows of a table over one trace's chart: row `r` stands for `spans[r]` (sorted).
    pub fn of_trace(ctx: &TraceContext, spans: Vec<Vec<u32>>) -> Self {
        Self::of_groups(std::slice::from_ref(ctx), vec![spans])
    }

    /// The table's body (its rows' events are taken there).
    pub fn body(&self) -> NodeRef<Tbody> {
        self.body
    }

    /// Whether row `pos` is linked to a span of `selected`.
    fn links(&self, pos: usize, selected: &[ChartSpan]) -> bool {
        self.links_to
            .with_value(|f| selected.iter().any(|&s| f(pos, s)))
    }

    /// Where the first row built in the body (in its order: a sorted table builds its rows
    /// in another order, a shortened one not all) whose `data-row` passes `keep` is.
    fn first_built(&self, keep: impl Fn(usize) -> bool) -> Option<usize> {
        let rows = self.body.get_untracked()?.rows();
        (0..rows.length()).find_map(|i| {
            let pos = rows.item(i)?.get_attribute("data-row")?.parse().ok()?;
            keep(pos).then_some(i as usize)
        })
    }

    /// Whether row `pos` is linked to a selected span (tracked: for the row's marks).
    pub fn linked(&self, pos: usize) -> bool {
        self.selected.with(|s| self.links(pos, s))
    }

    /// The `<tbody>`'s attributes (`<tbody {..links.body_attrs()}>`): its node, for the
    /// reveal and the focus, and the rows' events (click, keys, hover), taken on the body for
    /// every row. One set of handlers for every table, so the page's wasm holds them once.
    pub fn body_attrs(self) -> impl leptos::attr::Attribute {
        view! {
            <{..}
                node_ref=self.body
                on:click=move |ev| self.on_click(&ev)
                on:keydown=move |ev| self.on_key(&ev)
                on:mouseover=move |ev| self.on_over(&ev)
                on:mouseleave=move |_| self.leave()
            />
        }
    }

    /// Row `pos`'s link (`<tr … {..links.linked_attrs(pos)}>`): `tabindex` where it stands for
    /// a span (the page styles such rows as clickable, `tr[tabindex]`, and ↑/↓ step over the
    /// others; a row without one is plain: no focus, click or hover outline); class `linked`
    /// and `data-linked` while it is linked to a selected span.
    pub fn linked_attrs(self, pos: usize) -> impl leptos::attr::Attribute {
        let spans = self.has_spans(pos);
        view! {
            <{..}
                tabindex=spans.then_some("0")
                class:linked=move || self.linked(pos)
                data-linked=move || self.linked(pos).to_string()
            />
        }
    }

    /// Whether row `pos` stands for any span (a row without one takes no focus or click).
    fn has_spans(&self, pos: usize) -> bool {
        !self.spans_of(pos).is_empty()
    }

    /// The spans row `pos` stands for.
    fn spans_of(&self, pos: usize) -> Vec<ChartSpan> {
        self.spans_of.with_value(|f| f(pos))
    }

    /// `spans` by group (each in its order).
    fn per_group(&self, spans: &[ChartSpan]) -> Vec<Arc<Vec<u32>>> {
        let n = self.groups.with_value(Vec::len);
        by_group(spans, n).into_iter().map(Arc::new).collect()
    }

    /// Select, show and outline row `pos`'s spans; the focus stays on the row.
    pub fn activate(&self, pos: usize) {
        let spans = self.spans_of(pos);
        let Some(&first) = spans.first() else {
            return;
        };
        let per_group = self.per_group(&spans);
        self.groups.with_value(|groups| {
            for ((_, hover), s) in groups.iter().zip(&per_group) {
                hover.pin(s.clone());
            }
            match self.pick {
                Pick::EachGroup => {
                    let mut shown = None;
                    for ((ctx, _), s) in groups.iter().zip(&per_group) {
                        ctx.selected.set(s.first().copied());
                        if let Some(&first) = s.first() {
                            shown = Some((ctx, first));
                        }
                    }
                    if let Some((ctx, first)) = shown {
                        ctx.select_and_show(first);
                    }
                }
                Pick::First => {
                    let contexts: Vec<&TraceContext> = groups.iter().map(|(c, _)| c).collect();
                    select_only(&contexts, first);
                }
            }
        });
        keep_focus(self.body, pos);
    }

    /// The pointer is over row `pos`: outline its spans (over a row without any, what was
    /// outlined before the table).
    pub fn enter(&self, pos: usize) {
        if !self.has_spans(pos) {
            self.leave();
            return;
        }
        let per_group = self.per_group(&self.spans_of(pos));
        self.groups.with_value(|groups| {
            for ((_, hover), s) in groups.iter().zip(per_group) {
                hover.enter(s);
            }
        });
    }

    /// The pointer left the table: outline what was outlined before.
    pub fn leave(&self) {
        self.groups.with_value(|groups| {
            for (_, hover) in groups {
                hover.leave();
            }
        });
    }

    /// A click in the table's body (not on a field or a button in a row: those are theirs).
    pub fn on_click(&self, ev: &web_sys::Event) {
        let on_control = ev
            .target()
            .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
            .and_then(|el| el.closest("input, button, select, label, a").ok().flatten())
            .is_some();
        if let (false, Some(pos)) = (on_control, row_of(ev)) {
            self.activate(pos);
        }
    }

    /// A key in the table's body ([`row_key`]).
    pub fn on_key(&self, ev: &web_sys::KeyboardEvent) {
        row_key(ev, |pos| self.activate(pos));
    }

    /// The pointer moved over the table's body.
    pub fn on_over(&self, ev: &web_sys::Event) {
        if let Some(pos) = row_of(ev) {
            self.enter(pos);
        }
    }
}
