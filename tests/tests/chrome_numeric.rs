//! `ts` / `dur` given as numeric strings (`"ts": "200.5"`), as Chrome's loader and Perfetto
//! accept them: read as µs; strings that are not numbers stay errors at their element's line.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use candle_trace_schema::format::diagnostics::{Category, Severity};
use candle_trace_schema::TraceDocument;
use candle_trace_tests::fixtures_dir;

/// `chrome_numeric_strings.chrome.json`, worked by hand: the earliest event is `step` at
/// "100" µs, so times are rebased by 100 µs. step "400.5" µs → 400 500 ns; matmul "150.25"
/// → starts at 50 250 ns, lasts 100 µs; softmax B "2.6e2" → 160 000 ns, E "300." → lasts
/// 40 000 ns; instant ".5e3" → 400 000 ns; counter "450" → 350 000 ns. step's self time =
/// 400 500 − 100 000 − 40 000 = 260 500 ns; the synthetic root ends at step's end, 400 500.
#[test]
fn chrome_numeric_strings_are_microseconds_and_other_strings_errors() {
    let bytes = std::fs::read(fixtures_dir().join("chrome_numeric_strings.chrome.json")).unwrap();
    let doc = TraceDocument::from_chrome(&bytes);
    let by_name = |n: &str| doc.spans.iter().find(|s| s.name == n).unwrap();
    let step = by_name("step");
    assert_eq!((step.start_ns, step.duration_ns), (0, Some(400_500)));
    let matmul = by_name("matmul");
    assert_eq!(
        (matmul.start_ns, matmul.duration_ns),
        (50_250, Some(100_000))
    );
    let softmax = by_name("softmax");
    assert_eq!(
        (softmax.start_ns, softmax.duration_ns),
        (160_000, Some(40_000))
    );
    assert_eq!(matmul.parent_id.as_deref(), Some(step.id.as_str()));
    assert_eq!(softmax.parent_id.as_deref(), Some(step.id.as_str()));
    let chrome = doc.chrome.as_ref().unwrap();
    assert_eq!(chrome.instants[0].timestamp_ns, 400_000);
    assert_eq!(chrome.counters[0].timestamp_ns, 350_000);
    assert_eq!(chrome.counters[0].value, 7.0);
    let summary = doc.summary();
    assert_eq!((summary.span_count, summary.total_ns), (4, 400_500));

    let problems: Vec<_> = doc
        .diagnostics
        .iter()
        .map(|d| (d.line, d.severity, d.category, d.message.as_str()))
        .collect();
    assert_eq!(
        problems,
        vec![
            (9, Severity::Error, Category::WrongType,
             "`X` element 8: invalid type: string \"12:00\", expected a number of µs, or a string holding one"),
            (10, Severity::Error, Category::WrongType,
             "`X` element 9: invalid type: string \"long\", expected a number of µs, or a string holding one"),
            (11, Severity::Error, Category::WrongType,
             "`E` element 10: invalid type: string \"NaN\", expected a number of µs, or a string holding one"),
        ]
    );
}
