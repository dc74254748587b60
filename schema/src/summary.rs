//! `TraceSummary`: the eight headline numbers of a trace (SCHEMA.md §1, names normative).

use serde::{Deserialize, Serialize};

use crate::document::TraceDocument;

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
        TraceSummary {
            op_count: doc.ops.len() as u64,
            total_ns: doc
                .spans
                .iter()
                .filter(|s| s.measured)
                .map(|s| s.duration_or_zero())
                .fold(0, u64::saturating_add),
            span_count: doc.spans.len() as u64,
            root_span_count: doc.spans.iter().filter(|s| s.parent_id.is_none()).count() as u64,
            max_depth: u64::from(doc.tree.max_depth),
            alloc_count: doc.memory_profile.alloc_count,
            free_count: doc.memory_profile.free_count,
            peak_bytes: doc.memory_profile.peak_bytes,
        }
    }
}
