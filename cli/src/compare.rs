//! `candle-trace compare BASE CAND`: the tables of `candle_trace_schema::analysis::compare`.

use std::io::Write;
use std::path::Path;

use candle_trace_schema::analysis::compare::{compare, MetaMismatch, Presence, TraceComparison};
use candle_trace_schema::analysis::units::{format_bytes, format_ns};
use candle_trace_schema::format::detect::AnyDocument;
use candle_trace_schema::format::document::TraceDocument;
use serde::Serialize;

use super::markdown::{self as md, Doc};
use super::table::{Align, Table};
use super::{write_json, write_markdown, OutputFormat, EXIT_INVALID, EXIT_OK};

pub(super) struct Options {
    pub format: OutputFormat,
    pub force: bool,
    pub limit: usize,
}

#[derive(Serialize)]
struct CompareJson<'a> {
    base: String,
    cand: String,
    forced: bool,
    #[serde(flatten)]
    comparison: &'a TraceComparison,
}

fn trace<'a>(path: &Path, doc: &'a AnyDocument) -> anyhow::Result<&'a TraceDocument> {
    match doc {
        AnyDocument::Trace(t) => Ok(t),
        AnyDocument::Profile(_) => anyhow::bail!(
            "{}: compare reads execution traces (trace/6 or Chrome JSON); this is an inference profile",
            path.display()
        ),
        AnyDocument::Unsupported { .. } => {
            super::summary::unreachable_unsupported()?;
            anyhow::bail!("unsupported file format")
        }
    }
}

/// A signed amount with its unit: `+1.50 µs`, `-35 ns`, `0 B`.
fn signed(delta: i64, unit: fn(u64) -> String) -> String {
    match delta.signum() {
        0 => unit(0),
        1 => format!("+{}", unit(delta.unsigned_abs())),
        _ => format!("-{}", unit(delta.unsigned_abs())),
    }
}

fn count(n: u64) -> String {
    n.to_string()
}

fn pct(p: Option<f64>, presence: Presence) -> String {
    match (presence, p) {
        (Presence::New, _) => "new".into(),
        (Presence::Vanished, _) => "vanished".into(),
        (_, Some(p)) if p.abs() < 0.05 => "0.0%".into(),
        (_, Some(p)) => format!("{p:+.1}%"),
        (_, None) => "–".into(),
    }
}

