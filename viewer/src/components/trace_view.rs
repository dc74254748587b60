//! One execution trace as an application: a compact header, the flame chart filling the
//! window, and the tab panel under it (Findings, Modules, Ops, Memory, Gradients, Phases,
//! Efficiency; for the steps of one run also Steps and the set's findings, around the step
//! shown in detail). The selected span's details sit beside the open tab.

use std::sync::Arc;

use leptos::prelude::*;

use super::capture::CaptureSourcesView;
use super::cards::SummaryCards;
use super::diagnostics::Diagnostics;
use super::efficiency::EfficiencyView;
use super::findings::FindingsView;
use super::gradients::GradientView;
use super::header::{FindingsCount, RunHeaderView};
use super::memory::{MemoryChartsView, MemoryRangeView, MemoryView};
use super::modules::ModulesTab;
use super::panel::TabPanel;
use super::phases::PhasesView;
use super::step_nav::StepsNav;
use super::steps::{StepsHeading, StepsView};
use super::tables::{OpTable, SpanTable};
use super::timeline::{ChartDetails, ChartGroup, Colours, FlameChart, PassLegend};
use super::{PageState, TabStates, TraceContext};
use crate::model::findings::FindingsPanel;
use crate::model::panel::{Tab, ViewKind};
use crate::model::steps::StepsModel;
use crate::model::TraceModel;
use crate::timeline::palette::Theme;

/// Everything about one execution trace; with `steps`, the step set it is the step shown in
/// detail of (the set's heading, findings and steps tab around this step's chart and tabs).
#[component]
pub fn TraceView(
    /// The document and its view models.
    model: Arc<TraceModel>,
    /// The opened file's name (or the set's title).
    file_name: String,
    /// Light or dark.
    theme: Signal<Theme>,
    /// The findings of the findings tab (the file's, or the step set's).
    findings: Arc<FindingsPanel>,
    /// The step set, when the trace is its step shown in detail.
    #[prop(optional)]
    steps: Option<Arc<StepsModel>>,
    /// The view's state, when it outlives this view (a step set's, shared by its steps).
    #[prop(optional)]
    page: Option<PageState>,
    /// The tabs' grouping and sort, when they outlive this view (a step set's).
    #[prop(optional)]
    tab_states: Option<TabStates>,
) -> impl IntoView {
    let kind = if steps.is_some() {
        ViewKind::Steps
    } else {
        ViewKind::Trace
    };
    let page = page.unwrap_or_else(|| PageState::new(kind, &file_name));
    provide_context(page);
    provide_context(tab_states.unwrap_or_else(TabStates::new));
    let ctx = TraceContext {
        model: model.clone(),
        selected: RwSignal::new(None),
        highlighted: RwSignal::new(Arc::new(Vec::new())),
        focus: RwSignal::new(None),
    };
    provide_context(ctx.clone());
    let nav = steps.as_ref().and_then(|_| use_context::<StepsNav>());
    if let Some(nav) = nav {
        nav.view_built(page, ctx.clone());
    }
    let groups = Arc::new(vec![ChartGroup {
        label: file_name.clone(),
        ctx,
    }]);
    let colours = Colours::by_pass(&groups);
    let format = if steps.is_some() { "steps" } else { "trace" };
    // A step set's header names the step shown in detail.
    let header_name = nav
        .and_then(|n| n.shown_file())
        .unwrap_or_else(|| file_name.clone());
    let set_heading = steps.clone().map(|s| view! { <StepsHeading model=s /> });
    let diagnostics = model.diagnostics.clone();
    let content = {
        let findings = findings.clone();
        let steps = steps.clone();
        Callback::new(move |tab: Tab| trace_tab(tab, &findings, steps.as_ref()))
    };
    let details = {
        let groups = groups.clone();
        ViewFn::from(move || view! { <ChartDetails groups=groups.clone() page=page /> })
    };
    view! {
        <section class="app-view" data-testid="document" data-file=file_name.clone() data-format=format>
            <header class="doc-header" data-testid="doc-header">
                {set_heading}
                {match model.header.clone() {
                    Some(h) => view! {
                        <RunHeaderView header=h file_name=header_name.clone()>
                            <Diagnostics panel=diagnostics.clone() collapsed=true />
                            <FindingsCount panel=findings.clone() />
                        </RunHeaderView>
                    }.into_any(),
                    None => view! {
                        <div class="doc-line">
                            <Diagnostics panel=diagnostics.clone() collapsed=true />
                            <FindingsCount panel=findings.clone() />
                        </div>
                    }.into_any(),
                }}
                <div class="doc-line">
                    <SummaryCards cards=model.cards.clone() />
                    <CaptureSourcesView />
                </div>
            </header>
            <div class="chart-area">
                <FlameChart groups=groups.clone() offsets=Signal::derive(|| vec![0]) colours=colours theme=theme
                    files=file_name.clone() page=page>
                    <PassLegend theme=theme />
                </FlameChart>
            </div>
            <TabPanel page=page content=content details=details />
        </section>
    }
}

/// The content of a trace view's tab.
fn trace_tab(tab: Tab, findings: &Arc<FindingsPanel>, steps: Option<&Arc<StepsModel>>) -> AnyView {
    match tab {
        Tab::Findings => view! { <FindingsView panel=findings.clone() /> }.into_any(),
        Tab::Steps => match steps {
            Some(s) => view! { <StepsView model=s.clone() /> }.into_any(),
            None => ().into_any(),
        },
        Tab::Modules => view! { <ModulesTab /> }.into_any(),
        Tab::Ops => view! {
            <div class="tables">
                <OpTable />
                <SpanTable />
            </div>
        }
        .into_any(),
        Tab::Memory => view! {
            <MemoryRangeView />
            <div class="tables">
                <MemoryView />
                <MemoryChartsView />
            </div>
        }
        .into_any(),
        Tab::Gradients => view! { <GradientView /> }.into_any(),
        Tab::Phases => view! { <PhasesView /> }.into_any(),
        Tab::Efficiency => view! { <EfficiencyView /> }.into_any(),
        _ => ().into_any(),
    }
}
