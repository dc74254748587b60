//! The staged end of a read (`end_input`, then `records`, then `finish`) against `finish` in one
//! call, on every fixture: the same document, and records that the end-of-file work left as
//! they were when `end_input` returned them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use std::path::{Path, PathBuf};

use candle_trace_schema::format::detect::{AnyDocument, AnyReader, Format};
use candle_trace_schema::format::document::{TraceDocument, TraceReader, TraceRecords};
use candle_trace_schema::format::events::TensorEvent;
use candle_trace_schema::format::events::{CaptureSources, DeviceMemory, Edge, Gradient, Meta};
use candle_trace_schema::format::records::Lined;
use candle_trace_schema::format::table::{MemoryTable, OpTable};

/// Every fixture file, in subdirectories too.
fn fixtures() -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path
                .extension()
                .is_some_and(|x| x == "jsonl" || x == "json")
            {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// An owned copy of [`TraceRecords`], to hold past `finish`.
#[derive(Debug, PartialEq)]
struct Owned {
    meta: Option<Lined<Meta>>,
    capture_sources: Option<Lined<CaptureSources>>,
    skipped_unknown: u64,
    bytes_read: u64,
    ops: OpTable,
    tensors: Vec<Lined<TensorEvent>>,
    memory: MemoryTable,
    device_memory: Vec<Lined<DeviceMemory>>,
    gradients: Vec<Lined<Gradient>>,
    edges: Vec<Lined<Edge>>,
}

fn owned(r: TraceRecords<'_>) -> Owned {
    Owned {
        meta: r.meta.cloned(),
        capture_sources: r.capture_sources.cloned(),
        skipped_unknown: r.skipped_unknown,
        bytes_read: r.bytes_read,
        ops: r.ops.clone(),
        tensors: r.tensors.to_vec(),
        memory: r.memory.clone(),
        device_memory: r.device_memory.to_vec(),
        gradients: r.gradients.to_vec(),
        edges: r.edges.to_vec(),
    }
}

/// The file, and the file without its last newline (the last line then ends the input).
fn variants(bytes: &[u8]) -> [Vec<u8>; 2] {
    let cut = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    [bytes.to_vec(), cut.to_vec()]
}

#[test]
fn the_staged_any_reader_gives_the_document_of_finish() {
    let mut traces = 0;
    for path in fixtures() {
        for bytes in variants(&std::fs::read(&path).unwrap()) {
            let name = path.display();
            let mut whole = AnyReader::new();
            whole.push(&bytes);
            let whole = whole.finish();

            let mut staged = AnyReader::new();
            staged.push(&bytes);
            let read = staged.end_input();
            let records = read.records().map(owned);
            let doc = read.finish();
            assert_eq!(format!("{doc:?}"), format!("{whole:?}"), "{name}");
            // A trace/6 file's records, and no other format's.
            assert_eq!(
                records.is_some(),
                doc.format() == Some(Format::Trace),
                "{name}"
            );
            if let (Some(records), AnyDocument::Trace(t)) = (records, &doc) {
                assert_eq!(records, owned(t.records()), "{name}");
                traces += 1;
            }
        }
    }
    assert!(traces > 80, "trace/6 fixtures read: {traces}");
}

#[test]
fn the_staged_trace_reader_gives_the_document_of_finish() {
    for path in fixtures() {
        if !path.to_string_lossy().ends_with(".trace6.jsonl") {
            continue;
        }
        for bytes in variants(&std::fs::read(&path).unwrap()) {
            let name = path.display();
            let whole = TraceDocument::from_bytes(&bytes);
            let mut reader = TraceReader::new();
            // In two pushes, the second ending mid-line where the file has several lines.
            let half = bytes.len() / 2;
            reader.push(&bytes[..half]);
            reader.push(&bytes[half..]);
            let read = reader.end_input();
            let records = owned(read.records());
            assert_eq!(records.bytes_read, bytes.len() as u64, "{name}");
            let doc = read.finish();
            assert_eq!(format!("{doc:?}"), format!("{whole:?}"), "{name}");
            assert_eq!(records, owned(doc.records()), "{name}");
        }
    }
}

#[test]
fn the_last_line_without_a_newline_is_among_the_records() {
    let file = concat!(
        r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":2,"warmup_steps":1,"device":"cpu","timing_mode":"host","tags":{}}"#,
        "\n",
        r#"{"kind":"edge","from_span":"a","to_span":"b","duration_ns":5}"#
    );
    let mut reader = AnyReader::new();
    reader.push(file.as_bytes());
    let read = reader.end_input();
    let records = read.records().unwrap();
    assert_eq!(records.edges.len(), 1);
    assert_eq!(records.edges[0].line, 2);
    assert_eq!(records.edges[0].event.duration_ns, 5);
    assert_eq!(records.bytes_read, file.len() as u64);
    assert!(records.meta.is_some());
}
