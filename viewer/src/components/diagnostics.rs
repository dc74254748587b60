//! The diagnostics panel and the untrusted banner.

use leptos::prelude::*;

use super::header::{close_on_escape, HEADER_POPOVERS};
use crate::model::diagnostics::DiagnosticsPanel;

/// Every diagnostic with its line (`data-testid="diagnostic"`, `data-line`, `data-severity`);
/// a banner above everything when the file has errors.
#[component]
pub fn Diagnostics(
    /// The panel's rows and counts.
    panel: DiagnosticsPanel,
    /// Closed until clicked (a view's header, where the list opens over the chart); else open
    /// when there is anything to list.
    #[prop(optional)]
    collapsed: bool,
) -> impl IntoView {
    let untrusted = panel.is_untrusted();
    let headline = panel.headline();
    let empty = panel.rows.is_empty();
    view! {
        {untrusted
            .then(|| {
                view! {
                    <div class="untrusted" role="alert" data-testid="untrusted-banner">
                        "Untrusted file: it has errors (" {headline.clone()}
                        "). Everything readable is shown, but numbers may be incomplete."
                    </div>
                }
            })}
        <details class="diagnostics" open=!empty && !collapsed name=collapsed.then_some(HEADER_POPOVERS)
            data-testid="diagnostics" on:keydown=move |ev| close_on_escape(&ev)>
            <summary>"Diagnostics: " {if empty { "none".to_string() } else { headline }}</summary>
            <table>
                <thead>
                    <tr>
                        <th scope="col">"line"</th>
                        <th scope="col">"severity"</th>
                        <th scope="col">"category"</th>
                        <th scope="col">"message"</th>
                    </tr>
                </thead>
                <tbody>
                    {panel
                        .rows
                        .into_iter()
                        .map(|r| {
                            view! {
                                <tr
                                    data-testid="diagnostic"
                                    data-line=r.line.to_string()
                                    data-severity=r.severity
                                    class=r.severity
                                >
                                    <td class="num">{r.line}</td>
                                    <td>{r.severity}</td>
                                    <td>{r.category}</td>
                                    <td>{r.message}</td>
                                </tr>
                            }
                        })
                        .collect_view()}
                </tbody>
            </table>
        </details>
    }
}
