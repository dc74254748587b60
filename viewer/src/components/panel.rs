//! The panel under the chart: a splitter that resizes it (remembered in `localStorage`), the
//! tab list (ARIA tabs: ←/→ move the focus, Enter or Space open), the range bar while a range
//! is selected, the open tab's content (built when the tab opens) and, beside it, the
//! selected span's details. The tab list, the keys and the height are [`crate::model::panel`].

use leptos::prelude::*;
use wasm_bindgen::JsCast;

use super::frame::next_frame;
use super::rows::PanelScroll;
use super::{LoadSeq, PageState};
use crate::model::panel::{
    dragged_px, keyed_px, panel_px, parse_stored, tab_key, Tab, TabKey, STORAGE_KEY,
};
use crate::model::range::range_text;

/// The window's inner height, CSS pixels.
fn window_px() -> f64 {
    web_sys::window()
        .and_then(|w| w.inner_height().ok())
        .and_then(|h| h.as_f64())
        .unwrap_or(900.0)
}

fn storage() -> Option<web_sys::Storage> {
    web_sys::window().and_then(|w| w.local_storage().ok().flatten())
}

/// The remembered height, if any (a page that may not store anything has none).
fn stored_px() -> Option<f64> {
    parse_stored(
        storage()
            .and_then(|s| s.get_item(STORAGE_KEY).ok().flatten())
            .as_deref(),
    )
}

fn store_px(px: f64) {
    if let Some(s) = storage() {
        let _ = s.set_item(STORAGE_KEY, &format!("{px:.0}"));
    }
}

