//! A [`TraceReader`] line by line: each record checked and kept (or counted) as it is read.

use alloc::format;
use alloc::string::String;

use super::growth::{make_room, make_room_map};
use super::{Keep, TraceReader};
use crate::format::diagnostics::{Category, Diagnostic};
use crate::format::events::fast::Raw;
use crate::format::events::{
    decode_line_borrowed, CompactString, Decoded, LineError, SpanStart, TensorEvent, TraceEvent,
    TRACE_SCHEMA,
};
use crate::format::jsonl::Line;
use crate::format::records::{Lined, MemoryFacts, Span};

impl TraceReader {
    pub(super) fn line(&mut self, line: Line<'_>) {
        let Some(bytes) = crate::format::jsonl::without_bom(&line) else {
            return;
        };
        let first = *self.first_line.get_or_insert(line.number);
        let number = line.number;
        self.consumed += line.bytes.len() as u64 + 1;
        let (consumed, total) = (self.consumed, self.size_hint);
        // The splitter's text is the line's bytes unless a byte-order mark was cut off.
        let text = line.text.filter(|t| t.len() == bytes.len());
        let event = match decode_line_borrowed(bytes, text, |raw| {
            self.raw_record(raw, number, consumed, total);
        }) {
            Ok(Decoded::Raw(())) => return,
            Ok(Decoded::Event(event)) => event,
            Err(LineError::UnknownKind(kind)) => {
                self.doc.skipped_unknown += 1;
                self.warn(
                    number,
                    Category::UnknownKind,
                    format!("unknown kind `{kind}`; line skipped"),
                );
                return;
            }
            Err(LineError::Invalid(Category::Truncated, message)) if !line.terminated => {
                self.warn(
                    number,
                    Category::Truncated,
                    format!("truncated last line (the writer stopped mid-record): {message}"),
                );
                return;
            }
            Err(LineError::Invalid(category, message)) => {
                let category = if category == Category::Truncated {
                    Category::Syntax
                } else {
                    category
                };
                self.error(number, category, message);
                return;
            }
        };
        let doc = &mut self.doc;
        match event {
            TraceEvent::Meta(meta) => {
                if let Some(existing) = &doc.meta {
                    let msg = format!(
                        "more than one meta (the first is at line {}); this one is ignored",
                        existing.line
                    );
                    self.error(number, Category::Meta, msg);
                    return;
                }
                if number != first {
                    self.error(
                        number,
                        Category::Meta,
                        format!(
                            "meta must be the first non-blank line (line {first} comes before it)"
                        ),
                    );
                }
                if meta.schema != TRACE_SCHEMA {
                    self.error(
                        number,
                        Category::Meta,
                        format!("schema `{}` is not `{TRACE_SCHEMA}`", meta.schema),
                    );
                }
                self.doc.meta = Some(Lined {
                    line: number,
                    event: meta,
                });
            }
            TraceEvent::SpanStart(s) => self.span_start(s, number, consumed, total),
            TraceEvent::SpanEnd(e) => self.span_end(&e.id, e.duration_ns, number),
            TraceEvent::Op(event) => {
                if self.op(&event.span_id, number, consumed, total) {
                    self.doc.ops.push_event(number, &event);
                }
            }
            TraceEvent::Tensor(event) => {
                self.tensor(&event.span_id.clone(), number, consumed, total, || event)
            }
            TraceEvent::Memory(event) => {
                self.check_ref(RefKind::Memory, &event.span_id, number);
                match self.keep {
                    Keep::Everything => {
                        make_room(&mut self.doc.memory, consumed, total);
                        self.doc.memory.push_event(number, &event);
                    }
                    Keep::Summary => self.keep_memory_facts(consumed, total, || MemoryFacts {
                        line: number,
                        timestamp_ns: event.timestamp_ns,
                        bytes: event.bytes,
                        tensor_id: event.tensor_id,
                        device: event.device,
                        action: event.action,
                        category: event.category,
                    }),
                }
            }
            TraceEvent::DeviceMemory(event) => doc.device_memory.push(Lined::new(number, event)),
            TraceEvent::Gradient(event) => match self.keep {
                Keep::Everything => doc.gradients.push(Lined::new(number, event)),
                Keep::Summary => self.dropped.gradients += 1,
            },
            TraceEvent::Edge(event) => match self.keep {
                Keep::Everything => doc.edges.push(Lined::new(number, event)),
                Keep::Summary => self.dropped.edges += 1,
            },
            TraceEvent::CaptureSources(event) => {
                if let Some(first) = &doc.capture_sources {
                    let msg = format!(
                        "more than one capture_sources line (the first is at line {}); this one is ignored",
                        first.line
                    );
                    self.warn(number, Category::Capture, msg);
                    return;
                }
                for w in &event.warnings {
                    doc.diagnostics.push(Diagnostic::warning(
                        number,
                        Category::Capture,
                        format!("capture: {w}"),
                    ));
                }
                doc.capture_sources = Some(Lined::new(number, event));
            }
        }
    }

