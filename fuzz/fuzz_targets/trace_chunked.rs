//! trace/6 fed in chunks cut where the fuzzer chooses (see `split_input`): the document must be
//! exactly the whole-file document, and everything computed from it must hold.
#![no_main]

use candle_trace_fuzz::{assert_same_trace, chunks, exercise_trace, split_input};
use candle_trace_schema::format::document::{TraceDocument, TraceReader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (cuts, file) = split_input(data);
    let mut reader = TraceReader::new();
    for chunk in chunks(file, &cuts) {
        reader.push(chunk);
    }
    let streamed = reader.finish();
    let whole = TraceDocument::from_bytes(file);
    assert_same_trace(&streamed, &whole);
    exercise_trace(&streamed, file);
});
