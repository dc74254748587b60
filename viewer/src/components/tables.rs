//! The op table and the top-spans table; clicking a row highlights its spans in the timeline.

use std::sync::Arc;

use leptos::prelude::*;

use candle_trace_schema::analysis::ops::OpGrouping;
use candle_trace_schema::analysis::units::format_ns;

use super::capture::NotCapturedNote;
use super::rows::{
    keep_focus, reveal_row_in, row_key, row_of, row_window_of, spacer, HoverSpans, LinkedRows,
    PanelScroll, Reveal,
};
use super::sortable::sort_header;
use super::{PageState, TabStates, TraceContext};
use crate::model::modules::{rows_shown_text, SHOWN_ROWS};
use crate::model::ops::{op_rows, op_rows_in, rate_text, sort_op_rows, OpColumn};
use crate::model::spans::{span_rows, SpanOrder};
use crate::model::virtual_rows::WHOLE_ROWS;
use crate::timeline::palette::{kind_name, pass_name};

/// The "The 50 … with the most time, of N. [Show all]" line under a long table (the heaviest
/// rows first, the rest on request); absent while the table has no more rows than it shows.
#[component]
pub fn ShowAllRows(
    /// Prefix of the test ids: `<testid>-shown` (the sentence) and `<testid>-all` (the button).
    testid: &'static str,
    /// What the rows are (`module paths`).
    #[prop(into)]
    noun: Signal<&'static str>,
    /// Rows in all.
    #[prop(into)]
    total: Signal<usize>,
    /// Whether every row is shown.
    show_all: RwSignal<bool>,
) -> impl IntoView {
    move || {
        (total.get() > SHOWN_ROWS).then(|| {
            view! {
                <p class="muted" data-testid=format!("{testid}-shown")>
                    {move || rows_shown_text(noun.get(), SHOWN_ROWS, total.get(), show_all.get())}
                    <button type="button" data-testid=format!("{testid}-all")
                        on:click=move |_| show_all.update(|all| *all = !*all)>
                        {move || if show_all.get() { "Show fewer" } else { "Show all" }}
                    </button>
                </p>
            }
        })
    }
}

