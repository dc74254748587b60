//! View models: plain Rust values built once from a read document, which the components only
//! render. Nothing here touches the browser, so native tests check every number shown.

pub mod capture;
pub mod chart;
pub mod compare;
pub mod diagnostics;
pub mod efficiency;
pub mod findings;
pub mod gradients;
pub mod header;
pub mod iterations;
pub mod latency;
pub mod links;
pub mod memory;
pub mod memory_chart;
pub mod missing;
pub mod module_tree;
pub mod modules;
pub mod multi;
pub mod ops;
pub mod panel;
pub mod phases;
pub mod profile;
pub mod profile_chart;
pub mod profile_links;
pub mod profile_modules;
pub mod progress;
pub mod range;
pub mod resources;
pub mod sort;
pub mod spans;
pub mod step_switch;
pub mod steps;
pub mod summary;
pub mod virtual_rows;
pub mod waterfall;

use std::sync::{Arc, OnceLock};

use candle_trace_schema::analysis::findings::{profile_findings, trace_findings, Findings};
use candle_trace_schema::analysis::flops::OpEstimates;
use candle_trace_schema::analysis::modules::{is_module_span, ModulePaths};
use candle_trace_schema::analysis::range::OpIndex;
use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::memory::MemorySample;
use candle_trace_schema::format::profile::ProfileDocument;

use crate::timeline::lanes::{extents_of, Lanes, SpanExtent};
use diagnostics::DiagnosticsPanel;
use header::RunHeader;
use spans::SpanIndex;
use summary::SummaryCard;

/// Everything the page shows for an execution trace.
#[derive(Debug, Clone)]
pub struct TraceModel {
    /// The document as read (on the single-file page, without its memory samples: see
    /// [`MemoryViews::take`]).
    pub doc: TraceDocument,
    /// Run header (`None` without a usable `meta`).
    pub header: Option<RunHeader>,
    /// The eight summary cards.
    pub cards: Vec<SummaryCard>,
    /// Diagnostics.
    pub diagnostics: DiagnosticsPanel,
    /// Timeline lanes.
    pub lanes: Lanes,
    /// Where each span is drawn (unclosed spans reach their parent's end).
    pub extents: Vec<SpanExtent>,
    /// The gradient panel.
    pub gradients: gradients::GradientPanel,
    /// Live bytes over time, per device, for the memory strip.
    pub memory_curves: Vec<crate::timeline::memory_curve::DeviceCurve>,
    /// The memory samples taken out of `doc` ([`MemoryViews::take`]) until the memory charts
    /// are built from them.
    chart_samples: ChartSamples,
    /// The panels the page shows below the timeline, and the ops and allocations by span
    /// that a selected span's details read, each built the first time it is asked for (see
    /// [`Later`]).
    later: Later,
    /// Which capture sources were on, and what the views say for those that were off.
    pub capture: capture::CapturePanel,
    /// The file's findings, ranked, with where each shows.
    pub findings: findings::FindingsPanel,
}

impl TraceModel {
    /// Build every view model of `doc`.
    pub fn new(doc: TraceDocument) -> Self {
        let extents = extents_of(&doc);
        let lanes = Lanes::build(&extents);
        let findings = trace_findings(&[&doc]);
        Self::with_layout(doc, extents, lanes, &findings)
    }

    /// Build the view models of `doc` for a view that shows no findings (a comparison's side,
    /// one of several files): as [`TraceModel::new`] without ranking them, the costly part on a
    /// large trace (`findings` stays empty).
    pub fn without_findings(doc: TraceDocument) -> Self {
        let extents = extents_of(&doc);
        let lanes = Lanes::build(&extents);
        Self::with_layout(doc, extents, lanes, &Findings::default())
    }

    /// Build the view models around a layout and findings computed already (`extents_of`,
    /// `Lanes::build` and `schema::analysis::findings::trace_findings` of the same `doc`, the
    /// costly steps on a large trace, which the page runs one per task).
    pub fn with_layout(
        doc: TraceDocument,
        extents: Vec<SpanExtent>,
        lanes: Lanes,
        findings: &Findings,
    ) -> Self {
        let memory = MemoryViews::of(&doc);
        Self::with_memory(doc, memory, extents, lanes, findings)
    }

