//! The modules tab: module spans as a tree (or by leaf name), linked both ways with the chart;
//! and an inference profile's module spans.

use std::sync::Arc;

use leptos::prelude::*;
use wasm_bindgen::JsCast;

use hashbrown::HashSet;

use candle_trace_schema::analysis::modules::ModuleGrouping;
use candle_trace_schema::analysis::units::format_ns;

use super::profile_rows::ProfileLinks;
use super::rows::{reveal_row_in, row_of, row_window_of, spacer, LinkedRows, PanelScroll, Reveal};
use super::sortable::sort_header;
use super::tables::ShowAllRows;
use super::{PageState, TabStates, TraceContext};
use crate::model::module_tree::{bytes_text, KeyStyle, ModuleTree, TreeColumn, TreeRow};
use crate::model::modules::{NO_MODULE_SPANS, SHOWN_ROWS};
use crate::model::profile_links::module_range_text;
use crate::model::profile_modules::NO_PROFILE_MODULE_SPANS;
use crate::model::sort::SortState;
use crate::model::virtual_rows::WHOLE_ROWS;
use crate::model::ProfileModel;
use candle_trace_schema::analysis::range::TimeRange;

/// The "group by module path / leaf name" choice of a modules table; its `data-value` is
/// `path` or `name`.
#[component]
fn GroupBySelect(
    /// The select's `data-testid`.
    testid: &'static str,
    /// The grouping it sets.
    by: RwSignal<ModuleGrouping>,
) -> impl IntoView {
    let by_name = move || by.get() == ModuleGrouping::Name;
    view! {
        <label>
            "group by "
            <select data-testid=testid data-value=move || if by_name() { "name" } else { "path" }
                prop:value=move || if by_name() { "name" } else { "path" }
                on:change=move |ev| by.set(if event_target_value(&ev) == "name" { ModuleGrouping::Name } else { ModuleGrouping::Path })>
                <option value="path" selected=true>"module path"</option>
                <option value="name">"leaf name"</option>
            </select>
        </label>
    }
}

