//! The chart's state in the URL fragment: its window, selection, range, tab and step, written once
//! they have not changed for [`FRAGMENT_DELAY`] (during a zoom or a drag: one pending timer, no
//! write, no state built), replacing the entry without a history step.

use std::sync::Arc;
use std::time::Duration;

use leptos::prelude::*;
use wasm_bindgen::JsValue;

use crate::components::PageState;
use crate::timeline::fragment::ChartState;
use crate::timeline::viewport::Viewport;

use super::ChartGroup;

/// The URL fragment is written once window and selection have not changed for this long.
const FRAGMENT_DELAY: Duration = Duration::from_millis(250);

/// Keep the chart's state in the URL fragment (see the [module](self)) from now on.
pub(super) fn keep_in_url(
    groups: Arc<Vec<ChartGroup>>,
    files: String,
    page: PageState,
    view_sig: RwSignal<Viewport>,
) {
    let changed_ms: StoredValue<f64> = StoredValue::new(0.0);
    let timer = StoredValue::new(false);
    let tracked = groups.clone();
    // `None` once the chart is gone (another file opened).
    let state: Arc<dyn Fn() -> Option<ChartState>> = Arc::new(move || {
        let v = view_sig.try_get_untracked()?;
        let selected: Vec<(usize, String)> = groups
            .iter()
            .enumerate()
            .filter_map(|(g, x)| {
                let i = x.ctx.selected.try_get_untracked().flatten()?;
                Some((g, x.ctx.model.doc.spans.get(i as usize)?.id.to_string()))
            })
            .collect();
        Some(ChartState {
            files: files.clone(),
            step: page.step.try_get_value().flatten(),
            view: Some((
                v.start_ns.max(0.0).round() as u64,
                v.end_ns().max(0.0).round() as u64,
            )),
            selected,
            range: page.range.try_get_untracked().flatten(),
            tab: page.tab.try_get_untracked().map(|t| t.id().to_string()),
        })
    });
    Effect::new(move |_| {
        view_sig.track();
        page.range.track();
        page.tab.track();
        for x in tracked.iter() {
            x.ctx.selected.track();
        }
        changed_ms.set_value(js_sys::Date::now());
        if !timer.get_value() {
            timer.set_value(true);
            write_when_still(changed_ms, timer, state.clone(), FRAGMENT_DELAY);
        }
    });
}

/// After `delay`, write the chart's state if it has not changed since, else wait for the rest
/// of [`FRAGMENT_DELAY`]. Nothing is written once the chart is gone (another file opened).
fn write_when_still(
    changed_ms: StoredValue<f64>,
    timer: StoredValue<bool>,
    state: Arc<dyn Fn() -> Option<ChartState>>,
    delay: Duration,
) {
    set_timeout(
        move || {
            let Some(changed) = changed_ms.try_get_value() else {
                return;
            };
            let quiet_ms = js_sys::Date::now() - changed;
            let wanted_ms = FRAGMENT_DELAY.as_secs_f64() * 1000.0;
            if quiet_ms + 1.0 < wanted_ms {
                let rest = Duration::from_secs_f64(((wanted_ms - quiet_ms) / 1000.0).max(0.001));
                write_when_still(changed_ms, timer, state, rest);
            } else {
                let _ = timer.try_set_value(false);
                if let Some(state) = state() {
                    write_fragment(&state.to_fragment());
                }
            }
        },
        delay,
    );
}

/// Replace the URL fragment without a history entry or a scroll.
fn write_fragment(fragment: &str) {
    if let Some(history) = web_sys::window().and_then(|w| w.history().ok()) {
        let _ = history.replace_state_with_url(&JsValue::NULL, "", Some(fragment));
    }
}
