//! What each view model of a trace costs to build, natively:
//! `cargo run --release -p candle-trace-viewer --example model_cost -- FILE`.
//!
//! The page builds all of them when a trace opens; this finds the one that makes that slow.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a dev tool: a bad path is the report

use std::time::Instant;

use candle_trace_viewer::model::{
    efficiency, gradients, memory, memory_chart, phases, spans, TraceModel,
};
use candle_trace_viewer::schema::analysis::flops::OpEstimates;
use candle_trace_viewer::schema::analysis::modules::ModulePaths;
use candle_trace_viewer::schema::format::document::TraceDocument;

fn timed<T>(name: &str, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let v = f();
    eprintln!("{name:>16}: {:?}", t.elapsed());
    v
}

fn main() {
    let path = std::env::args().nth(1).expect("usage: model_cost FILE");
    let bytes = std::fs::read(&path).expect("cannot read the file");
    let doc = timed("read", || TraceDocument::from_bytes(&bytes));
    timed("summary", || doc.summary());
    let paths = timed("module paths", || ModulePaths::new(&doc));
    timed("memory panel", || memory::MemoryPanel::of(&doc, &paths, 20));
    timed("gradient panel", || gradients::GradientPanel::of(&doc, 50));
    timed("memory charts", || memory_chart::MemoryCharts::of(&doc));
    timed("phases", || phases::PhasesPanel::of(&doc));
    let estimates = timed("op estimates", || OpEstimates::of(&doc));
    timed("efficiency", || {
        efficiency::EfficiencyPanel::of(&doc, &estimates)
    });
    timed("gradient table", || gradients::GradientTable::of(&doc));
    timed("span rows", || {
        spans::span_rows(&doc, &paths, spans::SpanOrder::Total, 50)
    });
    timed("whole model", || TraceModel::new(doc));
}