/// Module spans as a collapsible tree (by module path, default) or a flat list by leaf name:
/// calls, total, self, mean and share of the measured total (`candle-trace query --kind
/// modules`), each level sortable by any column; while a range is selected, of the part
/// inside it. A row's click selects and shows its first span and outlines them all; hovering
/// outlines them; the selected span's row is expanded to, marked and brought into view.
/// Without module spans, says how to capture them.
#[component]
pub fn ModulesTab() -> impl IntoView {
    let Some(ctx) = use_context::<TraceContext>() else {
        return ().into_any();
    };
    let page = use_context::<PageState>();
    if ctx.model.modules().is_empty() {
        return view! {
            <section class="modules panel" data-testid="modules">
                <h3>"Modules"</h3>
                <p class="muted" data-testid="modules-empty">{NO_MODULE_SPANS}</p>
            </section>
        }
        .into_any();
    }
    let states = use_context::<TabStates>().unwrap_or_else(TabStates::new);
    let (by, sort) = (states.modules_by, states.modules_sort);
    let model = ctx.model.clone();
    let tree = {
        let model = model.clone();
        Memo::new(move |_| {
            let grouping = by.get();
            let panel = model.modules();
            let range = page.and_then(|p| p.time_range());
            if let (ModuleGrouping::Path, None) = (grouping, range) {
                // The whole run: the schema's tree, memory and gradients included.
                return Arc::new(ModuleTree::of_schema(&panel.tree));
            }
            let rows = match range {
                Some(r) => panel.rows_in(&model.doc, grouping, r),
                None => panel.rows(grouping).to_vec(),
            };
            let style = match grouping {
                ModuleGrouping::Path if panel.paths().names() => KeyStyle::Names,
                ModuleGrouping::Path => KeyStyle::Nesting,
                ModuleGrouping::Name => KeyStyle::Flat,
            };
            Arc::new(ModuleTree::build(
                rows.iter().map(|r| TreeRow {
                    key: &r.key,
                    calls: r.calls,
                    total_ns: r.total_ns,
                    self_ns: r.self_ns,
                    share: r.share_ratio,
                }),
                style,
            ))
        })
    };
    // The nodes open when the tab last closed, else the roots.
    let expanded: RwSignal<HashSet<String>> = RwSignal::new(
        states
            .modules_expanded
            .get_untracked()
            .unwrap_or_else(|| tree.with_untracked(|t| t.keys_to_depth(0))),
    );
    Effect::new(move |_| {
        let open = expanded.get();
        states.modules_expanded.set(Some(open));
    });
    let visible = Memo::new(move |_| {
        let t = tree.get();
        let open = expanded.get();
        Arc::new(t.visible(&open, sort.get()))
    });
    let count = Signal::derive(move || visible.with(|v| v.len()));
    // A visible row (by its place) stands for its node's subtree's spans, and is linked to a
    // selected span whose module key is its node's; the tab reveals that row itself, expanding
    // the tree to it.
    let node_at = move |pos: usize| visible.with_untracked(|v| v.get(pos).copied());
    let links = {
        let (spans_model, key_model) = (model.clone(), model.clone());
        LinkedRows::of_trace_rows(
            &ctx,
            Reveal::Own,
            move |pos| {
                let Some(n) = node_at(pos) else {
                    return Vec::new();
                };
                let by_name = by.get_untracked() == ModuleGrouping::Name;
                tree.with_untracked(|t| spans_model.modules().links.node_spans(t, n, by_name))
            },
            move |pos, s| {
                let by_name = by.get_untracked() == ModuleGrouping::Name;
                let key = key_model
                    .modules()
                    .links
                    .key_of_span(&key_model.doc, s, by_name);
                node_at(pos).zip(key).is_some_and(|(n, key)| {
                    tree.with_untracked(|t| t.nodes.get(n).is_some_and(|x| x.key == key))
                })
            },
        )
    };
    let body = links.body();
    let window = row_window_of(body, count);
    let scroll = use_context::<PanelScroll>();
    // Show the node with `key`: expand its ancestors, then bring its row into view.
    let reveal_key = move |key: &str| {
        let t = tree.get_untracked();
        let Some(n) = t.node_of_key(key) else { return };
        let missing: Vec<String> = t
            .ancestor_keys(n)
            .into_iter()
            .filter(|k| !expanded.with_untracked(|e| e.contains(k)))
            .collect();
        if !missing.is_empty() {
            expanded.update(|e| e.extend(missing));
        }
        if let (Some(i), Some(scroll)) = (
            visible.with_untracked(|v| v.iter().position(|&x| x == n)),
            scroll,
        ) {
            reveal_row_in(scroll, body, i, count.get_untracked());
        }
    };
    // The selected span's row.
    let linked_key = {
        let model = model.clone();
        Memo::new(move |_| {
            let s = ctx.selected.get()?;
            let by_name = by.get() == ModuleGrouping::Name;
            model
                .modules()
                .links
                .key_of_span(&model.doc, s, by_name)
                .map(str::to_string)
        })
    };
    Effect::new(move |_| {
        if let Some(key) = linked_key.get() {
            reveal_key(&key);
        }
    });
    // A finding's link to a module row.
    if let Some(p) = page {
        Effect::new(move |_| {
            if let Some(key) = p.reveal.get() {
                reveal_key(&key);
                p.reveal.set(None);
            }
        });
    }
    // The toggle of a visible row (by its place).
    let toggle = Callback::new(move |pos: usize| {
        let t = tree.get_untracked();
        let Some(key) = visible.with_untracked(|v| v.get(pos).map(|&n| t.nodes[n].key.clone()))
        else {
            return;
        };
        expanded.update(|e| {
            if !e.remove(&key) {
                e.insert(key);
            }
        });
    });
    // Memory and gradient columns: the schema's tree (the whole run, by path) has them.
    let extras = move || tree.with(|t| t.nodes.first().is_some_and(|n| n.extras.is_some()));
    let notes = {
        let t = model.modules().tree.clone();
        [
            t.alloc_note.clone(),
            t.graph_note.clone(),
            t.gradients_note.clone(),
        ]
    };
    // Bytes whose source was off say so rather than 0.
    let (allocs_off, graph_off) = (notes[0].is_some(), notes[1].is_some());
    let coverage = model.modules().coverage.clone();
    let backward_note = model.modules().backward_note;
    let header =
        move |label: &'static str, column: TreeColumn, descending_first: bool, numeric: bool| {
            sort_header(
                label,
                column,
                sort,
                descending_first,
                Some(format!("modules-sort-{}", label.replace(' ', "-"))),
                numeric,
            )
        };
    view! {
        <section class="modules panel" data-testid="modules">
            <div class="table-bar">
                <h3>"Modules"</h3>
                <GroupBySelect testid="modules-by" by=by />
                <button type="button" data-testid="modules-expand-all"
                    on:click=move |_| expanded.set(tree.with_untracked(|t| t.keys_to_depth(usize::MAX)))>
                    "Expand all"
                </button>
                <button type="button" data-testid="modules-collapse-all" on:click=move |_| expanded.set(HashSet::new())>
                    "Collapse all"
                </button>
            </div>
            <div class="tab-notes">
                {coverage.map(|c| view! { <span data-testid="modules-coverage">{c}</span> })}
                {backward_note.map(|b| view! { <span class="muted" data-testid="modules-backward">{b}</span> })}
                {move || extras().then(|| {
                    notes.iter().flatten().map(|n| view! { <span class="muted" data-testid="modules-note">{n.clone()}</span> }).collect_view()
                })}
                <details class="how-to-read">
                    <summary>"how to read"</summary>
                    "Modules by their place in the model (their weights' names, or the nesting of module spans), as a tree, or every place of a leaf name together; calls and total count a module's outermost spans, self every span; share = total / measured total; memory and gradients include the node's subtree; every level sorts by the column clicked. A group (a level no span has) adds up its children; a module known only from its weights, which no span ran, says no span and shows no time."
                </details>
            </div>
            {move || (count.get() == 0).then(|| view! {
                <p class="muted" data-testid="modules-range-empty">"No module span ran inside the range."</p>
            })}
            <table role="treegrid" aria-label="modules" class:virtual={move || count.get() > WHOLE_ROWS}>
                <thead><tr>
                    {header("module", TreeColumn::Name, false, false)}
                    {header("calls", TreeColumn::Calls, true, true)}
                    {header("total", TreeColumn::Total, true, true)}
                    {header("self", TreeColumn::SelfTime, true, true)}
                    <th scope="col" class="num">"mean"</th><th scope="col" class="num">"share"</th>
                    {move || extras().then(|| view! {
                        {header("allocated", TreeColumn::Alloc, true, true)}
                        {header("graph", TreeColumn::Graph, true, true)}
                        {header("params", TreeColumn::Params, true, true)}
                        {header("gradients", TreeColumn::Problems, true, false)}
                        {header("grad norm", TreeColumn::Norm, true, true)}
                    })}
                </tr></thead>
                <tbody
                    node_ref=body
                    on:keydown=move |ev| links.on_key(&ev)
                    on:mouseover=move |ev| links.on_over(&ev)
                    on:mouseleave=move |_| links.leave()
                    on:click=move |ev: web_sys::MouseEvent| {
                        // A row's click selects its spans (not on its toggle: that is a
                        // button), its toggle's opens or closes it.
                        links.on_click(&ev);
                        let on_toggle = ev
                            .target()
                            .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
                            .and_then(|el| el.closest("button.tree-toggle").ok().flatten())
                            .is_some();
                        if let (true, Some(pos)) = (on_toggle, row_of(&ev)) {
                            toggle.run(pos);
                        }
                    }
                >
                    {move || {
                        let t = tree.get();
                        let v = visible.get();
                        let w = window.get();
                        let long = v.len() > WHOLE_ROWS;
                        // Expansion is part of each row as built (the rows are built again
                        // when it changes: no closure per row).
                        let open = expanded.get();
                        let columns = if t.nodes.first().is_some_and(|n| n.extras.is_some()) { 11 } else { 6 };
                        let first = w.first.min(v.len());
                        let built = v[first..w.end.min(v.len())].iter().enumerate().map(|(k, &n)| {
                            let node = &t.nodes[n];
                            let has_children = !node.children.is_empty();
                            let is_open = has_children.then(|| open.contains(&node.key).to_string());
                            let mean = node.total_ns / node.calls.max(1);
                            view! {
                                <tr data-testid="module-row" data-row=(first + k).to_string() data-key=node.key.clone()
                                    {..links.linked_attrs(first + k)}
                                    data-calls=node.calls.to_string()
                                    data-total=node.total_ns.to_string() data-self=node.self_ns.to_string()
                                    data-measured=node.measured.to_string()
                                    data-expanded=is_open.clone()
                                    attr:aria-level=(node.depth + 1).to_string()
                                    aria-expanded=is_open.clone()
                                    class:vrow=long
                                    class:group=!node.measured>
                                    <th scope="row" class="name" style:padding-left=format!("{}px", 8 + node.depth * 16)>
                                        {has_children.then(|| view! {
                                            <button type="button" class="tree-toggle" data-testid="module-toggle"
                                                aria-label=format!("expand or collapse {}", node.label)>
                                                {if open.contains(&node.key) { "▾" } else { "▸" }}
                                            </button>
                                        })}
                                        {node.label.clone()}
                                        {node.note().map(|(note, title)| view! { <span class="muted" title=title>{note}</span> })}
                                    </th>
                                    <td class="num">{node.calls_text()}</td>
                                    <td class="num">{node.total_text()}</td>
                                    <td class="num">{node.self_text()}</td>
                                    <td class="num">{if node.measured { format_ns(mean) } else { "–".to_string() }}</td>
                                    <td class="num share">
                                        <span class="share-bar" aria-hidden="true"
                                            style:width=format!("{:.2}%", node.share.map_or(0.0, |s| (s * 100.0).clamp(0.0, 100.0)))></span>
                                        {node.share_text()}
                                    </td>
                                    {node.extras.clone().map(|e| view! {
                                        <td class="num" data-testid="module-alloc" data-value=e.alloc_bytes.to_string()>{bytes_text(e.alloc_bytes, allocs_off)}</td>
                                        <td class="num" data-testid="module-graph" data-value=e.graph_bytes.to_string()>{bytes_text(e.graph_bytes, graph_off)}</td>
                                        <td class="num" data-testid="module-params" data-value=e.param_bytes.map(|b| b.to_string()).unwrap_or_default()>{e.params_text()}</td>
                                        <td class:problem={e.gradients.problems() > 0} data-testid="module-gradients"
                                            data-present=e.gradients.present.to_string() data-missing=e.gradients.missing.to_string()
                                            data-zero=e.gradients.zero.to_string() data-non-finite=e.gradients.non_finite.to_string()>
                                            {e.gradients_text()}
                                        </td>
                                        <td class="num" data-testid="module-norm" data-value=e.grad_norm.map(|n| n.to_string()).unwrap_or_default()>{e.norm_text()}</td>
                                    })}
                                </tr>
                            }
                        }).collect_view();
                        view! { {spacer(w.before_px, columns)} {built} {spacer(w.after_px, columns)} }
                    }}
                </tbody>
            </table>
        </section>
    }
    .into_any()
}

