//! Leptos components: they read signals and render what `model` and `timeline` computed.

pub mod app;