/// Ops grouped by name or by (name, shape, dtype), sortable by every column; while a range is
/// selected on the chart, the ops inside it. Rows are [`LinkedRows`]: a row's click selects
/// and shows the first span its ops ran in and outlines them all; hovering a row outlines its
/// spans; the rows of the selected span's ops are marked (`data-linked`) and brought into
/// view; a group whose ops ran in no span is no link.
#[component]
pub fn OpTable() -> impl IntoView {
    let Some(ctx) = use_context::<TraceContext>() else {
        return ().into_any();
    };
    let page = use_context::<PageState>();
    let states = use_context::<TabStates>().unwrap_or_else(TabStates::new);
    let (by_shape, sort) = (states.ops_by_shape, states.ops_sort);
    let rows = {
        let model = ctx.model.clone();
        Memo::new(move |_| {
            let grouping = if by_shape.get() {
                OpGrouping::NameShapeDtype
            } else {
                OpGrouping::Name
            };
            let mut rows = match page.and_then(|p| p.time_range()) {
                Some(r) => op_rows_in(&model.doc, model.op_index(), model.op_spans(), grouping, r),
                None => op_rows(&model.doc, model.op_spans(), grouping),
            };
            let s = sort.get();
            sort_op_rows(&mut rows, s.column, s.descending);
            Arc::new(rows)
        })
    };
    let count = Signal::derive(move || rows.with(|r| r.len()));
    let links = LinkedRows::of_trace_rows(
        &ctx,
        Reveal::ByPlace(count),
        move |pos| rows.with_untracked(|r| r.get(pos).map(|r| r.spans.clone()).unwrap_or_default()),
        move |pos, s| {
            rows.with_untracked(|r| {
                r.get(pos)
                    .is_some_and(|r| r.spans.binary_search(&s).is_ok())
            })
        },
    );
    let body = links.body();
    let window = row_window_of(body, count);
    let columns = move || if by_shape.get() { 9 } else { 7 };
    let not_captured = ctx.model.capture.not_captured.ops.clone();
    view! {
        <section class="op-table" data-testid="op-table" data-rows=move || count.get().to_string()>
            <div class="table-bar">
                <h3>"Ops"</h3>
                <label>
                    <input
                        type="checkbox"
                        data-testid="group-by-shape"
                        prop:checked=move || by_shape.get()
                        on:change=move |ev| by_shape.set(event_target_checked(&ev))
                    />
                    " group by shape and dtype"
                </label>
            </div>
            {move || (count.get() == 0).then(|| {
                if page.is_some_and(|p| p.range.get().is_some()) {
                    view! { <p class="muted" data-testid="op-table-empty">"No op ran inside the range."</p> }.into_any()
                } else if let Some(text) = not_captured.clone() {
                    // A source that was off: "not captured", not an empty table.
                    view! { <NotCapturedNote what="ops" text=text /> }.into_any()
                } else {
                    view! { <p class="muted" data-testid="op-table-empty">"No ops."</p> }.into_any()
                }
            })}
            <table class:virtual={move || count.get() > WHOLE_ROWS}>
                <thead>
                    <tr>
                        {sort_header("op", OpColumn::Name, sort, false, None, false)}
                        {move || by_shape.get().then(|| view! { <th scope="col">"shape"</th><th scope="col">"dtype"</th> })}
                        {[
                            ("count", OpColumn::Count),
                            ("total", OpColumn::Total),
                            ("mean", OpColumn::Mean),
                            ("max", OpColumn::Max),
                            ("output", OpColumn::OutputBytes),
                            ("bytes/ns", OpColumn::BytesPerNs),
                        ]
                            .into_iter()
                            .map(|(label, column)| sort_header(label, column, sort, true, None, true))
                            .collect_view()}
                    </tr>
                </thead>
                <tbody {..links.body_attrs()}>
                    {move || {
                        let rows = rows.get();
                        let shape_cols = by_shape.get();
                        let w = window.get();
                        let long = rows.len() > WHOLE_ROWS;
                        let built = rows
                            .iter()
                            .enumerate()
                            .skip(w.first)
                            .take(w.end - w.first)
                            .map(|(pos, r)| {
                                view! {
                                    <tr
                                        class:vrow=long
                                        data-row=pos.to_string()
                                        data-testid="op-row"
                                        data-op=r.op_name.clone()
                                        data-count=r.count.to_string()
                                        data-total=r.total_ns.to_string()
                                        {..links.linked_attrs(pos)}
                                    >
                                        <td>{r.op_name.clone()}</td>
                                        {shape_cols.then(|| view! {
                                            <td>{r.shape.clone().unwrap_or_default()}</td>
                                            <td>{r.dtype.clone().unwrap_or_default()}</td>
                                        })}
                                        <td class="num">{r.count}</td>
                                        <td class="num">{format_ns(r.total_ns)}</td>
                                        <td class="num">{format_ns(r.mean_ns)}</td>
                                        <td class="num">{format_ns(r.max_ns)}</td>
                                        <td class="num">{r.output_text.clone()}</td>
                                        <td class="num">{rate_text(r.bytes_per_ns)}</td>
                                    </tr>
                                }
                            })
                            .collect_view();
                        view! {
                            {spacer(w.before_px, columns())}
                            {built}
                            {spacer(w.after_px, columns())}
                        }
                    }}
                </tbody>
            </table>
        </section>
    }
    .into_any()
}