/// The module spans of an inference profile's forward calls, across every request, by module
/// path (default) or by leaf name: calls, total, mean and the requests they occur in, heaviest
/// first (`candle-trace query PROFILE --kind modules`), the heaviest 50 until "Show all".
/// Without module spans, says how to get them.
#[component]
pub fn ProfileModulesView(
    /// The profile's view models (this reads `modules`).
    model: Arc<ProfileModel>,
) -> impl IntoView {
    let panel = &model.modules;
    if panel.is_empty() {
        let unplaced = panel.has_module_events().then(|| panel.totals_text());
        return view! {
            <section class="modules panel" data-testid="profile-modules">
                <h3>"Modules"</h3>
                <p class="muted" data-testid="profile-modules-empty">{NO_PROFILE_MODULE_SPANS}</p>
                {unplaced.map(|t| view! { <p class="muted">{t}</p> })}
            </section>
        }
        .into_any();
    }
    let Some(links) = use_context::<ProfileLinks>() else {
        return ().into_any();
    };
    let page = links.page;
    let by = RwSignal::new(ModuleGrouping::Path);
    let show_all = RwSignal::new(false);
    let total = Signal::derive({
        let model = model.clone();
        move || model.modules.rows(by.get()).len()
    });
    let by_name = move || by.get() == ModuleGrouping::Name;
    let totals = panel.totals_text();
    let coverage = panel.coverage.clone();
    // A row stands for its key's module spans; a module span marks its key's row.
    let module_rows = {
        let links = links.clone();
        move |keys: Arc<Vec<String>>, grouping: ModuleGrouping| {
            let (chart, by, of) = (links.chart.clone(), links.chart.clone(), keys.clone());
            links.rows(
                move |i| {
                    keys.get(i)
                        .map(|k| chart.module_spans(k, grouping))
                        .unwrap_or_default()
                },
                move |i, s| of.get(i).map(String::as_str) == by.module_of(s, grouping),
            )
        }
    };
    let flat = {
        let model = model.clone();
        let module_rows = module_rows.clone();
        let keys: Arc<Vec<String>> = Arc::new(
            model
                .modules
                .rows(ModuleGrouping::Name)
                .iter()
                .map(|r| r.key.clone())
                .collect(),
        );
        move || {
            let rows = module_rows(keys.clone(), ModuleGrouping::Name);
            view! {
                <table>
                    <thead><tr>
                        <th scope="col">"module"</th>
                        <th scope="col">"calls"</th><th scope="col">"total"</th>
                        <th scope="col">"mean"</th><th scope="col">"requests"</th>
                    </tr></thead>
                    <tbody {..rows.body_attrs()}>
                        {move || {
                            let all = model.modules.rows(ModuleGrouping::Name);
                            let n = if show_all.get() { all.len() } else { SHOWN_ROWS };
                            all.iter().take(n).enumerate().map(|(i, r)| {
                                view! {
                                <tr data-testid="profile-module-row" data-row=i.to_string() data-key=r.key.clone() data-calls=r.calls.to_string()
                                    data-total=r.total_ns.to_string() data-mean=r.mean_ns.to_string()
                                    data-requests=r.requests.to_string() {..rows.linked_attrs(i)}>
                                    <th scope="row" class="name">{r.key.clone()}</th>
                                    <td class="num">{r.calls}</td>
                                    <td class="num">{r.total.clone()}</td>
                                    <td class="num">{r.mean.clone()}</td>
                                    <td class="num">{r.requests}</td>
                                </tr>
                            }}).collect_view()
                        }}
                    </tbody>
                </table>
                <ShowAllRows testid="profile-modules" noun="module names" total=total show_all=show_all />
            }
        }
    };
    // While a range is selected: its forward calls and module spans, by the grouping.
    let in_range = {
        let chart = links.chart.clone();
        let module_rows = module_rows.clone();
        move |r: TimeRange| {
            let (calls, spans, ns) = chart.module_counts_in(r);
            let grouping = by.get();
            let in_range = chart.module_rows_in(r, grouping);
            let rows = module_rows(
                Arc::new(in_range.iter().map(|(key, _, _)| key.clone()).collect()),
                grouping,
            );
            view! {
                <p class="muted" data-testid="profile-modules-in-range" data-calls=calls.to_string() data-spans=spans.to_string() data-ns=ns.to_string()>
                    "Module spans by the time each spent inside the range (the tree, with calls and self time, covers the whole run: clear the range to see it)."
                </p>
                <table>
                    <thead><tr>
                        <th scope="col">"module"</th>
                        <th scope="col">"spans in range"</th><th scope="col">"time in range"</th>
                    </tr></thead>
                    <tbody {..rows.body_attrs()}>
                        {in_range.iter().enumerate().map(|(i, (key, n, t))| {
                            view! {
                                <tr data-testid="profile-module-range-row" data-row=i.to_string() data-key=key.clone()
                                    data-spans=n.to_string() data-inside=t.to_string() {..rows.linked_attrs(i)}>
                                    <th scope="row" class="name">{key.clone()}</th>
                                    <td class="num">{*n}</td>
                                    <td class="num">{format_ns(*t)}</td>
                                </tr>
                            }
                        }).collect_view()}
                    </tbody>
                </table>
            }
        }
    };
    let tree = ModuleTree::of_schema(&panel.tree);
    view! {
        <section class="modules panel" data-testid="profile-modules">
            <div class="table-bar">
                <h3>"Modules"</h3>
                <GroupBySelect testid="profile-modules-by" by=by />
            </div>
            <p class="muted" data-testid="profile-modules-totals">
                {
                    let chart = links.chart.clone();
                    move || match page.time_range() {
                        Some(r) => {
                            let (calls, spans, ns) = chart.module_counts_in(r);
                            module_range_text(calls, spans, ns)
                        }
                        None => totals.clone(),
                    }
                }
                ". Module spans of every request's prefill and decode forward calls (and of each engine's batched forwards, which serve several requests at once), as a tree by their place in the model (calls and total count each key's outermost spans), or every place of a leaf name together; requests = the requests served by the forward calls with such a span, each once (an engine's batched forward serves those its iteration lists)."
            </p>
            // The coverage is the whole run's: not shown beside a range's numbers.
            {move || page.range.get().is_none().then(|| coverage.clone().map(|c| view! { <p data-testid="profile-modules-coverage">{c}</p> }))}
            {move || if let Some(r) = page.time_range() {
                in_range.clone()(r).into_any()
            } else if by_name() {
                flat.clone()().into_any()
            } else {
                let keys = Arc::new(tree.nodes.iter().map(|n| n.key.clone()).collect());
                view! { <ProfileModuleTree tree=tree.clone() rows=module_rows(keys, ModuleGrouping::Path) /> }.into_any()
            }}
        </section>
    }
    .into_any()
}