    /// [`TraceModel::with_layout`] with the memory views built already: on the page, the
    /// memory strip's curves and the samples taken out of `doc` ([`MemoryViews::take`]).
    pub fn with_memory(
        doc: TraceDocument,
        memory: MemoryViews,
        extents: Vec<SpanExtent>,
        lanes: Lanes,
        findings: &Findings,
    ) -> Self {
        let capture = capture::CapturePanel::of(&doc);
        let mut cards = summary::trace_cards(&doc.summary());
        summary::mark_not_captured(&mut cards, &capture.not_captured);
        let gradients = gradients::GradientPanel::of(&doc, 50);
        let findings = findings::FindingsPanel::of_trace(findings, &doc, &gradients.groups);
        TraceModel {
            header: doc.meta.as_ref().map(|m| RunHeader::of(&m.event)),
            cards,
            diagnostics: DiagnosticsPanel::of(&doc.diagnostics),
            lanes,
            extents,
            gradients,
            memory_curves: memory.curves,
            chart_samples: ChartSamples(std::sync::Mutex::new(memory.samples)),
            later: Later::default(),
            capture,
            findings,
            doc,
        }
    }
}

/// The views of a document's memory samples (`memory_profile.samples`, one per memory event:
/// the largest part of a memory-heavy trace after its records): the memory strip's curves,
/// drawn in the chart's first frame, and the samples the memory charts are built from later
/// ([`TraceModel::memory_charts`]). No other view reads the samples.
#[derive(Debug, Clone)]
pub struct MemoryViews {
    /// Live bytes over time, per device, for the memory strip.
    pub curves: Vec<crate::timeline::memory_curve::DeviceCurve>,
    /// The samples for the memory charts; empty where they stay in the document.
    samples: Vec<MemorySample>,
}

impl MemoryViews {
    /// The memory strip's curves of `doc`; the charts read its samples where they are.
    pub fn of(doc: &TraceDocument) -> Self {
        MemoryViews {
            curves: crate::timeline::memory_curve::device_curves(&doc.memory_profile),
            samples: Vec::new(),
        }
    }

    /// The memory strip's curves of `doc`, and its samples taken out of it: the page's
    /// single-file view then lays the trace out without them, and they go once the memory
    /// charts, built after the chart's first frame, have read them.
    pub fn take(doc: &mut TraceDocument) -> Self {
        let mut views = MemoryViews::of(doc);
        views.samples = std::mem::take(&mut doc.memory_profile.samples);
        views
    }
}

/// Memory samples held for the memory charts, taken by the first build of them.
#[derive(Debug, Default)]
struct ChartSamples(std::sync::Mutex<Vec<MemorySample>>);

impl ChartSamples {
    fn take(&self) -> Vec<MemorySample> {
        let mut held = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        std::mem::take(&mut *held)
    }
}

impl Clone for ChartSamples {
    fn clone(&self) -> Self {
        let held = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        ChartSamples(std::sync::Mutex::new(held.clone()))
    }
}

/// The view models of the panels below the timeline, and the index of ops and allocations by
/// span (read only when a span is selected). The page builds the panels after the timeline's
/// first frame, one panel a task (`components::app`), so each is built from the document the
/// first time it is asked for, not with the rest of the model, which they would hold back on a
/// large trace (efficiency alone hashes every tensor id).
#[derive(Debug, Clone, Default)]
struct Later {
    index: OnceLock<SpanIndex>,
    memory: OnceLock<Arc<memory::MemoryPanel>>,
    memory_charts: OnceLock<Arc<memory_chart::MemoryCharts>>,
    phases: OnceLock<Arc<phases::PhasesPanel>>,
    efficiency: OnceLock<Arc<efficiency::EfficiencyPanel>>,
    op_estimates: OnceLock<OpEstimates>,
    op_spans: OnceLock<Vec<Option<u32>>>,
    op_index: OnceLock<OpIndex>,
    gradient_table: OnceLock<Arc<gradients::GradientTable>>,
    modules: OnceLock<Arc<modules::ModulesPanel>>,
    module_paths: OnceLock<Arc<ModulePaths>>,
}

impl TraceModel {
    /// Ops and allocations by span (the span details read it when a span is selected).
    pub fn index(&self) -> &SpanIndex {
        self.later.index.get_or_init(|| SpanIndex::of(&self.doc))
    }

    /// The memory panel.
    pub fn memory(&self) -> &Arc<memory::MemoryPanel> {
        self.later
            .memory
            .get_or_init(|| Arc::new(memory::MemoryPanel::of(&self.doc, self.module_paths(), 20)))
    }

    /// The module key of every span (`schema::analysis::modules`): the modules tab's rows,
    /// and the module a span ran in wherever a trace's capture named modules.
    pub fn module_paths(&self) -> &Arc<ModulePaths> {
        self.later
            .module_paths
            .get_or_init(|| Arc::new(ModulePaths::new(&self.doc)))
    }