/// The tab panel of a view: `content` builds a tab's content when it opens (after the chart's
/// first frame for the tab open at the start); `details`, when given, sits beside it. Once the
/// first tab's content is built the view counts as loaded (`<main data-load-seq>`).
#[component]
pub fn TabPanel(
    /// The view's state (its kind's tabs, the open tab, the range).
    page: PageState,
    /// A tab's content.
    content: Callback<Tab, AnyView>,
    /// The selected span's details, beside the tab's content.
    #[prop(optional)]
    details: Option<ViewFn>,
) -> impl IntoView {
    let tabs = page.tabs;
    let height = RwSignal::new(panel_px(stored_px(), window_px()));
    let resize = window_event_listener(leptos::ev::resize, move |_| {
        height.set(panel_px(Some(height.get_untracked()), window_px()));
    });
    on_cleanup(move || resize.remove());
    // The tab the keyboard is on (it opens with Enter or Space).
    let focused = RwSignal::new(
        tabs.iter()
            .position(|t| *t == page.tab.get_untracked())
            .unwrap_or(0),
    );
    Effect::new(move |_| {
        let open = page.tab.get();
        if let Some(i) = tabs.iter().position(|t| *t == open) {
            focused.set(i);
        }
    });
    let tab_refs: Vec<NodeRef<leptos::html::Button>> =
        tabs.iter().map(|_| NodeRef::new()).collect();
    let refs = tab_refs.clone();
    let on_key = move |ev: web_sys::KeyboardEvent| {
        let Some(k) = tab_key(&ev.key(), focused.get_untracked(), tabs.len()) else {
            return;
        };
        // The tab list's keys are its own: never the chart's too.
        ev.prevent_default();
        ev.stop_propagation();
        match k {
            TabKey::Focus(i) => {
                focused.set(i);
                if let Some(b) = refs.get(i).and_then(|r| r.get_untracked()) {
                    let _ = b.focus();
                }
            }
            TabKey::Activate => {
                if let Some(t) = tabs.get(focused.get_untracked()) {
                    page.tab.set(*t);
                }
            }
        }
    };
    // Long tables window themselves against the tab content's scroll.
    let content_ref = NodeRef::<leptos::html::Div>::new();
    let scroll = PanelScroll {
        top: RwSignal::new(0.0),
        height: Signal::derive(move || height.get()),
        el: content_ref,
        kept: StoredValue::new(None),
    };
    provide_context(scroll);
    // Another tab starts at its top. Not on the effect's first run: the content has just been
    // built at its top, and setting `scrollTop` then would lay the page out in the middle of
    // building it (10 ms of a cold open's first frame, in a profile).
    Effect::new(move |ran: Option<()>| {
        page.tab.track();
        if ran.is_some() {
            if let Some(el) = content_ref.get_untracked() {
                el.set_scroll_top(0);
            }
            scroll.top.set(0.0);
        }
    });
    // The first tab's content waits for the chart's first frame.
    let ready = RwSignal::new(false);
    let load_seq = use_context::<LoadSeq>();
    leptos::task::spawn_local(async move {
        next_frame().await;
        crate::load::yield_now().await;
        if ready.try_set(true).is_some() {
            return;
        }
        // The tab's view is built in a microtask after the signal is set.
        crate::load::yield_now().await;
        if let Some(LoadSeq(seq)) = load_seq {
            seq.try_update(|n| *n += 1);
        }
    });
    // Dragging the splitter.
    let drag: StoredValue<Option<(f64, f64)>> = StoredValue::new(None);
    let on_splitter_down = move |ev: web_sys::PointerEvent| {
        ev.prevent_default();
        drag.set_value(Some((f64::from(ev.client_y()), height.get_untracked())));
        if let Some(el) = ev
            .target()
            .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
        {
            let _ = el.set_pointer_capture(ev.pointer_id());
        }
    };
    let on_splitter_move = move |ev: web_sys::PointerEvent| {
        if let Some((press_y, start)) = drag.get_value() {
            height.set(dragged_px(
                start,
                press_y,
                f64::from(ev.client_y()),
                window_px(),
            ));
        }
    };
    let on_splitter_up = move |_| {
        if drag.get_value().is_some() {
            drag.set_value(None);
            store_px(height.get_untracked());
        }
    };
    let on_splitter_key = move |ev: web_sys::KeyboardEvent| {
        if let Some(px) = keyed_px(&ev.key(), height.get_untracked(), 24.0, window_px()) {
            ev.prevent_default();
            ev.stop_propagation();
            height.set(px);
            store_px(px);
        }
    };
    let tab_buttons = tabs
        .iter()
        .zip(tab_refs)
        .enumerate()
        .map(|(i, (&t, r))| {
            view! {
                <button
                    type="button"
                    role="tab"
                    node_ref=r
                    id=format!("tab-{}", t.id())
                    class="tab"
                    data-testid=format!("tab-{}", t.id())
                    data-tab=t.id()
                    aria-controls=format!("tabpanel-{}", t.id())
                    aria-selected=move || (page.tab.get() == t).to_string()
                    tabindex=move || if focused.get() == i { "0" } else { "-1" }
                    on:click=move |_| {
                        focused.set(i);
                        page.tab.set(t);
                    }
                >
                    {t.label()}
                </button>
            }
        })
        .collect_view();
    let range_bar = move || {
        // What became of the range when another step was shown (clipped, or cleared).
        let carried = page.carried_range_note().map(|text| {
            view! { <span class="range-carried" data-testid="range-carried">{text}</span> }
        });
        match page.time_range() {
            Some(r) => {
                let tab = page.tab.get();
                let follows = page.kind.follows_range(tab);
                view! {
                    <div class="range-bar" data-testid="range-bar" data-start-ns=r.start_ns.to_string()
                        data-end-ns=r.end_ns.to_string() role="status">
                        <span>{range_text(r)}</span>
                        {carried}
                        <span class="muted" data-testid="range-note" data-follows=follows.to_string()>
                            {page.kind.range_note(tab)}
                        </span>
                        <button type="button" data-testid="range-clear" on:click=move |_| page.range.set(None)>
                            "Clear range"
                        </button>
                    </div>
                }
                .into_any()
            }
            None => carried
                .map(|c| view! { <div class="range-bar" role="status">{c}</div> })
                .into_any(),
        }
    };
    view! {
        <div
            class="splitter"
            role="separator"
            aria-orientation="horizontal"
            aria-label="resize the panel (↑ taller, ↓ lower)"
            aria-valuenow=move || format!("{:.0}", height.get())
            tabindex="0"
            data-testid="panel-splitter"
            on:pointerdown=on_splitter_down
            on:pointermove=on_splitter_move
            on:pointerup=on_splitter_up
            on:keydown=on_splitter_key
        ></div>
        <section
            class="tab-panel"
            data-testid="tab-panel"
            data-height=move || format!("{:.0}", height.get())
            style:height=move || format!("{:.0}px", height.get())
        >
            <div class="tab-bar">
                <div role="tablist" aria-label="panels" class="tablist" data-testid="tablist" on:keydown=on_key>
                    {tab_buttons}
                </div>
                {range_bar}
            </div>
            <div class="panel-body">
                <div
                    class="tab-content"
                    node_ref=content_ref
                    on:scroll=move |_| {
                        if let Some(el) = content_ref.get_untracked() {
                            scroll.top.set(f64::from(el.scroll_top()));
                        }
                    }
                    role="tabpanel"
                    tabindex="0"
                    id=move || format!("tabpanel-{}", page.tab.get().id())
                    aria-labelledby=move || format!("tab-{}", page.tab.get().id())
                    data-testid="tabpanel"
                    data-tab=move || page.tab.get().id()
                >
                    {move || ready.get().then(|| content.run(page.tab.get()))}
                </div>
                {details.map(|d| view! { <aside class="panel-details" aria-label="selected span">{d.run()}</aside> })}
            </div>
        </section>
    }
}
