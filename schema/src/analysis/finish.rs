//! The end of every trace reader: the numbers a document carries from the moment it is read.
//!
//! The readers under [`format`](crate::format) read the lines, check them and lay the span tree
//! out; their `finish` is defined here, where the numbers are computed: each span's self time
//! ([`spans::self_times`](super::spans::self_times)) and the memory profile
//! ([`memory`](super::memory)), whose warnings join the document's diagnostics, which are then
//! sorted. So `format` never calls an analysis, and every reader gives a finished document.

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::analysis::memory::{memory_profile, replay, Curve};
use crate::analysis::spans::self_times;
use crate::format::chrome::ChromeReader;
use crate::format::detect::{
    AnyDocument, AnyRead, AnyReader, AnySummary, AnySummaryReader, Finished,
};
use crate::format::diagnostics::{sort_diagnostics, Diagnostic};
use crate::format::digest::{TraceDigest, TraceDigestReader};
use crate::format::document::{Dropped, ReadOut, TraceDocument, TraceRead, TraceReader};
use crate::format::events::Meta;
use crate::format::records::{Lined, Span};

/// A trace read to its end with its numbers: self time, the memory profile and its warnings,
/// sorted diagnostics.
fn complete(read: ReadOut) -> (TraceDocument, Dropped) {
    let ReadOut {
        mut doc,
        dropped,
        memory_facts,
    } = read;
    doc.tree.self_ns = self_times(&doc.spans, &doc.tree);
    let (profile, warnings) = match &memory_facts {
        None => memory_profile(&doc.memory, &doc.device_memory),
        Some(facts) => replay(&facts[..], &doc.device_memory, Curve::Dropped),
    };
    doc.memory_profile = profile;
    doc.diagnostics.extend(warnings);
    sort_diagnostics(&mut doc.diagnostics);
    (doc, dropped)
}

/// A document whose span tree is laid out, with each span's self time.
fn with_self_times(mut doc: TraceDocument) -> TraceDocument {
    doc.tree.self_ns = self_times(&doc.spans, &doc.tree);
    doc
}

impl TraceReader {
    /// End of file: cross-record checks, span tree, memory profile.
    pub fn finish(self) -> TraceDocument {
        self.end_input().finish()
    }
}

impl TraceRead {
    /// End of file: cross-record checks, span tree, memory profile; the document
    /// [`TraceReader::finish`] gives.
    pub fn finish(self) -> TraceDocument {
        complete(self.read_to_end()).0
    }
}

impl TraceDocument {
    /// Read a whole in-memory trace/6 file.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        let mut reader = TraceReader::new();
        reader.push(bytes);
        reader.finish()
    }

    /// Read a whole in-memory Chrome JSON file.
    pub fn from_chrome(bytes: &[u8]) -> Self {
        let mut reader = ChromeReader::new();
        reader.push(bytes);
        reader.finish()
    }

    /// A document from already-decoded parts (the Chrome importer, the viewer's per-request
    /// charts of a profile): span index, tree (with its diagnostics and self time), the
    /// measured-span warnings of SCHEMA.md, sorted diagnostics. Span ids must be unique.
    pub fn assemble(meta: Lined<Meta>, spans: Vec<Span>, diagnostics: Vec<Diagnostic>) -> Self {
        with_self_times(TraceDocument::assemble_layout(meta, spans, diagnostics))
    }
}

impl ChromeReader {
    /// End of file: B/E matching, nesting, the synthetic meta and root, the document.
    pub fn finish(self) -> TraceDocument {
        with_self_times(self.read_to_end())
    }
}

impl TraceDigestReader {
    /// End of file: the same cross-record checks, span tree and memory profile as
    /// [`TraceReader::finish`].
    pub fn finish(self) -> TraceDigest {
        let (doc, dropped) = complete(self.reader.read_to_end());
        TraceDigest::new(doc, dropped)
    }
}

impl AnyReader {
    /// End of file.
    pub fn finish(self) -> AnyDocument {
        self.end_input().finish()
    }
}

impl AnyRead {
    /// End of file: the document [`AnyReader::finish`] gives.
    pub fn finish(self) -> AnyDocument {
        match self.read_to_end() {
            Finished::Trace(read) => AnyDocument::Trace(Box::new(complete(*read).0)),
            Finished::Chrome(doc) => AnyDocument::Trace(Box::new(with_self_times(*doc))),
            Finished::Other(doc) => doc,
        }
    }
}

impl AnySummaryReader {
    /// End of file.
    pub fn finish(self) -> AnySummary {
        match self.reader.read_to_end() {
            Finished::Trace(read) => {
                let (doc, dropped) = complete(*read);
                AnySummary::Trace(Box::new(TraceDigest::new(doc, dropped)))
            }
            Finished::Chrome(doc) => {
                AnySummary::Document(AnyDocument::Trace(Box::new(with_self_times(*doc))))
            }
            Finished::Other(doc) => AnySummary::Document(doc),
        }
    }
}
