//! `candle-trace query`.

use candle_trace_schema::analysis::spans::{slowest_spans, spans_by_self_time};
use std::io::Write;
use std::path::Path;

use anyhow::bail;
use candle_trace_schema::analysis::modules::ModuleGrouping;
use candle_trace_schema::format::detect::AnyDocument;
use serde_json::Value;

use super::table::Table;
use super::{write_json, OpsBy, QueryKind, EXIT_OK};

mod memory;
mod modules;
mod ops;
mod profile;
mod spans;

use memory::{gradients, memory, reconciliation};
use modules::{module_tree, modules, profile_module_tree, profile_modules};
use ops::{flops, heaviest, ops, ops_by_path};
use profile::{iterations, latency, requests, resources};
use spans::{edges, phases, spans};

/// Parsed `query` options.
pub(super) struct Options {
    pub kind: QueryKind,
    pub limit: usize,
    /// `--by` as given (each kind has its own default).
    pub by: Option<OpsBy>,
    pub json: bool,
}

pub(super) fn run(
    path: &Path,
    doc: &AnyDocument,
    opts: Options,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    let module_grouping = match (opts.kind, opts.by) {
        (QueryKind::Modules, None | Some(OpsBy::Path)) => ModuleGrouping::Path,
        (QueryKind::Modules, Some(OpsBy::Name)) => ModuleGrouping::Name,
        (QueryKind::Modules, Some(OpsBy::Shape)) => {
            bail!("`--kind modules` groups `--by path` or `--by name`, not `--by shape`")
        }
        _ => ModuleGrouping::Path,
    };
    if opts.kind != QueryKind::Ops && opts.kind != QueryKind::Modules && opts.by.is_some() {
        bail!(
            "`--by` applies to `--kind ops` and `--kind modules`, not `--kind {}`",
            kind_name(opts.kind)
        );
    }
    match (doc, opts.kind) {
        (AnyDocument::Profile(p), QueryKind::Requests) => requests(p, &opts, out)?,
        (AnyDocument::Profile(p), QueryKind::Iterations) => iterations(p, &opts, out)?,
        (AnyDocument::Profile(p), QueryKind::Resources) => resources(p, &opts, out)?,
        (AnyDocument::Profile(p), QueryKind::Latency) => latency(p, &opts, out)?,
        (AnyDocument::Profile(p), QueryKind::Modules) => match module_grouping {
            ModuleGrouping::Path => profile_module_tree(p, &opts, out)?,
            ModuleGrouping::Name => profile_modules(p, &opts, module_grouping, out)?,
        },
        (AnyDocument::Profile(_), kind) => bail!(
            "{}: `--kind {}` needs a trace/6 file; this is an inference profile (try `--kind requests`, `--kind latency`, `--kind modules`, `--kind iterations` or `--kind resources`)",
            path.display(),
            kind_name(kind)
        ),
        (
            AnyDocument::Trace(_),
            kind @ (QueryKind::Requests
            | QueryKind::Latency
            | QueryKind::Iterations
            | QueryKind::Resources),
        ) => bail!(
            "{}: `--kind {}` needs an inference profile; this is a trace/6 file",
            path.display(),
            kind_name(kind)
        ),
        (AnyDocument::Trace(t), kind) => {
            let (value, table, preamble) = match kind {
                QueryKind::Slowest => spans(t, &slowest_spans(t, opts.limit)),
                QueryKind::SelfTime => spans(t, &spans_by_self_time(t, opts.limit)),
                QueryKind::Heaviest => heaviest(t, opts.limit),
                QueryKind::Memory => memory(t, opts.limit),
                QueryKind::Gradients => gradients(t, opts.limit),
                QueryKind::Ops => match opts.by {
                    Some(OpsBy::Path) => ops_by_path(t, opts.limit),
                    by => ops(t, opts.limit, by.unwrap_or(OpsBy::Name)),
                },
                QueryKind::Modules => match module_grouping {
                    ModuleGrouping::Path => module_tree(t, opts.limit),
                    ModuleGrouping::Name => modules(t, opts.limit, module_grouping),
                },
                QueryKind::Edges => edges(t, opts.limit),
                QueryKind::Phases => phases(t, opts.limit),
                QueryKind::Flops => flops(t, opts.limit),
                QueryKind::Reconcile => reconciliation(t, opts.limit),
                QueryKind::Requests
                | QueryKind::Latency
                | QueryKind::Iterations
                | QueryKind::Resources => unreachable_requests()?,
            };
            if opts.json {
                write_json(out, &value)?;
            } else {
                if !preamble.is_empty() {
                    writeln!(out, "{preamble}")?;
                }
                if table.is_empty() {
                    writeln!(out, "(nothing to list)")?;
                } else {
                    write!(out, "{}", table.render())?;
                }
            }
        }
        (AnyDocument::Unsupported { .. }, _) => super::summary::unreachable_unsupported()?,
    }
    Ok(EXIT_OK)
}

/// The `(Trace, Requests | Latency | Iterations | Resources)` pairs are answered above.
fn unreachable_requests() -> anyhow::Result<(Value, Table, String)> {
    bail!("`--kind requests`, `latency`, `iterations` and `resources` need an inference profile")
}

fn kind_name(kind: QueryKind) -> &'static str {
    match kind {
        QueryKind::Slowest => "slowest",
        QueryKind::SelfTime => "self",
        QueryKind::Heaviest => "heaviest",
        QueryKind::Memory => "memory",
        QueryKind::Gradients => "gradients",
        QueryKind::Ops => "ops",
        QueryKind::Edges => "edges",
        QueryKind::Requests => "requests",
        QueryKind::Phases => "phases",
        QueryKind::Flops => "flops",
        QueryKind::Reconcile => "reconcile",
        QueryKind::Latency => "latency",
        QueryKind::Modules => "modules",
        QueryKind::Iterations => "iterations",
        QueryKind::Resources => "resources",
    }
}