    /// Span `i`'s label in the flame chart and its tooltip: a module span by its module key
    /// where the capture named modules (Llama's `block` as `model.layers.3`, a `linear` as its
    /// weights' path), so that the chart names modules as the modules tab does; any other span
    /// by its name (an op span inside `q_proj` stays `matmul`). Until the keys are built (the
    /// chart has them built after its first frame) a module span shows the weight path it was
    /// recorded with, else its name.
    pub fn span_label(&self, i: usize) -> &str {
        let Some(s) = self.doc.spans.get(i) else {
            return "";
        };
        if !is_module_span(s) {
            return &s.name;
        }
        // The keys as built, without building them (`module_of`: names mode only).
        let key = self.later.module_paths.get().and_then(|p| p.module_of(i));
        key.or(s.module.as_deref()).unwrap_or(&s.name)
    }

    /// Stacked live bytes and checkpoint reconciliation per device (the memory tab's charts):
    /// from the samples taken out of the document, if they were, else from its own; those
    /// taken go once the charts are built.
    pub fn memory_charts(&self) -> &Arc<memory_chart::MemoryCharts> {
        self.later.memory_charts.get_or_init(|| {
            let taken = self.chart_samples.take();
            let samples = if taken.is_empty() {
                &self.doc.memory_profile.samples
            } else {
                &taken
            };
            Arc::new(memory_chart::MemoryCharts::of_samples(&self.doc, samples))
        })
    }

    /// Training-phase breakdown and module pairs.
    pub fn phases(&self) -> &Arc<phases::PhasesPanel> {
        self.later
            .phases
            .get_or_init(|| Arc::new(phases::PhasesPanel::of(&self.doc)))
    }

    /// Op efficiency.
    pub fn efficiency(&self) -> &Arc<efficiency::EfficiencyPanel> {
        self.later.efficiency.get_or_init(|| {
            Arc::new(efficiency::EfficiencyPanel::of(
                &self.doc,
                self.op_estimates(),
            ))
        })
    }

    /// Each op's FLOP estimate, made once: the efficiency of the whole run and of every range
    /// count from it.
    pub fn op_estimates(&self) -> &OpEstimates {
        self.later
            .op_estimates
            .get_or_init(|| OpEstimates::of(&self.doc))
    }

    /// Each op's span, made once (`links::op_span_indices`): the op rows of the whole run
    /// and of every range find their spans from it.
    pub fn op_spans(&self) -> &[Option<u32>] {
        self.later
            .op_spans
            .get_or_init(|| links::op_span_indices(&self.doc))
    }

    /// The ops by group and by time, made once (`range::OpIndex`): the op rows of every range
    /// count from it.
    pub fn op_index(&self) -> &OpIndex {
        self.later
            .op_index
            .get_or_init(|| OpIndex::of(&self.doc.ops))
    }

    /// Every gradient, sortable, and the norm histogram.
    pub fn gradient_table(&self) -> &Arc<gradients::GradientTable> {
        self.later
            .gradient_table
            .get_or_init(|| Arc::new(gradients::GradientTable::of(&self.doc)))
    }

    /// Module spans by path and by leaf name.
    pub fn modules(&self) -> &Arc<modules::ModulesPanel> {
        self.later.modules.get_or_init(|| {
            Arc::new(modules::ModulesPanel::with_paths(
                &self.doc,
                Arc::clone(self.module_paths()),
            ))
        })
    }

    /// Rank `findings` (of this model's document) into its findings panel: for a model built
    /// with none while they were being computed elsewhere (the parsing worker).
    pub fn set_findings(&mut self, findings: &Findings) {
        self.findings =
            findings::FindingsPanel::of_trace(findings, &self.doc, &self.gradients.groups);
    }

    /// Where span `i` is drawn, `None` when there is no such span.
    pub fn extent(&self, i: u32) -> Option<SpanExtent> {
        self.extents.get(i as usize).copied()
    }
}

