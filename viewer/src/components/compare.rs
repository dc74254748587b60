//! Comparing two traces: the "Compare…" picker (a baseline and a candidate, by file input or
//! by drop on either target) and the view of [`CompareModel`]: the refusal with "compare
//! anyway", summary deltas, the sortable path table, op deltas, memory by category, gradient
//! changes and both sides' lane groups in one flame chart coloured by change (a path row
//! selects its span on both sides).

use candle_trace_schema::analysis::spans::span_path;
use std::sync::Arc;

use leptos::prelude::*;
use wasm_bindgen::JsCast;

use candle_trace_schema::analysis::compare::{Presence, TraceComparison};
use candle_trace_schema::analysis::units::{format_bytes, format_ns};

use super::header::{close_on_escape, HEADER_POPOVERS};
use super::panel::TabPanel;
use super::rows::{keep_focus, row_key, row_of, LinkedRows};
use super::sortable::sort_header;
use super::timeline::{ChartDetails, ChartGroup, Colours, FlameChart};
use super::{PageState, TraceContext};
use crate::model::compare::{
    change_fill, path_order, percent_text, signed_bytes, signed_ns, Change, CompareModel, PathSort,
    SummaryRow,
};
use crate::model::links::{op_group_spans, parameter_spans, path_spans, peak_spans};
use crate::model::panel::{Tab, ViewKind};
use crate::model::sort::SortState;
use crate::timeline::palette::Theme;

/// Where the two sides are aligned, a dropdown of the chart's toolbar (one of the header's, so at
/// most one is open and Escape closes it): the summary names the choice in a word, the body
/// offers both (`data-testid="compare-align"`, radios `start` and `path`).
#[component]
fn AlignChoice(
    /// Whether the sides are aligned at the picked path's first span (else at the starts).
    by_path: RwSignal<bool>,
) -> impl IntoView {
    let choice = move |value: &'static str, words: &'static str| {
        let path = value == "path";
        view! {
            <label>
                <input type="radio" name="compare-align" value=value
                    prop:checked=move || by_path.get() == path
                    on:change=move |_| by_path.set(path) />
                {words}
            </label>
        }
    };
    view! {
        <details class="align-choice dropdown" name=HEADER_POPOVERS data-testid="compare-align-menu"
            on:keydown=move |ev| close_on_escape(&ev)>
            <summary title="where the two sides are aligned">
                {move || if by_path.get() { "align: path" } else { "align: starts" }}
            </summary>
            <div class="dropdown-body" role="radiogroup" aria-labelledby="compare-align-words"
                data-testid="compare-align">
                <p id="compare-align-words">"Align the sides at"</p>
                {choice("start", "the measured-region starts")}
                {choice("path", "the selected path's first span")}
            </div>
        </details>
    }
}

/// The first file of an input's or a drop's file list.
fn first_file(files: Option<web_sys::FileList>) -> Option<web_sys::File> {
    files.and_then(|f| f.get(0))
}

/// One side of the picker: a file input and a drop target.
#[component]
fn CompareSlot(
    /// `base` or `cand`.
    side: &'static str,
    /// The label shown.
    label: &'static str,
    /// The chosen file.
    chosen: RwSignal<Option<web_sys::File>, LocalStorage>,
) -> impl IntoView {
    let input_id = format!("compare-{side}-input");
    let on_pick = move |ev: leptos::ev::Event| {
        let Some(input) = ev
            .target()
            .and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok())
        else {
            return;
        };
        if let Some(f) = first_file(input.files()) {
            chosen.set(Some(f));
        }
        input.set_value("");
    };
    let hovering = RwSignal::new(false);
    view! {
        <div
            class="compare-slot"
            class:active=move || hovering.get()
            data-testid=format!("compare-{side}-drop")
            on:dragover=move |ev: web_sys::DragEvent| {
                ev.prevent_default();
                hovering.set(true);
            }
            on:dragleave=move |_| hovering.set(false)
            on:drop=move |ev: web_sys::DragEvent| {
                // The page-wide drop handler skips a drop whose default was prevented here.
                ev.prevent_default();
                hovering.set(false);
                if let Some(f) = first_file(ev.data_transfer().and_then(|dt| dt.files())) {
                    chosen.set(Some(f));
                }
            }
        >
            <label class="button" for=input_id.clone()>{label}</label>
            <input
                id=input_id
                class="visually-hidden"
                type="file"
                accept=".jsonl,.json,application/json,text/plain"
                data-testid=format!("compare-{side}-input")
                on:change=on_pick
            />
            <span class="compare-chosen" data-testid=format!("compare-{side}-name")>
                {move || chosen.get().map_or_else(|| "or drop a file here".to_string(), |f| f.name())}
            </span>
        </div>
    }
}

