//! A process killed mid-step leaves a trace that is readable up to the last flush.
//!
//! The test re-executes its own test binary, running only `child_records_then_aborts` with
//! `CANDLE_TRACE_KILL_CHILD` set to the trace path; that child records part of a step, waits
//! longer than the writer's flush interval, and aborts with spans still open.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use candle_trace_capture::{Recorder, SpanKind};
use candle_trace_schema::format::diagnostics::{Category, Severity};
use candle_trace_schema::format::document::TraceDocument;
use common::{errors, temp_dir};

const CHILD_ENV: &str = "CANDLE_TRACE_KILL_CHILD";

/// The child's side; does nothing in a normal test run.
#[test]
fn child_records_then_aborts() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let rec = Recorder::builder("killed")
        .capture_step(1)
        .path(path)
        .build()
        .unwrap();
    let _step = rec.begin_step();
    let _total = rec.measured("update");
    for i in 0..100 {
        let _s = rec.span(format!("done{i}"), SpanKind::Function);
    }
    let _open = rec.module("open-at-kill");
    // Longer than the 100 ms flush interval: everything above reaches the file on its own.
    std::thread::sleep(Duration::from_millis(500));
    std::process::abort();
}

#[test]
fn a_killed_process_leaves_a_readable_trace() {
    let dir = temp_dir("kill");
    let path = dir.join("trace.jsonl");
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_records_then_aborts",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "the child should have aborted");

    let doc = TraceDocument::from_bytes(&std::fs::read(&path).unwrap());
    assert!(errors(&doc).is_empty(), "{:?}", errors(&doc));
    assert!(doc.meta.is_some());
    assert_eq!(doc.spans.len(), 102);
    let closed = doc.spans.iter().filter(|s| s.duration_ns.is_some()).count();
    assert_eq!(closed, 100);
    let mut unclosed: Vec<&str> = doc
        .diagnostics
        .iter()
        .filter(|d| d.category == Category::Unclosed)
        .map(|d| {
            assert_eq!(d.severity, Severity::Warning);
            doc.spans
                .iter()
                .find(|s| s.line == d.line)
                .unwrap()
                .name
                .as_str()
        })
        .collect();
    unclosed.sort_unstable();
    assert_eq!(unclosed, ["open-at-kill", "update"]);
    std::fs::remove_dir_all(dir).unwrap();
}