/// An inference profile's module tree: each node's calls, total, self and mean, expanded to
/// its top level first, every level sortable.
#[component]
fn ProfileModuleTree(
    /// The tree (the schema's, time only).
    tree: ModuleTree,
    /// Its rows, linked with the chart: a node's row (`data-row`: its index in the tree)
    /// stands for its key's module spans.
    rows: LinkedRows,
) -> impl IntoView {
    let tree = Arc::new(tree);
    let tree_click = tree.clone();
    let sort = RwSignal::new(SortState::new(TreeColumn::Total, true));
    let expanded: RwSignal<HashSet<String>> = RwSignal::new(tree.keys_to_depth(0));
    let header =
        move |label: &'static str, column: TreeColumn, descending_first: bool, numeric: bool| {
            sort_header(
                label,
                column,
                sort,
                descending_first,
                Some(format!("profile-modules-sort-{label}")),
                numeric,
            )
        };
    view! {
        <button type="button" data-testid="profile-modules-expand-all"
            on:click={
                let tree = tree.clone();
                move |_| expanded.set(tree.keys_to_depth(usize::MAX))
            }>
            "Expand all"
        </button>
        <table role="treegrid" aria-label="modules">
            <thead><tr>
                {header("module", TreeColumn::Name, false, false)}
                {header("calls", TreeColumn::Calls, true, true)}
                {header("total", TreeColumn::Total, true, true)}
                {header("self", TreeColumn::SelfTime, true, true)}
                <th scope="col" class="num">"mean"</th>
            </tr></thead>
            <tbody
                node_ref=rows.body()
                on:keydown=move |ev| rows.on_key(&ev)
                on:mouseover=move |ev| rows.on_over(&ev)
                on:mouseleave=move |_| rows.leave()
                on:click=move |ev: web_sys::MouseEvent| {
                    // A row's click selects its spans; its toggle's (`data-row`: the node's
                    // index in the tree) opens or closes it.
                    rows.on_click(&ev);
                    let Some(n) = ev
                        .target()
                        .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
                        .and_then(|el| el.closest("button[data-row]").ok().flatten())
                        .and_then(|b| b.get_attribute("data-row"))
                        .and_then(|v| v.parse::<usize>().ok())
                    else {
                        return;
                    };
                    let key = tree_click.nodes.get(n).map(|n| n.key.clone());
                    if let Some(key) = key {
                        expanded.update(|e| {
                            if !e.remove(&key) {
                                e.insert(key);
                            }
                        });
                    }
                }>
                {move || {
                    let open = expanded.get();
                    tree.visible(&open, sort.get()).into_iter().map(|n| {
                        let node = &tree.nodes[n];
                        let has_children = !node.children.is_empty();
                        let is_open = open.contains(&node.key);
                        view! {
                            <tr data-testid="profile-module-row" data-row=n.to_string()
                                data-key=node.key.clone() data-calls=node.calls.to_string()
                                data-total=node.total_ns.to_string() data-self=node.self_ns.to_string()
                                data-measured=node.measured.to_string()
                                attr:aria-level=(node.depth + 1).to_string()
                                aria-expanded=has_children.then(|| is_open.to_string())
                                class:group=!node.measured {..rows.linked_attrs(n)}>
                                <th scope="row" class="name" style:padding-left=format!("{}px", 8 + node.depth * 16)>
                                    {has_children.then(|| view! {
                                        <button type="button" class="tree-toggle" data-testid="profile-module-toggle"
                                            data-row=n.to_string()
                                            aria-label=format!("expand or collapse {}", node.label)>
                                            {if is_open { "▾" } else { "▸" }}
                                        </button>
                                    })}
                                    {node.label.clone()}
                                    {node.note().map(|(note, title)| view! { <span class="muted" title=title>{note}</span> })}
                                </th>
                                <td class="num">{node.calls_text()}</td>
                                <td class="num">{node.total_text()}</td>
                                <td class="num">{node.self_text()}</td>
                                <td class="num">{if node.measured { format_ns(node.total_ns / node.calls.max(1)) } else { "–".to_string() }}</td>
                            </tr>
                        }
                    }).collect_view()
                }}
            </tbody>
        </table>
    }
}