/// Everything the page shows for an inference profile.
#[derive(Debug, Clone)]
pub struct ProfileModel {
    /// Headline cards.
    pub cards: Vec<SummaryCard>,
    /// Diagnostics.
    pub diagnostics: DiagnosticsPanel,
    /// One row per request.
    pub requests: Vec<profile::RequestRow>,
    /// TTFT histogram.
    pub ttft: Option<latency::HistogramChart>,
    /// ITL histogram.
    pub itl: Option<latency::HistogramChart>,
    /// Per-request waterfalls.
    pub waterfalls: Vec<waterfall::WaterfallChart>,
    /// Module spans of the requests' forward calls by path and by leaf name.
    pub modules: profile_modules::ProfileModulesPanel,
    /// Memory snapshots over time.
    pub snapshots: profile::SnapshotChart,
    /// Failures (status `failure` or an error).
    pub failures: Vec<profile::EventRow>,
    /// Diagnostic-only events.
    pub diagnostic_only: Vec<profile::EventRow>,
    /// (detail level, sample rate) as stated by the file.
    pub settings: (String, String),
    /// The profile's findings, ranked, with where each shows.
    pub findings: findings::FindingsPanel,
    /// The requests on the flame chart.
    pub chart: Arc<profile_chart::ProfileChart>,
    /// The batched forwards (Iterations tab).
    pub iterations: iterations::IterationsPanel,
    /// The resources (Resources tab).
    pub resources: resources::ResourcesPanel,
}

impl ProfileModel {
    /// Build every view model of `doc`.
    pub fn new(doc: &ProfileDocument) -> Self {
        let modules = profile_modules::ProfileModulesPanel::of(doc);
        // Requests are the costly part: computed once, used by the cards, rows and charts.
        let requests = doc.requests();
        let (ttft, itl) = latency::latency_charts_of(&requests);
        let (failures, diagnostic_only) = profile::event_lists(doc);
        let chart = profile_chart::ProfileChart::of(doc);
        let origin = chart.origin_unix_nanos;
        ProfileModel {
            cards: summary::profile_cards(&doc.summary_with(&requests)),
            diagnostics: DiagnosticsPanel::of(&doc.diagnostics),
            requests: profile::request_rows(requests, &modules),
            ttft,
            itl,
            waterfalls: waterfall::waterfalls(doc),
            modules,
            snapshots: profile::snapshot_chart(doc, origin),
            failures,
            diagnostic_only,
            settings: profile::settings_text(doc),
            findings: findings::FindingsPanel::of_profile(&profile_findings(doc)),
            chart: Arc::new(chart),
            iterations: iterations::IterationsPanel::of(doc, origin),
            resources: resources::ResourcesPanel::of(doc),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_spans_are_labelled_by_their_module_keys_once_built() {
        // A step's forward runs `block` (a module span that loads no weight) over two named
        // linears; an op span runs inside the first.
        let lines = [
            r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":2,"warmup_steps":1,"device":"cpu","timing_mode":"host","tags":{}}"#,
            r#"{"kind":"span_start","id":"f","name":"forward","start_ns":0,"span_kind":"function","measured":true,"step":"forward"}"#,
            r#"{"kind":"span_start","id":"b","parent_id":"f","name":"block","start_ns":10,"span_kind":"module","step":"forward"}"#,
            r#"{"kind":"span_start","id":"u","parent_id":"b","name":"linear","start_ns":20,"span_kind":"module","step":"forward","module":"model.layers.0.mlp.up"}"#,
            r#"{"kind":"span_start","id":"m","parent_id":"u","name":"matmul","start_ns":25,"span_kind":"op","step":"forward"}"#,
            r#"{"kind":"span_end","id":"m","duration_ns":5}"#,
            r#"{"kind":"span_end","id":"u","duration_ns":20}"#,
            r#"{"kind":"span_start","id":"d","parent_id":"b","name":"linear","start_ns":50,"span_kind":"module","step":"forward","module":"model.layers.0.mlp.down"}"#,
            r#"{"kind":"span_end","id":"d","duration_ns":20}"#,
            r#"{"kind":"span_end","id":"b","duration_ns":70}"#,
            r#"{"kind":"span_end","id":"f","duration_ns":100}"#,
        ];
        let doc = TraceDocument::from_bytes(lines.join("\n").as_bytes());
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        let at = |id: &str| doc.span_index(id).expect("a span with that id");
        let (f, b, u, m, d) = (at("f"), at("b"), at("u"), at("m"), at("d"));
        let model = TraceModel::new(doc);
        // Before the keys are built: the weight path a span was recorded with, else its name.
        let labels = |model: &TraceModel| [f, b, u, m, d].map(|i| model.span_label(i).to_string());
        assert_eq!(
            labels(&model),
            [
                "forward",
                "block",
                "model.layers.0.mlp.up",
                "matmul",
                "model.layers.0.mlp.down"
            ]
        );
        // Built: `block` is the common prefix of the names it holds, as in the modules tab;
        // function and op spans keep their names.
        model.module_paths();
        assert_eq!(
            labels(&model),
            [
                "forward",
                "model.layers.0.mlp",
                "model.layers.0.mlp.up",
                "matmul",
                "model.layers.0.mlp.down"
            ]
        );
    }

    #[test]
    fn views_without_findings_rank_none_and_keep_the_rest() {
        let doc = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/findings_train.trace6.jsonl"
        ));
        let full = TraceModel::new(doc.clone());
        let bare = TraceModel::without_findings(doc.clone());
        assert!(!full.findings.rows.is_empty(), "the fixture has findings");
        assert_eq!(bare.findings, findings::FindingsPanel::default());
        assert_eq!(bare.extents, full.extents);
        assert_eq!(bare.cards, full.cards);
        // Both sides of a comparison and every file of several are built without them.
        let cmp = compare::CompareModel::new("a".into(), doc.clone(), "b".into(), doc.clone());
        assert!(cmp.baseline.findings.rows.is_empty());
        assert!(cmp.candidate.findings.rows.is_empty());
        let multi = multi::MultiModel::new(vec![("a".into(), doc.clone()), ("b".into(), doc)]);
        assert!(multi.files.iter().all(|f| f.model.findings.rows.is_empty()));
    }

