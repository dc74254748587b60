//! Streaming framing of Chrome Trace Event JSON: chunks of any size → the array's elements, one
//! at a time, each with the 1-based line on which it starts.
//!
//! The whole file is never one string. The scanner walks the bytes once, tracking whether it is
//! inside a string (and after a `\`), and the bracket depth; an element ends when its outermost
//! `{...}` / `[...]` / string closes, or a bare scalar (garbage included) meets `,`, `]`, `}` or
//! the end of its line. Only the
//! current element's bytes are buffered. Both top-level forms are understood:
//! - the array form `[ev, ev, ...]` (the closing `]` may be missing; commas between elements
//!   are not checked, so a trailing comma is fine);
//! - the object form `{"traceEvents":[...], "metadata":{...}, ...}`: other top-level values are
//!   skipped without buffering, except `metadata`, which is kept (it holds candle-trace's own meta
//!   when the file was written by `chrome::export`).
//!
//! An element object that lost its closing `}` would otherwise swallow the rest of the file: a
//! `{` at the element's top level that does not follow a `:` (never valid JSON there) ends the
//! broken element (which then fails to decode and is reported at its line) and starts the next.

use alloc::format;
use alloc::vec::Vec;

use crate::format::diagnostics::{Category, Diagnostic};
use crate::format::tracks::ChromeForm;

/// What the scanner hands back.
#[derive(Debug)]
pub(crate) enum Scanned<'a> {
    /// One array element: 1-based ordinal in the array, line where it starts, its bytes.
    Element {
        ordinal: u64,
        line: u64,
        bytes: &'a [u8],
    },
    /// The object form's `metadata` value.
    Metadata(&'a [u8]),
    /// A problem with the framing itself.
    Problem(Diagnostic),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the first non-blank byte.
    Start,
    /// Inside the events array, between elements.
    Between,
    /// Collecting one value (an array element, or a top-level value of the object form).
    Value,
    /// Object form: expecting a key, `,` or `}`.
    ExpectKey,
    /// Object form: inside a key.
    Key,
    /// Object form: after a key, expecting `:`.
    ExpectColon,
    /// Object form: after `:`, expecting a value.
    ExpectValue,
    /// The trace is closed; only whitespace may follow.
    Done,
}

/// Where the current value goes when it is complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Element,
    Metadata,
    Skip,
}

/// The streaming scanner.
#[derive(Debug)]
pub(crate) struct Scanner {
    state: State,
    form: Option<ChromeForm>,
    line: u64,
    bytes_seen: u64,
    // The value being collected.
    target: Target,
    buf: Vec<u8>,
    value_line: u64,
    depth: u32,
    scalar: bool,
    /// The value is an object (its first byte is `{`).
    object_value: bool,
    /// The last byte outside strings that was not whitespace.
    last_significant: u8,
    value_len: u64,
    in_string: bool,
    escaped: bool,
    // Object form.
    key: Vec<u8>,
    key_escaped: bool,
    saw_events: bool,
    ordinal: u64,
    garbage_reported: bool,
    closed: bool,
    /// Whether the last byte pushed was `\n` (then the file's last line is `line - 1`).
    ends_with_newline: bool,
}

impl Default for Scanner {
    fn default() -> Self {
        Scanner {
            state: State::Start,
            form: None,
            line: 1,
            ends_with_newline: false,
            bytes_seen: 0,
            target: Target::Skip,
            buf: Vec::new(),
            value_line: 1,
            depth: 0,
            scalar: false,
            object_value: false,
            last_significant: 0,
            value_len: 0,
            in_string: false,
            escaped: false,
            key: Vec::new(),
            key_escaped: false,
            saw_events: false,
            ordinal: 0,
            garbage_reported: false,
            closed: false,
        }
    }
}

impl Scanner {
    /// The form, once the first byte was seen.
    pub(crate) fn form(&self) -> Option<ChromeForm> {
        self.form
    }

    /// Bytes pushed so far.
    pub(crate) fn bytes_seen(&self) -> u64 {
        self.bytes_seen
    }

    /// Number of array elements started so far.
    pub(crate) fn elements(&self) -> u64 {
        self.ordinal
    }

    /// Whether the events array was closed with `]`.
    pub(crate) fn closed(&self) -> bool {
        self.closed
    }