pub(super) fn run(
    (base_path, base): (&Path, &AnyDocument),
    (cand_path, cand): (&Path, &AnyDocument),
    opts: Options,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    let (b, c) = (trace(base_path, base)?, trace(cand_path, cand)?);
    let cmp = compare(b, c);
    if !cmp.is_comparable() && !opts.force {
        refuse(err, base_path, cand_path, &cmp.mismatches)?;
        if opts.format == OutputFormat::Markdown {
            refuse_markdown(out, base_path, cand_path, &cmp.mismatches)?;
        }
        return Ok(EXIT_INVALID);
    }
    match opts.format {
        OutputFormat::Json => {
            write_json(
                out,
                &CompareJson {
                    base: base_path.display().to_string(),
                    cand: cand_path.display().to_string(),
                    forced: opts.force && !cmp.is_comparable(),
                    comparison: &cmp,
                },
            )?;
            return Ok(EXIT_OK);
        }
        OutputFormat::Markdown => {
            markdown((base_path, b), (cand_path, c), &cmp, opts.limit, out)?;
            return Ok(EXIT_OK);
        }
        OutputFormat::Text => {}
    }

    writeln!(
        out,
        "baseline  {}\ncandidate {}",
        base_path.display(),
        cand_path.display()
    )?;
    if let Some(m) = &b.meta {
        writeln!(out, "entrypoint {} · device {}", m.entrypoint, m.device)?;
    }
    for m in &cmp.mismatches {
        writeln!(
            out,
            "warning: {} differs (baseline `{}`, candidate `{}`); compared because of --force",
            m.field, m.base, m.cand
        )?;
    }
    for (path, doc) in [(base_path, b), (cand_path, c)] {
        let n = doc.diagnostic_counts();
        if n.errors > 0 {
            writeln!(
                out,
                "warning: {} is untrusted ({} error(s)); see `candle-trace validate`",
                path.display(),
                n.errors
            )?;
        }
    }

    writeln!(out, "\nsummary")?;
    let mut t = Table::new(&SUMMARY_COLUMNS);
    for row in summary_rows(&cmp) {
        t.row(row);
    }
    write!(out, "{}", t.render())?;

    let shown = |n: usize| {
        if n > opts.limit {
            format!(" — {} of {}, largest |delta| first", opts.limit, n)
        } else {
            String::from(" — largest |delta| first")
        }
    };
    writeln!(out, "\nspan paths{}", shown(cmp.paths.len()))?;
    let mut t = Table::new(&PATH_COLUMNS);
    for p in cmp.paths.iter().take(opts.limit) {
        t.row(vec![
            p.path.clone(),
            p.base_count.to_string(),
            p.cand_count.to_string(),
            format_ns(p.base_ns),
            format_ns(p.cand_ns),
            signed(p.delta_ns, format_ns),
            pct(p.percent, p.presence),
        ]);
    }
    write!(out, "{}", t.render())?;

    if !cmp.modules.is_empty() {
        writeln!(out, "\nmodules{}", shown(cmp.modules.len()))?;
        let mut t = Table::new(&[
            ("module", Align::Left),
            ("calls base", Align::Right),
            ("calls cand", Align::Right),
            ("baseline", Align::Right),
            ("candidate", Align::Right),
            ("delta", Align::Right),
            ("%", Align::Right),
        ]);
        for p in cmp.modules.iter().take(opts.limit) {
            t.row(vec![
                p.path.clone(),
                p.base_count.to_string(),
                p.cand_count.to_string(),
                format_ns(p.base_ns),
                format_ns(p.cand_ns),
                signed(p.delta_ns, format_ns),
                pct(p.percent, p.presence),
            ]);
        }
        write!(out, "{}", t.render())?;
    }

    if !cmp.ops.is_empty() {
        writeln!(out, "\nops by (name, shape, dtype){}", shown(cmp.ops.len()))?;
        let mut t = Table::new(&OP_COLUMNS);
        for o in cmp.ops.iter().take(opts.limit) {
            let shape: Vec<String> = o.shape.iter().map(u64::to_string).collect();
            t.row(vec![
                o.op_name.clone(),
                format!("[{}]", shape.join(", ")),
                o.dtype.clone(),
                o.base_count.to_string(),
                o.cand_count.to_string(),
                format_ns(o.base_ns),
                format_ns(o.cand_ns),
                signed(o.delta_ns, format_ns),
                pct(o.percent, o.presence),
            ]);
        }
        write!(out, "{}", t.render())?;
    }

    writeln!(out, "\nmemory at the peak")?;
    let mut t = Table::new(&[
        ("", Align::Left),
        ("baseline", Align::Right),
        ("candidate", Align::Right),
        ("delta", Align::Right),
        ("%", Align::Right),
    ]);
    for (i, row) in memory_rows(&cmp).into_iter().enumerate() {
        let [name, base, cand, delta, p] = row;
        let name = if i == 0 { name } else { format!("  {name}") };
        t.row(vec![name, base, cand, delta, p]);
    }
    write!(out, "{}", t.render())?;

    writeln!(out, "\ngradient state changes")?;
    if cmp.gradients.is_empty() {
        writeln!(out, "none")?;
    } else {
        let mut t = Table::new(&[
            ("parameter", Align::Left),
            ("baseline", Align::Left),
            ("candidate", Align::Left),
        ]);
        for g in &cmp.gradients {
            t.row(vec![
                format!("{}.{}", g.root, g.key),
                gradient_state(g.base).to_string(),
                gradient_state(g.cand).to_string(),
            ]);
        }
        write!(out, "{}", t.render())?;
    }
    Ok(EXIT_OK)
}

const SUMMARY_COLUMNS: [(&str, Align); 5] = [
    ("metric", Align::Left),
    ("baseline", Align::Right),
    ("candidate", Align::Right),
    ("delta", Align::Right),
    ("%", Align::Right),
];

/// The summary table's rows: metric, baseline, candidate, delta, %.
fn summary_rows(cmp: &TraceComparison) -> Vec<Vec<String>> {
    cmp.summary
        .iter()
        .map(|s| {
            let unit: fn(u64) -> String = match s.field {
                "total_ns" => format_ns,
                "peak_bytes" => format_bytes,
                _ => count,
            };
            vec![
                s.field.to_string(),
                unit(s.base),
                unit(s.cand),
                signed(s.delta, unit),
                pct(s.percent, Presence::Both),
            ]
        })
        .collect()
}

