//! The `candle-trace` command-line tool: read, validate, summarise, query, export and compare
//! candle-trace files, and open them in the viewer it carries (`view`, `report`).
//!
//! [`run`] is the whole tool behind a testable signature (arguments in, text out, exit code
//! back); `src/main.rs` only wires it to the process. Exit codes:
//! 0 success; 1 `validate` found at least one error-severity diagnostic, `compare` refused two
//! runs whose meta differ, or a `compare --fail-if` rule was breached; 2 the file could not
//! be read at all (missing, unreadable, a format candle-trace cannot read), the command line
//! was wrong (a malformed `--fail-if` rule included), a rule's metric is not in a file, or
//! `view` could not listen on its port.

mod compare;
mod export;
mod findings;
mod gate;
pub mod markdown;
pub mod page;
mod query;
pub mod report;
pub mod serve;
mod steps;
mod summary;
pub mod table;
mod validate;
pub mod view;

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use candle_trace_schema::format::detect::{AnyDocument, AnyReader, AnySummary, AnySummaryReader};
use clap::{Parser, Subcommand, ValueEnum};

/// Read, validate, summarise, query, export and compare candle-trace files (trace/6, inference
/// profiles, and Chrome Trace Event JSON imported as traces).
#[derive(Debug, Parser)]
#[command(name = "candle-trace", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the headline numbers of a trace (the eight TraceSummary fields) or of an
    /// inference profile (requests, event counts, TTFT and ITL percentiles).
    Summary {
        /// The file to read.
        file: PathBuf,
        #[command(flatten)]
        output: OutputArgs,
        /// How many rows per table at most (text and Markdown; the JSON output lists every
        /// row).
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// List every problem in a file with its line number. Exit 0 when there is no error
    /// (warnings allowed), 1 when there is at least one, 2 when the file cannot be read.
    Validate {
        /// The file to read.
        file: PathBuf,
        /// Print `{"diagnostics":[{"line","severity","category","message"}...]}`.
        #[arg(long)]
        json: bool,
    },
    /// Write a trace/6 file or an inference profile in another format (Chrome Trace Event JSON,
    /// which Perfetto and chrome://tracing open; OTLP/JSON traces for an OpenTelemetry
    /// collector, inference profiles only).
    Export {
        /// The file to read.
        file: PathBuf,
        /// The format to write.
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// Where to write (default: standard output).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// `--format otlp`: the resource's `service.name`.
        #[arg(long, default_value = "candle-trace")]
        service_name: String,
    },
    /// Compare a candidate trace with a baseline: per span path, per module and per op time
    /// deltas, new and vanished paths, memory peaks, gradient state changes and the eight
    /// summary numbers.
    /// Exit 1 (and nothing compared) when entrypoint, phase, device or timing mode differ,
    /// unless `--force`.
    Compare {
        /// The baseline trace.
        base: PathBuf,
        /// The candidate trace.
        cand: PathBuf,
        #[command(flatten)]
        output: OutputArgs,
        /// Compare even when the two runs' meta differ.
        #[arg(long)]
        force: bool,
        /// How many rows per table at most (text and Markdown; the JSON output lists every
        /// row).
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// A regression rule, repeatable: `total>+5%`, `peak_bytes>+10%`, `ttft_p90>+10%`,
        /// `op_count>1000` … With rules, BASE and CAND may each be a directory of step files;
        /// prints one line per rule and exits 1 when any is breached (beyond the steps' noise,
        /// 3 × MAD), 2 when a rule is malformed.
        #[arg(long = "fail-if", value_name = "RULE")]
        fail_if: Vec<String>,
    },
    /// Several steps of one run (files, or directories of step files): per-step totals, median,
    /// p90 and MAD of every phase and module, outlier steps and what made them slow, and
    /// modules whose shapes change between steps.
    Steps {
        /// The step files (or directories of them).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        output: OutputArgs,
        /// How many module paths at most, and in Markdown how many rows of any table (the
        /// JSON output lists every one).
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// A handful of findings that explain a run, ranked by the time or bytes at stake, each
    /// with its evidence and where it shows: one trace, the step files of one run (or their
    /// directory), or one inference profile.
    Findings {
        /// The files (or directories of step files).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        output: OutputArgs,
        /// How many evidence lines and notes at most (text and Markdown; the JSON output lists
        /// every one).
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Open files in the viewer: serves the page (carried inside this binary) and the files on
    /// 127.0.0.1 only, prints the address, opens the default browser, and runs until Ctrl-C.
    /// Several files (or a directory's `.jsonl` step files) open together, as when picked
    /// together in the page.
    View {
        /// The files (or directories of step files).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// The port on 127.0.0.1 (default: a free one).
        #[arg(long)]
        port: Option<u16>,
        /// Print the address without opening a browser.
        #[arg(long)]
        no_open: bool,
        /// Serve this built page folder (`web/dist`) instead of the page inside the binary
        /// (`cargo xtask demo` shows the viewer it just built this way).
        #[arg(long, value_name = "DIR")]
        page: Option<PathBuf>,
    },
    /// Write the viewer and the file(s) as one self-contained HTML file (compressed) that
    /// opens from file:// with no server and no network, and shows what `view` shows.
    Report {
        /// The files (or directories of step files).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// The HTML file to write (replaced whole once it is written).
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
    },
    /// Answer one question about a file.
    Query {
        /// The file to read.
        file: PathBuf,
        /// What to list.
        #[arg(long, value_enum)]
        kind: QueryKind,
        /// How many rows at most.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// How to group: for `--kind ops` by op name (default), by (op name, shape, dtype) or by
        /// the module key of the op's span (`path`); for `--kind modules` the module tree
        /// (`path`, the default) or rows by span name (`name`).
        #[arg(long, value_enum)]
        by: Option<OpsBy>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// What `query` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum QueryKind {
    /// Spans by wall duration, longest first.
    Slowest,
    /// Spans by self time (duration minus direct children), largest first.
    #[value(name = "self")]
    SelfTime,
    /// Ops with the largest outputs (bytes), largest first.
    Heaviest,
    /// The memory profile: peak, per-device peaks and capacity, live allocations at the peak.
    Memory,
    /// Gradient health: counts per state, per-module groups and a one-line finding, then the
    /// parameters, problems first.
    Gradients,
    /// Op aggregates: count, total, mean, max duration and bytes per group.
    Ops,
    /// Edges (timing between two spans), longest first.
    Edges,
    /// Inference profiles: one row per request (status, duration, TTFT, tokens, mean ITL).
    Requests,
    /// Training-phase breakdown of the measured region and module forward/backward pairs.
    Phases,
    /// Op efficiency: estimated FLOPs, FLOP/s, bytes moved per ns and dtype mix per op name.
    Flops,
    /// Device checkpoints against the allocator's live bytes (unexplained memory).
    Reconcile,
    /// Inference profiles: TTFT/ITL percentiles and histograms, detail level and sample rate.
    Latency,
    /// The module tree: every module by its key (its weights' name,
    /// `model.layers.1.self_attn.q_proj`, or without names its nesting path
    /// `block[1]/attn/linear[3]`), groups adding up their children, with calls, total and self
    /// time, memory, parameter bytes and gradients, and how much of the forward the modules
    /// cover; `--by name` lists module spans by span name instead. For an inference profile,
    /// the tree of every request's forward calls and of each request, with each call's
    /// coverage.
    Modules,
    /// Inference profiles: batched forwards in time order (engine, iteration, start, duration,
    /// `batch_size`, prefill / decode / committed tokens, tokens/s), and p50/p90 of batch size
    /// and forward time.
    Iterations,
    /// Inference profiles: per resource kind (KV-cache blocks …), occupancy over time against
    /// capacity, reserve / commit / release per request, deferrals and rejections with their
    /// reasons, underflows and reservations never released.
    Resources,
}

/// How `summary`, `findings`, `steps` and `compare` print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Aligned plain-text tables.
    Text,
    /// One JSON object.
    Json,
    /// GitHub Markdown (a pull-request comment, `$GITHUB_STEP_SUMMARY`): tables and lists of
    /// at most `--limit` rows, the whole at most 1 MiB.
    Markdown,
}

/// `--format` and its synonym `--json`.
#[derive(Debug, Clone, Copy, clap::Args)]
struct OutputArgs {
    /// How to print.
    #[arg(long, value_enum, value_name = "FORMAT")]
    format: Option<OutputFormat>,
    /// The same as `--format json`.
    #[arg(long, conflicts_with = "format")]
    json: bool,
}

impl OutputArgs {
    fn format(self) -> OutputFormat {
        match (self.json, self.format) {
            (true, _) => OutputFormat::Json,
            (false, format) => format.unwrap_or(OutputFormat::Text),
        }
    }
}

/// What `export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// Chrome Trace Event JSON (object form), for Perfetto and chrome://tracing.
    Chrome,
    /// OTLP/JSON `ExportTraceServiceRequest`: one trace per request, and one per batched
    /// forward, linked from the requests it served (inference profiles).
    Otlp,
}

/// How `query --kind ops` and `query --kind modules` group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OpsBy {
    /// One row per op name (ops) or module span name (modules: `linear`).
    Name,
    /// One row per (op name, shape, dtype); ops only.
    Shape,
    /// One row per module key (ops); the module tree (modules).
    Path,
}

