//! The recorder end to end: everything is read back with the schema's trace reader.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

mod common;

use std::io::{self, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use candle_trace_capture::{CaptureError, Pass, Recorder, Sink, SpanKind, TimingMode};
use candle_trace_schema::format::diagnostics::Category;
use candle_trace_schema::format::events::{Edge, Op, TraceEvent};
use common::{errors, parent_name, span_names, temp_dir, Gate, SharedBuf};

fn op(span_id: String, name: &str) -> TraceEvent {
    TraceEvent::Op(Op {
        span_id: span_id.into(),
        op_name: name.into(),
        inputs: vec![],
        output: None,
        shape: vec![2, 3],
        dtype: "f32".into(),
        device: "cpu".into(),
        duration_ns: 10,
        timestamp_ns: 0,
        storage_bytes: None,
        input_storage_bytes: 0,
    })
}

#[test]
fn only_the_capture_step_is_recorded() {
    let out = SharedBuf::default();
    let rec = Recorder::builder("train::step")
        .warmup_steps(1)
        .device("cuda:0")
        .tag("batch_size", "8")
        .correlation_id("corr-1")
        .run_id("run-1")
        .candle_version("0.9.1")
        .writer(out.clone())
        .build()
        .unwrap();
    assert!(!rec.is_recording());
    for n in 1..=4u64 {
        let step = rec.begin_step();
        assert_eq!(step.step(), n);
        assert_eq!(step.is_captured(), n == 2);
        assert_eq!(rec.is_recording(), n == 2);
        let _total = rec.measured("update");
        let outer = rec.span(format!("step{n}"), SpanKind::Function);
        {
            let _inner = rec.op_span("matmul");
            // Instrumentation that checks the flag, and instrumentation that does not: the
            // recorder drops the latter outside the captured step.
            if rec.is_recording() {
                rec.emit(op(rec.current_span_id().unwrap(), "matmul"));
            }
            rec.emit(op(rec.current_span_id().unwrap_or_default(), "unchecked"));
        }
        assert_eq!(outer.is_recording(), n == 2);
        drop(outer);
        drop(_total);
        drop(step);
        assert!(!rec.is_recording());
        assert_eq!(rec.capture_done(), n >= 2);
    }
    let report = rec.finish().unwrap();
    assert_eq!(report.events_dropped, 0);
    assert!(report.notes.is_empty(), "{:?}", report.notes);
    // meta + 3 spans × 2 + 2 ops + capture_sources
    assert_eq!(report.events_written, 10);
    assert_eq!(report.bytes_written, out.bytes().len() as u64);
    assert_eq!(report.path, None);

    let doc = out.document();
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    assert_eq!(span_names(&doc), ["update", "step2", "matmul"]);
    assert_eq!(parent_name(&doc, "step2").as_deref(), Some("update"));
    assert_eq!(parent_name(&doc, "matmul").as_deref(), Some("step2"));
    assert_eq!(doc.spans[2].span_kind, SpanKind::Op);
    assert_eq!(doc.ops.len(), 2);
    assert!(doc.ops.iter().all(|o| o.span_id == doc.spans[2].id));
    let meta = &doc.meta.as_ref().unwrap().event;
    assert_eq!((meta.capture_step, meta.warmup_steps), (2, 1));
    assert_eq!(meta.device, "cuda:0");
    assert_eq!(meta.run_id, "run-1");
    assert_eq!(meta.correlation_id, "corr-1");
    assert_eq!(meta.tags["batch_size"], "8");
    assert_eq!(meta.candle_version.as_deref(), Some("0.9.1"));
    assert_eq!(meta.timing_mode, TimingMode::Host);
    assert!(!meta.measured_region_device_synchronized);
    let summary = doc.summary();
    assert_eq!(summary.total_ns, doc.spans[0].duration_ns.unwrap());
    assert_eq!(summary.max_depth, 2);
}

#[test]
fn a_capture_step_never_reached_is_noted() {
    let rec = Recorder::builder("e")
        .capture_step(5)
        .writer(io::sink())
        .build()
        .unwrap();
    let _ = rec.begin_step();
    let report = rec.finish().unwrap();
    // meta + capture_sources
    assert_eq!(report.events_written, 2);
    assert!(
        report.notes[0].contains("never reached"),
        "{:?}",
        report.notes
    );
    assert!(matches!(rec.finish(), Err(CaptureError::AlreadyFinished)));
}

#[test]
fn eight_threads_nest_their_own_spans() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 10_000;
    let out = SharedBuf::default();
    let rec = Recorder::builder("threads")
        .capture_step(1)
        .queue_capacity(1 << 18)
        .writer(out.clone())
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
                    for _ in 0..(PER_THREAD - 1) / 3 {
                        let _a = rec.module(format!("t{t}/a"));
                        let _b = rec.span(format!("t{t}/b"), SpanKind::Function);
                        let _c = rec.op_span(format!("t{t}/c"));
                    }
                });
            }
        });
    }
    let report = rec.finish().unwrap();
    assert_eq!(report.events_dropped, 0);
    let spans = 1 + THREADS * PER_THREAD;
    // meta + spans + capture_sources
    assert_eq!(report.events_written, 1 + 2 * spans as u64 + 1);

    let text = out.text();
    assert!(text
        .lines()
        .all(|l| l.starts_with(r#"{"kind":""#) && l.ends_with('}')));
    let doc = out.document();
    assert!(doc.diagnostics.is_empty(), "{:?}", &doc.diagnostics[..3]);
    assert_eq!(doc.spans.len(), spans);
    let summary = doc.summary();
    assert_eq!(summary.root_span_count, 1 + THREADS as u64);
    assert_eq!(summary.max_depth, 3);
    let thread_of = |name: &str| name.split('/').next().unwrap().to_string();
    let mut per_thread = std::collections::BTreeMap::<String, usize>::new();
    for span in &doc.spans {
        assert!(span.duration_ns.is_some());
        if span.name == "all" {
            continue;
        }
        *per_thread.entry(thread_of(&span.name)).or_default() += 1;
        match &span.parent_id {
            None => assert!(!span.name.contains('/'), "{}", span.name),
            Some(parent) => {
                let parent = doc.span(parent).unwrap();
                assert_eq!(thread_of(&parent.name), thread_of(&span.name));
            }
        }
    }
    assert_eq!(per_thread.len(), THREADS);
    assert!(per_thread.values().all(|&n| n == PER_THREAD));
}

#[test]
fn a_panic_inside_spans_closes_them_and_ends_the_step() {
    let out = SharedBuf::default();
    let rec = Recorder::builder("panics")
        .capture_step(1)
        .writer(out.clone())
        .build()
        .unwrap();
    let result = catch_unwind(AssertUnwindSafe(|| {
        let _step = rec.begin_step();
        let _total = rec.measured("update");
        let _fwd = rec.pass(Pass::Forward);
        let _linear = rec.module("Linear");
        panic!("boom inside a span");
    }));
    assert!(result.is_err());
    assert!(!rec.is_recording());
    rec.finish().unwrap();
    let doc = out.document();
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    assert_eq!(span_names(&doc), ["update", "forward", "Linear"]);
    assert!(doc.spans.iter().all(|s| s.duration_ns.is_some()));
    // The module inherits the step of the span it is in.
    assert_eq!(doc.spans[2].pass, Some(Pass::Forward));
    assert_eq!(doc.spans[0].pass, None);
}

/// Errors once `limit` bytes have been written: first "first failure", then "later failure".
struct FailingWriter {
    limit: usize,
    written: usize,
    failures: u32,
}

impl Write for FailingWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.written + buf.len() > self.limit {
            self.failures += 1;
            let which = if self.failures == 1 { "first" } else { "later" };
            return Err(io::Error::other(format!("{which} failure")));
        }
        self.written += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_failing_writer_is_reported_by_finish_and_never_stops_the_loop() {
    let rec = Recorder::builder("fails")
        .capture_step(1)
        .writer(FailingWriter {
            limit: 4096,
            written: 0,
            failures: 0,
        })
        .build()
        .unwrap();
    let mut iterations = 0;
    {
        let _step = rec.begin_step();
        for _ in 0..20_000 {
            let _s = rec.span("work", SpanKind::Function);
            iterations += 1;
        }
        // Let the writer hit the error while recording continues.
        assert!(rec.flush(Duration::from_secs(10)) || rec.events_dropped() > 0);
        for _ in 0..1000 {
            let _s = rec.span("after the error", SpanKind::Function);
            iterations += 1;
        }
    }
    assert_eq!(iterations, 21_000);
    match rec.finish() {
        Err(CaptureError::Write {
            source,
            target,
            bytes_written,
        }) => {
            assert_eq!(source.to_string(), "first failure");
            assert_eq!(target, "writer");
            assert!(bytes_written > 4096, "{bytes_written}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_atomic_capture_appears_only_at_finish() {
    let dir = temp_dir("atomic");
    let path = dir.join("trace.jsonl");
    let tmp = dir.join("trace.jsonl.tmp");
    let rec = Recorder::builder("atomic")
        .capture_step(1)
        .path(&path)
        .atomic(true)
        .build()
        .unwrap();
    {
        let _step = rec.begin_step();
        let _total = rec.measured("update");
    }
    assert!(rec.flush(Duration::from_secs(10)));
    assert!(!path.exists());
    assert!(tmp.exists());
    let report = rec.finish().unwrap();
    assert_eq!(report.path.as_deref(), Some(path.as_path()));
    assert!(path.exists());
    assert!(!tmp.exists());
    let doc = candle_trace_schema::format::document::TraceDocument::from_bytes(
        &std::fs::read(&path).unwrap(),
    );
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    assert_eq!(doc.spans.len(), 1);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_plain_path_is_readable_while_recording_and_after_drop() {
    let dir = temp_dir("plain");
    let path = dir.join("trace.jsonl");
    let rec = Recorder::builder("plain")
        .capture_step(1)
        .path(&path)
        .build()
        .unwrap();
    let step = rec.begin_step();
    let span = rec.span("open", SpanKind::Function);
    assert!(rec.flush(Duration::from_secs(10)));
    let doc = candle_trace_schema::format::document::TraceDocument::from_bytes(
        &std::fs::read(&path).unwrap(),
    );
    assert!(errors(&doc).is_empty());
    assert_eq!(doc.spans.len(), 1);
    drop(span);
    drop(step);
    // Dropped without finish(): the writer still drains and flushes.
    drop(rec);
    let doc = candle_trace_schema::format::document::TraceDocument::from_bytes(
        &std::fs::read(&path).unwrap(),
    );
    assert!(errors(&doc).is_empty(), "{:?}", errors(&doc));
    assert!(doc.spans[0].duration_ns.is_some());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_second_measured_region_is_refused_and_noted() {
    let out = SharedBuf::default();
    let rec = Recorder::builder("measured")
        .capture_step(1)
        .writer(out.clone())
        .build()
        .unwrap();
    {
        let _step = rec.begin_step();
        {
            let first = rec.measured("first");
            assert!(first.is_recording());
        }
        let second = rec.measured("second");
        assert!(!second.is_recording());
        assert_eq!(second.id(), None);
    }
    let report = rec.finish().unwrap();
    assert_eq!(report.notes.len(), 1);
    assert!(report.notes[0].contains("`second`"));
    let doc = out.document();
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    assert_eq!(span_names(&doc), ["first"]);
}

#[test]
fn device_sync_runs_at_the_measured_edges_and_on_spans_only_when_synchronized() {
    for (mode, want) in [
        (TimingMode::Host, 2),
        (TimingMode::DeviceSynchronized, 2 + 2 * 2),
    ] {
        let calls = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&calls);
        let out = SharedBuf::default();
        let rec = Recorder::builder("sync")
            .capture_step(1)
            .timing_mode(mode)
            .device_sync(move || {
                counter.fetch_add(1, Ordering::Relaxed);
            })
            .writer(out.clone())
            .build()
            .unwrap();
        {
            let _step = rec.begin_step();
            let _total = rec.measured("update");
            let _a = rec.span("a", SpanKind::Function);
            let _b = rec.module("b");
        }
        rec.finish().unwrap();
        assert_eq!(calls.load(Ordering::Relaxed), want, "{mode:?}");
        let doc = out.document();
        let meta = &doc.meta.as_ref().unwrap().event;
        assert!(meta.measured_region_device_synchronized);
        assert_eq!(meta.timing_mode, mode);
    }
}

#[test]
fn emit_refuses_meta_and_writes_other_events_through_sink() {
    let out = SharedBuf::default();
    let rec = Recorder::builder("emit")
        .capture_step(1)
        .writer(out.clone())
        .build()
        .unwrap();
    let sink: &dyn Sink = &rec;
    assert_eq!(sink.device(), "cpu");
    {
        let _step = rec.begin_step();
        let _total = rec.measured("update");
        let span = rec.span("s", SpanKind::Function);
        assert_eq!(sink.current_span_id(), span.id());
        let a = sink.now_ns();
        assert!(sink.now_ns() >= a);
        sink.emit(TraceEvent::Edge(Edge {
            from_span: span.id().unwrap(),
            to_span: span.id().unwrap(),
            duration_ns: 0,
        }));
        assert!(rec.flush(Duration::from_secs(10)));
        let copy = out.document();
        sink.emit(TraceEvent::Meta(copy.meta.unwrap().event));
    }
    assert_eq!(sink.current_span_id(), None);
    assert_eq!(sink.device(), rec.device());
    let report = rec.finish().unwrap();
    assert_eq!(report.notes.len(), 1);
    let doc = out.document();
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    assert_eq!(doc.edges.len(), 1);
}

#[test]
fn a_full_queue_drops_counts_and_says_so_in_the_file() {
    let gate = Gate::default();
    let rec = Recorder::builder("drops")
        .capture_step(1)
        .queue_capacity(4)
        .writer(gate.clone())
        .build()
        .unwrap();
    {
        let _step = rec.begin_step();
        // The writer thread is stuck writing the meta line, so only 4 edges fit.
        for i in 0..100u64 {
            rec.emit(TraceEvent::Edge(Edge {
                from_span: "a".into(),
                to_span: "b".into(),
                duration_ns: i,
            }));
        }
    }
    assert_eq!(rec.events_dropped(), 96);
    gate.open();
    let report = rec.finish().unwrap();
    assert_eq!(report.events_dropped, 96);
    // meta + 4 edges + capture_sources + capture_stats
    assert_eq!(report.events_written, 7);
    let text = gate.1.text();
    let last = text.lines().last().unwrap();
    assert_eq!(
        last,
        r#"{"kind":"capture_stats","events_dropped":96,"events_written":6}"#
    );
    let doc = gate.1.document();
    assert!(errors(&doc).is_empty(), "{:?}", errors(&doc));
    assert_eq!(doc.edges.len(), 4);
    assert!(doc
        .diagnostics
        .iter()
        .any(|d| d.category == Category::UnknownKind && d.line == 7));
}

/// A device timer that measures every span as 4 242 ns.
struct FixedTimer;

impl candle_trace_capture::sync::SpanTimer for FixedTimer {
    fn start(&self) -> Option<candle_trace_capture::sync::TimerMark> {
        Some(candle_trace_capture::sync::TimerMark::new(4_242u64))
    }
    fn elapsed_ns(&self, mark: candle_trace_capture::sync::TimerMark) -> Option<u64> {
        mark.into_inner::<u64>()
    }
}

#[test]
fn a_span_timer_times_nested_spans_and_the_measured_region_keeps_the_host_clock() {
    let out = SharedBuf::default();
    let rec = Recorder::builder("timer")
        .capture_step(1)
        .span_timer(FixedTimer)
        .writer(out.clone())
        .build()
        .unwrap();
    {
        let _step = rec.begin_step();
        let _total = rec.measured("total");
        let _a = rec.module("a");
        std::thread::sleep(std::time::Duration::from_millis(2));
        let _b = rec.op_span("b");
    }
    rec.finish().unwrap();
    let doc = out.document();
    let meta = doc.meta.as_ref().unwrap();
    assert_eq!(meta.event.timing_mode, TimingMode::DeviceSynchronized);
    let duration = |name: &str| {
        doc.spans
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.duration_ns)
            .unwrap()
    };
    assert_eq!(duration("a"), 4_242);
    assert_eq!(duration("b"), 4_242);
    // The host clock: at least the 2 ms slept inside it.
    assert!(duration("total") >= 2_000_000);
}