const PATH_COLUMNS: [(&str, Align); 7] = [
    ("path", Align::Left),
    ("n base", Align::Right),
    ("n cand", Align::Right),
    ("baseline", Align::Right),
    ("candidate", Align::Right),
    ("delta", Align::Right),
    ("%", Align::Right),
];

const OP_COLUMNS: [(&str, Align); 9] = [
    ("op", Align::Left),
    ("shape", Align::Left),
    ("dtype", Align::Left),
    ("n base", Align::Right),
    ("n cand", Align::Right),
    ("baseline", Align::Right),
    ("candidate", Align::Right),
    ("delta", Align::Right),
    ("%", Align::Right),
];

/// The memory table's rows (the peak, then each category either side has, largest |delta|
/// first): name, baseline, candidate, delta, %.
fn memory_rows(cmp: &TraceComparison) -> Vec<[String; 5]> {
    let m = &cmp.memory;
    let mut rows = vec![[
        "peak".into(),
        format_bytes(m.base_peak_bytes),
        format_bytes(m.cand_peak_bytes),
        signed(m.delta_bytes, format_bytes),
        pct(m.percent, Presence::Both),
    ]];
    let mut categories: Vec<_> = m
        .by_category
        .iter()
        .filter(|c| c.base_bytes > 0 || c.cand_bytes > 0)
        .collect();
    categories.sort_by(|a, b| {
        b.delta_bytes
            .unsigned_abs()
            .cmp(&a.delta_bytes.unsigned_abs())
            .then(a.category.cmp(b.category))
    });
    for c in categories {
        rows.push([
            c.category.to_string(),
            format_bytes(c.base_bytes),
            format_bytes(c.cand_bytes),
            signed(c.delta_bytes, format_bytes),
            pct(
                candle_trace_schema::analysis::compare::percent(c.base_bytes, c.cand_bytes),
                Presence::Both,
            ),
        ]);
    }
    rows
}

fn gradient_state(s: Option<candle_trace_schema::format::events::GradientState>) -> &'static str {
    s.map_or("(absent)", |s| s.as_str())
}

