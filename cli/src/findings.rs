//! `candle-trace findings FILE…`: the ranked findings of `candle_trace_schema::analysis::findings` for
//! one trace, the step files of one run, or one inference profile.

use std::io::Write;
use std::path::PathBuf;

use candle_trace_schema::analysis::findings::{
    profile_findings, stake_text, trace_findings, Findings, Link,
};
use candle_trace_schema::format::detect::AnyDocument;
use candle_trace_schema::format::document::TraceDocument;

use super::gate::read_side;
use super::markdown::{self as md, Doc};
use super::{write_json, write_markdown, OutputFormat, EXIT_OK};

fn link(l: &Link) -> String {
    match l {
        Link::Span { id, line } => format!("span {id} (line {line})"),
        Link::Row { table, key } => format!("{table} row `{key}`"),
    }
}

pub(super) fn run(
    inputs: &[PathBuf],
    format: OutputFormat,
    limit: usize,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    let mut files: Vec<(PathBuf, AnyDocument)> = Vec::new();
    for input in inputs {
        files.extend(read_side(input)?);
    }
    let findings: Findings = match files.as_slice() {
        [(_, AnyDocument::Profile(p))] => profile_findings(p),
        _ => {
            let mut docs: Vec<&TraceDocument> = Vec::with_capacity(files.len());
            for (path, doc) in &files {
                match doc {
                    AnyDocument::Trace(t) => docs.push(t),
                    _ => anyhow::bail!(
                        "{}: findings reads one inference profile, or execution traces (the steps of one run); not a mix",
                        path.display()
                    ),
                }
            }
            trace_findings(&docs)
        }
    };
    match format {
        OutputFormat::Json => write_json(out, &findings)?,
        OutputFormat::Markdown => markdown(inputs, &findings, limit, out)?,
        OutputFormat::Text => text(&findings, limit, out)?,
    }
    Ok(EXIT_OK)
}

/// `(3 more)` after a list that the limit cut.
fn more(total: usize, limit: usize) -> Option<String> {
    (total > limit).then(|| format!("({} more: --limit {limit})", total - limit))
}

fn text(findings: &Findings, limit: usize, out: &mut dyn Write) -> anyhow::Result<()> {
    if findings.findings.is_empty() {
        writeln!(out, "no findings")?;
    }
    for (n, f) in findings.findings.iter().enumerate() {
        writeln!(
            out,
            "{}. {} [{}; at stake {}]",
            n + 1,
            f.title,
            f.rule,
            stake_text(&f.rule, f.stake)
        )?;
        for e in f.evidence.iter().take(limit) {
            writeln!(out, "   - {e}")?;
        }
        if let Some(m) = more(f.evidence.len(), limit) {
            writeln!(out, "   {m}")?;
        }
        if let Some(l) = &f.link {
            writeln!(out, "   → {}", link(l))?;
        }
    }
    if findings.left_out > 0 {
        writeln!(out, "({} more left out)", findings.left_out)?;
    }
    for note in findings.notes.iter().take(limit) {
        writeln!(out, "note: {note}")?;
    }
    if let Some(m) = more(findings.notes.len(), limit) {
        writeln!(out, "{m}")?;
    }
    Ok(())
}

/// `findings --format markdown`: a numbered list, each finding's evidence nested under it.
fn markdown(
    inputs: &[PathBuf],
    findings: &Findings,
    limit: usize,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let mut doc = Doc::new();
    doc.heading(3, &md::files_heading("Findings", inputs, limit));
    if findings.findings.is_empty() {
        doc.para("no findings");
    } else {
        let mut list = String::new();
        for (n, f) in findings.findings.iter().enumerate() {
            list.push_str(&format!(
                "{}. **{}** — {} · at stake {}\n",
                n + 1,
                md::text(&f.title),
                md::code(&f.rule),
                md::text(&stake_text(&f.rule, f.stake))
            ));
            for e in f.evidence.iter().take(limit) {
                list.push_str(&format!("   - {}\n", md::text(e)));
            }
            if let Some(m) = more(f.evidence.len(), limit) {
                list.push_str(&format!("   - {}\n", md::text(&m)));
            }
            if let Some(l) = &f.link {
                list.push_str(&format!("   - shows at: {}\n", link_markdown(l)));
            }
        }
        list.push('\n');
        doc.raw(&list);
    }
    if findings.left_out > 0 {
        doc.para(&format!(
            "*{} more left out by the ranking.*",
            findings.left_out
        ));
    }
    if !findings.notes.is_empty() {
        let notes: Vec<String> = findings
            .notes
            .iter()
            .map(|n| format!("note: {}", md::text(n)))
            .collect();
        doc.list(&notes, limit);
    }
    write_markdown(out, doc)
}

fn link_markdown(l: &Link) -> String {
    match l {
        Link::Span { id, line } => format!("span {} (line {line})", md::code(id)),
        Link::Row { table, key } => format!("{} row {}", md::text(table), md::code(key)),
    }
}
