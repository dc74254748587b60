//! An inference profile: headline cards, diagnostics, its engines and requests on the flame
//! chart, and tabs with the request table, per-request waterfalls, errors and diagnostic-only
//! events listed apart, batched forwards, resources, TTFT / ITL histograms, module spans and
//! memory snapshots.

use std::sync::Arc;

use leptos::prelude::*;

use candle_trace_schema::analysis::units::format_ns;

use super::cards::SummaryCards;
use super::diagnostics::Diagnostics;
use super::findings::FindingsView;
use super::header::FindingsCount;
use super::modules::ProfileModulesView;
use super::panel::TabPanel;
use super::profile_rows::ProfileLinks;
use super::timeline::{ChartGroup, Colours, FlameChart};
use super::PageState;
use crate::model::findings::FindingsPanel;
use crate::model::iterations::IterationsPanel;
use crate::model::latency::{HistogramChart, HIST_H, HIST_W};
use crate::model::panel::{profile_tabs, Tab, ViewKind};
use crate::model::profile::{EventRow, SNAPSHOT_H, SNAPSHOT_W};
use crate::model::profile_links::{in_range_text, ChartSpan};
use crate::model::resources::{ResourcesPanel, RESOURCE_H, RESOURCE_W};
use crate::model::waterfall::{LANE_H, WATERFALL_W};
use crate::model::ProfileModel;
use crate::timeline::palette::Theme;

/// A latency histogram with percentile lines.
#[component]
fn HistogramView(
    /// The chart.
    chart: HistogramChart,
) -> impl IntoView {
    view! {
        <figure class="histogram" data-testid=format!("histogram-{}", chart.id) data-count=chart.count.to_string()>
            <figcaption>{chart.title} {format!(" ({} values)", chart.count)}</figcaption>
            <svg class="chart" viewBox=format!("0 0 {HIST_W} {HIST_H}") role="img"
                aria-label=format!("{} histogram with p50, p90, p99 and max", chart.title)>
                {chart.bars.iter().map(|b| view! {
                    <rect class="hist-bar" data-testid="hist-bin" data-value=b.count.to_string()
                        x=b.x.to_string() y=b.y.to_string() width=b.w.to_string() height=b.h.to_string()>
                        <title>{b.label.clone()}</title>
                    </rect>
                    <text class="hist-count" x=(b.x + b.w / 2.0).to_string() y=(b.y - 3.0).max(10.0).to_string() text-anchor="middle">{b.count}</text>
                }).collect_view()}
                {chart.markers.iter().map(|m| view! {
                    <line class=format!("pct-line pct-{}", m.name) x1=m.x.to_string() x2=m.x.to_string() y1="4" y2=HIST_H.to_string()>
                        <title>{m.label.clone()}</title>
                    </line>
                }).collect_view()}
            </svg>
            <div class="chart-axis" aria-hidden="true"><span>{chart.axis.0.clone()}</span><span>{chart.axis.1.clone()}</span></div>
            <ul class="tags">
                {chart.markers.iter().map(|m| view! {
                    <li class=format!("tag pct-tag pct-{}", m.name) data-testid=format!("{}-line-{}", chart.id, m.name) data-value=m.value.to_string()>{m.label.clone()}</li>
                }).collect_view()}
            </ul>
        </figure>
    }
}

