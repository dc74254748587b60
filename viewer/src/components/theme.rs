//! The theme toggle: follow the system (`prefers-color-scheme`), or force light or dark.

use leptos::prelude::*;

use crate::timeline::palette::Theme;

/// The user's choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThemeChoice {
    /// Follow `prefers-color-scheme`.
    System,
    /// Always light.
    Light,
    /// Always dark.
    Dark,
}

impl ThemeChoice {
    fn next(self) -> Self {
        match self {
            ThemeChoice::System => ThemeChoice::Light,
            ThemeChoice::Light => ThemeChoice::Dark,
            ThemeChoice::Dark => ThemeChoice::System,
        }
    }

    fn label(self) -> &'static str {
        match self {
            ThemeChoice::System => "theme: system",
            ThemeChoice::Light => "theme: light",
            ThemeChoice::Dark => "theme: dark",
        }
    }
}

/// Whether the system prefers a dark scheme.
fn system_prefers_dark() -> bool {
    web_sys::window()
        .and_then(|w| w.match_media("(prefers-color-scheme: dark)").ok().flatten())
        .is_some_and(|m| m.matches())
}

/// The resolved theme signal plus the choice signal; sets `data-theme` on `<html>`.
pub fn theme_signals() -> (RwSignal<ThemeChoice>, Signal<Theme>) {
    let choice = RwSignal::new(ThemeChoice::System);
    let system_dark = RwSignal::new(system_prefers_dark());
    // Follow the system when it switches while the page is open.
    if let Some(query) =
        web_sys::window().and_then(|w| w.match_media("(prefers-color-scheme: dark)").ok().flatten())
    {
        let on_change = wasm_bindgen::closure::Closure::<dyn Fn()>::new(move || {
            system_dark.set(system_prefers_dark())
        });
        query.set_onchange(Some(wasm_bindgen::JsCast::unchecked_ref(
            on_change.as_ref(),
        )));
        // The page lives as long as the listener: leak it on purpose.
        on_change.forget();
    }
    let resolved = Signal::derive(move || match choice.get() {
        ThemeChoice::Light => Theme::Light,
        ThemeChoice::Dark => Theme::Dark,
        ThemeChoice::System => {
            if system_dark.get() {
                Theme::Dark
            } else {
                Theme::Light
            }
        }
    });
    Effect::new(move |_| {
        let value = match choice.get() {
            ThemeChoice::System => None,
            ThemeChoice::Light => Some("light"),
            ThemeChoice::Dark => Some("dark"),
        };
        if let Some(root) = web_sys::window()
            .and_then(|w| w.document())
            .and_then(|d| d.document_element())
        {
            let _ = match value {
                Some(v) => root.set_attribute("data-theme", v),
                None => root.remove_attribute("data-theme"),
            };
        }
    });
    (choice, resolved)
}

/// A button cycling system → light → dark.
#[component]
pub fn ThemeToggle(
    /// The choice to cycle.
    choice: RwSignal<ThemeChoice>,
) -> impl IntoView {
    view! {
        <button
            type="button"
            data-testid="theme-toggle"
            title="Switch between the system, light and dark themes"
            on:click=move |_| choice.update(|c| *c = c.next())
        >
            {move || choice.get().label()}
        </button>
    }
}
