//! The compact span records (interned names, 32-byte ring slots) decode back to the spans the
//! program opened: every name, parent, kind and step, read back with the schema's reader.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

mod common;

use std::collections::BTreeMap;

use candle_trace_capture::{Pass, Recorder, SpanKind};
use common::SharedBuf;

/// 300 distinct `'static` names (more than a thread's name cache has slots, so slots are
/// shared and names are asked of the table again), some of them equal in text at another
/// address, plus owned names, on four threads: each span reads back with the name, parent,
/// kind and step it was opened with.
#[test]
fn interned_and_owned_names_read_back_as_opened() {
    const THREADS: usize = 4;
    const NAMES: usize = 300;
    let names: Vec<&'static str> = (0..NAMES)
        .map(|i| &*Box::leak(format!("layer.{}", i % 250).into_boxed_str()))
        .collect();
    let out = SharedBuf::default();
    let rec = Recorder::builder("records")
        .capture_step(1)
        .queue_capacity(1 << 16)
        .writer(out.clone())
        .build()
        .unwrap();
    // (name, parent name, kind, step) of every span, as opened.
    let mut opened: Vec<(String, Option<String>, &str, Option<&str>)> = Vec::new();
    {
        let _step = rec.begin_step();
        // Spans opened on the other threads have no parent: each thread has its own stack.
        let _total = rec.measured("all");
        opened.push(("all".to_string(), None, "function", None));
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (rec, names) = (&rec, &names);
                    scope.spawn(move || {
                        let mut mine = Vec::new();
                        let root = format!("thread {t}");
                        let _root = rec.span(root.clone(), SpanKind::Function);
                        mine.push((root.clone(), None, "function", None));
                        let _backward = rec.pass(Pass::Backward);
                        mine.push((
                            "backward".to_string(),
                            Some(root),
                            "function",
                            Some("backward"),
                        ));
                        for round in 0..3 {
                            for (i, name) in names.iter().enumerate() {
                                let i = (i + t * 7 + round) % NAMES;
                                let _m = rec.module(names[i]);
                                let _o = rec.op_span(*name);
                                mine.push((
                                    names[i].to_string(),
                                    Some("backward".to_string()),
                                    "module",
                                    Some("backward"),
                                ));
                                mine.push((
                                    name.to_string(),
                                    Some(names[i].to_string()),
                                    "op",
                                    Some("backward"),
                                ));
                            }
                        }
                        mine
                    })
                })
                .collect();
            for h in handles {
                opened.extend(h.join().unwrap());
            }
        });
    }
    let report = rec.finish().unwrap();
    assert_eq!(report.events_dropped, 0);
    let doc = out.document();
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    assert_eq!(doc.spans.len(), opened.len());
    let read: Vec<(String, Option<String>, &str, Option<&str>)> = doc
        .spans
        .iter()
        .map(|s| {
            (
                s.name.to_string(),
                s.parent_id
                    .as_ref()
                    .map(|p| doc.span(p).unwrap().name.to_string()),
                s.span_kind.as_str(),
                s.pass.map(Pass::as_str),
            )
        })
        .collect();
    assert_eq!(count(&read), count(&opened));
}

/// How many times each item occurs.
fn count<T: Ord + Clone>(items: &[T]) -> BTreeMap<T, usize> {
    let mut m = BTreeMap::new();
    for x in items {
        *m.entry(x.clone()).or_insert(0) += 1;
    }
    m
}

/// The same text at two addresses and as an owned string is one name, escaped alike.
#[test]
fn the_same_name_text_has_one_line_form() {
    let out = SharedBuf::default();
    let rec = Recorder::builder("one-name")
        .capture_step(1)
        .writer(out.clone())
        .build()
        .unwrap();
    let a: &'static str = "quote\" and é";
    let b: &'static str = Box::leak(String::from(a).into_boxed_str());
    {
        let _step = rec.begin_step();
        let _total = rec.measured("m");
        let _x = rec.span(a, SpanKind::Function);
        let _y = rec.span(b, SpanKind::Module);
        let _z = rec.span(String::from(a), SpanKind::Op);
    }
    rec.finish().unwrap();
    let doc = out.document();
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    let names: Vec<&str> = doc.spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["m", a, a, a]);
}