    /// A writer-shaped line of a hot kind: the same checks as for its serde-decoded event,
    /// building only the record that is kept.
    #[inline]
    fn raw_record(&mut self, raw: Raw<'_>, number: u64, consumed: u64, total: u64) {
        match raw {
            Raw::SpanStart(s) => self.span_start(s.to_event(), number, consumed, total),
            Raw::SpanEnd { id, duration_ns } => self.span_end(id, duration_ns, number),
            Raw::Op(o) => {
                if self.op(o.span_id, number, consumed, total) {
                    self.doc.ops.push_raw(number, o);
                }
            }
            Raw::Tensor(t) => self.tensor(t.span_id, number, consumed, total, || t.to_event()),
            Raw::Memory(m) => {
                self.check_ref(RefKind::Memory, m.span_id, number);
                match self.keep {
                    Keep::Everything => {
                        make_room(&mut self.doc.memory, consumed, total);
                        self.doc.memory.push_raw(number, m);
                    }
                    Keep::Summary => self.keep_memory_facts(consumed, total, || MemoryFacts {
                        line: number,
                        timestamp_ns: m.timestamp_ns,
                        bytes: m.bytes,
                        tensor_id: m.tensor_id.into(),
                        device: m.device.into(),
                        action: m.action,
                        category: m.category,
                    }),
                }
            }
        }
    }

    fn span_start(&mut self, s: SpanStart, number: u64, consumed: u64, total: u64) {
        let doc = &mut self.doc;
        make_room_map(&mut doc.span_index, &doc.spans, consumed, total);
        make_room(&mut doc.spans, consumed, total);
        let index = doc.spans.len() as u32;
        // One hash of the id: the duplicate check and the insertion share the entry.
        if let Err(first) = doc.span_index.insert_first(&doc.spans, &s.id, index) {
            let msg = format!(
                "duplicate span id `{}` (first started at line {}); this span_start is dropped",
                s.id, doc.spans[first as usize].line
            );
            self.error(number, Category::Duplicate, msg);
            return;
        }
        if s.measured {
            match self.first_measured_line {
                None => self.first_measured_line = Some(number),
                Some(first_measured) => self.warn(
                    number,
                    Category::Measured,
                    format!("more than one measured span (the first starts at line {first_measured}); total_ns adds them all"),
                ),
            }
        }
        let doc = &self.doc;
        let parent = match (&s.parent_id, self.open.last()) {
            (Some(pid), Some(&top)) if doc.spans[top as usize].id == *pid => Some(top),
            _ => None,
        };
        self.parents.push(parent);
        if self.open.len() < OPEN_DEPTH {
            self.open.push(index);
        }
        self.doc.spans.push(Span {
            id: s.id,
            parent_id: s.parent_id,
            name: s.name,
            start_ns: s.start_ns,
            span_kind: s.span_kind,
            measured: s.measured,
            pass: s.pass,
            module: s.module,
            duration_ns: None,
            line: number,
            end_line: None,
        });
    }

