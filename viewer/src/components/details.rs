//! The details of the selected span.

use leptos::prelude::*;

use candle_trace_schema::analysis::units::{format_bytes, format_ns};

use super::TraceContext;
use crate::model::spans::span_details;

/// Fields, self time, children, ops and allocations of the selected span.
#[component]
pub fn SpanDetailsPanel() -> impl IntoView {
    let Some(ctx) = use_context::<TraceContext>() else {
        return ().into_any();
    };
    let details = {
        let ctx = ctx.clone();
        move || {
            let i = ctx.selected.get()?;
            span_details(&ctx.model.doc, ctx.model.index(), i as usize)
        }
    };
    view! {
        <section class="details" data-testid="span-details" aria-label="selected span">
            {move || match details() {
                None => view! { <p class="muted">"Click a span in the timeline or a row in a table to see its details."</p> }.into_any(),
                Some(d) => {
                    let ctx = ctx.clone();
                    let index = d.index;
                    let ctx_zoom = ctx.clone();
                    view! {
                        <div class="table-bar">
                            <h3>"Span details"</h3>
                            <button type="button" data-testid="zoom-to-span" on:click=move |_| ctx_zoom.select_and_show(index)>
                                "Show in timeline"
                            </button>
                        </div>
                        <div class="details-grid">
                            <dl class="fields">
                                {d.fields.into_iter().map(|(k, v)| view! { <div><dt>{k}</dt><dd>{v}</dd></div> }).collect_view()}
                                <div><dt>"self time"</dt><dd>{format_ns(d.self_ns)}</dd></div>
                                <div>
                                    <dt>"memory allocated"</dt>
                                    <dd>
                                        {format!(
                                            "{} in {} allocation(s); with descendants {} in {}",
                                            format_bytes(d.alloc_bytes),
                                            d.alloc_count,
                                            format_bytes(d.alloc_bytes_inclusive),
                                            d.alloc_count_inclusive,
                                        )}
                                    </dd>
                                </div>
                            </dl>
                            <div>
                                <h4>{format!("Children ({})", d.children.len())}</h4>
                                <ul class="children">
                                    {d.children.into_iter().map(|(c, name, dur)| {
                                        let ctx = ctx.clone();
                                        view! {
                                            <li>
                                                <button type="button" class="link" on:click=move |_| ctx.select_and_show(c)>
                                                    {name}
                                                </button>
                                                " " {format_ns(dur)}
                                            </li>
                                        }
                                    }).collect_view()}
                                </ul>
                                <h4>{format!("Ops ({})", d.ops.len())}</h4>
                                <table class="ops-in-span">
                                    <thead><tr><th scope="col">"op"</th><th scope="col">"shape"</th><th scope="col">"dtype"</th><th scope="col">"duration"</th><th scope="col">"output"</th></tr></thead>
                                    <tbody>
                                        {d.ops.into_iter().map(|o| view! {
                                            <tr>
                                                <td>{o.op_name}</td>
                                                <td>{o.shape}</td>
                                                <td>{o.dtype}</td>
                                                <td class="num">{format_ns(o.duration_ns)}</td>
                                                <td class="num">{o.output_bytes.map_or_else(|| String::from("–"), format_bytes)}</td>
                                            </tr>
                                        }).collect_view()}
                                    </tbody>
                                </table>
                            </div>
                        </div>
                    }.into_any()
                }
            }}
        </section>
    }
    .into_any()
}
