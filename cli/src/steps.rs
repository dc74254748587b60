//! `candle-trace steps FILES…`: the tables of `candle_trace_schema::analysis::steps` over several step
//! files of one run.

use std::io::Write;
use std::path::PathBuf;

use candle_trace_schema::analysis::steps::{
    Outlier, ShapeChurn, Spread, SpreadRow, StepRow, StepSet, OUTLIER_MADS,
};
use candle_trace_schema::analysis::units::format_ns;
use candle_trace_schema::format::detect::AnyDocument;
use candle_trace_schema::format::document::TraceDocument;
use serde::Serialize;

use super::gate::read_side;
use super::markdown::{self as md, Doc};
use super::table::{Align, Table};
use super::{write_json, write_markdown, OutputFormat, EXIT_OK};

#[derive(Serialize)]
struct StepsJson<'a> {
    files: Vec<String>,
    #[serde(flatten)]
    set: &'a StepSet,
}

fn spread_cells(s: &Spread) -> [String; 3] {
    [format_ns(s.median), format_ns(s.p90), format_ns(s.mad)]
}

fn spread_columns(first: &str) -> [(&str, Align); 7] {
    [
        (first, Align::Left),
        ("steps", Align::Right),
        ("median", Align::Right),
        ("p90", Align::Right),
        ("MAD", Align::Right),
        ("min", Align::Right),
        ("max", Align::Right),
    ]
}

/// A spread row's cells after its key: steps, median, p90, MAD, min, max.
fn spread_row(r: &SpreadRow) -> Vec<String> {
    let [median, p90, mad] = spread_cells(&r.spread);
    vec![
        r.spread.count.to_string(),
        median,
        p90,
        mad,
        format_ns(r.spread.min),
        format_ns(r.spread.max),
    ]
}

fn spread_table(first: &str, rows: &[SpreadRow], limit: usize) -> Table {
    let mut t = Table::new(&spread_columns(first));
    for r in rows.iter().take(limit) {
        let mut cells = vec![r.key.clone()];
        cells.extend(spread_row(r));
        t.row(cells);
    }
    t
}

fn spread_markdown(first: &str, rows: &[SpreadRow], limit: usize) -> md::Table {
    let mut t = md::Table::new(&spread_columns(first), limit);
    for r in rows {
        let mut cells = vec![md::code_cell(&r.key)];
        cells.extend(spread_row(r));
        t.row(cells);
    }
    t
}

fn step_name(capture_step: Option<u64>) -> String {
    capture_step.map_or_else(|| String::from("(no meta)"), |s| s.to_string())
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
    let mut docs: Vec<&TraceDocument> = Vec::with_capacity(files.len());
    for (path, doc) in &files {
        match doc {
            AnyDocument::Trace(t) => docs.push(t),
            _ => anyhow::bail!(
                "{}: steps reads execution traces (trace/6 or Chrome JSON), one per step",
                path.display()
            ),
        }
    }
    let set = StepSet::of(&docs);
    match format {
        OutputFormat::Json => write_json(
            out,
            &StepsJson {
                files: files.iter().map(|(p, _)| p.display().to_string()).collect(),
                set: &set,
            },
        )?,
        OutputFormat::Markdown => markdown(inputs, &files, &set, limit, out)?,
        OutputFormat::Text => text(&files, &set, limit, out)?,
    }
    Ok(EXIT_OK)
}

const STEP_COLUMNS: [(&str, Align); 7] = [
    ("step", Align::Right),
    ("file", Align::Left),
    ("total", Align::Right),
    ("forward", Align::Right),
    ("backward", Align::Right),
    ("optimizer", Align::Right),
    ("other", Align::Right),
];

/// A step's cells after its number and file: total, forward, backward, optimizer, other.
fn step_cells(s: &StepRow) -> Vec<String> {
    let phase = |k: usize| {
        s.phases_ns
            .map_or_else(|| String::from("–"), |p| format_ns(p[k]))
    };
    vec![
        s.total_ns.map_or_else(|| String::from("–"), format_ns),
        phase(0),
        phase(1),
        phase(2),
        phase(3),
    ]
}

fn outlier_title() -> String {
    format!("outlier steps (total more than {OUTLIER_MADS} × MAD from the median)")
}

const CHURN_TITLE: &str = "shape churn (module paths whose shapes change between steps)";

/// An outlier step, one line.
fn outlier_words(o: &Outlier) -> String {
    let sign = if o.excess_ns >= 0 { "+" } else { "-" };
    let mut line = format!(
        "step {}: {} ({sign}{} from the median)",
        step_name(o.capture_step),
        format_ns(o.total_ns),
        format_ns(o.excess_ns.unsigned_abs())
    );
    if let Some((phase, ns)) = &o.phase {
        line.push_str(&format!("; {phase} +{}", format_ns(*ns)));
    }
    for (path, ns) in &o.module_paths {
        line.push_str(&format!("; {path} +{}", format_ns(*ns)));
    }
    line
}

