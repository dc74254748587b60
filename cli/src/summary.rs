//! `candle-trace summary`.

use std::io::Write;
use std::path::Path;

use candle_trace_schema::analysis::coverage::{Coverage, TraceCoverage};
use candle_trace_schema::analysis::modules::module_name;
use candle_trace_schema::analysis::percentiles::Percentiles;
use candle_trace_schema::analysis::requests::ProfileSummary;
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

use super::markdown::{self as md, Doc};
use super::table::{Align, Table};
use super::{write_json, write_markdown, OutputFormat, EXIT_OK};

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
    format: OutputFormat,
    limit: usize,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    match read {
        AnySummary::Trace(digest) => {
            trace(path, &TraceNumbers::of_digest(digest), format, limit, out)?;
            Ok(EXIT_OK)
        }
        AnySummary::Document(doc) => run(path, doc, format, limit, out),
    }
}

pub(super) fn run(
    path: &Path,
    doc: &AnyDocument,
    format: OutputFormat,
    limit: usize,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    match doc {
        AnyDocument::Trace(t) => trace(path, &TraceNumbers::of_document(t), format, limit, out)?,
        AnyDocument::Profile(p) => profile(path, p, format, limit, out)?,
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

/// The run header's words (`meta` line): entrypoint, phase, device, timing, measured-region
/// note, capture step, warm-up steps.
struct MetaWords<'a> {
    entrypoint: &'a str,
    phase: &'static str,
    device: &'a str,
    timing: &'static str,
    synchronized: &'static str,
    step: u64,
    warmup: u64,
}

impl<'a> MetaWords<'a> {
    fn of(meta: &'a Meta) -> Self {
        use candle_trace_schema::format::events::{Phase, TimingMode};
        MetaWords {
            entrypoint: &meta.entrypoint,
            phase: match meta.phase {
                Phase::Train => "train",
                Phase::Infer => "infer",
            },
            device: &meta.device,
            timing: match meta.timing_mode {
                TimingMode::Host => "host",
                TimingMode::DeviceSynchronized => "device_synchronized",
            },
            synchronized: if meta.measured_region_device_synchronized {
                " (measured region synchronized)"
            } else {
                ""
            },
            step: meta.capture_step,
            warmup: meta.warmup_steps,
        }
    }
}

/// The rows of the trace summary's table: metric, value, exact value.
fn trace_rows(doc: &TraceNumbers<'_>) -> Vec<(&'static str, String, String)> {
    let summary = doc.summary;
    let profile = doc.profile;
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
    vec![
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
    ]
}

fn trace(
    path: &Path,
    doc: &TraceNumbers<'_>,
    format: OutputFormat,
    limit: usize,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let summary = doc.summary;
    let counts = doc.counts;
    let profile = doc.profile;
    match format {
        OutputFormat::Json => {
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
                        module_coverage: (!doc.coverage.forwards.is_empty()).then_some(
                            CoverageJson {
                                overall: doc.coverage.overall,
                                forwards: doc.coverage.forwards.len(),
                                backward_unsplit: doc.coverage.backward_unsplit,
                            },
                        ),
                    },
                },
            );
        }
        OutputFormat::Markdown => return trace_markdown(path, doc, limit, out),
        OutputFormat::Text => {}
    }
    writeln!(out, "{} — {}", path.display(), doc.format)?;
    if let Some(m) = doc.meta.map(MetaWords::of) {
        writeln!(
            out,
            "{} · {} · {} · timing {}{} · step {} after {} warm-up",
            m.entrypoint, m.phase, m.device, m.timing, m.synchronized, m.step, m.warmup,
        )?;
    }
    writeln!(out)?;
    let mut t = Table::new(&[
        ("metric", Align::Left),
        ("value", Align::Right),
        ("exact", Align::Right),
    ]);
    for (name, value, exact) in trace_rows(doc) {
        t.row(vec![name.to_string(), value, exact]);
    }
    write!(out, "{}", t.render())?;
    writeln!(out)?;
    captured_lines(doc.sources, out)?;
    for line in module_lines(doc) {
        writeln!(out, "{line}")?;
    }
    if let Some(c) = doc.chrome {
        writeln!(out)?;
        let names: Vec<String> = c.tracks.iter().map(|t| t.label()).collect();
        let (head, tail) = chrome_words(c);
        writeln!(out, "{head} ({}){tail}", names.join(", "))?;
    }
    diagnostics_line(path, counts.errors, counts.warnings, out)
}

