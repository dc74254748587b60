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
use candle_trace_schema::analysis::gate::{
    evaluate, metric_value, Rule, Sample, Threshold, Verdict,
};
use candle_trace_schema::format::detect::AnyDocument;
use serde::Serialize;

use super::markdown::{self as md, Doc};
use super::table::Align;
use super::{
    read, write_json, write_markdown, OutputFormat, EXIT_INVALID, EXIT_OK, EXIT_UNREADABLE,
};

/// How the gate prints.
pub(super) struct Options {
    pub format: OutputFormat,
    pub force: bool,
    /// Rows of the Markdown table, and files named per side.
    pub limit: usize,
}

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
    opts: Options,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    let base = read_side(base_path)?;
    let cand = read_side(cand_path)?;
    if !opts.force {
        if let (Some((bp, AnyDocument::Trace(b))), Some((cp, AnyDocument::Trace(c)))) =
            (base.first(), cand.first())
        {
            let mismatches = meta_mismatches(b, c);
            if !mismatches.is_empty() {
                super::compare::refuse(err, bp, cp, &mismatches)?;
                if opts.format == OutputFormat::Markdown {
                    super::compare::refuse_markdown(out, bp, cp, &mismatches)?;
                }
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
    match opts.format {
        OutputFormat::Json => {
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
        }
        OutputFormat::Markdown => markdown(
            (base_path, base.len()),
            (cand_path, cand.len()),
            &verdicts,
            opts.limit,
            out,
        )?,
        OutputFormat::Text => {
            for v in &verdicts {
                let tag = if v.breached { "FAIL" } else { "ok  " };
                writeln!(out, "{tag} {v}")?;
            }
            writeln!(out, "{breached} of {} rule(s) breached", verdicts.len())?;
        }
    }
    Ok(if breached > 0 { EXIT_INVALID } else { EXIT_OK })
}

/// A value with its metric's unit (`1000000 ns`, `42`).
fn with_unit(value: impl std::fmt::Display, unit: &str) -> String {
    if unit == "count" {
        value.to_string()
    } else {
        format!("{value} {unit}")
    }
}

/// A side as the Markdown names it: the path, and how many step files a directory held.
fn side_words(path: &Path, files: usize) -> String {
    let name = md::code(&path.display().to_string());
    if path.is_dir() {
        format!("{name} ({files} step files)")
    } else {
        name
    }
}

/// `compare --fail-if … --format markdown`: a verdict line and one table row per rule.
fn markdown(
    (base_path, base_files): (&Path, usize),
    (cand_path, cand_files): (&Path, usize),
    verdicts: &[Verdict],
    limit: usize,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let breached = verdicts.iter().filter(|v| v.breached).count();
    let mut doc = Doc::new();
    doc.heading(
        3,
        &if breached > 0 {
            format!(
                "❌ Regression gate failed: {breached} of {} rule(s) breached",
                verdicts.len()
            )
        } else {
            format!(
                "✅ Regression gate passed: 0 of {} rule(s) breached",
                verdicts.len()
            )
        },
    );
    doc.para(&format!(
        "baseline {} · candidate {}",
        side_words(base_path, base_files),
        side_words(cand_path, cand_files)
    ));
    let mut t = md::Table::new(
        &[
            ("result", Align::Left),
            ("rule", Align::Left),
            ("baseline", Align::Right),
            ("candidate", Align::Right),
            ("change", Align::Right),
            ("noise (3×MAD)", Align::Right),
            ("steps", Align::Right),
        ],
        limit,
    );
    // Breached rules first, each group in the order given.
    let mut order: Vec<&Verdict> = verdicts.iter().filter(|v| v.breached).collect();
    order.extend(verdicts.iter().filter(|v| !v.breached));
    for v in order {
        let unit = v.rule.metric.unit();
        let change = match v.percent {
            Some(p) => format!("{p:+.1}%"),
            None => String::from("(baseline 0)"),
        };
        t.row(vec![
            String::from(if v.breached { "❌ FAIL" } else { "✅ ok" }),
            md::code_cell(&v.rule.text),
            with_unit(v.base.median, unit),
            with_unit(v.cand.median, unit),
            change,
            match v.rule.threshold {
                // A budget is not compared with the noise.
                Threshold::Absolute(_) => String::from("–"),
                Threshold::Percent(_) => with_unit(v.noise, unit),
            },
            format!("{} / {}", v.base.count, v.cand.count),
        ]);
    }
    doc.table(&t);
    doc.para(
        "Values are the medians of each side's steps; a relative rule is breached only \
         beyond the noise, 3 × the larger MAD.",
    );
    write_markdown(out, doc)
}
