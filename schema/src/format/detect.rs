//! Which format a file is in, from its first bytes, and [`AnyReader`], which reads any of them.
//!
//! Chrome Trace Event JSON is imported into a [`TraceDocument`](crate::format::document::TraceDocument)
//! (see [`crate::format::chrome`]): `AnyDocument::Trace` holds it, with `chrome` set, and
//! [`AnyDocument::format`] says [`Format::Chrome`].
//!
//! Rules (SCHEMA.md's table, made precise):
//! - The first non-blank byte `[` means Chrome Trace Event JSON (an array of events).
//! - Otherwise the first non-blank lines (up to [`PROBE_LINES`], within [`PROBE_BYTES`]) are
//!   parsed one by one; the first that is a JSON object decides: `kind` → trace/6,
//!   `event_kind` or `schema_version` → inference profile, `traceEvents` → Chrome JSON.
//! - When none of them parses (a pretty-printed Chrome object starts with a lone `{`), the
//!   probe window is searched for the tell-tale keys in the same order of preference.
//! - A UTF-8 byte-order mark is skipped.

use crate::format::digest::TraceDigest;
use crate::format::document::Keep;
use crate::format::jsonl::strip_bom;
use crate::format::jsonl::BOM;
use serde::de::IgnoredAny;
use serde::Deserialize;

/// How many non-blank lines the probe looks at, at most.
pub const PROBE_LINES: usize = 8;
/// How many bytes the probe looks at, at most.
pub const PROBE_BYTES: usize = 1 << 20;

/// A file format candle-trace knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, Deserialize)]
pub enum Format {
    /// Execution trace `candle-graph/trace/6` (JSONL).
    Trace,
    /// Inference profile, schema_version 1 (JSONL).
    Profile,
    /// Chrome Trace Event JSON (import only).
    Chrome,
}

impl Format {
    /// Human name.
    pub fn name(self) -> &'static str {
        match self {
            Format::Trace => "candle-graph/trace/6",
            Format::Profile => "inference profile (schema_version 1)",
            Format::Chrome => "Chrome Trace Event JSON",
        }
    }
}

/// What the probe concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detection {
    /// The format is known.
    Known(Format),
    /// Not a format candle-trace reads (including an empty file).
    Unknown,
    /// More bytes are needed to tell (only returned when `at_eof` is false).
    NeedMore,
}

#[derive(Deserialize)]
#[allow(non_snake_case)]
struct Probe {
    kind: Option<IgnoredAny>,
    event_kind: Option<IgnoredAny>,
    schema_version: Option<IgnoredAny>,
    traceEvents: Option<IgnoredAny>,
}

