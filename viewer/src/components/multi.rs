//! Several traces at once: reading them (one worker after another), and the view of a
//! [`MultiModel`]: each file's eight numbers and the totals, per-file offsets, and the files'
//! lane groups in one flame chart.

use std::sync::Arc;

use leptos::prelude::*;

use candle_trace_schema::analysis::summary::TraceSummary;
use candle_trace_schema::format::detect::AnyDocument;
use candle_trace_schema::format::document::TraceDocument;

use super::cards::SummaryCards;
use super::panel::TabPanel;
use super::rows::LinkedRows;
use super::timeline::{ChartDetails, ChartGroup, Colours, FlameChart, PassLegend};
use super::{PageState, TraceContext};
use crate::load::{LoadError, Source};
use crate::model::links::root_spans;
use crate::model::multi::{
    offset_ns_of_us_text, total_cards, total_rule, us_text_of_offset_ns, MultiModel,
};
use crate::model::panel::{Tab, ViewKind};
use crate::model::summary::{trace_cards, SummaryCard};
use crate::timeline::layout::ChartLayout;
use crate::timeline::palette::Theme;
use crate::worker::{self, Stage};

/// Read `files` one after another (each in its own worker, so cancelling stops the one running)
/// and keep the execution traces; anything else fails the whole set, naming the file.
pub async fn load_traces(
    files: Vec<web_sys::File>,
    stage: impl Fn(usize, &str, Stage),
    is_current: impl Fn() -> bool + Copy,
) -> Result<Vec<(String, TraceDocument)>, LoadError> {
    let mut docs = Vec::with_capacity(files.len());
    for (i, file) in files.into_iter().enumerate() {
        let name = file.name();
        // No findings: comparing and the several-files view show none.
        let (doc, _, _) = worker::open(
            Source::File(file),
            false,
            |s| stage(i, &name, s),
            is_current,
        )
        .await?;
        if !is_current() {
            return Err(LoadError::Cancelled);
        }
        match doc {
            AnyDocument::Trace(t) => docs.push((name, *t)),
            AnyDocument::Profile(_) => {
                return Err(LoadError::Failed(format!(
                    "{name} is an inference profile; comparing and the several-files view need execution traces (trace/6 or Chrome JSON)"
                )))
            }
            AnyDocument::Unsupported { .. } => {
                return Err(LoadError::Failed(format!(
                    "{name} could not be read as an execution trace; open it alone to see why"
                )))
            }
        }
    }
    Ok(docs)
}

/// One row of the summary table: the eight numbers as cards (value and display), each cell
/// titled with `title` of its field (the total's rule) when given.
fn cells(
    cards: &[SummaryCard],
    testid_prefix: &str,
    title: Option<fn(&str) -> &'static str>,
) -> impl IntoView {
    cards
        .iter()
        .map(|c| {
            view! {
                <td class="num" class:not-captured=c.not_captured.is_some()
                    title=title.map(|t| t(&c.field))
                    data-not-captured=c.not_captured.clone()
                    data-testid=format!("{testid_prefix}-{}", c.field) data-value=c.value.to_string()>{c.display.clone()}</td>
            }
        })
        .collect_view()
}