/// A module path's shape variants and the steps of each, one line.
fn churn_words(set: &StepSet, c: &ShapeChurn) -> String {
    let variants: Vec<String> = c
        .variants
        .iter()
        .map(|(shapes, at)| {
            let shapes: Vec<String> = shapes.iter().map(|s| format!("{s:?}")).collect();
            let steps: Vec<String> = at
                .iter()
                .map(|&pos| step_name(set.steps.get(pos).and_then(|s| s.capture_step)))
                .collect();
            format!("{} in step(s) {}", shapes.join(" "), steps.join(","))
        })
        .collect();
    format!("{}: {}", c.path, variants.join(" | "))
}

/// `steps --format markdown`.
fn markdown(
    inputs: &[PathBuf],
    files: &[(PathBuf, AnyDocument)],
    set: &StepSet,
    limit: usize,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let mut doc = Doc::new();
    doc.heading(3, &md::files_heading("Steps", inputs, limit));
    if set.run_ids.len() > 1 {
        let ids: Vec<String> = set
            .run_ids
            .iter()
            .take(limit)
            .map(|r| md::code(r))
            .collect();
        doc.para(&format!(
            "**warning:** the steps come from {} runs ({})",
            set.run_ids.len(),
            ids.join(", ")
        ));
    }
    let mut t = md::Table::new(&STEP_COLUMNS, limit);
    for s in &set.steps {
        let mut cells = vec![
            step_name(s.capture_step),
            md::code_cell(&files[s.input].0.display().to_string()),
        ];
        cells.extend(step_cells(s));
        t.row(cells);
    }
    doc.table(&t);
    if let Some(total) = &set.total {
        let [median, p90, mad] = spread_cells(total);
        doc.para(&format!("total: median {median} · p90 {p90} · MAD {mad}"));
    }
    doc.heading(4, "phases over the steps");
    doc.table(&spread_markdown("phase", &set.phases, limit));
    if !set.modules.is_empty() {
        doc.heading(4, "module paths over the steps — largest median first");
        doc.table(&spread_markdown("module path", &set.modules, limit));
    }
    doc.heading(4, &md::prose(&outlier_title()));
    if let Some(why) = &set.outliers_reason {
        doc.para(&format!("not computed: {}", md::text(why)));
    } else if set.outliers.is_empty() {
        doc.para("none");
    } else {
        let items: Vec<String> = set
            .outliers
            .iter()
            .map(|o| md::text(&outlier_words(o)))
            .collect();
        doc.list(&items, limit);
    }
    doc.heading(4, &md::prose(CHURN_TITLE));
    if set.shape_churn.is_empty() {
        doc.para("none");
    } else {
        let items: Vec<String> = set
            .shape_churn
            .iter()
            .map(|c| md::text(&churn_words(set, c)))
            .collect();
        doc.list(&items, limit);
    }
    write_markdown(out, doc)
}

fn text(
    files: &[(PathBuf, AnyDocument)],
    set: &StepSet,
    limit: usize,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    if set.run_ids.len() > 1 {
        writeln!(
            out,
            "warning: the steps come from {} runs ({})",
            set.run_ids.len(),
            set.run_ids.join(", ")
        )?;
    }
    writeln!(out, "steps")?;
    let mut t = Table::new(&STEP_COLUMNS);
    for s in &set.steps {
        let mut cells = vec![
            step_name(s.capture_step),
            files[s.input].0.display().to_string(),
        ];
        cells.extend(step_cells(s));
        t.row(cells);
    }
    write!(out, "{}", t.render())?;
    if let Some(total) = &set.total {
        let [median, p90, mad] = spread_cells(total);
        writeln!(out, "total: median {median} · p90 {p90} · MAD {mad}")?;
    }

    writeln!(out, "\nphases over the steps")?;
    write!(
        out,
        "{}",
        spread_table("phase", &set.phases, usize::MAX).render()
    )?;

    if !set.modules.is_empty() {
        let shown = if set.modules.len() > limit {
            format!(
                " — {} of {}, largest median first",
                limit,
                set.modules.len()
            )
        } else {
            String::from(" — largest median first")
        };
        writeln!(out, "\nmodule paths over the steps{shown}")?;
        write!(
            out,
            "{}",
            spread_table("module path", &set.modules, limit).render()
        )?;
    }

    writeln!(out, "\n{}", outlier_title())?;
    if let Some(why) = &set.outliers_reason {
        writeln!(out, "not computed: {why}")?;
    } else if set.outliers.is_empty() {
        writeln!(out, "none")?;
    }
    for o in &set.outliers {
        writeln!(out, "{}", outlier_words(o))?;
    }

    writeln!(out, "\n{CHURN_TITLE}")?;
    if set.shape_churn.is_empty() {
        writeln!(out, "none")?;
    }
    for c in &set.shape_churn {
        writeln!(out, "{}", churn_words(set, c))?;
    }
    Ok(())
}
