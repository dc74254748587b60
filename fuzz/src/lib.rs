//! Shared pieces of the fuzz targets: the chunk framing and "compute everything the tools
//! compute" for each document type, with the invariants that must hold for any input.
//!
//! A target is one file in `fuzz_targets/` (plus its `[[bin]]` entry in `Cargo.toml`); it calls
//! these helpers so every target checks the same things.

use candle_trace_schema::analysis::coverage::{Coverage, TraceCoverage};
use candle_trace_schema::analysis::gradients::{gradients_for_review, GradientCounts};
use candle_trace_schema::analysis::module_tree::{profile_tree, trace_tree, ModuleTree};
use candle_trace_schema::analysis::modules::{module_rows, ModuleGrouping, ModulePaths};
use candle_trace_schema::analysis::ops::{heaviest_ops, op_groups, OpGrouping};
use candle_trace_schema::analysis::percentiles::Percentiles;
use candle_trace_schema::analysis::spans::{
    edges_by_duration, slowest_spans, span_path, spans_by_self_time,
};
use candle_trace_schema::analysis::units::{format_bytes, format_ns};
use candle_trace_schema::format::detect::{AnyDocument, AnyReader};
use candle_trace_schema::format::diagnostics::{sort_diagnostics, Diagnostic};
use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::profile::{engine_of, ProfileDocument};

/// Most split points a chunked input may ask for.
pub const MAX_CUTS: usize = 8;

/// Input framing of the `*_chunked` targets: byte 0 = number of cuts `n` (mod
/// [`MAX_CUTS`] + 1), then `n` little-endian `u16` cut offsets, then the file. Offsets are
/// taken modulo the file length + 1 and sorted, so every input is a valid split.
pub fn split_input(data: &[u8]) -> (Vec<usize>, &[u8]) {
    let Some((&n, rest)) = data.split_first() else {
        return (Vec::new(), data);
    };
    let n = usize::from(n) % (MAX_CUTS + 1);
    let header = (2 * n).min(rest.len());
    let (cuts, file) = rest.split_at(header);
    let mut offsets: Vec<usize> = cuts
        .chunks_exact(2)
        .map(|c| usize::from(u16::from_le_bytes([c[0], c[1]])) % (file.len() + 1))
        .collect();
    offsets.sort_unstable();
    (offsets, file)
}

/// `file` cut at `cuts` (sorted offsets): the chunks a streaming reader is fed.
pub fn chunks<'a>(file: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::with_capacity(cuts.len() + 1);
    let mut start = 0;
    for &c in cuts {
        out.push(&file[start..c]);
        start = c;
    }
    out.push(&file[start..]);
    out
}

/// Diagnostics are sorted by line (errors first on a line) and name a line of the file
/// (`max_line` = number of lines, counting a last line without `\n`; line 1 for an empty file).
pub fn check_diagnostics(diagnostics: &[Diagnostic], file: &[u8]) {
    check_diagnostics_within(diagnostics, file, 0);
}

/// [`check_diagnostics`] allowing lines up to `slack` past the last one.
pub fn check_diagnostics_within(diagnostics: &[Diagnostic], file: &[u8], slack: u64) {
    let mut sorted = diagnostics.to_vec();
    sort_diagnostics(&mut sorted);
    assert_eq!(sorted, diagnostics, "diagnostics are not sorted");
    let newlines = file.iter().filter(|&&b| b == b'\n').count() as u64;
    let max_line = (newlines + u64::from(!file.ends_with(b"\n"))).max(1);
    for d in diagnostics {
        assert!(
            d.line >= 1 && d.line <= max_line + slack,
            "diagnostic at line {} of a {max_line}-line file: {d}",
            d.line
        );
        assert!(!d.message.is_empty(), "empty message: {d:?}");
    }
}

