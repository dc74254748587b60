//! `candle-trace compare BASE CAND --fail-if RULE…`: the regression gate of
//! `candle_trace_schema::analysis::gate`, and the step sets both it and `steps` read.
//!
//! BASE and CAND are each a file (one step) or a directory: every regular file in it whose name
//! ends in `.jsonl`, in name order (the step-set layout of SCHEMA.md §4, "Several steps"). Exit
//! codes: 0 no rule breached, 1 at least one breached (or the runs' meta differ, without
//! `--force`), 2 a bad rule, an unreadable file, or a metric a file does not have. The meta
//! check (entrypoint, phase, device, timing mode) compares the first trace of each side.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use candle_trace_schema::analysis::compare::meta_mismatches;
use candle_trace_schema::analysis::gate::{evaluate, metric_value, Rule, Sample, Verdict};
use candle_trace_schema::format::detect::AnyDocument;
use serde::Serialize;

use super::{read, write_json, EXIT_INVALID, EXIT_OK, EXIT_UNREADABLE};

/// The files of one side: `path` itself, or the `.jsonl` files of a directory in name order.
pub(super) fn files_of(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("cannot list {}", path.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.to_string_lossy().ends_with(".jsonl"))
        .collect();
    files.sort();
    if files.is_empty() {
        anyhow::bail!("{}: a directory without .jsonl files", path.display());
    }
    Ok(files)
}

/// Without rules, `compare` reads one file per side: a directory is an error that says how
/// directories are compared.
pub(super) fn no_directories(base: &Path, cand: &Path) -> anyhow::Result<()> {
    for p in [base, cand] {
        if p.is_dir() {
            anyhow::bail!(
                "{} is a directory: compare reads one file per side; directories of step files are compared by --fail-if rules (or run `candle-trace steps`)",
                p.display()
            );
        }
    }
    Ok(())
}

/// Read every file of a side.
pub(super) fn read_side(path: &Path) -> anyhow::Result<Vec<(PathBuf, AnyDocument)>> {
    files_of(path)?
        .into_iter()
        .map(|f| read(&f).map(|doc| (f, doc)))
        .collect()
}

fn sample(doc: &AnyDocument) -> Option<Sample<'_>> {
    match doc {
        AnyDocument::Trace(t) => Some(Sample::Trace(t)),
        AnyDocument::Profile(p) => Some(Sample::Profile(p)),
        AnyDocument::Unsupported { .. } => None,
    }
}

/// The per-step values of `rule`'s metric on one side.
fn values(rule: &Rule, side: &[(PathBuf, AnyDocument)]) -> anyhow::Result<Vec<u64>> {
    side.iter()
        .map(|(path, doc)| {
            let s = sample(doc)
                .with_context(|| format!("{}: unsupported file format", path.display()))?;
            metric_value(rule.metric, s)
                .map_err(|e| anyhow::anyhow!("rule `{}`: {}: {e}", rule.text, path.display()))
        })
        .collect()
}

#[derive(Serialize)]
struct GateJson<'a> {
    base: Vec<String>,
    cand: Vec<String>,
    breached: usize,
    rules: &'a [Verdict],
}

/// Parse every rule first: a bad one is exit 2 before any file is read.
pub(super) fn parse_rules(texts: &[String], err: &mut dyn Write) -> Result<Vec<Rule>, i32> {
    let mut rules = Vec::with_capacity(texts.len());
    for t in texts {
        match Rule::parse(t) {
            Ok(r) => rules.push(r),
            Err(e) => {
                let _ = writeln!(err, "candle-trace: --fail-if: {e}");
                return Err(EXIT_UNREADABLE);
            }
        }
    }
    Ok(rules)
}

pub(super) fn run(
    base_path: &Path,
    cand_path: &Path,
    rules: &[Rule],
    (json, force): (bool, bool),
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    let base = read_side(base_path)?;
    let cand = read_side(cand_path)?;
    if !force {
        if let (Some((bp, AnyDocument::Trace(b))), Some((cp, AnyDocument::Trace(c)))) =
            (base.first(), cand.first())
        {
            let mismatches = meta_mismatches(b, c);
            if !mismatches.is_empty() {
                super::compare::refuse(err, bp, cp, &mismatches)?;
                return Ok(EXIT_INVALID);
            }
        }
    }
    let mut verdicts = Vec::with_capacity(rules.len());
    for rule in rules {
        let (b, c) = (values(rule, &base)?, values(rule, &cand)?);
        // Each side has at least one file (`files_of`), so both have values.
        let v = evaluate(rule, &b, &c)
            .with_context(|| format!("rule `{}`: a side without files", rule.text))?;
        verdicts.push(v);
    }
    let breached = verdicts.iter().filter(|v| v.breached).count();
    if json {
        let names = |side: &[(PathBuf, AnyDocument)]| {
            side.iter().map(|(p, _)| p.display().to_string()).collect()
        };
        write_json(
            out,
            &GateJson {
                base: names(&base),
                cand: names(&cand),
                breached,
                rules: &verdicts,
            },
        )?;
    } else {
        for v in &verdicts {
            let tag = if v.breached { "FAIL" } else { "ok  " };
            writeln!(out, "{tag} {v}")?;
        }
        writeln!(out, "{breached} of {} rule(s) breached", verdicts.len())?;
    }
    Ok(if breached > 0 { EXIT_INVALID } else { EXIT_OK })
}