    #[test]
    fn the_memory_views_need_no_samples_afterwards() {
        // As the page builds it: the memory views first, taking the samples out of the
        // document. Every view equals the one built from the whole document, on every trace
        // fixture, and the samples go once the charts are built.
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures");
        let mut with_samples = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|x| x != "jsonl") {
                continue;
            }
            let doc = TraceDocument::from_bytes(&std::fs::read(&path).unwrap());
            with_samples += usize::from(!doc.memory_profile.samples.is_empty());
            let findings = trace_findings(&[&doc]);
            let whole = TraceModel::new(doc.clone());
            let mut bare = doc;
            let memory = MemoryViews::take(&mut bare);
            assert!(bare.memory_profile.samples.is_empty());
            // The page ranks findings on it where no worker did.
            assert_eq!(trace_findings(&[&bare]), findings, "{}", path.display());
            let extents = extents_of(&bare);
            let lanes = Lanes::build(&extents);
            let m = TraceModel::with_memory(bare, memory, extents, lanes, &findings);
            let name = path.display();
            assert_eq!(m.memory_curves, whole.memory_curves, "{name}");
            // A copy made before the charts are built keeps its own samples.
            let copy = m.clone();
            assert_eq!(m.memory_charts(), whole.memory_charts(), "{name}");
            assert!(m.chart_samples.take().is_empty(), "{name}");
            assert_eq!(copy.memory_charts(), whole.memory_charts(), "{name}");
            assert_eq!(m.memory(), whole.memory(), "{name}");
            assert_eq!(m.cards, whole.cards, "{name}");
            assert_eq!(m.header, whole.header, "{name}");
            assert_eq!(m.diagnostics, whole.diagnostics, "{name}");
            assert_eq!(m.lanes, whole.lanes, "{name}");
            assert_eq!(m.extents, whole.extents, "{name}");
            assert_eq!(m.index(), whole.index(), "{name}");
            assert_eq!(m.gradients, whole.gradients, "{name}");
            assert_eq!(m.phases(), whole.phases(), "{name}");
            assert_eq!(m.efficiency(), whole.efficiency(), "{name}");
            assert_eq!(m.gradient_table(), whole.gradient_table(), "{name}");
            assert_eq!(m.modules(), whole.modules(), "{name}");
            assert_eq!(m.capture, whole.capture, "{name}");
            assert_eq!(m.findings, whole.findings, "{name}");
            assert_eq!(m.doc.summary(), whole.doc.summary(), "{name}");
        }
        assert!(
            with_samples >= 3,
            "fixtures with memory samples: {with_samples}"
        );
    }

    #[test]
    fn findings_from_the_worker_make_the_same_model() {
        // The page builds the model without findings and ranks the worker's, which cross as
        // JSON: the panel equals the one built from the document in one go, on every trace
        // fixture.
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures");
        let mut with_rows = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|x| x != "jsonl") {
                continue;
            }
            let doc = TraceDocument::from_bytes(&std::fs::read(&path).unwrap());
            let whole = TraceModel::new(doc.clone());
            let json = serde_json::to_string(&trace_findings(&[&doc])).unwrap();
            let crossed: Findings = serde_json::from_str(&json).unwrap();
            let mut later = TraceModel::without_findings(doc);
            later.set_findings(&crossed);
            assert_eq!(later.findings, whole.findings, "{}", path.display());
            with_rows += usize::from(!whole.findings.rows.is_empty());
        }
        assert!(with_rows >= 2, "fixtures with findings: {with_rows}");
    }
}
