//! Crash safety of the recorder, asserted on behaviour only (never on timings):
//! - a process SIGKILLed mid-update leaves a file holding everything flushed before the kill,
//!   with warnings (never errors) for the spans the kill left open;
//! - a process that dies of an uncaught panic inside spans, and a thread that panics inside
//!   spans, leave a valid file with every span closed;
//! - a real full disk (`/dev/full`): `finish()` returns the error, the loop kept running;
//! - 8 threads × 100 000 spans: exact counts, no torn lines;
//! - a writer that cannot keep up: the queue never holds more than its capacity (the exact
//!   number of events beyond it is dropped), and the drop count is written into the trace.
//!
//! The child-process tests re-execute this test binary, running only the child's test function
//! with an environment variable naming the trace path (as `kill.rs` does).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

mod common;

use std::io::{self, BufRead, BufReader, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::{Command, Stdio};
use std::time::Duration;

use candle_trace_capture::{CaptureError, Recorder, Sink, SpanKind};
use candle_trace_schema::format::diagnostics::{Category, Severity};
use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::events::{Edge, TraceEvent};
use common::{errors, temp_dir, Gate, SharedBuf};

const SIGKILL_CHILD: &str = "CANDLE_TRACE_SIGKILL_CHILD";
const PANIC_CHILD: &str = "CANDLE_TRACE_PANIC_CHILD";
/// Spans the SIGKILL child closes and flushes before it tells the parent to kill it.
const FLUSHED_SPANS: usize = 1000;

/// Re-run this binary with only `test` and `env` = `path`; stdout piped.
fn child(test: &str, env: &str, path: &std::path::Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(env, path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The SIGKILL child: records an update, flushes after `FLUSHED_SPANS` closed spans, says so on
/// stdout, then keeps recording until it is killed (it gives up by itself after a minute).
#[test]
fn sigkill_child() {
    let Ok(path) = std::env::var(SIGKILL_CHILD) else {
        return;
    };
    let rec = Recorder::builder("sigkilled")
        .capture_step(1)
        .path(path)
        .build()
        .unwrap();
    let _step = rec.begin_step();
    let _total = rec.measured("update");
    let _fwd = rec.module("forward");
    for i in 0..FLUSHED_SPANS {
        let _s = rec.span(format!("done{i}"), SpanKind::Function);
    }
    assert!(rec.flush(Duration::from_secs(60)));
    println!("flushed");
    io::stdout().flush().unwrap();
    // Still mid-update when the kill lands: spans open and close, lines are being written.
    for i in 0..60_000 {
        let _s = rec.span(format!("after{i}"), SpanKind::Function);
        let _o = rec.op_span("matmul");
        std::thread::sleep(Duration::from_millis(1));
    }
    std::process::abort();
}

#[test]
fn a_sigkill_mid_update_keeps_everything_flushed_before_it() {
    let dir = temp_dir("sigkill");
    let path = dir.join("trace.jsonl");
    let mut proc = child("sigkill_child", SIGKILL_CHILD, &path);
    // libtest prints its own lines around the child's: wait for the one that ends in ours.
    let mut out = BufReader::new(proc.stdout.take().unwrap());
    let mut line = String::new();
    while !line.trim_end().ends_with("flushed") {
        line.clear();
        let n = out.read_line(&mut line).unwrap();
        assert!(n > 0, "the child ended before its flush");
    }
    proc.kill().unwrap(); // SIGKILL on Unix
    let status = proc.wait().unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9), "{status:?}");
    }
    assert!(!status.success());

    let doc = TraceDocument::from_bytes(&std::fs::read(&path).unwrap());
    // Only warnings: spans left open, and at most a truncated last line.
    assert!(errors(&doc).is_empty(), "{:?}", errors(&doc));
    for d in &doc.diagnostics {
        assert_eq!(d.severity, Severity::Warning);
        assert!(
            matches!(d.category, Category::Unclosed | Category::Truncated),
            "{d}"
        );
    }
    assert!(doc.meta.is_some());
    // Everything flushed before the kill is there, closed.
    for i in 0..FLUSHED_SPANS {
        let name = format!("done{i}");
        let span = doc.spans.iter().find(|s| s.name == name).unwrap();
        assert!(span.duration_ns.is_some(), "{name} lost its end");
    }
    // The update and its forward module were open at the kill: a warning each.
    let unclosed: Vec<&str> = doc
        .diagnostics
        .iter()
        .filter(|d| d.category == Category::Unclosed)
        .map(|d| {
            let s = doc.spans.iter().find(|s| s.line == d.line).unwrap();
            s.name.as_str()
        })
        .collect();
    assert!(unclosed.contains(&"update"), "{unclosed:?}");
    assert!(unclosed.contains(&"forward"), "{unclosed:?}");
    assert_eq!(
        doc.spans.iter().filter(|s| s.duration_ns.is_none()).count(),
        unclosed.len()
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// The panic child: a panic nobody catches inside nested spans ends the process (the test
/// harness reports it and exits 101); unwinding closes every span and drops the recorder.
#[test]
fn panic_child() {
    let Ok(path) = std::env::var(PANIC_CHILD) else {
        return;
    };
    let rec = Recorder::builder("panicked")
        .capture_step(1)
        .path(path)
        .build()
        .unwrap();
    let _step = rec.begin_step();
    let _total = rec.measured("update");
    let _fwd = rec.module("forward");
    for i in 0..100 {
        let _s = rec.span(format!("done{i}"), SpanKind::Function);
    }
    let _open = rec.op_span("matmul");
    panic!("boom inside a span");
}

#[test]
fn an_uncaught_panic_inside_spans_leaves_a_valid_file() {
    let dir = temp_dir("panic");
    let path = dir.join("trace.jsonl");
    let status = child("panic_child", PANIC_CHILD, &path).wait().unwrap();
    assert_eq!(status.code(), Some(101), "{status:?}");
    let doc = TraceDocument::from_bytes(&std::fs::read(&path).unwrap());
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    assert_eq!(doc.spans.len(), 103);
    assert!(doc.spans.iter().all(|s| s.duration_ns.is_some()));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_thread_that_panics_inside_spans_closes_them() {
    let out = SharedBuf::default();
    let rec = Recorder::builder("thread-panic")
        .capture_step(1)
        .writer(out.clone())
        .build()
        .unwrap();
    {
        let _step = rec.begin_step();
        let _total = rec.measured("update");
        std::thread::scope(|scope| {
            let worker = scope.spawn(|| {
                let _a = rec.span("worker", SpanKind::Function);
                let _b = rec.module("Linear");
                let _c = rec.op_span("matmul");
                panic!("boom in a worker");
            });
            assert!(worker.join().is_err());
        });
        // The loop goes on after the panic.
        let _after = rec.span("after", SpanKind::Function);
    }
    rec.finish().unwrap();
    let doc = out.document();
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    assert_eq!(doc.spans.len(), 5);
    assert!(doc.spans.iter().all(|s| s.duration_ns.is_some()));
}

#[test]
fn a_full_disk_is_returned_by_finish_and_never_stops_the_loop() {
    let full = std::path::Path::new("/dev/full");
    if !full.exists() {
        eprintln!("SKIPPED: no /dev/full on this system");
        return;
    }
    let rec = Recorder::builder("full")
        .capture_step(1)
        .path(full)
        .build()
        .unwrap();
    let mut iterations = 0u64;
    {
        let _step = rec.begin_step();
        let _total = rec.measured("update");
        for _ in 0..50_000 {
            let _s = rec.span("work", SpanKind::Function);
            iterations += 1;
        }
        // Whatever the writer has hit by now, recording goes on.
        let _ = rec.flush(Duration::from_secs(60));
        for _ in 0..1000 {
            let _s = rec.span("after the error", SpanKind::Function);
            iterations += 1;
        }
    }
    assert_eq!(iterations, 51_000);
    match rec.finish() {
        Err(CaptureError::Write { source, .. }) => {
            assert_eq!(source.kind(), io::ErrorKind::StorageFull, "{source}");
        }
        other => panic!("expected a write error, got {other:?}"),
    }
}

#[test]
fn eight_threads_of_a_hundred_thousand_spans_give_exact_counts_and_whole_lines() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 100_000;
    let dir = temp_dir("threads100k");
    let path = dir.join("trace.jsonl");
    let spans = 1 + THREADS * PER_THREAD;
    let rec = Recorder::builder("threads")
        .capture_step(1)
        // Room for every event: nothing may be dropped however far the writer falls behind.
        .queue_capacity(2 * spans + 16)
        .path(&path)
        .build()
        .unwrap();
    {
        let _step = rec.begin_step();
        let _total = rec.measured("all");
        std::thread::scope(|scope| {
            for t in 0..THREADS {
                let rec = &rec;
                scope.spawn(move || {
                    let _root = rec.span(format!("t{t}"), SpanKind::Function);
                    for i in 0..PER_THREAD - 1 {
                        let _s = rec.span(format!("t{t}/{i}"), SpanKind::Function);
                    }
                });
            }
        });
    }
    let report = rec.finish().unwrap();
    assert_eq!(report.events_dropped, 0);
    // The meta line, the spans, the capture_sources line.
    assert_eq!(report.events_written, 1 + 2 * spans as u64 + 1);

    let bytes = std::fs::read(&path).unwrap();
    let text = std::str::from_utf8(&bytes).unwrap();
    assert!(text.ends_with('\n'));
    let mut lines = 0u64;
    for l in text.lines() {
        lines += 1;
        assert!(
            l.starts_with(r#"{"kind":""#) && l.ends_with('}'),
            "torn line: {l}"
        );
    }
    assert_eq!(lines, report.events_written);
    let doc = TraceDocument::from_bytes(&bytes);
    assert!(doc.diagnostics.is_empty(), "{:?}", &doc.diagnostics[..3]);
    assert_eq!(doc.spans.len(), spans);
    let mut per_thread = [0usize; THREADS];
    for s in &doc.spans {
        assert!(s.duration_ns.is_some());
        if s.name != "all" {
            let t: usize = s.name[1..].split('/').next().unwrap().parse().unwrap();
            per_thread[t] += 1;
        }
    }
    assert_eq!(per_thread, [PER_THREAD; THREADS]);
    // Each thread's root is a root (parent stacks are per thread); its spans are at depth 1.
    assert_eq!(doc.summary().max_depth, 1);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_stalled_writer_bounds_the_queue_and_the_trace_says_how_much_was_dropped() {
    const CAPACITY: usize = 1024;
    const EVENTS: u64 = 1_000_000;
    let gate = Gate::default();
    let rec = Recorder::builder("stalled")
        .capture_step(1)
        .queue_capacity(CAPACITY)
        .writer(gate.clone())
        .build()
        .unwrap();
    {
        let _step = rec.begin_step();
        for i in 0..EVENTS {
            rec.emit(TraceEvent::Edge(Edge {
                from_span: "a".into(),
                to_span: "b".into(),
                duration_ns: i,
            }));
        }
    }
    // The writer is stuck on its first write: the queue holds exactly its capacity, every other
    // event was dropped (and counted) instead of growing memory.
    let dropped = EVENTS - CAPACITY as u64;
    assert_eq!(rec.events_dropped(), dropped);
    gate.open();
    let report = rec.finish().unwrap();
    assert_eq!(report.events_dropped, dropped);
    let text = gate.1.text();
    assert_eq!(text.lines().count() as u64, report.events_written);
    let last = text.lines().last().unwrap();
    assert_eq!(
        last,
        format!(
            r#"{{"kind":"capture_stats","events_dropped":{dropped},"events_written":{}}}"#,
            // The meta line, the kept events, the capture_sources line.
            CAPACITY + 2
        )
    );
    let doc = gate.1.document();
    assert!(errors(&doc).is_empty(), "{:?}", errors(&doc));
    assert_eq!(doc.edges.len(), CAPACITY);
    // The kept events are the first ones, in order.
    assert!(doc
        .edges
        .iter()
        .enumerate()
        .all(|(i, e)| e.duration_ns == i as u64));
}

#[test]
fn a_panic_while_the_writer_is_failing_still_closes_spans() {
    // Both at once: the error stays sticky, the panic unwinds through the guards.
    struct Broken;
    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::from(io::ErrorKind::StorageFull))
        }
        fn flush(&mut self) -> io::Result<()> {
            Err(io::Error::from(io::ErrorKind::StorageFull))
        }
    }
    let rec = Recorder::builder("both")
        .capture_step(1)
        .writer(Broken)
        .build()
        .unwrap();
    let result = catch_unwind(AssertUnwindSafe(|| {
        let _step = rec.begin_step();
        let _total = rec.measured("update");
        let _s = rec.span("s", SpanKind::Function);
        panic!("boom");
    }));
    assert!(result.is_err());
    assert!(!rec.is_recording());
    assert!(matches!(rec.finish(), Err(CaptureError::Write { .. })));
}