/// A list of events shown apart from the requests.
#[component]
fn EventList(
    /// The section's `data-testid` (its `data-value` is the row count).
    list_testid: &'static str,
    /// Each row's `data-testid`.
    testid: &'static str,
    /// Heading.
    title: &'static str,
    /// Rows.
    rows: Vec<EventRow>,
) -> impl IntoView {
    view! {
        <section class="event-list panel" data-testid=list_testid data-value=rows.len().to_string()>
            <h3>{title} {format!(" ({})", rows.len())}</h3>
            {if rows.is_empty() {
                view! { <p class="muted">"None."</p> }.into_any()
            } else {
                view! {
                    <table>
                        <thead><tr><th scope="col">"line"</th><th scope="col">"request"</th><th scope="col">"phase"</th><th scope="col">"kind"</th><th scope="col">"detail"</th></tr></thead>
                        <tbody>
                            {rows.iter().map(|r| view! {
                                <tr data-testid=testid data-line=r.line.to_string() class:problem=r.blocking>
                                    <td class="num">{r.line}</td>
                                    <td>{r.request_id.clone()}</td>
                                    <td>{r.phase.clone()}</td>
                                    <td>{r.event_kind.clone()}</td>
                                    <td>{r.detail.clone()}{r.blocking.then_some(" (blocking)")}</td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                }.into_any()
            }}
        </section>
    }
}

/// The batched forwards of a profile: the distribution, then one row per forward (while a
/// range is selected, the forwards that ran in it, with their time inside it). A row stands
/// for the engine's forward and the requests' bars it ran.
#[component]
fn IterationsView(
    /// The tab's numbers.
    panel: IterationsPanel,
    /// The chart, linked.
    links: ProfileLinks,
) -> impl IntoView {
    let opt = |v: Option<(u64, u64)>, i: usize| {
        v.map(|p| if i == 0 { p.0 } else { p.1 }.to_string())
            .unwrap_or_default()
    };
    let panel = Arc::new(panel);
    let page = links.page;
    // A forward's row stands for its spans; a span that is, ran in or stands for the
    // forward marks it.
    let rows = {
        let (panel, chart) = (panel.clone(), links.chart.clone());
        let (of, by) = (panel.clone(), links.chart.clone());
        links.rows(
            move |i| {
                panel
                    .rows
                    .get(i)
                    .map(|r| chart.forward_spans(&r.key))
                    .unwrap_or_default()
            },
            move |i, s| {
                of.rows
                    .get(i)
                    .is_some_and(|r| by.forward_of(s) == Some(r.key.as_str()))
            },
        )
    };
    // (row, time inside the range) of the rows shown, and the range's line.
    let shown = {
        let panel = panel.clone();
        Memo::new(move |_| match page.time_range() {
            Some(r) => {
                let (rows, line) = panel.in_range(r);
                (
                    rows.into_iter()
                        .map(|(i, t)| (i, Some(t)))
                        .collect::<Vec<_>>(),
                    Some(line),
                )
            }
            None => ((0..panel.rows.len()).map(|i| (i, None)).collect(), None),
        })
    };
    let body = {
        let panel = panel.clone();
        move || {
            let (now, _) = shown.get();
            now.into_iter()
                .filter_map(|(i, inside)| panel.rows.get(i).map(|r| (i, r.clone(), inside)))
                .map(|(i, r, inside)| {
                    view! {
                        <tr data-testid="iteration-row" data-row=i.to_string() data-key=r.key.clone()
                            data-batch-size=r.batch_size.to_string()
                            data-prefill=r.prefill_tokens.to_string() data-decode=r.decode_tokens.to_string()
                            data-duration=r.duration_ns.to_string() data-start=r.start_ns.to_string()
                            data-inside=inside.map(|t| t.to_string()).unwrap_or_default()
                            data-line=r.line.to_string()
                            class:problem=r.status == "failure" {..rows.linked_attrs(i)}>
                            <td>{r.engine.clone()}</td>
                            <td class="num">{r.iteration}</td>
                            <td class="num">{r.start.clone()}</td>
                            <td class="num">{r.duration.clone()}</td>
                            {inside.map(|t| view! { <td class="num">{format_ns(t)}</td> })}
                            <td class="num">{r.batch_size}</td>
                            <td class="num">{r.prefill_tokens}</td>
                            <td class="num">{r.decode_tokens}</td>
                            <td class="num">{r.committed_tokens}</td>
                            <td class="num">{r.tokens_per_s.clone()}</td>
                            <td>{r.requests.clone()}</td>
                            <td>{r.status.clone()}</td>
                        </tr>
                    }
                })
                .collect_view()
        }
    };
    let headline = panel.headline.clone();
    view! {
        <section class="iterations panel" data-testid="iterations" data-value=panel.rows.len().to_string()
            data-batch-p50=opt(panel.batch_size, 0) data-batch-p90=opt(panel.batch_size, 1)
            data-duration-p50=opt(panel.duration_ns, 0) data-duration-p90=opt(panel.duration_ns, 1)>
            <h3>"Batched forwards"</h3>
            <p data-testid="iterations-headline">{headline}</p>
            {move || shown.with(|(rows, line)| line.clone().map(|l| view! {
                <p data-testid="iterations-in-range" data-value=rows.len().to_string()>{l}</p>
            }))}
            {(!panel.rows.is_empty()).then(|| view! {
                <table>
                    <thead>
                        <tr>
                            <th scope="col">"engine"</th>
                            <th scope="col">"iteration"</th>
                            <th scope="col" title="after the profile's time 0 (its first request's open or first forward), where the chart's axis puts it">"start (chart time)"</th>
                            <th scope="col">"duration"</th>
                            {move || page.range.get().is_some().then(|| view! { <th scope="col">"in range"</th> })}
                            <th scope="col">"batch"</th>
                            <th scope="col">"prefill"</th>
                            <th scope="col">"decode"</th>
                            <th scope="col">"committed"</th>
                            <th scope="col">"tokens/s"</th>
                            <th scope="col">"requests"</th>
                            <th scope="col">"status"</th>
                        </tr>
                    </thead>
                    <tbody {..rows.body_attrs()}>
                        {body}
                    </tbody>
                </table>
            })}
        </section>
    }
}

/// The resources of a profile: per kind, occupancy against capacity, holders, reasons and the
/// accounting errors flagged.
#[component]
fn ResourcesView(
    /// The tab's numbers.
    panel: ResourcesPanel,
    /// The chart, linked: a holder's row stands for its request's span.
    links: ProfileLinks,
) -> impl IntoView {
    view! {
        <section class="resources panel" data-testid="resources" data-value=panel.kinds.len().to_string()>
            <h3>"Resources"</h3>
            {panel.kinds.is_empty().then(|| view! { <p class="muted">"No resource events (a scheduler's `ResourcePool`, or `resource` events)."</p> })}
            {(panel.unreadable > 0).then(|| view! { <p class="muted">{format!("{} resource event(s) without a kind or a known action.", panel.unreadable)}</p> })}
            {panel.kinds.iter().map(|k| view! {
                <figure class="resource-kind" data-testid="resource-kind" data-kind=k.kind.clone()
                    data-capacity=k.capacity.map(|c| c.to_string()).unwrap_or_default()
                    data-peak=k.peak.map(|p| p.to_string()).unwrap_or_default()
                    data-deferrals=k.deferrals.to_string() data-rejections=k.rejections.to_string()>
                    <figcaption><strong>{k.kind.clone()}</strong>": "{k.summary.clone()}</figcaption>
                    <ul class="legend"><li><span class="swatch res-level"></span>"in use"</li><li><span class="swatch res-capacity"></span>"capacity"</li></ul>
                    <svg class="chart" viewBox=format!("0 0 {RESOURCE_W} {RESOURCE_H}") preserveAspectRatio="none" role="img"
                        aria-label=format!("{} in use over time against its capacity", k.kind)>
                        {k.capacity_y.clone().map(|y| view! {
                            <line class="res-capacity" x1="0" x2=RESOURCE_W.to_string() y1=y.clone() y2=y></line>
                        })}
                        <path class="res-level" d=k.path.clone()></path>
                    </svg>
                    <div class="chart-axis" aria-hidden="true"><span>"0"</span><span>{format!("top {}", k.axis.0)}</span><span>{k.axis.1.clone()}</span></div>
                    {(!k.problems.is_empty()).then(|| view! {
                        <ul class="resource-problems">
                            {k.problems.iter().map(|p| view! {
                                <li class="problem" data-testid="resource-problem" data-kind=p.kind data-holder=p.holder.clone()>
                                    <strong>{p.kind}": "</strong>{p.text.clone()}
                                </li>
                            }).collect_view()}
                        </ul>
                    })}
                    {(!k.reasons.is_empty()).then(|| view! {
                        <ul class="resource-reasons">
                            {k.reasons.iter().map(|r| view! { <li data-testid="resource-reason">{r.clone()}</li> }).collect_view()}
                        </ul>
                    })}
                    {
                        // A holder's row stands for its request's span; any span of the
                        // request marks it.
                        let holders: Arc<Vec<String>> = Arc::new(k.holders.iter().map(|h| h.holder.clone()).collect());
                        let (chart, by, of) = (links.chart.clone(), links.chart.clone(), holders.clone());
                        let rows = links.rows(
                            move |i| holders.get(i).map(|h| chart.request_spans(h)).unwrap_or_default(),
                            move |i, s| of.get(i).is_some_and(|h| by.request_of(s) == Some(h.as_str())),
                        );
                                            view! {
                    <table>
                        <thead><tr><th scope="col">"request"</th><th scope="col">"reserved"</th><th scope="col">"committed"</th><th scope="col">"released"</th><th scope="col">"rolled back"</th><th scope="col">"held at end"</th><th scope="col">"deferred"</th><th scope="col">"rejected"</th></tr></thead>
                        <tbody {..rows.body_attrs()}>
                            {k.holders.iter().enumerate().map(|(i, h)| {
                                view! {
                                <tr data-testid="resource-holder" data-row=i.to_string() data-holder=h.holder.clone() data-held=h.held.to_string()
                                    data-deferrals=h.deferrals.to_string() class:problem=h.leaked {..rows.linked_attrs(i)}>
                                    <td>{h.holder.clone()}</td>
                                    <td class="num">{h.reserved}</td>
                                    <td class="num">{h.committed}</td>
                                    <td class="num">{h.released}</td>
                                    <td class="num">{h.rolled_back}</td>
                                    <td class="num">{h.held}</td>
                                    <td class="num">{h.deferrals}</td>
                                    <td class="num">{h.rejections}</td>
                                </tr>
                            }}).collect_view()}
                        </tbody>
                    </table>
                        }
                    }
                </figure>
            }).collect_view()}
        </section>
    }
}

/// An inference profile as an application: a compact header, every request and engine on the
/// flame chart (a lane group per engine's batched forwards, then one per request by worker
/// thread, on one time axis, the memory snapshots as the memory lane), and the tabs Findings,
/// Requests (the table, each request's waterfall, errors and diagnostic-only events),
/// Iterations, Resources, Latency, Modules and Memory.
#[component]
pub fn ProfileView(
    /// The profile's view models.
    model: Arc<ProfileModel>,
    /// The opened file's name.
    file_name: String,
    /// Light or dark.
    theme: Signal<Theme>,
) -> impl IntoView {
    let (detail, rate) = model.settings.clone();
    let tabs = profile_tabs(
        !model.iterations.rows.is_empty(),
        !model.resources.kinds.is_empty() || model.resources.unreadable > 0,
    );
    let page = PageState::with_tabs(ViewKind::Profile, tabs, &file_name);
    provide_context(page);
    let groups: Arc<Vec<ChartGroup>> = Arc::new(
        model
            .chart
            .groups
            .iter()
            .map(|g| ChartGroup::new(g.label.clone(), Arc::new(g.model.clone())))
            .collect(),
    );
    let offsets: Vec<i64> = model.chart.groups.iter().map(|g| g.offset_ns).collect();
    let colours = Colours::by_pass(&groups);
    let findings = Arc::new(model.findings.clone());
    let links = ProfileLinks {
        chart: model.chart.clone(),
        groups: Arc::new(groups.iter().map(|g| g.ctx.clone()).collect()),
        page,
    };
    provide_context(links.clone());
    let content = {
        let model = model.clone();
        let findings = findings.clone();
        let links = links.clone();
        Callback::new(move |tab: Tab| profile_tab(tab, &model, &findings, &links))
    };
    let details = {
        let links = links.clone();
        ViewFn::from(move || view! { <ProfileSpanDetails links=links.clone() /> })
    };
    view! {
        <section class="app-view" data-testid="document" data-file=file_name.clone() data-format="profile">
            <header class="doc-header">
                <div class="run-header doc-line">
                    <h2>"Inference profile " <span class="file-name">{file_name.clone()}</span></h2>
                    <span data-testid="profile-detail-level" data-value=detail.clone()>"detail level " <strong>{detail.clone()}</strong></span>
                    " · "
                    <span data-testid="profile-sample-rate" data-value=rate.clone()>"sample rate " <strong>{rate.clone()}</strong></span>
                    <Diagnostics panel=model.diagnostics.clone() collapsed=true />
                    <FindingsCount panel=findings.clone() />
                </div>
                <div class="doc-line">
                    <SummaryCards cards=model.cards.clone() />
                </div>
            </header>
            <div class="chart-area">
                {if groups.is_empty() {
                    view! { <p class="muted chart-empty" data-testid="profile-chart-empty">"Nothing to draw: no request or engine has a timed span, stage or module span."</p> }.into_any()
                } else {
                    view! {
                        <FlameChart groups=groups.clone() offsets=Signal::derive(move || offsets.clone()) colours=colours theme=theme
                            files=file_name.clone() page=page>
                            <span class="muted">"engines' forwards, then one lane group per request, by thread"</span>
                        </FlameChart>
                    }.into_any()
                }}
            </div>
            <TabPanel page=page content=content details=details />
        </section>
    }
}

/// The selected span's details: only what a profile's span has
/// ([`ProfileChart::span_fields`]), its children one click away.
#[component]
fn ProfileSpanDetails(
    /// The chart, linked.
    links: ProfileLinks,
) -> impl IntoView {
    let chart = links.chart.clone();
    move || {
        match links.selected() {
        None => view! {
            <section class="details" data-testid="span-details" aria-label="selected span">
                <p class="muted">"Click a span in the timeline or a row in a table to see its details."</p>
            </section>
        }
        .into_any(),
        Some(s) => {
            let fields = chart.span_fields(s);
            let children: Vec<(u32, String, u64)> = chart
                .groups
                .get(s.group)
                .map(|g| {
                    g.model
                        .doc
                        .tree
                        .children(s.span as usize)
                        .iter()
                        .filter_map(|&c| {
                            let span = g.model.doc.spans.get(c as usize)?;
                            let label = span.module.as_deref().unwrap_or(&span.name).to_string();
                            Some((c, label, span.duration_or_zero()))
                        })
                        .collect()
                })
                .unwrap_or_default();
            let links = links.clone();
            let show = links.clone();
            view! {
                <section class="details" data-testid="span-details" aria-label="selected span">
                    <div class="table-bar">
                        <h3>"Span details"</h3>
                        <button type="button" data-testid="zoom-to-span" on:click=move |_| show.show(s)>
                            "Show in timeline"
                        </button>
                    </div>
                    <div class="details-grid">
                        <dl class="fields">
                            {fields.into_iter().map(|(k, v)| view! { <div data-field=k><dt>{k}</dt><dd>{v}</dd></div> }).collect_view()}
                        </dl>
                        <div>
                            <h4>{format!("Children ({})", children.len())}</h4>
                            <ul class="children">
                                {children.into_iter().map(|(c, name, dur)| {
                                    let links = links.clone();
                                    let child = ChartSpan { group: s.group, span: c };
                                    view! {
                                        <li>
                                            <button type="button" class="link" on:click=move |_| links.show(child)>
                                                {name}
                                            </button>
                                            " " {format_ns(dur)}
                                        </li>
                                    }
                                }).collect_view()}
                            </ul>
                        </div>
                    </div>
                </section>
            }
            .into_any()
        }
    }
    }
}

/// The request table (while a range is selected, the requests that ran in it, with their
/// time inside it); a row stands for its request's span, and any span of a request marks its
/// row.
#[component]
fn RequestTable(
    /// The profile's view models.
    model: Arc<ProfileModel>,
    /// The chart, linked.
    links: ProfileLinks,
) -> impl IntoView {
    let has_modules = model.modules.has_module_events();
    let page = links.page;
    // A request's row stands for its span; any span of the request marks it.
    let rows = {
        let (model, chart) = (model.clone(), links.chart.clone());
        let (of, by) = (model.clone(), links.chart.clone());
        links.rows(
            move |i| {
                model
                    .requests
                    .get(i)
                    .map(|r| chart.request_spans(&r.request_id))
                    .unwrap_or_default()
            },
            move |i, s| {
                of.requests
                    .get(i)
                    .is_some_and(|r| by.request_of(s) == Some(r.request_id.as_str()))
            },
        )
    };
    let shown = {
        let model = model.clone();
        let chart = links.chart.clone();
        Memo::new(move |_| match page.time_range() {
            Some(r) => {
                let rows =
                    chart.requests_in(model.requests.iter().map(|q| q.request_id.as_str()), r);
                let line = in_range_text(rows.len(), model.requests.len(), "requests");
                (
                    rows.into_iter()
                        .map(|(i, t)| (i, Some(t)))
                        .collect::<Vec<_>>(),
                    Some(line),
                )
            }
            None => ((0..model.requests.len()).map(|i| (i, None)).collect(), None),
        })
    };
    let body = move || {
        let (now, _) = shown.get();
        now.into_iter()
            .filter_map(|(i, inside)| model.requests.get(i).map(|r| (i, r.clone(), inside)))
            .map(|(i, r, inside)| {
                let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
                view! {
                    <tr class=r.status data-testid="request-row" data-row=i.to_string()
                        data-request=r.request_id.clone()
                        data-status=r.status data-duration=opt(r.duration_us) data-ttft=opt(r.ttft_us)
                        data-itl=opt(r.itl_us_avg) data-tokens=r.output_tokens.clone()
                        data-forwards=opt(r.forward_calls) data-module-spans=opt(r.module_spans)
                        data-inside=opt(inside) {..rows.linked_attrs(i)}>
                        <td>{r.request_id.clone()}</td>
                        <td>{r.status}</td>
                        <td>{r.model.clone()}</td>
                        <td>{r.backend.clone()}</td>
                        <td>{r.phases.clone()}</td>
                        <td class="num">{r.duration.clone()}</td>
                        {inside.map(|t| view! { <td class="num">{format_ns(t)}</td> })}
                        <td class="num">{r.ttft.clone()}</td>
                        <td class="num">{r.output_tokens.clone()}</td>
                        <td class="num">{r.itl_avg.clone()}</td>
                        <td class="num">
                            {r.event_count}
                            {(r.invalid_event_count > 0)
                                .then(|| format!(" ({} invalid)", r.invalid_event_count))}
                        </td>
                        {has_modules.then(|| view! {
                            <td class="num">{opt(r.forward_calls)}</td>
                            <td class="num">{opt(r.module_spans)}</td>
                        })}
                    </tr>
                }
            })
            .collect_view()
    };
    view! {
        <section class="requests" data-testid="request-table">
            <h3>"Requests"</h3>
            {move || shown.with(|(rows, line)| line.clone().map(|l| view! {
                <p data-testid="requests-in-range" data-value=rows.len().to_string()>
                    {l} " Their other numbers are the whole requests'."
                </p>
            }))}
            <table>
                <thead>
                    <tr>
                        <th scope="col">"request"</th>
                        <th scope="col">"status"</th>
                        <th scope="col">"model"</th>
                        <th scope="col">"backend"</th>
                        <th scope="col">"phases"</th>
                        <th scope="col">"duration"</th>
                        {move || page.range.get().is_some().then(|| view! { <th scope="col">"in range"</th> })}
                        <th scope="col">"TTFT"</th>
                        <th scope="col">"tokens"</th>
                        <th scope="col">"mean ITL"</th>
                        <th scope="col">"events"</th>
                        {has_modules.then(|| view! { <th scope="col">"forward calls"</th><th scope="col">"module spans"</th> })}
                    </tr>
                </thead>
                <tbody {..rows.body_attrs()}>
                    {body}
                </tbody>
            </table>
        </section>
    }
}

/// The memory snapshots (while a range is selected, those taken in it). A row stands for the
/// spans of its request (or engine) running when it was taken, the innermost selected; a
/// selected span marks the snapshots its owner took while it ran.
#[component]
fn SnapshotsView(
    /// The profile's view models.
    model: Arc<ProfileModel>,
    /// The chart, linked.
    links: ProfileLinks,
) -> impl IntoView {
    if model.snapshots.rows.is_empty() {
        return view! {
            <section class="snapshots panel" data-testid="snapshots">
                <h3>"Memory snapshots"</h3>
                <p class="muted">"No memory snapshots (not captured: a request's `memory` events)."</p>
            </section>
        }
        .into_any();
    }
    let page = links.page;
    let all = model.snapshots.clone();
    let chart_now = {
        let all = all.clone();
        Memo::new(move |_| match page.time_range() {
            Some(r) => Arc::new(all.in_range(r)),
            None => Arc::new(all.clone()),
        })
    };
    let rows = {
        let (model, chart) = (model.clone(), links.chart.clone());
        let (of, by) = (model.clone(), links.chart.clone());
        links.rows(
            move |i| {
                model
                    .snapshots
                    .rows
                    .get(i)
                    .map(|r| chart.spans_at(&r.request_id, r.at_ns))
                    .unwrap_or_default()
            },
            move |i, s| {
                of.snapshots
                    .rows
                    .get(i)
                    .is_some_and(|r| by.holds_snapshot(s, &r.request_id, r.at_ns))
            },
        )
    };
    let total = all.rows.len();
    let body = move || {
        let now = chart_now.get();
        now.rows
            .iter()
            .map(|r| {
                // Its index among all snapshots (the rows' `data-row`).
                let i = all.rows.iter().position(|a| a.line == r.line).unwrap_or(0);
                let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
                view! {
                    <tr data-testid="snapshot-row" data-row=i.to_string() data-line=r.line.to_string()
                        data-at=r.at_ns.to_string() data-current=opt(r.current_bytes)
                        data-high-water=opt(r.high_water_bytes)
                        data-available=r.available_bytes.map(|v| v.to_string()).unwrap_or_default() {..rows.linked_attrs(i)}>
                        <td class="num">{r.at.clone()}</td>
                        <td>{r.request_id.clone()}</td>
                        <td>{r.scope.clone()}</td>
                        <td class="num">{r.texts[0].clone()}</td>
                        <td class="num">{r.texts[1].clone()}</td>
                        <td class="num">{r.texts[2].clone()}</td>
                        <td class="num">{r.line}</td>
                    </tr>
                }
            })
            .collect_view()
    };
    view! {
        <section class="snapshots panel" data-testid="snapshots">
            <h3>"Memory snapshots"</h3>
            {move || page.range.get().is_some().then(|| {
                let n = chart_now.with(|c| c.rows.len());
                view! { <p data-testid="snapshots-in-range" data-value=n.to_string()>{in_range_text(n, total, "snapshots")}</p> }
            })}
            {move || {
                let s = chart_now.get();
                (!s.rows.is_empty()).then(|| view! {
                    <ul class="legend"><li><span class="swatch snap-current"></span>"current"</li><li><span class="swatch snap-high"></span>"high water"</li></ul>
                    <svg class="chart" viewBox=format!("0 0 {SNAPSHOT_W} {SNAPSHOT_H}") preserveAspectRatio="none" role="img" aria-label="memory snapshots over time: current and high water">
                        <path class="snap-high" d=s.high_water_path.clone()></path>
                        <path class="snap-current" d=s.current_path.clone()></path>
                        {s.current_points.iter().map(|(x, y)| view! { <circle class="snap-dot" cx=x.clone() cy=y.clone() r="3"></circle> }).collect_view()}
                    </svg>
                    <div class="chart-axis" aria-hidden="true"><span>{s.start.clone()}</span><span>{format!("top {}", s.max)}</span><span>{s.extent.clone()}</span></div>
                })
            }}
            <table>
                <thead><tr><th scope="col" title="after the profile's time 0, where the chart's axis puts it">"time (chart time)"</th><th scope="col">"request"</th><th scope="col">"scope"</th><th scope="col">"current"</th><th scope="col">"high water"</th><th scope="col">"available"</th><th scope="col">"line"</th></tr></thead>
                <tbody {..rows.body_attrs()}>
                    {body}
                </tbody>
            </table>
        </section>
    }
    .into_any()
}

/// The content of a profile's tab.
fn profile_tab(
    tab: Tab,
    model: &Arc<ProfileModel>,
    findings: &Arc<FindingsPanel>,
    links: &ProfileLinks,
) -> AnyView {
    let model = model.clone();
    let links = links.clone();
    match tab {
        Tab::Findings => view! { <FindingsView panel=findings.clone() /> }.into_any(),
        Tab::Requests => view! {
            <RequestTable model=model.clone() links=links.clone() />
            <section class="waterfalls panel" data-testid="waterfalls">
                <h3>"Request waterfalls"</h3>
                <ul class="legend">
                    <li><span class="swatch ph-request"></span>"request"</li>
                    <li><span class="swatch ph-prefill"></span>"prefill"</li>
                    <li><span class="swatch ph-decode"></span>"decode"</li>
                    <li><span class="swatch ph-decode-scheduling"></span>"decode scheduling"</li>
                    <li><span class="swatch ph-decode-execution"></span>"decode execution"</li>
                    <li><span class="swatch ph-decode-postprocess"></span>"decode postprocess"</li>
                    <li><span class="swatch commit"></span>"token commit"</li>
                </ul>
                {model.waterfalls.iter().map(|w| view! {
                    <figure class="waterfall" data-testid="waterfall" data-request=w.request_id.clone()
                        data-commits=w.commit_count.to_string() data-stages=w.stage_count.to_string()>
                        <figcaption>{w.request_id.clone()} {format!(" — {} tokens, {} decode-stage intervals, 0 – {}", w.commit_count, w.stage_count, w.extent)}</figcaption>
                        <div class="waterfall-body">
                            <div class="lane-names" aria-hidden="true">
                                {w.lanes.iter().map(|l| view! { <div class="lane-name">{l.clone()}</div> }).collect_view()}
                            </div>
                            <svg class="chart" viewBox=format!("0 0 {WATERFALL_W} {}", w.height) preserveAspectRatio="none"
                                style:height=format!("{}px", w.height) role="img"
                                aria-label=format!("waterfall of request {}", w.request_id)>
                                {w.blocks.iter().map(|b| view! {
                                    <rect class=format!("wf-block {}", b.class) x=b.x.to_string() width=b.w.to_string()
                                        y=(b.lane as f64 * LANE_H + 2.0).to_string() height=(LANE_H - 4.0).to_string()>
                                        <title>{b.label.clone()}</title>
                                    </rect>
                                }).collect_view()}
                                {w.ticks.iter().map(|t| view! {
                                    <line class=format!("wf-tick {}", t.class) x1=t.x.to_string() x2=t.x.to_string()
                                        y1=(t.lane as f64 * LANE_H + 1.0).to_string() y2=((t.lane + 1) as f64 * LANE_H - 1.0).to_string()>
                                        <title>{t.label.clone()}</title>
                                    </line>
                                }).collect_view()}
                            </svg>
                        </div>
                    </figure>
                }).collect_view()}
            </section>
            <div class="tables">
                <EventList list_testid="profile-failures" testid="profile-failure" title="Errors and failures" rows=model.failures.clone() />
                <EventList list_testid="profile-diagnostic-only-events" testid="profile-diagnostic-only" title="Diagnostic-only events" rows=model.diagnostic_only.clone() />
            </div>
        }
        .into_any(),
        Tab::Iterations => view! { <IterationsView panel=model.iterations.clone() links=links /> }.into_any(),
        Tab::Resources => view! { <ResourcesView panel=model.resources.clone() links=links /> }.into_any(),
        Tab::Latency => view! {
            <section class="latency panel" data-testid="latency">
                <h3>"Latency distributions"</h3>
                <div class="histograms">
                    {model.ttft.clone().map(|c| view! { <HistogramView chart=c /> })}
                    {model.itl.clone().map(|c| view! { <HistogramView chart=c /> })}
                    {(model.ttft.is_none() && model.itl.is_none()).then(|| view! { <p class="muted">"No token timing in this profile."</p> })}
                </div>
            </section>
        }
        .into_any(),
        Tab::Modules => view! { <ProfileModulesView model=model.clone() /> }.into_any(),
        Tab::Memory => view! { <SnapshotsView model=model.clone() links=links /> }.into_any(),
        _ => ().into_any(),
    }
}
