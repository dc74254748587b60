//! `candle-trace summary`.

use std::io::Write;
use std::path::Path;

use candle_trace_schema::analysis::coverage::{Coverage, TraceCoverage};
use candle_trace_schema::analysis::modules::module_name;
use candle_trace_schema::analysis::percentiles::Percentiles;
use candle_trace_schema::analysis::summary::{NotCaptured, TraceSummary};
use candle_trace_schema::analysis::units::{format_bytes, format_ns};
use candle_trace_schema::format::detect::{AnyDocument, AnySummary, Format};
use candle_trace_schema::format::diagnostics::DiagnosticCounts;
use candle_trace_schema::format::digest::TraceDigest;
use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::events::{source, CaptureSources, Meta};
use candle_trace_schema::format::memory::MemoryProfile;
use candle_trace_schema::format::profile::ProfileDocument;
use candle_trace_schema::format::records::Span;
use candle_trace_schema::format::tracks::ChromeImport;
use serde::Serialize;

use super::table::{Align, Table};
use super::{write_json, EXIT_OK};

/// `summary --json` for a trace: the eight fields at the top level, everything else under
/// `extra`.
#[derive(Serialize)]
struct TraceSummaryJson<'a> {
    #[serde(flatten)]
    summary: TraceSummary,
    extra: Extra<'a>,
}

#[derive(Serialize)]
struct Extra<'a> {
    format: &'static str,
    errors: u64,
    warnings: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    entrypoint: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    peak_device: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    peak_timestamp_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    chrome: Option<ChromeExtra>,
    /// The `capture_sources` line; `null` when the file has none.
    capture_sources: Option<&'a CaptureSources>,
    /// Module coverage of the forward spans; absent without a forward span.
    #[serde(skip_serializing_if = "Option::is_none")]
    module_coverage: Option<CoverageJson>,
}

/// `extra.module_coverage`.
#[derive(Serialize)]
struct CoverageJson {
    #[serde(flatten)]
    overall: Coverage,
    forwards: usize,
    backward_unsplit: bool,
}

/// What an imported Chrome JSON file held beyond spans.
#[derive(Serialize)]
struct ChromeExtra {
    tracks: usize,
    instants: usize,
    counter_samples: usize,
    skipped_events: u64,
    synthetic_root: bool,
}

fn format_name(doc: &TraceDocument) -> &'static str {
    if doc.chrome.is_some() {
        Format::Chrome.name()
    } else {
        Format::Trace.name()
    }
}

/// `candle-trace summary FILE` from a [`AnySummaryReader`]'s read: a trace/6 file read for its
/// summary only, anything else whole.
pub(super) fn run_read(
    path: &Path,
    read: &AnySummary,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    match read {
        AnySummary::Trace(digest) => {
            trace(path, &TraceNumbers::of_digest(digest), json, out)?;
            Ok(EXIT_OK)
        }
        AnySummary::Document(doc) => run(path, doc, json, out),
    }
}

pub(super) fn run(
    path: &Path,
    doc: &AnyDocument,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    match doc {
        AnyDocument::Trace(t) => trace(path, &TraceNumbers::of_document(t), json, out)?,
        AnyDocument::Profile(p) => profile(path, p, json, out)?,
        AnyDocument::Unsupported { .. } => unreachable_unsupported()?,
    }
    Ok(EXIT_OK)
}

/// `read` turns unsupported files into errors before any command runs.
pub(super) fn unreachable_unsupported() -> anyhow::Result<()> {
    anyhow::bail!("unsupported file format")
}

/// Everything the trace summary prints, from a whole document or from a digest (the same
/// numbers for the same file: `tests/summary_streaming.rs` compares the two outputs).
struct TraceNumbers<'a> {
    format: &'static str,
    summary: TraceSummary,
    counts: DiagnosticCounts,
    profile: &'a MemoryProfile,
    meta: Option<&'a Meta>,
    sources: Option<&'a CaptureSources>,
    not_captured: NotCaptured,
    gradients: u64,
    chrome: Option<&'a ChromeImport>,
    coverage: TraceCoverage,
    /// Spans with a module name.
    named_spans: u64,
}

fn named_spans(spans: &[Span]) -> u64 {
    spans.iter().filter(|s| module_name(s).is_some()).count() as u64
}

