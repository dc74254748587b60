//! [`ProfileReader`](super::ProfileReader): lines → a [`ProfileDocument`](super::ProfileDocument), every bad
//! line a diagnostic.

use alloc::vec::Vec;

use crate::format::diagnostics::{Category, Diagnostic};
use crate::format::events::LineError;
use crate::format::jsonl::Line;

use super::event::decode_line;
use super::{violations, ProfileDocument, ProfileReader, ProfileRecord};

impl ProfileReader {
    /// A reader at the start of a file.
    pub fn new() -> Self {
        Self::default()
    }

    /// Lines completed so far, blank ones included (for progress reporting).
    pub fn lines_read(&self) -> u64 {
        self.splitter.lines_seen()
    }

    /// Feed the next chunk of the file; lines may straddle chunks.
    pub fn push(&mut self, chunk: &[u8]) {
        let doc = &mut self.doc;
        self.splitter.push(chunk, |line| read_line(line, doc));
    }

    /// End of file: reads a last line without `\n` and returns the document.
    pub fn finish(self) -> ProfileDocument {
        let ProfileReader { splitter, mut doc } = self;
        splitter.finish(|line| read_line(line, &mut doc));
        doc
    }
}

/// Read a whole inference profile held in memory.
pub fn read_profile(bytes: &[u8]) -> ProfileDocument {
    let mut reader = ProfileReader::new();
    reader.push(bytes);
    reader.finish()
}

fn read_line(line: Line<'_>, doc: &mut ProfileDocument) {
    let Some(bytes) = crate::format::jsonl::without_bom(&line) else {
        return;
    };
    match decode_line(bytes) {
        Ok(event) => {
            let broken = violations(&event);
            let mut messages = Vec::with_capacity(broken.len());
            for v in broken {
                doc.diagnostics.push(Diagnostic::error(
                    line.number,
                    v.category,
                    v.message.clone(),
                ));
                messages.push(v.message);
            }
            doc.records.push(ProfileRecord {
                line: line.number,
                event,
                violations: messages,
            });
        }
        Err(LineError::UnknownKind(kind)) => doc.diagnostics.push(Diagnostic::warning(
            line.number,
            Category::UnknownKind,
            alloc::format!("unknown event_kind `{kind}`; line skipped"),
        )),
        Err(LineError::Invalid(Category::Truncated, message)) => {
            doc.diagnostics.push(if line.terminated {
                Diagnostic::error(line.number, Category::Syntax, message)
            } else {
                Diagnostic::warning(
                    line.number,
                    Category::Truncated,
                    alloc::format!("truncated last line (no trailing newline): {message}"),
                )
            })
        }
        Err(LineError::Invalid(category, message)) => {
            doc.diagnostics
                .push(Diagnostic::error(line.number, category, message))
        }
    }
}
