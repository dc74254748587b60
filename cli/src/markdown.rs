//! Markdown output (`--format markdown`) for GitHub: a pull-request comment or a job's
//! `$GITHUB_STEP_SUMMARY`, which GitHub cuts off at 1 MiB.
//!
//! What a file brings (span and module names, paths, messages) is escaped so that it cannot
//! break a table or turn into markup: names go in code spans ([`code`]), other text through
//! [`text`], and in either a `|` is escaped and a line break becomes a space (or `<br>` in
//! [`text`]). Every cell is at most [`CELL_CHARS`] characters, every table and list at most
//! `--limit` rows (the output says how many were left out), and the whole output at most
//! [`BUDGET_BYTES`]: past that it is cut between two lines, and says so.

use super::table::Align;

/// The most bytes the Markdown output takes, its closing note included: GitHub's limit for a
/// step summary (1 MiB).
pub const BUDGET_BYTES: usize = 1 << 20;

/// The most characters of one cell or one line of file-given text; longer ones end in `…`.
pub const CELL_CHARS: usize = 200;

/// What the output says when [`Doc::finish`] had to cut it.
const CUT_NOTE: &str =
    "\n**Output cut at 1 MiB** (GitHub's step-summary limit): pass a smaller `--limit`.\n";

/// `s` cut to [`CELL_CHARS`] characters.
fn bounded(s: &str) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(CELL_CHARS) {
        Some((at, _)) => format!("{}…", &s[..at]).into(),
        None => s.into(),
    }
}

/// Free text from a file (or built around its names) as Markdown that renders it as written:
/// the characters Markdown or HTML would read as markup are backslash-escaped (`\` `` ` ``
/// `*` `_` `[` `]` `<` `>` `|` `~` `&` `#`), line breaks become `<br>`, and a leading `-`, `+`
/// or `=` is escaped (it would start a list or a heading underline); cut at [`CELL_CHARS`].
pub fn text(s: &str) -> String {
    prose(&bounded(s))
}

/// [`text`] without the cut: this tool's own sentences, whose length it knows.
pub fn prose(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let mut chars = s.chars().peekable();
    if let Some(&c @ ('-' | '+' | '=')) = chars.peek() {
        out.push('\\');
        out.push(c);
        chars.next();
    }
    while let Some(c) = chars.next() {
        match c {
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '~' | '&' | '#' => {
                out.push('\\');
                out.push(c);
            }
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                out.push_str("<br>");
            }
            '\n' => out.push_str("<br>"),
            c => out.push(c),
        }
    }
    out
}

/// A name as a code span, rendered exactly as written: fenced with one backtick more than
/// its longest run of backticks (padded with spaces where it starts or ends with one), line
/// breaks as spaces. An empty name is `""` in a code span. For a table cell: [`code_cell`].
pub fn code(s: &str) -> String {
    code_span(s, false)
}

/// [`code`] for a table cell: `|` escaped as well (GitHub splits a table's rows at pipes
/// before it reads code spans, and removes the backslash).
pub fn code_cell(s: &str) -> String {
    code_span(s, true)
}

/// A heading naming the first `limit` of `inputs` as code (`Findings — `a`, `b` and 3 more`).
pub fn files_heading(title: &str, inputs: &[std::path::PathBuf], limit: usize) -> String {
    let names: Vec<String> = inputs
        .iter()
        .take(limit)
        .map(|p| code(&p.display().to_string()))
        .collect();
    let mut heading = format!("{title} — {}", names.join(", "));
    if inputs.len() > limit {
        heading.push_str(&format!(" and {} more", inputs.len() - limit));
    }
    heading
}

fn code_span(s: &str, in_table: bool) -> String {
    let s = bounded(s);
    if s.is_empty() {
        return String::from("`\"\"`");
    }
    let mut body = String::with_capacity(s.len() + 4);
    let (mut run, mut longest) = (0usize, 0usize);
    for c in s.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
        match c {
            '|' if in_table => body.push_str("\\|"),
            '\r' | '\n' => body.push(' '),
            c => body.push(c),
        }
    }
    let fence = "`".repeat(longest + 1);
    let pad = if body.starts_with('`') || body.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{body}{pad}{fence}")
}

/// A Markdown table of cells already escaped ([`text`], [`code`] or plain numbers).
#[derive(Debug, Default)]
pub struct Table {
    headers: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
    /// Rows offered beyond the ones kept.
    left_out: usize,
    limit: usize,
}

impl Table {
    /// A table with these `(header, alignment)` columns, keeping at most `limit` rows.
    pub fn new(headers: &[(&str, Align)], limit: usize) -> Self {
        Table {
            headers: headers.iter().map(|(h, a)| (text(h), *a)).collect(),
            rows: Vec::new(),
            left_out: 0,
            limit,
        }
    }

    /// Append a row (missing cells render empty, extra cells are ignored); past the limit it
    /// is only counted.
    pub fn row(&mut self, cells: Vec<String>) {
        if self.rows.len() < self.limit {
            self.rows.push(cells);
        } else {
            self.left_out += 1;
        }
    }

    /// The table, a line per row, and a line saying how many rows the limit left out.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
            out.push('|');
            for _ in &self.headers {
                out.push(' ');
                out.push_str(cells.next().unwrap_or(""));
                out.push_str(" |");
            }
            out.push('\n');
        };
        // GitHub needs a header row; an empty header cell is fine.
        line(&mut out, &mut self.headers.iter().map(|(h, _)| h.as_str()));
        let rule: Vec<&str> = self
            .headers
            .iter()
            .map(|(_, a)| match a {
                Align::Left => "---",
                Align::Right => "---:",
            })
            .collect();
        line(&mut out, &mut rule.into_iter());
        for row in &self.rows {
            line(&mut out, &mut row.iter().map(String::as_str));
        }
        if self.left_out > 0 {
            out.push_str(&left_out_line(self.rows.len(), self.left_out, "rows"));
        }
        out
    }
}