/// Several files: their numbers, totals, offsets and shared timeline.
#[component]
pub fn MultiView(
    /// The files.
    model: Arc<MultiModel>,
    /// Light or dark.
    theme: Signal<Theme>,
) -> impl IntoView {
    let offsets = RwSignal::new(model.auto_offsets());
    let groups: Arc<Vec<ChartGroup>> = Arc::new(
        model
            .files
            .iter()
            .map(|f| ChartGroup::new(f.name.clone(), f.model.clone()))
            .collect(),
    );
    let colours = Colours::by_pass(&groups);
    let files = model
        .files
        .iter()
        .map(|f| f.name.as_str())
        .collect::<Vec<_>>()
        .join(" + ");
    let totals = {
        let model = model.clone();
        Memo::new(move |_| model.totals(&offsets.get()))
    };
    // The chart's axis origin: each group's shift is its offset minus it.
    let axis_origin = {
        let model = model.clone();
        Memo::new(move |_| {
            let offs = offsets.get();
            let pairs: Vec<_> = model
                .files
                .iter()
                .enumerate()
                .map(|(g, f)| (&f.model.lanes, offs.get(g).copied().unwrap_or(0)))
                .collect();
            ChartLayout::new(&pairs).origin_ns
        })
    };
    let n = model.files.len();
    let header_model = model.clone();
    let page = PageState::new(ViewKind::Multi, &files);
    provide_context(page);
    // A file's row (in either tab) links to its lane group: its root spans.
    let contexts: Vec<TraceContext> = groups.iter().map(|x| x.ctx.clone()).collect();
    let file_links = move || {
        let per_group = contexts
            .iter()
            .enumerate()
            .map(|(g, x)| {
                (0..contexts.len())
                    .map(|row| {
                        if row == g {
                            root_spans(&x.model.doc)
                        } else {
                            Vec::new()
                        }
                    })
                    .collect()
            })
            .collect();
        LinkedRows::of_groups(&contexts, per_group)
    };
    let files_tab = {
        let model = model.clone();
        let file_links = file_links.clone();
        move || {
            let links = file_links();
            view! {
                <section class="multi-summary">
                    <h3>"Summary per file"</h3>
                    <table data-testid="multi-summary">
                        <thead><tr>
                            <th scope="col">"file"</th>
                            {trace_cards(&TraceSummary::default()).into_iter().map(|c| view! {
                                <th scope="col" class="num" title=c.field>{c.label}</th>
                            }).collect_view()}
                        </tr></thead>
                        <tbody {..links.body_attrs()}>
                            {model.files.iter().enumerate().map(|(i, f)| view! {
                                <tr data-testid=format!("multi-file-{i}") data-file=f.name.clone()
                                    data-row=i.to_string() {..links.linked_attrs(i)}>
                                    <th scope="row">{f.name.clone()}</th>
                                    {cells(&f.model.cards, &format!("multi-{i}"), None)}
                                </tr>
                            }).collect_view()}
                        </tbody>
                        <tfoot>
                            <tr data-testid="multi-total">
                                <th scope="row">"total"</th>
                                {
                                    let model = model.clone();
                                    move || {
                                        let files: Vec<&[SummaryCard]> = model.files.iter().map(|f| f.model.cards.as_slice()).collect();
                                        cells(&total_cards(&totals.get(), &files), "multi-total", Some(total_rule))
                                    }
                                }
                            </tr>
                        </tfoot>
                    </table>
                    <p class="muted">
                        "Totals: counts are summed; max depth and peak memory are the largest file's (max: peaks of different files happen at unrelated times); the measured total is the wall span (span) from the earliest measured span start to the latest measured span end, with the files aligned as in the alignment tab. A number no file captured says not captured."
                    </p>
                </section>
            }
        }
    };
    let alignment_tab = {
        let model = model.clone();
        move || {
            let links = file_links();
            view! {
                <section class="multi-offsets">
                    <h3>"Alignment"</h3>
                    <p class="muted">"Each file's meta timestamp is the wall time of its 0 ns: the earliest file starts at 0 and the others at their distance from it. Files without a usable timestamp start at 0. Type an offset (µs) to move a file."</p>
                    <table>
                        <thead><tr><th scope="col">"file"</th><th scope="col">"placed by"</th><th scope="col">"offset (µs)"</th></tr></thead>
                        <tbody {..links.body_attrs()}>
                            {model.files.iter().enumerate().map(|(i, f)| {
                                let auto = f.alignment.offset_ns;
                                view! {
                                    <tr
                                        data-row=i.to_string()
                                        data-testid=format!("group-{i}")
                                        data-file=f.name.clone()
                                        data-align=f.alignment.source.as_str()
                                        data-auto-offset-ns=auto.to_string()
                                        data-offset-ns=move || offsets.with(|o| o.get(i).copied().unwrap_or(0)).to_string()
                                        data-shift-ns=move || {
                                            let o = offsets.with(|o| o.get(i).copied().unwrap_or(0));
                                            (i128::from(o) - i128::from(axis_origin.get())).to_string()
                                        } {..links.linked_attrs(i)}>
                                        <th scope="row">{f.name.clone()}</th>
                                        <td>{f.alignment.source.note()} {(auto != 0).then(|| format!(" (+{} µs)", us_text_of_offset_ns(auto)))}</td>
                                        <td>
                                            <input
                                                type="number"
                                                step="any"
                                                aria-label=format!("offset of {} in µs", f.name)
                                                data-testid=format!("offset-{i}")
                                                prop:value=move || us_text_of_offset_ns(offsets.with(|o| o.get(i).copied().unwrap_or(0)))
                                                on:change=move |ev| {
                                                    if let Some(ns) = offset_ns_of_us_text(&event_target_value(&ev)) {
                                                        offsets.update(|o| if let Some(x) = o.get_mut(i) { *x = ns });
                                                    }
                                                }
                                            />
                                        </td>
                                    </tr>
                                }
                            }).collect_view()}
                        </tbody>
                    </table>
                </section>
            }
        }
    };
    let content = Callback::new(move |tab: Tab| -> AnyView {
        match tab {
            Tab::Files => files_tab().into_any(),
            Tab::Alignment => alignment_tab().into_any(),
            _ => ().into_any(),
        }
    });
    let details = {
        let groups = groups.clone();
        ViewFn::from(move || view! { <ChartDetails groups=groups.clone() page=page /> })
    };
    view! {
        <section class="app-view" data-testid="document" data-format="multi" data-files=n.to_string()>
            <header class="doc-header">
                <h2>{format!("{n} traces on one time axis")}</h2>
                // The files' totals (as in the files tab), following the alignment.
                {move || {
                    let files: Vec<&[SummaryCard]> = header_model.files.iter().map(|f| f.model.cards.as_slice()).collect();
                    view! { <SummaryCards cards=total_cards(&totals.get(), &files) /> }
                }}
            </header>
            <div class="chart-area">
                <FlameChart groups=groups offsets=offsets colours=colours theme=theme files=files page=page>
                    <PassLegend theme=theme />
                </FlameChart>
            </div>
            <TabPanel page=page content=content details=details />
        </section>
    }
}
