//! Where a finding leads: a span selected and shown in the timeline, or a table row (its tab
//! opened first) scrolled to and outlined. The findings panel and the steps view (a link into
//! another step, followed once that step is shown) both go there.

use leptos::prelude::*;
use wasm_bindgen::JsCast;

use super::frame::next_frame;
use super::{PageState, TraceContext};
use crate::model::findings::FindingTarget;
use crate::model::panel::tab_of_row;

/// Frames a finding waits for the row it names once it opened the row's tab.
const TAB_FRAMES: usize = 30;

/// The attribute that outlines the row a finding leads to (`web/style.css`).
const TARGET_ATTR: &str = "data-finding-target";

/// Every element on the page matching a CSS selector.
fn all(selector: &str) -> Vec<web_sys::Element> {
    let Some(list) = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.query_selector_all(selector).ok())
    else {
        return Vec::new();
    };
    (0..list.length())
        .filter_map(|i| list.item(i))
        .filter_map(|n| n.dyn_into::<web_sys::Element>().ok())
        .collect()
}

/// Take the outline off the row a finding led to before.
fn clear_target() {
    for el in all(&format!("[{TARGET_ATTR}]")) {
        let _ = el.remove_attribute(TARGET_ATTR);
    }
}

/// The element a row target names (compared in Rust, so names from the file need no escaping).
fn find_row(testid: &str, attr: &Option<(&'static str, String)>) -> Option<web_sys::Element> {
    all("[data-testid]").into_iter().find(|el| {
        el.get_attribute("data-testid").as_deref() == Some(testid)
            && attr.as_ref().is_none_or(|(name, value)| {
                el.get_attribute(name).as_deref() == Some(value.as_str())
            })
    })
}

/// Go where a finding leads; `false` when that place is not on the page now.
fn follow(target: &FindingTarget, ctx: Option<&TraceContext>) -> bool {
    clear_target();
    match target {
        FindingTarget::Span { index } => {
            let Some(ctx) = ctx else { return false };
            if ctx.model.extent(*index).is_none() {
                return false;
            }
            ctx.select_and_show(*index);
            true
        }
        FindingTarget::Row { testid, attr } => match find_row(testid, attr) {
            Some(el) => {
                let _ = el.set_attribute(TARGET_ATTR, "");
                el.scroll_into_view();
                true
            }
            None => false,
        },
    }
}

/// Go where a finding leads: a row's tab opened first (a module's row expanded to), the row
/// looked for once the tab is drawn; `false` when that place is not on the page.
pub async fn go_to(
    target: FindingTarget,
    page: Option<PageState>,
    ctx: Option<TraceContext>,
) -> bool {
    let opened = match (&target, page) {
        (FindingTarget::Row { testid, attr }, Some(p)) => {
            if let Some(tab) = tab_of_row(testid) {
                p.tab.set(tab);
            }
            if testid == "module-row" {
                p.reveal.set(attr.as_ref().map(|(_, key)| key.clone()));
            }
            true
        }
        _ => false,
    };
    // A tab just opened builds its rows within a few frames.
    let tries = if opened { TAB_FRAMES } else { 1 };
    for _ in 0..tries {
        if opened {
            next_frame().await;
        }
        if follow(&target, ctx.as_ref()) {
            return true;
        }
    }
    false
}