impl<'a> TraceNumbers<'a> {
    fn of_document(doc: &'a TraceDocument) -> Self {
        TraceNumbers {
            format: format_name(doc),
            summary: doc.summary(),
            counts: doc.diagnostic_counts(),
            profile: &doc.memory_profile,
            meta: doc.meta.as_ref().map(|m| &m.event),
            sources: doc.capture_sources.as_ref().map(|l| &l.event),
            not_captured: NotCaptured::of(doc),
            gradients: doc.gradients.len() as u64,
            chrome: doc.chrome.as_deref(),
            coverage: TraceCoverage::of(doc),
            named_spans: named_spans(&doc.spans),
        }
    }

    fn of_digest(digest: &'a TraceDigest) -> Self {
        TraceNumbers {
            format: Format::Trace.name(),
            summary: digest.summary(),
            counts: digest.diagnostic_counts(),
            profile: digest.memory_profile(),
            meta: digest.meta().map(|m| &m.event),
            sources: digest.capture_sources().map(|l| &l.event),
            not_captured: NotCaptured::of_digest(digest),
            gradients: digest.gradient_count(),
            chrome: None,
            coverage: TraceCoverage::of_digest(digest),
            named_spans: named_spans(digest.spans()),
        }
    }
}

fn trace(
    path: &Path,
    doc: &TraceNumbers<'_>,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let summary = doc.summary;
    let counts = doc.counts;
    let profile = doc.profile;
    if json {
        return write_json(
            out,
            &TraceSummaryJson {
                summary,
                extra: Extra {
                    format: doc.format,
                    errors: counts.errors,
                    warnings: counts.warnings,
                    entrypoint: doc.meta.map(|m| m.entrypoint.as_str()),
                    peak_device: profile.peak_device.as_deref(),
                    peak_timestamp_ns: profile.peak_timestamp_ns,
                    chrome: doc.chrome.map(|c| ChromeExtra {
                        tracks: c.tracks.len(),
                        instants: c.instants.len(),
                        counter_samples: c.counters.len(),
                        skipped_events: c.skipped_count(),
                        synthetic_root: c.synthetic_root,
                    }),
                    capture_sources: doc.sources,
                    module_coverage: (!doc.coverage.forwards.is_empty()).then_some(CoverageJson {
                        overall: doc.coverage.overall,
                        forwards: doc.coverage.forwards.len(),
                        backward_unsplit: doc.coverage.backward_unsplit,
                    }),
                },
            },
        );
    }
    writeln!(out, "{} — {}", path.display(), doc.format)?;
    if let Some(meta) = doc.meta {
        let phase = match meta.phase {
            candle_trace_schema::format::events::Phase::Train => "train",
            candle_trace_schema::format::events::Phase::Infer => "infer",
        };
        let timing = match meta.timing_mode {
            candle_trace_schema::format::events::TimingMode::Host => "host",
            candle_trace_schema::format::events::TimingMode::DeviceSynchronized => {
                "device_synchronized"
            }
        };
        writeln!(
            out,
            "{} · {phase} · {} · timing {timing}{} · step {} after {} warm-up",
            meta.entrypoint,
            meta.device,
            if meta.measured_region_device_synchronized {
                " (measured region synchronized)"
            } else {
                ""
            },
            meta.capture_step,
            meta.warmup_steps,
        )?;
    }
    writeln!(out)?;
    let mut t = Table::new(&[
        ("metric", Align::Left),
        ("value", Align::Right),
        ("exact", Align::Right),
    ]);
    let peak_at = match (&profile.peak_device, profile.peak_timestamp_ns) {
        (Some(d), Some(ts)) => format!(" on {d} at {}", format_ns(ts)),
        _ => String::new(),
    };
    let not_captured = doc.not_captured.clone();
    let ops = match not_captured.ops {
        Some(why) => why,
        None => summary.op_count.to_string(),
    };
    let (peak, peak_exact) = match not_captured.memory {
        Some(why) => (why, String::new()),
        None => (
            format!("{}{peak_at}", format_bytes(summary.peak_bytes)),
            format!("{} B", summary.peak_bytes),
        ),
    };
    let gradients = match not_captured.gradients {
        Some(why) => why,
        None => doc.gradients.to_string(),
    };
    let rows = [
        (
            "total (measured)",
            format_ns(summary.total_ns),
            format!("{} ns", summary.total_ns),
        ),
        ("ops", ops, String::new()),
        ("spans", summary.span_count.to_string(), String::new()),
        (
            "root spans",
            summary.root_span_count.to_string(),
            String::new(),
        ),
        ("max depth", summary.max_depth.to_string(), String::new()),
        ("allocs", summary.alloc_count.to_string(), String::new()),
        ("frees", summary.free_count.to_string(), String::new()),
        ("peak memory", peak, peak_exact),
        ("gradients", gradients, String::new()),
    ];
    for (name, value, exact) in rows {
        t.row(vec![name.to_string(), value, exact]);
    }
    write!(out, "{}", t.render())?;
    writeln!(out)?;
    captured_lines(doc.sources, out)?;
    module_lines(doc, out)?;
    if let Some(c) = doc.chrome {
        writeln!(out)?;
        let names: Vec<String> = c.tracks.iter().map(|t| t.label()).collect();
        writeln!(
            out,
            "chrome import: {} track(s) ({}), {} instant(s), {} counter sample(s), {} skipped event(s){}",
            c.tracks.len(),
            names.join(", "),
            c.instants.len(),
            c.counters.len(),
            c.skipped_count(),
            if c.synthetic_root {
                "; measured region = the synthetic root span `(trace)` over the whole file"
            } else {
                ""
            }
        )?;
    }
    diagnostics_line(path, counts.errors, counts.warnings, out)
}

