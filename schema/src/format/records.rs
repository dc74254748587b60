//! The records a trace reader keeps: each event with the line it came from ([`Lined`]) and
//! spans paired from their `span_start` and `span_end` ([`Span`]). Their own module, below the
//! document and the analyses that index them (`spans`, `memory`), so that neither has to import
//! the reader.

use core::ops::Deref;

use serde::{Deserialize, Serialize};

use crate::format::events::{CompactString, MemoryAction, Pass, SpanKind, TensorCategory};

/// A record together with the 1-based line it was read from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lined<T> {
    /// 1-based line number in the file.
    pub line: u64,
    /// The record.
    pub event: T,
}

impl<T> Lined<T> {
    /// `event` as read from `line`.
    pub fn new(line: u64, event: T) -> Self {
        Lined { line, event }
    }
}

impl<T> Deref for Lined<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.event
    }
}

/// A span: its `span_start` fields and, once closed, its duration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// Unique id.
    pub id: CompactString,
    /// Parent id as written (it may name no span; see [`SpanTree`](crate::format::spans::SpanTree) for the resolved layout).
    pub parent_id: Option<CompactString>,
    /// Display name.
    pub name: CompactString,
    /// Start, ns since the run started.
    pub start_ns: u64,
    /// Function, op or module.
    pub span_kind: SpanKind,
    /// Whether this is the run's measured region.
    pub measured: bool,
    /// The pass (forward, backward, optimizer): the file's `step` key.
    #[serde(rename = "step")]
    pub pass: Option<Pass>,
    /// The module it runs, named by its weights, when the capture named it.
    pub module: Option<CompactString>,
    /// Duration from its `span_end`; `None` while (or if never) closed.
    pub duration_ns: Option<u64>,
    /// Line of the `span_start`.
    pub line: u64,
    /// Line of the `span_end`, when closed.
    pub end_line: Option<u64>,
}

impl Span {
    /// The duration, 0 for an unclosed span.
    pub fn duration_or_zero(&self) -> u64 {
        self.duration_ns.unwrap_or(0)
    }

    /// `start_ns + duration` (saturating).
    pub fn end_ns(&self) -> u64 {
        self.start_ns.saturating_add(self.duration_or_zero())
    }
}

/// What a summary read keeps of a `memory` record: the fields the memory profile's numbers and
/// warnings read, in 80 bytes rather than a whole [`MemoryEvent`](crate::format::events::MemoryEvent)'s 176.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MemoryFacts {
    pub(crate) line: u64,
    pub(crate) timestamp_ns: u64,
    pub(crate) bytes: u64,
    pub(crate) tensor_id: CompactString,
    pub(crate) device: CompactString,
    pub(crate) action: MemoryAction,
    pub(crate) category: TensorCategory,
}

/// What the memory replay ([`analysis::memory`](crate::analysis::memory)) reads of a `memory` record: a row of a
/// document's [`MemoryTable`](crate::format::table::MemoryTable), or the [`MemoryFacts`] a
/// summary read keeps. Strings live as long as the records they came from.
pub(crate) trait MemoryRecord<'a> {
    fn line(&self) -> u64;
    fn timestamp_ns(&self) -> u64;
    fn tensor_id(&self) -> &'a str;
    fn device(&self) -> &'a str;
    fn bytes(&self) -> u64;
    fn action(&self) -> MemoryAction;
    fn category(&self) -> TensorCategory;
    /// Empty when not kept.
    fn span_id(&self) -> &'a str;
    fn op_name(&self) -> Option<&'a str>;
}

/// The records the replay reads, by position.
pub(crate) trait MemoryRecords<'a>: Copy {
    type Record: MemoryRecord<'a>;
    fn len(self) -> usize;
    fn at(self, i: usize) -> Self::Record;
}

#[cfg(all(test, target_pointer_width = "64"))]
mod tests {
    use super::*;
    use crate::format::events::MemoryEvent;

    #[test]
    fn memory_facts_are_less_than_half_a_memory_event() {
        assert_eq!(core::mem::size_of::<MemoryFacts>(), 80);
        assert_eq!(core::mem::size_of::<Lined<MemoryEvent>>(), 176);
    }
}
