//! What the panel's tables share: the panel's scroll (long tables build only the rows in view,
//! [`crate::model::virtual_rows`]), hovering a row to outline its spans in the chart, and
//! bringing a row linked to the selected span into view.

use std::sync::Arc;

use leptos::html::Tbody;
use leptos::prelude::*;
use wasm_bindgen::JsCast;

use super::TraceContext;
use crate::model::virtual_rows::{row_window, scroll_to_row, RowWindow, WHOLE_ROWS};

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

/// Bring row `i` (of `rows`) of the table whose body is `body` into the panel's view.
pub fn reveal_row_in(scroll: PanelScroll, body: NodeRef<Tbody>, i: usize, rows: usize) {
    let Some((el, top)) = body_top(&scroll, body) else {
        return;
    };
    let view = f64::from(el.client_height());
    let now = f64::from(el.scroll_top());
    if rows > WHOLE_ROWS {
        let to = top + scroll_to_row(i, ROW_PX, now - top, view);
        el.set_scroll_top(to.round() as i32);
    } else if let Some(row) = body
        .get_untracked()
        .and_then(|b| b.rows().item(i as u32))
        .and_then(|r| r.dyn_into::<web_sys::HtmlElement>().ok())
    {
        let row_top =
            row.get_bounding_client_rect().top() - el.get_bounding_client_rect().top() + now;
        let h = row.get_bounding_client_rect().height();
        let to = if row_top < now {
            row_top
        } else if row_top + h > now + view {
            row_top + h - view
        } else {
            now
        };
        el.set_scroll_top(to.round() as i32);
    }
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

    /// The pointer entered a row standing for `spans`.
    pub fn enter(&self, spans: Arc<Vec<u32>>) {
        if self.before.with_value(Option::is_none) {
            self.before
                .set_value(Some(self.ctx_highlighted.get_untracked()));
        }
        self.ctx_highlighted.set(spans);
    }

    /// The pointer left the row.
    pub fn leave(&self) {
        if let Some(before) = self.before.try_get_value().flatten() {
            self.before.set_value(None);
            self.ctx_highlighted.set(before);
        }
    }

    /// A row was clicked: what it outlines now stays after the pointer leaves.
    pub fn pin(&self, spans: Arc<Vec<u32>>) {
        self.before.set_value(Some(spans.clone()));
        self.ctx_highlighted.set(spans);
    }
}