    /// Feed the next chunk.
    pub(crate) fn push(&mut self, chunk: &[u8], on: &mut impl FnMut(Scanned<'_>)) {
        if let Some(&last) = chunk.last() {
            self.ends_with_newline = last == b'\n';
        }
        self.bytes_seen += chunk.len() as u64;
        let mut i = 0;
        while i < chunk.len() {
            let b = chunk[i];
            if self.state == State::Value {
                i = self.value_bytes(chunk, i, on);
                continue;
            }
            if self.state == State::Key {
                if b == b'\n' {
                    self.line += 1;
                }
                if self.key_escaped {
                    self.key_escaped = false;
                    self.key.push(b);
                } else if b == b'\\' {
                    self.key_escaped = true;
                    self.key.push(b);
                } else if b == b'"' {
                    self.state = State::ExpectColon;
                } else {
                    self.key.push(b);
                }
                i += 1;
                continue;
            }
            if b == b'\n' {
                self.line += 1;
                i += 1;
                continue;
            }
            if b.is_ascii_whitespace() {
                i += 1;
                continue;
            }
            match self.state {
                State::Start => {
                    match b {
                        b'[' => {
                            self.form = Some(ChromeForm::Array);
                            self.state = State::Between;
                        }
                        b'{' => {
                            self.form = Some(ChromeForm::Object);
                            self.state = State::ExpectKey;
                        }
                        _ => {
                            on(Scanned::Problem(Diagnostic::error(
                                self.line,
                                Category::Syntax,
                                "a Chrome trace starts with `[` or `{`",
                            )));
                            self.state = State::Done;
                            self.garbage_reported = true;
                        }
                    }
                    i += 1;
                }
                State::Between => {
                    match b {
                        b',' => i += 1,
                        b']' => {
                            self.closed = true;
                            self.state = if self.form == Some(ChromeForm::Object) {
                                State::ExpectKey
                            } else {
                                State::Done
                            };
                            i += 1;
                        }
                        _ => {
                            self.ordinal += 1;
                            self.begin_value(Target::Element, b);
                            // The first byte is consumed by `value_bytes`.
                        }
                    }
                }
                State::ExpectKey => {
                    match b {
                        b',' => {}
                        b'}' => {
                            if !self.saw_events {
                                on(Scanned::Problem(Diagnostic::error(
                                    self.line,
                                    Category::MissingField,
                                    "the trace object has no `traceEvents` array",
                                )));
                            }
                            self.state = State::Done;
                        }
                        b'"' => {
                            self.key.clear();
                            self.state = State::Key;
                        }
                        _ => {
                            on(Scanned::Problem(Diagnostic::error(
                                self.line,
                                Category::Syntax,
                                format!(
                                    "expected a key in the trace object, found `{}`",
                                    char::from(b)
                                ),
                            )));
                            self.state = State::Done;
                            self.garbage_reported = true;
                        }
                    }
                    i += 1;
                }
                State::ExpectColon => {
                    if b == b':' {
                        self.state = State::ExpectValue;
                        i += 1;
                    } else {
                        on(Scanned::Problem(Diagnostic::error(
                            self.line,
                            Category::Syntax,
                            "expected `:` after a key of the trace object",
                        )));
                        self.state = State::Done;
                        self.garbage_reported = true;
                    }
                }
                State::ExpectValue => {
                    if self.key == b"traceEvents" {
                        if b == b'[' {
                            self.saw_events = true;
                            self.state = State::Between;
                            i += 1;
                        } else {
                            on(Scanned::Problem(Diagnostic::error(
                                self.line,
                                Category::WrongType,
                                "`traceEvents` is not an array; no events read from it",
                            )));
                            self.begin_value(Target::Skip, b);
                        }
                    } else if self.key == b"metadata" {
                        self.begin_value(Target::Metadata, b);
                    } else {
                        self.begin_value(Target::Skip, b);
                    }
                }
                State::Done => {
                    if !self.garbage_reported {
                        self.garbage_reported = true;
                        on(Scanned::Problem(Diagnostic::warning(
                            self.line,
                            Category::Syntax,
                            "content after the end of the trace is ignored",
                        )));
                    }
                    i += 1;
                }
                State::Value | State::Key => {
                    // Handled above.
                    i += 1;
                }
            }
        }
    }

    fn begin_value(&mut self, target: Target, first: u8) {
        self.state = State::Value;
        self.target = target;
        self.buf.clear();
        self.value_line = self.line;
        self.depth = 0;
        self.value_len = 0;
        self.in_string = false;
        self.escaped = false;
        self.scalar = !matches!(first, b'{' | b'[' | b'"');
        self.object_value = first == b'{';
        self.last_significant = 0;
    }

    /// Consume bytes of the current value from `chunk[i..]`; returns the next index.
    fn value_bytes(
        &mut self,
        chunk: &[u8],
        mut i: usize,
        on: &mut impl FnMut(Scanned<'_>),
    ) -> usize {
        let start = i;
        let keep = self.target != Target::Skip;
        while i < chunk.len() {
            let b = chunk[i];
            if self.in_string {
                // Jump to the next byte that matters inside a string.
                if !self.escaped {
                    match memchr::memchr3(b'"', b'\\', b'\n', &chunk[i..]) {
                        Some(off) => i += off,
                        None => {
                            i = chunk.len();
                            break;
                        }
                    }
                }
                let b = chunk[i];
                if b == b'\n' {
                    self.line += 1;
                }
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                    if self.depth == 0 {
                        // A top-level string value ends here.
                        i += 1;
                        return self.complete(chunk, start, i, on);
                    }
                }
                i += 1;
                continue;
            }
            if self.scalar {
                let started = i > start || self.value_len > 0;
                if started && matches!(b, b',' | b']' | b'}' | b'\n' | b'\r') {
                    return self.complete(chunk, start, i, on);
                }
                i += 1;
                continue;
            }
            match b {
                b'\n' => self.line += 1,
                b'"' => self.in_string = true,
                // Inside an element object, `{` directly at its top level can only follow `:`.
                // Anywhere else the element lost its closing `}` and the next element begins
                // here: end the broken one (it is reported) and start over with this byte.
                b'{' if self.depth == 1
                    && self.object_value
                    && self.target == Target::Element
                    && self.last_significant != b':' =>
                {
                    return self.complete(chunk, start, i, on);
                }
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        i += 1;
                        return self.complete(chunk, start, i, on);
                    }
                }
                _ => {}
            }
            if !b.is_ascii_whitespace() {
                self.last_significant = b;
            }
            i += 1;
        }
        if keep {
            self.buf.extend_from_slice(&chunk[start..i]);
        }
        self.value_len += (i - start) as u64;
        i
    }

    /// The value ends at `chunk[..end]`; hand it over and go back to the enclosing state.
    fn complete(
        &mut self,
        chunk: &[u8],
        start: usize,
        end: usize,
        on: &mut impl FnMut(Scanned<'_>),
    ) -> usize {
        let piece = &chunk[start..end];
        let bytes: &[u8] = if self.buf.is_empty() {
            piece
        } else {
            self.buf.extend_from_slice(piece);
            &self.buf
        };
        match self.target {
            Target::Element => on(Scanned::Element {
                ordinal: self.ordinal,
                line: self.value_line,
                bytes,
            }),
            Target::Metadata => on(Scanned::Metadata(bytes)),
            Target::Skip => {}
        }
        self.buf.clear();
        self.state = if self.target == Target::Element {
            State::Between
        } else {
            State::ExpectKey
        };
        end
    }

    /// End of file.
    pub(crate) fn finish(mut self, on: &mut impl FnMut(Scanned<'_>)) {
        match self.state {
            State::Value if self.scalar => {
                let buf = core::mem::take(&mut self.buf);
                self.buf = Vec::new();
                let end = buf.len();
                self.complete(&buf, 0, end, on);
            }
            State::Value if self.target == Target::Element => {
                on(Scanned::Problem(Diagnostic::warning(
                    self.value_line,
                    Category::Truncated,
                    "the file ends inside this element (a writer that never flushed); it is dropped",
                )));
            }
            State::Start => on(Scanned::Problem(Diagnostic::error(
                1,
                Category::Format,
                "the file is empty",
            ))),
            State::ExpectKey | State::Key | State::ExpectColon | State::ExpectValue
                if !self.saw_events =>
            {
                // The file's last line, not the empty one after its final newline.
                let last_line = if self.ends_with_newline && self.line > 1 {
                    self.line - 1
                } else {
                    self.line
                };
                on(Scanned::Problem(Diagnostic::error(
                    last_line,
                    Category::MissingField,
                    "the trace object has no `traceEvents` array",
                )));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;
    use alloc::vec;

    fn scan(text: &str, chunk: usize) -> Vec<(String, u64, u64)> {
        let mut out = Vec::new();
        let mut s = Scanner::default();
        let mut on = |x: Scanned<'_>| match x {
            Scanned::Element {
                ordinal,
                line,
                bytes,
            } => out.push((String::from_utf8_lossy(bytes).into_owned(), ordinal, line)),
            Scanned::Metadata(b) => {
                out.push((format!("meta:{}", String::from_utf8_lossy(b)), 0, 0))
            }
            Scanned::Problem(d) => out.push((format!("{}:{}", d.severity, d.category), 0, d.line)),
        };
        for c in text.as_bytes().chunks(chunk) {
            s.push(c, &mut on);
        }
        s.finish(&mut on);
        out
    }

    #[test]
    fn a_missing_events_array_is_reported_on_the_last_line_not_after_it() {
        for chunk in [1, 3, 64] {
            let got = scan("{\"other\": 1,\n\"more\":\n", chunk);
            let problem = got
                .iter()
                .find(|(k, _, _)| k.contains("missing"))
                .unwrap_or_else(|| panic!("{got:?}"));
            assert_eq!(problem.2, 2, "chunk {chunk}: {got:?}");
            let got = scan("{\"other\": 1,\n\"more\":", chunk);
            let problem = got
                .iter()
                .find(|(k, _, _)| k.contains("missing"))
                .unwrap_or_else(|| panic!("{got:?}"));
            assert_eq!(problem.2, 2, "chunk {chunk}: {got:?}");
        }
    }

    #[test]
    fn elements_with_lines_in_any_chunking() {
        let text = "[\n{\"a\":\"x]}\\\"\\n\"},\n {\"b\":[1,{\"c\":2}]}, 17 ,\"s\",\n{\"d\":\n1},\n";
        let want = vec![
            (String::from("{\"a\":\"x]}\\\"\\n\"}"), 1, 2),
            (String::from("{\"b\":[1,{\"c\":2}]}"), 2, 3),
            (String::from("17 "), 3, 3),
            (String::from("\"s\""), 4, 3),
            (String::from("{\"d\":\n1}"), 5, 4),
        ];
        for size in 1..12 {
            assert_eq!(scan(text, size), want, "chunk {size}");
        }
    }

    #[test]
    fn an_element_without_its_closing_brace_ends_at_the_next_element() {
        let text = "[\n{\"a\":1,\n{\"b\":\n{\"c\":2}},\n{\"d\":[{\"e\":3}]}\n]";
        for size in 1..9 {
            assert_eq!(
                scan(text, size),
                vec![
                    (String::from("{\"a\":1,\n"), 1, 2),
                    (String::from("{\"b\":\n{\"c\":2}}"), 2, 3),
                    (String::from("{\"d\":[{\"e\":3}]}"), 3, 5),
                ],
                "chunk {size}"
            );
        }
    }

    #[test]
    fn object_form_keeps_metadata_and_skips_the_rest() {
        let text = "{\"other\":{\"traceEvents\":[1]},\"traceEvents\":[{\"x\":1}],\n\"metadata\":{\"k\":\"v\"}}";
        for size in 1..9 {
            assert_eq!(
                scan(text, size),
                vec![
                    (String::from("{\"x\":1}"), 1, 1),
                    (String::from("meta:{\"k\":\"v\"}"), 0, 0)
                ]
            );
        }
        assert_eq!(
            scan("{\"a\":1}", 3),
            vec![(String::from("error:missing_field"), 0, 1)]
        );
    }

    #[test]
    fn truncation_and_trailing_garbage() {
        assert_eq!(
            scan("[{\"a\":1},\n{\"b\":", 4),
            vec![
                (String::from("{\"a\":1}"), 1, 1),
                (String::from("warning:truncated"), 0, 2)
            ]
        );
        assert_eq!(
            scan("[{\"a\":1}]\nxx", 4),
            vec![
                (String::from("{\"a\":1}"), 1, 1),
                (String::from("warning:syntax"), 0, 2)
            ]
        );
        // A bare scalar at the end of an unclosed array is complete.
        assert_eq!(scan("[1", 1), vec![(String::from("1"), 1, 1)]);
    }
}
