//! `candle-trace steps FILES…`: the tables of `candle_trace_schema::analysis::steps` over several step
//! files of one run.

use std::io::Write;
use std::path::PathBuf;

use candle_trace_schema::analysis::steps::{Spread, SpreadRow, StepSet, OUTLIER_MADS};
use candle_trace_schema::analysis::units::format_ns;
use candle_trace_schema::format::detect::AnyDocument;
use candle_trace_schema::format::document::TraceDocument;
use serde::Serialize;

use super::gate::read_side;
use super::table::{Align, Table};
use super::{write_json, EXIT_OK};

#[derive(Serialize)]
struct StepsJson<'a> {
    files: Vec<String>,
    #[serde(flatten)]
    set: &'a StepSet,
}

fn spread_cells(s: &Spread) -> [String; 3] {
    [format_ns(s.median), format_ns(s.p90), format_ns(s.mad)]
}

fn spread_table(first: &str, rows: &[SpreadRow], limit: usize) -> Table {
    let mut t = Table::new(&[
        (first, Align::Left),
        ("steps", Align::Right),
        ("median", Align::Right),
        ("p90", Align::Right),
        ("MAD", Align::Right),
        ("min", Align::Right),
        ("max", Align::Right),
    ]);
    for r in rows.iter().take(limit) {
        let [median, p90, mad] = spread_cells(&r.spread);
        t.row(vec![
            r.key.clone(),
            r.spread.count.to_string(),
            median,
            p90,
            mad,
            format_ns(r.spread.min),
            format_ns(r.spread.max),
        ]);
    }
    t
}

fn step_name(capture_step: Option<u64>) -> String {
    capture_step.map_or_else(|| String::from("(no meta)"), |s| s.to_string())
}

pub(super) fn run(
    inputs: &[PathBuf],
    json: bool,
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
    if json {
        write_json(
            out,
            &StepsJson {
                files: files.iter().map(|(p, _)| p.display().to_string()).collect(),
                set: &set,
            },
        )?;
        return Ok(EXIT_OK);
    }

    if set.run_ids.len() > 1 {
        writeln!(
            out,
            "warning: the steps come from {} runs ({})",
            set.run_ids.len(),
            set.run_ids.join(", ")
        )?;
    }
    writeln!(out, "steps")?;
    let mut t = Table::new(&[
        ("step", Align::Right),
        ("file", Align::Left),
        ("total", Align::Right),
        ("forward", Align::Right),
        ("backward", Align::Right),
        ("optimizer", Align::Right),
        ("other", Align::Right),
    ]);
    for s in &set.steps {
        let phase = |k: usize| {
            s.phases_ns
                .map_or_else(|| String::from("–"), |p| format_ns(p[k]))
        };
        t.row(vec![
            step_name(s.capture_step),
            files[s.input].0.display().to_string(),
            s.total_ns.map_or_else(|| String::from("–"), format_ns),
            phase(0),
            phase(1),
            phase(2),
            phase(3),
        ]);
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

    writeln!(
        out,
        "\noutlier steps (total more than {OUTLIER_MADS} × MAD from the median)"
    )?;
    if let Some(why) = &set.outliers_reason {
        writeln!(out, "not computed: {why}")?;
    } else if set.outliers.is_empty() {
        writeln!(out, "none")?;
    }
    for o in &set.outliers {
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
        writeln!(out, "{line}")?;
    }

    writeln!(
        out,
        "\nshape churn (module paths whose shapes change between steps)"
    )?;
    if set.shape_churn.is_empty() {
        writeln!(out, "none")?;
    }
    for c in &set.shape_churn {
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
        writeln!(out, "{}: {}", c.path, variants.join(" | "))?;
    }
    Ok(EXIT_OK)
}