/// How capture names a model's modules (the summary says it where a trace has no names).
pub(super) const HOW_TO_NAME: &str = "wrap the VarBuilder with \
    `candle_trace_capture::nn::name_modules(vb)` before building the model, or build candle-nn \
    layers through `candle_trace_capture::nn::{linear, conv2d, embedding, layer_norm, rms_norm, …}` \
    (candle-nn's own layers open no spans)";

/// The module lines: how much of the forward the modules cover, that backward has no
/// per-module split, and whether module names were captured.
fn module_lines(doc: &TraceNumbers<'_>, out: &mut dyn Write) -> anyhow::Result<()> {
    let c = &doc.coverage;
    if let Some(line) = c.overall.sentence() {
        let per = if c.forwards.len() > 1 {
            format!(" over {} forward spans", c.forwards.len())
        } else {
            String::new()
        };
        writeln!(out, "{line}{per}")?;
    }
    if c.backward_unsplit {
        writeln!(
            out,
            "backward is one span with no per-module split (candle's backward opens no spans)"
        )?;
    }
    // A Chrome import has no module names to capture.
    if doc.chrome.is_some() {
        return Ok(());
    }
    let names_source = doc
        .sources
        .and_then(|s| s.sources.iter().find(|x| x.source == source::MODULE_NAMES));
    if doc.named_spans > 0 {
        writeln!(
            out,
            "module names: {} span(s) named by their weights",
            doc.named_spans
        )?;
    } else if doc.summary.span_count > 0 {
        let why = match names_source {
            Some(x) if x.on => " (no span was named)",
            Some(_) => " (module_names off)",
            None => "",
        };
        writeln!(out, "module names: not captured{why} — {HOW_TO_NAME}")?;
    }
    Ok(())
}

/// The `captured:` line (each source on/off with its event count), dropped events, and every
/// warning the capture wrote.
fn captured_lines(sources: Option<&CaptureSources>, out: &mut dyn Write) -> anyhow::Result<()> {
    let Some(sources) = sources else {
        writeln!(
            out,
            "captured: not stated (the file has no capture_sources line)"
        )?;
        return Ok(());
    };
    let parts: Vec<String> = sources
        .sources
        .iter()
        .map(|s| {
            let threshold = s
                .threshold_bytes
                .map_or(String::new(), |t| format!(", ≥ {}", format_bytes(t)));
            if s.on {
                format!("{} on ({} events{threshold})", s.source, s.events)
            } else {
                format!("{} off", s.source)
            }
        })
        .collect();
    writeln!(
        out,
        "captured: {}",
        if parts.is_empty() {
            String::from("no sources listed")
        } else {
            parts.join(", ")
        }
    )?;
    if sources.events_dropped > 0 {
        writeln!(
            out,
            "events dropped: {} (the writer's rings were full)",
            sources.events_dropped
        )?;
    }
    for w in &sources.warnings {
        writeln!(out, "capture warning: {w}")?;
    }
    Ok(())
}

fn diagnostics_line(
    path: &Path,
    errors: u64,
    warnings: u64,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    writeln!(out)?;
    if errors + warnings == 0 {
        writeln!(out, "no diagnostics")?;
    } else {
        writeln!(
            out,
            "{errors} error(s), {warnings} warning(s){} — see `candle-trace validate {}`",
            if errors > 0 {
                ": the file is untrusted"
            } else {
                ""
            },
            path.display()
        )?;
    }
    Ok(())
}

