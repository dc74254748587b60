//! trace/6: a whole file read at once, then everything the CLI and the viewer compute from it.
#![no_main]

use candle_trace_fuzz::exercise_trace;
use candle_trace_schema::format::document::TraceDocument;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let doc = TraceDocument::from_bytes(data);
    exercise_trace(&doc, data);
});
