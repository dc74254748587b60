//! `TraceSummary`: the eight headline numbers of a trace (SCHEMA.md §1, names normative).

use alloc::format;
use alloc::string::String;

use serde::{Deserialize, Serialize};

use crate::format::digest::TraceDigest;
use crate::format::document::TraceDocument;
use crate::format::events::{source, CaptureSources};
use crate::format::memory::MemoryProfile;
use crate::format::records::Span;
use crate::format::spans::SpanTree;

/// The eight SCHEMA.md summary numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceSummary {
    /// Number of `op` lines.
    pub op_count: u64,
    /// Sum of `duration_ns` over spans with `measured = true`.
    pub total_ns: u64,
    /// Number of distinct spans.
    pub span_count: u64,
    /// Spans without `parent_id`.
    pub root_span_count: u64,
    /// Longest parent chain: a root has depth 0 (0 when there are no spans).
    pub max_depth: u64,
    /// `memory` lines with action `alloc`.
    pub alloc_count: u64,
    /// `memory` lines with action `free`.
    pub free_count: u64,
    /// Largest per-device live bytes (see the memory profile).
    pub peak_bytes: u64,
}

impl TraceSummary {
    /// Compute the summary of a read document.
    pub fn of(doc: &TraceDocument) -> Self {
        Self::from_parts(
            doc.ops.len() as u64,
            &doc.spans,
            &doc.tree,
            &doc.memory_profile,
        )
    }

    /// The same numbers from a trace read for its summary: equal to [`TraceSummary::of`] the
    /// file's [`TraceDocument`].
    pub fn of_digest(digest: &TraceDigest) -> Self {
        Self::from_parts(
            digest.op_count(),
            digest.spans(),
            digest.tree(),
            digest.memory_profile(),
        )
    }

    fn from_parts(op_count: u64, spans: &[Span], tree: &SpanTree, memory: &MemoryProfile) -> Self {
        TraceSummary {
            op_count,
            total_ns: spans
                .iter()
                .filter(|s| s.measured)
                .map(|s| s.duration_or_zero())
                .fold(0, u64::saturating_add),
            span_count: spans.len() as u64,
            root_span_count: spans.iter().filter(|s| s.parent_id.is_none()).count() as u64,
            max_depth: u64::from(tree.max_depth),
            alloc_count: memory.alloc_count,
            free_count: memory.free_count,
            peak_bytes: memory.peak_bytes,
        }
    }
}

/// `Some("not captured …")` when a source produced nothing (`empty`) and was not on: off or
/// unlisted in the `capture_sources` line (`not captured (<source> off)`), or the file has no
/// such line (`not captured`). `None` when there is data, or the source was on and simply
/// produced none (a true 0).
///
/// The one rule behind every "not captured" the CLI's `summary` and the viewer show.
pub fn not_captured(sources: Option<&CaptureSources>, empty: bool, name: &str) -> Option<String> {
    if !empty {
        return None;
    }
    match sources {
        None => Some(String::from("not captured")),
        Some(s) if !s.is_on(name) => Some(format!("not captured ({name} off)")),
        Some(_) => None,
    }
}

/// The three numbers a switched-off source would leave at 0, each worded by [`not_captured`]:
/// ops (`layer_ops`: no `op` lines), peak memory (`allocator`: no alloc or free) and gradients
/// (`gradients`: no `gradient` lines).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NotCaptured {
    /// Instead of the op count.
    pub ops: Option<String>,
    /// Instead of the peak memory (and every memory number).
    pub memory: Option<String>,
    /// Instead of the gradient count.
    pub gradients: Option<String>,
}

impl NotCaptured {
    /// What `doc` did not capture.
    pub fn of(doc: &TraceDocument) -> Self {
        Self::from_counts(
            doc.capture_sources.as_ref().map(|l| &l.event),
            doc.ops.len() as u64,
            &doc.memory_profile,
            doc.gradients.len() as u64,
        )
    }

    /// What a trace read for its summary did not capture: equal to [`NotCaptured::of`] the
    /// file's [`TraceDocument`].
    pub fn of_digest(digest: &TraceDigest) -> Self {
        Self::from_counts(
            digest.capture_sources().map(|l| &l.event),
            digest.op_count(),
            digest.memory_profile(),
            digest.gradient_count(),
        )
    }

    fn from_counts(
        sources: Option<&CaptureSources>,
        ops: u64,
        memory: &MemoryProfile,
        gradients: u64,
    ) -> Self {
        NotCaptured {
            ops: not_captured(sources, ops == 0, source::LAYER_OPS),
            memory: not_captured(
                sources,
                memory.alloc_count + memory.free_count == 0,
                source::ALLOCATOR,
            ),
            gradients: not_captured(sources, gradients == 0, source::GRADIENTS),
        }
    }
}

impl TraceDocument {
    /// The eight SCHEMA.md summary numbers ([`TraceSummary::of`]).
    pub fn summary(&self) -> TraceSummary {
        TraceSummary::of(self)
    }
}

impl TraceDigest {
    /// The eight SCHEMA.md summary numbers ([`TraceSummary::of_digest`]).
    pub fn summary(&self) -> TraceSummary {
        TraceSummary::of_digest(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::events::CaptureSource;

    fn sources(list: &[(&str, bool, u64)]) -> CaptureSources {
        CaptureSources {
            sources: list
                .iter()
                .map(|&(name, on, events)| CaptureSource {
                    source: String::from(name),
                    on,
                    events,
                    threshold_bytes: None,
                })
                .collect(),
            events_dropped: 0,
            warnings: alloc::vec::Vec::new(),
        }
    }

    #[test]
    fn not_captured_only_when_empty_and_not_on() {
        let s = sources(&[("layer_ops", true, 0), ("allocator", false, 0)]);
        // Data present: never "not captured", whatever the line says.
        assert_eq!(not_captured(Some(&s), false, "allocator"), None);
        // On but empty: a true 0.
        assert_eq!(not_captured(Some(&s), true, "layer_ops"), None);
        // Off, or not listed.
        assert_eq!(
            not_captured(Some(&s), true, "allocator").as_deref(),
            Some("not captured (allocator off)")
        );
        assert_eq!(
            not_captured(Some(&s), true, "gradients").as_deref(),
            Some("not captured (gradients off)")
        );
        // No line at all.
        assert_eq!(
            not_captured(None, true, "gradients").as_deref(),
            Some("not captured")
        );
    }

    #[test]
    fn not_captured_of_a_document() {
        let text = concat!(
            r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#,
            "\n",
            r#"{"kind":"span_start","id":"a","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
            "\n",
            r#"{"kind":"span_end","id":"a","duration_ns":10}"#,
            "\n",
            r#"{"kind":"capture_sources","sources":[{"source":"layer_ops","on":true,"events":0},{"source":"allocator","on":false,"events":0}],"events_dropped":0,"warnings":[]}"#,
            "\n",
        );
        let doc = TraceDocument::from_bytes(text.as_bytes());
        let n = NotCaptured::of(&doc);
        assert_eq!(n.ops, None);
        assert_eq!(n.memory.as_deref(), Some("not captured (allocator off)"));
        assert_eq!(n.gradients.as_deref(), Some("not captured (gradients off)"));
    }
}
