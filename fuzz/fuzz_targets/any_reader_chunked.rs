//! `format::AnyReader` fed in chunks cut where the fuzzer chooses (see `split_input`): format
//! detection must not depend on the cuts, the document must equal the one read from the whole
//! file by the format's own reader, and everything computed from it must hold.
#![no_main]

use candle_trace_fuzz::{
    assert_same_trace, chunks, exercise_profile, exercise_trace, read_any, split_input,
};
use candle_trace_schema::format::detect::{detect, AnyDocument, Detection};
use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::jsonl::strip_bom;
use candle_trace_schema::format::profile::read_profile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (cuts, file) = split_input(data);
    let streamed = read_any(&chunks(file, &cuts));
    let whole = read_any(&[file]);
    assert_eq!(streamed.format(), whole.format());
    assert_eq!(streamed.diagnostics(), whole.diagnostics());
    // A complete-file probe always decides.
    assert_ne!(detect(file, true), Detection::NeedMore);
    match (&streamed, &whole) {
        (AnyDocument::Trace(s), AnyDocument::Trace(w)) if s.chrome.is_some() => {
            assert_same_trace(s, w);
            assert_eq!(
                s.diagnostics,
                TraceDocument::from_chrome(strip_bom(file)).diagnostics
            );
            exercise_trace(s, strip_bom(file));
        }
        (AnyDocument::Trace(s), AnyDocument::Trace(w)) => {
            assert_same_trace(s, w);
            let direct = TraceDocument::from_bytes(strip_bom(file));
            assert_eq!(s.diagnostics, direct.diagnostics);
            exercise_trace(s, strip_bom(file));
        }
        (AnyDocument::Profile(s), AnyDocument::Profile(w)) => {
            assert_eq!(s, w);
            assert_eq!(*s, read_profile(strip_bom(file)));
            exercise_profile(s, strip_bom(file));
        }
        (AnyDocument::Unsupported { diagnostics, .. }, _) => assert_eq!(diagnostics.len(), 1),
        _ => panic!("formats differ"),
    }
});