/// Everything the CLI and the viewer compute from a trace, with its invariants.
pub fn exercise_trace(doc: &TraceDocument, file: &[u8]) {
    check_diagnostics_within(&doc.diagnostics, file, 0);
    let s = doc.summary();
    assert_eq!(s.span_count, doc.spans.len() as u64);
    assert_eq!(s.op_count, doc.ops.len() as u64);
    assert!(s.root_span_count <= s.span_count);
    assert!(s.max_depth < s.span_count.max(1));
    let counts = doc.diagnostic_counts();
    assert_eq!(
        counts.errors + counts.warnings,
        doc.diagnostics.len() as u64
    );
    let _ = doc.is_untrusted();

    // Span tree: every span laid out exactly once, children below their parent.
    let n = doc.spans.len();
    assert_eq!(doc.tree.depth.len(), n);
    assert_eq!(doc.tree.self_ns.len(), n);
    let pre = doc.tree.preorder();
    assert_eq!(pre.len(), n);
    let mut seen = vec![false; n];
    for &i in &pre {
        assert!(
            !std::mem::replace(&mut seen[i as usize], true),
            "span {i} twice in preorder"
        );
        for &c in doc.tree.children(i as usize) {
            assert_eq!(doc.tree.depth[c as usize], doc.tree.depth[i as usize] + 1);
        }
    }
    for (i, span) in doc.spans.iter().enumerate() {
        assert!(doc.tree.self_ns[i] <= span.duration_or_zero());
        assert_eq!(doc.span_index(&span.id), Some(i));
        let _ = span.end_ns();
        let _ = format_ns(span.start_ns);
    }
    // Paths are O(depth); a few are enough to exercise them without quadratic time.
    for &i in pre.iter().take(16) {
        let _ = span_path(&doc, i as usize);
    }
    let slowest = slowest_spans(&doc, 20);
    assert!(slowest.len() <= 20.min(n));
    let _ = spans_by_self_time(&doc, 20);
    for e in edges_by_duration(&doc) {
        let _ = format_ns(e.edge.duration_ns);
        if let Some(i) = e.from {
            let _ = span_path(&doc, i);
        }
    }

    // Memory profile.
    let p = &doc.memory_profile;
    assert_eq!(p.alloc_count, s.alloc_count);
    assert_eq!(p.free_count, s.free_count);
    assert_eq!(p.samples.len(), doc.memory.len());
    assert!(p.devices.iter().all(|d| d.peak_bytes <= p.peak_bytes));
    assert!(p.live_at_peak.windows(2).all(|w| w[0].bytes >= w[1].bytes));
    let _ = format_bytes(p.peak_bytes);
    for d in &p.devices {
        assert_eq!(p.device(&d.device).map(|x| &x.device), Some(&d.device));
        let _ = format_bytes(d.final_live_bytes);
    }

    // Ops and gradients.
    for grouping in [OpGrouping::Name, OpGrouping::NameShapeDtype] {
        let groups = op_groups(&doc.ops, grouping);
        assert_eq!(
            groups.iter().map(|g| g.count).sum::<u64>(),
            doc.ops.len() as u64
        );
        for g in &groups {
            assert!(g.min_ns <= g.mean_ns && g.mean_ns <= g.max_ns);
            let _ = g.output_bytes_per_ns();
        }
    }
    for i in heaviest_ops(&doc.ops, 20) {
        let _ = format_bytes(doc.ops.row(i).output_bytes());
    }
    let grads = GradientCounts::of(&doc.gradients);
    let _ = grads.problems();
    assert_eq!(
        gradients_for_review(&doc.gradients).len(),
        doc.gradients.len()
    );

    // Module keys, rows, the tree and coverage.
    let paths = ModulePaths::new(doc);
    assert_eq!(paths.len(), n);
    let rows = module_rows(doc, &paths, ModuleGrouping::Path);
    let calls: u64 = rows.iter().map(|r| r.calls).sum();
    assert_eq!(calls, (0..n).filter(|&i| paths.outermost(i)).count() as u64);
    check_tree(&trace_tree(doc, &paths));
    let coverage = TraceCoverage::of(doc);
    for f in &coverage.forwards {
        check_coverage(&f.coverage);
    }
    check_coverage(&coverage.overall);
}

