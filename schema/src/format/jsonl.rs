//! JSONL framing: split a byte stream, fed in chunks of any size, into numbered lines.
//!
//! A multi-gigabyte file never has to be one string: callers push chunks as they read them and
//! get each complete line back as a byte slice (borrowed from the chunk when it lies inside one,
//! copied only when it straddles two chunks). Rules from SCHEMA.md: lines are `\n` separated,
//! a trailing `\r` is dropped, and blank lines are skipped (they still count for numbering).

use alloc::vec::Vec;

/// One line of a JSONL stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    /// 1-based line number in the file.
    pub number: u64,
    /// The line's bytes without the `\n` and without a trailing `\r`.
    pub bytes: &'a [u8],
    /// `false` only for the last line of a stream that does not end in `\n`.
    pub terminated: bool,
    /// `bytes` as text, when the splitter has already checked that they are UTF-8 (it checks
    /// each pushed chunk's complete lines at once); `None` when it has not, which says nothing
    /// about whether they are.
    pub text: Option<&'a str>,
}

/// Splits pushed chunks into lines.
#[derive(Debug, Default)]
pub struct LineSplitter {
    carry: Vec<u8>,
    lines_seen: u64,
    bytes_seen: u64,
}

impl LineSplitter {
    /// A splitter at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of bytes pushed so far.
    pub fn bytes_seen(&self) -> u64 {
        self.bytes_seen
    }

    /// Number of lines completed so far, blank ones included (the `\n`s pushed).
    pub fn lines_seen(&self) -> u64 {
        self.lines_seen
    }

    /// Feed the next chunk; `on_line` is called for every non-blank line it completes.
    pub fn push(&mut self, mut chunk: &[u8], mut on_line: impl FnMut(Line<'_>)) {
        self.bytes_seen += chunk.len() as u64;
        if !self.carry.is_empty() {
            match memchr::memchr(b'\n', chunk) {
                None => {
                    self.carry.extend_from_slice(chunk);
                    return;
                }
                Some(end) => {
                    self.carry.extend_from_slice(&chunk[..end]);
                    chunk = &chunk[end + 1..];
                    self.lines_seen += 1;
                    let carry = core::mem::take(&mut self.carry);
                    emit(self.lines_seen, &carry, None, true, &mut on_line);
                    // Reuse the allocation for the next straddling line.
                    self.carry = carry;
                    self.carry.clear();
                }
            }
        }
        // The chunk's complete lines checked as UTF-8 in one call rather than one per line
        // (a `\n` is never inside a character, so each line of valid text is valid text), with
        // SIMD where the CPU has it (simdutf8: AVX2 or SSE4.2 natively, chosen at run time
        // with `std`; wasm SIMD in the viewer).
        let text = memchr::memrchr(b'\n', chunk)
            .and_then(|last| simdutf8::basic::from_utf8(&chunk[..last]).ok());
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', chunk) {
            self.lines_seen += 1;
            let line_text = text.and_then(|t| t.get(start..end));
            emit(
                self.lines_seen,
                &chunk[start..end],
                line_text,
                true,
                &mut on_line,
            );
            start = end + 1;
        }
        self.carry.extend_from_slice(&chunk[start..]);
    }

