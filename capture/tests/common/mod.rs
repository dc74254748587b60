//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};

use candle_trace_schema::format::diagnostics::Severity;
use candle_trace_schema::format::document::TraceDocument;

/// An in-memory `io::Write` whose bytes the test can read after the recorder is done.
#[derive(Clone, Default)]
pub struct SharedBuf(pub Arc<Mutex<Vec<u8>>>);

impl SharedBuf {
    pub fn bytes(&self) -> Vec<u8> {
        self.0.lock().unwrap().clone()
    }

    pub fn text(&self) -> String {
        String::from_utf8(self.bytes()).unwrap()
    }

    pub fn document(&self) -> TraceDocument {
        TraceDocument::from_bytes(&self.bytes())
    }
}

impl Write for SharedBuf {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A fresh directory under cargo's per-target temporary directory.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("capture-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Errors among the document's diagnostics, formatted for an assertion message.
pub fn errors(doc: &TraceDocument) -> Vec<String> {
    doc.diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| format!("line {}: {:?}: {}", d.line, d.category, d.message))
        .collect()
}

/// The names of the spans, in file order.
pub fn span_names(doc: &TraceDocument) -> Vec<String> {
    doc.spans.iter().map(|s| s.name.to_string()).collect()
}

/// The name of span `id`'s parent.
pub fn parent_name(doc: &TraceDocument, name: &str) -> Option<String> {
    let span = doc.spans.iter().find(|s| s.name == name)?;
    let parent = span.parent_id.as_deref()?;
    doc.span(parent).map(|p| p.name.to_string())
}

/// A writer that blocks every write until the test opens the gate, then writes to its buffer.
#[derive(Clone, Default)]
pub struct Gate(pub Arc<(Mutex<bool>, Condvar)>, pub SharedBuf);

impl Gate {
    /// Let every write through from now on.
    pub fn open(&self) {
        *self.0 .0.lock().unwrap() = true;
        self.0 .1.notify_all();
    }
}

impl Write for Gate {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let (lock, cv) = &*self.0;
        let mut open = lock.lock().unwrap();
        while !*open {
            open = cv.wait(open).unwrap();
        }
        self.1.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
