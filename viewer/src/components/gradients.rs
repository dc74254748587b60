//! The gradient panel.

use leptos::prelude::*;

use super::TraceContext;

/// Gradient counts per state and the parameters in review order (problems first).
#[component]
pub fn GradientView() -> impl IntoView {
    let Some(ctx) = use_context::<TraceContext>() else {
        return ().into_any();
    };
    let g = ctx.model.gradients.clone();
    if g.total == 0 {
        return ().into_any();
    }
    view! {
        <section class="gradients" data-testid="gradients">
            <h3>"Gradients"</h3>
            <ul class="tags">
                {g.counts.iter().map(|(s, n)| view! {
                    <li class="tag" data-testid=format!("gradients-{s}") data-value=n.to_string()>{*s} " " {*n}</li>
                }).collect_view()}
            </ul>
            <table>
                <thead><tr><th scope="col">"parameter"</th><th scope="col">"state"</th><th scope="col">"norm"</th></tr></thead>
                <tbody>
                    {g.rows.iter().map(|r| view! {
                        <tr class:problem=r.problem>
                            <td>{r.parameter.clone()}</td>
                            <td>{r.state}</td>
                            <td class="num">{r.norm.clone()}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
            {(g.total > g.rows.len()).then(|| view! { <p class="muted">{format!("{} more not shown", g.total - g.rows.len())}</p> })}
        </section>
    }
    .into_any()
}
