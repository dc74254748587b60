//! `candle-trace compare BASE CAND`: the tables of `candle_trace_schema::analysis::compare`.

use std::io::Write;
use std::path::Path;

use candle_trace_schema::analysis::compare::{compare, MetaMismatch, Presence, TraceComparison};
use candle_trace_schema::analysis::units::{format_bytes, format_ns};
use candle_trace_schema::format::detect::AnyDocument;
use candle_trace_schema::format::document::TraceDocument;
use serde::Serialize;

use super::table::{Align, Table};
use super::{write_json, EXIT_INVALID, EXIT_OK};

pub(super) struct Options {
    pub json: bool,
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
        return Ok(EXIT_INVALID);
    }
    if opts.json {
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
    let mut t = Table::new(&[
        ("metric", Align::Left),
        ("baseline", Align::Right),
        ("candidate", Align::Right),
        ("delta", Align::Right),
        ("%", Align::Right),
    ]);
    for s in &cmp.summary {
        let unit: fn(u64) -> String = match s.field {
            "total_ns" => format_ns,
            "peak_bytes" => format_bytes,
            _ => count,
        };
        t.row(vec![
            s.field.to_string(),
            unit(s.base),
            unit(s.cand),
            signed(s.delta, unit),
            pct(s.percent, Presence::Both),
        ]);
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
    let mut t = Table::new(&[
        ("path", Align::Left),
        ("n base", Align::Right),
        ("n cand", Align::Right),
        ("baseline", Align::Right),
        ("candidate", Align::Right),
        ("delta", Align::Right),
        ("%", Align::Right),
    ]);
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
        let mut t = Table::new(&[
            ("op", Align::Left),
            ("shape", Align::Left),
            ("dtype", Align::Left),
            ("n base", Align::Right),
            ("n cand", Align::Right),
            ("baseline", Align::Right),
            ("candidate", Align::Right),
            ("delta", Align::Right),
            ("%", Align::Right),
        ]);
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

    let m = &cmp.memory;
    writeln!(out, "\nmemory at the peak")?;
    let mut t = Table::new(&[
        ("", Align::Left),
        ("baseline", Align::Right),
        ("candidate", Align::Right),
        ("delta", Align::Right),
        ("%", Align::Right),
    ]);
    t.row(vec![
        "peak".into(),
        format_bytes(m.base_peak_bytes),
        format_bytes(m.cand_peak_bytes),
        signed(m.delta_bytes, format_bytes),
        pct(m.percent, Presence::Both),
    ]);
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
        t.row(vec![
            format!("  {}", c.category),
            format_bytes(c.base_bytes),
            format_bytes(c.cand_bytes),
            signed(c.delta_bytes, format_bytes),
            pct(
                candle_trace_schema::analysis::compare::percent(c.base_bytes, c.cand_bytes),
                Presence::Both,
            ),
        ]);
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
        let state = |s: Option<candle_trace_schema::format::events::GradientState>| {
            s.map_or("(absent)", |s| s.as_str()).to_string()
        };
        for g in &cmp.gradients {
            t.row(vec![
                format!("{}.{}", g.root, g.key),
                state(g.base),
                state(g.cand),
            ]);
        }
        write!(out, "{}", t.render())?;
    }
    Ok(EXIT_OK)
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