/// What a Chrome import held, one line, around its tracks' labels (which the caller
/// formats): `chrome import: N track(s)` and `, N instant(s), …`.
fn chrome_words(c: &ChromeImport) -> (String, String) {
    (
        format!("chrome import: {} track(s)", c.tracks.len()),
        format!(
            ", {} instant(s), {} counter sample(s), {} skipped event(s){}",
            c.instants.len(),
            c.counters.len(),
            c.skipped_count(),
            if c.synthetic_root {
                "; measured region = the synthetic root span `(trace)` over the whole file"
            } else {
                ""
            }
        ),
    )
}

/// `summary --format markdown` of a trace.
fn trace_markdown(
    path: &Path,
    doc: &TraceNumbers<'_>,
    limit: usize,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let mut md = Doc::new();
    md.heading(
        3,
        &format!(
            "{} — {}",
            md::code(&path.display().to_string()),
            md::text(doc.format)
        ),
    );
    if let Some(m) = doc.meta.map(MetaWords::of) {
        md.para(&format!(
            "{} · {} · {} · timing {}{} · step {} after {} warm-up",
            md::code(m.entrypoint),
            m.phase,
            md::text(m.device),
            m.timing,
            m.synchronized,
            m.step,
            m.warmup,
        ));
    }
    let mut t = md::Table::new(
        &[
            ("metric", Align::Left),
            ("value", Align::Right),
            ("exact", Align::Right),
        ],
        usize::MAX,
    );
    for (name, value, exact) in trace_rows(doc) {
        t.row(vec![name.to_string(), md::text(&value), exact]);
    }
    md.table(&t);
    captured_markdown(doc.sources, limit, &mut md);
    // These lines hold numbers and this tool's words only.
    let modules: Vec<String> = module_lines(doc).iter().map(|l| md::prose(l)).collect();
    if !modules.is_empty() {
        md.para(&modules.join("<br>"));
    }
    if let Some(c) = doc.chrome {
        let mut names: Vec<String> = c
            .tracks
            .iter()
            .take(limit)
            .map(|t| md::text(&t.label()))
            .collect();
        if c.tracks.len() > limit {
            names.push(format!("… {} more", c.tracks.len() - limit));
        }
        let (head, tail) = chrome_words(c);
        md.para(&format!(
            "{} ({}){}",
            md::prose(&head),
            names.join(", "),
            md::prose(&tail)
        ));
    }
    md.para(&diagnostics_markdown(
        path,
        doc.counts.errors,
        doc.counts.warnings,
    ));
    write_markdown(out, md)
}

/// How capture names a model's modules (the summary says it where a trace has no names).
pub(super) const HOW_TO_NAME: &str = "wrap the VarBuilder with \
    `candle_trace_capture::nn::name_modules(vb)` before building the model, or build candle-nn \
    layers through `candle_trace_capture::nn::{linear, conv2d, embedding, layer_norm, rms_norm, …}` \
    (candle-nn's own layers open no spans)";

/// The module lines: how much of the forward the modules cover, that backward has no
/// per-module split, and whether module names were captured.
fn module_lines(doc: &TraceNumbers<'_>) -> Vec<String> {
    let mut lines = Vec::new();
    let c = &doc.coverage;
    if let Some(line) = c.overall.sentence() {
        let per = if c.forwards.len() > 1 {
            format!(" over {} forward spans", c.forwards.len())
        } else {
            String::new()
        };
        lines.push(format!("{line}{per}"));
    }
    if c.backward_unsplit {
        lines.push(String::from(
            "backward is one span with no per-module split (candle's backward opens no spans)",
        ));
    }
    // A Chrome import has no module names to capture.
    if doc.chrome.is_some() {
        return lines;
    }
    let names_source = doc
        .sources
        .and_then(|s| s.sources.iter().find(|x| x.source == source::MODULE_NAMES));
    if doc.named_spans > 0 {
        lines.push(format!(
            "module names: {} span(s) named by their weights",
            doc.named_spans
        ));
    } else if doc.summary.span_count > 0 {
        let why = match names_source {
            Some(x) if x.on => " (no span was named)",
            Some(_) => " (module_names off)",
            None => "",
        };
        lines.push(format!("module names: not captured{why} — {HOW_TO_NAME}"));
    }
    lines
}