/// Exit code: success.
pub const EXIT_OK: i32 = 0;
/// Exit code: the file has error-severity diagnostics (`validate`).
pub const EXIT_INVALID: i32 = 1;
/// Exit code: the file (or the command line) could not be used at all.
pub const EXIT_UNREADABLE: i32 = 2;

/// Size of the chunks a file is read in: the file is never held in memory as a whole.
const CHUNK_BYTES: usize = 1 << 20;

/// Run the tool with `args` (the first item is the program name); output goes to `out`,
/// messages to `err`. Returns the exit code.
pub fn run<I, T>(args: I, out: &mut dyn Write, err: &mut dyn Write) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                EXIT_UNREADABLE
            } else {
                EXIT_OK
            };
            let text = e.render().ansi().to_string();
            let _ = if e.use_stderr() {
                write!(err, "{text}")
            } else {
                write!(out, "{text}")
            };
            return code;
        }
    };
    let result = match &cli.command {
        Command::Summary {
            file,
            output,
            limit,
        } => read_for_summary(file)
            .and_then(|read| summary::run_read(file, &read, output.format(), *limit, out)),
        Command::Validate { file, json } => {
            read(file).and_then(|doc| validate::run(file, &doc, *json, out))
        }
        Command::Export {
            file,
            format,
            output,
            service_name,
        } => read(file).and_then(|doc| {
            let format = match format {
                ExportFormat::Chrome => export::Format::Chrome,
                ExportFormat::Otlp => export::Format::Otlp { service_name },
            };
            export::run(file, &doc, format, output.as_deref(), out, err)
        }),
        Command::Compare {
            base,
            cand,
            output,
            force,
            fail_if,
            limit,
        } if !fail_if.is_empty() => match gate::parse_rules(fail_if, err) {
            Ok(rules) => gate::run(
                base,
                cand,
                &rules,
                gate::Options {
                    format: output.format(),
                    force: *force,
                    limit: *limit,
                },
                out,
                err,
            ),
            Err(code) => return code,
        },
        Command::Compare {
            base,
            cand,
            output,
            force,
            limit,
            ..
        } => gate::no_directories(base, cand)
            .and_then(|()| read(base))
            .and_then(|b| {
                read(cand).and_then(|c| {
                    compare::run(
                        (base, &b),
                        (cand, &c),
                        compare::Options {
                            format: output.format(),
                            force: *force,
                            limit: *limit,
                        },
                        out,
                        err,
                    )
                })
            }),
        Command::Steps {
            files,
            output,
            limit,
        } => steps::run(files, output.format(), *limit, out),
        Command::Findings {
            files,
            output,
            limit,
        } => findings::run(files, output.format(), *limit, out),
        Command::View {
            files,
            port,
            no_open,
            page,
        } => view::run(
            view::Options {
                inputs: files,
                port: port.unwrap_or(0),
                no_open: *no_open,
                page_dir: page.as_deref(),
            },
            out,
            err,
        ),
        Command::Report { files, output } => report::run(files, output, err),
        Command::Query {
            file,
            kind,
            limit,
            by,
            json,
        } => read(file).and_then(|doc| {
            query::run(
                file,
                &doc,
                query::Options {
                    kind: *kind,
                    limit: *limit,
                    by: *by,
                    json: *json,
                },
                out,
            )
        }),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(err, "candle-trace: {e:#}");
            EXIT_UNREADABLE
        }
    }
}