/// `*20 of 143 rows shown (--limit 20).*` and a newline.
pub fn left_out_line(shown: usize, left_out: usize, what: &str) -> String {
    format!(
        "\n*{shown} of {} {what} shown (`--limit {shown}`).*\n",
        shown + left_out
    )
}

/// A Markdown document written in blocks (headings, paragraphs, tables, lists), each
/// followed by a blank line, and bounded by [`BUDGET_BYTES`] when finished.
#[derive(Debug, Default)]
pub struct Doc {
    out: String,
}

impl Doc {
    /// An empty document.
    pub fn new() -> Self {
        Doc::default()
    }

    /// A heading of `level` (1–6) whose text is already escaped.
    pub fn heading(&mut self, level: usize, escaped: &str) {
        self.out.push_str(&"#".repeat(level.clamp(1, 6)));
        self.out.push(' ');
        self.out.push_str(escaped);
        self.out.push_str("\n\n");
    }

    /// A paragraph of already-escaped text.
    pub fn para(&mut self, escaped: &str) {
        self.out.push_str(escaped);
        self.out.push_str("\n\n");
    }

    /// A table.
    pub fn table(&mut self, table: &Table) {
        self.out.push_str(&table.render());
        self.out.push('\n');
    }

    /// A bulleted list of already-escaped items, at most `limit` of them (saying how many
    /// more there were).
    pub fn list(&mut self, items: &[String], limit: usize) {
        for item in items.iter().take(limit) {
            self.out.push_str("- ");
            self.out.push_str(item);
            self.out.push('\n');
        }
        if items.len() > limit {
            self.out
                .push_str(&left_out_line(limit, items.len() - limit, "items"));
        }
        self.out.push('\n');
    }

    /// Raw, already-formed Markdown (a numbered list with nested items, say).
    pub fn raw(&mut self, markdown: &str) {
        self.out.push_str(markdown);
    }

    /// The document, ending in one newline; when longer than [`BUDGET_BYTES`], cut after the
    /// last whole line that leaves room for a note saying so.
    pub fn finish(self) -> String {
        let mut out = self.out;
        while out.ends_with("\n\n") {
            out.pop();
        }
        if out.len() <= BUDGET_BYTES {
            return out;
        }
        let room = BUDGET_BYTES - CUT_NOTE.len();
        // `room` may fall inside a character: cut at the last newline before it.
        let cut = out.as_bytes()[..room]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        out.truncate(cut);
        out.push_str(CUT_NOTE);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_escapes_markup_and_line_breaks() {
        assert_eq!(text("a|b"), "a\\|b");
        assert_eq!(text("a\\|b"), "a\\\\\\|b");
        assert_eq!(
            text("<img src=x onerror=alert(1)>"),
            "\\<img src=x onerror=alert(1)\\>"
        );
        assert_eq!(text("__init__ *x* [1]"), "\\_\\_init\\_\\_ \\*x\\* \\[1\\]");
        assert_eq!(text("one\ntwo\r\nthree"), "one<br>two<br>three");
        assert_eq!(text("- not a list"), "\\- not a list");
        assert_eq!(text("1.5 ms -35 ns"), "1.5 ms -35 ns");
        assert_eq!(text("#1 & `x`"), "\\#1 \\& \\`x\\`");
    }

    #[test]
    fn code_spans_survive_backticks_pipes_and_newlines() {
        assert_eq!(code("block[1]/attn"), "`block[1]/attn`");
        assert_eq!(code_cell("a|b"), "`a\\|b`");
        assert_eq!(code("a|b"), "`a|b`");
        assert_eq!(code("a`b"), "``a`b``");
        assert_eq!(code("`x``"), "``` `x`` ```");
        assert_eq!(code("two\nlines"), "`two lines`");
        assert_eq!(code(""), "`\"\"`");
    }

    #[test]
    fn long_cells_are_cut_to_cell_chars() {
        let long = "é".repeat(CELL_CHARS + 5);
        let want = format!("`{}…`", "é".repeat(CELL_CHARS));
        assert_eq!(code(&long), want);
        assert_eq!(text(&"x".repeat(CELL_CHARS)), "x".repeat(CELL_CHARS));
    }

    #[test]
    fn a_table_keeps_limit_rows_and_says_how_many_it_left_out() {
        let mut t = Table::new(&[("name", Align::Left), ("time", Align::Right)], 2);
        for (n, v) in [("a", "1"), ("b", "2"), ("c", "3")] {
            t.row(vec![code_cell(n), v.into()]);
        }
        assert_eq!(
            t.render(),
            "| name | time |\n| --- | ---: |\n| `a` | 1 |\n| `b` | 2 |\n\n*2 of 3 rows shown (`--limit 2`).*\n"
        );
    }

    #[test]
    fn a_document_over_the_budget_is_cut_between_lines_with_a_note() {
        let mut doc = Doc::new();
        let mut t = Table::new(&[("row", Align::Left)], usize::MAX);
        let line = "x".repeat(99);
        for _ in 0..20_000 {
            t.row(vec![line.clone()]);
        }
        doc.table(&t);
        let out = doc.finish();
        assert!(out.len() <= BUDGET_BYTES, "{}", out.len());
        assert!(out.ends_with(CUT_NOTE));
        let body = &out[..out.len() - CUT_NOTE.len()];
        assert!(body.ends_with(&format!("| {line} |\n")));
        // Under the budget nothing changes but the trailing blank line.
        let mut doc = Doc::new();
        doc.para("short");
        assert_eq!(doc.finish(), "short\n");
    }
}
