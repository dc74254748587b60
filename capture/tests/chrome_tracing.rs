//! Runs the `chrome_tracing` example in-process — candle-nn ops inside `tracing` spans, written
//! by the real `tracing-chrome` layer — and imports the file it wrote: no diagnostics, the
//! spans nested as the example entered them, the worker thread on its own track, the instants
//! kept, and the CLI reads it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

#[path = "../examples/chrome_tracing.rs"]
#[allow(dead_code)]
mod chrome_tracing;

use candle_trace_schema::analysis::spans::span_path;
use std::collections::BTreeMap;

use candle_trace_schema::format::detect::{AnyDocument, AnyReader, Format};

#[test]
fn the_tracing_chrome_file_of_candle_ops_imports_cleanly() {
    let dir = std::env::temp_dir().join(format!("candle-trace-chrome-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.json");
    chrome_tracing::write_trace(&path).unwrap();

    let bytes = std::fs::read(&path).unwrap();
    let mut reader = AnyReader::new();
    for chunk in bytes.chunks(1000) {
        reader.push(chunk);
    }
    let any = reader.finish();
    assert_eq!(any.format(), Some(Format::Chrome));
    let AnyDocument::Trace(doc) = any else {
        panic!("not imported as a trace")
    };
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    assert!(!doc.is_untrusted());
    let mut paths: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..doc.spans.len() {
        *paths.entry(span_path(&doc, i)).or_default() += 1;
    }
    let want: BTreeMap<String, usize> = [
        ("(trace)", 1),
        ("(trace)/forward", 3),
        ("(trace)/forward/linear", 6),
        ("(trace)/forward/gelu", 3),
        ("(trace)/forward/softmax", 3),
        ("(trace)/matmul", 1),
    ]
    .into_iter()
    .map(|(p, n)| (p.to_string(), n))
    .collect();
    assert_eq!(paths, want);
    let c = doc.chrome.as_ref().unwrap();
    assert!(c.synthetic_root);
    assert_eq!(c.instants.len(), 3);
    let matmul = doc.spans.iter().position(|s| s.name == "matmul").unwrap();
    let track = &c.tracks[c.span_tracks[matmul].unwrap() as usize];
    assert_eq!(track.thread_name.as_deref(), Some("worker"));
    // Every span lies inside the root, and the total is the file's extent.
    let root = &doc.spans[0];
    assert!(doc.spans.iter().all(|s| s.end_ns() <= root.end_ns()));
    assert_eq!(doc.summary().total_ns, root.duration_or_zero());
    assert!(doc.summary().total_ns > 0);
    std::fs::remove_dir_all(&dir).ok();
}
