//! A [`TraceReader`]'s end of file: the last line ([`TraceReader::end_input`]), then the checks
//! that wait for every line and the span tree's layout; [`analysis::finish`](crate::analysis::finish)
//! then computes the numbers.

use alloc::format;

use super::lines::close_span;
use super::{Keep, ReadOut, TraceRead, TraceReader};
use crate::format::diagnostics::{Category, Diagnostic};
use crate::format::events::TRACE_SCHEMA;
use crate::format::spans::SpanTree;

impl TraceReader {
    /// End of input: the last line (one without a final `\n`) read. The record tables are
    /// final from here ([`TraceRead::records`]); [`TraceRead::finish`] then checks, lays the
    /// span tree out and computes the numbers, as [`TraceReader::finish`] does in one call.
    pub fn end_input(mut self) -> TraceRead {
        let splitter = core::mem::take(&mut self.splitter);
        let bytes_read = splitter.bytes_seen();
        splitter.finish(|line| self.line(line));
        self.doc.bytes_read = bytes_read;
        TraceRead { reader: self }
    }

    /// End of file: the cross-record checks and the span tree's layout.
    pub(crate) fn read_to_end(self) -> ReadOut {
        self.end_input().read_to_end()
    }
}

impl TraceRead {
    /// The cross-record checks and the span tree's layout.
    pub(crate) fn read_to_end(self) -> ReadOut {
        let TraceReader {
            mut doc,
            keep,
            dropped,
            pending_ends,
            pending_refs,
            memory_facts,
            parents,
            ..
        } = self.reader;
        let diags = &mut doc.diagnostics;

        let meta_line = match &doc.meta {
            Some(m) => m.line,
            None => {
                diags.push(Diagnostic::error(
                    1,
                    Category::Meta,
                    format!("no meta line: a trace starts with {{\"kind\":\"meta\",\"schema\":\"{TRACE_SCHEMA}\",...}}"),
                ));
                1
            }
        };

        for (id, duration_ns, line) in pending_ends {
            match doc.span_index.get(&doc.spans, &id) {
                None => diags.push(Diagnostic::error(
                    line,
                    Category::Reference,
                    format!("span_end for unknown span id `{id}`"),
                )),
                Some(i) => {
                    if let Some(d) = close_span(&mut doc.spans[i as usize], &id, duration_ns, line)
                    {
                        diags.push(d);
                    }
                }
            }
        }
        let mut any_measured = false;
        for span in &doc.spans {
            any_measured |= span.measured;
            if span.end_line.is_none() {
                diags.push(Diagnostic::warning(
                    span.line,
                    Category::Unclosed,
                    format!(
                        "span `{}` ({}) is never closed; its duration counts as 0",
                        span.id, span.name
                    ),
                ));
            }
        }
        if !any_measured {
            diags.push(Diagnostic::warning(
                meta_line,
                Category::Measured,
                "no measured span: total_ns is 0",
            ));
        }

        let (index, spans) = (&doc.span_index, &doc.spans);
        let (tree, tree_diags) = {
            let resolve = index.resolver(spans);
            SpanTree::layout(spans, |i, id| match parents.get(i) {
                Some(&Some(p)) => Some(p as usize),
                _ => resolve(id),
            })
        };
        doc.tree = tree;
        diags.extend(tree_diags);

        for (kind, span_id, line) in pending_refs {
            if index.get(spans, &span_id).is_none() {
                diags.push(Diagnostic::warning(
                    line,
                    Category::Reference,
                    format!("{} names span `{span_id}`, which is no span", kind.name()),
                ));
            }
        }

        let memory_facts = match keep {
            Keep::Everything => None,
            Keep::Summary => Some(memory_facts),
        };
        ReadOut {
            doc,
            dropped,
            memory_facts,
        }
    }
}