    /// End of stream: emits the last line if the stream did not end with `\n`.
    pub fn finish(mut self, mut on_line: impl FnMut(Line<'_>)) {
        if !self.carry.is_empty() {
            self.lines_seen += 1;
            let carry = core::mem::take(&mut self.carry);
            emit(self.lines_seen, &carry, None, false, &mut on_line);
        }
    }
}

fn emit(
    number: u64,
    mut bytes: &[u8],
    mut text: Option<&str>,
    terminated: bool,
    on_line: &mut impl FnMut(Line<'_>),
) {
    if let [rest @ .., b'\r'] = bytes {
        bytes = rest;
        text = text.and_then(|t| t.strip_suffix('\r'));
    }
    if is_blank(bytes) {
        return;
    }
    on_line(Line {
        number,
        bytes,
        terminated,
        text,
    });
}

/// True when `bytes` holds only ASCII whitespace.
pub fn is_blank(bytes: &[u8]) -> bool {
    bytes.iter().all(|b| b.is_ascii_whitespace())
}

/// The UTF-8 byte-order mark.
pub(crate) const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Strip a leading UTF-8 byte-order mark.
pub fn strip_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(BOM).unwrap_or(bytes)
}

/// The line's bytes, without a UTF-8 byte-order mark when it is the first line of the file;
/// `None` when nothing but the mark is left (the line is then blank).
pub(crate) fn without_bom<'a>(line: &Line<'a>) -> Option<&'a [u8]> {
    if line.number != 1 {
        return Some(line.bytes);
    }
    let bytes = strip_bom(line.bytes);
    (!is_blank(bytes)).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;
    use alloc::vec;

    fn split(chunks: &[&[u8]]) -> Vec<(u64, String, bool)> {
        let mut out = Vec::new();
        let mut s = LineSplitter::new();
        for c in chunks {
            s.push(c, |l| {
                out.push((
                    l.number,
                    String::from_utf8_lossy(l.bytes).into_owned(),
                    l.terminated,
                ))
            });
        }
        s.finish(|l| {
            out.push((
                l.number,
                String::from_utf8_lossy(l.bytes).into_owned(),
                l.terminated,
            ))
        });
        out
    }

    #[test]
    fn numbers_skip_blank_lines_and_strip_cr() {
        let got = split(&[b"a\r\n\n  \nb\nc"]);
        assert_eq!(
            got,
            vec![
                (1, "a".into(), true),
                (4, "b".into(), true),
                (5, "c".into(), false)
            ]
        );
    }

    #[test]
    fn lines_straddling_chunks_are_joined() {
        let whole: &[u8] = b"{\"a\":1}\n{\"b\":2}\r\n{\"c\":3}\n";
        let expect = split(&[whole]);
        for cut1 in 0..whole.len() {
            for cut2 in cut1..whole.len() {
                let got = split(&[&whole[..cut1], &whole[cut1..cut2], &whole[cut2..]]);
                assert_eq!(got, expect, "cuts at {cut1},{cut2}");
            }
        }
        assert_eq!(expect.len(), 3);
        assert!(expect.iter().all(|l| l.2));
    }

    #[test]
    fn a_cr_split_from_its_newline_is_still_stripped() {
        assert_eq!(
            split(&[b"x\r", b"\ny"]),
            vec![(1, "x".into(), true), (2, "y".into(), false)]
        );
    }

    #[test]
    fn lines_inside_a_valid_chunk_come_with_their_text() {
        let mut got = Vec::new();
        let mut s = LineSplitter::new();
        // A line straddling two chunks, one inside the second, one cut by its end: only the
        // one inside a chunk comes with text, and its text is its bytes (the `\r` stripped).
        s.push(b"{\"a\":", |l| {
            got.push((l.number, l.text.map(String::from)))
        });
        s.push(b"1}\n{\"\xc2\xb5\":2}\r\n{\"c", |l| {
            assert_eq!(l.text.map(str::as_bytes).unwrap_or(l.bytes), l.bytes);
            got.push((l.number, l.text.map(String::from)))
        });
        s.finish(|l| got.push((l.number, l.text.map(String::from))));
        assert_eq!(
            got,
            vec![(1, None), (2, Some("{\"µ\":2}".into())), (3, None)]
        );
    }

    #[test]
    fn a_chunk_that_is_not_utf8_gives_no_text() {
        let mut got = Vec::new();
        let mut s = LineSplitter::new();
        s.push(b"ok\nbad \xff\nok\n", |l| {
            got.push((l.number, l.text.is_some()))
        });
        assert_eq!(got, vec![(1, false), (2, false), (3, false)]);
    }
}