/// Detect the format of a file from its first bytes. `at_eof` says `prefix` is the whole file.
pub fn detect(prefix: &[u8], at_eof: bool) -> Detection {
    // A chunk boundary may fall inside the byte-order mark: wait for the rest of it.
    if !at_eof && prefix.len() < BOM.len() && BOM.starts_with(prefix) {
        return Detection::NeedMore;
    }
    let prefix = strip_bom(prefix);
    let Some(first) = prefix.iter().position(|b| !b.is_ascii_whitespace()) else {
        return if at_eof || prefix.len() >= PROBE_BYTES {
            Detection::Unknown
        } else {
            Detection::NeedMore
        };
    };
    match prefix[first] {
        b'[' => return Detection::Known(Format::Chrome),
        b'{' => {}
        _ => return Detection::Unknown,
    }
    let window = &prefix[..prefix.len().min(PROBE_BYTES)];
    let complete = at_eof || prefix.len() >= PROBE_BYTES;
    let mut seen = 0;
    let mut rest = window;
    loop {
        let (line, tail, terminated) = match memchr::memchr(b'\n', rest) {
            Some(i) => (&rest[..i], &rest[i + 1..], true),
            None => (rest, &rest[rest.len()..], false),
        };
        if !crate::format::jsonl::is_blank(line) {
            if !terminated && !complete {
                return Detection::NeedMore;
            }
            seen += 1;
            if let Ok(p) = serde_json::from_slice::<Probe>(line) {
                if p.kind.is_some() {
                    return Detection::Known(Format::Trace);
                }
                if p.event_kind.is_some() || p.schema_version.is_some() {
                    return Detection::Known(Format::Profile);
                }
                if p.traceEvents.is_some() {
                    return Detection::Known(Format::Chrome);
                }
            }
        }
        if seen >= PROBE_LINES {
            // No line said what the file is: the last resort below searches the whole probe
            // window, so wait for all of it (or the end of the file); deciding on whatever
            // prefix had arrived would make the answer depend on where the chunks fell.
            if !complete {
                return Detection::NeedMore;
            }
            break;
        }
        if !terminated || tail.is_empty() {
            // Out of lines: decide only on the whole window (see above).
            if complete {
                break;
            }
            return Detection::NeedMore;
        }
        rest = tail;
    }
    let has = |needle: &[u8]| memchr::memmem::find(window, needle).is_some();
    if has(b"\"traceEvents\"") {
        Detection::Known(Format::Chrome)
    } else if has(b"\"kind\"") {
        Detection::Known(Format::Trace)
    } else if has(b"\"event_kind\"") || has(b"\"schema_version\"") {
        Detection::Known(Format::Profile)
    } else {
        Detection::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_each_format() {
        let trace = b"{\"kind\":\"meta\",\"schema\":\"candle-graph/trace/6\"}\n";
        assert_eq!(detect(trace, false), Detection::Known(Format::Trace));
        let profile = b"\n{\"schema_version\":1,\"event_kind\":\"instant\"}\n";
        assert_eq!(detect(profile, false), Detection::Known(Format::Profile));
        assert_eq!(
            detect(b"  [{\"ph\":\"X\"}", false),
            Detection::Known(Format::Chrome)
        );
        assert_eq!(
            detect(b"{\n  \"traceEvents\": [\n", true),
            Detection::Known(Format::Chrome)
        );
        assert_eq!(
            detect(b"{\"traceEvents\":[]}", true),
            Detection::Known(Format::Chrome)
        );
        assert_eq!(
            detect(b"\xEF\xBB\xBF{\"kind\":\"op\"}\n", false),
            Detection::Known(Format::Trace)
        );
    }

    #[test]
    fn the_answer_does_not_depend_on_how_much_has_arrived() {
        // Found by fuzzing (any_reader_chunked): the first lines say nothing, a `"kind"` comes
        // later; a prefix must not decide differently from the whole file.
        let mut file = alloc::vec::Vec::from(&b"{\n"[..]);
        for i in 0..PROBE_LINES {
            file.extend_from_slice(alloc::format!("  \"x{i}\": 1,\n").as_bytes());
        }
        file.extend_from_slice(b"  \"kind\": \"op\"\n}\n");
        let whole = detect(&file, true);
        for cut in 1..file.len() {
            match detect(&file[..cut], false) {
                Detection::NeedMore => {}
                d => assert_eq!(d, whole, "cut at {cut}"),
            }
        }
    }

    #[test]
    fn a_broken_first_line_does_not_hide_the_format() {
        let f = b"{not json\n{\"kind\":\"meta\"}\n";
        assert_eq!(detect(f, false), Detection::Known(Format::Trace));
        let f = b"{\"kind\":\"meta\",\"run_id\":\"trunc";
        assert_eq!(detect(f, true), Detection::Known(Format::Trace));
    }

    #[test]
    fn a_byte_order_mark_split_across_chunks_is_waited_for() {
        // Regression: the first chunk of a BOM file holding only `EF` was "not a candle-trace
        // file" (found by tests/tests/malformed.rs reading bom.trace6.jsonl byte by byte).
        assert_eq!(detect(b"\xEF", false), Detection::NeedMore);
        assert_eq!(detect(b"\xEF\xBB", false), Detection::NeedMore);
        assert_eq!(detect(b"\xEF\xBB", true), Detection::Unknown);
        let mut r = AnyReader::new();
        for b in b"\xEF\xBB\xBF{\"schema_version\":1,\"event_kind\":\"instant\"}\n" {
            r.push(&[*b]);
        }
        assert_eq!(r.finish().format(), Some(Format::Profile));
    }

    #[test]
    fn waits_for_a_complete_line() {
        assert_eq!(detect(b"{\"kind\":", false), Detection::NeedMore);
        assert_eq!(detect(b"   ", false), Detection::NeedMore);
    }

    #[test]
    fn unknown_inputs() {
        assert_eq!(detect(b"", true), Detection::Unknown);
        assert_eq!(detect(b"hello", true), Detection::Unknown);
        assert_eq!(detect(b"{\"a\":1}\n", true), Detection::Unknown);
        assert_eq!(detect(b"\x00\x01\x02", true), Detection::Unknown);
    }
}

/// A document of any format this crate reads.
#[derive(Debug, Clone)]
pub enum AnyDocument {
    /// An execution trace (also an imported Chrome JSON file: `chrome` is set).
    Trace(alloc::boxed::Box<crate::format::document::TraceDocument>),
    /// An inference profile.
    Profile(crate::format::profile::ProfileDocument),
    /// A file this crate cannot read (yet): its format if recognised, and why.
    Unsupported {
        /// The recognised format, `None` when unrecognised.
        format: Option<Format>,
        /// One error diagnostic explaining the refusal.
        diagnostics: alloc::vec::Vec<crate::format::diagnostics::Diagnostic>,
    },
}

impl AnyDocument {
    /// The document's format, `None` when unrecognised.
    pub fn format(&self) -> Option<Format> {
        match self {
            AnyDocument::Trace(d) if d.chrome.is_some() => Some(Format::Chrome),
            AnyDocument::Trace(_) => Some(Format::Trace),
            AnyDocument::Profile(_) => Some(Format::Profile),
            AnyDocument::Unsupported { format, .. } => *format,
        }
    }

    /// Every diagnostic, sorted by line.
    pub fn diagnostics(&self) -> &[crate::format::diagnostics::Diagnostic] {
        match self {
            AnyDocument::Trace(d) => &d.diagnostics,
            AnyDocument::Profile(d) => &d.diagnostics,
            AnyDocument::Unsupported { diagnostics, .. } => diagnostics,
        }
    }
}

#[derive(Debug)]
enum ReaderState {
    Probing(alloc::vec::Vec<u8>),
    Trace(alloc::boxed::Box<crate::format::document::TraceReader>),
    Profile(crate::format::profile::ProfileReader),
    Chrome(alloc::boxed::Box<crate::format::chrome::ChromeReader>),
    Rejected(Option<Format>, bool),
}

/// Streaming reader for any format: buffers the first bytes until [`detect`] decides, then
/// streams into the matching reader.
#[derive(Debug)]
pub struct AnyReader {
    state: ReaderState,
    /// The file's size in bytes, when known (0: unknown).
    size_hint: u64,
    /// What a trace's reader keeps: [`Keep::Summary`] only inside an [`AnySummaryReader`],
    /// which never hands out a document.
    keep: Keep,
}

impl Default for AnyReader {
    fn default() -> Self {
        AnyReader {
            state: ReaderState::Probing(alloc::vec::Vec::new()),
            size_hint: 0,
            keep: Keep::Everything,
        }
    }
}

/// A file read to its end: a trace's read before its numbers are computed, or any other
/// document.
pub(crate) enum Finished {
    /// A trace/6 file, its numbers not yet computed.
    Trace(alloc::boxed::Box<crate::format::document::ReadOut>),
    /// A Chrome JSON file, its span tree laid out.
    Chrome(alloc::boxed::Box<crate::format::document::TraceDocument>),
    /// Any other file, finished.
    Other(AnyDocument),
}

impl AnyReader {
    /// A reader at the start of a file.
    pub fn new() -> Self {
        Self::default()
    }

    /// A reader at the start of a file of `total_bytes` bytes, which lets a trace's record
    /// lists grow once to their final size ([`TraceReader::with_size_hint`]).
    ///
    /// [`TraceReader::with_size_hint`]: crate::format::document::TraceReader::with_size_hint
    pub fn with_size_hint(total_bytes: u64) -> Self {
        AnyReader {
            size_hint: total_bytes,
            ..Self::default()
        }
    }

    /// True once the file is known to be unreadable: further bytes are ignored, so a caller
    /// may stop reading.
    pub fn is_rejected(&self) -> bool {
        matches!(self.state, ReaderState::Rejected(..))
    }

    /// The detected format, once known.
    pub fn format(&self) -> Option<Format> {
        match &self.state {
            ReaderState::Probing(_) => None,
            ReaderState::Trace(_) => Some(Format::Trace),
            ReaderState::Profile(_) => Some(Format::Profile),
            ReaderState::Chrome(_) => Some(Format::Chrome),
            ReaderState::Rejected(format, _) => *format,
        }
    }

    /// Lines read so far, for progress reporting: `None` while the format is not yet known,
    /// for a rejected file, and for Chrome JSON (one JSON document, not lines).
    pub fn lines_read(&self) -> Option<u64> {
        match &self.state {
            ReaderState::Trace(r) => Some(r.lines_read()),
            ReaderState::Profile(r) => Some(r.lines_read()),
            ReaderState::Probing(_) | ReaderState::Chrome(_) | ReaderState::Rejected(..) => None,
        }
    }

    /// Feed the next chunk.
    pub fn push(&mut self, chunk: &[u8]) {
        match &mut self.state {
            ReaderState::Probing(buf) => {
                buf.extend_from_slice(chunk);
                self.decide(false);
            }
            ReaderState::Trace(r) => r.push(chunk),
            ReaderState::Profile(r) => r.push(chunk),
            ReaderState::Chrome(r) => r.push(chunk),
            ReaderState::Rejected(..) => {}
        }
    }

    fn decide(&mut self, at_eof: bool) {
        let ReaderState::Probing(buf) = &mut self.state else {
            return;
        };
        let detection = detect(buf, at_eof);
        let buf = core::mem::take(buf);
        let bytes = strip_bom(&buf);
        self.state = match detection {
            Detection::NeedMore => ReaderState::Probing(buf),
            Detection::Known(Format::Trace) => {
                let mut r = alloc::boxed::Box::new(crate::format::document::TraceReader::keeping(
                    self.keep,
                    self.size_hint,
                ));
                r.push(bytes);
                ReaderState::Trace(r)
            }
            Detection::Known(Format::Profile) => {
                let mut r = crate::format::profile::ProfileReader::new();
                r.push(bytes);
                ReaderState::Profile(r)
            }
            Detection::Known(Format::Chrome) => {
                let mut r = alloc::boxed::Box::new(crate::format::chrome::ChromeReader::new());
                r.push(bytes);
                ReaderState::Chrome(r)
            }
            Detection::Unknown => {
                ReaderState::Rejected(None, crate::format::jsonl::is_blank(bytes))
            }
        };
    }

    /// End of input: the format decided (a file too short to tell is decided now) and the
    /// last line read. A trace/6 file's record tables are final from here
    /// ([`AnyRead::records`]); [`AnyRead::finish`] then gives the document
    /// [`AnyReader::finish`] gives in one call.
    pub fn end_input(mut self) -> AnyRead {
        use crate::format::diagnostics::{Category, Diagnostic};
        self.decide(true);
        AnyRead {
            state: Ended::Other(match self.state {
                ReaderState::Trace(r) => {
                    return AnyRead {
                        state: Ended::Trace(alloc::boxed::Box::new(r.end_input())),
                    }
                }
                ReaderState::Profile(r) => AnyDocument::Profile(r.finish()),
                ReaderState::Chrome(r) => {
                    return AnyRead {
                        state: Ended::Chrome(r),
                    }
                }
                ReaderState::Rejected(format, empty) => {
                    let message = match (format, empty) {
                        (_, true) => "the file is empty",
                        _ => "not a candle-trace file: expected a trace/6 JSONL file (first line {\"kind\":\"meta\",...}), an inference profile (lines with \"schema_version\":1 and \"event_kind\") or Chrome Trace Event JSON",
                    };
                    AnyDocument::Unsupported {
                        format,
                        diagnostics: alloc::vec![Diagnostic::error(1, Category::Format, message)],
                    }
                }
                // `decide(true)` never leaves the probe undecided.
                ReaderState::Probing(_) => AnyDocument::Unsupported {
                    format: None,
                    diagnostics: alloc::vec![Diagnostic::error(
                        1,
                        Category::Format,
                        "format could not be detected"
                    )],
                },
            }),
        }
    }

    /// End of file, before [`analysis::finish`](crate::analysis::finish) computes the numbers
    /// of a trace.
    pub(crate) fn read_to_end(self) -> Finished {
        self.end_input().read_to_end()
    }
}

/// A file read to its end by an [`AnyReader`] ([`AnyReader::end_input`]), before the work that
/// needs every line: a trace/6 file's cross-record checks, span tree and numbers, a Chrome
/// file's matching and nesting of its events. [`records`](AnyRead::records) are a trace/6
/// file's parts that this work leaves as they are; [`finish`](AnyRead::finish) does it.
#[derive(Debug)]
pub struct AnyRead {
    state: Ended,
}

#[derive(Debug)]
enum Ended {
    Trace(alloc::boxed::Box<crate::format::document::TraceRead>),
    Chrome(alloc::boxed::Box<crate::format::chrome::ChromeReader>),
    Other(AnyDocument),
}

impl AnyRead {
    /// A trace/6 file's head and record tables, final already; `None` for any other format.
    pub fn records(&self) -> Option<crate::format::document::TraceRecords<'_>> {
        match &self.state {
            Ended::Trace(t) => Some(t.records()),
            _ => None,
        }
    }

    /// End of file, before [`analysis::finish`](crate::analysis::finish) computes the numbers
    /// of a trace.
    pub(crate) fn read_to_end(self) -> Finished {
        match self.state {
            Ended::Trace(t) => Finished::Trace(alloc::boxed::Box::new(t.read_to_end())),
            Ended::Chrome(r) => Finished::Chrome(alloc::boxed::Box::new(r.read_to_end())),
            Ended::Other(doc) => Finished::Other(doc),
        }
    }
}