/// The top spans by self time or by duration; a click selects and shows the span, hovering
/// outlines it, and the selected span's row is marked. Not shown while a range is selected
/// (its numbers are the whole run's).
#[component]
pub fn SpanTable() -> impl IntoView {
    let Some(ctx) = use_context::<TraceContext>() else {
        return ().into_any();
    };
    let page = use_context::<PageState>();
    let by_self = RwSignal::new(true);
    let hover = HoverSpans::new(&ctx);
    let rows = {
        let model = ctx.model.clone();
        Memo::new(move |_| {
            let order = if by_self.get() {
                SpanOrder::SelfTime
            } else {
                SpanOrder::Total
            };
            Arc::new(span_rows(&model.doc, model.module_paths(), order, 50))
        })
    };
    // A trace whose capture named its modules says which module each span ran in.
    let named = ctx.model.module_paths().names();
    let body = NodeRef::<leptos::html::Tbody>::new();
    let selected = ctx.selected;
    let scroll = use_context::<PanelScroll>();
    Effect::new(move |_| {
        let Some(s) = selected.get() else { return };
        let at = rows.with_untracked(|r| r.iter().position(|r| r.index == s));
        if let (Some(i), Some(scroll)) = (at, scroll) {
            reveal_row_in(scroll, body, i, 0);
        }
    });
    // A row's click (or Enter, Space): select and show its span, and outline it.
    let activate = Callback::new(move |pos: usize| {
        if let Some(i) = rows.with_untracked(|r| r.get(pos).map(|r| r.index)) {
            hover.pin(Arc::new(vec![i]));
            ctx.select_and_show(i);
            // The rows are built again with their marks: the focus stays on this one.
            keep_focus(body, pos);
        }
    });
    let table = move || {
        view! {
        <section class="span-table" data-testid="span-table">
            <div class="table-bar">
                <h3>"Top spans"</h3>
                <div role="group" aria-label="order">
                    <button type="button" aria-pressed=move || by_self.get().to_string() on:click=move |_| by_self.set(true)>"by self time"</button>
                    <button type="button" aria-pressed=move || (!by_self.get()).to_string() on:click=move |_| by_self.set(false)>"by total time"</button>
                </div>
            </div>
            <table>
                <thead>
                    <tr>
                        <th scope="col">"span"</th>
                        {named.then(|| view! { <th scope="col">"module"</th> })}
                        <th scope="col">"kind"</th>
                        <th scope="col">"step"</th>
                        <th scope="col">"self"</th>
                        <th scope="col">"total"</th>
                    </tr>
                </thead>
                <tbody
                    node_ref=body
                    on:click=move |ev| {
                        if let Some(pos) = row_of(&ev) {
                            activate.run(pos);
                        }
                    }
                    on:keydown=move |ev: web_sys::KeyboardEvent| {
                        row_key(&ev, |pos| activate.run(pos));
                    }
                    on:mouseover=move |ev| {
                        if let Some(i) = row_of(&ev).and_then(|pos| rows.with_untracked(|r| r.get(pos).map(|r| r.index))) {
                            hover.enter(Arc::new(vec![i]));
                        }
                    }
                    on:mouseleave=move |_| hover.leave()
                >
                    {move || {
                        let sel = selected.get();
                        rows.get()
                            .iter()
                            .enumerate()
                            .map(|(pos, r)| {
                                let linked = sel == Some(r.index);
                                view! {
                                    <tr
                                        tabindex="0"
                                        data-testid="span-row"
                                        data-row=pos.to_string()
                                        data-span=r.index.to_string()
                                        class:active=linked
                                        data-linked=linked.to_string()
                                    >
                                        <td title=r.path.clone()>{r.name.clone()}</td>
                                        {named.then(|| view! { <td>{r.module.clone().unwrap_or_else(|| "–".into())}</td> })}
                                        <td>{kind_name(r.kind)}</td>
                                        <td>{pass_name(r.pass)}</td>
                                        <td class="num">{format_ns(r.self_ns)}</td>
                                        <td class="num">{format_ns(r.duration_ns)}</td>
                                    </tr>
                                }
                            })
                            .collect_view()
                    }}
                </tbody>
            </table>
        </section>
        }
    };
    (move || page.is_none_or(|p| p.range.get().is_none()).then(table)).into_any()
}