/// The "Compare…" button and its panel: once both files are chosen, `on_open(base, cand)`.
#[component]
pub fn ComparePicker(
    /// Called with (baseline, candidate) once both are chosen.
    on_open: Callback<(web_sys::File, web_sys::File)>,
) -> impl IntoView {
    let shown = RwSignal::new(false);
    let base: RwSignal<Option<web_sys::File>, LocalStorage> = RwSignal::new_local(None);
    let cand: RwSignal<Option<web_sys::File>, LocalStorage> = RwSignal::new_local(None);
    Effect::new(move |_| {
        if let (Some(b), Some(c)) = (base.get(), cand.get()) {
            base.set(None);
            cand.set(None);
            shown.set(false);
            on_open.run((b, c));
        }
    });
    view! {
        <button
            type="button"
            data-testid="compare-open"
            aria-expanded=move || shown.get().to_string()
            on:click=move |_| shown.update(|s| *s = !*s)
        >
            "Compare…"
        </button>
        <div class="compare-picker" data-testid="compare-picker" hidden=move || !shown.get()>
            <p>"Compare a candidate trace against a baseline (both files stay in this browser)."</p>
            <CompareSlot side="base" label="Baseline…" chosen=base />
            <CompareSlot side="cand" label="Candidate…" chosen=cand />
        </div>
    }
}

fn percent_attr(p: Option<f64>) -> String {
    p.map_or_else(String::new, |v| format!("{v}"))
}