/// What [`AnySummaryReader`] read: a trace/6 file read for its summary, or any other format's
/// whole document (an inference profile, an imported Chrome JSON file, an unsupported file).
#[derive(Debug, Clone)]
pub enum AnySummary {
    /// A trace/6 file.
    Trace(alloc::boxed::Box<TraceDigest>),
    /// Anything else, read as [`AnyReader`] reads it.
    Document(AnyDocument),
}

/// [`AnyReader`] for a summary: a trace/6 file is read by the same reader keeping only what its
/// summary needs ([`crate::format::digest`]), every other format as [`AnyReader`] reads it.
#[derive(Debug)]
pub struct AnySummaryReader {
    pub(crate) reader: AnyReader,
}

impl AnySummaryReader {
    /// A reader at the start of a file of `total_bytes` bytes (0 when unknown).
    pub fn with_size_hint(total_bytes: u64) -> Self {
        AnySummaryReader {
            reader: AnyReader {
                keep: Keep::Summary,
                ..AnyReader::with_size_hint(total_bytes)
            },
        }
    }

    /// True once the file is known to be unreadable (see [`AnyReader::is_rejected`]).
    pub fn is_rejected(&self) -> bool {
        self.reader.is_rejected()
    }

    /// Feed the next chunk.
    pub fn push(&mut self, chunk: &[u8]) {
        self.reader.push(chunk);
    }
}

