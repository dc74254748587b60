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
use super::{write_json, EXIT_OK};

fn link(l: &Link) -> String {
    match l {
        Link::Span { id, line } => format!("span {id} (line {line})"),
        Link::Row { table, key } => format!("{table} row `{key}`"),
    }
}

pub(super) fn run(inputs: &[PathBuf], json: bool, out: &mut dyn Write) -> anyhow::Result<i32> {
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
    if json {
        write_json(out, &findings)?;
        return Ok(EXIT_OK);
    }
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
        for e in &f.evidence {
            writeln!(out, "   - {e}")?;
        }
        if let Some(l) = &f.link {
            writeln!(out, "   → {}", link(l))?;
        }
    }
    if findings.left_out > 0 {
        writeln!(out, "({} more left out)", findings.left_out)?;
    }
    for note in &findings.notes {
        writeln!(out, "note: {note}")?;
    }
    Ok(EXIT_OK)
}
