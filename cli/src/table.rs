//! Aligned plain-text tables for the CLI's human output.

use std::fmt::Write as _;

/// Column alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text columns.
    Left,
    /// Number columns.
    Right,
}

/// A table rendered with columns padded to their widest cell.
#[derive(Debug, Default)]
pub struct Table {
    headers: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these `(header, alignment)` columns.
    pub fn new(headers: &[(&str, Align)]) -> Self {
        Table {
            headers: headers.iter().map(|(h, a)| (h.to_string(), *a)).collect(),
            rows: Vec::new(),
        }
    }

    /// Append a row (missing cells render empty, extra cells are ignored).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Render with two spaces between columns, a header row and a rule.
    pub fn render(&self) -> String {
        let width = |s: &str| s.chars().count();
        let mut widths: Vec<usize> = self.headers.iter().map(|(h, _)| width(h)).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(width(cell));
            }
        }
        let mut out = String::new();
        let mut line = |cells: &mut dyn Iterator<Item = &str>| {
            let mut text = String::new();
            for (i, ((_, align), w)) in self.headers.iter().zip(&widths).enumerate() {
                let cell = cells.next().unwrap_or("");
                let pad = w.saturating_sub(width(cell));
                if i > 0 {
                    text.push_str("  ");
                }
                match align {
                    Align::Left => {
                        text.push_str(cell);
                        text.extend(std::iter::repeat_n(' ', pad));
                    }
                    Align::Right => {
                        text.extend(std::iter::repeat_n(' ', pad));
                        text.push_str(cell);
                    }
                }
            }
            let _ = writeln!(out, "{}", text.trim_end());
        };
        line(&mut self.headers.iter().map(|(h, _)| h.as_str()));
        let rule: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
        line(&mut rule.iter().map(String::as_str));
        for row in &self.rows {
            line(&mut row.iter().map(String::as_str));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_by_characters_not_bytes() {
        let mut t = Table::new(&[("name", Align::Left), ("time", Align::Right)]);
        t.row(vec!["matmul".into(), "12.3 µs".into()]);
        t.row(vec!["add".into(), "850 ns".into()]);
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "name       time");
        assert_eq!(lines[2], "matmul  12.3 µs");
        assert_eq!(lines[3], "add      850 ns");
    }
}
