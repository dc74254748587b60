//! The memory panel.

use leptos::prelude::*;

use super::TraceContext;

/// The peak (where, when, by category), device peaks and the largest allocations live at the
/// peak; a row's span is selectable.
#[component]
pub fn MemoryView() -> impl IntoView {
    let Some(ctx) = use_context::<TraceContext>() else {
        return ().into_any();
    };
    let m = ctx.model.memory.clone();
    let Some(peak) = m.peak.clone() else {
        return view! { <section class="memory" data-testid="memory"><h3>"Memory"</h3><p class="muted">"No memory events."</p></section> }.into_any();
    };
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
                <thead><tr><th scope="col">"tensor"</th><th scope="col">"bytes"</th><th scope="col">"category"</th><th scope="col">"allocated in"</th></tr></thead>
                <tbody>
                    {m.live.iter().map(|l| {
                        let ctx = ctx.clone();
                        let span = l.span;
                        view! {
                            <tr>
                                <td>{l.tensor_id.clone()}</td>
                                <td class="num">{l.bytes.clone()}</td>
                                <td>{l.category}</td>
                                <td>
                                    {match span {
                                        Some(i) => view! {
                                            <button type="button" class="link" on:click=move |_| ctx.select_and_show(i)>{l.origin.clone()}</button>
                                        }.into_any(),
                                        None => view! { <span>{l.origin.clone()}</span> }.into_any(),
                                    }}
                                </td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        </section>
    }
    .into_any()
}