    fn span_end(&mut self, id: &str, duration_ns: u64, number: u64) {
        let doc = &mut self.doc;
        let found = match self.open.last() {
            Some(&i) if doc.spans[i as usize].id == id => {
                self.open.pop();
                Some(i)
            }
            _ => {
                let found = doc.span_index.get(&doc.spans, id);
                // A span that ends while spans it encloses are open: those are not innermost
                // any more (they end out of order, or never).
                if let Some(at) = found.and_then(|i| self.open.iter().rposition(|&o| o == i)) {
                    self.open.truncate(at);
                }
                found
            }
        };
        let settled = match found {
            Some(i) if !self.pending_end_ids.contains(id) => {
                close_span(&mut doc.spans[i as usize], id, duration_ns, number)
            }
            _ => {
                let id = CompactString::from(id);
                self.pending_end_ids.insert(id.clone());
                self.pending_ends.push((id, duration_ns, number));
                None
            }
        };
        if let Some(d) = settled {
            doc.diagnostics.push(d);
        }
    }

    /// The reference check of an `op` record and, when it is kept whole, room for it: whether
    /// to push it.
    fn op(&mut self, span_id: &str, number: u64, consumed: u64, total: u64) -> bool {
        self.check_ref(RefKind::Op, span_id, number);
        match self.keep {
            Keep::Everything => {
                make_room(&mut self.doc.ops, consumed, total);
                true
            }
            Keep::Summary => {
                self.dropped.ops += 1;
                false
            }
        }
    }

    fn tensor(
        &mut self,
        span_id: &str,
        number: u64,
        consumed: u64,
        total: u64,
        build: impl FnOnce() -> TensorEvent,
    ) {
        self.check_ref(RefKind::Tensor, span_id, number);
        match self.keep {
            Keep::Everything => {
                let tensors = &mut self.doc.tensors;
                make_room(tensors, consumed, total);
                tensors.push(Lined::new(number, build()));
            }
            Keep::Summary => self.dropped.tensors += 1,
        }
    }

    /// What a summary read keeps of a `memory` record: what the memory profile's numbers and
    /// warnings read (time, tensor, device, bytes, action and category; the rest only
    /// describes what was live).
    fn keep_memory_facts(
        &mut self,
        consumed: u64,
        total: u64,
        build: impl FnOnce() -> MemoryFacts,
    ) {
        make_room(&mut self.memory_facts, consumed, total);
        self.memory_facts.push(build());
    }

    /// The reference check of an `op`, `tensor` or `memory` record: settled now when its span
    /// has been read, otherwise left for `finish`.
    #[inline]
    fn check_ref(&mut self, kind: RefKind, span_id: &str, line: u64) {
        let doc = &self.doc;
        for last in [self.last_ref, self.open.last().copied()]
            .into_iter()
            .flatten()
        {
            if doc.spans[last as usize].id == span_id {
                return;
            }
        }
        match doc.span_index.get(&doc.spans, span_id) {
            Some(i) => self.last_ref = Some(i),
            None => self
                .pending_refs
                .push((kind, CompactString::from(span_id), line)),
        }
    }

    fn error(&mut self, line: u64, category: Category, message: String) {
        self.doc
            .diagnostics
            .push(Diagnostic::error(line, category, message));
    }

    fn warn(&mut self, line: u64, category: Category, message: String) {
        self.doc
            .diagnostics
            .push(Diagnostic::warning(line, category, message));
    }
}

/// Which kind of record names a span that may not exist (for the reference warning).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RefKind {
    Op,
    Tensor,
    Memory,
}

impl RefKind {
    pub(super) fn name(self) -> &'static str {
        match self {
            RefKind::Op => "op",
            RefKind::Tensor => "tensor",
            RefKind::Memory => "memory",
        }
    }
}

/// The deepest nesting [`TraceReader`]'s cache of open spans follows; deeper spans are found by
/// hashing their ids.
pub(super) const OPEN_DEPTH: usize = 256;

/// Close `span` with the `span_end` read at `line`, or the error for a second end.
pub(super) fn close_span(
    span: &mut Span,
    id: &str,
    duration_ns: u64,
    line: u64,
) -> Option<Diagnostic> {
    match span.end_line {
        Some(first_end) => Some(Diagnostic::error(
            line,
            Category::Duplicate,
            format!("span `{id}` is closed twice (first span_end at line {first_end}); this one is ignored"),
        )),
        None => {
            span.duration_ns = Some(duration_ns);
            span.end_line = Some(line);
            None
        }
    }
}