/// A module tree's shape: pre-order, parents before their children one level up, child counts.
fn check_tree(tree: &ModuleTree) {
    let mut children = vec![0u32; tree.nodes.len()];
    for (i, node) in tree.nodes.iter().enumerate() {
        match node.parent {
            Some(p) => {
                let p = p as usize;
                assert!(p < i, "parent after child");
                assert_eq!(tree.nodes[p].depth + 1, node.depth);
                assert!(node.key.starts_with(tree.nodes[p].key.as_str()));
                children[p] += 1;
            }
            None => assert_eq!(node.depth, 0),
        }
    }
    for (node, n) in tree.nodes.iter().zip(children) {
        assert_eq!(node.children, n);
    }
    let all: Vec<usize> = (0..tree.nodes.len()).collect();
    assert_eq!(tree.visible(|_| false), all);
}

fn check_coverage(c: &Coverage) {
    assert!(c.covered_ns <= c.forward_ns);
    assert_eq!(c.covered_ns + c.unattributed_ns, c.forward_ns);
    assert!(c.percent.is_none_or(|p| p <= 100));
}

/// Everything the CLI and the viewer compute from an inference profile, with its invariants.
pub fn exercise_profile(doc: &ProfileDocument, file: &[u8]) {
    check_diagnostics(&doc.diagnostics, file);
    let requests = doc.requests();
    let summary = doc.summary();
    assert_eq!(summary.request_count, requests.len() as u64);
    assert_eq!(summary.event_count, doc.records.len() as u64);
    assert!(summary.invalid_event_count <= summary.event_count);
    // Every event is one request's or, when it names an engine, the engine's.
    let engine_events = doc
        .records
        .iter()
        .filter(|r| engine_of(r).is_some())
        .count() as u64;
    assert_eq!(
        requests.iter().map(|r| r.event_count).sum::<u64>() + engine_events,
        summary.event_count
    );
    let latency = doc.latency();
    assert_eq!(latency.ttft_us, summary.ttft_us);
    for p in [latency.ttft_us, latency.itl_nanos].into_iter().flatten() {
        check_percentiles(&p);
    }
    assert_eq!(doc.errors().len() as u64, summary.error_count);
    assert_eq!(
        doc.memory_snapshots().len() as u64,
        summary.memory_snapshot_count
    );
    let _ = doc.diagnostic_only();
    for r in &requests {
        if let Some(p) = Percentiles::of(&r.itl_nanos) {
            check_percentiles(&p);
        }
    }
    let modules = doc.module_spans();
    for r in &modules {
        check_tree(&profile_tree(std::slice::from_ref(r)));
        for f in &r.forwards {
            check_coverage(&f.coverage);
            // Every forward call served someone: its request, or the engine's listed ones.
            assert!(!f.requests.is_empty());
        }
        check_coverage(&r.coverage());
    }
    check_tree(&profile_tree(&modules));
}

fn check_percentiles(p: &Percentiles) {
    assert!(p.count >= 1);
    assert!(p.min <= p.p50 && p.p50 <= p.p90 && p.p90 <= p.p99 && p.p99 <= p.max);
    assert!(p.min <= p.mean && p.mean <= p.max);
}

/// Feed `chunks` to an [`AnyReader`].
pub fn read_any(chunks: &[&[u8]]) -> AnyDocument {
    let mut reader = AnyReader::new();
    for c in chunks {
        reader.push(c);
    }
    reader.finish()
}

/// Whole-document equality for trace documents read two ways.
pub fn assert_same_trace(a: &TraceDocument, b: &TraceDocument) {
    assert_eq!(a.diagnostics, b.diagnostics);
    assert_eq!(a.summary(), b.summary());
    assert_eq!(a.spans, b.spans);
    assert_eq!(a.ops, b.ops);
    assert_eq!(a.tensors, b.tensors);
    assert_eq!(a.memory, b.memory);
    assert_eq!(a.device_memory, b.device_memory);
    assert_eq!(a.gradients, b.gradients);
    assert_eq!(a.edges, b.edges);
    assert_eq!(a.meta, b.meta);
    assert_eq!(a.tree, b.tree);
    assert_eq!(a.memory_profile, b.memory_profile);
    assert_eq!(a.skipped_unknown, b.skipped_unknown);
    assert_eq!(a.bytes_read, b.bytes_read);
}