#[cfg(test)]
mod any_reader_tests {
    use super::*;

    #[test]
    fn chrome_json_is_imported_whatever_the_chunking() {
        // (A BOM is only recognised when the first push holds all three of its bytes.)
        let text =
            b"\xEF\xBB\xBF  [{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":2,\"pid\":1,\"tid\":1},";
        for size in 3..9 {
            let mut r = AnyReader::new();
            for c in text.chunks(size) {
                r.push(c);
            }
            let doc = r.finish();
            assert_eq!(doc.format(), Some(Format::Chrome));
            let AnyDocument::Trace(t) = doc else {
                panic!("not a trace")
            };
            assert!(t.diagnostics.is_empty(), "{:?}", t.diagnostics);
            assert_eq!(t.summary().span_count, 2);
            assert_eq!(t.summary().total_ns, 2000);
        }
    }

    #[test]
    fn lines_read_counts_every_newline_of_a_line_format_once_it_is_known() {
        // Four `\n`s (one of them a blank line) and an unterminated last line, pushed byte by
        // byte: no count before the format is decided, then every newline pushed so far.
        let trace =
            b"{\"kind\":\"meta\",\"schema\":\"candle-graph/trace/6\"}\n\n{\"a\":1}\r\n{}\n{";
        let mut r = AnyReader::new();
        let mut counts = alloc::vec::Vec::new();
        for b in trace {
            r.push(&[*b]);
            counts.push(r.lines_read());
        }
        let first = counts.iter().position(Option::is_some).expect("decided");
        assert!(counts[..first].iter().all(Option::is_none));
        assert_eq!(counts.last(), Some(&Some(4)));
        let newlines_before = |i: usize| trace[..=i].iter().filter(|&&b| b == b'\n').count();
        for (i, c) in counts.iter().enumerate().skip(first) {
            assert_eq!(*c, Some(newlines_before(i) as u64), "after byte {i}");
        }
        let mut profile = AnyReader::new();
        profile.push(b"{\"schema_version\":1,\"event_kind\":\"instant\"}\n\n");
        assert_eq!(profile.lines_read(), Some(2));
        let mut chrome = AnyReader::new();
        chrome.push(b"[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":2,\"pid\":1,\"tid\":1}\n,\n");
        assert_eq!(chrome.format(), Some(Format::Chrome));
        assert_eq!(chrome.lines_read(), None);
        let mut rejected = AnyReader::new();
        rejected.push(b"hello\n");
        rejected.decide(true);
        assert!(rejected.is_rejected());
        assert_eq!(rejected.lines_read(), None);
    }
}