/// The words of the `captured:` line, each source on/off with its event count.
fn captured_parts(sources: &CaptureSources) -> Vec<String> {
    sources
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
        .collect()
}

/// The `captured:` line (each source on/off with its event count), dropped events, and every
/// warning the capture wrote.
fn captured_lines(sources: Option<&CaptureSources>, out: &mut dyn Write) -> anyhow::Result<()> {
    let Some(sources) = sources else {
        writeln!(out, "captured: {NOT_STATED}")?;
        return Ok(());
    };
    let parts = captured_parts(sources);
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
        writeln!(out, "events dropped: {}", dropped_words(sources))?;
    }
    for w in &sources.warnings {
        writeln!(out, "capture warning: {w}")?;
    }
    Ok(())
}

const NOT_STATED: &str = "not stated (the file has no capture_sources line)";

fn dropped_words(sources: &CaptureSources) -> String {
    format!("{} (the writer's rings were full)", sources.events_dropped)
}

/// [`captured_lines`] in Markdown: a paragraph, and the capture's warnings as a list.
fn captured_markdown(sources: Option<&CaptureSources>, limit: usize, md: &mut Doc) {
    let Some(sources) = sources else {
        md.para(&format!("**captured:** {}", md::prose(NOT_STATED)));
        return;
    };
    let parts: Vec<String> = captured_parts(sources)
        .iter()
        .take(limit)
        .map(|p| md::text(p))
        .collect();
    let more = sources.sources.len().saturating_sub(limit);
    let mut line = format!(
        "**captured:** {}",
        if parts.is_empty() {
            String::from("no sources listed")
        } else {
            parts.join(", ")
        }
    );
    if more > 0 {
        line.push_str(&format!(" (… {more} more)"));
    }
    if sources.events_dropped > 0 {
        line.push_str(&format!(
            "<br>**events dropped:** {}",
            md::text(&dropped_words(sources))
        ));
    }
    md.para(&line);
    if !sources.warnings.is_empty() {
        let items: Vec<String> = sources
            .warnings
            .iter()
            .map(|w| format!("capture warning: {}", md::text(w)))
            .collect();
        md.list(&items, limit);
    }
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

/// [`diagnostics_line`] in Markdown.
fn diagnostics_markdown(path: &Path, errors: u64, warnings: u64) -> String {
    if errors + warnings == 0 {
        return String::from("no diagnostics");
    }
    format!(
        "**{errors} error(s), {warnings} warning(s)**{} — see {}",
        if errors > 0 {
            ": the file is untrusted"
        } else {
            ""
        },
        md::code(&format!("candle-trace validate {}", path.display()))
    )
}

/// The rows of a profile's latency table: name, count, p50, p90, p99, max, mean.
fn latency_rows(summary: &ProfileSummary) -> Vec<[String; 7]> {
    let row = |name: &str, p: &Option<Percentiles>, ns_per_unit: u64| {
        let f = |v: u64| format_ns(v.saturating_mul(ns_per_unit));
        match p {
            Some(p) => [
                name.into(),
                p.count.to_string(),
                f(p.p50),
                f(p.p90),
                f(p.p99),
                f(p.max),
                f(p.mean),
            ],
            None => [
                name.into(),
                "0".into(),
                "–".into(),
                "–".into(),
                "–".into(),
                "–".into(),
                "–".into(),
            ],
        }
    };
    vec![
        row("time to first token", &summary.ttft_us, 1_000),
        row("inter-token latency", &summary.itl_nanos, 1),
    ]
}

const LATENCY_COLUMNS: [(&str, Align); 7] = [
    ("latency", Align::Left),
    ("n", Align::Right),
    ("p50", Align::Right),
    ("p90", Align::Right),
    ("p99", Align::Right),
    ("max", Align::Right),
    ("mean", Align::Right),
];

fn profile(
    path: &Path,
    doc: &ProfileDocument,
    format: OutputFormat,
    limit: usize,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let summary = doc.summary();
    let counts = candle_trace_schema::format::diagnostics::DiagnosticCounts::of(&doc.diagnostics);
    match format {
        OutputFormat::Json => return write_json(out, &summary),
        OutputFormat::Markdown => {
            return profile_markdown(path, &summary, counts, limit, out);
        }
        OutputFormat::Text => {}
    }
    writeln!(out, "{} — {PROFILE_FORMAT}", path.display())?;
    writeln!(out, "{}", profile_counts_line(&summary))?;
    writeln!(out)?;
    let mut t = Table::new(&[("event kind", Align::Left), ("count", Align::Right)]);
    for (kind, n) in summary.events_by_kind.iter().take(limit) {
        t.row(vec![kind.clone(), n.to_string()]);
    }
    write!(out, "{}", t.render())?;
    text_left_out(summary.events_by_kind.len(), limit, out)?;
    writeln!(out)?;
    let mut t = Table::new(&[("status", Align::Left), ("count", Align::Right)]);
    for (status, n) in summary.events_by_status.iter().take(limit) {
        t.row(vec![status.clone(), n.to_string()]);
    }
    write!(out, "{}", t.render())?;
    text_left_out(summary.events_by_status.len(), limit, out)?;
    writeln!(out)?;
    let mut t = Table::new(&LATENCY_COLUMNS);
    for row in latency_rows(&summary) {
        t.row(row.to_vec());
    }
    write!(out, "{}", t.render())?;
    diagnostics_line(path, counts.errors, counts.warnings, out)
}

const PROFILE_FORMAT: &str = "inference profile (schema_version 1)";

fn profile_counts_line(summary: &ProfileSummary) -> String {
    let mut line = format!(
        "{} request(s), {} event(s), {} invalid",
        summary.request_count, summary.event_count, summary.invalid_event_count
    );
    if summary.iteration_count > 0 {
        line.push_str(&format!(
            "; {} batched forward(s) (query --kind iterations)",
            summary.iteration_count
        ));
    }
    line
}

/// `(20 of 31 rows shown: --limit 20)` under a text table that the limit cut.
fn text_left_out(rows: usize, limit: usize, out: &mut dyn Write) -> anyhow::Result<()> {
    if rows > limit {
        writeln!(out, "({limit} of {rows} rows shown: --limit {limit})")?;
    }
    Ok(())
}

/// `summary --format markdown` of an inference profile.
fn profile_markdown(
    path: &Path,
    summary: &ProfileSummary,
    counts: DiagnosticCounts,
    limit: usize,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let mut md = Doc::new();
    md.heading(
        3,
        &format!(
            "{} — {}",
            md::code(&path.display().to_string()),
            md::prose(PROFILE_FORMAT)
        ),
    );
    md.para(&profile_counts_line(summary));
    let mut t = md::Table::new(
        &[("event kind", Align::Left), ("count", Align::Right)],
        limit,
    );
    for (kind, n) in &summary.events_by_kind {
        t.row(vec![md::code_cell(kind), n.to_string()]);
    }
    md.table(&t);
    let mut t = md::Table::new(&[("status", Align::Left), ("count", Align::Right)], limit);
    for (status, n) in &summary.events_by_status {
        t.row(vec![md::code_cell(status), n.to_string()]);
    }
    md.table(&t);
    let mut t = md::Table::new(&LATENCY_COLUMNS, usize::MAX);
    for row in latency_rows(summary) {
        t.row(row.to_vec());
    }
    md.table(&t);
    md.para(&diagnostics_markdown(path, counts.errors, counts.warnings));
    write_markdown(out, md)
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

    fn printed(path: &Path, numbers: &TraceNumbers<'_>, format: OutputFormat) -> String {
        let mut out = Vec::new();
        trace(path, numbers, format, 20, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// `summary` prints the same bytes, table, `--json` and Markdown, from the digest it reads a trace
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
                for format in [
                    OutputFormat::Text,
                    OutputFormat::Json,
                    OutputFormat::Markdown,
                ] {
                    let whole = printed(path, &TraceNumbers::of_document(&doc), format);
                    let read = printed(path, &TraceNumbers::of_digest(&digest), format);
                    assert_eq!(read, whole, "{} ({format:?})", path.display());
                }
            }
        }
    }
}