/// `compare --format markdown`.
fn markdown(
    (base_path, b): (&Path, &TraceDocument),
    (cand_path, c): (&Path, &TraceDocument),
    cmp: &TraceComparison,
    limit: usize,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let mut doc = Doc::new();
    doc.heading(
        3,
        &format!(
            "Compare {} → {}",
            md::code(&base_path.display().to_string()),
            md::code(&cand_path.display().to_string())
        ),
    );
    if let Some(m) = &b.meta {
        doc.para(&format!(
            "entrypoint {} · device {}",
            md::code(&m.entrypoint),
            md::text(&m.device)
        ));
    }
    let mut warnings = Vec::new();
    for m in &cmp.mismatches {
        warnings.push(format!(
            "**warning:** {} differs (baseline {}, candidate {}); compared because of `--force`",
            md::text(m.field),
            md::code(&m.base),
            md::code(&m.cand)
        ));
    }
    for (path, d) in [(base_path, b), (cand_path, c)] {
        let n = d.diagnostic_counts();
        if n.errors > 0 {
            warnings.push(format!(
                "**warning:** {} is untrusted ({} error(s)); see `candle-trace validate`",
                md::code(&path.display().to_string()),
                n.errors
            ));
        }
    }
    if !warnings.is_empty() {
        doc.list(&warnings, usize::MAX);
    }
    doc.heading(4, "summary");
    let mut t = md::Table::new(&SUMMARY_COLUMNS, usize::MAX);
    for row in summary_rows(cmp) {
        t.row(row);
    }
    doc.table(&t);
    doc.heading(4, "span paths — largest \\|delta\\| first");
    let mut t = md::Table::new(&PATH_COLUMNS, limit);
    for p in &cmp.paths {
        t.row(vec![
            md::code_cell(&p.path),
            p.base_count.to_string(),
            p.cand_count.to_string(),
            format_ns(p.base_ns),
            format_ns(p.cand_ns),
            signed(p.delta_ns, format_ns),
            pct(p.percent, p.presence),
        ]);
    }
    doc.table(&t);
    if !cmp.modules.is_empty() {
        doc.heading(4, "modules — largest \\|delta\\| first");
        let mut t = md::Table::new(
            &[
                ("module", Align::Left),
                ("calls base", Align::Right),
                ("calls cand", Align::Right),
                ("baseline", Align::Right),
                ("candidate", Align::Right),
                ("delta", Align::Right),
                ("%", Align::Right),
            ],
            limit,
        );
        for p in &cmp.modules {
            t.row(vec![
                md::code_cell(&p.path),
                p.base_count.to_string(),
                p.cand_count.to_string(),
                format_ns(p.base_ns),
                format_ns(p.cand_ns),
                signed(p.delta_ns, format_ns),
                pct(p.percent, p.presence),
            ]);
        }
        doc.table(&t);
    }
    if !cmp.ops.is_empty() {
        doc.heading(4, "ops by (name, shape, dtype) — largest \\|delta\\| first");
        let mut t = md::Table::new(&OP_COLUMNS, limit);
        for o in &cmp.ops {
            let shape: Vec<String> = o.shape.iter().map(u64::to_string).collect();
            t.row(vec![
                md::code_cell(&o.op_name),
                format!("\\[{}\\]", shape.join(", ")),
                md::code_cell(&o.dtype),
                o.base_count.to_string(),
                o.cand_count.to_string(),
                format_ns(o.base_ns),
                format_ns(o.cand_ns),
                signed(o.delta_ns, format_ns),
                pct(o.percent, o.presence),
            ]);
        }
        doc.table(&t);
    }
    doc.heading(4, "memory at the peak");
    let mut t = md::Table::new(
        &[
            ("", Align::Left),
            ("baseline", Align::Right),
            ("candidate", Align::Right),
            ("delta", Align::Right),
            ("%", Align::Right),
        ],
        limit,
    );
    for (i, row) in memory_rows(cmp).into_iter().enumerate() {
        let [name, base, cand, delta, p] = row;
        // The categories under the peak, as the text output indents them.
        let name = if i == 0 {
            name
        } else {
            format!("↳ {}", md::code_cell(&name))
        };
        t.row(vec![name, base, cand, delta, p]);
    }
    doc.table(&t);
    doc.heading(4, "gradient state changes");
    if cmp.gradients.is_empty() {
        doc.para("none");
    } else {
        let mut t = md::Table::new(
            &[
                ("parameter", Align::Left),
                ("baseline", Align::Left),
                ("candidate", Align::Left),
            ],
            limit,
        );
        for g in &cmp.gradients {
            t.row(vec![
                md::code_cell(&format!("{}.{}", g.root, g.key)),
                gradient_state(g.base).to_string(),
                gradient_state(g.cand).to_string(),
            ]);
        }
        doc.table(&t);
    }
    write_markdown(out, doc)
}

/// The refusal in Markdown, on standard output, so that a job summary says why nothing was
/// compared.
pub(crate) fn refuse_markdown(
    out: &mut dyn Write,
    base: &Path,
    cand: &Path,
    mismatches: &[MetaMismatch],
) -> anyhow::Result<()> {
    let mut doc = Doc::new();
    doc.heading(
        3,
        &format!(
            "Not compared: {} and {}",
            md::code(&base.display().to_string()),
            md::code(&cand.display().to_string())
        ),
    );
    let why: Vec<String> = mismatches
        .iter()
        .map(|m| {
            format!(
                "{} differs: baseline {}, candidate {}",
                md::text(m.field),
                md::code(&m.base),
                md::code(&m.cand)
            )
        })
        .collect();
    doc.list(&why, usize::MAX);
    doc.para("Pass `--force` to compare anyway.");
    write_markdown(out, doc)
}

/// The one-line refusal of two runs whose meta differ (plain `compare` and the gate).
pub(crate) fn refuse(
    err: &mut dyn Write,
    base: &Path,
    cand: &Path,
    mismatches: &[MetaMismatch],
) -> std::io::Result<()> {
    let why: Vec<String> = mismatches.iter().map(ToString::to_string).collect();
    writeln!(
        err,
        "candle-trace: refusing to compare {} with {}: {}; pass --force to compare anyway",
        base.display(),
        cand.display(),
        why.join("; ")
    )
}
