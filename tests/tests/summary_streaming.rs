//! The summary read (`TraceDigestReader`, which `candle-trace summary` uses) against the whole
//! document (`TraceReader`): for every trace/6 file under `tests/fixtures/` (recursively) and
//! for generated traces, whole and in small chunks, the digest must give the same eight
//! summary numbers, the same "not captured" wording, the same counts and exactly the same
//! diagnostics (line, severity, category, message, order) as the document. Lines in reverse
//! order (every `span_end` before its `span_start`, records before their spans) exercise the
//! checks the reader defers to the end of the file.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use std::path::{Path, PathBuf};

use candle_trace_schema::analysis::summary::{NotCaptured, TraceSummary};
use candle_trace_schema::format::detect::{detect, Detection, Format};
use candle_trace_schema::format::digest::{TraceDigest, TraceDigestReader};
use candle_trace_schema::format::document::{TraceDocument, TraceReader};
use candle_trace_tests::fixtures_dir;
use candle_trace_tests::generate::{write_trace, GenConfig};

fn read_document(bytes: &[u8], chunk: usize) -> TraceDocument {
    let mut r = TraceReader::with_size_hint(bytes.len() as u64);
    for c in bytes.chunks(chunk.max(1)) {
        r.push(c);
    }
    r.finish()
}

fn read_digest(bytes: &[u8], chunk: usize) -> TraceDigest {
    let mut r = TraceDigestReader::with_size_hint(bytes.len() as u64);
    for c in bytes.chunks(chunk.max(1)) {
        r.push(c);
    }
    r.finish()
}

/// Everything `summary` prints or could print, from the document and from the digest.
fn assert_same(what: &str, doc: &TraceDocument, digest: &TraceDigest) {
    assert_eq!(
        digest.diagnostics(),
        &doc.diagnostics[..],
        "{what}: diagnostics"
    );
    assert_eq!(
        TraceSummary::of_digest(digest),
        doc.summary(),
        "{what}: summary"
    );
    assert_eq!(
        NotCaptured::of_digest(digest),
        NotCaptured::of(doc),
        "{what}: not captured"
    );
    assert_eq!(digest.op_count(), doc.ops.len() as u64, "{what}: ops");
    assert_eq!(
        digest.tensor_count(),
        doc.tensors.len() as u64,
        "{what}: tensors"
    );
    assert_eq!(
        digest.gradient_count(),
        doc.gradients.len() as u64,
        "{what}: gradients"
    );
    assert_eq!(digest.edge_count(), doc.edges.len() as u64, "{what}: edges");
    assert_eq!(
        digest.skipped_unknown(),
        doc.skipped_unknown,
        "{what}: unknown kinds"
    );
    assert_eq!(digest.bytes_read(), doc.bytes_read, "{what}: bytes");
    assert_eq!(digest.meta(), doc.meta.as_ref(), "{what}: meta");
    assert_eq!(
        digest.capture_sources(),
        doc.capture_sources.as_ref(),
        "{what}: capture_sources"
    );
    assert_eq!(digest.spans(), &doc.spans[..], "{what}: spans");
    assert_eq!(digest.tree(), &doc.tree, "{what}: tree");
    let (a, b) = (digest.memory_profile(), &doc.memory_profile);
    assert_eq!(
        (
            a.peak_bytes,
            a.peak_timestamp_ns,
            &a.peak_device,
            a.peak_by_category
        ),
        (
            b.peak_bytes,
            b.peak_timestamp_ns,
            &b.peak_device,
            b.peak_by_category
        ),
        "{what}: memory peak"
    );
    assert_eq!(a.devices, b.devices, "{what}: memory devices");
    // A summary shows no live-bytes curve, so the digest builds none.
    assert!(a.samples.is_empty(), "{what}: the digest's memory samples");
    assert_eq!(b.samples.len(), doc.memory.len(), "{what}: memory samples");
    assert_eq!((a.alloc_count, a.free_count), (b.alloc_count, b.free_count));
    let live = |p: &candle_trace_schema::MemoryProfile| -> Vec<(String, u64, u64)> {
        p.live_at_peak
            .iter()
            .map(|l| (l.tensor_id.clone(), l.bytes, l.line))
            .collect()
    };
    assert_eq!(live(a), live(b), "{what}: live at the peak");
}

fn check(what: &str, bytes: &[u8]) {
    for chunk in [bytes.len(), 7, 1] {
        if chunk == 1 && bytes.len() > 20_000 {
            continue;
        }
        let doc = read_document(bytes, chunk);
        let digest = read_digest(bytes, chunk);
        assert_same(&format!("{what} in chunks of {chunk}"), &doc, &digest);
    }
}

/// The lines of `bytes` in reverse order.
fn reversed(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + 1);
    for line in bytes.split(|&b| b == b'\n').rev() {
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out
}

fn trace_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            trace_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            let bytes = std::fs::read(&path).unwrap();
            let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
            if detect(bytes, true) == Detection::Known(Format::Trace) {
                out.push(path);
            }
        }
    }
}

#[test]
fn every_trace_fixture_reads_to_the_same_summary_and_diagnostics() {
    let mut files = Vec::new();
    trace_files(&fixtures_dir(), &mut files);
    files.sort();
    assert!(
        files.len() >= 40,
        "only {} trace fixtures found",
        files.len()
    );
    for path in &files {
        let bytes = std::fs::read(path).unwrap();
        let name = path.display().to_string();
        check(&name, &bytes);
        check(&format!("{name} reversed"), &reversed(&bytes));
    }
}

#[test]
fn generated_traces_read_to_the_same_summary_and_diagnostics() {
    for (seed, target_bytes, devices) in [(1, 200_000, 1), (0x5eed, 2_000_000, 2), (7, 600_000, 3)]
    {
        let cfg = GenConfig {
            seed,
            devices,
            ..GenConfig::with_target_bytes(target_bytes)
        };
        let mut bytes = Vec::new();
        let stats = write_trace(&cfg, &mut bytes).unwrap();
        let what = format!("generated seed {seed}, {target_bytes} B");
        check(&what, &bytes);
        let digest = read_digest(&bytes, 1 << 16);
        assert!(
            digest.diagnostics().is_empty(),
            "{what}: {:?}",
            digest.diagnostics()
        );
        assert_eq!(digest.op_count(), stats.ops);
        assert_eq!(digest.summary().span_count, stats.spans);
        assert_eq!(digest.summary().peak_bytes, stats.peak_bytes());
        check(&format!("{what} reversed"), &reversed(&bytes));
    }
}
