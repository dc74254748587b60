//! Tracing spans go to the recorder installed for the step that records them: with recorders
//! one after another on a thread (each thread keeps the routed recorder, checked by a
//! generation number), no span reaches a recorder that has finished or one installed later.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

mod common;

use candle_trace_capture::Recorder;
use common::{span_names, SharedBuf};

/// The subscriber routes to one recorder at a time: these tests take turns.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A recorder of one captured step writing to `out`, installed.
fn installed(out: &SharedBuf) -> Recorder {
    Recorder::builder("routing::test")
        .capture_step(1)
        .writer(out.clone())
        .install()
        .unwrap()
}

#[test]
fn each_recorder_gets_the_tracing_spans_of_its_own_step() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    candle_trace_capture::install().unwrap();
    // Built once, before any recorder, as candle-transformers builds its layers' spans.
    let first = tracing::info_span!("first_layer");
    let second = tracing::info_span!("second_layer");
    let mut outs = Vec::new();
    for span in [&first, &second] {
        let out = SharedBuf::default();
        let recorder = installed(&out);
        let step = recorder.begin_step();
        drop(span.enter());
        drop(step);
        recorder.finish().unwrap();
        outs.push(out);
    }
    // After both have finished, a span goes nowhere.
    drop(first.enter());
    assert_eq!(span_names(&outs[0].document()), ["first_layer"]);
    assert_eq!(span_names(&outs[1].document()), ["second_layer"]);
}

#[test]
fn a_span_entered_in_one_step_and_exited_in_the_next_is_not_closed_in_the_next() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    candle_trace_capture::install().unwrap();
    let outs = [SharedBuf::default(), SharedBuf::default()];
    let mut prefetch: Option<tracing::span::EnteredSpan> = None;
    for out in &outs {
        let recorder = installed(out);
        let step = recorder.begin_step();
        {
            let _total = recorder.measured("update");
            // Entered in the step before, it ends now, in this one.
            drop(prefetch.take());
            prefetch = Some(tracing::info_span!("prefetch").entered());
        }
        drop(step);
        recorder.finish().unwrap();
    }
    drop(prefetch);
    // Each file has its own prefetch, open when its step ended; the second file does not
    // close the first file's span (which once came as a second `span_end` of its own id).
    for out in &outs {
        let doc = out.document();
        let prefetch: Vec<_> = doc.spans.iter().filter(|s| s.name == "prefetch").collect();
        assert_eq!(prefetch.len(), 1, "{}", out.text());
        assert_eq!(prefetch[0].duration_ns, None, "{}", out.text());
        assert!(
            doc.diagnostics
                .iter()
                .all(|d| !d.message.contains("span_end")),
            "{:?}",
            doc.diagnostics
        );
    }
}

#[test]
fn spans_exited_out_of_order_close_their_own_trace_spans() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    candle_trace_capture::install().unwrap();
    let (a, b, c) = (
        tracing::info_span!("outer_a"),
        tracing::info_span!("middle_b"),
        tracing::info_span!("inner_c"),
    );
    let out = SharedBuf::default();
    let recorder = installed(&out);
    let step = recorder.begin_step();
    let ea = a.clone().entered();
    let eb = b.clone().entered();
    let ec = c.clone().entered();
    std::thread::sleep(std::time::Duration::from_millis(2));
    // The middle one first: its trace span must be the one closed, not the innermost.
    drop(eb);
    std::thread::sleep(std::time::Duration::from_millis(2));
    drop(ec);
    drop(ea);
    drop(step);
    recorder.finish().unwrap();
    let doc = out.document();
    let span = |name: &str| doc.spans.iter().find(|s| s.name == name).unwrap();
    let (sa, sb, sc) = (span("outer_a"), span("middle_b"), span("inner_c"));
    assert_eq!(sb.parent_id.as_deref(), Some(sa.id.as_str()));
    assert_eq!(sc.parent_id.as_deref(), Some(sb.id.as_str()));
    // Each closed at its own exit: `middle_b` before `inner_c`, which ran 2 ms longer.
    let (db, dc) = (sb.duration_ns.unwrap(), sc.duration_ns.unwrap());
    assert!(
        sb.end_ns() < sc.end_ns(),
        "middle_b ended at {}, inner_c at {}",
        sb.end_ns(),
        sc.end_ns()
    );
    assert!(dc > 1_000_000 && db > 1_000_000, "{db} {dc}");
    assert!(sa.duration_ns.unwrap() >= sc.end_ns() - sa.start_ns);
}
