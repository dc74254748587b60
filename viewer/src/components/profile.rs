//! An inference profile: headline cards, diagnostics and the request table.

use std::sync::Arc;

use leptos::prelude::*;

use super::cards::SummaryCards;
use super::diagnostics::Diagnostics;
use crate::model::ProfileModel;

/// Requests, TTFT and ITL of an inference profile.
#[component]
pub fn ProfileView(
    /// The profile's view models.
    model: Arc<ProfileModel>,
    /// The opened file's name.
    file_name: String,
) -> impl IntoView {
    view! {
        <section data-testid="document" data-file=file_name.clone() data-format="profile">
            <section class="run-header">
                <h2>"Inference profile " <span class="file-name">{file_name.clone()}</span></h2>
            </section>
            <Diagnostics panel=model.diagnostics.clone() />
            <SummaryCards cards=model.cards.clone() />
            <section class="requests" data-testid="request-table">
                <h3>"Requests"</h3>
                <table>
                    <thead>
                        <tr>
                            <th scope="col">"request"</th>
                            <th scope="col">"status"</th>
                            <th scope="col">"model"</th>
                            <th scope="col">"phases"</th>
                            <th scope="col">"duration"</th>
                            <th scope="col">"TTFT"</th>
                            <th scope="col">"tokens"</th>
                            <th scope="col">"mean ITL"</th>
                            <th scope="col">"events"</th>
                        </tr>
                    </thead>
                    <tbody>
                        {model
                            .requests
                            .iter()
                            .map(|r| {
                                view! {
                                    <tr class=r.status>
                                        <td>{r.request_id.clone()}</td>
                                        <td>{r.status}</td>
                                        <td>{r.model.clone()}</td>
                                        <td>{r.phases.clone()}</td>
                                        <td class="num">{r.duration.clone()}</td>
                                        <td class="num">{r.ttft.clone()}</td>
                                        <td class="num">{r.output_tokens.clone()}</td>
                                        <td class="num">{r.itl_avg.clone()}</td>
                                        <td class="num">
                                            {r.event_count}
                                            {(r.invalid_event_count > 0)
                                                .then(|| format!(" ({} invalid)", r.invalid_event_count))}
                                        </td>
                                    </tr>
                                }
                            })
                            .collect_view()}
                    </tbody>
                </table>
            </section>
        </section>
    }
}
