//! Chrome Trace Event JSON import: a whole file through `TraceDocument::from_chrome`, then everything
//! the CLI and the viewer compute from the imported trace, and the export back to Chrome JSON.
#![no_main]

use candle_trace_fuzz::exercise_trace;
use candle_trace_schema::format::chrome::export::trace_to_chrome;
use candle_trace_schema::TraceDocument;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let doc = TraceDocument::from_chrome(data);
    exercise_trace(&doc, data);
    let _ = trace_to_chrome(&doc);
});