/// The eight summary numbers, baseline → candidate ([`CompareModel::summary_rows`]).
#[component]
fn SummaryDeltas(
    /// The comparison.
    c: Arc<TraceComparison>,
    /// Each row, worded.
    rows: Vec<SummaryRow>,
) -> impl IntoView {
    view! {
        <section class="compare-summary">
            <h3>"Summary"</h3>
            <table>
                <thead><tr><th scope="col">"number"</th><th scope="col" class="num">"baseline"</th><th scope="col" class="num">"candidate"</th><th scope="col" class="num">"change"</th><th scope="col" class="num">"%"</th></tr></thead>
                <tbody>
                    {c.summary.iter().zip(rows).map(|(s, r)| view! {
                        <tr
                            data-testid=format!("delta-{}", s.field)
                            data-value=s.delta.to_string()
                            data-base=s.base.to_string()
                            data-cand=s.cand.to_string()
                            data-percent=percent_attr(s.percent)
                            data-captured=r.captured.to_string()
                        >
                            <th scope="row" title=s.field>{r.label}</th>
                            <td class="num">{r.base}</td>
                            <td class="num">{r.cand}</td>
                            <td class="num">{r.change}</td>
                            <td class="num">{r.percent}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </section>
    }
}

/// Span name paths with their delta, sortable by every column; a row picks its path, hovering
/// it outlines its spans on both sides, and the selected spans' rows are marked.
#[component]
fn PathDeltas(
    /// The comparison.
    c: Arc<TraceComparison>,
    /// The chart's groups: baseline, candidate.
    sides: Vec<TraceContext>,
    /// Called with a row's path when it is clicked (or Enter/Space on it).
    on_pick: Callback<String>,
    /// The path picked last (its row is marked).
    picked: Signal<Option<String>>,
) -> impl IntoView {
    let sort = RwSignal::new(SortState::new(PathSort::AbsDelta, true));
    let order = {
        let c = c.clone();
        Memo::new(move |_| {
            let s = sort.get();
            path_order(&c.paths, s.column, s.descending)
        })
    };
    let links = {
        let paths: Vec<&str> = c.paths.iter().map(|p| p.path.as_str()).collect();
        let per_side = sides
            .iter()
            .map(|x| path_spans(&x.model.doc, &paths))
            .collect();
        LinkedRows::of_groups(&sides, per_side)
    };
    // A row's click (or Enter, Space) picks its path; the rows are built again with their
    // marks, and the focus stays on the row.
    let pick = {
        let c = c.clone();
        move |i: usize| {
            if let Some(p) = c.paths.get(i) {
                on_pick.run(p.path.clone());
                keep_focus(links.body(), i);
            }
        }
    };
    let pick = StoredValue::new(pick);
    let pick = move |i: usize| pick.with_value(|f| f(i));
    let header = move |column: PathSort, label: &'static str, numeric: bool| {
        // Every column starts largest (or last) first.
        sort_header(
            label,
            column,
            sort,
            true,
            Some(format!("sort-paths-{}", column.as_str())),
            numeric,
        )
    };
    view! {
        <section class="compare-paths">
            <h3>"Span paths"</h3>
            <table data-testid="path-deltas" data-sort=move || { let s = sort.get(); format!("{}:{}", s.column.as_str(), if s.descending { "desc" } else { "asc" }) }>
                <thead><tr>
                    {header(PathSort::Path, "path", false)}
                    {header(PathSort::Base, "baseline", true)}
                    {header(PathSort::Cand, "candidate", true)}
                    {header(PathSort::Delta, "change", true)}
                    {header(PathSort::Percent, "%", true)}
                    {header(PathSort::AbsDelta, "|change|", true)}
                </tr></thead>
                <tbody
                    node_ref=links.body()
                    on:click=move |ev| {
                        if let Some(i) = row_of(&ev) {
                            pick(i);
                        }
                    }
                    on:keydown=move |ev: web_sys::KeyboardEvent| {
                        row_key(&ev, pick);
                    }
                    on:mouseover=move |ev| links.on_over(&ev)
                    on:mouseleave=move |_| links.leave()
                >
                    {move || {
                        let c = c.clone();
                        let marked = picked.get();
                        order.get().into_iter().filter_map(move |i| {
                            let p = c.paths.get(i)?.clone();
                            let active = marked.as_deref() == Some(p.path.as_str());
                            Some(view! {
                                <tr
                                    class:active=active
                                    data-row=i.to_string()
                                    data-testid="path-delta"
                                    data-path=p.path.clone()
                                    data-presence=p.presence.as_str()
                                    data-base-ns=p.base_ns.to_string()
                                    data-cand-ns=p.cand_ns.to_string()
                                    data-base-count=p.base_count.to_string()
                                    data-cand-count=p.cand_count.to_string()
                                    data-value=p.delta_ns.to_string()
                                    data-percent=percent_attr(p.percent)
                                    class=format!("presence-{}", p.presence.as_str()) {..links.linked_attrs(i)}>
                                    <td class="path">
                                        {p.path.clone()}
                                        {(p.presence != Presence::Both).then(|| view! { <span class="tag">{p.presence.as_str()}</span> })}
                                    </td>
                                    <td class="num">{format_ns(p.base_ns)} <span class="muted">{format!(" ×{}", p.base_count)}</span></td>
                                    <td class="num">{format_ns(p.cand_ns)} <span class="muted">{format!(" ×{}", p.cand_count)}</span></td>
                                    <td class="num">{signed_ns(p.delta_ns)}</td>
                                    <td class="num">{percent_text(p.percent, p.presence)}</td>
                                    <td class="num">{format_ns(p.delta_ns.unsigned_abs())}</td>
                                </tr>
                            })
                        }).collect_view()
                    }}
                </tbody>
            </table>
        </section>
    }
}

/// Op groups by (name, shape, dtype) with their delta; a row links to the spans its ops ran
/// in on both sides ([`LinkedRows`]).
#[component]
fn OpDeltas(
    /// The comparison.
    c: Arc<TraceComparison>,
    /// The chart's groups: baseline, candidate.
    sides: Vec<TraceContext>,
) -> impl IntoView {
    let links = {
        let keys: Vec<(&str, &[u64], &str)> = c
            .ops
            .iter()
            .map(|o| (o.op_name.as_str(), o.shape.as_slice(), o.dtype.as_str()))
            .collect();
        let per_side = sides
            .iter()
            .map(|x| op_group_spans(&x.model.doc, &keys))
            .collect();
        LinkedRows::of_groups(&sides, per_side)
    };
    view! {
        <section class="compare-ops">
            <h3>"Ops (name, shape, dtype)"</h3>
            <table>
                <thead><tr><th scope="col">"op"</th><th scope="col">"shape"</th><th scope="col">"dtype"</th><th scope="col" class="num">"baseline"</th><th scope="col" class="num">"candidate"</th><th scope="col" class="num">"change"</th><th scope="col" class="num">"%"</th></tr></thead>
                <tbody {..links.body_attrs()}>
                    {c.ops.iter().enumerate().map(|(pos, o)| {
                        let shape = format!("{:?}", o.shape);
                        view! {
                            <tr
                                data-row=pos.to_string()
                                data-testid="op-delta"
                                data-op=o.op_name.clone()
                                data-shape=shape.clone()
                                data-dtype=o.dtype.clone()
                                data-presence=o.presence.as_str()
                                data-base-ns=o.base_ns.to_string()
                                data-cand-ns=o.cand_ns.to_string()
                                data-base-count=o.base_count.to_string()
                                data-cand-count=o.cand_count.to_string()
                                data-value=o.delta_ns.to_string()
                                data-percent=percent_attr(o.percent) {..links.linked_attrs(pos)}>
                                <td>{o.op_name.clone()} {(o.presence != Presence::Both).then(|| view! { <span class="tag">{o.presence.as_str()}</span> })}</td>
                                <td>{shape.clone()}</td>
                                <td>{o.dtype.clone()}</td>
                                <td class="num">{format_ns(o.base_ns)} <span class="muted">{format!(" ×{}", o.base_count)}</span></td>
                                <td class="num">{format_ns(o.cand_ns)} <span class="muted">{format!(" ×{}", o.cand_count)}</span></td>
                                <td class="num">{signed_ns(o.delta_ns)}</td>
                                <td class="num">{percent_text(o.percent, o.presence)}</td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        </section>
    }
}

/// Memory peak and the live bytes per category at each run's peak; a row links to the spans
/// that allocated what was live at each side's peak (of its category) ([`LinkedRows`]).
#[component]
fn MemoryDeltas(
    /// The comparison.
    c: Arc<TraceComparison>,
    /// The chart's groups: baseline, candidate.
    sides: Vec<TraceContext>,
) -> impl IntoView {
    let m = c.memory.clone();
    let links = {
        // Row 0 is the peak, then one per category.
        let categories: Vec<Option<&str>> = std::iter::once(None)
            .chain(m.by_category.iter().map(|cat| Some(cat.category)))
            .collect();
        let per_side = sides
            .iter()
            .map(|x| {
                categories
                    .iter()
                    .map(|&cat| peak_spans(&x.model.doc, cat))
                    .collect()
            })
            .collect();
        LinkedRows::of_groups(&sides, per_side)
    };
    view! {
        <section class="compare-memory">
            <h3>"Memory at the peak"</h3>
            <table>
                <thead><tr><th scope="col">""</th><th scope="col" class="num">"baseline"</th><th scope="col" class="num">"candidate"</th><th scope="col" class="num">"change"</th></tr></thead>
                <tbody {..links.body_attrs()}>
                    <tr
                        data-row="0"
                        data-testid="memory-delta-peak"
                        data-value=m.delta_bytes.to_string()
                        data-base=m.base_peak_bytes.to_string()
                        data-cand=m.cand_peak_bytes.to_string()
                        data-percent=percent_attr(m.percent) {..links.linked_attrs(0)}>
                        <th scope="row">"peak"</th>
                        <td class="num">{format_bytes(m.base_peak_bytes)} " " <span class="muted">{m.base_peak_device.clone().unwrap_or_default()}</span></td>
                        <td class="num">{format_bytes(m.cand_peak_bytes)} " " <span class="muted">{m.cand_peak_device.clone().unwrap_or_default()}</span></td>
                        <td class="num">{signed_bytes(m.delta_bytes)} " (" {percent_text(m.percent, Presence::Both)} ")"</td>
                    </tr>
                    {m.by_category.iter().enumerate().map(|(i, cat)| view! {
                        <tr
                            data-row=(i + 1).to_string()
                            data-testid=format!("memory-delta-{}", cat.category)
                            data-value=cat.delta_bytes.to_string()
                            data-base=cat.base_bytes.to_string()
                            data-cand=cat.cand_bytes.to_string() {..links.linked_attrs(i + 1)}>
                            <th scope="row">{cat.category}</th>
                            <td class="num">{format_bytes(cat.base_bytes)}</td>
                            <td class="num">{format_bytes(cat.cand_bytes)}</td>
                            <td class="num">{signed_bytes(cat.delta_bytes)}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </section>
    }
}

/// Parameters whose gradient state differs; a row links to its module's spans on both sides
/// ([`LinkedRows`]).
#[component]
fn GradientChanges(
    /// The comparison.
    c: Arc<TraceComparison>,
    /// The chart's groups: baseline, candidate.
    sides: Vec<TraceContext>,
) -> impl IntoView {
    let links = {
        let per_side = sides
            .iter()
            .map(|x| {
                let keys: Vec<&str> = c.gradients.iter().map(|g| g.key.as_str()).collect();
                parameter_spans(&x.model.doc, x.model.module_paths(), &keys)
            })
            .collect();
        LinkedRows::of_groups(&sides, per_side)
    };
    let state = |s: Option<candle_trace_schema::format::events::GradientState>| {
        s.map_or("none", |s| s.as_str())
    };
    view! {
        <section class="compare-gradients">
            <h3>"Gradient state changes"</h3>
            {if c.gradients.is_empty() {
                view! { <p class="muted" data-testid="gradient-changes-none">"No parameter changed state."</p> }.into_any()
            } else {
                view! {
                    <table>
                        <thead><tr><th scope="col">"parameter"</th><th scope="col">"baseline"</th><th scope="col">"candidate"</th></tr></thead>
                        <tbody {..links.body_attrs()}>
                            {c.gradients.iter().enumerate().map(|(pos, g)| view! {
                                <tr
                                    data-row=pos.to_string()
                                    data-testid="gradient-change"
                                    data-param=format!("{}/{}", g.root, g.key)
                                    data-base=state(g.base)
                                    data-cand=state(g.cand) {..links.linked_attrs(pos)}>
                                    <td>{format!("{}/{}", g.root, g.key)}</td>
                                    <td>{state(g.base)}</td>
                                    <td>{state(g.cand)}</td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                }.into_any()
            }}
        </section>
    }
}

/// Everything about a comparison.
#[component]
pub fn CompareView(
    /// The comparison and the candidate's model.
    model: Arc<CompareModel>,
    /// Light or dark.
    theme: Signal<Theme>,
) -> impl IntoView {
    let forced = RwSignal::new(false);
    let c = Arc::new(model.comparison.clone());
    let comparable = model.refusal.is_none();
    let title = format!("{} compared with {}", model.cand_name, model.base_name);
    let changed = model.changed_numbers();
    let refusal = model.refusal.clone().map(|text| {
        let mismatches = c.mismatches.clone();
        view! {
            <div class="load-error" role="alert" data-testid="compare-refusal">
                <p>{text}</p>
                <ul>
                    {mismatches.into_iter().map(|m| view! {
                        <li data-testid=format!("mismatch-{}", m.field) data-base=m.base.clone() data-cand=m.cand.clone()>
                            {m.field} ": " <code>{m.base.clone()}</code> " → " <code>{m.cand.clone()}</code>
                        </li>
                    }).collect_view()}
                </ul>
                <button type="button" data-testid="compare-anyway" hidden=move || forced.get() on:click=move |_| forced.set(true)>
                    "Compare anyway"
                </button>
            </div>
        }
    });
    let body = {
        let model = model.clone();
        move || {
            (comparable || forced.get()).then(|| {
                let c = c.clone();
                let groups = Arc::new(vec![
                    ChartGroup::new(
                        format!("baseline: {}", model.base_name),
                        model.baseline.clone()),
                    ChartGroup::new(
                        format!("candidate: {}", model.cand_name),
                        model.candidate.clone()),
                ]);
                let colours = {
                    let (a, b) = (model.clone(), model.clone());
                    Colours {
                        fill: Arc::new(move |g, i, theme| change_fill(a.side_change(g, i), theme)),
                        key: Arc::new(move |g, i| b.side_change(g, i).key()),
                    }
                };
                // The path the sides are aligned on when aligning by path: the last picked row
                // or selected span's.
                let picked: RwSignal<Option<String>> = RwSignal::new(None);
                let by_path = RwSignal::new(false);
                for (g, x) in groups.iter().enumerate() {
                    let (sel, m) = (x.ctx.selected, x.ctx.model.clone());
                    Effect::new(move |_| {
                        if let Some(i) = sel.get() {
                            let path = span_path(&m.doc, i as usize);
                            if picked.with_untracked(|p| p.as_deref() != Some(path.as_str())) {
                                picked.set(Some(path));
                            }
                        }
                        g
                    });
                }
                let offsets = {
                    let model = model.clone();
                    Memo::new(move |_| {
                        let path = if by_path.get() { picked.get() } else { None };
                        model.offsets(path.as_deref())
                    })
                };
                // A row selects its path's first span on both sides and shows it.
                let on_pick = {
                    let model = model.clone();
                    let groups = groups.clone();
                    Callback::new(move |path: String| {
                        let spans = model.spans_of_path(&path);
                        for (x, span) in groups.iter().zip(spans) {
                            x.ctx.selected.set(span);
                        }
                        picked.set(Some(path));
                        // Show the candidate's span (the baseline's when the path vanished).
                        let shown = groups.iter().zip(spans).rev().find_map(|(x, s)| Some((x, s?)));
                        if let Some((x, s)) = shown {
                            x.ctx.select_and_show(s);
                        }
                    })
                };
                let counts = model.change_counts;
                let summary_rows = model.summary_rows();
                let files = format!("{} + {}", model.base_name, model.cand_name);
                let page = PageState::new(ViewKind::Compare, &files);
                provide_context(page);
                let content = {
                    let c = c.clone();
                    let sides: Vec<TraceContext> = groups.iter().map(|x| x.ctx.clone()).collect();
                    Callback::new(move |tab: Tab| -> AnyView {
                        let sides = sides.clone();
                        match tab {
                            Tab::Summary => view! { <SummaryDeltas c=c.clone() rows=summary_rows.clone() /> }.into_any(),
                            Tab::Paths => view! { <PathDeltas c=c.clone() sides=sides on_pick=on_pick picked=picked.into() /> }.into_any(),
                            Tab::Ops => view! { <OpDeltas c=c.clone() sides=sides /> }.into_any(),
                            Tab::Memory => view! { <MemoryDeltas c=c.clone() sides=sides /> }.into_any(),
                            Tab::Gradients => view! { <GradientChanges c=c.clone() sides=sides /> }.into_any(),
                            _ => ().into_any(),
                        }
                    })
                };
                let details = {
                    let groups = groups.clone();
                    ViewFn::from(move || view! { <ChartDetails groups=groups.clone() page=page /> })
                };
                view! {
                    <div class="chart-area compare-timeline">
                        <FlameChart groups=groups offsets=offsets colours=colours theme=theme files=files page=page>
                            <ul class="legend" aria-label="change legend"
                                title="counts: candidate spans (vanished: the baseline's spans of paths the candidate lacks); each span takes its name path's change; grey = merged spans of mixed changes">
                                {Change::ALL.iter().zip(counts).map(|(ch, n)| {
                                    let ch = *ch;
                                    view! {
                                        <li data-testid=format!("change-{}", ch.as_str()) data-value=n.to_string() title=ch.meaning()>
                                            <span class="swatch" style:background=move || change_fill(ch, theme.get())></span>
                                            {ch.label()} {format!(" ({n})")}
                                        </li>
                                    }
                                }).collect_view()}
                            </ul>
                            <AlignChoice by_path=by_path />
                        </FlameChart>
                    </div>
                    <TabPanel page=page content=content details=details />
                }
            })
        }
    };
    view! {
        <section
            class="app-view"
            data-testid="document"
            data-format="compare"
            data-file=model.cand_name.clone()
            data-base=model.base_name.clone()
            data-comparable=comparable.to_string()
        >
            <header class="doc-header">
                <h2>{title}</h2>
                // The numbers that changed, once the sides are comparable (or compared anyway).
                {move || ((comparable || forced.get()) && !changed.is_empty()).then(|| view! {
                    <section class="cards changed-numbers" aria-label="changed summary numbers">
                        {changed.clone().into_iter().map(|(field, label, text)| view! {
                            <div class="card" data-testid=format!("changed-{field}")>
                                <div class="card-value">{text}</div>
                                <div class="card-label">{label}</div>
                            </div>
                        }).collect_view()}
                    </section>
                })}
                {refusal}
                {move || (forced.get() && !comparable).then(|| view! {
                    <p class="untrusted" data-testid="compare-forced">"Compared anyway: the meta above differ, so read the deltas with care."</p>
                })}
            </header>
            {move || (comparable || forced.get()).then(|| view! {
                <div class="compare-body" data-testid="compare-deltas">{body.clone()}</div>
            })}
        </section>
    }
}
