//! The progress bar of a load: what it says and how full it is.

use candle_trace_schema::analysis::units::format_bytes;

/// A load in progress.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    /// What is happening: reading, analysing (in the worker), preparing, laying out.
    pub phase: &'static str,
    /// The file's name (or "3 files").
    pub name: String,
    /// Bytes read so far.
    pub bytes_read: u64,
    /// The file's size, where known.
    pub total: Option<u64>,
    /// Lines read, where the reader counts them.
    pub lines: Option<u64>,
}

impl Progress {
    /// Nothing read yet.
    pub fn new(phase: &'static str, name: String) -> Self {
        Progress {
            phase,
            name,
            bytes_read: 0,
            total: None,
            lines: None,
        }
    }

    /// `read` bytes of `total` read, `lines` lines; whether the bar says something new.
    pub fn read(&mut self, read: u64, total: Option<u64>, lines: Option<u64>) -> bool {
        let before = (self.phase, self.bytes_read, self.total, self.lines);
        (self.phase, self.bytes_read, self.total, self.lines) = ("Reading", read, total, lines);
        before != (self.phase, self.bytes_read, self.total, self.lines)
    }

    /// Another step of the load; whether the bar says something new.
    pub fn phase(&mut self, phase: &'static str) -> bool {
        let changed = self.phase != phase;
        self.phase = phase;
        changed
    }

    /// What the bar says.
    pub fn line(&self) -> String {
        let mut line = format!(
            "{} {} — {}",
            self.phase,
            self.name,
            format_bytes(self.bytes_read)
        );
        if let Some(t) = self.total {
            line.push_str(&format!(" of {}", format_bytes(t)));
        }
        if let Some(n) = self.lines {
            line.push_str(&format!(", {n} lines"));
        }
        line
    }

    /// How far the read is, in percent, where the size is known.
    pub fn percent(&self) -> Option<f64> {
        self.total
            .filter(|t| *t > 0)
            .map(|t| (self.bytes_read as f64 / t as f64 * 100.0).min(100.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_changes_only_when_what_it_says_does() {
        let mut p = Progress::new("Reading", "t.jsonl".into());
        assert!(p.read(1 << 20, Some(4 << 20), Some(10)));
        assert!(!p.read(1 << 20, Some(4 << 20), Some(10)));
        assert!(p.phase("Analysing"));
        assert!(p.phase("Preparing the view of"));
        // Each decoding step reports where it is; the bar says the same thing throughout.
        assert!(!p.phase("Preparing the view of"));
        assert_eq!(
            p.line(),
            "Preparing the view of t.jsonl — 1.00 MiB of 4.00 MiB, 10 lines"
        );
        assert_eq!(p.percent(), Some(25.0));
    }

    #[test]
    fn a_read_of_unknown_size_has_no_percentage() {
        let mut p = Progress::new("Reading", "t.jsonl".into());
        assert!(p.read(2048, None, None));
        assert_eq!(p.percent(), None);
        assert_eq!(p.line(), "Reading t.jsonl — 2.00 KiB");
        // A read past the size it was said to have stays at 100%.
        p.read(5000, Some(4000), None);
        assert_eq!(p.percent(), Some(100.0));
    }
}
