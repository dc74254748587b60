//! A trace read for its summary: [`TraceDigestReader`] → [`TraceDigest`].
//!
//! The same reader as [`TraceReader`] (the same decoding, the same checks, the same
//! diagnostics) keeping only what the summary and the cross-record checks need: the meta, the
//! `capture_sources` line, every span (the span tree, the measured total and the unclosed and
//! parent checks read them), of each `memory` record the fields the memory profile's numbers
//! read (80 bytes a record, for the replay in `finish`, which builds no live-bytes curve), and
//! the `device_memory` checkpoints. `op`, `tensor`, `gradient` and
//! `edge` records are counted, their span reference checked on their line (or at the end when
//! it names a span not read yet), and dropped. A large trace's summary then needs a fraction of
//! the memory of its [`TraceDocument`], which keeps every record.

use crate::format::diagnostics::{Diagnostic, DiagnosticCounts};
use crate::format::document::{Dropped, Keep, TraceDocument, TraceReader};
use crate::format::events::{CaptureSources, Meta};
use crate::format::memory::MemoryProfile;
use crate::format::records::{Lined, Span};
use crate::format::spans::SpanTree;

/// Streaming trace/6 reader for a summary: push chunks of any size, then
/// [`finish`](TraceDigestReader::finish).
#[derive(Debug)]
pub struct TraceDigestReader {
    pub(crate) reader: TraceReader,
}

impl TraceDigestReader {
    /// A reader at the start of a file of `total_bytes` bytes (0 when unknown; the size only
    /// guides how the record lists grow, as for [`TraceReader::with_size_hint`]).
    pub fn with_size_hint(total_bytes: u64) -> Self {
        TraceDigestReader {
            reader: TraceReader::keeping(Keep::Summary, total_bytes),
        }
    }

    /// Feed the next chunk of the file.
    pub fn push(&mut self, chunk: &[u8]) {
        self.reader.push(chunk);
    }

    /// Bytes pushed so far.
    pub fn bytes_read(&self) -> u64 {
        self.reader.bytes_read()
    }
}

/// What [`TraceDigestReader`] keeps of a trace: everything its summary shows, and the same
/// diagnostics as the whole [`TraceDocument`].
#[derive(Debug, Clone)]
pub struct TraceDigest {
    /// A document without `op`, `tensor`, `gradient`, `edge` and `memory` records (the memory
    /// profile is built): private, so that nobody mistakes it for the file's document.
    doc: TraceDocument,
    dropped: Dropped,
}

impl TraceDigest {
    pub(crate) fn new(doc: TraceDocument, dropped: Dropped) -> Self {
        TraceDigest { doc, dropped }
    }

    /// The run's meta (the first one in the file), if any.
    pub fn meta(&self) -> Option<&Lined<Meta>> {
        self.doc.meta.as_ref()
    }

    /// The `capture_sources` line (the first one), if any.
    pub fn capture_sources(&self) -> Option<&Lined<CaptureSources>> {
        self.doc.capture_sources.as_ref()
    }

    /// Everything wrong with the file, sorted by line: equal to
    /// [`TraceDocument::diagnostics`] for the same bytes.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.doc.diagnostics
    }

    /// Error and warning counts.
    pub fn diagnostic_counts(&self) -> DiagnosticCounts {
        DiagnosticCounts::of(&self.doc.diagnostics)
    }

    /// Spans in file order of their `span_start`, as in [`TraceDocument::spans`].
    pub fn spans(&self) -> &[Span] {
        &self.doc.spans
    }

    /// The span tree, as in [`TraceDocument::tree`].
    pub fn tree(&self) -> &SpanTree {
        &self.doc.tree
    }

    /// The memory profile's numbers, as in [`TraceDocument::memory_profile`]; only the
    /// `span_id` and `op_name` of [`MemoryProfile::live_at_peak`] are empty (they are not kept),
    /// and so is the live-bytes curve, [`MemoryProfile::samples`] (a summary shows none).
    pub fn memory_profile(&self) -> &MemoryProfile {
        &self.doc.memory_profile
    }

    /// Number of `op` records.
    pub fn op_count(&self) -> u64 {
        self.dropped.ops
    }

    /// Number of `tensor` records.
    pub fn tensor_count(&self) -> u64 {
        self.dropped.tensors
    }

    /// Number of `gradient` records.
    pub fn gradient_count(&self) -> u64 {
        self.dropped.gradients
    }

    /// Number of `edge` records.
    pub fn edge_count(&self) -> u64 {
        self.dropped.edges
    }

    /// Number of lines with an unknown `kind` (skipped).
    pub fn skipped_unknown(&self) -> u64 {
        self.doc.skipped_unknown
    }

    /// Bytes read.
    pub fn bytes_read(&self) -> u64 {
        self.doc.bytes_read
    }
}