/// Read `path` in chunks into whatever format it holds. An unsupported format is an error
/// (exit 2) naming the file.
fn read(path: &Path) -> anyhow::Result<AnyDocument> {
    let (file, size) = open_sized(path)?;
    let mut reader = AnyReader::with_size_hint(size);
    feed(path, file, |chunk| {
        reader.push(chunk);
        reader.is_rejected()
    })?;
    supported(path, reader.finish())
}

/// [`read`] for `summary`: a trace/6 file is read keeping only what its summary needs
/// ([`AnySummaryReader`]), so that the memory it takes stays well below the file's size.
fn read_for_summary(path: &Path) -> anyhow::Result<AnySummary> {
    let (file, size) = open_sized(path)?;
    let mut reader = AnySummaryReader::with_size_hint(size);
    feed(path, file, |chunk| {
        reader.push(chunk);
        reader.is_rejected()
    })?;
    Ok(match reader.finish() {
        AnySummary::Document(doc) => AnySummary::Document(supported(path, doc)?),
        trace => trace,
    })
}

/// The file at `path` and its size (0 when unknown).
fn open_sized(path: &Path) -> anyhow::Result<(File, u64)> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let size = file.metadata().map_or(0, |m| m.len());
    Ok((file, size))
}

/// Hand `file`'s bytes to `push` chunk by chunk until the end, or until `push` returns true
/// (the reader has rejected the file).
fn feed(path: &Path, mut file: File, mut push: impl FnMut(&[u8]) -> bool) -> anyhow::Result<()> {
    let mut buf = vec![0u8; CHUNK_BYTES];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        if push(&buf[..n]) {
            break;
        }
    }
    Ok(())
}

/// An unsupported format is an error naming the file.
fn supported(path: &Path, doc: AnyDocument) -> anyhow::Result<AnyDocument> {
    match doc {
        AnyDocument::Unsupported { diagnostics, .. } => {
            let why = diagnostics
                .first()
                .map(|d| d.message.as_str())
                .unwrap_or("unsupported format");
            anyhow::bail!("{}: {why}", path.display())
        }
        doc => Ok(doc),
    }
}

/// Write a finished Markdown document.
fn write_markdown(out: &mut dyn Write, doc: markdown::Doc) -> anyhow::Result<()> {
    out.write_all(doc.finish().as_bytes())?;
    Ok(())
}

/// Write a JSON value and a newline.
fn write_json(out: &mut dyn Write, value: &impl serde::Serialize) -> anyhow::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value).context("cannot write JSON")?;
    writeln!(out)?;
    Ok(())
}
