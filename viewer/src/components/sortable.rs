//! The sortable column header every sortable table uses (ops, span paths, gradients).

use leptos::prelude::*;

use crate::model::sort::{sort_arrow, SortState};

/// A column header whose button sorts the table: `aria-sort`, the arrow, and the click.
#[component]
pub fn SortHeader(
    /// Column label.
    label: &'static str,
    /// Its `aria-sort` now.
    #[prop(into)]
    aria: Signal<&'static str>,
    /// Called on a click.
    on_sort: Callback<()>,
    /// The button's `data-testid`, if any.
    testid: Option<String>,
    /// A numeric column (right-aligned).
    numeric: bool,
) -> impl IntoView {
    view! {
        <th scope="col" class:num=numeric aria-sort=move || aria.get()>
            <button type="button" class="sort" data-testid=testid on:click=move |_| on_sort.run(())>
                {label}
                {move || sort_arrow(aria.get())}
            </button>
        </th>
    }
}

/// The header of `column` of a table sorted by `sort`; a click on another column sorts by it
/// descending when `descending_first`.
pub fn sort_header<C: Copy + PartialEq + Send + Sync + 'static>(
    label: &'static str,
    column: C,
    sort: RwSignal<SortState<C>>,
    descending_first: bool,
    testid: Option<String>,
    numeric: bool,
) -> impl IntoView {
    view! {
        <SortHeader
            label=label
            aria=Signal::derive(move || sort.get().aria(column))
            on_sort=Callback::new(move |()| sort.update(|s| *s = s.clicked(column, descending_first)))
            testid=testid
            numeric=numeric
        />
    }
}
