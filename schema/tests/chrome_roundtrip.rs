//! Property tests for Chrome Trace Event JSON: any properly nested span tree exported with
//! `chrome::export` imports back with the same names, parent paths, start times and durations;
//! and any bytes after a `[` import without a panic, every diagnostic on a line of the file.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use candle_trace_schema::analysis::spans::span_path;
use candle_trace_schema::format::chrome::export::trace_to_chrome;
use candle_trace_schema::format::chrome::ChromeReader;
use candle_trace_schema::format::document::TraceDocument;
use proptest::prelude::*;

const META: &str = r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":2,"warmup_steps":1,"device":"cpu","timing_mode":"host","tags":{}}"#;

/// A single-threaded trace/6 file from a script of (open?, gap, name) steps: open a child of
/// the innermost open span `gap` ns after the last event, or close the innermost span `gap` ns
/// later. Every span lasts at least 1 ns; names repeat so paths aggregate.
fn trace_from(script: &[(bool, u64, usize)]) -> String {
    const NAMES: [&str; 4] = ["fwd", "mm", "a \"quoted\" name", "µs/ß"];
    let mut lines = vec![META.to_string()];
    let mut now = 0u64;
    let mut stack: Vec<(usize, u64)> = Vec::new();
    let mut next = 0usize;
    let close =
        |stack: &mut Vec<(usize, u64)>, now: &mut u64, gap: u64, lines: &mut Vec<String>| {
            let (id, start) = stack.pop().unwrap();
            *now = (*now + gap).max(start + 1);
            lines.push(format!(
                r#"{{"kind":"span_end","id":"s{id}","duration_ns":{}}}"#,
                *now - start
            ));
        };
    for &(open, gap, name) in script {
        if open || stack.is_empty() {
            now += gap;
            let parent = stack
                .last()
                .map(|(p, _)| format!(r#""parent_id":"s{p}","#))
                .unwrap_or_default();
            let measured = next == 0;
            lines.push(format!(
                r#"{{"kind":"span_start","id":"s{next}",{parent}"name":{},"start_ns":{now},"span_kind":"function","measured":{measured}}}"#,
                serde_json::to_string(NAMES[name % NAMES.len()]).unwrap()
            ));
            stack.push((next, now));
            next += 1;
        } else {
            close(&mut stack, &mut now, gap, &mut lines);
        }
    }
    while !stack.is_empty() {
        close(&mut stack, &mut now, 1, &mut lines);
    }
    lines.join("\n") + "\n"
}

fn slices(doc: &TraceDocument) -> Vec<(String, u64, u64)> {
    let origin = doc.spans.iter().map(|s| s.start_ns).min().unwrap_or(0);
    let mut v: Vec<(String, u64, u64)> = (0..doc.spans.len())
        .map(|i| {
            let s = &doc.spans[i];
            (span_path(doc, i), s.start_ns - origin, s.duration_or_zero())
        })
        .collect();
    v.sort();
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn export_then_import_keeps_names_paths_and_times(
        script in prop::collection::vec((any::<bool>(), 0u64..5_000, 0usize..4), 1..60),
        chunk in 1usize..300,
    ) {
        let doc = TraceDocument::from_bytes(trace_from(&script).as_bytes());
        prop_assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        let text = trace_to_chrome(&doc);
        let mut r = ChromeReader::new();
        for c in text.as_bytes().chunks(chunk) {
            r.push(c);
        }
        let back = r.finish();
        prop_assert!(back.diagnostics.is_empty(), "{:?}", back.diagnostics);
        prop_assert_eq!(slices(&back), slices(&doc));
        prop_assert_eq!(back.summary(), doc.summary());
    }

    #[test]
    fn any_bytes_after_a_bracket_import_without_panic(tail in prop::collection::vec(any::<u8>(), 0..400)) {
        let mut bytes = b"[".to_vec();
        bytes.extend_from_slice(&tail);
        let lines = bytes.iter().filter(|&&b| b == b'\n').count() as u64 + 1;
        let doc = TraceDocument::from_chrome(&bytes);
        prop_assert!(doc.diagnostics.iter().all(|d| d.line >= 1 && d.line <= lines));
    }

    #[test]
    fn chunking_never_changes_an_import(
        script in prop::collection::vec((any::<bool>(), 0u64..5_000, 0usize..4), 1..30),
        cut in 0usize..2_000,
        chunk in 1usize..64,
    ) {
        let doc = TraceDocument::from_bytes(trace_from(&script).as_bytes());
        let text = trace_to_chrome(&doc);
        // Cut the file anywhere: the import of a prefix must not depend on chunk boundaries.
        let bytes = &text.as_bytes()[..cut.min(text.len())];
        let whole = TraceDocument::from_chrome(bytes);
        let mut r = ChromeReader::new();
        for c in bytes.chunks(chunk) {
            r.push(c);
        }
        let chunked = r.finish();
        prop_assert_eq!(&chunked.diagnostics, &whole.diagnostics);
        prop_assert_eq!(slices(&chunked), slices(&whole));
    }
}