fn profile(
    path: &Path,
    doc: &ProfileDocument,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let summary = doc.summary();
    if json {
        return write_json(out, &summary);
    }
    let counts = candle_trace_schema::format::diagnostics::DiagnosticCounts::of(&doc.diagnostics);
    writeln!(
        out,
        "{} — inference profile (schema_version 1)",
        path.display()
    )?;
    writeln!(
        out,
        "{} request(s), {} event(s), {} invalid",
        summary.request_count, summary.event_count, summary.invalid_event_count
    )?;
    if summary.iteration_count > 0 {
        let it = doc.iterations();
        if let (Some(b), Some(d)) = (it.batch_size, it.duration_ns) {
            writeln!(
                out,
                "{} batched forward(s): batch size p50 {}, p90 {}; forward time p50 {}, p90 {} (query --kind iterations)",
                summary.iteration_count,
                b.p50,
                b.p90,
                format_ns(d.p50),
                format_ns(d.p90)
            )?;
        }
    }
    writeln!(out)?;
    let mut t = Table::new(&[("event kind", Align::Left), ("count", Align::Right)]);
    for (kind, n) in &summary.events_by_kind {
        t.row(vec![kind.clone(), n.to_string()]);
    }
    write!(out, "{}", t.render())?;
    writeln!(out)?;
    let mut t = Table::new(&[("status", Align::Left), ("count", Align::Right)]);
    for (status, n) in &summary.events_by_status {
        t.row(vec![status.clone(), n.to_string()]);
    }
    write!(out, "{}", t.render())?;
    writeln!(out)?;
    let mut t = Table::new(&[
        ("latency", Align::Left),
        ("n", Align::Right),
        ("p50", Align::Right),
        ("p90", Align::Right),
        ("p99", Align::Right),
        ("max", Align::Right),
        ("mean", Align::Right),
    ]);
    let mut latency_row = |name: &str, p: &Option<Percentiles>, ns_per_unit: u64| {
        let f = |v: u64| format_ns(v.saturating_mul(ns_per_unit));
        match p {
            Some(p) => t.row(vec![
                name.into(),
                p.count.to_string(),
                f(p.p50),
                f(p.p90),
                f(p.p99),
                f(p.max),
                f(p.mean),
            ]),
            None => t.row(vec![
                name.into(),
                "0".into(),
                "–".into(),
                "–".into(),
                "–".into(),
                "–".into(),
                "–".into(),
            ]),
        }
    };
    latency_row("time to first token", &summary.ttft_us, 1_000);
    latency_row("inter-token latency", &summary.itl_nanos, 1);
    write!(out, "{}", t.render())?;
    diagnostics_line(path, counts.errors, counts.warnings, out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failed expectation is the report

    use std::path::PathBuf;

    use candle_trace_schema::format::detect::{detect, Detection};
    use candle_trace_schema::format::digest::TraceDigestReader;
    use candle_trace_schema::format::document::TraceReader;

    use super::*;

    fn trace_fixtures(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                trace_fixtures(&path, out);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                let bytes = std::fs::read(&path).unwrap();
                let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
                if detect(bytes, true) == Detection::Known(Format::Trace) {
                    out.push(path);
                }
            }
        }
    }

    fn printed(path: &Path, numbers: &TraceNumbers<'_>, json: bool) -> String {
        let mut out = Vec::new();
        trace(path, numbers, json, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// `summary` prints the same bytes, table and `--json`, from the digest it reads a trace
    /// into as from the whole document, for every trace/6 file under `tests/fixtures/` and for
    /// each with its lines reversed (every check the reader defers to the end of the file).
    #[test]
    fn digest_and_document_print_the_same_summary() {
        let mut files = Vec::new();
        trace_fixtures(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures"),
            &mut files,
        );
        files.sort();
        assert!(files.len() >= 40, "only {} trace fixtures", files.len());
        for path in &files {
            let bytes = std::fs::read(path).unwrap();
            let mut reversed = Vec::new();
            for line in bytes.split(|&b| b == b'\n').rev() {
                reversed.extend_from_slice(line);
                reversed.push(b'\n');
            }
            for bytes in [&bytes, &reversed] {
                let mut reader = TraceReader::new();
                reader.push(bytes);
                let doc = reader.finish();
                let mut reader = TraceDigestReader::with_size_hint(0);
                reader.push(bytes);
                let digest = reader.finish();
                for json in [false, true] {
                    let whole = printed(path, &TraceNumbers::of_document(&doc), json);
                    let read = printed(path, &TraceNumbers::of_digest(&digest), json);
                    assert_eq!(read, whole, "{} (json: {json})", path.display());
                }
            }
        }
    }
}
