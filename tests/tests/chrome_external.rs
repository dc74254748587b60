//! Chrome JSON files from other projects' test data (`tests/fixtures/chrome_external/`, origin
//! and licence in its README): what this importer keeps, skips and reports for each, worked
//! out by hand from the files. Where Chrome's trace viewer (catapult) or Perfetto do something
//! else, TESTING.md's table says so.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use candle_trace_schema::format::diagnostics::{Category, Severity};
use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::tracks::SkippedPhase;
use candle_trace_tests::fixtures_dir;

fn read(name: &str) -> TraceDocument {
    let path = fixtures_dir().join("chrome_external").join(name);
    TraceDocument::from_chrome(&std::fs::read(path).unwrap())
}

fn spans(doc: &TraceDocument) -> Vec<(&str, u64, Option<u64>, Option<&str>)> {
    let name_of = |id: &str| {
        doc.spans
            .iter()
            .find(|s| s.id == id)
            .map(|s| s.name.as_str())
    };
    doc.spans
        .iter()
        .filter(|s| s.id != "root")
        .map(|s| {
            (
                s.name.as_str(),
                s.start_ns,
                s.duration_ns,
                s.parent_id.as_deref().and_then(name_of),
            )
        })
        .collect()
}

fn skipped(doc: &TraceDocument) -> Vec<(&str, u64, u64)> {
    doc.chrome
        .as_ref()
        .unwrap()
        .skipped
        .iter()
        .map(
            |SkippedPhase {
                 ph,
                 count,
                 first_line,
             }| (ph.as_str(), *count, *first_line),
        )
        .collect()
}

/// catapult `tracing/test_data/async_begin_end.json`: B/E pairs on (1, 1) at 120–170,
/// 220–350 and 230–270 µs (times rebased to the first kept event, 120 µs); the legacy async
/// phases S (10), F (10) and T (6) are counted and skipped.
#[test]
fn catapult_async_begin_end() {
    let doc = read("catapult_async_begin_end.json");
    assert_eq!(
        spans(&doc),
        vec![
            ("BE1", 0, Some(50_000), Some("(trace)")),
            ("BE1", 100_000, Some(130_000), Some("(trace)")),
            ("BE2", 110_000, Some(40_000), Some("BE1")),
        ]
    );
    assert_eq!(
        skipped(&doc),
        vec![("S", 10, 2), ("F", 10, 5), ("T", 6, 10)]
    );
    assert!(doc
        .diagnostics
        .iter()
        .all(|d| d.severity == Severity::Warning && d.category == Category::UnknownKind));
    assert_eq!(doc.summary().total_ns, 230_000);
}

/// catapult `tracing/test_data/flow_simple.json`: five `X` slices on five threads (earliest at
/// 0 µs, latest end 3331 + 400 = 3731 µs); flow events s (2), t (1), f (2) skipped.
#[test]
fn catapult_flow_simple() {
    let doc = read("catapult_flow_simple.json");
    assert_eq!(
        spans(&doc),
        vec![
            ("SenderA", 3_002_000, Some(10_000), Some("(trace)")),
            ("SenderB", 0, Some(10_000), Some("(trace)")),
            ("Blergh", 1_001_000, Some(100_000), Some("(trace)")),
            ("OtherSlice", 3_200_000, Some(500_000), Some("(trace)")),
            ("SomeSlice", 3_331_000, Some(400_000), Some("(trace)")),
        ]
    );
    assert_eq!(
        skipped(&doc),
        vec![("s", 2, 13), ("f", 2, 45), ("t", 1, 76)]
    );
    assert_eq!(doc.chrome.as_ref().unwrap().tracks.len(), 5);
    assert_eq!(doc.summary().total_ns, 3_731_000);
}

/// Cases from Perfetto's JSON parser diff tests (`test/trace_processor/diff_tests/parser/json/
/// tests.py`), one element each: a `ph` of `"XXX"` (skipped here; Perfetto reads its first
/// letter), `X` without `tid` beside one with `tid` 1 (here tid 0, another track; Perfetto
/// uses the pid as tid and nests them), `X` without `dur` (an error here; Perfetto drops it
/// silently), a counter whose args are numeric strings (both read `.75`, `246.`, `01.23`,
/// `050`, `+10.5` and ignore `1.5e`, `2e+`, `.`, `+`, `-`), an object with a trailing comma
/// (invalid JSON: an error here; Perfetto accepts it), and the unterminated array of
/// `test_json_incomplete`.
#[test]
fn perfetto_json_parser_cases() {
    let doc = read("perfetto_json_parser_cases.json");
    let problems: Vec<(u64, Severity, Category)> = doc
        .diagnostics
        .iter()
        .map(|d| (d.line, d.severity, d.category))
        .collect();
    assert_eq!(
        problems,
        vec![
            (2, Severity::Warning, Category::UnknownKind),
            (5, Severity::Error, Category::MissingField),
            (7, Severity::Error, Category::Syntax),
        ]
    );
    // Earliest kept event: Child / Parent at 1 µs.
    assert_eq!(
        spans(&doc),
        vec![
            ("Child", 0, Some(5_000), Some("(trace)")),
            ("Parent", 0, Some(10_000), Some("(trace)")),
            (
                "typecheck",
                4_619_295_549_000,
                Some(8_000_000),
                Some("(trace)")
            ),
        ]
    );
    let chrome = doc.chrome.as_ref().unwrap();
    let mut counters: Vec<(&str, f64, u64)> = chrome
        .counters
        .iter()
        .map(|c| (c.series.as_str(), c.value, c.timestamp_ns))
        .collect();
    counters.sort_by(|a, b| a.0.cmp(b.0));
    assert_eq!(
        counters,
        vec![
            ("leading_dot", 0.75, 2_999_000),
            ("leading_zero_float", 1.23, 2_999_000),
            ("leading_zero_int_str", 50.0, 2_999_000),
            ("plus_val", 10.5, 2_999_000),
            ("trailing_dot", 246.0, 2_999_000),
        ]
    );
    assert!(!chrome.closed);
}
