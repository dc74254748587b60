//! The memory panel.

use leptos::prelude::*;

use super::missing::MissingPanel;
use super::rows::LinkedRows;
use super::{PageState, TraceContext};
use crate::model::missing::Panel;
use crate::model::range::MemoryRange;

/// The peak (where, when, by category), device peaks and the largest allocations live at the
/// peak; an allocation's row links to the span it was allocated in ([`LinkedRows`]).
#[component]
pub fn MemoryView() -> impl IntoView {
    if let Some(page) = use_context::<PageState>() {
        // The whole run's numbers give way to the range's while one is selected.
        return (move || {
            page.range
                .get()
                .is_none()
                .then(|| view! { <MemoryRunView /> })
        })
        .into_any();
    }
    view! { <MemoryRunView /> }.into_any()
}

/// The whole run's memory numbers.
#[component]
fn MemoryRunView() -> impl IntoView {
    let Some(ctx) = use_context::<TraceContext>() else {
        return ().into_any();
    };
    let m = ctx.model.memory().clone();
    let Some(peak) = m.peak.clone() else {
        let not_captured = ctx.model.capture.not_captured.memory.clone();
        return view! {
            <MissingPanel panel=Panel::Memory class="memory" testid="memory" title="Memory" not_captured=not_captured />
        }
        .into_any();
    };
    let links = LinkedRows::of_trace(
        &ctx,
        m.live
            .iter()
            .map(|l| l.span.into_iter().collect())
            .collect(),
    );
    view! {
        <section class="memory" data-testid="memory">
            <h3>"Memory"</h3>
            <p>
                "Peak " <strong>{peak}</strong>
                {(!m.by_category.is_empty()).then(|| {
                    let parts: Vec<String> = m.by_category.iter().map(|(c, b)| format!("{c} {b}")).collect();
                    format!(": {}", parts.join(", "))
                })}
            </p>
            <table>
                <thead><tr><th scope="col">"device"</th><th scope="col">"peak"</th><th scope="col">"allocs / frees"</th></tr></thead>
                <tbody>
                    {m.devices.iter().map(|d| view! {
                        <tr data-testid="memory-device" data-value=d.peak_bytes.to_string()>
                            <td>{d.device.clone()}</td>
                            <td>{d.peak.clone()}</td>
                            <td class="num">{d.allocs_frees.clone()}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
            <h4>{format!("Largest of {} allocations live at the peak", m.live_count)}</h4>
            <table>
                <thead><tr><th scope="col">"tensor"</th><th scope="col">"bytes"</th><th scope="col">"category"</th><th scope="col" title="the module (or span) the allocation was made in, then its op">"allocated in"</th></tr></thead>
                <tbody {..links.body_attrs()}>
                    {m.live.iter().enumerate().map(|(pos, l)| view! {
                        <tr data-testid="live-row" data-row=pos.to_string() data-tensor=l.tensor_id.clone() {..links.linked_attrs(pos)}>
                            <td>{l.tensor_id.clone()}</td>
                            <td class="num">{l.bytes.clone()}</td>
                            <td>{l.category}</td>
                            <td>{l.origin.clone()}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </section>
    }
    .into_any()
}

/// x in viewBox units of a click on an SVG chart `CHART_W` wide.
fn chart_x(ev: &web_sys::MouseEvent, view_w: f64) -> Option<f64> {
    use wasm_bindgen::JsCast;
    let el = ev.current_target()?.dyn_into::<web_sys::Element>().ok()?;
    let rect = el.get_bounding_client_rect();
    (rect.width() > 0.0).then(|| (f64::from(ev.client_x()) - rect.left()) / rect.width() * view_w)
}

/// Per device: live bytes stacked by category with the peak marked, and device checkpoints
/// against the allocator's live bytes; clicking a chart (or a row's button) shows that moment
/// in the timeline.
#[component]
pub fn MemoryChartsView() -> impl IntoView {
    if let Some(page) = use_context::<PageState>() {
        return (move || {
            page.range
                .get()
                .is_none()
                .then(|| view! { <MemoryChartsRunView /> })
        })
        .into_any();
    }
    view! { <MemoryChartsRunView /> }.into_any()
}

/// The whole run's memory charts.
#[component]
fn MemoryChartsRunView() -> impl IntoView {
    use crate::model::memory_chart::{CHART_H, CHART_W};
    let Some(ctx) = use_context::<TraceContext>() else {
        return ().into_any();
    };
    let charts = ctx.model.memory_charts().clone();
    if charts.devices.is_empty() {
        return ().into_any();
    }
    let view_box = format!("0 0 {CHART_W} {CHART_H}");
    let labels = charts.time_labels();
    let show = {
        let ctx = ctx.clone();
        let charts = charts.clone();
        move |t: u64| {
            // The chart above the panel shows that moment.
            ctx.focus.set(Some(charts.focus(t)));
        }
    };
    let on_chart_click = {
        let charts = charts.clone();
        let show = show.clone();
        move |ev: web_sys::MouseEvent| {
            if let Some(x) = chart_x(&ev, CHART_W) {
                show(charts.ns_at(x));
            }
        }
    };
    let axis = move || {
        view! {
            <div class="chart-axis" aria-hidden="true">
                {labels.iter().map(|(_, l)| view! { <span>{l.clone()}</span> }).collect_view()}
            </div>
        }
    };
    view! {
        <section class="memory-charts panel" data-testid="memory-charts">
            <h3>"Memory over time"</h3>
            <ul class="legend" aria-label="categories">
                {crate::schema::format::events::TensorCategory::ALL.iter().map(|c| view! {
                    <li><span class=format!("swatch cat-{}", c.as_str())></span>{c.as_str()}</li>
                }).collect_view()}
                <li><span class="swatch used-line"></span>"device used (checkpoints)"</li>
                <li><span class="swatch live-line"></span>"allocator live"</li>
                <li><span class="swatch gap"></span>"unexplained"</li>
            </ul>
            {charts.devices.iter().map(|d| {
                let click = on_chart_click.clone();
                let click2 = on_chart_click.clone();
                let peak = d.peak_mark.clone();
                let show_peak = show.clone();
                let has_checkpoints = !d.checkpoints.is_empty();
                view! {
                    <div class="device-charts" data-testid="memory-chart" data-device=d.device.clone() data-peak=d.peak_bytes.to_string()>
                        <h4>{d.device.clone()} " — live bytes by category, peak " {d.peak.clone()}</h4>
                        {peak.clone().map(|p| {
                            let t = p.timestamp_ns;
                            view! {
                                <button type="button" class="link" data-testid="memory-peak" data-value=p.bytes.to_string()
                                    data-time=p.timestamp_ns.to_string() data-device=d.device.clone()
                                    on:click=move |_| show_peak(t)>
                                    {format!("{} on {} — show in timeline", p.label, d.device)}
                                </button>
                            }
                        })}
                        <svg class="chart" viewBox=view_box.clone() preserveAspectRatio="none" role="img"
                            aria-label=format!("live bytes on {} stacked by category; click to show that moment in the timeline", d.device)
                            on:click=click>
                            {d.layers.iter().filter(|l| !l.path.is_empty()).map(|l| view! {
                                <path class=format!("layer cat-{}", l.category) data-category=l.category d=l.path.clone()></path>
                            }).collect_view()}
                            {peak.map(|p| view! {
                                <line class="peak-line" x1=p.x.to_string() x2=p.x.to_string() y1="0" y2=CHART_H.to_string()></line>
                            })}
                        </svg>
                        {axis()}
                        {has_checkpoints.then(|| view! {
                            <h4>{d.device.clone()} " — device used vs allocator live"</h4>
                            <svg class="chart" viewBox=view_box.clone() preserveAspectRatio="none" role="img"
                                aria-label=format!("device checkpoints against allocator live bytes on {}", d.device)
                                on:click=click2>
                                <path class="gap" d=d.gaps_path.clone()></path>
                                <path class="live-line" d=d.live_path.clone()></path>
                                <path class="used-line" d=d.used_path.clone()></path>
                                <path class="used-dot" d=d.dots_path.clone()></path>
                            </svg>
                        })}
                    </div>
                }
            }).collect_view()}
            {(!charts.reconcile.is_empty()).then(|| {
                let max = charts.max_unexplained.clone();
                view! {
                    <h4>"Device memory not explained by recorded allocations"</h4>
                    {max.map(|m| view! {
                        <p data-testid="memory-unexplained-max" data-value=m.gap.unexplained_bytes.to_string()
                            data-time=m.gap.timestamp_ns.to_string() data-device=m.gap.device.clone()>
                            "Largest gap: " <strong>{m.unexplained.clone()}</strong>
                            {format!(" on {} at {} (device used {}, allocator live {})", m.gap.device, m.time, m.used, m.live)}
                        </p>
                    })}
                    <div class="reconcile-table">
                    <table>
                        <thead><tr>
                            <th scope="col">"time"</th><th scope="col">"device"</th><th scope="col">"device used"</th>
                            <th scope="col">"allocator live"</th><th scope="col">"unexplained"</th><th scope="col">"line"</th>
                        </tr></thead>
                        <tbody>
                            {charts.reconcile.iter().map(|r| {
                                let show = show.clone();
                                let t = r.gap.timestamp_ns;
                                view! {
                                    <tr data-testid="reconcile-row" data-value=r.gap.unexplained_bytes.to_string()
                                        data-time=r.gap.timestamp_ns.to_string() data-device=r.gap.device.clone()
                                        data-used=r.gap.used_bytes.to_string() data-live=r.gap.live_bytes.to_string()>
                                        <td><button type="button" class="link" on:click=move |_| show(t)>{r.time.clone()}</button></td>
                                        <td>{r.gap.device.clone()}</td>
                                        <td class="num">{r.used.clone()}</td>
                                        <td class="num">{r.live.clone()}</td>
                                        <td class="num">{r.unexplained.clone()}</td>
                                        <td class="num">{r.gap.line}</td>
                                    </tr>
                                }
                            }).collect_view()}
                        </tbody>
                    </table>
                    </div>
                }
            })}
        </section>
    }
    .into_any()
}

/// While a range is selected on the chart: each device's live-bytes peak inside it and the
/// memory events in it (`schema::analysis::range`).
#[component]
pub fn MemoryRangeView() -> impl IntoView {
    let (Some(ctx), Some(page)) = (use_context::<TraceContext>(), use_context::<PageState>())
    else {
        return ().into_any();
    };
    (move || {
        let r = page.time_range()?;
        let m = MemoryRange::of(&ctx.model.doc, &ctx.model.memory_curves, r);
        let e = m.events;
        Some(view! {
            <section class="memory-range panel" data-testid="memory-range"
                data-alloc-count=e.alloc_count.to_string() data-alloc-bytes=e.alloc_bytes.to_string()
                data-free-count=e.free_count.to_string()>
                <h3>"Memory in the range"</h3>
                <p>{m.events_text()}</p>
                {if m.devices.is_empty() {
                    view! { <p class="muted" data-testid="memory-range-none">"Nothing was live on any device during the range."</p> }.into_any()
                } else {
                    view! {
                        <table>
                            <thead><tr><th scope="col">"device"</th><th scope="col">"peak in the range"</th></tr></thead>
                            <tbody>
                                {m.devices.iter().map(|d| view! {
                                    <tr data-testid="memory-range-device" data-device=d.device.clone()
                                        data-value=d.peak_bytes.to_string() data-time=d.at_ns.to_string()>
                                        <td>{d.device.clone()}</td>
                                        <td>{d.text.clone()}</td>
                                    </tr>
                                }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any()
                }}
            </section>
        })
    })
    .into_any()
}
