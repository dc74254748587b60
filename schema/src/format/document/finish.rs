//! A [`TraceReader`]'s end of file: the checks that wait for every line, the span tree, the
//! memory replay, the sorted diagnostics.

use alloc::format;

use super::lines::close_span;
use super::{Dropped, Keep, TraceDocument, TraceReader};
use crate::format::diagnostics::{sort_diagnostics, Category, Diagnostic};
use crate::format::events::TRACE_SCHEMA;
use crate::format::memory::{Curve, MemoryProfile};
use crate::format::spans::SpanTree;

impl TraceReader {
    /// [`finish`](TraceReader::finish), and what a [`Keep::Summary`] reader counted instead of
    /// keeping.
    pub(crate) fn finish_keeping(mut self) -> (TraceDocument, Dropped) {
        let splitter = core::mem::take(&mut self.splitter);
        let bytes_read = splitter.bytes_seen();
        splitter.finish(|line| self.line(line));
        let TraceReader {
            mut doc,
            keep,
            dropped,
            pending_ends,
            pending_refs,
            memory_facts,
            parents,
            ..
        } = self;
        doc.bytes_read = bytes_read;
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
            SpanTree::build(spans, |i, id| match parents.get(i) {
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

        let (profile, memory_diags) = match keep {
            Keep::Everything => MemoryProfile::build(&doc.memory, &doc.device_memory),
            Keep::Summary => {
                MemoryProfile::build_from(&memory_facts[..], &doc.device_memory, Curve::Dropped)
            }
        };
        doc.memory_profile = profile;
        doc.diagnostics.extend(memory_diags);
        sort_diagnostics(&mut doc.diagnostics);
        (doc, dropped)
    }
}
